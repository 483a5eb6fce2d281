/*
 * The handle table (design: gpuref.h).
 *
 * Layout
 * ------
 * domains[1..255] are published once with a release store and never freed
 * or replaced; a closed domain goes on a LIFO pool (under pool_lock) and
 * comes back, chunks and free list included, from a later open.  Its slot
 * generations carry on from where they were, so a handle of the domain's
 * earlier life can never match a slot again (short of 2^32 recycles of
 * that one slot).
 *
 * A domain's chunks[] are published with a release store by the actor and
 * read with acquire loads by everyone; a NULL chunk is a stale handle.
 * A slot nobody minted yet reads (1 << 32) | 0: generation 1, count 0.
 *
 * Reading a slot from any thread (access, retain, release) is a seqlock
 * read with the word as the sequence: acquire-load the word, check it,
 * load the fields relaxed, an acquire fence, load the word again.  The
 * writer side is in mint: the word was moved to a new generation (by
 * recycle) before mint's release fence, and the fields are written after
 * it, so a reader that saw any new field value sees the new generation on
 * its second load (Boehm, "Can seqlocks get along with programming
 * language memory models?", 2012).  The second load compares the
 * generation and a non-zero count only: retain and release change the
 * count while the fields stay those of the same generation.
 *
 * While a slot is held its next_free (unused then) holds the slot's own
 * index + 1, so that recycle can push it without searching the chunks.
 *
 * The last release calls the domain's post_free.  An actor that goes away
 * must not be called after it is gone: a releaser raises the domain's
 * `posting` count before it reads the state, and close stores GONE before
 * it waits for `posting` to fall to zero (a Dekker handshake, sequentially
 * consistent on both sides).  So once close returns no thread is inside,
 * or will enter, the old owner's post_free.  Owners must therefore not let
 * post_free wait on the actor once it is stopping (a stopping actor answers
 * DV_ESHUTDOWN).
 */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuref/gpuref.h"

#define NCHUNKS (DV_REF_MAX_SLOTS / DV_REF_CHUNK_SLOTS)

#define REF_DOMAIN(bits) ((uint32_t)((bits) >> 56))
#define REF_SLOT(bits)   ((uint32_t)((bits) >> 32) & (DV_REF_MAX_SLOTS - 1u))
#define REF_GEN(bits)    ((uint32_t)(bits))

#define WORD(gen, count) (((uint64_t)(gen) << 32) | (uint32_t)(count))
#define WORD_GEN(word)   ((uint32_t)((word) >> 32))
#define WORD_COUNT(word) ((uint32_t)(word))

struct dv_ref_domain {
    /* Fixed once the domain is published in domains[]. */
    uint8_t index;
    /* Read by every access; written rarely (open, close, state, rebuild). */
    _Atomic int state;        /* dv_domain_state */
    _Atomic uint64_t context; /* the current context generation */
    _Atomic int device;       /* changes when the domain is reused */
    _Atomic(void *) owner;    /* read by the last releaser, see posting */
    _Atomic(dv_ref_free_fn) post_free;
    _Atomic(dv_ref_slot *) chunks[NCHUNKS];
    /* Releasers between the state check and post_free's return, one
     * counter per line and client threads spread over them
     * (dv__thread_shard): every last release moves one. */
    struct {
        _Alignas(64) _Atomic uint32_t n;
    } posting[DV_THREAD_SHARDS];
    /* The actor's, written at every mint and recycle: a line of its own. */
    _Alignas(64) _Atomic uint64_t held; /* read anywhere */
    /* Actor thread only (handed over through pool_lock on reuse). */
    uint32_t nchunks;
    uint32_t free_head; /* slot index + 1, 0 = empty */
    /* Under pool_lock. */
    bool pooled;
    dv_ref_domain *pool_next;
};

static _Atomic(dv_ref_domain *) domains[DV_REF_MAX_DOMAINS + 1];

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static dv_ref_domain *pool;   /* closed domains, LIFO */
static uint32_t domains_made; /* indices 1..domains_made are allocated */

/* ------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------ */

static const char *state_name(int state)
{
    switch (state) {
    case DV_DOMAIN_OPEN:
        return "open";
    case DV_DOMAIN_CLOSING:
        return "closing";
    case DV_DOMAIN_GONE:
        return "gone";
    case DV_DOMAIN_LOST:
        return "lost";
    }
    return "unknown";
}

/* dv__fail with the handle's generation in the detail. */
static int ref_fail(int status, const char *op, dv_ref ref, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static int ref_fail(int status, const char *op, dv_ref ref, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    dv__fail(status, op, "%s: handle %u:%u:%u %s", op, REF_DOMAIN(ref.bits), REF_SLOT(ref.bits),
             REF_GEN(ref.bits), msg);
    dv__detail()->generation = REF_GEN(ref.bits);
    return status;
}

static dv_ref_domain *domain_at(uint32_t index)
{
    if (index == 0 || index > DV_REF_MAX_DOMAINS)
        return NULL;
    /* Acquire: pairs with the release store in dv__ref_domain_open that
     * published the domain (its index and chunk array). */
    return atomic_load_explicit(&domains[index], memory_order_acquire);
}

static dv_ref_slot *slot_at(const dv_ref_domain *d, uint32_t index)
{
    /* Acquire: pairs with the release store in grow() that published the
     * chunk with its slots initialised. */
    dv_ref_slot *chunk =
        atomic_load_explicit(&d->chunks[index / DV_REF_CHUNK_SLOTS], memory_order_acquire);
    return chunk == NULL ? NULL : &chunk[index % DV_REF_CHUNK_SLOTS];
}

/*
 * The domain and slot of a handle for the any-thread calls: DV_EINVAL for
 * DV_REF_NULL or domain bits 0, DV_ESTALE for a domain or slot that does
 * not exist (such a handle was never minted, or not in this process).
 */
static int resolve(dv_ref ref, const char *op, dv_ref_domain **dp, dv_ref_slot **sp)
{
    if (ref.bits == 0)
        return dv__fail(DV_EINVAL, op, "%s: DV_REF_NULL", op);
    uint32_t di = REF_DOMAIN(ref.bits);
    if (di == 0)
        return ref_fail(DV_EINVAL, op, ref, "is malformed (domain 0)");
    dv_ref_domain *d = domain_at(di);
    if (d == NULL)
        return ref_fail(DV_ESTALE, op, ref, "names a domain never opened");
    dv_ref_slot *s = slot_at(d, REF_SLOT(ref.bits));
    if (s == NULL)
        return ref_fail(DV_ESTALE, op, ref, "names a slot beyond the table");
    *dp = d;
    *sp = s;
    return DV_OK;
}

/* Why a word does not hold a live handle of generation gen. */
static int stale_word(dv_ref ref, const char *op, uint64_t word)
{
    if (WORD_GEN(word) != REF_GEN(ref.bits))
        return ref_fail(DV_ESTALE, op, ref, "is stale: the slot is at generation %u",
                        WORD_GEN(word));
    return ref_fail(DV_ESTALE, op, ref, "is stale: released (count 0)");
}

static bool word_live(uint64_t word, dv_ref ref)
{
    return WORD_GEN(word) == REF_GEN(ref.bits) && WORD_COUNT(word) > 0;
}

/*
 * The checks after the word: the domain open and the slot minted in the
 * current context.  Then the acquire fence that orders the field load
 * before the caller's next load or CAS of the word; it pairs with the
 * release fence in dv__ref_mint.
 */
static int check_domain(const dv_ref_domain *d, const dv_ref_slot *s, dv_ref ref, const char *op)
{
    /* Acquire: pairs with the stores in set_state/open/close. */
    int state = atomic_load_explicit(&d->state, memory_order_acquire);
    if (state != DV_DOMAIN_OPEN)
        return ref_fail(DV_ESTALE, op, ref, "is stale: its domain is %s", state_name(state));
    /* Relaxed: a seqlock read, ordered by the fence below. */
    uint64_t minted = atomic_load_explicit(&s->context_generation, memory_order_relaxed);
    /* Acquire: pairs with the release store in dv__ref_invalidate_all. */
    uint64_t current = atomic_load_explicit(&d->context, memory_order_acquire);
    atomic_thread_fence(memory_order_acquire); /* pairs with mint's release fence */
    if (minted != current)
        return ref_fail(DV_ESTALE, op, ref,
                        "is stale: minted in context %llu, the device is at context %llu",
                        (unsigned long long)minted, (unsigned long long)current);
    return DV_OK;
}

/* ------------------------------------------------------------------------
 * Any thread
 * ------------------------------------------------------------------------ */

int dv_ref_access(dv_ref ref, dv_ref_info *info)
{
    static const char op[] = "ref_access";
    dv_ref_domain *d;
    dv_ref_slot *s;
    int rc;

    if ((rc = resolve(ref, op, &d, &s)) != DV_OK)
        return rc;
    /* Acquire: pairs with the release store in dv__ref_mint (the fields
     * of this generation were written before it). */
    uint64_t word = atomic_load_explicit(&s->word, memory_order_acquire);
    if (!word_live(word, ref))
        return stale_word(ref, op, word);
    /* Acquire: pairs with the stores in set_state/open/close. */
    int state = atomic_load_explicit(&d->state, memory_order_acquire);
    if (state != DV_DOMAIN_OPEN)
        return ref_fail(DV_ESTALE, op, ref, "is stale: its domain is %s", state_name(state));

    /* The seqlock read; the fields pair with mint's relaxed stores. */
    dv_ref_info got;
    got.ptr = atomic_load_explicit(&s->ptr, memory_order_relaxed);
    got.bytes = atomic_load_explicit(&s->bytes, memory_order_relaxed);
    got.requested = atomic_load_explicit(&s->requested, memory_order_relaxed);
    got.block_generation = atomic_load_explicit(&s->block_generation, memory_order_relaxed);
    got.context_generation = atomic_load_explicit(&s->context_generation, memory_order_relaxed);
    got.alloc_stream = atomic_load_explicit(&s->alloc_stream, memory_order_relaxed);
    /* Changes under a live handle (set_last_write): either value is right. */
    got.last_write_stream = atomic_load_explicit(&s->last_write_stream, memory_order_relaxed);
    /* Relaxed: set before the open's state store, read above with acquire. */
    got.device = atomic_load_explicit(&d->device, memory_order_relaxed);
    /* Acquire: pairs with the release store in dv__ref_invalidate_all. */
    uint64_t current = atomic_load_explicit(&d->context, memory_order_acquire);
    /* Acquire fence: pairs with the release fence in dv__ref_mint, so a
     * field written by a later mint shows the later generation below. */
    atomic_thread_fence(memory_order_acquire);
    /* Relaxed: ordered after the field loads by the fence above. */
    uint64_t again = atomic_load_explicit(&s->word, memory_order_relaxed);
    if (!word_live(again, ref))
        return stale_word(ref, op, again);
    if (got.context_generation != current)
        return ref_fail(DV_ESTALE, op, ref,
                        "is stale: minted in context %llu, the device is at context %llu",
                        (unsigned long long)got.context_generation, (unsigned long long)current);
    got.refcount = WORD_COUNT(again);
    if (info != NULL)
        *info = got;
    return DV_OK;
}

int dv_ref_retain(dv_ref ref)
{
    static const char op[] = "ref_retain";
    dv_ref_domain *d;
    dv_ref_slot *s;
    int rc;

    if ((rc = resolve(ref, op, &d, &s)) != DV_OK)
        return rc;
    /* Acquire: pairs with the release store in dv__ref_mint. */
    uint64_t word = atomic_load_explicit(&s->word, memory_order_acquire);
    for (;;) {
        if (!word_live(word, ref))
            return stale_word(ref, op, word);
        if ((rc = check_domain(d, s, ref, op)) != DV_OK)
            return rc;
        if (WORD_COUNT(word) == UINT32_MAX)
            return ref_fail(DV_EINVAL, op, ref, "cannot be retained: %u references", UINT32_MAX);
        /* Acquire on both paths: a failed CAS reloads the word, which the
         * next round checks as above (pairs with mint's release store). */
        if (atomic_compare_exchange_weak_explicit(&s->word, &word, word + 1, memory_order_acquire,
                                                  memory_order_acquire))
            return DV_OK;
    }
}

int dv_ref_release(dv_ref ref)
{
    static const char op[] = "ref_release";
    dv_ref_domain *d;
    dv_ref_slot *s;
    int rc;

    if ((rc = resolve(ref, op, &d, &s)) != DV_OK)
        return rc;
    /* Acquire: pairs with the release store in dv__ref_mint. */
    uint64_t word = atomic_load_explicit(&s->word, memory_order_acquire);
    for (;;) {
        if (!word_live(word, ref))
            return stale_word(ref, op, word);
        /* Released in any state, but not across a context rebuild. */
        /* Relaxed: a seqlock read, ordered by the fence below. */
        uint64_t minted = atomic_load_explicit(&s->context_generation, memory_order_relaxed);
        /* Acquire: pairs with the release store in dv__ref_invalidate_all. */
        uint64_t current = atomic_load_explicit(&d->context, memory_order_acquire);
        atomic_thread_fence(memory_order_acquire); /* pairs with mint's release fence */
        if (minted != current)
            return ref_fail(DV_ESTALE, op, ref,
                            "is stale: minted in context %llu, the device is at context %llu",
                            (unsigned long long)minted, (unsigned long long)current);
        /* acq_rel: release orders this owner's uses of the block before
         * the free; acquire makes every other owner's uses visible to the
         * last one, who posts the free (as for any reference count).  The
         * actor's acquire load in dv__ref_lookup_dead pairs with it. */
        if (atomic_compare_exchange_weak_explicit(&s->word, &word, word - 1, memory_order_acq_rel,
                                                  memory_order_acquire))
            break;
    }
    if (WORD_COUNT(word) > 1)
        return DV_OK;

    /* The last reference.  seq_cst both: the Dekker handshake with
     * dv__ref_domain_close's store of GONE and load of posting. */
    _Atomic uint32_t *posting = &d->posting[dv__thread_shard()].n;
    atomic_fetch_add_explicit(posting, 1, memory_order_seq_cst);
    rc = DV_OK;
    if (atomic_load_explicit(&d->state, memory_order_seq_cst) == DV_DOMAIN_OPEN) {
        /* Relaxed: written before the state store that opened the domain,
         * which the seq_cst load above acquired. */
        dv_ref_free_fn post = atomic_load_explicit(&d->post_free, memory_order_relaxed);
        void *owner = atomic_load_explicit(&d->owner, memory_order_relaxed);
        if (post != NULL)
            rc = post(owner, ref);
    }
    /* Release: pairs with the load of posting in dv__ref_domain_close. */
    atomic_fetch_sub_explicit(posting, 1, memory_order_release);
    return rc;
}

dv_domain_state dv__ref_domain_state(const dv_ref_domain *d)
{
    /* Acquire: pairs with the stores in set_state/open/close. */
    return (dv_domain_state)atomic_load_explicit(&d->state, memory_order_acquire);
}

uint64_t dv__ref_domain_context(const dv_ref_domain *d)
{
    /* Acquire: pairs with the release store in dv__ref_invalidate_all. */
    return atomic_load_explicit(&d->context, memory_order_acquire);
}

uint8_t dv__ref_domain_index(const dv_ref_domain *d)
{
    return d->index;
}

uint64_t dv__ref_held(const dv_ref_domain *d)
{
    /* Relaxed: a statistic; the actor is the only writer. */
    return atomic_load_explicit(&d->held, memory_order_relaxed);
}

/* ------------------------------------------------------------------------
 * Domains
 * ------------------------------------------------------------------------ */

int dv__ref_domain_open(void *owner, dv_ref_free_fn post_free, int device, dv_ref_domain **out)
{
    static const char op[] = "ref_domain_open";
    dv_ref_domain *d;

    if (out == NULL)
        return dv__fail(DV_EINVAL, op, "%s: NULL out", op);
    pthread_mutex_lock(&pool_lock);
    if ((d = pool) != NULL) {
        pool = d->pool_next;
        d->pool_next = NULL;
        d->pooled = false;
    } else if (domains_made < DV_REF_MAX_DOMAINS) {
        /* Aligned: its counters sit on lines of their own. */
        d = aligned_alloc(_Alignof(dv_ref_domain), (sizeof(*d) + 63) & ~(size_t)63);
        if (d != NULL)
            memset(d, 0, sizeof(*d));
        if (d == NULL) {
            pthread_mutex_unlock(&pool_lock);
            return dv__fail(DV_ENOMEM, op, "%s: no memory for a handle domain", op);
        }
        d->index = (uint8_t)++domains_made;
        atomic_init(&d->state, DV_DOMAIN_GONE);
        /* Release: pairs with the acquire load in domain_at. */
        atomic_store_explicit(&domains[d->index], d, memory_order_release);
    } else {
        pthread_mutex_unlock(&pool_lock);
        return dv__fail(DV_ENOMEM, op, "%s: all %u handle domains are open", op,
                        DV_REF_MAX_DOMAINS);
    }
    pthread_mutex_unlock(&pool_lock);

    /* Relaxed: published by the state store below. */
    atomic_store_explicit(&d->owner, owner, memory_order_relaxed);
    atomic_store_explicit(&d->post_free, post_free, memory_order_relaxed);
    atomic_store_explicit(&d->device, device, memory_order_relaxed);
    /* Every handle of the domain's earlier life is stale by its slot's
     * generation already (close recycled every slot); the context can
     * start again at 1, as the header promises. */
    atomic_store_explicit(&d->context, 1, memory_order_relaxed);
    /* seq_cst: a release for the stores above (pairs with the acquire and
     * seq_cst loads of state); seq_cst for dv_ref_release's handshake. */
    atomic_store_explicit(&d->state, DV_DOMAIN_OPEN, memory_order_seq_cst);
    *out = d;
    return DV_OK;
}

void dv__ref_domain_set_state(dv_ref_domain *d, dv_domain_state state)
{
    /* seq_cst: pairs with the loads of state (acquire in the readers,
     * seq_cst in dv_ref_release's handshake). */
    atomic_store_explicit(&d->state, (int)state, memory_order_seq_cst);
}

void dv__ref_domain_close(dv_ref_domain *d)
{
    if (d == NULL)
        return;
    /* Blocks still held should have been dropped by now; forget them so
     * that no handle of this life can be valid in the next. */
    if (dv__ref_held(d) != 0)
        dv__ref_invalidate_all(d, NULL, NULL);
    /* seq_cst store, then seq_cst load of posting: the Dekker handshake
     * with dv_ref_release (fetch_add of posting, then load of state). */
    atomic_store_explicit(&d->state, DV_DOMAIN_GONE, memory_order_seq_cst);
    for (unsigned i = 0; i < DV_THREAD_SHARDS; i++)
        while (atomic_load_explicit(&d->posting[i].n, memory_order_seq_cst) != 0)
            sched_yield();
    /* No releaser reads these any more (it would see GONE first). */
    atomic_store_explicit(&d->owner, NULL, memory_order_relaxed);
    atomic_store_explicit(&d->post_free, NULL, memory_order_relaxed);

    pthread_mutex_lock(&pool_lock);
    if (!d->pooled) {
        d->pooled = true;
        d->pool_next = pool;
        pool = d;
    }
    pthread_mutex_unlock(&pool_lock);
}

/* ------------------------------------------------------------------------
 * Actor thread
 * ------------------------------------------------------------------------ */

/* A new chunk, every slot at generation 1, pushed so that the lowest
 * index is popped first. */
static int grow(dv_ref_domain *d)
{
    static const char op[] = "ref_mint";
    uint32_t n = d->nchunks;

    if (n == NCHUNKS) /* (relaxed load of the device: for the message) */
        return dv__fail(DV_ENOMEM, op, "%s: the handle table of device %d is full (%u handles)", op,
                        atomic_load_explicit(&d->device, memory_order_relaxed), DV_REF_MAX_SLOTS);
    dv_ref_slot *chunk = calloc(DV_REF_CHUNK_SLOTS, sizeof(*chunk));
    if (chunk == NULL)
        return dv__fail(DV_ENOMEM, op, "%s: no memory for %u more handles", op, DV_REF_CHUNK_SLOTS);
    uint32_t base = n * DV_REF_CHUNK_SLOTS;
    for (uint32_t i = DV_REF_CHUNK_SLOTS; i-- > 0;) {
        dv_ref_slot *s = &chunk[i];
        atomic_init(&s->word, WORD(1, 0));
        atomic_init(&s->ptr, 0);
        atomic_init(&s->bytes, 0);
        atomic_init(&s->requested, 0);
        atomic_init(&s->block_generation, 0);
        atomic_init(&s->context_generation, 0);
        atomic_init(&s->alloc_stream, DV_STREAM_NONE);
        atomic_init(&s->last_write_stream, DV_STREAM_NONE);
        s->next_free = d->free_head;
        d->free_head = base + i + 1;
    }
    /* Release: pairs with the acquire load in slot_at. */
    atomic_store_explicit(&d->chunks[n], chunk, memory_order_release);
    d->nchunks = n + 1;
    return DV_OK;
}

int dv__ref_mint(dv_ref_domain *d, const dv_block *block, dv_ref *out)
{
    int rc;

    if (d == NULL || block == NULL || out == NULL)
        return dv__fail(DV_EINVAL, "ref_mint", "ref_mint: NULL domain, block or out");
    if (d->free_head == 0 && (rc = grow(d)) != DV_OK)
        return rc;
    uint32_t index = d->free_head - 1;
    dv_ref_slot *s = slot_at(d, index);
    d->free_head = s->next_free;

    /* Relaxed: a free slot's word is written by the actor only (no client
     * CAS succeeds on a count of 0). */
    uint32_t gen = WORD_GEN(atomic_load_explicit(&s->word, memory_order_relaxed));
    /* Release fence: pairs with the acquire fences of the readers (access,
     * retain, release): whoever reads a field stored below also sees the
     * word's move to this generation by recycle, which came before. */
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&s->ptr, block->ptr, memory_order_relaxed);
    atomic_store_explicit(&s->bytes, block->bytes, memory_order_relaxed);
    atomic_store_explicit(&s->requested, block->requested, memory_order_relaxed);
    atomic_store_explicit(&s->block_generation, block->generation, memory_order_relaxed);
    /* Relaxed load of the context: the actor is its only writer. */
    atomic_store_explicit(&s->context_generation,
                          atomic_load_explicit(&d->context, memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&s->alloc_stream, block->alloc_stream, memory_order_relaxed);
    atomic_store_explicit(&s->last_write_stream, DV_STREAM_NONE, memory_order_relaxed);
    s->block = *block;
    s->held = true;
    s->next_free = index + 1; /* the slot's own index while held */
    /* Release: pairs with the acquire loads of the word in access, retain,
     * release and lookup: the fields above are visible with count 1. */
    atomic_store_explicit(&s->word, WORD(gen, 1), memory_order_release);
    /* Relaxed load and store: the actor is the only writer. */
    atomic_store_explicit(&d->held, atomic_load_explicit(&d->held, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    out->bits = ((uint64_t)d->index << 56) | ((uint64_t)index << 32) | gen;
    return DV_OK;
}

dv_ref_slot *dv__ref_lookup(dv_ref_domain *d, dv_ref ref, const char *op)
{
    if (ref.bits == 0) {
        /* Relaxed load of the device: for the message. */
        dv__fail(DV_EINVAL, op, "%s: DV_REF_NULL given to device %d's actor", op,
                 atomic_load_explicit(&d->device, memory_order_relaxed));
        return NULL;
    }
    uint32_t di = REF_DOMAIN(ref.bits);
    if (di != d->index) {
        /* Relaxed loads of devices: for the message only. */
        int mine = atomic_load_explicit(&d->device, memory_order_relaxed);
        dv_ref_domain *other = domain_at(di);
        if (di == 0)
            ref_fail(DV_EINVAL, op, ref, "is malformed (domain 0)");
        else if (other != NULL && dv__ref_domain_state(other) != DV_DOMAIN_GONE)
            ref_fail(DV_EINVAL, op, ref, "of device %d given to device %d's actor",
                     atomic_load_explicit(&other->device, memory_order_relaxed), mine);
        else
            ref_fail(DV_EINVAL, op, ref, "of another domain (%u) given to device %d's actor", di,
                     mine);
        return NULL;
    }
    dv_ref_slot *s = slot_at(d, REF_SLOT(ref.bits));
    if (s == NULL) {
        ref_fail(DV_ESTALE, op, ref, "names a slot beyond the table");
        return NULL;
    }
    /* Acquire: pairs with the clients' CAS (a release that got here
     * first); the fields are the actor's own writes. */
    uint64_t word = atomic_load_explicit(&s->word, memory_order_acquire);
    if (!word_live(word, ref)) {
        stale_word(ref, op, word);
        return NULL;
    }
    /* Relaxed: the actor wrote both itself. */
    uint64_t minted = atomic_load_explicit(&s->context_generation, memory_order_relaxed);
    uint64_t current = atomic_load_explicit(&d->context, memory_order_relaxed);
    if (minted != current) {
        ref_fail(DV_ESTALE, op, ref,
                 "is stale: minted in context %llu, the device is at context %llu",
                 (unsigned long long)minted, (unsigned long long)current);
        return NULL;
    }
    return s;
}

dv_ref_slot *dv__ref_lookup_dead(dv_ref_domain *d, dv_ref ref)
{
    if (REF_DOMAIN(ref.bits) != d->index)
        return NULL;
    dv_ref_slot *s = slot_at(d, REF_SLOT(ref.bits));
    if (s == NULL || !s->held)
        return NULL;
    /* Acquire: pairs with the acq_rel CAS of the last dv_ref_release, so
     * every owner's use of the block happens before the actor frees it. */
    uint64_t word = atomic_load_explicit(&s->word, memory_order_acquire);
    if (WORD_GEN(word) != REF_GEN(ref.bits) || WORD_COUNT(word) != 0)
        return NULL;
    return s;
}

void dv__ref_set_last_write(dv_ref_slot *slot, dv_stream stream)
{
    /* Relaxed: a single value readers take as it is (see dv_ref_access). */
    atomic_store_explicit(&slot->last_write_stream, stream, memory_order_relaxed);
}

void dv__ref_recycle(dv_ref_domain *d, dv_ref_slot *slot)
{
    if (!slot->held)
        return;
    /* Relaxed: clients change only the count, never the generation. */
    uint32_t gen = WORD_GEN(atomic_load_explicit(&slot->word, memory_order_relaxed)) + 1;
    if (gen == 0)
        gen = 1;
    /* Release: pairs with the acquire loads of the word; a client CAS on
     * the old generation fails from here on.  Ordered before the next
     * mint's fields by mint's release fence. */
    atomic_store_explicit(&slot->word, WORD(gen, 0), memory_order_release);
    uint32_t index = slot->next_free - 1;
    slot->held = false;
    slot->next_free = d->free_head;
    d->free_head = index + 1;
    /* Relaxed load and store: the actor is the only writer. */
    atomic_store_explicit(&d->held, atomic_load_explicit(&d->held, memory_order_relaxed) - 1,
                          memory_order_relaxed);
}

void dv__ref_invalidate_all(dv_ref_domain *d, void (*drop)(dv_block *block, void *arg), void *arg)
{
    /* Relaxed load: the actor is the only writer.  Release store: pairs
     * with the acquire loads of the context in access, retain and release;
     * from here on every handle minted before is stale. */
    uint64_t context = atomic_load_explicit(&d->context, memory_order_relaxed);
    atomic_store_explicit(&d->context, context + 1, memory_order_release);
    for (uint32_t c = 0; c < d->nchunks; c++) {
        /* Relaxed: the actor published the chunk itself. */
        dv_ref_slot *chunk = atomic_load_explicit(&d->chunks[c], memory_order_relaxed);
        for (uint32_t i = 0; i < DV_REF_CHUNK_SLOTS; i++) {
            dv_ref_slot *s = &chunk[i];
            if (!s->held)
                continue;
            if (drop != NULL)
                drop(&s->block, arg);
            dv__ref_recycle(d, s);
        }
    }
}
