/*
 * The sim's fault injection: the Nth allocation, a chosen code from a
 * chosen call, recoverable and process-fatal context poison (by call and by
 * a real illegal-address kernel), and a slow stream.
 */
#include "driver/sim.h"
#include "tap.h"

#define MIB (UINT64_C(1) << 20)

static dv_driver *open_sim(int devices, uint64_t fail_nth, bool recoverable_kernels)
{
    dv_driver_config cfg;
    dv_driver *drv = NULL;
    dv__driver_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    cfg.sim.devices = devices;
    cfg.sim.memory_bytes = 64 * MIB;
    cfg.sim.seed = 7;
    cfg.sim.fail_alloc_nth = fail_nth;
    cfg.sim.kernel_faults_recoverable = recoverable_kernels;
    if (dv__driver_open(&cfg, &drv) != DV_OK)
        return NULL;
    return drv;
}

static int launch_illegal(dv_drv_ctx *ctx, dv_drv_stream *s)
{
    const void *image;
    size_t bytes;
    dv_drv_module *mod;
    dv_drv_func *f;
    uint64_t addr = 0x10; /* unmapped on every device */
    void *params[] = {&addr};
    int rc;
    dv__drv_builtin_image(dv__drv_ctx_device(ctx) >= 0 ? ((dv_drv_obj *)ctx)->drv : NULL, &image,
                         &bytes);
    if ((rc = dv__drv_module_load(ctx, image, bytes, &mod)) != DV_OK)
        return rc;
    if ((rc = dv__drv_func_get(mod, "illegal_address", &f)) != DV_OK)
        return rc;
    return dv__drv_launch(f, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, s, params);
}

static void test_alloc_faults(void)
{
    dv_driver *drv = open_sim(1, 3, false);
    dv_drv_ctx *ctx;
    dv_drv_stream *s;
    dv_dptr p[4];

    ok(drv != NULL, "open sim with fail_alloc_nth = 3");
    dv__drv_ctx_retain(drv, 0, &ctx);
    dv__drv_stream_create(ctx, &s);
    is_status(dv__drv_mem_alloc(ctx, MIB, &p[0]), DV_OK, "allocation 1 succeeds");
    is_status(dv__drv_mem_alloc_async(s, MIB, &p[1]), DV_OK, "allocation 2 succeeds");
    is_status(dv__drv_mem_alloc(ctx, MIB, &p[2]), DV_EDEVICE_OOM, "allocation 3 fails with OOM");
    ok(dv_last_error()->driver_code == DV_CU_OUT_OF_MEMORY && dv_last_error()->requested == MIB,
       "detail: %s, requested %llu", dv_last_error()->driver_name,
       (unsigned long long)dv_last_error()->requested);
    is_status(dv__drv_mem_alloc(ctx, MIB, &p[2]), DV_OK, "allocation 4 succeeds");
    is_status(dv__sim_fail_alloc_nth(drv, 2), DV_OK, "arm: the 2nd allocation from now fails");
    is_status(dv__drv_mem_alloc_async(s, MIB, &p[3]), DV_OK, "next allocation succeeds");
    dv_dptr q;
    is_status(dv__drv_mem_alloc_async(s, MIB, &q), DV_EDEVICE_OOM, "the one after fails");
    is_status(dv__drv_mem_alloc(ctx, 100 * MIB, &q), DV_EDEVICE_OOM,
              "more than the 64 MiB device is OOM");
    dv__drv_mem_free(ctx, p[0]);
    dv__drv_mem_free_async(s, p[1]);
    dv__drv_mem_free(ctx, p[2]);
    dv__drv_mem_free_async(s, p[3]);
    dv__drv_stream_sync(s);
    is_u64(dv__sim_allocated_bytes(drv, 0), 0, "every byte came back");
    dv__drv_stream_destroy(s);
    dv__drv_ctx_release(ctx);
    dv__driver_close(drv);
}

static void test_inject(void)
{
    dv_driver *drv = open_sim(1, 0, false);
    dv_drv_ctx *ctx;
    dv_drv_stream *s;
    dv_dptr p;
    uint32_t v[16] = {0};

    dv__drv_ctx_retain(drv, 0, &ctx);
    dv__drv_stream_create(ctx, &s);
    dv__drv_mem_alloc(ctx, sizeof(v), &p);
    is_status(dv__sim_inject(drv, DV_CALL_MEMCPY_HTOD, 2, DV_CU_UNKNOWN), DV_OK,
              "arm: the 2nd memcpy_htod returns CUDA_ERROR_UNKNOWN");
    is_status(dv__drv_memcpy_htod(s, p, v, sizeof(v)), DV_OK, "1st memcpy_htod succeeds");
    is_status(dv__drv_memcpy_htod(s, p, v, sizeof(v)), DV_EDRIVER, "2nd is EDRIVER");
    ok(dv_last_error()->driver_code == DV_CU_UNKNOWN &&
           strcmp(dv_last_error()->call, "memcpy_htod_async") == 0,
       "detail names the call and the code: %s", dv_last_error()->message);
    is_status(dv__drv_memcpy_htod(s, p, v, sizeof(v)), DV_OK, "3rd succeeds (one-shot)");
    is_status(dv__sim_inject(drv, DV_CALL_STREAM_SYNC, 1, DV_CU_ILLEGAL_ADDRESS), DV_OK,
              "arm: next stream_sync returns ILLEGAL_ADDRESS");
    is_status(dv__drv_stream_sync(s), DV_ECONTEXT_LOST, "... which maps to ECONTEXT_LOST");
    is_status(dv__sim_inject(drv, DV_CALL__COUNT, 1, 1), DV_EINVAL, "inject(bad call) is EINVAL");
    dv__drv_mem_free(ctx, p);
    dv__drv_stream_destroy(s);
    dv__drv_ctx_release(ctx);
    dv__driver_close(drv);
}

static void test_recoverable_poison(void)
{
    dv_driver *drv = open_sim(2, 0, false);
    dv_drv_ctx *c0, *c1;
    dv_drv_stream *s0, *s1;
    dv_dptr p;

    dv__drv_ctx_retain(drv, 0, &c0);
    dv__drv_ctx_retain(drv, 1, &c1);
    dv__drv_stream_create(c0, &s0);
    dv__drv_stream_create(c1, &s1);
    is_status(dv__sim_poison(drv, 0, DV_SIM_POISON_RECOVERABLE, 0), DV_OK,
              "poison device 0 (recoverable)");
    is_status(dv__drv_mem_alloc(c0, MIB, &p), DV_ECONTEXT_LOST, "device 0: allocation fails");
    is_status(dv__drv_stream_sync(s0), DV_ECONTEXT_LOST, "device 0: sync fails");
    is_int(dv_last_error()->driver_code, DV_CU_LAUNCH_FAILED, "with LAUNCH_FAILED");
    is_status(dv__drv_mem_alloc(c1, MIB, &p), DV_OK, "device 1 is unaffected");
    dv__drv_mem_free(c1, p);
    is_status(dv__drv_ctx_reset(c0), DV_OK, "reset device 0");
    is_status(dv__drv_stream_sync(s0), DV_EINVAL, "the old stream is dead");
    is_status(dv__drv_stream_create(c0, &s0), DV_OK, "a new stream on device 0");
    is_status(dv__drv_mem_alloc(c0, MIB, &p), DV_OK, "device 0 allocates again");
    dv__drv_mem_free(c0, p);
    dv__drv_stream_destroy(s0);
    dv__drv_stream_destroy(s1);
    dv__drv_ctx_release(c0);
    dv__drv_ctx_release(c1);
    dv__driver_close(drv);
}

static void test_fatal_kernel(void)
{
    dv_driver *drv = open_sim(2, 0, false);
    dv_drv_ctx *c0, *c1, *again = NULL;
    dv_drv_stream *s0, *s1;
    dv_dptr p;

    dv__drv_ctx_retain(drv, 0, &c0);
    dv__drv_ctx_retain(drv, 1, &c1);
    dv__drv_stream_create(c0, &s0);
    dv__drv_stream_create(c1, &s1);
    is_status(launch_illegal(c0, s0), DV_OK, "illegal_address kernel enqueues");
    is_status(dv__drv_stream_sync(s0), DV_ECONTEXT_LOST, "sync reports the fault");
    is_int(dv_last_error()->driver_code, DV_CU_ILLEGAL_ADDRESS, "as ILLEGAL_ADDRESS");
    is_status(dv__drv_mem_alloc(c1, MIB, &p), DV_ECONTEXT_LOST,
              "the other device fails too (process-fatal)");
    is_status(dv__drv_ctx_reset(c0), DV_OK, "reset of device 0 'succeeds'");
    is_status(dv__drv_ctx_retain(drv, 0, &again), DV_ECONTEXT_LOST,
              "but no new context on device 0");
    is_status(dv__drv_ctx_retain(drv, 1, &again), DV_ECONTEXT_LOST, "nor on device 1");
    is_status(dv__drv_stream_destroy(s1), DV_ECONTEXT_LOST, "destroy reports the error");
    is_status(dv__drv_stream_sync(s1), DV_EINVAL, "but the handle is gone all the same");
    dv__drv_ctx_release(c0);
    dv__drv_ctx_release(c1);
    dv__driver_close(drv);
    ok(true, "the poisoned driver closed without hanging");
}

static void test_recoverable_kernel(void)
{
    dv_driver *drv = open_sim(2, 0, true);
    dv_drv_ctx *c0, *c1;
    dv_drv_stream *s0, *s1;
    dv_dptr p;

    dv__drv_ctx_retain(drv, 0, &c0);
    dv__drv_ctx_retain(drv, 1, &c1);
    dv__drv_stream_create(c0, &s0);
    dv__drv_stream_create(c1, &s1);
    launch_illegal(c0, s0);
    is_status(dv__drv_stream_sync(s0), DV_ECONTEXT_LOST,
              "kernel fault with recoverable kernel faults: ECONTEXT_LOST");
    is_status(dv__drv_mem_alloc(c1, MIB, &p), DV_OK, "device 1 is unaffected");
    dv__drv_mem_free(c1, p);
    is_status(dv__drv_ctx_reset(c0), DV_OK, "reset device 0");
    is_status(dv__drv_stream_create(c0, &s0), DV_OK, "device 0 works after the reset");
    is_int(dv__sim_sticky_code(drv, 0), 0, "no sticky code left");
    dv__drv_stream_destroy(s0);
    dv__drv_stream_destroy(s1);
    dv__drv_ctx_release(c0);
    dv__drv_ctx_release(c1);
    dv__driver_close(drv);
}

/* fill_u32 at an address that is not a multiple of 4: the GPU faults
 * with MISALIGNED_ADDRESS, and so does the sim's twin (it stores
 * nothing). */
static void test_misaligned_kernel(void)
{
    dv_driver *drv = open_sim(1, 0, true);
    dv_drv_ctx *ctx;
    dv_drv_stream *s;
    dv_dptr p;
    const void *image;
    size_t bytes;
    dv_drv_module *mod;
    dv_drv_func *f;
    uint32_t v = 0x01020304u, got[2] = {0, 0};
    uint64_t n = 2;

    dv__drv_ctx_retain(drv, 0, &ctx);
    dv__drv_stream_create(ctx, &s);
    dv__drv_mem_alloc(ctx, 4096, &p);
    dv__drv_memset_d8(s, p, 0, 4096);
    dv__drv_builtin_image(drv, &image, &bytes);
    int rc = dv__drv_module_load(ctx, image, bytes, &mod);
    if (rc == DV_OK)
        rc = dv__drv_func_get(mod, "fill_u32", &f);
    dv_dptr at = p + 1;
    void *params[] = {&at, &v, &n};
    if (rc == DV_OK)
        rc = dv__drv_launch(f, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, s, params);
    is_status(rc, DV_OK, "fill_u32 at a misaligned address enqueues");
    is_status(dv__drv_stream_sync(s), DV_ECONTEXT_LOST, "sync reports the fault");
    is_int(dv_last_error()->driver_code, DV_CU_MISALIGNED_ADDRESS, "as MISALIGNED_ADDRESS");
    is_status(dv__drv_ctx_reset(ctx), DV_OK, "reset the device");
    dv__drv_stream_create(ctx, &s);
    dv__drv_mem_alloc(ctx, 4096, &p);
    dv__drv_memset_d8(s, p, 0, 4096);
    n = 0;
    at = p + 1;
    rc = dv__drv_module_load(ctx, image, bytes, &mod);
    if (rc == DV_OK)
        rc = dv__drv_func_get(mod, "fill_u32", &f);
    if (rc == DV_OK)
        rc = dv__drv_launch(f, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, s, params);
    if (rc == DV_OK)
        rc = dv__drv_stream_sync(s);
    is_status(rc, DV_OK, "no element: nothing stored, no fault");
    n = 2;
    at = p + 4;
    if (rc == DV_OK)
        rc = dv__drv_launch(f, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, s, params);
    if (rc == DV_OK)
        rc = dv__drv_memcpy_dtoh(s, got, p + 4, sizeof(got));
    if (rc == DV_OK)
        rc = dv__drv_stream_sync(s);
    ok(rc == DV_OK && got[0] == v && got[1] == v, "aligned, it fills (%s)", dv_err_name(rc));
    dv__drv_stream_destroy(s);
    dv__drv_ctx_release(ctx);
    dv__driver_close(drv);
}

static void test_slow_stream(void)
{
    dv_driver *drv = open_sim(1, 0, false);
    dv_drv_ctx *ctx;
    dv_drv_stream *slow, *fast;
    dv_drv_event *ev_slow;
    dv_dptr p, q;
    bool done = true;

    dv__drv_ctx_retain(drv, 0, &ctx);
    dv__drv_stream_create(ctx, &slow);
    dv__drv_stream_create(ctx, &fast);
    dv__drv_event_create(ctx, 0, &ev_slow);
    dv__drv_mem_alloc(ctx, 4096, &p);
    dv__drv_mem_alloc(ctx, 4096, &q);
    is_status(dv__sim_stream_set_delay(slow, 500000), DV_OK, "slow one stream by 0.5 s per op");
    dv__drv_memset_d8(slow, p, 1, 4096);
    dv__drv_event_record(ev_slow, slow);
    dv__drv_memset_d8(fast, q, 2, 4096);
    dv__drv_stream_sync(fast);
    dv__drv_event_query(ev_slow, &done);
    ok(!done, "the fast stream finished while the slow one had not");
    is_status(dv__drv_event_sync(ev_slow), DV_OK, "the slow stream finishes");
    is_status(dv__sim_stream_set_delay(NULL, 1), DV_EINVAL, "stream_set_delay(NULL) is EINVAL");
    dv__drv_event_destroy(ev_slow);
    dv__drv_mem_free(ctx, p);
    dv__drv_mem_free(ctx, q);
    dv__drv_stream_destroy(slow);
    dv__drv_stream_destroy(fast);
    dv__drv_ctx_release(ctx);
    dv__driver_close(drv);
}

static void test_sim_bounds(void)
{
    dv_driver *drv = open_sim(1, 0, false);
    dv_drv_ctx *ctx;
    dv_drv_stream *s;
    dv_dptr p;
    uint8_t buf[512] = {0};

    dv__drv_ctx_retain(drv, 0, &ctx);
    dv__drv_stream_create(ctx, &s);
    dv__drv_mem_alloc(ctx, 300, &p);
    is_status(dv__drv_memcpy_htod(s, p, buf, 300), DV_OK, "copy of the whole allocation");
    is_status(dv__drv_memcpy_htod(s, p + 1, buf, 300), DV_EINVAL,
              "a copy running past the allocation is EINVAL");
    is_status(dv__drv_memcpy_htod(s, p + (UINT64_C(1) << 36), buf, 4), DV_EINVAL,
              "a copy to unallocated memory is EINVAL");
    is_status(dv__drv_mem_free_async(s, p + 8), DV_EINVAL, "free of an interior pointer is EINVAL");
    is_status(dv__drv_mem_free_async(s, p), DV_OK, "stream-ordered free");
    is_status(dv__drv_mem_free_async(s, p), DV_EINVAL, "stream-ordered double free is EINVAL");
    is_status(dv__drv_memcpy_htod(s, p, buf, 4), DV_EINVAL, "a copy into freed memory is EINVAL");
    dv__drv_stream_sync(s);
    dv__drv_stream_destroy(s);
    dv__drv_ctx_release(ctx);
    dv__driver_close(drv);
}

/* Like the driver's pool: memory freed on a stream is that stream's again
 * at once, and another stream's only once the stream reached the free. */
static void test_stream_ordered_reuse(void)
{
    dv_driver *drv = open_sim(1, 0, false);
    dv_drv_ctx *ctx;
    dv_drv_stream *a, *b;
    dv_dptr p, q, r;

    dv__drv_ctx_retain(drv, 0, &ctx);
    dv__drv_stream_create(ctx, &a);
    dv__drv_stream_create(ctx, &b);
    dv__drv_mem_alloc_async(a, 4096, &p);
    dv__sim_stream_set_delay(a, 100000); /* a is 0.1 s behind from here on */
    dv__drv_memset_d8(a, p, 1, 4096);
    dv__drv_mem_free_async(a, p);
    is_status(dv__drv_mem_alloc_async(b, 4096, &q), DV_OK, "another stream allocates");
    ok(q != p, "... and does not get the memory a has not reached the free of");
    is_status(dv__drv_mem_alloc_async(a, 4096, &r), DV_OK, "the freeing stream allocates");
    ok(r == p, "... and gets the same memory back at once");
    dv__sim_stream_set_delay(a, 0);
    dv__drv_mem_free_async(a, r);
    dv__drv_mem_free_async(b, q);
    dv__drv_stream_sync(a);
    dv__drv_stream_sync(b);
    is_u64(dv__sim_allocated_bytes(drv, 0), 0, "all of it returns");
    dv__drv_stream_destroy(a);
    dv__drv_stream_destroy(b);
    dv__drv_ctx_release(ctx);
    dv__driver_close(drv);
}

int main(void)
{
    plan(65);
    test_stream_ordered_reuse();
    test_alloc_faults();
    test_inject();
    test_recoverable_poison();
    test_fatal_kernel();
    test_recoverable_kernel();
    test_misaligned_kernel();
    test_slow_stream();
    test_sim_bounds();
    return tap_done();
}
