/* events.t.c on the real driver; skipped where no device answers. */
#define EVENTS_ON_CUDA 1
#include "events.t.c"
