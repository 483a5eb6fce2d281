/*
 * devactor as a good neighbour in the process: another library's memory on
 * the same device (here: the port used directly, as cudart, cuBLAS or
 * PyTorch would use the driver, in the same primary context) survives
 * dv_actor_reset, and devactor leaves the device's default pool alone.
 *
 *   - a reset keeps the context: the neighbour's block keeps its bytes and
 *     stays usable; the actor's own handles go stale and its memory goes
 *     back to the device (the pool trimmed);
 *   - the default pool's release threshold is never touched (cuda);
 *   - a sticky fault still resets the context, and the neighbour's memory
 *     goes with it: the fault took the context from everyone already.
 */
#include <dlfcn.h>
#include <string.h>

#include "devactor.h"
#include "devactor_sim.h"
#include "devactor_testing.h"
#include "driver/port.h"
#include "support/lib_call.h"
#include "tap.h"

#ifndef NEIGHBOUR_ON_CUDA
#define NEIGHBOUR_ON_CUDA 0
#endif

#define NB    (UINT64_C(4) << 20)
#define OWN   (UINT64_C(512) << 20) /* the actor's, to be given back */
#define SLACK (UINT64_C(64) << 20)

/* The device's default pool's release threshold (cuda), or 0 where it
 * cannot be read. */
typedef int (*get_pool_fn)(void **pool, int dev);
typedef int (*pool_attr_fn)(void *pool, int attr, void *value);
#define RELEASE_THRESHOLD 4 /* CU_MEMPOOL_ATTR_RELEASE_THRESHOLD */

static bool default_pool(void **pool)
{
    get_pool_fn get = (get_pool_fn)lib_cuda_sym("cuDeviceGetDefaultMemPool");
    return get != NULL && get(pool, 0) == 0;
}

static uint64_t threshold_of(void *pool)
{
    pool_attr_fn attr = (pool_attr_fn)lib_cuda_sym("cuMemPoolGetAttribute");
    uint64_t v = 0;
    if (attr == NULL || attr(pool, RELEASE_THRESHOLD, &v) != 0)
        return 0;
    return v;
}

static bool pattern_is(dv_drv_stream *s, dv_dptr p, uint8_t want)
{
    static uint8_t host[NB];
    memset(host, ~want, sizeof(host));
    if (dv__drv_memcpy_dtoh(s, host, p, NB) != DV_OK || dv__drv_stream_sync(s) != DV_OK)
        return false;
    for (uint64_t i = 0; i < NB; i++)
        if (host[i] != want)
            return false;
    return true;
}

int main(void)
{
    dv_driver_config dcfg;
    dv__driver_config_init(&dcfg);
    dcfg.backend = NEIGHBOUR_ON_CUDA ? DV_BACKEND_CUDA : DV_BACKEND_SIM;
    dcfg.sim.memory_bytes = UINT64_C(1) << 30;
    dcfg.sim.kernel_faults_recoverable = true;
    dv_driver *drv = NULL;
    int rc = dv__driver_open(&dcfg, &drv);
    if (NEIGHBOUR_ON_CUDA && rc == DV_ENODEVICE)
        skip_all("%s", dv_last_error()->message);
    plan(15);
    if (!is_status(rc, DV_OK, "a driver (%s)", drv ? dv__driver_backend_name(drv) : "none"))
        bail_out("no driver");

    /* The neighbour: its own retain of the device's context, a block, a
     * stream, a pattern. */
    dv_drv_ctx *ctx = NULL;
    dv_drv_stream *s = NULL;
    dv_dptr mine = 0;
    rc = dv__drv_ctx_retain(drv, 0, &ctx);
    rc = rc == DV_OK ? dv__drv_stream_create(ctx, &s) : rc;
    rc = rc == DV_OK ? dv__drv_mem_alloc(ctx, NB, &mine) : rc;
    rc = rc == DV_OK ? dv__drv_memset_d8(s, mine, 0xa7, NB) : rc;
    rc = rc == DV_OK ? dv__drv_stream_sync(s) : rc;
    if (!is_status(rc, DV_OK, "the neighbour's block, set to 0xa7"))
        bail_out("no neighbour");

    void *pool = NULL;
    uint64_t marked = 12345 * 4096;
    if (NEIGHBOUR_ON_CUDA) {
        pool_attr_fn set = (pool_attr_fn)lib_cuda_sym("cuMemPoolSetAttribute");
        ok(default_pool(&pool) && set != NULL && set(pool, RELEASE_THRESHOLD, &marked) == 0,
           "the neighbour sets the default pool's release threshold to %llu",
           (unsigned long long)marked);
    }
    uint64_t free0 = 0, total = 0;
    dv__drv_mem_info(ctx, &free0, &total);

    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.backend = dcfg.backend;
    cfg.driver = drv;
    dv_actor *a = NULL;
    if (!is_status(dv_actor_create(&cfg, &a), DV_OK, "an actor on the same device"))
        bail_out("no actor");
    dv_ref r = DV_REF_NULL, big = DV_REF_NULL;
    rc = dv_alloc(a, NB, 0, "own", &r);
    rc = rc == DV_OK ? dv_alloc(a, OWN, 1, "big", &big) : rc;
    rc = rc == DV_OK ? dv_memset(a, big, 0, 1, OWN, 1) : rc;
    rc = rc == DV_OK ? dv_memset(a, r, 0, 0x3c, NB, 0) : rc;
    is_status(rc, DV_OK, "the actor's blocks (%llu MiB)", (unsigned long long)((OWN + NB) >> 20));
    dv_ref_release(big);
    is_status(dv_flush(a), DV_OK, "flushed");
    uint64_t free1 = 0;
    dv__drv_mem_info(ctx, &free1, &total);
    diag("free: %llu MiB before the actor, %llu MiB with its blocks",
         (unsigned long long)(free0 >> 20), (unsigned long long)(free1 >> 20));

    is_status(dv_actor_reset(a), DV_OK, "dv_actor_reset");
    dv_ref_info info;
    is_status(dv_ref_access(r, &info), DV_ESTALE, "the actor's handle is stale after it");
    ok(pattern_is(s, mine, 0xa7), "the neighbour's block kept its bytes");
    rc = dv__drv_memset_d8(s, mine, 0x5e, NB);
    rc = rc == DV_OK ? dv__drv_stream_sync(s) : rc;
    ok(rc == DV_OK && pattern_is(s, mine, 0x5e), "and its stream and block still work");
    uint64_t free2 = 0;
    dv__drv_mem_info(ctx, &free2, &total);
    diag("free after the reset: %llu MiB", (unsigned long long)(free2 >> 20));
    ok(free2 + SLACK >= free0, "the actor's memory went back to the device (%llu of %llu MiB free)",
       (unsigned long long)(free2 >> 20), (unsigned long long)(free0 >> 20));
    dv_actor_health h;
    dv_actor_health_get(a, &h);
    is_int((int)h.state, DV_ACTOR_RUNNING, "the actor runs");
    dv_ref again = DV_REF_NULL;
    uint8_t back[64];
    rc = dv_alloc(a, NB, 0, "again", &again);
    rc = rc == DV_OK ? dv_memset(a, again, 0, 0x11, NB, 0) : rc;
    rc = rc == DV_OK ? dv_copy_dtoh(a, back, again, 0, sizeof(back), 0) : rc;
    ok(rc == DV_OK && back[0] == 0x11 && back[63] == 0x11, "and allocates, sets and copies again");
    dv_ref_release(again);
    if (NEIGHBOUR_ON_CUDA)
        is_u64(threshold_of(pool), marked, "the default pool's release threshold is untouched");

    /* A sticky fault (the sim's, recoverable): the context is reset, and
     * everyone's memory with it.  Not provoked on a real device, where it
     * would end this process's CUDA for good. */
    if (!NEIGHBOUR_ON_CUDA) {
        uint64_t args[4] = {0x10, 0, 0, 0};
        rc = dv__actor_launch_builtin(a, "illegal_address", 0, args, NULL);
        diag("the fault: %s", dv_err_name(rc));
        dv_actor_health_get(a, &h);
        ok(h.rebuilds == 2 && h.state == DV_ACTOR_RUNNING,
           "a fault rebuilt the actor, resetting the context (rebuilds %u, %s)", h.rebuilds,
           h.state == DV_ACTOR_RUNNING ? "running" : "not running");
        ok(!pattern_is(s, mine, 0x5e), "the neighbour's block went with the reset context");
    }
    is_status(dv_actor_destroy(a), DV_OK, "destroyed");
    (void)dv__drv_stream_destroy(s);
    (void)dv__drv_ctx_release(ctx);
    dv__driver_close(drv);
    return tap_done();
}
