/*
 * FFTs on an actor (devactor_fft.h), written against the public API alone:
 * a task per transform, cuFFT on cuda, FFTW on the sim.
 *
 * The plan cache lives on the actor's thread (every touch of it is inside
 * a task): a list in use order and a byte count.  On the sim a plan is an
 * FFTW plan made on the actor's thread (FFTW_ESTIMATE: planning reads no
 * data) and executed by host functions on the sim's stream threads with
 * the new-array interface; FFTW's planner is not thread-safe, so making
 * and destroying plans take one lock, and a plan is destroyed by whoever
 * drops its last reference (the cache's, or a host function's still
 * queued when the cache let it go).
 */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/abi.h"
#include "devactor_fft.h"
#include "libs/libload.h"

#define NSTREAMS      64
#define DEFAULT_CACHE (UINT64_C(256) << 20)
/* A plan's own memory beside its work area (twiddles, its description),
 * counted against the cache's budget. */
#define PLAN_OVERHEAD (UINT64_C(64) << 10)

/* cuFFT, declared here to build without its headers. */
enum {
    CUFFT_R2C = 0x2a,
    CUFFT_C2R = 0x2c,
    CUFFT_C2C = 0x29,
    CUFFT_D2Z = 0x6a,
    CUFFT_Z2D = 0x6c,
    CUFFT_Z2Z = 0x69
};
typedef int (*cufft_create_fn)(int *);
typedef int (*cufft_destroy_fn)(int);
typedef int (*cufft_auto_fn)(int, int);
typedef int (*cufft_make_fn)(int, int, long long *, long long *, long long, long long, long long *,
                             long long, long long, int, long long, size_t *);
typedef int (*cufft_work_fn)(int, void *);
typedef int (*cufft_stream_fn)(int, void *);
typedef int (*cufft_exec_c_fn)(int, void *, void *, int);
typedef int (*cufft_exec_r_fn)(int, void *, void *);

/* FFTW (float and double share the shapes of their calls). */
#define FFTW_ESTIMATE  (1u << 6)
#define FFTW_UNALIGNED (1u << 1)
typedef void *(*fftw_many_fn)(int, const int *, int, void *, const int *, int, int, void *,
                              const int *, int, int, int, unsigned);
typedef void *(*fftw_many_r_fn)(int, const int *, int, void *, const int *, int, int, void *,
                                const int *, int, int, unsigned);
typedef void (*fftw_exec_fn)(void *, void *, void *);
typedef void (*fftw_destroy_fn)(void *);

typedef struct fftw_lib {
    void *lib;
    fftw_many_fn c2c;
    fftw_many_r_fn r2c, c2r;
    fftw_exec_fn exec_c2c, exec_r2c, exec_c2r;
    fftw_destroy_fn destroy;
} fftw_lib;

typedef struct fft_key {
    uint32_t stream;
    uint8_t kind, precision, in_place;
    int8_t direction;
    int rank;
    int64_t n[3];
    int64_t batch;
} fft_key;

typedef struct fft_plan {
    struct fft_plan *prev, *next; /* most recently used first */
    fft_key key;
    uint64_t context; /* the context generation it was made in (cuda) */
    uint64_t driver;  /* the CUDA context it lives in (dv_task_ctx) */
    int cu;           /* cuFFT's plan */
    void *w;          /* FFTW's plan */
    const fftw_lib *wl;
    uint64_t work;    /* cuFFT's work area */
    uint64_t bytes;   /* counted against the budget */
    _Atomic int refs; /* the cache's, and queued host functions' (sim) */
} fft_plan;

struct dv_fft {
    dv_actor *actor;
    bool cuda;
    char name[560];
    uint64_t cap;
    _Atomic uint64_t streams_used;
    /* the actor's thread only */
    fft_plan *head;
    dv_fft_stats st;
    /* cuFFT */
    void *cu_lib;
    cufft_create_fn cu_create;
    cufft_destroy_fn cu_destroy;
    cufft_auto_fn cu_auto;
    cufft_make_fn cu_make;
    cufft_work_fn cu_work;
    cufft_stream_fn cu_stream;
    cufft_exec_c_fn cu_c2c, cu_z2z;
    cufft_exec_r_fn cu_r2c, cu_c2r, cu_d2z, cu_z2d;
    /* FFTW, single and double */
    fftw_lib wf, wd;
};

static pthread_mutex_t planner = PTHREAD_MUTEX_INITIALIZER;

int dv__fft_task(const dv_task_ctx *ctx, void *user);

/* ------------------------------------------------------------------------
 * Sizes
 * ------------------------------------------------------------------------ */

static unsigned real_size(dv_fft_precision p)
{
    return p == DV_FFT_F64 ? 8 : 4;
}

/* Elements of one transform: N (all sizes) and Nc (the last halved + 1);
 * false when a size is out of range or the product overflows. */
static bool shape_in_range(const dv_fft_shape *s)
{
    if (s == NULL || s->rank < 1 || s->rank > 3 || s->batch < 1 || s->batch > INT_MAX)
        return false;
    for (int i = 0; i < s->rank; i++)
        if (s->n[i] < 1 || s->n[i] > INT_MAX)
            return false;
    return true;
}

static bool shape_elems(const dv_fft_shape *s, uint64_t *n, uint64_t *nc)
{
    if (!shape_in_range(s))
        return false;
    uint64_t all = 1, half = 1;
    for (int i = 0; i < s->rank; i++) {
        uint64_t d = (uint64_t)s->n[i], h = i == s->rank - 1 ? d / 2 + 1 : d;
        if (all > UINT64_MAX / d || half > UINT64_MAX / h)
            return false;
        all *= d;
        half *= h;
    }
    *n = all;
    *nc = half;
    return true;
}

uint64_t dv_fft_bytes(dv_fft_kind kind, dv_fft_precision precision, const dv_fft_shape *shape,
                      bool in_place, bool output)
{
    uint64_t n, nc, elems;
    if ((kind != DV_FFT_C2C && kind != DV_FFT_R2C && kind != DV_FFT_C2R) ||
        (precision != DV_FFT_F32 && precision != DV_FFT_F64) || !shape_elems(shape, &n, &nc))
        return 0;
    unsigned rs = real_size(precision), cs = 2 * rs, es;
    bool real_side = (kind == DV_FFT_R2C && !output) || (kind == DV_FFT_C2R && output);
    if (kind == DV_FFT_C2C)
        elems = n, es = cs;
    else if (in_place || !real_side)
        elems = nc, es = cs;
    else
        elems = n, es = rs;
    uint64_t b = (uint64_t)shape->batch;
    if (elems > UINT64_MAX / es / b)
        return 0;
    return elems * es * b;
}

/* ------------------------------------------------------------------------
 * Opening
 * ------------------------------------------------------------------------ */

/* One FFTW (single or double), its functions pfx*: whether all are there.
 * why (cap bytes) says what failed: each name tried and why the last did
 * not open, or what opened and the function it lacks (it is closed). */
static bool open_fftw(fftw_lib *w, const char *env, const char *soname, const char *pfx, char *why,
                      size_t cap, char *path, size_t path_cap)
{
    const char *const names[] = {soname, NULL};
    char sym[64], tried[512];
    w->lib = dv__lib_open(env, names, tried, sizeof(tried), path, path_cap);
#define W(dst, name) (snprintf(sym, sizeof(sym), "%s%s", pfx, name), DV_LIB_SYM(w->lib, dst, sym))
    bool all = w->lib != NULL && W(w->c2c, "plan_many_dft") && W(w->r2c, "plan_many_dft_r2c") &&
               W(w->c2r, "plan_many_dft_c2r") && W(w->exec_c2c, "execute_dft") &&
               W(w->exec_r2c, "execute_dft_r2c") && W(w->exec_c2r, "execute_dft_c2r") &&
               W(w->destroy, "destroy_plan");
#undef W
    if (!all)
        dv__lib_why(why, cap, &w->lib, tried, path);
    return all;
}

int dv_fft_create(dv_actor *actor, uint64_t cache_bytes, dv_fft **out)
{
    static const char op[] = "fft_create";
    if (out != NULL)
        *out = NULL; /* as every failure leaves it */
    if (actor == NULL || out == NULL)
        return dv_error_set(DV_EINVAL, op, 0, 0, "fft_create: NULL %s",
                            actor == NULL ? "actor" : "out");
    *out = NULL;
    /* Inside a task no dv_fft could be destroyed (destroy waits for the
     * actor): none is made there either. */
    int no = dv__lib_no_wait(op);
    if (no == DV_OK)
        no = dv__lib_here(actor, op);
    if (no != DV_OK)
        return no;
    dv_fft *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return dv_error_set(DV_ENOMEM, op, sizeof(*f), 0, "fft_create: out of host memory");
    f->actor = actor;
    f->cap = cache_bytes ? cache_bytes : DEFAULT_CACHE;
    f->cuda = strcmp(dv_actor_backend_name(actor), "cuda") == 0;
    char tried[512], path[256], path2[256];
    if (f->cuda) {
        static const char *const names[] = {"libcufft.so.12", "libcufft.so.11", "libcufft.so",
                                            "/usr/local/cuda/lib64/libcufft.so", NULL};
        f->cu_lib = dv__lib_open("DV_CUFFT_PATH", names, tried, sizeof(tried), path, sizeof(path));
        void *l = f->cu_lib;
        bool all = l != NULL && DV_LIB_SYM(l, f->cu_create, "cufftCreate") &&
                   DV_LIB_SYM(l, f->cu_destroy, "cufftDestroy") &&
                   DV_LIB_SYM(l, f->cu_auto, "cufftSetAutoAllocation") &&
                   DV_LIB_SYM(l, f->cu_make, "cufftMakePlanMany64") &&
                   DV_LIB_SYM(l, f->cu_work, "cufftSetWorkArea") &&
                   DV_LIB_SYM(l, f->cu_stream, "cufftSetStream") && DV_LIB_SYM(l, f->cu_c2c, "cufftExecC2C") &&
                   DV_LIB_SYM(l, f->cu_z2z, "cufftExecZ2Z") && DV_LIB_SYM(l, f->cu_r2c, "cufftExecR2C") &&
                   DV_LIB_SYM(l, f->cu_c2r, "cufftExecC2R") && DV_LIB_SYM(l, f->cu_d2z, "cufftExecD2Z") &&
                   DV_LIB_SYM(l, f->cu_z2d, "cufftExecZ2D");
        if (!all) {
            char why[600];
            dv__lib_why(why, sizeof(why), &f->cu_lib, tried, path);
            free(f);
            return dv_error_set(DV_ENOTSUP, op, 0, 0,
                                "fft_create: no usable cuFFT (set DV_CUFFT_PATH); %s", why);
        }
        snprintf(f->name, sizeof(f->name), "cuFFT (%s)", path);
    } else {
        char why[600];
        bool all = open_fftw(&f->wf, "DV_FFTWF_PATH", "libfftw3f.so.3", "fftwf_", why, sizeof(why),
                             path, sizeof(path)) &&
                   open_fftw(&f->wd, "DV_FFTW_PATH", "libfftw3.so.3", "fftw_", why, sizeof(why),
                             path2, sizeof(path2));
        if (!all) {
            if (f->wf.lib != NULL) /* the single precision opened, the double not */
                dlclose(f->wf.lib);
            free(f);
            return dv_error_set(
                DV_ENOTSUP, op, 0, 0,
                "fft_create: no FFTW for the simulated device (install libfftw3-single3 and "
                "libfftw3-double3, or set DV_FFTWF_PATH and DV_FFTW_PATH); %s",
                why);
        }
        snprintf(f->name, sizeof(f->name), "FFTW (%s, %s)", path, path2);
    }
    *out = f;
    return DV_OK;
}

const char *dv_fft_library(const dv_fft *f)
{
    return f != NULL ? f->name : "";
}

/* ------------------------------------------------------------------------
 * The cache (the actor's thread)
 * ------------------------------------------------------------------------ */

static void plan_unref(fft_plan *p)
{
    if (atomic_fetch_sub(&p->refs, 1) != 1)
        return;
    if (p->w != NULL) {
        pthread_mutex_lock(&planner);
        p->wl->destroy(p->w);
        pthread_mutex_unlock(&planner);
    }
    free(p);
}

static void unlink_plan(dv_fft *f, fft_plan *p)
{
    if (p->prev != NULL)
        p->prev->next = p->next;
    else
        f->head = p->next;
    if (p->next != NULL)
        p->next->prev = p->prev;
    p->prev = p->next = NULL;
    f->st.plans--;
    f->st.bytes -= p->bytes;
}

/* Let p go: destroyed now on cuda when its context is the current one (a
 * plan of a context since rebuilt went with it: only its memory here);
 * on the sim when no host function still holds it. */
/* driver: the CUDA context now (dv_task_ctx.driver_context); a plan made
 * in one since reset went with it. */
static void drop_plan(dv_fft *f, fft_plan *p, uint64_t driver)
{
    unlink_plan(f, p);
    if (f->cuda && p->driver == driver)
        (void)f->cu_destroy(p->cu);
    plan_unref(p);
}

static void make_room(dv_fft *f, uint64_t need, uint64_t driver, const fft_plan *keep)
{
    fft_plan *last = f->head;
    while (last != NULL && last->next != NULL)
        last = last->next;
    while (last != NULL && f->st.bytes + need > f->cap) {
        fft_plan *prev = last->prev;
        if (last != keep) {
            drop_plan(f, last, driver);
            f->st.evictions++;
        }
        last = prev;
    }
}

static bool same_key(const fft_key *a, const fft_key *b)
{
    return memcmp(a, b, sizeof(*a)) == 0;
}

/* ------------------------------------------------------------------------
 * Posting (the caller's thread)
 * ------------------------------------------------------------------------ */

typedef struct fft_call {
    dv_fft *f;
    fft_key key;
    uint64_t in_bytes, out_bytes;
    dv_arg_access in_access;
    int in_arg, out_arg;
} fft_call;

static int check_operand(const char *name, dv_ref ref, uint64_t off, uint64_t bytes, unsigned es,
                         uint64_t *base)
{
    return dv__lib_operand("fft", "fft_", "exec", name, ref, off, bytes, es, base);
}

static int exec_common(dv_fft *f, dv_stream stream, dv_fft_kind kind, dv_fft_precision precision,
                       dv_fft_direction direction, const dv_fft_shape *shape, dv_ref in,
                       uint64_t in_off, dv_ref out, uint64_t out_off, dv_future *fut,
                       bool *posted)
{
    if (f == NULL || shape == NULL)
        return dv_error_set(DV_EINVAL, "fft", 0, 0, "fft_exec: NULL %s",
                            f == NULL ? "dv_fft" : "shape");
    if (kind != DV_FFT_C2C && kind != DV_FFT_R2C && kind != DV_FFT_C2R)
        return dv_error_set(DV_EINVAL, "fft", 0, 0, "fft_exec: kind %d is not C2C, R2C or C2R",
                            (int)kind);
    if (precision != DV_FFT_F32 && precision != DV_FFT_F64)
        return dv_error_set(DV_EINVAL, "fft", 0, 0, "fft_exec: precision %d", (int)precision);
    if ((direction != DV_FFT_FORWARD && direction != DV_FFT_INVERSE) ||
        (kind == DV_FFT_R2C && direction != DV_FFT_FORWARD) ||
        (kind == DV_FFT_C2R && direction != DV_FFT_INVERSE))
        return dv_error_set(DV_EINVAL, "fft", 0, 0,
                            "fft_exec: direction %d (R2C is forward, C2R inverse)",
                            (int)direction);
    uint64_t n, nc;
    if (!shape_in_range(shape))
        return dv_error_set(DV_EINVAL, "fft", 0, 0,
                            "fft_exec: rank %d, sizes and batch: rank 1 to 3, each size and the "
                            "batch from 1 to 2^31 - 1",
                            shape->rank);
    if (!shape_elems(shape, &n, &nc))
        return dv_error_set(DV_EINVAL, "fft", 0, 0,
                            "fft_exec: the transform is too large (its elements overflow 64 bits)");
    int rc = dv__lib_stream("fft", "fft_", "exec", f->actor, stream); /* named as this call */
    if (rc != DV_OK)
        return rc;
    bool in_place = in.bits == out.bits && in_off == out_off;
    fft_call c = {.f = f,
                  .key = {.stream = stream,
                          .kind = (uint8_t)kind,
                          .precision = (uint8_t)precision,
                          .in_place = in_place,
                          .direction = (int8_t)direction,
                          .rank = shape->rank,
                          .batch = shape->batch},
                  .in_access = kind == DV_FFT_C2R || in_place ? DV_READ_WRITE : DV_READ};
    for (int i = 0; i < shape->rank; i++)
        c.key.n[i] = shape->n[i];
    c.in_bytes = dv_fft_bytes(kind, precision, shape, in_place, false);
    c.out_bytes = dv_fft_bytes(kind, precision, shape, in_place, true);
    if (c.in_bytes == 0 || c.out_bytes == 0)
        return dv_error_set(DV_EINVAL, "fft", 0, 0, "fft_exec: the transform is too large");
    unsigned rs = real_size(precision), cs = 2 * rs;
    unsigned in_es = kind == DV_FFT_R2C && !in_place ? rs : cs;
    unsigned out_es = kind == DV_FFT_C2R && !in_place ? rs : cs;
    uint64_t in_base, out_base;
    rc = check_operand("in", in, in_off, c.in_bytes, in_es, &in_base);
    if (rc == DV_OK)
        rc = check_operand("out", out, out_off, c.out_bytes, out_es, &out_base);
    if (rc != DV_OK)
        return rc;
    if (!in_place && in_base == out_base) {
        uint64_t lo = in_off > out_off ? in_off : out_off;
        uint64_t hi_i = in_off + c.in_bytes, hi_o = out_off + c.out_bytes;
        if (lo < (hi_i < hi_o ? hi_i : hi_o))
            return dv_error_set(DV_EINVAL, "fft", 0, 0,
                                "fft_exec: in and out overlap in one block without being the "
                                "same bytes (in place is in == out at one offset)");
    }
    dv_arg args[2];
    unsigned nargs;
    if (in_place) {
        args[0] = dv_arg_ref_range(in, DV_READ_WRITE, in_off, c.in_bytes);
        c.in_arg = c.out_arg = 0;
        nargs = 1;
    } else {
        args[0] = dv_arg_ref_range(in, c.in_access, in_off, c.in_bytes);
        args[1] = dv_arg_ref_range(out, DV_WRITE, out_off, c.out_bytes);
        c.in_arg = 0;
        c.out_arg = 1;
        nargs = 2;
    }
    if (fut == NULL)
        return dv_task(f->actor, dv__fft_task, &c, stream, args, nargs);
    if ((rc = dv__lib_no_wait("fft")) != DV_OK)
        return rc; /* not posted: the caller completes the future */
    rc = dv_task_async(f->actor, dv__fft_task, &c, stream, args, nargs, fut);
    *posted = true;
    return rc != DV_OK ? rc : dv_future_wait_ordered(fut);
}

int dv_fft_exec(dv_fft *f, dv_stream stream, dv_fft_kind kind, dv_fft_precision precision,
                dv_fft_direction direction, const dv_fft_shape *shape, dv_ref in,
                uint64_t in_offset, dv_ref out, uint64_t out_offset)
{
    bool posted = false;
    return exec_common(f, stream, kind, precision, direction, shape, in, in_offset, out,
                       out_offset, NULL, &posted);
}

int dv_fft_exec_async(dv_fft *f, dv_stream stream, dv_fft_kind kind, dv_fft_precision precision,
                      dv_fft_direction direction, const dv_fft_shape *shape, dv_ref in,
                      uint64_t in_offset, dv_ref out, uint64_t out_offset, dv_future *fut)
{
    if (fut == NULL)
        return dv_error_set(DV_EINVAL, "fft", 0, 0, "fft_exec_async: NULL future");
    bool posted = false;
    int rc = exec_common(f, stream, kind, precision, direction, shape, in, in_offset, out,
                         out_offset, fut, &posted);
    if (!posted && dv_future_fail(fut, rc) != rc)
        return DV_EINVAL;
    return rc;
}

/* ------------------------------------------------------------------------
 * The task (the actor's thread)
 * ------------------------------------------------------------------------ */

static int cufft_failed(const char *fn, int st)
{
    return dv_error_set(DV_EDRIVER, "fft", 0, 0, "fft_exec: %s returned cuFFT status %d", fn, st);
}

static int cufft_type(const fft_key *k)
{
    bool d = k->precision == DV_FFT_F64;
    return k->kind == DV_FFT_C2C ? (d ? CUFFT_Z2Z : CUFFT_C2C)
           : k->kind == DV_FFT_R2C ? (d ? CUFFT_D2Z : CUFFT_R2C)
                                   : (d ? CUFFT_Z2D : CUFFT_C2R);
}

/* FFTW's plan for k, made with the operands' host addresses (FFTW_ESTIMATE
 * reads nothing; FFTW_UNALIGNED lets any later arrays be given). */
static void *fftw_plan_for(const fftw_lib *w, const fft_key *k, void *in, void *out)
{
    int n[3], inembed[3], onembed[3];
    int64_t nall = 1, nc = 1;
    for (int i = 0; i < k->rank; i++) {
        n[i] = inembed[i] = onembed[i] = (int)k->n[i];
        nall *= k->n[i];
        nc *= i == k->rank - 1 ? k->n[i] / 2 + 1 : k->n[i];
    }
    int last = k->rank - 1, half = (int)(k->n[last] / 2 + 1);
    unsigned flags = FFTW_ESTIMATE | FFTW_UNALIGNED;
    int b = (int)k->batch;
    void *p;
    pthread_mutex_lock(&planner);
    if (k->kind == DV_FFT_C2C) {
        p = w->c2c(k->rank, n, b, in, NULL, 1, (int)nall, out, NULL, 1, (int)nall, k->direction,
                   flags);
    } else if (k->kind == DV_FFT_R2C) {
        /* in place: real rows padded to 2 * half */
        if (k->in_place)
            inembed[last] = 2 * half;
        onembed[last] = half;
        p = w->r2c(k->rank, n, b, in, inembed, 1, k->in_place ? (int)(2 * nc) : (int)nall, out,
                   onembed, 1, (int)nc, flags);
    } else {
        inembed[last] = half;
        if (k->in_place)
            onembed[last] = 2 * half;
        p = w->c2r(k->rank, n, b, in, inembed, 1, (int)nc, out, onembed, 1,
                   k->in_place ? (int)(2 * nc) : (int)nall, flags);
    }
    pthread_mutex_unlock(&planner);
    return p;
}

/* The cached plan for k, made (and the cache trimmed) when missing. */
static int plan_get(const dv_task_ctx *ctx, dv_fft *f, const fft_key *k, void *in, void *out,
                    fft_plan **outp)
{
    for (fft_plan *p = f->head; p != NULL; p = p->next) {
        if (!same_key(&p->key, k))
            continue;
        if (f->cuda && p->context != ctx->context_generation) {
            /* Made in an older generation: stale (destroyed where the
             * CUDA context was kept). */
            drop_plan(f, p, ctx->driver_context);
            f->st.remade++;
            break;
        }
        if (p != f->head) { /* to the front: the most recently used */
            unlink_plan(f, p);
            f->st.plans++, f->st.bytes += p->bytes;
            p->next = f->head;
            if (f->head != NULL)
                f->head->prev = p;
            f->head = p;
        }
        f->st.hits++;
        *outp = p;
        return DV_OK;
    }
    fft_plan *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return dv_error_set(DV_ENOMEM, "fft", sizeof(*p), 0, "fft_exec: out of host memory");
    p->key = *k;
    p->context = ctx->context_generation;
    p->driver = ctx->driver_context;
    atomic_init(&p->refs, 1);
    if (f->cuda) {
        int st = f->cu_create(&p->cu);
        if (st != 0) {
            free(p);
            return cufft_failed("cufftCreate", st);
        }
        long long n[3] = {k->n[0], k->n[1], k->n[2]};
        size_t work = 0;
        if ((st = f->cu_auto(p->cu, 0)) != 0 ||
            (st = f->cu_make(p->cu, k->rank, n, NULL, 1, 0, NULL, 1, 0, cufft_type(k), k->batch,
                             &work)) != 0) {
            (void)f->cu_destroy(p->cu);
            free(p);
            return cufft_failed("cufftMakePlanMany64", st);
        }
        p->work = work;
    } else {
        p->wl = k->precision == DV_FFT_F64 ? &f->wd : &f->wf;
        p->w = fftw_plan_for(p->wl, k, in, out);
        if (p->w == NULL) {
            free(p);
            return dv_error_set(DV_ENOTSUP, "fft", 0, 0, "fft_exec: FFTW made no plan");
        }
    }
    p->bytes = p->work + PLAN_OVERHEAD;
    make_room(f, p->bytes, ctx->driver_context, NULL);
    p->next = f->head;
    if (f->head != NULL)
        f->head->prev = p;
    f->head = p;
    f->st.plans++;
    f->st.bytes += p->bytes;
    f->st.made++;
    *outp = p;
    return DV_OK;
}

typedef struct sim_job {
    fft_plan *p;
    void *in, *out;
} sim_job;

static void sim_run(void *arg)
{
    sim_job *j = arg;
    const fft_key *k = &j->p->key;
    const fftw_lib *w = j->p->wl;
    if (k->kind == DV_FFT_C2C)
        w->exec_c2c(j->p->w, j->in, j->out);
    else if (k->kind == DV_FFT_R2C)
        w->exec_r2c(j->p->w, j->in, j->out);
    else
        w->exec_c2r(j->p->w, j->in, j->out);
}

static void sim_done(void *arg, int status)
{
    (void)status;
    sim_job *j = arg;
    plan_unref(j->p);
    free(j);
}

int dv__fft_task(const dv_task_ctx *ctx, void *user)
{
    const fft_call *c = user;
    dv_fft *f = c->f;
    if (ctx->stream < NSTREAMS)
        atomic_fetch_or(&f->streams_used, UINT64_C(1) << ctx->stream);
    uint64_t in = ctx->arg[c->in_arg], out = ctx->arg[c->out_arg];
    void *hin = NULL, *hout = NULL;
    if (ctx->simulated) {
        dv_arg_access out_access = c->key.in_place ? DV_READ_WRITE : DV_WRITE;
        hin = dv_task_sim_access(ctx, in, c->in_bytes, c->in_access);
        hout = c->key.in_place ? hin : dv_task_sim_access(ctx, out, c->out_bytes, out_access);
        if (hin == NULL || hout == NULL) {
            int rc = dv_last_error()->status;
            return rc != DV_OK ? rc : DV_EINVAL;
        }
    }
    fft_plan *p = NULL;
    int rc = plan_get(ctx, f, &c->key, hin, hout, &p);
    if (rc != DV_OK)
        return rc;
    if (ctx->simulated) {
        sim_job *j = malloc(sizeof(*j));
        if (j == NULL)
            return dv_error_set(DV_ENOMEM, "fft", sizeof(*j), 0, "fft_exec: out of host memory");
        *j = (sim_job){p, hin, hout};
        atomic_fetch_add(&p->refs, 1);
        rc = dv_task_host_fn_cleanup(ctx, sim_run, sim_done, j);
        if (rc != DV_OK) {
            atomic_fetch_sub(&p->refs, 1); /* the cache still holds it */
            free(j);
        }
        return rc;
    }
    uint64_t work = 0;
    if (p->work > 0 && (rc = dv_task_scratch(ctx, p->work, &work)) != DV_OK)
        return rc;
    /* cuFFT's kernel arguments carry stale words of earlier transforms
     * (pointers to other calls' buffers, some tagged): not pointers this
     * call uses.  Its operands were checked against their blocks. */
    (void)dv_task_kernel_args_opaque(ctx);
    int st;
    if ((st = f->cu_stream(p->cu, ctx->native_stream)) != 0)
        return cufft_failed("cufftSetStream", st);
    if ((st = f->cu_work(p->cu, (void *)(uintptr_t)work)) != 0)
        return cufft_failed("cufftSetWorkArea", st);
    void *pi = (void *)(uintptr_t)in, *po = (void *)(uintptr_t)out;
    bool d = c->key.precision == DV_FFT_F64;
    switch (c->key.kind) {
    case DV_FFT_C2C:
        st = (d ? f->cu_z2z : f->cu_c2c)(p->cu, pi, po, c->key.direction);
        break;
    case DV_FFT_R2C:
        st = (d ? f->cu_d2z : f->cu_r2c)(p->cu, pi, po);
        break;
    default:
        st = (d ? f->cu_z2d : f->cu_c2r)(p->cu, pi, po);
        break;
    }
    return st == 0 ? DV_OK : cufft_failed("cufftExec", st);
}

typedef struct stats_call {
    dv_fft *f;
    dv_fft_stats *out;
} stats_call;

static int stats_task(const dv_task_ctx *ctx, void *user)
{
    (void)ctx;
    stats_call *s = user;
    *s->out = s->f->st;
    return DV_OK;
}

_Static_assert(sizeof(dv_fft_stats) >= DV_ABI_FFT_STATS_MIN, "dv_fft_stats only grows");

int dv_fft_stats_get_sized(dv_fft *f, dv_fft_stats *out, size_t size)
{
    if (f == NULL || out == NULL)
        return dv_error_set(DV_EINVAL, "fft", 0, 0, "fft_stats_get: NULL %s",
                            f == NULL ? "dv_fft" : "out");
    if (!dv__abi_size_ok(size, DV_ABI_FFT_STATS_MIN))
        return dv_error_set(DV_EINVAL, "fft", 0, 0, "fft_stats_get: size %zu (at least %u)", size,
                            DV_ABI_FFT_STATS_MIN);
    dv_fft_stats full;
    stats_call s = {f, &full};
    int rc = dv_task(f->actor, stats_task, &s, 0, NULL, 0);
    if (rc == DV_OK)
        dv__abi_copy_out(out, size, &full, sizeof(full));
    return rc;
}

static int destroy_task(const dv_task_ctx *ctx, void *user)
{
    dv_fft *f = user;
    while (f->head != NULL)
        drop_plan(f, f->head, ctx->driver_context);
    return DV_OK;
}

void dv_fft_destroy(dv_fft *f)
{
    /* It waits for the actor: on an actor's thread it does nothing (the
     * detail says so), and f stays usable, to be destroyed elsewhere. */
    if (f == NULL || dv__lib_no_wait("fft_destroy") != DV_OK)
        return;
    uint64_t used = atomic_load(&f->streams_used);
    for (unsigned s = 0; s < NSTREAMS; s++)
        if (used & (UINT64_C(1) << s))
            (void)dv_sync(f->actor, s);
    if (dv_task(f->actor, destroy_task, f, 0, NULL, 0) != DV_OK) {
        /* The actor is gone: its plans' contexts with it; host memory. */
        while (f->head != NULL) {
            fft_plan *p = f->head;
            unlink_plan(f, p);
            plan_unref(p);
        }
    }
    /* The libraries stay mapped (their threads, or the driver, may still
     * run their code). */
    free(f);
}
