/* The resource conformance suite on the simulated device, with random
 * stream delays on. */
#include "support/env_setup.h"
#include "support/resource_conformance.h"

int main(void)
{
    test_env t;
    dv_drv_func *spin = NULL;

    plan(RESOURCE_CONFORMANCE_TESTS + 2);
    is_status(test_env_sim(&t, 3, 30), DV_OK, "sim with 3 streams and random delays");
    is_status(test_env_kernel(&t, "spin", &spin), DV_OK, "spin kernel");
    resource_conformance(&t.env, spin);
    test_env_close(&t);
    return tap_done();
}
