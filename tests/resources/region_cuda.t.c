/* The pool's growth by mapping on the real driver (support/region_tests.h);
 * skipped without one. */
#include "support/region_tests.h"

int main(void)
{
    test_env t;
    int rc = test_env_cuda(&t, 3);
    if (rc == DV_ENODEVICE)
        skip_all("%s", dv_last_error()->message);
    plan(1 + REGION_TESTS);
    if (!is_status(rc, DV_OK, "cuda environment with 3 streams"))
        return tap_done();
    region_tests(&t);
    test_env_close(&t);
    return tap_done();
}
