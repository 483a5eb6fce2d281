/*
 * The checker's happens-before edges that the hazard corpus does not
 * show one by one (tests/hazards has the mistakes and their neighbours):
 *   - a race another thread's sync hides from the actor is still a race,
 *     and the report says the two were posted by different threads and
 *     names the hand-over calls; after a hand-over it is gone;
 *   - a token of a context since rebuilt answers DV_ESTALE;
 *   - with the checker off a token is empty and adopting it does nothing;
 *   - what the checker holds (check_pieces, check_bytes) stays bounded
 *     over many blocks allocated, cut into ranges and freed, and many
 *     host buffers copied; the pieces of a block that every stream has
 *     seen merge back into one (retirement by dominance);
 *   - a sub-range of a block cuts its history: disjoint raw writes on two
 *     streams are fine, an overlap by one word is not;
 *   - a peer copy is checked on both actors: its read of the source on
 *     the source's actor, its write on the destination's.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "devactor.h"
#include "devactor_testing.h"
#include "tap.h"

#define N     4096u /* u32 words per block */
#define BYTES ((uint64_t)N * 4)

static const dv_dim3 grid = {16, 1, 1}, blk = {256, 1, 1};
static dv_actor *A;
static dv_kernel *fill, *spin;
static dv_ref X;
static uint64_t xptr;

static dv_actor *make(bool check)
{
    dv_actor_config cfg;
    dv_actor *a = NULL;
    dv_actor_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    cfg.streams = 3;
    cfg.permissive = true;
    cfg.check_order = check;
    cfg.sim_memory_bytes = 64 << 20;
    if (dv_actor_create(&cfg, &a) != DV_OK)
        bail_out("no actor: %s", dv_last_error()->message);
    if (dv_kernel_get(a, NULL, 0, "fill_u32", &fill) != DV_OK ||
        dv_kernel_get(a, NULL, 0, "spin", &spin) != DV_OK)
        bail_out("no kernels: %s", dv_last_error()->message);
    return a;
}

static uint64_t hazards(dv_actor *a, dv_actor_stats *st)
{
    return dv_actor_stats_get(a, st) == DV_OK ? st->hazards : UINT64_MAX;
}

static void pause_ms(long ms)
{
    struct timespec ts = {0, ms * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* Raw fill of [first, first + words) of the block at ptr on s, posted. */
static int raw_fill(dv_actor *a, uint64_t ptr, uint32_t first, uint32_t words, uint32_t v,
                    dv_stream s, dv_future *f)
{
    static dv_arg args[8][3];
    static int next;
    dv_arg *g = args[next++ % 8];
    g[0] = dv_arg_ptr_range(ptr + (uint64_t)first * 4, DV_WRITE, (uint64_t)words * 4);
    g[1] = dv_arg_u32(v);
    g[2] = dv_arg_u64(words);
    dv_future_init(f, 0);
    return dv_launch_async(a, fill, grid, blk, 0, s, g, 3, f);
}

/* The same, waited for: its status (a refusal comes through the future). */
static int raw_fill_wait(dv_actor *a, uint64_t ptr, uint32_t first, uint32_t words, uint32_t v,
                         dv_stream s)
{
    dv_future f;
    int rc = raw_fill(a, ptr, first, words, v, s, &f);
    return rc != DV_OK ? rc : dv_future_wait(&f);
}

static dv_order_token handed;

/* Another thread writes x on stream 0, syncs it and exports what it
 * learned. */
static void *syncer(void *arg)
{
    int *rc = arg;
    dv_future f;
    *rc = raw_fill(A, xptr, 0, N, 1, 0, &f);
    if (*rc == DV_OK)
        *rc = dv_sync(A, 0);
    if (*rc == DV_OK)
        *rc = dv_order_export(A, &handed);
    return NULL;
}

/*
 * A future's wait teaches what its stream had itself waited for, however
 * many other points were published since: stream 1 waits for stream 0's
 * write (an event), a memset on stream 1 is waited for; a memset on
 * stream 2 in between gets the same number on its stream as stream 1's
 * (the table of published points once gave both one slot).  A raw read
 * of stream 0's write on stream 2 is then ordered.
 */
static void test_transitive_future(void)
{
    dv_actor *a = make(true);
    dv_ref x, y, z;
    dv_event *ev;
    dv_future fw, fy;
    dv_alloc(a, BYTES, 0, "x", &x);
    dv_alloc(a, BYTES, 1, "y", &y);
    dv_alloc(a, BYTES, 2, "z", &z);
    dv_ref_info info;
    dv_ref_access(x, &info);
    dv_event_create(a, 0, &ev);
    raw_fill(a, info.ptr, 0, N, 5, 0, &fw);
    dv_event_record(ev, 0);
    dv_stream_wait_event(a, 1, ev);
    dv_future_init(&fy, 0);
    dv_memset_async(a, y, 0, 0, BYTES, 1, &fy);
    dv_memset(a, z, 0, 1, BYTES, 2);
    dv_future_wait(&fy);
    dv_actor_stats st;
    uint64_t before = hazards(a, &st);
    static dv_arg rd[3];
    rd[0] = dv_arg_ptr_range(info.ptr, DV_READ, BYTES);
    rd[1] = dv_arg_u32(0);
    rd[2] = dv_arg_u64(0);
    dv_future fr;
    dv_future_init(&fr, 0);
    int rc = dv_launch_async(a, fill, grid, blk, 0, 2, rd, 3, &fr);
    if (rc == DV_OK)
        rc = dv_future_wait(&fr);
    is_status(rc, DV_OK,
              "a future's wait teaches what its stream waited for, after another stream's point "
              "of the same number");
    ok(hazards(a, &st) == before, "no hazard counted");
    dv_future_wait(&fw);
    dv_event_destroy(ev);
    dv_ref_release(x);
    dv_ref_release(y);
    dv_ref_release(z);
    dv_actor_destroy(a);
}

/* Two sim devices on one driver, one actor each, checker on. */
static void test_peer(void)
{
    dv_driver_config dc;
    dv_driver *drv = NULL;
    dv__driver_config_init(&dc);
    dc.backend = DV_BACKEND_SIM;
    dc.sim.devices = 2;
    dc.sim.memory_bytes = 64 << 20;
    dc.sim.seed = 11;
    dc.sim.delay_max_us = 20;
    dv_actor *a = NULL, *b = NULL;
    if (dv__driver_open(&dc, &drv) == DV_OK) {
        for (int d = 0; d < 2; d++) {
            dv_actor_config cfg;
            dv_actor_config_init(&cfg);
            cfg.driver = drv;
            cfg.device = d;
            cfg.streams = 3;
            cfg.permissive = true;
            cfg.check_order = true;
            dv_actor_create(&cfg, d == 0 ? &a : &b);
        }
    }
    dv_kernel *afill = NULL, *bfill = NULL, *bspin = NULL, *aspin = NULL;
    dv_ref x = DV_REF_NULL, y = DV_REF_NULL;
    dv_actor_stats st;
    if (a == NULL || b == NULL || dv_kernel_get(a, NULL, 0, "fill_u32", &afill) != DV_OK ||
        dv_kernel_get(b, NULL, 0, "fill_u32", &bfill) != DV_OK ||
        dv_kernel_get(a, NULL, 0, "spin", &aspin) != DV_OK ||
        dv_kernel_get(b, NULL, 0, "spin", &bspin) != DV_OK || dv_alloc(a, BYTES, 0, "src", &x) ||
        dv_alloc(b, BYTES, 0, "dst", &y)) {
        bail_out("peer: no two sim actors: %s", dv_last_error()->message);
    }
    dv_memset(a, x, 0, 1, BYTES, 0);
    dv_memset(b, y, 0, 0, BYTES, 0);
    dv_sync(a, 0);
    dv_sync(b, 0);
    uint64_t px = 0, py = 0;
    dv_ref_info info;
    if (dv_ref_access(x, &info) == DV_OK)
        px = info.ptr;
    if (dv_ref_access(y, &info) == DV_OK)
        py = info.ptr;

    /* The source's device still writes it (raw, on another stream). */
    dv_arg sp[] = {dv_arg_u64(20000000)};
    dv_future fs, fw;
    dv_future_init(&fs, 0);
    dv_launch_async(a, aspin, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, 1, sp, 1, &fs);
    dv_arg wa[] = {dv_arg_ptr_range(px, DV_WRITE, BYTES), dv_arg_u32(5), dv_arg_u64(N)};
    dv_future_init(&fw, 0);
    dv_launch_async(a, afill, grid, blk, 0, 1, wa, 3, &fw);
    int rc = dv_copy_dtod(b, y, 0, x, 0, BYTES, 0);
    const char *msg = dv_last_error()->message;
    ok(rc == DV_EHAZARD && strstr(msg, "peer copy from this device") != NULL &&
           strstr(msg, "'src'") != NULL && hazards(a, &st) == 1,
       "a peer copy while the source's device still writes it: DV_EHAZARD on the source's "
       "actor (%s)",
       msg);
    dv_future_wait(&fs);
    dv_future_wait(&fw); /* waited: the thread knows the write */
    rc = dv_copy_dtod(b, y, 0, x, 0, BYTES, 0);
    static uint32_t back[N];
    dv_copy_dtoh(b, back, y, 0, BYTES, 0);
    ok(rc == DV_OK && back[0] == 5 && back[N - 1] == 5,
       "after waiting for the write, the peer copy runs and the data arrives (%s)",
       dv_err_name(rc));

    /* The destination's device still reads it (raw, on another stream). */
    dv_future_init(&fs, 0);
    dv_launch_async(b, bspin, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, 1, sp, 1, &fs);
    dv_arg ra[] = {dv_arg_ptr_range(py, DV_READ, BYTES), dv_arg_u32(5), dv_arg_u64(0)};
    dv_future_init(&fw, 0);
    dv_launch_async(b, bfill, grid, blk, 0, 1, ra, 3, &fw);
    rc = dv_copy_dtod(b, y, 0, x, 0, BYTES, 0);
    msg = dv_last_error()->message;
    ok(rc == DV_EHAZARD && strstr(msg, "peer copy (") != NULL && strstr(msg, "'dst'") != NULL &&
           hazards(b, &st) == 1,
       "a peer copy into a block the destination's device still reads: DV_EHAZARD on the "
       "destination's actor (%s)",
       msg);
    dv_future_wait(&fs);
    dv_future_wait(&fw);
    ok(dv_copy_dtod(b, y, 0, x, 0, BYTES, 2) == DV_OK,
       "after waiting for the read, the peer copy runs");
    dv_ref_release(x);
    dv_ref_release(y);
    dv_actor_destroy(a);
    dv_actor_destroy(b);
    dv__driver_close(drv);
}

int main(void)
{
    dv_actor_stats st;
    dv_error_detail last;
    dv_future f1;

    plan(33);

    test_transitive_future();

    /* -- hidden by another thread's sync --------------------------------- */
    A = make(true);
    dv_alloc(A, BYTES, 0, "x", &X);
    dv_ref_info info;
    dv_ref_access(X, &info);
    xptr = info.ptr;
    pthread_t t;
    int trc = -1;
    pthread_create(&t, NULL, syncer, &trc);
    pthread_join(t, NULL);
    is_status(trc, DV_OK, "another thread wrote x on stream 0, synced it and exported");
    pause_ms(10);
    is_status(raw_fill_wait(A, xptr, 0, N, 2, 1), DV_EHAZARD,
              "this thread never waited: its raw write on stream 1 races, though stream 0 is done");
    dv_actor_last_hazard(A, &last);
    ok(strstr(last.message, "two threads") != NULL &&
           strstr(last.message, "dv_order_adopt") != NULL,
       "the report says the two came from different threads and names the hand-over");
    diag("%s", last.message);
    is_status(dv_order_adopt(A, &handed), DV_OK, "the thread adopts the other's knowledge");
    is_status(raw_fill_wait(A, xptr, 0, N, 3, 1), DV_OK, "now the write on stream 1 is ordered");

    /* -- byte ranges ------------------------------------------------------ */
    dv_sync(A, 0);
    dv_sync(A, 1);
    uint64_t before = hazards(A, &st);
    static dv_arg sp[1];
    sp[0] = dv_arg_u64(20000000);
    dv_future fs;
    dv_future_init(&fs, 0);
    dv_launch_async(A, spin, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, 0, sp, 1, &fs);
    is_status(raw_fill(A, xptr, 0, N / 2, 4, 0, &f1), DV_OK, "the first half on stream 0");
    is_status(raw_fill_wait(A, xptr, N / 2, N / 2, 5, 1), DV_OK,
              "the second half on stream 1: disjoint, no hazard");
    is_status(raw_fill_wait(A, xptr, N / 2 - 1, 2, 6, 2), DV_EHAZARD,
              "two words straddling the halves on stream 2: a real race");
    dv_future_wait(&fs);
    dv_future_wait(&f1);
    ok(hazards(A, &st) == before + 1, "one hazard counted");
    dv_actor_last_hazard(A, &last);
    ok(strstr(last.message, "bytes [8188, 8192) of block 'x'") != NULL ||
           strstr(last.message, "bytes [8188, 8196) of block 'x'") != NULL ||
           strstr(last.message, "bytes [8192, 8196) of block 'x'") != NULL,
       "the report names the bytes of the block");
    diag("%s", last.message);

    /* -- what the checker holds stays bounded ---------------------------- */
    dv_sync(A, 0);
    dv_sync(A, 1);
    dv_actor_stats_get(A, &st);
    uint64_t pieces0 = st.check_pieces, bytes0 = st.check_bytes;
    ok(pieces0 > 0 && bytes0 > 0, "the checker reports what it holds (%llu pieces, %llu bytes)",
       (unsigned long long)pieces0, (unsigned long long)bytes0);
    static uint32_t host[N];
    uint64_t peak = 0;
    int bad = 0;
    for (int i = 0; i < 2000; i++) {
        dv_ref r;
        if (dv_alloc(A, BYTES, (dv_stream)(i % 3), "churn", &r) != DV_OK) {
            bad++;
            continue;
        }
        dv_ref_access(r, &info);
        /* Cut it into ranges: a write per quarter, on the block's stream. */
        for (uint32_t q = 0; q < 4; q++) {
            dv_future fq;
            if (raw_fill(A, info.ptr, q * (N / 4), N / 4, (uint32_t)i, (dv_stream)(i % 3), &fq) !=
                    DV_OK ||
                dv_future_wait(&fq) != DV_OK)
                bad++;
        }
        /* A host buffer of its own range each time, waited for. */
        if (dv_copy_dtoh(A, host + (i % 64) * 16, r, 0, 64, (dv_stream)(i % 3)) != DV_OK)
            bad++;
        dv_ref_release(r);
        if (i % 100 == 99) {
            dv_actor_stats_get(A, &st);
            if (st.check_pieces > peak)
                peak = st.check_pieces;
        }
    }
    ok(bad == 0 && hazards(A, &st) == before + 1, "2,000 blocks, cut in four and freed: no hazard");
    ok(peak < 200, "the checker's pieces stay bounded (at most %llu over the run)",
       (unsigned long long)peak);
    diag("after the run: %llu pieces, %llu bytes", (unsigned long long)st.check_pieces,
         (unsigned long long)st.check_bytes);

    /* -- retirement by dominance ----------------------------------------- */
    /* A long-lived block cut into 64 ranges on three streams: once every
     * stream has seen those writes, their pieces forget them and merge
     * back into one, with no count or time involved. */
    dv_ref keep, other;
    dv_alloc(A, BYTES, 0, "keep", &keep);
    dv_alloc(A, 64, 0, "other", &other);
    dv_ref_access(keep, &info);
    uint64_t kptr = info.ptr;
    bad = dv_sync(A, 0) != DV_OK; /* the allocations, known before raw writes elsewhere */
    dv_actor_stats_get(A, &st);
    uint64_t whole = st.check_pieces;
    static dv_future fk[64];
    for (uint32_t q = 0; q < 64; q++) {
        /* Ordered (its arguments read), not waited: nothing learned. */
        if (raw_fill(A, kptr, q * (N / 64), N / 64, q, (dv_stream)(q % 3), &fk[q]) != DV_OK ||
            dv_future_wait_ordered(&fk[q]) != DV_OK)
            bad++;
    }
    for (dv_stream s = 0; s < 3; s++)
        if (dv_sync(A, s) != DV_OK)
            bad++;
    for (uint32_t q = 0; q < 64; q++)
        if (dv_future_wait(&fk[q]) != DV_OK)
            bad++;
    dv_actor_stats_get(A, &st);
    uint64_t cut = st.check_pieces;
    /* Every stream learns it: the thread posts on each after its syncs, and
     * enough operations (on another block) pass for a sweep. */
    for (int i = 0; i < 1500; i++)
        if (dv_memset(A, other, 0, (uint8_t)i, 64, (dv_stream)(i % 3)) != DV_OK)
            bad++;
    dv_actor_stats_get(A, &st);
    ok(bad == 0 && cut >= whole + 63 && st.check_pieces <= whole + 1 && hazards(A, &st) == before + 1,
       "64 ranges written on three streams, seen by every stream: their pieces merge (%llu "
       "pieces, %llu cut, then %llu)",
       (unsigned long long)whole, (unsigned long long)cut, (unsigned long long)st.check_pieces);
    uint64_t h0 = hazards(A, &st);
    dv_future_init(&fs, 0);
    dv_launch_async(A, spin, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, 0, sp, 1, &fs);
    is_status(raw_fill(A, kptr, 0, N, 8, 0, &f1), DV_OK, "a new write of the retired block");
    is_status(raw_fill_wait(A, kptr, N - 1, 1, 9, 1), DV_EHAZARD,
              "races with a write on another stream as before");
    dv_future_wait(&fs);
    dv_future_wait(&f1);
    ok(hazards(A, &st) == h0 + 1, "one hazard counted");
    dv_ref_release(other);
    dv_ref_release(keep);

    /* -- a token of a rebuilt context ------------------------------------ */
    dv_order_token old;
    dv_ref_release(X);
    is_status(dv_order_export(A, &old), DV_OK, "a token exported before a reset");
    is_status(dv_actor_reset(A), DV_OK, "reset");
    is_status(dv_order_adopt(A, &old), DV_ESTALE, "adopting it after the reset: DV_ESTALE");
    {
        /* A token of a context the actor never had: refused, and what the
         * thread knows stays (a copy it waited for reads clean). */
        dv_ref w = DV_REF_NULL;
        uint32_t word = 0;
        dv_alloc(A, 4096, 1, "w", &w);
        dv_memset(A, w, 0, 0, 4096, 1);
        dv_copy_dtoh(A, &word, w, 0, 4, 1); /* the thread now knows stream 1's work */
        dv_order_token forged;
        dv_order_export(A, &forged);
        forged.context += 999;
        int rc = dv_order_adopt(A, &forged);
        int after = dv_check_host_access(A, &word, 4, DV_WRITE);
        ok(rc == DV_EINVAL && after == DV_OK,
           "a token of a context never had: DV_EINVAL (%s), the thread's knowledge kept (%s)",
           dv_err_name(rc), dv_err_name(after));
        dv_ref_release(w);
    }
    dv_actor_destroy(A);

    /* -- the checker off -------------------------------------------------- */
    A = make(false);
    dv_order_token empty;
    is_status(dv_order_export(A, &empty), DV_OK, "checker off: export answers DV_OK");
    ok(empty.streams == 0, "and the token is empty");
    is_status(dv_order_adopt(A, &empty), DV_OK, "adopting it does nothing");
    dv_actor *peer_actor = make(true);
    is_status(dv_order_adopt(peer_actor, &empty), DV_OK,
              "an empty token adopted on another actor does nothing too");
    dv_order_token zeros;
    memset(&zeros, 0, sizeof(zeros));
    is_status(dv_order_adopt(peer_actor, &zeros), DV_OK, "nor does a token of all zeros");
    dv_order_token full;
    dv_ref Z = DV_REF_NULL;
    dv_alloc(peer_actor, 4096, 0, "z", &Z);
    dv_sync(peer_actor, 0);
    dv_order_export(peer_actor, &full);
    ok(full.streams != 0 && dv_order_adopt(A, &full) == DV_EINVAL,
       "a token that knows something (%u streams), from another actor: refused, checker off "
       "or not",
       full.streams);
    dv_ref_release(Z);
    dv_actor_destroy(peer_actor);
    dv_actor_destroy(A);

    test_peer();
    return tap_done();
}
