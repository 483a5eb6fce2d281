/*
 * devactor_resource.h -- the stream-ordered memory resources an actor
 * allocates through, and how to compose a stack of them or write one.
 *
 * An actor's memory comes from a stack of resources in the shape of RMM's
 * device_memory_resource.  At the bottom is the driver: the stream-ordered
 * allocator of devactor's own pool (cuMemAllocFromPoolAsync /
 * cuMemFreeAsync), or the synchronous one with cfg.direct_alloc.  Layers
 * over it:
 *
 *   pool      suballocates memory: over the bottom, memory it maps in place
 *             (virtual memory, where the device has it: address space
 *             reserved once, physical memory mapped where a request needs
 *             least, moved there from free mappings elsewhere once the
 *             pool holds the most it ever did, free mappings unmapped by
 *             a trim), elsewhere chunks from its
 *             upstream; exact size classes, good-fit bins with coalescing,
 *             per-stream free lists, reuse on another stream only behind
 *             the free; trimmed on request
 *   budget    a byte limit: past it, DV_EOUT_OF_BUDGET with requested and
 *             remaining bytes in the detail
 *   logging   a CSV row per allocate and free (the log of dv_actor_config)
 *   guard     canaries around each block checked on free, poison on free,
 *             a quarantine before reuse, double and unknown frees refused
 *   yours     dv_resource_adapt: your allocate and deallocate over an
 *             upstream, e.g. one that frees a cache of its own (spills)
 *             and tries again when the upstream refuses
 *
 * By default an actor builds bottom -> pool -> guard -> logging -> budget
 * from its dv_actor_config (pool, guard, log_path, budget_bytes).  With
 * cfg.stack set it calls that function instead, on its own thread, with
 * the bottom, at its start and again after every rebuild (dv_actor_reset,
 * a fault), and allocates through the top it returns.
 *
 * Every call here runs on the actor's thread: inside the stack function,
 * inside a resource's own allocate or deallocate, or inside the function
 * dv_actor_resources runs.  Elsewhere they answer DV_EINVAL and change
 * nothing.  Every block is ordered on a stream (its alloc stream); the
 * actor fences uses on other streams, and frees in its order.
 */
#ifndef DEVACTOR_RESOURCE_H
#define DEVACTOR_RESOURCE_H

#include "devactor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dv_resource dv_resource;

/* Who asked: a tag's name (interned by devactor: it lives for the
 * process) and the query it was posted under (dv_query_set). */
typedef struct dv_tag {
    const char *name;
    uint64_t query_id;
} dv_tag;

typedef enum dv_block_state {
    DV_BLOCK_LIVE = 1,    /* allocated, usable in alloc_stream order */
    DV_BLOCK_RETIRED,     /* deallocated, its free queued but not reached */
    DV_BLOCK_QUARANTINED, /* held back by the guard before reuse */
    DV_BLOCK_FREED,       /* gone */
} dv_block_state;

/* A block as a resource hands it out (64 bytes; fixed within a major
 * version).  The last fields are the resources' own: pass the block back
 * to the resource that made it unchanged. */
typedef struct dv_block {
    uint64_t ptr;        /* device address, aligned to 256 at least */
    uint64_t bytes;      /* usable bytes, >= requested */
    uint64_t requested;  /* what was asked for */
    uint64_t generation; /* unique in the process, never reused */
    dv_tag tag;
    uint16_t alloc_stream; /* the stream it is ordered on */
    uint16_t state;        /* a dv_block_state */
    uint32_t align;
    int device;
    uint32_t slot; /* the resource's */
} dv_block;

/* Ask r for bytes ordered on stream (0 < bytes <= 2^48), or give a block
 * back to the resource that made it (its free is ordered on its alloc
 * stream, after every use the actor fenced). */
DV_EXPORT int dv_resource_allocate(dv_resource *r, uint64_t bytes, dv_stream stream, dv_tag tag,
                                   dv_block *out);
DV_EXPORT int dv_resource_deallocate(dv_resource *r, dv_block *block);
/* Bytes r has handed out and not taken back (a pool: its live blocks;
 * the driver's allocator: frees not yet reached by the device count until
 * they are).  What a pool holds from the device: dv_resource_pool_stats. */
DV_EXPORT uint64_t dv_resource_bytes_outstanding(const dv_resource *r);
DV_EXPORT const char *dv_resource_name(const dv_resource *r);
/* The resource r allocates from (NULL at the bottom). */
DV_EXPORT dv_resource *dv_resource_upstream(const dv_resource *r);
/* Destroy r alone (not its upstream): blocks it still holds go back up
 * first.  For a stack function that fails part way: it destroys what it
 * made, top first, never the bottom it was given. */
DV_EXPORT void dv_resource_destroy(dv_resource *r);

/* ---- The layers ---- */

/* Chunk sizes given (non-zero) make the pool grow by chunks even over the
 * bottom; both 0: it maps in place where it can, chunks elsewhere. */
typedef struct dv_pool_options {
    uint64_t initial_chunk_bytes; /* the first chunk from upstream (0: 64 MiB) */
    uint64_t max_chunk_bytes;     /* chunks grow geometrically up to this (0: 1 GiB) */
    uint64_t max_pool_bytes;      /* 0: no limit beyond the upstream's */
} dv_pool_options;
/* opts may be NULL (the defaults).  The struct is fixed within a major
 * version. */
DV_EXPORT int dv_resource_pool(dv_resource *upstream, const dv_pool_options *opts,
                               dv_resource **out);
DV_EXPORT int dv_resource_budget(dv_resource *upstream, uint64_t limit_bytes, dv_resource **out);
/* The CSV log of dv_actor_config's log_path, to path (appended; the header
 * written into an empty file). */
DV_EXPORT int dv_resource_logging(dv_resource *upstream, const char *path, dv_resource **out);
DV_EXPORT int dv_resource_guard(dv_resource *upstream, dv_resource **out);

typedef struct dv_pool_stats {
    uint64_t chunk_bytes;   /* held from upstream */
    uint64_t free_bytes;    /* in chunks, not handed out */
    uint64_t stacked_bytes; /* of those, freed small blocks not coalesced yet */
    uint64_t largest_free;  /* the largest block it can give without growing */
    uint32_t chunks;
    double fragmentation; /* 1 - largest_free / free_bytes (0 when empty) */
    uint64_t peak_chunk_bytes; /* the most chunk_bytes has been (a trim keeps it) */
} dv_pool_stats;
/* A pool's statistics (size: the ABI rule of devactor.h).  DV_EINVAL for a
 * resource that is not a pool. */
DV_EXPORT int dv_resource_pool_stats_sized(dv_resource *pool, dv_pool_stats *out, size_t size);
#define dv_resource_pool_stats(pool, out)                                                          \
    dv_resource_pool_stats_sized((pool), (out), sizeof(*(out)))
/* A budget's limit and the bytes it counts now (live, and freed but not yet
 * reached by the device).  DV_EINVAL for a resource that is not a budget;
 * limit or used may be NULL. */
DV_EXPORT int dv_resource_budget_stats(const dv_resource *budget, uint64_t *limit, uint64_t *used);
/* Check the canaries of every block a guard holds, now: DV_OK, or
 * DV_EOUT_OF_BOUNDS for the first damaged one (the detail names its
 * generation and offset).  DV_EINVAL for a resource that is not a guard. */
DV_EXPORT int dv_resource_guard_check(dv_resource *guard);
/* Give back what r and every resource under it hold and do not use: a
 * guard's quarantine, a pool's empty chunks, the driver pool's free
 * memory.  *released (may be NULL): the bytes the pools let go. */
DV_EXPORT int dv_resource_trim(dv_resource *r, uint64_t *released);

/* ---- A resource of your own ---- */

/*
 * allocate and deallocate run on the actor's thread, for every allocation
 * and free that reaches this layer; self is yours.  A block must come from
 * upstream (dv_resource_allocate(upstream, ...)), and deallocate must give
 * it back there (dv_resource_deallocate(upstream, block)): what a layer
 * decides is when and what to ask, and what to do when upstream refuses --
 * free memory of its own and ask again, say.  An allocate answering DV_OK
 * without a block its upstream holds live (none, one given back, one
 * changed), with a block it answered with before that is still live (two
 * callers would share it; it stays the first's), with one asked for fewer
 * bytes than the request or on another stream (given back upstream), or
 * any answer that is not a dv_status, is refused with DV_EINVAL.  destroy (may be NULL) runs when
 * the layer goes (shutdown, a rebuild); blocks still live then are the actor's to free.
 */
typedef struct dv_resource_ops {
    const char *name;
    int (*allocate)(void *self, dv_resource *upstream, uint64_t bytes, dv_stream stream,
                    dv_tag tag, dv_block *out);
    int (*deallocate)(void *self, dv_resource *upstream, dv_block *block);
    void (*destroy)(void *self);
} dv_resource_ops;
DV_EXPORT int dv_resource_adapt(dv_resource *upstream, const dv_resource_ops *ops, void *self,
                                dv_resource **out);

/* ---- Stacks and actors ---- */

/* cfg.stack: build the stack over bottom and return its top (bottom itself
 * is fine; a top not built on this bottom -- another actor's -- is
 * refused with DV_EINVAL).  A failure's status fails the actor's start or
 * rebuild; an answer that is not a dv_status is DV_EINVAL. */
typedef int (*dv_stack_fn)(dv_resource *bottom, void *user, dv_resource **top);

/* Run fn(top of the stack, user) on the actor's thread, in the actor's
 * order, and return its status: read statistics, trim.  Blocking (a round
 * trip; DV_EDEADLK inside a task). */
DV_EXPORT int dv_actor_resources(dv_actor *actor, int (*fn)(dv_resource *top, void *user),
                                 void *user);

#ifdef __cplusplus
}
#endif

#endif /* DEVACTOR_RESOURCE_H */
