/*
 * The GEMM example (gemm.h) on the BLAS library actor: a dv_blas per
 * dv_gemm, and row-major SGEMM with packed operands (leading dimensions
 * k, n and n).
 */
#include <stdlib.h>

#include "devactor_blas.h"
#include "gemm.h"

struct dv_gemm {
    dv_blas *blas;
};

int dv_gemm_create(dv_actor *actor, dv_gemm **out)
{
    dv_gemm *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return DV_ENOMEM;
    int rc = dv_blas_create(actor, &g->blas);
    if (rc != DV_OK) {
        free(g);
        return rc;
    }
    *out = g;
    return DV_OK;
}

int dv_gemm_sgemm(dv_gemm *g, dv_stream stream, int m, int n, int k, dv_ref a, dv_ref b, dv_ref c)
{
    if (g == NULL || m <= 0 || n <= 0 || k <= 0)
        return DV_EINVAL;
    return dv_blas_gemm(g->blas, stream, DV_BLAS_F32, DV_BLAS_ROW_MAJOR, DV_BLAS_N, DV_BLAS_N, m,
                        n, k, 1.0, dv_blas_mat(a, 0, k), dv_blas_mat(b, 0, n), 0.0,
                        dv_blas_mat(c, 0, n));
}

void dv_gemm_destroy(dv_gemm *g)
{
    if (g == NULL)
        return;
    dv_blas_destroy(g->blas);
    free(g);
}
