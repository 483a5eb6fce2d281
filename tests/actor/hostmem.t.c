/*
 * Page-locked host memory: dv_host_alloc / dv_host_free and
 * dv_host_register / dv_host_unregister (on the sim; on cuda with
 * HOSTMEM_ON_CUDA, skipped where no device answers).
 *   - sizes and classes: aligned, writable, distinct, counted;
 *   - copies with such memory are asynchronous and never staged;
 *   - a freed buffer is not handed out again while a copy uses it;
 *   - the host budget: refused with requested and remaining, room made
 *     by freeing; staging that does not fit leaves pageable copies to the
 *     driver, right all the same;
 *   - registered ranges: overlaps refused, dv_host_unregister returns
 *     only after the copies that used the range;
 *   - buffers survive dv_actor_reset and are pinned again;
 *   - bad pointers (NULL, inside a buffer, freed, another actor's);
 *   - with the checker, a free racing with a copy is reported.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "devactor.h"
#include "support/device_time.h"
#include "support/gate.h"
#include "tap.h"

#ifndef HOSTMEM_ON_CUDA
#define HOSTMEM_ON_CUDA 0
#endif

#define MiB (UINT64_C(1) << 20)

static dv_kernel *spin;

static dv_actor *make_on(dv_backend backend, uint64_t host_budget, bool check)
{
    dv_actor_config cfg;
    dv_actor *a = NULL;
    dv_actor_config_init(&cfg);
    cfg.backend = backend;
    cfg.streams = 3;
    cfg.host_budget_bytes = host_budget;
    cfg.check_order = check;
    cfg.sim_memory_bytes = 256 * MiB;
    int rc = dv_actor_create(&cfg, &a);
    if (HOSTMEM_ON_CUDA && rc == DV_ENODEVICE)
        skip_all("%s", dv_last_error()->message);
    if (rc != DV_OK)
        bail_out("no actor: %s", dv_last_error()->message);
    if (dv_kernel_get(a, NULL, 0, "spin", &spin) != DV_OK)
        bail_out("no spin kernel: %s", dv_last_error()->message);
    return a;
}

static dv_actor *make(uint64_t host_budget, bool check)
{
    return make_on(HOSTMEM_ON_CUDA ? DV_BACKEND_CUDA : DV_BACKEND_SIM, host_budget, check);
}

static dv_actor_stats stats(dv_actor *a)
{
    return stats_of(a);
}

static void hold(dv_actor *a, dv_stream s, uint64_t ns, dv_future *f)
{
    hold_stream(a, spin, s, ns, f);
}

static void test_sizes(void)
{
    dv_actor *a = make(0, false);
    static const uint64_t sizes[] = {1, 4096, 5000, 65536, 2 * MiB, 3 * MiB + 7, 64 * MiB};
    enum { N = sizeof(sizes) / sizeof(sizes[0]) };
    void *p[N];
    bool good = true;
    for (int i = 0; i < N; i++) {
        if (dv_host_alloc(a, sizes[i], &p[i]) != DV_OK || ((uintptr_t)p[i] & 4095) != 0) {
            good = false;
            p[i] = NULL;
            continue;
        }
        memset(p[i], 0x40 + i, sizes[i]);
    }
    ok(good, "seven sizes from 1 B to 64 MiB: page-aligned buffers that take writes");
    bool apart = true;
    for (int i = 0; i < N; i++)
        for (int k = 0; k < N && p[i] != NULL; k++)
            if (k != i && p[k] != NULL && (uintptr_t)p[k] >= (uintptr_t)p[i] &&
                (uintptr_t)p[k] < (uintptr_t)p[i] + sizes[i])
                apart = false;
    for (int i = 0; i < N && apart; i++)
        if (p[i] != NULL && ((unsigned char *)p[i])[sizes[i] - 1] != 0x40 + i)
            apart = false;
    ok(apart, "no two overlap, each keeps its bytes");
    dv_actor_stats st = stats(a);
    ok(st.host_buffers == N && st.host_bytes >= 70 * MiB && st.host_peak == st.host_bytes &&
           st.host_reserved >= st.host_bytes,
       "counted: %llu buffers, %llu bytes (peak %llu), %llu reserved",
       (unsigned long long)st.host_buffers, (unsigned long long)st.host_bytes,
       (unsigned long long)st.host_peak, (unsigned long long)st.host_reserved);
    int freed = 0;
    for (int i = 0; i < N; i++)
        freed += p[i] != NULL && dv_host_free(a, p[i]) == DV_OK;
    st = stats(a);
    ok(freed == N && st.host_buffers == 0 && st.host_bytes == 0 && st.host_peak >= 70 * MiB,
       "all freed: 0 buffers, 0 bytes, the peak kept");
    is_status(dv_host_alloc(a, 0, &p[0]), DV_EINVAL, "zero bytes: DV_EINVAL");
    ok(p[0] == NULL, "and *out is NULL");
    is_status(dv_host_alloc(a, UINT64_MAX, &p[0]), DV_EINVAL, "UINT64_MAX bytes: DV_EINVAL");
    is_status(dv_host_alloc(a, 64, NULL), DV_EINVAL, "NULL out: DV_EINVAL");
    is_status(dv_host_alloc(NULL, 64, &p[0]), DV_EINVAL, "NULL actor: DV_EINVAL");
    dv_actor_destroy(a);
}

static void test_copies(void)
{
    dv_actor *a = make(0, false);
    uint64_t n = 3 * MiB;
    unsigned char *src = NULL, *dst = NULL;
    dv_ref r;
    dv_host_alloc(a, n, (void **)&src);
    dv_host_alloc(a, n, (void **)&dst);
    dv_alloc(a, n, 0, "x", &r);
    for (uint64_t i = 0; i < n; i++)
        src[i] = (unsigned char)(i * 7 + 3);
    memset(dst, 0, n);
    dv_actor_stats st0 = stats(a);
    dv_future f1, f2;
    dv_future_init(&f1, 0);
    dv_future_init(&f2, 0);
    is_status(dv_copy_htod_async(a, r, 0, src, n, 1, &f1), DV_OK, "to the device from a buffer");
    is_status(dv_copy_dtoh_async(a, dst, r, 0, n, 2, &f2), DV_OK, "and back into another");
    is_status(dv_future_wait(&f2), DV_OK, "done");
    dv_future_wait(&f1);
    ok(memcmp(src, dst, n) == 0, "the bytes arrived");
    dv_actor_stats st = stats(a);
    ok(st.staged_copies == st0.staged_copies && st.direct_copies == st0.direct_copies,
       "neither copy was staged nor done by the driver on the actor's thread");
    dv_ref_release(r);
    dv_host_free(a, src);
    dv_host_free(a, dst);
    dv_actor_destroy(a);
}

/* One buffer of each kind: a small one (a slab's) and a large one. */
static void reuse_after_copies(uint64_t n)
{
    dv_actor *a = make(0, false);
    void *p = NULL, *q = NULL, *again = NULL;
    dv_ref r;
    dv_alloc(a, n, 0, "x", &r);
    dv_memset(a, r, 0, 5, n, 0);
    dv_host_alloc(a, n, &p);
    /* Its copy waits behind 100 ms of the device's time. */
    dv_future h, c;
    hold(a, 0, 100000000, &h);
    dv_future_init(&c, 0);
    dv_copy_dtoh_async(a, p, r, 0, n, 0, &c);
    dv_future_wait_ordered(&c);
    is_status(dv_host_free(a, p), DV_OK, "%llu bytes: a buffer freed while a copy into it is in "
              "flight", (unsigned long long)n);
    dv_host_alloc(a, n, &q);
    ok(q != p && !dv_future_done(&c), "the next buffer of its size is another one (%p, %p)", p, q);
    is_status(dv_future_wait(&c), DV_OK, "the copy finishes");
    dv_future_wait(&h);
    dv_host_free(a, q);
    /* Both copies done: one of the two comes back (the pool's own
     * choice), and nothing new was mapped for it. */
    uint64_t reserved = stats(a).host_reserved;
    dv_host_alloc(a, n, &again);
    ok((again == p || again == q) && stats(a).host_reserved == reserved,
       "after the copies a freed buffer is handed out again");
    dv_host_free(a, again);
    dv_ref_release(r);
    dv_actor_destroy(a);
}

static void test_reuse_after_copies(void)
{
    reuse_after_copies(2 * MiB); /* a class of its own: one per slab */
    reuse_after_copies(3 * MiB); /* large */
}

static void test_budget(void)
{
    dv_actor *a = make(8 * MiB, false);
    void *p1 = NULL, *p2 = NULL, *p3 = NULL;
    is_status(dv_host_alloc(a, 4 * MiB, &p1), DV_OK, "budget 8 MiB: 4 MiB");
    is_status(dv_host_alloc(a, 4 * MiB, &p2), DV_OK, "another 4 MiB");
    is_status(dv_host_alloc(a, 2 * MiB, &p3), DV_EOUT_OF_BUDGET, "2 MiB more: DV_EOUT_OF_BUDGET");
    const dv_error_detail *d = dv_last_error();
    ok(d->requested == 2 * MiB && d->remaining == 0, "the detail: %llu requested, %llu left (%s)",
       (unsigned long long)d->requested, (unsigned long long)d->remaining, d->message);
    dv_host_free(a, p2);
    is_status(dv_host_alloc(a, 2 * MiB, &p3), DV_OK, "after a free (its 4 MiB cached, then given "
                                                     "back): 2 MiB fit");
    /* Pageable copies: the 64 MiB staging does not fit, the driver copies. */
    uint64_t n = 1 * MiB;
    unsigned char *src = malloc(n), *dst = malloc(n);
    for (uint64_t i = 0; i < n; i++)
        src[i] = (unsigned char)(i ^ (i >> 8));
    dv_ref r;
    dv_alloc(a, n, 0, "x", &r);
    int rc = dv_copy_htod(a, r, 0, src, n, 0);
    if (rc == DV_OK)
        rc = dv_copy_dtoh(a, dst, r, 0, n, 0);
    dv_actor_stats st = stats(a);
    ok(rc == DV_OK && memcmp(src, dst, n) == 0 && st.direct_copies == 2 && st.staged_copies == 0,
       "no room for the staging: pageable copies go to the driver, and are right (%s; %llu "
       "direct)",
       dv_err_name(rc), (unsigned long long)st.direct_copies);
    dv_ref_release(r);
    free(src);
    free(dst);
    dv_host_free(a, p1);
    dv_host_free(a, p3);
    dv_actor_destroy(a);

    /* A budget under one 2 MiB slab: small buffers come from smaller
     * slabs, as many as fit; past it the detail names the caller's bytes. */
    a = make(1 * MiB, false);
    void *small[256];
    unsigned got = 0;
    while (got < 256 && dv_host_alloc(a, 4096, &small[got]) == DV_OK)
        got++;
    rc = dv_host_alloc(a, 4096, &p2);
    d = dv_last_error();
    ok(got == 256 && rc == DV_EOUT_OF_BUDGET && d->requested == 4096,
       "budget 1 MiB: %u buffers of 4 KiB, then %s for %llu bytes (%s)", got, dv_err_name(rc),
       (unsigned long long)d->requested, d->message);
    if (got > 0)
        memset(small[got - 1], 0x5a, 4096);
    for (unsigned i = 0; i < got; i++)
        dv_host_free(a, small[i]);
    is_status(dv_host_alloc(a, 512 * 1024, &p1), DV_OK, "then 512 KiB");
    dv_host_free(a, p1);
    dv_actor_destroy(a);
}

static void test_register(void)
{
    dv_actor *a = make(0, false);
    uint64_t n = 2 * MiB;
    unsigned char *mem = aligned_alloc(4096, n), *other = aligned_alloc(4096, n);
    is_status(dv_host_register(a, mem, n), DV_OK, "register 2 MiB of the caller's");
    dv_actor_stats st = stats(a);
    ok(st.host_registered == n, "counted as registered (%llu)",
       (unsigned long long)st.host_registered);
    is_status(dv_host_register(a, mem + 4096, 4096), DV_EINVAL, "a range inside it: DV_EINVAL");
    is_status(dv_host_register(a, mem - 4096 + n, 8192), DV_EINVAL,
              "a range across its end: DV_EINVAL");
    void *pool = NULL;
    dv_host_alloc(a, 4096, &pool);
    is_status(dv_host_register(a, pool, 4096), DV_EINVAL, "a buffer of the pool: DV_EINVAL");
    is_status(dv_host_register(a, other, 0), DV_EINVAL, "zero bytes: DV_EINVAL");
    is_status(dv_host_unregister(a, mem + 4096), DV_EINVAL, "unregister inside the range: "
                                                            "DV_EINVAL");
    is_status(dv_host_unregister(a, other), DV_EINVAL, "unregister a range never registered: "
                                                       "DV_EINVAL");
    dv_ref r;
    dv_alloc(a, n, 0, "x", &r);
    dv_memset(a, r, 0, 9, n, 0);
    dv_actor_stats st0 = stats(a);
    dv_future h, c;
    hold(a, 1, 100000000, &h);
    dv_future_init(&c, 0);
    memset(mem, 0, n);
    dv_copy_dtoh_async(a, mem, r, 0, n, 1, &c);
    dv_future_wait_ordered(&c);
    is_status(dv_host_unregister(a, mem), DV_OK, "unregister while a copy into it waits on the "
                                                 "device");
    ok(dv_future_done(&c) && mem[0] == 9 && mem[n - 1] == 9,
       "returned only after the copy finished, its bytes there");
    dv_future_wait(&h);
    st = stats(a);
    ok(st.staged_copies == st0.staged_copies && st.host_registered == 0,
       "the copy was not staged; nothing registered any more");
    is_status(dv_host_unregister(a, mem), DV_EINVAL, "unregister twice: DV_EINVAL");
    is_status(dv_host_register(a, mem, n), DV_OK, "the range may be registered again");
    is_status(dv_host_unregister(a, mem), DV_OK, "and unregistered");
    dv_host_free(a, pool);
    dv_ref_release(r);
    dv_actor_destroy(a);
    free(mem);
    free(other);
}

/* dv_host_unregister returns once the copies that used the range have
 * finished: their futures are complete by then (with the sim's random
 * delays, the device often finishes just before the call is handled). */
static void test_unregister_completes(void)
{
    dv_actor_config cfg;
    dv_actor *a = NULL;
    dv_actor_config_init(&cfg);
    cfg.backend = HOSTMEM_ON_CUDA ? DV_BACKEND_CUDA : DV_BACKEND_SIM;
    cfg.streams = 3;
    cfg.sim_delay_max_us = 200;
    cfg.sim_seed = 42;
    if (dv_actor_create(&cfg, &a) != DV_OK)
        bail_out("no actor: %s", dv_last_error()->message);
    uint64_t n = 64 * 1024;
    dv_ref r;
    dv_alloc(a, n, 0, "x", &r);
    int early = 0, failed = 0;
    for (int i = 0; i < 300; i++) {
        unsigned char *mem = aligned_alloc(4096, n);
        memset(mem, i & 0xFF, n);
        dv_future f;
        dv_future_init(&f, 0);
        failed += dv_host_register(a, mem, n) != DV_OK;
        failed += dv_copy_htod_async(a, r, 0, mem, n, (dv_stream)(i % 3), &f) != DV_OK;
        failed += dv_host_unregister(a, mem) != DV_OK;
        early += !dv_future_done(&f);
        failed += dv_future_wait(&f) != DV_OK;
        free(mem);
    }
    ok(failed == 0 && early == 0,
       "300 copies from a registered range, each unregistered at once: every copy's future "
       "complete when the call returns (%d not, %d failed)",
       early, failed);
    dv_ref_release(r);
    dv_actor_destroy(a);
}

static void test_reset(void)
{
    dv_actor *a = make(0, false);
    uint64_t n = MiB;
    unsigned char *p = NULL;
    dv_host_alloc(a, n, (void **)&p);
    memset(p, 0x5a, n);
    is_status(dv_actor_reset(a), DV_OK, "reset");
    ok(p[0] == 0x5a && p[n - 1] == 0x5a, "the buffer kept its bytes");
    dv_ref r;
    dv_alloc(a, n, 0, "x", &r);
    dv_actor_stats st0 = stats(a);
    int rc = dv_copy_htod(a, r, 0, p, n, 0);
    memset(p, 0, n);
    if (rc == DV_OK)
        rc = dv_copy_dtoh(a, p, r, 0, n, 1);
    dv_actor_stats st = stats(a);
    ok(rc == DV_OK && p[7] == 0x5a && st.staged_copies == st0.staged_copies &&
           st.direct_copies == st0.direct_copies,
       "copies through it after the reset: page-locked again, right (%s)", dv_err_name(rc));
    is_status(dv_host_free(a, p), DV_OK, "freed after the reset");
    dv_ref_release(r);
    dv_actor_destroy(a);
}

static void test_bad_pointers(void)
{
    /* b on a device of its own (one actor owns a device). */
    dv_actor *a = make(0, false), *b = make_on(DV_BACKEND_SIM, 0, false);
    unsigned char *p = NULL, *q = NULL;
    dv_host_alloc(a, 8192, (void **)&p);
    dv_host_alloc(b, 8192, (void **)&q);
    is_status(dv_host_free(a, NULL), DV_EINVAL, "free NULL: DV_EINVAL");
    is_status(dv_host_free(NULL, p), DV_EINVAL, "free on a NULL actor: DV_EINVAL");
    is_status(dv_host_free(a, p + 16), DV_EINVAL, "free inside a buffer: DV_EINVAL");
    is_status(dv_host_free(a, q), DV_EINVAL, "free another actor's buffer: DV_EINVAL");
    int stack;
    is_status(dv_host_free(a, &stack), DV_EINVAL, "free a stack address: DV_EINVAL");
    is_status(dv_host_free(a, p), DV_OK, "free it");
    is_status(dv_host_free(a, p), DV_EINVAL, "free it twice: DV_EINVAL");
    ok(stats(a).host_buffers == 0 && stats(b).host_buffers == 1, "nothing else changed");
    dv_host_free(b, q);
    dv_actor_destroy(a);
    dv_actor_destroy(b);
    a = make(0, false);
    dv_host_alloc(a, 4096, (void **)&p);
    dv_actor_shutdown(a);
    is_status(dv_host_free(a, p), DV_ESHUTDOWN, "free after shutdown: DV_ESHUTDOWN");
    is_status(dv_host_alloc(a, 4096, (void **)&p), DV_ESHUTDOWN,
              "alloc after shutdown: DV_ESHUTDOWN");
    dv_actor_destroy(a); /* frees what was left */
}

static void test_checker(void)
{
    dv_actor *a = make(0, true);
    uint64_t n = 64 * 1024;
    void *p = NULL;
    dv_ref r;
    dv_alloc(a, n, 0, "x", &r);
    dv_memset(a, r, 0, 1, n, 0);
    dv_host_alloc(a, n, &p);
    dv_future h, c;
    hold(a, 0, 50000000, &h);
    dv_future_init(&c, 0);
    dv_copy_dtoh_async(a, p, r, 0, n, 0, &c);
    dv_future_wait_ordered(&c);
    uint64_t pieces = stats(a).check_pieces;
    is_status(dv_host_free(a, p), DV_OK, "checker on: a free while a copy into the buffer is in "
                                         "flight, never waited for, is made");
    dv_actor_stats st = stats(a);
    ok(st.hazards == 1, "and reported as a hazard (%llu)", (unsigned long long)st.hazards);
    dv_error_detail last;
    dv_actor_last_hazard(a, &last);
    diag("%s", last.message);
    ok(st.check_pieces < pieces, "the buffer's history went with it (%llu pieces, then %llu)",
       (unsigned long long)pieces, (unsigned long long)st.check_pieces);
    dv_future_wait(&c);
    dv_future_wait(&h);
    dv_host_alloc(a, n, &p);
    dv_future_init(&c, 0);
    dv_copy_dtoh_async(a, p, r, 0, n, 1, &c);
    dv_future_wait(&c);
    is_status(dv_host_free(a, p), DV_OK, "a free after waiting for the copy");
    ok(stats(a).hazards == 1, "is not a hazard");
    dv_ref_release(r);
    dv_actor_destroy(a);
}

/* Copies that reach past the page-locked memory they start in: into the
 * next pool buffer, past a registered range's end.  Every buffer they
 * reach is held for them: not handed out again, not unregistered, while
 * the copy may still write it.  (Before, only the buffer holding the
 * copy's start was: the next one went to a new owner, whose data the old
 * copy then overwrote, and dv_host_unregister returned at once.) */
typedef struct opener {
    gate *g;
    unsigned ms;
} opener;

static void *open_later(void *p)
{
    opener *o = p;
    usleep(o->ms * 1000u);
    (void)gate_open(o->g);
    return NULL;
}

static void test_copies_across_buffers(void)
{
    dv_actor *a = make(0, false);
    dv_ref r;
    dv_alloc(a, 8192, 0, "src", &r);
    dv_memset(a, r, 0, 0xab, 8192, 0);
    dv_sync(a, 0);

    /* Two adjacent 4 KiB buffers of one slab; one copy into both. */
    void *p0 = NULL, *p1 = NULL;
    dv_host_alloc(a, 4096, &p0);
    dv_host_alloc(a, 4096, &p1);
    if ((unsigned char *)p1 != (unsigned char *)p0 + 4096) {
        skip("the two buffers are not adjacent (%p, %p)", p0, p1);
        dv_host_free(a, p0), dv_host_free(a, p1);
    } else {
        gate g;
        dv_future f;
        dv_future_init(&f, 0);
        gate_close(&g, a, 1);
        int rc = dv_copy_dtoh_async(a, p0, r, 0, 8192, 1, &f);
        dv_future_wait_ordered(&f);
        dv_host_free(a, p0);
        dv_host_free(a, p1);
        enum { N = 1200 };
        void **q = calloc(N, sizeof(*q));
        int taken = 0, got_p1 = 0;
        for (int i = 0; i < N && dv_host_alloc(a, 4096, &q[i]) == DV_OK; i++, taken++) {
            got_p1 += q[i] == p1;
            memset(q[i], 0x11, 4096);
        }
        (void)gate_open(&g);
        int frc = dv_future_wait(&f);
        int hit = 0;
        for (int i = 0; i < taken; i++)
            hit += ((unsigned char *)q[i])[0] != 0x11 || ((unsigned char *)q[i])[4095] != 0x11;
        ok(rc == DV_OK && frc == DV_OK && got_p1 == 0 && hit == 0,
           "a copy into two adjacent pool buffers, both freed while it waits: neither handed out "
           "again before it ends (%d of %d new buffers were the second, %d overwritten)",
           got_p1, taken, hit);
        for (int i = 0; i < taken; i++)
            dv_host_free(a, q[i]);
        free(q);
    }

    /* A registered range, a copy from its last 4 KiB on past its end. */
    size_t span = 2 * MiB;
    unsigned char *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        bail_out("mmap");
    memset(m, 0, span);
    gate g;
    dv_future f;
    dv_future_init(&f, 0);
    int reg = dv_host_register(a, m, 1 * MiB);
    gate_close(&g, a, 1);
    int rc = dv_copy_dtoh_async(a, m + MiB - 4096, r, 0, 8192, 1, &f);
    dv_future_wait_ordered(&f);
    opener o = {&g, 300};
    pthread_t t;
    pthread_create(&t, NULL, open_later, &o);
    int un = dv_host_unregister(a, m);
    bool done = dv_future_done(&f);
    bool landed = m[MiB - 4096] == 0xab && m[MiB + 4095] == 0xab;
    pthread_join(t, NULL);
    ok(reg == DV_OK && rc == DV_OK && un == DV_OK && done && landed,
       "a copy from a registered range's last 4 KiB on past its end: dv_host_unregister returns "
       "after it (%s, %s, %s, the copy %s, its bytes %s)",
       dv_err_name(reg), dv_err_name(rc), dv_err_name(un), done ? "done" : "not done",
       landed ? "there" : "not there yet");
    dv_future_wait(&f);
    munmap(m, span);
    dv_ref_release(r);
    dv_actor_destroy(a);
}

int main(void)
{
    plan(66);
    test_sizes();
    test_copies();
    test_reuse_after_copies();
    test_budget();
    test_register();
    test_unregister_completes();
    test_copies_across_buffers();
    test_reset();
    test_bad_pointers();
    test_checker();
    return tap_done();
}
