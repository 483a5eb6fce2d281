/* The sticky-fault model on the real driver: a real illegal-address
 * kernel.  Skipped where no CUDA device answers. */
#include "support/fault_model.h"

int main(void)
{
    dv_driver_config cfg;
    dv_driver *drv = NULL;

    dv__driver_config_init(&cfg);
    cfg.backend = DV_BACKEND_CUDA;
    if (dv__driver_open(&cfg, &drv) == DV_ENODEVICE)
        skip_all("%s", dv_last_error()->message);
    plan(FAULT_MODEL_TESTS);
    fault_model(drv);
    dv__driver_close(drv);
    return tap_done();
}
