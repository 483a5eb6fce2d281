/* The stream-order checker on the real driver; skipped without a device. */
#define CHECKER_ON_CUDA 1
#include "checker.t.c"
