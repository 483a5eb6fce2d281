/*
 * The resource wrappers (the contract of resource.h, checked once for every
 * resource), the environment a stack runs against, and block generations.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resources/tracker.h"

static atomic_uint_fast64_t generation_counter = 1;

uint64_t dv__generation_batch(void)
{
    /* Relaxed: uniqueness is all that is needed, not ordering. */
    return atomic_fetch_add_explicit(&generation_counter, DV_GEN_BATCH, memory_order_relaxed);
}

/* ------------------------------------------------------------------------
 * Environment
 * ------------------------------------------------------------------------ */

int dv__res_env_open(dv_res_env *env, dv_driver *drv, int device)
{
    if (env == NULL || drv == NULL)
        return dv__fail(DV_EINVAL, "res_env_init", "res_env_init: NULL env or driver");
    memset(env, 0, sizeof(*env));
    env->drv = drv;
    env->device = device;
    env->owner = pthread_self();
    return dv__drv_ctx_retain(drv, device, &env->ctx);
}

int dv__res_env_streams(dv_res_env *env, uint32_t nstreams)
{
    if (nstreams == 0 || nstreams > DV_MAX_STREAMS)
        return dv__fail(DV_EINVAL, "res_env_init", "res_env_init: %u streams (1..%u)", nstreams,
                        DV_MAX_STREAMS);
    for (uint32_t i = env->nstreams; i < nstreams; i++) {
        int rc = dv__drv_stream_create(env->ctx, &env->streams[i]);
        if (rc != DV_OK)
            return rc;
        env->nstreams = i + 1;
    }
    return DV_OK;
}

void dv__res_env_drop_streams(dv_res_env *env)
{
    for (uint32_t i = 0; i < env->nstreams; i++)
        (void)dv__drv_stream_destroy(env->streams[i]);
    env->nstreams = 0;
}

int dv__res_env_init(dv_res_env *env, dv_driver *drv, int device, uint32_t nstreams)
{
    int rc;
    if (nstreams == 0 || nstreams > DV_MAX_STREAMS)
        return dv__fail(DV_EINVAL, "res_env_init", "res_env_init: %u streams (1..%u)", nstreams,
                        DV_MAX_STREAMS);
    if ((rc = dv__res_env_open(env, drv, device)) != DV_OK)
        return rc;
    if ((rc = dv__res_env_streams(env, nstreams)) != DV_OK) {
        dv_error_detail saved = *dv_last_error();
        dv__res_env_fini(env);
        *dv__detail() = saved;
    }
    return rc;
}

int dv__res_env_sync(dv_res_env *env)
{
    int first = DV_OK;
    for (uint32_t i = 0; i < env->nstreams; i++) {
        int rc = dv__drv_stream_sync(env->streams[i]);
        if (rc != DV_OK && first == DV_OK)
            first = rc;
    }
    return first;
}

void dv__res_env_fini(dv_res_env *env)
{
    if (env == NULL || env->ctx == NULL)
        return;
    (void)dv__res_env_sync(env);
    dv__res_env_drop_streams(env);
    (void)dv__drv_ctx_release(env->ctx);
    memset(env, 0, sizeof(*env));
}

void dv__res_env_adopt(dv_res_env *env)
{
    env->owner = pthread_self();
}

int dv__check_stream(const dv_res_env *env, dv_stream_id stream, const char *op)
{
    if (stream >= env->nstreams)
        return dv__fail(DV_EINVAL, op, "%s: unknown stream %u (the environment has %u)", op, stream,
                        env->nstreams);
    return DV_OK;
}

/* ------------------------------------------------------------------------
 * Shared answers
 * ------------------------------------------------------------------------ */

int dv__res_no_tracking(const dv_resource *r, const char *op)
{
    return dv__fail(DV_ESTREAM_MISUSE, op,
                    "%s: the %s resource does not track cross-stream uses; allocate through a "
                    "stream-ordered resource (async, pool) or synchronise across streams "
                    "yourself",
                    op, r->ops->name);
}

void dv__res_owner_violation(const dv_resource *r, const char *op)
{
    fprintf(stderr,
            "devactor: %s on the %s resource from a thread that does not own its environment "
            "(resources belong to the device actor's thread)\n",
            op, r->ops->name);
    abort();
}

/* ------------------------------------------------------------------------
 * Wrappers
 * ------------------------------------------------------------------------ */

#define CHECK_RES(r, op)                                                                           \
    do {                                                                                           \
        if ((r) == NULL)                                                                           \
            return dv__fail(DV_EINVAL, (op), "%s: NULL resource", (op));                           \
        dv__res_assert_owner((r), (op));                                                           \
    } while (0)

static int check_access(dv_access a, const char *op)
{
    if (a != DV_ACCESS_READ && a != DV_ACCESS_WRITE && a != DV_ACCESS_READ_WRITE)
        return dv__fail(DV_EINVAL, op, "%s: access %d is not READ, WRITE or READ_WRITE", op,
                        (int)a);
    return DV_OK;
}

static int check_id(const dv_resource *r, dv_block_id id, const char *op)
{
    if (id.ptr == 0)
        return dv__fail(DV_EINVAL, op, "%s: NULL block", op);
    if (id.device != r->device)
        return dv__fail(DV_EINVAL, op, "%s: block of device %d given to a resource of device %d",
                        op, id.device, r->device);
    return DV_OK;
}

int dv__res_allocate(dv_resource *r, uint64_t bytes, dv_stream_id stream, dv_tag tag, dv_block *out)
{
    int rc;
    CHECK_RES(r, "allocate");
    if (out == NULL)
        return dv__fail(DV_EINVAL, "allocate", "allocate: NULL out");
    if (bytes == 0 || bytes > DV_DRV_MAX_BYTES) {
        memset(out, 0, sizeof(*out));
        rc = dv__fail(DV_EINVAL, "allocate", "allocate: size %llu is %s", (unsigned long long)bytes,
                      bytes == 0 ? "zero" : "absurd");
        dv__detail()->requested = bytes;
        return rc;
    }
    if ((rc = dv__check_stream(r->env, stream, "allocate")) != DV_OK) {
        memset(out, 0, sizeof(*out));
        return rc;
    }
    if (tag.name == NULL)
        tag.name = "untagged";
    /* Resources fill *out whole on success; a failure leaves it zeroed. */
    if (r->env->alloc_depth++ == 0) {
        r->env->alloc_epoch++;
        r->env->mapped_at_alloc = atomic_load_explicit(&r->env->mapped_bytes, memory_order_relaxed);
        r->env->refused_for_good = false;
        r->env->refused_by = NULL;
    }
    rc = r->ops->allocate(r, bytes, stream, tag, out);
    r->env->alloc_depth--;
    if (rc != DV_OK) {
        memset(out, 0, sizeof(*out));
        /* Short of memory, the detail names the caller's bytes, whatever
         * layer refused a part of them (a pool's growth, a granule). */
        if (r->env->alloc_depth == 0 && dv__short_of_memory(rc))
            dv__detail()->requested = bytes;
    }
    return rc;
}

int dv__res_deallocate(dv_resource *r, dv_block *block)
{
    int rc;
    CHECK_RES(r, "deallocate");
    if (block == NULL)
        return dv__fail(DV_EINVAL, "deallocate", "deallocate: NULL block");
    if ((rc = check_id(r, dv__block_id_of(block), "deallocate")) != DV_OK)
        return rc;
    if (block->state != DV_BLOCK_LIVE) {
        rc = dv__fail(DV_EUSE_AFTER_FREE, "deallocate",
                      "deallocate: block 0x%llx (generation %llu) is not live: freed twice?",
                      (unsigned long long)block->ptr, (unsigned long long)block->generation);
        dv__detail()->generation = block->generation;
        return rc;
    }
    return r->ops->deallocate(r, block);
}

/* ------------------------------------------------------------------------
 * The public allocate and deallocate (devactor_resource.h), here beside
 * the wrappers they call so that the compiler puts them in one body: a
 * replay through a stack makes millions of these calls a second.
 * ------------------------------------------------------------------------ */

/* Public calls on the wrong thread are refused rather than asserted: a
 * stack belongs to one thread, and a caller's mistake must not corrupt it. */
int dv__res_owner_check(const dv_resource *r, const char *op)
{
    if (r == NULL)
        return dv__fail(DV_EINVAL, op, "%s: NULL resource", op);
    if (r->env == NULL || !pthread_equal(pthread_self(), r->env->owner))
        return dv__fail(DV_EINVAL, op,
                        "%s: resource %s used off its actor's thread (only in the stack "
                        "function, a resource's own calls, or dv_actor_resources)",
                        op, dv__res_name(r));
    return DV_OK;
}

int dv_resource_allocate(dv_resource *r, uint64_t bytes, dv_stream stream, dv_tag tag,
                         dv_block *out)
{
    int rc = dv__res_owner_check(r, "resource_allocate");
    if (rc != DV_OK) {
        if (out != NULL) /* as every failure leaves it */
            memset(out, 0, sizeof(*out));
        return rc;
    }
    if (out == NULL)
        return dv__fail(DV_EINVAL, "resource_allocate", "resource_allocate: NULL out");
    rc = dv__res_allocate(r, bytes, stream, tag, out);
    if (rc == DV_OK && r->given != NULL)
        dv__res_given_add(r, out); /* for the layer above to answer with */
    if (rc == DV_OK && r->env->allocated != NULL)
        r->env->allocated(r->env->allocated_arg);
    return rc;
}

int dv_resource_deallocate(dv_resource *r, dv_block *block)
{
    int rc = dv__res_owner_check(r, "resource_deallocate");
    if (rc != DV_OK)
        return rc;
    uint64_t generation = block != NULL ? block->generation : 0;
    rc = dv__res_deallocate(r, block);
    if (rc == DV_OK && r->given != NULL)
        dv__res_given_remove(r, generation);
    return rc;
}

/*
 * The resource that implements an op for r: r itself, or the first
 * resource upstream whose op is set.  A decorator leaves NULL the ops it
 * would only forward (as Redis's ConnectionType does).
 */
#define IMPL(r, op) ((dv_resource *)impl_of((r), offsetof(dv_res_ops, op)))

static const dv_resource *impl_of(const dv_resource *r, size_t op)
{
    void (*const *fn)(void);
    while (r != NULL) {
        fn = (void (*const *)(void))((const char *)r->ops + op);
        if (*fn != NULL)
            break;
        r = r->upstream;
    }
    return r;
}

uint64_t dv__res_bytes_outstanding(const dv_resource *r)
{
    dv_resource *t = IMPL(r, bytes_outstanding);
    return t != NULL ? t->ops->bytes_outstanding(t) : 0;
}

int dv__res_reap_pending(dv_resource *r)
{
    CHECK_RES(r, "reap_pending");
    dv_resource *t = IMPL(r, reap_pending);
    return t != NULL ? t->ops->reap_pending(t) : DV_OK;
}

bool dv__res_holds_block(const dv_resource *r, dv_block_id id)
{
    dv_resource *t = IMPL(r, holds_block);
    return t == NULL || t->ops->holds_block(t, id);
}

bool dv__res_supports_block_use_tracking(const dv_resource *r)
{
    dv_resource *t = IMPL(r, supports_block_use_tracking);
    return t != NULL && t->ops->supports_block_use_tracking(t);
}

int dv__res_prepare_block_use(dv_resource *r, dv_block_id id, dv_stream_id stream, dv_access a)
{
    int rc;
    CHECK_RES(r, "prepare_block_use");
    if ((rc = check_id(r, id, "prepare_block_use")) != DV_OK ||
        (rc = dv__check_stream(r->env, stream, "prepare_block_use")) != DV_OK ||
        (rc = check_access(a, "prepare_block_use")) != DV_OK)
        return rc;
    dv_resource *t = IMPL(r, prepare_block_use);
    return t != NULL ? t->ops->prepare_block_use(t, id, stream, a)
                     : dv__res_no_tracking(r, "prepare_block_use");
}

int dv__res_finish_block_use(dv_resource *r, dv_block_id id, dv_stream_id stream, dv_access a)
{
    int rc;
    CHECK_RES(r, "finish_block_use");
    if ((rc = check_id(r, id, "finish_block_use")) != DV_OK ||
        (rc = dv__check_stream(r->env, stream, "finish_block_use")) != DV_OK ||
        (rc = check_access(a, "finish_block_use")) != DV_OK)
        return rc;
    dv_resource *t = IMPL(r, finish_block_use);
    return t != NULL ? t->ops->finish_block_use(t, id, stream, a)
                     : dv__res_no_tracking(r, "finish_block_use");
}

int dv__res_record_block_use(dv_resource *r, dv_block_id id, dv_stream_id stream)
{
    int rc;
    CHECK_RES(r, "record_block_use");
    if ((rc = check_id(r, id, "record_block_use")) != DV_OK ||
        (rc = dv__check_stream(r->env, stream, "record_block_use")) != DV_OK)
        return rc;
    dv_resource *t = IMPL(r, record_block_use);
    return t != NULL ? t->ops->record_block_use(t, id, stream)
                     : dv__res_no_tracking(r, "record_block_use");
}

int dv__res_capture_frees(dv_resource *r, dv_stream_id stream)
{
    if (r == NULL || stream >= r->env->nstreams)
        return DV_OK;
    dv__res_assert_owner(r, "capture_frees");
    dv_resource *t = IMPL(r, capture_frees);
    return t != NULL ? t->ops->capture_frees(t, stream) : DV_OK;
}

uint64_t dv__res_stream_position(dv_resource *r, dv_stream_id stream)
{
    if (r == NULL || stream >= r->env->nstreams)
        return 0;
    dv__res_assert_owner(r, "stream_position");
    dv_resource *t = IMPL(r, stream_position);
    return t != NULL ? t->ops->stream_position(t, stream) : 0;
}

void dv__res_note_stream_wait(dv_resource *r, dv_stream_id waiter, dv_stream_id signaler,
                              uint64_t pos)
{
    if (r == NULL || waiter >= r->env->nstreams || signaler >= r->env->nstreams || pos == 0)
        return;
    dv__res_assert_owner(r, "note_stream_wait");
    dv_resource *t = IMPL(r, note_stream_wait);
    if (t != NULL)
        t->ops->note_stream_wait(t, waiter, signaler, pos);
}

void dv__res_destroy_stack(dv_resource *r)
{
    while (r != NULL) {
        dv_resource *up = r->upstream;
        dv__res_given_free(r);
        r->ops->destroy(r);
        r = up;
    }
}

const char *dv__res_name(const dv_resource *r)
{
    return r != NULL ? r->ops->name : "none";
}
