/*
 * The stream-order checker: a happens-before race detector for device
 * memory across the streams of one actor (debug; off unless asked for).
 *
 * Design
 * ------
 * Clocks.  Every stream of the actor and the host (the actor's thread:
 * what it has seen complete) has a vector clock with one component per
 * stream plus one for the host.  A checked operation on stream s ticks
 * s's own component and is stamped (s, that value): its sequence number.
 * The driver port tells the checker about every ordering operation of the
 * context (dv_drv_observer): an event record copies the stream's clock
 * into the event, a stream wait merges the event's clock into the
 * stream's, and a completion the host sees (an event or stream query that
 * answered done, a sync) merges into the host's clock.  The host's clock
 * is merged into a stream's before each checked operation on it: what the
 * host saw complete before enqueueing comes before.
 *
 * Shadows.  Each block the actor allocated is a record: its address range,
 * its last write and its outstanding reads (one per stream), each an
 * operation stamp.  Access X on stream s is ordered after an earlier access
 * P stamped (p, n) when p == s (stream order) or s's clock has seen n of p.
 * A read must be ordered after the last write; a write after the last
 * write and every read.  A free (on the block's alloc stream) must be
 * ordered after every access; the record then stays, FREED, so that a raw
 * pointer into it is reported, and so that memory a pool hands out again
 * is checked: the new block's allocation (a write on its stream) must be
 * ordered after the old block's free and uses.  Host buffers of copies
 * have records too (a device-to-host copy writes one, a host-to-device
 * copy reads one); the host's own accesses are checked against them with
 * the host's clock (dv_check_host_access).
 *
 * Device records are disjoint and kept in a treap by start address, so
 * interior pointers and overlapping reuse are found in O(log n).  Host
 * records are a short list, swept of what the host has seen complete.
 *
 * What it cannot see: work a task enqueues through a library (cuBLAS)
 * is taken to make exactly the task's declared accesses; peer copies
 * between actors are not checked; the granule is the block, so two
 * streams writing disjoint halves of one block count as a hazard.
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
} dv_chk_kind;

#define DV_CHK_MAX_ACCESSES (DV_LAUNCH_MAX_ARGS + 2)

/* One operation's accesses, checked together, then committed together. */
typedef struct dv_chk_op {
    uint8_t kind;      /* dv_chk_kind */
    uint32_t stream;   /* the stream it is enqueued on */
    const char *name;  /* a kernel's name, or NULL */
    uint32_t producer; /* the message (client ring and sequence) */
    uint32_t msg;
    uint64_t seq;               /* set by dv__checker_check: the stamp on its stream */
    const dv_known *host_known; /* what the posting thread knew complete (below) */
    unsigned n;
    struct {
        uint64_t ptr;
        uint64_t bytes; /* 0: the whole block that holds ptr */
        uint8_t access; /* DV_READ, DV_WRITE, DV_READ_WRITE */
        bool host;      /* a host buffer (a copy's other side) */
    } acc[DV_CHK_MAX_ACCESSES];
} dv_chk_op;

/* The checker of env's context (its generation: what clients' knowledge
 * must be of to count); check_reuse: memory handed out again by a pool of
 * devactor's (not by the driver, which orders its own reuse). */
int dv__checker_create(dv_res_env *env, bool check_reuse, uint64_t context, dv_checker **out);
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

/* A block allocated on stream (its first write); DV_EHAZARD when memory
 * freed earlier is reused before its free and uses are ordered before. */
int dv__checker_alloc(dv_checker *c, uint64_t ptr, uint64_t bytes, uint32_t stream, const char *tag,
                      uint32_t producer, uint32_t msg);
/* The block at ptr was freed on stream; DV_EHAZARD when an access of it
 * is not ordered before the free (the free is made all the same). */
int dv__checker_free(dv_checker *c, uint64_t ptr, uint32_t stream, uint32_t producer, uint32_t msg);
/*
 * What a client thread knows.  The actor's view of completions is not a
 * client's: a client knows the operations whose futures it waited on (a
 * copy, a sync), per stream (future.h, dv_known).  A host buffer's use
 * (dv__checker_host_access, and a copy's host side, with the device's own
 * order before the copy) is checked against that, so a client that never
 * waited is told of its race even when the device happened to be done.
 * The operation's number on its stream goes into its future:
 */
uint64_t dv__checker_stream_seq(const dv_checker *c, uint32_t stream);
/* The host reads or writes [ptr, ptr + bytes) of its own memory. */
int dv__checker_host_access(dv_checker *c, uint64_t ptr, uint64_t bytes, uint8_t access,
                            const dv_known *known, uint32_t producer, uint32_t msg);

#endif /* DV_ACTOR_CHECKER_H */
