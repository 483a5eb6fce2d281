/*
 * Memory another stream freed is handed out without waiting for what that
 * stream queued after the free.  Stream 1 is held by a gate (a host
 * function that returns only when the test opens it, as a kernel waiting
 * for the host would); meanwhile stream 2 allocates and writes:
 *   - memory the pool mapped for stream 1 and never used: no wait at all;
 *   - memory stream 1 wrote and freed before the gate: a wait for the
 *     free, which the device has passed, not for the gate;
 *   - the same after more work and frees on stream 1 than the tracker
 *     keeps events for;
 *   - and a small block from stream 1's stacks.
 * Each write on stream 2 must complete while the gate is closed (a bound
 * of seconds, so a stall is a failure, never a hang).  Then the data is
 * read back.  All of it again with the stream-order checker on (there the
 * free's event is recorded once the checker has taken the free).
 */
#include <string.h>

#include "devactor.h"
#include "devactor_testing.h"
#include "support/data.h"
#include "support/gate.h"
#include "tap.h"

#ifndef REUSE_ON_CUDA
#define REUSE_ON_CUDA 0
#endif
#define MIB      (UINT64_C(1) << 20)
#define BOUND_NS (UINT64_C(10) * 1000000000)

static dv_actor *a;
/* The write on stream 2 and its block: a write still in flight when the
 * bound passed is waited for (and the block released) once the gate is
 * open again (finish). */
static dv_future wf;
static dv_ref wy;

static dv_actor *fresh(dv_driver *drv, bool check)
{
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.driver = drv;
    cfg.streams = 3;
    cfg.check_order = check;
    dv_actor *out = NULL;
    return dv_actor_create(&cfg, &out) == DV_OK ? out : NULL;
}

/* With stream 1 held: a block of bytes on stream 2, set to v; true when
 * the memset completed while the gate was still closed. */
static bool stream2_writes(uint64_t bytes, uint8_t v, const char *what)
{
    static uint8_t host[4 * MIB];
    dv_future_init(&wf, 0);
    wy = DV_REF_NULL;
    int rc = dv_alloc(a, bytes, 2, "y", &wy);
    if (rc == DV_OK)
        rc = dv_memset_async(a, wy, 0, v, bytes, 2, &wf);
    int waited = rc == DV_OK ? dv_future_wait_for(&wf, DV_COMPLETE, BOUND_NS) : rc;
    ok(waited == DV_OK, "%s: stream 2's write completed while stream 1 is held (%s)", what,
       dv_err_name(waited));
    if (waited != DV_OK) {
        ok(false, "%s: and it reads back (not read: the write did not complete)", what);
        return false;
    }
    bool right = dv_copy_dtoh(a, host, wy, 0, bytes, 2) == DV_OK;
    for (uint64_t i = 0; right && i < bytes; i++)
        right = host[i] == v;
    ok(right, "%s: and it reads back", what);
    dv_ref_release(wy);
    return true;
}

/* The gate open again; a write that did not complete in time, finished. */
static void finish(gate *g, bool done)
{
    gate_open(g);
    if (!done) {
        dv_future_wait(&wf);
        dv_ref_release(wy);
    }
}

/* The four cases on fresh actors, the checker on or off. */
static void run_cases(dv_driver *drv, bool check)
{
    dv_ref r = DV_REF_NULL;
    gate g;
    bool done;
    /* Memory mapped for stream 1, never used. */
    a = fresh(drv, check);
    dv_alloc(a, 64, 1, "unused", &r);
    gate_close(&g, a, 1);
    done = stream2_writes(512, 7, "fresh memory");
    finish(&g, done);
    dv_ref_release(r);
    dv_actor_destroy(a);

    /* Memory stream 1 wrote and freed before it was held. */
    a = fresh(drv, check);
    dv_alloc(a, MIB, 1, "freed", &r);
    dv_memset(a, r, 0, 1, MIB, 1);
    dv_ref_release(r);
    gate_close(&g, a, 1);
    done = stream2_writes(MIB, 9, "a block freed on stream 1");
    finish(&g, done);

    /* Sixteen more blocks written and freed on stream 1 (more than its
     * ring of events), then held: the oldest is taken. */
    dv_ref many[16];
    for (int i = 0; i < 16; i++) {
        dv_alloc(a, 4 * MIB, 1, "many", &many[i]);
        dv_memset(a, many[i], 0, (uint8_t)i, 4 * MIB, 1);
    }
    for (int i = 0; i < 16; i++) {
        dv_memset(a, many[i], 0, 0xAB, 4 * MIB, 1);
        dv_ref_release(many[i]);
    }
    gate_close(&g, a, 1);
    done = stream2_writes(4 * MIB, 3, "after 16 frees on stream 1");
    finish(&g, done);

    /* A small block from stream 1's stack of its class. */
    dv_alloc(a, 1024, 1, "small", &r);
    dv_memset(a, r, 0, 5, 1024, 1);
    dv_ref_release(r);
    gate_close(&g, a, 1);
    done = stream2_writes(1024, 4, "a small block freed on stream 1");
    finish(&g, done);
    dv_actor_destroy(a);
}

int main(void)
{
    dv_driver_config dcfg;
    dv_driver *drv = NULL;
    dv__driver_config_init(&dcfg);
    dcfg.backend = REUSE_ON_CUDA ? DV_BACKEND_CUDA : DV_BACKEND_SIM;
    dcfg.sim.memory_bytes = 256 << 20;
    dcfg.sim.seed = 11;
    dcfg.sim.delay_max_us = 20;
    int rc = dv__driver_open(&dcfg, &drv);
    if (REUSE_ON_CUDA && rc == DV_ENODEVICE)
        skip_all("%s", dv_last_error()->message);
    plan(17);
    is_status(rc, DV_OK, "a driver (%s)", drv ? dv__driver_backend_name(drv) : "none");

    run_cases(drv, false);
    run_cases(drv, true);
    dv__driver_close(drv);
    return tap_done();
}
