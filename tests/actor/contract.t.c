/*
 * The client contract, case by case, each a regression of a bug it once
 * had:
 *
 *   - a handle is usable at once, also from another thread, before the
 *     actor assigned its memory; a try says "pending"; a failed
 *     allocation answers its error on every later use, and releases stay
 *     balanced;
 *   - the last release does not overtake the same thread's earlier post
 *     on the handle;
 *   - a launch checks that the kernel is this actor's (also after a reset
 *     of either, and after the kernel's actor is gone);
 *   - a thread that posted to many short-lived actors keeps neither their
 *     rings nor a long list of clients;
 *   - what a thread knows of one actor is not lost when it uses another
 *     (knowledge is keyed by the actor's full id).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "devactor.h"
#include "devactor_testing.h"
#include "support/data.h"
#include "tap.h"

#define N     4096 /* u32 */
#define BYTES ((uint64_t)N * 4)

static dv_actor *make(uint64_t budget, bool check)
{
    dv_actor_config cfg;
    dv_actor *a = NULL;
    dv_actor_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    cfg.streams = 3;
    cfg.budget_bytes = budget;
    cfg.check_order = check;
    cfg.sim_memory_bytes = 32 << 20;
    cfg.sim_seed = 9;
    cfg.sim_delay_max_us = 20;
    return dv_actor_create(&cfg, &a) == DV_OK ? a : NULL;
}

/* ---- handles usable at once ------------------------------------------- */

typedef struct pass {
    dv_actor *a;
    dv_ref r;
    int rc;
    uint32_t got[N];
} pass;

/* Another thread writes and reads the handle it was given. */
static void *use_elsewhere(void *arg)
{
    pass *p = arg;
    p->rc = dv_memset(p->a, p->r, 0, 0x3C, BYTES, 2);
    if (p->rc == DV_OK)
        p->rc = dv_copy_dtoh(p->a, p->got, p->r, 0, BYTES, 1);
    return NULL;
}

/* A task that keeps the actor's thread until the test lets it go. */
static atomic_bool let_go;
static int busy_task(const dv_task_ctx *ctx, void *user)
{
    (void)ctx;
    (void)user;
    while (!atomic_load(&let_go))
        sched_yield();
    return DV_OK;
}

static void test_handles(void)
{
    dv_actor *a = make(1 << 20, false);
    dv_ref r, big;
    dv_ref_info info;
    pass p = {.a = a};
    pthread_t t;

    /* Pending: the actor is held in a task, so the allocation waits. */
    dv_future busy;
    dv_future_init(&busy, 0);
    atomic_store(&let_go, false);
    dv_task_async(a, busy_task, NULL, 0, NULL, 0, &busy);
    is_status(dv_alloc(a, BYTES, 0, "at once", &r), DV_OK, "dv_alloc returns a handle at once");
    is_status(dv_ref_try_access(r, &info), DV_EAGAIN, "a try while the actor is busy: pending");
    p.r = r;
    pthread_create(&t, NULL, use_elsewhere, &p);
    atomic_store(&let_go, true);
    pthread_join(t, NULL);
    ok(p.rc == DV_OK && all_u32(p.got, N, 0x3C3C3C3Cu),
       "another thread used the pending handle: memset and read back right");
    is_status(dv_ref_access(r, &info), DV_OK, "access: settled");
    ok(info.bytes >= BYTES && info.last_write_stream == 2, "with its block (last written on 2)");
    is_status(dv_future_wait(&busy), DV_OK, "the task finished");
    is_status(dv_ref_release(r), DV_OK, "release");

    /* A failed allocation. */
    is_status(dv_alloc(a, 4 << 20, 1, "too big", &big), DV_OK,
              "an allocation over the 1 MiB budget still gives a handle");
    is_status(dv_copy_htod(a, big, 0, p.got, 16, 0), DV_EOUT_OF_BUDGET,
              "the first use answers the budget's refusal");
    ok(dv_last_error()->requested == (4u << 20) && strstr(dv_last_error()->message, "copy") &&
           strstr(dv_last_error()->message, "budget"),
       "... naming the call and the budget: %s", dv_last_error()->message);
    is_status(dv_memset(a, big, 0, 0, 16, 2), DV_EOUT_OF_BUDGET, "every use, on any stream");
    is_status(dv_ref_retain(big), DV_OK, "it can be retained");
    is_status(dv_ref_release(big), DV_OK, "and released");
    is_status(dv_ref_release(big), DV_OK, "the last release");
    is_status(dv_ref_access(big, &info), DV_ESTALE, "then it is gone");
    is_status(dv_ref_try_access(big, &info), DV_ESTALE, "... and a try says so too");
    is_status(dv_ref_try_access(DV_REF_NULL, &info), DV_EINVAL, "a try on DV_REF_NULL");
    dv_future f;
    dv_future_init(&f, 0);
    is_status(dv_alloc_async(a, 4 << 20, 0, "async too big", &big, &f), DV_OK, "alloc_async");
    is_status(dv_future_wait(&f), DV_EOUT_OF_BUDGET, "its future answers the refusal");
    dv_ref_release(big);
    dv_actor_stats st;
    dv_actor_stats_get(a, &st);
    ok(st.refs_alive == 0 && st.bytes_outstanding == 0, "balanced: %llu handles, %llu bytes",
       (unsigned long long)st.refs_alive, (unsigned long long)st.bytes_outstanding);
    dv_actor_destroy(a);
}

/* ---- the last release after an async post ------------------------------ */

static void test_release_after_post(void)
{
    dv_actor *a = make(0, false);
    dv_kernel *spin;
    dv_kernel_get(a, NULL, 0, "spin", &spin);
    static uint32_t host[N];
    int bad = 0;
    for (int i = 0; i < 20; i++) {
        dv_ref x;
        dv_future fs, fc;
        dv_arg sa[] = {dv_arg_u64(5000000)};
        dv_alloc(a, BYTES, 0, "x", &x);
        dv_memset(a, x, 0, (uint8_t)(i + 1), BYTES, 0);
        dv_future_init(&fs, 0);
        dv_launch_async(a, spin, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, 1, sa, 1, &fs);
        dv_future_init(&fc, 0);
        dv_copy_dtoh_async(a, host, x, 0, BYTES, 1, &fc); /* queued behind the spin */
        dv_ref_release(x);                                /* the last reference, at once */
        bad += dv_future_wait(&fc) != DV_OK;
        bad += !all_u32(host, N, 0x01010101u * (uint32_t)(i + 1));
        dv_future_wait(&fs);
    }
    is_int(bad, 0, "20 times: a copy posted, then the last release: the copy runs, data right");
    dv_actor_stats st;
    dv_actor_stats_get(a, &st);
    ok(st.refs_alive == 0 && st.bytes_outstanding == 0, "and every block was freed after");
    dv_actor_destroy(a);
}

/* ---- kernels belong to their actor ------------------------------------- */

static void test_kernel_owner(void)
{
    dv_actor *a = make(0, false), *b = make(0, false);
    dv_kernel *ka, *kb;
    dv_ref x;
    dv_kernel_get(a, NULL, 0, "fill_u32", &ka);
    dv_kernel_get(b, NULL, 0, "fill_u32", &kb);
    dv_alloc(a, BYTES, 0, "x", &x);
    dv_arg args[] = {dv_arg_ref(x, DV_WRITE, 0), dv_arg_u32(1), dv_arg_u64(N)};
    is_status(dv_launch(a, ka, (dv_dim3){4, 1, 1}, (dv_dim3){256, 1, 1}, 0, 0, args, 3), DV_OK,
              "a launch of a's kernel on a");
    is_status(dv_launch(a, kb, (dv_dim3){4, 1, 1}, (dv_dim3){256, 1, 1}, 0, 0, args, 3), DV_EINVAL,
              "b's kernel on a: DV_EINVAL");
    ok(strstr(dv_last_error()->message, "not this actor's") != NULL, "... %s",
       dv_last_error()->message);
    dv_ref_release(x);
    is_status(dv_actor_reset(a), DV_OK, "reset a");
    dv_alloc(a, BYTES, 0, "x", &x);
    args[0] = dv_arg_ref(x, DV_WRITE, 0);
    is_status(dv_launch(a, kb, (dv_dim3){4, 1, 1}, (dv_dim3){256, 1, 1}, 0, 0, args, 3), DV_EINVAL,
              "after a's reset, b's kernel on a: still DV_EINVAL");
    is_status(dv_launch(a, ka, (dv_dim3){4, 1, 1}, (dv_dim3){256, 1, 1}, 0, 0, args, 3), DV_OK,
              "a's own kernel works after the reset");
    dv_ref_release(x);
    dv_actor_destroy(b);
    b = make(0, false);
    dv_alloc(b, BYTES, 0, "y", &x);
    args[0] = dv_arg_ref(x, DV_WRITE, 0);
    is_status(dv_launch(b, kb, (dv_dim3){4, 1, 1}, (dv_dim3){256, 1, 1}, 0, 0, args, 3), DV_EINVAL,
              "a kernel of a destroyed actor, on a new one: DV_EINVAL");
    dv_ref_release(x);
    dv_actor_destroy(b);
    dv_actor_destroy(a);
}

/* ---- a thread outlives many actors ------------------------------------- */

static long rss_kib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL)
        return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void test_many_actors(void)
{
    enum { ACTORS = 2000 };
    long before = 0;
    int failed = 0;
    unsigned most = 0;
    for (int i = 0; i < ACTORS; i++) {
        dv_actor_config cfg;
        dv_actor *a = NULL;
        dv_actor_config_init(&cfg);
        cfg.backend = DV_BACKEND_SIM;
        cfg.streams = 1;
        cfg.pool = false;
        cfg.sim_memory_bytes = 1 << 20;
        failed += dv_actor_create(&cfg, &a) != DV_OK;
        failed += dv_flush(a) != DV_OK; /* the thread's client of a is made here */
        dv_actor_destroy(a);
        if (dv__thread_clients() > most)
            most = dv__thread_clients();
        if (i == 49)
            before = rss_kib();
    }
    long after = rss_kib();
    is_int(failed, 0, "%d actors made, posted to and destroyed by one thread", ACTORS);
    ok(most <= 2, "the thread never held more than 2 clients (at most %u)", most);
#if defined(__SANITIZE_ADDRESS__)
    (void)before;
    (void)after;
    skip("AddressSanitizer keeps freed memory in quarantine: its growth says nothing here");
#else
    ok(before > 0 && after - before < 16 * 1024,
       "its memory grew by %ld KiB over the last %d actors (a ring is 64 KiB)", after - before,
       ACTORS - 50);
#endif
}

/* ---- knowledge per actor, by its full id ------------------------------- */

static void test_knowledge(void)
{
    /* Actors are numbered in order of creation: make a, seven more,
     * then b, whose number differs from a's by 8. */
    dv_actor *a = make(0, true);
    for (int i = 0; i < 7; i++)
        dv_actor_destroy(make(0, false));
    dv_actor *b = make(0, true);
    static uint32_t buf_a[N], buf_b[N];
    dv_ref x, y;
    dv_future f;
    dv_alloc(a, BYTES, 0, "x", &x);
    dv_alloc(b, BYTES, 0, "y", &y);
    dv_future_init(&f, 0);
    dv_copy_dtoh_async(a, buf_a, x, 0, BYTES, 1, &f);
    dv_future_wait(&f); /* this thread now knows a's copy is done */
    dv_future_init(&f, 0);
    dv_copy_dtoh_async(b, buf_b, y, 0, BYTES, 1, &f);
    dv_future_wait(&f); /* and b's */
    is_status(dv_check_host_access(a, buf_a, BYTES, DV_READ), DV_OK,
              "after waiting on copies of two actors 8 apart, reading a's buffer is fine");
    is_status(dv_check_host_access(b, buf_b, BYTES, DV_READ), DV_OK, "and b's");
    dv_actor_stats st;
    dv_actor_stats_get(a, &st);
    is_u64(st.hazards, 0, "no false hazard on a");
    dv_ref_release(x);
    dv_ref_release(y);
    dv_actor_destroy(b);
    dv_actor_destroy(a);
}

int main(void)
{
    plan(35);
    test_handles();
    test_release_after_post();
    test_kernel_owner();
    test_many_actors();
    test_knowledge();
    return tap_done();
}
