/* The pool with aliases on the real driver (support/alias_tests.h): there
 * a granule mapped at two addresses is one memory, so a block that shares
 * memory with another live one shows as bad data.  Skipped without one. */
#include "support/alias_tests.h"

int main(void)
{
    test_env t;
    int rc = test_env_cuda(&t, 3);
    if (rc == DV_ENODEVICE)
        skip_all("%s", dv_last_error()->message);
    plan(1 + ALIAS_TESTS);
    if (!is_status(rc, DV_OK, "cuda environment with 3 streams"))
        return tap_done();
    alias_tests(&t);
    test_env_close(&t);
    return tap_done();
}
