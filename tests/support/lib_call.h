/*
 * A library call inside a task, made the way a cuBLAS or cuFFT wrapper
 * makes one: work on the task's stream that the launch recorder does not
 * see.  On cuda the driver's own cuMemsetD32Async and cuMemcpyDtoDAsync on
 * the task's native_stream; on the sim a host function that reaches device
 * memory through dv_task_sim_access.
 *
 *     lib_call(ctx, dst, src, 0, words)      dst := src (u32 words)
 *     lib_call(ctx, dst, 0, value, words)    dst := value
 */
#ifndef DV_TESTS_SUPPORT_LIB_CALL_H
#define DV_TESTS_SUPPORT_LIB_CALL_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

#include "devactor.h"

typedef int (*lib_cu_memset32_fn)(uint64_t dst, unsigned value, size_t n, void *stream);
typedef int (*lib_cu_memcpy_fn)(uint64_t dst, uint64_t src, size_t bytes, void *stream);

/* A symbol of libcuda (NULL where there is none). */
static inline void *lib_cuda_sym(const char *name)
{
    static void *lib;
    if (lib == NULL)
        lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    return lib != NULL ? dlsym(lib, name) : NULL;
}

typedef struct lib_job {
    uint32_t *dst;
    const uint32_t *src; /* NULL: fill dst with value */
    uint32_t value;
    uint64_t words;
} lib_job;

/* Tests race on device memory on purpose (with the checker off, the race
 * is what corrupts the data): the words move with relaxed atomics, as the
 * device's own loads and stores would, so that ThreadSanitizer reports
 * devactor's races and not a planted one. */
static inline void lib_job_run(void *arg)
{
    lib_job *j = arg;
    for (uint64_t i = 0; i < j->words; i++) {
        uint32_t v = j->src != NULL ? __atomic_load_n(&j->src[i], __ATOMIC_RELAXED) : j->value;
        __atomic_store_n(&j->dst[i], v, __ATOMIC_RELAXED);
    }
}

static inline void lib_job_done(void *arg, int status)
{
    (void)status;
    free(arg);
}

static inline int lib_call(const dv_task_ctx *ctx, uint64_t dst, uint64_t src, uint32_t value,
                           uint64_t words)
{
    if (!ctx->simulated) {
        if (src == 0) {
            lib_cu_memset32_fn f = (lib_cu_memset32_fn)lib_cuda_sym("cuMemsetD32Async");
            return f != NULL && f(dst, value, words, ctx->native_stream) == 0 ? DV_OK : DV_EDRIVER;
        }
        lib_cu_memcpy_fn f = (lib_cu_memcpy_fn)lib_cuda_sym("cuMemcpyDtoDAsync_v2");
        return f != NULL && f(dst, src, words * 4, ctx->native_stream) == 0 ? DV_OK : DV_EDRIVER;
    }
    lib_job *j = malloc(sizeof(*j));
    if (j == NULL)
        return DV_ENOMEM;
    j->dst = dv_task_sim_access(ctx, dst, words * 4, DV_WRITE);
    j->src = src != 0 ? dv_task_sim_access(ctx, src, words * 4, DV_READ) : NULL;
    j->value = value;
    j->words = words;
    if (j->dst == NULL || (src != 0 && j->src == NULL)) {
        int rc = dv_last_error()->status;
        free(j);
        return rc;
    }
    int rc = dv_task_host_fn_cleanup(ctx, lib_job_run, lib_job_done, j);
    if (rc != DV_OK)
        free(j);
    return rc;
}

#endif /* DV_TESTS_SUPPORT_LIB_CALL_H */
