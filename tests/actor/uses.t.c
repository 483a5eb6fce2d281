/*
 * A use of a block on another stream waits for the block's earlier use,
 * not for what that stream queued after it.  Stream 1 uses block Y, then
 * is held by a gate (a host function that returns only when the test opens
 * it, as a collective waiting for its peer or a kernel waiting for the host
 * would); then stream 2 uses Y.  Stream 2's use must complete while the
 * gate is closed (a bound of seconds, so a stall is a failure, never a
 * hang), and Y must read back what stream 2 wrote:
 *   - Y written on stream 1, that write completed; stream 2 writes;
 *   - the same with dv_sync(1) before the gate;
 *   - stream 2 reads Y instead;
 *   - Y only allocated on stream 1; stream 2 uses it first;
 *   - Y read on stream 1; stream 2 writes;
 *   - Y's write on stream 1 posted and the gate posted at once behind it,
 *     without waiting: stream 2's write still waits for the write only.
 * All of it again with the stream-order checker on.
 */
#include <string.h>

#include "devactor.h"
#include "devactor_testing.h"
#include "support/gate.h"
#include "tap.h"

#ifndef USES_ON_CUDA
#define USES_ON_CUDA 0
#endif
#define N        (UINT64_C(1) << 20)
#define BOUND_NS (UINT64_C(10) * 1000000000)

static uint8_t host[N];

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

enum { WRITTEN, SYNCED, READ_AFTER, ALLOCATED, READ_BEFORE, IN_FLIGHT, NCASES };
static const char *const names[NCASES] = {
    "written on stream 1, stream 2 writes", "the same with dv_sync(1) first",
    "written on stream 1, stream 2 reads",  "only allocated on stream 1, stream 2 writes",
    "read on stream 1, stream 2 writes",    "written on stream 1 with the gate right behind",
};

static void one_case(dv_driver *drv, bool check, int c)
{
    char what[128];
    snprintf(what, sizeof(what), "%s%s", names[c], check ? " (checker)" : "");
    dv_actor *a = fresh(drv, check);
    if (a == NULL) {
        ok(false, "%s: an actor (%s)", what, dv_last_error()->message);
        return;
    }
    dv_ref y = DV_REF_NULL;
    gate g;
    dv_alloc(a, N, 1, "y", &y);
    dv_future w1;
    dv_future_init(&w1, 0);
    if (c == READ_BEFORE) {
        dv_memset(a, y, 0, 0x11, N, 1);
        dv_copy_dtoh(a, host, y, 0, N, 1);
    } else if (c == IN_FLIGHT) {
        dv_memset_async(a, y, 0, 0x11, N, 1, &w1);
    } else if (c != ALLOCATED) {
        dv_memset(a, y, 0, 0x11, N, 1);
    }
    if (c == SYNCED)
        dv_sync(a, 1);
    gate_close(&g, a, 1);

    dv_future f;
    dv_future_init(&f, 0);
    int rc = c == READ_AFTER ? dv_copy_dtoh_async(a, host, y, 0, N, 2, &f)
                             : dv_memset_async(a, y, 0, 0x22, N, 2, &f);
    int waited = rc == DV_OK ? dv_future_wait_for(&f, DV_COMPLETE, BOUND_NS) : rc;
    ok(waited == DV_OK, "%s: stream 2's use completed while stream 1 is held (%s)", what,
       dv_err_name(waited));
    gate_open(&g);
    if (waited != DV_OK)
        dv_future_wait(&f);
    if (c == IN_FLIGHT)
        dv_future_wait(&w1);
    uint8_t want = c == READ_AFTER ? 0x11 : 0x22;
    if (c != READ_AFTER)
        memset(host, 0, sizeof(host));
    bool right = c == READ_AFTER || dv_copy_dtoh(a, host, y, 0, N, 2) == DV_OK;
    for (uint64_t i = 0; right && i < N; i++)
        right = host[i] == want;
    ok(right, "%s: Y reads 0x%02x", what, want);
    dv_ref_release(y);
    dv_actor_destroy(a);
}

int main(void)
{
    dv_driver_config dcfg;
    dv_driver *drv = NULL;
    dv__driver_config_init(&dcfg);
    dcfg.backend = USES_ON_CUDA ? DV_BACKEND_CUDA : DV_BACKEND_SIM;
    dcfg.sim.memory_bytes = 256 << 20;
    dcfg.sim.seed = 13;
    dcfg.sim.delay_max_us = 20;
    int rc = dv__driver_open(&dcfg, &drv);
    if (USES_ON_CUDA && rc == DV_ENODEVICE)
        skip_all("%s", dv_last_error()->message);
    plan(1 + 2 * 2 * NCASES);
    is_status(rc, DV_OK, "a driver (%s)", drv ? dv__driver_backend_name(drv) : "none");
    for (int check = 0; check < 2; check++)
        for (int c = 0; c < NCASES; c++)
            one_case(drv, check, c);
    dv__driver_close(drv);
    return tap_done();
}
