/* The pool with aliases on the sim (support/alias_tests.h), and what only
 * the sim can do: a driver that refuses to map memory at a second address
 * (new memory is made instead) or faults while memory moves. */
#include "driver/sim.h"
#include "support/alias_tests.h"

static void sim_only(test_env *t)
{
    dv_resource *pool = al_pool(t, 0);
    dv_block a, b, c;
    /* A: one granule; C: 1 KiB in the next; A freed; B, 4 MiB, does not
     * fit A's place and goes past C: its two new granules would take A's
     * idle memory and one made anew.  The remap is refused once (not a
     * fault): new memory instead, and the next granule takes A's. */
    int rc = dv__res_allocate(pool, 2 * RG_MIB, 0, rg_tag(1), &a);
    rc |= dv__res_allocate(pool, 1024, 0, rg_tag(2), &c);
    rc |= dv__res_deallocate(pool, &a) | dv__res_env_sync(&t->env);
    uint64_t maps0 = atomic_load(&t->env.maps), remaps0 = atomic_load(&t->env.remaps);
    dv__sim_inject(t->drv, DV_CALL_MEM_REMAP, 1, DV_CU_INVALID_VALUE);
    rc |= dv__res_allocate(pool, 4 * RG_MIB, 0, rg_tag(3), &b);
    uint64_t moved = atomic_load(&t->env.remaps) - remaps0,
             made = atomic_load(&t->env.maps) - maps0 - moved; /* new memory */
    ok(rc == DV_OK && made == 1 && moved == 1 && dv__pool_check(pool) == DV_OK,
       "alias: a remap refused, new memory instead (%s, %llu made, %llu moved)", dv_err_name(rc),
       (unsigned long long)made, (unsigned long long)moved);
    rc = dv__res_deallocate(pool, &b) | dv__res_deallocate(pool, &c);
    ok(rc == DV_OK && dv__pool_check(pool) == DV_OK, "alias: and freed, the books straight");
    dv__res_destroy_stack(pool);

    /* Two small blocks of one granule freed onto a stack, the later with
     * a slow set queued before its free; the stack flushes newest first.
     * A trim must not release the granule under the set. */
    pool = al_pool(t, 0);
    rc = dv__res_allocate(pool, 64 * 1024, 0, rg_tag(4), &a) |
         dv__res_allocate(pool, 64 * 1024, 0, rg_tag(5), &b);
    rc |= dv__res_deallocate(pool, &a) | dv__res_env_sync(&t->env) | dv__pool_learn_passed(pool);
    dv__sim_stream_set_delay(t->env.streams[0], 100 * 1000);
    rc |= dv__drv_memset_d8(t->env.streams[0], b.ptr, 0xAA, 64 * 1024);
    rc |= dv__res_deallocate(pool, &b);
    uint64_t released = 0;
    rc |= dv__pool_trim(pool, &released);
    bool idle = true;
    dv__drv_stream_query(t->env.streams[0], &idle);
    ok(rc == DV_OK && (released == 0 || idle),
       "alias: a trim under a set still queued on the granule releases nothing (%llu released)",
       (unsigned long long)released);
    dv__res_env_sync(&t->env);
    dv__sim_stream_set_delay(t->env.streams[0], 0);
    dv__res_destroy_stack(pool);

    /* At max_pool_bytes, the one granule freed on stream 0 with a set
     * queued, 1 MiB asked on stream 1: served once the set is done, not
     * refused. */
    pool = al_pool(t, 2 * RG_MIB);
    rc = dv__res_allocate(pool, 2 * RG_MIB, 0, rg_tag(6), &a);
    dv__sim_stream_set_delay(t->env.streams[0], 100 * 1000);
    rc |= dv__drv_memset_d8(t->env.streams[0], a.ptr, 0xAA, 2 * RG_MIB);
    rc |= dv__res_deallocate(pool, &a);
    int rb = dv__res_allocate(pool, RG_MIB, 1, rg_tag(7), &b);
    idle = false;
    dv__drv_stream_query(t->env.streams[0], &idle);
    ok(rc == DV_OK && rb == DV_OK && idle && dv__pool_check(pool) == DV_OK,
       "alias: at the cap, memory freed under queued work serves another stream once the work is"
       " done (%s)",
       dv_err_name(rb));
    if (rb == DV_OK)
        (void)dv__res_deallocate(pool, &b);
    dv__res_env_sync(&t->env);
    dv__sim_stream_set_delay(t->env.streams[0], 0);
    dv__res_destroy_stack(pool);
}

/* The same workload twice, over a pool that leaves granules pending and
 * one that makes them idle at once, the device synchronised after every
 * call (so that what the host sees done is the same): a cycle of blocks
 * on three streams that repeats, and now and then a block of a size of
 * its own that stays a while (memory bound anew while granules are
 * pending).  Every block at the same address in both, the same driver
 * calls, the pending pool's books straight after every call. */
static void pend_same(test_env *t)
{
    /* A block of its own every other cycle, freed within it; the pool
     * capped at room for the cycle and little more: memory moves. */
    enum { CYCLES = 80, N = 10, AT = CYCLES * (N + 1), ODD = 2 };
    const uint64_t CAP = 64 * RG_MIB;
    static const uint64_t size[N] = {
        3 * RG_MIB, 200 * 1024,  9 * RG_MIB,  5 * RG_MIB / 2,   1024,
        RG_MIB,     13 * RG_MIB, 24 * RG_MIB, 2 * RG_MIB + 512, 6 * RG_MIB};
    static dv_dptr at[2][AT];
    uint64_t calls[2] = {0, 0};
    int bad = -1, rc = DV_OK;
    for (int k = 0; k < 2 && rc == DV_OK; k++) {
        dv_pool_config cfg;
        dv__pool_config_init(&cfg);
        cfg.alias = true;
        cfg.no_pend = k == 1;
        cfg.max_pool_bytes = CAP;
        dv_resource *pool = rg_pool_with(t, &cfg);
        dv_block b[N], odd = {0};
        int m = 0;
        uint64_t rng = 0x2545F4914F6CDD1Dull, c0 = al_calls(t);
#define PS_STEP(call)                                                                              \
    do {                                                                                           \
        rc |= (call) | dv__res_env_sync(&t->env);                                                  \
        if (rc == DV_OK && k == 0 && bad < 0 && dv__pool_check(pool) != DV_OK)                     \
            bad = m;                                                                               \
    } while (0)
        for (int c = 0; c < CYCLES && rc == DV_OK; c++) {
            for (int i = 0; i < N && rc == DV_OK; i++) {
                PS_STEP(dv__res_allocate(pool, size[i], (dv_stream_id)(i % 3), rg_tag(i), &b[i]));
                at[k][m++] = rc == DV_OK ? b[i].ptr : 0;
                if (i % 3 == 2)
                    PS_STEP(dv__res_deallocate(pool, &b[i - 2]));
                if (i == 4 && c % ODD == 1) {
                    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
                    PS_STEP(dv__res_allocate(pool, RG_MIB + rng % (20 * RG_MIB),
                                             (dv_stream_id)(rng >> 40) % 3, rg_tag(99), &odd));
                    at[k][m++] = rc == DV_OK ? odd.ptr : 0;
                } else if (i == 6 && c % ODD == ODD - 1 && odd.state == DV_BLOCK_LIVE) {
                    PS_STEP(dv__res_deallocate(pool, &odd));
                }
            }
            for (int i = N; rc == DV_OK && i-- > 0;)
                if (i % 3 != 0 || i + 2 >= N)
                    PS_STEP(dv__res_deallocate(pool, &b[i]));
        }
#undef PS_STEP
        if (odd.state == DV_BLOCK_LIVE)
            rc |= dv__res_deallocate(pool, &odd);
        calls[k] = al_calls(t) - c0;
        dv__res_env_sync(&t->env);
        dv__res_destroy_stack(pool);
    }
    int differ = -1;
    for (int i = 0; i < AT && differ < 0; i++)
        if (at[0][i] != at[1][i])
            differ = i;
    ok(rc == DV_OK && bad < 0 && differ < 0 && calls[0] == calls[1] && calls[0] > 0,
       "alias: granules left pending place every block where making them idle does, with the "
       "same driver calls (%s, books wrong after %d allocations, first address apart at %d, "
       "%llu and %llu calls)",
       dv_err_name(rc), bad, differ, (unsigned long long)calls[0], (unsigned long long)calls[1]);
}

/* The same workload over a pool whose large frees wait for the next call
 * (a placement of the same block undoes them) and one that does each at
 * once, the device synchronised after every call: large blocks on three
 * streams, each freed and, most often, allocated again at once at its
 * size on its stream, else at another size or on another stream, small
 * blocks and trims between; capped, so that memory moves.  Every block at
 * the same address in both, the same driver calls; frees undone in the
 * first (none in the second), its books straight after every call, and
 * every block filled holding its data. */
static void defer_same(test_env *t)
{
    enum { LIVE = 12, OPS = 2000 };
    static dv_dptr at[2][OPS];
    static uint64_t fp[2][OPS];
    uint64_t calls[2] = {0, 0}, undone[2] = {0, 0};
    int bad = -1, rc = DV_OK;
    bool kept = true;
    for (int k = 0; k < 2 && rc == DV_OK; k++) {
        dv_pool_config cfg;
        dv__pool_config_init(&cfg);
        cfg.alias = true;
        cfg.no_defer = k == 1;
        cfg.max_pool_bytes = 96 * RG_MIB;
        dv_resource *pool = rg_pool_with(t, &cfg);
        dv_block b[LIVE];
        bool used[LIVE] = {false}, filled[LIVE] = {false};
        uint8_t pat[LIVE] = {0};
        uint64_t x = 0x2545F4914F6CDD1Dull, c0 = al_calls(t);
        for (int op = 0; op < OPS && rc == DV_OK; op++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            int i = (int)(x % LIVE);
            at[k][op] = 0;
            fp[k][op] = 0;
            if (!used[i]) {
                uint64_t bytes = (x >> 8) % 4 == 0 ? 1024 + (x >> 12) % (200 * 1024)
                                                   : RG_MIB / 2 + (x >> 12) % (9 * RG_MIB);
                rc = dv__res_allocate(pool, bytes, (dv_stream_id)((x >> 32) % 3),
                                      rg_tag((uint64_t)op), &b[i]);
                used[i] = rc == DV_OK;
            } else {
                if (filled[i])
                    kept &= rg_holds(t, &b[i], pat[i], (dv_stream_id)b[i].alloc_stream);
                dv_block old = b[i];
                rc = dv__res_deallocate(pool, &b[i]);
                used[i] = false;
                if (rc == DV_OK && (x >> 44) % 4 != 0) {
                    /* Again at once: mostly its like, on its stream. */
                    uint64_t bytes = (x >> 48) % 8 != 0 ? old.requested : old.requested + 4096;
                    dv_stream_id s = (x >> 52) % 8 != 0
                                         ? (dv_stream_id)old.alloc_stream
                                         : (dv_stream_id)((old.alloc_stream + 1) % 3);
                    rc = dv__res_allocate(pool, bytes, s, rg_tag((uint64_t)op), &b[i]);
                    used[i] = rc == DV_OK;
                }
            }
            if (rc == DV_OK && used[i]) {
                at[k][op] = b[i].ptr;
                fp[k][op] = dv__pool_fingerprint(pool); /* nothing deferred after a placement */
                pat[i] = (uint8_t)(x >> 56);
                filled[i] = (x >> 36) % 32 == 0; /* one in 32 filled, compared at its free */
                if (filled[i])
                    rc = rg_fill(t, &b[i], pat[i], (dv_stream_id)b[i].alloc_stream);
            }
            if (rc == DV_OK && (x >> 20) % 151 == 0)
                rc = dv__pool_trim(pool, NULL);
            rc |= dv__res_env_sync(&t->env);
            if (rc == DV_OK && k == 0 && bad < 0 && dv__pool_check(pool) != DV_OK)
                bad = op;
        }
        for (int i = 0; i < LIVE; i++)
            if (used[i])
                rc |= dv__res_deallocate(pool, &b[i]);
        calls[k] = al_calls(t) - c0;
        undone[k] = dv__pool_undone(pool);
        dv__res_env_sync(&t->env);
        dv__res_destroy_stack(pool);
    }
    int differ = -1, books_apart = -1;
    for (int i = 0; i < OPS && differ < 0; i++)
        if (at[0][i] != at[1][i])
            differ = i;
    for (int i = 0; i < OPS && books_apart < 0; i++)
        if (fp[0][i] != fp[1][i])
            books_apart = i;
    ok(rc == DV_OK && bad < 0 && differ < 0 && books_apart < 0 && calls[0] == calls[1] &&
           calls[0] > 0 && undone[0] > 100 && undone[1] == 0 && kept,
       "alias: large frees undone by a placement of their like place every block where frees "
       "done at once do, with the same books and driver calls (%s, books wrong after op %d, "
       "first address apart at %d, books apart at %d, %llu and %llu calls, %llu and %llu frees "
       "undone, data %s)",
       dv_err_name(rc), bad, differ, books_apart, (unsigned long long)calls[0],
       (unsigned long long)calls[1], (unsigned long long)undone[0], (unsigned long long)undone[1],
       kept ? "kept" : "LOST");
}

/* A placement that takes pending granules back and then fails leaves
 * them idle with the free that made them pending noted: a trim while the
 * work queued before that free is still running releases nothing. */
static void pend_undo(test_env *t)
{
    dv_resource *pool = al_pool(t, 6 * RG_MIB);
    dv_block a, b;
    /* The second placement of the same block binds nothing: its granules
     * have learnt all there is, and its free leaves them pending. */
    int rc = dv__res_allocate(pool, 6 * RG_MIB, 0, rg_tag(1), &a);
    rc |= dv__res_deallocate(pool, &a) | dv__res_env_sync(&t->env);
    rc |= dv__res_allocate(pool, 6 * RG_MIB, 0, rg_tag(2), &a);
    dv__sim_stream_set_delay(t->env.streams[0], 100 * 1000);
    rc |= dv__drv_memset_d8(t->env.streams[0], a.ptr, 0xAA, 6 * RG_MIB);
    rc |= dv__res_deallocate(pool, &a);
    /* 8 MiB at the same place: the three granules back, a fourth past the
     * cap. */
    int rb = dv__res_allocate(pool, 8 * RG_MIB, 0, rg_tag(3), &b);
    uint64_t released = 0;
    rc |= dv__pool_trim(pool, &released);
    bool idle = true;
    dv__drv_stream_query(t->env.streams[0], &idle);
    ok(rc == DV_OK && rb == DV_EOUT_OF_BUDGET && (released == 0 || idle) &&
           dv__pool_check(pool) == DV_OK,
       "alias: a placement refused after taking pending granules back leaves them idle behind "
       "their free: a trim under the queued set releases nothing (%s, %llu released)",
       dv_err_name(rb), (unsigned long long)released);
    dv__res_env_sync(&t->env);
    dv__sim_stream_set_delay(t->env.streams[0], 0);
    dv__res_destroy_stack(pool);
}

/* Eight streams over 1 GiB, a repeating step on one of them that holds
 * 525 MiB at its peak (half the device, four times an eighth): the
 * stream's layout repeats and the passes after the first two make no
 * driver call.  (A stream's address space smaller than what it holds
 * sends its blocks into other streams' space, placed by what those hold
 * at the time, and memory moves on every pass.) */
static void slice_room(void)
{
    static const uint64_t size[] = {225, 60, 135, 300, 90, 180, 45, 15};
    enum { N = sizeof(size) / sizeof(size[0]), PASSES = 5 };
    test_env t;
    int rc = test_env_sim(&t, 8, 0);
    dv_resource *pool = rc == DV_OK ? al_pool(&t, 0) : NULL;
    uint64_t later = 0, first = 0;
    bool books = pool != NULL;
    for (int pass = 0; pass < PASSES && pool != NULL && rc == DV_OK; pass++) {
        uint64_t c0 = al_calls(&t);
        dv_block b[N];
        /* Each block freed two steps after it came; the last two at the end. */
        for (int i = 0; i < N && rc == DV_OK; i++) {
            rc |= dv__res_allocate(pool, size[i] * RG_MIB, 5, rg_tag((uint64_t)i), &b[i]);
            if (i >= 2 && rc == DV_OK && i % 2 == 0)
                rc |= dv__res_deallocate(pool, &b[i - 2]) | dv__res_deallocate(pool, &b[i - 1]);
        }
        if (rc == DV_OK)
            rc |= dv__res_deallocate(pool, &b[N - 2]) | dv__res_deallocate(pool, &b[N - 1]);
        rc |= dv__res_env_sync(&t.env);
        books = books && dv__pool_check(pool) == DV_OK;
        if (pass == 0)
            first = al_calls(&t) - c0;
        else if (pass >= 2)
            later += al_calls(&t) - c0;
    }
    ok(rc == DV_OK && books && first > 0 && later == 0,
       "alias: one stream of eight holding most of the device repeats its layout: no driver call "
       "after the second pass (%s, %llu calls in the first, %llu in passes 3-%d)",
       dv_err_name(rc), (unsigned long long)first, (unsigned long long)later, PASSES);
    if (pool != NULL)
        dv__res_destroy_stack(pool);
    test_env_close(&t);
}

/* A pool that keeps what was seen live together for 64 (or 128) units at
 * most, under a workload that repeats: 240 blocks of 1-41 MiB a pass,
 * each freed a few blocks later, some 150 granules live at once and more
 * used.  Its units grow to several granules (the books, units' live
 * counts among them, straight after every call), and its layout still
 * repeats: no driver call in the last passes, and not much more memory
 * than the most live at once. */
static void seen_units(test_env *t, uint32_t units)
{
    enum { N = 240, PASSES = 12, KEEP = 12, STREAMS = 1 };
    dv_pool_config cfg;
    dv__pool_config_init(&cfg);
    cfg.alias = true;
    cfg.seen_units = units;
    dv_resource *pool = rg_pool_with(t, &cfg);
    uint64_t later = 0, first = 0, live = 0, peak = 0, size[N];
    int rc = pool != NULL ? DV_OK : DV_ENOMEM, bad = -1, step = 0, life[N];
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < N; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        size[i] = RG_MIB + rng % (40 * RG_MIB);
        life[i] = 1 + (int)(rng >> 40) % KEEP;
    }
    for (int pass = 0; pass < PASSES && rc == DV_OK; pass++) {
        uint64_t c0 = al_calls(t);
        dv_block b[N];
        for (int i = 0; i < N + KEEP && rc == DV_OK; i++) {
            if (i < N) {
                rc |= dv__res_allocate(pool, size[i], (dv_stream_id)(i % STREAMS),
                                       rg_tag((uint64_t)i), &b[i]);
                if (rc == DV_OK && (live += size[i]) > peak)
                    peak = live;
            }
            for (int j = 0; j < i && j < N && rc == DV_OK; j++)
                if (j + life[j] == i || (i == N + KEEP - 1 && j + life[j] > i)) {
                    rc |= dv__res_deallocate(pool, &b[j]);
                    live -= size[j];
                }
            rc |= dv__res_env_sync(&t->env);
            if (bad < 0 && rc == DV_OK && dv__pool_check(pool) != DV_OK)
                bad = step;
            step++;
        }
        if (pass == 0)
            first = al_calls(t) - c0;
        else if (pass >= PASSES - 4)
            later += al_calls(t) - c0;
    }
    dv_pool_stats st = {0};
    uint32_t unit = 0;
    if (pool != NULL) {
        (void)dv__pool_stats_get(pool, &st);
        unit = dv__pool_seen_unit(pool);
    }
    ok(rc == DV_OK && bad < 0 && unit >= 2 && first > 0 && later == 0 &&
           st.peak_chunk_bytes <= peak + peak / 5,
       "alias: learning in units of several granules (%u units at most), the books straight "
       "and the layout repeating (%s, books wrong at step %d, units of %u granules, %llu calls "
       "in the first pass, %llu in the last four, %llu MiB held at most, %llu MiB live)",
       units, dv_err_name(rc), bad, unit, (unsigned long long)first, (unsigned long long)later,
       (unsigned long long)(st.peak_chunk_bytes / RG_MIB), (unsigned long long)(peak / RG_MIB));
    if (pool != NULL) {
        dv__res_env_sync(&t->env);
        dv__res_destroy_stack(pool);
    }
}

int main(void)
{
    test_env t;
    plan(11 + ALIAS_TESTS);
    if (!is_status(test_env_sim(&t, 3, 20), DV_OK, "sim environment with 3 streams"))
        return tap_done();
    alias_tests(&t);
    sim_only(&t);
    pend_same(&t);
    defer_same(&t);
    pend_undo(&t);
    seen_units(&t, 64);  /* a matrix of one word a row */
    seen_units(&t, 128); /* of two words, halved */
    test_env_close(&t);
    slice_room();
    return tap_done();
}
