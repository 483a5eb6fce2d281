/*
 * Generational handles (dv_ref) for device blocks, usable from the moment
 * they are made.
 *
 * A dv_ref is a value: bits 63..56 the domain index (1..255, one domain
 * per actor), 55..32 the slot index in the domain, 31..0 the slot's
 * generation (never 0, so DV_REF_NULL is never valid).
 *
 * Design
 * ------
 * Domains live in a process-wide array and are never freed: an actor that
 * goes away leaves its domain GONE and returns it to a pool for a later
 * actor, so a thread holding an old handle can always read the domain and
 * the slot behind it without touching freed memory.  Slots live in chunks
 * that are allocated as the table grows and never move or go away.
 *
 * A slot has three parts, each in an array of its own, so that the thread
 * that uses a handle and the actor that serves it do not take each other's
 * cache lines on the hot path:
 *
 *   word   (generation << 32) | reference count: written by client threads
 *          only (mint, retain, release), always by compare-and-swap, so a
 *          handle to a reused slot can never change the new owner's count.
 *   pub    what the actor publishes for any thread (address, sizes,
 *          streams, context generation, the allocation's status), valid
 *          for the generation in `ready`: a seqlock, `ready` its sequence.
 *   slot   the actor's own (the resource stack's block).
 *
 * Minting (dv__ref_mint) is the client's: it takes a free slot from the
 * calling thread's cache (refilled from the domain's spare list under a
 * mutex, a batch at a time), moves the word to the next generation with
 * count 1, and the handle exists: *pending*, because pub.ready does not
 * name its generation yet.  The ALLOC message that follows carries it; the
 * actor settles it (dv__ref_settle: the block, or the allocation's
 * failure) and stores ready last.  A thread that must see the block
 * (dv_ref_access) waits for ready; asleep, on the domain's settle_seq,
 * which the actor bumps after each batch that settled a handle while
 * anyone sleeps.
 *
 * The actor decides what a handle means to operations from its own side
 * only (dv__ref_lookup): a slot it settled for that generation and has not
 * freed.  The count is the clients': the last release posts a FREE, which
 * the order rule puts after every operation posted before the release, so
 * an operation already posted never finds its handle freed under it.
 * Freed slots go to an actor-local list and back to the spare list in
 * batches.
 *
 * Who calls what: dv_ref_* (devactor.h) from any thread; dv__ref_mint and
 * dv__ref_unmint from a client thread with its cache; the rest only on the
 * domain's actor thread, except dv__ref_domain_state and _context (any).
 */
#ifndef DV_GPUREF_GPUREF_H
#define DV_GPUREF_GPUREF_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/fence.h"
#include "gpuref/cache.h"
#include "devactor.h"
#include "resources/resource.h"

#define DV_REF_MAX_DOMAINS 255u
#define DV_REF_CHUNK_SLOTS 4096u
#define DV_REF_MAX_SLOTS   (1u << 24)

typedef enum dv_domain_state {
    DV_DOMAIN_OPEN = 1, /* handles valid (subject to their own checks) */
    DV_DOMAIN_CLOSING,  /* the actor is shutting down: handles are stale */
    DV_DOMAIN_GONE,     /* the actor is gone */
    DV_DOMAIN_LOST,     /* the device is lost for the process */
} dv_domain_state;

/* What the actor publishes for a slot's generation `ready`. */
typedef struct dv_ref_pub {
    _Atomic uint32_t ready; /* the generation below describes; 0 while rewritten */
    _Atomic int32_t status; /* its allocation's: DV_OK, or the error */
    _Atomic uint64_t ptr, bytes, requested, block_generation, context_generation;
    _Atomic uint32_t alloc_stream, last_write_stream;
    _Atomic uint32_t exposed; /* the generation whose address was handed out */
} dv_ref_pub;

/* The actor's part of a slot. */
typedef struct dv_ref_slot {
    dv_block block;  /* the resource stack's block, when settled live */
    dv_ref_pub *pub; /* its published part */
    uint32_t gen;    /* the generation the actor holds it for; 0: free */
    uint32_t index;  /* its index in the domain */
    int32_t status;  /* DV_OK, or the allocation's failure */
    uint32_t poster; /* the kernel id of the thread that posted the allocation */
    uint64_t born;   /* when it was settled: CLOCK_REALTIME_COARSE, ns */
} dv_ref_slot;

/* The block's address was handed out (dv_ref_access, a task's resolved
 * argument): a raw pointer into it may be legitimate (the checker's use
 * after free rule). */
static inline void dv__ref_expose(dv_ref_pub *p, uint32_t gen)
{
    /* Relaxed: a post (a release) carries it to the actor. */
    if (atomic_load_explicit(&p->exposed, memory_order_relaxed) != gen)
        atomic_store_explicit(&p->exposed, gen, memory_order_relaxed);
}

/* Called by the thread whose release took the count to zero: post the
 * free to the actor.  Its result is returned by dv_ref_release. */
typedef int (*dv_ref_free_fn)(void *owner, dv_ref ref);

typedef struct dv_ref_domain dv_ref_domain;

/* A domain for an actor of device `device`: OPEN, context generation 1. */
int dv__ref_domain_open(void *owner, dv_ref_free_fn post_free, int device, dv_ref_domain **out);
/* The actor is gone: GONE, every handle stale, the domain back to the
 * pool with every slot spare.  Blocks still held must have been dropped
 * (dv__ref_invalidate_all) first. */
void dv__ref_domain_close(dv_ref_domain *d);
void dv__ref_domain_set_state(dv_ref_domain *d, dv_domain_state state);
dv_domain_state dv__ref_domain_state(const dv_ref_domain *d);
uint64_t dv__ref_domain_context(const dv_ref_domain *d);
uint8_t dv__ref_domain_index(const dv_ref_domain *d);

/* Client thread: a new pending handle, count 1.  DV_ENOMEM when the table
 * is full or the host is out of memory. */
int dv__ref_mint(dv_ref_domain *d, dv_ref_cache *cache, dv_ref *out);
/* Client thread: the handle's ALLOC could not be posted; forget it. */
void dv__ref_unmint(dv_ref_domain *d, dv_ref_cache *cache, dv_ref ref);

/* Actor: the handle's allocation succeeded (block) or failed (status,
 * with the calling thread's detail); publish it and wake its waiters.
 * NULL (never for a handle minted here) when ref does not name a slot
 * free on the actor's side. */
dv_ref_slot *dv__ref_settle(dv_ref_domain *d, dv_ref ref, const dv_block *block);
void dv__ref_settle_failed(dv_ref_domain *d, dv_ref ref, int status);
/*
 * Actor: the live slot of a handle given to this domain's actor, or NULL
 * with the detail set: DV_EINVAL for NULL or another domain's handle,
 * DV_ESTALE for a released, reused or older-context handle, and the
 * allocation's own status and detail when it failed.
 */
dv_ref_slot *dv__ref_lookup(dv_ref_domain *d, dv_ref ref, const char *op);
/* Actor: the slot a FREE names (settled live or failed), or NULL. */
dv_ref_slot *dv__ref_lookup_free(dv_ref_domain *d, dv_ref ref);
/* Actor: record the stream that last wrote the block. */
void dv__ref_set_last_write(dv_ref_slot *slot, dv_stream stream);
/* Actor: the block was freed (or its allocation failed and was
 * released): the slot is free again. */
void dv__ref_recycle(dv_ref_domain *d, dv_ref_slot *slot);
/* Actor: hand the slots recycled so far to the clients (once per batch). */
void dv__ref_flush_recycled(dv_ref_domain *d);
/* Actor: wake threads waiting for handles settled since the last call
 * (once per batch: one fence, not one per allocation). */
void dv__ref_wake_settled(dv_ref_domain *d);
/* Actor: a client went away; its reserved slots are spare again. */
void dv__ref_cache_return(dv_ref_domain *d, dv_ref_cache *cache);
/*
 * Actor, at a rebuild or shutdown: move the context generation on (every
 * handle goes stale at once), call drop(block, arg) for every slot settled
 * live (NULL drop: just forget them), and recycle every settled slot.
 */
void dv__ref_invalidate_all(dv_ref_domain *d, void (*drop)(dv_block *block, void *arg), void *arg);
/* Slots the actor holds (settled, not freed).  Any thread. */
uint64_t dv__ref_held(const dv_ref_domain *d);
/* Call fn for every slot holding a live block (the actor's thread). */
void dv__ref_each_live(dv_ref_domain *d, void (*fn)(const dv_ref_slot *slot, void *arg), void *arg);
/* The count word of ref's slot, or NULL (white-box tests of the limits). */
_Atomic uint64_t *dv__ref_word(dv_ref ref);
/* dv_ref_try_access for devactor's own look (any thread): the address is
 * not counted as handed out, the thread's error detail is left alone. */
int dv__ref_peek(dv_ref ref, dv_ref_info *info);

#endif /* DV_GPUREF_GPUREF_H */
