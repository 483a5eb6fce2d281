/*
 * The device actor's internals, shared by the files of src/actor and by
 * nothing else: no other layer, tool or test sees struct dv_actor.
 *
 * One thread per actor owns the device state: the environment (context and
 * stream pool), the resource stack, the completion tracker, the handle
 * domain's actor side, kernels and events.  Client threads only post
 * messages (queue.h) and wait on futures; handle validation (gpuref) and
 * statistics are lock-free reads.
 *
 * The files, by concern:
 *   loop.c        the thread: take messages, dispatch, flush, poll, park
 *   completion.c  what waits for the device: pending completions, faults
 *   recorder.c    the one recorder every tracked operation goes through
 *   ops.c         the message handlers: what each operation uses, enqueues
 *   events.c      dv_event, both sides
 *   kernels.c     kernel handles
 *   lifecycle.c   start, the device state (built once for start and for
 *                 rebuild), reset, shutdown, destroy, LOST
 *   client.c      the public calls: validate, post, wait
 *   registry.c    the process-wide actors and the list of live ones
 *   known.c       what client threads know the device finished (checker)
 *   checker.c     the stream-order checker
 *
 * A message that needs the device to finish (a copy, a launch with a
 * future, a sync) is answered when the actor sees its stream position
 * reached: after each batch the actor records one event per stream it
 * enqueued on, and polls those while anything is pending (it never parks
 * for long then).  A query that reports a sticky error fails everything
 * pending with DV_ECONTEXT_LOST, naming the operations in flight on that
 * stream, and the actor tries to rebuild the context; where the driver
 * refuses, every actor on that driver becomes LOST (DV_EDEVICE_LOST at
 * once, handles stale).
 */
#ifndef DV_ACTOR_ACTOR_H
#define DV_ACTOR_ACTOR_H

#include <pthread.h>
#include <stdatomic.h>

#include "actor/checker.h"
#include "actor/future.h"
#include "actor/host.h"
#include "actor/memstats.h"
#include "actor/msg.h"
#include "actor/queue.h"
#include "actor/staging.h"
#include "base/assert.h"
#include "base/error.h"
#include "base/fence.h"
#include "base/proc.h"
#include "gpuref/gpuref.h"
#include "resources/tracker.h"

/* A kernel handle: owned by its actor, reloaded in each new context. */
struct dv_kernel {
    struct dv_kernel *next;
    _Atomic uint64_t owner; /* the actor's uid; 0: dead (kernels.c) */
    const void *image;      /* NULL: the built-in kernels */
    size_t image_bytes;
    char name[64];
    dv_drv_module *module; /* own module (image != NULL), this context */
    dv_drv_func *func;
    uint64_t context; /* the context generation func belongs to; 0: none */
    /* Its parameters, read once when the handle is made (actor thread):
     * nparams -1 where the driver cannot tell (launches go unchecked). */
    int nparams;
    uint16_t param_bytes[DV_LAUNCH_MAX_ARGS];
};

/* A launch's arguments against k's parameters: DV_EINVAL naming the
 * first that does not fit (kernels.c; the actor's thread). */
int dv__kernel_check_args(const struct dv_kernel *k, const dv_arg *args, unsigned nargs,
                          const char *op);

/* An event handle (events.c). */
struct dv_event {
    _Atomic uint64_t owner; /* the actor's uid; 0: destroyed (pooled, never freed) */
    atomic_bool destroying; /* dv_event_destroy was called (owner goes 0 when handled) */
    struct dv_actor *actor;
    uint32_t flags;
    _Atomic uint64_t posted;     /* records posted (client side) */
    atomic_bool numbering;       /* a poster numbers and posts a record (events.c) */
    _Atomic uint64_t recorded;   /* records ordered (the actor's, release) */
    _Atomic(dv_drv_event *) drv; /* the port's event of the latest record */
    /* The actor's. */
    uint64_t context;        /* the context generation drv was made in; 0: none */
    dv_stream stream;        /* where the latest record is */
    uint64_t epoch;          /* its position there (the completion tracker's) */
    uint64_t chk_seq;        /* the checker's number of the stream's work there */
    uint64_t res_pos;        /* the resource stack's position there */
    uint64_t record_context; /* the context of the latest record; 0: never */
    bool host_reached;       /* the latest record could not be enqueued: the actor
                              * waited for its stream instead (done already) */
    struct dv_event *next, *prev;
};

/* A device completion the actor waits for. */
typedef struct dv_pending {
    uint64_t epoch; /* the stream position that completes it */
    dv_future *reply;
    uint8_t type;
    uint32_t client, seq;
    const char *what; /* tag or kernel name, for fault reports */
    uint64_t chk_seq; /* the checker's number of the stream's work it completes */
    dv_error_detail *fail; /* a failure told once the device passed it (heap; NULL: DV_OK) */
    /* When the device is likely done with it (loop.c's first eager look),
     * and the transfer span it ends: set at the batch's end, when its
     * event is recorded (0: no guess). */
    uint64_t eta, span_start, span_bytes;
} dv_pending;

/* A launch or task enqueued lately, for naming a fault: nothing waits
 * for it, so it is not pending, but it may be what faulted. */
#define DV_RECENT 4
typedef struct dv_recent {
    const char *name; /* the kernel's, or NULL for a task */
    uint8_t type;
    uint32_t client, seq;
    uint64_t epoch; /* its position on its stream (the completion tracker's) */
} dv_recent;

typedef struct dv_pending_fifo {
    dv_pending *items;
    uint32_t head, count, cap;
    bool marked;                 /* gained entries in the current batch */
    uint32_t unguessed;          /* the newest this many have no eta yet */
    /* Transfers with page-locked host memory enqueued since the stream
     * was last seen past all of them (completion.c, "When to look"). */
    bool span_open;
    uint64_t span_start, span_bytes, eta;
    dv_recent recent[DV_RECENT]; /* launches and tasks, newest at recent_next - 1 */
    uint32_t recent_next, nrecent;
} dv_pending_fifo;

struct dv_actor {
    uint64_t uid; /* unique for the process, never reused */
    dv_actor_config cfg;
    dv_driver *drv;
    bool own_drv;
    bool registered;
    uint32_t fork_gen; /* base/proc.h: made in this process, or inherited */
    int device;

    dv_res_env env;
    dv_resource *stack;
    dv_resource *bottom; /* the stack's last: what it holds is reserved from the device */
    dv_memstats mem;     /* memstats.h */
    uint64_t batch_time; /* when the batch being handled was taken:
                          * CLOCK_REALTIME_COARSE, ns (blocks' birth) */
    dv_log_sink *sink;
    dv_tracker *done;            /* completion positions, one event ring per stream */
    dv_checker *chk;             /* the stream-order checker, or NULL */
    const dv_envelope *task_env; /* the task running now, or NULL */
    bool task_hazard;            /* it made an access the checker refused */
    bool task_dropped;           /* the checker refused its captured work: none of it ran */
    bool task_opaque_args;       /* its kernels' parameters are not read as pointers */
    const dv_chk_op *task_chk;   /* its accesses as declared (checker on) */
    /* Checking a task on cuda (tasks.c): its stream's work is captured
     * into a graph on cap[stream] (made on first use, one per stream) and
     * verified before it runs; task_funcs: kernels dv_task_launch put
     * there (already checked as launches). */
    dv_drv_stream *cap[DV_MAX_STREAMS];
    bool capturing;
    unsigned ntask_funcs;
    const void *task_funcs[16];
    dv_block scratch[DV_TASK_SCRATCH_MAX]; /* the running task's (tasks.c) */
    unsigned nscratch;
    struct dv_host_job *host_jobs; /* host functions not yet swept (tasks.c) */
    dv_drv_module *kernels;        /* built-in kernels, loaded on first launch */
    struct dv_kernel *kernel_list; /* handles given out (dv_kernel_get) */
    struct dv_event events;        /* list head of the events made */
    dv_ref_domain *refs;
    dv_inbox *inbox;
    pthread_t thread;

    /* Page-locked host memory (host.h) and the staging of pageable copies
     * (staging.h), made at the first such copy: staging_state says
     * (DV_STAGING_*; the actor stores, posters load). */
    dv_hostmem host;
    dv_staging *staging;
    atomic_int staging_state;
    bool lost_seen; /* the loop saw LOST and stopped the staging's waits */

    /* Read by every post and every message; written only when the state
     * changes: a line of its own, so neither clients' counters nor the
     * actor's own bookkeeping keep taking it away. */
    _Alignas(64) atomic_int state; /* dv_actor_state */
    /* Lost (dv__actor_mark_lost), whatever the state says: a shutdown's
     * STOPPING stays over a loss, and the actor's thread must still know
     * that what it holds is gone. */
    atomic_bool broken;

    /* The actor thread's own, from a fresh line. */
    _Alignas(64) dv_pending_fifo pend[DV_MAX_STREAMS];
    uint64_t npending;
    double link_ns_per_byte;   /* the fastest transfer seen; 0: none yet */
    uint64_t eta_looked;       /* the latest eta the loop looked eagerly at */
    atomic_bool look_soon;     /* a copy's host side is done: its end is near */

    /* Memory released while clients wait for some (dv_alloc_wait): the
     * actor bumps released and wakes them when mem_waiters says any wait. */
    _Alignas(64) atomic_uint mem_released;
    atomic_uint mem_interest; /* in dv_alloc_wait: the actor bumps released */
    atomic_uint mem_waiters;  /* of those, asleep (the last one is refused) */

    /* Statistics: the actor writes, anyone reads. */
    atomic_uint_fast64_t st_messages, st_allocs, st_frees, st_copies, st_memsets, st_syncs,
        st_launches, st_failures, st_batches, st_hazards, st_tasks, st_events, st_staged,
        st_staged_bytes, st_direct;
    atomic_uint_fast64_t st_staging_waits; /* posters add (a locked add: rare) */

    /* Health: written by the actor under health_mu, read by anyone. */
    pthread_mutex_t health_mu;
    pthread_mutex_t stop_mu; /* one thread stops the actor; another waits for it */
    dv_actor_health health;
    dv_error_detail last_hazard; /* under health_mu */
    /* The CUDA context's instance: +1 at every reset of the context itself
     * (a fault), not at a rebuild that keeps it (dv_task_ctx). */
    uint64_t driver_context;
    bool fault_mended; /* under health_mu: a rebuild mended first_fault's trouble */

    struct dv_actor *next_live; /* the process's list of actors */
};

/* Every handler runs on its actor's thread (checked in debug builds). */
#define DV_ASSERT_ACTOR(a) dv_assert_internal(pthread_equal(pthread_self(), (a)->env.owner))

/* The actor is the only writer of its counters: a store, not a locked
 * add (readers on other threads load them relaxed). */
static inline void dv__stat_inc(atomic_uint_fast64_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* ---- loop.c */
void *dv__actor_main(void *arg);

/* ---- lifecycle.c */
/* Context, streams, resource stack, trackers (actor thread, at start). */
int dv__actor_start_state(dv_actor *a);
/* Drop every block and handle, reset the context, build it all again;
 * where the driver refuses, every actor on the driver becomes LOST. */
/* Rebuild the device state: keep_context (dv_actor_reset on a healthy
 * device) keeps the CUDA context, which other libraries share, and drops
 * only devactor's state; otherwise (a sticky fault) the context is reset
 * too.  A fault met while keeping it resets it after all. */
int dv__actor_rebuild(dv_actor *a, bool keep_context);
/* The caller's configuration over the defaults (the ABI rule of
 * devactor.h): DV_EINVAL for a size it cannot take. */
int dv__config_read(const dv_actor_config *cfg, dv_actor_config *full, const char *op);
/* DEVACTOR_CONF over *cfg (a full configuration); unset: nothing. */
int dv__config_from_env(dv_actor_config *cfg);
/* Shutdown's last steps on the actor's thread. */
void dv__actor_stop_state(dv_actor *a);
/* What a lost actor answers: DV_EDEVICE_LOST with the driver's first fault
 * (or, where it was not recorded, a message saying the device is lost). */
void dv__lost_detail(const dv_actor *a, dv_error_detail *out);
int dv__lost_answer(const dv_actor *a);
/* What a call to a that has stopped taking work answers, by its state st:
 * DV_ESHUTDOWN ("<name>: device N's actor is shutting down", recorded as
 * call's) once shutdown began, the lost answer once lost, else DV_OK. */
int dv__actor_refused(const dv_actor *a, int st, const char *call, const char *name);
/* The same, a's state read here (inline: every post asks). */
static inline int dv__actor_refusing(const dv_actor *a, const char *call, const char *name)
{
    int st = atomic_load_explicit(&a->state, memory_order_acquire);
    if (st != DV_ACTOR_STOPPING && st != DV_ACTOR_STOPPED && st != DV_ACTOR_LOST)
        return DV_OK;
    return dv__actor_refused(a, st, call, name);
}

/* DV_EFORKED naming op where a is its parent's, in a child process (an
 * actor has no thread there): every call on an actor asks first. */
static inline int dv__actor_here(const dv_actor *a, const char *op)
{
    return a->fork_gen != dv__fork_now() ? dv__forked(op) : DV_OK;
}

/* ---- registry.c */
/* One actor per device: the real devices of every cuda driver of the
 * process are one set (they share primary contexts), each sim driver's
 * its own.  DV_EBUSY while another actor holds a's device; unclaim is
 * idempotent. */
int dv__device_claim(dv_actor *a);
/* a is LOST with fault as its first fault (health), its handles with it
 * (a driver lost, or a rebuild of a's own that failed). */
void dv__actor_mark_lost(dv_actor *a, const dv_error_detail *fault);

/* The memory statistics' reserved bytes brought up to date (the
 * environment's allocated hook: allocations through the public resource
 * API, which no message accounts for). */
void dv__actor_sample_reserved(void *arg);

/* Has the actor lost its device (its state LOST, or a shutdown begun
 * over the loss)?  The actor's thread asks before it uses what it holds. */
static inline bool dv__actor_broken(dv_actor *a)
{
    return atomic_load_explicit(&a->broken, memory_order_acquire);
}
void dv__device_unclaim(dv_actor *a);
void dv__actor_link(dv_actor *a);

/* Tasks (tasks.c): after the task's function returned, release its
 * scratch on its stream; free the host functions that ran; at a teardown
 * where the driver runs no more host functions (after a context reset, or
 * the context gone), clean up those that never ran. */
void dv__task_scratch_release(dv_actor *a);
/* The allocation log's row for a refusal the actor answered (ops.c); the
 * detail is left as it was. */
void dv__log_refused(dv_actor *a, uint32_t thread, uint64_t bytes, dv_stream_id s, dv_tag tag);
/* Does the actor keep the allocation log itself (its own stack's log
 * layer, which leaves refusals and dropped blocks to it)? */
static inline bool dv__actor_logs(const dv_actor *a)
{
    return a->sink != NULL && a->cfg.stack == NULL;
}
/* Wake the threads in dv_alloc_wait (a release, a shutdown, the actor lost). */
void dv__memory_waiters_wake(dv_actor *a);
/* The actor of a task's context, or NULL (DV_EINVAL) outside the task. */
dv_actor *dv__task_actor(const dv_task_ctx *ctx, const char *op);
void dv__host_jobs_sweep(dv_actor *a);
/* Destroy the capture streams (the context is going). */
void dv__task_streams_drop(dv_actor *a);
/* The stream a task's work goes on: its capture stream while it is
 * captured for checking, else its own. */
dv_drv_stream *dv__task_stream(dv_actor *a, dv_stream s);
/* The running task touches [ptr, ptr + bytes) with access (0: a pointer
 * into it), seen through via: DV_OK when it declared so (checker off:
 * always), else DV_EHAZARD, counted, and the task answers it. */
int dv__task_verify(dv_actor *a, uint64_t ptr, uint64_t bytes, uint8_t access, const char *via);
/* Run the task's function fn on r's stream, its work checked on cuda
 * when the checker is on (captured, verified, then run, or refused). */
int dv__task_run(dv_actor *a, dv_stream s, int (*fn)(const dv_task_ctx *, void *), dv_task_ctx *ctx,
                 void *user);
void dv__host_jobs_cancel(dv_actor *a, int status);
void dv__actor_unlink(dv_actor *a);
/* Is an actor of this uid alive in the process? */
bool dv__actor_uid_live(uint64_t uid);
/* a's health, if a (whose uid is uid) is still on the list of live
 * actors: it is read under the lock its shutdown takes to leave the list
 * (once its thread is joined), so a is not freed meanwhile.  False, *h
 * untouched, once it left (shut down, maybe destroyed); a stopping actor
 * is still there, its state STOPPING. */
bool dv__actor_health_if_live(const dv_actor *a, uint64_t uid, dv_actor_health *h);
/* The process's actors on one driver become LOST (fault is the cause). */
void dv__actors_lose_driver(dv_driver *drv, const dv_error_detail *fault);
/* Is this driver lost?  Fills *fault when it is. */
bool dv__driver_lost(const dv_driver *drv, dv_error_detail *fault);
/* A registered actor is being destroyed: the registry forgets it. */
void dv__registry_forget(dv_actor *a);
/* The actor whose domain minted ref, or NULL. */
dv_actor *dv__actor_of_ref(dv_ref ref);
void dv__actor_bind_domain(dv_actor *a, bool bound);
/* actor_start, for both kinds (lifecycle.c). */
int dv__actor_start(const dv_actor_config *cfg, dv_driver *shared, bool registered, dv_actor **out);

/* ---- client.c */
/* Post m from the calling thread (any but an actor's own for a wait); f
 * NULL: nobody waits for an answer.  Arms f (dv__future_arm) first. */
int dv__actor_post(dv_actor *a, dv_msg *m, dv_future *f);
/* The same with f armed already (dv__future_arm) by the caller, a not
 * NULL. */
int dv__actor_post_armed(dv_actor *a, dv_msg *m, dv_future *f);
/* Post m and wait for it to complete (a future on the caller's stack). */
int dv__actor_call(dv_actor *a, dv_msg *m, dv_future *own);

/* ---- completion.c */
/* Answer an operation that is complete now. */
void dv__reply(dv_actor *a, const dv_envelope *e, int status);
/* The operation is ordered; its future completes when the device reaches
 * the current end of stream s (what: its name in fault reports). */
int dv__complete_later(dv_actor *a, dv_stream s, const dv_envelope *e, const char *what);
/* The same at an earlier position of s (an event's record), with the
 * checker's number of the stream's work at that point. */
int dv__complete_at(dv_actor *a, dv_stream s, uint64_t epoch, uint64_t chk_seq,
                    const dv_envelope *e, const char *what);
/* The same for an operation that failed after it enqueued work (a task
 * whose function failed): its waiter hears the failure, the calling
 * thread's detail, once the device passed what it enqueued, ordered after
 * it as after a success.  DV_ENOMEM where the detail cannot be kept. */
int dv__complete_failed_later(dv_actor *a, dv_stream s, const dv_envelope *e, const char *what);
/* A launch or task went onto stream s: remember it for fault reports. */
void dv__recent_push(dv_actor *a, dv_stream s, const dv_envelope *e, const char *name);
/* Complete what the device has reached; a query error is a fault. */
void dv__poll_completions(dv_actor *a);
/* One event per stream that gained completions this batch. */
void dv__flush_marks(dv_actor *a);
/* A transfer of bytes with page-locked host memory went onto stream s. */
void dv__eta_transfer(dv_actor *a, dv_stream s, uint64_t bytes);
/* A pending completion's eta that says: not before a copy's host side is
 * done (staging.c kicks the actor then: look_soon). */
#define DV_ETA_HOST UINT64_MAX
/* The earliest time a stream's oldest completion is guessed done (0: no
 * guess); *all_host: every stream that waits, waits for a host side. */
uint64_t dv__pending_eta(const dv_actor *a, bool *all_host);
/* The completion just added on stream s waits for a staged copy's host
 * side. */
void dv__pending_host_bound(dv_actor *a, dv_stream s);
/* A host side is done (which one is not known): nothing waits for one. */
void dv__pending_host_done(dv_actor *a);
/* Fail every pending completion with status and detail. */
void dv__fail_pending(dv_actor *a, int status, const dv_error_detail *detail);
/* Wait for every stream; complete what was pending. */
int dv__drain_device(dv_actor *a);
/* A sticky error surfaced on stream s (culprit: the message that met it,
 * or NULL): name what was in flight, fail everything pending, rebuild. */
void dv__on_fault(dv_actor *a, int status, dv_stream s, const dv_envelope *culprit);
/* An enqueue failed after prepare: a sticky error is a fault. */
int dv__enqueue_failed(dv_actor *a, int rc, dv_stream s, const dv_envelope *e);
/* A checker verdict: a hazard is counted and kept as the latest. */
int dv__checked(dv_actor *a, int rc);
/* What the poster of e knew when it posted e (the checker's; NULL when
 * it is off or the thread has no knowledge). */
static inline const dv_know_node *dv__know_of(dv_actor *a, const dv_envelope *e)
{
    return a->chk != NULL ? dv__know_at(&e->from->know, e->m.seq) : NULL;
}

/* ---- kernels.c */
/* The actor's handle for (image, name), made and loaded on first use. */
int dv__kernel_find_or_load(dv_actor *a, const void *image, size_t image_bytes, const char *name,
                            struct dv_kernel **out);
/* The kernel's function in the current context, loading it if needed. */
int dv__kernel_func(dv_actor *a, struct dv_kernel *k, dv_drv_func **out);
/* Is k one of this actor's handles? */
bool dv__kernel_owned(const dv_actor *a, const struct dv_kernel *k);
/* Modules go with the context; handles stay (teardown). */
void dv__kernels_forget_context(dv_actor *a);
void dv__kernels_free(dv_actor *a);

/* ---- events.c */
void dv__events_forget_context(dv_actor *a, bool context_kept);
void dv__events_free(dv_actor *a);
void dv__handle_event(dv_actor *a, const dv_envelope *e);

/* ---- ops.c */
/* Handle one message (the switch over its type). */
void dv__handle(dv_actor *a, const dv_envelope *e);

#endif /* DV_ACTOR_ACTOR_H */
