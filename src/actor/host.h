/*
 * Page-locked host memory of an actor: the pool behind dv_host_alloc, the
 * ranges users register, and the staging of pageable copies (staging.h)
 * all live in regions of pinned host memory that the actor holds.
 *
 * Design
 * ------
 * Region.  One mapping of host memory (mmap; a user's range for
 * dv_host_register), registered with the driver in the actor's context
 * (port: host_register).  The memory is the actor's, not the context's:
 * a rebuild drops the old context's registration and the actor registers
 * every region again in the new one, so pointers handed out stay valid
 * across dv_actor_reset.  Regions sit in an array sorted by address,
 * under a reader-writer lock: clients read it to tell a page-locked
 * buffer from a pageable one before they post a copy (dv__host_pinned),
 * the actor writes it when a region comes or goes (rare).
 *
 * Pool.  Requests up to 2 MiB are rounded to a class (4 KiB << 0..9) and
 * carved from 2 MiB slabs, one region each; larger ones get a region of
 * their own, rounded to 2 MiB, and a freed one is kept for reuse (up to
 * DV_HOST_CACHE_BYTES) before it is unmapped.  A buffer remembers where
 * copies used it (stream positions of the completion tracker, a few
 * streams' worth; past that, every stream's position at the free): a
 * freed buffer is pending until the device got past all of them, so the
 * pool never hands out memory a copy still reads or writes.
 *
 * Budget.  cfg.host_budget_bytes bounds the bytes of every region the
 * actor maps (pool and staging; not users' registered ranges): before
 * refusing, free cached large buffers and empty slabs are unmapped.
 *
 * Threads: everything here runs on the actor's thread, except
 * dv__host_pinned (any thread, read lock) and the statistics.
 */
#ifndef DV_ACTOR_HOST_H
#define DV_ACTOR_HOST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "resources/tracker.h"

#define DV_HOST_PAGE        4096u
#define DV_HOST_CLASSES     10 /* 4 KiB .. 2 MiB */
#define DV_HOST_SLAB_BYTES  (UINT64_C(2) << 20)
#define DV_HOST_USES        4
#define DV_HOST_CACHE_BYTES (UINT64_C(256) << 20)

struct dv_actor;
struct dv_future;
typedef struct dv_host_region dv_host_region;

enum dv_host_buf_state { DV_HB_FREE = 0, DV_HB_LIVE, DV_HB_PENDING };

typedef struct dv_host_buf {
    dv_host_region *region;
    struct dv_host_buf *next; /* on a free or pending list */
    uint64_t requested;       /* live: what was asked for */
    uint8_t state;            /* dv_host_buf_state */
    uint8_t nuse;
    bool everywhere;      /* used on more streams than use[] holds */
    dv_stream_pos *all;   /* pending and everywhere: every stream's position */
    dv_stream_pos use[DV_HOST_USES];
} dv_host_buf;

enum dv_host_region_kind {
    DV_HR_SLAB = 1, /* small buffers of one class */
    DV_HR_LARGE,    /* one buffer */
    DV_HR_USER,     /* a range of the caller's (dv_host_register) */
    DV_HR_STAGING,  /* the staging chunks and their flags */
};

struct dv_host_region {
    uintptr_t start;
    uint64_t bytes;
    uint8_t kind;  /* dv_host_region_kind */
    uint8_t cls;   /* a slab's class */
    bool pinned;   /* registered in the current context */
    uint32_t nused; /* a slab's buffers live or pending */
    dv_host_buf *bufs; /* a slab's, one per slot; LARGE and USER: one */
    struct dv_future *unregister; /* USER: the dv_host_unregister waiting */
};

typedef struct dv_hostmem {
    pthread_rwlock_t lock; /* regions[]: clients read, the actor writes */
    dv_host_region **regions;
    size_t nregions, cap;
    dv_host_buf *free[DV_HOST_CLASSES]; /* reusable now, last freed first */
    dv_host_buf *pending;               /* freed, copies maybe in flight */
    dv_host_buf *large_free;            /* reusable large buffers, kept */
    uint64_t large_cached;
    uint32_t unregistering; /* USER regions with a dv_host_unregister waiting */
    /* The actor writes, anyone reads. */
    atomic_uint_fast64_t bytes, peak, buffers, reserved, registered;
    atomic_uint_fast64_t total, reserved_peak, reserved_total; /* dv_memory_stats */
} dv_hostmem;

/* Init and teardown (the actor's creator and its destroy): teardown
 * unmaps every region the actor mapped; the driver must no longer hold
 * them (dv__host_unpin_all first). */
void dv__host_init(dv_hostmem *h);
void dv__host_fini(dv_hostmem *h);

/* Any thread: is [p, p + bytes) inside one pinned region of the pool or
 * a user's (not the staging)? */
bool dv__host_pinned(dv_hostmem *h, const void *p, uint64_t bytes);

/* Actor thread. */
/* Map and pin a region of the actor's (pool, staging), within the budget. */
int dv__host_region_new(struct dv_actor *a, uint64_t bytes, uint8_t kind, dv_host_region **out);
void dv__host_region_release(struct dv_actor *a, dv_host_region *r);
/* Register every region in the current context (after a rebuild; only a
 * fault of the context is an error) / unregister them (before the context
 * goes). */
int dv__host_pin_all(struct dv_actor *a);
void dv__host_unpin_all(struct dv_actor *a);
/* A copy just enqueued on stream s used [p, p + bytes): every pool buffer
 * and registered range it reaches remembers it, at a position marked on
 * s now (where the copy ends; none where it reaches nothing). */
void dv__host_used(struct dv_actor *a, const void *p, uint64_t bytes, dv_stream_id s);
/* The old context's positions mean nothing in the new one. */
void dv__host_forget_uses(struct dv_actor *a);
/* The device drained at a stop: answer the unregistrations still waiting,
 * unpin everything (the memory goes with dv__host_fini). */
void dv__host_stop(struct dv_actor *a);
/* Pending frees and unregistrations whose copies finished. */
void dv__host_sweep(struct dv_actor *a);
bool dv__host_has_work(const dv_hostmem *h);

struct dv_envelope;
void dv__handle_hostmem(struct dv_actor *a, const struct dv_envelope *e);

#endif /* DV_ACTOR_HOST_H */
