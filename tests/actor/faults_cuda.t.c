/*
 * Context loss on the real driver, in a process of its own: an explicit
 * reset of the healthy device rebuilds it with a new generation; then a
 * real illegal-address kernel makes the actor LOST (the driver refuses a
 * new context after such a fault), promptly, naming the faulting launch;
 * every call answers DV_EDEVICE_LOST at once, old handles are stale, and
 * destroy stays clean.  Where the machine has a second device, its actor
 * (same driver) is lost too: the fault is fatal to the whole process.
 * Skipped where no CUDA device answers.
 */
#include <time.h>

#include "devactor_testing.h"
#include "tap.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(void)
{
    dv_actor_config cfg;
    dv_actor *a = NULL;
    dv_actor_health h;
    dv_ref x, y;
    uint32_t v = 0xC0DE, back = 0;

    dv_actor_config_init(&cfg);
    cfg.backend = DV_BACKEND_CUDA;
    if (dv_actor_create(&cfg, &a) == DV_ENODEVICE)
        skip_all("%s", dv_last_error()->message);
    plan(17);
    ok(a != NULL, "an actor on the real device");
    if (a == NULL)
        return tap_done();
    int devices = 0;
    dv__drv_device_count(dv__actor_driver(a), &devices);
    dv_actor *b = NULL;
    if (devices >= 2) {
        dv_actor_config cb;
        dv_actor_config_init(&cb);
        cb.driver = dv__actor_driver(a);
        cb.device = 1;
        dv_actor_create(&cb, &b);
    }

    /* Explicit reset of a healthy device. */
    dv_alloc(a, 4096, 0, "before-reset", &x);
    is_status(dv_actor_reset(a), DV_OK, "dv_actor_reset on the healthy device");
    dv_actor_health_get(a, &h);
    ok(h.context_generation == 2 && h.rebuilds == 1 && h.state == DV_ACTOR_RUNNING,
       "rebuilt: context generation %llu, %u rebuild", (unsigned long long)h.context_generation,
       h.rebuilds);
    dv_ref_info info;
    is_status(dv_ref_access(x, &info), DV_ESTALE, "the handle from before the reset is stale");
    is_status(dv_alloc(a, 4096, 1, "after-reset", &y), DV_OK, "new work after the reset");
    dv_copy_htod(a, y, 0, &v, 4, 1);
    dv_copy_dtoh(a, &back, y, 0, 4, 0);
    is_int(back, 0xC0DE, "a round trip in the new context");

    /* The real fault. */
    uint64_t args[4] = {0x10, 0, 0, 0};
    double t0 = now_s();
    int rc = dv__actor_launch_builtin(a, "illegal_address", 0, args, NULL);
    double dt = now_s() - t0;
    ok(rc == DV_ECONTEXT_LOST || rc == DV_EDEVICE_LOST, "the faulting launch answers %s",
       dv_err_name(rc));
    ok(dt < 10.0, "promptly (%.3f s)", dt);
    dv_actor_health_get(a, &h);
    is_int(h.state, DV_ACTOR_LOST, "the actor is LOST: the driver refused a new context");
    ok(strstr(h.first_fault.message, "illegal_address") != NULL && h.first_fault.driver_code == 700,
       "health names the faulting launch: %s", h.first_fault.message);
    dv_ref z;
    t0 = now_s();
    is_status(dv_alloc(a, 64, 0, "after-fault", &z), DV_EDEVICE_LOST,
              "calls answer DV_EDEVICE_LOST");
    ok(now_s() - t0 < 0.1, "at once (%.6f s)", now_s() - t0);
    is_status(dv_ref_access(y, &info), DV_ESTALE, "handles are stale");
    if (b != NULL) {
        dv_actor_health_get(b, &h);
        is_int(h.state, DV_ACTOR_LOST, "device 1's actor is LOST too");
        is_status(dv_alloc(b, 64, 0, "other-device", &z), DV_EDEVICE_LOST,
                  "device 1 answers DV_EDEVICE_LOST");
        ok(dv_last_error()->driver_code == 700, "with the original fault: %s",
           dv_last_error()->message);
        dv_actor_destroy(b);
    } else {
        for (int i = 0; i < 3; i++) {
            tap_run++;
            printf("ok %d # SKIP other devices of the process: %d device(s)\n", tap_run, devices);
        }
    }
    dv_actor_destroy(a);
    ok(true, "destroy returned");
    return tap_done();
}
