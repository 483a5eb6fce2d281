/*
 * An example library actor: single-precision GEMM on a devactor actor, a
 * short user of devactor_blas.h (cuBLAS on cuda, the host's CBLAS on the
 * simulated device).  Use devactor_blas.h directly for anything more.
 */
#ifndef DV_EXAMPLES_GEMM_H
#define DV_EXAMPLES_GEMM_H

#include "devactor.h"

typedef struct dv_gemm dv_gemm;

/* DV_ENOTSUP when no BLAS library opens for the actor's backend. */
int dv_gemm_create(dv_actor *actor, dv_gemm **out);
/* C[m x n] = A[m x k] * B[k x n], row-major float32, ordered on stream;
 * A and B are read, C written; each checked against its block. */
int dv_gemm_sgemm(dv_gemm *g, dv_stream stream, int m, int n, int k, dv_ref a, dv_ref b, dv_ref c);
void dv_gemm_destroy(dv_gemm *g);

#endif
