/*
 * The planted-hazard corpus's harness.
 *
 * Each tests/hazards/<case>.t.c is one cross-stream ordering mistake made
 * through a path the launch recorder cannot see (a raw pointer, a task
 * that lies about its accesses, the host touching a buffer a copy still
 * uses...), or, with HZ_CORRECT defined, a correct neighbour of one: the
 * same program with its order made right.  A case defines HZ_WHAT (one
 * line: the mistake, or the neighbour), includes this file, and defines
 *
 *     static bool hz_plant(hz *h);
 *
 * hz_plant runs the program once and returns true when the data came out
 * wrong: different from what running the posted operations one after
 * another, in program order, would give.  Around the operation that
 * should come first it calls hz_first(h, stream) (before posting it) and
 * hz_settle(h) (after, before the operation that races with it).
 *
 * A mistake runs three times over:
 *   1. live, with the checker on (on the backend DV_BACKEND names: the
 *      real GPU in tools/gpu-check.sh, else the sim): hz_first queues a
 *      spin kernel, so the first operation is still running when the
 *      second is posted.  The checker must report it;
 *   2. quiet, with the checker on: no spin, and hz_settle pauses the host
 *      until the first operation has surely finished on the device,
 *      without telling devactor (no wait, no sync).  The checker must
 *      report it all the same: the program did not order the two;
 *   3. live, with the checker off, on the sim with random stream delays,
 *      up to HZ_TRIES seeds: the mistake must corrupt data at least once,
 *      so the corpus proves real bugs, not imagined ones.
 * A correct neighbour runs live and quiet with the checker on (no report,
 * no failure, the data right) and live with it off on a few seeds (the
 * data right every time).
 *
 * The launch helpers post and do not wait (a thread that waited for a
 * launch is ordered after it, and nothing would race); hz_sync_all waits
 * for everything posted.
 */
#ifndef DV_TESTS_HAZARDS_HAZARD_H
#define DV_TESTS_HAZARDS_HAZARD_H

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devactor.h"
#include "support/lib_call.h"
#include "tap.h"

#define HZ_N       (1u << 16) /* u32 words per block */
#define HZ_BYTES   ((uint64_t)HZ_N * 4)
#define HZ_TRIES   40
#define HZ_SPIN_NS UINT64_C(20000000) /* 20 ms */

#define HZ_POSTED        32 /* launches in flight at once */
#define HZ_QUIET_MS      50 /* a host pause the device surely finishes in */
#define HZ_CORRECT_SEEDS 4

typedef struct hz {
    dv_actor *a;
    bool check;
    bool quiet; /* hz_first does not spin; hz_settle pauses the host */
    dv_kernel *fill, *copy, *add, *sum, *spin;
    int refused; /* operations answered DV_EHAZARD */
    int failed;  /* operations that failed otherwise */
    int nposted;
    dv_future posted[HZ_POSTED]; /* launches posted, not yet waited for */
    dv_arg posted_args[HZ_POSTED][4];
    uint32_t host[HZ_N];
} hz;

static const dv_dim3 hz_grid = {64, 1, 1}, hz_block = {256, 1, 1};

/* Tally an operation's status. */
static TAP_UNUSED int hz_rc(hz *h, int rc, const char *what)
{
    if (rc == DV_EHAZARD) {
        h->refused++;
    } else if (rc != DV_OK) {
        h->failed++;
        diag("%s: %s: %s", what, dv_err_name(rc), dv_last_error()->message);
    }
    return rc;
}

static TAP_UNUSED dv_ref hz_alloc(hz *h, dv_stream s, const char *tag)
{
    dv_ref r = DV_REF_NULL;
    hz_rc(h, dv_alloc(h->a, HZ_BYTES, s, tag, &r), "alloc");
    return r;
}

/* The raw device address of a handle's block. */
static TAP_UNUSED uint64_t hz_ptr(dv_ref r)
{
    dv_ref_info info;
    return dv_ref_access(r, &info) == DV_OK ? info.ptr : 0;
}

/* Wait for every launch posted; tally their statuses. */
static TAP_UNUSED void hz_wait_posted(hz *h)
{
    for (int i = 0; i < h->nposted; i++)
        hz_rc(h, dv_future_wait(&h->posted[i]), "posted launch");
    h->nposted = 0;
}

/* Post a launch (its arguments kept until it is ordered). */
static TAP_UNUSED int hz_post(hz *h, dv_kernel *k, dv_dim3 grid, dv_dim3 block, dv_stream s,
                              const dv_arg *args, unsigned nargs, const char *what)
{
    if (h->nposted == HZ_POSTED)
        hz_wait_posted(h);
    int i = h->nposted++;
    memcpy(h->posted_args[i], args, nargs * sizeof(*args));
    dv_future_init(&h->posted[i], 0);
    int rc = dv_launch_async(h->a, k, grid, block, 0, s, h->posted_args[i], nargs, &h->posted[i]);
    if (rc != DV_OK)
        h->nposted--; /* refused at once: the call's status is the answer */
    return hz_rc(h, rc, what);
}

/* Delay everything queued on s after this by about ms milliseconds. */
static TAP_UNUSED void hz_spin(hz *h, dv_stream s)
{
    dv_arg args[] = {dv_arg_u64(HZ_SPIN_NS)};
    hz_post(h, h->spin, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, s, args, 1, "spin");
}

/* The operation that should come first goes on s next. */
static TAP_UNUSED void hz_first(hz *h, dv_stream s)
{
    if (!h->quiet)
        hz_spin(h, s);
}

/* Between the first operation and the one that races with it: in the
 * quiet variant the host pauses, unseen by devactor, until the first has
 * surely finished on the device. */
static TAP_UNUSED void hz_settle(hz *h)
{
    if (h->quiet) {
        struct timespec ts = {0, HZ_QUIET_MS * 1000000L};
        while (nanosleep(&ts, &ts) != 0)
            ;
    }
}

/* fill_u32 through a handle (tracked) or a raw pointer (untracked). */
static TAP_UNUSED int hz_fill(hz *h, dv_ref r, uint32_t v, dv_stream s)
{
    dv_arg args[] = {dv_arg_ref(r, DV_WRITE, 0), dv_arg_u32(v), dv_arg_u64(HZ_N)};
    return hz_post(h, h->fill, hz_grid, hz_block, s, args, 3, "fill");
}
static TAP_UNUSED int hz_fill_raw(hz *h, uint64_t ptr, uint32_t v, dv_stream s)
{
    dv_arg args[] = {dv_arg_ptr_access(ptr, DV_WRITE), dv_arg_u32(v), dv_arg_u64(HZ_N)};
    return hz_post(h, h->fill, hz_grid, hz_block, s, args, 3, "raw fill");
}

/* fill_u32 of words [first, first + words) of the block at p, raw, with
 * that range declared (dv_arg_ptr_range). */
static TAP_UNUSED int hz_fill_range(hz *h, uint64_t p, uint32_t first, uint32_t words, uint32_t v,
                                    dv_stream s)
{
    dv_arg args[] = {dv_arg_ptr_range(p + (uint64_t)first * 4, DV_WRITE, (uint64_t)words * 4),
                     dv_arg_u32(v), dv_arg_u64(words)};
    return hz_post(h, h->fill, hz_grid, hz_block, s, args, 3, "raw fill range");
}

/* copy (bytes) dst <- src, tracked or raw. */
static TAP_UNUSED int hz_copy(hz *h, dv_ref dst, dv_ref src, dv_stream s)
{
    dv_arg args[] = {dv_arg_ref(dst, DV_WRITE, 0), dv_arg_ref(src, DV_READ, 0),
                     dv_arg_u64(HZ_BYTES)};
    return hz_post(h, h->copy, hz_grid, hz_block, s, args, 3, "copy");
}
static TAP_UNUSED int hz_copy_raw(hz *h, uint64_t dst, uint64_t src, dv_stream s)
{
    dv_arg args[] = {dv_arg_ptr_access(dst, DV_WRITE), dv_arg_ptr_access(src, DV_READ),
                     dv_arg_u64(HZ_BYTES)};
    return hz_post(h, h->copy, hz_grid, hz_block, s, args, 3, "raw copy");
}

static TAP_UNUSED void hz_sync_all(hz *h)
{
    hz_wait_posted(h);
    for (dv_stream s = 0; s < 3; s++)
        hz_rc(h, dv_sync(h->a, s), "sync");
}

/* After every stream finished: is every word of r equal to v? */
static TAP_UNUSED bool hz_is(hz *h, dv_ref r, uint32_t v)
{
    hz_sync_all(h);
    memset(h->host, 0xA5, sizeof(h->host));
    if (hz_rc(h, dv_copy_dtoh(h->a, h->host, r, 0, HZ_BYTES, 0), "read back") != DV_OK)
        return false;
    for (uint32_t i = 0; i < HZ_N; i++)
        if (h->host[i] != v)
            return false;
    return true;
}

/* After every stream finished: r's words in h->host. */
static TAP_UNUSED bool hz_read_back(hz *h, dv_ref r)
{
    hz_sync_all(h);
    memset(h->host, 0xA5, sizeof(h->host));
    return hz_rc(h, dv_copy_dtoh(h->a, h->host, r, 0, HZ_BYTES, 0), "read back") == DV_OK;
}

/* Another thread runs fn(h, arg) to its end (joined before this returns):
 * its answer counts as an operation's (hz_rc, naming what). */
typedef int (*hz_thread_fn)(hz *h, void *arg);

typedef struct hz_thread {
    hz *h;
    hz_thread_fn fn;
    void *arg;
    int rc;
} hz_thread;

static void *hz_thread_main(void *p)
{
    hz_thread *t = p;
    t->rc = t->fn(t->h, t->arg);
    return NULL;
}

static TAP_UNUSED void hz_on_other_thread(hz *h, hz_thread_fn fn, void *arg, const char *what)
{
    hz_thread t = {h, fn, arg, -1};
    pthread_t id;
    if (pthread_create(&id, NULL, hz_thread_main, &t) != 0) {
        h->failed++;
        return;
    }
    pthread_join(id, NULL);
    hz_rc(h, t.rc, what);
}

static TAP_UNUSED bool hz_words_are(const uint32_t *p, uint32_t v)
{
    for (uint32_t i = 0; i < HZ_N; i++)
        if (p[i] != v)
            return false;
    return true;
}

static bool hz_plant(hz *h);

static int hz_open(hz *h, bool check, dv_backend backend, uint64_t seed)
{
    dv_actor_config cfg;
    memset(h, 0, sizeof(*h));
    dv_actor_config_init(&cfg);
    cfg.backend = backend;
    cfg.streams = 3;
    cfg.permissive = true; /* raw pointers are part of the corpus */
    cfg.check_order = check;
    cfg.sim_memory_bytes = 256 << 20;
    cfg.sim_seed = seed;
    cfg.sim_delay_max_us = 200;
    h->check = check;
    int rc = dv_actor_create(&cfg, &h->a);
    if (rc != DV_OK)
        return rc;
    if ((rc = dv_kernel_get(h->a, NULL, 0, "fill_u32", &h->fill)) == DV_OK &&
        (rc = dv_kernel_get(h->a, NULL, 0, "copy", &h->copy)) == DV_OK &&
        (rc = dv_kernel_get(h->a, NULL, 0, "add_u32", &h->add)) == DV_OK &&
        (rc = dv_kernel_get(h->a, NULL, 0, "checksum", &h->sum)) == DV_OK)
        rc = dv_kernel_get(h->a, NULL, 0, "spin", &h->spin);
    return rc;
}

/* One run with the checker on; its hazards counted into *hazards. */
static void hz_checked(hz *h, bool quiet, bool *corrupt, uint64_t *hazards, dv_error_detail *last)
{
    dv_actor_stats st;
    int rc = hz_open(h, true, DV_BACKEND_AUTO, 1);
    if (rc != DV_OK)
        bail_out("no actor: %s", dv_last_error()->message);
    h->quiet = quiet;
    *corrupt = hz_plant(h);
    hz_sync_all(h);
    dv_actor_stats_get(h->a, &st);
    dv_actor_last_hazard(h->a, last);
    *hazards = st.hazards;
}

int main(void)
{
    static hz h;
    dv_error_detail last;
    bool corrupt;
    uint64_t hazards;
    int rc;

    unsetenv("DV_CHECK_ORDER"); /* each run chooses for itself */
#ifdef HZ_CORRECT
    plan(7);
    diag("the correct neighbour: %s", HZ_WHAT);
    for (int quiet = 0; quiet <= 1; quiet++) {
        const char *v = quiet ? "quiet" : "live";
        hz_checked(&h, quiet, &corrupt, &hazards, &last);
        const char *backend = dv_actor_backend_name(h.a);
        ok(hazards == 0, "%s, checker on (%s): nothing reported (%llu hazards)", v, backend,
           (unsigned long long)hazards);
        if (hazards != 0)
            diag("%s", last.message);
        ok(h.failed == 0 && h.refused == 0, "%s, checker on: no operation failed", v);
        ok(!corrupt, "%s, checker on: the data is right", v);
        dv_actor_destroy(h.a);
    }
    int wrong = 0, failed = 0;
    for (int t = 1; t <= HZ_CORRECT_SEEDS; t++) {
        if ((rc = hz_open(&h, false, DV_BACKEND_SIM, (uint64_t)t * 7919)) != DV_OK)
            bail_out("no sim actor: %s", dv_last_error()->message);
        wrong += hz_plant(&h);
        hz_sync_all(&h);
        failed += h.failed + h.refused;
        dv_actor_destroy(h.a);
    }
    ok(wrong == 0 && failed == 0, "checker off (sim, %d seeds): the data is right every time",
       HZ_CORRECT_SEEDS);
#else
    plan(7);
    diag("the mistake: %s", HZ_WHAT);
    for (int quiet = 0; quiet <= 1; quiet++) {
        const char *v = quiet ? "quiet" : "live";
        hz_checked(&h, quiet, &corrupt, &hazards, &last);
        const char *backend = dv_actor_backend_name(h.a);
        ok(h.failed == 0, "%s, checker on (%s): no operation failed except for hazards", v,
           backend);
        ok(hazards > 0, "%s, checker on (%s): the hazard is reported (%llu hazards, %d refused)", v,
           backend, (unsigned long long)hazards, h.refused);
        ok(last.status == DV_EHAZARD && strstr(last.message, "hazard: ") != NULL,
           "%s: the report names both operations", v);
        diag("%s", last.message);
        dv_actor_destroy(h.a);
    }

    /* The checker off, on the sim with random delays: real corruption. */
    int corrupt_at = 0, failed = 0;
    for (int t = 1; t <= HZ_TRIES && corrupt_at == 0; t++) {
        if ((rc = hz_open(&h, false, DV_BACKEND_SIM, (uint64_t)t * 7919)) != DV_OK)
            bail_out("no sim actor: %s", dv_last_error()->message);
        if (hz_plant(&h))
            corrupt_at = t;
        hz_sync_all(&h);
        failed += h.failed + h.refused;
        dv_actor_destroy(h.a);
    }
    ok(corrupt_at > 0 && failed == 0,
       "checker off (sim): the mistake corrupts data (at try %d of %d), no operation failed",
       corrupt_at, HZ_TRIES);
#endif
    return tap_done();
}

#endif /* DV_TESTS_HAZARDS_HAZARD_H */
