/* The BLAS library actor's test on the real driver with cuBLAS; skipped
 * without a device or without cuBLAS. */
#define BLAS_ON_CUDA 1
#include "blas.t.c"
