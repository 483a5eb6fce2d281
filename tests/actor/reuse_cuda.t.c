/* reuse.t.c on the real driver; skipped where no device answers. */
#define REUSE_ON_CUDA 1
#include "reuse.t.c"
