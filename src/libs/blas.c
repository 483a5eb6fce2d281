/*
 * BLAS on an actor (devactor_blas.h), written against the public API
 * alone: a task per call, cuBLAS on cuda, the host's CBLAS on the sim.
 *
 * The caller's thread checks every operand against its block
 * (dv_ref_access gives the size) and builds the task's arguments, one
 * dv_arg_ref_range per operand covering exactly the bytes it reaches.
 * The task runs on the actor's thread: on cuda it takes the stream's
 * cuBLAS handle (made there, again after a rebuild), a workspace from the
 * pool (task scratch), and enqueues the call on the task's native stream;
 * on the sim it maps each operand (dv_task_sim_access, checked against
 * the declared ranges when the checker is on) and enqueues a host
 * function that calls CBLAS in stream order.  The host function's job is
 * freed by its cleanup, which runs exactly once whether or not the stream
 * gets there.
 */
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devactor_blas.h"
#include "libs/libload.h"

#define NSTREAMS 64 /* streams an actor can have */
/* A call's cuBLAS workspace (cuBLAS's own advice for Hopper), and what is
 * tried when the pool cannot give that much. */
#define WORKSPACE       (32u << 20)
#define WORKSPACE_SMALL (4u << 20)

/* ------------------------------------------------------------------------
 * The libraries' declarations, to build without their headers
 * ------------------------------------------------------------------------ */

typedef void *cublas_t;
enum { CUBLAS_POINTER_MODE_HOST = 0, CUBLAS_POINTER_MODE_DEVICE = 1 };
enum { CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_64F = 70, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 };
enum { CUBLAS_GEMM_DEFAULT = -1 };

typedef int (*cublas_create_fn)(cublas_t *);
typedef int (*cublas_destroy_fn)(cublas_t);
typedef int (*cublas_set_stream_fn)(cublas_t, void *);
typedef int (*cublas_set_workspace_fn)(cublas_t, void *, size_t);
typedef int (*cublas_set_pointer_mode_fn)(cublas_t, int);
typedef int (*cublas_gemm_ex_fn)(cublas_t, int, int, int, int, int, const void *, const void *, int,
                                 int, const void *, int, int, const void *, void *, int, int, int,
                                 int);
typedef int (*cublas_gemm_sb_fn)(cublas_t, int, int, int, int, int, const void *, const void *,
                                 int, int, long long, const void *, int, int, long long,
                                 const void *, void *, int, int, long long, int, int, int);
typedef int (*cublas_sgemv_fn)(cublas_t, int, int, int, const float *, const float *, int,
                               const float *, int, const float *, float *, int);
typedef int (*cublas_dgemv_fn)(cublas_t, int, int, int, const double *, const double *, int,
                               const double *, int, const double *, double *, int);
typedef int (*cublas_saxpy_fn)(cublas_t, int, const float *, const float *, int, float *, int);
typedef int (*cublas_daxpy_fn)(cublas_t, int, const double *, const double *, int, double *, int);
typedef int (*cublas_sdot_fn)(cublas_t, int, const float *, int, const float *, int, float *);
typedef int (*cublas_ddot_fn)(cublas_t, int, const double *, int, const double *, int, double *);

enum { CBLAS_ROW = 101, CBLAS_COL = 102, CBLAS_N = 111, CBLAS_T = 112 };
typedef void (*cblas_sgemm_fn)(int, int, int, int, int, int, float, const float *, int,
                               const float *, int, float, float *, int);
typedef void (*cblas_dgemm_fn)(int, int, int, int, int, int, double, const double *, int,
                               const double *, int, double, double *, int);
typedef void (*cblas_sgemv_fn)(int, int, int, int, float, const float *, int, const float *, int,
                               float, float *, int);
typedef void (*cblas_dgemv_fn)(int, int, int, int, double, const double *, int, const double *,
                               int, double, double *, int);
typedef void (*cblas_saxpy_fn)(int, float, const float *, int, float *, int);
typedef void (*cblas_daxpy_fn)(int, double, const double *, int, double *, int);
typedef float (*cblas_sdot_fn)(int, const float *, int, const float *, int);
typedef double (*cblas_ddot_fn)(int, const double *, int, const double *, int);

/* ------------------------------------------------------------------------
 * State
 * ------------------------------------------------------------------------ */

struct dv_blas {
    dv_actor *actor;
    bool cuda;
    void *lib;
    char name[300];
    _Atomic uint64_t streams_used; /* bit s: a call ran on stream s */
    /* cuBLAS (the actor's thread only, past creation) */
    struct {
        cublas_t h;
        uint64_t context; /* the context generation h was made in */
        uint64_t driver;  /* the CUDA context it lives in (dv_task_ctx) */
        int mode;         /* its pointer mode */
        void *stream;     /* the stream and workspace last set (cuBLAS */
        uint64_t ws, ws_bytes; /* resets the workspace when the stream is set) */
    } handle[NSTREAMS];
    cublas_create_fn create;
    cublas_destroy_fn destroy;
    cublas_set_stream_fn set_stream;
    cublas_set_workspace_fn set_workspace;
    cublas_set_pointer_mode_fn set_pointer_mode;
    cublas_gemm_ex_fn gemm_ex;
    cublas_gemm_sb_fn gemm_sb;
    cublas_sgemv_fn sgemv;
    cublas_dgemv_fn dgemv;
    cublas_saxpy_fn saxpy;
    cublas_daxpy_fn daxpy;
    cublas_sdot_fn sdot;
    cublas_ddot_fn ddot;
    /* CBLAS */
    cblas_sgemm_fn c_sgemm;
    cblas_dgemm_fn c_dgemm;
    cblas_sgemv_fn c_sgemv;
    cblas_dgemv_fn c_dgemv;
    cblas_saxpy_fn c_saxpy;
    cblas_daxpy_fn c_daxpy;
    cblas_sdot_fn c_sdot;
    cblas_ddot_fn c_ddot;
};

typedef enum { OP_GEMM, OP_GEMV, OP_AXPY, OP_DOT } op_kind;

int dv__blas_task(const dv_task_ctx *ctx, void *user);

/* Operands, in the order of the task's arguments (absent ones skipped). */
enum { A_, B_, C_, NOPS };

/* One call, as the task needs it.  Matrices are in BLAS's column-major
 * terms already where cuBLAS is concerned; the sim keeps the caller's
 * layout (CBLAS takes both). */
typedef struct blas_call {
    dv_blas *b;
    op_kind kind;
    dv_blas_type type;
    dv_blas_layout layout;
    dv_blas_op op_a, op_b;
    int64_t m, n, k, batch;
    int64_t ld[NOPS], stride[NOPS]; /* GEMV: ld[A_]; vectors: stride = inc */
    uint64_t bytes[NOPS];           /* what each operand reaches (0: absent) */
    int arg[NOPS];                  /* its index among the task's args, -1: absent */
    dv_arg_access access[NOPS];
    double alpha, beta;
    const char *what; /* "gemm", ... for messages */
} blas_call;

unsigned dv_blas_type_size(dv_blas_type type)
{
    switch (type) {
    case DV_BLAS_F32:
    case DV_BLAS_TF32:
        return 4;
    case DV_BLAS_F64:
        return 8;
    case DV_BLAS_F16:
    case DV_BLAS_BF16:
        return 2;
    }
    return 0;
}

const char *dv_blas_library(const dv_blas *b)
{
    return b != NULL ? b->name : "";
}

/* ------------------------------------------------------------------------
 * Opening
 * ------------------------------------------------------------------------ */

/* DV_ENOTSUP for a library b could not use (what b->lib is closed). */
static int no_library(dv_blas *b, const char *what, const char *tried, const char *path)
{
    char why[600];
    dv__lib_why(why, sizeof(why), &b->lib, tried, path);
    return dv_error_set(DV_ENOTSUP, "blas_create", 0, 0, "blas_create: %s; %s", what, why);
}

int dv_blas_create(dv_actor *actor, dv_blas **out)
{
    static const char op[] = "blas_create";
    if (out != NULL)
        *out = NULL; /* as every failure leaves it */
    if (actor == NULL || out == NULL)
        return dv_error_set(DV_EINVAL, op, 0, 0, "blas_create: NULL %s",
                            actor == NULL ? "actor" : "out");
    *out = NULL;
    /* Inside a task no dv_blas could be destroyed (destroy waits for the
     * actor): none is made there either. */
    int rc = dv__lib_no_wait(op);
    if (rc == DV_OK)
        rc = dv__lib_here(actor, op);
    if (rc != DV_OK)
        return rc;
    dv_blas *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return dv_error_set(DV_ENOMEM, op, sizeof(*b), 0, "blas_create: out of host memory");
    b->actor = actor;
    b->cuda = strcmp(dv_actor_backend_name(actor), "cuda") == 0;
    char tried[512], path[256];
    if (b->cuda) {
        static const char *const names[] = {"libcublas.so.13",
                                            "libcublas.so.12",
                                            "libcublas.so.11",
                                            "libcublas.so",
                                            "/usr/local/cuda/lib64/libcublas.so",
                                            NULL};
        b->lib = dv__lib_open("DV_CUBLAS_PATH", names, tried, sizeof(tried), path, sizeof(path));
        bool all = b->lib != NULL && DV_LIB_SYM(b->lib, b->create, "cublasCreate_v2") &&
                   DV_LIB_SYM(b->lib, b->destroy, "cublasDestroy_v2") &&
                   DV_LIB_SYM(b->lib, b->set_stream, "cublasSetStream_v2") &&
                   DV_LIB_SYM(b->lib, b->set_workspace, "cublasSetWorkspace_v2") &&
                   DV_LIB_SYM(b->lib, b->set_pointer_mode, "cublasSetPointerMode_v2") &&
                   DV_LIB_SYM(b->lib, b->gemm_ex, "cublasGemmEx") &&
                   DV_LIB_SYM(b->lib, b->gemm_sb, "cublasGemmStridedBatchedEx") &&
                   DV_LIB_SYM(b->lib, b->sgemv, "cublasSgemv_v2") &&
                   DV_LIB_SYM(b->lib, b->dgemv, "cublasDgemv_v2") &&
                   DV_LIB_SYM(b->lib, b->saxpy, "cublasSaxpy_v2") &&
                   DV_LIB_SYM(b->lib, b->daxpy, "cublasDaxpy_v2") &&
                   DV_LIB_SYM(b->lib, b->sdot, "cublasSdot_v2") && DV_LIB_SYM(b->lib, b->ddot, "cublasDdot_v2");
        if (!all) {
            rc = no_library(b, "no usable cuBLAS (set DV_CUBLAS_PATH)", tried, path);
            free(b);
            return rc;
        }
        snprintf(b->name, sizeof(b->name), "cuBLAS (%s)", path);
    } else {
        static const char *const names[] = {"libopenblas.so.0", "libopenblas.so", "libcblas.so.3",
                                            "libblas.so.3", NULL};
        b->lib = dv__lib_open("DV_CBLAS_PATH", names, tried, sizeof(tried), path, sizeof(path));
        bool all = b->lib != NULL && DV_LIB_SYM(b->lib, b->c_sgemm, "cblas_sgemm") &&
                   DV_LIB_SYM(b->lib, b->c_dgemm, "cblas_dgemm") && DV_LIB_SYM(b->lib, b->c_sgemv, "cblas_sgemv") &&
                   DV_LIB_SYM(b->lib, b->c_dgemv, "cblas_dgemv") && DV_LIB_SYM(b->lib, b->c_saxpy, "cblas_saxpy") &&
                   DV_LIB_SYM(b->lib, b->c_daxpy, "cblas_daxpy") && DV_LIB_SYM(b->lib, b->c_sdot, "cblas_sdot") &&
                   DV_LIB_SYM(b->lib, b->c_ddot, "cblas_ddot");
        if (!all) {
            rc = no_library(b,
                            "no CBLAS for the simulated device (install libopenblas0 or "
                            "libblas3, or set DV_CBLAS_PATH)",
                            tried, path);
            free(b);
            return rc;
        }
        snprintf(b->name, sizeof(b->name), "CBLAS (%s)", path);
    }
    *out = b;
    return DV_OK;
}

static int destroy_task(const dv_task_ctx *ctx, void *user)
{
    dv_blas *b = user;
    for (unsigned s = 0; s < NSTREAMS; s++) {
        /* A handle of a context since reset went with it: only forgotten. */
        if (b->handle[s].h != NULL && b->handle[s].driver == ctx->driver_context)
            (void)b->destroy(b->handle[s].h);
        b->handle[s].h = NULL;
    }
    return DV_OK;
}

void dv_blas_destroy(dv_blas *b)
{
    /* It waits for the actor: on an actor's thread it does nothing (the
     * detail says so), and b stays usable, to be destroyed elsewhere. */
    if (b == NULL || dv__lib_no_wait("blas_destroy") != DV_OK)
        return;
    uint64_t used = atomic_load(&b->streams_used);
    for (unsigned s = 0; s < NSTREAMS; s++)
        if (used & (UINT64_C(1) << s))
            (void)dv_sync(b->actor, s);
    if (b->cuda)
        (void)dv_task(b->actor, destroy_task, b, 0, NULL, 0);
    /* The library stays mapped: a library's threads, or the driver, may
     * still run its code. */
    free(b);
}

/* ------------------------------------------------------------------------
 * Checking operands (the caller's thread)
 * ------------------------------------------------------------------------ */

static const char *const operand_names[][NOPS] = {
    [OP_GEMM] = {"A", "B", "C"},
    [OP_GEMV] = {"A", "x", "y"},
    [OP_AXPY] = {"x", "y", ""},
    [OP_DOT] = {"x", "y", "result"},
};

static bool mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a != 0 && b > UINT64_MAX / a)
        return false;
    *out = a * b;
    return true;
}

/* Elements a matrix of rows x cols reaches with leading dimension ld,
 * batch of them stride apart; false when ld is too small (*why says). */
static bool matrix_extent(dv_blas_layout layout, int64_t rows, int64_t cols, int64_t ld,
                          int64_t stride, int64_t batch, uint64_t *elems, const char **why)
{
    int64_t minor = layout == DV_BLAS_ROW_MAJOR ? cols : rows;
    int64_t major = layout == DV_BLAS_ROW_MAJOR ? rows : cols;
    if (ld < (minor > 1 ? minor : 1)) {
        *why = layout == DV_BLAS_ROW_MAJOR ? "its leading dimension is under its columns"
                                           : "its leading dimension is under its rows";
        return false;
    }
    if (stride < 0) {
        *why = "its stride is negative";
        return false;
    }
    uint64_t one, span;
    if (rows == 0 || cols == 0) {
        one = 0;
    } else if (!mul_ok((uint64_t)(major - 1), (uint64_t)ld, &one) ||
               one > UINT64_MAX - (uint64_t)minor) {
        *why = "it is too large";
        return false;
    } else {
        one += (uint64_t)minor;
    }
    if (one == 0 || batch <= 1) {
        *elems = one;
        return true;
    }
    if (!mul_ok((uint64_t)(batch - 1), (uint64_t)stride, &span) || span > UINT64_MAX - one) {
        *why = "its batch is too large";
        return false;
    }
    *elems = span + one;
    return true;
}

/* Check that `elems` elements at off of ref fit its block; the bytes into
 * *bytes, the block's address into *base. */
static int fits(const blas_call *c, int which, dv_ref ref, uint64_t off, uint64_t elems,
                uint64_t *bytes, uint64_t *base)
{
    const char *name = operand_names[c->kind][which];
    unsigned es = dv_blas_type_size(c->type);
    if (elems == 0) {
        *bytes = 0;
        *base = 0;
        return DV_OK;
    }
    if (!mul_ok(elems, es, bytes))
        return dv_error_set(DV_EINVAL, "blas", 0, 0, "blas_%s: operand %s is too large", c->what,
                            name);
    return dv__lib_operand("blas", "blas_", c->what, name, ref, off, *bytes, es, base);
}

static bool fits_int(int64_t v)
{
    return v >= INT_MIN && v <= INT_MAX;
}

/* What an _async call does with its future: set when it was posted. */
typedef struct posting {
    dv_future *f; /* NULL: blocking */
    bool posted;
} posting;

/* Post c with its operands (refs[i] at offs[i]): blocking, or until it is
 * ordered (enqueued), so that c, on the caller's stack, outlives the
 * actor's use of it. */
static int post(blas_call *c, const dv_ref *refs, const uint64_t *offs, const uint64_t *elems,
                dv_stream stream, posting *p)
{
    uint64_t base[NOPS] = {0};
    /* The call's own name on an unknown stream (the task would say
     * "task"). */
    int rc = dv__lib_stream("blas", "blas_", c->what, c->b->actor, stream);
    if (rc != DV_OK)
        return rc;
    for (int i = 0; i < NOPS; i++) {
        c->arg[i] = -1;
        c->bytes[i] = 0;
        if (elems[i] == 0)
            continue;
        rc = fits(c, i, refs[i], offs[i], elems[i], &c->bytes[i], &base[i]);
        if (rc != DV_OK)
            return rc;
    }
    /* An output may not share bytes with an input: BLAS's result would
     * depend on the order it works in. */
    int out = c->kind == OP_AXPY ? B_ : C_;
    for (int i = 0; i < NOPS; i++) {
        if (i == out || c->bytes[i] == 0 || c->bytes[out] == 0 || base[i] != base[out])
            continue;
        uint64_t lo = offs[i] > offs[out] ? offs[i] : offs[out];
        uint64_t hi_i = offs[i] + c->bytes[i], hi_o = offs[out] + c->bytes[out];
        if (lo < (hi_i < hi_o ? hi_i : hi_o))
            return dv_error_set(DV_EINVAL, "blas", 0, 0,
                                "blas_%s: operand %s overlaps operand %s in one block", c->what,
                                operand_names[c->kind][out], operand_names[c->kind][i]);
    }
    dv_arg args[NOPS];
    unsigned nargs = 0;
    for (int i = 0; i < NOPS; i++) {
        if (c->bytes[i] == 0)
            continue;
        c->arg[i] = (int)nargs;
        args[nargs++] = dv_arg_ref_range(refs[i], c->access[i], offs[i], c->bytes[i]);
    }
    if (p->f == NULL)
        return dv_task(c->b->actor, dv__blas_task, c, stream, args, nargs);
    rc = dv__lib_no_wait("blas");
    if (rc != DV_OK)
        return rc; /* not posted: settle completes the future */
    rc = dv_task_async(c->b->actor, dv__blas_task, c, stream, args, nargs, p->f);
    p->posted = true; /* refused or not, the future is the task's now */
    return rc != DV_OK ? rc : dv_future_wait_ordered(p->f);
}

/* An _async call's end: a call refused (or with nothing to do) before it
 * was posted completes its future with its status, as devactor's do. */
static int settle(posting *p, int rc)
{
    if (p->f != NULL && !p->posted && dv_future_fail(p->f, rc) != rc)
        return DV_EINVAL; /* the future itself was bad: its detail stands */
    return rc;
}

static int check_common(dv_blas *b, const char *what, dv_blas_type type, bool any_type)
{
    if (b == NULL)
        return dv_error_set(DV_EINVAL, "blas", 0, 0, "blas_%s: NULL dv_blas", what);
    if (dv_blas_type_size(type) == 0 ||
        (!any_type && type != DV_BLAS_F32 && type != DV_BLAS_F64))
        return dv_error_set(DV_EINVAL, "blas", 0, 0,
                            "blas_%s: type %d is not one it takes (%s)", what, (int)type,
                            any_type ? "F32, F64, TF32, F16, BF16" : "F32, F64");
    return DV_OK;
}

static int gemm_common(dv_blas *b, dv_stream stream, dv_blas_type type, dv_blas_layout layout,
                       dv_blas_op op_a, dv_blas_op op_b, int64_t m, int64_t n, int64_t k,
                       double alpha, dv_blas_matrix a, dv_blas_matrix bm, double beta,
                       dv_blas_matrix c, int64_t batch, bool batched, posting *p)
{
    const char *what = batched ? "gemm_strided_batched" : "gemm";
    int rc = check_common(b, what, type, true);
    if (rc != DV_OK)
        return rc;
    if ((layout != DV_BLAS_ROW_MAJOR && layout != DV_BLAS_COL_MAJOR) ||
        (op_a != DV_BLAS_N && op_a != DV_BLAS_T) || (op_b != DV_BLAS_N && op_b != DV_BLAS_T))
        return dv_error_set(DV_EINVAL, "blas", 0, 0, "blas_%s: bad layout or op", what);
    if (m < 0 || n < 0 || k < 0 || batch < 1)
        return dv_error_set(DV_EINVAL, "blas", 0, 0,
                            "blas_%s: m %lld, n %lld, k %lld, batch %lld: sizes are at least 0, "
                            "batch at least 1",
                            what, (long long)m, (long long)n, (long long)k, (long long)batch);
    if (!fits_int(m) || !fits_int(n) || !fits_int(k) || !fits_int(batch) || !fits_int(a.ld) ||
        !fits_int(bm.ld) || !fits_int(c.ld))
        return dv_error_set(DV_EINVAL, "blas", 0, 0,
                            "blas_%s: a size, leading dimension or batch past 2^31 - 1", what);
    if (m == 0 || n == 0) { /* C is empty: nothing to do but the checks */
        const dv_ref refs[NOPS] = {a.ref, bm.ref, c.ref};
        uint64_t none;
        const char *why = NULL;
        if (!matrix_extent(layout, m, n, c.ld, 0, 1, &none, &why)) /* its ld, as ever */
            return dv_error_set(DV_EINVAL, "blas", 0, 0,
                                "blas_%s: operand C (%lld x %lld, ld %lld): %s", what, (long long)m,
                                (long long)n, (long long)c.ld, why);
        const uint64_t offs[NOPS] = {a.offset, bm.offset, c.offset};
        return dv__lib_nothing_to_do("blas", "blas_", what, b->actor, stream, refs, offs,
                                     dv_blas_type_size(type), operand_names[OP_GEMM], NOPS);
    }
    blas_call call = {.b = b,
                      .kind = OP_GEMM,
                      .type = type,
                      .layout = layout,
                      .op_a = op_a,
                      .op_b = op_b,
                      .m = m,
                      .n = n,
                      .k = k,
                      .batch = batch,
                      .ld = {a.ld, bm.ld, c.ld},
                      .stride = {batched ? a.stride : 0, batched ? bm.stride : 0,
                                 batched ? c.stride : 0},
                      .access = {DV_READ, DV_READ, beta != 0.0 ? DV_READ_WRITE : DV_WRITE},
                      .alpha = alpha,
                      .beta = beta,
                      .what = what};
    /* Stored shapes: op(A) is m x k, op(B) k x n. */
    int64_t ar = op_a == DV_BLAS_N ? m : k, ac = op_a == DV_BLAS_N ? k : m;
    int64_t br = op_b == DV_BLAS_N ? k : n, bc = op_b == DV_BLAS_N ? n : k;
    uint64_t elems[NOPS];
    const int64_t rows[NOPS] = {ar, br, m}, cols[NOPS] = {ac, bc, n};
    for (int i = 0; i < NOPS; i++) {
        const char *why = NULL;
        if (!matrix_extent(layout, rows[i], cols[i], call.ld[i], call.stride[i], batch, &elems[i],
                           &why))
            return dv_error_set(DV_EINVAL, "blas", 0, 0,
                                "blas_%s: operand %s (%lld x %lld, ld %lld, stride %lld): %s",
                                what, operand_names[OP_GEMM][i], (long long)rows[i],
                                (long long)cols[i], (long long)call.ld[i],
                                (long long)call.stride[i], why);
    }
    if (batched && batch > 1) {
        uint64_t one_c = 0;
        const char *why = NULL;
        (void)matrix_extent(layout, m, n, c.ld, 0, 1, &one_c, &why);
        if ((uint64_t)c.stride < one_c)
            return dv_error_set(DV_EINVAL, "blas", 0, 0,
                                "blas_%s: C's matrices overlap (stride %lld, each reaches %llu "
                                "elements)",
                                what, (long long)c.stride, (unsigned long long)one_c);
    }
    const dv_ref refs[NOPS] = {a.ref, bm.ref, c.ref};
    const uint64_t offs[NOPS] = {a.offset, bm.offset, c.offset};
    return post(&call, refs, offs, elems, stream, p);
}

int dv_blas_gemm(dv_blas *b, dv_stream stream, dv_blas_type type, dv_blas_layout layout,
                 dv_blas_op op_a, dv_blas_op op_b, int64_t m, int64_t n, int64_t k, double alpha,
                 dv_blas_matrix a, dv_blas_matrix bm, double beta, dv_blas_matrix c)
{
    posting p = {NULL, false};
    return gemm_common(b, stream, type, layout, op_a, op_b, m, n, k, alpha, a, bm, beta, c, 1,
                       false, &p);
}

int dv_blas_gemm_async(dv_blas *b, dv_stream stream, dv_blas_type type, dv_blas_layout layout,
                       dv_blas_op op_a, dv_blas_op op_b, int64_t m, int64_t n, int64_t k,
                       double alpha, dv_blas_matrix a, dv_blas_matrix bm, double beta,
                       dv_blas_matrix c, dv_future *f)
{
    posting p = {f, false};
    if (f == NULL)
        return dv_error_set(DV_EINVAL, "blas", 0, 0, "blas_gemm_async: NULL future");
    return settle(&p, gemm_common(b, stream, type, layout, op_a, op_b, m, n, k, alpha, a, bm, beta,
                                  c, 1, false, &p));
}

int dv_blas_gemm_strided_batched(dv_blas *b, dv_stream stream, dv_blas_type type,
                                 dv_blas_layout layout, dv_blas_op op_a, dv_blas_op op_b,
                                 int64_t m, int64_t n, int64_t k, double alpha, dv_blas_matrix a,
                                 dv_blas_matrix bm, double beta, dv_blas_matrix c, int64_t batch)
{
    posting p = {NULL, false};
    return gemm_common(b, stream, type, layout, op_a, op_b, m, n, k, alpha, a, bm, beta, c, batch,
                       true, &p);
}

int dv_blas_gemm_strided_batched_async(dv_blas *b, dv_stream stream, dv_blas_type type,
                                       dv_blas_layout layout, dv_blas_op op_a, dv_blas_op op_b,
                                       int64_t m, int64_t n, int64_t k, double alpha,
                                       dv_blas_matrix a, dv_blas_matrix bm, double beta,
                                       dv_blas_matrix c, int64_t batch, dv_future *f)
{
    posting p = {f, false};
    if (f == NULL)
        return dv_error_set(DV_EINVAL, "blas", 0, 0,
                            "blas_gemm_strided_batched_async: NULL future");
    return settle(&p, gemm_common(b, stream, type, layout, op_a, op_b, m, n, k, alpha, a, bm, beta,
                                  c, batch, true, &p));
}

static bool vector_extent(int64_t n, int64_t inc, uint64_t *elems)
{
    uint64_t step = inc < 0 ? (uint64_t)0 - (uint64_t)inc : (uint64_t)inc;
    if (n == 0) {
        *elems = 0;
        return true;
    }
    if (!mul_ok((uint64_t)(n - 1), step, elems) || *elems == UINT64_MAX)
        return false;
    *elems += 1;
    return true;
}

/* AXPY's and DOT's x and y, n elements each: n from 0 to 2^31 - 1,
 * increments not 0; the elements each reaches. */
static int vector_pair(const char *what, int64_t n, dv_blas_vector x, dv_blas_vector y,
                       uint64_t *ex, uint64_t *ey)
{
    if (n < 0 || x.inc == 0 || y.inc == 0 || !fits_int(n) || !fits_int(x.inc) ||
        !fits_int(y.inc))
        return dv_error_set(DV_EINVAL, "blas", 0, 0,
                            "blas_%s: n %lld, incx %lld, incy %lld: n from 0 to 2^31 - 1, "
                            "increments not 0",
                            what, (long long)n, (long long)x.inc, (long long)y.inc);
    if (!vector_extent(n, x.inc, ex) || !vector_extent(n, y.inc, ey))
        return dv_error_set(DV_EINVAL, "blas", 0, 0, "blas_%s: a vector is too large", what);
    return DV_OK;
}

static int gemv_common(dv_blas *b, dv_stream stream, dv_blas_type type, dv_blas_layout layout,
                       dv_blas_op op, int64_t m, int64_t n, double alpha, dv_blas_matrix a,
                       dv_blas_vector x, double beta, dv_blas_vector y, posting *p)
{
    static const char what[] = "gemv";
    int rc = check_common(b, what, type, false);
    if (rc != DV_OK)
        return rc;
    if ((layout != DV_BLAS_ROW_MAJOR && layout != DV_BLAS_COL_MAJOR) ||
        (op != DV_BLAS_N && op != DV_BLAS_T))
        return dv_error_set(DV_EINVAL, "blas", 0, 0, "blas_gemv: bad layout or op");
    if (m < 0 || n < 0 || x.inc == 0 || y.inc == 0 || !fits_int(m) || !fits_int(n) ||
        !fits_int(a.ld) || !fits_int(x.inc) || !fits_int(y.inc))
        return dv_error_set(DV_EINVAL, "blas", 0, 0,
                            "blas_gemv: m %lld, n %lld, incx %lld, incy %lld: sizes from 0 to "
                            "2^31 - 1, increments not 0",
                            (long long)m, (long long)n, (long long)x.inc, (long long)y.inc);
    int64_t xn = op == DV_BLAS_N ? n : m, yn = op == DV_BLAS_N ? m : n;
    if (yn == 0) { /* y is empty */
        const dv_ref refs[NOPS] = {a.ref, x.ref, y.ref};
        const uint64_t offs[NOPS] = {a.offset, x.offset, y.offset};
        return dv__lib_nothing_to_do("blas", "blas_", what, b->actor, stream, refs, offs,
                                     dv_blas_type_size(type), operand_names[OP_GEMV], NOPS);
    }
    blas_call call = {.b = b,
                      .kind = OP_GEMV,
                      .type = type,
                      .layout = layout,
                      .op_a = op,
                      .m = m,
                      .n = n,
                      .batch = 1,
                      .ld = {a.ld, 0, 0},
                      .stride = {0, x.inc, y.inc},
                      .access = {DV_READ, DV_READ, beta != 0.0 ? DV_READ_WRITE : DV_WRITE},
                      .alpha = alpha,
                      .beta = beta,
                      .what = what};
    uint64_t elems[NOPS];
    const char *why = NULL;
    if (!matrix_extent(layout, m, n, a.ld, 0, 1, &elems[A_], &why))
        return dv_error_set(DV_EINVAL, "blas", 0, 0, "blas_gemv: operand A (%lld x %lld, ld %lld): %s",
                            (long long)m, (long long)n, (long long)a.ld, why);
    if (!vector_extent(xn, x.inc, &elems[B_]) || !vector_extent(yn, y.inc, &elems[C_]))
        return dv_error_set(DV_EINVAL, "blas", 0, 0, "blas_gemv: a vector is too large");
    const dv_ref refs[NOPS] = {a.ref, x.ref, y.ref};
    const uint64_t offs[NOPS] = {a.offset, x.offset, y.offset};
    if (xn == 0) /* x is empty: y stays as it is, as BLAS's GEMV returns at once */
        return dv__lib_nothing_to_do("blas", "blas_", what, b->actor, stream, refs, offs,
                                     dv_blas_type_size(type), operand_names[OP_GEMV], NOPS);
    return post(&call, refs, offs, elems, stream, p);
}

static int axpy_common(dv_blas *b, dv_stream stream, dv_blas_type type, int64_t n,
                       double alpha, dv_blas_vector x, dv_blas_vector y, posting *p)
{
    static const char what[] = "axpy";
    int rc = check_common(b, what, type, false);
    if (rc != DV_OK)
        return rc;
    uint64_t elems[NOPS] = {0, 0, 0};
    if ((rc = vector_pair(what, n, x, y, &elems[A_], &elems[B_])) != DV_OK)
        return rc;
    if (n == 0) { /* y stays as it is */
        const dv_ref refs[NOPS] = {x.ref, y.ref, DV_REF_NULL};
        const uint64_t offs[NOPS] = {x.offset, y.offset, 0};
        return dv__lib_nothing_to_do("blas", "blas_", what, b->actor, stream, refs, offs,
                                     dv_blas_type_size(type), operand_names[OP_AXPY], 2);
    }
    blas_call call = {.b = b,
                      .kind = OP_AXPY,
                      .type = type,
                      .n = n,
                      .batch = 1,
                      .stride = {x.inc, y.inc, 0},
                      .access = {DV_READ, DV_READ_WRITE, DV_READ},
                      .alpha = alpha,
                      .what = what};
    const dv_ref refs[NOPS] = {x.ref, y.ref, DV_REF_NULL};
    const uint64_t offs[NOPS] = {x.offset, y.offset, 0};
    return post(&call, refs, offs, elems, stream, p);
}

static int dot_common(dv_blas *b, dv_stream stream, dv_blas_type type, int64_t n,
                      dv_blas_vector x, dv_blas_vector y, dv_ref result, uint64_t result_offset,
                      posting *p)
{
    static const char what[] = "dot";
    int rc = check_common(b, what, type, false);
    if (rc != DV_OK)
        return rc;
    uint64_t elems[NOPS] = {0, 0, 1};
    if ((rc = vector_pair(what, n, x, y, &elems[A_], &elems[B_])) != DV_OK)
        return rc;
    blas_call call = {.b = b,
                      .kind = OP_DOT,
                      .type = type,
                      .n = n,
                      .batch = 1,
                      .stride = {x.inc, y.inc, 0},
                      .access = {DV_READ, DV_READ, DV_WRITE},
                      .what = what};
    const dv_ref refs[NOPS] = {x.ref, y.ref, result};
    const uint64_t offs[NOPS] = {x.offset, y.offset, result_offset};
    return post(&call, refs, offs, elems, stream, p);
}

int dv_blas_gemv(dv_blas *b, dv_stream stream, dv_blas_type type, dv_blas_layout layout,
                 dv_blas_op op, int64_t m, int64_t n, double alpha, dv_blas_matrix a,
                 dv_blas_vector x, double beta, dv_blas_vector y)
{
    posting p = {NULL, false};
    return gemv_common(b, stream, type, layout, op, m, n, alpha, a, x, beta, y, &p);
}

int dv_blas_gemv_async(dv_blas *b, dv_stream stream, dv_blas_type type, dv_blas_layout layout,
                       dv_blas_op op, int64_t m, int64_t n, double alpha, dv_blas_matrix a,
                       dv_blas_vector x, double beta, dv_blas_vector y, dv_future *f)
{
    posting p = {f, false};
    if (f == NULL)
        return dv_error_set(DV_EINVAL, "blas", 0, 0, "blas_gemv_async: NULL future");
    return settle(&p, gemv_common(b, stream, type, layout, op, m, n, alpha, a, x, beta, y, &p));
}

int dv_blas_axpy(dv_blas *b, dv_stream stream, dv_blas_type type, int64_t n, double alpha,
                 dv_blas_vector x, dv_blas_vector y)
{
    posting p = {NULL, false};
    return axpy_common(b, stream, type, n, alpha, x, y, &p);
}

int dv_blas_axpy_async(dv_blas *b, dv_stream stream, dv_blas_type type, int64_t n, double alpha,
                       dv_blas_vector x, dv_blas_vector y, dv_future *f)
{
    posting p = {f, false};
    if (f == NULL)
        return dv_error_set(DV_EINVAL, "blas", 0, 0, "blas_axpy_async: NULL future");
    return settle(&p, axpy_common(b, stream, type, n, alpha, x, y, &p));
}

int dv_blas_dot(dv_blas *b, dv_stream stream, dv_blas_type type, int64_t n, dv_blas_vector x,
                dv_blas_vector y, dv_ref result, uint64_t result_offset)
{
    posting p = {NULL, false};
    return dot_common(b, stream, type, n, x, y, result, result_offset, &p);
}

int dv_blas_dot_async(dv_blas *b, dv_stream stream, dv_blas_type type, int64_t n,
                      dv_blas_vector x, dv_blas_vector y, dv_ref result, uint64_t result_offset,
                      dv_future *f)
{
    posting p = {f, false};
    if (f == NULL)
        return dv_error_set(DV_EINVAL, "blas", 0, 0, "blas_dot_async: NULL future");
    return settle(&p, dot_common(b, stream, type, n, x, y, result, result_offset, &p));
}

/* ------------------------------------------------------------------------
 * The task (the actor's thread)
 * ------------------------------------------------------------------------ */

static uint64_t operand(const dv_task_ctx *ctx, const blas_call *c, int i)
{
    return c->arg[i] >= 0 ? ctx->arg[c->arg[i]] : 0;
}

static int cublas_failed(const blas_call *c, const char *fn, int st)
{
    return dv_error_set(DV_EDRIVER, "blas", 0, 0, "blas_%s: %s returned cuBLAS status %d",
                        c->what, fn, st);
}

static int cuda_run(const dv_task_ctx *ctx, const blas_call *c)
{
    dv_blas *b = c->b;
    if (ctx->stream >= NSTREAMS)
        return dv_error_set(DV_EINVAL, "blas", 0, 0, "blas_%s: stream %u", c->what,
                            (unsigned)ctx->stream);
    __typeof__(b->handle[0]) *h = &b->handle[ctx->stream];
    if (h->h == NULL || h->context != ctx->context_generation) {
        /* None yet, or one of an older generation: forgotten.  One made in
         * a context that was kept (dv_actor_reset) still holds its memory,
         * but it cannot be destroyed here: with the checker on, a task's
         * work is being captured, and cublasDestroy synchronises, which
         * breaks the capture. */
        h->h = NULL;
        int st = b->create(&h->h);
        if (st != 0) {
            h->h = NULL;
            return cublas_failed(c, "cublasCreate", st);
        }
        h->context = ctx->context_generation;
        h->driver = ctx->driver_context;
        h->mode = CUBLAS_POINTER_MODE_HOST;
        h->stream = NULL;
        h->ws = h->ws_bytes = 0;
    }
    int st;
    if (h->stream != ctx->native_stream || h->stream == NULL) {
        if ((st = b->set_stream(h->h, ctx->native_stream)) != 0)
            return cublas_failed(c, "cublasSetStream", st);
        h->stream = ctx->native_stream;
        h->ws = h->ws_bytes = UINT64_MAX; /* set it again below */
    }
    /* Every call gets a workspace (a dot's reduction needs one too); a
     * GEMM the larger one.  Without any, cuBLAS refuses what needs one. */
    uint64_t ws = 0, ws_bytes = c->kind == OP_GEMM ? WORKSPACE : WORKSPACE_SMALL;
    if (dv_task_scratch(ctx, ws_bytes, &ws) != DV_OK) {
        ws_bytes = WORKSPACE_SMALL;
        if (dv_task_scratch(ctx, ws_bytes, &ws) != DV_OK)
            ws_bytes = 0, ws = 0;
    }
    if (ws != h->ws || ws_bytes != h->ws_bytes) {
        if ((st = b->set_workspace(h->h, (void *)(uintptr_t)ws, ws_bytes)) != 0)
            return cublas_failed(c, "cublasSetWorkspace", st);
        h->ws = ws;
        h->ws_bytes = ws_bytes;
    }
    /* cuBLAS's kernel arguments can carry stale words of earlier calls (a
     * workspace since handed out as a block, seen under compute-sanitizer):
     * not pointers this call uses.  Its operands were checked against
     * their blocks before posting. */
    (void)dv_task_kernel_args_opaque(ctx);
    int mode = c->kind == OP_DOT ? CUBLAS_POINTER_MODE_DEVICE : CUBLAS_POINTER_MODE_HOST;
    if (h->mode != mode) {
        if ((st = b->set_pointer_mode(h->h, mode)) != 0)
            return cublas_failed(c, "cublasSetPointerMode", st);
        h->mode = mode;
    }
    void *pa = (void *)(uintptr_t)operand(ctx, c, A_), *pb = (void *)(uintptr_t)operand(ctx, c, B_),
         *pc = (void *)(uintptr_t)operand(ctx, c, C_);
    bool f64 = c->type == DV_BLAS_F64;
    float af = (float)c->alpha, bf = (float)c->beta;
    const void *alpha = f64 ? (const void *)&c->alpha : (const void *)&af;
    const void *beta = f64 ? (const void *)&c->beta : (const void *)&bf;
    switch (c->kind) {
    case OP_GEMM: {
        int dt = c->type == DV_BLAS_F64    ? CUDA_R_64F
                 : c->type == DV_BLAS_F16  ? CUDA_R_16F
                 : c->type == DV_BLAS_BF16 ? CUDA_R_16BF
                                           : CUDA_R_32F;
        int ct = f64 ? CUBLAS_COMPUTE_64F
                 : c->type == DV_BLAS_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                           : CUBLAS_COMPUTE_32F;
        /* cuBLAS is column-major: a row-major C = op(A) op(B) is the
         * column-major C^T = op(B)^T op(A)^T, the operands swapped. */
        bool row = c->layout == DV_BLAS_ROW_MAJOR;
        int ta = (int)c->op_a, tb = (int)c->op_b;
        int m = (int)c->m, n = (int)c->n, k = (int)c->k;
        const void *x = row ? pb : pa, *y = row ? pa : pb;
        int tx = row ? tb : ta, ty = row ? ta : tb, mm = row ? n : m, nn = row ? m : n;
        int ldx = (int)(row ? c->ld[B_] : c->ld[A_]), ldy = (int)(row ? c->ld[A_] : c->ld[B_]);
        long long sx = row ? c->stride[B_] : c->stride[A_], sy = row ? c->stride[A_] : c->stride[B_];
        if (c->batch > 1 || c->stride[A_] || c->stride[B_] || c->stride[C_])
            st = b->gemm_sb(h->h, tx, ty, mm, nn, k, alpha, x, dt, ldx, sx, y, dt, ldy, sy, beta,
                            pc, dt, (int)c->ld[C_], c->stride[C_], (int)c->batch, ct,
                            CUBLAS_GEMM_DEFAULT);
        else
            st = b->gemm_ex(h->h, tx, ty, mm, nn, k, alpha, x, dt, ldx, y, dt, ldy, beta, pc, dt,
                            (int)c->ld[C_], ct, CUBLAS_GEMM_DEFAULT);
        return st == 0 ? DV_OK : cublas_failed(c, c->batch > 1 ? "cublasGemmStridedBatchedEx"
                                                               : "cublasGemmEx", st);
    }
    case OP_GEMV: {
        /* Row-major A (m x n) is column-major A^T (n x m). */
        bool row = c->layout == DV_BLAS_ROW_MAJOR;
        int trans = row ? !c->op_a : (int)c->op_a;
        int mm = (int)(row ? c->n : c->m), nn = (int)(row ? c->m : c->n);
        if (f64)
            st = b->dgemv(h->h, trans, mm, nn, &c->alpha, pa, (int)c->ld[A_], pb,
                          (int)c->stride[B_], &c->beta, pc, (int)c->stride[C_]);
        else
            st = b->sgemv(h->h, trans, mm, nn, &af, pa, (int)c->ld[A_], pb, (int)c->stride[B_],
                          &bf, pc, (int)c->stride[C_]);
        return st == 0 ? DV_OK : cublas_failed(c, "cublas gemv", st);
    }
    case OP_AXPY:
        if (f64)
            st = b->daxpy(h->h, (int)c->n, &c->alpha, pa, (int)c->stride[A_], pb,
                          (int)c->stride[B_]);
        else
            st = b->saxpy(h->h, (int)c->n, &af, pa, (int)c->stride[A_], pb, (int)c->stride[B_]);
        return st == 0 ? DV_OK : cublas_failed(c, "cublas axpy", st);
    case OP_DOT:
        if (f64)
            st = b->ddot(h->h, (int)c->n, pa, (int)c->stride[A_], pb, (int)c->stride[B_], pc);
        else
            st = b->sdot(h->h, (int)c->n, pa, (int)c->stride[A_], pb, (int)c->stride[B_], pc);
        return st == 0 ? DV_OK : cublas_failed(c, "cublas dot", st);
    }
    return DV_EINVAL;
}

/* On the sim: the call and the host addresses of its operands. */
typedef struct sim_job {
    blas_call c;
    void *p[NOPS];
} sim_job;

/* A 16-bit or TF32 matrix operand as floats (the whole extent). */
static float *widen(const sim_job *j, int i)
{
    uint64_t n = j->c.bytes[i] / dv_blas_type_size(j->c.type);
    float *f = malloc((n ? n : 1) * sizeof(float));
    if (f == NULL)
        return NULL;
    for (uint64_t e = 0; e < n; e++) {
        switch (j->c.type) {
        case DV_BLAS_F16:
            f[e] = dv__f16_to_f32(((const uint16_t *)j->p[i])[e]);
            break;
        case DV_BLAS_BF16:
            f[e] = dv__bf16_to_f32(((const uint16_t *)j->p[i])[e]);
            break;
        case DV_BLAS_TF32:
            f[e] = i == C_ ? ((const float *)j->p[i])[e] : dv__f32_to_tf32(((const float *)j->p[i])[e]);
            break;
        default:
            f[e] = ((const float *)j->p[i])[e];
            break;
        }
    }
    return f;
}

static void sim_gemm(sim_job *j)
{
    const blas_call *c = &j->c;
    dv_blas *b = c->b;
    int order = c->layout == DV_BLAS_ROW_MAJOR ? CBLAS_ROW : CBLAS_COL;
    int ta = c->op_a == DV_BLAS_N ? CBLAS_N : CBLAS_T, tb = c->op_b == DV_BLAS_N ? CBLAS_N : CBLAS_T;
    int m = (int)c->m, n = (int)c->n, k = (int)c->k;
    int lda = (int)c->ld[A_], ldb = (int)c->ld[B_], ldc = (int)c->ld[C_];
    /* k == 0: A and B reach nothing; CBLAS still wants pointers. */
    static double none[1];
    if (j->p[A_] == NULL)
        j->p[A_] = none;
    if (j->p[B_] == NULL)
        j->p[B_] = none;
    if (c->type == DV_BLAS_F64) {
        const double *a = j->p[A_], *bb = j->p[B_];
        double *cc = j->p[C_];
        for (int64_t i = 0; i < c->batch; i++)
            b->c_dgemm(order, ta, tb, m, n, k, c->alpha, a ? a + i * c->stride[A_] : NULL, lda,
                       bb ? bb + i * c->stride[B_] : NULL, ldb, c->beta, cc + i * c->stride[C_],
                       ldc);
        return;
    }
    if (c->type == DV_BLAS_F32) {
        const float *a = j->p[A_], *bb = j->p[B_];
        float *cc = j->p[C_];
        for (int64_t i = 0; i < c->batch; i++)
            b->c_sgemm(order, ta, tb, m, n, k, (float)c->alpha, a ? a + i * c->stride[A_] : NULL,
                       lda, bb ? bb + i * c->stride[B_] : NULL, ldb, (float)c->beta,
                       cc + i * c->stride[C_], ldc);
        return;
    }
    /* TF32 (inputs rounded), F16, BF16 (F32 accumulation): in floats. */
    float *a = j->p[A_] ? widen(j, A_) : NULL, *bb = j->p[B_] ? widen(j, B_) : NULL;
    float *cc = c->type == DV_BLAS_TF32 ? j->p[C_] : widen(j, C_);
    if ((j->p[A_] && !a) || (j->p[B_] && !bb) || !cc)
        goto out; /* out of host memory: C unchanged (the sim's stand-in only) */
    for (int64_t i = 0; i < c->batch; i++)
        b->c_sgemm(order, ta, tb, m, n, k, (float)c->alpha, a ? a + i * c->stride[A_] : NULL, lda,
                   bb ? bb + i * c->stride[B_] : NULL, ldb, (float)c->beta, cc + i * c->stride[C_],
                   ldc);
    if (c->type != DV_BLAS_TF32) {
        /* Back to 16 bits, the matrices' elements only (not what lies
         * between them or past their rows). */
        uint16_t *dst = j->p[C_];
        int64_t major = c->layout == DV_BLAS_ROW_MAJOR ? c->m : c->n;
        int64_t minor = c->layout == DV_BLAS_ROW_MAJOR ? c->n : c->m;
        for (int64_t i = 0; i < c->batch; i++)
            for (int64_t r = 0; r < major; r++)
                for (int64_t e = 0; e < minor; e++) {
                    int64_t at = i * c->stride[C_] + r * c->ld[C_] + e;
                    dst[at] = c->type == DV_BLAS_F16 ? dv__f32_to_f16(cc[at])
                                                     : dv__f32_to_bf16(cc[at]);
                }
    }
out:
    free(a);
    free(bb);
    if (c->type != DV_BLAS_TF32)
        free(cc);
}

static void sim_run(void *arg)
{
    sim_job *j = arg;
    const blas_call *c = &j->c;
    dv_blas *b = c->b;
    bool f64 = c->type == DV_BLAS_F64;
    /* CBLAS, like BLAS, takes a vector at its first element in memory and
     * walks it backwards for a negative increment: the pointer is the
     * operand's start either way. */
    switch (c->kind) {
    case OP_GEMM:
        sim_gemm(j);
        break;
    case OP_GEMV: {
        int order = c->layout == DV_BLAS_ROW_MAJOR ? CBLAS_ROW : CBLAS_COL;
        int t = c->op_a == DV_BLAS_N ? CBLAS_N : CBLAS_T;
        if (f64)
            b->c_dgemv(order, t, (int)c->m, (int)c->n, c->alpha, j->p[A_], (int)c->ld[A_],
                       j->p[B_], (int)c->stride[B_], c->beta, j->p[C_], (int)c->stride[C_]);
        else
            b->c_sgemv(order, t, (int)c->m, (int)c->n, (float)c->alpha, j->p[A_],
                       (int)c->ld[A_], j->p[B_], (int)c->stride[B_], (float)c->beta, j->p[C_],
                       (int)c->stride[C_]);
        break;
    }
    case OP_AXPY:
        if (f64)
            b->c_daxpy((int)c->n, c->alpha, j->p[A_], (int)c->stride[A_], j->p[B_],
                       (int)c->stride[B_]);
        else
            b->c_saxpy((int)c->n, (float)c->alpha, j->p[A_], (int)c->stride[A_], j->p[B_],
                       (int)c->stride[B_]);
        break;
    case OP_DOT:
        if (f64)
            *(double *)j->p[C_] = c->n == 0 ? 0.0
                                            : b->c_ddot((int)c->n, j->p[A_], (int)c->stride[A_],
                                                        j->p[B_], (int)c->stride[B_]);
        else
            *(float *)j->p[C_] = c->n == 0 ? 0.0f
                                           : b->c_sdot((int)c->n, j->p[A_], (int)c->stride[A_],
                                                       j->p[B_], (int)c->stride[B_]);
        break;
    }
}

static void sim_done(void *arg, int status)
{
    (void)status;
    free(arg);
}

static int sim_enqueue(const dv_task_ctx *ctx, const blas_call *c)
{
    sim_job *j = malloc(sizeof(*j));
    if (j == NULL)
        return dv_error_set(DV_ENOMEM, "blas", sizeof(*j), 0, "blas_%s: out of host memory",
                            c->what);
    j->c = *c;
    for (int i = 0; i < NOPS; i++) {
        j->p[i] = NULL;
        if (c->arg[i] < 0)
            continue;
        j->p[i] = dv_task_sim_access(ctx, ctx->arg[c->arg[i]], c->bytes[i], c->access[i]);
        if (j->p[i] == NULL) {
            int rc = dv_last_error()->status;
            free(j);
            return rc != DV_OK ? rc : DV_EINVAL; /* its detail stands */
        }
    }
    int rc = dv_task_host_fn_cleanup(ctx, sim_run, sim_done, j);
    if (rc != DV_OK)
        free(j); /* not enqueued: still ours */
    return rc;
}

int dv__blas_task(const dv_task_ctx *ctx, void *user)
{
    const blas_call *c = user;
    if (ctx->stream < NSTREAMS)
        atomic_fetch_or(&c->b->streams_used, UINT64_C(1) << ctx->stream);
    return ctx->simulated ? sim_enqueue(ctx, c) : cuda_run(ctx, c);
}
