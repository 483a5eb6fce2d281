/*
 * Asymmetric fences and per-thread hazard slots: the store-load handshakes
 * between client threads, which post millions of times a second, and the
 * actor, which parks or shuts down rarely.
 *
 * A handshake of that kind (Dekker's: each side stores its flag, then
 * reads the other's) needs a full fence on both sides.  On x86 a full
 * fence, or any locked instruction, waits until the thread's earlier
 * stores are visible to every core, and right after writing a message
 * that means waiting for the lines the actor just read.  Measured on a
 * 16-core Xeon host, the client's fences made up two thirds of an
 * allocate+release pair.  So the frequent side issues only a compiler
 * barrier (dv__fence_light), and the rare side issues a barrier that
 * makes every running thread of the process pass a full fence
 * (dv__fence_heavy: membarrier(2) with MEMBARRIER_CMD_PRIVATE_EXPEDITED),
 * as in userspace RCU and folly's asymmetric barriers.  Where the kernel
 * lacks it, under ThreadSanitizer (which does not model it), or with
 * DV_FENCES=full in the environment, both sides use a full fence.
 *
 * The choice is made once, by dv__fence_init, before the first actor
 * exists, and never changes: every pair of sides agrees on it.
 *
 * Hazard slots: a thread that is about to use an object another thread may
 * retire (an actor being stopped, a handle domain being closed) names it in
 * one of its slots, fences lightly, and then checks the object's state.
 * The retiring thread publishes the new state and calls dv__hazard_wait,
 * which fences heavily and waits until no thread names the object: every
 * user either saw the new state or finished before the wait returned.
 * Slots nest (a release posts a free), DV_HAZARD_DEPTH deep.
 */
#ifndef DV_BASE_FENCE_H
#define DV_BASE_FENCE_H

#include <stdatomic.h>
#include <stdbool.h>

#define DV_HAZARD_DEPTH 4

/* True once dv__fence_init chose the asymmetric scheme.  Written once,
 * before any object whose handshakes read it exists; relaxed loads. */
extern atomic_bool dv__fence_asym;

/* Choose the scheme (idempotent, thread-safe); call before any handshake
 * of an object can run, i.e. before the object is visible to a thread. */
void dv__fence_init(void);

/* The frequent side's fence. */
static inline void dv__fence_light(void)
{
    if (atomic_load_explicit(&dv__fence_asym, memory_order_relaxed))
        atomic_signal_fence(memory_order_seq_cst);
    else
        atomic_thread_fence(memory_order_seq_cst);
}

/* The rare side's fence (a system call when asymmetric). */
void dv__fence_heavy(void);

/* The "asymmetric" or "full" scheme, for reports. */
const char *dv__fence_scheme(void);

typedef struct dv_hazards {
    _Atomic(const void *) slot[DV_HAZARD_DEPTH];
    unsigned depth; /* the owner's */
    struct dv_hazards *next, *prev;
} dv_hazards;

/* The calling thread's slots, registered at first use; NULL when out of
 * host memory. */
dv_hazards *dv__hazards_mine(void);

/* Name obj (then check its state).  False when out of host memory or
 * nested too deep: the caller must not use obj. */
static inline bool dv__hazard_set(dv_hazards *h, const void *obj)
{
    if (h == NULL || h->depth == DV_HAZARD_DEPTH)
        return false;
    /* Relaxed, then the light fence: the handshake's store side. */
    atomic_store_explicit(&h->slot[h->depth++], obj, memory_order_relaxed);
    dv__fence_light();
    return true;
}

/* Drop the last name set. */
static inline void dv__hazard_clear(dv_hazards *h)
{
    /* Release: what the thread did with the object happens before the
     * retiring thread's acquire load in dv__hazard_wait. */
    atomic_store_explicit(&h->slot[--h->depth], NULL, memory_order_release);
}

/* After publishing obj's new state: wait until no thread names obj. */
void dv__hazard_wait(const void *obj);
/* In a child after fork() (base/proc.c): forget the parent's threads. */
void dv__fence_after_fork(void);

#endif /* DV_BASE_FENCE_H */
