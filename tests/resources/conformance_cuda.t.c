/* The resource conformance suite on the real driver; skipped without one. */
#include "support/env_setup.h"
#include "support/resource_conformance.h"

int main(void)
{
    test_env t;
    dv_drv_func *spin = NULL;
    int rc = test_env_cuda(&t, 3);

    if (rc == DV_ENODEVICE)
        skip_all("%s", dv_last_error()->message);
    plan(RESOURCE_CONFORMANCE_TESTS + 2);
    is_status(rc, DV_OK, "cuda environment with 3 streams");
    is_status(test_env_kernel(&t, "spin", &spin), DV_OK, "spin kernel");
    if (rc != DV_OK || spin == NULL)
        return tap_done();
    resource_conformance(&t.env, spin);
    test_env_close(&t);
    return tap_done();
}
