/*
 * An example library actor: single-precision GEMM on a devactor actor.
 * On the cuda backend it opens cuBLAS with dlopen and calls cublasSgemm
 * from a task (the actor's thread, its context current, the operands
 * fenced); on the simulated device a host GEMM runs in stream order.
 */
#ifndef DV_EXAMPLES_GEMM_H
#define DV_EXAMPLES_GEMM_H

#include "devactor.h"

typedef struct dv_gemm dv_gemm;

/* DV_ENOTSUP when the cuda backend runs but no cuBLAS library opens. */
int dv_gemm_create(dv_actor *actor, dv_gemm **out);
/* C[m x n] = A[m x k] * B[k x n], row-major float32, ordered on stream;
 * A and B are read, C written. */
int dv_gemm_sgemm(dv_gemm *g, dv_stream stream, int m, int n, int k, dv_ref a, dv_ref b, dv_ref c);
void dv_gemm_destroy(dv_gemm *g);

#endif
