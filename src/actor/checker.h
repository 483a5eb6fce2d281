/*
 * The stream-order checker: a happens-before race detector for device
 * memory across the streams of one actor, and for the host buffers of its
 * copies (debug; off unless asked for).
 *
 * Design
 * ------
 * Clocks.  Every stream has a vector clock with one component per stream.
 * A checked operation on stream s ticks s's own component and is stamped
 * (s, that value): its number.  Edges come only from synchronisation the
 * program (or devactor on its behalf) made:
 *   - stream order;
 *   - event records and waits, devactor's own (the recorder's fences) and
 *     the public dv_event's: the driver port reports each one
 *     (dv_drv_observer); a record copies the stream's clock into the
 *     event, a wait merges the event's clock into the stream's;
 *   - what the posting thread knew (known.h): a thread learns by waiting
 *     on futures, syncs and events, or by a hand-over, and its messages
 *     carry a snapshot; an operation's clock includes its poster's, and so
 *     does everything after it on its stream.
 * What the actor saw finish (a completion it polled) orders nothing a
 * client did: the same program gets the same verdict however fast the
 * device runs.  It is kept apart (the last row) and orders only the
 * actor's own decision to hand freed memory out again.
 *
 * Pieces.  Memory is kept as disjoint pieces with one history each: the
 * last write and the outstanding reads (one per stream), each a stamp.
 * A device piece belongs to a block the actor allocated; an access to
 * part of a block (a copy's or memset's range, a raw pointer or handle
 * argument with a length) cuts its pieces at the access's ends, so
 * disjoint parts of one block do not conflict.  An access without a
 * length covers the whole block.  Access X on stream s is ordered after
 * an earlier access P stamped (p, n) when p == s or s's clock has seen n
 * of p.  A read must be ordered after the last write; a write after the
 * last write and every read.  A free (on the block's alloc stream) must
 * be ordered after every access; its pieces then stay, FREED, so that a
 * raw pointer into them is reported, and so that memory a pool hands out
 * again is checked: the new block's allocation must be ordered after the
 * old block's free and uses.  Host buffers of copies are pieces too (a
 * device-to-host copy writes one, a host-to-device copy reads one); the
 * host's own accesses (dv_check_host_access) are checked with the
 * calling thread's clock alone.
 *
 * Provenance.  A raw pointer into a freed piece is a use after free,
 * ordered or not.  A block allocated over freed pieces remembers the
 * block they belonged to; until the new block's address is handed out
 * (its handle's published `exposed` word), a raw pointer into it can only
 * have come from the old block: a use after free too.
 *
 * Pieces live in two sets (device, host), each a list by start address
 * with an index over some of its pieces: a treap of every block's first
 * piece and every host piece, so interior pointers and overlapping reuse
 * are found in O(log n), and a table of the device's by exact start, so
 * an access through a handle (which names its block's start) needs no
 * descent.  Pieces cut off inside a block are found from the block's
 * first one along the list, so the cutting and merging that ranged
 * accesses cause changes no index.  Nothing is dropped by count
 * or by what the actor saw finish.  A device piece whose history every
 * stream's clock has seen (dominance) forgets it, and a block's pieces
 * that have forgotten everything merge back into one; a freed piece keeps
 * its free (for provenance) until its memory is allocated again.  A host
 * piece goes when a later copy covers its range: the host's accesses are
 * checked with a thread's clock alone, and a thread that learned nothing
 * must still be told, so no clock dominates a host piece.
 *
 * Tasks (dv__checker_task_verify): what a task's work really touches --
 * the nodes of the graph its native stream was captured into on cuda,
 * dv_task_sim_access on the sim -- is checked against its declared
 * accesses before any of it runs.  Peer copies are checked on both
 * actors: the read of the source on the source's actor (PEER_FROM), the
 * write on the destination's (PEER).
 */
#ifndef DV_ACTOR_CHECKER_H
#define DV_ACTOR_CHECKER_H

#include "actor/known.h"
#include "resources/resource.h"

typedef struct dv_checker dv_checker;

typedef enum dv_chk_kind {
    DV_CHK_ALLOC = 1,
    DV_CHK_FREE,
    DV_CHK_LAUNCH,
    DV_CHK_TASK,
    DV_CHK_TASK_LAUNCH,
    DV_CHK_HTOD,
    DV_CHK_DTOH,
    DV_CHK_DTOD,
    DV_CHK_MEMSET,
    DV_CHK_HOST,
    DV_CHK_PEER,      /* a peer copy, on the destination's actor */
    DV_CHK_PEER_FROM, /* a peer copy's read, on the source's actor */
} dv_chk_kind;

#define DV_CHK_MAX_ACCESSES (DV_LAUNCH_MAX_ARGS + 2)

/* One operation's accesses, checked together, then committed together. */
typedef struct dv_chk_op {
    uint8_t kind;      /* dv_chk_kind */
    uint32_t stream;   /* the stream it is enqueued on */
    const char *name;  /* a kernel's name, or NULL */
    uint32_t producer; /* the message (client ring and sequence) */
    uint32_t msg;
    uint64_t seq;             /* set by dv__checker_check: the stamp on its stream */
    const dv_know_node *know; /* what the posting thread knew (known.h) */
    unsigned n;
    struct {
        uint64_t ptr;
        uint64_t bytes; /* 0: the whole block that holds ptr */
        uint8_t access; /* DV_READ, DV_WRITE, DV_READ_WRITE */
        bool host;      /* a host buffer (a copy's other side) */
        bool staged;    /* a staged copy's host read: the host's, from the post */
        bool raw;       /* a raw pointer (not resolved from a handle) */
        uint64_t base;  /* the start of the handle's block (0: not known) */
    } acc[DV_CHK_MAX_ACCESSES];
} dv_chk_op;

/* The checker of env's context (uid: the actor's; context: its
 * generation, what clients' knowledge must be of to count); check_reuse:
 * memory handed out again by a pool of devactor's (not by the driver,
 * which orders its own reuse). */
int dv__checker_create(dv_res_env *env, bool check_reuse, uint64_t uid, uint64_t context,
                       dv_checker **out);
/* Detaches from the context and frees everything. */
void dv__checker_destroy(dv_checker *c);

void dv__chk_op_init(dv_chk_op *op, dv_chk_kind kind, uint32_t stream, const char *name,
                     uint32_t producer, uint32_t msg);
void dv__chk_op_add(dv_chk_op *op, uint64_t ptr, uint64_t bytes, uint8_t access, bool host);

/* Stamp op and check every access: DV_OK, or DV_EHAZARD with the detail
 * naming both operations.  Nothing is recorded. */
int dv__checker_check(dv_checker *c, dv_chk_op *op);
/* Record op's accesses (after it was enqueued). */
void dv__checker_commit(dv_checker *c, const dv_chk_op *op);

/* A block, as the checker keeps it. */
typedef struct dv_chk_block {
    uint64_t ptr, bytes;
    const char *tag;
    uint64_t generation;
    /* Its address was handed out when *exposed == exposed_gen (the
     * handle's published part); NULL: from the start (a task's scratch). */
    const _Atomic uint32_t *exposed;
    uint32_t exposed_gen;
} dv_chk_block;

/* A block allocated on stream (its first write); DV_EHAZARD when memory
 * freed earlier is reused before its free and uses are ordered before. */
int dv__checker_alloc(dv_checker *c, const dv_chk_block *b, uint32_t stream,
                      const dv_know_node *know, uint32_t producer, uint32_t msg);
/* The block at ptr was freed on stream; DV_EHAZARD when an access of it
 * is not ordered before the free (the free is made all the same). */
int dv__checker_free(dv_checker *c, uint64_t ptr, uint32_t stream, const dv_know_node *know,
                     uint32_t producer, uint32_t msg);

/*
 * Points a thread may learn (known.h).  The number of the latest
 * operation on stream:
 */
uint64_t dv__checker_stream_seq(const dv_checker *c, uint32_t stream);
/* A point of its own on stream, after everything enqueued there so far
 * (a sync, an event record; know: the poster's, when it enqueues
 * something there); its number. */
uint64_t dv__checker_point(dv_checker *c, uint32_t stream, const dv_know_node *know);
/* A future will carry (stream, seq): publish its clock for the waiter
 * (nothing when stream has moved on since). */
void dv__checker_publish(dv_checker *c, uint32_t stream, uint64_t seq);

/* The host reads or writes [ptr, ptr + bytes) of its own memory, knowing
 * what know says. */
int dv__checker_host_access(dv_checker *c, uint64_t ptr, uint64_t bytes, uint8_t access,
                            const dv_know_node *know, uint32_t producer, uint32_t msg);
/*
 * What a task really did (its work as devactor saw it enqueued, or a host
 * function's accessor on the sim): it touches [ptr, ptr + bytes) of
 * device memory with access (DV_READ, DV_WRITE; 0: a pointer into it, the
 * direction unknown), seen through `via` (words for the message).  DV_OK
 * when task (its op, as checked) declared that access of those bytes, or
 * they are its own (own: nown ranges {ptr, bytes}, its scratch), or the
 * checker does not know the memory; else DV_EHAZARD naming the task and
 * the block (a use after free for freed memory).
 */
int dv__checker_task_verify(dv_checker *c, const dv_chk_op *task, const uint64_t (*own)[2],
                            unsigned nown, uint64_t ptr, uint64_t bytes, uint8_t access,
                            const char *via);
/* Pieces held now (device and host), and the host memory it all takes. */
/* Host memory [ptr, ptr + bytes) is gone (a dv_host_free): its history
 * goes with it. */
void dv__checker_host_forget(dv_checker *c, uint64_t ptr, uint64_t bytes);
uint64_t dv__checker_pieces(const dv_checker *c);
uint64_t dv__checker_bytes(const dv_checker *c);

#endif /* DV_ACTOR_CHECKER_H */
