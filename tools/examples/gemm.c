/*
 * The GEMM library actor (gemm.h).  cuBLAS is column-major: a row-major
 * C = A * B is the column-major C^T = B^T * A^T, so sgemm is called with
 * the operands swapped and no transposes.  The cuBLAS handle is created on
 * the actor's thread by the first task and destroyed by a last one.
 *
 * On the sim a task enqueues a host function with a job.  A job is freed
 * by the library, not by the host function: after a sticky error the
 * stream never runs it.  Jobs stay on a list (the actor's thread only);
 * the ones done are reused, and destroy waits for the streams used, then
 * frees them all.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"

/* The few cuBLAS declarations needed, to build without its headers. */
typedef void *cublas_handle;
typedef int (*cublas_create_fn)(cublas_handle *);
typedef int (*cublas_destroy_fn)(cublas_handle);
typedef int (*cublas_set_stream_fn)(cublas_handle, void *);
typedef int (*cublas_sgemm_fn)(cublas_handle, int, int, int, int, int, const float *, const float *,
                               int, const float *, int, const float *, float *, int);
#define CUBLAS_OP_N 0

struct job {
    int m, n, k;
    const float *a, *b;
    float *c;
    atomic_bool done; /* set by the host function */
    struct job *next;
};

struct dv_gemm {
    dv_actor *actor;
    struct job *jobs;      /* every job made (actor thread) */
    uint64_t streams_used; /* bit s: a job went onto stream s */
    void *lib;
    cublas_handle handle;
    cublas_create_fn create;
    cublas_destroy_fn destroy;
    cublas_set_stream_fn set_stream;
    cublas_sgemm_fn sgemm;
};

static void host_gemm(void *arg)
{
    struct job *j = arg;
    for (int r = 0; r < j->m; r++) {
        for (int col = 0; col < j->n; col++) {
            float acc = 0.0f;
            for (int i = 0; i < j->k; i++)
                acc += j->a[(size_t)r * j->k + i] * j->b[(size_t)i * j->n + col];
            j->c[(size_t)r * j->n + col] = acc;
        }
    }
    /* Release: the next task may reuse the job once this is seen. */
    atomic_store_explicit(&j->done, true, memory_order_release);
}

/* A job to fill: one the host function finished, or a new one. */
static struct job *job_get(dv_gemm *g)
{
    for (struct job *j = g->jobs; j != NULL; j = j->next)
        if (atomic_load_explicit(&j->done, memory_order_acquire))
            return j;
    struct job *j = calloc(1, sizeof(*j));
    if (j != NULL) {
        j->next = g->jobs;
        g->jobs = j;
    }
    return j;
}

struct call {
    dv_gemm *g;
    int m, n, k;
};

static int gemm_task(const dv_task_ctx *ctx, void *user)
{
    struct call *c = user;
    uint64_t pa = ctx->arg[0], pb = ctx->arg[1], pc = ctx->arg[2];
    if (ctx->simulated) {
        const float *a = dv_task_sim_access(ctx, pa, (uint64_t)c->m * c->k * 4, DV_READ);
        const float *b = dv_task_sim_access(ctx, pb, (uint64_t)c->k * c->n * 4, DV_READ);
        float *out = dv_task_sim_access(ctx, pc, (uint64_t)c->m * c->n * 4, DV_WRITE);
        if (a == NULL || b == NULL || out == NULL)
            return DV_EINVAL;
        struct job *j = job_get(c->g);
        if (j == NULL)
            return DV_ENOMEM;
        j->m = c->m, j->n = c->n, j->k = c->k, j->a = a, j->b = b, j->c = out;
        atomic_store_explicit(&j->done, false, memory_order_relaxed);
        int rc = dv_task_host_fn(ctx, host_gemm, j);
        if (rc != DV_OK)
            atomic_store_explicit(&j->done, true, memory_order_relaxed); /* never queued */
        else
            c->g->streams_used |= UINT64_C(1) << ctx->stream;
        return rc;
    }
    dv_gemm *g = c->g;
    if (g->handle == NULL && g->create(&g->handle) != 0)
        return DV_EDRIVER;
    if (g->set_stream(g->handle, ctx->native_stream) != 0)
        return DV_EDRIVER;
    const float one = 1.0f, zero = 0.0f;
    int st = g->sgemm(g->handle, CUBLAS_OP_N, CUBLAS_OP_N, c->n, c->m, c->k, &one,
                      (const float *)(uintptr_t)pb, c->n, (const float *)(uintptr_t)pa, c->k, &zero,
                      (float *)(uintptr_t)pc, c->n);
    return st == 0 ? DV_OK : DV_EDRIVER;
}

static int destroy_task(const dv_task_ctx *ctx, void *user)
{
    (void)ctx;
    dv_gemm *g = user;
    if (g->handle != NULL)
        g->destroy(g->handle);
    g->handle = NULL;
    return DV_OK;
}

int dv_gemm_create(dv_actor *actor, dv_gemm **out)
{
    dv_gemm *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return DV_ENOMEM;
    g->actor = actor;
    if (strcmp(dv_actor_backend_name(actor), "cuda") == 0) {
        static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so",
                                            "/usr/local/cuda/lib64/libcublas.so"};
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && g->lib == NULL; i++)
            g->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (g->lib == NULL) {
            free(g);
            return DV_ENOTSUP;
        }
        g->create = (cublas_create_fn)dlsym(g->lib, "cublasCreate_v2");
        g->destroy = (cublas_destroy_fn)dlsym(g->lib, "cublasDestroy_v2");
        g->set_stream = (cublas_set_stream_fn)dlsym(g->lib, "cublasSetStream_v2");
        g->sgemm = (cublas_sgemm_fn)dlsym(g->lib, "cublasSgemm_v2");
        if (!g->create || !g->destroy || !g->set_stream || !g->sgemm) {
            dlclose(g->lib);
            free(g);
            return DV_ENOTSUP;
        }
    }
    *out = g;
    return DV_OK;
}

int dv_gemm_sgemm(dv_gemm *g, dv_stream stream, int m, int n, int k, dv_ref a, dv_ref b, dv_ref c)
{
    if (g == NULL || m <= 0 || n <= 0 || k <= 0)
        return DV_EINVAL;
    struct call call = {g, m, n, k};
    dv_arg args[] = {dv_arg_ref(a, DV_READ, 0), dv_arg_ref(b, DV_READ, 0),
                     dv_arg_ref(c, DV_WRITE, 0)};
    return dv_task(g->actor, gemm_task, &call, stream, args, 3);
}

void dv_gemm_destroy(dv_gemm *g)
{
    if (g == NULL)
        return;
    /* Every job queued has run, or never will (a lost context). */
    for (dv_stream s = 0; s < 64; s++)
        if (g->streams_used & (UINT64_C(1) << s))
            (void)dv_sync(g->actor, s);
    for (struct job *j = g->jobs, *next; j != NULL; j = next) {
        next = j->next;
        free(j);
    }
    if (g->lib != NULL) {
        (void)dv_task(g->actor, destroy_task, g, 0, NULL, 0);
        /* libcublas stays mapped: the driver may still run its code. */
    }
    free(g);
}
