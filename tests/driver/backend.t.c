/* Backend choice: explicit config, then DV_BACKEND, then cuda when a
 * device answers, else sim; a missing cuda device is a clear ENODEVICE. */
#include "driver/port.h"
#include "tap.h"

int main(void)
{
    dv_driver_config cfg;
    dv_driver *drv = NULL;
    int rc;

    plan(10);
    dv__driver_config_init(&cfg);

    setenv("DV_BACKEND", "sim", 1);
    is_status(dv__driver_open(&cfg, &drv), DV_OK, "AUTO with DV_BACKEND=sim opens");
    is_str(dv__driver_backend_name(drv), "sim", "... and picks the sim");
    dv__driver_close(drv);

    setenv("DV_BACKEND", "quantum", 1);
    is_status(dv__driver_open(&cfg, &drv), DV_EINVAL, "DV_BACKEND=quantum is EINVAL");
    ok(strstr(dv_last_error()->message, "quantum") != NULL, "the message names the value: %s",
       dv_last_error()->message);

    /* Explicit config wins over the environment. */
    cfg.backend = DV_BACKEND_SIM;
    is_status(dv__driver_open(&cfg, &drv), DV_OK, "explicit sim with DV_BACKEND=quantum opens");
    dv__driver_close(drv);

    unsetenv("DV_BACKEND");
    cfg.backend = DV_BACKEND_CUDA;
    rc = dv__driver_open(&cfg, &drv);
    bool have_cuda = rc == DV_OK;
    if (have_cuda) {
        is_str(dv__driver_backend_name(drv), "cuda", "explicit cuda opens the cuda backend");
        ok(true, "a CUDA device answers");
        dv__driver_close(drv);
    } else {
        is_status(rc, DV_ENODEVICE, "explicit cuda without a device is ENODEVICE");
        ok(strstr(dv_last_error()->message, "no CUDA device") != NULL, "it says so: %s",
           dv_last_error()->message);
    }

    cfg.backend = DV_BACKEND_AUTO;
    is_status(dv__driver_open(&cfg, &drv), DV_OK, "AUTO opens something");
    is_str(dv__driver_backend_name(drv), have_cuda ? "cuda" : "sim",
           "AUTO picks cuda when a device answers, else sim");
    dv__driver_close(drv);
    is_status(dv__driver_open(&cfg, NULL), DV_EINVAL, "open(NULL out) is EINVAL");
    return tap_done();
}
