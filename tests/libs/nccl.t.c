/*
 * Collectives between actors (devactor_nccl.h).  On the sim: three
 * simulated devices, one actor each.  Every collective and reduction
 * checked against the host's arithmetic, from one thread per rank and
 * from one thread driving every rank; in place; inputs written on other
 * streams than the collective's and outputs read on a third, with no
 * synchronisation of the caller's; send/recv in groups; a table of
 * mistakes each refused before anything is posted (outputs untouched, no
 * task run); a rank that never posts (every other rank answers
 * DV_ETIMEDOUT naming it, nothing written, the communicator usable after);
 * ranks whose calls disagree; a communicator joined by id from two
 * threads; a rank's actor lost while the others wait for it, and lost
 * while its stream is short of the collective; a rebuilt context
 * (DV_ESTALE).  nccl_cuda.t runs what one host's GPUs allow with NCCL.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devactor.h"
#include "devactor_nccl.h"
#include "devactor_sim.h"
#include "devactor_testing.h"
#include "tap.h"

#ifndef NCCL_ON_CUDA
#define NCCL_ON_CUDA 0
#endif

#define MAXR    4
#define N       1000          /* elements of most calls */
#define BIGN    (256u * 1024) /* one larger all-reduce */
#define SHORT   300000000ull  /* a short timeout, ns */
#define STREAMS 4

static dv_actor *A[MAXR];
static int R; /* ranks */
static dv_nccl_comm *C;

#define MUST(call)                                                                                 \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != DV_OK)                                                                          \
            bail_out("set-up: %s: %s", #call, dv_last_error()->message);                           \
    } while (0)

static dv_ref block(int r, uint64_t bytes)
{
    dv_ref ref = DV_REF_NULL;
    MUST(dv_alloc(A[r], bytes, 0, "nccl", &ref));
    return ref;
}

static void put(int r, dv_ref ref, uint64_t off, const void *src, uint64_t bytes, dv_stream s)
{
    MUST(dv_copy_htod(A[r], ref, off, src, bytes, s));
}

static void get(int r, dv_ref ref, uint64_t off, void *dst, uint64_t bytes, dv_stream s)
{
    MUST(dv_copy_dtoh(A[r], dst, ref, off, bytes, s));
}

static int32_t val(int r, uint64_t e)
{
    return (int32_t)((e * 7 + (uint64_t)r * 13) % 101) - 50;
}

/* ------------------------------------------------------------------------
 * One thread per rank
 * ------------------------------------------------------------------------ */

typedef struct rank_job {
    int r;
    dv_nccl_op op;
    dv_ref send, recv;
    int rc;
} rank_job;

static void *all_reduce_rank(void *arg)
{
    rank_job *j = arg;
    /* Written on stream 1, reduced on stream 2, read on stream 3 (by the
     * main thread): only the handles' fences order them. */
    int32_t in[N];
    for (uint64_t e = 0; e < N; e++)
        in[e] = val(j->r, e);
    put(j->r, j->send, 0, in, sizeof(in), 1);
    j->rc = dv_nccl_all_reduce(C, j->r, 2, dv_nccl_at(j->send, 0), dv_nccl_at(j->recv, 0), N,
                               DV_NCCL_I32, j->op, NULL);
    return NULL;
}

static int64_t expect(dv_nccl_op op, uint64_t e)
{
    int64_t acc = val(0, e);
    for (int r = 1; r < R; r++) {
        int64_t v = val(r, e);
        acc = op == DV_NCCL_PROD  ? acc * v
              : op == DV_NCCL_MAX ? (v > acc ? v : acc)
              : op == DV_NCCL_MIN ? (v < acc ? v : acc)
                                  : acc + v;
    }
    return op == DV_NCCL_AVG ? acc / R : acc;
}

static void test_threads(void)
{
    static const dv_nccl_op ops[] = {DV_NCCL_SUM, DV_NCCL_PROD, DV_NCCL_MAX, DV_NCCL_MIN,
                                     DV_NCCL_AVG};
    dv_ref send[MAXR], recv[MAXR];
    for (int r = 0; r < R; r++) {
        send[r] = block(r, N * 4);
        recv[r] = block(r, N * 4);
    }
    for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
        pthread_t t[MAXR];
        rank_job j[MAXR];
        for (int r = 0; r < R; r++) {
            j[r] = (rank_job){r, ops[o], send[r], recv[r], -1};
            pthread_create(&t[r], NULL, all_reduce_rank, &j[r]);
        }
        bool all_ok = true;
        for (int r = 0; r < R; r++) {
            pthread_join(t[r], NULL);
            all_ok &= j[r].rc == DV_OK;
        }
        int bad = 0;
        for (int r = 0; r < R; r++) {
            int32_t out[N];
            get(r, recv[r], 0, out, sizeof(out), 3);
            for (uint64_t e = 0; e < N; e++)
                bad += out[e] != (int32_t)expect(ops[o], e);
        }
        ok(all_ok && bad == 0, "all-reduce, op %d, one thread per rank: %d wrong elements",
           (int)ops[o], bad);
    }
    for (int r = 0; r < R; r++) {
        dv_ref_release(send[r]);
        dv_ref_release(recv[r]);
    }
}

/* ------------------------------------------------------------------------
 * One thread driving every rank with futures
 * ------------------------------------------------------------------------ */

static bool wait_all(dv_future *f, int n, int want)
{
    bool good = true;
    for (int r = 0; r < n; r++)
        good &= dv_future_wait(&f[r]) == want;
    return good;
}

static void test_types(void)
{
    /* Every type: sum of small integers, exact in each. */
    static const dv_nccl_type types[] = {DV_NCCL_I8,  DV_NCCL_U8,  DV_NCCL_I32, DV_NCCL_U32,
                                         DV_NCCL_I64, DV_NCCL_U64, DV_NCCL_F16, DV_NCCL_F32,
                                         DV_NCCL_F64, DV_NCCL_BF16};
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        dv_nccl_type ty = types[t];
        unsigned es = dv_nccl_type_size(ty);
        dv_ref send[MAXR], recv[MAXR];
        dv_future f[MAXR];
        for (int r = 0; r < R; r++) {
            send[r] = block(r, N * es);
            recv[r] = block(r, N * es);
            unsigned char buf[N * 8];
            for (uint64_t e = 0; e < N; e++) {
                int v = (int)((e + (uint64_t)r) % 20);
                switch (ty) {
                case DV_NCCL_I8:
                case DV_NCCL_U8:
                    buf[e] = (unsigned char)v;
                    break;
                case DV_NCCL_I32:
                case DV_NCCL_U32: {
                    int32_t x = v;
                    memcpy(buf + e * 4, &x, 4);
                    break;
                }
                case DV_NCCL_I64:
                case DV_NCCL_U64: {
                    int64_t x = v;
                    memcpy(buf + e * 8, &x, 8);
                    break;
                }
                case DV_NCCL_F32: {
                    float x = (float)v;
                    memcpy(buf + e * 4, &x, 4);
                    break;
                }
                case DV_NCCL_F64: {
                    double x = v;
                    memcpy(buf + e * 8, &x, 8);
                    break;
                }
                default: { /* F16, BF16: small integers are exact in both */
                    uint16_t h = ty == DV_NCCL_F16 ? (uint16_t)(v == 0 ? 0 : 0) : 0;
                    float x = (float)v;
                    uint32_t b;
                    memcpy(&b, &x, 4);
                    if (ty == DV_NCCL_BF16) {
                        h = (uint16_t)(b >> 16);
                    } else if (v != 0) { /* binary16 of a small integer */
                        int exp = 0;
                        while ((1 << (exp + 1)) <= v)
                            exp++;
                        h = (uint16_t)(((exp + 15) << 10) | ((v << (10 - exp)) & 0x3FF));
                    }
                    memcpy(buf + e * 2, &h, 2);
                    break;
                }
                }
            }
            put(r, send[r], 0, buf, N * es, 0);
        }
        for (int r = 0; r < R; r++) {
            dv_future_init(&f[r], 0);
            (void)dv_nccl_all_reduce(C, r, 0, dv_nccl_at(send[r], 0), dv_nccl_at(recv[r], 0), N, ty,
                                     DV_NCCL_SUM, &f[r]);
        }
        bool good = wait_all(f, R, DV_OK);
        int bad = 0;
        for (int r = 0; r < R; r++) {
            unsigned char buf[N * 8];
            get(r, recv[r], 0, buf, N * es, 0);
            for (uint64_t e = 0; e < N; e++) {
                double want = 0, got;
                for (int q = 0; q < R; q++)
                    want += (double)((e + (uint64_t)q) % 20);
                switch (ty) {
                case DV_NCCL_I8:
                    got = (int8_t)buf[e];
                    break;
                case DV_NCCL_U8:
                    got = buf[e];
                    break;
                case DV_NCCL_I32:
                case DV_NCCL_U32: {
                    int32_t x;
                    memcpy(&x, buf + e * 4, 4);
                    got = x;
                    break;
                }
                case DV_NCCL_I64:
                case DV_NCCL_U64: {
                    int64_t x;
                    memcpy(&x, buf + e * 8, 8);
                    got = (double)x;
                    break;
                }
                case DV_NCCL_F32: {
                    float x;
                    memcpy(&x, buf + e * 4, 4);
                    got = x;
                    break;
                }
                case DV_NCCL_F64:
                    memcpy(&got, buf + e * 8, 8);
                    break;
                default: {
                    uint16_t h;
                    memcpy(&h, buf + e * 2, 2);
                    if (ty == DV_NCCL_BF16) {
                        uint32_t b = (uint32_t)h << 16;
                        float x;
                        memcpy(&x, &b, 4);
                        got = x;
                    } else {
                        int exp = (h >> 10) & 0x1F;
                        got = exp == 0 ? 0
                                       : (double)(1024 + (h & 0x3FF)) * (double)(1 << exp) /
                                             (1024.0 * 32768.0);
                    }
                    break;
                }
                }
                bad += got != want;
            }
            dv_ref_release(send[r]);
            dv_ref_release(recv[r]);
        }
        ok(good && bad == 0, "all-reduce of type %d (%u-byte), one thread, futures: %d wrong",
           (int)ty, es, bad);
    }
}

/* Wrong elements of an all-gather of val() into each rank's buf. */
static int gathered_wrong(const dv_ref *buf)
{
    int bad = 0;
    for (int r = 0; r < R; r++) {
        int32_t out[N * MAXR];
        get(r, buf[r], 0, out, (uint64_t)N * 4 * (uint64_t)R, 3);
        for (int q = 0; q < R; q++)
            for (uint64_t e = 0; e < N; e++)
                bad += out[(uint64_t)q * N + e] != val(q, e);
    }
    return bad;
}

/* Wrong elements of a reduce-scatter (sum) of val(): each rank's part at
 * the start of buf, or (in place) at its own part. */
static int scattered_wrong(const dv_ref *buf, bool at_part)
{
    int bad = 0;
    for (int r = 0; r < R; r++) {
        int32_t out[N];
        get(r, buf[r], at_part ? (uint64_t)r * N * 4 : 0, out, sizeof(out), 3);
        for (uint64_t e = 0; e < N; e++) {
            int64_t want = 0;
            for (int q = 0; q < R; q++)
                want += val(q, (uint64_t)r * N + e);
            bad += out[e] != (int32_t)want;
        }
    }
    return bad;
}

static void test_collectives(void)
{
    dv_ref a[MAXR], b[MAXR];
    dv_future f[MAXR];
    uint64_t big = (uint64_t)N * 4 * (uint64_t)R;
    for (int r = 0; r < R; r++) {
        /* Room for the in-place all-reduce's element after its range. */
        a[r] = block(r, big + 4);
        b[r] = block(r, big + 4);
        int32_t in[N * MAXR];
        for (uint64_t e = 0; e < (uint64_t)N * (uint64_t)R; e++)
            in[e] = val(r, e);
        put(r, a[r], 0, in, big, 1);
        MUST(dv_memset(A[r], b[r], 0, 0xEE, big, 1));
    }
    int root = R - 1;
    /* Broadcast from root: non-roots give no send. */
    for (int r = 0; r < R; r++) {
        dv_future_init(&f[r], 0);
        (void)dv_nccl_broadcast(C, r, 2, dv_nccl_at(r == root ? a[r] : DV_REF_NULL, 0),
                                dv_nccl_at(b[r], 0), N, DV_NCCL_I32, root, &f[r]);
    }
    bool good = wait_all(f, R, DV_OK);
    int bad = 0;
    for (int r = 0; r < R; r++) {
        int32_t out[N];
        get(r, b[r], 0, out, sizeof(out), 3);
        for (uint64_t e = 0; e < N; e++)
            bad += out[e] != val(root, e);
    }
    ok(good && bad == 0, "broadcast from rank %d: %d wrong", root, bad);

    /* Reduce to rank 0: only its recv changes. */
    for (int r = 0; r < R; r++)
        MUST(dv_memset(A[r], b[r], 0, 0xEE, big, 1));
    for (int r = 0; r < R; r++) {
        dv_future_init(&f[r], 0);
        (void)dv_nccl_reduce(C, r, 2, dv_nccl_at(a[r], 0),
                             dv_nccl_at(r == 0 ? b[r] : DV_REF_NULL, 0), N, DV_NCCL_I32,
                             DV_NCCL_MAX, 0, &f[r]);
    }
    good = wait_all(f, R, DV_OK);
    bad = 0;
    for (int r = 0; r < R; r++) {
        int32_t out[N];
        get(r, b[r], 0, out, sizeof(out), 3);
        for (uint64_t e = 0; e < N; e++)
            bad +=
                r == 0 ? out[e] != (int32_t)expect(DV_NCCL_MAX, e) : out[e] != (int32_t)0xEEEEEEEE;
    }
    ok(good && bad == 0, "reduce (max) to rank 0, other ranks' buffers untouched: %d wrong", bad);

    /* All-gather: rank q's N elements at q * N. */
    for (int r = 0; r < R; r++) {
        dv_future_init(&f[r], 0);
        (void)dv_nccl_all_gather(C, r, 2, dv_nccl_at(a[r], 0), dv_nccl_at(b[r], 0), N, DV_NCCL_I32,
                                 &f[r]);
    }
    good = wait_all(f, R, DV_OK);
    bad = gathered_wrong(b);
    ok(good && bad == 0, "all-gather: %d wrong", bad);

    /* Reduce-scatter: rank r gets the sum of every rank's part r. */
    for (int r = 0; r < R; r++) {
        dv_future_init(&f[r], 0);
        (void)dv_nccl_reduce_scatter(C, r, 2, dv_nccl_at(a[r], 0), dv_nccl_at(b[r], 0), N,
                                     DV_NCCL_I32, DV_NCCL_SUM, &f[r]);
    }
    good = wait_all(f, R, DV_OK);
    bad = scattered_wrong(b, false);
    ok(good && bad == 0, "reduce-scatter: %d wrong", bad);

    /* In place: all-reduce on a, all-gather with send inside recv,
     * reduce-scatter with recv inside send. */
    for (int r = 0; r < R; r++) {
        int32_t in[N * MAXR + 1];
        for (uint64_t e = 0; e <= (uint64_t)N * (uint64_t)R; e++)
            in[e] = val(r, e);
        put(r, a[r], 0, in, big + 4, 1);
        dv_future_init(&f[r], 0);
        (void)dv_nccl_all_reduce(C, r, 2, dv_nccl_at(a[r], 4), dv_nccl_at(a[r], 4), N - 1,
                                 DV_NCCL_I32, DV_NCCL_SUM, &f[r]);
    }
    good = wait_all(f, R, DV_OK);
    bad = 0;
    for (int r = 0; r < R; r++) {
        int32_t out[N + 1];
        get(r, a[r], 0, out, sizeof(out), 3);
        bad += out[0] != val(r, 0) || out[N] != val(r, N);
        for (uint64_t e = 1; e < N; e++)
            bad += out[e] != (int32_t)expect(DV_NCCL_SUM, e);
    }
    ok(good && bad == 0, "all-reduce in place, the bytes around it untouched: %d wrong", bad);

    for (int r = 0; r < R; r++) {
        int32_t in[N];
        for (uint64_t e = 0; e < N; e++)
            in[e] = val(r, e);
        put(r, b[r], (uint64_t)r * N * 4, in, sizeof(in), 1);
        dv_future_init(&f[r], 0);
        (void)dv_nccl_all_gather(C, r, 2, dv_nccl_at(b[r], (uint64_t)r * N * 4),
                                 dv_nccl_at(b[r], 0), N, DV_NCCL_I32, &f[r]);
    }
    good = wait_all(f, R, DV_OK);
    bad = gathered_wrong(b);
    ok(good && bad == 0, "all-gather in place: %d wrong", bad);

    for (int r = 0; r < R; r++) {
        int32_t in[N * MAXR];
        for (uint64_t e = 0; e < (uint64_t)N * (uint64_t)R; e++)
            in[e] = val(r, e);
        put(r, a[r], 0, in, big, 1);
        dv_future_init(&f[r], 0);
        (void)dv_nccl_reduce_scatter(C, r, 2, dv_nccl_at(a[r], 0),
                                     dv_nccl_at(a[r], (uint64_t)r * N * 4), N, DV_NCCL_I32,
                                     DV_NCCL_SUM, &f[r]);
    }
    good = wait_all(f, R, DV_OK);
    bad = scattered_wrong(a, true);
    ok(good && bad == 0, "reduce-scatter in place: %d wrong", bad);

    /* A larger all-reduce, floats. */
    dv_ref big_s[MAXR];
    float *host = malloc(BIGN * sizeof(float));
    for (int r = 0; r < R; r++) {
        big_s[r] = block(r, BIGN * 4);
        for (uint64_t e = 0; e < BIGN; e++)
            host[e] = (float)((e % 1000) + (uint64_t)r);
        put(r, big_s[r], 0, host, BIGN * 4, 0);
        dv_future_init(&f[r], 0);
        (void)dv_nccl_all_reduce(C, r, 1, dv_nccl_at(big_s[r], 0), dv_nccl_at(big_s[r], 0), BIGN,
                                 DV_NCCL_F32, DV_NCCL_SUM, &f[r]);
    }
    good = wait_all(f, R, DV_OK);
    bad = 0;
    for (int r = 0; r < R; r++) {
        get(r, big_s[r], 0, host, BIGN * 4, 0);
        for (uint64_t e = 0; e < BIGN; e++)
            bad += host[e] != (float)((e % 1000) * (uint64_t)R + (uint64_t)(R * (R - 1) / 2));
        dv_ref_release(big_s[r]);
    }
    free(host);
    ok(good && bad == 0, "all-reduce of %u floats in place, stream 1: %d wrong", BIGN, bad);
    for (int r = 0; r < R; r++) {
        dv_ref_release(a[r]);
        dv_ref_release(b[r]);
    }
}

/* A ring of sends in one group, driven from this thread. */
static void test_group(void)
{
    if (R < 2) {
        for (int i = 0; i < 3; i++)
            skip("send/recv needs two ranks");
        return;
    }
    dv_ref s[MAXR], d[MAXR];
    for (int r = 0; r < R; r++) {
        s[r] = block(r, N * 8);
        d[r] = block(r, N * 8);
        int64_t in[N];
        for (uint64_t e = 0; e < N; e++)
            in[e] = (int64_t)(e * 1000 + (uint64_t)r);
        put(r, s[r], 0, in, sizeof(in), 1);
    }
    int rc = dv_nccl_group_start();
    for (int r = 0; r < R && rc == DV_OK; r++) {
        rc = dv_nccl_send(C, r, 2, dv_nccl_at(s[r], 0), N, DV_NCCL_I64, (r + 1) % R, NULL);
        if (rc == DV_OK)
            rc = dv_nccl_recv(C, r, 2, dv_nccl_at(d[r], 0), N, DV_NCCL_I64, (r + R - 1) % R, NULL);
    }
    int end = dv_nccl_group_end();
    int bad = 0;
    for (int r = 0; r < R; r++) {
        int64_t out[N];
        get(r, d[r], 0, out, sizeof(out), 3);
        for (uint64_t e = 0; e < N; e++)
            bad += out[e] != (int64_t)(e * 1000 + (uint64_t)((r + R - 1) % R));
    }
    ok(rc == DV_OK && end == DV_OK && bad == 0,
       "a ring of sends and receives in one group from one thread: %d wrong (%s)", bad,
       end != DV_OK ? dv_last_error()->message : "ok");

    /* Ranks 0 and 1 alone, the others idle: a send and its receive from
     * two threads' worth of futures, then an all-reduce of every rank
     * still lines up (sends and receives take no step of the others). */
    dv_future f[2];
    MUST(dv_memset(A[1], d[1], 0, 0, N * 8, 3));
    dv_future_init(&f[0], 0);
    dv_future_init(&f[1], 0);
    (void)dv_nccl_recv(C, 1, 2, dv_nccl_at(d[1], 8), N - 1, DV_NCCL_I64, 0, &f[1]);
    (void)dv_nccl_send(C, 0, 2, dv_nccl_at(s[0], 0), N - 1, DV_NCCL_I64, 1, &f[0]);
    bool sent = wait_all(f, 2, DV_OK);
    int64_t got[N];
    get(1, d[1], 0, got, sizeof(got), 3);
    bad = got[0] != 0;
    for (uint64_t e = 1; e < N; e++)
        bad += got[e] != (int64_t)((e - 1) * 1000);
    dv_future g[MAXR];
    for (int r = 0; r < R; r++) {
        dv_future_init(&g[r], 0);
        (void)dv_nccl_all_reduce(C, r, 0, dv_nccl_at(s[r], 0), dv_nccl_at(d[r], 0), 1, DV_NCCL_I64,
                                 DV_NCCL_SUM, &g[r]);
    }
    bool after = wait_all(g, R, DV_OK);
    ok(sent && bad == 0 && after,
       "a send from rank 0 to rank 1 with rank %d idle (%d wrong), then an all-reduce of all",
       R - 1, bad);

    /* A receive of another count than its send: the communicator is
     * aborted, naming them, the receive's buffer not written.  (NCCL does
     * not pair them up front: on a GPU the send would wait for ever.) */
    if (NCCL_ON_CUDA) {
        skip("a mismatched pair is caught on the sim alone");
        for (int r = 0; r < R; r++) {
            dv_ref_release(s[r]);
            dv_ref_release(d[r]);
        }
        return;
    }
    dv_nccl_comm *two = NULL;
    MUST(dv_nccl_comm_create(A, 2, 0, &two));
    MUST(dv_memset(A[1], d[1], 0, 0x55, N * 8, 2));
    rc = dv_nccl_group_start();
    (void)dv_nccl_send(two, 0, 2, dv_nccl_at(s[0], 0), N, DV_NCCL_I64, 1, NULL);
    (void)dv_nccl_recv(two, 1, 2, dv_nccl_at(d[1], 0), N / 2, DV_NCCL_I64, 0, NULL);
    end = dv_nccl_group_end();
    int st = dv_nccl_comm_status(two);
    get(1, d[1], 0, got, sizeof(got), 2);
    bad = 0;
    for (uint64_t e = 0; e < N; e++)
        bad += got[e] != 0x5555555555555555ll;
    ok(end == DV_OK && st == DV_EINVAL && strstr(dv_last_error()->message, "no matching") &&
           bad == 0,
       "a receive of another count than its send: the communicator says so (%s), the "
       "receive's buffer untouched",
       dv_last_error()->message);
    dv_nccl_comm_destroy(two);
    for (int r = 0; r < R; r++) {
        dv_ref_release(s[r]);
        dv_ref_release(d[r]);
    }
}

/* ------------------------------------------------------------------------
 * Mistakes, refused before anything is posted
 * ------------------------------------------------------------------------ */

/* The calls made from a task's function (the actor's own thread). */
struct in_task {
    dv_nccl_comm *c;
    int all_reduce, group_end, create;
};

static int call_in_task(const dv_task_ctx *ctx, void *user)
{
    struct in_task *it = user;
    (void)ctx;
    dv_ref r = DV_REF_NULL;
    it->all_reduce = dv_nccl_all_reduce(it->c, 0, 0, dv_nccl_at(r, 0), dv_nccl_at(r, 0), 1,
                                        DV_NCCL_I32, DV_NCCL_SUM, NULL);
    (void)dv_nccl_group_start();
    (void)dv_nccl_all_reduce(it->c, 0, 0, dv_nccl_at(r, 0), dv_nccl_at(r, 0), 1, DV_NCCL_I32,
                             DV_NCCL_SUM, NULL);
    it->group_end = dv_nccl_group_end();
    dv_nccl_comm *c = NULL;
    it->create = dv_nccl_comm_create(A, R, 0, &c);
    return DV_OK;
}

static uint64_t now_ns(void);

static void test_misuse(void)
{
    dv_ref s = block(0, N * 4), d = block(0, N * 4);
    MUST(dv_memset(A[0], d, 0, 0x5A, N * 4, 0));
    dv_ref gone = block(0, 64);
    dv_ref_release(gone);
    dv_nccl_buf S = dv_nccl_at(s, 0), D = dv_nccl_at(d, 0);
    /* The rows call rank 0 alone: each refused collective still spends
     * rank 0's step (the other ranks' calls of that step would fail), so
     * they use a communicator of their own, left out of step after. */
    dv_nccl_comm *M = NULL;
    MUST(dv_nccl_comm_create(A, R, SHORT, &M));
    struct {
        int rc, want;
        const char *what;
    } rows[] = {
        {dv_nccl_all_reduce(NULL, 0, 0, S, D, N, DV_NCCL_I32, DV_NCCL_SUM, NULL), DV_EINVAL,
         "NULL communicator"},
        {dv_nccl_all_reduce(M, R, 0, S, D, N, DV_NCCL_I32, DV_NCCL_SUM, NULL), DV_EINVAL,
         "a rank past the last"},
        {dv_nccl_all_reduce(M, -1, 0, S, D, N, DV_NCCL_I32, DV_NCCL_SUM, NULL), DV_EINVAL,
         "rank -1"},
        {dv_nccl_all_reduce(M, 0, 0, S, D, N, (dv_nccl_type)42, DV_NCCL_SUM, NULL), DV_EINVAL,
         "an unknown type"},
        {dv_nccl_all_reduce(M, 0, 0, S, D, N, DV_NCCL_I32, (dv_nccl_op)9, NULL), DV_EINVAL,
         "an unknown reduction"},
        {dv_nccl_broadcast(M, 0, 0, S, D, N, DV_NCCL_I32, R, NULL), DV_EINVAL,
         "a root past the last rank"},
        {dv_nccl_send(M, 0, 0, S, N, DV_NCCL_I32, 0, NULL), DV_EINVAL, "a send to itself"},
        {dv_nccl_recv(M, 0, 0, D, N, DV_NCCL_I32, R + 3, NULL), DV_EINVAL, "an unknown peer"},
        {dv_nccl_all_reduce(M, 0, 0, S, D, N + 1, DV_NCCL_I32, DV_NCCL_SUM, NULL),
         DV_EOUT_OF_BOUNDS, "one element past the blocks"},
        {dv_nccl_all_reduce(M, 0, 0, dv_nccl_at(s, 8), D, N, DV_NCCL_I32, DV_NCCL_SUM, NULL),
         DV_EOUT_OF_BOUNDS, "send starting 8 bytes in"},
        {dv_nccl_all_reduce(M, 0, 0, dv_nccl_at(s, 2), D, 4, DV_NCCL_I32, DV_NCCL_SUM, NULL),
         DV_EINVAL, "an offset that is not a multiple of the element"},
        {dv_nccl_all_reduce(M, 0, 0, S, dv_nccl_at(s, 4), 8, DV_NCCL_I32, DV_NCCL_SUM, NULL),
         DV_EINVAL, "send and recv overlapping, not in place"},
        {dv_nccl_all_reduce(M, 0, 0, dv_nccl_at(gone, 0), D, 4, DV_NCCL_I32, DV_NCCL_SUM, NULL),
         DV_ESTALE, "a released block"},
        {dv_nccl_all_reduce(M, 0, 0, dv_nccl_at(DV_REF_NULL, 0), D, 4, DV_NCCL_I32, DV_NCCL_SUM,
                            NULL),
         DV_EINVAL, "a null handle"},
        {dv_nccl_all_gather(M, 0, 0, S, dv_nccl_at(d, 4), N, DV_NCCL_I32, NULL), DV_EOUT_OF_BOUNDS,
         "all-gather into a recv short of nranks parts"},
        {dv_nccl_group_end(), DV_EINVAL, "group_end without a start"},
        {dv_nccl_comm_create(NULL, 1, 0, NULL), DV_EINVAL, "comm_create of NULL"},
        {dv_nccl_comm_create(A, 0, 0, &(dv_nccl_comm *){NULL}), DV_EINVAL,
         "comm_create of 0 actors"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        is_status(rows[i].rc, rows[i].want, "refused: %s", rows[i].what);
    if (R > 1) {
        dv_ref theirs = block(1, N * 4);
        is_status(dv_nccl_all_reduce(M, 0, 0, dv_nccl_at(theirs, 0), D, N, DV_NCCL_I32, DV_NCCL_SUM,
                                     NULL),
                  DV_EINVAL, "refused: rank 0 given rank 1's block (%s)", dv_last_error()->message);
        dv_ref_release(theirs);
    } else {
        skip("a block of another actor needs two ranks");
    }
    struct in_task it = {.c = M};
    MUST(dv_task(A[0], call_in_task, &it, 0, NULL, 0));
    is_status(it.all_reduce, DV_EDEADLK, "inside a task: all_reduce answers DV_EDEADLK");
    is_status(it.group_end, DV_EDEADLK,
              "inside a task: a group's call, and so its group_end, answer DV_EDEADLK");
    is_status(it.create, DV_EDEADLK, "inside a task: comm_create answers DV_EDEADLK");
    dv_actor *twice[2] = {A[0], A[0]};
    dv_nccl_comm *c2 = NULL;
    is_status(dv_nccl_comm_create(twice, 2, 0, &c2), DV_EINVAL, "comm_create with one actor twice");
    ok(c2 == NULL, "... and *out is NULL");

    /* A future in a group; then the group posts nothing it refused. */
    dv_future f;
    dv_future_init(&f, 0);
    MUST(dv_nccl_group_start());
    is_status(dv_nccl_all_reduce(M, 0, 0, S, D, N, DV_NCCL_I32, DV_NCCL_SUM, &f), DV_EINVAL,
              "a future in a group");
    is_status(dv_future_wait(&f), DV_EINVAL, "... completes the future with the refusal");
    is_status(dv_nccl_group_end(), DV_EINVAL, "... and its group_end answers it (%s)",
              dv_last_error()->message);
    if (R > 1) {
        /* The other ranks' parts are fine, rank 0's refused: nothing is posted, and
         * the refusal comes at once, not after rank 1 waited for rank 0. */
        dv_ref s1[MAXR], d1[MAXR];
        uint64_t t0 = now_ns();
        MUST(dv_nccl_group_start());
        for (int r = 1; r < R; r++) {
            s1[r] = block(r, N * 4);
            d1[r] = block(r, N * 4);
            (void)dv_nccl_all_reduce(C, r, 0, dv_nccl_at(s1[r], 0), dv_nccl_at(d1[r], 0), N,
                                     DV_NCCL_I32, DV_NCCL_SUM, NULL);
        }
        (void)dv_nccl_all_reduce(C, 0, 0, S, D, N + 1, DV_NCCL_I32, DV_NCCL_SUM, NULL);
        int end = dv_nccl_group_end();
        ok(end == DV_EOUT_OF_BOUNDS && now_ns() - t0 < SHORT,
           "a group with one refused call posts nothing and answers the refusal at once (%s)",
           dv_err_name(end));
        for (int r = 1; r < R; r++) {
            dv_ref_release(s1[r]);
            dv_ref_release(d1[r]);
        }
    } else {
        skip("needs two ranks");
    }
    dv_future_init(&f, 0);
    is_status(dv_nccl_all_reduce(M, 0, 0, S, D, N + 1, DV_NCCL_I32, DV_NCCL_SUM, &f),
              DV_EOUT_OF_BOUNDS, "an _async call refused");
    is_status(dv_future_wait(&f), DV_EOUT_OF_BOUNDS, "... completes its future");
    /* That refusal spent rank 0's step: another rank's call of it fails
     * at once. */
    bool spent = true;
    if (R > 1) {
        dv_ref so = block(1, N * 4), dd = block(1, N * 4);
        dv_future fo;
        dv_future_init(&fo, 0);
        (void)dv_nccl_all_reduce(M, 1, 0, dv_nccl_at(so, 0), dv_nccl_at(dd, 0), N, DV_NCCL_I32,
                                 DV_NCCL_SUM, &fo);
        spent = dv_future_wait(&fo) == DV_EINVAL &&
                strstr(fo.detail.message, "refused before it was posted") != NULL;
        dv_ref_release(so);
        dv_ref_release(dd);
    }
    ok(spent, "... and spent rank 0's step: rank 1's call of it answers DV_EINVAL at once");
    dv_nccl_comm_destroy(M);
    uint32_t out[N];
    get(0, d, 0, out, sizeof(out), 0);
    int bad = 0;
    for (int e = 0; e < N; e++)
        bad += out[e] != 0x5A5A5A5Au;
    is_int(bad, 0, "the output is untouched");
    is_status(dv_nccl_all_reduce(C, 0, 0, S, D, 0, DV_NCCL_I32, DV_NCCL_SUM, NULL), DV_OK,
              "count 0: nothing to do");
    /* Buffers whose allocations are still pending: waited for, as a
     * handle's first use is. */
    dv_ref pend[MAXR], src[MAXR];
    dv_future fa[MAXR], fc[MAXR];
    for (int r = 0; r < R; r++) {
        src[r] = block(r, 64);
        MUST(dv_memset(A[r], src[r], 0, 1, 64, 0));
        dv_future_init(&fa[r], 0);
        MUST(dv_alloc_async(A[r], 64, 1, "pending", &pend[r], &fa[r]));
        dv_future_init(&fc[r], 0);
        (void)dv_nccl_all_reduce(C, r, 2, dv_nccl_at(src[r], 0), dv_nccl_at(pend[r], 0), 16,
                                 DV_NCCL_U32, DV_NCCL_SUM, &fc[r]);
    }
    bool pend_ok = wait_all(fc, R, DV_OK) && wait_all(fa, R, DV_OK);
    if (!pend_ok)
        diag("pending: %s / %s", fc[0].detail.message, fc[R - 1].detail.message);
    uint32_t pv = 0;
    get(R - 1, pend[R - 1], 60, &pv, 4, 2);
    ok(pend_ok && pv == 0x01010101u * (uint32_t)R,
       "an all-reduce into blocks still pending at the call (%#x)", pv);
    for (int r = 0; r < R; r++) {
        dv_ref_release(pend[r]);
        dv_ref_release(src[r]);
    }
    dv_ref_release(s);
    dv_ref_release(d);
}

/* ------------------------------------------------------------------------
 * A rank that never posts; ranks that disagree
 * ------------------------------------------------------------------------ */

static void test_timeout(void)
{
    if (R < 2) {
        for (int i = 0; i < 9; i++)
            skip("needs two ranks");
        return;
    }
    dv_nccl_comm *c = NULL;
    MUST(dv_nccl_comm_create(A, R, SHORT, &c));
    dv_ref s[MAXR], d[MAXR];
    dv_future f[MAXR];
    for (int r = 0; r < R; r++) {
        s[r] = block(r, N * 4);
        d[r] = block(r, N * 4);
        MUST(dv_memset(A[r], s[r], 0, 1, N * 4, 0));
        MUST(dv_memset(A[r], d[r], 0, 0x77, N * 4, 0));
    }
    int late = R - 1;
    for (int r = 0; r < late; r++) {
        dv_future_init(&f[r], 0);
        (void)dv_nccl_all_reduce(c, r, 0, dv_nccl_at(s[r], 0), dv_nccl_at(d[r], 0), N, DV_NCCL_I32,
                                 DV_NCCL_SUM, &f[r]);
    }
    bool timed_out = true;
    char msg[256] = "";
    for (int r = 0; r < late; r++) {
        timed_out &= dv_future_wait(&f[r]) == DV_ETIMEDOUT;
        snprintf(msg, sizeof(msg), "%s", f[r].detail.message);
    }
    char want[32];
    snprintf(want, sizeof(want), "rank %d", late);
    ok(timed_out && strstr(msg, want) != NULL,
       "ranks that came answer DV_ETIMEDOUT, naming the one that did not (%s)", msg);
    dv_future_init(&f[late], 0);
    (void)dv_nccl_all_reduce(c, late, 0, dv_nccl_at(s[late], 0), dv_nccl_at(d[late], 0), N,
                             DV_NCCL_I32, DV_NCCL_SUM, &f[late]);
    is_status(dv_future_wait(&f[late]), DV_ETIMEDOUT, "the late rank's call fails the same way");
    int bad = 0;
    for (int r = 0; r < R; r++) {
        uint32_t out[N];
        get(r, d[r], 0, out, sizeof(out), 0);
        for (int e = 0; e < N; e++)
            bad += out[e] != 0x77777777u;
    }
    is_int(bad, 0, "nothing was written on any rank");
    for (int r = 0; r < R; r++) {
        dv_future_init(&f[r], 0);
        (void)dv_nccl_all_reduce(c, r, 0, dv_nccl_at(s[r], 0), dv_nccl_at(d[r], 0), N, DV_NCCL_I32,
                                 DV_NCCL_SUM, &f[r]);
    }
    bool good = wait_all(f, R, DV_OK);
    uint32_t out[N];
    get(0, d[0], 0, out, sizeof(out), 0);
    ok(good && out[0] == 0x01010101u * (uint32_t)R && out[N - 1] == 0x01010101u * (uint32_t)R,
       "the communicator is usable after: the next all-reduce is right");

    /* Disagreeing ranks: counts differ. */
    for (int r = 0; r < R; r++) {
        dv_future_init(&f[r], 0);
        (void)dv_nccl_all_reduce(c, r, 0, dv_nccl_at(s[r], 0), dv_nccl_at(d[r], 0),
                                 r == 1 ? N / 2 : N, DV_NCCL_I32, DV_NCCL_SUM, &f[r]);
    }
    bool refused = wait_all(f, R, DV_EINVAL);
    ok(refused && strstr(f[1].detail.message, "rank 1 made") != NULL,
       "ranks whose counts differ: DV_EINVAL on all, naming them (%s)", f[1].detail.message);
    is_status(dv_nccl_comm_status(c), DV_OK, "and the communicator is still usable");

    /* A call refused before it is posted (rank 1 asks for more than its
     * block holds) still spends rank 1's step: the others fail at once,
     * naming the refusal, and the next calls line up again. */
    int refused_rc[MAXR] = {0};
    for (int r = 0; r < R; r++) {
        dv_future_init(&f[r], 0);
        refused_rc[r] = dv_nccl_all_reduce(c, r, 0, dv_nccl_at(s[r], 0), dv_nccl_at(d[r], 0),
                                           r == 1 ? N + 1 : N, DV_NCCL_I32, DV_NCCL_SUM, &f[r]);
    }
    bool others_fail = refused_rc[1] == DV_EOUT_OF_BOUNDS;
    for (int r = 0; r < R; r++)
        if (r != 1)
            others_fail &= dv_future_wait(&f[r]) == DV_EINVAL &&
                           strstr(f[r].detail.message, "refused before it was posted") != NULL;
    ok(others_fail,
       "a call refused before it is posted on rank 1: the others answer DV_EINVAL "
       "(%s), not the timeout",
       f[0].detail.message);
    for (int round = 0; round < 2; round++) {
        for (int r = 0; r < R; r++) {
            dv_future_init(&f[r], 0);
            (void)dv_nccl_all_reduce(c, r, 0, dv_nccl_at(s[r], 0), dv_nccl_at(d[r], 0), N,
                                     DV_NCCL_I32, DV_NCCL_SUM, &f[r]);
        }
        good = wait_all(f, R, DV_OK);
        get(0, d[0], 0, out, sizeof(out), 0);
        good = good && out[0] == 0x01010101u * (uint32_t)R;
        if (!good)
            break;
    }
    ok(good, "and the next two all-reduces are right on every rank");

    /* The same inside a group on this thread: the group posts nothing,
     * and every rank's step is spent. */
    MUST(dv_nccl_group_start());
    for (int r = 0; r < R; r++)
        (void)dv_nccl_all_reduce(c, r, 0, dv_nccl_at(s[r], 0), dv_nccl_at(d[r], 0),
                                 r == 1 ? N + 1 : N, DV_NCCL_I32, DV_NCCL_SUM, NULL);
    int grc = dv_nccl_group_end();
    for (int r = 0; r < R; r++) {
        dv_future_init(&f[r], 0);
        (void)dv_nccl_all_reduce(c, r, 0, dv_nccl_at(s[r], 0), dv_nccl_at(d[r], 0), N, DV_NCCL_I32,
                                 DV_NCCL_SUM, &f[r]);
    }
    good = wait_all(f, R, DV_OK);
    ok(grc == DV_EOUT_OF_BOUNDS && good,
       "a group refused on one rank (%s): the next all-reduce meets and is right",
       dv_err_name(grc));
    for (int r = 0; r < R; r++) {
        dv_ref_release(s[r]);
        dv_ref_release(d[r]);
    }
    dv_nccl_comm_destroy(c);
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* A task that holds its actor for the time its argument points to. */
static int hold_actor(const dv_task_ctx *ctx, void *user)
{
    (void)ctx;
    uint64_t ns = *(const uint64_t *)user;
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    nanosleep(&ts, NULL);
    return DV_OK;
}

/* Creation while one rank's actor is busy past the timeout: the ranks
 * whose actors came give up at the meeting (in NCCL's blocking mode they
 * would otherwise wait inside NCCL for as long as it is busy). */
/* A task that holds its actor until released (10 s at most). */
typedef struct gate_hold {
    atomic_bool started, released;
} gate_hold;

static int hold_until(const dv_task_ctx *ctx, void *user)
{
    (void)ctx;
    gate_hold *g = user;
    atomic_store(&g->started, true);
    for (int i = 0; i < 10000 && !atomic_load(&g->released); i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return DV_OK;
}

static void test_create_busy(void)
{
    if (R < 2) {
        for (int i = 0; i < 3; i++)
            skip("needs two ranks");
        return;
    }
    int late = R - 1;
    gate_hold g;
    atomic_init(&g.started, false);
    atomic_init(&g.released, false);
    dv_future held;
    dv_future_init(&held, 0);
    /* Busy until the creation has answered, however slow the host. */
    MUST(dv_task_async(A[late], hold_until, &g, 0, NULL, 0, &held));
    while (!atomic_load(&g.started))
        sched_yield();
    dv_nccl_comm *c = NULL;
    uint64_t t0 = now_ns();
    int rc = dv_nccl_comm_create(A, R, SHORT, &c);
    uint64_t took = now_ns() - t0;
    atomic_store(&g.released, true);
    char want[32];
    snprintf(want, sizeof(want), "rank %d", late);
    ok(rc == DV_ETIMEDOUT && c == NULL && strstr(dv_last_error()->message, want) != NULL,
       "creation with rank %d's actor busy past the timeout: DV_ETIMEDOUT, naming it (%s)", late,
       dv_last_error()->message);
    is_status(dv_future_wait(&held), DV_OK, "the busy actor's own work finished (after %.2f s)",
              (double)took / 1e9);
    rc = dv_nccl_comm_create(A, R, SHORT, &c);
    ok(rc == DV_OK && c != NULL, "once it is free, creation over the same actors succeeds");
    dv_nccl_comm_destroy(c);
}

/* Threads that each make communicators over the same actors, at once. */
typedef struct creator {
    int n, failed;
    char why[256];
} creator;

static void *create_many(void *arg)
{
    creator *cr = arg;
    for (int i = 0; i < cr->n; i++) {
        dv_nccl_comm *c = NULL;
        if (dv_nccl_comm_create(A, R, SHORT, &c) != DV_OK) {
            if (cr->failed++ == 0)
                snprintf(cr->why, sizeof(cr->why), "%s", dv_last_error()->message);
            continue;
        }
        dv_nccl_comm_destroy(c);
    }
    return NULL;
}

/* Two creations over the same actors at once must not hold one actor
 * each at their meetings, each waiting for its part that is queued
 * behind the other's. */
static void test_create_concurrent(void)
{
    if (R < 2) {
        skip("needs two ranks");
        return;
    }
    creator cr[2] = {{NCCL_ON_CUDA ? 3 : 60, 0, ""}, {NCCL_ON_CUDA ? 3 : 60, 0, ""}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, create_many, &cr[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    ok(cr[0].failed == 0 && cr[1].failed == 0,
       "two threads making %d communicators each over the same actors at once: every one made "
       "(%d and %d failed; %s)",
       cr[0].n, cr[0].failed, cr[1].failed, cr[0].failed ? cr[0].why : cr[1].why);
}

/* A creation begun while another communicator's destroy is under way
 * over the same actors, with one of them busy past the creation's
 * timeout: the destroy's tasks run first there, so the creation waits
 * for the destroy to end before its timeout starts, rather than meeting
 * a rank queued behind it.  (On GPUs NCCL's destroy of one rank can
 * outlast another's by more than a short timeout.) */
static void *destroy_main(void *comm)
{
    dv_nccl_comm_destroy(comm);
    return NULL;
}

static void test_create_after_destroy(void)
{
    if (R < 2) {
        for (int i = 0; i < 2; i++)
            skip("needs two ranks");
        return;
    }
    int late = R - 1;
    dv_nccl_comm *first = NULL;
    MUST(dv_nccl_comm_create(A, R, SHORT, &first));
    dv_actor_stats before, now;
    MUST(dv_actor_stats_get(A[0], &before));
    uint64_t hold = 3 * SHORT;
    dv_future held;
    dv_future_init(&held, 0);
    MUST(dv_task_async(A[late], hold_actor, &hold, 0, NULL, 0, &held));
    pthread_t t;
    pthread_create(&t, NULL, destroy_main, first);
    /* Rank 0's part of the destroy ran: the destroy posted every rank's
     * (in one go) and waits for the busy one's. */
    do {
        MUST(dv_actor_stats_get(A[0], &now));
    } while (now.tasks == before.tasks);
    dv_nccl_comm *c = NULL;
    int rc = dv_nccl_comm_create(A, R, SHORT, &c);
    ok(rc == DV_OK && c != NULL,
       "creation while a destroy over the same actors waits for a busy one: made once the "
       "destroy ended (%s)",
       rc == DV_OK ? "ok" : dv_last_error()->message);
    pthread_join(t, NULL);
    is_status(dv_future_wait(&held), DV_OK, "the busy actor's own work finished");
    dv_nccl_comm_destroy(c);
}

/* The id as text and back. */
static void test_id_text(void)
{
    dv_nccl_id id, back;
    char text[DV_NCCL_ID_HEX], small[16];
    MUST(dv_nccl_id_make(A[0], &id));
    is_status(dv_nccl_id_format(&id, text, sizeof(text)), DV_OK, "an id as text");
    ok(strlen(text) == DV_NCCL_ID_HEX - 1 && strspn(text, "0123456789abcdef") == strlen(text),
       "... %d lowercase hex digits", DV_NCCL_ID_HEX - 1);
    memset(&back, 0, sizeof(back));
    ok(dv_nccl_id_parse(&back, text) == DV_OK && memcmp(&back, &id, sizeof(id)) == 0,
       "and back: the same bytes");
    text[7] = 'g';
    dv_nccl_id before = back;
    ok(dv_nccl_id_parse(&back, text) == DV_EINVAL && memcmp(&back, &before, sizeof(back)) == 0,
       "a character that is not a hex digit: DV_EINVAL, the id unchanged");
    text[7] = '0';
    text[DV_NCCL_ID_HEX - 2] = '\0';
    is_status(dv_nccl_id_parse(&back, text), DV_EINVAL, "one digit short: DV_EINVAL");
    is_status(dv_nccl_id_format(&id, small, sizeof(small)), DV_EINVAL, "a short buffer: DV_EINVAL");
    is_status(dv_nccl_id_parse(NULL, "00"), DV_EINVAL, "NULL id: DV_EINVAL");
}

/* ------------------------------------------------------------------------
 * Joining by id, from two threads
 * ------------------------------------------------------------------------ */

typedef struct join_job {
    const dv_nccl_id *id;
    int first, n;
    dv_nccl_comm *c;
    int rc;
} join_job;

static void *join_main(void *arg)
{
    join_job *j = arg;
    int ranks[MAXR];
    for (int i = 0; i < j->n; i++)
        ranks[i] = j->first + i;
    j->rc = dv_nccl_comm_join(A + j->first, ranks, j->n, R, j->id, 0, &j->c);
    return NULL;
}

static void test_join(void)
{
    if (R < 2 || NCCL_ON_CUDA) {
        for (int i = 0; i < 3; i++)
            skip(R < 2 ? "needs two ranks" : "covered by the sim; here by comm_create");
        return;
    }
    dv_nccl_id id;
    MUST(dv_nccl_id_make(A[0], &id));
    join_job j[2] = {{&id, 0, 1, NULL, -1}, {&id, 1, R - 1, NULL, -1}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, join_main, &j[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    ok(j[0].rc == DV_OK && j[1].rc == DV_OK && dv_nccl_comm_size(j[0].c) == R &&
           dv_nccl_comm_actor(j[0].c, 1) == NULL && dv_nccl_comm_actor(j[1].c, 1) == A[1],
       "two threads join one communicator by id (1 and %d local ranks)", R - 1);
    dv_ref s[MAXR];
    dv_future f[MAXR];
    for (int r = 0; r < R; r++) {
        s[r] = block(r, N * 4);
        MUST(dv_memset(A[r], s[r], 0, 2, N * 4, 0));
        dv_future_init(&f[r], 0);
        (void)dv_nccl_all_reduce(r == 0 ? j[0].c : j[1].c, r, 0, dv_nccl_at(s[r], 0),
                                 dv_nccl_at(s[r], 0), N, DV_NCCL_U32, DV_NCCL_SUM, &f[r]);
    }
    bool good = wait_all(f, R, DV_OK);
    uint32_t out[N];
    get(R - 1, s[R - 1], 0, out, sizeof(out), 0);
    ok(good && out[7] == 0x02020202u * (uint32_t)R, "an all-reduce across the two objects");
    for (int r = 0; r < R; r++)
        dv_ref_release(s[r]);
    dv_nccl_comm_destroy(j[0].c);
    dv_nccl_comm_destroy(j[1].c);

    /* Only one of two ranks joins. */
    dv_nccl_comm *c = NULL;
    int rank0 = 0;
    MUST(dv_nccl_id_make(A[0], &id));
    is_status(dv_nccl_comm_join(A, &rank0, 1, 2, &id, SHORT, &c), DV_ETIMEDOUT,
              "a join whose other rank never comes: DV_ETIMEDOUT (%s)", dv_last_error()->message);
}

/* ------------------------------------------------------------------------
 * Lost and rebuilt actors (the sim: its own devices)
 * ------------------------------------------------------------------------ */

static dv_actor *fresh(dv_actor *first, int device)
{
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    cfg.sim_devices = 2;
    cfg.streams = STREAMS;
    cfg.driver = first != NULL ? dv__actor_driver(first) : NULL;
    cfg.device = device;
    dv_actor *a = NULL;
    MUST(dv_actor_create(&cfg, &a));
    return a;
}

/* Two actors of their own (one driver each, or the second on the first's
 * when shared) and a communicator over them. */
static dv_nccl_comm *fresh_pair(dv_actor **pair, bool shared)
{
    dv_nccl_comm *c = NULL;
    pair[0] = fresh(NULL, 0);
    pair[1] = shared ? fresh(pair[0], 1) : fresh(NULL, 0);
    MUST(dv_nccl_comm_create(pair, 2, 0, &c)); /* 60 s: a loss must end a wait first */
    return c;
}

/* c destroyed, then the actors (the second first: it may use the first's
 * driver). */
static void pair_end(dv_nccl_comm *c, dv_actor **pair)
{
    dv_nccl_comm_destroy(c);
    dv_actor_destroy(pair[1]);
    dv_actor_destroy(pair[0]);
}

/* A rank's actor destroyed before its communicator: the communicator
 * (its watchdog, its calls, its destroy) never reads the freed actor. */
static void test_outlived(void)
{
    if (NCCL_ON_CUDA) {
        for (int i = 0; i < 5; i++)
            skip("two fresh simulated devices");
        return;
    }
    dv_actor *pair[2];
    /* Creation over an actor shut down: refused at once, naming its rank,
     * and the other rank does not wait out the (60 s) timeout. */
    pair[0] = fresh(NULL, 0);
    pair[1] = fresh(NULL, 0);
    MUST(dv_actor_shutdown(pair[1]));
    dv_nccl_comm *c = NULL;
    uint64_t t0 = now_ns();
    int rc = dv_nccl_comm_create(pair, 2, 0, &c);
    double secs = (double)(now_ns() - t0) / 1e9;
    ok(rc == DV_ESHUTDOWN && c == NULL && strstr(dv_last_error()->message, "rank 1") != NULL &&
           secs < 30,
       "creation over an actor shut down: DV_ESHUTDOWN naming rank 1, in %.2f s (%s)", secs,
       dv_last_error()->message);
    pair_end(NULL, pair);
    c = fresh_pair(pair, false);
    MUST(dv_actor_destroy(pair[1]));
    struct timespec pause = {0, 100000000}; /* the watchdog looks meanwhile */
    nanosleep(&pause, NULL);
    is_status(dv_nccl_comm_status(c), DV_ESHUTDOWN,
              "a rank's actor destroyed: the communicator answers DV_ESHUTDOWN (%s)",
              dv_last_error()->message);
    dv_ref s = DV_REF_NULL;
    MUST(dv_alloc(pair[0], N * 4, 0, "s", &s));
    is_status(dv_nccl_all_reduce(c, 0, 0, dv_nccl_at(s, 0), dv_nccl_at(s, 0), N, DV_NCCL_U32,
                                 DV_NCCL_SUM, NULL),
              DV_ESHUTDOWN, "and so does a collective of the other rank, posting nothing");
    dv_ref_release(s);
    dv_nccl_comm_destroy(c);
    is_status(dv_sync(pair[0], 0), DV_OK, "destroyed after it, the other actor still works");
    dv_actor_destroy(pair[0]);

    /* Destroy returns early while a call waits behind a busy actor, and
     * is called again once it is over: it must not join the (new)
     * watchdog of another communicator made meanwhile. */
    pair[0] = fresh(NULL, 0);
    pair[1] = fresh(NULL, 0);
    MUST(dv_nccl_comm_create(pair, 2, 20000000ull, &c));
    dv_ref b = DV_REF_NULL;
    MUST(dv_alloc(pair[0], N * 4, 0, "b", &b));
    uint64_t hold = 300000000ull;
    dv_future held, f;
    dv_future_init(&held, 0);
    dv_future_init(&f, 0);
    MUST(dv_task_async(pair[0], hold_actor, &hold, 0, NULL, 0, &held));
    /* Queued behind the busy actor; rank 1 never comes. */
    (void)dv_nccl_all_reduce(c, 0, 0, dv_nccl_at(b, 0), dv_nccl_at(b, 0), N, DV_NCCL_U32,
                             DV_NCCL_SUM, &f);
    dv_nccl_comm_destroy(c);
    int early = dv_last_error()->status;
    (void)dv_future_wait(&f);
    (void)dv_future_wait(&held);
    dv_nccl_comm *other = NULL;
    MUST(dv_nccl_comm_create(pair, 2, 0, &other));
    dv_nccl_comm_destroy(c); /* again: now it frees c */
    ok(early == DV_ETIMEDOUT && dv_nccl_comm_status(other) == DV_OK,
       "destroy left a communicator allocated (%s), another was made, the first destroyed "
       "again: no hang, the other still usable",
       dv_err_name(early));
    dv_ref_release(b);
    pair_end(other, pair);
}

static void test_lost(void)
{
    if (NCCL_ON_CUDA) {
        for (int i = 0; i < 11; i++)
            skip("faults are injected on the sim");
        return;
    }
    /* Lost while the other rank waits for it at the meeting. */
    dv_actor *pair[2];
    dv_nccl_comm *c = fresh_pair(pair, false);
    dv_actor *x = pair[0], *y = pair[1];
    dv_ref sx = DV_REF_NULL;
    MUST(dv_alloc(x, N * 4, 0, "x", &sx));
    MUST(dv_memset(x, sx, 0, 3, N * 4, 0));
    dv_future f;
    dv_future_init(&f, 0);
    (void)dv_nccl_all_reduce(c, 0, 0, dv_nccl_at(sx, 0), dv_nccl_at(sx, 0), N, DV_NCCL_U32,
                             DV_NCCL_SUM, &f);
    struct timespec pause = {0, 50000000};
    nanosleep(&pause, NULL);
    MUST(dv_sim_poison(y, DV_SIM_POISON_FATAL));
    /* Its actor learns of it at its next use of the device. */
    int lost = dv_sync(y, 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = dv_future_wait(&f);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    ok(lost != DV_OK && rc == DV_EDEVICE_LOST && secs < 10,
       "rank 1's actor lost while rank 0 waits for it: rank 0 answers DV_EDEVICE_LOST (%s; "
       "%.2f s)",
       f.detail.message, secs);
    is_status(dv_nccl_comm_status(c), DV_EDEVICE_LOST, "the communicator says why (%s)",
              dv_last_error()->message);
    is_status(dv_nccl_all_reduce(c, 0, 0, dv_nccl_at(sx, 0), dv_nccl_at(sx, 0), N, DV_NCCL_U32,
                                 DV_NCCL_SUM, NULL),
              DV_EDEVICE_LOST, "a later call answers the same, at once");
    uint32_t v = 0;
    is_status(dv_copy_dtoh(x, &v, sx, 0, 4, 0), DV_OK, "rank 0's actor still works");
    ok(v == 0x03030303u, "and its buffer was not written (%#x)", v);
    dv_ref_release(sx);
    pair_end(c, pair);

    /* A fault on rank 1's stream before its part of the collective: its
     * stream never gets there, while rank 0's already waits there. */
    c = fresh_pair(pair, false);
    x = pair[0];
    y = pair[1];
    dv_ref s[2];
    MUST(dv_alloc(x, N * 4, 0, "x", &s[0]));
    MUST(dv_alloc(y, N * 4, 0, "y", &s[1]));
    MUST(dv_memset(x, s[0], 0, 3, N * 4, 0));
    MUST(dv_memset(y, s[1], 0, 3, N * 4, 0));
    MUST(dv_sync(x, 0));
    MUST(dv_sync(y, 0));
    dv_kernel *spin = NULL, *fault = NULL;
    MUST(dv_kernel_get(y, NULL, 0, "spin", &spin));
    MUST(dv_kernel_get(y, NULL, 0, "illegal_address", &fault));
    dv_arg wait_ns = dv_arg_u64(200000000ull), nowhere = dv_arg_u64(0);
    dv_future k1, k2;
    dv_future_init(&k1, 0);
    dv_future_init(&k2, 0);
    MUST(dv_launch_async(y, spin, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, 0, &wait_ns, 1, &k1));
    MUST(dv_launch_async(y, fault, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, 0, &nowhere, 1, &k2));
    dv_future g[2];
    for (int r = 0; r < 2; r++) {
        dv_future_init(&g[r], 0);
        (void)dv_nccl_all_reduce(c, r, 0, dv_nccl_at(s[r], 0), dv_nccl_at(s[r], 0), N, DV_NCCL_U32,
                                 DV_NCCL_SUM, &g[r]);
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int r0 = dv_future_wait(&g[0]);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    (void)dv_future_wait(&g[1]);
    (void)dv_future_wait(&k1);
    (void)dv_future_wait(&k2);
    secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    v = 0;
    int cp = dv_copy_dtoh(x, &v, s[0], 0, 4, 0);
    ok(secs < 10 && r0 == DV_OK && cp == DV_OK && v == 0x03030303u,
       "rank 1's stream faults short of the collective: rank 0's stream is let go (%.2f s), "
       "its actor unharmed, its buffer unwritten (%#x)",
       secs, v);
    int st = dv_nccl_comm_status(c);
    ok(st == DV_ESTALE && strstr(dv_last_error()->message, "rank 1") != NULL,
       "the communicator is aborted: %s (%s)", dv_err_name(st), dv_last_error()->message);
    dv_ref_release(s[0]);
    dv_ref_release(s[1]);
    pair_end(c, pair);

    /* A rank's actor shut down. */
    c = fresh_pair(pair, false);
    x = pair[0];
    y = pair[1];
    MUST(dv_actor_shutdown(y));
    is_status(dv_nccl_comm_status(c), DV_ESHUTDOWN, "after rank 1's dv_actor_shutdown: %s",
              dv_last_error()->message);
    dv_ref sz = DV_REF_NULL;
    MUST(dv_alloc(x, 64, 0, "x", &sz));
    is_status(dv_nccl_all_reduce(c, 0, 0, dv_nccl_at(sz, 0), dv_nccl_at(sz, 0), 16, DV_NCCL_U32,
                                 DV_NCCL_SUM, NULL),
              DV_ESHUTDOWN, "... and rank 0's call answers the same, at once");
    dv_ref_release(sz);
    pair_end(c, pair);

    /* A rebuilt context: stale. */
    c = fresh_pair(pair, true);
    x = pair[0];
    y = pair[1];
    MUST(dv_actor_reset(y));
    is_status(dv_nccl_comm_status(c), DV_ESTALE, "after rank 1's dv_actor_reset: DV_ESTALE (%s)",
              dv_last_error()->message);
    dv_nccl_comm_destroy(c);
    is_status(dv_nccl_comm_create(pair, 2, 0, &c), DV_OK, "a new communicator over them");
    pair_end(c, pair);
}

int main(void)
{
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.backend = NCCL_ON_CUDA ? DV_BACKEND_CUDA : DV_BACKEND_SIM;
    cfg.streams = STREAMS;
    if (NCCL_ON_CUDA) {
        for (R = 0; R < MAXR; R++) {
            cfg.device = R;
            if (dv_actor_create(&cfg, &A[R]) != DV_OK)
                break;
        }
        if (R == 0)
            skip_all("no CUDA device: %s", dv_last_error()->message);
    } else {
        R = 3;
        cfg.sim_devices = R;
        MUST(dv_actor_create(&cfg, &A[0]));
        for (int r = 1; r < R; r++) {
            cfg.driver = dv__actor_driver(A[0]);
            cfg.device = r;
            MUST(dv_actor_create(&cfg, &A[r]));
        }
    }
    int rc = dv_nccl_comm_create(A, R, 0, &C);
    if (rc == DV_ENOTSUP && NCCL_ON_CUDA)
        skip_all("%s", dv_last_error()->message);
    if (rc != DV_OK)
        bail_out("comm_create: %s", dv_last_error()->message);
    plan(5 + 10 + 8 + 3 + 34 + 9 + 7 + 3 + 1 + 3 + 11 + 5 + 2);
    diag("%d ranks; %s", R, dv_nccl_library(C));
    test_threads();
    test_types();
    test_collectives();
    test_group();
    test_misuse();
    test_timeout();
    test_id_text();
    test_create_busy();
    test_create_concurrent();
    test_create_after_destroy();
    test_join();
    test_lost();
    test_outlived();
    dv_nccl_comm_destroy(C);
    for (int r = R - 1; r >= 0; r--) /* the first owns the driver the others share */
        dv_actor_destroy(A[r]);
    return tap_done();
}
