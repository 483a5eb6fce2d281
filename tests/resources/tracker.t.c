/*
 * The tracker's mechanics, through the async resource: same-stream uses
 * make no driver call, a wait already covered is skipped, events come from
 * a bounded pool, retired frees are counted until reached, and each access
 * kind waits on exactly what the contract says.
 */
#include "resources/tracker.h"
#include "driver/sim.h"
#include "support/env_setup.h"

/* The async resource's tracker is private; count driver work instead
 * through a second tracker driven directly. */
static void test_tracker_direct(test_env *t)
{
    dv_tracker *tr;
    dv_tracker_stats st;
    dv_block b = {.ptr = 0x1000, .bytes = 256, .generation = 77, .alloc_stream = 0};

    is_status(dv__tracker_create(&t->env, &tr), DV_OK, "tracker_create");
    dv_tracked e = dv__tracker_insert(tr, &b, 42);
    ok(dv__tracked_ok(e) && e.hot->owner == 42, "insert a block, with the resource's word");
    ok(b.slot != 0 && dv__tracker_find(tr, dv__block_id_of(&b), "test").e == e.e, "find by id");
    ok(!dv__tracked_ok(dv__tracker_find(tr, (dv_block_id){0x1000, 78, 0, 0, b.slot}, "test")) &&
           dv_last_error()->status == DV_EUSE_AFTER_FREE && dv_last_error()->generation == 78,
       "another generation at the pointer is EUSE_AFTER_FREE");
    ok(!dv__tracked_ok(dv__tracker_find(tr, (dv_block_id){0x1100, 77, 0, 0, b.slot}, "test")),
       "the generation with another pointer is EUSE_AFTER_FREE");
    ok(!dv__tracked_ok(dv__tracker_find(
           tr, (dv_block_id){0x1000 | UINT64_C(1) << 60, 77, 0, 0, b.slot}, "test")) &&
           !dv__tracked_ok(dv__tracker_find(
               tr, (dv_block_id){0x1000, 77 + (UINT64_C(1) << 55), 0, 0, b.slot}, "test")),
       "pointer or generation wrong only above bit 55: EUSE_AFTER_FREE");
    dv_block far = {.ptr = UINT64_C(1) << 56, .generation = 78};
    dv_block zero = {.ptr = 0x1100, .generation = 0};
    ok(!dv__tracked_ok(dv__tracker_insert(tr, &far, 0)) && dv_last_error()->status == DV_EINVAL &&
           !dv__tracked_ok(dv__tracker_insert(tr, &zero, 0)),
       "a block the key cannot tell apart (pointer past 2^55, generation 0) is refused");

    /* Same stream: no event, no wait. */
    for (int i = 0; i < 100; i++) {
        dv__tracker_prepare(tr, e, 0, DV_ACCESS_READ_WRITE);
        dv__tracker_finish(tr, e, 0, DV_ACCESS_READ_WRITE);
    }
    dv__tracker_stats_get(tr, &st);
    ok(st.waits == 0 && st.records == 0 && st.events == 0,
       "100 same-stream uses: no wait, no record, no event (%llu, %llu, %llu)",
       (unsigned long long)st.waits, (unsigned long long)st.records, (unsigned long long)st.events);
    ok(!dv__track_cross(e.hot), "no use on another stream: a free need not read the entry");

    /* Stream 1 reads: one wait on stream 0's last write. */
    dv__tracker_prepare(tr, e, 1, DV_ACCESS_READ);
    dv__tracker_finish(tr, e, 1, DV_ACCESS_READ);
    dv__tracker_stats_get(tr, &st);
    ok(st.waits == 1 && st.records == 1, "a read on stream 1 waits once on stream 0");
    ok(dv__track_cross(e.hot), "the read on stream 1 is marked in the hot record");
    /* Again on stream 1: covered already. */
    dv__tracker_prepare(tr, e, 1, DV_ACCESS_READ);
    dv__tracker_finish(tr, e, 1, DV_ACCESS_READ);
    dv__tracker_stats_get(tr, &st);
    ok(st.waits == 1 && st.waits_skipped >= 1, "a second read on stream 1 is already covered");
    /* Stream 2 reads too; then stream 0 writes: waits on both readers. */
    dv__tracker_prepare(tr, e, 2, DV_ACCESS_READ);
    dv__tracker_finish(tr, e, 2, DV_ACCESS_READ);
    ok(e.e->nreads == 2, "two outstanding reads, one per stream (%u)", e.e->nreads);
    dv__tracker_stats_get(tr, &st);
    uint64_t before = st.waits;
    dv__tracker_prepare(tr, e, 0, DV_ACCESS_WRITE);
    dv__tracker_stats_get(tr, &st);
    is_u64(st.waits - before, 2, "a write on stream 0 waits on both readers");
    dv__tracker_finish(tr, e, 0, DV_ACCESS_WRITE);
    ok(e.e->nreads == 0 && e.e->last_write_stream == 0 && !dv__track_cross(e.hot),
       "the write on the alloc stream clears the reads and the mark");
    /* A read on stream 2 waits on the new write only. */
    before = st.waits;
    dv__tracker_prepare(tr, e, 2, DV_ACCESS_READ);
    dv__tracker_stats_get(tr, &st);
    is_u64(st.waits - before, 1, "a read after the write waits once");

    /* Many cross-stream rounds: events stay bounded (a ring per stream). */
    for (int i = 0; i < 1000; i++) {
        dv_stream_id s = (dv_stream_id)(i % 3);
        dv__tracker_prepare(tr, e, s, DV_ACCESS_WRITE);
        dv__tracker_finish(tr, e, s, DV_ACCESS_WRITE);
    }
    dv__tracker_stats_get(tr, &st);
    ok(st.events <= 3 * DV__TRACK_RING && st.records >= 600,
       "1000 cross-stream writes: %llu records on at most 3 rings of events (%llu)",
       (unsigned long long)st.records, (unsigned long long)st.events);
    /* reached / sync on a position. */
    dv_stream_pos pos = dv__tracker_now(tr, 1);
    is_status(dv__tracker_sync(tr, pos), DV_OK, "sync to stream 1's position");
    bool reached = false;
    is_status(dv__tracker_reached(tr, pos, &reached), DV_OK, "query it");
    ok(reached, "... and it is reached");
    dv__tracker_remove(tr, e);
    ok(!dv__tracked_ok(dv__tracker_find(tr, dv__block_id_of(&b), "test")), "removed");
    dv__tracker_destroy(tr);
}

/* A free fences exactly the uses the hot record says exist: none for a
 * block kept on its stream (the entry is not consulted), every other
 * stream's otherwise, the heap array of reads included. */
static void test_fence(test_env *t)
{
    dv_tracker *tr;
    dv_tracker_stats st;
    dv_block b = {.ptr = 0x2000, .bytes = 256, .generation = 90, .alloc_stream = 1};
    dv_block many = {.ptr = 0x3000, .bytes = 256, .generation = 91, .alloc_stream = 0};

    dv__tracker_create(&t->env, &tr);
    dv_tracked e = dv__tracker_insert(tr, &b, 0);
    dv__tracker_finish(tr, e, 1, DV_ACCESS_WRITE);
    dv__tracker_record(tr, e, 1);
    is_status(dv__tracker_fence_uses(tr, e), DV_OK, "fence a block used on its stream only");
    dv__tracker_stats_get(tr, &st);
    ok(st.waits == 0 && !dv__track_cross(e.hot), "... no wait");
    dv__tracker_record(tr, e, 2);
    ok(dv__track_cross(e.hot), "a use recorded on stream 2 marks the hot record");
    dv__tracker_fence_uses(tr, e);
    dv__tracker_stats_get(tr, &st);
    is_u64(st.waits, 1, "the fence waits on stream 2");
    dv__tracker_remove(tr, e);

    /* Reads from more streams than fit inline go to the heap.  A later write
     * on the alloc stream clears the reads, but the free must still look:
     * the heap array is freed there (ASan reports it lost otherwise). */
    e = dv__tracker_insert(tr, &many, 0);
    for (dv_stream_id s = 0; s < 6; s++)
        dv__tracker_finish(tr, e, s, DV_ACCESS_READ);
    ok(e.e->nreads == 6 && e.e->reads != e.e->reads_inline, "six readers: reads on the heap");
    dv__tracker_finish(tr, e, 0, DV_ACCESS_WRITE);
    ok(e.e->nreads == 0 && dv__track_cross(e.hot),
       "a write on the alloc stream keeps the mark while they are");
    dv__tracker_stats_get(tr, &st);
    uint64_t waits = st.waits;
    is_status(dv__tracker_fence_uses(tr, e), DV_OK, "fence it");
    dv__tracker_stats_get(tr, &st);
    is_u64(st.waits - waits, 0, "... nothing to wait for after the write");
    dv__tracker_remove(tr, e);
    dv__tracker_destroy(tr);
}

/* A block never used has no entry: allocation and free touch the hot
 * record alone.  Its first use fills the entry from it, the allocation's
 * position included, across the hot record's 32 bits of it. */
static void test_entry(test_env *t)
{
    dv_tracker *tr;
    dv_block b = {.ptr = 0x4000, .bytes = 256, .generation = 95, .alloc_stream = 0};
    const uint64_t far = (UINT64_C(1) << 32) + 5;

    dv__tracker_create(&t->env, &tr);
    tr->st[0].epoch = far; /* as if stream 0 had marked 2^32 + 5 epochs */
    dv_tracked e = dv__tracker_insert(tr, &b, 7);
    ok(!(e.hot->tag & DV_TRACK_ENTRY) && dv__track_alloc_stream(e.hot) == 0,
       "a fresh block has no entry");
    dv__tracker_mark(tr, 0);
    dv__tracker_mark(tr, 0);
    dv_track_entry *en = dv__tracker_entry(tr, e);
    ok((e.hot->tag & DV_TRACK_ENTRY) && en->last_write_stream == 0 && en->nreads == 0,
       "the first use fills it: the allocation is the last write, no reads");
    is_u64(en->last_write_epoch, far + 1, "the allocation's epoch, past 2^32, exactly");
    dv__tracker_remove(tr, e);

    /* A block older than 2^32 marks of its stream: a later epoch, never an
     * earlier one. */
    e = dv__tracker_insert(tr, &(dv_block){.ptr = 0x5000, .generation = 96}, 0);
    uint64_t alloc = tr->st[0].epoch;
    tr->st[0].epoch = alloc + (UINT64_C(1) << 32) + 10;
    en = dv__tracker_entry(tr, e);
    ok(en->last_write_epoch >= alloc && en->last_write_epoch <= tr->st[0].epoch,
       "2^32 marks later the wait is on a later position, not an earlier one (%llu >= %llu)",
       (unsigned long long)en->last_write_epoch, (unsigned long long)alloc);
    dv__tracker_remove(tr, e);
    dv__tracker_destroy(tr);
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* Two environments drawing generations in turn, across several batches:
 * every one is distinct, none is 0, and each environment's increase. */
static void test_generations(void)
{
    enum { N = 3 * DV_GEN_BATCH + 17 };
    static uint64_t g[2 * N];
    dv_res_env a = {0}, b = {0};
    int increasing = 1, distinct = 1;

    for (int i = 0; i < N; i++) {
        g[2 * i] = dv__next_generation(&a);
        g[2 * i + 1] = dv__next_generation(&b);
        if (i > 0)
            increasing &= g[2 * i] > g[2 * i - 2] && g[2 * i + 1] > g[2 * i - 1];
    }
    qsort(g, 2 * N, sizeof(g[0]), cmp_u64);
    for (int i = 1; i < 2 * N; i++)
        distinct &= g[i] != g[i - 1];
    ok(increasing && distinct && g[0] != 0,
       "%d generations from two environments: distinct, never 0, increasing in each", 2 * N);
}

static void count_live(dv_tracked e, void *arg)
{
    (void)e;
    (*(int *)arg)++;
}

/* Many blocks through the live table: insert, find, remove at random; old
 * ids and forged slots find nothing. */
static void test_table(test_env *t)
{
    dv_tracker *tr;
    enum { N = 5000 };
    static dv_tracked ent[N];
    static dv_block blk[N], gone[N];
    static bool live[N], freed[N];
    uint64_t rng = 88172645463325252ull;
    int bad = 0, nlive = 0, seen = 0;

    dv__tracker_create(&t->env, &tr);
    for (int round = 0; round < 20000; round++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        int i = (int)(rng % N);
        if (!live[i]) {
            blk[i] =
                (dv_block){.ptr = 0x100000 + (uint64_t)i * 256, .generation = (uint64_t)round + 1};
            ent[i] = dv__tracker_insert(tr, &blk[i], (uint32_t)i);
            live[i] = dv__tracked_ok(ent[i]);
            bad += !live[i] || blk[i].slot == 0;
        } else {
            dv_tracked f = dv__tracker_find(tr, dv__block_id_of(&blk[i]), "test");
            bad += f.hot != ent[i].hot || f.e != ent[i].e || f.hot->owner != (uint32_t)i;
            dv__tracker_remove(tr, ent[i]);
            gone[i] = blk[i];
            live[i] = false;
            freed[i] = true;
        }
    }
    for (int i = 0; i < N; i++) {
        nlive += live[i];
        if (live[i])
            bad += dv__tracker_find(tr, dv__block_id_of(&blk[i]), "test").e != ent[i].e;
        if (freed[i])
            bad += dv__tracked_ok(dv__tracker_find(tr, dv__block_id_of(&gone[i]), "test"));
    }
    is_int(bad, 0, "20000 random inserts and removes: every live id found, every freed one not");
    dv__tracker_foreach(tr, count_live, &seen);
    is_int(seen, nlive, "foreach visits every live entry once");

    /* Forged slots: bounds-checked, never a live entry of another id. */
    int found = 0;
    for (int k = 0; k < 100000; k++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        dv_block_id id = {0x100000 + (rng >> 40) % N * 256, rng % 20001, 0, 0, (uint32_t)rng};
        found += dv__tracked_ok(dv__tracker_find(tr, id, "test"));
    }
    is_int(found, 0, "100000 forged ids: none found");
    dv__tracker_destroy(tr);
}

/* More live blocks than the first full-size slabs hold: every slot freed
 * goes back on the free stack (room for all of them), and is handed out
 * again before any new one. */
static void test_many_live(test_env *t)
{
    enum { N = 100000 };
    dv_tracker *tr;
    dv_tracker_stats st;
    dv_block *b = calloc(N, sizeof(*b));
    dv_tracked *e = calloc(N, sizeof(*e));
    int bad = 0;
    uint32_t slots = 0;

    dv__tracker_create(&t->env, &tr);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            b[i] = (dv_block){.ptr = 0x10000000 + (uint64_t)i * 256,
                              .generation = (uint64_t)(round * N + i + 1)};
            e[i] = dv__tracker_insert(tr, &b[i], (uint32_t)i);
            bad += !dv__tracked_ok(e[i]);
        }
        if (round == 0)
            slots = tr->slots;
        dv__tracker_stats_get(tr, &st);
        bad += st.live_blocks != N;
        for (int i = N; i-- > 0;) {
            dv_tracked f = dv__tracker_find(tr, dv__block_id_of(&b[i]), "test");
            bad += f.e != e[i].e || f.hot->owner != (uint32_t)i;
            dv__tracker_remove(tr, e[i]);
        }
    }
    is_int(bad, 0, "%d blocks live at once, twice: each found with its word, then removed", N);
    ok(slots >= N && tr->slots == slots,
       "the second round takes only freed slots: the table did not grow (%u, %u slots)", slots,
       tr->slots);
    dv__tracker_stats_get(tr, &st);
    is_u64(st.live_blocks, 0, "nothing live at the end");
    dv__tracker_destroy(tr);
    free(b);
    free(e);
}

static void test_async_retired(test_env *t)
{
    dv_resource *r;
    dv_block b;
    dv_drv_func *spin;
    uint64_t ns = 20 * 1000 * 1000;
    void *params[] = {&ns};

    dv__async_resource_create(&t->env, &r);
    test_env_kernel(t, "spin", &spin);
    dv__res_allocate(r, 1 << 20, 0, (dv_tag){"retired", 0}, &b);
    /* Stream 0 busy for 20 ms: the free is queued behind it. */
    dv__drv_launch(spin, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, t->env.streams[0], params);
    is_status(dv__res_deallocate(r, &b), DV_OK, "deallocate behind a busy stream");
    is_int(b.state, DV_BLOCK_RETIRED, "the block reads RETIRED");
    ok(dv__res_bytes_outstanding(r) == (1 << 20), "its bytes are still outstanding (%llu)",
       (unsigned long long)dv__res_bytes_outstanding(r));
    is_status(dv__res_reap_pending(r), DV_OK, "reap_pending");
    is_u64(dv__res_bytes_outstanding(r), 0, "after the reap nothing is outstanding");
    dv__res_destroy_stack(r);
}

/* Within one look an event seen not done answers for every later position
 * of its stream with no driver call; a new look, or a plain question, asks
 * the driver again; once the device is past, every look says so. */
static void test_look(test_env *t)
{
    dv_tracker *tr;
    dv_dptr mem = 0;
    const dv_stream_id s = 5;
    dv_drv_stream *ds = t->env.streams[s];

    is_status(dv__tracker_create(&t->env, &tr), DV_OK, "a tracker for looks");
    is_status(dv__drv_mem_alloc(t->env.ctx, 256, &mem), DV_OK, "memory to set");
    dv__sim_stream_set_delay(ds, 300 * 1000);
    is_status(dv__drv_memset_d8(ds, mem, 1, 256), DV_OK, "a slow set on stream 5");
    dv_stream_pos early = {s, dv__tracker_mark(tr, s)};
    dv__tracker_flush(tr, s);
    dv_stream_pos late = {s, dv__tracker_mark(tr, s)};
    dv__tracker_flush(tr, s);

    uint64_t q0 = dv__sim_calls(t->drv, DV_CALL_EVENT_QUERY);
    uint64_t look = dv__tracker_new_look(tr);
    bool r1 = true, r2 = true, r3 = true;
    dv__tracker_reached_in(tr, look, early, &r1);
    dv__tracker_reached_in(tr, look, late, &r2);
    dv__tracker_reached_in(tr, look, early, &r3);
    ok(!r1 && !r2 && !r3, "within a look: the early and the late position are not reached");
    is_u64(dv__sim_calls(t->drv, DV_CALL_EVENT_QUERY) - q0, 1,
           "... and the driver was asked once");
    dv__tracker_reached(tr, late, &r1);
    dv__tracker_reached(tr, late, &r2);
    dv__tracker_reached_in(tr, dv__tracker_new_look(tr), late, &r3);
    ok(!r1 && !r2 && !r3, "plain questions and a new look: still not reached");
    is_u64(dv__sim_calls(t->drv, DV_CALL_EVENT_QUERY) - q0, 4,
           "... each of them asked the driver");
    dv__sim_stream_set_delay(ds, 0);
    is_status(dv__tracker_sync(tr, late), DV_OK, "wait for the set");
    dv__tracker_reached_in(tr, look, early, &r1);
    dv__tracker_reached_in(tr, look, late, &r2);
    ok(r1 && r2, "once the device is past, the old look says so too");
    dv__drv_mem_free(t->env.ctx, mem);
    dv__tracker_destroy(tr);
}

/* A mark captured by the newest event, nothing enqueued since it was seen
 * done: known passed with no driver call.  Work enqueued in between: not
 * known, a new event. */
static void test_idle_capture(test_env *t)
{
    dv_tracker *tr;
    dv_dptr mem = 0;
    const dv_stream_id s = 4;
    dv_drv_stream *ds = t->env.streams[s];
    uint64_t e1 = 0, e2 = 0, e3 = 0;

    is_status(dv__tracker_create(&t->env, &tr), DV_OK, "a tracker for idle captures");
    is_status(dv__drv_mem_alloc(t->env.ctx, 256, &mem), DV_OK, "memory to set");
    dv__drv_memset_d8(ds, mem, 1, 256);
    dv__tracker_mark_captured(tr, s, &e1);
    is_status(dv__tracker_sync(tr, (dv_stream_pos){s, e1}), DV_OK, "a free's event seen done");
    uint64_t q0 = dv__sim_calls(t->drv, DV_CALL_EVENT_QUERY);
    uint64_t r0 = dv__sim_calls(t->drv, DV_CALL_EVENT_RECORD);
    dv__tracker_mark_captured(tr, s, &e2);
    ok(dv__tracker_known_passed(tr, (dv_stream_pos){s, e2}),
       "a free marked after it, nothing enqueued: known passed");
    ok(dv__sim_calls(t->drv, DV_CALL_EVENT_QUERY) == q0 &&
           dv__sim_calls(t->drv, DV_CALL_EVENT_RECORD) == r0,
       "... with no query and no record");
    dv__sim_stream_set_delay(ds, 200 * 1000);
    dv__drv_memset_d8(ds, mem, 2, 256);
    dv__tracker_mark_captured(tr, s, &e3);
    ok(!dv__tracker_known_passed(tr, (dv_stream_pos){s, e3}) &&
           dv__sim_calls(t->drv, DV_CALL_EVENT_RECORD) == r0 + 1,
       "a set enqueued before the next free: not known passed, a new event");
    dv__sim_stream_set_delay(ds, 0);
    is_status(dv__tracker_sync(tr, (dv_stream_pos){s, e3}), DV_OK, "wait for the set");
    dv__drv_mem_free(t->env.ctx, mem);
    dv__tracker_destroy(tr);
}

int main(void)
{
    test_env t;
    plan(62);
    is_status(test_env_sim(&t, 6, 20), DV_OK, "sim environment");
    test_tracker_direct(&t);
    test_fence(&t);
    test_entry(&t);
    test_table(&t);
    test_generations();
    test_many_live(&t);
    test_async_retired(&t);
    test_look(&t);
    test_idle_capture(&t);
    test_env_close(&t);
    return tap_done();
}
