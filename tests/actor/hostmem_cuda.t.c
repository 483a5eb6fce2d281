/* hostmem.t.c on the real driver; skipped where no device answers. */
#define HOSTMEM_ON_CUDA 1
#include "hostmem.t.c"
