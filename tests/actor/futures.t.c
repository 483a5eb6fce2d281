/*
 * Futures (devactor.h, Milestones): every operation's future reaches
 * ordered, then complete; a wait with a timeout; waiting twice and from
 * other threads; a call refused before posting completes its future with
 * the error; dv_flush; misuse of the wait functions; after shutdown.
 *
 * A gate holds a stream (support/gate.h), so that an operation queued
 * behind it is ordered and not complete until the test opens the gate.
 */
#include <pthread.h>
#include <string.h>

#include "devactor.h"
#include "support/data.h"
#include "support/gate.h"
#include "tap.h"

#ifndef FUTURES_ON_CUDA
#define FUTURES_ON_CUDA 0
#endif
#define N 1024 /* u32 */

static dv_actor *a;
static dv_kernel *spin, *fill;

static void spin_async(dv_stream s, uint64_t ms, dv_arg *args, dv_future *f)
{
    args[0] = dv_arg_u64(ms * 1000000);
    dv_future_init(f, 0);
    dv_launch_async(a, spin, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, s, args, 1, f);
}

static void test_milestones(void)
{
    dv_ref x, y;
    static uint32_t host[N];
    dv_arg sa[1], fa[3];
    dv_future fs, fm, fc, fl;
    gate g;

    is_status(dv_alloc(a, sizeof(host), 0, "x", &x), DV_OK, "alloc");
    gate_close(&g, a, 0);
    dv_future_init(&fm, 0);
    is_status(dv_memset_async(a, x, 0, 0x5A, sizeof(host), 0, &fm), DV_OK,
              "a memset queued behind a closed gate");
    is_status(dv_future_wait_ordered(&fm), DV_OK, "it is ordered");
    ok(!dv_future_done(&fm), "... and not complete: the stream is held");
    ok(dv_future_reached(&fm, DV_ORDERED) && !dv_future_reached(&fm, DV_COMPLETE),
       "dv_future_reached says the same");
    is_status(dv_future_wait_for(&fm, DV_COMPLETE, 1000000), DV_ETIMEDOUT,
              "a 1 ms wait for complete times out");
    ok(strstr(dv_last_error()->message, "complete") != NULL, "... saying what it waited for");
    is_status(gate_open(&g), DV_OK, "open the gate");
    is_status(dv_future_wait(&fm), DV_OK, "then it completes");
    is_status(dv_future_wait(&fm), DV_OK, "waiting twice gives the same status");
    is_status(dv_future_wait_ordered(&fm), DV_OK, "... for either milestone");
    is_status(dv_future_wait_for(&fm, DV_COMPLETE, 0), DV_OK, "a zero timeout on a done future");

    /* The same for a launch and a copy on another stream that reads its
     * block.  Device to device: the real driver finishes a copy into
     * pageable host memory before it returns, which would hold the actor
     * behind the gate. */
    fa[0] = dv_arg_ref(x, DV_WRITE, 0);
    fa[1] = dv_arg_u32(0x11);
    fa[2] = dv_arg_u64(N);
    is_status(dv_alloc(a, sizeof(host), 0, "y", &y), DV_OK, "alloc y");
    gate_close(&g, a, 1);
    dv_future_init(&fl, 0);
    dv_launch_async(a, fill, (dv_dim3){4, 1, 1}, (dv_dim3){256, 1, 1}, 0, 1, fa, 3, &fl);
    dv_future_init(&fc, 0);
    dv_copy_dtod_async(a, y, 0, x, 0, sizeof(host), 2, &fc);
    is_status(dv_future_wait_ordered(&fl), DV_OK, "a launch behind a gate: ordered");
    ok(!dv_future_done(&fl), "... not complete");
    is_status(dv_future_wait_ordered(&fc), DV_OK, "a copy after it on another stream: ordered");
    ok(!dv_future_done(&fc), "... not complete (it waits for the launch)");
    gate_open(&g);
    is_status(dv_future_wait(&fc), DV_OK, "the copy completes once the gate opens");
    ok(dv_future_done(&fl), "after the launch it waited for");
    is_status(dv_copy_dtoh(a, host, y, 0, sizeof(host), 2), DV_OK, "read the copy back");
    ok(all_u32(host, N, 0x11), "it holds what the launch wrote");
    is_status(dv_ref_release(y), DV_OK, "release y");

    /* Blocking calls return at complete. */
    spin_async(0, 30, sa, &fs);
    is_status(dv_memset(a, x, 0, 0x22, sizeof(host), 0), DV_OK, "a blocking memset behind a spin");
    ok(dv_future_done(&fs), "returns after the spin (and itself) finished");
    is_status(dv_ref_release(x), DV_OK, "release");
}

/* ---- waiting from other threads --------------------------------------- */

typedef struct waiter {
    dv_future *f;
    int rc;
    bool done_seen;
} waiter;

static void *wait_thread(void *arg)
{
    waiter *w = arg;
    w->rc = dv_future_wait(w->f);
    w->done_seen = dv_future_done(w->f);
    return NULL;
}

static void test_threads(void)
{
    dv_arg sa[1];
    dv_future fs, f;
    dv_ref y;
    enum { WAITERS = 4 };
    pthread_t t[WAITERS];
    waiter w[WAITERS];

    dv_alloc(a, 4096, 0, "y", &y);
    spin_async(0, 30, sa, &fs);
    dv_future_init(&f, 0);
    dv_memset_async(a, y, 0, 1, 4096, 0, &f);
    for (int i = 0; i < WAITERS; i++) {
        w[i] = (waiter){.f = &f};
        pthread_create(&t[i], NULL, wait_thread, &w[i]);
    }
    int rc = dv_future_wait(&f);
    int bad = 0;
    for (int i = 0; i < WAITERS; i++) {
        pthread_join(t[i], NULL);
        bad += w[i].rc != rc || !w[i].done_seen;
    }
    ok(rc == DV_OK && bad == 0, "%d threads and the poster wait on one future: all see it done",
       WAITERS);
    dv_future_wait(&fs);

    /* A failure reaches every waiter with its detail. */
    dv_ref_release(y);
    dv_future_init(&f, 0);
    dv_memset_async(a, y, 0, 1, 4096, 0, &f); /* y was released: stale */
    for (int i = 0; i < 2; i++) {
        w[i] = (waiter){.f = &f};
        pthread_create(&t[i], NULL, wait_thread, &w[i]);
    }
    is_status(dv_future_wait(&f), DV_ESTALE, "a stale handle's memset answers DV_ESTALE");
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    ok(w[0].rc == DV_ESTALE && w[1].rc == DV_ESTALE, "... to every waiter");
    is_status(dv_future_wait_ordered(&f), DV_ESTALE,
              "waiting for ordered on a failed operation answers its error");
}

/* ---- one contract for refused calls ----------------------------------- */

static void test_refused(void)
{
    dv_future f;
    dv_ref z;
    uint32_t buf[4];
    dv_alloc(a, 4096, 0, "z", &z);

    dv_future_init(&f, 0);
    is_status(dv_copy_htod_async(a, z, 0, NULL, 16, 0, &f), DV_EINVAL,
              "an async copy from NULL is refused at once");
    ok(dv_future_done(&f) && dv_future_wait(&f) == DV_EINVAL,
       "... and its future is complete with the error (a wait does not hang)");
    dv_future_init(&f, 0);
    is_status(dv_memset_async(a, z, 0, 0, 16, 99, &f), DV_EINVAL, "an unknown stream: refused");
    is_status(dv_future_wait(&f), DV_EINVAL, "... the future says so");
    dv_future_init(&f, 0);
    is_status(dv_launch_async(a, NULL, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, 0, NULL, 0, &f),
              DV_EINVAL, "a launch of NULL: refused");
    is_status(dv_future_wait(&f), DV_EINVAL, "... the future says so");
    dv_future_init(&f, 0);
    is_status(dv_alloc_async(a, 0, 0, "zero", NULL, &f), DV_EINVAL, "an allocation of 0 bytes");
    is_status(dv_future_wait(&f), DV_EINVAL, "... the future says so");
    dv_future_init(&f, 0);
    is_status(dv_copy_dtod_async(a, z, 0, z, 0, 16, 7, &f), DV_EINVAL, "a dtod on stream 7");
    is_status(dv_future_wait(&f), DV_EINVAL, "... the future says so");

    is_status(dv_copy_dtod_async(a, z, 0, z, 64, 16, 0, NULL), DV_EINVAL,
              "dv_copy_dtod_async with a NULL future: DV_EINVAL, no copy");
    is_status(dv_memset_async(a, z, 0, 0, 16, 0, NULL), DV_EINVAL, "memset_async(NULL future)");
    is_status(dv_sync_async(a, 0, NULL), DV_EINVAL, "sync_async(NULL future)");
    is_status(dv_copy_dtoh_async(a, buf, z, 0, 16, 0, NULL), DV_EINVAL,
              "copy_dtoh_async(NULL future)");

    dv_future junk;
    memset(&junk, 0x5a, sizeof(junk));
    is_status(dv_memset_async(a, z, 0, 0, 16, 0, &junk), DV_EINVAL,
              "a future never set up: refused, untouched");
    is_status(dv_future_wait(&junk), DV_EINVAL, "waiting on it: DV_EINVAL, no hang");
    dv_future_init(&f, 0);
    is_status(dv_future_wait(&f), DV_EINVAL, "waiting on a future never posted: DV_EINVAL");
    is_status(dv_future_wait(NULL), DV_EINVAL, "dv_future_wait(NULL)");
    ok(!dv_future_done(NULL), "dv_future_done(NULL) is false");
    is_status(dv_future_wait_ordered(NULL), DV_EINVAL, "dv_future_wait_ordered(NULL)");
    is_status(dv_future_wait_for(NULL, DV_COMPLETE, 1000), DV_EINVAL, "dv_future_wait_for(NULL)");
    is_status(dv_future_wait_for(&f, (dv_milestone)7, 1000), DV_EINVAL,
              "dv_future_wait_for with an unknown milestone");
    is_status(dv_future_wait_for(&f, DV_ORDERED, 1000), DV_EINVAL,
              "dv_future_wait_for on a future never posted: DV_EINVAL, no wait");
    ok(!dv_future_reached(NULL, DV_ORDERED) && !dv_future_reached(&f, (dv_milestone)7),
       "dv_future_reached: false for NULL and for an unknown milestone");

    /* A future in flight cannot be posted again. */
    gate g;
    gate_close(&g, a, 0);
    dv_future_init(&f, 0);
    dv_memset_async(a, z, 0, 0, 16, 0, &f);
    is_status(dv_memset_async(a, z, 0, 0, 16, 0, &f), DV_EINVAL,
              "posting a future still in flight: DV_EINVAL");
    gate_open(&g);
    is_status(dv_future_wait(&f), DV_OK, "the first operation completes as it would");
    is_status(dv_memset_async(a, z, 0, 0, 16, 0, &f), DV_OK, "once complete it can be reused");
    is_status(dv_future_wait(&f), DV_OK, "... and completes again");
    dv_ref_release(z);
}

/* ---- dv_flush --------------------------------------------------------- */

static void test_flush(void)
{
    dv_future f[8];
    dv_ref r;
    gate g;
    dv_alloc(a, 4096, 0, "r", &r);
    gate_close(&g, a, 0);
    for (int i = 0; i < 8; i++) {
        dv_future_init(&f[i], 0);
        dv_memset_async(a, r, 0, (uint8_t)i, 4096, 0, &f[i]);
    }
    is_status(dv_flush(a), DV_OK, "dv_flush");
    int ordered = 0, done = 0;
    for (int i = 0; i < 8; i++) {
        ordered += dv_future_reached(&f[i], DV_ORDERED);
        done += dv_future_done(&f[i]);
    }
    ok(ordered == 8 && done == 0, "after dv_flush all 8 posts are ordered, none complete (%d, %d)",
       ordered, done);
    gate_open(&g);
    for (int i = 0; i < 8; i++)
        dv_future_wait(&f[i]);
    dv_ref_release(r);
    is_status(dv_flush(NULL), DV_EINVAL, "dv_flush(NULL)");
}

int main(void)
{
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.backend = FUTURES_ON_CUDA ? DV_BACKEND_CUDA : DV_BACKEND_SIM;
    cfg.streams = 3;
    cfg.sim_memory_bytes = 64 << 20;
    int rc = dv_actor_create(&cfg, &a);
    if (FUTURES_ON_CUDA && rc == DV_ENODEVICE)
        skip_all("%s", dv_last_error()->message);
    plan(72);
    is_status(rc, DV_OK, "an actor (%s)", a ? dv_actor_backend_name(a) : "none");
    is_status(dv_kernel_get(a, NULL, 0, "spin", &spin), DV_OK, "spin");
    is_status(dv_kernel_get(a, NULL, 0, "fill_u32", &fill), DV_OK, "fill_u32");
    test_milestones();
    test_threads();
    test_refused();
    test_flush();
    dv_actor_stats st;
    dv_actor_stats_get(a, &st);
    ok(st.refs_alive == 0 && st.bytes_outstanding == 0, "clean: %llu handles, %llu bytes",
       (unsigned long long)st.refs_alive, (unsigned long long)st.bytes_outstanding);

    /* After shutdown: answered at once, futures complete with it. */
    dv_actor_shutdown(a);
    dv_future f;
    dv_ref r;
    is_status(dv_flush(a), DV_ESHUTDOWN, "dv_flush after shutdown: DV_ESHUTDOWN");
    dv_future_init(&f, 0);
    is_status(dv_alloc_async(a, 64, 0, "late", &r, &f), DV_ESHUTDOWN,
              "dv_alloc_async after shutdown: DV_ESHUTDOWN");
    ok(r.bits == 0 && dv_future_wait_for(&f, DV_ORDERED, 1000000) == DV_ESHUTDOWN,
       "... no handle, and its future says so at once");
    dv_actor_destroy(a);

    /* dv_future_fail: a wrapper's refusal completes a future no operation
     * was posted for; a bad future is refused and left alone. */
    dv_future g;
    dv_future_init(&g, 0);
    dv_error_set(DV_EOUT_OF_BOUNDS, "wrapper", 64, 4, "operand C too small");
    ok(dv_future_fail(&g, DV_EOUT_OF_BOUNDS) == DV_EOUT_OF_BOUNDS && dv_future_done(&g) &&
           dv_future_reached(&g, DV_ORDERED),
       "dv_future_fail completes the future (both milestones)");
    dv_error_clear();
    ok(dv_future_wait(&g) == DV_EOUT_OF_BOUNDS && dv_last_error()->requested == 64 &&
           strcmp(dv_last_error()->message, "operand C too small") == 0,
       "... its wait answers the status with the detail the caller had recorded");
    dv_future_init(&g, 0);
    ok(dv_future_fail(&g, DV_OK) == DV_OK && dv_future_wait(&g) == DV_OK,
       "... with DV_OK: a call with nothing to do");
    dv_future bad;
    memset(&bad, 0, sizeof(bad));
    ok(dv_future_fail(NULL, DV_EINVAL) == DV_EINVAL && dv_future_fail(&bad, DV_ESTALE) == DV_EINVAL,
       "dv_future_fail of a NULL future, or one not set up: DV_EINVAL");
    dv_future_init(&g, 0);
    ok(dv_future_fail(&g, 12345) == DV_EINVAL && !dv_future_done(&g) &&
           strstr(dv_last_error()->message, "12345") != NULL,
       "dv_future_fail with a status that is no dv_status: DV_EINVAL, the future untouched (%s)",
       dv_last_error()->message);
    return tap_done();
}
