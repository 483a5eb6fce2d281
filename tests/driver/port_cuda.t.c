/* The device-port conformance suite on the real driver; skipped where no
 * CUDA device answers. */
#include "support/port_conformance.h"

int main(void)
{
    dv_driver_config cfg;
    dv_driver *drv = NULL;
    int rc;

    dv__driver_config_init(&cfg);
    cfg.backend = DV_BACKEND_CUDA;
    rc = dv__driver_open(&cfg, &drv);
    if (rc == DV_ENODEVICE)
        skip_all("%s", dv_last_error()->message);
    plan(PORT_CONFORMANCE_TESTS + 2);
    is_status(rc, DV_OK, "open the cuda backend");
    is_str(dv__driver_backend_name(drv), "cuda", "backend is cuda");
    if (drv == NULL)
        return tap_done();
    port_conformance(drv);
    dv__driver_close(drv);
    return tap_done();
}
