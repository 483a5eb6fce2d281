/* futures.t.c on the real driver; skipped where no device answers. */
#define FUTURES_ON_CUDA 1
#include "futures.t.c"
