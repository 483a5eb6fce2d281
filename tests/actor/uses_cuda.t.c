/* uses.t.c on the real driver; skipped where no device answers. */
#define USES_ON_CUDA 1
#include "uses.t.c"
