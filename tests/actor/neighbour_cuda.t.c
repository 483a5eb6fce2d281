/* neighbour.t.c on the real driver; skipped where no device answers. */
#define NEIGHBOUR_ON_CUDA 1
#include "neighbour.t.c"
