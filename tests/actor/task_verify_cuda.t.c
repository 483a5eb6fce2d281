/* What a task really does, on the real driver; skipped without a device. */
#define TASK_VERIFY_CUDA 1
#include "task_verify.t.c"
