/*
 * dv-bench: devactor's measurements, next to direct driver calls made in
 * the same run on the same device.
 *
 *   alloc   allocate+free pair latency (median, p99) for every resource and
 *           stack at 256 B, 64 KiB, 1 MiB and 64 MiB, beside the driver's
 *           synchronous pair (cuMemAlloc/cuMemFree) and stream-ordered pair
 *           (cuMemAllocAsync/cuMemFreeAsync)
 *   random  RMM's random_allocations workload on the pool: 73 % allocate,
 *           27 % free, sizes uniform in [1, max], N allocations; cost per
 *           operation at N = 1k, 10k, 100k, each size on one pool made
 *           before timing (as RMM's benchmark does), the sizes measured in
 *           alternating rounds on one CPU; the pool without aliases, then
 *           the pool with them
 *   actor   a bare two-thread request/reply over a ck ring, beside an
 *           allocation's round trip through the actor (pool stack); one
 *           client's allocate+release pair through the public API at 256 B
 *           .. 1 MiB, with the order across threads off (what it costs) and
 *           beside a peer allocator's pair (PyTorch's caching allocator,
 *           loaded at run time); aggregate pairs per second with 1, 8 and
 *           4x-cores client threads (per-client rings and one shared ring),
 *           beside the same threads calling the driver's stream-ordered pair
 *           (and the peer's) directly
 *   launch  an empty kernel launched through the actor with 0, 2 and 8
 *           tracked handles (with handles, one that takes 8 pointers, the
 *           rest null), on one stream and alternating between two
 *           (every launch then waits on the other stream), beside a raw
 *           cuLaunchKernel loop; clients post with futures, a window of 64
 *   copy    host<->device bandwidth at 4 KiB .. 256 MiB through the actor
 *           from dv_host_alloc, registered and pageable (staged) memory,
 *           beside the driver's own copies from page-locked memory (posted
 *           256 MiB at a time, as the actor's) and from pageable memory (one at a
 *           time, each with a stream sync, as a blocking caller); a 4 KiB
 *           copy's round trip; the actor thread's CPU time during one 1 GiB
 *           pageable copy each way; 16 clients on 16 streams at once beside
 *           16 threads calling the driver on streams of their own
 *   collectives
 *           all-reduce (float32, sum) through devactor_nccl.h, one actor per
 *           device, at 1 MiB .. 1 GiB, bus bandwidth as nccl-tests gives it,
 *           and an 8-byte all-reduce's latency, beside NCCL called directly
 *           (the same libnccl.so.2, opened at run time) on every visible
 *           device; on the sim two simulated devices, 1 and 4 MiB, devactor
 *           alone
 *
 * Latencies are taken over batches of BATCH pairs (one clock read per
 * batch, so the clock's own cost is spread thin); median and p99 are over
 * batches, reported per pair.  Rows that are compared (the resources of
 * one size, the sizes of random_allocations) are timed in alternating
 * rounds, so that a change of the shared host's speed falls on all of
 * them alike.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getcpu, CPU_SET */
#endif
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ck_ring.h>
#include <dlfcn.h>

#include "devactor.h"
#include "peers/dv_peer.h"
#include "devactor_blas.h"
#include "devactor_fft.h"
#include "devactor_nccl.h"
#include "devactor_testing.h"
#include "tools_common.h"

#define BATCH 16

static bool csv;
/* A measurement could not be made (said on stderr): exit status 1. */
static bool bench_failed;

/* Progress of a long section on stderr: rewritten in place on a terminal,
 * a line each otherwise (a log keeps lines); none with --csv. */
static void progress(const char *what, int i, int n)
{
    if (isatty(STDERR_FILENO))
        fprintf(stderr, "\r%s %d of %d", what, i, n);
    else
        fprintf(stderr, "%s %d of %d\n", what, i, n);
}

static void progress_done(void)
{
    if (isatty(STDERR_FILENO))
        fprintf(stderr, "\r%40s\r", "");
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef struct result {
    double median_ns, p99_ns;
    double ratio; /* to the driver's stream-ordered pair */
    size_t pairs;
    int error;
} result;

/* A pair to time: one allocate and one free. */
typedef int (*pair_fn)(void *ctx, uint64_t bytes);

/* ------------------------------------------------------------------------
 * The pairs
 * ------------------------------------------------------------------------ */

static int pair_driver_sync(void *ctx, uint64_t bytes)
{
    dv_res_env *env = ctx;
    dv_dptr p;
    int rc = dv__drv_mem_alloc(env->ctx, bytes, &p);
    return rc != DV_OK ? rc : dv__drv_mem_free(env->ctx, p);
}

static int pair_driver_async(void *ctx, uint64_t bytes)
{
    dv_res_env *env = ctx;
    dv_dptr p;
    int rc = dv__drv_mem_alloc_async(env->streams[0], bytes, &p);
    return rc != DV_OK ? rc : dv__drv_mem_free_async(env->streams[0], p);
}

static int pair_resource(void *ctx, uint64_t bytes)
{
    dv_resource *r = ctx;
    dv_block b;
    int rc = dv__res_allocate(r, bytes, 0, (dv_tag){"bench", 0}, &b);
    return rc != DV_OK ? rc : dv__res_deallocate(r, &b);
}

/* ------------------------------------------------------------------------
 * Stacks
 * ------------------------------------------------------------------------ */

typedef struct stack {
    const char *name;
    dv_resource *top;
    dv_log_sink *sink;
} stack;

static int build(int k, dv_res_env *env, stack *s)
{
    dv_resource *async = NULL, *mid = NULL;
    dv_pool_config pcfg;
    dv_guard_config gcfg;
    dv__pool_config_init(&pcfg);
    dv__guard_config_init(&gcfg);
    memset(s, 0, sizeof(*s));
    const uint64_t big = UINT64_C(1) << 40;

    if (k == 0) {
        s->name = "direct";
        return dv__direct_resource_create(env, &s->top);
    }
    int rc = dv__async_resource_create(env, &async);
    if (rc != DV_OK)
        return rc;
    switch (k) {
    case 1:
        s->name = "async";
        s->top = async;
        return DV_OK;
    case 2:
        s->name = "pool(async)";
        rc = dv__pool_resource_create(async, &pcfg, &s->top);
        break;
    case 3:
        s->name = "budget(async)";
        rc = dv__budget_resource_create(async, big, &s->top);
        break;
    case 4:
        s->name = "logging(async,null)";
        if ((rc = dv__log_sink_null(&s->sink)) == DV_OK)
            rc = dv__logging_resource_create(async, s->sink, true, &s->top);
        break;
    case 5:
        s->name = "guard(async)";
        rc = dv__guard_resource_create(async, &gcfg, &s->top);
        break;
    case 6:
        s->name = "budget->logging->guard->async";
        if ((rc = dv__guard_resource_create(async, &gcfg, &mid)) == DV_OK &&
            (rc = dv__log_sink_null(&s->sink)) == DV_OK &&
            (rc = dv__logging_resource_create(mid, s->sink, true, &mid)) == DV_OK)
            rc = dv__budget_resource_create(mid, big, &s->top);
        break;
    case 7:
        s->name = "budget->pool->async";
        if ((rc = dv__pool_resource_create(async, &pcfg, &mid)) == DV_OK)
            rc = dv__budget_resource_create(mid, big, &s->top);
        break;
    case 8:
        s->name = "pool(async,alias)";
        pcfg.alias = true;
        rc = dv__pool_resource_create(async, &pcfg, &s->top);
        break;
    default:
        rc = DV_EINVAL;
    }
    if (rc != DV_OK)
        dv__res_destroy_stack(mid != NULL ? mid : async);
    return rc;
}
#define NSTACKS 9

static void unbuild(stack *s)
{
    dv__res_destroy_stack(s->top);
    if (s->sink != NULL)
        dv__log_sink_destroy(s->sink);
}

static void print_row(const char *what, uint64_t bytes, result r)
{
    char size[32];
    if (bytes >= (1u << 20))
        snprintf(size, sizeof(size), "%llu MiB", (unsigned long long)(bytes >> 20));
    else if (bytes >= 1024)
        snprintf(size, sizeof(size), "%llu KiB", (unsigned long long)(bytes >> 10));
    else
        snprintf(size, sizeof(size), "%llu B", (unsigned long long)bytes);
    if (r.error != 0) {
        /* In the table as a row, and a failed measurement: said on
         * stderr, exit 1. */
        if (csv)
            printf("alloc,\"%s\",%llu,,,,%s\n", what, (unsigned long long)bytes, dv_err_name(r.error));
        else
            printf("  %-32s %8s   error: %s\n", what, size, dv_err_name(r.error));
        fprintf(stderr, "dv-bench: alloc: %s at %s: %s\n", what, size, dv_err_name(r.error));
        bench_failed = true;
        return;
    }
    if (csv)
        printf("alloc,\"%s\",%llu,%.1f,%.1f,%.4f,%zu\n", what, (unsigned long long)bytes, r.median_ns,
               r.p99_ns, r.ratio, r.pairs);
    else
        printf("  %-32s %8s %10.1f %10.1f %9.3f %9zu\n", what, size, r.median_ns, r.p99_ns, r.ratio,
               r.pairs);
}

/*
 * The rows of one size are timed in rounds, each row for a slice of every
 * round (after one untimed batch), so that each sees the same states of
 * the machine: on a shared host a core's speed, and the driver's pair
 * with it, changes by half between stretches of a few seconds, and a row
 * timed seconds after the driver's would be compared with another host.
 * A row's median and p99 are over all its batches; its ratio is the
 * median over the rounds of its median there over the driver's
 * stream-ordered pair's.
 */
#define ALLOC_ROUNDS    10
#define ALLOC_ROWS      (2 + NSTACKS)
#define ALLOC_ROUND_CAP 20000 /* batches of one row in one round */

typedef struct alloc_row {
    const char *name;
    pair_fn fn;
    void *ctx;
    uint64_t *per; /* ns per batch, every round */
    size_t n;
    double round_median[ALLOC_ROUNDS];
    int error;
} alloc_row;

static int run_batch(alloc_row *r, uint64_t bytes)
{
    for (int i = 0; i < BATCH; i++) {
        int rc = r->fn(r->ctx, bytes);
        if (rc != DV_OK)
            return rc;
    }
    return DV_OK;
}

static void time_round(alloc_row *r, uint64_t bytes, double budget_s, int round)
{
    size_t first = r->n, n = 0;
    if ((r->error = run_batch(r, bytes)) != DV_OK) /* untimed: back in cache */
        return;
    uint64_t deadline = now_ns() + (uint64_t)(budget_s * 1e9);
    while (n < ALLOC_ROUND_CAP && (n < 4 || now_ns() < deadline)) {
        uint64_t t0 = now_ns();
        if ((r->error = run_batch(r, bytes)) != DV_OK)
            return;
        r->per[r->n++] = now_ns() - t0;
        n++;
    }
    /* In place: row_result sorts all the batches anyway. */
    qsort(r->per + first, n, sizeof(*r->per), cmp_u64);
    r->round_median[round] = (double)r->per[first + n / 2] / BATCH;
}

static result row_result(alloc_row *r, const alloc_row *driver)
{
    result res = {.error = r->error};
    double ratio[ALLOC_ROUNDS];
    if (r->error != DV_OK || r->n == 0)
        return res;
    qsort(r->per, r->n, sizeof(*r->per), cmp_u64);
    res.median_ns = (double)r->per[r->n / 2] / BATCH;
    res.p99_ns = (double)r->per[(r->n * 99) / 100] / BATCH;
    res.pairs = r->n * BATCH;
    for (int q = 0; q < ALLOC_ROUNDS; q++)
        ratio[q] = r->round_median[q] / driver->round_median[q];
    res.ratio = median_of(ratio, ALLOC_ROUNDS);
    return res;
}

static void bench_alloc(dv_res_env *env, double seconds)
{
    static const uint64_t sizes[] = {256, 64 << 10, 1 << 20, 64 << 20};
    if (csv)
        printf("section,what,bytes,median_ns,p99_ns,ratio_to_driver_async,pairs\n");
    else
        printf("\nallocate+free pair latency, ns per pair; every row of a size timed in %d "
               "alternating rounds\n(ratio: median over the rounds of the row over the driver's "
               "stream-ordered pair)\n  %-32s %8s %10s %10s %9s %9s\n",
               ALLOC_ROUNDS, "resource", "size", "median", "p99", "ratio", "pairs");
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint64_t bytes = sizes[i];
        alloc_row rows[ALLOC_ROWS] = {
            {.name = "driver stream-ordered pair", .fn = pair_driver_async, .ctx = env},
            {.name = "driver synchronous pair", .fn = pair_driver_sync, .ctx = env},
        };
        stack stacks[NSTACKS];
        for (int k = 0; k < NSTACKS; k++) {
            alloc_row *r = &rows[2 + k];
            r->fn = pair_resource;
            if ((r->error = build(k, env, &stacks[k])) != DV_OK) {
                r->name = "(stack failed to build)";
                continue;
            }
            r->name = stacks[k].name;
            r->ctx = stacks[k].top;
        }
        for (int j = 0; j < ALLOC_ROWS; j++) {
            rows[j].per = malloc(ALLOC_ROUNDS * ALLOC_ROUND_CAP * sizeof(*rows[j].per));
            if (rows[j].per == NULL)
                rows[j].error = DV_ENOMEM;
            for (int w = 0; w < 4 && rows[j].error == DV_OK; w++) /* warm up */
                rows[j].error = run_batch(&rows[j], bytes);
        }
        for (int q = 0; q < ALLOC_ROUNDS; q++)
            for (int j = 0; j < ALLOC_ROWS; j++)
                if (rows[j].error == DV_OK)
                    time_round(&rows[j], bytes, seconds / ALLOC_ROUNDS, q);
        dv__res_env_sync(env);
        for (int j = 0; j < ALLOC_ROWS; j++) {
            print_row(rows[j].name, bytes, row_result(&rows[j], &rows[0]));
            free(rows[j].per);
        }
        for (int k = 0; k < NSTACKS; k++)
            if (rows[2 + k].ctx != NULL)
                unbuild(&stacks[k]);
        fflush(stdout);
    }
}

/*
 * What the driver's virtual memory calls cost, which the pool's growth
 * (extents) and aliases (a granule at a time) are built on: MAP_N granules
 * mapped one by one (cuMemCreate + cuMemMap + cuMemSetAccess), mapped
 * again at a second address (cuMemMap + cuMemSetAccess: an alias),
 * unmapped there keeping the memory, unmapped and released; then the same
 * memory as one extent of MAP_N granules, mapped and unmapped in one call
 * each.  MAP_ROUNDS rounds; the medians.
 */
#define MAP_N      256
#define MAP_ROUNDS 3

static int map_round(dv_drv_ctx *ctx, dv_dptr va, uint64_t g, double us[6])
{
    static uint64_t h[MAP_N];
    dv_dptr va2 = va + MAP_N * g;
    uint64_t big = 0, t0 = now_ns();
    int rc = DV_OK, i, made = 0, aliased = 0;
    /* (made and aliased count the calls that succeeded: what to undo.) */
    while (made < MAP_N && rc == DV_OK)
        if ((rc = dv__drv_mem_map(ctx, va + (uint64_t)made * g, g, &h[made])) == DV_OK)
            made++;
    uint64_t t1 = now_ns();
    while (aliased < made && rc == DV_OK)
        if ((rc = dv__drv_mem_remap(ctx, va2 + (uint64_t)aliased * g, g, h[aliased])) == DV_OK)
            aliased++;
    uint64_t t2 = now_ns();
    for (i = 0; i < aliased; i++) {
        int r2 = dv__drv_mem_unmap_keep(ctx, va2 + (uint64_t)i * g, g, h[i]);
        rc = rc == DV_OK ? r2 : rc;
    }
    uint64_t t3 = now_ns();
    for (i = 0; i < made; i++) {
        int r2 = dv__drv_mem_unmap(ctx, va + (uint64_t)i * g, g, h[i]);
        rc = rc == DV_OK ? r2 : rc;
    }
    uint64_t t4 = now_ns();
    if (rc == DV_OK)
        rc = dv__drv_mem_map(ctx, va, MAP_N * g, &big);
    uint64_t t5 = now_ns();
    if (big != 0) {
        int r2 = dv__drv_mem_unmap(ctx, va, MAP_N * g, big);
        rc = rc == DV_OK ? r2 : rc;
    }
    uint64_t t6 = now_ns();
    const uint64_t t[7] = {t0, t1, t2, t3, t4, t5, t6};
    for (int k = 0; k < 6; k++)
        us[k] = (double)(t[k + 1] - t[k]) / 1e3;
    return rc;
}

static void bench_mapping(dv_res_env *env)
{
    static const char *const what[6] = {
        "map a granule (create, map, access)", "map it at a second address (alias)",
        "unmap there, the memory kept",        "unmap and release a granule",
        "map one extent of all of them",       "unmap and release the extent"};
    static const char *const key[6] = {"map_granule",   "map_alias",  "unmap_keep",
                                       "unmap_release", "map_extent", "unmap_extent"};
    uint64_t g = 0;
    dv_dptr va = 0;
    int rc = dv__drv_vmm_granularity(env->ctx, &g);
    if (rc == DV_OK && g == 0)
        rc = DV_ENOTSUP;
    if (rc == DV_OK)
        rc = dv__drv_va_reserve(env->ctx, 2 * MAP_N * g, &va);
    if (rc != DV_OK) {
        printf("\nmapping: skipped (%s: %s)\n", dv_err_name(rc),
               rc == DV_ENOTSUP ? "the device does not map virtual memory"
                                : dv_last_error()->message);
        return;
    }
    dv__res_env_sync(env);
    double us[MAP_ROUNDS][6], col[MAP_ROUNDS], med[6];
    int rounds = 0;
    for (; rounds < MAP_ROUNDS && rc == DV_OK; rounds++)
        rc = map_round(env->ctx, va, g, us[rounds]);
    (void)dv__drv_va_release(env->ctx, va, 2 * MAP_N * g);
    if (rc != DV_OK) {
        printf("\nmapping: failed in round %d (%s: %s)\n", rounds, dv_err_name(rc),
               dv_last_error()->message);
        bench_failed = true;
        return;
    }
    for (int k = 0; k < 6; k++) {
        for (int q = 0; q < MAP_ROUNDS; q++)
            col[q] = us[q][k];
        med[k] = median_of(col, MAP_ROUNDS);
    }
    if (csv) {
        printf("section,what,granules,granule_bytes,us_per_call,us_per_granule\n");
        for (int k = 0; k < 6; k++) {
            int calls = k < 4 ? MAP_N : 1;
            printf("mapping,%s,%d,%llu,%.3f,%.4f\n", key[k], MAP_N, (unsigned long long)g,
                   med[k] / calls, med[k] / MAP_N);
        }
        return;
    }
    printf("\nvirtual memory calls: %d granules of %llu KiB, one call each, then as one extent; "
           "median of %d rounds\n  %-40s %12s %14s\n",
           MAP_N, (unsigned long long)(g >> 10), MAP_ROUNDS, "", "us a call", "us a granule");
    for (int k = 0; k < 6; k++) {
        int calls = k < 4 ? MAP_N : 1;
        printf("  %-40s %12.2f %14.3f\n", what[k], med[k] / calls, med[k] / MAP_N);
    }
    printf("  (a granule bound alone costs %.1fx what it costs in one extent)\n",
           med[4] > 0 ? med[0] / med[4] : 0.0);
}

/*
 * RMM's random_allocations: N allocations, each step allocating with
 * probability 0.73 (while fewer than N were made) and otherwise freeing a
 * random live block; sizes uniform in [1, max].  Every block is freed by
 * the end, so the pool can run it again.
 */
static int bench_random_one(dv_resource *pool, size_t n, uint64_t max_size, double *ns_per_op,
                            size_t *ops_out)
{
    int rc = DV_OK;
    dv_block *live = malloc(n * sizeof(*live));
    if (live == NULL)
        return dv__fail(DV_ENOMEM, "random_allocations", "out of host memory");
    size_t nlive = 0, made = 0, ops = 0;
    uint64_t rng = 0x9E3779B97F4A7C15ull ^ n;
    uint64_t t0 = now_ns();
    while (made < n || nlive > 0) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        bool do_alloc = made < n && (nlive == 0 || (rng % 100) < 73);
        if (do_alloc) {
            uint64_t bytes = 1 + (rng >> 20) % max_size;
            if ((rc = dv__res_allocate(pool, bytes, 0, (dv_tag){"random", 0}, &live[nlive])) !=
                DV_OK)
                break;
            nlive++;
            made++;
        } else {
            size_t i = (size_t)((rng >> 8) % nlive);
            if ((rc = dv__res_deallocate(pool, &live[i])) != DV_OK)
                break;
            live[i] = live[--nlive];
        }
        ops++;
    }
    uint64_t dt = now_ns() - t0;
    for (size_t i = 0; i < nlive; i++)
        dv__res_deallocate(pool, &live[i]);
    free(live);
    *ns_per_op = ops ? (double)dt / (double)ops : 0;
    *ops_out = ops;
    return rc;
}

#define RANDOM_SIZES      3
#define RANDOM_ROUNDS_MIN 15
#define RANDOM_ROUNDS_MAX 400
#define RANDOM_SECONDS    1.5

static int random_pool(dv_res_env *env, bool alias, dv_resource **pool)
{
    dv_resource *async;
    dv_pool_config pcfg;
    dv__pool_config_init(&pcfg);
    pcfg.alias = alias;
    int rc = dv__async_resource_create(env, &async);
    if (rc == DV_OK && (rc = dv__pool_resource_create(async, &pcfg, pool)) != DV_OK)
        dv__res_destroy_stack(async);
    return rc;
}

/* Keep this thread on the CPU it is on (restored by the caller). */
static bool pin_here(cpu_set_t *before)
{
    cpu_set_t one;
    int cpu = sched_getcpu();
    if (cpu < 0 || sched_getaffinity(0, sizeof(*before), before) != 0)
        return false;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return sched_setaffinity(0, sizeof(one), &one) == 0;
}

/*
 * As RMM's benchmark does, each size gets one pool, made and grown (by an
 * untimed first run) before timing: what is measured is the pool in use,
 * not its growth.  The sizes are measured in rounds, one after the other,
 * so that each sees the same states of the machine: on a shared host a
 * core's speed changes by half between stretches of a few seconds, and a
 * ratio of sizes measured in different stretches would say more about the
 * host than about the pool.  In every round each size first runs untimed
 * (the other sizes have pushed its working set out of the caches), then is
 * timed over several runs.  The thread stays on one CPU.  The table
 * gives each size's median over all its timed runs, and the median of the
 * per-round ratios.
 */
static void bench_random(dv_res_env *env, uint64_t max_size, bool alias)
{
    const char *name = alias ? "pool(async,alias)" : "pool(async)";
    static const size_t ns[RANDOM_SIZES] = {1000, 10000, 100000};
    /* Runs per round: untimed (N = 1k: 10,000 operations, for its working
     * set to settle back into the caches after the larger sizes), then
     * timed. */
    static const int untimed[RANDOM_SIZES] = {5, 1, 1};
    static const int timed[RANDOM_SIZES] = {20, 5, 2};
    static double runs[RANDOM_SIZES][RANDOM_ROUNDS_MAX * 20];
    static double ratio[RANDOM_SIZES][RANDOM_ROUNDS_MAX];
    static double first_run[RANDOM_ROUNDS_MAX], last_run[RANDOM_ROUNDS_MAX]; /* N = 1k */
    dv_resource *pool[RANDOM_SIZES] = {NULL};
    int nruns[RANDOM_SIZES] = {0}, rounds = 0;
    size_t ops[RANDOM_SIZES] = {0};
    double warm, round_median[RANDOM_SIZES];
    cpu_set_t before;
    bool pinned = pin_here(&before);
    int rc = DV_OK;

    for (int i = 0; i < RANDOM_SIZES && rc == DV_OK; i++)
        if ((rc = random_pool(env, alias, &pool[i])) == DV_OK)
            rc = bench_random_one(pool[i], ns[i], max_size, &warm, &ops[i]);
    uint64_t t0 = now_ns();
    while (rc == DV_OK && rounds < RANDOM_ROUNDS_MAX &&
           (rounds < RANDOM_ROUNDS_MIN || now_ns() - t0 < (uint64_t)(RANDOM_SECONDS * 1e9))) {
        for (int i = 0; i < RANDOM_SIZES && rc == DV_OK; i++) {
            double here[20];
            for (int k = 0; k < untimed[i] && rc == DV_OK; k++)
                rc = bench_random_one(pool[i], ns[i], max_size, &warm, &ops[i]);
            for (int k = 0; k < timed[i] && rc == DV_OK; k++) {
                rc = bench_random_one(pool[i], ns[i], max_size, &here[k], &ops[i]);
                runs[i][nruns[i]++] = here[k];
            }
            if (rc == DV_OK && i == 0) {
                first_run[rounds] = here[0];
                last_run[rounds] = here[timed[0] - 1];
            }
            if (rc == DV_OK)
                round_median[i] = median_of(here, timed[i]);
        }
        if (rc == DV_OK) {
            for (int i = 0; i < RANDOM_SIZES; i++)
                ratio[i][rounds] = round_median[i] / round_median[0];
            rounds++;
        }
    }
    for (int i = 0; i < RANDOM_SIZES; i++) {
        if (pool[i] != NULL) {
            dv__res_env_sync(env);
            dv__res_destroy_stack(pool[i]);
        }
    }
    if (pinned)
        (void)sched_setaffinity(0, sizeof(before), &before);

    if (csv) {
        if (!alias) /* one header over both pools' rows */
            printf("section,allocations,max_size,ns_per_op,ops,ratio_to_1k,round_ratio,runs,"
                   "rounds,resource\n");
    } else {
        printf("\nrandom_allocations on %s: 73%% allocate / 27%% free, sizes uniform in "
               "[1, %llu];\none pool per size, made and grown before timing; the sizes in %d "
               "rounds (%s)\n  %12s %12s %10s %10s %14s %8s\n",
               name, (unsigned long long)max_size, rounds, pinned ? "one CPU" : "not pinned",
               "allocations", "ns/op", "ops/run", "vs N=1k", "round ratio", "runs");
    }
    if (rc != DV_OK) {
        /* CSV gets no row (its columns are numbers): stderr says why. */
        if (!csv)
            printf("  error: %s\n", dv_last_error()->message);
        fprintf(stderr, "dv-bench: random_allocations on %s: %s\n", name, dv_last_error()->message);
        bench_failed = true;
        return;
    }
    double first = median_of(runs[0], nruns[0]);
    for (int i = 0; i < RANDOM_SIZES; i++) {
        double per = median_of(runs[i], nruns[i]);
        double r = median_of(ratio[i], rounds); /* sorts them: [0] and [rounds - 1] below */
        if (csv)
            printf("random,%zu,%llu,%.1f,%zu,%.3f,%.3f,%d,%d,\"%s\"\n", ns[i],
                   (unsigned long long)max_size, per, ops[i], per / first, r, nruns[i], rounds,
                   name);
        else if (i == 0)
            printf("  %12zu %12.1f %10zu %9.2fx %14s %8d\n", ns[i], per, ops[i], per / first, "",
                   nruns[i]);
        else
            printf("  %12zu %12.1f %10zu %9.2fx %5.2fx (%.2f-%.2f) %3d\n", ns[i], per, ops[i],
                   per / first, r, ratio[i][0], ratio[i][rounds - 1], nruns[i]);
    }
    /* The check on the method: if the untimed runs did not bring N = 1k's
     * working set back, its first timed run in a round is the slower. */
    if (!csv)
        printf("  N = 1k, first and last timed run of a round: %.1f and %.1f ns (medians)\n",
               median_of(first_run, rounds), median_of(last_run, rounds));
    fflush(stdout);
}

/* ------------------------------------------------------------------------
 * actor
 * ------------------------------------------------------------------------ */

static double percentile(uint64_t *v, size_t n, double p)
{
    qsort(v, n, sizeof(*v), cmp_u64);
    size_t i = (size_t)(p * (double)(n - 1));
    return (double)v[i];
}

/*
 * The bare ping-pong, the floor of any round trip between two threads:
 * one 64-byte message on a Concurrency Kit SPSC ring, one reply word.
 */
typedef struct bare_msg {
    uint64_t seq, pad[7];
} bare_msg;
CK_RING_PROTOTYPE(bare, bare_msg)

struct pingpong {
    ck_ring_t ring;
    bare_msg *buf;
    atomic_uint reply;
    atomic_bool stop;
};

static void *pong(void *arg)
{
    struct pingpong *pp = arg;
    bare_msg m;
    while (!atomic_load_explicit(&pp->stop, memory_order_relaxed)) {
        if (ck_ring_dequeue_spsc_bare(&pp->ring, pp->buf, &m))
            atomic_store_explicit(&pp->reply, (unsigned)m.seq + 1, memory_order_release);
        else
            __builtin_ia32_pause();
    }
    return NULL;
}

static double bench_pingpong(size_t rounds, double *p99)
{
    struct pingpong pp = {0};
    pthread_t th;
    uint64_t *lat = malloc(rounds * sizeof(*lat));
    pp.buf = aligned_alloc(64, 1024 * sizeof(bare_msg));
    ck_ring_init(&pp.ring, 1024);
    pthread_create(&th, NULL, pong, &pp);
    for (size_t i = 0; i < rounds + 1000; i++) {
        bare_msg m = {.seq = i};
        uint64_t t0 = now_ns();
        while (!ck_ring_enqueue_spsc_bare(&pp.ring, pp.buf, &m))
            __builtin_ia32_pause();
        unsigned want = (unsigned)i + 1;
        while (atomic_load_explicit(&pp.reply, memory_order_acquire) != want)
            __builtin_ia32_pause();
        if (i >= 1000)
            lat[i - 1000] = now_ns() - t0;
    }
    atomic_store(&pp.stop, true);
    pthread_join(th, NULL);
    free(pp.buf);
    double med = percentile(lat, rounds, 0.5);
    *p99 = percentile(lat, rounds, 0.99);
    free(lat);
    return med;
}

/* An allocation's round trip: post it and wait for the memory. */
static double bench_alloc_rtt(dv_actor *a, size_t rounds, double *p99)
{
    uint64_t *lat = malloc(rounds * sizeof(*lat));
    for (size_t i = 0; i < rounds + 1000; i++) {
        dv_ref r;
        dv_future f;
        dv_future_init(&f, 0);
        uint64_t t0 = now_ns();
        if (dv_alloc_async(a, 4096, 0, "bench", &r, &f) != DV_OK || dv_future_wait(&f) != DV_OK) {
            free(lat);
            return -1;
        }
        uint64_t t1 = now_ns();
        dv_ref_release(r);
        if (i >= 1000)
            lat[i - 1000] = t1 - t0;
    }
    dv_flush(a);
    double med = percentile(lat, rounds, 0.5);
    *p99 = percentile(lat, rounds, 0.99);
    free(lat);
    return med;
}

/*
 * A peer allocator, loaded at run time from a small adapter library
 * (tools/peers/): dv_peer_open gives a stream of the peer's own, and the
 * pair is dv_peer_alloc + dv_peer_free on it.  PyTorch's caching allocator
 * is built against the installed PyTorch on the GPU machine
 * (tools/peers/build-torch-peer.sh); absent, its rows are skipped.
 */
typedef struct peer {
    dv_peer_api api;
    void *stream;
} peer;

static bool peer_load(peer *p, const char *path, int device)
{
    memset(p, 0, sizeof(*p));
    if (path == NULL || dv_peer_load(&p->api, path, "dv-bench") != 0)
        return false;
    if (p->api.open(device, &p->stream) != 0) {
        fprintf(stderr, "dv-bench: peer %s: dv_peer_open(device %d) failed\n", path, device);
        dlclose(p->api.lib);
        p->api.lib = NULL;
        return false;
    }
    return true;
}

/* One client's allocate+release pairs through the public API: both calls
 * post and return; the run ends when the actor handled them all. */
static double actor_pairs(dv_actor *a, uint64_t bytes, size_t n)
{
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < n; i++) {
        dv_ref r;
        if (dv_alloc(a, bytes, 0, "pair", &r) != DV_OK || dv_ref_release(r) != DV_OK)
            return -1;
    }
    if (dv_flush(a) != DV_OK)
        return -1;
    return (double)(now_ns() - t0) / (double)n;
}

static double peer_pairs(peer *p, uint64_t bytes, size_t n)
{
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < n; i++) {
        void *q = p->api.alloc(bytes, p->stream);
        if (q == NULL)
            return -1;
        p->api.free(q);
    }
    return (double)(now_ns() - t0) / (double)n;
}

#define PAIR_ROUNDS 9
#define PAIR_SIZES  4

/*
 * The single client's pair at 256 B .. 1 MiB: devactor, devactor with the
 * order across threads turned off (what the tickets cost), and the peer,
 * in alternating rounds so that a change of the shared host's speed
 * falls on every row alike; medians of the rounds.
 */
static void bench_pairs(dv_actor *on, dv_actor *off, peer *p)
{
    static const uint64_t sizes[PAIR_SIZES] = {256, 4096, 65536, 1 << 20};
    const size_t n = 100000;
    double v[3][PAIR_SIZES][PAIR_ROUNDS];
    for (int k = 0; k < PAIR_SIZES; k++) { /* warm each size: pools grown */
        actor_pairs(on, sizes[k], 1000);
        actor_pairs(off, sizes[k], 1000);
        if (p->api.lib)
            peer_pairs(p, sizes[k], 1000);
    }
    for (int r = 0; r < PAIR_ROUNDS; r++) {
        for (int k = 0; k < PAIR_SIZES; k++) {
            v[0][k][r] = actor_pairs(on, sizes[k], n);
            v[1][k][r] = actor_pairs(off, sizes[k], n);
            v[2][k][r] = p->api.lib ? peer_pairs(p, sizes[k], n) : -1;
        }
        progress("actor pairs: round", r + 1, PAIR_ROUNDS);
    }
    progress_done();
    if (!csv) {
        printf("\nactor: one client's allocate+release pair through the public API, ns per pair\n"
               "(medians of %d alternating rounds of %zu pairs; peer: %s)\n"
               "  %-8s %10s %16s %12s %14s %14s\n",
               PAIR_ROUNDS, n, p->api.lib ? p->api.name() : "none loaded (--peer)", "size",
               "devactor", "order off", "peer", "devactor/peer", "order cost");
    } else {
        printf("section,what,bytes,devactor_ns,order_off_ns,peer_ns,ratio_to_peer\n");
    }
    for (int k = 0; k < PAIR_SIZES; k++) {
        double d = median_of(v[0][k], PAIR_ROUNDS), o = median_of(v[1][k], PAIR_ROUNDS);
        double q = p->api.lib ? median_of(v[2][k], PAIR_ROUNDS) : 0;
        if (csv && q > 0)
            printf("actor,one client,%llu,%.1f,%.1f,%.1f,%.3f\n", (unsigned long long)sizes[k], d,
                   o, q, d / q);
        else if (csv) /* no peer: not known */
            printf("actor,one client,%llu,%.1f,%.1f,n/a,n/a\n", (unsigned long long)sizes[k], d, o);
        else if (q > 0)
            printf("  %-8llu %10.1f %16.1f %12.1f %14.3f %13.1f%%\n", (unsigned long long)sizes[k],
                   d, o, q, d / q, 100.0 * (d - o) / o);
        else
            printf("  %-8llu %10.1f %16.1f %12s %14s %13.1f%%\n", (unsigned long long)sizes[k], d,
                   o, "-", "-", 100.0 * (d - o) / o);
    }
}

struct churn {
    dv_actor *actor;       /* through the actor, or */
    peer *peer;            /* a peer allocator, or */
    dv_drv_stream *stream; /* the driver directly on this stream */
    double seconds;
    atomic_int *go;
    uint64_t pairs;
    int error;
};

static void *churn_main(void *arg)
{
    struct churn *c = arg;
    while (atomic_load(c->go) == 0)
        sched_yield();
    uint64_t end = now_ns() + (uint64_t)(c->seconds * 1e9), n = 0;
    void *peer_stream = NULL;
    if (c->peer != NULL && c->peer->api.open(0, &peer_stream) != 0)
        c->error = DV_ENOTSUP;
    while (c->error == 0 && ((n & 63) != 0 || now_ns() < end)) {
        int rc = DV_OK;
        if (c->actor != NULL) {
            dv_ref r;
            rc = dv_alloc(c->actor, 4096, (dv_stream)(n % 4), "churn", &r);
            if (rc == DV_OK)
                rc = dv_ref_release(r);
        } else if (c->peer != NULL) {
            void *q = c->peer->api.alloc(4096, peer_stream);
            if (q == NULL)
                rc = DV_EDEVICE_OOM;
            else
                c->peer->api.free(q);
        } else {
            dv_dptr p;
            rc = dv__drv_mem_alloc_async(c->stream, 4096, &p);
            if (rc == DV_OK)
                rc = dv__drv_mem_free_async(c->stream, p);
        }
        if (rc != DV_OK) {
            c->error = rc;
            break;
        }
        n++;
    }
    /* Every pair handled by the actor, not only posted. */
    if (c->actor != NULL && dv_flush(c->actor) != DV_OK)
        c->error = dv_last_error()->status;
    if (c->peer != NULL && peer_stream != NULL)
        c->peer->api.close(peer_stream);
    c->pairs = n;
    return NULL;
}

/* Aggregate pairs per second of `threads` clients (the actor, the peer,
 * or with both NULL the driver, each thread on a stream of its own). */
static double bench_churn(dv_actor *a, peer *p, dv_res_env *env, int threads, double seconds,
                          int *error)
{
    pthread_t *th = calloc((size_t)threads, sizeof(*th));
    struct churn *c = calloc((size_t)threads, sizeof(*c));
    dv_drv_stream **own = calloc((size_t)threads, sizeof(*own));
    atomic_int go = 0;
    *error = 0;
    for (int i = 0; i < threads; i++) {
        c[i] = (struct churn){.actor = a, .peer = p, .seconds = seconds, .go = &go};
        if (a == NULL && p == NULL) {
            if ((*error = dv__drv_stream_create(env->ctx, &own[i])) != DV_OK)
                threads = i;
            c[i].stream = own[i];
        }
    }
    for (int i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, churn_main, &c[i]);
    uint64_t t0 = now_ns();
    atomic_store(&go, 1);
    uint64_t total = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        total += c[i].pairs;
        if (c[i].error != 0)
            *error = c[i].error;
    }
    double dt = (double)(now_ns() - t0) * 1e-9;
    for (int i = 0; i < threads; i++) {
        if (own[i] != NULL) {
            dv__drv_stream_sync(own[i]);
            dv__drv_stream_destroy(own[i]);
        }
    }
    free(th);
    free(c);
    free(own);
    return (double)total / dt;
}

static dv_actor *bench_actor(dv_driver *drv, int device, bool shared, bool ordered)
{
    dv_actor_config cfg;
    dv_actor *a = NULL;
    dv_actor_config_init(&cfg);
    cfg.driver = drv;
    cfg.device = device;
    cfg.shared_queue = shared;
    dv__order_disable(!ordered);
    dv__device_share(true); /* the ordered and the unordered actor, side by side */
    int rc = dv_actor_create(&cfg, &a);
    dv__device_share(false);
    dv__order_disable(false);
    return rc == DV_OK ? a : NULL;
}

static void bench_actors(dv_driver *drv, dv_res_env *env, int device, double seconds,
                         const char *peer_path)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int many = (int)(cores > 0 ? 4 * cores : 8);
    double p99_pp = 0, p99_rt = 0;
    peer pr;
    bool have_peer = peer_load(&pr, peer_path, device);
    if (peer_path != NULL && !have_peer)
        bench_failed = true; /* said on stderr by peer_load */
    double pp = bench_pingpong(100000, &p99_pp);
    dv_actor *a = bench_actor(drv, device, false, true);
    dv_actor *unordered = bench_actor(drv, device, false, false);
    if (a == NULL || unordered == NULL) {
        fprintf(stderr, "dv-bench: actor: %s\n", dv_last_error()->message);
        return;
    }
    double rt = bench_alloc_rtt(a, 100000, &p99_rt);
    if (csv) {
        printf("section,what,threads,median_ns,p99_ns,per_second,ratio\n");
        printf("actor,bare ping-pong over a ck ring,1,%.1f,%.1f,,1.000\n", pp, p99_pp);
        printf("actor,allocate round trip (pool stack),1,%.1f,%.1f,,%.3f\n", rt, p99_rt, rt / pp);
    } else {
        printf("\nactor: one client, round trip, ns (ratio: over the bare ping-pong)\n"
               "  %-52s %10s %10s %9s\n",
               "what", "median", "p99", "ratio");
        printf("  %-52s %10.1f %10.1f %9.3f\n", "bare ping-pong over a ck SPSC ring (64 B)", pp,
               p99_pp, 1.0);
        printf("  %-52s %10.1f %10.1f %9.3f\n", "allocate round trip (alloc_async + wait, pool)",
               rt, p99_rt, rt / pp);
    }
    bench_pairs(a, unordered, &pr);
    int err, uerr = 0, perr = 0, derr;
    double one = bench_churn(a, NULL, env, 1, seconds, &err);
    double eight = bench_churn(a, NULL, env, 8, seconds, &err);
    double lots = bench_churn(a, NULL, env, many, seconds, &err);
    double eight_off = bench_churn(unordered, NULL, env, 8, seconds, &uerr);
    dv_actor_destroy(a);
    dv_actor_destroy(unordered);
    dv_actor *shared = bench_actor(drv, device, true, true);
    double lots_shared = shared ? bench_churn(shared, NULL, env, many, seconds, &err) : 0;
    double one_shared = shared ? bench_churn(shared, NULL, env, 1, seconds, &err) : 0;
    dv_actor_destroy(shared);
    double peer8 = have_peer ? bench_churn(NULL, &pr, env, 8, seconds, &perr) : 0;
    double direct8 = bench_churn(NULL, NULL, env, 8, seconds, &derr);
    if (!csv)
        printf("\nactor: allocate+release pairs per second, all clients together (%ld cores)\n"
               "  %-58s %8s %14s\n",
               cores, "what", "threads", "pairs/s");
    else /* after the pairs' table: this one's header again */
        printf("section,what,threads,median_ns,p99_ns,per_second,ratio\n");
#define ROW(what, threads, v)                                                                      \
    do {                                                                                           \
        if (csv)                                                                                   \
            printf("actor,\"%s\",%d,,,%.0f,\n", what, threads, v);                                 \
        else                                                                                       \
            printf("  %-58s %8d %14.0f\n", what, threads, v);                                      \
    } while (0)
    ROW("through the actor, a ring per client", 1, one);
    ROW("through the actor, a ring per client", 8, eight);
    ROW("through the actor, a ring per client", many, lots);
    ROW("... the same, order across threads off (its cost)", 8, eight_off);
    ROW("through the actor, one shared ring", 1, one_shared);
    ROW("through the actor, one shared ring", many, lots_shared);
    if (have_peer)
        ROW("peer allocator, each thread its own stream", 8, peer8);
    ROW("driver stream-ordered pair, each thread its own stream", 8, direct8);
#undef ROW
    if (!csv) {
        printf("  8 clients through the actor / 8 threads on the driver: %.2fx\n",
               direct8 > 0 ? eight / direct8 : 0.0);
        if (have_peer)
            printf("  8 clients through the actor / 8 threads on the peer: %.2fx\n",
                   peer8 > 0 ? eight / peer8 : 0.0);
        printf("  the order across threads costs %.1f%% of 8 clients' pairs/s\n",
               eight_off > 0 ? 100.0 * (eight_off - eight) / eight_off : 0.0);
        printf("  %d clients / 1 client (ring per client): %.2f; shared ring: %.2f\n", many,
               one > 0 ? lots / one : 0.0, one_shared > 0 ? lots_shared / one_shared : 0.0);
    }
    if (err != 0 || uerr != 0 || perr != 0 || derr != 0)
        printf("  (errors: actor %s, order off %s, peer %s, driver %s)\n", dv_err_name(err),
               dv_err_name(uerr), dv_err_name(perr), dv_err_name(derr));
    if (have_peer) {
        pr.api.close(pr.stream);
        dlclose(pr.api.lib);
    }
}

/* ------------------------------------------------------------------------
 * launch
 * ------------------------------------------------------------------------ */

#define WINDOW 64

static double bench_raw_launch(dv_res_env *env, dv_drv_func *f, size_t n)
{
    dv_dim3 one = {1, 1, 1};
    for (int i = 0; i < 1000; i++)
        dv__drv_launch(f, one, one, 0, env->streams[0], NULL);
    dv__drv_stream_sync(env->streams[0]);
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < n; i++)
        dv__drv_launch(f, one, one, 0, env->streams[0], NULL);
    double per = (double)(now_ns() - t0) / (double)n;
    dv__drv_stream_sync(env->streams[0]);
    return per;
}

/* ns per launch through the actor, WINDOW launches in flight: k takes no
 * argument, k8 eight pointers (nrefs handles, the rest null); -1 when a
 * launch failed (the detail says why). */
static double bench_actor_launch(dv_actor *a, dv_kernel *k, dv_kernel *k8, dv_ref *refs, int nrefs,
                                 bool cross, size_t n)
{
    static dv_arg args[WINDOW][8];
    static dv_future f[WINDOW];
    bool posted[WINDOW] = {false};
    dv_dim3 one = {1, 1, 1};
    unsigned nargs = nrefs > 0 ? 8 : 0;
    if (nrefs > 0)
        k = k8;
    for (int w = 0; w < WINDOW; w++)
        for (int i = 0; i < (int)nargs; i++)
            args[w][i] = i < nrefs ? dv_arg_ref(refs[i], DV_READ_WRITE, 0) : dv_arg_u64(0);
    uint64_t t0 = 0;
    for (size_t i = 0; i < n + 1000; i++) {
        if (i == 1000)
            t0 = now_ns();
        int w = (int)(i % WINDOW);
        bool failed = posted[w] && dv_future_wait(&f[w]) != DV_OK;
        dv_stream s = cross ? (dv_stream)(i & 1) : 0;
        if (!failed) {
            dv_future_init(&f[w], 0);
            posted[w] = true;
            /* A refused launch completes its future too. */
            failed = dv_launch_async(a, k, one, one, 0, s, args[w], nargs, &f[w]) != DV_OK;
        }
        if (failed) { /* nothing left in flight on the futures */
            dv_error_detail d = *dv_last_error();
            for (int v = 0; v < WINDOW; v++)
                if (posted[v])
                    (void)dv_future_wait(&f[v]);
            *dv__detail() = d;
            return -1;
        }
    }
    for (int w = 0; w < WINDOW; w++)
        if (posted[w])
            dv_future_wait(&f[w]);
    double per = (double)(now_ns() - t0) / (double)n;
    dv_sync(a, 0);
    dv_sync(a, 1);
    return per;
}

#define LAUNCH_REPS 15
#define LAUNCH_ROWS 5

/*
 * Each repetition measures the raw loop and then every actor row, so a
 * row's ratio is taken against the raw loop of its own repetition; the
 * table gives medians over LAUNCH_REPS repetitions.
 */
static void bench_launches(dv_driver *drv, dv_res_env *env, int device)
{
    static const int counts[LAUNCH_ROWS] = {0, 2, 2, 8, 8};
    static const bool crosses[LAUNCH_ROWS] = {false, false, true, false, true};
    const size_t n = 20000;
    double raw[LAUNCH_REPS], per[LAUNCH_ROWS][LAUNCH_REPS], ratio[LAUNCH_ROWS][LAUNCH_REPS];
    dv_drv_module *mod = NULL;
    dv_drv_func *f;
    const void *image;
    size_t bytes;
    dv__drv_builtin_image(env->drv, &image, &bytes);
    dv_actor *a = bench_actor(drv, device, false, true);
    dv_kernel *k = NULL, *k8 = NULL;
    dv_ref refs[8];
    if (a == NULL || dv_kernel_get(a, NULL, 0, "empty", &k) != DV_OK ||
        dv_kernel_get(a, NULL, 0, "touch8", &k8) != DV_OK ||
        dv__drv_module_load(env->ctx, image, bytes, &mod) != DV_OK ||
        dv__drv_func_get(mod, "empty", &f) != DV_OK) {
        fprintf(stderr, "dv-bench: launch: %s\n", dv_last_error()->message);
        dv_actor_destroy(a);
        return;
    }
    for (int i = 0; i < 8; i++)
        dv_alloc(a, 4096, 0, "launch", &refs[i]);
    for (int r = 0; r < LAUNCH_REPS; r++) {
        raw[r] = bench_raw_launch(env, f, n);
        for (int c = 0; c < LAUNCH_ROWS; c++) {
            per[c][r] = bench_actor_launch(a, k, k8, refs, counts[c], crosses[c], n);
            if (per[c][r] < 0) {
                fprintf(stderr, "dv-bench: launch with %d handles: %s\n", counts[c],
                        dv_last_error()->message);
                bench_failed = true;
                goto out;
            }
            ratio[c][r] = per[c][r] / raw[r];
        }
        progress("launch: repetition", r + 1, LAUNCH_REPS);
    }
    progress_done();
    double raw_med = median_of(raw, LAUNCH_REPS);
    if (csv)
        printf("section,what,refs,ns_per_launch_median,ratio_to_raw_median,ratio_min,ratio_max\n");
    else
        printf("\nlaunch: an empty kernel, ns of CPU per launch, medians of %d repetitions of "
               "%zu launches\n(ratio: over the raw cuLaunchKernel loop of the same repetition)\n"
               "  %-36s %5s %12s %9s %17s\n",
               LAUNCH_REPS, n, "what", "refs", "ns/launch", "ratio", "ratio min-max");
    if (csv)
        printf("launch,raw cuLaunchKernel loop,0,%.1f,1.000,1.000,1.000\n", raw_med);
    else
        printf("  %-36s %5d %12.1f %9.3f\n", "raw cuLaunchKernel loop", 0, raw_med, 1.0);
    for (int c = 0; c < LAUNCH_ROWS; c++) {
        double lo = ratio[c][0], hi = ratio[c][0];
        for (int r = 1; r < LAUNCH_REPS; r++) {
            lo = ratio[c][r] < lo ? ratio[c][r] : lo;
            hi = ratio[c][r] > hi ? ratio[c][r] : hi;
        }
        double pm = median_of(per[c], LAUNCH_REPS), rm = median_of(ratio[c], LAUNCH_REPS);
        const char *what = crosses[c] ? "actor, alternating two streams" : "actor, one stream";
        if (csv)
            printf("launch,\"%s\",%d,%.1f,%.3f,%.3f,%.3f\n", what, counts[c], pm, rm, lo, hi);
        else
            printf("  %-36s %5d %12.1f %9.3f %8.3f-%.3f\n", what, counts[c], pm, rm, lo, hi);
    }
out:
    for (int i = 0; i < 8; i++)
        dv_ref_release(refs[i]);
    dv_actor_destroy(a);
    dv__drv_module_unload(mod);
}

/* ------------------------------------------------------------------------
 * Copies: host<->device bandwidth through the actor, beside the driver
 * ------------------------------------------------------------------------ */

#define COPY_ROUNDS  3
#define COPY_BATCH   1024 /* page-locked copies posted before waiting, at most */
#define COPY_CLIENTS 16
#define COPY_MANY    (UINT64_C(64) << 20)

enum { ROW_RAW_PINNED, ROW_PINNED, ROW_REGISTERED, ROW_RAW_PAGEABLE, ROW_PAGEABLE, COPY_ROWS };

static uint64_t copy_staging_bytes; /* --staging: 0, the default */

static void *map_bytes(uint64_t n)
{
    void *p = aligned_alloc(4096, (n + 4095) & ~(uint64_t)4095);
    if (p != NULL)
        memset(p, 0x5c, n); /* touched: no first-touch faults in the timing */
    return p;
}

/* Page-locked copies are posted in batches of 256 MiB (4 to COPY_BATCH
 * copies) and then waited for, by the driver's copies and the actor's
 * alike: bandwidth, not one copy's round trip (that is measured apart). */
static int batch_of(uint64_t bytes)
{
    uint64_t n = (UINT64_C(256) << 20) / bytes;
    return n < 4 ? 4 : n > COPY_BATCH ? COPY_BATCH : (int)n;
}

/* The driver's own copies on stream s: window of them per sync (page-
 * locked memory, truly asynchronous), or one copy and a sync (window 1,
 * as a blocking caller makes them).  Bytes per second over `seconds`. */
static double raw_copies(dv_drv_stream *s, bool htod, void *host, dv_dptr dev, uint64_t bytes,
                         int window, double seconds)
{
    uint64_t t0 = now_ns(), done = 0, until = t0 + (uint64_t)(seconds * 1e9);
    do {
        for (int i = 0; i < window; i++) {
            int rc = htod ? dv__drv_memcpy_htod(s, dev, host, bytes)
                          : dv__drv_memcpy_dtoh(s, host, dev, bytes);
            if (rc != DV_OK)
                return -1;
        }
        if (dv__drv_stream_sync(s) != DV_OK)
            return -1;
        done += (uint64_t)window * bytes;
    } while (now_ns() < until);
    return (double)done / ((double)(now_ns() - t0) * 1e-9);
}

/* The same through the actor: window copies posted with futures and
 * waited for together, or blocking copies one after another. */
static double actor_copies(dv_actor *a, dv_ref r, dv_stream s, bool htod, void *host,
                           uint64_t bytes, int window, double seconds)
{
    static _Thread_local dv_future f[COPY_BATCH];
    uint64_t t0 = now_ns(), done = 0, until = t0 + (uint64_t)(seconds * 1e9);
    do {
        if (window == 1) {
            int rc = htod ? dv_copy_htod(a, r, 0, host, bytes, s)
                          : dv_copy_dtoh(a, host, r, 0, bytes, s);
            if (rc != DV_OK)
                return -1;
        } else {
            for (int i = 0; i < window; i++) {
                dv_future_init(&f[i], 0);
                int rc = htod ? dv_copy_htod_async(a, r, 0, host, bytes, s, &f[i])
                              : dv_copy_dtoh_async(a, host, r, 0, bytes, s, &f[i]);
                if (rc != DV_OK)
                    return -1;
            }
            for (int i = 0; i < window; i++)
                if (dv_future_wait(&f[i]) != DV_OK)
                    return -1;
        }
        done += (uint64_t)window * bytes;
    } while (now_ns() < until);
    return (double)done / ((double)(now_ns() - t0) * 1e-9);
}

typedef struct copy_rig {
    dv_res_env *env;
    dv_actor *a;
    dv_ref ref;   /* the device side, through the actor */
    dv_dptr raw;  /* the device side of the driver's copies */
    void *raw_pinned, *pinned, *registered, *pageable;
} copy_rig;

static double copy_row(copy_rig *g, int row, bool htod, uint64_t bytes, double seconds)
{
    dv_drv_stream *s = g->env->streams[0];
    switch (row) {
    case ROW_RAW_PINNED:
        return raw_copies(s, htod, g->raw_pinned, g->raw, bytes, batch_of(bytes), seconds);
    case ROW_PINNED:
        return actor_copies(g->a, g->ref, 0, htod, g->pinned, bytes, batch_of(bytes), seconds);
    case ROW_REGISTERED:
        return actor_copies(g->a, g->ref, 0, htod, g->registered, bytes, batch_of(bytes),
                            seconds);
    case ROW_RAW_PAGEABLE:
        return raw_copies(s, htod, g->pageable, g->raw, bytes, 1, seconds);
    default:
        return actor_copies(g->a, g->ref, 0, htod, g->pageable, bytes, 1, seconds);
    }
}

/* Round trips of a 4 KiB copy into page-locked memory, ns: the driver's
 * copy and stream sync, and a blocking dv_copy_dtoh. */
static void copy_small_rtt(copy_rig *g, double *raw, double *actor)
{
    enum { N = 4000 };
    uint64_t *lr = malloc(N * sizeof(*lr)), *la = malloc(N * sizeof(*la));
    dv_drv_stream *s = g->env->streams[0];
    for (int i = 0; i < N + 200; i++) {
        uint64_t t0 = now_ns();
        (void)dv__drv_memcpy_dtoh(s, g->raw_pinned, g->raw, 4096);
        (void)dv__drv_stream_sync(s);
        uint64_t t1 = now_ns();
        (void)dv_copy_dtoh(g->a, g->pinned, g->ref, 0, 4096, 0);
        uint64_t t2 = now_ns();
        if (i >= 200) {
            lr[i - 200] = t1 - t0;
            la[i - 200] = t2 - t1;
        }
    }
    *raw = percentile(lr, N, 0.5);
    *actor = percentile(la, N, 0.5);
    free(lr);
    free(la);
}

/* Many clients at once: each its own stream, block and buffers. */
typedef struct copy_client {
    copy_rig *g;
    dv_drv_stream *s; /* the driver's copies */
    dv_stream stream; /* the actor's */
    dv_ref ref;
    dv_dptr raw;
    void *pageable, *pinned, *raw_pinned;
    bool actor, pin, htod;
    double seconds, rate;
    pthread_barrier_t *go;
} copy_client;

static void *copy_client_main(void *arg)
{
    copy_client *c = arg;
    pthread_barrier_wait(c->go);
    if (c->actor)
        c->rate = actor_copies(c->g->a, c->ref, c->stream, c->htod,
                               c->pin ? c->pinned : c->pageable, COPY_MANY, 1, c->seconds);
    else
        c->rate = raw_copies(c->s, c->htod, c->pin ? c->raw_pinned : c->pageable, c->raw,
                             COPY_MANY, 1, c->seconds);
    return NULL;
}

/* Aggregate bytes per second of COPY_CLIENTS threads: the actor's copies
 * or the driver's, with page-locked or pageable memory. */
static double copy_many(copy_client *cl, bool actor, bool pin, bool htod, double seconds)
{
    pthread_t th[COPY_CLIENTS];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, COPY_CLIENTS);
    for (int i = 0; i < COPY_CLIENTS; i++) {
        cl[i].actor = actor;
        cl[i].pin = pin;
        cl[i].htod = htod;
        cl[i].seconds = seconds;
        cl[i].go = &go;
        pthread_create(&th[i], NULL, copy_client_main, &cl[i]);
    }
    double sum = 0;
    for (int i = 0; i < COPY_CLIENTS; i++) {
        pthread_join(th[i], NULL);
        sum += cl[i].rate > 0 ? cl[i].rate : 0;
    }
    pthread_barrier_destroy(&go);
    return sum;
}

static void bench_copies(dv_driver *drv, dv_res_env *env, int device, double seconds)
{
    static const uint64_t sizes[] = {4096, 65536, UINT64_C(1) << 20, UINT64_C(16) << 20,
                                     UINT64_C(256) << 20};
    enum { NS = sizeof(sizes) / sizeof(sizes[0]) };
    const uint64_t cap = sizes[NS - 1], big = UINT64_C(1) << 30;
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.driver = drv;
    cfg.device = device;
    cfg.streams = COPY_CLIENTS;
    cfg.staging_bytes = copy_staging_bytes;
    copy_rig g = {.env = env};
    dv__device_share(true); /* beside the driver's own context use here */
    int rc = dv_actor_create(&cfg, &g.a);
    dv__device_share(false);
    if (rc != DV_OK) {
        fprintf(stderr, "dv-bench: copy: %s\n", dv_last_error()->message);
        return;
    }
    g.pageable = map_bytes(big);
    g.registered = map_bytes(cap);
    g.raw_pinned = map_bytes(cap);
    if (g.pageable == NULL || g.registered == NULL || g.raw_pinned == NULL ||
        dv_host_alloc(g.a, cap, &g.pinned) != DV_OK ||
        dv_host_register(g.a, g.registered, cap) != DV_OK ||
        dv__drv_host_register(env->ctx, g.raw_pinned, cap) != DV_OK ||
        dv_alloc(g.a, big, 0, "copy", &g.ref) != DV_OK ||
        dv__drv_mem_alloc(env->ctx, big, &g.raw) != DV_OK) {
        fprintf(stderr, "dv-bench: copy: set-up: %s\n", dv_last_error()->message);
        dv_actor_destroy(g.a);
        return;
    }
    memset(g.pinned, 0x3a, cap);
    static const char *const names[COPY_ROWS] = {"driver, page-locked", "actor, dv_host_alloc",
                                                 "actor, registered", "driver, pageable",
                                                 "actor, pageable (staged)"};
    if (csv)
        printf("section,direction,bytes,raw_pinned,actor_pinned,actor_registered,raw_pageable,"
               "actor_pageable,pinned_ratio,registered_ratio,pageable_ratio\n");
    else
        printf("\ncopy: one client, GB/s (medians of %d alternating rounds; page-locked copies "
               "posted 256 MiB at a time and waited for, pageable ones one at a time, "
               "blocking)\n"
               "  %-5s %10s %9s %9s %9s %9s %9s %8s %8s %8s\n",
               COPY_ROUNDS, "dir", "bytes", "drv pin", "host_al", "regist", "drv page", "staged",
               "h/drv", "r/drv", "s/drv");
    for (int d = 0; d < 2; d++) {
        bool htod = d == 0;
        for (int k = 0; k < NS; k++) {
            double v[COPY_ROWS][COPY_ROUNDS], m[COPY_ROWS];
            double each = seconds / 2;
            for (int row = 0; row < COPY_ROWS; row++) /* warm: staging, pools, pages */
                (void)copy_row(&g, row, htod, sizes[k], 0.01);
            for (int r = 0; r < COPY_ROUNDS; r++)
                for (int row = 0; row < COPY_ROWS; row++)
                    v[row][r] = copy_row(&g, row, htod, sizes[k], each) * 1e-9;
            for (int row = 0; row < COPY_ROWS; row++)
                m[row] = median_of(v[row], COPY_ROUNDS);
            if (csv)
                printf("copy,%s,%llu,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n",
                       htod ? "htod" : "dtoh", (unsigned long long)sizes[k], m[0], m[1], m[2], m[3],
                       m[4], m[1] / m[0], m[2] / m[0], m[4] / m[3]);
            else
                printf("  %-5s %10llu %9.2f %9.2f %9.2f %9.2f %9.2f %8.3f %8.3f %8.3f\n",
                       htod ? "htod" : "dtoh", (unsigned long long)sizes[k], m[0], m[1], m[2],
                       m[3], m[4], m[1] / m[0], m[2] / m[0], m[4] / m[3]);
        }
    }
    if (!csv)
        printf("  (rows: %s; %s; %s; %s; %s)\n", names[0], names[1], names[2], names[3], names[4]);

    double rraw, ract;
    copy_small_rtt(&g, &rraw, &ract);
    if (csv) /* a table of its own: ns, not GB/s */
        printf("section,what,bytes,driver_ns,actor_ns,ratio\n"
               "copy,rtt 4096 page-locked dtoh,4096,%.1f,%.1f,%.3f\n",
               rraw, ract, ract / rraw);
    else
        printf("\ncopy: a 4 KiB copy into page-locked memory, round trip, ns (median)\n"
               "  driver copy + stream sync %10.1f\n  dv_copy_dtoh (blocking)   %10.1f   ratio "
               "%.3f\n",
               rraw, ract, ract / rraw);

    /* The actor's thread during one 1 GiB pageable copy each way. */
    if (csv)
        printf("section,what,bytes,driver_gbs,actor_gbs,ratio,actor_busy\n");
    for (int d = 0; d < 2; d++) {
        dv_actor_stats s0, s1;
        dv_actor_stats_get(g.a, &s0);
        uint64_t t0 = now_ns();
        rc = d == 0 ? dv_copy_htod(g.a, g.ref, 0, g.pageable, big, 0)
                    : dv_copy_dtoh(g.a, g.pageable, g.ref, 0, big, 0);
        uint64_t wall = now_ns() - t0;
        dv_actor_stats_get(g.a, &s1);
        uint64_t t1 = now_ns();
        int rrc = d == 0 ? dv__drv_memcpy_htod(env->streams[0], g.raw, g.pageable, big)
                         : dv__drv_memcpy_dtoh(env->streams[0], g.pageable, g.raw, big);
        if (rrc == DV_OK)
            rrc = dv__drv_stream_sync(env->streams[0]);
        uint64_t rwall = now_ns() - t1;
        double busy = (double)(s1.actor_cpu_ns - s0.actor_cpu_ns) / (double)wall;
        double gbs = (double)big / (double)wall, rgbs = (double)big / (double)rwall;
        if (csv)
            printf("copy,1 GiB pageable %s,%llu,%.3f,%.3f,%.3f,%.4f\n", d == 0 ? "htod" : "dtoh",
                   (unsigned long long)big, rrc == DV_OK ? rgbs : 0.0, rc == DV_OK ? gbs : 0.0,
                   gbs / rgbs, busy);
        else
            printf("%s  1 GiB pageable %s: %.2f GB/s (driver %.2f, ratio %.3f), the actor's "
                   "thread busy %.2f %% of it%s\n",
                   d == 0 ? "\ncopy: one large copy\n" : "", d == 0 ? "htod" : "dtoh",
                   gbs, rgbs, gbs / rgbs, 100 * busy, rc == DV_OK && rrc == DV_OK ? "" : " (FAILED)");
    }

    /* COPY_CLIENTS clients at once, each its own stream and buffers. */
    copy_client cl[COPY_CLIENTS];
    memset(cl, 0, sizeof(cl));
    bool ready = true;
    for (int i = 0; i < COPY_CLIENTS && ready; i++) {
        cl[i].g = &g;
        cl[i].stream = (dv_stream)i;
        ready = dv__drv_stream_create(env->ctx, &cl[i].s) == DV_OK &&
                dv_alloc(g.a, COPY_MANY, (dv_stream)i, "client", &cl[i].ref) == DV_OK &&
                dv__drv_mem_alloc(env->ctx, COPY_MANY, &cl[i].raw) == DV_OK &&
                (cl[i].pageable = map_bytes(COPY_MANY)) != NULL &&
                dv_host_alloc(g.a, COPY_MANY, &cl[i].pinned) == DV_OK &&
                (cl[i].raw_pinned = map_bytes(COPY_MANY)) != NULL &&
                dv__drv_host_register(env->ctx, cl[i].raw_pinned, COPY_MANY) == DV_OK;
    }
    if (!ready) {
        fprintf(stderr, "dv-bench: copy: clients: %s\n", dv_last_error()->message);
    } else {
        if (!csv)
            printf("\ncopy: %d clients at once, each its own stream, 64 MiB copies one after "
                   "another, aggregate GB/s\n  %-5s %-12s %10s %10s %8s\n",
                   COPY_CLIENTS, "dir", "memory", "driver", "actor", "ratio");
        else
            printf("section,what,bytes,driver_gbs,actor_gbs,ratio\n");
        for (int d = 0; d < 2; d++) {
            for (int pin = 0; pin < 2; pin++) {
                double raw = copy_many(cl, false, pin, d == 0, seconds * 2) * 1e-9;
                double act = copy_many(cl, true, pin, d == 0, seconds * 2) * 1e-9;
                if (csv)
                    printf("copy,%d clients %s %s,%llu,%.3f,%.3f,%.3f\n", COPY_CLIENTS,
                           d == 0 ? "htod" : "dtoh", pin ? "page-locked" : "pageable",
                           (unsigned long long)COPY_MANY, raw, act, act / raw);
                else
                    printf("  %-5s %-12s %10.2f %10.2f %8.3f\n", d == 0 ? "htod" : "dtoh",
                           pin ? "page-locked" : "pageable", raw, act, act / raw);
            }
        }
    }
    dv_actor_stats st;
    dv_actor_stats_get(g.a, &st);
    if (!csv)
        printf("  (staging: %llu copies, %llu bytes, %llu waits for room; %llu pageable copies "
               "done by the driver on the actor's thread)\n",
               (unsigned long long)st.staged_copies, (unsigned long long)st.staged_bytes,
               (unsigned long long)st.staging_waits, (unsigned long long)st.direct_copies);
    for (int i = 0; i < COPY_CLIENTS; i++) {
        if (cl[i].s != NULL)
            dv__drv_stream_destroy(cl[i].s);
        if (cl[i].raw != 0)
            dv__drv_mem_free(env->ctx, cl[i].raw);
        if (cl[i].raw_pinned != NULL)
            dv__drv_host_unregister(env->ctx, cl[i].raw_pinned);
        free(cl[i].raw_pinned);
        free(cl[i].pageable);
        if (cl[i].pinned != NULL)
            dv_host_free(g.a, cl[i].pinned);
        if (cl[i].ref.bits != 0)
            dv_ref_release(cl[i].ref);
    }
    dv__drv_host_unregister(env->ctx, g.raw_pinned);
    dv__drv_mem_free(env->ctx, g.raw);
    dv_ref_release(g.ref);
    dv_actor_destroy(g.a);
    free(g.pageable);
    free(g.registered);
    free(g.raw_pinned);
}

/* ------------------------------------------------------------------------
 * library: GEMM through devactor_blas.h beside cuBLAS called directly
 * ------------------------------------------------------------------------ */

typedef int (*lib_cublas_create_fn)(void **);
typedef int (*lib_cublas_destroy_fn)(void *);
typedef int (*lib_cublas_set_stream_fn)(void *, void *);
typedef int (*lib_cublas_set_workspace_fn)(void *, void *, size_t);
typedef int (*lib_cublas_gemm_ex_fn)(void *, int, int, int, int, int, const void *, const void *,
                                     int, int, const void *, int, int, const void *, void *, int,
                                     int, int, int);

typedef struct lib_direct {
    void *lib, *h;
    lib_cublas_create_fn create;
    lib_cublas_destroy_fn destroy;
    lib_cublas_set_stream_fn set_stream;
    lib_cublas_set_workspace_fn set_workspace;
    lib_cublas_gemm_ex_fn gemm_ex;
} lib_direct;

#define LIB_ROUNDS 3

/* One GEMM row: dims, its cuBLAS types, devactor's type. */
typedef struct lib_row {
    const char *name;
    int64_t d;
    dv_blas_type type;
    int cuda_type, compute;
} lib_row;

/* Seconds per GEMM, calls posted back to back (many: throughput) or one
 * call and a wait at a time (latency), cuBLAS on the env's stream. */
static double lib_direct_run(lib_direct *L, dv_res_env *env, const lib_row *r, dv_dptr a,
                             dv_dptr b, dv_dptr c, int calls, bool each_waits)
{
    float one = 1.0f, zero = 0.0f;
    int d = (int)r->d;
    dv__drv_ctx_make_current(env->ctx);
    /* Back to back: timed by events around the calls on the stream. */
    dv_drv_event *e0 = NULL, *e1 = NULL;
    if (!each_waits && (dv__drv_event_create(env->ctx, DV_DRV_EVENT_TIMING, &e0) != DV_OK ||
                        dv__drv_event_create(env->ctx, DV_DRV_EVENT_TIMING, &e1) != DV_OK ||
                        dv__drv_event_record(e0, env->streams[0]) != DV_OK))
        return -1;
    uint64_t t0 = now_ns();
    for (int i = 0; i < calls; i++) {
        L->gemm_ex(L->h, 0, 0, d, d, d, &one, (const void *)(uintptr_t)b, r->cuda_type, d,
                   (const void *)(uintptr_t)a, r->cuda_type, d, &zero, (void *)(uintptr_t)c,
                   r->cuda_type, d, r->compute, -1);
        if (each_waits)
            dv__drv_stream_sync(env->streams[0]);
    }
    if (!each_waits) {
        float ms = 0;
        dv__drv_event_record(e1, env->streams[0]);
        dv__drv_event_sync(e1);
        dv__drv_event_elapsed(e0, e1, &ms);
        dv__drv_event_destroy(e0);
        dv__drv_event_destroy(e1);
        return (double)ms / 1e3 / calls;
    }
    dv__drv_stream_sync(env->streams[0]);
    return (double)(now_ns() - t0) / 1e9 / calls;
}

static double lib_actor_run(dv_actor *act, dv_blas *B, const lib_row *r, dv_ref a, dv_ref b,
                            dv_ref c, int calls, bool each_waits)
{
    /* Up to LIB_INFLIGHT calls in flight, each future waited for before
     * it is used again. */
    enum { LIB_INFLIGHT = 64 };
    static dv_future f[LIB_INFLIGHT];
    int64_t d = r->d;
    /* Back to back: timed by the actor's events around the calls. */
    dv_event *e0 = NULL, *e1 = NULL;
    if (!each_waits && (dv_event_create(act, DV_EVENT_TIMING, &e0) != DV_OK ||
                        dv_event_create(act, DV_EVENT_TIMING, &e1) != DV_OK ||
                        dv_event_record(e0, 0) != DV_OK))
        return -1;
    uint64_t t0 = now_ns();
    for (int i = 0; i < calls; i++) {
        if (each_waits) {
            dv_blas_gemm(B, 0, r->type, DV_BLAS_ROW_MAJOR, DV_BLAS_N, DV_BLAS_N, d, d, d, 1.0,
                         dv_blas_mat(a, 0, d), dv_blas_mat(b, 0, d), 0.0, dv_blas_mat(c, 0, d));
            continue;
        }
        dv_future *fi = &f[i % LIB_INFLIGHT];
        if (i >= LIB_INFLIGHT)
            dv_future_wait(fi);
        dv_future_init(fi, 0);
        dv_blas_gemm_async(B, 0, r->type, DV_BLAS_ROW_MAJOR, DV_BLAS_N, DV_BLAS_N, d, d, d, 1.0,
                           dv_blas_mat(a, 0, d), dv_blas_mat(b, 0, d), 0.0, dv_blas_mat(c, 0, d),
                           fi);
    }
    if (!each_waits) {
        float ms = 0;
        dv_event_record(e1, 0);
        for (int i = calls > LIB_INFLIGHT ? calls - LIB_INFLIGHT : 0; i < calls; i++)
            dv_future_wait(&f[i % LIB_INFLIGHT]);
        dv_event_sync(e1);
        dv_event_elapsed(e0, e1, &ms);
        dv_event_destroy(e0);
        dv_event_destroy(e1);
        return (double)ms / 1e3 / calls;
    }
    return (double)(now_ns() - t0) / 1e9 / calls;
}


/* FFT rows: cuFFT called directly (a plan made once, its work area set,
 * automatic allocation off) beside dv_fft_exec_async, transforms back to
 * back; GFLOP/s by the usual 5 N log2 N per complex transform (2.5 for
 * real ones). */
typedef int (*lib_cufft_create_fn)(int *);
typedef int (*lib_cufft_destroy_fn)(int);
typedef int (*lib_cufft_auto_fn)(int, int);
typedef int (*lib_cufft_make_fn)(int, int, long long *, long long *, long long, long long,
                                 long long *, long long, long long, int, long long, size_t *);
typedef int (*lib_cufft_ptr_fn)(int, void *);
typedef int (*lib_cufft_c2c_fn)(int, void *, void *, int);
typedef int (*lib_cufft_r2c_fn)(int, void *, void *);

typedef struct fft_row {
    const char *name;
    dv_fft_kind kind;
    dv_fft_shape shape;
} fft_row;

static void bench_fft_rows(dv_actor *act, dv_res_env *env, double seconds)
{
    static const fft_row rows[] = {
        {"c2c f32", DV_FFT_C2C, {1, {1 << 24, 0, 0}, 1}},
        {"r2c f32", DV_FFT_R2C, {1, {4096, 0, 0}, 4096}},
    };
    static const char *const names[] = {"libcufft.so.12", "libcufft.so.11", "libcufft.so",
                                        "/usr/local/cuda/lib64/libcufft.so"};
    void *lib = getenv("DV_CUFFT_PATH") ? dlopen(getenv("DV_CUFFT_PATH"), RTLD_NOW) : NULL;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && lib == NULL; i++)
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    dv_fft *F = NULL;
    if (lib == NULL || dv_fft_create(act, 0, &F) != DV_OK) {
        fprintf(stderr, "dv-bench: library: FFT: %s\n",
                lib == NULL ? "no cuFFT library opens" : dv_last_error()->message);
        return;
    }
    lib_cufft_create_fn create;
    lib_cufft_destroy_fn destroy;
    lib_cufft_auto_fn autoalloc;
    lib_cufft_make_fn make;
    lib_cufft_ptr_fn set_stream, set_work;
    lib_cufft_c2c_fn c2c;
    lib_cufft_r2c_fn r2c;
    *(void **)&create = dlsym(lib, "cufftCreate");
    *(void **)&destroy = dlsym(lib, "cufftDestroy");
    *(void **)&autoalloc = dlsym(lib, "cufftSetAutoAllocation");
    *(void **)&make = dlsym(lib, "cufftMakePlanMany64");
    *(void **)&set_stream = dlsym(lib, "cufftSetStream");
    *(void **)&set_work = dlsym(lib, "cufftSetWorkArea");
    *(void **)&c2c = dlsym(lib, "cufftExecC2C");
    *(void **)&r2c = dlsym(lib, "cufftExecR2C");
    if (!create || !destroy || !autoalloc || !make || !set_stream || !set_work || !c2c || !r2c) {
        fprintf(stderr, "dv-bench: library: FFT: cuFFT lacks a function\n");
        dv_fft_destroy(F);
        return;
    }
    for (size_t ri = 0; ri < sizeof(rows) / sizeof(rows[0]); ri++) {
        const fft_row *r = &rows[ri];
        uint64_t in_bytes = dv_fft_bytes(r->kind, DV_FFT_F32, &r->shape, false, false);
        uint64_t out_bytes = dv_fft_bytes(r->kind, DV_FFT_F32, &r->shape, false, true);
        int plan = 0;
        size_t work = 0;
        long long n[1] = {r->shape.n[0]};
        dv_dptr din = 0, dout = 0, dwork = 0;
        dv_ref rin, rout;
        dv__drv_ctx_make_current(env->ctx);
        if (create(&plan) != 0 || autoalloc(plan, 0) != 0 ||
            make(plan, 1, n, NULL, 1, 0, NULL, 1, 0, r->kind == DV_FFT_C2C ? 0x29 : 0x2a,
                 r->shape.batch, &work) != 0 ||
            dv__drv_mem_alloc(env->ctx, in_bytes, &din) != DV_OK ||
            dv__drv_mem_alloc(env->ctx, out_bytes, &dout) != DV_OK ||
            (work > 0 && dv__drv_mem_alloc(env->ctx, work, &dwork) != DV_OK) ||
            dv_alloc(act, in_bytes, 0, "in", &rin) != DV_OK ||
            dv_alloc(act, out_bytes, 0, "out", &rout) != DV_OK) {
            fprintf(stderr, "dv-bench: library: FFT %s: setting up failed\n", r->name);
            continue;
        }
        set_stream(plan, dv__drv_stream_native(env->streams[0]));
        set_work(plan, (void *)(uintptr_t)dwork);
        dv__drv_memset_d8(env->streams[0], din, 0x3c, in_bytes);
        dv_memset(act, rin, 0, 0x3c, in_bytes, 0);
        double nn = (double)r->shape.n[0], per = 5.0 * nn * log2(nn) * (double)r->shape.batch;
        if (r->kind != DV_FFT_C2C)
            per /= 2;
        double dir[LIB_ROUNDS], act_s[LIB_ROUNDS], ratio[LIB_ROUNDS];
        int calls = 0;
        for (int k = -1; k < LIB_ROUNDS; k++) {
            /* direct */
            dv__drv_ctx_make_current(env->ctx);
            int reps = k < 0 ? 5 : calls;
            /* both timed by events on the stream around the transforms */
            dv_drv_event *d0 = NULL, *d1 = NULL;
            dv_event *a0 = NULL, *a1 = NULL;
            float ms = 0;
            if (dv__drv_event_create(env->ctx, DV_DRV_EVENT_TIMING, &d0) != DV_OK ||
                dv__drv_event_create(env->ctx, DV_DRV_EVENT_TIMING, &d1) != DV_OK ||
                dv_event_create(act, DV_EVENT_TIMING, &a0) != DV_OK ||
                dv_event_create(act, DV_EVENT_TIMING, &a1) != DV_OK) {
                fprintf(stderr, "dv-bench: library: FFT: no events\n");
                break;
            }
            dv__drv_event_record(d0, env->streams[0]);
            for (int i = 0; i < reps; i++) {
                if (r->kind == DV_FFT_C2C)
                    c2c(plan, (void *)(uintptr_t)din, (void *)(uintptr_t)dout, -1);
                else
                    r2c(plan, (void *)(uintptr_t)din, (void *)(uintptr_t)dout);
            }
            dv__drv_event_record(d1, env->streams[0]);
            dv__drv_event_sync(d1);
            dv__drv_event_elapsed(d0, d1, &ms);
            double d = (double)ms / 1e3 / reps;
            /* devactor, up to 64 in flight */
            enum { INFL = 64 };
            static dv_future f[INFL];
            dv_event_record(a0, 0);
            for (int i = 0; i < reps; i++) {
                if (i >= INFL)
                    dv_future_wait(&f[i % INFL]);
                dv_future_init(&f[i % INFL], 0);
                dv_fft_exec_async(F, 0, r->kind, DV_FFT_F32, DV_FFT_FORWARD, &r->shape, rin, 0,
                                  rout, 0, &f[i % INFL]);
            }
            dv_event_record(a1, 0);
            for (int i = reps > INFL ? reps - INFL : 0; i < reps; i++)
                dv_future_wait(&f[i % INFL]);
            dv_event_sync(a1);
            dv_event_elapsed(a0, a1, &ms);
            double a = (double)ms / 1e3 / reps;
            dv__drv_event_destroy(d0), dv__drv_event_destroy(d1);
            dv_event_destroy(a0), dv_event_destroy(a1);
            if (k < 0) {
                calls = (int)(seconds / (d > 1e-7 ? d : 1e-7));
                calls = calls < 200 ? 200 : calls > 20000 ? 20000 : calls;
                continue;
            }
            dir[k] = d;
            act_s[k] = a;
            ratio[k] = d / a;
        }
        double lo = ratio[0], hi = ratio[0];
        for (int k = 1; k < LIB_ROUNDS; k++) {
            lo = ratio[k] < lo ? ratio[k] : lo;
            hi = ratio[k] > hi ? ratio[k] : hi;
        }
        double dm = median_of(dir, LIB_ROUNDS), am = median_of(act_s, LIB_ROUNDS),
               rm = median_of(ratio, LIB_ROUNDS);
        char what[64];
        snprintf(what, sizeof(what), "%lldx%lld", (long long)r->shape.batch,
                 (long long)r->shape.n[0]);
        if (csv)
            printf("library,%s,%s,stream,%.3f,%.3f,GFLOP/s,%.3f,%.3f,%.3f\n", r->name, what,
                   per / dm / 1e9, per / am / 1e9, rm, lo, hi);
        else
            printf("  %-10s %12s %6s %10.1f %10.1f %8.3f %7.3f-%.3f\n", r->name, what, "stream",
                   per / dm / 1e9, per / am / 1e9, rm, lo, hi);
        dv__drv_ctx_make_current(env->ctx);
        destroy(plan);
        dv__drv_mem_free(env->ctx, din), dv__drv_mem_free(env->ctx, dout);
        if (dwork)
            dv__drv_mem_free(env->ctx, dwork);
        dv_ref_release(rin), dv_ref_release(rout);
    }
    if (!csv)
        printf("  (FFT rows: GFLOP/s at 5 N log2 N per complex transform, half for real; ratio: "
               "the actor's throughput over the direct calls')\n");
    dv_fft_destroy(F);
}

static void bench_library(dv_driver *drv, dv_res_env *env, int device, double seconds)
{
    static const lib_row rows[] = {
        {"sgemm", 4096, DV_BLAS_F32, 0, 68},   {"tf32 gemm", 4096, DV_BLAS_TF32, 0, 77},
        {"bf16 gemm", 4096, DV_BLAS_BF16, 14, 68}, {"sgemm", 64, DV_BLAS_F32, 0, 68},
        {"tf32 gemm", 64, DV_BLAS_TF32, 0, 77},    {"bf16 gemm", 64, DV_BLAS_BF16, 14, 68},
    };
    enum { NROWS = sizeof(rows) / sizeof(rows[0]) };
    if (strcmp(dv__driver_backend_name(drv), "cuda") != 0) {
        if (!csv)
            printf("\nlibrary: cuda only (it compares with cuBLAS called directly)\n");
        else /* no rows: said where a CSV reader does not look */
            fprintf(stderr, "dv-bench: library: cuda only, no rows\n");
        return;
    }
    lib_direct L = {0};
    static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so",
                                        "/usr/local/cuda/lib64/libcublas.so"};
    const char *forced = getenv("DV_CUBLAS_PATH");
    if (forced != NULL)
        L.lib = dlopen(forced, RTLD_NOW | RTLD_LOCAL);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && L.lib == NULL; i++)
        L.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    dv_actor *act = bench_actor(drv, device, false, true);
    dv_blas *B = NULL;
    if (L.lib == NULL || act == NULL || dv_blas_create(act, &B) != DV_OK) {
        fprintf(stderr, "dv-bench: library: %s\n",
                L.lib == NULL ? "no cuBLAS library opens" : dv_last_error()->message);
        dv_actor_destroy(act);
        return;
    }
    *(void **)&L.create = dlsym(L.lib, "cublasCreate_v2");
    *(void **)&L.destroy = dlsym(L.lib, "cublasDestroy_v2");
    *(void **)&L.set_stream = dlsym(L.lib, "cublasSetStream_v2");
    *(void **)&L.set_workspace = dlsym(L.lib, "cublasSetWorkspace_v2");
    *(void **)&L.gemm_ex = dlsym(L.lib, "cublasGemmEx");
    uint64_t max_bytes = 4096ull * 4096 * 4, ws_bytes = 32u << 20;
    dv_dptr da = 0, db = 0, dc = 0, dws = 0;
    dv__drv_ctx_make_current(env->ctx);
    if (!L.create || !L.destroy || !L.set_stream || !L.set_workspace || !L.gemm_ex ||
        L.create(&L.h) != 0 || dv__drv_mem_alloc(env->ctx, max_bytes, &da) != DV_OK ||
        dv__drv_mem_alloc(env->ctx, max_bytes, &db) != DV_OK ||
        dv__drv_mem_alloc(env->ctx, max_bytes, &dc) != DV_OK ||
        dv__drv_mem_alloc(env->ctx, ws_bytes, &dws) != DV_OK) {
        fprintf(stderr, "dv-bench: library: cuBLAS or device memory for the direct calls\n");
        dv_blas_destroy(B);
        dv_actor_destroy(act);
        return;
    }
    /* The same settings as the library actor's handles: the stream, a
     * 32 MiB workspace, host scalars. */
    L.set_stream(L.h, dv__drv_stream_native(env->streams[0]));
    L.set_workspace(L.h, (void *)(uintptr_t)dws, ws_bytes);
    dv__drv_memset_d8(env->streams[0], da, 0x3c, max_bytes); /* finite values in every type */
    dv__drv_memset_d8(env->streams[0], db, 0x3c, max_bytes);
    dv__drv_stream_sync(env->streams[0]);
    dv_ref ra, rb, rc;
    dv_alloc(act, max_bytes, 0, "A", &ra);
    dv_alloc(act, max_bytes, 0, "B", &rb);
    dv_alloc(act, max_bytes, 0, "C", &rc);
    dv_memset(act, ra, 0, 0x3c, max_bytes, 0);
    dv_memset(act, rb, 0, 0x3c, max_bytes, 0);

    if (csv)
        printf("section,what,n,mode,direct,actor,unit,ratio_median,ratio_min,ratio_max\n");
    else
        printf("\nlibrary: GEMM through devactor_blas.h beside cuBLAS called directly on a "
               "stream\n(same workspace and scalars; medians of %d alternating rounds; large: "
               "calls posted back to back,\n timed by events on the stream, TFLOP/s; small: one "
               "call and its wait at a time, "
               "direct and actor in turn, median us per call)\n  %-10s %6s %10s %10s %10s %8s %15s\n",
               LIB_ROUNDS, "what", "n", "mode", "direct", "actor", "ratio", "ratio min-max");
    for (int ri = 0; ri < NROWS; ri++) {
        const lib_row *r = &rows[ri];
        bool small = r->d <= 256;
        double flop = 2.0 * (double)r->d * (double)r->d * (double)r->d;
        /* Warm both (cuBLAS picks and loads its kernels on a shape's first
         * call), then calls per measurement: about `seconds` of work, and
         * enough that filling and draining the stream does not count. */
        (void)lib_direct_run(&L, env, r, da, db, dc, 3, small);
        (void)lib_actor_run(act, B, r, ra, rb, rc, 3, small);
        double one = lib_direct_run(&L, env, r, da, db, dc, 10, small);
        int calls = (int)(seconds / (one > 1e-7 ? one : 1e-7));
        calls = calls < 200 ? 200 : calls > 20000 ? 20000 : calls;
        double dir[LIB_ROUNDS], act_s[LIB_ROUNDS], ratio[LIB_ROUNDS];
        for (int k = 0; k < LIB_ROUNDS; k++) {
            if (small) {
                /* One call of each, in turn, each timed: drift in the GPU's
                 * clocks or the host's load falls on both alike.  The
                 * medians of the calls of the round. */
                double *td = malloc((size_t)calls * sizeof(double)),
                       *ta = malloc((size_t)calls * sizeof(double));
                if (td == NULL || ta == NULL) {
                    free(td), free(ta);
                    dir[k] = act_s[k] = ratio[k] = 0;
                    continue;
                }
                for (int i = 0; i < calls; i++) {
                    td[i] = lib_direct_run(&L, env, r, da, db, dc, 1, true);
                    ta[i] = lib_actor_run(act, B, r, ra, rb, rc, 1, true);
                }
                dir[k] = median_of(td, calls);
                act_s[k] = median_of(ta, calls);
                free(td), free(ta);
                ratio[k] = act_s[k] / dir[k];
                continue;
            }
            dir[k] = lib_direct_run(&L, env, r, da, db, dc, calls, small);
            act_s[k] = lib_actor_run(act, B, r, ra, rb, rc, calls, small);
            /* throughput: the actor's over the direct calls' */
            ratio[k] = dir[k] / act_s[k];
        }
        double lo = ratio[0], hi = ratio[0];
        for (int k = 1; k < LIB_ROUNDS; k++) {
            lo = ratio[k] < lo ? ratio[k] : lo;
            hi = ratio[k] > hi ? ratio[k] : hi;
        }
        double dm = median_of(dir, LIB_ROUNDS), am = median_of(act_s, LIB_ROUNDS),
               rm = median_of(ratio, LIB_ROUNDS);
        double dv_ = small ? dm * 1e6 : flop / dm / 1e12, av = small ? am * 1e6 : flop / am / 1e12;
        const char *mode = small ? "call+wait" : "stream";
        if (csv)
            printf("library,%s,%lld,%s,%.3f,%.3f,%s,%.3f,%.3f,%.3f\n", r->name, (long long)r->d,
                   mode, dv_, av, small ? "us" : "TFLOP/s", rm, lo, hi);
        else
            printf("  %-10s %6lld %10s %10.2f %10.2f %8.3f %7.3f-%.3f\n", r->name,
                   (long long)r->d, mode, dv_, av, rm, lo, hi);
    }
    if (!csv)
        printf("  (ratio: large, the actor's throughput over the direct calls'; small, the "
               "actor's time per call over the direct call + stream sync)\n");
    dv_ref_release(ra), dv_ref_release(rb), dv_ref_release(rc);
    bench_fft_rows(act, env, seconds);
    dv_blas_destroy(B);
    dv_actor_destroy(act);
    dv__drv_ctx_make_current(env->ctx);
    L.destroy(L.h);
    dv__drv_mem_free(env->ctx, da), dv__drv_mem_free(env->ctx, db), dv__drv_mem_free(env->ctx, dc);
    dv__drv_mem_free(env->ctx, dws);
}

/* ------------------------------------------------------------------------
 * collectives: all-reduce through devactor_nccl.h beside NCCL called
 * directly, on the same devices with the same library
 * ------------------------------------------------------------------------ */

/* The NCCL calls of the direct rows, declared here rather than taken from
 * nccl.h: ncclResult_t is an int (0: success), ncclComm_t and cudaStream_t
 * are pointers, and ncclDataType_t and ncclRedOp_t take NCCL's values,
 * which dv_nccl_type's and dv_nccl_op's are. */
typedef int (*coll_comm_init_all_fn)(void **comms, int ndev, const int *devlist);
typedef int (*coll_comm_destroy_fn)(void *comm);
typedef int (*coll_group_fn)(void);
typedef int (*coll_all_reduce_fn)(const void *send, void *recv, size_t count, int type, int op,
                                  void *comm, void *stream);
typedef const char *(*coll_error_string_fn)(int result);
typedef int (*coll_version_fn)(int *version);

#define COLL_TIMEOUT_NS (UINT64_C(30) * 1000000000u) /* creation, and each meeting of the ranks */
#define COLL_BATCH      20 /* all-reduces posted back to back per timed round (sizes) */
#define COLL_FILL       0x3c /* every send byte: each float 0.0115, finite after any sum */
#define COLL_LATENCY    8    /* bytes of the latency row: two floats */

typedef struct coll_direct {
    void *lib;
    char path[512]; /* the file that opened */
    int version;    /* NCCL's code, e.g. 22809 */
    coll_comm_init_all_fn init_all;
    coll_comm_destroy_fn destroy;
    coll_group_fn group_start, group_end;
    coll_all_reduce_fn all_reduce;
    coll_error_string_fn error_string;
    int n; /* ranks, once every one has its communicator; 0 before */
    void *comm[DV_MAX_DEVICES];
    dv_drv_ctx *ctx[DV_MAX_DEVICES]; /* each device's primary context */
    dv_drv_stream *stream[DV_MAX_DEVICES];
    dv_dptr send[DV_MAX_DEVICES], recv[DV_MAX_DEVICES];
    uint64_t use_send[DV_MAX_DEVICES], use_recv[DV_MAX_DEVICES]; /* --same-buffers */
    dv_drv_event *event[DV_MAX_DEVICES];                          /* --direct-events */
    dv_drv_event *mark[2]; /* timing: the first rank's stream at a round's start and end */
} coll_direct;

/* The NCCL that devactor_nccl.h opens, looked for in the same order:
 * $DV_NCCL_PATH when set (only it, as the library does, so that both
 * rows run one library), else libnccl.so.2 the usual way, else the CUDA
 * toolkit's; else the file devactor's communicator names in `library`
 * ("NCCL 2.28.9 (path)": the library also looks where pip puts NCCL).
 * false, with why, when none opens or one lacks a call. */
static bool coll_open(coll_direct *D, const char *library, char *why, size_t cap)
{
    static const char *const names[] = {"libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2",
                                        "/usr/local/cuda/lib/libnccl.so.2"};
    const char *forced = getenv("DV_NCCL_PATH");
    const char *err = NULL;
    if (forced != NULL && forced[0] != '\0') {
        if ((D->lib = dlopen(forced, RTLD_NOW | RTLD_LOCAL)) == NULL)
            err = dlerror();
    } else {
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && D->lib == NULL; i++)
            if ((D->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL)) == NULL)
                err = dlerror();
    }
    const char *lp = strrchr(library, '('), *rp = strrchr(library, ')');
    if (D->lib == NULL && lp != NULL && rp != NULL && rp > lp + 1) {
        char path[512];
        snprintf(path, sizeof(path), "%.*s", (int)(rp - lp - 1), lp + 1);
        D->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    if (D->lib == NULL) {
        if (forced != NULL && forced[0] != '\0')
            snprintf(why, cap, "DV_NCCL_PATH=%s does not open (%s)", forced,
                     err != NULL ? err : "?");
        else
            snprintf(why, cap,
                     "no NCCL library opens (tried libnccl.so.2, "
                     "/usr/local/cuda/lib64/libnccl.so.2, /usr/local/cuda/lib/libnccl.so.2; "
                     "last: %s; set DV_NCCL_PATH)",
                     err != NULL ? err : "?");
        return false;
    }
    coll_version_fn get_version;
    void *all_reduce = dlsym(D->lib, "ncclAllReduce");
    *(void **)&D->all_reduce = all_reduce;
    *(void **)&D->init_all = dlsym(D->lib, "ncclCommInitAll");
    *(void **)&D->destroy = dlsym(D->lib, "ncclCommDestroy");
    *(void **)&D->group_start = dlsym(D->lib, "ncclGroupStart");
    *(void **)&D->group_end = dlsym(D->lib, "ncclGroupEnd");
    *(void **)&D->error_string = dlsym(D->lib, "ncclGetErrorString");
    *(void **)&get_version = dlsym(D->lib, "ncclGetVersion");
    if (!D->all_reduce || !D->init_all || !D->destroy || !D->group_start || !D->group_end ||
        !D->error_string || !get_version) {
        snprintf(why, cap, "the NCCL library that opened lacks a function it needs");
        return false; /* left open: NCCL is never closed (below) */
    }
    Dl_info info;
    if (dladdr(all_reduce, &info) != 0 && info.dli_fname != NULL)
        snprintf(D->path, sizeof(D->path), "%s", info.dli_fname);
    if (get_version(&D->version) != 0)
        D->version = 0;
    return true;
}

/* Each device's buffers (cuMemAlloc in its primary context), a stream of
 * its own (cuStreamCreate), and one communicator per device from
 * ncclCommInitAll: what a program calling NCCL itself has. */
static bool coll_direct_setup(coll_direct *D, dv_driver *drv, int n, uint64_t bytes, char *why,
                              size_t cap)
{
    int devs[DV_MAX_DEVICES];
    for (int i = 0; i < n; i++) {
        devs[i] = i;
        if (dv__drv_ctx_retain(drv, i, &D->ctx[i]) != DV_OK ||
            dv__drv_stream_create(D->ctx[i], &D->stream[i]) != DV_OK ||
            dv__drv_mem_alloc(D->ctx[i], bytes, &D->send[i]) != DV_OK ||
            dv__drv_mem_alloc(D->ctx[i], bytes, &D->recv[i]) != DV_OK ||
            dv__drv_memset_d8(D->stream[i], D->send[i], COLL_FILL, bytes) != DV_OK ||
            dv__drv_stream_sync(D->stream[i]) != DV_OK) {
            snprintf(why, cap, "device %d: %s", i, dv_last_error()->message);
            return false;
        }
    }
    int r = D->init_all(D->comm, n, devs);
    if (r != 0) {
        snprintf(why, cap, "ncclCommInitAll: %s", D->error_string(r));
        memset(D->comm, 0, sizeof(D->comm));
        return false;
    }
    for (int m = 0; m < 2; m++) /* no timing events: the device columns stay empty */
        if (dv__drv_event_create(D->ctx[0], DV_DRV_EVENT_TIMING, &D->mark[m]) != DV_OK)
            D->mark[m] = NULL;
    D->n = n;
    return true;
}

/* What coll_direct_setup made, however far it came (twice is fine).
 * NCCL itself stays open: devactor holds the same library, and NCCL's
 * threads are not made to be unloaded under. */
static void coll_direct_teardown(coll_direct *D)
{
    D->n = 0;
    for (int m = 0; m < 2; m++) { /* the first device's: before its context goes */
        if (D->mark[m] != NULL)
            dv__drv_event_destroy(D->mark[m]);
        D->mark[m] = NULL;
    }
    for (int i = 0; i < DV_MAX_DEVICES; i++) {
        if (D->comm[i] != NULL)
            D->destroy(D->comm[i]);
        if (D->stream[i] != NULL) {
            dv__drv_stream_sync(D->stream[i]);
            dv__drv_stream_destroy(D->stream[i]);
        }
        if (D->event[i] != NULL)
            dv__drv_event_destroy(D->event[i]);
        D->event[i] = NULL;
        if (D->send[i] != 0)
            dv__drv_mem_free(D->ctx[i], D->send[i]);
        if (D->recv[i] != 0)
            dv__drv_mem_free(D->ctx[i], D->recv[i]);
        if (D->ctx[i] != NULL)
            dv__drv_ctx_release(D->ctx[i]);
        D->comm[i] = NULL, D->stream[i] = NULL, D->ctx[i] = NULL;
        D->send[i] = D->recv[i] = 0;
    }
}

/* One all-reduce of every rank: ncclGroupStart, ncclAllReduce per device,
 * ncclGroupEnd, then every stream synchronised. */
static int coll_direct_sync(coll_direct *D, char *why, size_t cap);
static bool coll_direct_events; /* --direct-events */

/* One all-reduce of every device in one NCCL group; with sync, waited for. */
static int coll_direct_post(coll_direct *D, uint64_t count, bool sync, char *why, size_t cap)
{
    int r = D->group_start();
    if (r == 0) {
        for (int i = 0; i < D->n && r == 0 && coll_direct_events; i++)
            if (D->event[i] == NULL && dv__drv_event_create(D->ctx[i], 0, &D->event[i]) != DV_OK)
                D->event[i] = NULL;
        for (int i = 0; i < D->n && r == 0; i++)
            r = D->all_reduce((const void *)(uintptr_t)(D->use_send[i] ? D->use_send[i] : D->send[i]),
                              (void *)(uintptr_t)(D->use_recv[i] ? D->use_recv[i] : D->recv[i]),
                              count, DV_NCCL_F32, DV_NCCL_SUM, D->comm[i],
                              dv__drv_stream_native(D->stream[i]));
        int end = D->group_end();
        r = r != 0 ? r : end;
        for (int i = 0; i < D->n && r == 0 && coll_direct_events; i++)
            if (D->event[i] != NULL)
                (void)dv__drv_event_record(D->event[i], D->stream[i]);
    }
    if (r != 0) {
        snprintf(why, cap, "ncclAllReduce: %s", D->error_string(r));
        return DV_EDRIVER;
    }
    return sync ? coll_direct_sync(D, why, cap) : DV_OK;
}

static int coll_direct_sync(coll_direct *D, char *why, size_t cap)
{
    for (int i = 0; i < D->n; i++) {
        if (dv__drv_stream_sync(D->stream[i]) != DV_OK) {
            snprintf(why, cap, "device %d: %s", i, dv_last_error()->message);
            return DV_EDRIVER;
        }
    }
    return DV_OK;
}

/* `batch` all-reduces back to back, then one wait: as nccl-tests times
 * its bandwidth (the host's posting and the wait spread over the batch). */
static int coll_direct_once(coll_direct *D, uint64_t count, int batch, double *dev_s, char *why,
                            size_t cap)
{
    *dev_s = 0;
    bool marks = D->mark[0] != NULL && D->mark[1] != NULL;
    if (marks)
        (void)dv__drv_event_record(D->mark[0], D->stream[0]);
    for (int b = 0; b < batch; b++) {
        int rc = coll_direct_post(D, count, false, why, cap);
        if (rc != DV_OK)
            return rc;
    }
    if (marks)
        (void)dv__drv_event_record(D->mark[1], D->stream[0]);
    int rc = coll_direct_sync(D, why, cap);
    float ms = 0;
    if (rc == DV_OK && marks && dv__drv_event_elapsed(D->mark[0], D->mark[1], &ms) == DV_OK)
        *dev_s = (double)ms * 1e-3;
    return rc;
}

/* devactor's side: an actor per device, each rank's buffers from its
 * actor, one communicator over them all. */
typedef struct coll_actors {
    int n; /* actors made */
    dv_actor *a[DV_MAX_DEVICES];
    dv_ref send[DV_MAX_DEVICES], recv[DV_MAX_DEVICES];
    dv_nccl_comm *comm;
    dv_event *mark[2]; /* timing: the first rank's stream at a round's start and end */
} coll_actors;

/* On the sim, n simulated devices of one driver: the first actor opens
 * it (sim_devices n), the others share it, as several devices of a real
 * one do. */
static const char *coll_conf;   /* --conf */
static bool coll_same_buffers; /* --same-buffers */

static int coll_actors_setup(coll_actors *A, dv_driver *drv, bool sim, int n, uint64_t bytes)
{
    for (int i = 0; i < n; i++) {
        dv_actor_config cfg;
        dv_actor_config_init(&cfg);
        if (coll_conf != NULL)
            (void)dv_actor_config_parse(&cfg, coll_conf); /* checked in main */
        cfg.device = i;
        if (sim) {
            cfg.backend = DV_BACKEND_SIM;
            cfg.sim_devices = n;
            cfg.driver = i > 0 ? dv__actor_driver(A->a[0]) : NULL;
        } else {
            cfg.driver = drv;
        }
        int rc = dv_actor_create(&cfg, &A->a[i]);
        if (rc != DV_OK)
            return rc;
        A->n = i + 1;
        if ((rc = dv_alloc(A->a[i], bytes, 0, "all-reduce send", &A->send[i])) != DV_OK ||
            (rc = dv_alloc(A->a[i], bytes, 0, "all-reduce recv", &A->recv[i])) != DV_OK ||
            (rc = dv_memset(A->a[i], A->send[i], 0, COLL_FILL, bytes, 0)) != DV_OK)
            return rc;
    }
    for (int m = 0; m < 2; m++)
        if (dv_event_create(A->a[0], DV_EVENT_TIMING, &A->mark[m]) != DV_OK)
            A->mark[m] = NULL;
    return dv_nccl_comm_create(A->a, n, COLL_TIMEOUT_NS, &A->comm);
}

static void coll_actors_teardown(coll_actors *A)
{
    dv_nccl_comm_destroy(A->comm);
    for (int m = 0; m < 2; m++)
        if (A->mark[m] != NULL)
            (void)dv_event_destroy(A->mark[m]);
    /* The last first: on the sim the first actor owns the driver. */
    for (int i = A->n - 1; i >= 0; i--) {
        if (A->send[i].bits != 0)
            dv_ref_release(A->send[i]);
        if (A->recv[i].bits != 0)
            dv_ref_release(A->recv[i]);
        dv_actor_destroy(A->a[i]);
    }
}

/* One all-reduce of every rank through devactor: each rank posted with a
 * future (one thread drives them all), then every future waited for.  A
 * refused call completes its future too. */
static int coll_actor_once(coll_actors *A, uint64_t count, int batch, char *why, size_t cap)
{
    dv_future *f = calloc((size_t)(batch * A->n), sizeof(*f));
    if (f == NULL) {
        snprintf(why, cap, "out of host memory");
        return DV_ENOMEM;
    }
    int rc = DV_OK;
    bool marks = A->mark[0] != NULL && A->mark[1] != NULL;
    if (marks)
        (void)dv_event_record(A->mark[0], 0);
    for (int b = 0; b < batch; b++) {
        for (int i = 0; i < A->n; i++) {
            dv_future *fi = &f[b * A->n + i];
            dv_future_init(fi, 0);
            int r = dv_nccl_all_reduce(A->comm, i, 0, dv_nccl_at(A->send[i], 0),
                                       dv_nccl_at(A->recv[i], 0), count, DV_NCCL_F32, DV_NCCL_SUM,
                                       fi);
            if (r != DV_OK && rc == DV_OK) {
                rc = r;
                snprintf(why, cap, "dv_nccl_all_reduce rank %d: %s", i, dv_last_error()->message);
            }
        }
    }
    if (marks)
        (void)dv_event_record(A->mark[1], 0);
    for (int i = 0; i < batch * A->n; i++) {
        int r = dv_future_wait(&f[i]);
        if (r != DV_OK && rc == DV_OK) {
            rc = r;
            snprintf(why, cap, "rank %d: %s (%s)", i, dv_err_name(r), dv_last_error()->message);
        }
    }
    free(f);
    return rc;
}

/* The device's time of the last round on the first rank's stream, from
 * the record before its first all-reduce to the one after its last
 * (seconds; 0 where it cannot be read). */
static double coll_actor_dev_s(coll_actors *A)
{
    float ms = 0;
    if (A->mark[0] == NULL || A->mark[1] == NULL ||
        dv_event_sync(A->mark[1]) != DV_OK || dv_event_elapsed(A->mark[0], A->mark[1], &ms) != DV_OK)
        return 0;
    return (double)ms * 1e-3;
}

/* Rank 0's first elements after the all-reduce: every send holds
 * COLL_FILL bytes, so each is n times that float, to rounding. */
static bool coll_actor_check(coll_actors *A, uint64_t count)
{
    float got[256], one;
    uint64_t k = count < 256 ? count : 256;
    memset(&one, COLL_FILL, sizeof(one));
    if (dv_copy_dtoh(A->a[0], got, A->recv[0], 0, k * sizeof(float), 0) != DV_OK)
        return false;
    for (uint64_t i = 0; i < k; i++)
        if (fabsf(got[i] - one * (float)A->n) > 1e-5f * one * (float)A->n)
            return false;
    return true;
}

typedef struct coll_result {
    uint64_t bytes;
    int iters;
    double actor_s, direct_s; /* median seconds per all-reduce; direct_s 0: no direct row */
    /* The device's time per all-reduce on the first rank's stream
     * (medians of the rounds'; 0: not measured): what the host's posting
     * and noticing the end add is the rest. */
    double actor_dev_s, direct_dev_s;
    int error;                /* devactor's first failure */
    bool right;               /* devactor's result checked */
    char why[320];            /* devactor's failure */
} coll_result;

/*
 * One size: warm both, then iterations of the direct all-reduce and
 * devactor's in turn, each timed alone (post, wait), so that a change of
 * the GPUs' clocks or the host's load falls on both alike; medians.
 * About `seconds` of iterations, from min_iters to max_iters.  A failure
 * of the direct calls ends the direct rows (D->n = 0, the reason in
 * direct_why), not devactor's.
 */
static void coll_time(coll_actors *A, coll_direct *D, uint64_t bytes, int batch, int warm,
                      int min_iters, int max_iters, double seconds, coll_result *res,
                      char *direct_why, size_t cap)
{
    uint64_t count = bytes / sizeof(float);
    double each = 0;
    memset(res, 0, sizeof(*res));
    res->bytes = bytes;
    double dev_s = 0;
    for (int w = 0; w < warm; w++) {
        uint64_t t0 = now_ns();
        if (D->n > 0 && coll_direct_once(D, count, batch, &dev_s, direct_why, cap) != DV_OK)
            D->n = 0;
        if ((res->error = coll_actor_once(A, count, batch, res->why, sizeof(res->why))) != DV_OK)
            return;
        each = (double)(now_ns() - t0) * 1e-9;
    }
    int iters = (int)(seconds / (each > 1e-7 ? each : 1e-7));
    iters = iters < min_iters ? min_iters : iters > max_iters ? max_iters : iters;
    double *ta = malloc((size_t)iters * sizeof(double)),
           *td = malloc((size_t)iters * sizeof(double)),
           *ga = malloc((size_t)iters * sizeof(double)),
           *gd = malloc((size_t)iters * sizeof(double));
    if (ta == NULL || td == NULL || ga == NULL || gd == NULL) {
        free(ta), free(td), free(ga), free(gd);
        res->error = DV_ENOMEM;
        snprintf(res->why, sizeof(res->why), "out of host memory");
        return;
    }
    for (int i = 0; i < iters; i++) {
        uint64_t t0 = now_ns();
        if (D->n > 0 && coll_direct_once(D, count, batch, &dev_s, direct_why, cap) != DV_OK)
            D->n = 0;
        uint64_t t1 = now_ns();
        if ((res->error = coll_actor_once(A, count, batch, res->why, sizeof(res->why))) != DV_OK)
            break;
        ta[i] = (double)(now_ns() - t1) * 1e-9 / batch;
        td[i] = (double)(t1 - t0) * 1e-9 / batch;
        gd[i] = dev_s / batch;
        ga[i] = coll_actor_dev_s(A) / batch; /* after the timed part: a round trip */
    }
    if (res->error == DV_OK) {
        res->iters = iters;
        res->actor_s = median_of(ta, iters);
        res->direct_s = D->n > 0 ? median_of(td, iters) : 0;
        res->actor_dev_s = median_of(ga, iters);
        res->direct_dev_s = D->n > 0 ? median_of(gd, iters) : 0;
        res->right = coll_actor_check(A, count);
    }
    free(ta), free(td), free(ga), free(gd);
}

static void coll_size_text(char *buf, size_t cap, uint64_t bytes)
{
    if (bytes >= (UINT64_C(1) << 30))
        snprintf(buf, cap, "%llu GiB", (unsigned long long)(bytes >> 30));
    else if (bytes >= (UINT64_C(1) << 20))
        snprintf(buf, cap, "%llu MiB", (unsigned long long)(bytes >> 20));
    else if (bytes >= 1024)
        snprintf(buf, cap, "%llu KiB", (unsigned long long)(bytes >> 10));
    else
        snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
}

/* A note for a CSV field: quoted, its own quotes made single. */
static void coll_csv_note(char *dst, size_t cap, const char *note)
{
    size_t k = 0;
    if (cap < 3)
        return;
    dst[k++] = '"';
    for (const char *p = note; *p != '\0' && k + 2 < cap; p++)
        dst[k++] = *p == '"' ? '\'' : *p == '\n' ? ' ' : *p;
    dst[k++] = '"';
    dst[k] = '\0';
}

#define COLL_HEADER_CSV                                                                            \
    "section,what,bytes,ranks,iters,devactor_us,devactor_algbw_gbs,devactor_busbw_gbs,"            \
    "direct_us,direct_algbw_gbs,direct_busbw_gbs,ratio_to_direct,devactor_device_us,"              \
    "direct_device_us,note\n"

/*
 * A row: time per all-reduce, algbw = bytes / time and busbw = algbw *
 * 2(n-1)/n (nccl-tests' all-reduce factor: 0 with one rank), in GB/s; the
 * ratio of devactor's time over the direct calls'.
 */
static void coll_print(const char *what, const coll_result *r, int n, const char *note)
{
    char size[32], field[320];
    double factor = 2.0 * (n - 1) / n;
    coll_size_text(size, sizeof(size), r->bytes);
    if (r->error != DV_OK) {
        coll_csv_note(field, sizeof(field), r->why);
        if (csv)
            printf("collectives,%s,%llu,%d,,,,,,,,,,,%s\n", what, (unsigned long long)r->bytes, n,
                   field);
        else
            printf("  %-10s %8s   error: %s: %s\n", what, size, dv_err_name(r->error), r->why);
        fprintf(stderr, "dv-bench: collectives: %s at %s: %s: %s\n", what, size,
                dv_err_name(r->error), r->why);
        bench_failed = true;
        return;
    }
    double aa = (double)r->bytes / r->actor_s * 1e-9, ab = aa * factor;
    double da = r->direct_s > 0 ? (double)r->bytes / r->direct_s * 1e-9 : 0, db = da * factor;
    const char *say = r->right ? note : "devactor's result is WRONG";
    if (csv) {
        coll_csv_note(field, sizeof(field), say);
        char dev[32] = "", ddev[32] = "";
        if (r->actor_dev_s > 0)
            snprintf(dev, sizeof(dev), "%.2f", r->actor_dev_s * 1e6);
        if (r->direct_dev_s > 0)
            snprintf(ddev, sizeof(ddev), "%.2f", r->direct_dev_s * 1e6);
        if (r->direct_s > 0)
            printf("collectives,%s,%llu,%d,%d,%.2f,%.3f,%.3f,%.2f,%.3f,%.3f,%.3f,%s,%s,%s\n", what,
                   (unsigned long long)r->bytes, n, r->iters, r->actor_s * 1e6, aa, ab,
                   r->direct_s * 1e6, da, db, r->actor_s / r->direct_s, dev, ddev, field);
        else
            printf("collectives,%s,%llu,%d,%d,%.2f,%.3f,%.3f,,,,,%s,,%s\n", what,
                   (unsigned long long)r->bytes, n, r->iters, r->actor_s * 1e6, aa, ab, dev, field);
        return;
    }
    char dev[16] = "-", ddev[16] = "-";
    if (r->actor_dev_s > 0)
        snprintf(dev, sizeof(dev), "%.1f", r->actor_dev_s * 1e6);
    if (r->direct_dev_s > 0)
        snprintf(ddev, sizeof(ddev), "%.1f", r->direct_dev_s * 1e6);
    if (r->direct_s > 0) {
        printf("  %-10s %8s %6d %10.1f %8.2f %8.2f %10.1f %8.2f %8.2f %7.3f %9s %9s%s%s\n", what,
               size, r->iters, r->actor_s * 1e6, aa, ab, r->direct_s * 1e6, da, db,
               r->actor_s / r->direct_s, dev, ddev, say[0] != '\0' ? "  " : "", say);
    } else {
        printf("  %-10s %8s %6d %10.1f %8.2f %8.2f %10s %8s %8s %7s %9s %9s%s%s\n", what, size,
               r->iters, r->actor_s * 1e6, aa, ab, "-", "-", "-", "-", dev, ddev,
               say[0] != '\0' ? "  " : "", say);
    }
}

static void coll_skipped(const char *why)
{
    char field[600];
    if (csv) {
        coll_csv_note(field, sizeof(field), why);
        printf(COLL_HEADER_CSV "collectives,skipped,,,,,,,,,,,,,%s\n", field);
    } else {
        printf("\ncollectives: skipped: %s\n", why);
    }
    fflush(stdout);
}

/*
 * All-reduce (float32, sum, out of place) through devactor_nccl.h, every
 * rank on an actor of its own, beside NCCL called directly on the same
 * devices with the same library.  cuda: every visible device, 1 MiB ..
 * 1 GiB; the sim: two simulated devices, 1 and 4 MiB, devactor alone
 * (its collectives there are host reductions: there is no NCCL to call).
 * Then an 8-byte all-reduce's latency, the same way.
 */
static void bench_collectives(dv_driver *drv, double seconds)
{
    static const uint64_t cuda_sizes[] = {UINT64_C(1) << 20,   UINT64_C(4) << 20,
                                          UINT64_C(16) << 20,  UINT64_C(64) << 20,
                                          UINT64_C(256) << 20, UINT64_C(1) << 30};
    static const uint64_t sim_sizes[] = {UINT64_C(1) << 20, UINT64_C(4) << 20};
    bool sim = strcmp(dv__driver_backend_name(drv), "cuda") != 0;
    const uint64_t *sizes = sim ? sim_sizes : cuda_sizes;
    int nsizes = sim ? 2 : (int)(sizeof(cuda_sizes) / sizeof(cuda_sizes[0]));
    uint64_t max_bytes = sizes[nsizes - 1];
    coll_direct D;
    coll_actors A;
    char why[600] = "", direct_note[600] = "";
    int n = 2;
    memset(&D, 0, sizeof(D));
    memset(&A, 0, sizeof(A));

    if (!sim) {
        if (dv__drv_device_count(drv, &n) != DV_OK || n < 1) {
            snprintf(why, sizeof(why), "no device: %s", dv_last_error()->message);
            coll_skipped(why);
            return;
        }
        n = n > DV_MAX_DEVICES ? DV_MAX_DEVICES : n;
    }
    /* devactor first: where NCCL does not open, its communicator says
     * what it looked for. */
    int rc = coll_actors_setup(&A, drv, sim, n, max_bytes);
    if (rc != DV_OK) {
        if (rc == DV_ENOTSUP && !sim)
            snprintf(why, sizeof(why), "NCCL does not open: %s", dv_last_error()->message);
        else
            snprintf(why, sizeof(why), "devactor's communicator over %d %s: %s (%s)", n,
                     sim ? "simulated devices" : "devices", dv_err_name(rc),
                     dv_last_error()->message);
        coll_actors_teardown(&A);
        coll_skipped(why);
        if (!(rc == DV_ENOTSUP && !sim)) { /* not a library missing: a failure */
            fprintf(stderr, "dv-bench: collectives: %s\n", why);
            bench_failed = true;
        }
        return;
    }
    if (sim)
        snprintf(direct_note, sizeof(direct_note),
                 "none: the simulated devices have no NCCL to call (devactor's collectives "
                 "there are host reductions)");
    else if (!coll_open(&D, dv_nccl_library(A.comm), direct_note, sizeof(direct_note)) ||
             !coll_direct_setup(&D, drv, n, max_bytes, direct_note, sizeof(direct_note)))
        coll_direct_teardown(&D);
    for (int i = 0; coll_same_buffers && i < D.n; i++) {
        dv_ref_info si, ri;
        if (dv_ref_access(A.send[i], &si) == DV_OK && dv_ref_access(A.recv[i], &ri) == DV_OK) {
            D.use_send[i] = si.ptr;
            D.use_recv[i] = ri.ptr;
        }
    }

    if (csv) {
        printf(COLL_HEADER_CSV);
    } else {
        printf("\ncollectives: all-reduce, float32 sum, out of place, %d rank%s, one actor per "
               "device\n"
               "  devactor: %s; every rank posted with dv_nccl_all_reduce and a future, then "
               "every future waited for\n",
               n, n == 1 ? "" : "s", dv_nccl_library(A.comm));
        if (D.n > 0)
            printf("  direct:   NCCL %d.%d.%d (%s); ncclGroupStart, ncclAllReduce per device, "
                   "ncclGroupEnd, cuStreamSynchronize\n",
                   D.version / 10000, D.version / 100 % 100, D.version % 100, D.path);
        else
            printf("  direct:   %s\n", direct_note);
        printf("  (median us per all-reduce after warm-up%s; sizes: rounds of %d posted back to "
               "back, then waited,\n   as nccl-tests times them; latency: each posted and waited "
               "alone; algbw = bytes / time,\n   busbw = algbw * 2(n-1)/n as nccl-tests, GB/s%s; ratio: devactor's time over "
               "the direct calls';\n   device: the first rank's stream's time per all-reduce, "
               "from an event before a round to one after it, devactor's and direct)\n"
               "  %-10s %8s %6s %10s %8s %8s %10s %8s %8s %7s %9s %9s\n",
               D.n > 0 ? ", direct and devactor in turn" : "", COLL_BATCH, n == 1 ? ", 0 with one rank" : "",
               "what", "size", "iters", "devactor", "algbw", "busbw", "direct", "algbw", "busbw",
               "ratio", "device", "direct");
    }
    bool failed = false, had_direct = D.n > 0;
    for (int k = 0; k <= nsizes && !failed; k++) {
        coll_result r;
        bool latency = k == nsizes; /* the last row */
        if (latency)
            coll_time(&A, &D, COLL_LATENCY, 1, 100, 1000, 20000, seconds, &r, direct_note,
                      sizeof(direct_note));
        else
            coll_time(&A, &D, sizes[k], COLL_BATCH, 2, 5, 200, seconds, &r, direct_note,
                      sizeof(direct_note));
        coll_print(latency ? "latency" : "all-reduce", &r, n,
                   D.n > 0 ? ""
                   : csv   ? (sim ? "sim: no direct NCCL row" : direct_note)
                   : sim   ? "" /* the header says why */
                           : "no direct row");
        fflush(stdout);
        failed = r.error != DV_OK;
    }
    if (!csv && had_direct && D.n == 0)
        printf("  (the direct calls failed: %s)\n", direct_note);
    fflush(stdout);
    coll_direct_teardown(&D);
    coll_actors_teardown(&A);
}

static void usage(FILE *out)
{
    fprintf(out, "usage: dv-bench [--backend cuda|sim|auto] [--device N]\n"
                 "                [--section alloc|random|mapping|actor|launch|copy|\n"
                 "                           library|collectives|all]\n"
                 "                [--seconds S] [--max-size BYTES] [--peer LIB] [--staging BYTES]\n"
                 "                [--conf TEXT] [--same-buffers] [--direct-events]\n"
                 "                [--csv]\n"
                 "\n"
                 "Measures devactor against direct driver calls in the same run:\n"
                 "  alloc   allocate+free pair latency of every resource and stack at\n"
                 "          256 B, 64 KiB, 1 MiB, 64 MiB, beside the driver's pairs\n"
                 "  random  RMM's random_allocations on the pool at N = 1k, 10k, 100k,\n"
                 "          the sizes in alternating rounds on one CPU; the pool\n"
                 "          without aliases, then with them (pool_alias)\n"
                 "  mapping what the driver's virtual memory calls cost: 256 granules\n"
                 "          mapped one call each (create, map, access), mapped again at\n"
                 "          a second address, unmapped; the same memory as one extent\n"
                 "  actor   an allocation's round trip beside a bare ping-pong over a ck\n"
                 "          ring; one client's allocate+release pair at 256 B..1 MiB,\n"
                 "          with the order across threads off (its cost) and beside the\n"
                 "          peer's pair; pairs/s with 1, 8 and 4x-cores clients (per-client\n"
                 "          rings and one shared ring) beside 8 threads calling the\n"
                 "          driver's stream-ordered pair (and the peer's) directly\n"
                 "  launch  an empty kernel through the actor with 0, 2, 8 tracked handles\n"
                 "          (touch8, 8 pointers, the rest null), one stream and two\n"
                 "          alternating, beside a raw launch loop\n"
                 "  copy    host<->device GB/s at 4 KiB..256 MiB through the actor from\n"
                 "          dv_host_alloc, registered and pageable memory, beside the\n"
                 "          driver's copies from page-locked and pageable memory; a 4 KiB\n"
                 "          copy's round trip; the actor thread's busy share of a 1 GiB\n"
                 "          pageable copy; 16 clients at once beside 16 threads calling\n"
                 "          the driver\n"
                 "  library GEMM (F32, TF32, BF16) at 4096^3, calls back to back, and at\n"
                 "          64^3, one call and its wait, through devactor_blas.h beside\n"
                 "          cuBLAS called directly on a stream; FFT (C2C 2^24 single, R2C\n"
                 "          4096 x 4096 batched) through devactor_fft.h beside cuFFT\n"
                 "          (cuda only)\n"
                 "  collectives  all-reduce (float32 sum) bus bandwidth at 1 MiB..1 GiB and\n"
                 "          an 8-byte all-reduce's latency through devactor_nccl.h, one actor\n"
                 "          per device, beside NCCL called directly on the same devices\n"
                 "          with the same libnccl.so.2 (DV_NCCL_PATH, else the loader's,\n"
                 "          else the CUDA toolkit's), and the device's time per all-reduce\n"
                 "          on the first rank's stream for both; every visible device, whatever\n"
                 "          --device says; skipped, saying why, where NCCL does not open.\n"
                 "          The sim: two simulated devices, 1 and 4 MiB, devactor alone\n"
                 "          (no NCCL there to call directly)\n"
                 "\n"
                 "  --seconds S    time per measurement (default 0.3; up to 3600); these run\n"
                 "                 fixed counts instead: random (rounds), launch (launches), the\n"
                 "                 actor section's one-client pairs (9 rounds of 100,000 at each\n"
                 "                 size) and, at least, the alloc section's rows (10 rounds of\n"
                 "                 80 pairs: the guard's at 64 MiB take seconds), so a section\n"
                 "                 takes longer than its rows times S\n"
                 "  --max-size B   largest random_allocations size (default 65536; B here and\n"
                 "                 below in bytes, or with K, M or G)\n"
                 "  --peer LIB     a peer allocator's adapter (tools/peers/), e.g. PyTorch's\n"
                 "                 caching allocator; also DV_BENCH_PEER (one that does not\n"
                 "                 load is a failed measurement: exit 1)\n"
                 "  --staging B    the copy section's staging (cfg.staging_bytes)\n"
                 "  --conf TEXT    the collectives section's actors' configuration, in\n"
                 "                 dv_actor_config_parse's syntax (e.g. pool_chunks:1);\n"
                 "                 given again, applied over the ones before\n"
                 "  --same-buffers the collectives' direct calls use devactor's blocks, so\n"
                 "                 the two differ in the path of the call alone, not memory\n"
                 "  --direct-events  the direct calls record an event after each all-reduce,\n"
                 "                 as the actor's completion tracking may\n"
                 "  --csv          machine-readable rows instead of tables: each table its\n"
                 "                 own header line (its first field \"section\"), then\n"
                 "                 rows whose first field names the section\n"
                 "  all runs every section; --section NAME runs one\n"
                 "Exit status: 0, 1 when a measurement failed or the output could not be\n"
                 "written (said on stderr), or 2 on a usage or device error.\n");
}

static bool known_section(const char *s)
{
    static const char *const names[] = {"all",    "alloc", "random",  "mapping",    "actor",
                                        "launch", "copy",  "library", "collectives"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(s, names[i]) == 0)
            return true;
    return false;
}

static int bad_value(const char *option, const char *value)
{
    fprintf(stderr, "dv-bench: %s: '%s' is not a value it takes\n", option, value);
    usage(stderr);
    return 2;
}


int main(int argc, char **argv)
{
    static const struct option opts[] = {{"backend", required_argument, NULL, 'b'},
                                         {"device", required_argument, NULL, 'd'},
                                         {"section", required_argument, NULL, 's'},
                                         {"seconds", required_argument, NULL, 't'},
                                         {"max-size", required_argument, NULL, 'm'},
                                         {"csv", no_argument, NULL, 'c'},
                                         {"peer", required_argument, NULL, 'p'},
                                         {"staging", required_argument, NULL, 'g'},
                                         {"conf", required_argument, NULL, 'f'},
                                         {"same-buffers", no_argument, NULL, 'S'},
                                         {"direct-events", no_argument, NULL, 'E'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    dv_driver_config cfg;
    const char *section = "all";
    const char *peer_path = getenv("DV_BENCH_PEER");
    double seconds = 0.3;
    uint64_t max_size = 65536;
    int device = 0, c;

    dv__driver_config_init(&cfg);
    /* random_allocations at N = 100k keeps ~2.5 GiB live: give the sim room
     * (its memory is mapped lazily, so untouched bytes cost nothing). */
    cfg.sim.memory_bytes = UINT64_C(8) << 30;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'b':
            if (strcmp(optarg, "cuda") == 0)
                cfg.backend = DV_BACKEND_CUDA;
            else if (strcmp(optarg, "sim") == 0)
                cfg.backend = DV_BACKEND_SIM;
            else if (strcmp(optarg, "auto") == 0)
                cfg.backend = DV_BACKEND_AUTO;
            else
                return bad_value("--backend", optarg);
            break;
        case 'd': {
            uint64_t n;
            if (!tool_whole_number(optarg, &n) || n > INT32_MAX)
                return bad_value("--device", optarg);
            device = (int)n;
            break;
        }
        case 's':
            if (!known_section(optarg))
                return bad_value("--section", optarg);
            section = optarg;
            break;
        case 't': {
            char *end = NULL;
            errno = 0;
            seconds = strtod(optarg, &end);
            if (errno != 0 || end == optarg || *end != '\0' || !(seconds > 0) || seconds > 3600)
                return bad_value("--seconds", optarg);
            break;
        }
        case 'm':
            /* (A size past the device's memory is the device's to refuse:
             * a failed measurement, exit 1.) */
            if (!parse_bytes(optarg, &max_size) || max_size == 0)
                return bad_value("--max-size", optarg);
            break;
        case 'c':
            csv = true;
            break;
        case 'p':
            peer_path = optarg;
            break;
        case 'g':
            if (!parse_bytes(optarg, &copy_staging_bytes))
                return bad_value("--staging", optarg);
            break;
        case 'S':
            coll_same_buffers = true;
            break;
        case 'E':
            coll_direct_events = true;
            break;
        case 'f': {
            dv_actor_config probe;
            dv_actor_config_init(&probe);
            if (dv_actor_config_parse(&probe, optarg) != DV_OK) {
                fprintf(stderr, "dv-bench: --conf: %s\n", dv_last_error()->message);
                return 2;
            }
            if (coll_conf != NULL) { /* given again: over the ones before (leaked: a few bytes) */
                char *both = malloc(strlen(coll_conf) + strlen(optarg) + 2);
                if (both == NULL)
                    return 2;
                sprintf(both, "%s,%s", coll_conf, optarg);
                coll_conf = both;
            } else {
                coll_conf = optarg;
            }
            break;
        }
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "dv-bench: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (max_size == 0 || !(seconds > 0)) {
        usage(stderr);
        return 2;
    }
    note_env_conf("dv-bench", true);
    dv_driver *drv;
    dv_res_env env;
    dv_device_info info;
    int rc = dv__driver_open(&cfg, &drv);
    bool opened = rc == DV_OK;
    if (rc == DV_OK)
        rc = dv__drv_device_info(drv, device, &info);
    if (rc == DV_OK)
        rc = dv__res_env_init(&env, drv, device, 2);
    if (rc != DV_OK) {
        fprintf(stderr, "dv-bench: %s\n", dv_last_error()->message);
        if (opened)
            dv__driver_close(drv);
        return 2;
    }
    (void)dv__drv_pool_set_release_threshold(env.ctx, UINT64_MAX);
    if (!csv)
        printf("dv-bench: backend %s, device %d: %s\n", dv__driver_backend_name(drv), device,
               info.name);
    if (strcmp(section, "all") == 0 || strcmp(section, "alloc") == 0)
        bench_alloc(&env, seconds);
    if (strcmp(section, "all") == 0 || strcmp(section, "random") == 0) {
        bench_random(&env, max_size, false);
        bench_random(&env, max_size, true);
    }
    if (strcmp(section, "all") == 0 || strcmp(section, "mapping") == 0)
        bench_mapping(&env);
    if (strcmp(section, "all") == 0 || strcmp(section, "actor") == 0)
        bench_actors(drv, &env, device, seconds < 1.0 ? 1.0 : seconds, peer_path);
    if (strcmp(section, "all") == 0 || strcmp(section, "launch") == 0)
        bench_launches(drv, &env, device);
    if (strcmp(section, "all") == 0 || strcmp(section, "copy") == 0)
        bench_copies(drv, &env, device, seconds);
    if (strcmp(section, "all") == 0 || strcmp(section, "library") == 0)
        bench_library(drv, &env, device, seconds);
    if (strcmp(section, "all") == 0 || strcmp(section, "collectives") == 0)
        bench_collectives(drv, seconds);
    dv__res_env_fini(&env);
    dv__driver_close(drv);
    if (tool_stdout_done("dv-bench") != 0)
        return 1;
    return bench_failed ? 1 : 0;
}
