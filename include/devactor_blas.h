/*
 * devactor_blas.h -- BLAS on a devactor actor: cuBLAS on the cuda backend,
 * the host's CBLAS (OpenBLAS, or any libcblas) on the simulated device.
 *
 * A library actor built on the public task API alone (src/libs/blas.c):
 * every call is a dv_task on the caller's stream, its operands dv_refs
 * (plus a byte offset) fenced like a launch's, each declared for exactly
 * the bytes it reaches (A and B read; C written, or read and written when
 * beta is not 0).  Shapes, leading dimensions, strides and batch counts
 * are checked against the blocks before anything is posted: an operand
 * that would reach past its block answers DV_EOUT_OF_BOUNDS, naming the
 * operand, the bytes it needs (detail.requested) and the bytes it has
 * from its offset (detail.remaining); nothing is enqueued.  Sizes,
 * leading dimensions, increments and batches are at most 2^31 - 1; an
 * offset is a multiple of the element size; an output's span (its first
 * element to its last, the gaps of its leading dimension or increment
 * included) may not overlap an input's in one block (DV_EINVAL, all).  A
 * call with nothing to do (an empty result: m or n 0, say) enqueues
 * nothing but is checked all the same: its stream, and every handle that
 * is not DV_REF_NULL at its offset.
 *
 * Libraries are opened at run time (dlopen), so devactor builds and runs
 * without them:
 *   cuda:  $DV_CUBLAS_PATH when set (only it), else libcublas.so.13,
 *          .12, .11, libcublas.so the usual way (LD_LIBRARY_PATH, the
 *          loader's cache), else /usr/local/cuda/lib64/libcublas.so;
 *   sim:   $DV_CBLAS_PATH when set (only it), else libopenblas.so.0,
 *          libopenblas.so, libcblas.so.3, libblas.so.3 (Debian's
 *          reference BLAS carries CBLAS).
 * Where none opens, dv_blas_create answers DV_ENOTSUP and says what it
 * tried; where the one that opens lacks a function, which.
 *
 * Handles.  One cuBLAS handle per stream of the actor, made by the first
 * call on that stream (on the actor's thread), bound to it for good, and
 * made again after a context rebuild; each call's workspace is task
 * scratch from the actor's pool on the call's stream (cublasSetWorkspace),
 * so cuBLAS allocates nothing itself.  dv_blas_destroy destroys them.
 *
 * Precisions (dv_blas_type): F32 and F64 compute in their own precision;
 * TF32 is F32 storage with TF32 tensor-core products (the sim rounds the
 * inputs to TF32 the same way); F16 and BF16 are 2-byte storage with F32
 * accumulation.  GEMV, AXPY and DOT take F32 or F64.  Scalars (alpha,
 * beta) are given as double and converted to the compute type.
 *
 * Layouts: a matrix is row- or column-major (dv_blas_layout, one for the
 * whole call) with a leading dimension in elements: the distance between
 * rows (row-major) or columns (column-major).  op N or T applies to A and
 * B as stored.  Strided-batched GEMM takes `batch` matrices per operand,
 * `stride` elements apart (0 for A or B: one matrix for every batch;
 * C's matrices may not overlap).
 *
 * Threads: any thread may call these, not from inside a task.  The plain
 * forms wait for the call to finish on the device, like dv_task.  The
 * _async forms return once it is ordered -- enqueued on the stream and
 * fenced -- so calls posted one after another run back to back on the
 * device; f completes when the device finished it.  A call refused
 * before posting (or with nothing to do) answers its status and completes
 * f with it.  A dv_blas is one actor's.
 */
#ifndef DEVACTOR_BLAS_H
#define DEVACTOR_BLAS_H

#include "devactor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dv_blas dv_blas;

typedef enum dv_blas_type {
    DV_BLAS_F32 = 0,
    DV_BLAS_F64 = 1,
    DV_BLAS_TF32 = 2, /* float storage, TF32 products */
    DV_BLAS_F16 = 3,  /* IEEE half storage, F32 accumulation */
    DV_BLAS_BF16 = 4, /* bfloat16 storage, F32 accumulation */
} dv_blas_type;

typedef enum dv_blas_layout {
    DV_BLAS_ROW_MAJOR = 0,
    DV_BLAS_COL_MAJOR = 1,
} dv_blas_layout;

typedef enum dv_blas_op {
    DV_BLAS_N = 0, /* as stored */
    DV_BLAS_T = 1, /* transposed */
} dv_blas_op;

/* A matrix operand: a block, where the matrix starts in it (bytes), its
 * leading dimension (elements), and for strided-batched calls the
 * distance between consecutive matrices (elements). */
typedef struct dv_blas_matrix {
    dv_ref ref;
    uint64_t offset;
    int64_t ld;
    int64_t stride;
} dv_blas_matrix;

/* A vector operand: a block, where the vector starts (bytes), and the
 * distance between elements (elements, not 0; negative as in BLAS: the
 * vector is read from its far end). */
typedef struct dv_blas_vector {
    dv_ref ref;
    uint64_t offset;
    int64_t inc;
} dv_blas_vector;

static inline dv_blas_matrix dv_blas_mat(dv_ref ref, uint64_t offset, int64_t ld)
{
    dv_blas_matrix m = {ref, offset, ld, 0};
    return m;
}
static inline dv_blas_vector dv_blas_vec(dv_ref ref, uint64_t offset, int64_t inc)
{
    dv_blas_vector v = {ref, offset, inc};
    return v;
}

/* Bytes of one element of type. */
DV_EXPORT unsigned dv_blas_type_size(dv_blas_type type);

/* The BLAS of actor.  DV_ENOTSUP (with the names tried) when no library
 * opens for its backend; DV_EINVAL for a NULL argument. */
DV_EXPORT int dv_blas_create(dv_actor *actor, dv_blas **out);
/* Waits for the actor's streams that ran calls, destroys the handles on
 * the actor's thread, and frees b.  NULL is fine.  Inside a task it does
 * nothing (dv_last_error says DV_EDEADLK) and b stays usable, to be
 * destroyed outside; dv_blas_create there answers DV_EDEADLK. */
DV_EXPORT void dv_blas_destroy(dv_blas *b);
/* Which library b uses, by the name it opened: "cuBLAS (libcublas.so.13)"
 * or "CBLAS (libopenblas.so.0)", say. */
DV_EXPORT const char *dv_blas_library(const dv_blas *b);

/* C (m x n) = alpha op(A) op(B) + beta C, op(A) m x k, op(B) k x n.
 * m, n or k of 0: nothing to do (C is still scaled by beta when k is 0,
 * as BLAS does). */
DV_EXPORT int dv_blas_gemm(dv_blas *b, dv_stream stream, dv_blas_type type, dv_blas_layout layout,
                           dv_blas_op op_a, dv_blas_op op_b, int64_t m, int64_t n, int64_t k,
                           double alpha, dv_blas_matrix a, dv_blas_matrix bm, double beta,
                           dv_blas_matrix c);
DV_EXPORT int dv_blas_gemm_async(dv_blas *b, dv_stream stream, dv_blas_type type,
                                 dv_blas_layout layout, dv_blas_op op_a, dv_blas_op op_b,
                                 int64_t m, int64_t n, int64_t k, double alpha, dv_blas_matrix a,
                                 dv_blas_matrix bm, double beta, dv_blas_matrix c, dv_future *f);
/* batch GEMMs of one shape (batch at least 1): matrix i of each operand
 * starts stride * i elements after its first. */
DV_EXPORT int dv_blas_gemm_strided_batched(dv_blas *b, dv_stream stream, dv_blas_type type,
                                           dv_blas_layout layout, dv_blas_op op_a,
                                           dv_blas_op op_b, int64_t m, int64_t n, int64_t k,
                                           double alpha, dv_blas_matrix a, dv_blas_matrix bm,
                                           double beta, dv_blas_matrix c, int64_t batch);
DV_EXPORT int dv_blas_gemm_strided_batched_async(dv_blas *b, dv_stream stream, dv_blas_type type,
                                                 dv_blas_layout layout, dv_blas_op op_a,
                                                 dv_blas_op op_b, int64_t m, int64_t n, int64_t k,
                                                 double alpha, dv_blas_matrix a, dv_blas_matrix bm,
                                                 double beta, dv_blas_matrix c, int64_t batch,
                                                 dv_future *f);
/* y = alpha op(A) x + beta y, A m x n as stored (F32, F64).  x or y empty
 * (m or n of 0): nothing to do, y left as it is whatever beta (BLAS's
 * GEMV returns at once; unlike GEMM with k of 0). */
DV_EXPORT int dv_blas_gemv(dv_blas *b, dv_stream stream, dv_blas_type type, dv_blas_layout layout,
                           dv_blas_op op, int64_t m, int64_t n, double alpha, dv_blas_matrix a,
                           dv_blas_vector x, double beta, dv_blas_vector y);
DV_EXPORT int dv_blas_gemv_async(dv_blas *b, dv_stream stream, dv_blas_type type,
                                 dv_blas_layout layout, dv_blas_op op, int64_t m, int64_t n,
                                 double alpha, dv_blas_matrix a, dv_blas_vector x, double beta,
                                 dv_blas_vector y, dv_future *f);
/* y = alpha x + y, n elements (F32, F64). */
DV_EXPORT int dv_blas_axpy(dv_blas *b, dv_stream stream, dv_blas_type type, int64_t n,
                           double alpha, dv_blas_vector x, dv_blas_vector y);
DV_EXPORT int dv_blas_axpy_async(dv_blas *b, dv_stream stream, dv_blas_type type, int64_t n,
                                 double alpha, dv_blas_vector x, dv_blas_vector y, dv_future *f);
/* The dot product of n elements of x and y, written (one element of
 * type) at result_offset of result, in stream order (F32, F64). */
DV_EXPORT int dv_blas_dot(dv_blas *b, dv_stream stream, dv_blas_type type, int64_t n,
                          dv_blas_vector x, dv_blas_vector y, dv_ref result,
                          uint64_t result_offset);
DV_EXPORT int dv_blas_dot_async(dv_blas *b, dv_stream stream, dv_blas_type type, int64_t n,
                                dv_blas_vector x, dv_blas_vector y, dv_ref result,
                                uint64_t result_offset, dv_future *f);

#ifdef __cplusplus
}
#endif

#endif
