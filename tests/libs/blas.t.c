/*
 * The BLAS library actor (devactor_blas.h) against a CPU reference on
 * random data: GEMM in every precision, layout and transpose with padded
 * leading dimensions and offsets, strided-batched GEMM (a broadcast A),
 * GEMV with strided and negative increments, AXPY, DOT; operands written
 * on other streams than the call's and read back on a third; what lies
 * between a matrix's rows left alone; a table of mistakes each refused
 * before anything is posted (the output untouched, no task run); a
 * context rebuild, after which calls are right again.  On the sim the
 * calls run in the host's CBLAS; blas_cuda.t runs the same on cuBLAS.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "devactor.h"
#include "devactor_blas.h"
#include "libs/libload.h"
#include "tap.h"

#ifndef BLAS_ON_CUDA
#define BLAS_ON_CUDA 0
#endif

static dv_actor *A;
static dv_blas *B;
static uint64_t rng = 88172645463325252ull;

static double rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* Element e of a typed buffer, as double; and storing one. */
static double get(dv_blas_type t, const void *p, int64_t e)
{
    switch (t) {
    case DV_BLAS_F64:
        return ((const double *)p)[e];
    case DV_BLAS_F16:
        return dv__f16_to_f32(((const uint16_t *)p)[e]);
    case DV_BLAS_BF16:
        return dv__bf16_to_f32(((const uint16_t *)p)[e]);
    default:
        return ((const float *)p)[e];
    }
}

static void put(dv_blas_type t, void *p, int64_t e, double v)
{
    switch (t) {
    case DV_BLAS_F64:
        ((double *)p)[e] = v;
        break;
    case DV_BLAS_F16:
        ((uint16_t *)p)[e] = dv__f32_to_f16((float)v);
        break;
    case DV_BLAS_BF16:
        ((uint16_t *)p)[e] = dv__f32_to_bf16((float)v);
        break;
    default:
        ((float *)p)[e] = (float)v;
        break;
    }
}

static dv_ref upload(const void *host, uint64_t bytes, dv_stream s, const char *tag)
{
    dv_ref r;
    if (dv_alloc(A, bytes, s, tag, &r) != DV_OK || dv_copy_htod(A, r, 0, host, bytes, s) != DV_OK)
        bail_out("upload %s: %s", tag, dv_last_error()->message);
    return r;
}

static const char *type_name(dv_blas_type t)
{
    static const char *const n[] = {"F32", "F64", "TF32", "F16", "BF16"};
    return n[t];
}

/* Relative error bound per precision, against sum |alpha a b| + |beta c|. */
static double tolerance(dv_blas_type t)
{
    switch (t) {
    case DV_BLAS_F64:
        return 1e-12;
    case DV_BLAS_F32:
        return 2e-6;
    case DV_BLAS_TF32:
        return 4e-3;
    case DV_BLAS_F16:
        return 4e-3;
    default:
        return 2e-2;
    }
}

/* Element (r, c) of a stored matrix at index. */
static int64_t at(dv_blas_layout l, int64_t r, int64_t c, int64_t ld)
{
    return l == DV_BLAS_ROW_MAJOR ? r * ld + c : c * ld + r;
}

/*
 * One GEMM (batch matrices, stride apart; a_stride 0 broadcasts A) on
 * random data, against the reference in double.  Padding between rows
 * and an offset in front of each operand; operands on streams 0 and 1,
 * the call on 2.  Returns the worst scaled error, or -1 on a failed call.
 */
static double gemm_case(dv_blas_type t, dv_blas_layout l, dv_blas_op oa, dv_blas_op ob,
                        int64_t m, int64_t n, int64_t k, int64_t batch, bool a_broadcast,
                        bool *pad_ok)
{
    unsigned es = dv_blas_type_size(t);
    int64_t ar = oa == DV_BLAS_N ? m : k, ac = oa == DV_BLAS_N ? k : m;
    int64_t br = ob == DV_BLAS_N ? k : n, bc = ob == DV_BLAS_N ? n : k;
    int64_t lda = (l == DV_BLAS_ROW_MAJOR ? ac : ar) + 3;
    int64_t ldb = (l == DV_BLAS_ROW_MAJOR ? bc : br) + 1;
    int64_t ldc = (l == DV_BLAS_ROW_MAJOR ? n : m) + 2;
    int64_t sa = a_broadcast ? 0 : (l == DV_BLAS_ROW_MAJOR ? ar : ac) * lda + 5;
    int64_t sb = (l == DV_BLAS_ROW_MAJOR ? br : bc) * ldb + 1;
    int64_t sc = (l == DV_BLAS_ROW_MAJOR ? m : n) * ldc + 4;
    int64_t na = (a_broadcast ? 1 : batch) * ((l == DV_BLAS_ROW_MAJOR ? ar : ac) * lda + 5);
    int64_t nb = batch * sb, nc = batch * sc;
    const int64_t off = 8; /* elements in front of each operand */
    void *ha = calloc((size_t)(na + off), es), *hb = calloc((size_t)(nb + off), es),
         *hc = calloc((size_t)(nc + off), es), *out = calloc((size_t)(nc + off), es);
    double *ref = calloc((size_t)nc, sizeof(double)), *scale = calloc((size_t)nc, sizeof(double));
    double alpha = 1.25, beta = -0.5, worst = -1;
    for (int64_t e = 0; e < na + off; e++)
        put(t, ha, e, rnd());
    for (int64_t e = 0; e < nb + off; e++)
        put(t, hb, e, rnd());
    for (int64_t e = 0; e < nc + off; e++)
        put(t, hc, e, rnd());
    /* The reference, from the values as stored. */
    const void *pa = (const char *)ha + off * es, *pb = (const char *)hb + off * es,
               *pc = (const char *)hc + off * es;
    for (int64_t i = 0; i < batch; i++)
        for (int64_t r = 0; r < m; r++)
            for (int64_t c = 0; c < n; c++) {
                double acc = 0, mag = 0;
                for (int64_t p = 0; p < k; p++) {
                    double x = get(t, pa, i * sa + (oa == DV_BLAS_N ? at(l, r, p, lda)
                                                                    : at(l, p, r, lda)));
                    double y = get(t, pb, i * sb + (ob == DV_BLAS_N ? at(l, p, c, ldb)
                                                                    : at(l, c, p, ldb)));
                    acc += x * y;
                    mag += fabs(x * y);
                }
                int64_t e = i * sc + at(l, r, c, ldc);
                double old = get(t, pc, e);
                ref[e] = alpha * acc + beta * old;
                scale[e] = fabs(alpha) * mag + fabs(beta * old) + 1e-30;
            }
    dv_ref ra = upload(ha, (uint64_t)(na + off) * es, 0, "A");
    dv_ref rb = upload(hb, (uint64_t)(nb + off) * es, 1, "B");
    dv_ref rc = upload(hc, (uint64_t)(nc + off) * es, 0, "C");
    dv_blas_matrix ma = {ra, (uint64_t)off * es, lda, sa}, mb = {rb, (uint64_t)off * es, ldb, sb},
                   mc = {rc, (uint64_t)off * es, ldc, sc};
    int rc_call = batch > 1 || a_broadcast
                      ? dv_blas_gemm_strided_batched(B, 2, t, l, oa, ob, m, n, k, alpha, ma, mb,
                                                     beta, mc, batch)
                      : dv_blas_gemm(B, 2, t, l, oa, ob, m, n, k, alpha, ma, mb, beta, mc);
    if (rc_call != DV_OK) {
        diag("gemm %s: %s", type_name(t), dv_last_error()->message);
    } else if (dv_copy_dtoh(A, out, rc, 0, (uint64_t)(nc + off) * es, 1) == DV_OK) {
        worst = 0;
        *pad_ok = memcmp(out, hc, (size_t)off * es) == 0;
        for (int64_t e = 0; e < nc; e++) {
            bool in_matrix = false;
            int64_t i = e / sc, rest = e % sc;
            int64_t major = rest / ldc, minor = rest % ldc;
            if (i < batch)
                in_matrix = l == DV_BLAS_ROW_MAJOR ? (major < m && minor < n)
                                                   : (major < n && minor < m);
            double got = get(t, (const char *)out + off * es, e);
            if (in_matrix) {
                double err = fabs(got - ref[e]) / scale[e];
                if (!(err <= worst))
                    worst = isnan(err) ? INFINITY : err;
            } else if (memcmp((const char *)out + (off + e) * es, (const char *)pc + e * es, es) !=
                       0) {
                *pad_ok = false;
            }
        }
    }
    dv_ref_release(ra);
    dv_ref_release(rb);
    dv_ref_release(rc);
    free(ha), free(hb), free(hc), free(out), free(ref), free(scale);
    return worst;
}

static void test_gemm(void)
{
    static const dv_blas_type types[] = {DV_BLAS_F32, DV_BLAS_F64, DV_BLAS_TF32, DV_BLAS_F16,
                                         DV_BLAS_BF16};
    for (unsigned ti = 0; ti < 5; ti++) {
        dv_blas_type t = types[ti];
        double worst = 0;
        bool pads = true, all = true;
        for (int l = 0; l < 2; l++)
            for (int o = 0; o < 4; o++) {
                bool pad_ok = false;
                double w = gemm_case(t, (dv_blas_layout)l, (dv_blas_op)(o & 1),
                                     (dv_blas_op)(o >> 1), 37, 29, 23, 1, false, &pad_ok);
                all &= w >= 0;
                pads &= pad_ok;
                worst = w > worst ? w : worst;
            }
        ok(all && worst <= tolerance(t),
           "gemm %s, row- and column-major, NN NT TN TT, padded, offset: worst scaled error "
           "%.2e (bound %.0e)",
           type_name(t), worst, tolerance(t));
        ok(pads, "... the bytes around and between C's rows are left alone");
    }
    bool pad_ok = false;
    double w = gemm_case(DV_BLAS_F32, DV_BLAS_ROW_MAJOR, DV_BLAS_N, DV_BLAS_T, 64, 48, 96, 1,
                         false, &pad_ok);
    ok(w >= 0 && w <= tolerance(DV_BLAS_F32) && pad_ok, "gemm F32 64 x 48 x 96: %.2e", w);
    w = gemm_case(DV_BLAS_F64, DV_BLAS_COL_MAJOR, DV_BLAS_T, DV_BLAS_N, 19, 17, 0, 1, false,
                  &pad_ok);
    ok(w >= 0 && w <= tolerance(DV_BLAS_F64) && pad_ok, "gemm with k = 0 scales C by beta: %.2e",
       w);
}

static void test_batched(void)
{
    static const dv_blas_type types[] = {DV_BLAS_F32, DV_BLAS_F64, DV_BLAS_F16, DV_BLAS_BF16,
                                         DV_BLAS_TF32};
    for (unsigned ti = 0; ti < 5; ti++) {
        bool pad1 = false, pad2 = false;
        double w1 = gemm_case(types[ti], DV_BLAS_ROW_MAJOR, DV_BLAS_T, DV_BLAS_N, 21, 13, 17, 4,
                              false, &pad1);
        double w2 = gemm_case(types[ti], DV_BLAS_COL_MAJOR, DV_BLAS_N, DV_BLAS_T, 21, 13, 17, 3,
                              true, &pad2);
        ok(w1 >= 0 && w2 >= 0 && fmax(w1, w2) <= tolerance(types[ti]) && pad1 && pad2,
           "strided-batched gemm %s (4 matrices; 3 with one A for all): %.2e, %.2e",
           type_name(types[ti]), w1, w2);
    }
}

/* y = alpha op(A) x + beta y, against the reference. */
static double gemv_case(dv_blas_type t, dv_blas_layout l, dv_blas_op op, int64_t incx,
                        int64_t incy)
{
    const int64_t m = 33, n = 27, ld = (l == DV_BLAS_ROW_MAJOR ? n : m) + 2;
    int64_t xn = op == DV_BLAS_N ? n : m, yn = op == DV_BLAS_N ? m : n;
    int64_t na = (l == DV_BLAS_ROW_MAJOR ? m : n) * ld;
    int64_t nx = (xn - 1) * llabs(incx) + 1, ny = (yn - 1) * llabs(incy) + 1;
    unsigned es = dv_blas_type_size(t);
    void *ha = malloc((size_t)na * es), *hx = malloc((size_t)nx * es), *hy = malloc((size_t)ny * es),
         *out = malloc((size_t)ny * es);
    for (int64_t e = 0; e < na; e++)
        put(t, ha, e, rnd());
    for (int64_t e = 0; e < nx; e++)
        put(t, hx, e, rnd());
    for (int64_t e = 0; e < ny; e++)
        put(t, hy, e, rnd());
    double alpha = 0.75, beta = 2.0, worst = -1;
    dv_ref ra = upload(ha, (uint64_t)na * es, 0, "A"), rx = upload(hx, (uint64_t)nx * es, 1, "x"),
           ry = upload(hy, (uint64_t)ny * es, 0, "y");
    int rc = dv_blas_gemv(B, 2, t, l, op, m, n, alpha, dv_blas_mat(ra, 0, ld),
                          dv_blas_vec(rx, 0, incx), beta, dv_blas_vec(ry, 0, incy));
    if (rc == DV_OK && dv_copy_dtoh(A, out, ry, 0, (uint64_t)ny * es, 1) == DV_OK) {
        worst = 0;
        for (int64_t i = 0; i < yn; i++) {
            double acc = 0, mag = 0;
            for (int64_t p = 0; p < xn; p++) {
                double a = get(t, ha, op == DV_BLAS_N ? at(l, i, p, ld) : at(l, p, i, ld));
                double x = get(t, hx, incx > 0 ? p * incx : (xn - 1 - p) * -incx);
                acc += a * x;
                mag += fabs(a * x);
            }
            int64_t ye = incy > 0 ? i * incy : (yn - 1 - i) * -incy;
            double want = alpha * acc + beta * get(t, hy, ye);
            double err = fabs(get(t, out, ye) - want) / (fabs(alpha) * mag + fabs(beta * get(t, hy, ye)));
            worst = err > worst ? err : worst;
        }
    } else {
        diag("gemv: %s", dv_last_error()->message);
    }
    dv_ref_release(ra), dv_ref_release(rx), dv_ref_release(ry);
    free(ha), free(hx), free(hy), free(out);
    return worst;
}

static void test_vectors(void)
{
    for (int ti = 0; ti < 2; ti++) {
        dv_blas_type t = ti ? DV_BLAS_F64 : DV_BLAS_F32;
        double worst = 0;
        bool all = true;
        for (int l = 0; l < 2; l++)
            for (int op = 0; op < 2; op++) {
                double w = gemv_case(t, (dv_blas_layout)l, (dv_blas_op)op, 2, -1);
                double w2 = gemv_case(t, (dv_blas_layout)l, (dv_blas_op)op, 1, 3);
                all &= w >= 0 && w2 >= 0;
                worst = fmax(worst, fmax(w, w2));
            }
        ok(all && worst <= tolerance(t),
           "gemv %s, both layouts, N and T, increments 2/-1 and 1/3: %.2e", type_name(t), worst);

        /* x empty (n of 0 with N, m of 0 with T): y stays as it is, as
         * BLAS's GEMV returns at once, whatever beta. */
        {
            unsigned es0 = dv_blas_type_size(t);
            unsigned char hy0[3 * 8], back[3 * 8];
            for (int e = 0; e < 3; e++)
                put(t, hy0, e, 1.0 + e);
            dv_ref ra0 = upload(hy0, sizeof hy0, 0, "A"), ry0 = upload(hy0, 3 * es0, 0, "y");
            int r1 = dv_blas_gemv(B, 2, t, DV_BLAS_COL_MAJOR, DV_BLAS_N, 3, 0, 1.0,
                                  dv_blas_mat(ra0, 0, 3), dv_blas_vec(ra0, 0, 1), 2.0,
                                  dv_blas_vec(ry0, 0, 1));
            int r2 = dv_blas_gemv(B, 2, t, DV_BLAS_ROW_MAJOR, DV_BLAS_T, 0, 3, 1.0,
                                  dv_blas_mat(ra0, 0, 3), dv_blas_vec(ra0, 0, 1), 0.0,
                                  dv_blas_vec(ry0, 0, -1));
            bool same = dv_copy_dtoh(A, back, ry0, 0, 3 * es0, 2) == DV_OK &&
                        memcmp(back, hy0, 3 * es0) == 0;
            ok(r1 == DV_OK && r2 == DV_OK && same,
               "gemv %s with x empty (N with n 0, T with m 0; beta 2 and 0): y left as it is "
               "(%s, %s)",
               type_name(t), dv_err_name(r1), dv_err_name(r2));
            dv_ref_release(ra0), dv_ref_release(ry0);
        }

        /* axpy and dot, strided; the result at an offset of its block. */
        const int64_t n = 1000;
        unsigned es = dv_blas_type_size(t);
        void *hx = malloc((size_t)(3 * n) * es), *hy = malloc((size_t)n * es),
             *out = malloc((size_t)n * es);
        for (int64_t e = 0; e < 3 * n; e++)
            put(t, hx, e, rnd());
        for (int64_t e = 0; e < n; e++)
            put(t, hy, e, rnd());
        dv_ref rx = upload(hx, (uint64_t)(3 * n) * es, 0, "x"),
               ry = upload(hy, (uint64_t)n * es, 1, "y"), rr;
        dv_alloc(A, 64, 0, "result", &rr);
        dv_memset(A, rr, 0, 0xFF, 64, 0);
        double dot = 0, mag = 0;
        for (int64_t i = 0; i < n; i++) {
            dot += get(t, hx, 3 * i) * get(t, hy, i);
            mag += fabs(get(t, hx, 3 * i) * get(t, hy, i));
        }
        is_status(dv_blas_dot(B, 2, t, n, dv_blas_vec(rx, 0, 3), dv_blas_vec(ry, 0, 1), rr, 16),
                  DV_OK, "dot %s of 1000 elements (x every third)", type_name(t));
        unsigned char res[64];
        dv_copy_dtoh(A, res, rr, 0, 64, 1);
        double got = get(t, res + 16, 0);
        bool around = true;
        for (int i = 0; i < 64; i++)
            if ((i < 16 || i >= 16 + (int)es) && res[i] != 0xFF)
                around = false;
        ok(fabs(got - dot) <= tolerance(t) * mag * 4 && around,
           "... %.6g against %.6g, written at its offset and nowhere else", got, dot);
        is_status(dv_blas_axpy(B, 2, t, n, -0.5, dv_blas_vec(rx, 0, 3), dv_blas_vec(ry, 0, 1)),
                  DV_OK, "axpy %s: y = -0.5 x + y", type_name(t));
        dv_copy_dtoh(A, out, ry, 0, (uint64_t)n * es, 0);
        double worst_axpy = 0;
        for (int64_t i = 0; i < n; i++) {
            double want = -0.5 * get(t, hx, 3 * i) + get(t, hy, i);
            double err = fabs(get(t, out, i) - want) /
                         (0.5 * fabs(get(t, hx, 3 * i)) + fabs(get(t, hy, i)) + 1e-30);
            worst_axpy = fmax(worst_axpy, err);
        }
        ok(worst_axpy <= tolerance(t), "... matches: %.2e", worst_axpy);
        dv_ref_release(rx), dv_ref_release(ry), dv_ref_release(rr);
        free(hx), free(hy), free(out);
    }
}

/* ------------------------------------------------------------------------
 * Mistakes: refused before anything is posted
 * ------------------------------------------------------------------------ */

static dv_ref big, small4, outb, released;

typedef struct mistake {
    const char *what;
    int want;
    int (*call)(void);
    const char *says; /* in the message, where it matters */
} mistake;

static dv_blas_matrix M(dv_ref r, uint64_t off, int64_t ld)
{
    return dv_blas_mat(r, off, ld);
}
#define F32 DV_BLAS_F32
#define ROW DV_BLAS_ROW_MAJOR
#define COL DV_BLAS_COL_MAJOR
#define N_  DV_BLAS_N
#define T_  DV_BLAS_T

/* big: 64 KiB; small4: 4 bytes; outb: 4 KiB (the output); released. */
static int m_c_4_bytes(void)
{
    return dv_blas_gemm(B, 0, F32, ROW, N_, N_, 32, 32, 32, 1, M(big, 0, 32), M(big, 4096, 32), 0,
                        M(small4, 0, 32));
}
static int m_a_short(void)
{
    return dv_blas_gemm(B, 0, F32, ROW, N_, N_, 32, 32, 600, 1, M(big, 0, 600), M(big, 0, 32), 0,
                        M(outb, 0, 32));
}
static int m_b_short(void)
{
    return dv_blas_gemm(B, 0, F32, COL, N_, T_, 4, 4, 4, 1, M(big, 0, 4), M(small4, 0, 4), 0,
                        M(outb, 0, 4));
}
static int m_c_offset(void)
{
    return dv_blas_gemm(B, 0, F32, ROW, N_, N_, 16, 16, 4, 1, M(big, 0, 4), M(big, 0, 16), 0,
                        M(outb, 3076, 16));
}
static int m_lda_row(void)
{
    return dv_blas_gemm(B, 0, F32, ROW, N_, N_, 8, 8, 8, 1, M(big, 0, 7), M(big, 0, 8), 0,
                        M(outb, 0, 8));
}
static int m_ldb_row_t(void)
{
    return dv_blas_gemm(B, 0, F32, ROW, N_, T_, 8, 9, 8, 1, M(big, 0, 8), M(big, 0, 7), 0,
                        M(outb, 0, 9));
}
static int m_ldc_col(void)
{
    return dv_blas_gemm(B, 0, F32, COL, N_, N_, 8, 8, 8, 1, M(big, 0, 8), M(big, 0, 8), 0,
                        M(outb, 0, 7));
}
static int m_lda_zero(void)
{
    return dv_blas_gemm(B, 0, F32, COL, N_, N_, 8, 8, 8, 1, M(big, 0, 0), M(big, 0, 8), 0,
                        M(outb, 0, 8));
}
static int m_misaligned(void)
{
    return dv_blas_gemm(B, 0, F32, ROW, N_, N_, 4, 4, 4, 1, M(big, 2, 4), M(big, 0, 4), 0,
                        M(outb, 0, 4));
}
static int m_misaligned_f16(void)
{
    return dv_blas_gemm(B, 0, DV_BLAS_F16, ROW, N_, N_, 4, 4, 4, 1, M(big, 0, 4), M(big, 0, 4), 0,
                        M(outb, 1, 4));
}
static int m_negative_m(void)
{
    return dv_blas_gemm(B, 0, F32, ROW, N_, N_, -1, 4, 4, 1, M(big, 0, 4), M(big, 0, 4), 0,
                        M(outb, 0, 4));
}
static int m_huge_k(void)
{
    return dv_blas_gemm(B, 0, F32, ROW, N_, N_, 4, 4, (int64_t)INT_MAX + 1, 1,
                        M(big, 0, (int64_t)INT_MAX + 1), M(big, 0, 4), 0, M(outb, 0, 4));
}
static int m_bad_type(void)
{
    return dv_blas_gemm(B, 0, (dv_blas_type)9, ROW, N_, N_, 4, 4, 4, 1, M(big, 0, 4), M(big, 0, 4),
                        0, M(outb, 0, 4));
}
static int m_bad_op(void)
{
    return dv_blas_gemm(B, 0, F32, ROW, (dv_blas_op)2, N_, 4, 4, 4, 1, M(big, 0, 4), M(big, 0, 4),
                        0, M(outb, 0, 4));
}
static int m_c_overlaps_a(void)
{
    return dv_blas_gemm(B, 0, F32, ROW, N_, N_, 8, 8, 8, 1, M(outb, 0, 8), M(big, 0, 8), 0,
                        M(outb, 128, 8));
}
static int m_batch_zero(void)
{
    return dv_blas_gemm_strided_batched(B, 0, F32, ROW, N_, N_, 4, 4, 4, 1,
                                        (dv_blas_matrix){big, 0, 4, 16},
                                        (dv_blas_matrix){big, 0, 4, 16}, 0,
                                        (dv_blas_matrix){outb, 0, 4, 16}, 0);
}
static int m_c_stride_overlaps(void)
{
    return dv_blas_gemm_strided_batched(B, 0, F32, ROW, N_, N_, 4, 4, 4, 1,
                                        (dv_blas_matrix){big, 0, 4, 16},
                                        (dv_blas_matrix){big, 0, 4, 16}, 0,
                                        (dv_blas_matrix){outb, 0, 4, 15}, 3);
}
static int m_batch_past_a(void)
{
    return dv_blas_gemm_strided_batched(B, 0, F32, ROW, N_, N_, 4, 4, 4, 1,
                                        (dv_blas_matrix){big, 0, 4, 8192},
                                        (dv_blas_matrix){big, 0, 4, 16}, 0,
                                        (dv_blas_matrix){outb, 0, 4, 16}, 3);
}
static int m_batch_past_c(void)
{
    return dv_blas_gemm_strided_batched(B, 0, F32, ROW, N_, N_, 16, 16, 4, 1,
                                        (dv_blas_matrix){big, 0, 4, 64},
                                        (dv_blas_matrix){big, 0, 16, 64}, 0,
                                        (dv_blas_matrix){outb, 0, 16, 256}, 5);
}
static int m_negative_stride(void)
{
    return dv_blas_gemm_strided_batched(B, 0, F32, ROW, N_, N_, 4, 4, 4, 1,
                                        (dv_blas_matrix){big, 0, 4, -16},
                                        (dv_blas_matrix){big, 0, 4, 16}, 0,
                                        (dv_blas_matrix){outb, 0, 4, 16}, 2);
}
static int m_gemv_x_short(void)
{
    return dv_blas_gemv(B, 0, F32, ROW, N_, 4, 3000, 1, M(big, 0, 3000),
                        dv_blas_vec(big, 60000, 2), 0, dv_blas_vec(outb, 0, 1));
}
static int m_gemv_y_short(void)
{
    return dv_blas_gemv(B, 0, F32, COL, T_, 8, 2000, 1, M(big, 0, 8), dv_blas_vec(big, 0, 1), 0,
                        dv_blas_vec(outb, 0, 1));
}
static int m_gemv_inc_zero(void)
{
    return dv_blas_gemv(B, 0, F32, ROW, N_, 4, 4, 1, M(big, 0, 4), dv_blas_vec(big, 0, 0), 0,
                        dv_blas_vec(outb, 0, 1));
}
static int m_gemv_f16(void)
{
    return dv_blas_gemv(B, 0, DV_BLAS_F16, ROW, N_, 4, 4, 1, M(big, 0, 4), dv_blas_vec(big, 0, 1),
                        0, dv_blas_vec(outb, 0, 1));
}
static int m_axpy_y_short(void)
{
    return dv_blas_axpy(B, 0, F32, 2000, 1, dv_blas_vec(big, 0, 1), dv_blas_vec(outb, 0, 1));
}
static int m_axpy_negative_n(void)
{
    return dv_blas_axpy(B, 0, F32, -5, 1, dv_blas_vec(big, 0, 1), dv_blas_vec(outb, 0, 1));
}
static int m_dot_result_past_end(void)
{
    return dv_blas_dot(B, 0, DV_BLAS_F64, 4, dv_blas_vec(big, 0, 1), dv_blas_vec(big, 64, 1), outb,
                       4096);
}
static int m_released(void)
{
    return dv_blas_gemm(B, 0, F32, ROW, N_, N_, 4, 4, 4, 1, M(released, 0, 4), M(big, 0, 4), 0,
                        M(outb, 0, 4));
}
static int m_null_blas(void)
{
    return dv_blas_gemm(NULL, 0, F32, ROW, N_, N_, 4, 4, 4, 1, M(big, 0, 4), M(big, 0, 4), 0,
                        M(outb, 0, 4));
}
static int m_null_ref(void)
{
    return dv_blas_gemm(B, 0, F32, ROW, N_, N_, 4, 4, 4, 1, M(DV_REF_NULL, 0, 4), M(big, 0, 4), 0,
                        M(outb, 0, 4));
}
/* Nothing to do (m or n 0), checked all the same. */
static int m_empty_released_c(void)
{
    return dv_blas_gemm(B, 0, F32, ROW, N_, N_, 0, 4, 4, 1, M(big, 0, 4), M(big, 0, 4), 0,
                        M(released, 0, 4));
}
static int m_empty_bad_stream(void)
{
    return dv_blas_gemm(B, 60, F32, ROW, N_, N_, 4, 0, 4, 1, M(big, 0, 4), M(big, 0, 4), 0,
                        M(outb, 0, 4));
}
static int m_empty_axpy_released(void)
{
    return dv_blas_axpy(B, 0, F32, 0, 1, dv_blas_vec(big, 0, 1), dv_blas_vec(released, 0, 1));
}
static int m_bad_stream(void)
{
    return dv_blas_gemm(B, 60, F32, ROW, N_, N_, 4, 4, 4, 1, M(big, 0, 4), M(big, 0, 4), 0,
                        M(outb, 0, 4));
}

static void test_mistakes(void)
{
    static const mistake table[] = {
        {"32 x 32 SGEMM into a 4-byte C", DV_EOUT_OF_BOUNDS, m_c_4_bytes},
        {"A (32 x 600) past its block", DV_EOUT_OF_BOUNDS, m_a_short},
        {"B (4 x 4) in a 4-byte block", DV_EOUT_OF_BOUNDS, m_b_short},
        {"C at an offset near its block's end", DV_EOUT_OF_BOUNDS, m_c_offset},
        {"lda under k (row-major)", DV_EINVAL, m_lda_row},
        {"ldb under k (row-major, B transposed)", DV_EINVAL, m_ldb_row_t},
        {"ldc under m (column-major)", DV_EINVAL, m_ldc_col},
        {"lda 0", DV_EINVAL, m_lda_zero},
        {"A at an offset that is not a multiple of 4 (F32)", DV_EINVAL, m_misaligned},
        {"C at an odd offset (F16)", DV_EINVAL, m_misaligned_f16},
        {"m negative", DV_EINVAL, m_negative_m},
        {"k past 2^31 - 1", DV_EINVAL, m_huge_k},
        {"an unknown type", DV_EINVAL, m_bad_type},
        {"an unknown op", DV_EINVAL, m_bad_op},
        {"C overlapping A in one block", DV_EINVAL, m_c_overlaps_a},
        {"batch 0", DV_EINVAL, m_batch_zero},
        {"C's matrices overlapping (stride under one matrix)", DV_EINVAL, m_c_stride_overlaps},
        {"A's stride carrying the batch past its block", DV_EOUT_OF_BOUNDS, m_batch_past_a},
        {"C's batch past its block", DV_EOUT_OF_BOUNDS, m_batch_past_c},
        {"a negative stride", DV_EINVAL, m_negative_stride},
        {"gemv: x (increment 2) past its block", DV_EOUT_OF_BOUNDS, m_gemv_x_short},
        {"gemv: y past its block", DV_EOUT_OF_BOUNDS, m_gemv_y_short},
        {"gemv: increment 0", DV_EINVAL, m_gemv_inc_zero},
        {"gemv in F16 (not taken)", DV_EINVAL, m_gemv_f16},
        {"axpy: y past its block", DV_EOUT_OF_BOUNDS, m_axpy_y_short},
        {"axpy: n negative", DV_EINVAL, m_axpy_negative_n},
        {"dot: the result past its block", DV_EOUT_OF_BOUNDS, m_dot_result_past_end},
        {"a released handle", DV_ESTALE, m_released},
        {"a NULL dv_blas", DV_EINVAL, m_null_blas},
        {"DV_REF_NULL", DV_EINVAL, m_null_ref},
        {"a stream the actor does not have", DV_EINVAL, m_bad_stream, "blas_gemm: unknown stream"},
        {"gemm with m 0 into a released C", DV_ESTALE, m_empty_released_c},
        {"gemm with n 0 on a stream the actor does not have", DV_EINVAL, m_empty_bad_stream},
        {"axpy with n 0 into a released y", DV_ESTALE, m_empty_axpy_released},
    };
    unsigned char pattern[4096], now[4096];
    for (unsigned i = 0; i < sizeof(pattern); i++)
        pattern[i] = (unsigned char)(i * 7 + 1);
    dv_actor_stats before, after;
    dv_copy_htod(A, outb, 0, pattern, sizeof(pattern), 0);
    dv_sync(A, 0);
    dv_actor_stats_get(A, &before);
    unsigned right = 0, n = sizeof(table) / sizeof(table[0]);
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
    diag("e.g. %s", (m_c_4_bytes(), dv_last_error()->message));
    dv_actor_stats_get(A, &after);
    dv_copy_dtoh(A, now, outb, 0, sizeof(now), 1);
    is_int(right, n, "%u mistakes each refused with its code and a detail", n);
    is_u64(after.tasks, before.tasks, "... none of them ran a task");
    ok(memcmp(now, pattern, sizeof(now)) == 0, "... the output block is untouched");
    ok(n >= 20, "the table has %u mistakes", n);
}

/* _async: calls posted back to back, each returning once enqueued; a
 * refusal completes its future with the error. */
static void test_async(void)
{
    enum { CALLS = 6, D = 48 };
    static float ha[D * D], hb[D * D], out[CALLS][D * D];
    for (int e = 0; e < D * D; e++) {
        ha[e] = (float)rnd();
        hb[e] = (float)rnd();
    }
    dv_ref ra = upload(ha, sizeof(ha), 0, "A"), rb = upload(hb, sizeof(hb), 1, "B"), rc[CALLS];
    dv_future f[CALLS];
    int posted = 0;
    for (int i = 0; i < CALLS; i++) {
        dv_alloc(A, sizeof(ha), 2, "C", &rc[i]);
        dv_future_init(&f[i], 0);
        /* C_i = (i + 1) A B, on streams 2 and 1 in turn */
        posted += dv_blas_gemm_async(B, (dv_stream)(1 + i % 2), DV_BLAS_F32, DV_BLAS_ROW_MAJOR,
                                     DV_BLAS_N, DV_BLAS_N, D, D, D, i + 1.0,
                                     dv_blas_mat(ra, 0, D), dv_blas_mat(rb, 0, D), 0,
                                     dv_blas_mat(rc[i], 0, D), &f[i]) == DV_OK;
    }
    int done = 0;
    for (int i = 0; i < CALLS; i++)
        done += dv_future_wait(&f[i]) == DV_OK;
    double worst = 0;
    for (int i = 0; i < CALLS; i++) {
        dv_copy_dtoh(A, out[i], rc[i], 0, sizeof(ha), 0);
        for (int r = 0; r < D; r++)
            for (int c = 0; c < D; c++) {
                double acc = 0, mag = 0;
                for (int p = 0; p < D; p++) {
                    acc += (double)ha[r * D + p] * hb[p * D + c];
                    mag += fabs((double)ha[r * D + p] * hb[p * D + c]);
                }
                worst = fmax(worst, fabs(out[i][r * D + c] - (i + 1) * acc) / ((i + 1) * mag));
            }
        dv_ref_release(rc[i]);
    }
    ok(posted == CALLS && done == CALLS && worst <= tolerance(DV_BLAS_F32),
       "%d gemm_async posted back to back on two streams, then waited: all right (%.2e)", CALLS,
       worst);
    dv_future g;
    dv_future_init(&g, 0);
    int rc1 = dv_blas_gemm_async(B, 2, DV_BLAS_F32, DV_BLAS_ROW_MAJOR, DV_BLAS_N, DV_BLAS_N, D, D,
                                 D, 1, dv_blas_mat(ra, 0, D), dv_blas_mat(rb, 0, D), 0,
                                 dv_blas_mat(small4, 0, D), &g);
    ok(rc1 == DV_EOUT_OF_BOUNDS && dv_future_done(&g) && dv_future_wait(&g) == DV_EOUT_OF_BOUNDS,
       "a refused gemm_async answers DV_EOUT_OF_BOUNDS and completes its future with it");
    dv_future_init(&g, 0);
    ok(dv_blas_dot_async(B, 0, DV_BLAS_F32, 0, dv_blas_vec(ra, 0, 1), dv_blas_vec(rb, 0, 1), rb,
                         0, &g) == DV_OK &&
           dv_future_wait(&g) == DV_OK,
       "dot_async of 0 elements: done, its future complete");
    is_status(dv_blas_axpy_async(B, 0, DV_BLAS_F32, 4, 1, dv_blas_vec(ra, 0, 1),
                                 dv_blas_vec(rb, 0, 1), NULL),
              DV_EINVAL, "an _async call without a future: DV_EINVAL");
    dv_ref_release(ra), dv_ref_release(rb);
}

/* After a context rebuild the library's state of the old one is gone:
 * the next call makes it again and is right. */
static void test_rebuild(void)
{
    is_status(dv_actor_reset(A), DV_OK, "the actor's context rebuilt (dv_actor_reset)");
    bool pad_ok = false;
    double w = gemm_case(DV_BLAS_F32, DV_BLAS_ROW_MAJOR, DV_BLAS_N, DV_BLAS_N, 40, 30, 20, 1,
                         false, &pad_ok);
    ok(w >= 0 && w <= tolerance(DV_BLAS_F32) && pad_ok, "gemm after the rebuild is right: %.2e",
       w);
    w = gemm_case(DV_BLAS_F16, DV_BLAS_COL_MAJOR, DV_BLAS_T, DV_BLAS_T, 40, 30, 20, 2, false,
                  &pad_ok);
    ok(w >= 0 && w <= tolerance(DV_BLAS_F16) && pad_ok,
       "strided-batched gemm F16 after the rebuild: %.2e", w);
}

/* Inside a task: the library's _async form cannot wait to be ordered
 * there, and its destroy cannot wait for the actor. */
typedef struct in_task_probe {
    dv_ref x, y;
    int async_rc, future_rc;
    int destroy_status, create_rc;
    dv_blas *made;
} in_task_probe;

static int probe_task(const dv_task_ctx *ctx, void *user)
{
    (void)ctx;
    in_task_probe *p = user;
    dv_future f;
    dv_future_init(&f, 0);
    p->async_rc = dv_blas_axpy_async(B, 0, DV_BLAS_F32, 16, 1.0, (dv_blas_vector){p->x, 0, 1},
                                     (dv_blas_vector){p->y, 0, 1}, &f);
    p->future_rc = dv_future_done(&f) ? f.status : 1;
    dv_error_clear();
    dv_blas_destroy(B);
    p->destroy_status = dv_last_error()->status;
    p->made = (dv_blas *)p; /* a dv_blas_create refused there leaves NULL */
    p->create_rc = dv_blas_create(A, &p->made);
    return DV_OK;
}

static void test_in_task(void)
{
    in_task_probe p = {0};
    dv_alloc(A, 64, 0, "x", &p.x);
    dv_alloc(A, 64, 0, "y", &p.y);
    dv_memset(A, p.x, 0, 0, 64, 0);
    dv_memset(A, p.y, 0, 0, 64, 0);
    is_status(dv_task(A, probe_task, &p, 1, NULL, 0), DV_OK, "a task calling the BLAS actor");
    ok(p.async_rc == DV_EDEADLK && p.future_rc == DV_EDEADLK,
       "inside it, blas_axpy_async answers DV_EDEADLK and completes its future so (%s, %s)",
       dv_err_name(p.async_rc), dv_err_name(p.future_rc));
    is_status(p.destroy_status, DV_EDEADLK, "dv_blas_destroy there does nothing, and says why");
    ok(p.create_rc == DV_EDEADLK && p.made == NULL,
       "dv_blas_create there answers DV_EDEADLK, making nothing (%s)", dv_err_name(p.create_rc));
    is_status(dv_blas_axpy(B, 0, DV_BLAS_F32, 16, 1.0, (dv_blas_vector){p.x, 0, 1},
                           (dv_blas_vector){p.y, 0, 1}),
              DV_OK, "the BLAS actor still works after it");
    dv_ref_release(p.x);
    dv_ref_release(p.y);
}

int main(void)
{
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.backend = BLAS_ON_CUDA ? DV_BACKEND_CUDA : DV_BACKEND_SIM;
    cfg.streams = 3;
    cfg.sim_delay_max_us = 50;
    cfg.sim_seed = 9;
    int rc = dv_actor_create(&cfg, &A);
    if (BLAS_ON_CUDA && rc == DV_ENODEVICE)
        skip_all("%s", dv_last_error()->message);
    if (rc != DV_OK)
        bail_out("no actor: %s", dv_last_error()->message);
    rc = dv_blas_create(A, &B);
    /* Without the library (cuBLAS; on the sim the host's, which
     * tools/ensure-deps.sh installs): nothing to test, said so -- unless
     * DV_REQUIRE_LIBS is set (CI), where a missing library fails. */
    if (rc == DV_ENOTSUP && getenv("DV_REQUIRE_LIBS") == NULL)
        skip_all("%s", dv_last_error()->message);
    plan(49);
    is_status(rc, DV_OK, "the BLAS library actor on %s: %s", dv_actor_backend_name(A),
              rc == DV_OK ? dv_blas_library(B) : dv_last_error()->message);
    if (rc != DV_OK)
        return tap_done();
    test_gemm();
    test_batched();
    test_vectors();

    dv_alloc(A, 65536, 0, "big", &big);
    dv_alloc(A, 4, 0, "small4", &small4);
    dv_alloc(A, 4096, 0, "out", &outb);
    dv_alloc(A, 64, 0, "released", &released);
    dv_memset(A, big, 0, 0, 65536, 0);
    dv_ref_release(released);
    test_mistakes();
    test_async();
    dv_ref_release(big), dv_ref_release(small4), dv_ref_release(outb);

    test_in_task();
    test_rebuild();
    dv_blas *none = (dv_blas *)&none;
    ok(dv_blas_create(NULL, &none) == DV_EINVAL && none == NULL,
       "dv_blas_create with no actor: DV_EINVAL, *out NULL");
    if (!BLAS_ON_CUDA) {
        /* A library that opens but is no CBLAS: named, with what it lacks. */
        setenv("DV_CBLAS_PATH", "libc.so.6", 1);
        dv_blas *g = NULL;
        rc = dv_blas_create(A, &g);
        diag("DV_CBLAS_PATH=libc.so.6: %s", dv_last_error()->message);
        ok(rc == DV_ENOTSUP && g == NULL &&
               strstr(dv_last_error()->message, "libc.so.6 lacks cblas_sgemm") != NULL,
           "a library path that opens no CBLAS: DV_ENOTSUP naming it and what it lacks");
        if (g != NULL)
            dv_blas_destroy(g);
        unsetenv("DV_CBLAS_PATH");
    } else {
        skip("DV_CBLAS_PATH is the simulated device's");
    }
    /* A call with nothing to do, after a shutdown: answered as a posted
     * one is. */
    dv_ref keep;
    dv_alloc(A, 256, 0, "kept", &keep);
    dv_actor_shutdown(A);
    rc = dv_blas_gemm(B, 0, DV_BLAS_F32, DV_BLAS_ROW_MAJOR, DV_BLAS_N, DV_BLAS_N, 0, 4, 4, 1,
                      dv_blas_mat(keep, 0, 4), dv_blas_mat(keep, 0, 4), 0, dv_blas_mat(keep, 0, 4));
    is_status(rc, DV_ESHUTDOWN, "gemm with m 0 after the actor's shutdown: DV_ESHUTDOWN");
    dv_ref_release(keep);
    dv_blas_destroy(B);
    dv_actor_destroy(A);
    return tap_done();
}
