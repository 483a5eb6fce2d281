/*
 * Correct: the thread that wrote raw on stream 1 syncs stream 1, then
 * records an event on stream 0 and hands it to another thread, which makes
 * stream 2 wait for it and reads the block raw there.  The record is
 * ordered after what its poster knew (the write), so the event carries
 * it, and the read is ordered.  (The checker used to copy only stream 0's
 * own clock into the event.)
 */
#define HZ_CORRECT
#define HZ_WHAT                                                                                    \
    "a raw write on stream 1 synced, an event recorded on stream 0 after the sync and handed to "  \
    "another thread, which waits for it on stream 2 and reads the block raw there"
#include "hazards/hazard.h"

typedef struct reader {
    dv_event *e;
    uint64_t dst, src;
} reader;

static int wait_and_read(hz *h, void *arg)
{
    reader *r = arg;
    int rc = dv_stream_wait_event(h->a, 2, r->e);
    return rc == DV_OK ? hz_copy_raw(h, r->dst, r->src, 2) : rc;
}

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 0, "b");
    dv_event *e = NULL;
    hz_rc(h, dv_event_create(h->a, 0, &e), "event");
    hz_fill(h, a, 1, 0);
    hz_fill(h, b, 0, 0);
    hz_sync_all(h);
    uint64_t pa = hz_ptr(a), pb = hz_ptr(b);
    hz_first(h, 1);
    hz_fill_raw(h, pa, 2, 1);
    hz_settle(h);
    hz_rc(h, dv_sync(h->a, 1), "sync stream 1 (the write)");
    hz_rc(h, dv_event_record(e, 0), "record on stream 0 (after the sync)");
    reader r = {e, pb, pa};
    hz_on_other_thread(h, wait_and_read, &r, "the other thread's wait and raw read");
    bool corrupt = !hz_is(h, b, 2);
    hz_rc(h, dv_event_destroy(e), "event destroy");
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
