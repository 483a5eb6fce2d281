/*
 * Tasks through the example GEMM library actor, checked against a CPU
 * reference on random data: the operands are written on other streams
 * than the GEMM runs on, and C is read on a third (the task is fenced like
 * a launch).  gemm_cuda.t runs it with cuBLAS on the real driver.
 */
#include <math.h>

#include "../../tools/examples/gemm.h"
#include "tap.h"

#ifndef GEMM_ON_CUDA
#define GEMM_ON_CUDA 0
#endif

#define M 96
#define N 80
#define K 64

static float A[M * K], B[K * N], C[M * N], R[M * N];

static int count_calls(const dv_task_ctx *ctx, void *user)
{
    (*(int *)user)++;
    return ctx->nargs == 1 && ctx->arg[0] != 0 ? DV_OK : DV_EINVAL;
}

int main(void)
{
    dv_actor_config cfg;
    dv_actor *a = NULL;
    dv_gemm *g = NULL;
    dv_ref ra, rb, rc;

    dv_actor_config_init(&cfg);
    cfg.backend = GEMM_ON_CUDA ? DV_BACKEND_CUDA : DV_BACKEND_SIM;
    cfg.streams = 3;
    cfg.sim_delay_max_us = 100;
    cfg.sim_seed = 4;
    int rcode = dv_actor_create(&cfg, &a);
    if (GEMM_ON_CUDA && rcode == DV_ENODEVICE)
        skip_all("%s", dv_last_error()->message);
    rcode = rcode == DV_OK ? dv_gemm_create(a, &g) : rcode;
    if (GEMM_ON_CUDA && rcode == DV_ENOTSUP)
        skip_all("no cuBLAS library could be opened");
    plan(11);
    is_status(rcode, DV_OK, "an actor and the GEMM library actor (%s)",
              a ? dv_actor_backend_name(a) : "-");
    if (rcode != DV_OK)
        return tap_done();

    uint64_t seed = 12345;
    for (int i = 0; i < M * K; i++)
        A[i] = (float)((seed = seed * 6364136223846793005ull + 1) >> 40) / (float)(1 << 24) - 0.5f;
    for (int i = 0; i < K * N; i++)
        B[i] = (float)((seed = seed * 6364136223846793005ull + 1) >> 40) / (float)(1 << 24) - 0.5f;
    for (int r = 0; r < M; r++)
        for (int c = 0; c < N; c++) {
            double acc = 0;
            for (int i = 0; i < K; i++)
                acc += (double)A[r * K + i] * B[i * N + c];
            R[r * N + c] = (float)acc;
        }
    dv_alloc(a, sizeof(A), 0, "A", &ra);
    dv_alloc(a, sizeof(B), 1, "B", &rb);
    dv_alloc(a, sizeof(C), 2, "C", &rc);
    is_status(dv_copy_htod(a, ra, 0, A, sizeof(A), 0), DV_OK, "A on stream 0");
    is_status(dv_copy_htod(a, rb, 0, B, sizeof(B), 1), DV_OK, "B on stream 1");
    is_status(dv_gemm_sgemm(g, 2, M, N, K, ra, rb, rc), DV_OK, "C = A * B as a task on stream 2");
    is_status(dv_copy_dtoh(a, C, rc, 0, sizeof(C), 0), DV_OK, "C read back on stream 0");
    double worst = 0;
    for (int i = 0; i < M * N; i++)
        worst = fmax(worst, fabs((double)C[i] - R[i]));
    ok(worst < 1e-3, "C matches the CPU reference (largest difference %.2e)", worst);

    /* The task contract itself. */
    int calls = 0;
    dv_arg one[] = {dv_arg_ref(ra, DV_READ, 0)};
    is_status(dv_task(a, count_calls, &calls, 1, one, 1), DV_OK, "a task sees its argument");
    is_int(calls, 1, "... and ran once on the actor");
    dv_ref stale = {ra.bits ^ 1};
    dv_arg bad[] = {dv_arg_ref(stale, DV_READ, 0)};
    is_status(dv_task(a, count_calls, &calls, 1, bad, 1), DV_ESTALE, "a stale handle: DV_ESTALE");
    is_int(calls, 1, "... and the task did not run");
    is_status(dv_task(a, NULL, NULL, 0, NULL, 0), DV_EINVAL, "a NULL task: DV_EINVAL");

    dv_gemm_destroy(g);
    dv_ref_release(ra);
    dv_ref_release(rb);
    dv_ref_release(rc);
    dv_actor_destroy(a);
    return tap_done();
}
