/*
 * The tracker out of host memory for a block's reads past the inline ones.
 * tracker.c is built into this program with its malloc failing on demand
 * (the library's copy is then not linked).  The read that finds no room
 * becomes the last write, and the last write before it must stay covered:
 * a recorded use has no prepare that waited for it.
 */
#include <stdlib.h>

static int fail_malloc;

static void *shim_malloc(size_t n)
{
    return fail_malloc ? NULL : malloc(n);
}

#define malloc shim_malloc
#include "resources/tracker.c"
#undef malloc

#include "support/env_setup.h"

int main(void)
{
    test_env t;
    dv_tracker *tr;
    dv_tracker_stats st;

    plan(7);
    if (!is_status(test_env_sim(&t, 8, 0), DV_OK, "sim environment with 8 streams"))
        return tap_done();
    dv__tracker_create(&t.env, &tr);
    dv_block b = {.ptr = 0x1000, .bytes = 256, .generation = dv__next_generation(&t.env)};
    dv_tracked e = dv__tracker_insert(tr, &b, 0);
    dv__tracker_finish(tr, e, 1, DV_ACCESS_WRITE);
    dv_stream_pos written = dv__track_last_write(e.e);
    for (dv_stream_id s = 2; s < 6; s++)
        dv__tracker_record(tr, e, s);
    ok(written.stream == 1 && e.e->nreads == 4 && e.e->reads == e.e->reads_inline,
       "a write on stream 1, then uses recorded on streams 2-5, inline");

    dv__tracker_stats_get(tr, &st);
    uint64_t waits = st.waits;
    fail_malloc = 1;
    dv__tracker_record(tr, e, 6);
    fail_malloc = 0;
    dv__tracker_stats_get(tr, &st);
    is_u64(st.waits - waits, 1, "no memory for a sixth: stream 6 waits, once");
    ok(tr->st[6].waited[1] >= written.epoch, "... for stream 1's write (%llu >= %llu)",
       (unsigned long long)tr->st[6].waited[1], (unsigned long long)written.epoch);
    ok(e.e->last_write_stream == 6 && e.e->last_write_epoch > 0 && e.e->nreads == 4,
       "the use on stream 6 is the last write now, after that wait; the four reads stay");

    /* A reader elsewhere now waits for stream 6, which waits for stream 1. */
    dv__tracker_stats_get(tr, &st);
    waits = st.waits;
    dv__tracker_prepare(tr, e, 7, DV_ACCESS_READ);
    dv__tracker_stats_get(tr, &st);
    ok(st.waits == waits + 1 && tr->st[7].waited[6] >= e.e->last_write_epoch,
       "a read on stream 7 waits for stream 6's position, which covers stream 1's write");

    dv__tracker_remove(tr, e);
    dv__tracker_destroy(tr);
    is_status(dv__res_env_sync(&t.env), DV_OK, "every stream finishes");
    test_env_close(&t);
    return tap_done();
}
