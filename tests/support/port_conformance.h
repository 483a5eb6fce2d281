/*
 * The device-port conformance suite: the same assertions against any
 * backend.  A test program opens a driver and calls port_conformance();
 * the plan is fixed (PORT_CONFORMANCE_TESTS); checks that need two devices
 * are reported as skipped where there is one.
 */
#ifndef DV_TESTS_PORT_CONFORMANCE_H
#define DV_TESTS_PORT_CONFORMANCE_H

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver/port.h"
#include "support/data.h"
#include "tap.h"

#define PORT_CONFORMANCE_TESTS 146
#define MIB                    (UINT64_C(1) << 20)

static bool all_u8(const uint8_t *p, uint64_t n, uint8_t v)
{
    for (uint64_t i = 0; i < n; i++)
        if (p[i] != v)
            return false;
    return true;
}

static void host_fn_count(void *arg)
{
    atomic_fetch_add((atomic_int *)arg, 1);
}

struct order_probe {
    atomic_int seq;
    int seen[3];
};

static void host_fn_order(void *arg)
{
    struct order_probe *p = arg;
    int i = atomic_fetch_add(&p->seq, 1);
    if (i < 3)
        p->seen[i] = i;
}

static dv_dim3 dim1(uint32_t x)
{
    return (dv_dim3){x, 1, 1};
}

/* Launch a kernel with up to 4 arguments. */
static int launch(dv_drv_func *f, dv_drv_stream *s, uint32_t blocks, void **params)
{
    return dv__drv_launch(f, dim1(blocks), dim1(256), 0, s, params);
}

static void port_conformance(dv_driver *drv)
{
    const uint64_t n = 1 << 16; /* u32 elements */
    const uint64_t bytes = n * 4;
    uint32_t *host = calloc(n, 4), *back = calloc(n, 4);
    uint8_t *back8 = calloc(bytes, 1);
    dv_drv_ctx *ctx = NULL, *ctx1 = NULL;
    dv_drv_stream *a = NULL, *b = NULL, *dead_stream = NULL;
    dv_drv_event *ev = NULL, *dead_event = NULL;
    dv_drv_module *mod = NULL;
    dv_drv_func *f_fill = NULL, *f_add = NULL, *f_sum = NULL, *f_copy = NULL, *f_spin = NULL;
    dv_dptr x = 0, y = 0, z = 0, sum = 0, big = 0;
    int count = 0;
    dv_device_info info;

    /* -- devices ---------------------------------------------------------- */
    is_status(dv__drv_device_count(drv, &count), DV_OK, "device_count");
    ok(count >= 1, "at least one device (%d)", count);
    is_status(dv__drv_device_info(drv, 0, &info), DV_OK, "device_info(0)");
    ok(info.name[0] != '\0' && info.total_bytes > 0, "device 0: %s, %llu MiB, cc %d.%d", info.name,
       (unsigned long long)(info.total_bytes >> 20), info.cc_major, info.cc_minor);
    is_status(dv__drv_device_info(drv, count, &info), DV_EINVAL, "device_info(count) is EINVAL");
    is_status(dv__drv_device_info(drv, -1, &info), DV_EINVAL, "device_info(-1) is EINVAL");
    is_status(dv__drv_device_info(drv, 0, NULL), DV_EINVAL, "device_info(NULL) is EINVAL");
    is_status(dv__drv_device_count(NULL, &count), DV_EINVAL, "device_count(NULL driver) is EINVAL");

    /* -- contexts --------------------------------------------------------- */
    is_status(dv__drv_ctx_retain(drv, 0, &ctx), DV_OK, "ctx_retain(0)");
    is_status(dv__drv_ctx_retain(drv, count + 7, &ctx1), DV_EINVAL,
              "ctx_retain(bad ordinal) is EINVAL");
    is_status(dv__drv_ctx_retain(drv, 0, NULL), DV_EINVAL, "ctx_retain(NULL out) is EINVAL");
    is_int(dv__drv_ctx_device(ctx), 0, "ctx_device names device 0");
    uint64_t free_b = 0, total_b = 0;
    is_status(dv__drv_mem_info(ctx, &free_b, &total_b), DV_OK, "mem_info");
    ok(total_b > 0 && free_b <= total_b, "mem_info: %llu of %llu MiB free",
       (unsigned long long)(free_b >> 20), (unsigned long long)(total_b >> 20));
    is_status(dv__drv_mem_info(NULL, &free_b, &total_b), DV_EINVAL, "mem_info(NULL ctx) is EINVAL");

    /* -- streams and allocation ------------------------------------------- */
    is_status(dv__drv_stream_create(ctx, &a), DV_OK, "stream_create a");
    is_status(dv__drv_stream_create(ctx, &b), DV_OK, "stream_create b");
    is_status(dv__drv_stream_create(NULL, &b), DV_EINVAL, "stream_create(NULL ctx) is EINVAL");
    is_status(dv__drv_stream_create(ctx, NULL), DV_EINVAL, "stream_create(NULL out) is EINVAL");
    is_status(dv__drv_mem_alloc(ctx, bytes, &x), DV_OK, "mem_alloc x");
    is_status(dv__drv_mem_alloc(ctx, bytes, &y), DV_OK, "mem_alloc y");
    ok(x % 256 == 0 && y % 256 == 0 && x != y, "allocations are 256-byte aligned and distinct");
    is_status(dv__drv_mem_alloc_async(a, bytes, &z), DV_OK, "mem_alloc_async z on a");
    is_status(dv__drv_mem_alloc(ctx, 64, &sum), DV_OK, "mem_alloc checksum word");
    is_status(dv__drv_mem_alloc(ctx, 0, &big), DV_EINVAL, "mem_alloc(0) is EINVAL");
    is_status(dv__drv_mem_alloc(ctx, DV_DRV_MAX_BYTES + 1, &big), DV_EINVAL,
              "mem_alloc(absurd) is EINVAL");
    is_status(dv__drv_mem_alloc(ctx, UINT64_C(1) << 47, &big), DV_EDEVICE_OOM,
              "mem_alloc(128 TiB) is EDEVICE_OOM");
    ok(dv_last_error()->requested == (UINT64_C(1) << 47) && dv_last_error()->driver_code == 2,
       "OOM detail: requested %llu, driver code %d (%s)",
       (unsigned long long)dv_last_error()->requested, dv_last_error()->driver_code,
       dv_last_error()->driver_name);
    is_status(dv__drv_mem_alloc_async(a, 0, &big), DV_EINVAL, "mem_alloc_async(0) is EINVAL");
    is_status(dv__drv_mem_alloc_async(NULL, 64, &big), DV_EINVAL,
              "mem_alloc_async(NULL stream) is EINVAL");
    is_status(dv__drv_mem_alloc(ctx, 64, NULL), DV_EINVAL, "mem_alloc(NULL out) is EINVAL");

    /* -- copies and sets, one stream: order ------------------------------- */
    for (uint64_t i = 0; i < n; i++)
        host[i] = (uint32_t)(i * 2654435761u);
    is_status(dv__drv_memcpy_htod(a, x, host, bytes), DV_OK, "memcpy_htod x");
    is_status(dv__drv_memcpy_dtod(a, y, x, bytes), DV_OK, "memcpy_dtod y <- x");
    is_status(dv__drv_memcpy_dtoh(a, back, y, bytes), DV_OK, "memcpy_dtoh y");
    is_status(dv__drv_stream_sync(a), DV_OK, "stream_sync a");
    ok(memcmp(host, back, bytes) == 0, "host -> x -> y -> host round trip is exact");

    is_status(dv__drv_memset_d8(a, x, 0x5A, bytes), DV_OK, "memset_d8");
    is_status(dv__drv_memcpy_dtoh(a, back8, x, bytes), DV_OK, "memcpy_dtoh after memset_d8");
    is_status(dv__drv_memset_d32(a, x, 0xC0FFEE01u, n), DV_OK, "memset_d32");
    is_status(dv__drv_memcpy_dtoh(a, back, x, bytes), DV_OK, "memcpy_dtoh after memset_d32");
    is_status(dv__drv_stream_sync(a), DV_OK, "stream_sync a");
    ok(all_u8(back8, bytes, 0x5A) && all_u32(back, n, 0xC0FFEE01u),
       "each read saw exactly the set before it (per-stream order)");

    /* Many ops on one stream: the last write wins, every read in order. */
    bool in_order = true;
    for (uint32_t k = 1; k <= 16; k++)
        dv__drv_memset_d32(a, x, k, n);
    dv__drv_memcpy_dtoh(a, back, x, bytes);
    dv__drv_stream_sync(a);
    in_order = all_u32(back, n, 16);
    ok(in_order, "16 sets then a read on one stream: the read sees the 16th");

    struct order_probe probe = {0};
    atomic_int calls = 0;
    is_status(dv__drv_launch_host_fn(a, host_fn_order, &probe), DV_OK, "launch_host_fn 1");
    dv__drv_launch_host_fn(a, host_fn_order, &probe);
    dv__drv_launch_host_fn(a, host_fn_order, &probe);
    dv__drv_launch_host_fn(a, host_fn_count, &calls);
    dv__drv_stream_sync(a);
    ok(atomic_load(&probe.seq) == 3 && probe.seen[0] == 0 && probe.seen[2] == 2 &&
           atomic_load(&calls) == 1,
       "host functions ran once each, in order");
    is_status(dv__drv_launch_host_fn(a, NULL, NULL), DV_EINVAL, "launch_host_fn(NULL fn) is EINVAL");

    /* -- bad input on copies and sets ------------------------------------- */
    is_status(dv__drv_memcpy_htod(NULL, x, host, bytes), DV_EINVAL, "memcpy_htod(NULL stream)");
    is_status(dv__drv_memcpy_htod(a, 0, host, bytes), DV_EINVAL, "memcpy_htod(NULL dst)");
    is_status(dv__drv_memcpy_htod(a, x, NULL, bytes), DV_EINVAL, "memcpy_htod(NULL src)");
    is_status(dv__drv_memcpy_htod(a, x, host, 0), DV_EINVAL, "memcpy_htod(0 bytes)");
    is_status(dv__drv_memcpy_htod(a, x, host, UINT64_MAX), DV_EINVAL, "memcpy_htod(absurd bytes)");
    is_status(dv__drv_memcpy_dtoh(a, NULL, x, bytes), DV_EINVAL, "memcpy_dtoh(NULL dst)");
    is_status(dv__drv_memcpy_dtoh(a, back, 0, bytes), DV_EINVAL, "memcpy_dtoh(NULL src)");
    is_status(dv__drv_memcpy_dtoh(a, back, x, 0), DV_EINVAL, "memcpy_dtoh(0 bytes)");
    is_status(dv__drv_memcpy_dtod(a, y, x, 0), DV_EINVAL, "memcpy_dtod(0 bytes)");
    is_status(dv__drv_memcpy_dtod(NULL, y, x, bytes), DV_EINVAL, "memcpy_dtod(NULL stream)");
    is_status(dv__drv_memset_d8(a, x, 1, 0), DV_EINVAL, "memset_d8(0 bytes)");
    is_status(dv__drv_memset_d8(a, 0, 1, 16), DV_EINVAL, "memset_d8(NULL dst)");
    is_status(dv__drv_memset_d32(a, x + 2, 1, 16), DV_EINVAL, "memset_d32(misaligned dst)");
    is_status(dv__drv_memset_d32(a, x, 1, UINT64_MAX / 2), DV_EINVAL, "memset_d32(absurd count)");

    /* -- events and cross-stream order ------------------------------------ */
    bool done = false;
    is_status(dv__drv_event_create(ctx, 0, &ev), DV_OK, "event_create");
    is_status(dv__drv_event_query(ev, &done), DV_OK, "event_query before any record");
    ok(done, "an event never recorded reads complete");
    is_status(dv__drv_event_sync(ev), DV_OK, "event_sync before any record returns");
    is_status(dv__drv_module_load(ctx, NULL, 0, &mod), DV_EINVAL, "module_load(NULL image)");
    {
        static const char junk[] = "this is not a cubin, fatbin or ptx image";
        is_status(dv__drv_module_load(ctx, junk, sizeof(junk), &mod), DV_EINVAL,
                  "module_load(junk) is EINVAL");
    }
    const void *image;
    size_t image_bytes;
    dv__drv_builtin_image(drv, &image, &image_bytes);
    ok(image != NULL && image_bytes > 0, "built-in kernel image present (%zu bytes)", image_bytes);
    is_status(dv__drv_module_load(ctx, image, image_bytes, &mod), DV_OK, "module_load(built-in)");
    is_status(dv__drv_func_get(mod, "fill_u32", &f_fill), DV_OK, "func_get fill_u32");
    is_status(dv__drv_func_get(mod, "add_u32", &f_add), DV_OK, "func_get add_u32");
    is_status(dv__drv_func_get(mod, "checksum", &f_sum), DV_OK, "func_get checksum");
    is_status(dv__drv_func_get(mod, "copy", &f_copy), DV_OK, "func_get copy");
    is_status(dv__drv_func_get(mod, "spin", &f_spin), DV_OK, "func_get spin");
    dv_drv_func *nofunc = NULL;
    is_status(dv__drv_func_get(mod, "no_such_kernel", &nofunc), DV_ENOKERNEL,
              "func_get(unknown name) is DV_ENOKERNEL");
    is_status(dv__drv_func_get(NULL, "fill_u32", &nofunc), DV_EINVAL, "func_get(NULL module)");

    /*
     * A slow write on a, an event, a wait on b, a read on b: b must see a's
     * write every time.  The spin kernel makes a slow on both backends.
     */
    int stale = 0;
    for (uint32_t it = 1; it <= 20; it++) {
        uint64_t ns = 200000;
        void *sp[] = {&ns};
        uint32_t v = 0xA0000000u + it;
        void *fp[] = {&x, &v, (void *)&n};
        dv__drv_memset_d32(b, x, 0, n);
        dv__drv_stream_sync(b);
        launch(f_spin, a, 1, sp);
        launch(f_fill, a, 64, fp);
        dv__drv_event_record(ev, a);
        dv__drv_stream_wait_event(b, ev);
        dv__drv_memcpy_dtoh(b, back, x, bytes);
        dv__drv_stream_sync(b);
        if (!all_u32(back, n, v))
            stale++;
    }
    is_int(stale, 0, "20 waits: stream b always saw stream a's write");
    is_status(dv__drv_event_query(ev, &done), DV_OK, "event_query after record");
    ok(done, "the recorded event is complete once b synced past its wait");

    is_status(dv__drv_event_record(NULL, a), DV_EINVAL, "event_record(NULL event)");
    is_status(dv__drv_event_record(ev, NULL), DV_EINVAL, "event_record(NULL stream)");
    is_status(dv__drv_stream_wait_event(a, NULL), DV_EINVAL, "stream_wait_event(NULL event)");
    is_status(dv__drv_stream_wait_event(NULL, ev), DV_EINVAL, "stream_wait_event(NULL stream)");
    is_status(dv__drv_event_query(ev, NULL), DV_EINVAL, "event_query(NULL out)");
    is_status(dv__drv_stream_query(a, NULL), DV_EINVAL, "stream_query(NULL out)");

    /* -- kernels ---------------------------------------------------------- */
    {
        uint32_t va = 7, vb = 35;
        void *pa[] = {&x, &va, (void *)&n};
        void *pb[] = {&y, &vb, (void *)&n};
        void *padd[] = {&z, &x, &y, (void *)&n};
        is_status(launch(f_fill, a, 128, pa), DV_OK, "launch fill_u32 x=7");
        is_status(launch(f_fill, a, 128, pb), DV_OK, "launch fill_u32 y=35");
        is_status(launch(f_add, a, 128, padd), DV_OK, "launch add_u32 z=x+y");
        dv__drv_memcpy_dtoh(a, back, z, bytes);
        is_status(dv__drv_stream_sync(a), DV_OK, "stream_sync after kernels");
        ok(all_u32(back, n, 42), "add_u32 gave 42 everywhere");
    }
    {
        for (uint64_t i = 0; i < n; i++)
            host[i] = (uint32_t)(i * 2246822519u + 3266489917u);
        dv__drv_memcpy_htod(a, x, host, bytes);
        void *pc[] = {&y, &x, (void *)&bytes};
        is_status(launch(f_copy, a, 128, pc), DV_OK, "launch copy y <- x");
        dv__drv_memset_d8(a, sum, 0, 8);
        void *ps[] = {&y, (void *)&n, &sum};
        is_status(launch(f_sum, a, 64, ps), DV_OK, "launch checksum(y)");
        uint64_t got = 0;
        dv__drv_memcpy_dtoh(a, &got, sum, 8);
        dv__drv_stream_sync(a);
        is_u64(got, host_checksum(host, n), "checksum kernel equals the CPU reference");
    }
    {
        uint32_t v = 1;
        void *pa[] = {&x, &v, (void *)&n};
        is_status(dv__drv_launch(f_fill, dim1(0), dim1(32), 0, a, pa), DV_EINVAL, "launch(grid 0)");
        is_status(dv__drv_launch(f_fill, dim1(1), dim1(2048), 0, a, pa), DV_EINVAL,
                  "launch(2048 threads per block)");
        is_status(dv__drv_launch(NULL, dim1(1), dim1(32), 0, a, pa), DV_EINVAL, "launch(NULL func)");
        is_status(dv__drv_launch(f_fill, dim1(1), dim1(32), 0, NULL, pa), DV_EINVAL,
                  "launch(NULL stream)");
    }

    /* -- stream-ordered free and the pool threshold ----------------------- */
    uint64_t threshold = 0;
    is_status(dv__drv_pool_set_release_threshold(ctx, UINT64_C(1) << 30), DV_OK,
              "pool_set_release_threshold(1 GiB)");
    is_status(dv__drv_pool_get_release_threshold(ctx, &threshold), DV_OK,
              "pool_get_release_threshold");
    is_u64(threshold, UINT64_C(1) << 30, "release threshold reads back");
    is_status(dv__drv_pool_get_release_threshold(NULL, &threshold), DV_EINVAL,
              "pool_get_release_threshold(NULL ctx)");
    is_status(dv__drv_mem_free_async(a, z), DV_OK, "mem_free_async z on a");
    is_status(dv__drv_mem_free_async(a, 0), DV_EINVAL, "mem_free_async(NULL dptr)");
    is_status(dv__drv_mem_alloc_async(b, bytes, &z), DV_OK, "mem_alloc_async again on b");
    dv__drv_memset_d32(b, z, 9, n);
    dv__drv_memcpy_dtoh(b, back, z, bytes);
    dv__drv_stream_sync(b);
    ok(all_u32(back, n, 9), "stream-ordered allocation on b is usable in b's order");
    is_status(dv__drv_mem_free_async(b, z), DV_OK, "mem_free_async z on b");
    is_status(dv__drv_stream_sync(b), DV_OK, "stream_sync b after free");

    /* -- destroy: the handle is dead at once ------------------------------ */
    is_status(dv__drv_stream_create(ctx, &dead_stream), DV_OK, "stream_create (to destroy)");
    is_status(dv__drv_stream_destroy(dead_stream), DV_OK, "stream_destroy");
    is_status(dv__drv_stream_sync(dead_stream), DV_EINVAL,
              "stream_sync(destroyed stream) is EINVAL");
    is_status(dv__drv_memcpy_htod(dead_stream, x, host, 4), DV_EINVAL,
              "memcpy_htod(destroyed stream) is EINVAL");
    is_status(dv__drv_stream_destroy(dead_stream), DV_EINVAL, "stream_destroy twice is EINVAL");
    is_status(dv__drv_event_create(ctx, 0, &dead_event), DV_OK, "event_create (to destroy)");
    is_status(dv__drv_event_destroy(dead_event), DV_OK, "event_destroy");
    is_status(dv__drv_event_record(dead_event, a), DV_EINVAL, "event_record(destroyed event)");
    is_status(dv__drv_stream_sync((dv_drv_stream *)ev), DV_EINVAL,
              "stream_sync(an event handle) is EINVAL");

    /* -- synchronous free: double and foreign ----------------------------- */
    is_status(dv__drv_mem_free(ctx, y), DV_OK, "mem_free y");
    is_status(dv__drv_mem_free(ctx, y), DV_EINVAL, "mem_free y twice is EINVAL");
    is_status(dv__drv_mem_free(ctx, 0), DV_EINVAL, "mem_free(NULL) is EINVAL");
    is_status(dv__drv_mem_free(NULL, x), DV_EINVAL, "mem_free(NULL ctx) is EINVAL");

    /* -- peer copies (two devices) ---------------------------------------- */
    if (count >= 2 && dv__drv_ctx_retain(drv, 1, &ctx1) == DV_OK) {
        dv_drv_stream *s1 = NULL;
        dv_dptr w = 0;
        dv__drv_stream_create(ctx1, &s1);
        dv__drv_mem_alloc(ctx1, bytes, &w);
        for (uint64_t i = 0; i < n; i++)
            host[i] = (uint32_t)(i ^ 0x13579BDFu);
        dv__drv_memcpy_htod(a, x, host, bytes);
        dv__drv_stream_sync(a);
        is_status(dv__drv_memcpy_peer(s1, ctx1, w, ctx, x, bytes), DV_OK,
                  "memcpy_peer device 0 -> device 1");
        memset(back, 0, bytes);
        dv__drv_memcpy_dtoh(s1, back, w, bytes);
        dv__drv_stream_sync(s1);
        ok(memcmp(back, host, bytes) == 0, "peer copy arrived intact on device 1");
        is_status(dv__drv_memcpy_peer(s1, ctx1, w, ctx, x, 0), DV_EINVAL, "memcpy_peer(0 bytes)");
        dv__drv_mem_free(ctx1, w);
        dv__drv_stream_destroy(s1);
        dv__drv_ctx_release(ctx1);
    } else {
        skip("memcpy_peer: one device");
        skip("peer copy data: one device");
        skip("memcpy_peer(0 bytes): one device");
    }

    /* -- page-locked host memory and stream memory operations ------------- */
    {
        const uint64_t pin_bytes = 2 * MIB;
        uint8_t *pin = aligned_alloc(4096, pin_bytes);
        uint32_t *words = (uint32_t *)(pin + pin_bytes - 4096); /* 2 words at the end */
        dv_dptr wd = 0;
        memset(pin, 0, pin_bytes);
        is_status(dv__drv_host_register(ctx, pin, pin_bytes), DV_OK, "host_register 2 MiB");
        is_status(dv__drv_host_register(ctx, pin + 4096, 4096), DV_EINVAL,
                  "host_register over a registered range is EINVAL");
        is_status(dv__drv_host_register(ctx, NULL, 4096), DV_EINVAL, "host_register(NULL)");
        is_status(dv__drv_host_dptr(ctx, words, &wd), DV_OK, "host_dptr of a registered word");
        /* a waits until the host stores the word, then copies; b writes a
         * word after its copy lands. */
        dv_drv_value_op wait = {wd, 5, true}, write = {wd + 4, 9, false};
        dv__drv_memset_d32(b, x, 0x11, n);
        dv__drv_stream_sync(b);
        is_status(dv__drv_value_ops(a, &wait, 1), DV_OK, "value_ops: a waits for word >= 5");
        dv__drv_memcpy_dtoh(a, pin, x, 4096);
        bool early = false;
        for (int k = 0; k < 20; k++) { /* 20 ms: a must still be waiting */
            struct timespec t = {0, 1000000};
            nanosleep(&t, NULL);
            early |= pin[0] == 0x11;
        }
        __atomic_store_n(&words[0], 5u, __ATOMIC_RELEASE);
        dv__drv_stream_sync(a);
        ok(!early && pin[0] == 0x11, "the copy behind the wait ran only after the host's store");
        dv__drv_memcpy_dtoh(b, pin + 4096, x, 4096);
        is_status(dv__drv_value_ops(b, &write, 1), DV_OK, "value_ops: b writes 9 after a copy");
        dv__drv_stream_sync(b);
        ok(__atomic_load_n(&words[1], __ATOMIC_ACQUIRE) == 9 && pin[4096] == 0x11,
           "the word holds 9 and the copy before it landed");
        dv_drv_value_op bad = {wd + 2, 1, false}, many[DV_DRV_MAX_VALUE_OPS + 1];
        is_status(dv__drv_value_ops(a, &bad, 1), DV_EINVAL, "value_ops: unaligned word is EINVAL");
        is_status(dv__drv_value_ops(a, many, 0), DV_EINVAL, "value_ops: none is EINVAL");
        is_status(dv__drv_value_ops(a, many, DV_DRV_MAX_VALUE_OPS + 1), DV_EINVAL,
                  "value_ops: too many is EINVAL");
        is_status(dv__drv_host_unregister(ctx, pin + 4096), DV_EINVAL,
                  "host_unregister inside the range is EINVAL");
        is_status(dv__drv_host_unregister(ctx, pin), DV_OK, "host_unregister");
        is_status(dv__drv_host_unregister(ctx, pin), DV_EINVAL, "host_unregister twice is EINVAL");
        free(pin);
    }

    /* -- reset of a healthy context --------------------------------------- */
    dv__drv_stream_sync(a);
    dv__drv_mem_free(ctx, x);
    dv__drv_mem_free(ctx, sum);
    is_status(dv__drv_ctx_reset(ctx), DV_OK, "ctx_reset on a healthy device");
    is_status(dv__drv_stream_sync(a), DV_EINVAL, "a stream from before the reset is dead");
    is_status(dv__drv_func_get(mod, "fill_u32", &nofunc), DV_EINVAL,
              "a module from before the reset is dead");
    {
        dv_drv_stream *s = NULL;
        dv_dptr p = 0;
        int rc = dv__drv_stream_create(ctx, &s);
        if (rc == DV_OK)
            rc = dv__drv_mem_alloc(ctx, bytes, &p);
        if (rc == DV_OK)
            rc = dv__drv_memset_d32(s, p, 77, n);
        if (rc == DV_OK)
            rc = dv__drv_memcpy_dtoh(s, back, p, bytes);
        if (rc == DV_OK)
            rc = dv__drv_stream_sync(s);
        ok(rc == DV_OK && all_u32(back, n, 77), "after the reset, new streams and memory work (%s)",
           dv_err_name(rc));
        if (p != 0)
            dv__drv_mem_free(ctx, p);
        if (s != NULL)
            dv__drv_stream_destroy(s);
    }

    /* -- a NULL handle or out-pointer, op by op: EINVAL -------------------- */
    {
        dv_dptr d = 0;
        bool flag;
        uint32_t word = 0;
        struct {
            int rc;
            const char *call;
        } nulls[] = {
            {dv__drv_ctx_release(NULL), "ctx_release"},
            {dv__drv_ctx_reset(NULL), "ctx_reset"},
            {dv__drv_stream_destroy(NULL), "stream_destroy"},
            {dv__drv_stream_sync(NULL), "stream_sync"},
            {dv__drv_stream_query(NULL, &flag), "stream_query"},
            {dv__drv_event_create(NULL, 0, &dead_event), "event_create"},
            {dv__drv_event_destroy(NULL), "event_destroy"},
            {dv__drv_event_query(NULL, &flag), "event_query"},
            {dv__drv_event_sync(NULL), "event_sync"},
            {dv__drv_mem_free_async(NULL, 256), "mem_free_async"},
            {dv__drv_pool_set_release_threshold(NULL, 0), "pool_set_release_threshold"},
            {dv__drv_memset_d32(NULL, 256, 0, 1), "memset_d32_async"},
            {dv__drv_memset_d8(NULL, 256, 0, 1), "memset_d8_async"},
            {dv__drv_memcpy_dtoh(NULL, &word, 256, 4), "memcpy_dtoh_async"},
            {dv__drv_memcpy_peer(NULL, NULL, 256, NULL, 256, 4), "memcpy_peer_async"},
            {dv__drv_module_load(NULL, image, image_bytes, &mod), "module_load"},
            {dv__drv_module_unload(NULL), "module_unload"},
            {dv__drv_launch_host_fn(NULL, host_fn_count, &calls), "launch_host_fn"},
            {dv__drv_mem_alloc(NULL, 256, &d), "mem_alloc"},
            {dv__drv_pool_get_release_threshold(ctx, NULL), "pool_get_release_threshold"},
        };
        bool all = true;
        for (size_t i = 0; i < sizeof(nulls) / sizeof(nulls[0]); i++) {
            if (nulls[i].rc != DV_EINVAL) {
                diag("%s(NULL ...) gave %s", nulls[i].call, dv_err_name(nulls[i].rc));
                all = false;
            }
        }
        ok(all, "%zu more ops answer EINVAL to a NULL handle or out-pointer",
           sizeof(nulls) / sizeof(nulls[0]));
        is_status(dv__drv_module_unload(mod), DV_EINVAL,
                  "module_unload of a module the reset killed is EINVAL");
    }

    /* -- names ------------------------------------------------------------ */
    is_str(dv__drv_error_name(drv, 2), "CUDA_ERROR_OUT_OF_MEMORY", "error_name(2)");
    is_str(dv__drv_error_name(drv, 700), "CUDA_ERROR_ILLEGAL_ADDRESS", "error_name(700)");

    is_status(dv__drv_ctx_release(ctx), DV_OK, "ctx_release");
    is_status(dv__drv_ctx_release(ctx), DV_EINVAL, "ctx_release twice is EINVAL");
    free(host);
    free(back);
    free(back8);
}

#endif /* DV_TESTS_PORT_CONFORMANCE_H */
