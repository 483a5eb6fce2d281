/* The pool's growth by mapping on the sim (support/region_tests.h), and
 * what only the sim can show: a trim waits for a slow stream's use of the
 * memory it unmaps, a device too full for a new mapping has the pool give
 * back its free mappings and try again, a failed map leaves nothing
 * behind, and space two streams freed side by side serves a third behind
 * the slower one's write without the host waiting for it. */
#include <time.h>

#include "driver/sim.h"
#include "support/region_tests.h"

#define SIM_ONLY_TESTS 19

static double ms_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

static void sim_only(test_env *t)
{
    dv_resource *pool = rg_pool(t, 0);
    dv_block a, b, c;
    struct timespec t0;

    /* Trim behind a slow write: A is written on a slowed stream 1, freed
     * (its use fenced onto its stream 0); the trim unmaps it only after
     * the write. */
    int rc = pool != NULL ? dv__res_allocate(pool, 4 * RG_MIB, 0, rg_tag(1), &a) : DV_EINVAL;
    rc |= pool != NULL ? dv__res_allocate(pool, 4 * RG_MIB, 0, rg_tag(2), &b) : DV_EINVAL;
    dv__sim_stream_set_delay(t->env.streams[1], 200 * 1000);
    if (rc == DV_OK) {
        rc |= dv__res_prepare_block_use(pool, dv__block_id_of(&a), 1, DV_ACCESS_WRITE);
        rc |= dv__drv_memset_d8(t->env.streams[1], a.ptr, 0xAB, a.bytes);
        rc |= dv__res_finish_block_use(pool, dv__block_id_of(&a), 1, DV_ACCESS_WRITE);
        rc |= dv__res_deallocate(pool, &a);
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t released = 0;
    if (rc == DV_OK)
        rc = dv__pool_trim(pool, &released);
    double ms = ms_since(&t0);
    dv__sim_stream_set_delay(t->env.streams[1], 0);
    ok(rc == DV_OK && released == 4 * RG_MIB && ms >= 150.0,
       "sim: trim unmapped the freed 4 MiB only after the slow write to it (%.0f ms, %llu)", ms,
       (unsigned long long)released);

    /* A full device: the sim has 1 GiB.  600 MiB, then 2 MiB after it;
     * the 600 freed; 700 MiB does not fit beside what is mapped, so the
     * pool unmaps the free 600 and maps again. */
    rc = dv__res_deallocate(pool, &b) | dv__pool_trim(pool, NULL);
    rc |= dv__res_allocate(pool, 600 * RG_MIB, 0, rg_tag(3), &a);
    rc |= dv__res_allocate(pool, 2 * RG_MIB, 0, rg_tag(4), &b);
    rc |= dv__res_deallocate(pool, &a);
    int rc2 = dv__res_allocate(pool, 700 * RG_MIB, 0, rg_tag(5), &c);
    ok(rc == DV_OK && rc2 == DV_OK && rg_mapped(t) <= 1024 * RG_MIB,
       "sim: 700 MiB fits once the free 600 MiB is unmapped (%s; %llu MiB mapped)",
       dv_err_name(rc2), (unsigned long long)(rg_mapped(t) / RG_MIB));
    ok(dv__sim_allocated_bytes(t->drv, 0) == rg_mapped(t),
       "sim: the device counts exactly what the pool mapped (%llu)",
       (unsigned long long)dv__sim_allocated_bytes(t->drv, 0));
    dv_block d;
    int rc3 = dv__res_allocate(pool, 400 * RG_MIB, 0, rg_tag(6), &d);
    ok(rc3 == DV_EDEVICE_OOM && dv_last_error()->requested == 400 * RG_MIB,
       "sim: 400 MiB more does not fit: DV_EDEVICE_OOM, the detail names the request (%s, %llu)",
       dv_err_name(rc3), (unsigned long long)dv_last_error()->requested);
    if (rc2 == DV_OK)
        rc |= dv__res_deallocate(pool, &c);
    rc |= dv__res_deallocate(pool, &b) | dv__pool_trim(pool, NULL);

    /* A map that fails once: the pool trims and tries again. */
    uint64_t maps = dv__sim_calls(t->drv, DV_CALL_MEM_MAP);
    dv__sim_inject(t->drv, DV_CALL_MEM_MAP, 1, DV_CU_OUT_OF_MEMORY);
    rc2 = dv__res_allocate(pool, 3 * RG_MIB, 0, rg_tag(7), &a);
    /* 4 MiB in two extents of a granule: the refused one, then both. */
    ok(rc2 == DV_OK && dv__sim_calls(t->drv, DV_CALL_MEM_MAP) == maps + 3,
       "sim: a map refused once is tried again after a trim (%s, %llu calls)", dv_err_name(rc2),
       (unsigned long long)(dv__sim_calls(t->drv, DV_CALL_MEM_MAP) - maps));
    /* Refused for good (more than the device has): an error, nothing
     * left mapped for it. */
    uint64_t before = rg_mapped(t);
    rc2 = dv__res_allocate(pool, 1536 * RG_MIB, 0, rg_tag(8), &b);
    ok(rc2 == DV_EDEVICE_OOM && rg_mapped(t) == before &&
           dv__sim_allocated_bytes(t->drv, 0) == before &&
           dv_last_error()->requested == 1536 * RG_MIB,
       "sim: 1.5 GiB on a 1 GiB device answers DV_EDEVICE_OOM and maps nothing (%s, %llu)",
       dv_err_name(rc2), (unsigned long long)rg_mapped(t));
    if (pool != NULL) {
        (void)dv__res_deallocate(pool, &a);
        dv__res_destroy_stack(pool);
    }
    dv__res_env_sync(&t->env);

    /* X (3 MiB, stream 0) and Y (3 MiB, stream 1) side by side; Y written
     * on a slowed stream 1, both freed.  6 MiB on stream 2 takes both as
     * one block without mapping and without the host waiting for the
     * write: stream 2 waits for it on the device, so what stream 2 writes
     * next stays. */
    pool = rg_pool(t, 0);
    dv_block x, y, z;
    rc = pool != NULL ? dv__res_allocate(pool, 3 * RG_MIB, 0, rg_tag(9), &x) : DV_EINVAL;
    rc |= pool != NULL ? dv__res_allocate(pool, 3 * RG_MIB, 1, rg_tag(10), &y) : DV_EINVAL;
    uint64_t mapped = rg_mapped(t);
    dv__sim_stream_set_delay(t->env.streams[1], 200 * 1000);
    if (rc == DV_OK) {
        rc |= dv__res_prepare_block_use(pool, dv__block_id_of(&y), 1, DV_ACCESS_WRITE);
        rc |= dv__drv_memset_d8(t->env.streams[1], y.ptr, 0xAB, y.bytes);
        rc |= dv__res_finish_block_use(pool, dv__block_id_of(&y), 1, DV_ACCESS_WRITE);
        rc |= dv__res_deallocate(pool, &y) | dv__res_deallocate(pool, &x);
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc2 = rc == DV_OK ? dv__res_allocate(pool, 6 * RG_MIB, 2, rg_tag(11), &z) : DV_EINVAL;
    ms = ms_since(&t0);
    ok(rc2 == DV_OK && z.ptr == x.ptr && rg_mapped(t) == mapped && y.ptr == x.ptr + 3 * RG_MIB,
       "sim: 3 + 3 MiB freed side by side on streams 0 and 1 serve 6 MiB on stream 2 in place "
       "(%s, %llu MiB mapped before, %llu after)",
       dv_err_name(rc2), (unsigned long long)(mapped / RG_MIB),
       (unsigned long long)(rg_mapped(t) / RG_MIB));
    ok(rc2 == DV_OK && ms < 100.0,
       "sim: the host did not wait for stream 1's slow write to take it (%.0f ms)", ms);
    rc = rc2 == DV_OK ? rg_fill(t, &z, 51, 2) : rc2;
    dv__res_env_sync(&t->env); /* stream 1's write done too */
    ok(rc == DV_OK && rg_holds(t, &z, 51, 2),
       "sim: stream 2's write after it stays (stream 2 waited for stream 1 on the device)");
    dv__sim_stream_set_delay(t->env.streams[1], 0);
    if (pool != NULL) {
        if (rc2 == DV_OK)
            (void)dv__res_deallocate(pool, &z);
        dv__res_destroy_stack(pool);
    }

    /* Moving memory never takes what the device still uses: A and C (8 MiB
     * each, small blocks after each) freed, C just written on a slowed
     * stream; 12 MiB at the most the pool ever mapped unmaps A's extents
     * but not C's (it waits for the write a moment, then maps more), and
     * the slow write lands in mapped memory. */
    pool = rg_pool(t, 0);
    dv_block s1, s2;
    rc = pool != NULL ? DV_OK : DV_EINVAL;
    if (pool != NULL) {
        rc |= rg_pieces(pool, &a, &s1, &c, &s2);
        rc |= dv__res_deallocate(pool, &a);
        dv__res_env_sync(&t->env);
        dv__sim_stream_set_delay(t->env.streams[1], 200 * 1000);
        rc |= dv__res_prepare_block_use(pool, dv__block_id_of(&c), 1, DV_ACCESS_WRITE);
        rc |= dv__drv_memset_d8(t->env.streams[1], c.ptr, 0xCD, c.bytes);
        rc |= dv__res_finish_block_use(pool, dv__block_id_of(&c), 1, DV_ACCESS_WRITE);
        rc |= dv__res_deallocate(pool, &c);
    }
    mapped = rg_mapped(t);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc2 = rc == DV_OK ? dv__res_allocate(pool, 12 * RG_MIB, 0, rg_tag(16), &z) : DV_EINVAL;
    ms = ms_since(&t0);
    ok(rc2 == DV_OK && rg_mapped(t) > mapped && rg_mapped(t) <= mapped + 12 * RG_MIB &&
           ms < 100.0,
       "sim: 12 MiB moves the passed free memory only, then maps more (%s; %llu MiB before, "
       "%llu after; %.1f ms)",
       dv_err_name(rc2), (unsigned long long)(mapped / RG_MIB),
       (unsigned long long)(rg_mapped(t) / RG_MIB), ms);
    dv__res_env_sync(&t->env);
    dv__sim_stream_set_delay(t->env.streams[1], 0);
    rc = rc2 == DV_OK ? rg_fill(t, &z, 61, 0) : rc2;
    ok(rc == DV_OK && rg_holds(t, &z, 61, 1) && rg_fill(t, &s1, 62, 1) == DV_OK &&
           rg_holds(t, &s1, 62, 0),
       "sim: the slow write landed in memory still mapped; the device is sound after it");
    if (pool != NULL) {
        if (rc2 == DV_OK)
            (void)dv__res_deallocate(pool, &z);
        (void)dv__res_deallocate(pool, &s1);
        (void)dv__res_deallocate(pool, &s2);
        dv__res_destroy_stack(pool);
    }
    /* A move keeps its donors' memory for the request and gives back at
     * once what it does not map again: the device holds what is mapped,
     * no more, even with pieces of another size than the new extents. */
    uint64_t remaps = dv__sim_calls(t->drv, DV_CALL_MEM_REMAP);
    uint64_t kept = dv__sim_calls(t->drv, DV_CALL_MEM_UNMAP_KEEP);
    rg_move moved = rg_twelve_over_pieces(t, false);
    ok(moved.rc == DV_OK && dv__sim_calls(t->drv, DV_CALL_MEM_REMAP) - remaps == moved.remapped &&
           dv__sim_calls(t->drv, DV_CALL_MEM_UNMAP_KEEP) - kept == moved.unmapped,
       "sim: the move unmapped %llu extents keeping their memory, mapped %llu of them again",
       (unsigned long long)(dv__sim_calls(t->drv, DV_CALL_MEM_UNMAP_KEEP) - kept),
       (unsigned long long)(dv__sim_calls(t->drv, DV_CALL_MEM_REMAP) - remaps));
    /* A piece that cannot be mapped again is released, and new memory
     * made in its place: the move still serves the request. */
    dv__sim_inject(t->drv, DV_CALL_MEM_REMAP, 1, DV_CU_OUT_OF_MEMORY);
    moved = rg_twelve_over_pieces(t, false);
    dv__sim_inject(t->drv, DV_CALL_MEM_REMAP, 0, 0);
    ok(moved.rc == DV_OK && moved.usable && moved.remapped + 1 == moved.unmapped &&
           dv__sim_allocated_bytes(t->drv, 0) == 0,
       "sim: a failed map of kept memory: released, made anew (%llu of %llu mapped again, %s)",
       (unsigned long long)moved.remapped, (unsigned long long)moved.unmapped,
       dv_err_name(moved.rc));

    /* With 256 MiB held, extents are 8 MiB: A (10 MiB: 8 and 2) and C
     * (40 MiB: five of 8) freed, 48 MiB at the most ever mapped moves
     * them; the pieces of 8 MiB are mapped again, A's 2 MiB is not of a
     * new extent's size and is released. */
    dv_block big;
    pool = rg_pool(t, 0);
    rc = pool != NULL ? dv__res_allocate(pool, 256 * RG_MIB, 0, rg_tag(35), &big) : DV_EINVAL;
    rc |= pool != NULL ? dv__res_allocate(pool, 10 * RG_MIB, 0, rg_tag(30), &a) : DV_EINVAL;
    rc |= pool != NULL ? dv__res_allocate(pool, 64 * 1024, 0, rg_tag(31), &s1) : DV_EINVAL;
    rc |= pool != NULL ? dv__res_allocate(pool, 40 * RG_MIB, 0, rg_tag(32), &c) : DV_EINVAL;
    rc |= pool != NULL ? dv__res_allocate(pool, 64 * 1024, 0, rg_tag(33), &s2) : DV_EINVAL;
    if (rc == DV_OK)
        rc = dv__res_deallocate(pool, &a) | dv__res_deallocate(pool, &c);
    dv__res_env_sync(&t->env);
    mapped = rg_mapped(t);
    remaps = dv__sim_calls(t->drv, DV_CALL_MEM_REMAP);
    uint64_t releases = dv__sim_calls(t->drv, DV_CALL_MEM_RELEASE);
    /* The first release fails: it is tried again. */
    dv__sim_inject(t->drv, DV_CALL_MEM_RELEASE, 1, DV_CU_UNKNOWN);
    rc2 = rc == DV_OK ? dv__res_allocate(pool, 48 * RG_MIB, 0, rg_tag(34), &z) : DV_EINVAL;
    dv__sim_inject(t->drv, DV_CALL_MEM_RELEASE, 0, 0);
    remaps = dv__sim_calls(t->drv, DV_CALL_MEM_REMAP) - remaps;
    releases = dv__sim_calls(t->drv, DV_CALL_MEM_RELEASE) - releases;
    ok(rc2 == DV_OK && remaps > 0 && releases > 0,
       "sim: 48 MiB over 10 and 40 MiB freed: %llu MiB mapped before, %llu after; %llu extents "
       "mapped again, %llu released",
       (unsigned long long)(mapped / RG_MIB), (unsigned long long)(rg_mapped(t) / RG_MIB),
       (unsigned long long)remaps, (unsigned long long)releases);
    ok(rc2 == DV_OK && dv__sim_allocated_bytes(t->drv, 0) == rg_mapped(t) &&
           rg_fill(t, &z, 71, 0) == DV_OK && rg_holds(t, &z, 71, 1),
       "sim: after it (its first release failed, tried again) the device holds what is mapped "
       "(%llu MiB, %llu mapped), and the block is usable",
       (unsigned long long)(dv__sim_allocated_bytes(t->drv, 0) / RG_MIB),
       (unsigned long long)(rg_mapped(t) / RG_MIB));
    if (pool != NULL) {
        if (rc2 == DV_OK)
            (void)dv__res_deallocate(pool, &z);
        if (rc == DV_OK)
            (void)dv__res_deallocate(pool, &big);
        (void)dv__res_deallocate(pool, &s1);
        (void)dv__res_deallocate(pool, &s2);
        dv__res_destroy_stack(pool);
    }
    dv__res_env_sync(&t->env);

    /* Space several streams freed side by side comes together once the
     * device is past the frees: X (3 MiB, stream 0) freed and passed, then
     * Y (3 MiB, stream 1, right after it) freed: one 6 MiB range of
     * stream 1's, which serves 6 MiB on stream 1 in place. */
    pool = rg_pool(t, 0);
    rc = pool != NULL ? dv__res_allocate(pool, 3 * RG_MIB, 0, rg_tag(40), &x) : DV_EINVAL;
    rc |= pool != NULL ? dv__res_allocate(pool, 3 * RG_MIB, 1, rg_tag(41), &y) : DV_EINVAL;
    rc |= pool != NULL ? dv__res_allocate(pool, 3 * RG_MIB, 2, rg_tag(42), &c) : DV_EINVAL;
    if (rc == DV_OK) {
        rc = dv__res_deallocate(pool, &x);
        dv__res_env_sync(&t->env);
        rc |= dv__pool_learn_passed(pool);
        rc |= dv__res_deallocate(pool, &y);
    }
    dv_pool_stats st = pool != NULL ? rg_stats(pool) : (dv_pool_stats){0};
    ok(rc == DV_OK && y.ptr == x.ptr + 3 * RG_MIB && st.largest_free >= 6 * RG_MIB,
       "sim: 3 MiB of stream 0's, passed, and 3 MiB stream 1 frees beside it are one range "
       "(largest free %llu MiB)",
       (unsigned long long)(st.largest_free / RG_MIB));
    mapped = rg_mapped(t);
    rc2 = rc == DV_OK ? dv__res_allocate(pool, 6 * RG_MIB, 1, rg_tag(43), &z) : DV_EINVAL;
    ok(rc2 == DV_OK && z.ptr == x.ptr && rg_mapped(t) == mapped,
       "sim: which serves 6 MiB on stream 1 in place, nothing mapped (%s)", dv_err_name(rc2));
    if (rc2 == DV_OK)
        rc2 = dv__res_deallocate(pool, &z);

    /* A small block does not split stream 1's large space where stream
     * 0 freed a small hole the device is past: 1 MiB freed on stream 0,
     * then 64 KiB on stream 1, whose own space is what is left of the 6
     * MiB above (4 MiB). */
    dv_block h, small;
    rc = pool != NULL ? dv__res_allocate(pool, RG_MIB, 0, rg_tag(44), &h) : DV_EINVAL;
    rc |= pool != NULL ? dv__res_allocate(pool, RG_MIB, 0, rg_tag(45), &a) : DV_EINVAL;
    if (rc == DV_OK) {
        rc = dv__res_deallocate(pool, &h);
        dv__res_env_sync(&t->env);
        rc |= dv__pool_learn_passed(pool);
    }
    rc2 = rc == DV_OK ? dv__res_allocate(pool, 64 * 1024, 1, rg_tag(46), &small) : DV_EINVAL;
    ok(rc2 == DV_OK && small.ptr >= h.ptr && small.ptr < h.ptr + RG_MIB,
       "sim: 64 KiB on stream 1 comes from the 1 MiB hole stream 0 freed (%s, at +%lld KiB)",
       dv_err_name(rc2), (long long)((int64_t)(small.ptr - h.ptr) / 1024));
    if (pool != NULL) {
        if (rc2 == DV_OK)
            (void)dv__res_deallocate(pool, &small);
        if (rc == DV_OK)
            (void)dv__res_deallocate(pool, &a);
        (void)dv__res_deallocate(pool, &c);
        dv__res_destroy_stack(pool);
    }
    dv__res_env_sync(&t->env);
    ok(dv__sim_allocated_bytes(t->drv, 0) == 0, "sim: the device holds nothing at the end (%llu)",
       (unsigned long long)dv__sim_allocated_bytes(t->drv, 0));
}

int main(void)
{
    test_env t;
    plan(1 + REGION_TESTS + SIM_ONLY_TESTS);
    if (!is_status(test_env_sim(&t, 3, 50), DV_OK, "sim environment with 3 streams"))
        return tap_done();
    region_tests(&t);
    sim_only(&t);
    test_env_close(&t);
    return tap_done();
}
