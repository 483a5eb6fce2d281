/*
 * What a client thread knows the device finished, per actor: the
 * stream-order checker's rule for host buffers (checker.h).
 *
 * A thread that waits on a future of a copy or a sync learns how far that
 * operation's stream got: the operation's number on its stream, in the
 * actor's context of the time.  The future carries (actor uid, context,
 * stream, number); the waiting thread raises its table for that actor.
 * Knowledge is per stream and not transitive, and it belongs to one
 * context: after a rebuild the checker treats a table of an older context
 * as empty, so knowledge from before a reset never covers work after it.
 *
 * Tables are per (thread, actor), keyed by the actor's 64-bit uid, in a
 * small per-thread list that drops the tables of actors gone from the
 * process when it grows.  A table stays readable after its thread exits
 * (tables are recycled, never freed), so the actor may read it for a
 * message the thread posted before exiting.
 */
#ifndef DV_ACTOR_KNOWN_H
#define DV_ACTOR_KNOWN_H

#include <stdatomic.h>
#include <stdint.h>

/* Streams a table covers: every stream an actor can have
 * (DV_MAX_STREAMS, checked where both are seen). */
#define DV_KNOWN_STREAMS 64u

typedef struct dv_known {
    uint64_t uid;             /* the actor's; written by the owning thread */
    _Atomic uint64_t context; /* the context generation of seq[] */
    _Atomic uint64_t seq[DV_KNOWN_STREAMS];
    struct dv_known *next_free; /* the recycling list */
} dv_known;

/* The calling thread's table for actor uid, made on first use; NULL when
 * out of memory. */
dv_known *dv__known_of(uint64_t uid);
/* The calling thread waited for op `seq` on `stream` of actor uid, in
 * context `context`. */
void dv__known_note(uint64_t uid, uint64_t context, uint32_t stream, uint64_t seq);
/* A future's knowledge, kept in its internal words (future.c). */
static inline void dv__known_pack(uint64_t internal[3], uint64_t uid, uint64_t context,
                                  uint32_t stream, uint64_t seq)
{
    internal[0] = uid;
    internal[1] = context;
    internal[2] = (uint64_t)stream << 48 | (seq & ((UINT64_C(1) << 48) - 1));
}

#endif /* DV_ACTOR_KNOWN_H */
