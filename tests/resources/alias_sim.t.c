/* The pool with aliases on the sim (support/alias_tests.h). */
#include "support/alias_tests.h"

int main(void)
{
    test_env t;
    plan(1 + ALIAS_TESTS);
    if (!is_status(test_env_sim(&t, 3, 20), DV_OK, "sim environment with 3 streams"))
        return tap_done();
    alias_tests(&t);
    test_env_close(&t);
    return tap_done();
}
