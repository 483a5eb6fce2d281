/* The collectives on the real driver with NCCL, one rank per visible GPU;
 * skipped without a device or without NCCL. */
#define NCCL_ON_CUDA 1
#include "nccl.t.c"
