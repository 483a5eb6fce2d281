/*
 * The device actor's internals.
 *
 * One thread per actor owns the device state: the environment (context and
 * stream pool), the resource stack, the completion tracker and the handle
 * domain.  Client threads only post messages (queue.h) and wait on
 * futures; handle validation (gpuref) and statistics are lock-free reads.
 *
 * A message that needs the device to finish (a copy to or from the host, a
 * sync) is answered when the actor sees its stream position reached: after
 * each batch the actor records one event per stream it enqueued on, and
 * polls those while anything is pending (it never parks for long then).
 * A query that reports a sticky error fails everything pending with
 * DV_ECONTEXT_LOST, naming the operations in flight on that stream, and
 * the actor tries to rebuild the context; where the driver refuses, every
 * actor on that driver becomes LOST (DV_EDEVICE_LOST at once, handles
 * stale).
 */
#ifndef DV_ACTOR_ACTOR_H
#define DV_ACTOR_ACTOR_H

#include <pthread.h>
#include <stdatomic.h>

#include "actor/checker.h"
#include "actor/future.h"
#include "actor/queue.h"
#include "gpuref/gpuref.h"
#include "resources/tracker.h"

enum dv_msg_type {
    DV_MSG_ALLOC = 1,
    DV_MSG_FREE,
    DV_MSG_HTOD,
    DV_MSG_DTOH,
    DV_MSG_DTOD,
    DV_MSG_PEER_READ, /* fence a block for a peer copy (source actor) */
    DV_MSG_PEER_COPY, /* the copy itself (destination actor) */
    DV_MSG_MEMSET,
    DV_MSG_SYNC,
    DV_MSG_STATS,
    DV_MSG_RESET,
    DV_MSG_LAUNCH, /* a built-in kernel by name (tests and tools) */
    DV_MSG_KERNEL_GET,
    DV_MSG_LAUNCH_TRACKED,
    DV_MSG_TASK,
    DV_MSG_HOST_ACCESS, /* the checker: a host access of a host buffer */
};

/* A kernel handle: owned by its actor, reloaded in each new context. */
struct dv_kernel {
    struct dv_kernel *next;
    const void *image; /* NULL: the built-in kernels */
    size_t image_bytes;
    char name[64];
    dv_drv_module *module; /* own module (image != NULL), this context */
    dv_drv_func *func;
    uint64_t context; /* the context generation func belongs to; 0: none */
};

/* A device completion the actor waits for. */
typedef struct dv_pending {
    uint64_t epoch; /* the stream position that completes it */
    dv_future *reply;
    uint8_t type;
    uint32_t producer, seq;
    const char *what; /* tag or kernel name, for fault reports */
    uint64_t chk_seq; /* the checker's number of the stream's work it completes */
} dv_pending;

/* A launch or task enqueued lately, for naming a fault: nothing waits
 * for it, so it is not pending, but it may be what faulted. */
#define DV_RECENT 4
typedef struct dv_recent {
    const char *name; /* the kernel's, or NULL for a task */
    uint8_t type;
    uint32_t producer, seq;
} dv_recent;

typedef struct dv_pending_fifo {
    dv_pending *items;
    uint32_t head, count, cap;
    bool marked; /* gained entries in the current batch */
    dv_recent recent[DV_RECENT]; /* launches and tasks, newest at recent_next - 1 */
    uint32_t recent_next, nrecent;
} dv_pending_fifo;

struct dv_actor {
    uint64_t id; /* unique for the process, never reused */
    dv_actor_config cfg;
    dv_driver *drv;
    bool own_drv;
    bool registered;
    int device;

    dv_res_env env;
    dv_resource *stack;
    dv_log_sink *sink;
    dv_tracker *done;              /* completion positions, one event ring per stream */
    dv_checker *chk;               /* the stream-order checker, or NULL */
    const dv_msg *task_msg;        /* the task running now, or NULL */
    bool task_hazard;              /* it made an access the checker refused */
    dv_drv_module *kernels;        /* built-in kernels, loaded on first launch */
    struct dv_kernel *kernel_list; /* handles given out (dv_kernel_get) */
    dv_ref_domain *refs;
    dv_inbox *inbox;
    pthread_t thread;

    /* Read by every post and every message; written only when the state
     * changes: a line of its own, so neither clients' counters nor the
     * actor's own bookkeeping keep taking it away. */
    _Alignas(64) atomic_int state; /* dv_actor_state */
    atomic_bool draining;          /* destroy: no poster can be inside a post now */

    /* Posters between their state check and enqueue, one counter per line
     * (dv__thread_shard; dv__actor_post, shutdown): a single counter took
     * two contended read-modify-writes per post. */
    struct {
        _Alignas(64) atomic_int n;
    } inflight[DV_THREAD_SHARDS];

    /* The actor thread's own, from a fresh line. */
    _Alignas(64) dv_pending_fifo pend[DV_MAX_STREAMS];
    uint64_t npending;

    /* Interned allocation tags (owner thread). */
    char **tags;
    uint32_t ntags, cap_tags;

    /* Statistics: the actor writes, anyone reads. */
    atomic_uint_fast64_t st_messages, st_allocs, st_frees, st_copies, st_memsets, st_syncs,
        st_launches, st_failures, st_batches, st_hazards, st_tasks;

    /* Health: written by the actor under health_mu, read by anyone. */
    pthread_mutex_t health_mu;
    dv_actor_health health;
    dv_error_detail last_hazard; /* under health_mu */

    struct dv_actor *next_live; /* the process's list of actors */
};

/* The process's actors on one driver become LOST (fault is the cause). */
void dv__actors_lose_driver(dv_driver *drv, const dv_error_detail *fault);
/* Is this driver lost?  Fills *fault when it is. */
bool dv__driver_lost(const dv_driver *drv, dv_error_detail *fault);
/* What a lost actor answers: DV_EDEVICE_LOST with the driver's first fault
 * (or, where it was not recorded, a message saying the device is lost). */
void dv__lost_detail(const dv_actor *a, dv_error_detail *out);

#endif /* DV_ACTOR_ACTOR_H */
