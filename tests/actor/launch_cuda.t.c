/* Tracked launches on the real driver; skipped without a device. */
#define LAUNCH_ON_CUDA 1
#include "launch.t.c"
