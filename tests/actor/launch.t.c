/*
 * Tracked launches through the actor, on the sim with random stream
 * delays (launch_cuda.t: the same on the real driver, LAUNCH_ON_CUDA):
 *   - kernels write and read handles; the results are checked on the host;
 *   - a kernel writing on stream A and another reading on stream B always
 *     see each other's data (the recorder fences them);
 *   - one block named as input and output is one READ_WRITE use;
 *   - a stale, released or foreign handle, or an offset outside the block,
 *     fails before anything is enqueued (the kernel's write never lands);
 *   - raw device pointers are refused by a strict actor, passed by a
 *     permissive one; a stack that cannot track refuses handles;
 *   - a kernel handle keeps working after a context rebuild.
 */
#include <string.h>

#include "devactor.h"
#include "support/data.h"
#include "tap.h"

#ifndef LAUNCH_ON_CUDA
#define LAUNCH_ON_CUDA 0
#endif

#define N 65536 /* u32 elements */

static const dv_dim3 grid = {64, 1, 1}, blk = {256, 1, 1};

static dv_actor *make_with(bool permissive, bool direct, bool check)
{
    dv_actor_config cfg;
    dv_actor *a = NULL;
    dv_actor_config_init(&cfg);
    cfg.backend = LAUNCH_ON_CUDA ? DV_BACKEND_CUDA : DV_BACKEND_SIM;
    cfg.streams = 3;
    cfg.sim_memory_bytes = 256 << 20;
    cfg.sim_seed = 99;
    cfg.sim_delay_max_us = 100;
    cfg.permissive = permissive;
    cfg.direct_alloc = direct;
    if (check)
        cfg.check_order = true; /* else as the configuration and DV_CHECK_ORDER say */
    return dv_actor_create(&cfg, &a) == DV_OK ? a : NULL;
}

static dv_actor *make(bool permissive, bool direct)
{
    return make_with(permissive, direct, false);
}

/* A task that fills the handle in its user data through dv_task_launch;
 * inner: what that call answered. */
typedef struct task_fill {
    dv_kernel *fill;
    dv_arg arg; /* the handle, as the launch names it */
    int inner;
} task_fill;

static int fill_task(const dv_task_ctx *ctx, void *user)
{
    task_fill *t = user;
    dv_arg args[] = {t->arg, dv_arg_u32(5), dv_arg_u64(N)};
    t->inner = dv_task_launch(ctx, t->fill, grid, blk, 0, args, 3);
    return t->inner;
}

static int answer_task(const dv_task_ctx *ctx, void *user)
{
    (void)ctx;
    return *(int *)user;
}

int main(void)
{
    static uint32_t host[N], back[N];
    dv_actor *a = make(false, false);
    dv_kernel *fill, *add, *sum, *bad;
    dv_ref x, y, z, s;
    const uint64_t n = N;

    if (LAUNCH_ON_CUDA && a == NULL && dv_last_error()->status == DV_ENODEVICE)
        skip_all("%s", dv_last_error()->message);
    plan(36);
    ok(a != NULL, "an actor (%s)", a ? dv_actor_backend_name(a) : dv_last_error()->message);
    if (a == NULL)
        return tap_done();
    is_status(dv_kernel_get(a, NULL, 0, "fill_u32", &fill), DV_OK, "kernel fill_u32");
    is_status(dv_kernel_get(a, NULL, 0, "add_u32", &add), DV_OK, "kernel add_u32");
    is_status(dv_kernel_get(a, NULL, 0, "checksum", &sum), DV_OK, "kernel checksum");
    dv_kernel *again = NULL;
    dv_kernel_get(a, NULL, 0, "fill_u32", &again);
    ok(again == fill, "the same name gives the same handle");
    bad = fill; /* a refusal leaves *out NULL */
    is_status(dv_kernel_get(a, NULL, 0, "no_such_kernel", &bad), DV_ENOKERNEL, "an unknown name");
    ok(bad == NULL, "... and leaves the caller's kernel variable NULL");
    dv_alloc(a, 4 * n, 0, "x", &x);
    dv_alloc(a, 4 * n, 1, "y", &y);
    dv_alloc(a, 4 * n, 2, "z", &z);
    dv_alloc(a, 64, 0, "sum", &s);

    /* -- values in, results out ------------------------------------------ */
    dv_arg fx[] = {dv_arg_ref(x, DV_WRITE, 0), dv_arg_u32(40), dv_arg_u64(n)};
    dv_arg fy[] = {dv_arg_ref(y, DV_WRITE, 0), dv_arg_u32(2), dv_arg_u64(n)};
    dv_arg az[] = {dv_arg_ref(z, DV_WRITE, 0), dv_arg_ref(x, DV_READ, 0), dv_arg_ref(y, DV_READ, 0),
                   dv_arg_u64(n)};
    is_status(dv_launch(a, fill, grid, blk, 0, 0, fx, 3), DV_OK, "fill x = 40 on stream 0");
    is_status(dv_launch(a, fill, grid, blk, 0, 1, fy, 3), DV_OK, "fill y = 2 on stream 1");
    is_status(dv_launch(a, add, grid, blk, 0, 2, az, 4), DV_OK, "z = x + y on stream 2");
    dv_copy_dtoh(a, back, z, 0, 4 * n, 0);
    ok(all_u32(back, N, 42), "z is 42 everywhere: stream 2 waited for streams 0 and 1");

    /* -- many rounds across streams -------------------------------------- */
    int wrong = 0;
    for (uint32_t r = 1; r <= 30; r++) {
        dv_arg w[] = {dv_arg_ref(x, DV_WRITE, 0), dv_arg_u32(r), dv_arg_u64(n)};
        dv_arg rd[] = {dv_arg_ref(y, DV_WRITE, 0), dv_arg_ref(x, DV_READ, 0),
                       dv_arg_ref(x, DV_READ, 0), dv_arg_u64(n)};
        dv_launch(a, fill, grid, blk, 0, r % 3, w, 3);       /* x = r */
        dv_launch(a, add, grid, blk, 0, (r + 1) % 3, rd, 4); /* y = x + x */
        dv_copy_dtoh(a, back, y, 0, 4 * n, (r + 2) % 3);
        wrong += !all_u32(back, N, 2 * r);
    }
    is_int(wrong, 0, "30 rounds of write on one stream, read on another: always right");

    /* -- a block as input and output ------------------------------------- */
    dv_arg inplace[] = {dv_arg_ref(x, DV_WRITE, 0), dv_arg_ref(x, DV_READ, 0),
                        dv_arg_ref(x, DV_READ, 0), dv_arg_u64(n)};
    is_status(dv_launch(a, add, grid, blk, 0, 1, inplace, 4), DV_OK, "x = x + x (one READ_WRITE)");
    dv_copy_dtoh(a, back, x, 0, 4 * n, 2);
    ok(all_u32(back, N, 60), "x doubled in place (60)");

    /* -- a checksum against the host ------------------------------------- */
    for (int i = 0; i < N; i++)
        host[i] = (uint32_t)i * 2654435761u;
    dv_copy_htod(a, x, 0, host, 4 * n, 0);
    dv_memset(a, s, 0, 0, 8, 1);
    dv_arg cs[] = {dv_arg_ref(x, DV_READ, 0), dv_arg_u64(n), dv_arg_ref(s, DV_READ_WRITE, 0)};
    is_status(dv_launch(a, sum, grid, blk, 0, 2, cs, 3), DV_OK, "checksum(x) on stream 2");
    uint64_t got = 0;
    dv_copy_dtoh(a, &got, s, 0, 8, 0);
    is_u64(got, host_checksum(host, N), "the checksum equals the host's");

    /* -- refused before anything is enqueued ----------------------------- */
    dv_actor_stats st0, st1;
    dv_actor_stats_get(a, &st0);
    dv_ref stale = {x.bits ^ 1};
    dv_arg fs[] = {dv_arg_ref(y, DV_WRITE, 0), dv_arg_u32(7), dv_arg_ref(stale, DV_READ, 0)};
    is_status(dv_launch(a, fill, grid, blk, 0, 0, fs, 3), DV_ESTALE, "a stale handle: DV_ESTALE");
    dv_arg off[] = {dv_arg_ref(y, DV_WRITE, 4 * n), dv_arg_u32(7), dv_arg_u64(1)};
    is_status(dv_launch(a, fill, grid, blk, 0, 0, off, 3), DV_EINVAL,
              "an offset at the block's end: DV_EINVAL");
    dv_arg raw[] = {dv_arg_ptr(0x1000), dv_arg_u32(7), dv_arg_u64(1)};
    is_status(dv_launch(a, fill, grid, blk, 0, 0, raw, 3), DV_ESTREAM_MISUSE,
              "a raw pointer in a strict actor: DV_ESTREAM_MISUSE");
    is_status(dv_launch(a, fill, grid, blk, 0, 9, fy, 3), DV_EINVAL, "an unknown stream");
    is_status(dv_launch(a, fill, (dv_dim3){0, 1, 1}, blk, 0, 0, fy, 3), DV_EINVAL, "a zero grid");
    dv_copy_dtoh(a, back, y, 0, 4 * n, 0);
    dv_actor_stats_get(a, &st1);
    ok(st1.launches == st0.launches && all_u32(back, N, 60),
       "none of them was enqueued: y still holds 60, no launch counted");

    /* -- another device's handle ----------------------------------------- */
    dv_actor *other = make(false, false);
    dv_ref foreign;
    dv_alloc(other, 64, 0, "foreign", &foreign);
    dv_arg fo[] = {dv_arg_ref(foreign, DV_WRITE, 0), dv_arg_u32(1), dv_arg_u64(16)};
    is_status(dv_launch(a, fill, grid, blk, 0, 0, fo, 3), DV_EINVAL,
              "another actor's handle: DV_EINVAL");
    dv_ref_release(foreign);
    dv_actor_destroy(other);

    /* -- a task launches only on handles it declared ---------------------- */
    {
        int rc = dv_memset(a, y, 0, 0, 4 * n, 0);
        if (rc == DV_OK)
            rc = dv_sync(a, 0);
        task_fill t = {fill, dv_arg_ref(y, DV_WRITE, 0), -1};
        dv_arg declared_x[] = {dv_arg_ref(x, DV_WRITE, 0)};
        int task_rc = rc == DV_OK ? dv_task(a, fill_task, &t, 1, declared_x, 1) : rc;
        dv_copy_dtoh(a, back, y, 0, 4 * n, 2);
        ok(t.inner == DV_EHAZARD && task_rc == DV_EHAZARD && all_u32(back, N, 0),
           "a task's launch on a handle it did not declare: DV_EHAZARD (%s, the task %s), "
           "nothing written",
           dv_err_name(t.inner), dv_err_name(task_rc));
        dv_arg declared_read[] = {dv_arg_ref(y, DV_READ, 0)};
        t.inner = -1;
        task_rc = dv_task(a, fill_task, &t, 1, declared_read, 1);
        bool says = strstr(dv_last_error()->message, "declared this handle's range DV_READ only");
        dv_copy_dtoh(a, back, y, 0, 4 * n, 2);
        ok(t.inner == DV_EHAZARD && task_rc == DV_EHAZARD && says && all_u32(back, N, 0),
           "... on one it declared DV_READ only, to write it: DV_EHAZARD (%s), said, nothing "
           "written",
           dv_err_name(t.inner));
        dv_arg declared_y[] = {dv_arg_ref(y, DV_READ_WRITE, 0)};
        task_rc = dv_task(a, fill_task, &t, 1, declared_y, 1);
        dv_copy_dtoh(a, back, y, 0, 4 * n, 2);
        ok(t.inner == DV_OK && task_rc == DV_OK && all_u32(back, N, 5),
           "... on one it declared DV_READ_WRITE: it runs (%s)", dv_err_name(task_rc));
    }

    /* -- a kernel handle across a rebuild -------------------------------- */
    dv_ref_release(x);
    dv_ref_release(y);
    dv_ref_release(z);
    dv_ref_release(s);
    is_status(dv_actor_reset(a), DV_OK, "reset the context");
    dv_ref w;
    dv_alloc(a, 4 * n, 0, "after", &w);
    dv_arg fw[] = {dv_arg_ref(w, DV_WRITE, 0), dv_arg_u32(9), dv_arg_u64(n)};
    is_status(dv_launch(a, fill, grid, blk, 0, 1, fw, 3), DV_OK,
              "the kernel handle from before the reset launches");
    dv_copy_dtoh(a, back, w, 0, 4 * n, 2);
    ok(all_u32(back, N, 9), "... and its result is right");
    dv_ref_release(w);
    {
        /* A task that fails counts as a failure; one that answers what is
         * no status is DV_EINVAL. */
        dv_actor_stats t0, t1;
        dv_actor_stats_get(a, &t0);
        int answer = DV_EIO;
        int rc1 = dv_task(a, answer_task, &answer, 0, NULL, 0);
        dv_future f;
        dv_future_init(&f, 0);
        int rc2 = dv_task_async(a, answer_task, &answer, 1, NULL, 0, &f);
        rc2 = rc2 == DV_OK ? dv_future_wait(&f) : rc2;
        dv_actor_stats_get(a, &t1);
        ok(rc1 == DV_EIO && rc2 == DV_EIO && t1.failures == t0.failures + 2,
           "two tasks that failed (%s, %s): failures counts them (%llu more)", dv_err_name(rc1),
           dv_err_name(rc2), (unsigned long long)(t1.failures - t0.failures));
        answer = 12345;
        rc1 = dv_task(a, answer_task, &answer, 0, NULL, 0);
        ok(rc1 == DV_EINVAL && strstr(dv_last_error()->message, "12345") != NULL,
           "a task answering 12345: DV_EINVAL (%s)", dv_last_error()->message);
    }
    dv_actor_destroy(a);

    /* -- permissive, and a stack that cannot track ----------------------- */
    dv_actor *p = make(true, false);
    dv_ref q;
    dv_ref_info info;
    dv_kernel *pf;
    dv_alloc(p, 4 * n, 0, "q", &q);
    dv_ref_access(q, &info);
    dv_kernel_get(p, NULL, 0, "fill_u32", &pf);
    dv_arg pr[] = {dv_arg_ptr(info.ptr), dv_arg_u32(5), dv_arg_u64(n)};
    is_status(dv_launch(p, pf, grid, blk, 0, 0, pr, 3), DV_OK,
              "a permissive actor launches a raw pointer, untracked");
    dv_copy_dtoh(p, back, q, 0, 4 * n, 0); /* same stream: ordered */
    ok(all_u32(back, N, 5), "... and the kernel ran");
    dv_ref_release(q);
    dv_actor_destroy(p);

    dv_actor *d = make(false, true);
    dv_ref dq;
    dv_kernel *df;
    dv_alloc(d, 4 * n, 0, "dq", &dq);
    dv_kernel_get(d, NULL, 0, "fill_u32", &df);
    dv_arg dr[] = {dv_arg_ref(dq, DV_WRITE, 0), dv_arg_u32(5), dv_arg_u64(n)};
    is_status(dv_launch(d, df, grid, blk, 0, 0, dr, 3), DV_ESTREAM_MISUSE,
              "an actor on the direct (untracked) stack refuses handles");
    dv_ref_release(dq);
    dv_actor_destroy(d);

    /* -- with the checker on, a raw pointer lands in what the task
     * declared ----------------------------------------------------------- */
    {
        dv_actor *c = make_with(false, false, true);
        dv_kernel *cf = NULL;
        dv_ref v = DV_REF_NULL;
        dv_ref_info vi = {0};
        int rc = c != NULL ? DV_OK : DV_ENODEVICE;
        if (rc == DV_OK)
            rc = dv_kernel_get(c, NULL, 0, "fill_u32", &cf);
        if (rc == DV_OK)
            rc = dv_alloc(c, 4 * n, 0, "v", &v);
        if (rc == DV_OK)
            rc = dv_memset(c, v, 0, 0, 4 * n, 0);
        if (rc == DV_OK)
            rc = dv_ref_access(v, &vi);
        task_fill t = {cf, dv_arg_ptr_access(vi.ptr, DV_WRITE), -1};
        int task_rc = rc == DV_OK ? dv_task(c, fill_task, &t, 1, NULL, 0) : rc;
        ok(t.inner == DV_EHAZARD && task_rc == DV_EHAZARD,
           "checker on: a task's launch writing through a raw pointer into a block it did not "
           "declare: DV_EHAZARD (%s, the task %s)",
           dv_err_name(t.inner), dv_err_name(task_rc));
        dv_arg declared_v[] = {dv_arg_ref(v, DV_WRITE, 0)};
        t.inner = -1;
        task_rc = rc == DV_OK ? dv_task(c, fill_task, &t, 1, declared_v, 1) : rc;
        if (task_rc == DV_OK)
            task_rc = dv_copy_dtoh(c, back, v, 0, 4 * n, 0);
        ok(t.inner == DV_OK && task_rc == DV_OK && all_u32(back, N, 5),
           "... into one it declared DV_WRITE: it runs (%s)", dv_err_name(task_rc));
        dv_ref_release(v);
        if (c != NULL)
            dv_actor_destroy(c);
    }
    return tap_done();
}
