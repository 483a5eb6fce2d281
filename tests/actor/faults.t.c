/*
 * Context loss and rebuild, on the sim:
 *   - an explicit reset of a healthy device: new context generation, every
 *     older handle stale, accounting from zero, new work fine;
 *   - a recoverable poison mid-run: what was in flight fails with
 *     DV_ECONTEXT_LOST naming the operations, the actor rebuilds, old
 *     handles are stale, new work succeeds;
 *   - a process-fatal fault (a real illegal-address kernel): every actor on
 *     the driver becomes LOST, calls answer DV_EDEVICE_LOST at once with the
 *     original fault in the detail, handles are stale, health says why,
 *     and destroy stays clean.
 */
#include "devactor_testing.h"
#include "tap.h"

#include <pthread.h>
#include <unistd.h>

static dv_driver *open_sim(int devices, bool recoverable_kernels)
{
    dv_driver_config cfg;
    dv_driver *drv = NULL;
    dv__driver_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    cfg.sim.devices = devices;
    cfg.sim.memory_bytes = 128 << 20;
    cfg.sim.seed = 5;
    cfg.sim.kernel_faults_recoverable = recoverable_kernels;
    return dv__driver_open(&cfg, &drv) == DV_OK ? drv : NULL;
}

static dv_actor *make(dv_driver *drv, int device)
{
    dv_actor_config cfg;
    dv_actor *a = NULL;
    dv_actor_config_init(&cfg);
    cfg.driver = drv;
    cfg.device = device;
    cfg.streams = 2;
    return dv_actor_create(&cfg, &a) == DV_OK ? a : NULL;
}

static void test_explicit_reset(void)
{
    dv_driver *drv = open_sim(1, false);
    dv_actor *a = make(drv, 0);
    dv_actor_health h;
    dv_actor_stats st;
    dv_ref x, y;
    uint32_t v = 0x12345678, back = 0;

    ok(a != NULL, "reset: an actor");
    dv_alloc(a, 4096, 0, "before", &x);
    dv_copy_htod(a, x, 0, &v, 4, 0);
    is_status(dv_actor_reset(a), DV_OK, "dv_actor_reset on a healthy device");
    dv_actor_health_get(a, &h);
    ok(h.context_generation == 2 && h.rebuilds == 1 && h.state == DV_ACTOR_RUNNING,
       "health: context generation %llu, %u rebuild, running",
       (unsigned long long)h.context_generation, h.rebuilds);
    dv_ref_info info;
    is_status(dv_ref_access(x, &info), DV_ESTALE, "a handle from before the reset is stale");
    is_status(dv_copy_dtoh(a, &back, x, 0, 4, 0), DV_ESTALE, "and refused by the actor");
    is_status(dv_ref_release(x), DV_ESTALE, "and cannot be released");
    dv_actor_stats_get(a, &st);
    ok(st.refs_alive == 0 && st.bytes_outstanding == 0, "accounting restarted from zero");
    is_status(dv_alloc(a, 4096, 1, "after", &y), DV_OK, "new work: alloc");
    dv_copy_htod(a, y, 0, &v, 4, 1);
    dv_copy_dtoh(a, &back, y, 0, 4, 0);
    is_int(back, v, "new work: a round trip");
    dv_ref_access(y, &info);
    is_int((int)info.context_generation, 2, "the new handle carries context generation 2");
    dv_ref_release(y);
    dv_actor_destroy(a);
    dv__driver_close(drv);
}

static void test_recoverable(void)
{
    dv_driver *drv = open_sim(1, true);
    dv_actor *a = make(drv, 0);
    dv_actor_health h;
    dv_ref x;
    uint64_t args[4] = {0x10, 0, 0, 0}; /* illegal_address(0x10) */
    static uint32_t big[1 << 16];
    dv_future f;

    ok(a != NULL, "recoverable: an actor with recoverable kernel faults");
    dv_alloc(a, sizeof(big), 0, "victim", &x);
    /* A slow copy in flight when the fault lands on the same stream. */
    dv_future_init(&f, 0);
    uint64_t spin[4] = {20 * 1000 * 1000, 0, 0, 0};
    dv__actor_launch_builtin(a, "spin", 0, spin, NULL);
    is_status(dv_copy_dtoh_async(a, big, x, 0, sizeof(big), 0, &f), DV_OK, "a copy in flight");
    int rc = dv__actor_launch_builtin(a, "illegal_address", 0, args, NULL);
    ok(rc == DV_OK || rc == DV_ECONTEXT_LOST, "the faulting kernel (%s)", dv_err_name(rc));
    rc = dv_future_wait(&f);
    ok(rc == DV_ECONTEXT_LOST || rc == DV_OK, "the copy in flight: %s", dv_err_name(rc));
    dv_actor_health_get(a, &h);
    ok(h.first_fault.status == DV_ECONTEXT_LOST && strstr(h.first_fault.message, "illegal_address"),
       "the first fault names the kernel: %s", h.first_fault.message);
    ok(h.rebuilds == 1 && h.state == DV_ACTOR_RUNNING && h.context_generation == 2,
       "the actor rebuilt: %u rebuild, generation %llu", h.rebuilds,
       (unsigned long long)h.context_generation);
    dv_ref_info info;
    is_status(dv_ref_access(x, &info), DV_ESTALE, "the old handle is stale");
    dv_ref y;
    uint32_t v = 77, back = 0;
    is_status(dv_alloc(a, 64, 1, "after", &y), DV_OK, "new work succeeds");
    dv_copy_htod(a, y, 0, &v, 4, 1);
    dv_copy_dtoh(a, &back, y, 0, 4, 1);
    is_int(back, 77, "... with the right data");
    dv_ref_release(y);
    dv_actor_destroy(a);
    dv__driver_close(drv);
}

static void test_fatal(void)
{
    dv_driver *drv = open_sim(2, false);
    dv_actor *a = make(drv, 0), *b = make(drv, 1);
    dv_actor_health h;
    dv_ref x, y;
    uint64_t args[4] = {0x10, 0, 0, 0};

    ok(a != NULL && b != NULL, "fatal: two actors on a two-device sim");
    /* A recoverable fault first, mended by a rebuild: the fault that loses
     * the actor later is the one its health and its answers name. */
    dv_ref w;
    uint32_t one = 1;
    dv_alloc(a, 64, 0, "w", &w);
    dv_ref_access(w, NULL);
    dv__sim_poison(drv, 0, DV_SIM_POISON_RECOVERABLE, 0);
    (void)dv_copy_htod(a, w, 0, &one, 4, 0);
    dv_actor_health_get(a, &h);
    ok(h.rebuilds == 1 && h.state == DV_ACTOR_RUNNING && h.first_fault.status != 0,
       "a recoverable fault first, mended (rebuilds %u): %s", h.rebuilds, h.first_fault.message);
    dv_ref_release(w);
    dv_alloc(a, 4096, 0, "a-block", &x);
    dv_alloc(b, 4096, 0, "b-block", &y);
    /* Both assigned before the fault: nothing but a's kernel is in flight
     * (b's pending allocation would otherwise meet the lost driver first
     * and be the fault every actor reports). */
    dv_ref_access(x, NULL);
    dv_ref_access(y, NULL);
    dv_future f;
    dv_future_init(&f, 0);
    dv__actor_launch_builtin(a, "illegal_address", 0, args, &f);
    int rc = dv_future_wait(&f);
    ok(rc == DV_ECONTEXT_LOST || rc == DV_EDEVICE_LOST, "the faulting launch reports %s",
       dv_err_name(rc));
    dv_actor_health_get(a, &h);
    is_int(h.state, DV_ACTOR_LOST, "device 0's actor is LOST (the rebuild was refused)");
    ok(strstr(h.first_fault.message, "illegal_address") != NULL &&
           h.first_fault.driver_code == DV_CU_ILLEGAL_ADDRESS,
       "health names the fault: %s", h.first_fault.message);
    dv_actor_health_get(b, &h);
    is_int(h.state, DV_ACTOR_LOST, "device 1's actor is LOST too (process-fatal)");
    dv_ref z;
    is_status(dv_alloc(b, 64, 0, "after", &z), DV_EDEVICE_LOST, "device 1 answers DV_EDEVICE_LOST");
    ok(dv_last_error()->driver_code == DV_CU_ILLEGAL_ADDRESS,
       "with the original fault in the detail: %s", dv_last_error()->message);
    is_status(dv_alloc(a, 64, 0, "after", &z), DV_EDEVICE_LOST, "device 0 as well");
    dv_ref_info info;
    is_status(dv_ref_access(x, &info), DV_ESTALE, "device 0's handle is stale");
    is_status(dv_ref_access(y, &info), DV_ESTALE, "device 1's handle is stale");
    is_status(dv_actor_shutdown(a), DV_OK, "device 0's actor shut down");
    dv_actor_health_get(a, &h);
    is_int(h.state, DV_ACTOR_LOST, "its health still LOST after the shutdown (the device is gone)");
    dv_actor_destroy(a);
    dv_actor_destroy(b);
    ok(true, "both actors destroyed without hanging");
    dv__driver_close(drv);
}

static void test_multidevice(void)
{
    dv_driver *drv = open_sim(2, false);
    dv_actor *a = make(drv, 0), *b = make(drv, 1);
    static uint32_t host[8192], back[8192];
    dv_ref x, y;

    ok(a != NULL && b != NULL, "two devices, one actor each");
    for (int i = 0; i < 8192; i++)
        host[i] = (uint32_t)i * 40503u;
    dv_alloc(a, sizeof(host), 0, "src", &x);
    dv_alloc(b, sizeof(host), 1, "dst", &y);
    dv_copy_htod(a, x, 0, host, sizeof(host), 1);
    is_status(dv_copy_dtod(b, y, 0, x, 0, sizeof(host), 0), DV_OK, "peer copy device 0 -> 1");
    dv_copy_dtoh(b, back, y, 0, sizeof(back), 1);
    ok(memcmp(host, back, sizeof(host)) == 0, "the data arrived on device 1");
    is_status(dv_memset(a, y, 0, 0, 4, 0), DV_EINVAL,
              "device 1's handle given to device 0's actor");
    dv_ref_release(x);
    dv_ref_release(y);
    dv_actor_destroy(a);
    dv_actor_destroy(b);
    dv__driver_close(drv);
}

/* Found by dv-stress: each of these once went wrong. */
static void test_regressions(void)
{
    dv_driver *drv = open_sim(1, false);
    dv_actor_config cfg;
    dv_actor *a = NULL;
    dv_actor_stats st;
    dv_ref r[4], x;
    uint32_t v = 1, back;

    /* Frees on the driver's stream-ordered allocator (no pool) stop
     * counting once the device reached them. */
    dv_actor_config_init(&cfg);
    cfg.driver = drv;
    cfg.pool = false;
    dv_actor_create(&cfg, &a);
    for (dv_stream s = 0; s < 4; s++)
        dv_alloc(a, 1 << 20, s, "retired", &r[s]);
    for (dv_stream s = 0; s < 4; s++)
        dv_ref_release(r[s]);
    for (dv_stream s = 0; s < 4; s++)
        dv_sync(a, s);
    dv_actor_stats_get(a, &st);
    ok(st.refs_alive == 0 && st.bytes_outstanding == 0,
       "no pool: after release and sync, nothing outstanding (%llu bytes)",
       (unsigned long long)st.bytes_outstanding);

    /* A call that meets a sticky error reports the fault, not the rebuild's
     * own calls. */
    dv_alloc(a, 64, 0, "x", &x);
    dv__sim_poison(drv, 0, DV_SIM_POISON_RECOVERABLE, 0);
    is_status(dv_copy_htod(a, x, 0, &v, 4, 0), DV_ECONTEXT_LOST, "a copy meets the poison");
    ok(strstr(dv_last_error()->message, "sticky error") != NULL, "its detail is the fault's: %s",
       dv_last_error()->message);

    /* A sticky error met while fencing across streams rebuilds too. */
    dv_actor_health h0, h1;
    dv_actor_health_get(a, &h0);
    dv_alloc(a, 64, 0, "y", &x);
    dv_memset(a, x, 0, 1, 4, 0);
    dv__sim_poison(drv, 0, DV_SIM_POISON_RECOVERABLE, 0);
    is_status(dv_copy_dtoh(a, &back, x, 0, 4, 1), DV_ECONTEXT_LOST,
              "a read on another stream meets the poison while fencing");
    dv_actor_health_get(a, &h1);
    ok(h1.rebuilds == h0.rebuilds + 1, "... and the actor rebuilt (%u -> %u)", h0.rebuilds,
       h1.rebuilds);
    dv_ref_info info;
    is_status(dv_ref_access(x, &info), DV_ESTALE, "... so the handle is stale at once");
    dv_actor_destroy(a);
    dv__driver_close(drv);
}

/* Synchronous debug mode: each operation is waited for, so a fault names
 * exactly the message that caused it, even among others in flight. */
static void test_synchronous(void)
{
    dv_driver *drv = open_sim(1, true);
    dv_actor_config cfg;
    dv_actor *a = NULL;
    dv_actor_health h;
    dv_ref x;
    uint64_t bad[4] = {0x10, 0, 0, 0};

    dv_actor_config_init(&cfg);
    cfg.driver = drv;
    cfg.streams = 2;
    cfg.synchronous = true;
    ok(dv_actor_create(&cfg, &a) == DV_OK, "synchronous: an actor in synchronous debug mode");
    dv_alloc(a, 4096, 1, "bystander", &x);
    dv_memset(a, x, 0, 7, 4096, 1);
    int rc = dv__actor_launch_builtin(a, "illegal_address", 0, bad, NULL);
    is_status(rc, DV_ECONTEXT_LOST, "the faulting launch itself fails");
    dv_actor_health_get(a, &h);
    ok(strstr(h.first_fault.message, "in flight: launch (illegal_address") != NULL,
       "the report names exactly that launch: %s", h.first_fault.message);
    dv_actor_destroy(a);
    dv__driver_close(drv);
}

/* A tracked launch faults; nothing waits for it, the next sync finds the
 * error: the report still names the kernel. */
static void test_tracked_launch(void)
{
    dv_driver *drv = open_sim(1, true);
    dv_actor *a = make(drv, 0);
    dv_kernel *bad;
    dv_actor_health h;

    ok(a != NULL && dv_kernel_get(a, NULL, 0, "illegal_address", &bad) == DV_OK,
       "tracked launch: an actor and the illegal_address kernel");
    /* Two launches finished before it: not in flight when it faults. */
    dv_kernel *fill = NULL;
    dv_ref x;
    dv_kernel_get(a, NULL, 0, "fill_u32", &fill);
    dv_alloc(a, 4096, 1, "done", &x);
    dv_arg fa[] = {dv_arg_ref(x, DV_WRITE, 0), dv_arg_u32(1), dv_arg_u64(1024)};
    for (int i = 0; i < 2; i++)
        dv_launch(a, fill, (dv_dim3){1, 1, 1}, (dv_dim3){64, 1, 1}, 0, 1, fa, 3);
    dv_sync(a, 1);
    dv_arg args[] = {dv_arg_u64(0x10)};
    int rc = dv_launch(a, bad, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, 1, args, 1);
    ok(rc == DV_OK || rc == DV_ECONTEXT_LOST, "the launch (%s)", dv_err_name(rc));
    rc = dv_sync(a, 1);
    ok(rc == DV_ECONTEXT_LOST || rc == DV_OK, "the next sync: %s", dv_err_name(rc));
    dv_actor_health_get(a, &h);
    ok(h.rebuilds == 1 && strstr(h.first_fault.message, "launch (illegal_address") != NULL,
       "the fault names the tracked launch: %s", h.first_fault.message);
    const char *first = strstr(h.first_fault.message, "illegal_address");
    ok(first != NULL && strstr(first + 1, "illegal_address") == NULL &&
           strstr(h.first_fault.message, "fill_u32") == NULL,
       "once, and not the launches that had finished");
    dv_ref_release(x);
    dv_actor_destroy(a);
    dv__driver_close(drv);
}

static void *reset_thread(void *arg)
{
    (void)dv_actor_reset(arg); /* its answer: the rebuild's failure, or the shutdown */
    return NULL;
}

/* A shutdown begun while a rebuild fails (a fatal fault lands as it
 * makes the third of four streams): what was queued behind the rebuild
 * is answered as lost or shut down, never run against the half-built
 * context (stream 3 unknown there, the stack missing). */
static void test_shutdown_over_failed_rebuild(void)
{
    enum { N = 8 };
    dv_driver *drv = open_sim(1, false);
    dv_actor_config cfg;
    dv_actor *a = NULL;
    dv_actor_config_init(&cfg);
    cfg.driver = drv;
    cfg.streams = 4;
    int rc = drv != NULL ? dv_actor_create(&cfg, &a) : DV_ENODEVICE;
    if (!is_status(rc, DV_OK, "shutdown over a failed rebuild: an actor of 4 streams")) {
        for (int i = 0; i < 3; i++)
            skip("no actor");
        return;
    }
    dv__sim_poison_at(drv, DV_CALL_STREAM_CREATE, 3, 0, DV_SIM_POISON_FATAL);
    pthread_t t;
    pthread_create(&t, NULL, reset_thread, a);
    dv_actor_health h = {0};
    for (int i = 0; i < 5000; i++) {
        dv_actor_health_get(a, &h);
        if (h.state == DV_ACTOR_REBUILDING)
            break;
        usleep(1000);
    }
    ok(h.state == DV_ACTOR_REBUILDING, "the rebuild under way (state %d)", (int)h.state);
    dv_future f[N];
    dv_ref r[N];
    int posted = 0, einval = 0, other = 0, last = DV_OK;
    for (int i = 0; i < N; i++) {
        dv_future_init(&f[i], 0);
        r[i] = DV_REF_NULL;
        if (i % 2 == 0 ? dv_alloc_async(a, 4096, 3, "behind", &r[i], &f[i]) == DV_OK
                       : dv_memset_async(a, r[i - 1], 0, 1, 4096, 3, &f[i]) == DV_OK)
            posted++;
        else
            dv_future_init(&f[i], 0); /* not posted: nothing to wait for */
    }
    (void)dv_actor_shutdown(a);
    for (int i = 0; i < N; i++) {
        int w = dv_future_wait(&f[i]);
        if (w == DV_EINVAL)
            einval++;
        else if (w != DV_EDEVICE_LOST && w != DV_ECONTEXT_LOST && w != DV_ESTALE &&
                 w != DV_ESHUTDOWN && w != DV_OK)
            other++, last = w;
    }
    pthread_join(t, NULL);
    ok(posted == N, "%d operations queued behind it", posted);
    ok(einval == 0 && other == 0,
       "none answered DV_EINVAL (%d) or anything but lost, stale or shut down (%d, the last %s)",
       einval, other, dv_err_name(last));
    for (int i = 0; i < N; i += 2)
        (void)dv_ref_release(r[i]);
    dv_actor_destroy(a);
    dv__driver_close(drv);
}

int main(void)
{
    plan(55);
    test_synchronous();
    test_tracked_launch();
    test_regressions();
    test_explicit_reset();
    test_recoverable();
    test_fatal();
    test_multidevice();
    test_shutdown_over_failed_rebuild();
    return tap_done();
}
