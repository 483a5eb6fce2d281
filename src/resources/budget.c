/*
 * budget: a byte limit over any inner resource.
 *
 * Design
 * ------
 * The budget counts what it handed out, in the inner resource's own units
 * (block.bytes as the inner resource returned it, rounding included):
 *
 *   used      blocks handed out and not yet returned, plus pending ones;
 *   pending   blocks returned whose free the inner resource only queued
 *             (it answered RETIRED): on a stream-ordered resource that
 *             memory is not reusable until the stream reaches the free, so
 *             it still counts against the limit.
 *
 * used is bytes_outstanding, as the contract asks (live plus
 * retired-but-not-yet-freed).  It is one atomic so that a reader on
 * another thread sees a sum the owner really had, never a half-updated
 * pair; only the owner thread writes either.  The count never looks at the
 * inner resource's own bytes_outstanding, so it is deterministic: the same
 * sequence of calls is refused at the same call whatever the device's
 * timing, and an inner resource shared with others is not charged to us.
 *
 * A request that does not fit (used + bytes > limit) first reaps: the inner
 * resource waits for its queued frees (blocking), after which nothing of
 * ours is pending.  Only if it still does not fit is it refused, with
 * DV_EOUT_OF_BUDGET and the requested and remaining bytes in the detail.
 * The inner resource may round a request up; a block that came back larger
 * than what is left is given back and the request refused the same way,
 * so used never exceeds the limit.
 *
 * Blocks are the inner resource's own (no translation), so deallocate and
 * the tracking ops forward them unchanged.  Like every resource, all ops but
 * bytes_outstanding run on the environment's owner thread; the atomics are
 * there only so other threads can read the count.
 */
#include <stdlib.h>
#include <string.h>

#include "resources/resource.h"

typedef struct budget_res {
    dv_resource base;
    uint64_t limit;
    atomic_uint_fast64_t used;    /* live + pending */
    atomic_uint_fast64_t pending; /* returned, free queued, not yet reaped */
} budget_res;

#define BUDGET(r) ((budget_res *)(r))

static uint64_t budget_used(const budget_res *b)
{
    return atomic_load_explicit(&b->used, memory_order_relaxed);
}

static bool budget_fits(const budget_res *b, uint64_t bytes)
{
    uint64_t used = budget_used(b);
    return used <= b->limit && bytes <= b->limit - used;
}

/* Wait for the inner resource's queued frees; ours are then all reached. */
static int budget_reap(budget_res *b)
{
    int rc = dv__res_reap_pending(b->base.upstream);
    if (rc == DV_OK) {
        uint64_t reaped = atomic_exchange_explicit(&b->pending, 0, memory_order_relaxed);
        atomic_fetch_sub_explicit(&b->used, reaped, memory_order_relaxed);
    }
    return rc;
}

static int budget_refuse(budget_res *b, uint64_t bytes)
{
    uint64_t used = budget_used(b);
    uint64_t remaining = used < b->limit ? b->limit - used : 0;
    int rc = dv__fail(DV_EOUT_OF_BUDGET, "allocate",
                      "allocate: %llu bytes do not fit the budget: %llu of %llu bytes in use, "
                      "%llu remaining",
                      (unsigned long long)bytes, (unsigned long long)used,
                      (unsigned long long)b->limit, (unsigned long long)remaining);
    dv__detail()->requested = bytes;
    dv__detail()->remaining = remaining;
    b->base.env->refused_by = &b->base;
    b->base.env->refused_for_good = bytes > b->limit;
    return rc;
}

static int budget_allocate(dv_resource *r, uint64_t bytes, dv_stream_id stream, dv_tag tag,
                           dv_block *out)
{
    budget_res *b = BUDGET(r);
    int rc;

    if (!budget_fits(b, bytes)) {
        if ((rc = budget_reap(b)) != DV_OK)
            return rc;
        if (!budget_fits(b, bytes))
            return budget_refuse(b, bytes);
    }
    if ((rc = dv__res_allocate(r->upstream, bytes, stream, tag, out)) != DV_OK)
        return rc;
    if (!budget_fits(b, out->bytes)) {
        /* Rounded past the limit.  Giving it back queues a free of memory
         * nobody used; it is not ours to count. */
        dv_block back = *out;
        (void)dv__res_deallocate(r->upstream, &back);
        memset(out, 0, sizeof(*out));
        return budget_refuse(b, bytes);
    }
    atomic_fetch_add_explicit(&b->used, out->bytes, memory_order_relaxed);
    return DV_OK;
}

static int budget_deallocate(dv_resource *r, dv_block *block)
{
    budget_res *b = BUDGET(r);
    uint64_t bytes = block->bytes;
    int rc = dv__res_deallocate(r->upstream, block);
    if (rc != DV_OK)
        return rc;
    /* A caller who changed block->bytes would skew the count; never let
     * it wrap. */
    uint64_t live = budget_used(b) - atomic_load_explicit(&b->pending, memory_order_relaxed);
    if (bytes > live)
        bytes = live;
    if (block->state == DV_BLOCK_RETIRED)
        atomic_fetch_add_explicit(&b->pending, bytes, memory_order_relaxed);
    else
        atomic_fetch_sub_explicit(&b->used, bytes, memory_order_relaxed);
    return DV_OK;
}

static uint64_t budget_bytes_outstanding(const dv_resource *r)
{
    return budget_used((const budget_res *)r);
}

static int budget_reap_pending(dv_resource *r)
{
    return budget_reap(BUDGET(r));
}

static void budget_destroy(dv_resource *r)
{
    /* Holds no blocks of its own: what is still live belongs to the inner
     * resource's table, which its destroy returns. */
    free(BUDGET(r));
}

static const dv_res_ops budget_ops = {
    .name = "budget",
    .allocate = budget_allocate,
    .deallocate = budget_deallocate,
    .bytes_outstanding = budget_bytes_outstanding,
    .reap_pending = budget_reap_pending,
    .destroy = budget_destroy,
};

int dv__budget_resource_create(dv_resource *upstream, uint64_t limit_bytes, dv_resource **out)
{
    if (upstream == NULL || out == NULL)
        return dv__fail(DV_EINVAL, "budget_resource_create",
                        "budget_resource_create: NULL upstream or out");
    budget_res *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return dv__fail(DV_ENOMEM, "budget_resource_create", "out of host memory");
    b->base = (dv_resource){
        .ops = &budget_ops, .upstream = upstream, .env = upstream->env, .device = upstream->device};
    b->limit = limit_bytes;
    atomic_init(&b->used, 0);
    atomic_init(&b->pending, 0);
    *out = &b->base;
    return DV_OK;
}

int dv__budget_stats(const dv_resource *budget, uint64_t *limit, uint64_t *used)
{
    if (budget == NULL || budget->ops != &budget_ops)
        return dv__fail(DV_EINVAL, "resource_budget_stats",
                        "resource_budget_stats: %s resource is not a budget",
                        dv__res_name(budget));
    const budget_res *b = (const budget_res *)budget;
    if (limit != NULL)
        *limit = b->limit;
    if (used != NULL)
        *used = atomic_load_explicit(&b->used, memory_order_relaxed);
    return DV_OK;
}

uint64_t dv__budget_limit(const dv_resource *budget)
{
    return budget != NULL && budget->ops == &budget_ops ? ((const budget_res *)budget)->limit : 0;
}
