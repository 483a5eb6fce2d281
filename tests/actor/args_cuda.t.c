/* Launch argument checks on the real driver; skipped without a device. */
#define ARGS_ON_CUDA 1
#include "args.t.c"
