/*
 * Page-locked host memory: regions, the pool behind dv_host_alloc, and
 * registered ranges (host.h has the design).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "actor/actor.h"

static const char *const kind_names[] = {
    [DV_HR_SLAB] = "pool", [DV_HR_LARGE] = "pool", [DV_HR_USER] = "registered",
    [DV_HR_STAGING] = "staging"};

void dv__host_init(dv_hostmem *h)
{
    memset(h, 0, sizeof(*h));
    pthread_rwlock_init(&h->lock, NULL);
}

static uint64_t slots_of(const dv_host_region *r)
{
    return r->kind == DV_HR_SLAB ? r->bytes >> (12 + r->cls) : 1;
}

static void region_free(dv_host_region *r)
{
    if (r->kind != DV_HR_USER)
        munmap((void *)r->start, r->bytes);
    for (uint64_t i = 0; r->bufs != NULL && i < slots_of(r); i++)
        free(r->bufs[i].all);
    free(r->bufs);
    free(r);
}

void dv__host_fini(dv_hostmem *h)
{
    for (size_t i = 0; i < h->nregions; i++)
        region_free(h->regions[i]);
    free(h->regions);
    pthread_rwlock_destroy(&h->lock);
    memset(h, 0, sizeof(*h));
}

/* ------------------------------------------------------------------------
 * The region table
 * ------------------------------------------------------------------------ */

/* Index of the first region starting above p. */
static size_t upper_bound(const dv_hostmem *h, uintptr_t p)
{
    size_t lo = 0, hi = h->nregions;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (h->regions[mid]->start <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The region holding p, or NULL.  The actor's thread, or under the lock. */
static dv_host_region *region_at(const dv_hostmem *h, uintptr_t p)
{
    size_t i = upper_bound(h, p);
    if (i == 0)
        return NULL;
    dv_host_region *r = h->regions[i - 1];
    return p - r->start < r->bytes ? r : NULL;
}

/* The first region that ends past p (nregions where none does). */
static size_t first_past(const dv_hostmem *h, uintptr_t p)
{
    size_t i = upper_bound(h, p);
    return i > 0 && h->regions[i - 1]->start + h->regions[i - 1]->bytes > p ? i - 1 : i;
}

/* Does [p, p + bytes) overlap a region? */
static bool overlaps(const dv_hostmem *h, uintptr_t p, uint64_t bytes)
{
    size_t i = first_past(h, p);
    return i < h->nregions && h->regions[i]->start < p + bytes;
}

static int table_insert(dv_hostmem *h, dv_host_region *r)
{
    if (h->nregions == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 16;
        dv_host_region **n = realloc(h->regions, cap * sizeof(*n));
        if (n == NULL)
            return dv__fail(DV_ENOMEM, "host", "out of host memory for the region table");
        h->regions = n;
        h->cap = cap;
    }
    size_t i = upper_bound(h, r->start);
    pthread_rwlock_wrlock(&h->lock);
    memmove(&h->regions[i + 1], &h->regions[i], (h->nregions - i) * sizeof(h->regions[0]));
    h->regions[i] = r;
    h->nregions++;
    pthread_rwlock_unlock(&h->lock);
    return DV_OK;
}

static void table_remove(dv_hostmem *h, dv_host_region *r)
{
    size_t i = upper_bound(h, r->start);
    dv_assert_internal(i > 0 && h->regions[i - 1] == r);
    pthread_rwlock_wrlock(&h->lock);
    memmove(&h->regions[i - 1], &h->regions[i], (h->nregions - i) * sizeof(h->regions[0]));
    h->nregions--;
    pthread_rwlock_unlock(&h->lock);
}

bool dv__host_pinned(dv_hostmem *h, const void *p, uint64_t bytes)
{
    uintptr_t a = (uintptr_t)p;
    bool in = false;
    pthread_rwlock_rdlock(&h->lock);
    dv_host_region *r = h->nregions > 0 ? region_at(h, a) : NULL;
    if (r != NULL && r->pinned && r->kind != DV_HR_STAGING && r->unregister == NULL)
        in = bytes <= r->bytes - (a - r->start);
    pthread_rwlock_unlock(&h->lock);
    return in;
}

static void stat_add(atomic_uint_fast64_t *c, int64_t delta)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + (uint64_t)delta,
                          memory_order_relaxed);
}

/* ------------------------------------------------------------------------
 * Regions
 * ------------------------------------------------------------------------ */

/* Fields dv__host_pinned reads (pinned, unregister) change under the
 * write lock: a listed region is re-pinned or unpinned by a rebuild while
 * clients look it up. */
static void set_pinned(dv_hostmem *h, dv_host_region *r, bool pinned)
{
    pthread_rwlock_wrlock(&h->lock);
    r->pinned = pinned;
    pthread_rwlock_unlock(&h->lock);
}

static int pin(dv_actor *a, dv_host_region *r)
{
    int rc = dv__drv_host_register(a->env.ctx, (void *)r->start, r->bytes);
    set_pinned(&a->host, r, rc == DV_OK);
    return rc;
}

static void unpin(dv_actor *a, dv_host_region *r)
{
    if (!r->pinned)
        return;
    if (a->env.ctx != NULL)
        (void)dv__drv_host_unregister(a->env.ctx, (void *)r->start);
    set_pinned(&a->host, r, false);
}

/* Pin a region made (its memory mapped, or the caller's) and list it;
 * on failure it is freed, the failure's detail kept. */
static int region_add(dv_actor *a, dv_host_region *r)
{
    int rc = pin(a, r);
    if (rc == DV_OK && (rc = table_insert(&a->host, r)) != DV_OK)
        unpin(a, r);
    if (rc != DV_OK) {
        dv_error_detail saved = *dv_last_error();
        region_free(r);
        *dv__detail() = saved;
        return rc;
    }
    stat_add(r->kind == DV_HR_USER ? &a->host.registered : &a->host.reserved, (int64_t)r->bytes);
    if (r->kind != DV_HR_USER) {
        stat_add(&a->host.reserved_total, (int64_t)r->bytes);
        uint64_t held = atomic_load_explicit(&a->host.reserved, memory_order_relaxed);
        if (held > atomic_load_explicit(&a->host.reserved_peak, memory_order_relaxed))
            atomic_store_explicit(&a->host.reserved_peak, held, memory_order_relaxed);
    }
    return DV_OK;
}

/* Free cached large buffers and empty slabs: what an allocation over the
 * budget may take instead. */
static void trim(dv_actor *a)
{
    dv_hostmem *h = &a->host;
    while (h->large_free != NULL) {
        dv_host_buf *b = h->large_free;
        h->large_free = b->next;
        h->large_cached -= b->region->bytes;
        dv__host_region_release(a, b->region);
    }
    for (int c = 0; c < DV_HOST_CLASSES; c++) {
        dv_host_buf **pp = &h->free[c];
        while (*pp != NULL) {
            dv_host_region *r = (*pp)->region;
            if (r->nused != 0) {
                pp = &(*pp)->next;
                continue;
            }
            /* Every slot of r is on this list: unlink them all, then r. */
            dv_host_buf **q = &h->free[c];
            while (*q != NULL) {
                if ((*q)->region == r)
                    *q = (*q)->next;
                else
                    q = &(*q)->next;
            }
            dv__host_region_release(a, r);
            pp = &h->free[c];
        }
    }
}

int dv__host_region_new(dv_actor *a, uint64_t bytes, uint8_t kind, dv_host_region **out)
{
    dv_hostmem *h = &a->host;
    uint64_t budget = a->cfg.host_budget_bytes;
    uint64_t reserved = atomic_load_explicit(&h->reserved, memory_order_relaxed);
    if (budget != 0 && reserved + bytes > budget) {
        trim(a);
        reserved = atomic_load_explicit(&h->reserved, memory_order_relaxed);
        if (reserved + bytes > budget) {
            int rc = dv__fail(DV_EOUT_OF_BUDGET, "host_alloc",
                              "host_alloc: %llu bytes of page-locked %s memory asked for, %llu "
                              "left of the host budget of %llu",
                              (unsigned long long)bytes, kind_names[kind],
                              (unsigned long long)(budget > reserved ? budget - reserved : 0),
                              (unsigned long long)budget);
            dv__detail()->requested = bytes;
            dv__detail()->remaining = budget > reserved ? budget - reserved : 0;
            return rc;
        }
    }
    dv_host_region *r = calloc(1, sizeof(*r));
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == NULL || p == MAP_FAILED) {
        free(r);
        if (p != MAP_FAILED)
            munmap(p, bytes);
        return dv__fail(DV_ENOMEM, "host_alloc", "host_alloc: cannot map %llu bytes",
                        (unsigned long long)bytes);
    }
    r->start = (uintptr_t)p;
    r->bytes = bytes;
    r->kind = kind;
    int rc = region_add(a, r);
    if (rc == DV_OK)
        *out = r;
    return rc;
}

void dv__host_region_release(dv_actor *a, dv_host_region *r)
{
    table_remove(&a->host, r);
    unpin(a, r);
    if (r->kind == DV_HR_USER)
        stat_add(&a->host.registered, -(int64_t)r->bytes);
    else
        stat_add(&a->host.reserved, -(int64_t)r->bytes);
    region_free(r);
}

int dv__host_pin_all(dv_actor *a)
{
    for (size_t i = 0; i < a->host.nregions; i++) {
        /* Where it fails the region stays unpinned: its copies are staged
         * (a buffer), or the staging is off (staging.c); a fault is the
         * context's. */
        if (pin(a, a->host.regions[i]) == DV_ECONTEXT_LOST)
            return DV_ECONTEXT_LOST;
    }
    return DV_OK;
}

void dv__host_unpin_all(dv_actor *a)
{
    for (size_t i = 0; i < a->host.nregions; i++)
        unpin(a, a->host.regions[i]);
}

/* ------------------------------------------------------------------------
 * Uses: where copies touched a buffer, so that it is reused only after
 * ------------------------------------------------------------------------ */

static dv_host_buf *buf_at(const dv_host_region *r, uintptr_t p)
{
    if (r->bufs == NULL)
        return NULL;
    return r->kind == DV_HR_SLAB ? &r->bufs[(p - r->start) >> (12 + r->cls)] : &r->bufs[0];
}

static void buf_used(dv_host_buf *b, dv_stream_pos pos)
{
    if (b->everywhere)
        return;
    for (unsigned i = 0; i < b->nuse; i++) {
        if (b->use[i].stream == pos.stream) {
            b->use[i].epoch = pos.epoch;
            return;
        }
    }
    if (b->nuse < DV_HOST_USES)
        b->use[b->nuse++] = pos;
    else
        b->everywhere = true;
}

/* Every buffer the range reaches remembers the use, in every region it
 * reaches (a range may run from one pool buffer into the next, or, staged,
 * past a registered range's end).  The position is marked on s at the
 * first such buffer: a range that reaches none marks nothing. */
void dv__host_used(dv_actor *a, const void *p, uint64_t bytes, dv_stream_id s)
{
    const dv_hostmem *h = &a->host;
    uintptr_t lo = (uintptr_t)p, hi = lo + bytes; /* (ranges do not wrap) */
    dv_stream_pos pos = {s, 0};
    for (size_t i = first_past(h, lo); i < h->nregions && h->regions[i]->start < hi; i++) {
        dv_host_region *r = h->regions[i];
        if (r->bufs == NULL)
            continue;
        if (pos.epoch == 0)
            pos.epoch = dv__tracker_mark(a->done, s);
        if (r->kind != DV_HR_SLAB) {
            buf_used(&r->bufs[0], pos);
            continue;
        }
        uintptr_t from = lo > r->start ? lo : r->start;
        uintptr_t to = hi < r->start + r->bytes ? hi : r->start + r->bytes;
        unsigned shift = 12 + r->cls;
        for (uint64_t k = (from - r->start) >> shift; k <= (to - 1 - r->start) >> shift; k++)
            buf_used(&r->bufs[k], pos);
    }
}

static void clear_uses(dv_host_buf *b)
{
    b->nuse = 0;
    b->everywhere = false;
    free(b->all);
    b->all = NULL;
}

/* At the free: a buffer used on more streams than it remembers waits for
 * every stream's work up to now. */
static void snapshot_all(dv_actor *a, dv_host_buf *b)
{
    if (!b->everywhere || a->done == NULL)
        return;
    b->all = malloc(a->env.nstreams * sizeof(*b->all));
    if (b->all == NULL)
        return; /* checked instead by a sync of every stream (uses_reached) */
    for (uint32_t s = 0; s < a->env.nstreams; s++)
        b->all[s] = dv__tracker_now(a->done, s);
}

static void *buf_ptr(const dv_host_buf *b);
static uint64_t buf_bytes(const dv_host_buf *b);

/* Have the copies that used b finished: those the device did with it
 * (its uses), and the staged ones whose host range reaches into it (a
 * range that runs past page-locked memory is staged, and a copy thread
 * may write it until the copy's host side is over)? */
static bool uses_reached(dv_actor *a, dv_host_buf *b)
{
    bool reached = true;
    if (dv__staging_reaches(a, buf_ptr(b), buf_bytes(b)))
        return false;
    if (a->done == NULL || dv__actor_broken(a))
        return true; /* nothing of the device runs any more */
    for (unsigned i = 0; i < b->nuse && reached; i++)
        if (dv__tracker_reached(a->done, b->use[i], &reached) != DV_OK)
            return false; /* a fault: the rebuild forgets the uses */
    if (b->everywhere) {
        if (b->all == NULL) /* no memory for the snapshot: wait for the device */
            return dv__res_env_sync(&a->env) == DV_OK;
        for (uint32_t s = 0; s < a->env.nstreams && reached; s++)
            if (dv__tracker_reached(a->done, b->all[s], &reached) != DV_OK)
                return false;
    }
    return reached;
}

void dv__host_forget_uses(dv_actor *a)
{
    for (size_t i = 0; i < a->host.nregions; i++) {
        dv_host_region *r = a->host.regions[i];
        for (uint64_t k = 0; r->bufs != NULL && k < slots_of(r); k++)
            clear_uses(&r->bufs[k]);
    }
}

/* ------------------------------------------------------------------------
 * The pool
 * ------------------------------------------------------------------------ */

/* The class of a request, or -1 for a large one. */
static int class_of(uint64_t bytes)
{
    for (int c = 0; c < DV_HOST_CLASSES; c++)
        if (bytes <= (uint64_t)DV_HOST_PAGE << c)
            return c;
    return -1;
}

static uint64_t buf_bytes(const dv_host_buf *b)
{
    const dv_host_region *r = b->region;
    return r->kind == DV_HR_SLAB ? (uint64_t)DV_HOST_PAGE << r->cls : r->bytes;
}

static void *buf_ptr(const dv_host_buf *b)
{
    const dv_host_region *r = b->region;
    return (void *)(r->start + (uintptr_t)(b - r->bufs) * (uintptr_t)buf_bytes(b));
}

/* A pending buffer whose copies finished goes back to the pool. */
static void reclaim(dv_actor *a, dv_host_buf *b)
{
    dv_hostmem *h = &a->host;
    clear_uses(b);
    b->state = DV_HB_FREE;
    if (b->region->kind == DV_HR_SLAB) {
        b->region->nused--;
        b->next = h->free[b->region->cls];
        h->free[b->region->cls] = b;
    } else if (h->large_cached + b->region->bytes <= DV_HOST_CACHE_BYTES) {
        h->large_cached += b->region->bytes;
        b->next = h->large_free;
        h->large_free = b;
    } else {
        dv__host_region_release(a, b->region);
    }
}

/* Move every pending buffer whose copies finished back to the pool. */
static void reclaim_pending(dv_actor *a)
{
    dv_host_buf **pp = &a->host.pending;
    while (*pp != NULL) {
        dv_host_buf *b = *pp;
        if (uses_reached(a, b)) {
            *pp = b->next;
            reclaim(a, b);
        } else {
            pp = &b->next;
        }
    }
}

static dv_host_buf *take_small(dv_actor *a, int c)
{
    dv_hostmem *h = &a->host;
    if (h->free[c] == NULL && h->pending != NULL)
        reclaim_pending(a);
    if (h->free[c] == NULL) {
        dv_host_region *r;
        int rc = dv__host_region_new(a, DV_HOST_SLAB_BYTES, DV_HR_SLAB, &r);
        uint64_t room = dv_last_error()->remaining, bytes = UINT64_C(4096) << c;
        if (rc == DV_EOUT_OF_BUDGET && bytes < DV_HOST_SLAB_BYTES) {
            /* A whole slab is past the host budget: a smaller one, as many
             * of this class's buffers as fit (a power of two of them; the
             * refusal, if even one does not, names one buffer). */
            uint64_t slab = bytes;
            while (slab * 2 <= room && slab * 2 < DV_HOST_SLAB_BYTES)
                slab *= 2;
            rc = dv__host_region_new(a, slab, DV_HR_SLAB, &r);
        }
        if (rc != DV_OK)
            return NULL;
        r->cls = (uint8_t)c;
        uint64_t n = slots_of(r);
        r->bufs = calloc(n, sizeof(*r->bufs));
        if (r->bufs == NULL) {
            dv__host_region_release(a, r);
            dv__fail(DV_ENOMEM, "host_alloc", "out of host memory");
            return NULL;
        }
        for (uint64_t i = n; i-- > 0;) {
            r->bufs[i].region = r;
            r->bufs[i].next = h->free[c];
            h->free[c] = &r->bufs[i];
        }
    }
    dv_host_buf *b = h->free[c];
    h->free[c] = b->next;
    b->region->nused++;
    return b;
}

static dv_host_buf *take_large(dv_actor *a, uint64_t bytes)
{
    dv_hostmem *h = &a->host;
    uint64_t need = (bytes + DV_HOST_SLAB_BYTES - 1) & ~(DV_HOST_SLAB_BYTES - 1);
    if (h->pending != NULL)
        reclaim_pending(a);
    /* The smallest cached one that fits and wastes at most half. */
    dv_host_buf **best = NULL;
    for (dv_host_buf **pp = &h->large_free; *pp != NULL; pp = &(*pp)->next) {
        uint64_t have = (*pp)->region->bytes;
        if (have >= need && have / 2 <= need && (best == NULL || have < (*best)->region->bytes))
            best = pp;
    }
    if (best != NULL) {
        dv_host_buf *b = *best;
        *best = b->next;
        h->large_cached -= b->region->bytes;
        return b;
    }
    dv_host_region *r;
    if (dv__host_region_new(a, need, DV_HR_LARGE, &r) != DV_OK)
        return NULL;
    if ((r->bufs = calloc(1, sizeof(*r->bufs))) == NULL) {
        dv__host_region_release(a, r);
        dv__fail(DV_ENOMEM, "host_alloc", "out of host memory");
        return NULL;
    }
    r->bufs[0].region = r;
    return r->bufs;
}

static int host_alloc(dv_actor *a, uint64_t bytes, void **out)
{
    dv_hostmem *h = &a->host;
    int c = class_of(bytes);
    dv_host_buf *b = c >= 0 ? take_small(a, c) : take_large(a, bytes);
    if (b == NULL) {
        dv__detail()->requested = bytes; /* the caller's, not the slab's */
        return dv_last_error()->status;
    }
    b->state = DV_HB_LIVE;
    b->requested = bytes;
    clear_uses(b);
    stat_add(&h->bytes, (int64_t)buf_bytes(b));
    stat_add(&h->total, (int64_t)buf_bytes(b));
    stat_add(&h->buffers, 1);
    uint64_t now = atomic_load_explicit(&h->bytes, memory_order_relaxed);
    if (now > atomic_load_explicit(&h->peak, memory_order_relaxed))
        atomic_store_explicit(&h->peak, now, memory_order_relaxed);
    *out = buf_ptr(b);
    return DV_OK;
}

/* The live buffer starting at p, or NULL (DV_EINVAL in the detail). */
static dv_host_buf *live_buf(dv_actor *a, void *p, const char *op)
{
    dv_host_region *r = p != NULL ? region_at(&a->host, (uintptr_t)p) : NULL;
    dv_host_buf *b = NULL;
    if (r != NULL && (r->kind == DV_HR_SLAB || r->kind == DV_HR_LARGE)) {
        b = buf_at(r, (uintptr_t)p);
        if (b == NULL || buf_ptr(b) != p || b->state != DV_HB_LIVE)
            b = NULL;
    }
    if (b == NULL)
        dv__fail(DV_EINVAL, op, "%s: %p is not a live buffer of device %d's dv_host_alloc", op, p,
                 a->device);
    return b;
}

static int host_free(dv_actor *a, const dv_envelope *e, void *p)
{
    dv_hostmem *h = &a->host;
    dv_host_buf *b = live_buf(a, p, "host_free");
    if (b == NULL)
        return DV_EINVAL;
    uint64_t bytes = buf_bytes(b);
    /* The free is the host's write of the whole buffer: a copy still
     * using it that the thread did not wait for races (reported; the
     * buffer is not reused before the copy finished either way). */
    if (a->chk != NULL) {
        (void)dv__checked(a, dv__checker_host_access(a->chk, (uintptr_t)p, bytes, DV_WRITE,
                                                     dv__know_of(a, e), e->from->id, e->m.seq));
        dv__checker_host_forget(a->chk, (uintptr_t)p, bytes);
    }
    stat_add(&h->bytes, -(int64_t)bytes);
    stat_add(&h->buffers, -1);
    b->state = DV_HB_PENDING;
    snapshot_all(a, b);
    b->next = h->pending;
    h->pending = b;
    return DV_OK;
}

/* ------------------------------------------------------------------------
 * Registered ranges
 * ------------------------------------------------------------------------ */

static int host_register(dv_actor *a, void *p, uint64_t bytes)
{
    static const char op[] = "host_register";
    dv_hostmem *h = &a->host;
    if (p == NULL || bytes == 0 || bytes > DV_DRV_MAX_BYTES || (uintptr_t)p + bytes < (uintptr_t)p)
        return dv__fail(DV_EINVAL, op, "host_register: %s", p == NULL ? "NULL pointer" : "size");
    if (overlaps(h, (uintptr_t)p, bytes))
        return dv__fail(DV_EINVAL, op,
                        "host_register: [%p, +%llu) overlaps page-locked memory of the actor's "
                        "(registered or allocated)",
                        p, (unsigned long long)bytes);
    dv_host_region *r = calloc(1, sizeof(*r));
    if (r == NULL || (r->bufs = calloc(1, sizeof(*r->bufs))) == NULL) {
        free(r);
        return dv__fail(DV_ENOMEM, op, "out of host memory");
    }
    r->start = (uintptr_t)p;
    r->bytes = bytes;
    r->kind = DV_HR_USER;
    r->bufs[0].region = r;
    return region_add(a, r);
}

/* DV_OK: done now; DV_EAGAIN: answered later, by the sweep. */
static int host_unregister(dv_actor *a, const dv_envelope *e, void *p)
{
    dv_host_region *r = p != NULL ? region_at(&a->host, (uintptr_t)p) : NULL;
    if (r == NULL || r->kind != DV_HR_USER || r->start != (uintptr_t)p || r->unregister != NULL)
        return dv__fail(DV_EINVAL, "host_unregister",
                        "host_unregister: %p does not start a range registered with device %d's "
                        "actor",
                        p, a->device);
    /* The call returns once every copy that used the range finished: the
     * caller's later accesses are ordered after them (the checker forgets
     * the range's history). */
    if (a->chk != NULL)
        dv__checker_host_forget(a->chk, r->start, r->bytes);
    if (uses_reached(a, &r->bufs[0])) {
        /* The copies that used it are done on the device: their futures
         * complete before the call returns, as it says. */
        dv__poll_completions(a);
        dv__host_region_release(a, r);
        return DV_OK;
    }
    pthread_rwlock_wrlock(&a->host.lock);
    r->unregister = e->m.reply;
    pthread_rwlock_unlock(&a->host.lock);
    a->host.unregistering++;
    return DV_EAGAIN;
}

/* Answer the dv_host_unregister calls waiting whose copies finished (all
 * of them: the device was drained). */
static void unregisters_answer(dv_actor *a, bool all)
{
    dv_hostmem *h = &a->host;
    for (size_t i = 0; h->unregistering > 0 && i < h->nregions;) {
        dv_host_region *r = h->regions[i];
        if (r->unregister == NULL || (!all && !uses_reached(a, &r->bufs[0]))) {
            i++;
            continue;
        }
        dv_future *f = r->unregister;
        h->unregistering--;
        dv__host_region_release(a, r); /* the table moved down: same i */
        /* Its copies' futures first (the device finished them). */
        dv__poll_completions(a);
        dv__future_complete(f, DV_OK);
    }
}

void dv__host_stop(dv_actor *a)
{
    unregisters_answer(a, true);
    dv__host_unpin_all(a);
}

bool dv__host_has_work(const dv_hostmem *h)
{
    return h->unregistering > 0;
}

void dv__host_sweep(dv_actor *a)
{
    unregisters_answer(a, false);
}

void dv__handle_hostmem(dv_actor *a, const dv_envelope *e)
{
    DV_ASSERT_ACTOR(a);
    const dv_msg_hostmem *m = &e->m.u.hostmem;
    void *p = NULL;
    int rc;
    switch (e->m.type) {
    case DV_MSG_HOST_ALLOC:
        rc = host_alloc(a, m->bytes, &p);
        if (rc == DV_OK && e->m.reply != NULL)
            e->m.reply->value = (uintptr_t)p;
        break;
    case DV_MSG_HOST_FREE:
        rc = host_free(a, e, m->ptr);
        break;
    case DV_MSG_HOST_REGISTER:
        rc = host_register(a, m->ptr, m->bytes);
        break;
    default:
        if ((rc = host_unregister(a, e, m->ptr)) == DV_EAGAIN)
            return;
        break;
    }
    dv__reply(a, e, rc);
}
