/*
 * The FFT library actor (devactor_fft.h) against a direct DFT in double
 * on random data: complex, real-to-complex and complex-to-real transforms
 * in single and double precision, rank 1, 2 and 3, batched, in place and
 * out of place, both directions; operands written on other streams than
 * the transform's and read back on another; the plan cache (hits, and
 * evictions under a small budget); a table of mistakes each refused before
 * anything is posted; _async transforms back to back; a context rebuild.
 * On the sim the transforms run in FFTW; fft_cuda.t runs the same on
 * cuFFT.
 */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "devactor.h"
#include "devactor_fft.h"
#include "tap.h"

#ifndef FFT_ON_CUDA
#define FFT_ON_CUDA 0
#endif

static dv_actor *A;
static dv_fft *F;
static uint64_t rng = 0x2545F4914F6CDD1Dull;

static double rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static const dv_fft_shape shapes[] = {
    {1, {60, 0, 0}, 3},
    {2, {8, 10, 0}, 2},
    {3, {4, 6, 5}, 2},
};

static int64_t total(const dv_fft_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        n *= s->n[i];
    return n;
}

/* The full DFT of one transform (N complex in, N out), in double. */
static void dft(const dv_fft_shape *s, const double complex *x, double complex *X, int sign)
{
    int64_t n = total(s);
    int r = s->rank;
    for (int64_t k = 0; k < n; k++) {
        int64_t kk[3] = {0, 0, 0}, rest = k;
        for (int d = r - 1; d >= 0; d--) {
            kk[d] = rest % s->n[d];
            rest /= s->n[d];
        }
        double complex acc = 0;
        for (int64_t j = 0; j < n; j++) {
            int64_t jj[3] = {0, 0, 0}, rj = j;
            for (int d = r - 1; d >= 0; d--) {
                jj[d] = rj % s->n[d];
                rj /= s->n[d];
            }
            double ph = 0;
            for (int d = 0; d < r; d++)
                ph += (double)(kk[d] * jj[d] % s->n[d]) / (double)s->n[d];
            acc += x[j] * cexp(sign * 2.0 * M_PI * I * ph);
        }
        X[k] = acc;
    }
}

/* Index of element (row r of the leading dimensions, column c of the last)
 * in a layout whose rows are `row` elements long. */
static int64_t idx(int64_t r, int64_t c, int64_t row)
{
    return r * row + c;
}

static dv_ref upload(const void *host, uint64_t bytes, dv_stream s)
{
    dv_ref r;
    if (dv_alloc(A, bytes, s, "fft", &r) != DV_OK || dv_copy_htod(A, r, 0, host, bytes, s) != DV_OK)
        bail_out("upload: %s", dv_last_error()->message);
    return r;
}

static double tol(dv_fft_precision p)
{
    return p == DV_FFT_F64 ? 1e-12 : 1e-5;
}

/* Store v (complex or real) in a typed host buffer. */
static void put_c(dv_fft_precision p, void *buf, int64_t e, double complex v)
{
    if (p == DV_FFT_F64) {
        ((double *)buf)[2 * e] = creal(v);
        ((double *)buf)[2 * e + 1] = cimag(v);
    } else {
        ((float *)buf)[2 * e] = (float)creal(v);
        ((float *)buf)[2 * e + 1] = (float)cimag(v);
    }
}
static double complex get_c(dv_fft_precision p, const void *buf, int64_t e)
{
    return p == DV_FFT_F64 ? ((const double *)buf)[2 * e] + I * ((const double *)buf)[2 * e + 1]
                           : ((const float *)buf)[2 * e] + I * ((const float *)buf)[2 * e + 1];
}
static void put_r(dv_fft_precision p, void *buf, int64_t e, double v)
{
    if (p == DV_FFT_F64)
        ((double *)buf)[e] = v;
    else
        ((float *)buf)[e] = (float)v;
}
static double get_r(dv_fft_precision p, const void *buf, int64_t e)
{
    return p == DV_FFT_F64 ? ((const double *)buf)[e] : ((const float *)buf)[e];
}

/*
 * One transform of each kind for shape s, placement and precision,
 * against the reference: the worst error scaled by the sum of |x| (the
 * bound of any output element), or -1 when a call failed.
 */
static double one_case(dv_fft_kind kind, dv_fft_precision p, const dv_fft_shape *s, bool in_place,
                       dv_fft_direction dir)
{
    int64_t n = total(s), last = s->n[s->rank - 1], half = last / 2 + 1, rows = n / last;
    int64_t nc = rows * half, b = s->batch;
    uint64_t in_bytes = dv_fft_bytes(kind, p, s, in_place, false);
    uint64_t out_bytes = dv_fft_bytes(kind, p, s, in_place, true);
    void *hin = calloc(1, in_bytes), *hout = calloc(1, out_bytes);
    double complex *x = calloc((size_t)n, sizeof(*x)), *X = calloc((size_t)n, sizeof(*X));
    double worst = 0;
    /* the real side's row length in its buffer */
    int64_t real_row = in_place ? 2 * half : last;
    /* inputs, and what each batch's output must be */
    double complex *want = calloc((size_t)(b * n), sizeof(*want));
    double *mag = calloc((size_t)b, sizeof(double));
    for (int64_t t = 0; t < b; t++) {
        for (int64_t j = 0; j < n; j++)
            x[j] = kind == DV_FFT_C2C ? rnd() + I * rnd() : rnd();
        if (kind == DV_FFT_C2R) {
            /* input: the half spectrum of real data; output: n times it */
            dft(s, x, X, -1);
            for (int64_t r = 0; r < rows; r++)
                for (int64_t c = 0; c < half; c++)
                    put_c(p, hin, t * nc + idx(r, c, half), X[idx(r, c, last)]);
            for (int64_t j = 0; j < n; j++) {
                want[t * n + j] = (double)n * x[j];
                mag[t] += cabs(X[j]);
            }
            continue;
        }
        for (int64_t j = 0; j < n; j++) {
            mag[t] += cabs(x[j]);
            if (kind == DV_FFT_C2C)
                put_c(p, hin, t * n + j, x[j]);
            else
                put_r(p, hin, t * (in_place ? 2 * nc : n) + idx(j / last, j % last, real_row),
                      creal(x[j]));
        }
        dft(s, x, X, kind == DV_FFT_C2C ? (int)dir : -1);
        memcpy(want + t * n, X, (size_t)n * sizeof(*X));
    }
    dv_ref rin = upload(hin, in_bytes, 0), rout = rin;
    if (!in_place)
        dv_alloc(A, out_bytes, 1, "out", &rout);
    int rc = dv_fft_exec(F, 2, kind, p, dir, s, rin, 0, rout, 0);
    if (rc != DV_OK || dv_copy_dtoh(A, hout, rout, 0, out_bytes, 1) != DV_OK) {
        diag("fft: %s", dv_last_error()->message);
        worst = -1;
    } else {
        for (int64_t t = 0; t < b; t++)
            for (int64_t j = 0; j < n; j++) {
                int64_t r = j / last, c = j % last;
                double complex got;
                if (kind == DV_FFT_C2C)
                    got = get_c(p, hout, t * n + j);
                else if (kind == DV_FFT_R2C) {
                    if (c >= half)
                        continue; /* not stored: Hermitian */
                    got = get_c(p, hout, t * nc + idx(r, c, half));
                } else {
                    got = get_r(p, hout, t * (in_place ? 2 * nc : n) + idx(r, c, real_row));
                }
                double err = cabs(got - want[t * n + j]) / (mag[t] * (kind == DV_FFT_C2R ? 1 : 1));
                if (!(err <= worst))
                    worst = isnan(err) ? INFINITY : err;
            }
    }
    dv_ref_release(rin);
    if (!in_place)
        dv_ref_release(rout);
    free(hin), free(hout), free(x), free(X), free(want), free(mag);
    return worst;
}

static void test_transforms(void)
{
    static const char *const kinds[] = {"C2C", "R2C", "C2R"};
    for (int pi = 0; pi < 2; pi++) {
        dv_fft_precision p = (dv_fft_precision)pi;
        for (int k = 0; k < 3; k++) {
            double worst = 0;
            bool all = true;
            for (unsigned si = 0; si < 3; si++)
                for (int ip = 0; ip < 2; ip++)
                    for (int d = 0; d < (k == 0 ? 2 : 1); d++) {
                        dv_fft_direction dir = k == 2 || (k == 0 && d == 1) ? DV_FFT_INVERSE
                                                                            : DV_FFT_FORWARD;
                        double w = one_case((dv_fft_kind)k, p, &shapes[si], ip == 1, dir);
                        all &= w >= 0;
                        worst = w > worst ? w : worst;
                    }
            ok(all && worst <= tol(p),
               "%s %s, rank 1, 2, 3, batched, in place and not%s: worst error %.2e of sum |x| "
               "(bound %.0e)",
               kinds[k], p == DV_FFT_F64 ? "F64" : "F32", k == 0 ? ", both directions" : "",
               worst, tol(p));
        }
    }
}

static void test_cache(void)
{
    dv_fft_stats s0, s1;
    dv_fft_stats_get(F, &s0);
    for (int i = 0; i < 3; i++)
        (void)one_case(DV_FFT_C2C, DV_FFT_F32, &shapes[1], false, DV_FFT_FORWARD);
    dv_fft_stats_get(F, &s1);
    ok(s1.hits >= s0.hits + 3 && s1.made == s0.made,
       "the same transform three times: found its plan each time (%llu hits, %llu made)",
       (unsigned long long)(s1.hits - s0.hits), (unsigned long long)(s1.made - s0.made));

    /* A budget of one byte keeps one plan at a time. */
    dv_fft *small = NULL;
    dv_fft *keep = F;
    if (dv_fft_create(A, 1, &small) != DV_OK)
        bail_out("fft_create: %s", dv_last_error()->message);
    F = small;
    double w = 0;
    for (int round = 0; round < 2; round++)
        for (unsigned si = 0; si < 3; si++)
            w = fmax(w, one_case(DV_FFT_C2C, DV_FFT_F64, &shapes[si], false, DV_FFT_FORWARD));
    dv_fft_stats st;
    dv_fft_stats_get(small, &st);
    ok(st.plans == 1 && st.evictions == 5 && st.made == 6 && w >= 0 && w <= tol(DV_FFT_F64),
       "a one-byte plan budget: %llu plan kept, %llu evicted, %llu made, results right (%.2e)",
       (unsigned long long)st.plans, (unsigned long long)st.evictions,
       (unsigned long long)st.made, w);
    F = keep;
    dv_fft_destroy(small);
}

static dv_ref big, out4k, released;
static const dv_fft_shape s64 = {1, {64, 0, 0}, 1};

static int x_out_short(void)
{
    dv_fft_shape s = {1, {1024, 0, 0}, 1};
    return dv_fft_exec(F, 0, DV_FFT_C2C, DV_FFT_F32, DV_FFT_FORWARD, &s, big, 0, out4k, 0);
}
static int x_in_short(void)
{
    dv_fft_shape s = {2, {64, 64, 0}, 2};
    return dv_fft_exec(F, 0, DV_FFT_R2C, DV_FFT_F64, DV_FFT_FORWARD, &s, out4k, 0, big, 0);
}
static int x_out_offset(void)
{
    return dv_fft_exec(F, 0, DV_FFT_C2C, DV_FFT_F32, DV_FFT_FORWARD, &s64, big, 0, out4k, 3592);
}
static int x_in_place_padded(void)
{
    /* in place, 2 x 1000 reals are padded to 2 x 1002: past 4 KiB x 2 */
    dv_fft_shape s = {2, {2, 1000, 0}, 1};
    return dv_fft_exec(F, 0, DV_FFT_R2C, DV_FFT_F32, DV_FFT_FORWARD, &s, out4k, 0, out4k, 0);
}
static int x_misaligned(void)
{
    return dv_fft_exec(F, 0, DV_FFT_C2C, DV_FFT_F64, DV_FFT_FORWARD, &s64, big, 4, out4k, 0);
}
static int x_rank0(void)
{
    dv_fft_shape s = {0, {64, 0, 0}, 1};
    return dv_fft_exec(F, 0, DV_FFT_C2C, DV_FFT_F32, DV_FFT_FORWARD, &s, big, 0, out4k, 0);
}
static int x_rank4(void)
{
    dv_fft_shape s = {4, {4, 4, 4}, 1};
    return dv_fft_exec(F, 0, DV_FFT_C2C, DV_FFT_F32, DV_FFT_FORWARD, &s, big, 0, out4k, 0);
}
static int x_size0(void)
{
    dv_fft_shape s = {2, {4, 0, 0}, 1};
    return dv_fft_exec(F, 0, DV_FFT_C2C, DV_FFT_F32, DV_FFT_FORWARD, &s, big, 0, out4k, 0);
}
static int x_batch0(void)
{
    dv_fft_shape s = {1, {4, 0, 0}, 0};
    return dv_fft_exec(F, 0, DV_FFT_C2C, DV_FFT_F32, DV_FFT_FORWARD, &s, big, 0, out4k, 0);
}
static int x_huge(void)
{
    dv_fft_shape s = {3, {1 << 30, 1 << 30, 1 << 30}, 1 << 30};
    return dv_fft_exec(F, 0, DV_FFT_C2C, DV_FFT_F32, DV_FFT_FORWARD, &s, big, 0, out4k, 0);
}
static int x_bad_kind(void)
{
    return dv_fft_exec(F, 0, (dv_fft_kind)7, DV_FFT_F32, DV_FFT_FORWARD, &s64, big, 0, out4k, 0);
}
static int x_bad_precision(void)
{
    return dv_fft_exec(F, 0, DV_FFT_C2C, (dv_fft_precision)3, DV_FFT_FORWARD, &s64, big, 0, out4k,
                       0);
}
static int x_r2c_inverse(void)
{
    return dv_fft_exec(F, 0, DV_FFT_R2C, DV_FFT_F32, DV_FFT_INVERSE, &s64, big, 0, out4k, 0);
}
static int x_c2r_forward(void)
{
    return dv_fft_exec(F, 0, DV_FFT_C2R, DV_FFT_F32, DV_FFT_FORWARD, &s64, big, 0, out4k, 0);
}
static int x_bad_direction(void)
{
    return dv_fft_exec(F, 0, DV_FFT_C2C, DV_FFT_F32, (dv_fft_direction)0, &s64, big, 0, out4k, 0);
}
static int x_overlap(void)
{
    return dv_fft_exec(F, 0, DV_FFT_C2C, DV_FFT_F32, DV_FFT_FORWARD, &s64, out4k, 0, out4k, 256);
}
static int x_released(void)
{
    return dv_fft_exec(F, 0, DV_FFT_C2C, DV_FFT_F32, DV_FFT_FORWARD, &s64, released, 0, out4k, 0);
}
static int x_null_fft(void)
{
    return dv_fft_exec(NULL, 0, DV_FFT_C2C, DV_FFT_F32, DV_FFT_FORWARD, &s64, big, 0, out4k, 0);
}
static int x_null_shape(void)
{
    return dv_fft_exec(F, 0, DV_FFT_C2C, DV_FFT_F32, DV_FFT_FORWARD, NULL, big, 0, out4k, 0);
}
static int x_bad_stream(void)
{
    return dv_fft_exec(F, 50, DV_FFT_C2C, DV_FFT_F32, DV_FFT_FORWARD, &s64, big, 0, out4k, 0);
}

static void test_mistakes(void)
{
    static const struct {
        const char *what;
        int want;
        int (*call)(void);
        const char *says; /* in the message, where it matters */
    } table[] = {
        {"an output past its 4 KiB block", DV_EOUT_OF_BOUNDS, x_out_short},
        {"an input past its block", DV_EOUT_OF_BOUNDS, x_in_short},
        {"an output at an offset near its block's end", DV_EOUT_OF_BOUNDS, x_out_offset},
        {"in place, the padded real rows past the block", DV_EOUT_OF_BOUNDS, x_in_place_padded},
        {"an input offset that is not a multiple of its element", DV_EINVAL, x_misaligned},
        {"rank 0", DV_EINVAL, x_rank0},
        {"rank 4", DV_EINVAL, x_rank4},
        {"a size of 0", DV_EINVAL, x_size0},
        {"batch 0", DV_EINVAL, x_batch0},
        {"sizes whose product overflows", DV_EINVAL, x_huge, "overflow"},
        {"an unknown kind", DV_EINVAL, x_bad_kind},
        {"an unknown precision", DV_EINVAL, x_bad_precision},
        {"R2C inverse", DV_EINVAL, x_r2c_inverse},
        {"C2R forward", DV_EINVAL, x_c2r_forward},
        {"a direction of 0", DV_EINVAL, x_bad_direction},
        {"in and out overlapping, not the same bytes", DV_EINVAL, x_overlap},
        {"a released handle", DV_ESTALE, x_released},
        {"a NULL dv_fft", DV_EINVAL, x_null_fft},
        {"a NULL shape", DV_EINVAL, x_null_shape},
        {"a stream the actor does not have", DV_EINVAL, x_bad_stream, "fft_exec: unknown stream"},
    };
    unsigned n = sizeof(table) / sizeof(table[0]), right = 0;
    unsigned char pattern[4096], now[4096];
    for (unsigned i = 0; i < sizeof(pattern); i++)
        pattern[i] = (unsigned char)(i * 13 + 5);
    dv_copy_htod(A, out4k, 0, pattern, sizeof(pattern), 0);
    dv_sync(A, 0);
    dv_actor_stats before, after;
    dv_actor_stats_get(A, &before);
    for (unsigned i = 0; i < n; i++) {
        dv_error_clear();
        int rc = table[i].call();
        bool good = rc == table[i].want && dv_last_error()->status == rc &&
                    dv_last_error()->message[0] != '\0';
        if (rc == DV_EOUT_OF_BOUNDS)
            good &= dv_last_error()->requested > dv_last_error()->remaining;
        if (table[i].says != NULL)
            good &= strstr(dv_last_error()->message, table[i].says) != NULL;
        if (!good)
            diag("%s: %s (%s), wanted %s", table[i].what, dv_err_name(rc),
                 dv_last_error()->message, dv_err_name(table[i].want));
        right += good;
    }
    dv_actor_stats_get(A, &after);
    dv_copy_dtoh(A, now, out4k, 0, sizeof(now), 1);
    is_int(right, n, "%u mistakes each refused with its code and a detail", n);
    is_u64(after.tasks, before.tasks, "... none of them ran a task");
    ok(memcmp(now, pattern, sizeof(now)) == 0, "... the output block is untouched");
}

static void test_async(void)
{
    enum { CALLS = 5, NN = 256 };
    static float x[CALLS][2 * NN], y[2 * NN];
    dv_ref in[CALLS], out[CALLS];
    dv_future f[CALLS];
    dv_fft_shape s = {1, {NN, 0, 0}, 1};
    int posted = 0, done = 0;
    for (int i = 0; i < CALLS; i++) {
        for (int e = 0; e < 2 * NN; e++)
            x[i][e] = (float)rnd();
        in[i] = upload(x[i], sizeof(x[i]), (dv_stream)(i % 2));
        dv_alloc(A, sizeof(x[i]), 2, "out", &out[i]);
        dv_future_init(&f[i], 0);
        posted += dv_fft_exec_async(F, (dv_stream)(1 + i % 2), DV_FFT_C2C, DV_FFT_F32,
                                    DV_FFT_FORWARD, &s, in[i], 0, out[i], 0, &f[i]) == DV_OK;
    }
    double worst = 0;
    for (int i = 0; i < CALLS; i++) {
        done += dv_future_wait(&f[i]) == DV_OK;
        dv_copy_dtoh(A, y, out[i], 0, sizeof(y), 0);
        /* Parseval: sum |X|^2 = N sum |x|^2 */
        double ex = 0, eX = 0;
        for (int e = 0; e < NN; e++) {
            ex += (double)x[i][2 * e] * x[i][2 * e] + (double)x[i][2 * e + 1] * x[i][2 * e + 1];
            eX += (double)y[2 * e] * y[2 * e] + (double)y[2 * e + 1] * y[2 * e + 1];
        }
        worst = fmax(worst, fabs(eX - NN * ex) / (NN * ex));
        dv_ref_release(in[i]), dv_ref_release(out[i]);
    }
    ok(posted == CALLS && done == CALLS && worst < 1e-5,
       "%d fft_exec_async posted back to back on two streams: all right (energy off by %.1e)",
       CALLS, worst);
    dv_future g;
    dv_future_init(&g, 0);
    int rc = dv_fft_exec_async(F, 0, DV_FFT_C2C, DV_FFT_F32, DV_FFT_FORWARD, &s64, big, 0, big, 8,
                               &g);
    ok(rc == DV_EINVAL && dv_future_done(&g) && dv_future_wait(&g) == DV_EINVAL,
       "a refused fft_exec_async answers DV_EINVAL and completes its future with it");
}

/* Inside a task: the _async form cannot wait to be ordered there, and
 * dv_fft_destroy cannot wait for the actor. */
typedef struct in_task_probe {
    dv_ref buf;
    int async_rc, future_rc, destroy_status, create_rc;
    dv_fft *made;
} in_task_probe;

static int probe_task(const dv_task_ctx *ctx, void *user)
{
    (void)ctx;
    in_task_probe *p = user;
    dv_future f;
    dv_future_init(&f, 0);
    dv_fft_shape shape = {.rank = 1, .n = {64}, .batch = 1};
    p->async_rc = dv_fft_exec_async(F, 0, DV_FFT_C2C, DV_FFT_F32, DV_FFT_FORWARD, &shape,
                                    p->buf, 0, p->buf, 0, &f);
    p->future_rc = dv_future_done(&f) ? f.status : 1;
    dv_error_clear();
    dv_fft_destroy(F);
    p->destroy_status = dv_last_error()->status;
    p->made = (dv_fft *)p; /* a dv_fft_create refused there leaves NULL */
    p->create_rc = dv_fft_create(A, 0, &p->made);
    return DV_OK;
}

static void test_in_task(void)
{
    in_task_probe p = {0};
    dv_alloc(A, 64 * 8, 0, "in task", &p.buf);
    dv_memset(A, p.buf, 0, 0, 64 * 8, 0);
    int rc = dv_task(A, probe_task, &p, 1, NULL, 0);
    ok(rc == DV_OK && p.async_rc == DV_EDEADLK && p.future_rc == DV_EDEADLK &&
           p.destroy_status == DV_EDEADLK,
       "inside a task: fft_exec_async and its future answer DV_EDEADLK, dv_fft_destroy does "
       "nothing (%s, %s, %s)",
       dv_err_name(p.async_rc), dv_err_name(p.future_rc), dv_err_name(p.destroy_status));
    ok(p.create_rc == DV_EDEADLK && p.made == NULL,
       "dv_fft_create there answers DV_EDEADLK, making nothing (%s)", dv_err_name(p.create_rc));
    dv_fft_shape shape = {.rank = 1, .n = {64}, .batch = 1};
    is_status(dv_fft_exec(F, 0, DV_FFT_C2C, DV_FFT_F32, DV_FFT_FORWARD, &shape, p.buf, 0,
                          p.buf, 0),
              DV_OK, "the FFT actor still works after it");
    dv_ref_release(p.buf);
}

int main(void)
{
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.backend = FFT_ON_CUDA ? DV_BACKEND_CUDA : DV_BACKEND_SIM;
    cfg.streams = 3;
    cfg.sim_delay_max_us = 50;
    cfg.sim_seed = 5;
    int rc = dv_actor_create(&cfg, &A);
    if (FFT_ON_CUDA && rc == DV_ENODEVICE)
        skip_all("%s", dv_last_error()->message);
    if (rc != DV_OK)
        bail_out("no actor: %s", dv_last_error()->message);
    rc = dv_fft_create(A, 0, &F);
    /* Without the library (cuBLAS; on the sim the host's, which
     * tools/ensure-deps.sh installs): nothing to test, said so -- unless
     * DV_REQUIRE_LIBS is set (CI), where a missing library fails. */
    if (rc == DV_ENOTSUP && getenv("DV_REQUIRE_LIBS") == NULL)
        skip_all("%s", dv_last_error()->message);
    plan(21);
    is_status(rc, DV_OK, "the FFT library actor on %s: %s", dv_actor_backend_name(A),
              rc == DV_OK ? dv_fft_library(F) : dv_last_error()->message);
    if (rc != DV_OK)
        return tap_done();
    test_transforms();
    test_cache();
    dv_alloc(A, 65536, 0, "big", &big);
    dv_alloc(A, 4096, 0, "out", &out4k);
    dv_alloc(A, 64, 0, "released", &released);
    dv_memset(A, big, 0, 0, 65536, 0);
    dv_ref_release(released);
    test_mistakes();
    test_async();
    test_in_task();
    dv_ref_release(big), dv_ref_release(out4k);
    dv_fft *none = (dv_fft *)&none;
    ok(dv_fft_create(NULL, 0, &none) == DV_EINVAL && none == NULL,
       "dv_fft_create with no actor: DV_EINVAL, *out NULL");
    if (!FFT_ON_CUDA) {
        /* A library that opens but is the wrong one: the message names it
         * and the function it lacks, not the names it would have tried. */
        const char *cases[][3] = {{"DV_FFTWF_PATH", "libfftw3.so.3", "libfftw3.so.3 lacks fftwf_"},
                                  {"DV_FFTW_PATH", "libfftw3f.so.3", "libfftw3f.so.3 lacks fftw_"}};
        int right = 0;
        for (int i = 0; i < 2; i++) {
            setenv(cases[i][0], cases[i][1], 1);
            dv_fft *g = NULL;
            rc = dv_fft_create(A, 0, &g);
            right += rc == DV_ENOTSUP && g == NULL &&
                     strstr(dv_last_error()->message, cases[i][2]) != NULL;
            diag("%s=%s: %s", cases[i][0], cases[i][1], dv_last_error()->message);
            if (g != NULL)
                dv_fft_destroy(g);
            unsetenv(cases[i][0]);
        }
        ok(right == 2,
           "a library path that opens the wrong FFTW: DV_ENOTSUP naming it and what it lacks");
    } else {
        skip("the FFTW paths are the simulated device's");
    }

    is_status(dv_actor_reset(A), DV_OK, "the actor's context rebuilt (dv_actor_reset)");
    double w1 = one_case(DV_FFT_C2C, DV_FFT_F32, &shapes[2], false, DV_FFT_FORWARD);
    double w2 = one_case(DV_FFT_R2C, DV_FFT_F64, &shapes[1], true, DV_FFT_FORWARD);
    ok(w1 >= 0 && w2 >= 0 && w1 <= tol(DV_FFT_F32) && w2 <= tol(DV_FFT_F64),
       "transforms after the rebuild are right (%.2e, %.2e)", w1, w2);
    dv_fft_destroy(F);
    dv_actor_destroy(A);
    return tap_done();
}
