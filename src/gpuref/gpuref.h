/*
 * Generational handles (dv_ref) for device blocks.
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
 * Each slot has one 64-bit word, (generation << 32) | refcount, changed
 * only by compare-and-swap: retain and release check the generation and
 * the count in the same step, so a handle to a reused slot can never
 * change the new owner's count.  A count of 0 means the block is on its
 * way to being freed (or free); the slot's generation moves on only when
 * the actor recycles it.
 *
 * The rest of a slot (pointer, sizes, streams, context generation) is
 * written by the actor before it publishes the word with a release store,
 * and read by any thread between two acquire loads of the word: when the
 * word is unchanged, the fields read belong to that generation.
 *
 * Who calls what: dv_ref_access/retain/release (devactor.h) from any
 * thread; everything dv__ref_* below only on the domain's actor thread,
 * except dv__ref_domain_state and dv__ref_domain_context (any thread).
 */
#ifndef DV_GPUREF_GPUREF_H
#define DV_GPUREF_GPUREF_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/shard.h"
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

typedef struct dv_ref_slot {
    _Atomic uint64_t word; /* (generation << 32) | refcount */
    /* Published with the word (any thread reads them, see above). */
    _Atomic uint64_t ptr, bytes, requested, block_generation, context_generation;
    _Atomic uint32_t alloc_stream, last_write_stream;
    /* Actor thread only. */
    dv_block block;     /* the resource stack's block */
    bool held;          /* minted and not yet recycled */
    uint32_t next_free; /* free list, by slot index + 1 (0 = end) */
} dv_ref_slot;

/* Called by the thread whose release took the count to zero: post the
 * free to the actor.  Its result is returned by dv_ref_release. */
typedef int (*dv_ref_free_fn)(void *owner, dv_ref ref);

typedef struct dv_ref_domain dv_ref_domain;

/* A domain for an actor of device `device`: OPEN, context generation 1. */
int dv__ref_domain_open(void *owner, dv_ref_free_fn post_free, int device, dv_ref_domain **out);
/* The actor is gone: GONE, every handle stale, the domain back to the
 * pool.  Blocks still held must have been dropped (dv__ref_invalidate_all)
 * first. */
void dv__ref_domain_close(dv_ref_domain *d);
void dv__ref_domain_set_state(dv_ref_domain *d, dv_domain_state state);
dv_domain_state dv__ref_domain_state(const dv_ref_domain *d);
uint64_t dv__ref_domain_context(const dv_ref_domain *d);
uint8_t dv__ref_domain_index(const dv_ref_domain *d);

/* Mint a handle for block: refcount 1, the current context generation,
 * last write none.  DV_ENOMEM when the table is full. */
int dv__ref_mint(dv_ref_domain *d, const dv_block *block, dv_ref *out);
/*
 * The live slot of a handle given to this domain's actor: NULL with the
 * detail set when it is not: DV_EINVAL for NULL or another domain's handle,
 * DV_ESTALE for a released, reused or older-context handle.
 */
dv_ref_slot *dv__ref_lookup(dv_ref_domain *d, dv_ref ref, const char *op);
/* The slot of a handle whose count just reached zero and which the actor
 * has not recycled yet (the free message), or NULL. */
dv_ref_slot *dv__ref_lookup_dead(dv_ref_domain *d, dv_ref ref);
/* Record the stream that last wrote the block. */
void dv__ref_set_last_write(dv_ref_slot *slot, dv_stream stream);
/* The block was freed: move the generation on, back to the free list. */
void dv__ref_recycle(dv_ref_domain *d, dv_ref_slot *slot);
/*
 * Rebuild or shutdown: move the context generation on (every handle goes
 * stale at once), call drop(block, arg) for every slot still held, live or
 * dead (NULL drop: just forget them), and recycle them all.
 */
void dv__ref_invalidate_all(dv_ref_domain *d, void (*drop)(dv_block *block, void *arg), void *arg);
/* Slots held (minted, not recycled).  Any thread. */
uint64_t dv__ref_held(const dv_ref_domain *d);

#endif /* DV_GPUREF_GPUREF_H */
