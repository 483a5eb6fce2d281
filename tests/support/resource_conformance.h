/*
 * The resource conformance suite: one table of stacks, one body of checks,
 * any backend.  Every resource alone (direct, async, pool, budget, logging,
 * guard — the decorators over async) and the stacks
 * budget -> logging -> guard -> async and budget -> pool -> async.
 *
 * Checks per stack: alignment and size; live blocks never overlap; unique
 * generations; accounting before and after free and reap; zero, absurd and
 * too-large sizes; bad streams; double free, foreign and stale blocks;
 * tracking answers (DV_ESTREAM_MISUSE where the stack cannot track); data
 * written on stream A and read on stream B after prepare/finish is right
 * every time; a block freed while B still reads it is not reused before B
 * finishes.  The plan is fixed: checks a stack cannot run are skipped.
 */
#ifndef DV_TESTS_RESOURCE_CONFORMANCE_H
#define DV_TESTS_RESOURCE_CONFORMANCE_H

#include "resources/resource.h"
#include "tap.h"

#define RC_CHECKS_PER_STACK        21
#define RC_STACKS                  8
#define RESOURCE_CONFORMANCE_TESTS (RC_CHECKS_PER_STACK * RC_STACKS)
#define RC_MIB                     (UINT64_C(1) << 20)

typedef struct rc_stack {
    const char *name;
    dv_resource *top;
    dv_log_sink *sink; /* owned, when the stack logs */
    bool tracks;
    bool budget; /* the top refuses with DV_EOUT_OF_BUDGET */
} rc_stack;

static TAP_UNUSED void rc_skip(const char *why)
{
    tap_run++;
    printf("ok %d # SKIP %s\n", tap_run, why);
    fflush(stdout);
}

/* Build stack k over env; false when a constructor failed. */
static bool rc_build(int k, dv_res_env *env, rc_stack *s, uint64_t budget_bytes)
{
    dv_resource *async = NULL, *mid = NULL, *top = NULL;
    dv_pool_config pcfg;
    dv_guard_config gcfg;
    dv__pool_config_init(&pcfg);
    pcfg.initial_chunk_bytes = 32 * RC_MIB;
    pcfg.max_chunk_bytes = 128 * RC_MIB;
    dv__guard_config_init(&gcfg);
    memset(s, 0, sizeof(*s));
    s->tracks = true;

    if (k == 0) {
        s->name = "direct";
        s->tracks = false;
        return dv__direct_resource_create(env, &s->top) == DV_OK;
    }
    if (dv__async_resource_create(env, &async) != DV_OK)
        return false;
    switch (k) {
    case 1:
        s->name = "async";
        top = async;
        break;
    case 2:
        s->name = "pool(async)";
        if (dv__pool_resource_create(async, &pcfg, &top) != DV_OK)
            goto fail;
        break;
    case 3:
        s->name = "budget(async)";
        s->budget = true;
        if (dv__budget_resource_create(async, budget_bytes, &top) != DV_OK)
            goto fail;
        break;
    case 4:
        s->name = "logging(async)";
        if (dv__log_sink_memory(&s->sink) != DV_OK ||
            dv__logging_resource_create(async, s->sink, true, &top) != DV_OK)
            goto fail;
        break;
    case 5:
        s->name = "guard(async)";
        if (dv__guard_resource_create(async, &gcfg, &top) != DV_OK)
            goto fail;
        break;
    case 6:
        s->name = "budget->logging->guard->async";
        s->budget = true;
        if (dv__guard_resource_create(async, &gcfg, &mid) != DV_OK)
            goto fail;
        if (dv__log_sink_memory(&s->sink) != DV_OK ||
            dv__logging_resource_create(mid, s->sink, true, &mid) != DV_OK)
            goto fail;
        if (dv__budget_resource_create(mid, budget_bytes, &top) != DV_OK)
            goto fail;
        break;
    case 7:
        s->name = "budget->pool->async";
        s->budget = true;
        if (dv__pool_resource_create(async, &pcfg, &mid) != DV_OK)
            goto fail;
        if (dv__budget_resource_create(mid, budget_bytes, &top) != DV_OK)
            goto fail;
        break;
    default:
        goto fail;
    }
    s->top = top;
    return true;
fail:
    dv__res_destroy_stack(mid != NULL ? mid : async);
    return false;
}

static void rc_destroy(rc_stack *s)
{
    dv__res_destroy_stack(s->top);
    if (s->sink != NULL)
        dv__log_sink_destroy(s->sink);
}

static uint64_t rc_rand(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

static int rc_cmp_block(const void *a, const void *b)
{
    const dv_block *x = a, *y = b;
    return x->ptr < y->ptr ? -1 : x->ptr > y->ptr;
}

/* The kernel spin(ns), to hold a stream busy on either backend. */
static int rc_spin(dv_res_env *env, dv_drv_func *spin, dv_stream_id s, uint64_t ns)
{
    void *params[] = {&ns};
    return dv__drv_launch(spin, (dv_dim3){1, 1, 1}, (dv_dim3){32, 1, 1}, 0, env->streams[s], params);
}

#define RC_NBLOCKS 300

static void rc_run_stack(dv_res_env *env, rc_stack *s, dv_drv_func *spin, dv_resource *foreign_top)
{
    dv_resource *r = s->top;
    static dv_block blocks[RC_NBLOCKS];
    uint64_t rng = 0x2545F4914F6CDD1Dull;
    uint64_t sum = 0;
    bool aligned = true, sized = true, distinct_gen = true, nonoverlap = true;
    int rc, failures = 0;

    diag("stack %s", s->name);
    /* -- many live blocks ------------------------------------------------- */
    for (int i = 0; i < RC_NBLOCKS; i++) {
        uint64_t bytes = 1 + rc_rand(&rng) % (i % 10 == 0 ? 2 * RC_MIB : 64 * 1024);
        dv_stream_id st = (dv_stream_id)(rc_rand(&rng) % env->nstreams);
        rc = dv__res_allocate(r, bytes, st, (dv_tag){"conformance", (uint64_t)i}, &blocks[i]);
        if (rc != DV_OK) {
            failures++;
            diag("allocate %llu failed: %s", (unsigned long long)bytes, dv_last_error()->message);
            blocks[i].ptr = 0;
            continue;
        }
        aligned &= blocks[i].ptr % DV_BLOCK_ALIGN == 0 && blocks[i].align >= DV_BLOCK_ALIGN;
        sized &= blocks[i].bytes >= bytes && blocks[i].requested == bytes &&
                 blocks[i].state == DV_BLOCK_LIVE && blocks[i].alloc_stream == st;
        sum += blocks[i].bytes;
        if (i > 0 && blocks[i - 1].ptr != 0)
            distinct_gen &= blocks[i].generation > blocks[i - 1].generation;
    }
    is_int(failures, 0, "%s: %d allocations of 1 B .. 2 MiB on random streams", s->name,
           RC_NBLOCKS);
    ok(aligned, "%s: every block is %u-byte aligned", s->name, DV_BLOCK_ALIGN);
    ok(sized, "%s: bytes >= requested, state LIVE, alloc stream kept", s->name);
    ok(distinct_gen, "%s: generations strictly increase", s->name);
    dv_block sorted[RC_NBLOCKS];
    memcpy(sorted, blocks, sizeof(sorted));
    qsort(sorted, RC_NBLOCKS, sizeof(sorted[0]), rc_cmp_block);
    for (int i = 1; i < RC_NBLOCKS; i++)
        if (sorted[i - 1].ptr != 0 && sorted[i - 1].ptr + sorted[i - 1].bytes > sorted[i].ptr)
            nonoverlap = false;
    ok(nonoverlap, "%s: live blocks never overlap", s->name);
    ok(dv__res_bytes_outstanding(r) >= sum, "%s: bytes outstanding %llu >= %llu handed out", s->name,
       (unsigned long long)dv__res_bytes_outstanding(r), (unsigned long long)sum);

    /* -- double, stale and foreign ---------------------------------------- */
    dv_block copy = blocks[0];
    is_status(dv__res_deallocate(r, &blocks[0]), DV_OK, "%s: deallocate", s->name);
    ok(blocks[0].state != DV_BLOCK_LIVE, "%s: the freed block is no longer LIVE (%d)", s->name,
       (int)blocks[0].state);
    is_status(dv__res_deallocate(r, &copy), DV_EUSE_AFTER_FREE,
              "%s: deallocating a copy of a freed block is EUSE_AFTER_FREE", s->name);
    {
        dv_block other;
        int frc = dv__res_allocate(foreign_top, 4096, 0, (dv_tag){"foreign", 0}, &other);
        if (frc == DV_OK) {
            dv_block stranger = other;
            is_status(dv__res_deallocate(r, &stranger), DV_EUSE_AFTER_FREE,
                      "%s: a block of another resource is EUSE_AFTER_FREE", s->name);
            dv__res_deallocate(foreign_top, &other);
        } else {
            ok(false, "%s: could not make a foreign block: %s", s->name, dv_last_error()->message);
        }
    }
    if (s->tracks) {
        is_status(dv__res_prepare_block_use(r, dv__block_id_of(&copy), 1, DV_ACCESS_READ),
                  DV_EUSE_AFTER_FREE, "%s: prepare on a stale id is EUSE_AFTER_FREE", s->name);
    } else {
        is_status(dv__res_prepare_block_use(r, dv__block_id_of(&blocks[1]), 1, DV_ACCESS_READ),
                  DV_ESTREAM_MISUSE, "%s: prepare on a non-tracking stack is ESTREAM_MISUSE",
                  s->name);
    }
    ok(dv__res_supports_block_use_tracking(r) == s->tracks, "%s: supports tracking: %s", s->name,
       s->tracks ? "yes" : "no");

    /* -- bad sizes and streams -------------------------------------------- */
    dv_block bad;
    rc = dv__res_allocate(r, 0, 0, (dv_tag){"zero", 0}, &bad);
    int rc2 = dv__res_allocate(r, UINT64_MAX, 0, (dv_tag){"absurd", 0}, &bad);
    int rc3 = dv__res_allocate(r, 64, env->nstreams, (dv_tag){"stream", 0}, &bad);
    ok(rc == DV_EINVAL && rc2 == DV_EINVAL && rc3 == DV_EINVAL,
       "%s: zero size, absurd size and unknown stream are EINVAL (%s, %s, %s)", s->name,
       dv_err_name(rc), dv_err_name(rc2), dv_err_name(rc3));
    rc = dv__res_allocate(r, UINT64_C(1) << 46, 0, (dv_tag){"huge", 0}, &bad);
    ok(rc == (s->budget ? DV_EOUT_OF_BUDGET : DV_EDEVICE_OOM), "%s: 64 TiB is %s (%s)", s->name,
       s->budget ? "EOUT_OF_BUDGET" : "EDEVICE_OOM", dv_err_name(rc));

    /* -- free everything: accounting returns to zero ---------------------- */
    failures = 0;
    for (int i = 1; i < RC_NBLOCKS; i++)
        if (blocks[i].ptr != 0 && dv__res_deallocate(r, &blocks[i]) != DV_OK)
            failures++;
    is_int(failures, 0, "%s: every other block deallocates", s->name);
    is_status(dv__res_reap_pending(r), DV_OK, "%s: reap_pending", s->name);
    is_u64(dv__res_bytes_outstanding(r), 0, "%s: nothing outstanding after free and reap", s->name);

    /* -- cross-stream: write on A, read on B ------------------------------ */
    if (!s->tracks) {
        rc_skip("cross-stream data: the stack cannot track");
        rc_skip("freed while read: the stack cannot track");
        rc_skip("freed while read, data: the stack cannot track");
        rc_skip("cross-stream accounting: the stack cannot track");
        return;
    }
    const uint64_t n = 16384;
    uint32_t *back = calloc(n, 4);
    dv_block x;
    int wrong = 0, errors = 0;
    const dv_stream_id A = 0, B = 1;
    if (dv__res_allocate(r, n * 4, A, (dv_tag){"xstream", 0}, &x) != DV_OK) {
        ok(false, "%s: allocate for the cross-stream test: %s", s->name, dv_last_error()->message);
        rc_skip("freed while read: no block");
        rc_skip("freed while read, data: no block");
        rc_skip("cross-stream accounting: no block");
        free(back);
        return;
    }
    dv_block_id id = dv__block_id_of(&x);
    for (uint32_t it = 1; it <= 40; it++) {
        errors += dv__res_prepare_block_use(r, id, A, DV_ACCESS_WRITE) != DV_OK;
        if (it % 4 == 0)
            errors += rc_spin(env, spin, A, 200000) != DV_OK; /* A is slow now and then */
        errors += dv__drv_memset_d32(env->streams[A], x.ptr, it, n) != DV_OK;
        errors += dv__res_finish_block_use(r, id, A, DV_ACCESS_WRITE) != DV_OK;
        errors += dv__res_prepare_block_use(r, id, B, DV_ACCESS_READ) != DV_OK;
        errors += dv__drv_memcpy_dtoh(env->streams[B], back, x.ptr, n * 4) != DV_OK;
        errors += dv__res_finish_block_use(r, id, B, DV_ACCESS_READ) != DV_OK;
        errors += dv__drv_stream_sync(env->streams[B]) != DV_OK;
        for (uint64_t k = 0; k < n; k++)
            if (back[k] != it) {
                wrong++;
                break;
            }
    }
    ok(errors == 0 && wrong == 0,
       "%s: 40 rounds of write on A, read on B: always the new data (%d wrong, %d errors)", s->name,
       wrong, errors);

    /*
     * Freed while B still reads: B is held busy, then reads x; x is freed
     * on A and a block of the same size is allocated on A and overwritten
     * at once.  The fence must keep that overwrite behind B's read.
     */
    errors = 0;
    errors += dv__res_prepare_block_use(r, id, A, DV_ACCESS_WRITE) != DV_OK;
    errors += dv__drv_memset_d32(env->streams[A], x.ptr, 0x600DDA7Au, n) != DV_OK;
    errors += dv__res_finish_block_use(r, id, A, DV_ACCESS_WRITE) != DV_OK;
    errors += dv__res_prepare_block_use(r, id, B, DV_ACCESS_READ) != DV_OK;
    errors += rc_spin(env, spin, B, 50 * 1000 * 1000) != DV_OK; /* 50 ms */
    errors += dv__drv_memcpy_dtoh(env->streams[B], back, x.ptr, n * 4) != DV_OK;
    errors += dv__res_finish_block_use(r, id, B, DV_ACCESS_READ) != DV_OK;
    errors += dv__res_deallocate(r, &x) != DV_OK;
    dv_block y;
    bool reused = false;
    if (dv__res_allocate(r, n * 4, A, (dv_tag){"reuse", 0}, &y) == DV_OK) {
        reused = y.ptr == id.ptr;
        errors += dv__res_prepare_block_use(r, dv__block_id_of(&y), A, DV_ACCESS_WRITE) != DV_OK;
        errors += dv__drv_memset_d32(env->streams[A], y.ptr, 0xBAADF00Du, n) != DV_OK;
        errors += dv__res_finish_block_use(r, dv__block_id_of(&y), A, DV_ACCESS_WRITE) != DV_OK;
    } else {
        errors++;
    }
    errors += dv__drv_stream_sync(env->streams[B]) != DV_OK;
    ok(errors == 0, "%s: free while B reads, reallocate and overwrite on A (same address: %s)",
       s->name, reused ? "yes" : "no");
    wrong = 0;
    for (uint64_t k = 0; k < n; k++)
        wrong += back[k] != 0x600DDA7Au;
    is_int(wrong, 0, "%s: B read the old data: the memory was not reused before B finished",
           s->name);
    dv__res_deallocate(r, &y);
    dv__res_env_sync(env);
    dv__res_reap_pending(r);
    is_u64(dv__res_bytes_outstanding(r), 0, "%s: nothing outstanding at the end", s->name);
    free(back);
}

/* Run every stack on env; spin is the built-in spin kernel. */
static void resource_conformance(dv_res_env *env, dv_drv_func *spin)
{
    dv_resource *foreign = NULL;
    dv__async_resource_create(env, &foreign);
    for (int k = 0; k < RC_STACKS; k++) {
        rc_stack s;
        if (!rc_build(k, env, &s, 256 * RC_MIB)) {
            diag("stack %d could not be built: %s", k, dv_last_error()->message);
            for (int i = 0; i < RC_CHECKS_PER_STACK; i++)
                ok(false, "stack %d: not built", k);
            continue;
        }
        rc_run_stack(env, &s, spin, foreign);
        rc_destroy(&s);
    }
    dv__res_destroy_stack(foreign);
}

#endif /* DV_TESTS_RESOURCE_CONFORMANCE_H */
