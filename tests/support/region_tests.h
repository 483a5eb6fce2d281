/*
 * The pool's growth by mapping (regions), on whichever backend the test
 * environment opened: a small workload maps little, a request that
 * outgrows the free space at the end maps only the difference and gets
 * one contiguous block there, a pool that grows step by step maps little
 * more than it hands out, trim unmaps whole free mappings in the middle
 * and at the end without touching the data around them, a later request
 * fills such a hole, another stream extends the end behind the free, and
 * everything goes back at the end.
 */
#ifndef DV_TESTS_REGION_TESTS_H
#define DV_TESTS_REGION_TESTS_H

#include <stdlib.h>
#include <string.h>

#include "support/env_setup.h"

#define RG_MIB (UINT64_C(1) << 20)

/* A pool of cfg over the driver's allocator; NULL if it cannot be made. */
static TAP_UNUSED dv_resource *rg_pool_with(test_env *t, const dv_pool_config *cfg)
{
    dv_resource *async = NULL, *pool = NULL;
    if (dv__async_resource_create(&t->env, &async) != DV_OK)
        return NULL;
    if (dv__pool_resource_create(async, cfg, &pool) != DV_OK) {
        dv__res_destroy_stack(async);
        return NULL;
    }
    return pool;
}

static dv_resource *rg_pool_kept(test_env *t, uint64_t max_pool, bool keep_mapped)
{
    dv_pool_config cfg;
    dv__pool_config_init(&cfg);
    cfg.max_pool_bytes = max_pool;
    cfg.keep_mapped = keep_mapped;
    return rg_pool_with(t, &cfg);
}

static dv_resource *rg_pool(test_env *t, uint64_t max_pool)
{
    return rg_pool_kept(t, max_pool, false);
}

static dv_pool_stats rg_stats(dv_resource *pool)
{
    dv_pool_stats st = {0};
    (void)dv__pool_stats_get(pool, &st);
    return st;
}

static uint64_t rg_mapped(test_env *t)
{
    return atomic_load(&t->env.mapped_bytes);
}

/* Fill a block with a pattern of seed on stream s (synchronously). */
static int rg_fill(test_env *t, const dv_block *b, uint8_t seed, dv_stream_id s)
{
    size_t n = (size_t)b->requested;
    uint8_t *h = malloc(n);
    if (h == NULL)
        return DV_ENOMEM;
    for (size_t i = 0; i < n; i++)
        h[i] = (uint8_t)(seed + i * 7);
    int rc = dv__drv_memcpy_htod(t->env.streams[s], b->ptr, h, n);
    if (rc == DV_OK)
        rc = dv__drv_stream_sync(t->env.streams[s]);
    free(h);
    return rc;
}

/* Does the block still hold seed's pattern? */
static bool rg_holds(test_env *t, const dv_block *b, uint8_t seed, dv_stream_id s)
{
    size_t n = (size_t)b->requested;
    uint8_t *h = malloc(n);
    bool same = h != NULL;
    if (h != NULL && dv__drv_memcpy_dtoh(t->env.streams[s], h, b->ptr, n) == DV_OK &&
        dv__drv_stream_sync(t->env.streams[s]) == DV_OK) {
        for (size_t i = 0; i < n && same; i++)
            same = h[i] == (uint8_t)(seed + i * 7);
    } else {
        same = false;
    }
    free(h);
    return same;
}

static dv_tag rg_tag(uint64_t id)
{
    return (dv_tag){"region", id};
}

/* A, S1, C, S2 side by side on stream 0: 8 MiB, 64 KiB, 8 MiB, 64 KiB. */
static int rg_pieces(dv_resource *pool, dv_block *a, dv_block *s1, dv_block *c, dv_block *s2)
{
    return dv__res_allocate(pool, 8 * RG_MIB, 0, rg_tag(17), a) |
           dv__res_allocate(pool, 64 * 1024, 0, rg_tag(18), s1) |
           dv__res_allocate(pool, 8 * RG_MIB, 0, rg_tag(19), c) |
           dv__res_allocate(pool, 64 * 1024, 0, rg_tag(20), s2);
}

/* In a fresh pool (the most it mapped is what it holds): the pieces, A and
 * C freed, then 12 MiB: what was mapped before and after, the extents
 * unmapped, and whether the new block and S1 hold what is written. */
typedef struct rg_move {
    int rc;
    uint64_t before, after, unmapped, remapped;
    bool usable;
} rg_move;

static rg_move rg_twelve_over_pieces(test_env *t, bool keep_mapped)
{
    rg_move m = {.rc = DV_ENOMEM};
    dv_resource *pool = rg_pool_kept(t, 0, keep_mapped);
    dv_block a, s1, c, s2;
    if (pool == NULL)
        return m;
    m.rc = rg_pieces(pool, &a, &s1, &c, &s2);
    m.rc |= dv__res_deallocate(pool, &a) | dv__res_deallocate(pool, &c);
    dv__res_env_sync(&t->env);
    m.before = rg_mapped(t);
    uint64_t unmaps = atomic_load(&t->env.unmaps), remaps = atomic_load(&t->env.remaps);
    m.rc |= dv__res_allocate(pool, 12 * RG_MIB, 0, rg_tag(21), &a);
    m.after = rg_mapped(t);
    m.unmapped = atomic_load(&t->env.unmaps) - unmaps;
    m.remapped = atomic_load(&t->env.remaps) - remaps;
    m.usable = m.rc == DV_OK && rg_fill(t, &a, 41, 0) == DV_OK && rg_holds(t, &a, 41, 1) &&
               rg_fill(t, &s1, 42, 0) == DV_OK && rg_holds(t, &s1, 42, 1);
    if (m.rc == DV_OK)
        m.rc = dv__res_deallocate(pool, &a) | dv__res_deallocate(pool, &s1) |
               dv__res_deallocate(pool, &s2);
    dv__res_destroy_stack(pool);
    return m;
}

#define REGION_TESTS 28

/* granule: the device's (2 MiB on the sim and the H100). */
static TAP_UNUSED void region_tests(test_env *t)
{
    uint64_t g = 0;
    int rc = dv__drv_vmm_granularity(t->env.ctx, &g);
    dv_resource *pool = rg_pool(t, 0);
    dv_block a, b, c, d, e;

    if (!ok(rc == DV_OK && g != 0 && pool != NULL,
            "region: the device maps (granularity %llu) and the pool is made (%s)",
            (unsigned long long)g, dv_err_name(rc))) {
        for (int i = 1; i < REGION_TESTS; i++)
            ok(false, "region: no pool");
        if (pool != NULL)
            dv__res_destroy_stack(pool);
        return;
    }

    /* Small: three 1 KiB blocks map one granule. */
    rc = dv__res_allocate(pool, 1024, 0, rg_tag(1), &a);
    rc |= dv__res_allocate(pool, 1024, 0, rg_tag(2), &b);
    rc |= dv__res_allocate(pool, 1024, 0, rg_tag(3), &c);
    dv_pool_stats st = rg_stats(pool);
    ok(rc == DV_OK && st.chunk_bytes == g && rg_mapped(t) == g && st.chunks == 1,
       "region: three 1 KiB blocks map one granule (%llu mapped, %llu counted, %u regions)",
       (unsigned long long)st.chunk_bytes, (unsigned long long)rg_mapped(t), st.chunks);
    rc = dv__res_deallocate(pool, &a) | dv__res_deallocate(pool, &b) | dv__res_deallocate(pool, &c);
    uint64_t released = 0;
    rc |= dv__pool_trim(pool, &released);
    ok(rc == DV_OK && released == g && rg_mapped(t) == 0 && rg_stats(pool).chunks == 0,
       "region: freed and trimmed, the granule is unmapped and the region gone (%llu released)",
       (unsigned long long)released);

    /* In place: 3 MiB maps 4; freed, then 6 MiB maps only 2 more, at the
     * same address. */
    rc = dv__res_allocate(pool, 3 * RG_MIB, 0, rg_tag(4), &a);
    dv_dptr first = a.ptr;
    uint64_t after_a = rg_mapped(t);
    rc |= dv__res_deallocate(pool, &a);
    rc |= dv__res_allocate(pool, 6 * RG_MIB, 0, rg_tag(5), &a);
    ok(rc == DV_OK && after_a == 4 * RG_MIB, "region: 3 MiB maps 4 MiB (two granules): %llu",
       (unsigned long long)after_a);
    ok(rc == DV_OK && a.ptr == first && rg_mapped(t) == 6 * RG_MIB,
       "region: then 6 MiB grows the end in place: same address, 6 MiB mapped (%llu)",
       (unsigned long long)rg_mapped(t));
    ok(rc == DV_OK && rg_fill(t, &a, 11, 0) == DV_OK && rg_holds(t, &a, 11, 1),
       "region: the block spanning both mappings reads back what was written");
    rc = dv__res_deallocate(pool, &a) | dv__pool_trim(pool, NULL);
    ok(rc == DV_OK && rg_mapped(t) == 0, "region: trimmed to nothing again (%llu)",
       (unsigned long long)rg_mapped(t));

    /* Growth step by step: 200 blocks of 1..3 MiB; the mapped bytes stay
     * within a few percent (and a granule) of what is handed out. */
    static dv_block many[200];
    uint64_t live = 0, worst_over = 0, seed = 12345;
    rc = DV_OK;
    for (int i = 0; i < 200 && rc == DV_OK; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t n = RG_MIB + (seed >> 33) % (2 * RG_MIB);
        rc = dv__res_allocate(pool, n, (dv_stream_id)(i % 2), rg_tag(100 + (uint64_t)i), &many[i]);
        live += many[i].bytes;
        uint64_t over = rg_mapped(t) > live ? rg_mapped(t) - live : 0;
        if (over * 1000 / live > worst_over)
            worst_over = over * 1000 / live;
    }
    ok(rc == DV_OK && rg_mapped(t) <= live + live / 10 + g,
       "region: 200 blocks of 1..3 MiB on two streams: %llu MiB mapped for %llu MiB live "
       "(worst %.1f%% over)",
       (unsigned long long)(rg_mapped(t) / RG_MIB), (unsigned long long)(live / RG_MIB),
       (double)worst_over / 10.0);
    for (int i = 0; i < 200; i++)
        rc |= dv__res_deallocate(pool, &many[i]);
    rc |= dv__pool_trim(pool, NULL);
    ok(rc == DV_OK && rg_mapped(t) == 0 && rg_stats(pool).chunks == 0,
       "region: all freed and trimmed: nothing mapped, no region (%llu)",
       (unsigned long long)rg_mapped(t));

    /* Holes: A, B, C of 8 MiB each map 8 MiB each. */
    rc = dv__res_allocate(pool, 8 * RG_MIB, 0, rg_tag(6), &a);
    rc |= dv__res_allocate(pool, 8 * RG_MIB, 0, rg_tag(7), &b);
    rc |= dv__res_allocate(pool, 8 * RG_MIB, 0, rg_tag(8), &c);
    ok(rc == DV_OK && rg_mapped(t) == 24 * RG_MIB && b.ptr == a.ptr + 8 * RG_MIB &&
           c.ptr == b.ptr + 8 * RG_MIB,
       "region: three 8 MiB blocks side by side, 24 MiB mapped (%llu)",
       (unsigned long long)rg_mapped(t));
    rc = rg_fill(t, &a, 21, 0) | rg_fill(t, &c, 23, 0);
    dv_dptr hole = b.ptr;
    rc |= dv__res_deallocate(pool, &b);
    released = 0;
    rc |= dv__pool_trim(pool, &released);
    ok(rc == DV_OK && released == 8 * RG_MIB && rg_mapped(t) == 16 * RG_MIB,
       "region: the middle one freed, trim unmaps its 8 MiB (%llu released, %llu mapped)",
       (unsigned long long)released, (unsigned long long)rg_mapped(t));
    ok(rg_holds(t, &a, 21, 1) && rg_holds(t, &c, 23, 1),
       "region: the blocks either side of the hole keep their data");
    st = rg_stats(pool);
    ok(st.chunk_bytes == 16 * RG_MIB && st.free_bytes == 0,
       "region: statistics: 16 MiB held, none free (%llu, %llu)",
       (unsigned long long)st.chunk_bytes, (unsigned long long)st.free_bytes);
    rc = dv__res_allocate(pool, 6 * RG_MIB, 1, rg_tag(9), &d);
    ok(rc == DV_OK && d.ptr == hole && rg_mapped(t) == 22 * RG_MIB,
       "region: 6 MiB on another stream fills the hole (0x%llx, hole 0x%llx; %llu mapped)",
       (unsigned long long)d.ptr, (unsigned long long)hole, (unsigned long long)rg_mapped(t));
    ok(rc == DV_OK && rg_fill(t, &d, 25, 1) == DV_OK && rg_holds(t, &d, 25, 0) &&
           rg_holds(t, &a, 21, 0) && rg_holds(t, &c, 23, 0),
       "region: the refilled hole and its neighbours hold their own data");
    /* The end: C freed and trimmed gives its mapping back too. */
    rc = dv__res_deallocate(pool, &c);
    released = 0;
    rc |= dv__pool_trim(pool, &released);
    ok(rc == DV_OK && released == 8 * RG_MIB && rg_mapped(t) == 14 * RG_MIB,
       "region: the last block freed and trimmed: its 8 MiB unmapped (%llu mapped)",
       (unsigned long long)rg_mapped(t));
    rc = dv__res_allocate(pool, 8 * RG_MIB, 0, rg_tag(10), &c);
    ok(rc == DV_OK && c.ptr == d.ptr + 6 * RG_MIB && rg_mapped(t) == 22 * RG_MIB,
       "region: 8 MiB asked again maps at the end, now just past the refilled hole "
       "(+%lld, %llu mapped)",
       (long long)(c.ptr - d.ptr), (unsigned long long)rg_mapped(t));
    rc = dv__res_deallocate(pool, &a) | dv__res_deallocate(pool, &c) |
         dv__res_deallocate(pool, &d) | dv__pool_trim(pool, NULL);
    ok(rc == DV_OK && rg_mapped(t) == 0, "region: empty again (%llu mapped)",
       (unsigned long long)rg_mapped(t));

    /* Another stream at the end: 3 MiB on stream 0 maps 4, leaving 1 MiB
     * free there; 3 MiB on stream 1 maps 2 more and takes the 1 MiB with
     * them (behind stream 0's position), one block. */
    rc = dv__res_allocate(pool, 3 * RG_MIB, 0, rg_tag(11), &a);
    rc |= dv__res_allocate(pool, 3 * RG_MIB, 1, rg_tag(12), &b);
    ok(rc == DV_OK && b.ptr == a.ptr + 3 * RG_MIB && rg_mapped(t) == 6 * RG_MIB,
       "region: stream 1 extends stream 0's free end in place (+%lld, %llu mapped)",
       (long long)(b.ptr - a.ptr), (unsigned long long)rg_mapped(t));
    ok(rc == DV_OK && rg_fill(t, &b, 31, 1) == DV_OK && rg_fill(t, &a, 32, 0) == DV_OK &&
           rg_holds(t, &b, 31, 1),
       "region: both blocks usable");

    /* Freed side by side on two streams, passed by the device: one
     * request on a third stream takes both as one block, mapping nothing. */
    rc = dv__res_deallocate(pool, &a) | dv__res_deallocate(pool, &b);
    dv__res_env_sync(&t->env);
    uint64_t mapped_before = rg_mapped(t);
    rc |= dv__res_allocate(pool, 6 * RG_MIB, 2, rg_tag(15), &a);
    ok(rc == DV_OK && a.ptr == b.ptr - 3 * RG_MIB && rg_mapped(t) == mapped_before,
       "region: 3 + 3 MiB freed on streams 0 and 1 serve 6 MiB on stream 2 in place "
       "(%llu mapped before, %llu after)",
       (unsigned long long)mapped_before, (unsigned long long)rg_mapped(t));
    ok(rc == DV_OK && rg_fill(t, &a, 33, 2) == DV_OK && rg_holds(t, &a, 33, 0),
       "region: the merged block is usable");
    rc = dv__res_allocate(pool, 64 * 1024, 1, rg_tag(16), &b);

    /* Enough free, but in pieces too small, with the pool at the most it
     * ever mapped: it unmaps the pieces' whole mappings before it maps the
     * request, so what it holds does not grow.  Keeping what is mapped, it
     * maps more instead. */
    rc = dv__res_deallocate(pool, &a) | dv__res_deallocate(pool, &b) | dv__pool_trim(pool, NULL);
    rg_move moved = rg_twelve_over_pieces(t, false);
    ok(moved.rc == DV_OK && moved.after <= moved.before && moved.unmapped > 0,
       "region: 12 MiB with 16 MiB free in two pieces: %llu MiB mapped before, %llu after "
       "(not %llu), %llu extents moved",
       (unsigned long long)(moved.before / RG_MIB), (unsigned long long)(moved.after / RG_MIB),
       (unsigned long long)((moved.before + 12 * RG_MIB) / RG_MIB),
       (unsigned long long)moved.unmapped);
    ok(moved.rc == DV_OK && moved.usable,
       "region: the 12 MiB block is usable, the small one before it too");
    /* The extents moved are a granule each, as the new ones are: their
     * memory is mapped again rather than released and made anew. */
    ok(moved.rc == DV_OK && moved.remapped > 0 && moved.remapped <= moved.unmapped,
       "region: the move mapped %llu of the %llu extents it unmapped again",
       (unsigned long long)moved.remapped, (unsigned long long)moved.unmapped);
    moved = rg_twelve_over_pieces(t, true);
    ok(moved.rc == DV_OK && moved.after >= moved.before + 10 * RG_MIB && moved.unmapped == 0,
       "region: keeping what is mapped, the same 12 MiB maps more (%llu MiB before, %llu after, "
       "%llu unmapped)",
       (unsigned long long)(moved.before / RG_MIB), (unsigned long long)(moved.after / RG_MIB),
       (unsigned long long)moved.unmapped);
    rc |= dv__res_allocate(pool, 6 * RG_MIB, 2, rg_tag(22), &a);
    rc |= dv__res_allocate(pool, 64 * 1024, 1, rg_tag(23), &b);

    /* A cap on the pool counts mapped bytes. */
    dv_resource *capped = rg_pool(t, 8 * RG_MIB);
    rc = capped != NULL ? dv__res_allocate(capped, 5 * RG_MIB, 0, rg_tag(13), &e) : DV_EINVAL;
    dv_block f;
    int rc2 = capped != NULL ? dv__res_allocate(capped, 5 * RG_MIB, 0, rg_tag(14), &f) : DV_OK;
    ok(rc == DV_OK && rc2 == DV_EOUT_OF_BUDGET,
       "region: max_pool_bytes 8 MiB: 5 MiB fits, 5 MiB more is DV_EOUT_OF_BUDGET (%s, %s)",
       dv_err_name(rc), dv_err_name(rc2));
    if (capped != NULL) {
        (void)dv__res_deallocate(capped, &e);
        dv__res_destroy_stack(capped);
    }

    /* Destroyed with blocks out (6 MiB and 64 KiB): everything unmapped. */
    dv__res_destroy_stack(pool);
    ok(rg_mapped(t) == 0, "region: destroying the pool with two blocks live unmaps all (%llu)",
       (unsigned long long)rg_mapped(t));
}

#endif
