/*
 * Small helpers of the actor tests: an actor's statistics (bailing out
 * when it cannot give them), and holding a stream busy on the device for
 * a while with devactor's own spin kernel.
 */
#ifndef DV_TESTS_SUPPORT_DEVICE_TIME_H
#define DV_TESTS_SUPPORT_DEVICE_TIME_H

#include "devactor.h"
#include "tap.h"

static TAP_UNUSED dv_actor_stats stats_of(dv_actor *a)
{
    dv_actor_stats st;
    if (dv_actor_stats_get(a, &st) != DV_OK)
        bail_out("stats: %s", dv_last_error()->message);
    return st;
}

/* Hold stream s for ns on the device with spin (a's "spin" kernel); f
 * says when it is done. */
static TAP_UNUSED void hold_stream(dv_actor *a, dv_kernel *spin, dv_stream s, uint64_t ns,
                                   dv_future *f)
{
    static dv_arg arg[1];
    arg[0] = dv_arg_u64(ns);
    dv_future_init(f, 0);
    if (dv_launch_async(a, spin, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, s, arg, 1, f) != DV_OK)
        bail_out("spin: %s", dv_last_error()->message);
}

#endif /* DV_TESTS_SUPPORT_DEVICE_TIME_H */
