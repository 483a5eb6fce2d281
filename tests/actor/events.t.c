/*
 * Events (devactor.h): record on one stream, wait from another stream of
 * the same actor or another actor, wait or query from the host, elapsed
 * time, the record's milestones, a rebuild, a destroyed event, the
 * tracker learning the edge (no second wait for what the event covers)
 * and the stream-order checker learning it (no hazard reported for what
 * the event orders, one reported without it).
 *
 * Work that should come first sits behind a gate (support/gate.h), so a
 * missing wait shows up every time, and "not yet" does not depend on how
 * fast the host runs the test.
 */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "devactor.h"
#include "devactor_testing.h"
#include "support/data.h"
#include "support/gate.h"
#include "tap.h"

#ifndef EVENTS_ON_CUDA
#define EVENTS_ON_CUDA 0
#endif
#define N     4096 /* u32 */
#define BYTES ((uint64_t)N * 4)

static dv_actor *a, *b;
static dv_kernel *spin, *fill, *copy;

static void spin_async(dv_actor *on, dv_kernel *k, dv_stream s, uint64_t ms, dv_arg *args,
                       dv_future *f)
{
    args[0] = dv_arg_u64(ms * 1000000);
    dv_future_init(f, 0);
    dv_launch_async(on, k, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, s, args, 1, f);
}

static uint64_t ptr_of(dv_ref r)
{
    dv_ref_info info;
    return dv_ref_access(r, &info) == DV_OK ? info.ptr : 0;
}

/* On actor `on` (with its kernels fk and ck): x filled with v on stream 0
 * behind a gate; y <- x through a raw pointer on stream 1, after a wait
 * for an event recorded after the fill (or not: then the copy runs, and is
 * waited for, while the gate is still closed); is y v?  The copy's status
 * goes to *copy_rc when it is not NULL. */
static bool raw_copy_sees_fill(dv_actor *on, dv_kernel *fk, dv_kernel *ck, dv_event *e, bool wait,
                               uint32_t v, int *copy_rc)
{
    static uint32_t host[N];
    dv_ref x, y;
    dv_arg fa[3], ca[3];
    dv_future ff, fc;
    gate g;
    dv_alloc(on, BYTES, 0, "x", &x);
    dv_alloc(on, BYTES, 1, "y", &y);
    dv_memset(on, x, 0, 0, BYTES, 0);
    gate_close(&g, on, 0);
    fa[0] = dv_arg_ref(x, DV_WRITE, 0);
    fa[1] = dv_arg_u32(v);
    fa[2] = dv_arg_u64(N);
    dv_future_init(&ff, 0);
    dv_launch_async(on, fk, (dv_dim3){16, 1, 1}, (dv_dim3){256, 1, 1}, 0, 0, fa, 3, &ff);
    dv_event_record(e, 0);
    if (wait)
        dv_stream_wait_event(on, 1, e);
    ca[0] = dv_arg_ref(y, DV_WRITE, 0);
    ca[1] = dv_arg_ptr_access(ptr_of(x), DV_READ);
    ca[2] = dv_arg_u64(BYTES);
    dv_future_init(&fc, 0);
    dv_launch_async(on, ck, (dv_dim3){16, 1, 1}, (dv_dim3){256, 1, 1}, 0, 1, ca, 3, &fc);
    if (!wait)
        dv_future_wait(&fc);
    gate_open(&g);
    int rc = dv_future_wait(&fc);
    if (copy_rc != NULL)
        *copy_rc = rc;
    dv_future_wait(&ff);
    dv_copy_dtoh(on, host, y, 0, BYTES, 1);
    dv_ref_release(x);
    dv_ref_release(y);
    return all_u32(host, N, v);
}

static void test_wait_on_stream(void)
{
    dv_event *e;
    is_status(dv_event_create(a, 0, &e), DV_OK, "create an event");
    int right = 0;
    for (uint32_t i = 1; i <= 10; i++)
        right += raw_copy_sees_fill(a, fill, copy, e, true, i, NULL);
    is_int(right, 10, "stream 1 waits on an event recorded after stream 0's fill: 10 of 10 right");
    ok(!raw_copy_sees_fill(a, fill, copy, e, false, 100, NULL),
       "without the wait the raw read misses the fill "
       "(the control)");
    is_status(dv_event_destroy(e), DV_OK, "destroy it");
    dv_flush(a); /* the destroy is post-only: handled by now */
    is_status(dv_event_record(e, 0), DV_EINVAL, "a destroyed event: DV_EINVAL");
}

static void test_host(void)
{
    dv_event *e, *t0, *t1;
    dv_arg sa[1];
    dv_future fs, fr;
    gate g;
    is_status(dv_event_create(a, 0, &e), DV_OK, "an event");
    is_status(dv_event_sync(e), DV_OK, "sync of an event never recorded: at once");
    is_status(dv_event_query(e), DV_OK, "query of an event never recorded: reached");
    gate_close(&g, a, 2);
    dv_future_init(&fr, 0);
    is_status(dv_event_record_async(e, 2, &fr), DV_OK, "record behind a closed gate");
    is_status(dv_future_wait_ordered(&fr), DV_OK, "the record is ordered");
    ok(!dv_future_done(&fr), "... and not complete");
    is_status(dv_event_query(e), DV_EAGAIN, "query: DV_EAGAIN while the stream is held");
    gate_open(&g);
    is_status(dv_event_sync(e), DV_OK, "sync waits for the record");
    is_status(dv_future_wait(&fr), DV_OK, "the record's future completes");
    is_status(dv_event_query(e), DV_OK, "query: DV_OK now");
    if (EVENTS_ON_CUDA)
        ok(dv_event_native(e) != NULL, "the native event (a CUevent)");
    else
        ok(dv_event_native(e) == NULL, "no native event on the sim");

    is_status(dv_event_create(a, DV_EVENT_TIMING, &t0), DV_OK, "a timing event");
    is_status(dv_event_create(a, DV_EVENT_TIMING, &t1), DV_OK, "another");
    float ms = -1;
    dv_event_record(t0, 2);
    spin_async(a, spin, 2, 30, sa, &fs);
    gate_close(&g, a, 2);
    dv_event_record(t1, 2);
    is_status(dv_event_elapsed(t0, t1, &ms), DV_EAGAIN, "elapsed before the end is reached");
    gate_open(&g);
    dv_event_sync(t1);
    is_status(dv_event_elapsed(t0, t1, &ms), DV_OK, "elapsed once both are reached");
    ok(ms >= 29.0f && ms < 60000.0f, "a 30 ms spin between them: %.2f ms", (double)ms);
    is_status(dv_event_elapsed(e, t1, &ms), DV_EINVAL, "elapsed needs two timing events");
    is_status(dv_event_elapsed(t0, t1, NULL), DV_EINVAL, "elapsed to NULL");
    dv_future_wait(&fs);
    is_status(dv_event_create(a, 0x80, &t0), DV_EINVAL, "unknown flags");
    is_status(dv_event_record(e, 9), DV_EINVAL, "a record on an unknown stream");
    is_status(dv_event_record_async(e, 0, NULL), DV_EINVAL, "record_async with a NULL future");
    is_status(dv_stream_wait_event(a, 7, e), DV_EINVAL, "a wait on an unknown stream");
    is_status(dv_event_create(NULL, 0, &t0), DV_EINVAL, "create on a NULL actor");
    dv_event_destroy(e);
    dv_event_destroy(t1);

    /* Timing events destroyed while their records are still queued behind
     * a closed gate, their memory made new timing events at once: the
     * late records stamp only what was theirs (the sim kept writing into
     * the reused event: a race ThreadSanitizer saw), and a new pair times
     * right. */
    gate_close(&g, a, 0);
    int churn = 0;
    for (int i = 0; i < 64; i++) {
        dv_event *x;
        if (dv_event_create(a, DV_EVENT_TIMING, &x) == DV_OK && dv_event_record(x, 0) == DV_OK &&
            dv_event_destroy(x) == DV_OK)
            churn++;
    }
    is_int(churn, 64, "64 timing events recorded behind a gate and destroyed at once");
    /* And with the stream running: the records land while events are
     * destroyed and made again. */
    churn = 0;
    for (int i = 0; i < 256; i++) {
        dv_event *x;
        if (dv_event_create(a, DV_EVENT_TIMING, &x) == DV_OK && dv_event_record(x, 1) == DV_OK &&
            dv_event_destroy(x) == DV_OK)
            churn++;
    }
    dv_sync(a, 1);
    is_int(churn, 256, "256 more with the stream running");
    dv_event *n0 = NULL, *n1 = NULL;
    dv_event_create(a, DV_EVENT_TIMING, &n0);
    dv_event_create(a, DV_EVENT_TIMING, &n1);
    dv_event_record(n0, 1);
    spin_async(a, spin, 1, 20, sa, &fs);
    dv_event_record(n1, 1);
    dv_event_sync(n1);
    gate_open(&g);
    ms = -1;
    is_status(dv_event_elapsed(n0, n1, &ms), DV_OK, "a new pair made meanwhile times");
    ok(ms >= 19.0f && ms < 60000.0f, "its 20 ms spin: %.2f ms", (double)ms);
    dv_future_wait(&fs);
    dv_sync(a, 0);
    dv_event_destroy(n0);
    dv_event_destroy(n1);
}

static void test_other_actor(void)
{
    dv_event *e;
    dv_future fm;
    dv_ref r;
    gate g;
    is_status(dv_event_create(a, 0, &e), DV_OK, "an event of device 0's actor");
    dv_alloc(b, 4096, 0, "on b", &r);
    gate_close(&g, a, 0);
    dv_event_record(e, 0);
    is_status(dv_stream_wait_event(b, 0, e), DV_OK, "device 1's stream 0 waits on it");
    dv_future_init(&fm, 0);
    dv_memset_async(b, r, 0, 1, 4096, 0, &fm);
    is_status(dv_future_wait_for(&fm, DV_COMPLETE, 50000000), DV_ETIMEDOUT,
              "a memset on device 1 after the wait does not complete while device 0 is held");
    gate_open(&g);
    is_status(dv_future_wait(&fm), DV_OK, "... and completes once it is let go");
    dv_ref_release(r);
    dv_event_destroy(e);
}

/* Device 1 waits on device 0's event, whose record waits behind a gate;
 * right after, the event is recorded again on an idle stream, or
 * destroyed.  The wait is for the record posted before it: device 1's
 * memset after it stays held while the gate is shut.  (Before, the wait
 * was taken by device 1's actor after device 0's had recorded the event
 * again or destroyed it, in about half the tries.) */
static void test_other_actor_then_change(void)
{
    int held[2] = {0, 0};
    enum { TRIES = 20 };
    for (int change = 0; change < 2; change++) {
        for (int i = 0; i < TRIES; i++) {
            dv_event *e;
            dv_future fm;
            dv_ref r;
            gate g;
            dv_event_create(a, 0, &e);
            dv_alloc(b, 4096, 0, "on b", &r);
            gate_close(&g, a, 0);
            dv_event_record(e, 0);
            int rc = dv_stream_wait_event(b, 0, e);
            if (change == 0)
                dv_event_record(e, 1); /* stream 1 of device 0: idle */
            else
                dv_event_destroy(e);
            dv_future_init(&fm, 0);
            dv_memset_async(b, r, 0, 1, 4096, 0, &fm);
            held[change] +=
                rc == DV_OK && dv_future_wait_for(&fm, DV_COMPLETE, 20000000) == DV_ETIMEDOUT;
            gate_open(&g);
            dv_future_wait(&fm);
            dv_ref_release(r);
            if (change == 0)
                dv_event_destroy(e);
        }
    }
    is_int(held[0], TRIES,
           "another actor's wait, the event recorded again right after on an idle "
           "stream: the wait holds for the record before (%d of %d)",
           held[0], TRIES);
    is_int(held[1], TRIES, "... the event destroyed right after: the wait still holds (%d of %d)",
           held[1], TRIES);
}

/* b shut down: its event is no longer something to wait on. */
static void test_shut_down_actor(void)
{
    dv_event *e;
    dv_event_create(b, 0, &e);
    dv_event_record(e, 0);
    is_status(dv_event_sync(e), DV_OK, "an event of device 1's actor, recorded and reached");
    dv_actor_shutdown(b);
    is_status(dv_stream_wait_event(a, 0, e), DV_ESHUTDOWN,
              "device 1's actor shut down: waiting on its event answers DV_ESHUTDOWN");
}

/* A task that keeps the actor's thread (tasks run on it) until let go. */
static atomic_bool held_go;
static int hold_actor(const dv_task_ctx *ctx, void *user)
{
    (void)ctx;
    (void)user;
    for (int i = 0; i < 5000000 && !atomic_load(&held_go); i++)
        sched_yield();
    return DV_OK;
}

/* Destroyed once, and only once: the actor's thread is held, so the first
 * destroy is still unhandled when the second comes. */
static void test_destroy_twice(void)
{
    dv_event *e;
    dv_future held;
    dv_event_create(a, 0, &e);
    dv_event_record(e, 0);
    atomic_store(&held_go, false);
    dv_future_init(&held, 0);
    dv_task_async(a, hold_actor, NULL, 1, NULL, 0, &held);
    is_status(dv_event_destroy(e), DV_OK, "destroy an event");
    is_status(dv_event_destroy(e), DV_EINVAL,
              "destroy it again before the actor handled the first: DV_EINVAL");
    is_status(dv_event_record(e, 0), DV_EINVAL, "record it after the destroy: DV_EINVAL");
    atomic_store(&held_go, true);
    dv_future_wait(&held);
}

static void test_rebuild(void)
{
    dv_event *e;
    dv_event_create(a, 0, &e);
    dv_event_record(e, 0);
    is_status(dv_event_sync(e), DV_OK, "recorded and reached");
    is_status(dv_actor_reset(a), DV_OK, "reset the actor");
    is_status(dv_event_sync(e), DV_ESTALE, "a record from before the rebuild: DV_ESTALE");
    dv_event_record(e, 1);
    is_status(dv_event_sync(e), DV_OK, "recorded again: usable");
    dv_event_destroy(e);
}

static void test_tracker_edge(void)
{
    dv_event *e;
    dv_ref x, y;
    uint64_t r0, w0, r1, w1;
    dv_event_create(a, 0, &e);
    dv_alloc(a, BYTES, 0, "x", &x);
    dv_alloc(a, BYTES, 1, "y", &y);
    dv_ref_access(x, NULL);
    dv_ref_access(y, NULL);
    dv_sync(a, 0);
    dv_sync(a, 1);
    dv_arg fa[] = {dv_arg_ref(x, DV_WRITE, 0), dv_arg_u32(3), dv_arg_u64(N)};
    dv_launch(a, fill, (dv_dim3){16, 1, 1}, (dv_dim3){256, 1, 1}, 0, 0, fa, 3);
    dv_event_record(e, 0);
    dv_stream_wait_event(a, 1, e);
    dv_flush(a);
    dv__driver_order_counts(dv__actor_driver(a), &r0, &w0);
    dv_arg ca[] = {dv_arg_ref(y, DV_WRITE, 0), dv_arg_ref(x, DV_READ, 0), dv_arg_u64(BYTES)};
    is_status(dv_launch(a, copy, (dv_dim3){16, 1, 1}, (dv_dim3){256, 1, 1}, 0, 1, ca, 3), DV_OK,
              "a tracked read of x on stream 1 after stream 1 waited on the event");
    dv__driver_order_counts(dv__actor_driver(a), &r1, &w1);
    is_u64(w1 - w0, 0, "the tracker knew the event covered x's write: no wait of its own");
    static uint32_t host[N];
    dv_copy_dtoh(a, host, y, 0, BYTES, 1);
    ok(all_u32(host, N, 3), "and the data is right");
    dv_ref_release(x);
    dv_ref_release(y);
    dv_event_destroy(e);
}

/* An actor of drv's device with three streams, raw pointers allowed. */
static int actor_on(dv_driver *drv, int device, bool check, dv_actor **out)
{
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.driver = drv;
    cfg.device = device;
    cfg.streams = 3;
    cfg.permissive = true;
    cfg.check_order = check;
    return dv_actor_create(&cfg, out);
}

/* The stream-order checker learns the edge too: a raw read on stream 1
 * of what stream 0 wrote is correct after a wait on an event recorded
 * after the write, and a hazard without it. */
static void test_checker_edge(dv_driver *drv, int device)
{
    dv_actor *c = NULL;
    dv_kernel *cfill = NULL, *ccopy = NULL;
    is_status(actor_on(drv, device, true, &c), DV_OK, "an actor with the stream-order checker");
    if (c == NULL)
        return;
    dv_kernel_get(c, NULL, 0, "fill_u32", &cfill);
    dv_kernel_get(c, NULL, 0, "copy", &ccopy);
    dv_event *e;
    dv_event_create(c, 0, &e);
    int rc = DV_OK;
    bool right = raw_copy_sees_fill(c, cfill, ccopy, e, true, 9, &rc);
    is_status(rc, DV_OK, "after the wait on the event: not a hazard");
    ok(right, "and it read the write");
    raw_copy_sees_fill(c, cfill, ccopy, e, false, 10, &rc);
    is_status(rc, DV_EHAZARD, "without the wait: a hazard");
    dv_event_destroy(e);
    dv_actor_stats st;
    dv_actor_stats_get(c, &st);
    is_u64(st.hazards, 1, "one hazard in all");
    dv_actor_destroy(c);
}

/* NULL events, and every call after the event's actor shut down. */
static void test_misuse(dv_driver *drv, int device)
{
    float ms;
    dv_future f;
    dv_future_init(&f, 0);
    is_status(dv_event_record(NULL, 0), DV_EINVAL, "record(NULL)");
    is_status(dv_event_record_async(NULL, 0, &f), DV_EINVAL, "record_async(NULL) ...");
    is_status(dv_future_wait(&f), DV_EINVAL, "... completes its future with it");
    is_status(dv_event_sync(NULL), DV_EINVAL, "sync(NULL)");
    is_status(dv_event_query(NULL), DV_EINVAL, "query(NULL)");
    is_status(dv_event_destroy(NULL), DV_EINVAL, "destroy(NULL)");
    is_status(dv_event_elapsed(NULL, NULL, &ms), DV_EINVAL, "elapsed(NULL, NULL)");
    is_status(dv_stream_wait_event(a, 0, NULL), DV_EINVAL, "a wait on a NULL event");
    is_status(dv_stream_wait_event(NULL, 0, NULL), DV_EINVAL, "a wait on a NULL actor");
    ok(dv_event_native(NULL) == NULL, "native(NULL) is NULL");

    dv_actor *c = NULL;
    dv_event *e = NULL, *late = NULL;
    actor_on(drv, device, false, &c);
    ok(c != NULL && dv_event_create(c, 0, &e) == DV_OK && dv_event_record(e, 0) == DV_OK &&
           dv_event_sync(e) == DV_OK,
       "an actor and a recorded event");
    dv_actor_shutdown(c);
    is_status(dv_event_record(e, 0), DV_ESHUTDOWN, "after shutdown: record");
    is_status(dv_event_sync(e), DV_ESHUTDOWN, "... sync");
    is_status(dv_event_query(e), DV_ESHUTDOWN, "... query");
    is_status(dv_stream_wait_event(c, 0, e), DV_ESHUTDOWN, "... a wait");
    is_status(dv_event_create(c, 0, &late), DV_ESHUTDOWN, "... create");
    ok(late == NULL, "... which gives no event");
    is_status(dv_event_destroy(e), DV_ESHUTDOWN, "... destroy");
    dv_actor_destroy(c);
}

int main(void)
{
    dv_driver_config dcfg;
    dv_driver *drv = NULL;
    dv__driver_config_init(&dcfg);
    dcfg.backend = EVENTS_ON_CUDA ? DV_BACKEND_CUDA : DV_BACKEND_SIM;
    dcfg.sim.devices = 2;
    dcfg.sim.memory_bytes = 256 << 20;
    dcfg.sim.seed = 5;
    dcfg.sim.delay_max_us = 50;
    int rc = dv__driver_open(&dcfg, &drv);
    if (EVENTS_ON_CUDA && rc == DV_ENODEVICE)
        skip_all("%s", dv_last_error()->message);
    plan(79);
    is_status(rc, DV_OK, "a driver (%s)", drv ? dv__driver_backend_name(drv) : "none");
    int devices = 1;
    dv__drv_device_count(drv, &devices);
    is_status(actor_on(drv, 0, false, &a), DV_OK, "device 0's actor");
    dv_kernel_get(a, NULL, 0, "spin", &spin);
    dv_kernel_get(a, NULL, 0, "fill_u32", &fill);
    dv_kernel_get(a, NULL, 0, "copy", &copy);
    test_wait_on_stream();
    test_host();
    test_tracker_edge();
    /* One actor owns a device: the tests with a second actor need a
     * second device (the sim has two; a machine may have one GPU). */
    if (devices > 1) {
        is_status(actor_on(drv, 1, false, &b), DV_OK, "a second actor, on device 1");
        test_other_actor();
        test_other_actor_then_change();
        test_shut_down_actor();
        dv_actor_destroy(b);
        test_checker_edge(drv, 1);
        test_misuse(drv, 1);
    } else {
        for (int i = 0; i < 32; i++)
            skip("one device: the tests of a second actor need two");
    }
    test_destroy_twice();
    /* Another driver's event: refused whether recorded yet or not. */
    dv_actor_config oc;
    dv_actor_config_init(&oc);
    oc.backend = DV_BACKEND_SIM;
    dv_actor *o = NULL;
    dv_event *oe = NULL;
    if (dv_actor_create(&oc, &o) == DV_OK && dv_event_create(o, 0, &oe) == DV_OK) {
        is_status(dv_stream_wait_event(a, 0, oe), DV_EINVAL,
                  "another driver's event, never recorded: refused");
        dv_event_record(oe, 0);
        is_status(dv_stream_wait_event(a, 0, oe), DV_EINVAL, "... and once recorded");
        dv_event_destroy(oe);
    } else {
        ok(false, "an actor on a driver of its own (%s)", dv_last_error()->message);
        ok(false, "(skipped)");
    }
    dv_actor_destroy(o);
    test_rebuild();
    dv_actor_stats st;
    dv_actor_stats_get(a, &st);
    ok(st.refs_alive == 0 && st.bytes_outstanding == 0 && st.events > 0,
       "clean: %llu handles, %llu bytes; %llu records counted", (unsigned long long)st.refs_alive,
       (unsigned long long)st.bytes_outstanding, (unsigned long long)st.events);
    dv_actor_destroy(a);
    dv__driver_close(drv);
    return tap_done();
}
