/* The sticky-fault model on the simulated device (process-fatal poison). */
#include "support/fault_model.h"

int main(void)
{
    dv_driver_config cfg;
    dv_driver *drv = NULL;

    dv__driver_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    cfg.sim.devices = 2;
    cfg.sim.memory_bytes = 64 << 20;
    plan(FAULT_MODEL_TESTS + 1);
    is_status(dv__driver_open(&cfg, &drv), DV_OK, "open the sim with two devices");
    fault_model(drv);
    dv__driver_close(drv);
    return tap_done();
}
