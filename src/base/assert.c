/*
 * The end of a failed assertion (assert.h).
 */
#include <stdio.h>
#include <stdlib.h>

#include "base/assert.h"

void dv__assert_fail(const char *file, int line, const char *func, const char *expr)
{
    fprintf(stderr, "devactor: assertion failed: %s (%s:%d, in %s)\n", expr, file, line, func);
    fflush(stderr);
    abort();
}
