/*
 * direct: synchronous driver allocation (cuMemAlloc / cuMemFree).  The
 * memory is usable on every stream at once and the free waits for the
 * device, so it needs no ordering of its own; but it cannot see which
 * streams use a block, so every tracking op answers DV_ESTREAM_MISUSE
 * rather than pretend (false safety is worse than none).  The tracker
 * serves only as the table of live blocks, for stale and double frees.
 */
#include <stdlib.h>

#include "resources/tracker.h"

typedef struct direct_res {
    dv_resource base;
    dv_tracker *live;
    atomic_uint_fast64_t bytes;
} direct_res;

#define DIRECT(r) ((direct_res *)(r))

static uint64_t round_block(uint64_t n)
{
    return (n + DV_BLOCK_ALIGN - 1) & ~(uint64_t)(DV_BLOCK_ALIGN - 1);
}

static int direct_allocate(dv_resource *r, uint64_t bytes, dv_stream_id stream, dv_tag tag,
                           dv_block *out)
{
    uint64_t size = round_block(bytes);
    dv_dptr ptr;
    int rc = dv__drv_mem_alloc(r->env->ctx, size, &ptr);
    if (rc != DV_OK)
        return rc;
    *out = (dv_block){.ptr = ptr,
                      .bytes = size,
                      .requested = bytes,
                      .generation = dv__next_generation(r->env),
                      .tag = tag,
                      .alloc_stream = stream,
                      .align = DV_BLOCK_ALIGN,
                      .device = r->device,
                      .state = DV_BLOCK_LIVE};
    dv_tracked b = dv__tracker_insert(DIRECT(r)->live, out, 0);
    if (!dv__tracked_ok(b)) {
        rc = dv__detail()->status; /* the tracker's answer, detail set */
        (void)dv__drv_mem_free(r->env->ctx, ptr);
        out->state = DV_BLOCK_FREED;
        return rc;
    }
    dv_track_entry *e = dv__tracker_entry(DIRECT(r)->live, b);
    e->ptr = ptr;
    e->bytes = size;
    atomic_fetch_add_explicit(&DIRECT(r)->bytes, size, memory_order_relaxed);
    return DV_OK;
}

static int direct_deallocate(dv_resource *r, dv_block *block)
{
    dv_tracked b = dv__tracker_find(DIRECT(r)->live, dv__block_id_of(block), "deallocate");
    if (!dv__tracked_ok(b))
        return DV_EUSE_AFTER_FREE;
    int rc = dv__drv_mem_free(r->env->ctx, b.e->ptr);
    if (rc != DV_OK)
        return rc;
    atomic_fetch_sub_explicit(&DIRECT(r)->bytes, b.e->bytes, memory_order_relaxed);
    dv__tracker_remove(DIRECT(r)->live, b);
    block->state = DV_BLOCK_FREED;
    return DV_OK;
}

static uint64_t direct_bytes_outstanding(const dv_resource *r)
{
    return atomic_load_explicit(&((const direct_res *)r)->bytes, memory_order_relaxed);
}

static int direct_reap_pending(dv_resource *r)
{
    (void)r; /* frees are synchronous: nothing is ever pending */
    return DV_OK;
}

static bool direct_supports_tracking(const dv_resource *r)
{
    (void)r;
    return false;
}

static int direct_prepare(dv_resource *r, dv_block_id id, dv_stream_id s, dv_access a)
{
    (void)id, (void)s, (void)a;
    return dv__res_no_tracking(r, "prepare_block_use");
}

static int direct_finish(dv_resource *r, dv_block_id id, dv_stream_id s, dv_access a)
{
    (void)id, (void)s, (void)a;
    return dv__res_no_tracking(r, "finish_block_use");
}

static int direct_record(dv_resource *r, dv_block_id id, dv_stream_id s)
{
    (void)id, (void)s;
    return dv__res_no_tracking(r, "record_block_use");
}

static void free_live(dv_tracked b, void *arg)
{
    direct_res *d = arg;
    (void)dv__drv_mem_free(d->base.env->ctx, b.e->ptr);
    dv__tracker_remove(d->live, b);
}

static void direct_destroy(dv_resource *r)
{
    dv__tracker_foreach(DIRECT(r)->live, free_live, r);
    dv__tracker_destroy(DIRECT(r)->live);
    free(r);
}

static const dv_res_ops direct_ops = {
    .name = "direct",
    .allocate = direct_allocate,
    .deallocate = direct_deallocate,
    .bytes_outstanding = direct_bytes_outstanding,
    .reap_pending = direct_reap_pending,
    .supports_block_use_tracking = direct_supports_tracking,
    .prepare_block_use = direct_prepare,
    .finish_block_use = direct_finish,
    .record_block_use = direct_record,
    .destroy = direct_destroy,
};

int dv__direct_resource_create(dv_res_env *env, dv_resource **out)
{
    if (env == NULL || out == NULL || env->ctx == NULL)
        return dv__fail(DV_EINVAL, "direct_resource_create", "NULL or empty environment");
    direct_res *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return dv__fail(DV_ENOMEM, "direct_resource_create", "out of host memory");
    int rc = dv__tracker_create(env, &d->live);
    if (rc != DV_OK) {
        free(d);
        return rc;
    }
    d->base =
        (dv_resource){.ops = &direct_ops, .upstream = NULL, .env = env, .device = env->device};
    *out = &d->base;
    return DV_OK;
}
