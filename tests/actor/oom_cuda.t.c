/* Out of memory, arbitrated, on the real driver; skipped without a device. */
#define OOM_ON_CUDA 1
#include "oom.t.c"
