/*
 * Copies with pageable host memory, staged (on the sim; on cuda with
 * STAGING_ON_CUDA, skipped where no device answers).  The actors here
 * have small chunks (64 KiB) and few of them, so that every copy is cut
 * into many steps and chunks are used again and again.
 *   - sizes from 1 byte to 12 MiB + 13, blocking and _async, to the device
 *     and back, with offsets: every byte right, every copy staged;
 *   - eight threads on a staging of two chunks: posters wait for room
 *     (counted), nothing is lost or wrong;
 *   - the actor is not held up: a copy waiting behind 400 ms of device
 *     work leaves the actor free to answer another stream's memset; with
 *     the staging off (it did not fit the host budget) the same memset
 *     waits for the copy, as the driver makes pageable copies synchronous;
 *   - refusals before anything is enqueued (a stale handle, a range past
 *     the block, or past the bytes asked for though within the block's
 *     usable bytes) read nothing of the caller's memory and leave the
 *     chunks free;
 *   - faults: the context lost while copies wait on the device (blocking
 *     and _async): each answers DV_ECONTEXT_LOST, none hangs, and the next
 *     copies are right; a driver error at a stream memory operation;
 *     the actor destroyed with _async copies in flight;
 *   - inside a task: the blocking form answers DV_EDEADLK, the _async form
 *     runs (or answers DV_EAGAIN when no chunk is free);
 *   - a copy from a pageable buffer after a copy into it on the same
 *     stream sends what the first brought.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "devactor.h"
#include "support/device_time.h"
#include "support/gate.h"
#include "devactor_sim.h"
#include "tap.h"

#ifndef STAGING_ON_CUDA
#define STAGING_ON_CUDA 0
#endif

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)

static dv_kernel *spin;

static dv_actor *make_with(uint64_t staging, uint64_t chunk, uint64_t host_budget, bool check)
{
    dv_actor_config cfg;
    dv_actor *a = NULL;
    dv_actor_config_init(&cfg);
    cfg.backend = STAGING_ON_CUDA ? DV_BACKEND_CUDA : DV_BACKEND_SIM;
    cfg.streams = 3;
    cfg.staging_bytes = staging;
    cfg.staging_chunk_bytes = chunk;
    cfg.host_budget_bytes = host_budget;
    cfg.check_order = check;
    cfg.sim_memory_bytes = 256 * MiB;
    cfg.sim_delay_max_us = 20;
    int rc = dv_actor_create(&cfg, &a);
    if (STAGING_ON_CUDA && rc == DV_ENODEVICE)
        skip_all("%s", dv_last_error()->message);
    if (rc != DV_OK)
        bail_out("no actor: %s", dv_last_error()->message);
    if (dv_kernel_get(a, NULL, 0, "spin", &spin) != DV_OK)
        bail_out("no spin kernel: %s", dv_last_error()->message);
    return a;
}

static dv_actor *make(void)
{
    return make_with(256 * KiB, 64 * KiB, 0, false); /* four chunks of 64 KiB */
}

/* n points that do not apply here. */
static void skip_points(int n, const char *why)
{
    while (n-- > 0)
        skip("%s", why);
}

static dv_actor_stats stats(dv_actor *a)
{
    return stats_of(a);
}

static void hold(dv_actor *a, dv_stream s, uint64_t ns, dv_future *f)
{
    hold_stream(a, spin, s, ns, f);
}

static void pattern(unsigned char *p, uint64_t n, unsigned seed)
{
    for (uint64_t i = 0; i < n; i++)
        p[i] = (unsigned char)((i * 131 + seed * 17) >> 3);
}

/* Round trip of n bytes at offset off of a block, blocking or _async. */
static bool round_trip(dv_actor *a, uint64_t n, uint64_t off, bool async, unsigned seed)
{
    unsigned char *src = malloc(n), *dst = malloc(n);
    dv_ref r;
    bool good = src != NULL && dst != NULL && dv_alloc(a, n + off, 0, "x", &r) == DV_OK;
    if (good) {
        pattern(src, n, seed);
        memset(dst, 0xee, n);
        if (async) {
            dv_future f1, f2;
            dv_future_init(&f1, 0);
            dv_future_init(&f2, 0);
            good = dv_copy_htod_async(a, r, off, src, n, 1, &f1) == DV_OK &&
                   dv_copy_dtoh_async(a, dst, r, off, n, 2, &f2) == DV_OK &&
                   dv_future_wait(&f1) == DV_OK && dv_future_wait(&f2) == DV_OK;
        } else {
            good = dv_copy_htod(a, r, off, src, n, 1) == DV_OK &&
                   dv_copy_dtoh(a, dst, r, off, n, 2) == DV_OK;
        }
        good = good && memcmp(src, dst, n) == 0;
        dv_ref_release(r);
    }
    free(src);
    free(dst);
    return good;
}

static void test_sizes(void)
{
    dv_actor *a = make();
    static const uint64_t sizes[] = {1, 4095, 64 * KiB, 64 * KiB + 1, 256 * KiB,
                                     1 * MiB + 3, 12 * MiB + 13};
    int n = (int)(sizeof(sizes) / sizeof(sizes[0])), good = 0;
    uint64_t copies = 0;
    for (int i = 0; i < n; i++)
        for (int async = 0; async < 2; async++) {
            good += round_trip(a, sizes[i], (uint64_t)i * 8, async, (unsigned)i);
            copies += 2;
        }
    is_int(good, 2 * n, "%d sizes from 1 B to 12 MiB, blocking and _async, there and back: "
                        "every byte right", n);
    dv_actor_stats st = stats(a);
    ok(st.staged_copies == copies && st.direct_copies == 0 && st.staged_bytes > 26 * MiB,
       "every copy staged (%llu of %llu, %llu bytes), none left to the driver",
       (unsigned long long)st.staged_copies, (unsigned long long)copies,
       (unsigned long long)st.staged_bytes);
    ok(st.host_reserved == 256 * KiB + 4 * KiB && st.host_bytes == 0,
       "the staging holds its chunks and their words (%llu bytes reserved)",
       (unsigned long long)st.host_reserved);
    dv_actor_destroy(a);
}

typedef struct thread_arg {
    dv_actor *a;
    int id, good, rounds;
} thread_arg;

static void *copier(void *p)
{
    thread_arg *t = p;
    for (int i = 0; i < t->rounds; i++)
        t->good += round_trip(t->a, 300 * KiB + (uint64_t)t->id * 1000 + (uint64_t)i, 0, i & 1,
                              (unsigned)(t->id * 100 + i));
    return NULL;
}

static void test_backpressure(void)
{
    dv_actor *a = make_with(128 * KiB, 64 * KiB, 0, false); /* two chunks */
    enum { T = 8, ROUNDS = 12 };
    thread_arg args[T];
    pthread_t th[T];
    for (int i = 0; i < T; i++) {
        args[i] = (thread_arg){a, i, 0, ROUNDS};
        pthread_create(&th[i], NULL, copier, &args[i]);
    }
    int good = 0;
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        good += args[i].good;
    }
    is_int(good, T * ROUNDS, "eight threads through two chunks: %d round trips right", good);
    dv_actor_stats st = stats(a);
    ok(st.staging_waits > 0 && st.direct_copies == 0,
       "posters waited for room %llu times; nothing went around the staging",
       (unsigned long long)st.staging_waits);
    dv_actor_destroy(a);
}

/* A copy from the device waits on stream 1 behind a gate (closed until
 * the test opens it); a memset on stream 0 is posted after it.  Is the
 * memset answered while the copy still waits?  Without the staging the
 * actor is inside the driver's copy until the gate opens, so the memset
 * cannot be (its wait gives up after 2 s; then the gate opens). */
static bool memset_overtakes(dv_actor *a)
{
    uint64_t n = 256 * KiB;
    unsigned char *dst = malloc(n);
    dv_ref r, m;
    dv_alloc(a, n, 1, "src", &r);
    dv_alloc(a, 4096, 0, "m", &m);
    dv_memset(a, r, 0, 3, n, 1);
    dv_memset(a, m, 0, 0, 4096, 0);
    gate g;
    if (gate_close(&g, a, 1) != DV_OK)
        bail_out("gate: %s", dv_last_error()->message);
    dv_future c, s;
    dv_future_init(&c, 0);
    dv_future_init(&s, 0);
    dv_copy_dtoh_async(a, dst, r, 0, n, 1, &c);
    dv_memset_async(a, m, 0, 1, 4096, 0, &s);
    bool overtook = dv_future_wait_for(&s, DV_COMPLETE, UINT64_C(2000000000)) == DV_OK &&
                    !dv_future_done(&c);
    gate_open(&g);
    dv_future_wait(&s);
    int rc = dv_future_wait(&c);
    overtook = overtook && rc == DV_OK && dst[0] == 3 && dst[n - 1] == 3;
    dv_ref_release(r);
    dv_ref_release(m);
    free(dst);
    return overtook;
}

static void test_actor_free(void)
{
    dv_actor *a = make();
    ok(memset_overtakes(a), "a staged copy waiting on the device does not hold up the actor: "
                            "another stream's memset is answered first");
    dv_actor_destroy(a);
    /* The control: no room for the staging, the driver copies pageable
     * memory synchronously on the actor's thread. */
    a = make_with(256 * KiB, 64 * KiB, 64 * KiB, false);
    bool over = memset_overtakes(a);
    uint64_t direct = stats(a).direct_copies;
    ok(!over && direct == 1,
       "control, staging off: the same memset waits for the copy (the driver's copy holds the "
       "actor)");
    if (over || direct != 1)
        diag("the memset %s; %llu copies done by the driver", over ? "overtook" : "waited",
             (unsigned long long)direct);
    dv_actor_destroy(a);
}

static void test_refusals(void)
{
    dv_actor *a = make();
    unsigned char buf[1024];
    dv_ref r, gone;
    dv_alloc(a, 4096, 0, "x", &r);
    dv_alloc(a, 4096, 0, "gone", &gone);
    dv_ref_release(gone);
    is_status(dv_copy_htod(a, gone, 0, buf, sizeof buf, 0), DV_ESTALE,
              "a released handle: DV_ESTALE");
    is_status(dv_copy_dtoh(a, buf, r, 4000, sizeof buf, 0), DV_EINVAL,
              "a range past the block: DV_EINVAL");
    dv_future f;
    dv_future_init(&f, 0);
    is_status(dv_copy_dtoh_async(a, buf, r, 4000, sizeof buf, 0, &f), DV_OK,
              "the same, _async: posted");
    is_status(dv_future_wait(&f), DV_EINVAL, "its future answers DV_EINVAL");
    /* Past the bytes asked for, within the block's usable bytes: refused,
     * and nothing of the caller's memory is read (it cannot be). */
    dv_ref odd;
    dv_ref_info info = {0};
    dv_alloc(a, 4097, 0, "odd", &odd);
    dv_ref_access(odd, &info);
    uint64_t len = info.requested + 1;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), span = (len + page - 1) / page * page;
    void *none = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (none == MAP_FAILED)
        bail_out("mmap: no PROT_NONE buffer");
    if (info.bytes > info.requested)
        is_status(dv_copy_htod(a, odd, 0, none, len, 0), DV_EINVAL,
                  "a range one byte past the %llu asked for (the block has %llu): DV_EINVAL, "
                  "the caller's memory untouched",
                  (unsigned long long)info.requested, (unsigned long long)info.bytes);
    else
        skip("the block has no bytes past the ones asked for");
    munmap(none, span);
    dv_ref_release(odd);
    /* Every chunk came back: a copy needing all four runs. */
    ok(round_trip(a, 1 * MiB, 0, false, 1), "then a copy through every chunk is right");
    dv_ref_release(r);
    dv_actor_destroy(a);
}

typedef struct lost_arg {
    dv_actor *a;
    dv_ref r;
    unsigned char *buf;
    uint64_t n;
    int rc;
} lost_arg;

static void *blocking_read(void *p)
{
    lost_arg *l = p;
    l->rc = dv_copy_dtoh(l->a, l->buf, l->r, 0, l->n, 1);
    return NULL;
}

static void test_lost_mid_copy(void)
{
    if (STAGING_ON_CUDA) {
        skip_points(4, "the sim's recoverable poison: a context lost mid-copy");
        return;
    }
    dv_actor *a = make();
    uint64_t n = 2 * MiB;
    unsigned char *b1 = malloc(n), *b2 = malloc(n);
    dv_ref r;
    dv_alloc(a, n, 1, "x", &r);
    dv_memset(a, r, 0, 4, n, 1);
    dv_future h, c;
    hold(a, 1, 300000000, &h);
    dv_future_init(&c, 0);
    dv_copy_dtoh_async(a, b1, r, 0, n, 1, &c);
    lost_arg l = {a, r, b2, n, 0};
    pthread_t t;
    pthread_create(&t, NULL, blocking_read, &l);
    dv_future_wait_ordered(&c);
    is_status(dv_sim_poison(a, DV_SIM_POISON_RECOVERABLE), DV_OK,
              "the context poisoned while two copies wait behind a kernel");
    int rc = dv_future_wait(&c);
    pthread_join(t, NULL);
    ok((rc == DV_ECONTEXT_LOST || rc == DV_ESTALE) &&
           (l.rc == DV_ECONTEXT_LOST || l.rc == DV_ESTALE),
       "both are told (_async %s, blocking %s), neither hangs", dv_err_name(rc),
       dv_err_name(l.rc));
    dv_future_wait(&h);
    ok(round_trip(a, 1 * MiB + 5, 3, false, 2) && round_trip(a, 1 * MiB + 5, 3, true, 3),
       "after the rebuild, staged copies through every chunk are right");
    dv_actor_stats st = stats(a);
    ok(st.bytes_outstanding == 0 && st.refs_alive == 0 && st.host_bytes == 0,
       "nothing held (%llu bytes, %llu handles)", (unsigned long long)st.bytes_outstanding,
       (unsigned long long)st.refs_alive);
    free(b1);
    free(b2);
    dv_actor_destroy(a);
}

static void test_driver_error(void)
{
    if (STAGING_ON_CUDA) {
        skip_points(2, "the sim's injected driver errors");
        return;
    }
    dv_actor *a = make();
    ok(round_trip(a, 100 * KiB, 0, false, 4), "the staging made");
    /* The second batch of stream memory operations of the next copy fails. */
    dv_sim_inject(a, "batch_mem_op", 2, 999);
    uint64_t n = 1 * MiB;
    unsigned char *src = malloc(n);
    pattern(src, n, 5);
    dv_ref r;
    dv_alloc(a, n, 0, "x", &r);
    int rc = dv_copy_htod(a, r, 0, src, n, 0);
    ok(rc == DV_EDRIVER && round_trip(a, 1 * MiB, 0, true, 6),
       "a driver error in the middle of enqueuing a copy fails it (%s); the next are right",
       dv_err_name(rc));
    dv_ref_release(r);
    free(src);
    dv_actor_destroy(a);
}

/* A copy refused part way, its first steps on a stream held by a spin:
 * those steps still write the block when the stream gets to them, so a
 * memset on another stream after the refusal is ordered after them (the
 * block's last write is on the copy's stream), and the block reads as the
 * memset left it. */
static void test_refused_part_way(void)
{
    if (STAGING_ON_CUDA) {
        skip_points(3, "the sim's injected driver errors");
        return;
    }
    dv_actor *a = make();
    uint64_t n = 1 * MiB;
    unsigned char *src = malloc(n), *back = malloc(n);
    pattern(src, n, 7);
    dv_ref r;
    dv_future h;
    int rc = dv_alloc(a, n, 0, "x", &r);
    if (rc == DV_OK)
        rc = dv_memset(a, r, 0, 0x11, n, 0);
    hold(a, 1, 200000000, &h); /* stream 1 busy 200 ms */
    /* The third transfer's enqueue fails: two are on stream 1. */
    if (rc == DV_OK)
        rc = dv_sim_inject(a, "memcpy_htod_async", 3, 999);
    int copy = rc == DV_OK ? dv_copy_htod(a, r, 0, src, n, 1) : rc;
    if (rc == DV_OK)
        rc = dv_memset(a, r, 0, 0x22, n, 2);
    dv_future_wait(&h);
    if (rc == DV_OK)
        rc = dv_sync(a, 1);
    if (rc == DV_OK)
        rc = dv_copy_dtoh(a, back, r, 0, n, 2);
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < n && rc == DV_OK; i++)
        wrong += back[i] != 0x22;
    ok(copy == DV_EDRIVER, "the copy refused part way: %s", dv_err_name(copy));
    ok(rc == DV_OK && wrong == 0,
       "a memset on another stream after it comes after its first steps: %llu bytes not the "
       "memset's (%s)",
       (unsigned long long)wrong, dv_err_name(rc));
    dv_ref_release(r);
    dv_actor_destroy(a);

    /* The same from the device, under the stream-order checker: the
     * refused copy's steps never reach the caller's buffer, which a copy
     * on another stream may fill at once. */
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    cfg.streams = 3;
    cfg.staging_bytes = 256 * KiB;
    cfg.staging_chunk_bytes = 64 * KiB;
    cfg.check_order = true;
    a = NULL;
    rc = dv_actor_create(&cfg, &a);
    if (rc == DV_OK)
        rc = dv_alloc(a, n, 0, "x", &r);
    if (rc == DV_OK)
        rc = dv_memset(a, r, 0, 0x33, n, 0);
    if (rc == DV_OK)
        rc = dv_sync(a, 0);
    if (rc == DV_OK)
        rc = dv_sim_inject(a, "memcpy_dtoh_async", 3, 999);
    copy = rc == DV_OK ? dv_copy_dtoh(a, back, r, 0, n, 1) : rc;
    if (rc == DV_OK)
        rc = dv_copy_dtoh(a, back, r, 0, n, 2);
    wrong = 0;
    for (uint64_t i = 0; i < n && rc == DV_OK; i++)
        wrong += back[i] != 0x33;
    ok(copy == DV_EDRIVER && rc == DV_OK && wrong == 0,
       "checked: a copy from the device refused part way (%s), then one into the same buffer "
       "on another stream: %s, %llu bytes wrong",
       dv_err_name(copy), dv_err_name(rc), (unsigned long long)wrong);
    if (a != NULL) {
        dv_ref_release(r);
        dv_actor_destroy(a);
    }
    free(src);
    free(back);
}

static void test_destroy_in_flight(void)
{
    dv_actor *a = make();
    enum { N = 6 };
    uint64_t n = 512 * KiB;
    unsigned char *buf[N];
    dv_future f[N], h;
    dv_ref r;
    dv_alloc(a, n, 1, "x", &r);
    dv_memset(a, r, 0, 8, n, 1);
    hold(a, 1, 100000000, &h);
    for (int i = 0; i < N; i++) {
        buf[i] = malloc(n);
        dv_future_init(&f[i], 0);
        dv_copy_dtoh_async(a, buf[i], r, 0, n, 1, &f[i]);
    }
    dv_ref_release(r);
    is_status(dv_actor_destroy(a), DV_OK, "destroyed with six copies in flight");
    int done = 0, right = 0;
    for (int i = 0; i < N; i++) {
        done += dv_future_done(&f[i]);
        right += f[i].status == DV_OK && buf[i][0] == 8 && buf[i][n - 1] == 8;
        free(buf[i]);
    }
    ok(done == N && right == N, "every future answered (%d), the copies finished first (%d)",
       done, right);
}

typedef struct task_arg {
    dv_ref r;
    unsigned char *host;
    uint64_t n;
    int blocking, async;
    dv_future *f;
} task_arg;

static int task_copies(const dv_task_ctx *ctx, void *user)
{
    task_arg *t = user;
    t->blocking = dv_copy_dtoh(ctx->actor, t->host, t->r, 0, t->n, 2);
    t->async = dv_copy_dtoh_async(ctx->actor, t->host, t->r, 0, t->n, 2, t->f);
    return DV_OK;
}

static void test_in_task(void)
{
    dv_actor *a = make();
    uint64_t n = 300 * KiB;
    unsigned char *host = malloc(n);
    dv_ref r;
    dv_alloc(a, n, 0, "x", &r);
    dv_memset(a, r, 0, 6, n, 0);
    dv_sync(a, 0);
    dv_future f;
    dv_future_init(&f, 0);
    task_arg t = {r, host, n, 0, 0, &f};
    dv_arg args[] = {dv_arg_ref(r, DV_READ, 0)};
    is_status(dv_task(a, task_copies, &t, 0, args, 1), DV_OK, "a task that copies");
    is_status(t.blocking, DV_EDEADLK, "the blocking form inside it: DV_EDEADLK");
    int rc = t.async == DV_OK ? dv_future_wait(&f) : t.async;
    ok((t.async == DV_OK && rc == DV_OK && host[0] == 6 && host[n - 1] == 6) ||
           t.async == DV_EAGAIN,
       "the _async form: posted and right, or DV_EAGAIN (%s, %s)", dv_err_name(t.async),
       dv_err_name(rc));
    dv_ref_release(r);
    free(host);
    dv_actor_destroy(a);
}

/*
 * Stream order with one pageable buffer: a copy from the device into h,
 * then on the same stream a copy from h to another block, posted before
 * the first landed (its stream held by a kernel): the second sends what
 * the first brought, _async or blocking, one chunk or many.
 */
static void test_same_buffer_same_stream(void)
{
    dv_actor *a = make_with(1 * MiB, 64 * KiB, 0, false); /* 16 chunks: both copies hold some */
    static const uint64_t sizes[] = {4 * KiB, 1 * MiB + 3};
    int good[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        uint64_t n = sizes[i];
        unsigned char *src = malloc(n), *h = malloc(n), *back = malloc(n);
        for (int blocking = 0; blocking < 2; blocking++) {
            dv_ref x = DV_REF_NULL, y = DV_REF_NULL;
            dv_future held, f1, f2;
            dv_future_init(&held, 0);
            dv_future_init(&f1, 0);
            dv_future_init(&f2, 0);
            bool fine = src != NULL && h != NULL && back != NULL &&
                        dv_alloc(a, n, 1, "x", &x) == DV_OK && dv_alloc(a, n, 1, "y", &y) == DV_OK;
            if (fine) {
                pattern(src, n, (unsigned)(7 + i + 2 * blocking));
                memset(h, 0xee, n);
                fine = dv_copy_htod(a, x, 0, src, n, 1) == DV_OK;
                hold(a, 1, 30 * 1000 * 1000, &held); /* the copy below waits behind it */
                fine = fine && dv_copy_dtoh_async(a, h, x, 0, n, 1, &f1) == DV_OK;
                if (blocking)
                    fine = fine && dv_copy_htod(a, y, 0, h, n, 1) == DV_OK;
                else
                    fine = fine && dv_copy_htod_async(a, y, 0, h, n, 1, &f2) == DV_OK &&
                           dv_future_wait(&f2) == DV_OK;
                fine = fine && dv_future_wait(&f1) == DV_OK && dv_future_wait(&held) == DV_OK;
                fine =
                    fine && dv_copy_dtoh(a, back, y, 0, n, 2) == DV_OK && memcmp(back, src, n) == 0;
            }
            good[blocking] += fine;
            dv_ref_release(x);
            dv_ref_release(y);
        }
        free(src);
        free(h);
        free(back);
    }
    is_int(good[0], 2,
           "a copy from a pageable buffer after a copy into it on the same stream, "
           "both _async: it sends what the first brought (4 KiB, 1 MiB + 3)");
    is_int(good[1], 2, "the same with the second copy blocking");
    dv_actor_destroy(a);
}

typedef struct side_copy {
    dv_actor *a;
    dv_ref r;
    unsigned char out[4096];
    atomic_int rc; /* 1: not done yet */
} side_copy;

static void *side_read(void *p)
{
    side_copy *c = p;
    dv_future f;
    dv_future_init(&f, 0);
    int rc = dv_copy_dtoh_async(c->a, c->out, c->r, 0, sizeof(c->out), 2, &f);
    atomic_store(&c->rc, rc == DV_OK ? dv_future_wait(&f) : rc);
    return NULL;
}

/* Copies queued behind work on one stream that does not end (a gate) hold
 * at most their stream's share of the chunks: a copy on another stream
 * finds one and is done while the gate stays shut.  (Before, the copy of
 * 1 MiB took all four chunks and the other stream's copy waited for the
 * gate, in its post.) */
static void test_other_stream_not_held(uint64_t staging, const char *what)
{
    dv_actor *a = make_with(staging, 64 * KiB, 0, false);
    side_copy c = {.a = a};
    atomic_init(&c.rc, 1);
    unsigned char *src = malloc(1 * MiB), *back = malloc(1 * MiB);
    dv_ref big = DV_REF_NULL;
    gate g;
    dv_future bf;
    dv_future_init(&bf, 0);
    bool fine = src != NULL && back != NULL && dv_alloc(a, 1 * MiB, 1, "big", &big) == DV_OK &&
                dv_alloc(a, sizeof(c.out), 2, "small", &c.r) == DV_OK &&
                dv_memset(a, c.r, 0, 0x5a, sizeof(c.out), 2) == DV_OK;
    if (fine) {
        pattern(src, 1 * MiB, 11);
        fine = gate_close(&g, a, 1) == DV_OK &&
               dv_copy_htod_async(a, big, 0, src, 1 * MiB, 1, &bf) == DV_OK;
    }
    pthread_t t;
    bool started = fine && pthread_create(&t, NULL, side_read, &c) == 0;
    for (int i = 0; started && i < 10000 && atomic_load(&c.rc) == 1; i++)
        usleep(1000); /* 10 s at most */
    int side = atomic_load(&c.rc);
    if (fine)
        (void)gate_open(&g);
    if (started)
        pthread_join(t, NULL);
    ok(started && side == DV_OK && c.out[0] == 0x5a && c.out[4095] == 0x5a,
       "%s: a copy on another stream while 1 MiB waits behind a shut gate: done before the gate "
       "opens (%s)",
       what, side == 1 ? "still waiting after 10 s" : dv_err_name(side));
    fine = fine && dv_future_wait(&bf) == DV_OK &&
           dv_copy_dtoh(a, back, big, 0, 1 * MiB, 0) == DV_OK && memcmp(back, src, 1 * MiB) == 0;
    ok(fine, "and the held copy lands whole once the gate opens");
    dv_ref_release(big);
    dv_ref_release(c.r);
    free(src);
    free(back);
    dv_actor_destroy(a);
}

typedef struct late_post {
    dv_actor *a;
    dv_ref r;
    unsigned char *src;
    int rc;
} late_post;

static void *post_late(void *p)
{
    late_post *l = p;
    l->rc = dv_copy_htod(l->a, l->r, 3 * 64 * KiB, l->src, 64 * KiB, 1);
    return NULL;
}

/* A poster that waits for a chunk of its own stream's, still ahead on
 * the device, counts in staging_waits like one that found none free. */
static void test_waits_counted(void)
{
    dv_actor *a = make(); /* four chunks of 64 KiB: a stream's share is three */
    unsigned char *src = malloc(4 * 64 * KiB);
    dv_ref r = DV_REF_NULL;
    gate g;
    bool fine = src != NULL && dv_alloc(a, 4 * 64 * KiB, 1, "r", &r) == DV_OK &&
                gate_close(&g, a, 1) == DV_OK;
    uint64_t before = stats(a).staging_waits;
    dv_future f[3];
    for (int i = 0; i < 3 && fine; i++) {
        memset(src + i * 64 * KiB, i + 1, 64 * KiB);
        dv_future_init(&f[i], 0);
        fine = dv_copy_htod_async(a, r, (uint64_t)i * 64 * KiB, src + i * 64 * KiB, 64 * KiB, 1,
                                  &f[i]) == DV_OK;
    }
    /* Their steps enqueued (behind the gate), their chunks given back,
     * still ahead on the device. */
    for (int i = 0; i < 3 && fine; i++)
        fine = dv_future_wait_ordered(&f[i]) == DV_OK;
    usleep(20000);
    late_post l = {a, r, src + 3 * 64 * KiB, -1};
    pthread_t t;
    bool started = fine && pthread_create(&t, NULL, post_late, &l) == 0;
    usleep(50000); /* the fourth post meets the share, and a chunk still ahead */
    if (fine)
        (void)gate_open(&g);
    if (started)
        pthread_join(t, NULL);
    for (int i = 0; i < 3 && fine; i++)
        fine = dv_future_wait(&f[i]) == DV_OK;
    uint64_t waits = stats(a).staging_waits - before;
    ok(fine && l.rc == DV_OK && waits >= 1,
       "a fourth copy on a stream holding its share of the chunks waits for one, counted "
       "(%llu waits, %s)",
       (unsigned long long)waits, dv_err_name(l.rc));
    dv_ref_release(r);
    free(src);
    dv_actor_destroy(a);
}

/* With the checker on, a copy to the device from a buffer that a copy
 * from the device on another stream may still be writing is refused
 * (DV_EHAZARD) before anything reads the buffer.  (Before, the poster
 * filled the first chunk from it first: a buffer it cannot read crashed
 * the caller.) */
static void test_checker_refusal_reads_nothing(void)
{
    dv_actor *a = make_with(256 * KiB, 64 * KiB, 0, true);
    size_t n = 256 * KiB;
    unsigned char *g = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g == MAP_FAILED)
        bail_out("mmap");
    dv_ref src, dst;
    dv_alloc(a, n, 1, "src", &src);
    dv_alloc(a, n, 2, "dst", &dst);
    dv_memset(a, src, 0, 7, n, 1);
    gate gt;
    dv_future d, h;
    dv_future_init(&d, 0);
    dv_future_init(&h, 0);
    gate_close(&gt, a, 1);
    int rd = dv_copy_dtoh_async(a, g, src, 0, n, 1, &d);
    dv_future_wait_ordered(&d);
    mprotect(g, n, PROT_NONE);
    int rb = dv_copy_htod(a, dst, 0, g, n, 2);
    int ra = dv_copy_htod_async(a, dst, 0, g, n, 2, &h);
    int rh = ra == DV_OK ? dv_future_wait(&h) : ra;
    mprotect(g, n, PROT_READ | PROT_WRITE);
    (void)gate_open(&gt);
    int rdw = dv_future_wait(&d);
    ok(rd == DV_OK && rb == DV_EHAZARD && rh == DV_EHAZARD && rdw == DV_OK && g[0] == 7 &&
           g[n - 1] == 7,
       "checker on: a staged copy from a buffer another stream's copy may still write, blocking "
       "and _async, refused (%s, %s) without reading it; the other copy lands",
       dv_err_name(rb), dv_err_name(rh));
    dv_ref_release(src);
    dv_ref_release(dst);
    munmap(g, n);
    dv_actor_destroy(a);
}

int main(void)
{
    plan(35);
    test_sizes();
    test_backpressure();
    test_actor_free();
    test_refusals();
    test_lost_mid_copy();
    test_driver_error();
    test_refused_part_way();
    test_destroy_in_flight();
    test_in_task();
    test_same_buffer_same_stream();
    test_other_stream_not_held(256 * KiB, "four chunks");
    test_other_stream_not_held(64 * KiB, "a staging of one chunk (made of two)");
    test_waits_counted();
    test_checker_refusal_reads_nothing();
    return tap_done();
}
