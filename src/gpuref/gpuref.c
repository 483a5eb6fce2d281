/*
 * The handle table (design: gpuref.h).
 *
 * Layout
 * ------
 * domains[1..255] are published once with a release store and never freed
 * or replaced; a closed domain goes on a LIFO pool (under pool_lock) and
 * comes back, chunks included, from a later open.  Its slot generations
 * carry on from where they were, so a handle of the domain's earlier life
 * can never match a slot again (short of 2^32 mints of that one slot).
 *
 * A domain's chunks[] are published with a release store (by whichever
 * thread grew the table, under spare_mu) and read with acquire loads by
 * everyone; a NULL chunk is a stale handle.  A slot nobody minted yet has
 * word 0 (generation 0, never a handle's) and ready 0.
 *
 * Reading pub from any thread is a seqlock read with `ready` as the
 * sequence: acquire-load ready, load the fields relaxed, an acquire fence,
 * load ready again.  The actor writes ready = 0, a release fence, the
 * fields, then ready = generation with release (publish), so a reader that
 * saw any new field value sees ready move (Boehm, "Can seqlocks get along
 * with programming language memory models?", 2012).
 *
 * The last release calls the domain's post_free.  An actor that goes away
 * must not be called after it is gone: a releaser names the domain in a
 * hazard slot before it reads the state, and close stores GONE before it
 * waits until no thread names the domain (base/fence.h).  So once close
 * returns no thread is inside, or will enter, the old owner's post_free.  Owners must therefore not
 * let post_free wait on the actor once it is stopping (a stopping actor answers DV_ESHUTDOWN).
 */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/fence.h"
#include "base/assert.h"
#include "base/futex.h"
#include "base/proc.h"
#include "gpuref/gpuref.h"

#define CHUNK   DV_REF_CHUNK_SLOTS
#define NCHUNKS (DV_REF_MAX_SLOTS / CHUNK)
#define FAILS   256u /* allocation failures whose detail is kept */

#define REF_DOMAIN(bits) ((uint32_t)((bits) >> 56))
#define REF_SLOT(bits)   ((uint32_t)((bits) >> 32) & (DV_REF_MAX_SLOTS - 1u))
#define REF_GEN(bits)    ((uint32_t)(bits))

#define WORD(gen, count) (((uint64_t)(gen) << 32) | (uint32_t)(count))
#define WORD_GEN(word)   ((uint32_t)((word) >> 32))
#define WORD_COUNT(word) ((uint32_t)(word))

/* A waiter for a pending handle re-checks at least this often. */
#define SETTLE_RECHECK_NS 10000000u /* 10 ms */

typedef struct ref_chunk {
    _Atomic uint64_t word[CHUNK]; /* clients' */
    _Alignas(64) dv_ref_pub pub[CHUNK];
    dv_ref_slot slot[CHUNK]; /* the actor's */
} ref_chunk;

_Static_assert(sizeof(dv_ref_pub) <= 64, "a slot's published part fits a cache line");

typedef struct ref_failure {
    uint32_t index, gen;
    dv_error_detail detail;
} ref_failure;

struct dv_ref_domain {
    /* Fixed once the domain is published in domains[]. */
    uint8_t index;
    /* Read by every access; written rarely (open, close, state, rebuild). */
    _Atomic int state;         /* dv_domain_state */
    _Atomic uint64_t context;  /* the current context generation */
    _Atomic int device;        /* changes when the domain is reused */
    _Atomic uint32_t fork_gen; /* base/proc.h: the process it was opened in */
    _Atomic(void *) owner;     /* read by the last releaser (hazard slots) */
    _Atomic(dv_ref_free_fn) post_free;
    _Atomic(ref_chunk *) chunks[NCHUNKS];
    _Atomic uint32_t nchunks;
    /* Threads asleep on a pending handle: the actor wakes them (a bump of
     * settle_seq, their futex word) after a batch that settled any. */
    _Alignas(64) _Atomic uint32_t sleepers;
    _Atomic uint32_t settle_seq;
    /* The actor's, written at every settle and recycle. */
    _Alignas(64) _Atomic uint64_t held; /* read anywhere */
    bool settled;                       /* since the last dv__ref_wake_settled */
    uint32_t *recycled;                 /* freed, not yet spare */
    uint32_t nrecycled, cap_recycled;
    /* Free slots for the clients' caches. */
    _Alignas(64) pthread_mutex_t spare_mu;
    uint32_t *spare;
    uint32_t nspare, cap_spare;
    /* Allocation failures' details, by (slot, generation). */
    pthread_mutex_t fail_mu;
    ref_failure *fails;
    uint32_t fail_next;
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

static ref_chunk *chunk_of(const dv_ref_domain *d, uint32_t index)
{
    /* Acquire: pairs with the release store in grow() that published the
     * chunk with its slots initialised. */
    return atomic_load_explicit(&((dv_ref_domain *)d)->chunks[index / CHUNK], memory_order_acquire);
}

static dv_ref_slot *slot_at(const dv_ref_domain *d, uint32_t index)
{
    ref_chunk *c = chunk_of(d, index);
    return c == NULL ? NULL : &c->slot[index % CHUNK];
}

/*
 * The domain and chunk of a handle for the any-thread calls: DV_EINVAL for
 * DV_REF_NULL or a malformed handle (domain bits 0, or a domain no actor of
 * this process ever had: domains are never freed, so no handle had it),
 * DV_ESTALE for a slot that does not exist in the domain.
 */
static int resolve(dv_ref ref, const char *op, dv_ref_domain **dp, ref_chunk **cp)
{
    if (ref.bits == 0)
        return dv__fail(DV_EINVAL, op, "%s: DV_REF_NULL", op);
    uint32_t di = REF_DOMAIN(ref.bits);
    if (di == 0)
        return ref_fail(DV_EINVAL, op, ref, "is malformed (domain 0)");
    dv_ref_domain *d = domain_at(di);
    if (d == NULL)
        return ref_fail(DV_EINVAL, op, ref, "is malformed (a domain never opened)");
    if (REF_GEN(ref.bits) == 0) /* a slot never minted reads generation 0 too */
        return ref_fail(DV_ESTALE, op, ref, "names generation 0, which no handle has");
    /* Relaxed: it moves only in a child with one thread (base/proc.h). */
    if (atomic_load_explicit(&d->fork_gen, memory_order_relaxed) != dv__fork_now())
        return dv__forked(op);
    ref_chunk *c = chunk_of(d, REF_SLOT(ref.bits));
    if (c == NULL)
        return ref_fail(DV_ESTALE, op, ref, "names a slot beyond the table");
    *dp = d;
    *cp = c;
    return DV_OK;
}

/* Why a word does not hold a live handle of generation gen. */
static int stale_word(dv_ref ref, const char *op, uint64_t word)
{
    if (WORD_GEN(word) != REF_GEN(ref.bits))
        return ref_fail(DV_ESTALE, op, ref, "is stale: the slot is at generation %u",
                        WORD_GEN(word));
    return ref_fail(DV_ESTALE, op, ref,
                    "is stale: released (count 0), or dropped by a rebuild or a shutdown");
}

static bool word_live(uint64_t word, dv_ref ref)
{
    return WORD_GEN(word) == REF_GEN(ref.bits) && WORD_COUNT(word) > 0;
}

static int domain_open(const dv_ref_domain *d, dv_ref ref, const char *op)
{
    /* Acquire: pairs with the stores in set_state/open/close. */
    int state = atomic_load_explicit(&((dv_ref_domain *)d)->state, memory_order_acquire);
    if (state != DV_DOMAIN_OPEN)
        return ref_fail(DV_ESTALE, op, ref, "is stale: its domain is %s", state_name(state));
    return DV_OK;
}

/* The detail of a failed allocation, as the answer of op (any thread). */
static int alloc_failure(dv_ref_domain *d, dv_ref ref, int status, const char *op)
{
    uint32_t index = REF_SLOT(ref.bits), gen = REF_GEN(ref.bits);
    bool found = false;
    dv_error_detail detail;
    pthread_mutex_lock(&d->fail_mu);
    for (uint32_t i = 0; d->fails != NULL && i < FAILS; i++) {
        if (d->fails[i].index == index && d->fails[i].gen == gen) {
            detail = d->fails[i].detail;
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&d->fail_mu);
    if (!found)
        return ref_fail(status, op, ref, "was never allocated: %s", dv_strerror(status));
    dv_error_detail *out = dv__detail();
    *out = detail;
    snprintf(out->message, sizeof(out->message), "%s: the handle's allocation failed: %.180s", op,
             detail.message);
    out->call = op;
    return status;
}

/* ------------------------------------------------------------------------
 * Any thread
 * ------------------------------------------------------------------------ */

/* Wait until the actor settled ref's slot, or the handle went stale. */
static int wait_settled(dv_ref_domain *d, ref_chunk *c, dv_ref ref, const char *op)
{
    uint32_t i = REF_SLOT(ref.bits) % CHUNK, gen = REF_GEN(ref.bits);
    _Atomic uint32_t *ready = &c->pub[i].ready;
    /* The actor settles it: a thread that serves an actor must not wait. */
    int no = dv__no_wait(op);
    if (no != DV_OK)
        return no;
    for (int k = 0; k < 300 + 64; k++) {
        if (atomic_load_explicit(ready, memory_order_acquire) == gen)
            return DV_OK;
        if (k < 300)
            __builtin_ia32_pause();
        else
            sched_yield();
    }
    int rc = DV_OK;
    /* The handshake with dv__ref_wake_settled (its store of ready, its
     * light fence, then its load of sleepers): the store of sleepers, then
     * the heavy fence, then the loads of ready.  The actor settles many,
     * threads sleep on a pending handle rarely (base/fence.h). */
    atomic_fetch_add_explicit(&d->sleepers, 1, memory_order_seq_cst);
    dv__fence_heavy();
    for (;;) {
        uint32_t seq = atomic_load_explicit(&d->settle_seq, memory_order_seq_cst);
        if (atomic_load_explicit(ready, memory_order_seq_cst) == gen)
            break;
        uint64_t w = atomic_load_explicit(&c->word[i], memory_order_acquire);
        if (!word_live(w, ref)) {
            rc = stale_word(ref, op, w);
            break;
        }
        if ((rc = domain_open(d, ref, op)) != DV_OK)
            break;
        struct timespec deadline = dv__timespec_of(dv__now_ns() + SETTLE_RECHECK_NS);
        dv__futex_wait(&d->settle_seq, seq, &deadline);
    }
    atomic_fetch_sub_explicit(&d->sleepers, 1, memory_order_relaxed);
    return rc;
}

static int access_impl(dv_ref ref, dv_ref_info *info, bool wait, bool expose, const char *op)
{
    dv_ref_domain *d = NULL;
    ref_chunk *c = NULL;
    int rc;

    if ((rc = resolve(ref, op, &d, &c)) != DV_OK)
        return rc;
    uint32_t i = REF_SLOT(ref.bits) % CHUNK, gen = REF_GEN(ref.bits);
    const dv_ref_pub *p = &c->pub[i];
    for (;;) {
        /* Acquire: pairs with the CAS of the mint (the handle's own). */
        uint64_t word = atomic_load_explicit(&c->word[i], memory_order_acquire);
        if (!word_live(word, ref))
            return stale_word(ref, op, word);
        if ((rc = domain_open(d, ref, op)) != DV_OK)
            return rc;
        /* Acquire: pairs with publish's release store of ready. */
        if (atomic_load_explicit(&p->ready, memory_order_acquire) != gen) {
            if (!wait) {
                /* An expected answer, often asked: no formatting. */
                dv__fail_static(DV_EAGAIN, op,
                                "ref_try_access: the handle is pending: its allocation is not "
                                "handled yet");
                dv__detail()->generation = gen;
                return DV_EAGAIN;
            }
            if ((rc = wait_settled(d, c, ref, op)) != DV_OK)
                return rc;
            continue; /* settled: read it */
        }
        /* The seqlock read; the fields pair with publish's relaxed stores. */
        dv_ref_info got;
        int status = atomic_load_explicit(&p->status, memory_order_relaxed);
        got.ptr = atomic_load_explicit(&p->ptr, memory_order_relaxed);
        got.bytes = atomic_load_explicit(&p->bytes, memory_order_relaxed);
        got.requested = atomic_load_explicit(&p->requested, memory_order_relaxed);
        got.block_generation = atomic_load_explicit(&p->block_generation, memory_order_relaxed);
        got.context_generation = atomic_load_explicit(&p->context_generation, memory_order_relaxed);
        got.alloc_stream = atomic_load_explicit(&p->alloc_stream, memory_order_relaxed);
        /* Changes under a live handle (set_last_write): either value is right. */
        got.last_write_stream = atomic_load_explicit(&p->last_write_stream, memory_order_relaxed);
        /* Relaxed: set before the open's state store, read above with acquire. */
        got.device = atomic_load_explicit(&d->device, memory_order_relaxed);
        /* Acquire: pairs with the release store in dv__ref_invalidate_all. */
        uint64_t current = atomic_load_explicit(&d->context, memory_order_acquire);
        /* Acquire fence: pairs with publish's release fence, so a field
         * written by a later publish shows ready moved below. */
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&p->ready, memory_order_relaxed) != gen)
            continue; /* rewritten meanwhile: the word check above answers */
        uint64_t again = atomic_load_explicit(&c->word[i], memory_order_relaxed);
        if (!word_live(again, ref))
            return stale_word(ref, op, again);
        if (status != DV_OK)
            return alloc_failure(d, ref, status, op);
        if (got.context_generation != current)
            return ref_fail(DV_ESTALE, op, ref,
                            "is stale: minted in context %llu, the device is at context %llu",
                            (unsigned long long)got.context_generation,
                            (unsigned long long)current);
        got.refcount = WORD_COUNT(again);
        /* Without info the address is not handed out: nothing to note
         * (nor a store into the line the actor writes). */
        if (expose && info != NULL)
            dv__ref_expose((dv_ref_pub *)p, gen);
        if (info != NULL)
            *info = got;
        return DV_OK;
    }
}

int dv_ref_access(dv_ref ref, dv_ref_info *info)
{
    return access_impl(ref, info, true, true, "ref_access");
}

int dv_ref_try_access(dv_ref ref, dv_ref_info *info)
{
    return access_impl(ref, info, false, true, "ref_try_access");
}

int dv__ref_peek(dv_ref ref, dv_ref_info *info)
{
    dv_error_detail saved = *dv_last_error();
    int rc = access_impl(ref, info, false, false, "ref_peek");
    *dv__detail() = saved;
    return rc;
}

/*
 * Retain and release read the count word alone (the client's line): a
 * handle that was released for good, or dropped by a rebuild or a
 * shutdown (dv__ref_invalidate_all takes every count to 0), is stale.
 */
int dv_ref_retain(dv_ref ref)
{
    static const char op[] = "ref_retain";
    dv_ref_domain *d = NULL;
    ref_chunk *c = NULL;
    int rc;

    if ((rc = resolve(ref, op, &d, &c)) != DV_OK)
        return rc;
    _Atomic uint64_t *w = &c->word[REF_SLOT(ref.bits) % CHUNK];
    /* Acquire: pairs with the mint's CAS. */
    uint64_t word = atomic_load_explicit(w, memory_order_acquire);
    for (;;) {
        if (!word_live(word, ref))
            return stale_word(ref, op, word);
        if ((rc = domain_open(d, ref, op)) != DV_OK)
            return rc;
        if (WORD_COUNT(word) == UINT32_MAX)
            return ref_fail(DV_EINVAL, op, ref, "cannot be retained: %u references", UINT32_MAX);
        /* Acquire on both paths: a failed CAS reloads the word, which the
         * next round checks as above. */
        if (atomic_compare_exchange_weak_explicit(w, &word, word + 1, memory_order_acquire,
                                                  memory_order_acquire))
            return DV_OK;
    }
}

int dv_ref_release(dv_ref ref)
{
    static const char op[] = "ref_release";
    dv_ref_domain *d = NULL;
    ref_chunk *c = NULL;
    int rc;

    if ((rc = resolve(ref, op, &d, &c)) != DV_OK)
        return rc;
    _Atomic uint64_t *w = &c->word[REF_SLOT(ref.bits) % CHUNK];
    /* Acquire: pairs with the mint's CAS. */
    uint64_t word = atomic_load_explicit(w, memory_order_acquire);
    for (;;) {
        if (!word_live(word, ref))
            return stale_word(ref, op, word);
        /* Released in any state of the domain (a rebuild took the count
         * of its handles to 0 already).  acq_rel: release orders this owner's uses of the block
         * before the free; acquire makes every other owner's uses visible to the last one, who
         * posts the free (as for any reference count). */
        if (atomic_compare_exchange_weak_explicit(w, &word, word - 1, memory_order_acq_rel,
                                                  memory_order_acquire))
            break;
    }
    if (WORD_COUNT(word) > 1)
        return DV_OK;

    /* The last reference: the handshake with dv__ref_domain_close. */
    dv_hazards *hz = dv__hazards_mine();
    if (!dv__hazard_set(hz, d))
        return dv__fail(DV_ENOMEM, op, "%s: out of host memory for the thread's state", op);
    rc = DV_OK;
    /* After the hazard's fence; acquire: pairs with the store that opened
     * the domain, so owner and post_free are this life's. */
    if (atomic_load_explicit(&d->state, memory_order_acquire) == DV_DOMAIN_OPEN) {
        dv_ref_free_fn post = atomic_load_explicit(&d->post_free, memory_order_relaxed);
        void *owner = atomic_load_explicit(&d->owner, memory_order_relaxed);
        if (post != NULL)
            rc = post(owner, ref);
    }
    dv__hazard_clear(hz);
    return rc;
}

dv_domain_state dv__ref_domain_state(const dv_ref_domain *d)
{
    /* Acquire: pairs with the stores in set_state/open/close. */
    return (dv_domain_state)atomic_load_explicit(&((dv_ref_domain *)d)->state,
                                                 memory_order_acquire);
}

uint64_t dv__ref_domain_context(const dv_ref_domain *d)
{
    /* Acquire: pairs with the release store in dv__ref_invalidate_all. */
    return atomic_load_explicit(&((dv_ref_domain *)d)->context, memory_order_acquire);
}

uint8_t dv__ref_domain_index(const dv_ref_domain *d)
{
    return d->index;
}

uint64_t dv__ref_held(const dv_ref_domain *d)
{
    /* Relaxed: a statistic; the actor is the only writer. */
    return atomic_load_explicit(&((dv_ref_domain *)d)->held, memory_order_relaxed);
}

/* ------------------------------------------------------------------------
 * Minting (client threads)
 * ------------------------------------------------------------------------ */

/* A new chunk, every slot spare, pushed so the lowest index pops first
 * (under spare_mu). */
static int grow(dv_ref_domain *d)
{
    static const char op[] = "alloc";
    uint32_t n = atomic_load_explicit(&d->nchunks, memory_order_relaxed);

    if (n == NCHUNKS) /* (relaxed load of the device: for the message) */
        return dv__fail(DV_ENOMEM, op, "%s: the handle table of device %d is full (%u handles)", op,
                        atomic_load_explicit(&d->device, memory_order_relaxed), DV_REF_MAX_SLOTS);
    if (dv__array_reserve((void **)&d->spare, &d->cap_spare, (uint64_t)(n + 1) * CHUNK,
                          sizeof(*d->spare)) != 0)
        return dv__fail(DV_ENOMEM, op, "%s: no memory for %u more handles", op, CHUNK);
    ref_chunk *chunk = aligned_alloc(64, (sizeof(ref_chunk) + 63) & ~(size_t)63);
    if (chunk == NULL)
        return dv__fail(DV_ENOMEM, op, "%s: no memory for %u more handles", op, CHUNK);
    memset(chunk, 0, sizeof(*chunk));
    uint32_t base = n * CHUNK;
    for (uint32_t i = 0; i < CHUNK; i++) {
        chunk->slot[i].pub = &chunk->pub[i];
        chunk->slot[i].index = base + i;
    }
    for (uint32_t i = CHUNK; i-- > 0;)
        d->spare[d->nspare++] = base + i;
    /* Release: pairs with the acquire load in chunk_of. */
    atomic_store_explicit(&d->chunks[n], chunk, memory_order_release);
    atomic_store_explicit(&d->nchunks, n + 1, memory_order_release);
    return DV_OK;
}

static int refill(dv_ref_domain *d, dv_ref_cache *cache)
{
    int rc = DV_OK;
    pthread_mutex_lock(&d->spare_mu);
    if (d->nspare == 0)
        rc = grow(d);
    /* The top of the spare list (freed last, likely still in cache) ends
     * on top of the thread's cache, so it is minted first. */
    uint32_t k = 0;
    while (rc == DV_OK && k < d->nspare && cache->n + k < DV_REF_CACHE_FILL)
        k++;
    for (uint32_t i = 0; i < k; i++)
        cache->idx[cache->n + k - 1 - i] = d->spare[d->nspare - 1 - i];
    d->nspare -= k;
    cache->n += k;
    pthread_mutex_unlock(&d->spare_mu);
    return rc;
}

int dv__ref_mint(dv_ref_domain *d, dv_ref_cache *cache, dv_ref *out)
{
    int rc;
    if (cache->n == 0 && (rc = refill(d, cache)) != DV_OK)
        return rc;
    uint32_t index = cache->idx[--cache->n];
    _Atomic uint64_t *w = &chunk_of(d, index)->word[index % CHUNK];
    /* A plain store, no read-modify-write: the slot is spare, its count 0,
     * and every CAS on a word expects a count above 0 (word_live), so no
     * stale holder can change it meanwhile.  Only this thread minted from
     * it since it became spare.  Release: the handle reaches other threads
     * (and the actor) through posts and the caller's own hand-over; this
     * orders the new generation before them. */
    uint32_t gen = WORD_GEN(atomic_load_explicit(w, memory_order_relaxed)) + 1;
    uint64_t next = WORD(gen != 0 ? gen : 1, 1);
    atomic_store_explicit(w, next, memory_order_release);
    out->bits = ((uint64_t)d->index << 56) | ((uint64_t)index << 32) | WORD_GEN(next);
    return DV_OK;
}

static void spare_push(dv_ref_domain *d, const uint32_t *idx, uint32_t n)
{
    pthread_mutex_lock(&d->spare_mu);
    /* Room was reserved for every slot when its chunk was made. */
    dv_assert(d->nspare + n <= d->cap_spare);
    memcpy(d->spare + d->nspare, idx, (size_t)n * sizeof(*idx));
    d->nspare += n;
    pthread_mutex_unlock(&d->spare_mu);
}

void dv__ref_unmint(dv_ref_domain *d, dv_ref_cache *cache, dv_ref ref)
{
    uint32_t index = REF_SLOT(ref.bits);
    _Atomic uint64_t *w = &chunk_of(d, index)->word[index % CHUNK];
    uint64_t mine = WORD(REF_GEN(ref.bits), 1);
    /* Only this thread knows the handle: the CAS fails only if a reset of
     * the domain gave the slot to someone else meanwhile. */
    if (!atomic_compare_exchange_strong_explicit(w, &mine, WORD(REF_GEN(ref.bits), 0),
                                                 memory_order_relaxed, memory_order_relaxed))
        return;
    if (cache->n < DV_REF_CACHE)
        cache->idx[cache->n++] = index;
    else
        spare_push(d, &index, 1);
}

/* ------------------------------------------------------------------------
 * Domains
 * ------------------------------------------------------------------------ */

int dv__ref_domain_open(void *owner, dv_ref_free_fn post_free, int device, dv_ref_domain **out)
{
    static const char op[] = "ref_domain_open";
    dv_ref_domain *d = NULL;

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
        pthread_mutex_init(&d->spare_mu, NULL);
        pthread_mutex_init(&d->fail_mu, NULL);
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
    atomic_store_explicit(&d->fork_gen, dv__fork_now(), memory_order_relaxed);
    /* Every handle of the domain's earlier life is stale by its slot's
     * generation already (minting moves it on); the context can start
     * again at 1, as the header promises. */
    atomic_store_explicit(&d->context, 1, memory_order_relaxed);
    /* seq_cst: a release for the stores above (pairs with the acquire
     * loads of state). */
    atomic_store_explicit(&d->state, DV_DOMAIN_OPEN, memory_order_seq_cst);
    *out = d;
    return DV_OK;
}

void dv__ref_domain_set_state(dv_ref_domain *d, dv_domain_state state)
{
    /* seq_cst: pairs with the acquire loads of state; a store of the
     * handshake with dv_ref_release (hazard slots) when it closes. */
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
    /* The handshake with dv_ref_release (its hazard slot, then the state). */
    atomic_store_explicit(&d->state, DV_DOMAIN_GONE, memory_order_seq_cst);
    dv__hazard_wait(d);
    /* No releaser reads these any more (it would see GONE first). */
    atomic_store_explicit(&d->owner, NULL, memory_order_relaxed);
    atomic_store_explicit(&d->post_free, NULL, memory_order_relaxed);

    /* Every slot is spare for the next life: threads' caches of this one
     * belonged to clients of an inbox that is gone. */
    pthread_mutex_lock(&d->spare_mu);
    uint32_t n = atomic_load_explicit(&d->nchunks, memory_order_relaxed);
    d->nspare = 0;
    for (uint32_t i = n * CHUNK; i-- > 0;)
        d->spare[d->nspare++] = i;
    pthread_mutex_unlock(&d->spare_mu);
    d->nrecycled = 0;
    pthread_mutex_lock(&d->fail_mu);
    free(d->fails);
    d->fails = NULL;
    d->fail_next = 0;
    pthread_mutex_unlock(&d->fail_mu);

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

static inline void held_add(dv_ref_domain *d, int delta)
{
    /* Relaxed load and store: the actor is the only writer. */
    atomic_store_explicit(&d->held,
                          atomic_load_explicit(&d->held, memory_order_relaxed) + (uint64_t)delta,
                          memory_order_relaxed);
}

/* Publish what the slot's generation gen is (the seqlock's writer side). */
static void publish(dv_ref_domain *d, dv_ref_slot *s, uint32_t gen, int status)
{
    dv_ref_pub *p = s->pub;
    const dv_block *b = &s->block;
    atomic_store_explicit(&p->ready, 0, memory_order_relaxed);
    /* Release fence: pairs with the readers' acquire fence: whoever reads
     * a field stored below sees ready move from the value it read first. */
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&p->status, status, memory_order_relaxed);
    atomic_store_explicit(&p->ptr, status == DV_OK ? b->ptr : 0, memory_order_relaxed);
    atomic_store_explicit(&p->bytes, status == DV_OK ? b->bytes : 0, memory_order_relaxed);
    atomic_store_explicit(&p->requested, status == DV_OK ? b->requested : 0, memory_order_relaxed);
    atomic_store_explicit(&p->block_generation, status == DV_OK ? b->generation : 0,
                          memory_order_relaxed);
    /* Relaxed load of the context: the actor is its only writer. */
    atomic_store_explicit(&p->context_generation,
                          atomic_load_explicit(&d->context, memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&p->alloc_stream, status == DV_OK ? b->alloc_stream : DV_STREAM_NONE,
                          memory_order_relaxed);
    atomic_store_explicit(&p->last_write_stream, DV_STREAM_NONE, memory_order_relaxed);
    /* Release: pairs with the readers' acquire loads of ready. */
    atomic_store_explicit(&p->ready, gen, memory_order_release);
    d->settled = true; /* its waiters are woken after the batch */
}

void dv__ref_wake_settled(dv_ref_domain *d)
{
    if (!d->settled)
        return;
    d->settled = false;
    /* The light fence, then the sleepers: the handshake with wait_settled
     * (its add, its heavy fence, then its loads of ready). */
    dv__fence_light();
    if (atomic_load_explicit(&d->sleepers, memory_order_relaxed) > 0) {
        atomic_fetch_add_explicit(&d->settle_seq, 1, memory_order_seq_cst);
        dv__futex_wake_all(&d->settle_seq);
    }
}

/* The actor's slot a handle of this domain names, or NULL. */
static dv_ref_slot *own_slot(dv_ref_domain *d, dv_ref ref)
{
    if (REF_DOMAIN(ref.bits) != d->index || REF_GEN(ref.bits) == 0)
        return NULL;
    return slot_at(d, REF_SLOT(ref.bits));
}

dv_ref_slot *dv__ref_settle(dv_ref_domain *d, dv_ref ref, const dv_block *block)
{
    dv_ref_slot *s = own_slot(d, ref);
    dv_assert_internal(s != NULL && s->gen == 0);
    if (s == NULL || s->gen != 0)
        return NULL;
    s->gen = REF_GEN(ref.bits);
    s->status = DV_OK;
    s->block = *block;
    publish(d, s, s->gen, DV_OK);
    held_add(d, 1);
    return s;
}

void dv__ref_settle_failed(dv_ref_domain *d, dv_ref ref, int status)
{
    dv_ref_slot *s = own_slot(d, ref);
    dv_assert_internal(s != NULL && s->gen == 0 && status != DV_OK);
    if (s == NULL || s->gen != 0)
        return;
    pthread_mutex_lock(&d->fail_mu);
    if (d->fails == NULL)
        d->fails = calloc(FAILS, sizeof(*d->fails));
    if (d->fails != NULL) {
        ref_failure *f = &d->fails[d->fail_next++ % FAILS];
        f->index = s->index;
        f->gen = REF_GEN(ref.bits);
        f->detail = *dv_last_error();
        f->detail.status = status;
    }
    pthread_mutex_unlock(&d->fail_mu);
    s->gen = REF_GEN(ref.bits);
    s->status = status;
    memset(&s->block, 0, sizeof(s->block));
    publish(d, s, s->gen, status);
    held_add(d, 1);
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
        else if (other != NULL && (dv__ref_domain_state(other) == DV_DOMAIN_GONE ||
                                   dv__ref_domain_state(other) == DV_DOMAIN_CLOSING))
            ref_fail(DV_ESTALE, op, ref, "is stale: its actor shut down");
        else if (other != NULL)
            ref_fail(DV_EINVAL, op, ref, "of device %d given to device %d's actor",
                     atomic_load_explicit(&other->device, memory_order_relaxed), mine);
        else
            ref_fail(DV_EINVAL, op, ref, "of another domain (%u) given to device %d's actor", di,
                     mine);
        return NULL;
    }
    ref_chunk *c = chunk_of(d, REF_SLOT(ref.bits));
    if (c == NULL) {
        ref_fail(DV_ESTALE, op, ref, "names a slot beyond the table");
        return NULL;
    }
    if (REF_GEN(ref.bits) == 0) { /* a free slot's generation: never a handle's */
        ref_fail(DV_ESTALE, op, ref, "names generation 0, which no handle has");
        return NULL;
    }
    dv_ref_slot *s = &c->slot[REF_SLOT(ref.bits) % CHUNK];
    if (s->gen != REF_GEN(ref.bits)) {
        /* Acquire: pairs with the mint's CAS (for the message). */
        uint64_t word =
            atomic_load_explicit(&c->word[REF_SLOT(ref.bits) % CHUNK], memory_order_acquire);
        if (word_live(word, ref))
            ref_fail(DV_ESTALE, op, ref, "is stale: from before the context was rebuilt");
        else
            stale_word(ref, op, word);
        return NULL;
    }
    if (s->status != DV_OK) {
        alloc_failure(d, ref, s->status, op);
        return NULL;
    }
    return s;
}

dv_ref_slot *dv__ref_lookup_free(dv_ref_domain *d, dv_ref ref)
{
    dv_ref_slot *s = own_slot(d, ref);
    return s != NULL && s->gen == REF_GEN(ref.bits) ? s : NULL;
}

void dv__ref_set_last_write(dv_ref_slot *slot, dv_stream stream)
{
    /* Relaxed: a single value readers take as it is (see dv_ref_access). */
    atomic_store_explicit(&slot->pub->last_write_stream, stream, memory_order_relaxed);
}

void dv__ref_recycle(dv_ref_domain *d, dv_ref_slot *slot)
{
    if (slot->gen == 0)
        return;
    slot->gen = 0;
    slot->status = DV_OK;
    if (dv__array_reserve((void **)&d->recycled, &d->cap_recycled, (uint64_t)d->nrecycled + 1,
                          sizeof(*d->recycled)) == 0)
        d->recycled[d->nrecycled++] = slot->index;
    else
        spare_push(d, &slot->index, 1);
    held_add(d, -1);
}

void dv__ref_flush_recycled(dv_ref_domain *d)
{
    if (d->nrecycled == 0)
        return;
    spare_push(d, d->recycled, d->nrecycled);
    d->nrecycled = 0;
}

void dv__ref_cache_return(dv_ref_domain *d, dv_ref_cache *cache)
{
    if (cache->n > 0)
        spare_push(d, cache->idx, cache->n);
    cache->n = 0;
}

void dv__ref_invalidate_all(dv_ref_domain *d, void (*drop)(dv_block *block, void *arg), void *arg)
{
    /* Relaxed load: the actor is the only writer.  Release store: pairs
     * with the acquire loads of the context in access, retain and release;
     * from here on every handle settled before is stale. */
    uint64_t context = atomic_load_explicit(&d->context, memory_order_relaxed);
    atomic_store_explicit(&d->context, context + 1, memory_order_release);
    uint32_t n = atomic_load_explicit(&d->nchunks, memory_order_acquire);
    for (uint32_t k = 0; k < n; k++) {
        ref_chunk *c = chunk_of(d, k * CHUNK);
        for (uint32_t i = 0; i < CHUNK; i++) {
            dv_ref_slot *s = &c->slot[i];
            if (s->gen == 0)
                continue;
            /* Handles of it may still be held: their count goes to 0, so
             * they read stale from now on (also once the domain starts
             * again at context 1), and their releases free nothing. */
            _Atomic uint64_t *w = &c->word[i];
            uint64_t word = atomic_load_explicit(w, memory_order_relaxed);
            while (WORD_GEN(word) == s->gen && WORD_COUNT(word) != 0 &&
                   !atomic_compare_exchange_weak_explicit(
                       w, &word, WORD(s->gen, 0), memory_order_release, memory_order_relaxed))
                ;
            if (drop != NULL && s->status == DV_OK)
                drop(&s->block, arg);
            dv__ref_recycle(d, s);
        }
    }
    dv__ref_flush_recycled(d);
}

void dv__ref_each_live(dv_ref_domain *d, void (*fn)(const dv_ref_slot *slot, void *arg), void *arg)
{
    uint32_t n = atomic_load_explicit(&d->nchunks, memory_order_acquire);
    for (uint32_t k = 0; k < n; k++) {
        ref_chunk *c = chunk_of(d, k * CHUNK);
        for (uint32_t i = 0; i < CHUNK; i++) {
            const dv_ref_slot *s = &c->slot[i];
            if (s->gen != 0 && s->status == DV_OK && s->block.state == DV_BLOCK_LIVE)
                fn(s, arg);
        }
    }
}

_Atomic uint64_t *dv__ref_word(dv_ref ref)
{
    dv_ref_domain *d = domain_at(REF_DOMAIN(ref.bits));
    ref_chunk *c = d != NULL ? chunk_of(d, REF_SLOT(ref.bits)) : NULL;
    return c != NULL ? &c->word[REF_SLOT(ref.bits) % CHUNK] : NULL;
}
