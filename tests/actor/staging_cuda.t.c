/* staging.t.c on the real driver; skipped where no device answers. */
#define STAGING_ON_CUDA 1
#include "staging.t.c"
