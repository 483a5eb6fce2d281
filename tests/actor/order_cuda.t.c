/* order.t.c on the real driver; skipped where no device answers. */
#define ORDER_ON_CUDA 1
#include "order.t.c"
