/*
 * The pool with aliases (dv_pool_config.alias), on whichever backend the
 * test environment opened: physical granules bound to address granules as
 * blocks come, kept mapped where they served.  A small workload holds one
 * granule and trim gives it back; a workload that repeats makes no driver
 * call once it has run; blocks keep their data while memory moves under
 * other addresses; memory freed on another stream serves at once; the cap
 * and the device's size are kept, and at the cap a block goes where a
 * granule in use has room; random work on three streams keeps the
 * books straight (dv__pool_check); a destroy gives everything back.
 */
#ifndef DV_TESTS_ALIAS_TESTS_H
#define DV_TESTS_ALIAS_TESTS_H

#include <stdlib.h>
#include <string.h>

#include "support/region_tests.h"

static dv_resource *al_pool(test_env *t, uint64_t max_pool)
{
    dv_pool_config cfg;
    dv__pool_config_init(&cfg);
    cfg.max_pool_bytes = max_pool;
    cfg.alias = true;
    return rg_pool_with(t, &cfg);
}

/* Driver mapping calls so far: maps (remaps among them) and unmaps. */
static uint64_t al_calls(test_env *t)
{
    return atomic_load(&t->env.maps) + atomic_load(&t->env.unmaps);
}

/* One step of a workload that repeats: blocks of several sizes, freed in
 * another order than they came, some while others come; each block holds
 * its pattern until it is freed.  false if anything failed. */
static bool al_step(test_env *t, dv_resource *pool, bool *kept)
{
    static const uint64_t size[] = {3 * RG_MIB, 64 * 1024, 9 * RG_MIB, 5 * RG_MIB / 2,
                                    1024,       6 * RG_MIB, 300 * 1024, 12 * RG_MIB};
    enum { N = sizeof(size) / sizeof(size[0]) };
    dv_block b[N];
    bool fine = true;
    for (int i = 0; i < N && fine; i++) {
        fine = dv__res_allocate(pool, size[i], 0, rg_tag(100 + (uint64_t)i), &b[i]) == DV_OK &&
               rg_fill(t, &b[i], (uint8_t)(i * 13 + 1), 0) == DV_OK;
        if (fine && i % 3 == 2) {
            /* Two freed while the rest are live. */
            *kept &= rg_holds(t, &b[i - 2], (uint8_t)((i - 2) * 13 + 1), 0);
            fine = dv__res_deallocate(pool, &b[i - 2]) == DV_OK;
        }
        fine = fine && dv__pool_check(pool) == DV_OK;
    }
    for (int i = N; fine && i-- > 0;) {
        if (i % 3 == 0 && i + 2 < N)
            continue; /* freed above */
        *kept &= rg_holds(t, &b[i], (uint8_t)(i * 13 + 1), 0);
        fine = dv__res_deallocate(pool, &b[i]) == DV_OK && dv__pool_check(pool) == DV_OK;
    }
    return fine;
}

/* A random workload on three streams: n operations, at most 48 blocks
 * live, sizes from 256 bytes to 16 MiB (log-uniform), a trim now and
 * then; the books checked after every operation.  The first failure's
 * operation, or -1. */
static long al_random(test_env *t, dv_resource *pool, uint32_t seed, long n, bool *kept)
{
    enum { LIVE = 48 };
    dv_block b[LIVE];
    bool used[LIVE] = {0};
    uint8_t pat[LIVE] = {0};
    uint64_t x = seed * 0x9E3779B97F4A7C15u + 1;
    for (long op = 0; op < n; op++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int i = (int)(x % LIVE);
        dv_stream_id s = (dv_stream_id)((x >> 8) % 3);
        int rc = DV_OK;
        if (used[i]) {
            if ((x >> 20) % 8 == 0 && b[i].requested != 0)
                *kept &= rg_holds(t, &b[i], pat[i], (dv_stream_id)b[i].alloc_stream);
            rc = dv__res_deallocate(pool, &b[i]);
            used[i] = false;
        } else {
            uint64_t bytes = UINT64_C(256) << ((x >> 12) % 17);
            bytes += (x >> 32) % bytes;
            rc = dv__res_allocate(pool, bytes, s, rg_tag((uint64_t)op), &b[i]);
            used[i] = rc == DV_OK;
            pat[i] = (uint8_t)(x >> 40);
            if (rc == DV_OK && (x >> 24) % 8 == 0)
                rc = rg_fill(t, &b[i], pat[i], s);
            else if (rc == DV_OK)
                b[i].requested = 0; /* not filled: not compared */
        }
        if (rc == DV_OK && (x >> 48) % 97 == 0)
            rc = dv__pool_trim(pool, NULL);
        if (rc != DV_OK || dv__pool_check(pool) != DV_OK)
            return op;
    }
    for (int i = 0; i < LIVE; i++)
        if (used[i] && dv__res_deallocate(pool, &b[i]) != DV_OK)
            return n;
    return dv__pool_check(pool) == DV_OK ? -1 : n;
}

#define ALIAS_TESTS 23

static void alias_tests(test_env *t)
{
    uint64_t g = 0;
    int rc = dv__drv_vmm_granularity(t->env.ctx, &g);
    dv_resource *pool = al_pool(t, 0);
    dv_block a, b, c;

    if (!ok(rc == DV_OK && g != 0 && pool != NULL, "alias: the device maps and the pool is made")) {
        for (int i = 1; i < ALIAS_TESTS; i++)
            ok(false, "alias: no pool");
        if (pool != NULL)
            dv__res_destroy_stack(pool);
        return;
    }

    /* The driver: memory mapped at two addresses shows the same bytes at
     * both (what a pool with aliases must keep two live blocks out of);
     * here two granules of it, mapped whole at the second address too
     * (the driver maps from offset zero only).  An unmap takes whole
     * mappings. */
    {
        dv_dptr va = 0;
        uint64_t h = 0;
        bool same = false;
        int cut = DV_OK;
        uint8_t *w = malloc(g), *r = malloc(g);
        rc = w != NULL && r != NULL ? dv__drv_va_reserve(t->env.ctx, 4 * g, &va) : DV_ENOMEM;
        if (rc == DV_OK && (rc = dv__drv_mem_map(t->env.ctx, va, 2 * g, &h)) == DV_OK) {
            if ((rc = dv__drv_mem_remap(t->env.ctx, va + 2 * g, 2 * g, h)) == DV_OK) {
                for (uint64_t i = 0; i < g; i++)
                    w[i] = (uint8_t)(i * 31 + 7);
                memset(r, 0, g);
                rc = dv__drv_memcpy_htod(t->env.streams[0], va + g, w, g);
                rc = rc != DV_OK ? rc : dv__drv_stream_sync(t->env.streams[0]);
                rc = rc != DV_OK ? rc : dv__drv_memcpy_dtoh(t->env.streams[1], r, va + 3 * g, g);
                rc = rc != DV_OK ? rc : dv__drv_stream_sync(t->env.streams[1]);
                same = rc == DV_OK && memcmp(w, r, g) == 0;
                (void)dv__drv_mem_unmap_keep(t->env.ctx, va + 2 * g, 2 * g, h);
            }
            cut = dv__drv_mem_unmap_keep(t->env.ctx, va, g, h);
            (void)dv__drv_mem_unmap(t->env.ctx, va, 2 * g, h);
        }
        if (va != 0)
            (void)dv__drv_va_release(t->env.ctx, va, 4 * g);
        free(w);
        free(r);
        ok(same, "alias: two-granule memory, mapped at another address too, shows a write"
                 " to its second granule at one address at the other (%s)",
           dv_err_name(rc));
        ok(cut != DV_OK, "alias: an unmap of half a mapping is refused (%s)", dv_err_name(cut));
    }

    /* Small: three 1 KiB blocks hold one granule; trim gives it back.
     * (Each stream has its own slice of the addresses: on three streams
     * they would hold three.) */
    rc = dv__res_allocate(pool, 1024, 1, rg_tag(1), &a) |
         dv__res_allocate(pool, 1024, 1, rg_tag(2), &b) |
         dv__res_allocate(pool, 1024, 1, rg_tag(3), &c);
    dv_pool_stats st = rg_stats(pool);
    ok(rc == DV_OK && st.chunk_bytes == g && rg_mapped(t) == g && dv__pool_check(pool) == DV_OK,
       "alias: three 1 KiB blocks on one stream hold one granule (%llu held, %llu counted)",
       (unsigned long long)st.chunk_bytes, (unsigned long long)rg_mapped(t));
    rc = dv__res_deallocate(pool, &a) | dv__res_deallocate(pool, &b) | dv__res_deallocate(pool, &c);
    uint64_t released = 0;
    rc |= dv__res_env_sync(&t->env) | dv__pool_trim(pool, &released);
    ok(rc == DV_OK && released == g && rg_mapped(t) == 0 && dv__pool_check(pool) == DV_OK,
       "alias: freed and trimmed, the granule goes back (%llu released)",
       (unsigned long long)released);

    /* A workload that repeats: after its first steps, no driver call. */
    bool kept = true, fine = true;
    for (int i = 0; i < 3 && fine; i++)
        fine = al_step(t, pool, &kept);
    uint64_t calls = al_calls(t), held = rg_stats(pool).chunk_bytes;
    for (int i = 0; i < 5 && fine; i++)
        fine = al_step(t, pool, &kept);
    ok(fine && kept, "alias: eight steps of a repeated workload, every block holding its data");
    is_u64(al_calls(t) - calls, 0, "alias: steps 4 to 8 map, move and unmap nothing");
    ok(rg_stats(pool).chunk_bytes == held && held <= 40 * RG_MIB,
       "alias: and hold what the first steps held (%llu MiB)",
       (unsigned long long)(held / RG_MIB));

    /* Memory moves under another address: 24 MiB at A and 1 KiB after it
     * at C; A freed; 26 MiB does not fit where A was and goes past C, where
     * A's idle memory serves it (remaps), with one granule made.  (A fresh
     * pool: nothing learnt of which granules were live together.) */
    dv__res_destroy_stack(pool);
    pool = al_pool(t, 0);
    rc = dv__res_allocate(pool, 24 * RG_MIB, 0, rg_tag(4), &a);
    rc |= dv__res_allocate(pool, 1024, 0, rg_tag(5), &c);
    dv_dptr at_a = a.ptr;
    rc |= dv__res_deallocate(pool, &a) | dv__res_env_sync(&t->env);
    uint64_t maps0 = atomic_load(&t->env.maps), remaps0 = atomic_load(&t->env.remaps);
    rc |= dv__res_allocate(pool, 26 * RG_MIB, 0, rg_tag(6), &b);
    rc |= rg_fill(t, &b, 77, 0) | rg_fill(t, &c, 78, 0);
    ok(rc == DV_OK && b.ptr > at_a && rg_holds(t, &b, 77, 0) && rg_holds(t, &c, 78, 0) &&
           dv__pool_check(pool) == DV_OK,
       "alias: a block at a new address beside a live one, both holding their data");
    uint64_t moved = atomic_load(&t->env.remaps) - remaps0,
             made = atomic_load(&t->env.maps) - maps0 - moved; /* new memory */
    ok(made == 1 && moved == 12 && rg_stats(pool).chunk_bytes == 28 * RG_MIB,
       "alias: A's idle memory moved there (%llu granules made, %llu moved, %llu MiB held)",
       (unsigned long long)made, (unsigned long long)moved,
       (unsigned long long)(rg_stats(pool).chunk_bytes / RG_MIB));
    rc = dv__res_deallocate(pool, &b) | dv__res_deallocate(pool, &c);

    /* Freed on a stream with work queued, taken on another at once. */
    rc |= dv__res_allocate(pool, 8 * RG_MIB, 1, rg_tag(7), &a);
    rc |= rg_fill(t, &a, 5, 1);
    rc |= dv__res_deallocate(pool, &a);
    rc |= dv__res_allocate(pool, 8 * RG_MIB, 2, rg_tag(8), &b);
    rc |= rg_fill(t, &b, 6, 2);
    ok(rc == DV_OK && rg_holds(t, &b, 6, 2) && dv__pool_check(pool) == DV_OK,
       "alias: freed on stream 1, 8 MiB on stream 2 at once");
    rc = dv__res_deallocate(pool, &b);
    dv__res_destroy_stack(pool);

    /* The cap: 3 MiB held in two granules; 4 MiB more would pass 6 MiB. */
    pool = al_pool(t, 6 * RG_MIB);
    rc = dv__res_allocate(pool, 3 * RG_MIB, 0, rg_tag(9), &a);
    int over = dv__res_allocate(pool, 4 * RG_MIB + 4096, 0, rg_tag(10), &b);
    ok(rc == DV_OK && over == DV_EOUT_OF_BUDGET && rg_stats(pool).chunk_bytes <= 6 * RG_MIB &&
           dv__pool_check(pool) == DV_OK,
       "alias: past max_pool_bytes: DV_EOUT_OF_BUDGET (%s), nothing more held",
       dv_err_name(over));
    rc = dv__res_deallocate(pool, &a) | dv__res_env_sync(&t->env);
    rc |= dv__res_allocate(pool, 4 * RG_MIB + 4096, 0, rg_tag(11), &b);
    ok(rc == DV_OK && rg_stats(pool).chunk_bytes <= 6 * RG_MIB && dv__pool_check(pool) == DV_OK,
       "alias: once the first is freed, it fits under the cap (%s)", dv_err_name(rc));
    rc = dv__res_deallocate(pool, &b);
    dv__res_destroy_stack(pool);

    /* The cap held whole by two streams' blocks, each in a granule of
     * its own slice of the addresses: a block of a third stream, which
     * would need a granule of its own, goes where memory is, in the room
     * the first stream's granule has left; one that fits no such room is
     * refused, nothing changed. */
    pool = al_pool(t, 2 * g);
    rc = dv__res_allocate(pool, RG_MIB, 0, rg_tag(30), &a) |
         dv__res_allocate(pool, RG_MIB, 1, rg_tag(31), &b);
    rc |= rg_fill(t, &a, 31, 0) | rg_fill(t, &b, 32, 1);
    int third = dv__res_allocate(pool, g / 2 - 64 * 1024, 2, rg_tag(32), &c);
    if (third == DV_OK)
        third = rg_fill(t, &c, 33, 2);
    ok(rc == DV_OK && third == DV_OK && rg_stats(pool).chunk_bytes == 2 * g &&
           rg_holds(t, &a, 31, 0) && rg_holds(t, &b, 32, 1) && rg_holds(t, &c, 33, 2) &&
           dv__pool_check(pool) == DV_OK,
       "alias: at the cap, a third stream's block is placed in another stream's granule, every "
       "block holding its data (%s, %s)",
       dv_err_name(rc), dv_err_name(third));
    dv_block d;
    over = dv__res_allocate(pool, g, 2, rg_tag(33), &d);
    ok(over == DV_EOUT_OF_BUDGET && rg_stats(pool).chunk_bytes == 2 * g &&
           dv__pool_check(pool) == DV_OK,
       "alias: a block no granule in use has room for: DV_EOUT_OF_BUDGET (%s)",
       dv_err_name(over));
    rc = dv__res_deallocate(pool, &a) | dv__res_deallocate(pool, &b);
    if (third == DV_OK)
        rc |= dv__res_deallocate(pool, &c);
    ok(rc == DV_OK && dv__pool_check(pool) == DV_OK, "alias: and freed, the books straight");
    dv__res_destroy_stack(pool);

    /* 40 small blocks (2.5 MiB) freed, nothing live: their stacks are
     * flushed, the free space whole again; the next 40 take the same
     * granules (no driver call). */
    {
        dv_block sm[40];
        pool = al_pool(t, 0);
        rc = DV_OK;
        for (int i = 0; i < 40; i++)
            rc |= dv__res_allocate(pool, 64 * 1024, 0, rg_tag(20 + (uint64_t)i), &sm[i]);
        for (int i = 0; i < 40; i++)
            rc |= dv__res_deallocate(pool, &sm[i]);
        uint64_t stacked = rg_stats(pool).stacked_bytes, calls0 = al_calls(t);
        for (int i = 0; i < 40; i++)
            rc |= dv__res_allocate(pool, 64 * 1024, 0, rg_tag(60 + (uint64_t)i), &sm[i]);
        ok(rc == DV_OK && stacked == 0 && al_calls(t) == calls0 && dv__pool_check(pool) == DV_OK,
           "alias: nothing live, the small blocks' stacks flushed (%llu stacked), and the next"
           " ones placed again with no driver call",
           (unsigned long long)stacked);
        for (int i = 0; i < 40; i++)
            (void)dv__res_deallocate(pool, &sm[i]);
        dv__res_destroy_stack(pool);
    }

    /* More than the device: refused as such.  More than a stream's slice
     * of the addresses but not than the device: served across slices. */
    pool = al_pool(t, 0);
    uint64_t dev_bytes = 0, free_now = 0;
    dv__drv_mem_info(t->env.ctx, &free_now, &dev_bytes);
    rc = dv__res_allocate(pool, dev_bytes + dev_bytes / 2, 0, rg_tag(13), &a);
    ok(rc == DV_EDEVICE_OOM && dv__pool_check(pool) == DV_OK,
       "alias: one and a half times the device: DV_EDEVICE_OOM (%s)", dv_err_name(rc));
    rc = dv__res_allocate(pool, dev_bytes * 3 / 4, 1, rg_tag(14), &a);
    ok(rc == DV_OK && rg_stats(pool).chunk_bytes <= dev_bytes && dv__pool_check(pool) == DV_OK,
       "alias: three quarters of the device, more than a stream's slice, served (%s)",
       dv_err_name(rc));
    if (rc == DV_OK)
        (void)dv__res_deallocate(pool, &a);
    dv__res_destroy_stack(pool);

    /* Random work on three streams. */
    pool = al_pool(t, 0);
    kept = true;
    long failed = al_random(t, pool, 20261128, 4000, &kept);
    ok(failed < 0, "alias: 4000 random operations on three streams, the books straight after each"
                   " (failed at %ld%s%s)",
       failed, failed < 0 ? "" : ": ", failed < 0 ? "" : dv_last_error()->message);
    ok(kept, "alias: ... every block compared held its data");

    /* A destroy with a block live gives back every byte and address. */
    uint64_t before = rg_mapped(t);
    rc = dv__res_allocate(pool, 5 * RG_MIB, 1, rg_tag(12), &a);
    ok(rc == DV_OK && rg_mapped(t) >= before, "alias: a block live at the destroy");
    dv__res_destroy_stack(pool);
    is_u64(rg_mapped(t), 0, "alias: destroyed, nothing mapped any more");
}

#endif
