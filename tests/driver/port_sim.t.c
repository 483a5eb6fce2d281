/* The device-port conformance suite on the simulated device: two devices,
 * random stream delays on, so ordering bugs show as wrong data. */
#include "support/port_conformance.h"

int main(void)
{
    dv_driver_config cfg;
    dv_driver *drv = NULL;

    dv__driver_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    cfg.sim.devices = 2;
    cfg.sim.memory_bytes = 256 * MIB;
    cfg.sim.seed = 42;
    cfg.sim.delay_max_us = 50;
    plan(PORT_CONFORMANCE_TESTS + 4);
    is_status(dv__driver_open(&cfg, &drv), DV_OK, "open the sim backend");
    is_str(dv__driver_backend_name(drv), "sim", "backend is sim");
    port_conformance(drv);

    /* A context reset takes the mappings with it: memory mapped again at
     * the same addresses afterwards is unmapped as it was made. */
    {
        dv_drv_ctx *ctx = NULL;
        dv_dptr va = 0, again = 0;
        uint64_t g = 0, h = 0, h2 = 0;
        int rc = dv__drv_ctx_retain(drv, 0, &ctx);
        rc = rc != DV_OK ? rc : dv__drv_vmm_granularity(ctx, &g);
        rc = rc != DV_OK ? rc : dv__drv_va_reserve(ctx, 4 * g, &va);
        rc = rc != DV_OK ? rc : dv__drv_mem_map(ctx, va, 2 * g, &h);
        rc = rc != DV_OK ? rc : dv__drv_ctx_reset(ctx);
        rc = rc != DV_OK ? rc : dv__drv_va_reserve(ctx, 4 * g, &again);
        rc = rc != DV_OK ? rc : dv__drv_mem_map(ctx, again, g, &h2);
        ok(rc == DV_OK && again == va, "reset, the same addresses reserved and mapped again (%s)",
           dv_err_name(rc));
        is_status(dv__drv_mem_unmap(ctx, again, g, h2), DV_OK,
                  "the new mapping unmaps whole (nothing left of the old one)");
        if (again != 0)
            (void)dv__drv_va_release(ctx, again, 4 * g);
        if (ctx != NULL)
            (void)dv__drv_ctx_release(ctx);
    }
    dv__driver_close(drv);
    return tap_done();
}
