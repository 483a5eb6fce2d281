/*
 * What a client thread knows happened on an actor's streams: the
 * stream-order checker's clocks of threads (checker.h).
 *
 * Knowledge is a vector clock over the actor's streams, in one context of
 * the actor (a rebuild starts a new one; knowledge of an older context
 * counts for nothing).  A thread's clock grows only by the program's own
 * synchronisation:
 *
 *   - a wait on a future (of any thread's operation, a stream sync, an
 *     event sync, an event query that answered done): the waiter absorbs
 *     the clock the operation had on its stream, which is transitive: what
 *     that stream had waited for comes with it;
 *   - a hand-over (dv_order_export in one thread, dv_order_adopt in
 *     another, through the program's own mutex, queue or join).
 *
 * Two transports, neither of which the actor's view of completions feeds:
 *
 *   Points.  When the actor makes a future that a waiter may learn from,
 *   it publishes the operation's clock into a process-wide table keyed by
 *   (actor uid, context, stream, number), and packs the key into the
 *   future.  A waiter looks the key up (a seqlock read): it gets the whole
 *   clock, or, when later points took the slot (DV_KNOWN_POINTS of them
 *   hash there first), only the operation's own component.  The table is
 *   never freed, so a lookup after the actor is gone is safe.
 *
 *   Snapshots.  A thread whose clock changed sends a copy with its next
 *   post to the actor: a node on its client's snapshot list, tagged with
 *   that message's number.  The actor takes, for each message, the latest
 *   node tagged at or before it, so a message is checked with what its
 *   poster knew when it posted it, never with what it learned later.
 *
 * Tables are per (thread, actor), keyed by the actor's 64-bit uid, in a
 * small per-thread list that drops the tables of actors gone from the
 * process when it grows.  Only the owning thread touches its tables.
 */
#ifndef DV_ACTOR_KNOWN_H
#define DV_ACTOR_KNOWN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Streams a clock covers: every stream an actor can have
 * (DV_MAX_STREAMS, checked where both are seen). */
#define DV_KNOWN_STREAMS 64u
/* Slots of the table of published points. */
#define DV_KNOWN_POINTS 8192u

typedef struct dv_known {
    uint64_t uid;     /* the actor's */
    uint64_t context; /* the context generation vc is of (0: none yet) */
    uint64_t vc[DV_KNOWN_STREAMS];
    bool dirty;                 /* changed since its last snapshot went out */
    struct dv_known *next_free; /* the recycling list */
} dv_known;

/* A snapshot on its way to the actor (one client's list, oldest first). */
typedef struct dv_know_node {
    _Atomic(struct dv_know_node *) next;
    uint32_t for_seq; /* the first message it holds for */
    uint64_t context;
    uint64_t vc[DV_KNOWN_STREAMS];
} dv_know_node;

/* A client's list: the poster owns tail, the actor head (the node in
 * use; a zero clock before the first snapshot). */
typedef struct dv_know_list {
    dv_know_node *tail;
    dv_know_node *head;
} dv_know_list;

/* The calling thread's table for actor uid, made on first use; NULL when
 * out of memory. */
dv_known *dv__known_of(uint64_t uid);

/* The calling thread waited for the point (stream, seq) of actor uid in
 * context `context` (a future's packed key): it absorbs the point's clock. */
void dv__known_note(uint64_t uid, uint64_t context, uint32_t stream, uint64_t seq);
/* The calling thread absorbs a whole clock of n streams (a hand-over). */
void dv__known_absorb(uint64_t uid, uint64_t context, const uint64_t *vc, uint32_t n);

/* Actor side: publish the clock vc (n streams) of the point (stream,
 * seq) for waiters. */
void dv__known_publish(uint64_t uid, uint64_t context, uint32_t stream, uint64_t seq,
                       const uint64_t *vc, uint32_t n);

/* A future's key, kept in its internal words (future.c). */
static inline void dv__known_pack(uint64_t internal[3], uint64_t uid, uint64_t context,
                                  uint32_t stream, uint64_t seq)
{
    internal[0] = uid;
    internal[1] = context;
    internal[2] = (uint64_t)stream << 48 | (seq & ((UINT64_C(1) << 48) - 1));
}

/* Snapshot lists.  init: out of memory is DV_ENOMEM.  send (the poster,
 * before posting message number seq): a copy of k when it changed.
 * at (the actor, for message seq): the snapshot that message carries.
 * free: every node (the client is gone). */
int dv__know_list_init(dv_know_list *l);
void dv__know_send(dv_know_list *l, dv_known *k, uint32_t seq);
const dv_know_node *dv__know_at(dv_know_list *l, uint32_t seq);
void dv__know_list_free(dv_know_list *l);

#endif /* DV_ACTOR_KNOWN_H */
