/* The actor's basic tests on the real driver; skipped without a device. */
#define BASIC_ON_CUDA 1
#include "basic.t.c"
