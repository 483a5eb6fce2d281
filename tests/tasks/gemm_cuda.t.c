/* The GEMM task test on the real driver with cuBLAS; skipped without. */
#define GEMM_ON_CUDA 1
#include "gemm.t.c"
