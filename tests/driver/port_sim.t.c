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
    plan(PORT_CONFORMANCE_TESTS + 2);
    is_status(dv__driver_open(&cfg, &drv), DV_OK, "open the sim backend");
    is_str(dv__driver_backend_name(drv), "sim", "backend is sim");
    port_conformance(drv);
    dv__driver_close(drv);
    return tap_done();
}
