/*
 * async: stream-ordered driver allocation (cuMemAllocAsync /
 * cuMemFreeAsync) on the block's alloc stream, with full block-use
 * tracking through the shared tracker.
 *
 * A free is queued on the alloc stream after that stream was made to wait
 * on every use from other streams.  Until the stream reaches the free the
 * bytes are RETIRED: still counted by bytes_outstanding, kept on a FIFO of
 * (position, address, bytes).  reap_pending waits for them; allocate drops
 * the ones already reached without waiting, so the FIFO stays short.  The
 * driver may hand retired memory out again before the free is reached (it
 * then orders the new allocation after the free itself): a new block that
 * overlaps a retired one uncounts it, so the memory is not counted twice.
 */
#include <stdlib.h>

#include "resources/tracker.h"

struct retired {
    dv_stream_pos pos;
    uint64_t bytes; /* 0 once the driver handed its memory out again */
    dv_dptr ptr;
};

typedef struct async_res {
    dv_resource base;
    dv_tracker *t;
    atomic_uint_fast64_t live_bytes, retired_bytes;
    struct retired *fifo; /* ring of retired frees, oldest at head */
    size_t head, count, cap;
} async_res;

#define ASYNC(r) ((async_res *)(r))

static uint64_t round_block(uint64_t n)
{
    return (n + DV_BLOCK_ALIGN - 1) & ~(uint64_t)(DV_BLOCK_ALIGN - 1);
}

static int fifo_push(async_res *a, struct retired item)
{
    if (a->count == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        struct retired *n = malloc(cap * sizeof(*n));
        if (n == NULL)
            return -1;
        for (size_t i = 0; i < a->count; i++)
            n[i] = a->fifo[(a->head + i) % a->cap];
        free(a->fifo);
        a->fifo = n;
        a->cap = cap;
        a->head = 0;
    }
    a->fifo[(a->head + a->count) % a->cap] = item;
    a->count++;
    return 0;
}

static void fifo_pop(async_res *a)
{
    atomic_fetch_sub_explicit(&a->retired_bytes, a->fifo[a->head].bytes, memory_order_relaxed);
    a->head = (a->head + 1) % a->cap;
    a->count--;
}

/* Drop retired frees the device has reached; block only when asked. */
static int reap(async_res *a, bool block)
{
    while (a->count > 0) {
        struct retired *oldest = &a->fifo[a->head];
        int rc;
        if (block) {
            rc = dv__tracker_sync(a->t, oldest->pos);
        } else {
            bool reached = false;
            rc = dv__tracker_reached(a->t, oldest->pos, &reached);
            if (rc == DV_OK && !reached)
                return DV_OK;
        }
        if (rc != DV_OK)
            return rc;
        fifo_pop(a);
    }
    return DV_OK;
}

static int async_allocate(dv_resource *r, uint64_t bytes, dv_stream_id stream, dv_tag tag,
                          dv_block *out)
{
    async_res *a = ASYNC(r);
    uint64_t size = round_block(bytes);
    dv_dptr ptr;
    int rc;

    /* Opportunistic and non-blocking: only what the device has reached. */
    if (a->count >= 64)
        (void)reap(a, false);
    if ((rc = dv__drv_mem_alloc_async(r->env->streams[stream], size, &ptr)) != DV_OK)
        return rc;
    /* Memory still retired, handed out again by the driver: counted once. */
    for (size_t i = 0; i < a->count; i++) {
        struct retired *old = &a->fifo[(a->head + i) % a->cap];
        if (old->bytes != 0 && old->ptr < ptr + size && ptr < old->ptr + old->bytes) {
            atomic_fetch_sub_explicit(&a->retired_bytes, old->bytes, memory_order_relaxed);
            old->bytes = 0;
        }
    }
    *out = (dv_block){.ptr = ptr,
                      .bytes = size,
                      .requested = bytes,
                      .generation = dv__next_generation(r->env),
                      .tag = tag,
                      .alloc_stream = stream,
                      .align = DV_BLOCK_ALIGN,
                      .device = r->device,
                      .state = DV_BLOCK_LIVE};
    dv_tracked b = dv__tracker_insert(a->t, out, 0);
    if (!dv__tracked_ok(b)) {
        rc = dv__detail()->status; /* the tracker's answer, detail set */
        (void)dv__drv_mem_free_async(r->env->streams[stream], ptr);
        out->state = DV_BLOCK_FREED;
        return rc;
    }
    /* Where the free finds them (the driver call dwarfs the entry's miss). */
    dv_track_entry *e = dv__tracker_entry(a->t, b);
    e->ptr = ptr;
    e->bytes = size;
    atomic_fetch_add_explicit(&a->live_bytes, size, memory_order_relaxed);
    return DV_OK;
}

/* Fence, queue the free, account it as retired. */
static int retire(async_res *a, dv_tracked b)
{
    dv_stream_id s = dv__track_alloc_stream(b.hot);
    uint64_t size = b.e->bytes;
    int rc;

    if ((rc = dv__tracker_fence_uses(a->t, b)) != DV_OK)
        return rc;
    if ((rc = dv__drv_mem_free_async(a->base.env->streams[s], b.e->ptr)) != DV_OK)
        return rc;
    struct retired item = {{s, dv__tracker_mark(a->t, s)}, size, b.e->ptr};
    dv__tracker_remove(a->t, b);
    atomic_fetch_sub_explicit(&a->live_bytes, size, memory_order_relaxed);
    atomic_fetch_add_explicit(&a->retired_bytes, size, memory_order_relaxed);
    if (fifo_push(a, item) != 0) {
        /* No room to remember it: wait for it now instead. */
        (void)dv__tracker_sync(a->t, item.pos);
        atomic_fetch_sub_explicit(&a->retired_bytes, size, memory_order_relaxed);
    }
    return DV_OK;
}

static int async_deallocate(dv_resource *r, dv_block *block)
{
    dv_tracked b = dv__tracker_find(ASYNC(r)->t, dv__block_id_of(block), "deallocate");
    if (!dv__tracked_ok(b))
        return DV_EUSE_AFTER_FREE;
    int rc = retire(ASYNC(r), b);
    if (rc == DV_OK)
        block->state = DV_BLOCK_RETIRED;
    return rc;
}

static uint64_t async_bytes_outstanding(const dv_resource *r)
{
    const async_res *a = (const async_res *)r;
    return atomic_load_explicit(&a->live_bytes, memory_order_relaxed) +
           atomic_load_explicit(&a->retired_bytes, memory_order_relaxed);
}

static int async_reap_pending(dv_resource *r)
{
    return reap(ASYNC(r), true);
}

static bool async_supports_tracking(const dv_resource *r)
{
    (void)r;
    return true;
}

static bool async_holds(const dv_resource *r, dv_block_id id)
{
    return dv__tracker_holds(((const async_res *)r)->t, id);
}

static int async_prepare(dv_resource *r, dv_block_id id, dv_stream_id s, dv_access a)
{
    dv_tracked b = dv__tracker_find(ASYNC(r)->t, id, "prepare_block_use");
    return dv__tracked_ok(b) ? dv__tracker_prepare(ASYNC(r)->t, b, s, a) : DV_EUSE_AFTER_FREE;
}

static int async_finish(dv_resource *r, dv_block_id id, dv_stream_id s, dv_access a)
{
    dv_tracked b = dv__tracker_find(ASYNC(r)->t, id, "finish_block_use");
    if (!dv__tracked_ok(b))
        return DV_EUSE_AFTER_FREE;
    dv__tracker_finish(ASYNC(r)->t, b, s, a);
    return DV_OK;
}

static int async_record(dv_resource *r, dv_block_id id, dv_stream_id s)
{
    dv_tracked b = dv__tracker_find(ASYNC(r)->t, id, "record_block_use");
    if (!dv__tracked_ok(b))
        return DV_EUSE_AFTER_FREE;
    dv__tracker_record(ASYNC(r)->t, b, s);
    return DV_OK;
}

static void retire_live(dv_tracked b, void *arg)
{
    (void)retire(arg, b);
}

static void async_destroy(dv_resource *r)
{
    async_res *a = ASYNC(r);
    /* Blocks still live go back to the driver in their streams' order. */
    dv__tracker_foreach(a->t, retire_live, a);
    (void)reap(a, true);
    dv__tracker_destroy(a->t);
    free(a->fifo);
    free(a);
}

static uint64_t async_stream_position(const dv_resource *r, dv_stream_id stream)
{
    return dv__tracker_now(((const async_res *)r)->t, stream).epoch;
}

static void async_note_stream_wait(dv_resource *r, dv_stream_id waiter, dv_stream_id signaler,
                                   uint64_t pos)
{
    dv__tracker_note_wait(ASYNC(r)->t, waiter, signaler, pos);
}

static const dv_res_ops async_ops;

bool dv__res_is_async(const dv_resource *r)
{
    return r != NULL && r->ops == &async_ops;
}

static const dv_res_ops async_ops = {
    .name = "async",
    .allocate = async_allocate,
    .deallocate = async_deallocate,
    .bytes_outstanding = async_bytes_outstanding,
    .reap_pending = async_reap_pending,
    .supports_block_use_tracking = async_supports_tracking,
    .holds_block = async_holds,
    .prepare_block_use = async_prepare,
    .finish_block_use = async_finish,
    .record_block_use = async_record,
    .stream_position = async_stream_position,
    .note_stream_wait = async_note_stream_wait,
    .destroy = async_destroy,
};

int dv__async_resource_create(dv_res_env *env, dv_resource **out)
{
    if (env == NULL || out == NULL || env->ctx == NULL)
        return dv__fail(DV_EINVAL, "async_resource_create", "NULL or empty environment");
    async_res *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return dv__fail(DV_ENOMEM, "async_resource_create", "out of host memory");
    int rc = dv__tracker_create(env, &a->t);
    if (rc != DV_OK) {
        free(a);
        return rc;
    }
    a->base = (dv_resource){.ops = &async_ops, .upstream = NULL, .env = env, .device = env->device};
    *out = &a->base;
    return DV_OK;
}
