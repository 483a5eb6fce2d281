/*
 * The planted-hazard corpus's harness.
 *
 * Each tests/hazards/<case>.t.c commits one cross-stream ordering mistake
 * through a path the launch recorder cannot see (a raw pointer, a task
 * that lies about its accesses, the host touching a buffer a copy still
 * uses...).  A case defines HZ_WHAT (one line: the mistake), includes this
 * file, and defines
 *
 *     static bool hz_plant(hz *h);
 *
 *  hz_plant makes the mistake once and returns
 * true when the data came out wrong: different from what running the
 * posted operations one after another, in program order, would give.
 *
 * The harness runs the case twice over:
 *   1. with the stream-order checker on (on the backend DV_BACKEND names,
 *      the real GPU in tools/gpu-check.sh, else the sim): the checker must
 *      report the hazard (dv_actor_stats.hazards > 0);
 *   2. with the checker off, on the sim with random stream delays, up to
 *      HZ_TRIES times with different seeds: the mistake must corrupt data
 *      at least once, so the corpus proves real bugs, not imagined ones.
 *
 * Cases make their race likely, not lucky: the operation that should come
 * first is queued behind a spin kernel (hz_spin) on its stream.  The
 * launch helpers post and do not wait (a thread that waited for a launch
 * is ordered after it, and nothing would race); hz_sync_all waits for
 * everything posted.
 */
#ifndef DV_TESTS_HAZARDS_HAZARD_H
#define DV_TESTS_HAZARDS_HAZARD_H

#include <stdlib.h>
#include <string.h>

#include "devactor.h"
#include "tap.h"

#define HZ_N       (1u << 16) /* u32 words per block */
#define HZ_BYTES   ((uint64_t)HZ_N * 4)
#define HZ_TRIES   40
#define HZ_SPIN_NS UINT64_C(20000000) /* 20 ms */

#define HZ_POSTED 32 /* launches in flight at once */

typedef struct hz {
    dv_actor *a;
    bool check;
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

int main(void)
{
    static hz h;
    dv_actor_stats st;
    dv_error_detail last;

    plan(5);
    diag("the mistake: %s", HZ_WHAT);
    unsetenv("DV_CHECK_ORDER"); /* each half chooses for itself */

    /* 1. The checker on, on the backend the environment names. */
    int rc = hz_open(&h, true, DV_BACKEND_AUTO, 1);
    if (rc != DV_OK)
        bail_out("no actor: %s", dv_last_error()->message);
    const char *backend = dv_actor_backend_name(h.a);
    (void)hz_plant(&h);
    hz_sync_all(&h);
    dv_actor_stats_get(h.a, &st);
    dv_actor_last_hazard(h.a, &last);
    ok(h.failed == 0, "checker on (%s): no operation failed except for hazards", backend);
    ok(st.hazards > 0, "checker on (%s): the hazard is reported (%llu hazards, %d refused)",
       backend, (unsigned long long)st.hazards, h.refused);
    ok(last.status == DV_EHAZARD && strstr(last.message, "hazard: ") != NULL,
       "the report names both operations");
    diag("%s", last.message);
    dv_actor_destroy(h.a);

    /* 2. The checker off, on the sim with random delays: real corruption. */
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
    ok(corrupt_at > 0, "checker off (sim): the mistake corrupts data (at try %d of %d)", corrupt_at,
       HZ_TRIES);
    ok(failed == 0, "checker off (sim): no operation failed");
    return tap_done();
}

#endif /* DV_TESTS_HAZARDS_HAZARD_H */
