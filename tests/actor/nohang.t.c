/*
 * Nothing hangs, and misuse from the wrong thread or process is answered:
 *   - every call that would wait, made inside a task (on its own actor or
 *     another) or inside a host function, answers DV_EDEADLK at once and
 *     leaves nothing behind; dv_actor_destroy inside a task too;
 *   - a task's own failure comes back with a detail of its own;
 *   - scratch memory of a task, released in stream order;
 *   - host functions' cleanups run exactly once, reached or not;
 *   - one actor owns a device: a second answers DV_EBUSY until the first
 *     is shut down;
 *   - after fork(), the child's calls on inherited actors answer
 *     DV_EFORKED, and a new actor works in the child;
 *   - create/destroy cycles with work in flight never hang (watchdog);
 *   - two threads shutting one actor down at once both return;
 *   - a thread in dv_alloc_wait is answered at once when the actor is shut
 *     down or lost, not at the end of its timeout.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "devactor.h"
#include "devactor_blas.h"
#include "devactor_fft.h"
#include "devactor_nccl.h"
#include "devactor_sim.h"
#include "devactor_testing.h"
#include "devactor_testing.h"
#include "support/data.h"
#include "support/gate.h"
#include "tap.h"

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif
/* ASan's runtime as shipped with gcc 12 does not hold its allocator's
 * locks across fork(): a child that allocates can wait forever on a lock
 * a parent's thread held at the fork (seen here in the child's new
 * thread).  The child then makes no new actor. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

static dv_driver *drv; /* two sim devices */
static dv_actor *a, *b;
static dv_kernel *fill, *copyk;

static dv_actor *make(int device)
{
    dv_actor_config cfg;
    dv_actor *x = NULL;
    dv_actor_config_init(&cfg);
    cfg.driver = drv;
    cfg.device = device;
    cfg.streams = 2;
    return dv_actor_create(&cfg, &x) == DV_OK ? x : NULL;
}

/* ------------------------------------------------------------------------
 * Blocking calls where they must not wait
 * ------------------------------------------------------------------------ */

#define NCALLS 23
static const char *names[NCALLS];
static int got[NCALLS];
static dv_ref live, pending;
static dv_event *ev_a, *ev_b;
static dv_future inflight;
static int inflight_post;

static int blocking_everything(const dv_task_ctx *ctx, void *user)
{
    dv_actor *other = user; /* the same actor, or another */
    uint32_t v = 0;
    dv_actor_stats st;
    dv_kernel *k;
    dv_event *e;
    float ms;
    dv_ref_info info;
    int i = 0;
#define TRY(call)                                                                                  \
    do {                                                                                           \
        names[i] = #call;                                                                          \
        got[i++] = (call);                                                                         \
    } while (0)
    TRY(dv_copy_htod(other, live, 0, &v, 4, 0));
    TRY(dv_copy_dtoh(other, &v, live, 0, 4, 0));
    TRY(dv_copy_dtod(other, live, 0, live, 4, 4, 0));
    TRY(dv_memset(other, live, 0, 1, 4, 0));
    TRY(dv_sync(other, 0));
    TRY(dv_launch(other, fill, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, 0,
                  (dv_arg[]){dv_arg_ref(live, DV_WRITE, 0), dv_arg_u32(1), dv_arg_u64(1)}, 3));
    TRY(dv_task(other, blocking_everything, other, 0, NULL, 0));
    TRY(dv_flush(other));
    TRY(dv_kernel_get(other, NULL, 0, "copy", &k));
    TRY(dv_actor_stats_get(other, &st));
    TRY(dv_actor_reset(other));
    TRY(dv_event_create(other, 0, &e));
    TRY(dv_event_sync(other == a ? ev_a : ev_b));
    TRY(dv_event_query(other == a ? ev_a : ev_b));
    TRY(dv_event_elapsed(ev_a, ev_a, &ms));
    /* A handle allocated from here is pending until the task returns. */
    dv_alloc(ctx->actor, 64, ctx->stream, "pending", &pending);
    TRY(dv_ref_access(pending, &info));
    TRY(dv_actor_shutdown(other));
    TRY(dv_actor_destroy(other));
    /* A future of an operation posted from here: posting is fine, the
     * wait is not (it is served after this task returns). */
    dv_future_init(&inflight, 0);
    inflight_post = dv_memset_async(ctx->actor, live, 0, 7, 4, ctx->stream, &inflight);
    TRY(dv_future_wait(&inflight));
    TRY(dv_future_wait_ordered(&inflight));
    TRY(dv_future_wait_for(&inflight, DV_COMPLETE, 1000000000u));
    /* A record posted from here is not ordered yet: waiting for it would
     * wait on the actor. */
    dv_event_record(ev_a, 0);
    TRY(dv_stream_wait_event(b, 0, ev_a));
    /* Another actor's event, its record ordered long ago (this call would
     * not wait this time): refused all the same. */
    TRY(dv_stream_wait_event(a, 0, ev_b));
#undef TRY
    return i == NCALLS ? DV_OK : DV_EINVAL;
}

static void test_blocking_in_task(dv_actor *on, dv_actor *other, const char *what)
{
    dv_actor_stats before, after;
    dv_actor_stats_get(on, &before);
    memset(got, 0, sizeof(got));
    int rc = dv_task(on, blocking_everything, other, 0, NULL, 0);
    is_status(rc, DV_OK, "%s: the task ran every call and returned", what);
    bool all = true;
    for (int i = 0; i < NCALLS; i++) {
        if (got[i] != DV_EDEADLK) {
            all = false;
            diag("%s -> %s", names[i] ? names[i] : "?", dv_err_name(got[i]));
        }
    }
    ok(all, "%s: each of %d waiting calls answered DV_EDEADLK at once", what, NCALLS);
    is_status(inflight_post, DV_OK, "%s: an _async post from the task was accepted", what);
    dv_ref_release(pending);
    is_status(dv_future_wait(&inflight), DV_OK, "%s: ... and completes after the task", what);
    dv_actor_stats_get(on, &after);
    ok(after.refs_alive == before.refs_alive && after.bytes_outstanding == before.bytes_outstanding,
       "%s: nothing left behind (%llu handles, %llu bytes)", what,
       (unsigned long long)after.refs_alive, (unsigned long long)after.bytes_outstanding);
    dv_actor_health h;
    dv_actor_health_get(other, &h);
    ok(h.state == DV_ACTOR_RUNNING && h.rebuilds == 0, "%s: the callee still runs, not rebuilt",
       what);
}

/* A host function's thread must not wait either. */
static _Atomic int host_rc = 1;
static void host_sync(void *arg)
{
    atomic_store(&host_rc, dv_sync((dv_actor *)arg, 0));
}

static int enqueue_host_sync(const dv_task_ctx *ctx, void *user)
{
    return dv_task_host_fn(ctx, host_sync, user);
}

static void test_host_fn(void)
{
    is_status(dv_task(a, enqueue_host_sync, a, 1, NULL, 0), DV_OK,
              "a host function that calls dv_sync on its actor ran");
    is_status(atomic_load(&host_rc), DV_EDEADLK, "... and its dv_sync answered DV_EDEADLK");
    is_status(dv_sync(a, 1), DV_OK, "the actor is fine after");
}

/* ------------------------------------------------------------------------
 * Tasks: their own error, scratch, cleanups
 * ------------------------------------------------------------------------ */

static int returns_einval(const dv_task_ctx *ctx, void *user)
{
    (void)ctx;
    (void)user;
    return DV_EOUT_OF_BOUNDS; /* without a dv_ call that failed */
}

static void test_task_error(void)
{
    uint32_t v = 0;
    dv_ref small;
    dv_alloc(a, 4, 0, "small", &small);
    /* A failure on the actor's side first (out of bounds), to leave a
     * detail behind on the actor's thread. */
    is_status(dv_copy_htod(a, small, 2, &v, 4, 0), DV_EINVAL, "an unrelated failure first");
    is_status(dv_task(a, returns_einval, NULL, 0, NULL, 0), DV_EOUT_OF_BOUNDS,
              "a task returning its own error");
    const dv_error_detail *d = dv_last_error();
    ok(d->status == DV_EOUT_OF_BOUNDS && d->call != NULL && strcmp(d->call, "task") == 0 &&
           d->requested == 0,
       "its detail is the task's own: call %s, '%s'", d->call ? d->call : "(null)", d->message);
    dv_ref_release(small);
}

#define SCRATCH_N 4096
static dv_ref scratch_out;
static int scratch_rc[3];
static int use_scratch(const dv_task_ctx *ctx, void *user)
{
    (void)user;
    uint64_t p = 0, q = 0, extra[DV_TASK_SCRATCH_MAX];
    scratch_rc[0] = dv_task_scratch(ctx, SCRATCH_N * 4, &p);
    if (scratch_rc[0] != DV_OK)
        return scratch_rc[0];
    int rc =
        dv_task_launch(ctx, fill, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0,
                       (dv_arg[]){dv_arg_ptr(p), dv_arg_u32(0x5C4A7C4u), dv_arg_u64(SCRATCH_N)}, 3);
    if (rc == DV_OK)
        rc = dv_task_launch(
            ctx, copyk, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0,
            (dv_arg[]){dv_arg_u64(ctx->arg[0]), dv_arg_ptr(p), dv_arg_u64(SCRATCH_N * 4)}, 3);
    for (int i = 0; i < DV_TASK_SCRATCH_MAX - 1; i++)
        dv_task_scratch(ctx, 256, &extra[i]);
    scratch_rc[1] = dv_task_scratch(ctx, 256, &q);
    scratch_rc[2] = dv_task_scratch(ctx, 0, &q);
    return rc;
}

static void test_scratch(void)
{
    static uint32_t back[SCRATCH_N];
    dv_actor_stats before, after;
    dv_actor_stats_get(a, &before);
    dv_alloc(a, SCRATCH_N * 4, 1, "scratch-out", &scratch_out);
    dv_arg arg = dv_arg_ref(scratch_out, DV_WRITE, 0);
    is_status(dv_task(a, use_scratch, NULL, 1, &arg, 1), DV_OK,
              "a task fills scratch memory and copies it out");
    is_status(scratch_rc[0], DV_OK, "dv_task_scratch gave memory");
    is_status(scratch_rc[1], DV_EINVAL, "one more than DV_TASK_SCRATCH_MAX: DV_EINVAL");
    is_status(scratch_rc[2], DV_EINVAL, "0 bytes: DV_EINVAL");
    dv_copy_dtoh(a, back, scratch_out, 0, sizeof(back), 1);
    ok(all_u32(back, SCRATCH_N, 0x5C4A7C4u), "the data came through the scratch");
    dv_ref_release(scratch_out);
    dv_sync(a, 1);
    dv_actor_stats_get(a, &after);
    is_u64(after.bytes_outstanding, before.bytes_outstanding,
           "the scratch went back after the task (bytes outstanding as before)");
    uint64_t p;
    is_status(dv_task_scratch(NULL, 64, &p), DV_EINVAL, "dv_task_scratch outside a task");
}

static _Atomic int ran, cleaned, cleaned_status = 99;
static void count_ran(void *arg)
{
    (void)arg;
    atomic_fetch_add(&ran, 1);
}
static void count_cleanup(void *arg, int status)
{
    (void)arg;
    atomic_fetch_add(&cleaned, 1);
    atomic_store(&cleaned_status, status);
}
static int enqueue_with_cleanup(const dv_task_ctx *ctx, void *user)
{
    (void)user;
    return dv_task_host_fn_cleanup(ctx, count_ran, count_cleanup, NULL);
}

static void test_cleanup(void)
{
    is_status(dv_task(a, enqueue_with_cleanup, NULL, 0, NULL, 0), DV_OK,
              "a host function with a cleanup");
    ok(atomic_load(&ran) == 1 && atomic_load(&cleaned) == 1 && atomic_load(&cleaned_status) == 0,
       "reached: fn ran, then cleanup(DV_OK), once each (%d, %d)", atomic_load(&ran),
       atomic_load(&cleaned));

    /* Never reached: the device is poisoned before the stream gets there. */
    atomic_store(&ran, 0);
    atomic_store(&cleaned, 0);
    dv_actor *c = make(1); /* its own actor, so a and b keep their state */
    ok(c != NULL, "an actor for the fault");
    if (c == NULL)
        return;
    dv_future ft;
    gate g;
    dv_future_init(&ft, 0);
    /* Hold stream 0, enqueue the job behind the gate, poison, let go. */
    gate_close(&g, c, 0);
    dv_task_async(c, enqueue_with_cleanup, NULL, 0, NULL, 0, &ft);
    dv_future_wait_ordered(&ft);
    dv__sim_poison(drv, 1, DV_SIM_POISON_RECOVERABLE, 0);
    atomic_store_explicit(&g.open, true, memory_order_release);
    int rc = dv_future_wait(&ft);
    ok(rc != DV_OK, "the task's work meets the fault (%s)", dv_err_name(rc));
    dv_future_wait(&g.posted);
    dv_sync(c, 1); /* after the rebuild */
    ok(atomic_load(&ran) == 0 && atomic_load(&cleaned) == 1 &&
           atomic_load(&cleaned_status) == DV_ECONTEXT_LOST,
       "never reached: fn did not run, cleanup(%s) ran once (%d)",
       dv_err_name(atomic_load(&cleaned_status)), atomic_load(&cleaned));
    dv_actor_destroy(c);
}

/* ------------------------------------------------------------------------
 * One actor per device
 * ------------------------------------------------------------------------ */

static void test_one_per_device(void)
{
    dv_actor *second = make(0);
    ok(second == NULL, "a second actor on device 0: refused");
    is_status(dv_last_error()->status, DV_EBUSY, "... with DV_EBUSY: %s", dv_last_error()->message);
    uint32_t v = 42, back = 0;
    dv_copy_htod(a, live, 0, &v, 4, 0);
    dv_copy_dtoh(a, &back, live, 0, 4, 0);
    is_int(back, 42, "the first actor still works");

    /* A separate sim is another world: its device 0 is free. */
    dv_actor_config cfg;
    dv_actor *other_sim = NULL;
    dv_actor_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    is_status(dv_actor_create(&cfg, &other_sim), DV_OK, "device 0 of another sim: allowed");
    dv_actor_destroy(other_sim);
}

static int does_nothing(const dv_task_ctx *ctx, void *user)
{
    (void)ctx;
    (void)user;
    return DV_OK;
}

/* The actor's own completion event cannot be made or recorded (a failure
 * that is not the device's): the stream is waited for instead; nothing is
 * rebuilt and no handle goes stale. */
static void test_completion_event_fails(void)
{
    static const char *const calls[] = {"event_create", "event_record"};
    for (int i = 0; i < 2; i++) {
        dv_actor *x = make(1); /* device 1's actor is gone by now */
        if (x == NULL) {
            ok(false, "an actor on device 1: %s", dv_last_error()->message);
            continue;
        }
        dv_ref r = DV_REF_NULL;
        uint32_t v = 0x5a5a5a5au, back = 0;
        dv_alloc(x, 64, 0, "r", &r);
        dv_copy_htod(x, r, 0, &v, 4, 0);
        dv_actor_health h0, h1;
        dv_actor_health_get(x, &h0);
        dv_sim_inject(x, calls[i], 1, 1 /* CUDA_ERROR_INVALID_VALUE: not sticky */);
        int rc = dv_task(x, does_nothing, NULL, 0, NULL, 0);
        dv_actor_health_get(x, &h1);
        int copy = dv_copy_dtoh(x, &back, r, 0, 4, 0);
        ok(rc == DV_OK && h1.rebuilds == h0.rebuilds && h1.state == DV_ACTOR_RUNNING &&
               copy == DV_OK && back == v,
           "%s fails once under a task's completion: the task answers %s, %u rebuilds, the "
           "older handle reads back %#x",
           calls[i], dv_err_name(rc), h1.rebuilds - h0.rebuilds, back);
        dv_ref_release(r);
        dv_actor_destroy(x);
    }
}

static void test_claim_after_shutdown(void)
{
    dv_actor *c = make(1);
    ok(c != NULL, "an actor on device 1 again once the first was shut down");
    dv_actor_destroy(c);
}

/* A reset that meets a transient failure tries again; the other device's
 * actor never notices. */
static void test_reset_transient(void)
{
    dv_actor *c = make(1);
    dv_actor_health ha0, ha, hc;
    uint32_t v = 5, back = 0;
    dv_ref r;
    dv_actor_health_get(a, &ha0);
    dv_alloc(c, 64, 0, "c", &r);
    is_status(dv_sim_inject(a, "stream_create", 1, 2 /* CUDA_ERROR_OUT_OF_MEMORY */), DV_OK,
              "the next stream create will run out of memory");
    is_status(dv_actor_reset(a), DV_OK, "a reset that meets it is tried again and works");
    dv_actor_health_get(a, &ha);
    ok(ha.state == DV_ACTOR_RUNNING && ha.rebuilds == ha0.rebuilds + 1,
       "device 0 runs, rebuilt once");
    dv_actor_health_get(c, &hc);
    ok(hc.state == DV_ACTOR_RUNNING && hc.rebuilds == 0 && hc.first_fault.status == 0,
       "device 1's actor never noticed");
    dv_copy_htod(c, r, 0, &v, 4, 0);
    dv_copy_dtoh(c, &back, r, 0, 4, 0);
    is_int(back, 5, "... and works");
    dv_ref_release(r);
    dv_actor_destroy(c);
}

/* ------------------------------------------------------------------------
 * fork
 * ------------------------------------------------------------------------ */

static void test_fork(void)
{
    dv_future f;
    dv_future_init(&f, 0);
    dv_kernel *spin = NULL;
    dv_kernel_get(a, NULL, 0, "spin", &spin);
    /* Something in flight at the fork. */
    dv_launch_async(a, spin, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, 1,
                    (dv_arg[]){dv_arg_u64(200000)}, 1, &f);
    dv_actor *process_wide = NULL;
    dv_actor_get(0, &process_wide); /* the parent's, inherited by the child */
    dv_event *ev_unrecorded = NULL;
    if (dv_event_create(a, 0, &ev_unrecorded) != DV_OK)
        bail_out("event_create: %s", dv_last_error()->message);
    fflush(stdout);
    /* The child's verdict comes back through a pipe, all of its bits (an
     * exit status keeps 8); nothing read means it never got there. */
    int fds[2];
    if (pipe(fds) != 0)
        bail_out("pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        signal(SIGALRM, SIG_DFL); /* a hang shows as SIGALRM, not as a verdict */
        alarm(20);
        int bad = 0;
        dv_ref r;
        dv_ref_info info;
        uint32_t v = 1;
        bad |= (dv_alloc(a, 64, 0, "child", &r) != DV_EFORKED) << 0;
        bad |= (dv_copy_htod(a, live, 0, &v, 4, 0) != DV_EFORKED) << 1;
        bad |= (dv_sync(a, 0) != DV_EFORKED) << 2;
        bad |= (dv_ref_access(live, &info) != DV_EFORKED) << 3;
        bad |= (dv_ref_release(live) != DV_EFORKED) << 4;
        bad |= (dv_future_wait(&f) != DV_EFORKED && !dv_future_done(&f)) << 5;
        bad |= (dv_actor_destroy(a) != DV_EFORKED) << 6;
        bad |= (dv_event_sync(ev_a) != DV_EFORKED) << 7;
        /* The process-wide actor is the parent's too. */
        dv_actor *mine = NULL;
        bad |= (dv_actor_get(0, &mine) != DV_EFORKED || mine != NULL) << 8;
        /* The calls that read the actor without posting, and those that
         * make a library actor on it. */
        dv_actor_health h;
        dv_error_detail d;
        dv_blas *blas = NULL;
        dv_fft *fft = NULL;
        dv_nccl_id id;
        uint64_t n = 0;
        bad |= (dv_actor_health_get(a, &h) != DV_EFORKED) << 12;
        bad |= (dv_actor_last_hazard(a, &d) != DV_EFORKED) << 13;
        bad |= (dv_check_host_access(a, &v, sizeof(v), DV_READ) != DV_EFORKED) << 14;
        bad |= (dv_stream_wait_event(a, 1, ev_unrecorded) != DV_EFORKED) << 15;
        bad |= (dv_sim_call_count(a, "mem_alloc", &n) != DV_EFORKED) << 16;
        bad |= (dv_blas_create(a, &blas) != DV_EFORKED || blas != NULL) << 17;
        bad |= (dv_fft_create(a, 0, &fft) != DV_EFORKED || fft != NULL) << 18;
        bad |= (dv_nccl_id_make(a, &id) != DV_EFORKED) << 19;
        /* TSan does not follow threads made after a fork; ASan: above. */
        if (!UNDER_TSAN && !UNDER_ASAN) {
            dv_actor_config cfg;
            dv_actor *fresh = NULL;
            dv_actor_config_init(&cfg);
            cfg.backend = DV_BACKEND_SIM;
            bad |= (dv_actor_create(&cfg, &fresh) != DV_OK) << 9;
            if (fresh != NULL) {
                bad |= (dv_alloc(fresh, 64, 0, "child", &r) != DV_OK) << 10;
                bad |= (dv_copy_htod(fresh, r, 0, &v, 4, 0) != DV_OK) << 11;
                dv_ref_release(r);
                dv_actor_destroy(fresh);
            }
        }
        _exit(write(fds[1], &bad, sizeof(bad)) == (ssize_t)sizeof(bad) ? 0 : 1);
    }
    close(fds[1]);
    int status = 0, verdict = -1;
    if (pid > 0 && read(fds[0], &verdict, sizeof(verdict)) != (ssize_t)sizeof(verdict))
        verdict = -1;
    close(fds[0]);
    ok(pid > 0 && waitpid(pid, &status, 0) == pid, "a child after fork() finished");
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "... exited normally%s",
       WIFSIGNALED(status) ? (WTERMSIG(status) == SIGALRM ? " (it hung: its alarm killed it)"
                                                           : " (killed by a signal)")
                           : "");
    is_int(verdict, 0,
           "... every call on the parent's actor answered DV_EFORKED%s (bits of the failures; "
           "-1: no verdict)",
           UNDER_TSAN || UNDER_ASAN ? "" : "; a new actor worked");
    is_status(dv_future_wait(&f), DV_OK, "the parent's own work is untouched");
    dv_event_destroy(ev_unrecorded);
}

/* ------------------------------------------------------------------------
 * Create and destroy, with work in flight
 * ------------------------------------------------------------------------ */

static void test_cycles(void)
{
    dv_actor_config cfg;
    int fails = 0, n = UNDER_TSAN ? 200 : 2000;
    dv_actor_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    cfg.sim_memory_bytes = 64 << 20;
    cfg.pool_initial_bytes = 1 << 20;
    for (int i = 0; i < n; i++) {
        dv_actor *c = NULL;
        dv_ref r;
        dv_future f;
        if (dv_actor_create(&cfg, &c) != DV_OK) {
            fails++;
            continue;
        }
        dv_future_init(&f, 0);
        dv_alloc(c, 256, 0, "cycle", &r);
        dv_memset_async(c, r, 0, 1, 256, 0, &f);
        if (i % 2)
            dv_ref_release(r); /* else left to the shutdown */
        dv_actor_destroy(c);
        fails += dv_future_done(&f) ? 0 : 1;
    }
    is_int(fails, 0, "%d create/destroy cycles with work in flight: none failed or hung", n);
}

/* Resets racing a shutdown: each reset returns (DV_OK before the
 * shutdown, DV_ESHUTDOWN after); the watchdog catches one that does not. */
static dv_actor *resetting;
static atomic_int reset_bad;
static void *resetter(void *arg)
{
    (void)arg;
    for (int i = 0; i < 50; i++) {
        int rc = dv_actor_reset(resetting);
        if (rc == DV_ESHUTDOWN)
            break;
        if (rc != DV_OK)
            atomic_fetch_add(&reset_bad, 1);
    }
    return NULL;
}

/* The health while resets race the shutdown: once it read STOPPING or
 * STOPPED, it never reads RUNNING or REBUILDING again. */
static atomic_bool watching;
static atomic_int health_back;
static void *health_watcher(void *arg)
{
    (void)arg;
    bool stopping = false;
    while (atomic_load(&watching)) {
        dv_actor_health h;
        if (dv_actor_health_get(resetting, &h) != DV_OK)
            continue;
        if (h.state == DV_ACTOR_STOPPING || h.state == DV_ACTOR_STOPPED)
            stopping = true;
        else if (stopping && (h.state == DV_ACTOR_RUNNING || h.state == DV_ACTOR_REBUILDING))
            atomic_fetch_add(&health_back, 1);
    }
    return NULL;
}

static void test_reset_shutdown(void)
{
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    cfg.sim_memory_bytes = 64 << 20;
    cfg.sim_delay_max_us = 100;
    int rounds = 20, made = 0;
    for (int i = 0; i < rounds; i++) {
        if (dv_actor_create(&cfg, &resetting) != DV_OK)
            continue;
        made++;
        pthread_t t[3], w;
        atomic_store(&watching, true);
        pthread_create(&w, NULL, health_watcher, NULL);
        for (int k = 0; k < 3; k++)
            pthread_create(&t[k], NULL, resetter, NULL);
        struct timespec pause = {0, 5000000L};
        nanosleep(&pause, NULL);
        dv_actor_shutdown(resetting);
        for (int k = 0; k < 3; k++)
            pthread_join(t[k], NULL);
        atomic_store(&watching, false);
        pthread_join(w, NULL);
        dv_actor_destroy(resetting);
    }
    ok(made == rounds && atomic_load(&reset_bad) == 0,
       "%d actors shut down while three threads reset them: every reset returned (%d made, %d "
       "answered other than DV_OK or DV_ESHUTDOWN)",
       rounds, made, atomic_load(&reset_bad));
    is_int(atomic_load(&health_back), 0,
           "the health, once STOPPING, never read RUNNING or REBUILDING again");
}

/* dv_actor_get while the process-wide actor is being shut down: it waits
 * for the old one to let the device go, never DV_EBUSY.  The shutdown
 * pauses 2 ms after the actor leaves the registry, where a getter builds
 * the next one and claims the device. */
static atomic_bool getting;
static atomic_int get_busy, get_other;
static void *getter(void *arg)
{
    (void)arg;
    while (atomic_load(&getting)) {
        dv_actor *g = NULL;
        int rc = dv_actor_get(0, &g);
        if (rc == DV_EBUSY)
            atomic_fetch_add(&get_busy, 1);
        else if (rc != DV_OK && rc != DV_ESHUTDOWN)
            atomic_fetch_add(&get_other, 1);
    }
    return NULL;
}

static void test_get_during_shutdown(void)
{
    setenv("DV_BACKEND", "sim", 1);
    dv__registry_leave_pause(2000);
    dv_actor *g = NULL;
    int made = dv_actor_get(0, &g) == DV_OK;
    atomic_store(&getting, true);
    pthread_t t[2];
    for (int k = 0; k < 2; k++)
        pthread_create(&t[k], NULL, getter, NULL);
    for (int i = 0; i < 20 && made; i++) {
        if (dv_actor_get(0, &g) == DV_OK)
            dv_actor_shutdown(g);
    }
    atomic_store(&getting, false);
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], NULL);
    dv__registry_leave_pause(0);
    if (dv_actor_get(0, &g) == DV_OK)
        dv_actor_shutdown(g);
    ok(made && atomic_load(&get_busy) == 0 && atomic_load(&get_other) == 0,
       "dv_actor_get from two threads while the process-wide actor is shut down 20 times: never "
       "DV_EBUSY (%d), nothing else but DV_OK or DV_ESHUTDOWN (%d)",
       atomic_load(&get_busy), atomic_load(&get_other));
}

/* Two threads shut one actor down at once: both return DV_OK (the
 * second waits for the first's stop instead of joining its thread too). */
static dv_actor *shutting;
static atomic_int shut_rc[2];
static void *shutter(void *arg)
{
    atomic_store(&shut_rc[(intptr_t)arg], dv_actor_shutdown(shutting));
    return NULL;
}

static void test_double_shutdown(void)
{
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    int bad = 0, made = 0;
    for (int i = 0; i < 20; i++) {
        if (dv_actor_create(&cfg, &shutting) != DV_OK)
            continue;
        made++;
        pthread_t t[2];
        for (intptr_t k = 0; k < 2; k++)
            pthread_create(&t[k], NULL, shutter, (void *)k);
        for (int k = 0; k < 2; k++)
            pthread_join(t[k], NULL);
        bad += atomic_load(&shut_rc[0]) != DV_OK || atomic_load(&shut_rc[1]) != DV_OK;
        dv_actor_destroy(shutting);
    }
    ok(made == 20 && bad == 0,
       "two threads shut one actor down at once, 20 times: both return DV_OK (%d made, %d not)",
       made, bad);
}

/* A thread in dv_alloc_wait (a 30 s timeout) while the actor is shut down
 * or lost: answered DV_ESHUTDOWN or DV_EDEVICE_LOST within a second. */
static dv_actor *waited_on;
static atomic_int wait_rc;
static _Atomic uint64_t wait_ns;
static void *alloc_waiter(void *arg)
{
    (void)arg;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    dv_ref r;
    int rc = dv_alloc_wait(waited_on, 48 << 20, 0, "waiter", UINT64_C(30000000000), &r);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    atomic_store(&wait_ns, (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000u +
                               (uint64_t)(t1.tv_nsec - t0.tv_nsec));
    atomic_store(&wait_rc, rc);
    if (rc == DV_OK)
        dv_ref_release(r);
    return NULL;
}

static void test_alloc_wait_ends(bool lose)
{
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    cfg.budget_bytes = 64 << 20;
    const char *what = lose ? "the device lost" : "a shutdown";
    if (dv_actor_create(&cfg, &waited_on) != DV_OK) {
        ok(false, "dv_alloc_wait and %s: an actor (%s)", what, dv_last_error()->message);
        return;
    }
    dv_ref held;
    dv_alloc(waited_on, 32 << 20, 0, "held", &held);
    dv_ref_access(held, NULL);
    atomic_store(&wait_rc, 1);
    pthread_t t;
    pthread_create(&t, NULL, alloc_waiter, NULL);
    /* The waiter is refused once, then sleeps (this thread is another
     * client, so it is not the last): give it a moment to get there. */
    struct timespec pause = {0, 200000000L};
    nanosleep(&pause, NULL);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (lose) {
        dv_sim_poison(waited_on, DV_SIM_POISON_FATAL);
        (void)dv_memset(waited_on, held, 0, 1, 4096, 0);
    } else {
        dv_actor_shutdown(waited_on);
    }
    pthread_join(t, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    int want = lose ? DV_EDEVICE_LOST : DV_ESHUTDOWN;
    ok(atomic_load(&wait_rc) == want && secs < 2.0,
       "dv_alloc_wait (30 s timeout) and %s: answered %s after %.2f s (want %s within 2 s)", what,
       dv_err_name(atomic_load(&wait_rc)), secs, dv_err_name(want));
    dv_ref_release(held);
    dv_actor_destroy(waited_on);
}

static void watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "Bail out! the watchdog fired: something hangs\n";
    (void)!write(1, msg, sizeof(msg) - 1);
    _exit(2);
}

int main(void)
{
    signal(SIGALRM, watchdog);
    alarm(UNDER_TSAN ? 600 : 240);
    dv_driver_config dcfg;
    dv__driver_config_init(&dcfg);
    dcfg.backend = DV_BACKEND_SIM;
    dcfg.sim.devices = 2;
    dcfg.sim.memory_bytes = 128 << 20;
    if (dv__driver_open(&dcfg, &drv) != DV_OK)
        bail_out("no sim driver: %s", dv_last_error()->message);
    plan(55);
    a = make(0);
    b = make(1);
    ok(a != NULL && b != NULL, "two actors, on devices 0 and 1");
    if (a == NULL || b == NULL)
        return tap_done();
    dv_kernel_get(a, NULL, 0, "fill_u32", &fill);
    dv_kernel_get(a, NULL, 0, "copy", &copyk);
    dv_alloc(a, 4096, 0, "live", &live);
    dv_memset(a, live, 0, 0, 4096, 0);
    dv_event_create(a, DV_EVENT_TIMING, &ev_a);
    dv_event_create(b, DV_EVENT_TIMING, &ev_b);
    dv_event_record(ev_a, 0);
    dv_event_record(ev_b, 0);
    dv_event_sync(ev_b);

    test_blocking_in_task(a, a, "own actor");
    test_blocking_in_task(a, b, "another actor");
    test_host_fn();
    test_task_error();
    test_scratch();
    test_one_per_device();
    test_fork();
    dv_event_destroy(ev_b);
    dv_actor_destroy(b);
    test_completion_event_fails();
    test_claim_after_shutdown();
    test_cleanup();
    test_reset_transient();
    dv_event_destroy(ev_a);
    dv_ref_release(live);
    dv_actor_stats st;
    dv_actor_stats_get(a, &st);
    ok(st.refs_alive == 0 && st.bytes_outstanding == 0, "clean: %llu handles, %llu bytes",
       (unsigned long long)st.refs_alive, (unsigned long long)st.bytes_outstanding);
    dv_actor_destroy(a);
    test_cycles();
    test_reset_shutdown();
    test_get_during_shutdown();
    test_double_shutdown();
    test_alloc_wait_ends(false);
    test_alloc_wait_ends(true);
    dv__driver_close(drv);
    return tap_done();
}
