/*
 * A composed actor on the sim (random stream delays on): allocate, copy in,
 * copy across streams, memset, copy out, sync, statistics, futures, bad
 * input on every call, and a clean close (nothing outstanding, no handle
 * alive) before destroy.  basic_cuda.t runs the same on the real driver
 * (BASIC_ON_CUDA), skipped where no device answers.
 */
#include "devactor.h"
#include "support/data.h"
#include "tap.h"

#ifndef BASIC_ON_CUDA
#define BASIC_ON_CUDA 0
#endif
#define N 4096 /* u32 elements */

static dv_actor *make(uint32_t streams)
{
    dv_actor_config cfg;
    dv_actor *a = NULL;
    dv_actor_config_init(&cfg);
    cfg.backend = BASIC_ON_CUDA ? DV_BACKEND_CUDA : DV_BACKEND_SIM;
    cfg.streams = streams;
    cfg.sim_memory_bytes = 256 << 20;
    cfg.sim_seed = 11;
    cfg.sim_delay_max_us = 50;
    cfg.budget_bytes = 64 << 20;
    return dv_actor_create(&cfg, &a) == DV_OK ? a : NULL;
}

int main(void)
{
    static uint32_t host[N], back[N];
    dv_actor *a;
    dv_ref x, y, bad;
    dv_actor_stats st;
    dv_ref_info info;

    a = make(3);
    if (BASIC_ON_CUDA && a == NULL && dv_last_error()->status == DV_ENODEVICE)
        skip_all("%s", dv_last_error()->message);
    plan(58);
    ok(a != NULL, "a composed actor on the sim: %s",
       a ? dv_actor_backend_name(a) : dv_last_error()->message);
    if (a == NULL)
        return tap_done();
    is_int(dv_actor_device(a), 0, "device 0");

    /* -- allocate, copy in and out -------------------------------------- */
    is_status(dv_alloc(a, sizeof(host), 0, "x", &x), DV_OK, "alloc x on stream 0");
    is_status(dv_alloc(a, sizeof(host), 1, "y", &y), DV_OK, "alloc y on stream 1");
    is_status(dv_ref_access(x, &info), DV_OK, "access x");
    ok(info.bytes >= sizeof(host) && info.requested == sizeof(host) && info.device == 0 &&
           info.alloc_stream == 0 && info.refcount == 1 && info.context_generation == 1 &&
           info.last_write_stream == DV_STREAM_NONE,
       "x: %llu bytes, stream 0, one reference, context 1, never written",
       (unsigned long long)info.bytes);
    for (int i = 0; i < N; i++)
        host[i] = (uint32_t)i * 2654435761u;
    is_status(dv_copy_htod(a, x, 0, host, sizeof(host), 0), DV_OK, "copy host -> x on stream 0");
    dv_ref_access(x, &info);
    is_int(info.last_write_stream, 0, "x's last write was on stream 0");
    /* Stream 2 copies x into y: the actor fences x's write and y's
     * allocation, with delays on every stream. */
    is_status(dv_copy_dtod(a, y, 0, x, 0, sizeof(host), 2), DV_OK, "copy x -> y on stream 2");
    is_status(dv_copy_dtoh(a, back, y, 0, sizeof(back), 1), DV_OK, "copy y -> host on stream 1");
    ok(memcmp(host, back, sizeof(host)) == 0, "the data made it through three streams");
    is_status(dv_memset(a, x, 8, 0xAB, 16, 1), DV_OK, "memset 16 bytes of x at offset 8, stream 1");
    is_status(dv_copy_dtoh(a, back, x, 0, sizeof(back), 0), DV_OK, "copy x -> host on stream 0");
    ok(back[0] == host[0] && back[1] == host[1] && back[2] == 0xABABABABu &&
           back[5] == 0xABABABABu && back[6] == host[6],
       "exactly bytes 8..23 changed");
    is_status(dv_copy_dtoh(a, back, x, 4 * 100, 4, 2), DV_OK, "copy 4 bytes at an offset");
    is_int(back[0], host[100], "the offset copy read element 100");
    is_status(dv_sync(a, 1), DV_OK, "sync stream 1");

    /* -- futures ---------------------------------------------------------- */
    dv_future f[8];
    for (int i = 0; i < 8; i++)
        dv_future_init(&f[i], 0);
    is_status(dv_memset_async(a, y, 0, 0x11, sizeof(host), 1, &f[0]), DV_OK, "memset_async posts");
    is_status(dv_copy_dtoh_async(a, back, y, 0, sizeof(back), 2, &f[1]), DV_OK,
              "copy_dtoh_async posts");
    is_status(dv_future_wait(&f[1]), DV_OK, "... and completes");
    ok(dv_future_done(&f[0]) && f[0].status == DV_OK, "the memset's future completed first");
    ok(all_u32(back, N, 0x11111111u), "the async read saw the async memset from another stream");
    dv_ref r2;
    is_status(dv_alloc_async(a, 1024, 0, "async", &r2, &f[2]), DV_OK,
              "alloc_async posts, with the handle at once");
    ok(r2.bits != 0 && r2.bits == f[2].ref.bits, "the handle is in *out and in the future");
    is_status(dv_future_wait(&f[2]), DV_OK, "... and completes: the memory is assigned");
    is_status(dv_ref_release(r2), DV_OK, "release it");

    /* -- bad input -------------------------------------------------------- */
    is_status(dv_alloc(NULL, 16, 0, "x", &bad), DV_EINVAL, "alloc(NULL actor)");
    is_status(dv_alloc(a, 0, 0, "x", &bad), DV_EINVAL, "alloc(0 bytes)");
    is_status(dv_alloc(a, UINT64_MAX, 0, "x", &bad), DV_EINVAL, "alloc(absurd)");
    is_status(dv_alloc(a, 16, 3, "x", &bad), DV_EINVAL, "alloc on stream 3 of 3");
    is_status(dv_alloc(a, 1 << 30, 0, "x", &bad), DV_OK,
              "alloc over the budget: a handle at once (the actor decides later)");
    is_status(dv_ref_access(bad, &info), DV_EOUT_OF_BUDGET,
              "... access says the budget refused it");
    ok(dv_last_error()->requested == (1u << 30), "... detail: requested %llu, remaining %llu",
       (unsigned long long)dv_last_error()->requested,
       (unsigned long long)dv_last_error()->remaining);
    is_status(dv_memset(a, bad, 0, 0, 4, 0), DV_EOUT_OF_BUDGET,
              "an operation on it answers the allocation's error");
    ok(strstr(dv_last_error()->message, "allocation failed") != NULL, "... saying so: %s",
       dv_last_error()->message);
    is_status(dv_ref_release(bad), DV_OK, "the failed handle is released like any other");
    is_status(dv_copy_htod(a, x, 1, host, sizeof(host), 0), DV_EINVAL, "copy past the block's end");
    is_status(dv_copy_htod(a, x, 0, host, 0, 0), DV_EINVAL, "copy of 0 bytes");
    is_status(dv_copy_htod(a, x, 0, NULL, 4, 0), DV_EINVAL, "copy from a NULL host buffer");
    is_status(dv_copy_dtoh(a, back, x, 0, 4, 9), DV_EINVAL, "copy on an unknown stream");
    is_status(dv_memset(a, DV_REF_NULL, 0, 0, 4, 0), DV_EINVAL, "memset of DV_REF_NULL");
    dv_ref forged = {x.bits ^ 1}; /* same slot, another generation */
    is_status(dv_memset(a, forged, 0, 0, 4, 0), DV_ESTALE, "memset through a forged handle");
    is_status(dv_ref_access(forged, &info), DV_ESTALE, "access of a forged handle");
    /* A slot of the same table never handed out (its generation reads 0),
     * named with generation 0: no handle has it. */
    dv_ref unminted = {(x.bits & ~UINT64_C(0xffffffffffffff)) | (UINT64_C(4000) << 32)};
    dv_future uf;
    dv_future_init(&uf, 0);
    int urc = dv_memset_async(a, unminted, 0, 0, 4, 0, &uf);
    if (urc == DV_OK)
        urc = dv_future_wait(&uf);
    ok(urc == DV_ESTALE && dv_ref_access(unminted, &info) == DV_ESTALE &&
           dv_memset(a, unminted, 0, 0, 4, 0) == DV_ESTALE,
       "a never-minted slot named with generation 0: DV_ESTALE (memset, posted and blocking; "
       "access) (%s)",
       dv_err_name(urc));
    is_status(dv_sync(a, 7), DV_EINVAL, "sync of an unknown stream");

    /* -- release ---------------------------------------------------------- */
    is_status(dv_ref_retain(x), DV_OK, "retain x");
    is_status(dv_ref_release(x), DV_OK, "release once: still held");
    is_status(dv_ref_access(x, &info), DV_OK, "x still valid");
    is_status(dv_ref_release(x), DV_OK, "release the last reference");
    is_status(dv_ref_access(x, &info), DV_ESTALE, "x is stale at once");
    is_status(dv_ref_release(x), DV_ESTALE, "a second release is refused");
    is_status(dv_copy_dtoh(a, back, x, 0, 4, 0), DV_ESTALE, "a copy from x is refused");
    is_status(dv_ref_release(y), DV_OK, "release y");

    /* -- clean close ------------------------------------------------------ */
    is_status(dv_sync(a, 0), DV_OK, "sync");
    is_status(dv_actor_stats_get(a, &st), DV_OK, "statistics");
    ok(st.refs_alive == 0 && st.bytes_outstanding == 0,
       "clean: %llu handles alive, %llu bytes outstanding", (unsigned long long)st.refs_alive,
       (unsigned long long)st.bytes_outstanding);
    ok(st.allocs == 3 && st.frees == 3 && st.copies >= 5 && st.memsets == 2,
       "counted: %llu allocs, %llu frees, %llu copies, %llu memsets", (unsigned long long)st.allocs,
       (unsigned long long)st.frees, (unsigned long long)st.copies, (unsigned long long)st.memsets);
    dv_actor_shutdown(a);
    is_status(dv_alloc(a, 16, 0, "late", &bad), DV_ESHUTDOWN, "after shutdown: DV_ESHUTDOWN");
    dv_actor_destroy(a);
    return tap_done();
}
