/*
 * The public face of the resources (devactor_resource.h): the dv_res_*
 * wrappers behind a check that the caller is the stack's owner thread
 * (dv__res_owner_check; allocate and deallocate, the hot ones, are in
 * resource.c beside the wrappers they call), the layers' constructors,
 * and the adapter that runs a caller's own allocate and deallocate as a
 * layer.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/abi.h"
#include "devactor_resource.h"
#include "resources/resource.h"

uint64_t dv_resource_bytes_outstanding(const dv_resource *r)
{
    return r != NULL ? dv__res_bytes_outstanding(r) : 0;
}

/* A caller's layer (dv_resource_adapt, below). */
typedef struct adapter {
    dv_resource base;
    const dv_resource_ops *ops;
    void *self;
} adapter;

#define ADAPTER(r) ((adapter *)(r))

static const dv_res_ops adapter_ops;

const char *dv_resource_name(const dv_resource *r)
{
    if (r != NULL && r->ops == &adapter_ops)
        return ADAPTER(r)->ops->name != NULL ? ADAPTER(r)->ops->name : "adapter";
    return dv__res_name(r);
}

dv_resource *dv_resource_upstream(const dv_resource *r)
{
    return r != NULL ? r->upstream : NULL;
}

void dv_resource_destroy(dv_resource *r)
{
    if (dv__res_owner_check(r, "resource_destroy") == DV_OK) {
        dv__res_given_free(r);
        r->ops->destroy(r);
    }
}

static int layer_check(dv_resource *upstream, dv_resource **out, const char *op)
{
    if (out == NULL)
        return dv__fail(DV_EINVAL, op, "%s: NULL out", op);
    *out = NULL;
    return dv__res_owner_check(upstream, op);
}

int dv_resource_pool(dv_resource *upstream, const dv_pool_options *opts, dv_resource **out)
{
    int rc = layer_check(upstream, out, "resource_pool");
    if (rc != DV_OK)
        return rc;
    dv_pool_config cfg;
    dv__pool_config_init(&cfg);
    if (opts != NULL) {
        if (opts->initial_chunk_bytes)
            cfg.initial_chunk_bytes = opts->initial_chunk_bytes;
        if (opts->max_chunk_bytes)
            cfg.max_chunk_bytes = opts->max_chunk_bytes;
        cfg.max_pool_bytes = opts->max_pool_bytes;
        /* Chunk sizes given: chunks it is. */
        cfg.chunks = opts->initial_chunk_bytes != 0 || opts->max_chunk_bytes != 0;
    }
    return dv__pool_resource_create(upstream, &cfg, out);
}

int dv_resource_budget(dv_resource *upstream, uint64_t limit_bytes, dv_resource **out)
{
    int rc = layer_check(upstream, out, "resource_budget");
    return rc != DV_OK ? rc : dv__budget_resource_create(upstream, limit_bytes, out);
}

int dv_resource_logging(dv_resource *upstream, const char *path, dv_resource **out)
{
    int rc = layer_check(upstream, out, "resource_logging");
    if (rc != DV_OK)
        return rc;
    if (path == NULL || *path == '\0')
        return dv__fail(DV_EINVAL, "resource_logging", "resource_logging: no path");
    return dv__logging_resource_create_file(upstream, path, out);
}

int dv_resource_guard(dv_resource *upstream, dv_resource **out)
{
    int rc = layer_check(upstream, out, "resource_guard");
    if (rc != DV_OK)
        return rc;
    dv_guard_config cfg;
    dv__guard_config_init(&cfg);
    return dv__guard_resource_create(upstream, &cfg, out);
}

_Static_assert(sizeof(dv_pool_stats) >= DV_ABI_POOL_STATS_MIN, "dv_pool_stats only grows");

int dv_resource_pool_stats_sized(dv_resource *pool, dv_pool_stats *out, size_t size)
{
    int rc = dv__res_owner_check(pool, "resource_pool_stats");
    if (rc != DV_OK)
        return rc;
    if (out == NULL || !dv__abi_size_ok(size, DV_ABI_POOL_STATS_MIN))
        return dv__fail(DV_EINVAL, "resource_pool_stats", "resource_pool_stats: %s",
                        out == NULL ? "NULL out" : "a size it cannot take");
    dv_pool_stats full;
    if ((rc = dv__pool_stats_get(pool, &full)) != DV_OK)
        return rc;
    dv__abi_copy_out(out, size, &full, sizeof(full));
    return DV_OK;
}

int dv_resource_budget_stats(const dv_resource *budget, uint64_t *limit, uint64_t *used)
{
    int rc = dv__res_owner_check(budget, "resource_budget_stats");
    return rc != DV_OK ? rc : dv__budget_stats(budget, limit, used);
}

int dv_resource_guard_check(dv_resource *guard)
{
    int rc = dv__res_owner_check(guard, "resource_guard_check");
    return rc != DV_OK ? rc : dv__guard_check(guard);
}

int dv_resource_trim(dv_resource *r, uint64_t *released)
{
    int rc = dv__res_owner_check(r, "resource_trim");
    return rc != DV_OK ? rc : dv__res_trim_stack(r, released); /* refused: *released untouched */
}

int dv__res_trim_stack(dv_resource *r, uint64_t *released)
{
    int rc;
    if (released != NULL)
        *released = 0;
    /* A guard's quarantine goes back first, and frees queued on the
     * streams are reached, so the pools see every block given back. */
    for (dv_resource *x = r; x != NULL; x = x->upstream)
        if ((rc = dv__guard_flush(x)) != DV_OK)
            return rc;
    if ((rc = dv__res_reap_pending(r)) != DV_OK)
        return rc;
    uint64_t total = 0;
    for (dv_resource *x = r; x != NULL; x = x->upstream) {
        if (!dv__res_is_pool(x))
            continue;
        uint64_t n = 0;
        if ((rc = dv__pool_trim(x, &n)) != DV_OK)
            return rc;
        total += n;
    }
    if (released != NULL)
        *released = total;
    /* The chunks' frees are queued on their streams: wait for them, so the
     * driver's pool has them back before it is trimmed. */
    if (total > 0 && (rc = dv__res_reap_pending(r)) != DV_OK)
        return rc;
    /* And the driver's pool underneath: its cached memory goes back. */
    rc = dv__drv_pool_trim(r->env->ctx, 0);
    return rc == DV_ENOTSUP ? DV_OK : rc;
}

/* ------------------------------------------------------------------------
 * A caller's layer
 * ------------------------------------------------------------------------ */

/* Blocks a resource gave a caller's layer, as given, and whether the
 * layer has answered with one yet: an open-addressed table by generation
 * (never 0 for a live block), linear probing. */
typedef struct given_slot {
    dv_block b;
    bool answered;
} given_slot;

typedef struct dv_res_given {
    given_slot *slot;
    size_t cap, n; /* cap: a power of two, or 0 */
} dv_res_given;

static size_t given_home(const dv_res_given *g, uint64_t generation)
{
    return (size_t)(generation * UINT64_C(0x9E3779B97F4A7C15) >> 20) & (g->cap - 1);
}

/* The slot of generation, or of the empty place where it would go. */
static size_t given_find(const dv_res_given *g, uint64_t generation)
{
    size_t i = given_home(g, generation);
    while (g->slot[i].b.generation != 0 && g->slot[i].b.generation != generation)
        i = (i + 1) & (g->cap - 1);
    return i;
}

void dv__res_given_add(dv_resource *r, const dv_block *b)
{
    dv_res_given *g = r->given;
    if (b->generation == 0)
        return;
    if ((g->n + 1) * 2 > g->cap) {
        size_t cap = g->cap != 0 ? 2 * g->cap : 64;
        given_slot *old = g->slot;
        size_t ocap = g->cap;
        given_slot *slot = calloc(cap, sizeof(*slot));
        if (slot == NULL)
            return; /* not noted: the layer's answer with it is refused */
        g->slot = slot;
        g->cap = cap;
        for (size_t i = 0; i < ocap; i++)
            if (old[i].b.generation != 0)
                g->slot[given_find(g, old[i].b.generation)] = old[i];
        free(old);
    }
    size_t i = given_find(g, b->generation);
    if (g->slot[i].b.generation == 0)
        g->n++;
    g->slot[i] = (given_slot){.b = *b};
}

void dv__res_given_remove(dv_resource *r, uint64_t generation)
{
    dv_res_given *g = r->given;
    if (g->cap == 0 || generation == 0)
        return;
    size_t i = given_find(g, generation);
    if (g->slot[i].b.generation == 0)
        return;
    g->slot[i].b.generation = 0;
    g->n--;
    /* Those after it in its run move back where their probe allows. */
    for (size_t j = (i + 1) & (g->cap - 1); g->slot[j].b.generation != 0;
         j = (j + 1) & (g->cap - 1)) {
        size_t home = given_home(g, g->slot[j].b.generation);
        if (((j - home) & (g->cap - 1)) >= ((j - i) & (g->cap - 1))) {
            g->slot[i] = g->slot[j];
            g->slot[j].b.generation = 0;
            i = j;
        }
    }
}

void dv__res_given_free(dv_resource *r)
{
    if (r != NULL && r->given != NULL) {
        free(r->given->slot);
        free(r->given);
        r->given = NULL;
    }
}

/* Is b, field by field, a block r gave and has not had back?  Its record
 * as given, or NULL. */
static given_slot *given_as(const dv_resource *r, const dv_block *b)
{
    const dv_res_given *g = r->given;
    if (g == NULL || g->cap == 0 || b->generation == 0)
        return NULL;
    given_slot *o = &g->slot[given_find(g, b->generation)];
    return o->b.generation != 0 ? o : NULL;
}

static bool same_block(const dv_block *a, const dv_block *b)
{
    return a->ptr == b->ptr && a->bytes == b->bytes && a->requested == b->requested &&
           a->generation == b->generation && a->tag.name == b->tag.name &&
           a->tag.query_id == b->tag.query_id && a->alloc_stream == b->alloc_stream &&
           a->state == b->state && a->align == b->align && a->device == b->device &&
           a->slot == b->slot;
}

static const char *layer_name(const adapter *a)
{
    return a->ops->name != NULL ? a->ops->name : "(unnamed)";
}

/* The layer's answer to op: a failure with no detail of its own names
 * the layer ("resource spill: allocate answered DV_EIO ..."). */
static int layer_answer(const adapter *a, int rc, const char *op)
{
    char who[96];
    snprintf(who, sizeof(who), "resource %s: %s", layer_name(a), op);
    return dv__user_answer(rc, op, who);
}

/* A block the upstream gave the layer, refused as the layer's answer:
 * back to the upstream as it was given, out of its books. */
static void give_back(dv_resource *up, dv_block back)
{
    if (dv__res_holds_block(up, dv__block_id_of(&back)) && dv__res_deallocate(up, &back) == DV_OK)
        dv__res_given_remove(up, back.generation);
}

static int adapter_allocate(dv_resource *r, uint64_t bytes, dv_stream_id stream, dv_tag tag,
                            dv_block *out)
{
    adapter *a = ADAPTER(r);
    dv_error_clear(); /* what the layer says of a failure is its own */
    int rc = layer_answer(a, a->ops->allocate(a->self, r->upstream, bytes, stream, tag, out),
                          "allocate");
    if (rc != DV_OK)
        return rc;
    given_slot *gs = given_as(r->upstream, out);
    bool same = gs != NULL && same_block(&gs->b, out);
    if (same && gs->answered) {
        /* Live already, in another caller's hands: the two would share
         * it.  It stays that caller's. */
        memset(out, 0, sizeof(*out));
        return dv__fail(DV_EINVAL, "allocate",
                        "resource %s: allocate answered with a block it had answered with "
                        "before, still live",
                        layer_name(a));
    }
    bool held = same && out->state == DV_BLOCK_LIVE &&
                dv__res_holds_block(r->upstream, dv__block_id_of(out));
    if (held && out->requested >= bytes && out->alloc_stream == stream) {
        gs->answered = true;
        return DV_OK;
    }
    if (held) {
        /* Smaller than asked (a use of the bytes asked for would reach
         * another block), or ordered on another stream (its memory is
         * not ready in the request's order): back upstream. */
        dv_block back = *out;
        bool small = back.requested < bytes;
        give_back(r->upstream, back);
        memset(out, 0, sizeof(*out));
        return dv__fail(DV_EINVAL, "allocate",
                        small ? "resource %s: allocate answered a block of %llu bytes for a "
                                "request of %llu"
                              : "resource %s: allocate answered a block ordered on stream %llu "
                                "for a request on stream %llu",
                        layer_name(a),
                        (unsigned long long)(small ? back.requested : back.alloc_stream),
                        (unsigned long long)(small ? bytes : stream));
    }
    /* A block it freed, or one it changed: two callers would share memory
     * (a block larger than it is), or one the upstream never gave.  One
     * the upstream gave, changed, goes back to it as it was given. */
    if (gs != NULL && !gs->answered && out->state == DV_BLOCK_LIVE && !same)
        give_back(r->upstream, gs->b);
    memset(out, 0, sizeof(*out));
    return dv__fail(DV_EINVAL, "allocate",
                    "resource %s: allocate answered DV_OK without a live block from its upstream, "
                    "as the upstream gave it",
                    layer_name(a));
}

static int adapter_deallocate(dv_resource *r, dv_block *block)
{
    adapter *a = ADAPTER(r);
    dv_error_clear();
    int rc = layer_answer(a, a->ops->deallocate(a->self, r->upstream, block), "deallocate");
    if (rc != DV_OK)
        return rc;
    if (rc == DV_OK && block->state == DV_BLOCK_LIVE)
        return dv__fail(DV_EINVAL, "deallocate",
                        "resource %s: deallocate answered DV_OK but did not give the block "
                        "back upstream",
                        layer_name(a));
    return rc;
}

static void adapter_destroy(dv_resource *r)
{
    adapter *a = ADAPTER(r);
    if (a->ops->destroy != NULL)
        a->ops->destroy(a->self);
    free(a);
}

/* Every other op (tracking, positions, reaping) is the upstream's: the
 * blocks are its. */
static const dv_res_ops adapter_ops = {
    .name = "adapter",
    .allocate = adapter_allocate,
    .deallocate = adapter_deallocate,
    .destroy = adapter_destroy,
};

int dv_resource_adapt(dv_resource *upstream, const dv_resource_ops *ops, void *self,
                      dv_resource **out)
{
    int rc = layer_check(upstream, out, "resource_adapt");
    if (rc != DV_OK)
        return rc;
    if (ops == NULL || ops->allocate == NULL || ops->deallocate == NULL)
        return dv__fail(DV_EINVAL, "resource_adapt",
                        "resource_adapt: ops with allocate and deallocate are needed");
    adapter *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return dv__fail(DV_ENOMEM, "resource_adapt", "resource_adapt: out of host memory");
    a->base = (dv_resource){.ops = &adapter_ops,
                            .upstream = upstream,
                            .env = upstream->env,
                            .device = upstream->device};
    if (upstream->given == NULL && (upstream->given = calloc(1, sizeof(dv_res_given))) == NULL) {
        free(a);
        return dv__fail(DV_ENOMEM, "resource_adapt", "resource_adapt: out of host memory");
    }
    a->ops = ops;
    a->self = self;
    *out = &a->base;
    return DV_OK;
}
