/*
 * Out of memory, arbitrated (dv_oom_info, dv_alloc_wait), on the sim:
 *   - an allocation that fits once a free in flight lands never fails:
 *     a block is written by a slow host function on stream 1 and freed,
 *     and at once, under a budget it fits only without that block, the
 *     same bytes are asked for on stream 0;
 *   - the user's oom function is called with what was asked and what is
 *     held, at most four times, and a refusal's detail says what was done;
 *   - the oom function posts frees of a cache; dv_alloc_wait gets the
 *     memory once they land;
 *   - dv_alloc_wait waits for another thread's release, is refused at
 *     once when no other client thread is left, and gives up at its
 *     timeout when another holds on;
 *   - two threads that each hold half of a budget and each wait for more
 *     do not wait out their timeouts: the last to wait is refused, frees
 *     its half, and the other gets it;
 *   - inside a task dv_alloc_wait answers DV_EDEADLK;
 *   - (sim) a request larger than the device is refused before anything
 *     is mapped, and a large first request maps in few extents;
 *   - (sim) a refusal leaves the pool holding what it held, and its
 *     detail names the bytes asked for and those the device has left.
 */
#include <pthread.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "devactor.h"
#include "devactor_sim.h"
#include "tap.h"

/* The same on the real driver (oom_cuda.t.c), but the 64 MiB device. */
#ifndef OOM_ON_CUDA
#define OOM_ON_CUDA 0
#endif

#define MIB (UINT64_C(1) << 20)

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static dv_actor *make_with(uint64_t budget, dv_oom_fn oom, void *user, bool pool, uint64_t memory)
{
    dv_actor_config cfg;
    dv_actor *a = NULL;
    dv_actor_config_init(&cfg);
    cfg.backend = OOM_ON_CUDA ? DV_BACKEND_CUDA : DV_BACKEND_SIM;
    cfg.pool = pool;
    cfg.sim_memory_bytes = memory;
    cfg.budget_bytes = budget;
    cfg.oom = oom;
    cfg.oom_user = user;
    if (dv_actor_create(&cfg, &a) != DV_OK)
        diag("actor: %s", dv_last_error()->message);
    return a;
}

static dv_actor *make(uint64_t budget, dv_oom_fn oom, void *user)
{
    return make_with(budget, oom, user, true, 0);
}

/* ---- A free in flight ---- */

static void slow(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
}

static int write_slowly(const dv_task_ctx *ctx, void *user)
{
    (void)user;
    return dv_task_host_fn(ctx, slow, NULL);
}

static void test_in_flight(bool pool)
{
    /* With the pool, under a budget; without, on a 64 MiB device (the
     * driver's pool holds the freed bytes until the stream gets there). */
    dv_actor *a = pool ? make(8 * MIB, NULL, NULL) : make_with(0, NULL, NULL, false, 64 * MIB);
    uint64_t size = pool ? 6 * MIB : 40 * MIB;
    dv_ref x = DV_REF_NULL, y = DV_REF_NULL;
    dv_ref_info info;
    int rc = a != NULL ? dv_alloc(a, size, 1, "x", &x) : DV_EINVAL;
    dv_arg arg = dv_arg_ref(x, DV_WRITE, 0);
    if (rc == DV_OK)
        rc = dv_task(a, write_slowly, NULL, 1, &arg, 1);
    if (rc == DV_OK)
        rc = dv_ref_release(x); /* its free waits for the slow write */
    uint64_t t0 = now_ns();
    if (rc == DV_OK)
        rc = dv_alloc(a, size, 0, "y", &y);
    int got = rc == DV_OK ? dv_ref_access(y, &info) : rc;
    double ms = (double)(now_ns() - t0) / 1e6;
    is_status(got, DV_OK,
              "%s: %llu MiB on stream 0 while as much freed on stream 1 is in flight: served "
              "once the free landed (%.0f ms)",
              pool ? "pool, 8 MiB budget" : "no pool, 64 MiB device",
              (unsigned long long)(size / MIB), ms);
    dv_memory_stats st = {0};
    dv_memory_stats_get(a, &st);
    ok(st.failures == 0, "no failure counted (%llu)", (unsigned long long)st.failures);
    dv_ref_release(y);
    if (a != NULL)
        dv_actor_shutdown(a);
}

/* ---- The oom function ---- */

struct oom_log {
    int calls;
    dv_oom_info last;
    bool again;      /* what to answer */
    dv_ref cache[4]; /* released at the first call */
    unsigned ncache;
    dv_actor *waiter; /* non-NULL: dv_alloc_wait on it from the function */
    int waited;       /* what that answered */
};

static bool on_oom(const dv_oom_info *info, void *user)
{
    struct oom_log *l = user;
    l->calls++;
    l->last = *info;
    if (l->waiter != NULL) {
        dv_ref r = DV_REF_NULL;
        l->waited = dv_alloc_wait(l->waiter, 16, 0, "inner", 1000000u, &r);
    }
    for (unsigned i = 0; i < l->ncache; i++)
        (void)dv_ref_release(l->cache[i]);
    l->ncache = 0;
    return l->again;
}

static void test_oom_function(void)
{
    struct oom_log log = {0};
    dv_actor *a = make(8 * MIB, on_oom, &log);
    dv_ref x = DV_REF_NULL, y = DV_REF_NULL;
    dv_ref_info info;

    /* 6 of 8 MiB held; 4 more cannot fit; the function says "again"
     * without freeing anything: called four times, then refused. */
    log.again = true;
    log.waiter = a;
    int rc = a != NULL ? dv_alloc(a, 6 * MIB, 0, "held", &x) : DV_EINVAL;
    (void)dv_ref_access(x, &info);
    rc |= a != NULL ? dv_alloc(a, 4 * MIB, 0, "more", &y) : DV_EINVAL;
    int got = dv_ref_access(y, &info);
    is_status(got, DV_EOUT_OF_BUDGET, "4 MiB more than an 8 MiB budget holds is refused");
    ok(log.calls == 4 && log.last.attempt == 4,
       "the oom function was asked four times (%d, last attempt %u)", log.calls, log.last.attempt);
    ok(log.last.bytes == 4 * MIB && log.last.status == DV_EOUT_OF_BUDGET &&
           log.last.live_bytes == 6 * MIB && strcmp(log.last.tag, "more") == 0,
       "it was told the request, the status, what is live and the tag (%llu, %s, %llu, %s)",
       (unsigned long long)log.last.bytes, dv_err_name(log.last.status),
       (unsigned long long)log.last.live_bytes, log.last.tag);
    is_status(log.waited, DV_EDEADLK, "dv_alloc_wait inside the oom function: DV_EDEADLK");
    const char *msg = dv_last_error()->message;
    ok(strstr(msg, "reclaimed") != NULL && strstr(msg, "oom function asked") != NULL,
       "the refusal's detail says what was tried: %s", msg);
    dv_ref_release(y);

    dv_ref_release(x);

    /* 2 MiB held and a cache of two 3 MiB blocks the function releases:
     * dv_alloc_wait gets 4 MiB once they land. */
    log = (struct oom_log){.again = false};
    rc = dv_alloc(a, 2 * MIB, 0, "held", &x);
    rc |= dv_alloc(a, 3 * MIB, 0, "c", &log.cache[0]);
    rc |= dv_alloc(a, 3 * MIB, 0, "c", &log.cache[1]);
    (void)dv_ref_access(log.cache[1], &info);
    log.ncache = 2;
    uint64_t t0 = now_ns();
    got = rc == DV_OK ? dv_alloc_wait(a, 4 * MIB, 0, "after-spill", 2000000000u, &y) : rc;
    double ms = (double)(now_ns() - t0) / 1e6;
    ok(got == DV_OK && log.calls >= 1 && ms < 1500.0,
       "the function released its cache; dv_alloc_wait got 4 MiB after it landed (%s, %d calls, "
       "%.0f ms)",
       dv_err_name(got), log.calls, ms);
    dv_ref_release(y);
    dv_ref_release(x);
    if (a != NULL)
        dv_actor_shutdown(a);
}

/* ---- Waiting for other threads ---- */

struct holder {
    dv_actor *a;
    dv_ref held;
    unsigned hold_ms;
    uint64_t want;
    int rc;
    double ms;
    char msg[256];
};

static pthread_mutex_t held_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t held_cv = PTHREAD_COND_INITIALIZER;
static bool held_ready;

/* Allocate h->want (a client of the actor, as a thread holding memory
 * is), let the main thread know, hold it hold_ms, release. */
static void *hold_then_release(void *arg)
{
    struct holder *h = arg;
    dv_ref_info info;
    h->rc = dv_alloc(h->a, h->want, 0, "held", &h->held);
    if (h->rc == DV_OK)
        h->rc = dv_ref_access(h->held, &info);
    pthread_mutex_lock(&held_mu);
    held_ready = true;
    pthread_cond_signal(&held_cv);
    pthread_mutex_unlock(&held_mu);
    struct timespec ts = {0, (long)h->hold_ms * 1000000L};
    nanosleep(&ts, NULL);
    dv_ref_release(h->held);
    dv_flush(h->a);
    return NULL;
}

static void wait_held(void)
{
    pthread_mutex_lock(&held_mu);
    while (!held_ready)
        pthread_cond_wait(&held_cv, &held_mu);
    pthread_mutex_unlock(&held_mu);
}

/* A task that posts to its own actor (an allocation and its release):
 * the actor's thread becomes one of its posters. */
static int task_posts(const dv_task_ctx *ctx, void *user)
{
    (void)user;
    dv_ref x = DV_REF_NULL;
    int rc = dv_alloc(ctx->actor, 16, ctx->stream, "in-task", &x);
    if (rc == DV_OK)
        rc = dv_ref_release(x);
    return rc;
}

static void test_wait_for_release(void)
{
    dv_actor *a = make(8 * MIB, NULL, NULL);
    struct holder h = {.a = a, .hold_ms = 150, .want = 6 * MIB};
    dv_ref y = DV_REF_NULL;
    int rc = a != NULL ? DV_OK : DV_EINVAL;
    pthread_t t;
    pthread_create(&t, NULL, hold_then_release, &h);
    wait_held();
    rc |= h.rc;
    uint64_t t0 = now_ns();
    int got = rc == DV_OK ? dv_alloc_wait(a, 6 * MIB, 0, "waiter", 3000000000u, &y) : rc;
    double ms = (double)(now_ns() - t0) / 1e6;
    pthread_join(t, NULL);
    ok(got == DV_OK && ms >= 100.0 && ms < 2500.0,
       "dv_alloc_wait got 6 MiB once another thread released its 6 MiB (%s, %.0f ms)",
       dv_err_name(got), ms);
    /* The holder's thread is gone: no other client could release. */
    dv_ref z = DV_REF_NULL;
    t0 = now_ns();
    got = dv_alloc_wait(a, 6 * MIB, 0, "waiter", 3000000000u, &z);
    ms = (double)(now_ns() - t0) / 1e6;
    ok(got == DV_EOUT_OF_BUDGET && ms < 1000.0 && z.bits == 0 &&
           strstr(dv_last_error()->message, "the last is refused") != NULL,
       "the only client thread left is refused at once, not at its timeout (%s, %.0f ms)",
       dv_err_name(got), ms);
    /* The actor's own thread posted (from a task): it releases nothing
     * unless another client asks, so it does not count as one. */
    int trc = dv_task(a, task_posts, NULL, 0, NULL, 0);
    t0 = now_ns();
    got = dv_alloc_wait(a, 6 * MIB, 0, "waiter", 3000000000u, &z);
    ms = (double)(now_ns() - t0) / 1e6;
    ok(trc == DV_OK && got == DV_EOUT_OF_BUDGET && ms < 1000.0,
       "... after a task posted to its own actor, still at once (task %s; %s, %.0f ms)",
       dv_err_name(trc), dv_err_name(got), ms);
    /* Another client that holds on: the wait ends at its timeout. */
    struct holder b = {.a = a, .hold_ms = 600, .want = 1024};
    held_ready = false;
    pthread_create(&t, NULL, hold_then_release, &b);
    wait_held();
    t0 = now_ns();
    got = dv_alloc_wait(a, 6 * MIB, 0, "waiter", 100000000u, &z);
    ms = (double)(now_ns() - t0) / 1e6;
    pthread_join(t, NULL);
    ok(got == DV_EOUT_OF_BUDGET && ms >= 90.0 && ms < 590.0 && z.bits == 0,
       "with another client holding on, it gives up at its 100 ms timeout (%s, %.0f ms)",
       dv_err_name(got), ms);
    dv_ref_release(y);
    if (a != NULL)
        dv_actor_shutdown(a);
}

/* Two threads, each holding 4 of 8 MiB, each wait for 4 more. */
static void *hold_and_want(void *arg)
{
    struct holder *h = arg;
    dv_ref_info info;
    dv_ref more = DV_REF_NULL;
    h->rc = dv_alloc(h->a, 4 * MIB, 0, "half", &h->held);
    if (h->rc == DV_OK)
        h->rc = dv_ref_access(h->held, &info);
    struct timespec ts = {0, (long)h->hold_ms * 1000000L};
    nanosleep(&ts, NULL);
    uint64_t t0 = now_ns();
    if (h->rc == DV_OK)
        h->rc = dv_alloc_wait(h->a, h->want, 0, "more", 5000000000u, &more);
    h->ms = (double)(now_ns() - t0) / 1e6;
    snprintf(h->msg, sizeof(h->msg), "%s", dv_last_error()->message);
    /* Refused: give back what it holds, so that the other goes on. */
    dv_ref_release(h->held);
    if (h->rc == DV_OK)
        dv_ref_release(more);
    dv_flush(h->a);
    return NULL;
}

static void test_everyone_waits(void)
{
    dv_actor *a = make(8 * MIB, NULL, NULL);
    struct holder h[2] = {{.a = a, .hold_ms = 20, .want = 4 * MIB},
                          {.a = a, .hold_ms = 150, .want = 4 * MIB}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, hold_and_want, &h[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    ok(h[0].rc == DV_OK && h[1].rc == DV_EOUT_OF_BUDGET,
       "the first to wait got its 4 MiB, the last was refused (%s, %s)", dv_err_name(h[0].rc),
       dv_err_name(h[1].rc));
    ok(h[1].ms < 1000.0 && h[0].ms < 3000.0,
       "neither waited out its 5 s timeout (first %.0f ms, last %.0f ms)", h[0].ms, h[1].ms);
    ok(strstr(h[1].msg, "the last is refused") != NULL, "the refusal says why: %s", h[1].msg);
    if (a != NULL)
        dv_actor_shutdown(a);
}

/* Three threads hold a third of the budget each and all wait for more;
 * a refused one exits holding on (its handle outlives the thread).  The
 * ones still waiting are then all the clients left: each is refused in
 * turn, none sits out its 5 s. */
static dv_actor *trio_actor;
static pthread_barrier_t trio_bar;

static void *hold_wait_exit(void *arg)
{
    struct holder *h = arg;
    dv_ref more = DV_REF_NULL;
    h->rc = dv_alloc(trio_actor, 2 * MIB, 0, "third", &h->held);
    if (h->rc == DV_OK)
        h->rc = dv_ref_access(h->held, NULL);
    pthread_barrier_wait(&trio_bar);
    uint64_t t0 = now_ns();
    if (h->rc == DV_OK)
        h->rc = dv_alloc_wait(trio_actor, 2 * MIB, 0, "more", 5000000000u, &more);
    h->ms = (double)(now_ns() - t0) / 1e6;
    if (h->rc == DV_OK)
        dv_ref_release(more);
    return NULL;
}

static void test_waiters_left_alone(void)
{
    trio_actor = make(6 * MIB, NULL, NULL);
    struct holder h[3] = {{.a = trio_actor}, {.a = trio_actor}, {.a = trio_actor}};
    pthread_t t[3];
    pthread_barrier_init(&trio_bar, NULL, 3);
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, hold_wait_exit, &h[i]);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&trio_bar);
    int refused = 0;
    double most = 0;
    for (int i = 0; i < 3; i++) {
        refused += h[i].rc == DV_EOUT_OF_BUDGET;
        most = h[i].ms > most ? h[i].ms : most;
    }
    ok(refused == 3, "each of the three is refused in turn (%s, %s, %s)", dv_err_name(h[0].rc),
       dv_err_name(h[1].rc), dv_err_name(h[2].rc));
    ok(most < 2500.0, "none sat out its 5 s once only waiting threads were left (longest %.0f ms)",
       most);
    for (int i = 0; i < 3; i++)
        dv_ref_release(h[i].held);
    if (trio_actor != NULL)
        dv_actor_shutdown(trio_actor);
}

/* ---- Inside a task ---- */

struct inside {
    dv_actor *a;
    int rc;
};

static int wait_inside(const dv_task_ctx *ctx, void *user)
{
    struct inside *in = user;
    dv_ref r = DV_REF_NULL;
    (void)ctx;
    in->rc = dv_alloc_wait(in->a, 1024, 0, "t", 1000000u, &r);
    return DV_OK;
}

static void test_in_task(void)
{
    dv_actor *a = make(0, NULL, NULL);
    struct inside in = {a, DV_OK};
    int rc = a != NULL ? dv_task(a, wait_inside, &in, 0, NULL, 0) : DV_EINVAL;
    ok(rc == DV_OK && in.rc == DV_EDEADLK, "inside a task dv_alloc_wait is DV_EDEADLK (%s)",
       dv_err_name(in.rc));
    dv_ref r;
    ok(dv_alloc_wait(a, 1024, 0, "x", 0, NULL) == DV_EINVAL &&
           dv_alloc_wait(a, 0, 0, "x", 0, &r) == DV_EINVAL && r.bits == 0 &&
           dv_alloc_wait(NULL, 1024, 0, "x", 0, &r) == DV_EINVAL &&
           dv_alloc_wait(a, 1024, 99, "x", 0, &r) == DV_EINVAL,
       "a NULL out or actor, a zero size, an unknown stream: DV_EINVAL, no handle");
    if (a != NULL)
        dv_actor_shutdown(a);
}

/* ---- Sizes against the device (sim: its calls are counted) ---- */

static uint64_t maps_of(dv_actor *a)
{
    uint64_t n = 0;
    dv_sim_call_count(a, "mem_map", &n);
    return n;
}

static void test_sizes(void)
{
    dv_actor *a = make_with(0, NULL, NULL, true, 64 * MIB);
    if (a == NULL) {
        ok(false, "an actor on a 64 MiB device");
        ok(false, "(skipped)");
        ok(false, "(skipped)");
        ok(false, "(skipped)");
        return;
    }
    uint64_t before = maps_of(a);
    dv_ref r;
    dv_alloc(a, 1024 * MIB, 0, "too-big", &r);
    int rc = dv_ref_access(r, NULL);
    const char *msg = dv_last_error()->message;
    ok(rc == DV_EDEVICE_OOM && strstr(msg, "more than the device's") != NULL,
       "1 GiB on a 64 MiB device: %s (%s)", dv_err_name(rc), msg);
    is_u64(maps_of(a) - before, 0, "refused without a mapping tried");
    dv_ref_release(r);
    /* Just over the device: address space for it there is (with aliases,
     * a stream's slice is twice the device), memory not. */
    before = maps_of(a);
    dv_alloc(a, 66 * MIB, 0, "over", &r);
    rc = dv_ref_access(r, NULL);
    ok(rc == DV_EDEVICE_OOM && maps_of(a) == before && dv_last_error()->requested == 66 * MIB,
       "66 MiB on a 64 MiB device: %s with %llu mappings tried, requested %llu", dv_err_name(rc),
       (unsigned long long)(maps_of(a) - before), (unsigned long long)dv_last_error()->requested);
    dv_ref_release(r);
    dv_actor_destroy(a);

    a = make_with(0, NULL, NULL, true, 1024 * MIB);
    before = a != NULL ? maps_of(a) : 0;
    rc = a != NULL ? dv_alloc(a, 256 * MIB, 0, "first", &r) : DV_EINVAL;
    if (rc == DV_OK)
        rc = dv_ref_access(r, NULL);
    uint64_t made = a != NULL ? maps_of(a) - before : 0;
    /* With aliases (DV_POOL_ALIAS=1) the pool maps granule by granule. */
    const char *alias = getenv("DV_POOL_ALIAS");
    bool by_granule = alias != NULL && strcmp(alias, "1") == 0;
    ok(rc == DV_OK && made >= 1 && made <= (by_granule ? 128 : 65),
       "a first request of 256 MiB maps in %llu %s (at most %s)", (unsigned long long)made,
       by_granule ? "granules" : "extents", by_granule ? "128" : "65, not 128 granules");
    if (a != NULL) {
        dv_ref_release(r);
        dv_actor_destroy(a);
    }
}

/*
 * A refusal changes nothing held: 40 MiB live on a 64 MiB device, 30 MiB
 * asked for and refused; the pool holds what it held before the request
 * (with aliases it maps granule by granule until the device refuses, and
 * gives back what it mapped), and the detail names the 30 MiB asked for
 * and the bytes the device has left.
 */
static void test_refusal_holds_nothing(void)
{
    dv_actor *a = make_with(0, NULL, NULL, true, 64 * MIB);
    dv_ref held = DV_REF_NULL, r = DV_REF_NULL;
    int rc = a != NULL ? dv_alloc_wait(a, 40 * MIB, 0, "held", 0, &held) : DV_EINVAL;
    dv_memory_stats before = {0}, after = {0};
    if (rc == DV_OK)
        rc = dv_memory_stats_get(a, &before);
    int refused = rc == DV_OK ? dv_alloc_wait(a, 30 * MIB, 1, "refused", 0, &r) : rc;
    dv_error_detail d = *dv_last_error();
    if (rc == DV_OK)
        rc = dv_memory_stats_get(a, &after);
    ok(rc == DV_OK && refused == DV_EDEVICE_OOM, "30 MiB more refused: %s (%s)",
       dv_err_name(refused), d.message);
    ok(d.requested == 30 * MIB && d.remaining == 64 * MIB - after.reserved.current,
       "the detail: requested %llu (30 MiB), remaining %llu (the device's %llu left)",
       (unsigned long long)d.requested, (unsigned long long)d.remaining,
       (unsigned long long)(64 * MIB - after.reserved.current));
    ok(after.reserved.current == before.reserved.current && after.bytes.current == 40 * MIB,
       "reserved %llu after the refusal, %llu before it",
       (unsigned long long)after.reserved.current, (unsigned long long)before.reserved.current);
    rc = a != NULL ? dv_alloc_wait(a, 20 * MIB, 1, "fits", 0, &r) : DV_EINVAL;
    ok(rc == DV_OK, "20 MiB then fits: %s", dv_err_name(rc));
    dv_ref_release(r);
    dv_ref_release(held);
    if (a != NULL)
        dv_actor_destroy(a);
}

static bool note_reclaimed(const dv_oom_info *info, void *user)
{
    *(uint64_t *)user = info->reclaimed_bytes;
    return false;
}

/* A refusal where the device refused a mapping: the pool gave free
 * extents back trying (it trims and tries once more), and what it gave
 * back is what the detail and the oom function call reclaimed; nothing
 * new stays mapped.  (The pool with aliases places the 30 MiB in the
 * other slices' memory: no refusal to look at.) */
static void test_refusal_counts_what_it_gave(void)
{
    uint64_t told = UINT64_MAX;
    dv_actor *a = make_with(0, note_reclaimed, &told, true, 64 * MIB);
    dv_ref r[18], x = DV_REF_NULL;
    for (int i = 0; i < 18; i++)
        r[i] = DV_REF_NULL;
    dv_memory_stats before = {0}, after = {0};
    dv_error_detail d = {0};
    int refused = DV_OK, rc = a != NULL ? DV_OK : DV_EINVAL;
    for (int i = 0; i <= 18 && rc == DV_OK && refused == DV_OK; i++) {
        if (i == 18) {
            for (int k = 0; k < 18; k += 2)
                dv_ref_release(r[k]); /* 27 MiB live, in every other 3 MiB */
            rc = dv_flush(a);
        }
        if (rc == DV_OK)
            rc = dv_memory_stats_get(a, &before);
        if (rc == DV_OK)
            refused = i < 18 ? dv_alloc_wait(a, 3 * MIB, (dv_stream)(i % 4), "piece", 0, &r[i])
                             : dv_alloc_wait(a, 30 * MIB, 0, "refused", 0, &x);
    }
    d = *dv_last_error();
    if (rc == DV_OK)
        rc = dv_memory_stats_get(a, &after);
    const char *at = strstr(d.message, " reclaimed");
    while (at != NULL && at > d.message && at[-1] >= '0' && at[-1] <= '9')
        at--;
    unsigned long long said = at != NULL ? strtoull(at, NULL, 10) : ULLONG_MAX;
    uint64_t gave = before.reserved.current > after.reserved.current
                        ? before.reserved.current - after.reserved.current
                        : 0;
    bool alias = getenv("DV_POOL_ALIAS") != NULL && strcmp(getenv("DV_POOL_ALIAS"), "1") == 0;
    if (alias && rc == DV_OK && refused == DV_OK) {
        ok(x.bits != 0, "with aliases the 30 MiB is placed (reserved %llu)",
           (unsigned long long)after.reserved.current);
        dv_ref_release(x);
    } else
        ok(rc == DV_OK && refused == DV_EDEVICE_OOM &&
               after.reserved.current <= before.reserved.current && said == gave && told == gave &&
               gave > 0,
           "a refusal that gave %llu bytes back trying says so (detail %llu, oom function %llu), "
           "nothing new mapped (reserved %llu before, %llu after): %s",
           (unsigned long long)gave, said, (unsigned long long)told,
           (unsigned long long)before.reserved.current, (unsigned long long)after.reserved.current,
           d.message);
    for (int i = 0; i < 18; i++)
        if (r[i].bits != 0 && (i % 2 == 1 || refused != DV_OK))
            dv_ref_release(r[i]);
    if (a != NULL)
        dv_actor_destroy(a);
}

static bool count_oom(const dv_oom_info *info, void *user)
{
    (void)info;
    (*(int *)user)++;
    return false;
}

/* Memory the pool keeps for the next pass stays where no trim could make
 * room: a request more than the device, or one the budget on top refuses
 * (it counts live bytes: a trim frees none).  The oom function is asked
 * only where freeing live blocks could help. */
static void test_no_trim_for_nothing(void)
{
    int asked = 0;
    dv_actor *a = make_with(16 * MIB, count_oom, &asked, true, 64 * MIB);
    dv_ref r[4] = {DV_REF_NULL, DV_REF_NULL, DV_REF_NULL, DV_REF_NULL}, x = DV_REF_NULL;
    int rc = a != NULL ? DV_OK : DV_EINVAL;
    for (int i = 0; i < 4 && rc == DV_OK; i++)
        rc = dv_alloc_wait(a, 4 * MIB, 0, "cached", 0, &r[i]);
    for (int i = 1; i < 4; i++)
        dv_ref_release(r[i]); /* 12 MiB the pool keeps, 4 live */
    if (a != NULL)
        dv_flush(a);
    dv_memory_stats before = {0}, after = {0};
    if (rc == DV_OK)
        rc = dv_memory_stats_get(a, &before);
    int refused = rc == DV_OK ? dv_alloc_wait(a, 14 * MIB, 1, "over", 0, &x) : rc;
    dv_error_detail d = *dv_last_error();
    if (rc == DV_OK)
        rc = dv_memory_stats_get(a, &after);
    ok(rc == DV_OK && refused == DV_EOUT_OF_BUDGET && strstr(d.message, "a trim would not help"),
       "14 MiB over a 16 MiB budget with 4 live: refused, untrimmed (%s: %s)",
       dv_err_name(refused), d.message);
    ok(after.reserved.current == before.reserved.current && before.reserved.current >= 16 * MIB &&
           asked == 1,
       "the pool keeps its %llu bytes (%llu before); the oom function asked %d time (1)",
       (unsigned long long)after.reserved.current, (unsigned long long)before.reserved.current,
       asked);
    asked = 0;
    refused = rc == DV_OK ? dv_alloc_wait(a, 20 * MIB, 1, "over", 0, &x) : rc;
    d = *dv_last_error();
    if (rc == DV_OK)
        rc = dv_memory_stats_get(a, &after);
    ok(rc == DV_OK && refused == DV_EOUT_OF_BUDGET && asked == 0 &&
           after.reserved.current == before.reserved.current &&
           strstr(d.message, "nothing could make room"),
       "20 MiB, more than the whole budget: refused, untrimmed, the oom function not asked "
       "(%d): %s",
       asked, d.message);
    dv_ref_release(r[0]);
    if (a != NULL)
        dv_actor_destroy(a);

    /* The same with the allocation log on (a layer of the stack, under
     * the budget: still no pool above the budget). */
    char log[64];
    snprintf(log, sizeof(log), "/tmp/dv-oom-%d.csv", (int)getpid());
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.backend = OOM_ON_CUDA ? DV_BACKEND_CUDA : DV_BACKEND_SIM;
    cfg.sim_memory_bytes = 64 * MIB;
    cfg.budget_bytes = 16 * MIB;
    cfg.log_path = log;
    a = NULL;
    rc = dv_actor_create(&cfg, &a);
    for (int i = 0; i < 4 && rc == DV_OK; i++)
        rc = dv_alloc_wait(a, 4 * MIB, 0, "cached", 0, &r[i]);
    for (int i = 1; i < 4 && rc == DV_OK; i++)
        dv_ref_release(r[i]);
    if (rc == DV_OK)
        rc = dv_flush(a);
    if (rc == DV_OK)
        rc = dv_memory_stats_get(a, &before);
    refused = rc == DV_OK ? dv_alloc_wait(a, 14 * MIB, 1, "over", 0, &x) : rc;
    d = *dv_last_error();
    if (rc == DV_OK)
        rc = dv_memory_stats_get(a, &after);
    ok(rc == DV_OK && refused == DV_EOUT_OF_BUDGET && strstr(d.message, "a trim would not help") &&
           after.reserved.current == before.reserved.current,
       "under the allocation log too: refused, untrimmed (%llu reserved, %llu before): %s",
       (unsigned long long)after.reserved.current, (unsigned long long)before.reserved.current,
       d.message);
    if (a != NULL) {
        dv_ref_release(r[0]);
        dv_actor_destroy(a);
    }
    unlink(log);

    asked = 0;
    a = make_with(0, count_oom, &asked, true, 64 * MIB);
    rc = a != NULL ? dv_alloc_wait(a, 16 * MIB, 0, "cached", 0, &r[0]) : DV_EINVAL;
    dv_ref_release(r[0]);
    if (a != NULL)
        dv_flush(a);
    if (rc == DV_OK)
        rc = dv_memory_stats_get(a, &before);
    refused = rc == DV_OK ? dv_alloc_wait(a, 128 * MIB, 1, "over", 0, &x) : rc;
    d = *dv_last_error();
    if (rc == DV_OK)
        rc = dv_memory_stats_get(a, &after);
    ok(rc == DV_OK && refused == DV_EDEVICE_OOM && asked == 0 &&
           after.reserved.current == before.reserved.current && before.reserved.current != 0 &&
           strstr(d.message, "nothing could make room"),
       "128 MiB on a 64 MiB device: refused, the pool keeps its %llu bytes, the oom function "
       "not asked (%d): %s",
       (unsigned long long)after.reserved.current, asked, d.message);
    ok(d.remaining + before.reserved.current == 64 * MIB,
       "its detail: what the device had left, %llu bytes (the pool holds %llu)",
       (unsigned long long)d.remaining, (unsigned long long)before.reserved.current);
    if (a != NULL)
        dv_actor_destroy(a);

    /* The same without the pool, and with a pool that grows by chunks:
     * whatever layer refuses, more than the device is refused for good. */
    static const char *const confs[] = {"pool:0", "pool_chunks:1"};
    for (int c = 0; c < 2; c++) {
        dv_actor_config_init(&cfg);
        cfg.backend = DV_BACKEND_SIM;
        cfg.sim_memory_bytes = 64 * MIB;
        cfg.oom = count_oom;
        cfg.oom_user = &asked;
        asked = 0;
        a = NULL;
        rc = dv_actor_config_parse(&cfg, confs[c]);
        if (rc == DV_OK)
            rc = dv_actor_create(&cfg, &a);
        if (rc == DV_OK)
            rc = dv_alloc_wait(a, 8 * MIB, 0, "live", 0, &r[0]);
        refused = rc == DV_OK ? dv_alloc_wait(a, 128 * MIB, 1, "over", 0, &x) : rc;
        d = *dv_last_error();
        if (rc == DV_OK)
            rc = dv_memory_stats_get(a, &after);
        ok(rc == DV_OK && refused == DV_EDEVICE_OOM && asked == 0 &&
               strstr(d.message, "nothing could make room") &&
               d.remaining + after.reserved.current == 64 * MIB,
           "%s: 128 MiB on a 64 MiB device with 8 live: refused for good, the oom function not "
           "asked (%d), %llu bytes left (%llu held): %s",
           confs[c], asked, (unsigned long long)d.remaining,
           (unsigned long long)after.reserved.current, d.message);
        if (a != NULL) {
            dv_ref_release(r[0]);
            dv_actor_destroy(a);
        }
    }
}

int main(void)
{
    if (OOM_ON_CUDA) {
        dv_actor *probe = make(0, NULL, NULL);
        if (probe == NULL)
            skip_all("%s", dv_last_error()->message);
        dv_actor_shutdown(probe);
    }
    plan((OOM_ON_CUDA ? 2 : 4 + 4) + 7 + 3 + 3 + 2 + 2 + (OOM_ON_CUDA ? 0 : 4 + 9));
    test_in_flight(true);
    if (!OOM_ON_CUDA)
        test_in_flight(false);
    test_oom_function();
    test_wait_for_release();
    test_everyone_waits();
    test_waiters_left_alone();
    test_in_task();
    if (!OOM_ON_CUDA) {
        test_sizes();
        test_refusal_holds_nothing();
        test_refusal_counts_what_it_gave();
        test_no_trim_for_nothing();
    }
    return tap_done();
}
