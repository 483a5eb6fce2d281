/* The guard's tests, real kernels included, on the real driver; skipped
 * where no CUDA device answers. */
#define GUARD_ON_CUDA 1
#include "guard.t.c"
