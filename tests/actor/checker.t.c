/*
 * The stream-order checker on correct programs, and its edges, on the sim
 * with random stream delays (checker_cuda.t: the same on the real driver,
 * CHECKER_ON_CUDA).  The planted mistakes are tests/hazards.
 *   - tracked launches, copies, memsets and tasks across streams, blocks
 *     freed and handed out again by the pool on other streams: no hazard,
 *     and the data is right;
 *   - reads of one block on two streams at once are not a hazard;
 *   - the host may touch a buffer once its copy completed (blocking call,
 *     or a waited future), not before;
 *   - a launch the checker refuses enqueues nothing; a task whose inner
 *     launch was refused answers DV_EHAZARD;
 *   - the checker is rebuilt with the context; DV_CHECK_ORDER=1 turns it
 *     on; bad input; without the checker nothing is counted;
 *   - batching: many launches on one stream make no event record and no
 *     wait; a launch on another stream reading all their blocks makes one
 *     record and one wait, not one per block.
 */
#include <stdlib.h>

#include "devactor_testing.h"
#include "devactor.h"
#include "support/data.h"
#include "tap.h"

#ifndef CHECKER_ON_CUDA
#define CHECKER_ON_CUDA 0
#endif

#define N     16384 /* u32 words per block */
#define BYTES ((uint64_t)N * 4)
#define NB    8

static const dv_dim3 grid = {32, 1, 1}, blk = {256, 1, 1};
static dv_kernel *fill, *add, *copy, *spin;

static dv_actor *make(bool check, bool permissive)
{
    dv_actor_config cfg;
    dv_actor *a = NULL;
    dv_actor_config_init(&cfg);
    cfg.backend = CHECKER_ON_CUDA ? DV_BACKEND_CUDA : DV_BACKEND_SIM;
    cfg.streams = 4;
    cfg.check_order = check;
    cfg.permissive = permissive;
    cfg.sim_memory_bytes = 256 << 20;
    cfg.sim_seed = 4242;
    cfg.sim_delay_max_us = 100;
    if (dv_actor_create(&cfg, &a) != DV_OK)
        return NULL;
    dv_kernel_get(a, NULL, 0, "fill_u32", &fill);
    dv_kernel_get(a, NULL, 0, "add_u32", &add);
    dv_kernel_get(a, NULL, 0, "copy", &copy);
    dv_kernel_get(a, NULL, 0, "spin", &spin);
    return a;
}

static uint64_t raw_of(dv_ref r)
{
    dv_ref_info info;
    return dv_ref_access(r, &info) == DV_OK ? info.ptr : 0;
}

static uint64_t hazards(dv_actor *a)
{
    dv_actor_stats st;
    return dv_actor_stats_get(a, &st) == DV_OK ? st.hazards : UINT64_MAX;
}

static int fill_ref(dv_actor *a, dv_ref r, uint32_t v, dv_stream s)
{
    dv_arg args[] = {dv_arg_ref(r, DV_WRITE, 0), dv_arg_u32(v), dv_arg_u64(N)};
    return dv_launch(a, fill, grid, blk, 0, s, args, 3);
}

/* Racing work is posted, not waited for: a thread that waited for an
 * operation is ordered after it, and then nothing would race. */
static dv_arg spin_args[8][1];
static dv_arg fill_args[8][3];
static dv_future racing[8];
static int nracing;

static void spin_ms(dv_actor *a, dv_stream s, unsigned ms)
{
    int i = nracing++;
    spin_args[i][0] = dv_arg_u64((uint64_t)ms * 1000000);
    dv_future_init(&racing[i], 0);
    dv_launch_async(a, spin, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, s, spin_args[i], 1,
                    &racing[i]);
}

static void fill_posted(dv_actor *a, dv_ref r, uint32_t v, dv_stream s)
{
    int i = nracing++;
    fill_args[i][0] = dv_arg_ref(r, DV_WRITE, 0);
    fill_args[i][1] = dv_arg_u32(v);
    fill_args[i][2] = dv_arg_u64(N);
    dv_future_init(&racing[i], 0);
    dv_launch_async(a, fill, grid, blk, 0, s, fill_args[i], 3, &racing[i]);
}

/* Wait for the racing work posted so far. */
static void racing_done(void)
{
    for (int i = 0; i < nracing; i++)
        dv_future_wait(&racing[i]);
    nracing = 0;
}

/* A task that copies its READ argument into its WRITE argument with a
 * kernel on its stream: it declares exactly what it does. */
static int task_copy(const dv_task_ctx *ctx, void *user)
{
    (void)user;
    dv_arg args[] = {dv_arg_ptr_access(ctx->arg[0], DV_WRITE),
                     dv_arg_ptr_access(ctx->arg[1], DV_READ), dv_arg_u64(BYTES)};
    return dv_task_launch(ctx, copy, grid, blk, 0, args, 3);
}

/* A task that writes its first argument although it declared a read. */
static int task_liar(const dv_task_ctx *ctx, void *user)
{
    int *inner = user;
    dv_arg args[] = {dv_arg_ptr_access(ctx->arg[0], DV_WRITE), dv_arg_u32(77), dv_arg_u64(N)};
    *inner = dv_task_launch(ctx, fill, grid, blk, 0, args, 3);
    return DV_OK; /* and pretends all went well */
}

static uint32_t host[N];

int main(void)
{
    dv_actor *a = make(true, false);
    if (CHECKER_ON_CUDA && a == NULL && dv_last_error()->status == DV_ENODEVICE)
        skip_all("%s", dv_last_error()->message);
    plan(32);
    ok(a != NULL, "an actor with the checker (%s)", a ? dv_actor_backend_name(a) : "none");
    if (a == NULL)
        return tap_done();
    dv_error_detail last;
    dv_actor_last_hazard(a, &last);
    ok(last.status == 0 && hazards(a) == 0, "no hazard yet");

    /* -- correct tracked work across streams: no hazard ------------------ */
    dv_ref x, y, z;
    dv_alloc(a, BYTES, 0, "x", &x);
    dv_alloc(a, BYTES, 1, "y", &y);
    dv_alloc(a, BYTES, 2, "z", &z);
    int wrong = 0, failed = 0;
    for (uint32_t r = 1; r <= 40; r++) {
        dv_stream s = r % 4;
        dv_arg az[] = {dv_arg_ref(z, DV_WRITE, 0), dv_arg_ref(x, DV_READ, 0),
                       dv_arg_ref(y, DV_READ, 0), dv_arg_u64(N)};
        failed += fill_ref(a, x, r, s) != DV_OK;
        failed += dv_memset(a, y, 0, 0, BYTES, (s + 1) % 4) != DV_OK;
        failed += dv_launch(a, add, grid, blk, 0, (s + 2) % 4, az, 4) != DV_OK;
        failed +=
            dv_task(a, task_copy, NULL, (s + 3) % 4,
                    (dv_arg[]){dv_arg_ref(y, DV_WRITE, 0), dv_arg_ref(z, DV_READ, 0)}, 2) != DV_OK;
        failed += dv_copy_dtoh(a, host, y, 0, BYTES, s) != DV_OK;
        wrong += !all_u32(host, N, r);
    }
    ok(failed == 0 && wrong == 0,
       "40 rounds of fill, memset, add, task, read back on rotating "
       "streams: right data (%d wrong, %d failed)",
       wrong, failed);
    ok(hazards(a) == 0, "and no hazard");
    dv_actor_stats st;
    dv_actor_stats_get(a, &st);
    ok(st.tasks == 40, "the statistics count 40 tasks (%llu)", (unsigned long long)st.tasks);

    /* -- the pool hands freed memory out again on other streams ---------- */
    failed = 0;
    for (int i = 0; i < 64; i++) {
        dv_ref t;
        failed += dv_alloc(a, BYTES, (dv_stream)(i % 4), "t", &t) != DV_OK;
        failed += fill_ref(a, t, (uint32_t)i, (dv_stream)((i + 1) % 4)) != DV_OK;
        dv_ref_release(t);
    }
    dv_sync(a, 0);
    ok(failed == 0 && hazards(a) == 0, "64 blocks written on one stream, freed, reused on "
                                       "another: no hazard");

    /* -- read-read across streams is fine -------------------------------- */
    dv_actor_destroy(a);
    a = make(true, true);
    dv_alloc(a, BYTES, 0, "x", &x);
    dv_alloc(a, BYTES, 0, "y", &y);
    dv_alloc(a, BYTES, 0, "z", &z);
    fill_ref(a, x, 5, 0);
    dv_sync(a, 0);
    dv_arg c1[] = {dv_arg_ref(y, DV_WRITE, 0), dv_arg_ptr_access(raw_of(x), DV_READ),
                   dv_arg_u64(BYTES)};
    dv_arg c2[] = {dv_arg_ref(z, DV_WRITE, 0), dv_arg_ptr_access(raw_of(x), DV_READ),
                   dv_arg_u64(BYTES)};
    is_status(dv_launch(a, copy, grid, blk, 0, 1, c1, 3), DV_OK, "a raw read of x on stream 1");
    is_status(dv_launch(a, copy, grid, blk, 0, 2, c2, 3), DV_OK,
              "a raw read of x on stream 2 at once: reads do not conflict");
    ok(hazards(a) == 0, "no hazard");

    /* -- a refused launch enqueues nothing ------------------------------- */
    dv_sync(a, 1);
    dv_sync(a, 2);
    dv_arg raw[] = {dv_arg_ptr(raw_of(x)), dv_arg_u32(9), dv_arg_u64(N)};
    spin_ms(a, 0, 20);
    fill_posted(a, x, 6, 0);
    is_status(dv_launch(a, fill, grid, blk, 0, 3, raw, 3), DV_EHAZARD,
              "a raw write of x on stream 3 while stream 0 writes it: DV_EHAZARD");
    racing_done();
    dv_actor_last_hazard(a, &last);
    ok(last.status == DV_EHAZARD && strstr(last.message, "stream 3") &&
           strstr(last.message, "stream 0") && strstr(last.message, "'x'"),
       "the report names both streams and the block");
    diag("%s", last.message);
    dv_copy_dtoh(a, host, x, 0, BYTES, 0);
    ok(all_u32(host, N, 6), "nothing was enqueued: x is 6, not 9");
    ok(hazards(a) == 1, "one hazard counted");

    /* -- the host and its buffers ---------------------------------------- */
    static uint32_t buf[N];
    is_status(dv_check_host_access(a, host, BYTES, DV_READ), DV_OK,
              "after a blocking copy the host may read its buffer");
    spin_ms(a, 0, 20);
    dv_future f;
    dv_future_init(&f, 0);
    dv_copy_dtoh_async(a, buf, x, 0, BYTES, 0, &f);
    racing_done();
    is_status(dv_check_host_access(a, buf, BYTES, DV_READ), DV_EHAZARD,
              "reading a buffer a device->host copy still writes: DV_EHAZARD");
    is_status(dv_future_wait(&f), DV_OK, "the copy completes");
    is_status(dv_check_host_access(a, buf, BYTES, DV_WRITE), DV_OK,
              "once its future was waited on, the host may write the buffer");
    is_status(dv_check_host_access(a, NULL, BYTES, DV_READ), DV_EINVAL, "a NULL buffer");
    is_status(dv_check_host_access(a, buf, BYTES, 0), DV_EINVAL, "no access");

    /* -- a task whose inner launch was refused --------------------------- */
    int inner = 0;
    spin_ms(a, 2, 20);
    dv_arg rd_x[] = {dv_arg_ref(y, DV_WRITE, 0), dv_arg_ref(x, DV_READ, 0), dv_arg_u64(BYTES)};
    dv_future rd_f;
    dv_future_init(&rd_f, 0);
    dv_launch_async(a, copy, grid, blk, 0, 2, rd_x, 3, &rd_f); /* stream 2 reads x, late */
    dv_sync(a, 1);
    /* Posted, and waited for only as far as ordered (its function has run
     * then): this thread is not ordered after it. */
    dv_future tf;
    dv_future_init(&tf, 0);
    dv_task_async(a, task_liar, &inner, 1, (dv_arg[]){dv_arg_ref(x, DV_READ, 0)}, 1, &tf);
    dv_future_wait_ordered(&tf);
    is_status(inner, DV_EHAZARD, "a task that declared a read and launched a write: its inner "
                                 "launch was refused");
    dv_future_wait(&rd_f);
    racing_done();
    /* One refused launch does not stop the rest of the task's work (nor,
     * on the sim, what ran before it): its declared read of x still
     * counts, so a write of x not ordered after stream 1 races with it. */
    for (dv_stream s = 0; s < 4; s++)
        if (s != 1)
            dv_sync(a, s);
    dv_arg wr_x[] = {dv_arg_ptr(raw_of(x)), dv_arg_u32(3), dv_arg_u64(N)};
    is_status(dv_launch(a, fill, grid, blk, 0, 3, wr_x, 3), DV_EHAZARD,
              "then a raw write of x on stream 3, not after stream 1: the refused task's "
              "declared read still counts");
    racing_done();
    /* Waiting for the failed task orders the thread after it, as for one
     * that succeeded: its failure is told once the device passed it. */
    is_status(dv_future_wait(&tf), DV_EHAZARD, "the task's future: DV_EHAZARD");
    is_status(dv_launch(a, fill, grid, blk, 0, 3, wr_x, 3), DV_OK,
              "after waiting for it, the same raw write of x on stream 3 is ordered");
    dv_sync(a, 1);
    racing_done();
    dv_task_ctx fake = {0};
    is_status(dv_task_launch(&fake, fill, grid, blk, 0, raw, 3), DV_EINVAL,
              "dv_task_launch outside a task");

    /* -- rebuilt with the context ---------------------------------------- */
    uint64_t before = hazards(a);
    dv_ref_release(x);
    dv_ref_release(y);
    dv_ref_release(z);
    is_status(dv_actor_reset(a), DV_OK, "reset");
    dv_alloc(a, BYTES, 0, "w", &x);
    raw[0] = dv_arg_ptr(raw_of(x));
    spin_ms(a, 0, 20);
    fill_posted(a, x, 1, 0);
    is_status(dv_launch(a, fill, grid, blk, 0, 1, raw, 3), DV_EHAZARD,
              "after a rebuild the checker still sees a raw write race");
    racing_done();
    ok(hazards(a) == before + 1, "counted across the rebuild");
    dv_ref_release(x);
    dv_actor_destroy(a);

    /* -- batching: one record and one wait for many launches ------------- */
    a = make(false, false);
    dv_ref b[NB];
    for (int i = 0; i < NB; i++)
        dv_alloc(a, BYTES, 0, "b", &b[i]);
    dv_arg wr[NB + 2], rd[NB + 2];
    for (int i = 0; i < NB; i++) {
        wr[i] = dv_arg_ref(b[i], DV_WRITE, 0);
        rd[i] = dv_arg_ref(b[i], DV_READ, 0);
    }
    dv_kernel *empty;
    dv_kernel_get(a, NULL, 0, "touch8", &empty);
    dv_sync(a, 0);
    uint64_t r0, w0, r1, w1, r2, w2;
    dv_driver *drv = dv__actor_driver(a);
    dv_actor_stats st0, st1;
    dv_actor_stats_get(a, &st0);
    dv__driver_order_counts(drv, &r0, &w0);
    dv_future fs[32];
    for (int i = 0; i < 32; i++) {
        dv_future_init(&fs[i], 0);
        dv_launch_async(a, empty, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, 0, wr, NB, &fs[i]);
    }
    for (int i = 0; i < 32; i++)
        dv_future_wait(&fs[i]);
    dv__driver_order_counts(drv, &r1, &w1);
    dv_actor_stats_get(a, &st1);
    /* The stats message is one more batch of its own. */
    uint64_t batches = st1.batches - st0.batches;
    ok(w1 == w0 && r1 - r0 <= batches,
       "32 launches writing %d blocks on one stream: no wait, and no record but one per batch "
       "for their futures (%llu records in %llu batches, %llu waits)",
       NB, (unsigned long long)(r1 - r0), (unsigned long long)batches,
       (unsigned long long)(w1 - w0));
    is_status(dv_launch(a, empty, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, 1, rd, NB), DV_OK,
              "a launch reading all %d blocks on stream 1", NB);
    dv__driver_order_counts(drv, &r2, &w2);
    ok(r2 - r1 == 2 && w2 - w1 == 1,
       "one event record and one wait for all of them, one record for the launch's completion "
       "(%llu, %llu)",
       (unsigned long long)(r2 - r1), (unsigned long long)(w2 - w1));
    ok(hazards(a) == 0 && dv_check_host_access(a, host, 4, DV_READ) == DV_OK,
       "without the checker: nothing counted, host access always fine");
    for (int i = 0; i < NB; i++)
        dv_ref_release(b[i]);
    dv_actor_destroy(a);

    /* -- DV_CHECK_ORDER=1 ------------------------------------------------ */
    setenv("DV_CHECK_ORDER", "1", 1);
    a = make(false, true);
    unsetenv("DV_CHECK_ORDER");
    dv_alloc(a, BYTES, 0, "v", &x);
    raw[0] = dv_arg_ptr(raw_of(x));
    spin_ms(a, 0, 20);
    fill_posted(a, x, 1, 0);
    is_status(dv_launch(a, fill, grid, blk, 0, 1, raw, 3), DV_EHAZARD,
              "DV_CHECK_ORDER=1 turns the checker on");
    racing_done();
    dv_ref_release(x);
    dv_actor_destroy(a);
    return tap_done();
}
