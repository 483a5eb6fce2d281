/*
 * The recorder: the one path every tracked operation takes -- copies,
 * memsets, peer copies, launches, tasks.
 *
 *   1. resolve and validate   each handle the operation names is looked up
 *                             (stale, released, foreign, failed allocation)
 *                             and its range checked against the block;
 *                             uses of one block merge (the strongest access
 *                             wins).  Any error: nothing was enqueued.
 *   2. prepare                each use queues the waits it needs on other
 *                             streams (the resource stack's tracking).
 *   3. check                  the stream-order checker, when on, checks
 *                             every access; a hazard enqueues nothing more.
 *   4. enqueue                the operation's own driver call(s): the one
 *                             thing a handler writes besides its uses.
 *   5. finish                 each use is recorded (last write, reads), the
 *                             checker commits, the statistics move.
 *   6. complete               the handler answers now, or when the device
 *                             reaches the operation (completion.c).
 *
 * A handler describes its uses (dv__rec_use and friends) and passes its
 * enqueue; dv__rec_run does the rest.
 */
#ifndef DV_ACTOR_RECORDER_H
#define DV_ACTOR_RECORDER_H

#include "actor/actor.h"

#define DV_REC_MAX_USES (DV_LAUNCH_MAX_ARGS + 2)

typedef struct dv_use {
    dv_ref_slot *slot;
    dv_access access;
} dv_use;

typedef struct dv_recorder {
    dv_actor *a;
    const dv_envelope *e;
    dv_stream stream;
    const char *op;
    bool task; /* a task: checked and recorded before its callback, and its
                * uses finished even when it fails (it may have enqueued) */
    bool partial; /* the enqueue function enqueued some of its work before
                   * it failed (a staged copy's first steps): recorded, as
                   * a task's, so that later uses are ordered after it */
    int nuses;
    dv_use uses[DV_REC_MAX_USES];
    dv_chk_op chk; /* the checker's view, when it is on */
} dv_recorder;

/* Start recording the operation of e on stream (validated here). */
int dv__rec_begin(dv_recorder *r, dv_actor *a, const dv_envelope *e, dv_chk_kind kind,
                  const char *name);
/*
 * The operation uses [offset, offset + bytes) of ref's block with access
 * (bytes 0: the block from offset on, as for a kernel argument).  The
 * block's slot, or NULL with the detail set (nothing enqueued).
 */
dv_ref_slot *dv__rec_use(dv_recorder *r, dv_ref ref, uint64_t offset, uint64_t bytes,
                         dv_access access);
/* For the checker only: a raw device pointer the operation uses. */
void dv__rec_raw(dv_recorder *r, uint64_t ptr, uint64_t bytes, uint8_t access);
/* For the checker only: a host buffer (what the posting thread knew). */
void dv__rec_host(dv_recorder *r, uint64_t ptr, uint64_t bytes, uint8_t access);
/* prepare, check, enqueue(r, arg), finish (design above).  DV_OK or the
 * first error; a sticky one was handled as a fault. */
int dv__rec_run(dv_recorder *r, int (*enqueue)(dv_recorder *r, void *arg), void *arg);

/* Resolve a launch's or task's arguments: each value, each handle's
 * device address plus offset (a use with its access), each raw pointer
 * (refused unless allow_raw).  values[i] gets argument i. */
int dv__rec_args(dv_recorder *r, const dv_arg *args, unsigned nargs, uint64_t *values,
                 bool allow_raw);

#endif /* DV_ACTOR_RECORDER_H */
