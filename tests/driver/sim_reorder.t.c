/*
 * The sim really reorders: with seeded random delays on, stream b reads a
 * buffer that stream a writes.  Without the event wait, b must see the old
 * value at least once in many rounds — the sim exposes a missing wait as
 * wrong data.  With the wait, b must see the new value every round.
 */
#include "driver/port.h"
#include "tap.h"

#define ROUNDS 200
#define N      1024

static int run(dv_driver *drv, bool with_wait, int *stale)
{
    dv_drv_ctx *ctx;
    dv_drv_stream *a, *b;
    dv_drv_event *ev;
    dv_dptr x;
    uint32_t back[N];
    int rc;

    *stale = 0;
    if ((rc = dv__drv_ctx_retain(drv, 0, &ctx)) != DV_OK)
        return rc;
    if ((rc = dv__drv_stream_create(ctx, &a)) != DV_OK ||
        (rc = dv__drv_stream_create(ctx, &b)) != DV_OK ||
        (rc = dv__drv_event_create(ctx, 0, &ev)) != DV_OK ||
        (rc = dv__drv_mem_alloc(ctx, sizeof(back), &x)) != DV_OK)
        return rc;
    for (uint32_t r = 1; r <= ROUNDS; r++) {
        /* Old value, settled on both streams. */
        dv__drv_memset_d32(a, x, 0, N);
        dv__drv_stream_sync(a);
        /* a writes the new value; b reads. */
        dv__drv_memset_d32(a, x, r, N);
        if (with_wait) {
            dv__drv_event_record(ev, a);
            dv__drv_stream_wait_event(b, ev);
        }
        dv__drv_memcpy_dtoh(b, back, x, sizeof(back));
        dv__drv_stream_sync(b);
        dv__drv_stream_sync(a); /* before the next round rewrites x */
        bool fresh = true;
        for (int i = 0; i < N; i++)
            fresh &= back[i] == r;
        *stale += !fresh;
    }
    dv__drv_mem_free(ctx, x);
    dv__drv_event_destroy(ev);
    dv__drv_stream_destroy(a);
    dv__drv_stream_destroy(b);
    return dv__drv_ctx_release(ctx);
}

int main(void)
{
    dv_driver_config cfg;
    dv_driver *drv;
    int stale_without = 0, stale_with = 0;

    plan(5);
    dv__driver_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    cfg.sim.memory_bytes = 64 << 20;
    cfg.sim.seed = 20261121;
    cfg.sim.delay_max_us = 200;
    is_status(dv__driver_open(&cfg, &drv), DV_OK, "open the sim with random delays (seed %llu)",
              (unsigned long long)cfg.sim.seed);
    is_status(run(drv, false, &stale_without), DV_OK, "%d rounds without the wait", ROUNDS);
    ok(stale_without > 0, "without the wait, b read the stale value in %d of %d rounds",
       stale_without, ROUNDS);
    is_status(run(drv, true, &stale_with), DV_OK, "%d rounds with the wait", ROUNDS);
    is_int(stale_with, 0, "with the wait, b never read a stale value");
    dv__driver_close(drv);
    return tap_done();
}
