/*
 * The sticky-fault model, one body for both backends: after a kernel
 * writes to an illegal address, the fault surfaces as ECONTEXT_LOST with
 * CUDA_ERROR_ILLEGAL_ADDRESS, every later call on the context fails, the
 * reset "succeeds", and no new context can be made on any device.  The
 * sim's default (process-fatal) poison must match what the real driver
 * does.  Run it in a process of its own: it poisons the process.
 */
#ifndef DV_TESTS_FAULT_MODEL_H
#define DV_TESTS_FAULT_MODEL_H

#include "driver/port.h"
#include "tap.h"

#define FAULT_MODEL_TESTS 13

static void fault_model(dv_driver *drv)
{
    dv_drv_ctx *ctx = NULL, *again = NULL;
    dv_drv_stream *s = NULL;
    dv_drv_module *mod = NULL;
    dv_drv_func *f = NULL;
    dv_dptr p = 0;
    const void *image;
    size_t image_bytes;
    uint64_t addr = 0x10; /* never mapped */
    void *params[] = {&addr};
    int count = 0;

    dv__drv_device_count(drv, &count);
    is_status(dv__drv_ctx_retain(drv, 0, &ctx), DV_OK, "ctx_retain");
    is_status(dv__drv_stream_create(ctx, &s), DV_OK, "stream_create");
    is_status(dv__drv_mem_alloc(ctx, 4096, &p), DV_OK, "mem_alloc before the fault");
    dv__drv_builtin_image(drv, &image, &image_bytes);
    is_status(dv__drv_module_load(ctx, image, image_bytes, &mod), DV_OK, "module_load");
    is_status(dv__drv_func_get(mod, "illegal_address", &f), DV_OK, "func_get illegal_address");
    is_status(dv__drv_launch(f, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, s, params), DV_OK,
              "the faulting launch enqueues");
    is_status(dv__drv_stream_sync(s), DV_ECONTEXT_LOST, "stream_sync reports the fault");
    is_int(dv_last_error()->driver_code, DV_CU_ILLEGAL_ADDRESS,
           "as CUDA_ERROR_ILLEGAL_ADDRESS (%s)", dv_last_error()->driver_name);
    dv_dptr q = 0;
    is_status(dv__drv_mem_alloc(ctx, 4096, &q), DV_ECONTEXT_LOST, "later calls fail too (sticky)");
    is_status(dv__drv_ctx_reset(ctx), DV_OK, "the primary context reset 'succeeds'");
    int rc = DV_OK;
    if (dv__drv_stream_create(ctx, &s) == DV_OK)
        rc = dv__drv_mem_alloc(ctx, 4096, &q);
    else
        rc = dv_last_error()->status;
    is_status(rc, DV_ECONTEXT_LOST, "but the reset context still fails");
    is_status(dv__drv_ctx_retain(drv, 0, &again), DV_ECONTEXT_LOST,
              "and a new retain of device 0 fails");
    if (count >= 2) {
        rc = dv__drv_ctx_retain(drv, 1, &again);
        if (rc == DV_OK)
            rc = dv__drv_mem_alloc(again, 4096, &q);
        is_status(rc, DV_ECONTEXT_LOST, "device 1 of the process is lost as well");
    } else {
        tap_run++;
        printf("ok %d # SKIP other devices of the process: one device\n", tap_run);
    }
    dv__drv_ctx_release(ctx);
}

#endif
