/*
 * The neighbour of event_sync_before_later_wait: the event is recorded on
 * stream 0 after stream 0 waits for stream 1's write, so syncing it orders
 * the thread after the write, and the raw read on stream 2 is ordered.
 */
#define HZ_CORRECT
#define HZ_WHAT                                                                                    \
    "a raw write on stream 1, stream 0 waiting for it, an event recorded on stream 0 after the "   \
    "wait and synced, then the block read raw on stream 2"
#include "hazards/hazard.h"

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 0, "b");
    dv_event *e0 = NULL, *e1 = NULL;
    hz_rc(h, dv_event_create(h->a, 0, &e0), "event");
    hz_rc(h, dv_event_create(h->a, 0, &e1), "event");
    hz_fill(h, a, 1, 0);
    hz_fill(h, b, 0, 0);
    hz_sync_all(h);
    uint64_t pa = hz_ptr(a), pb = hz_ptr(b);
    hz_first(h, 1);
    hz_fill_raw(h, pa, 2, 1);
    hz_settle(h);
    hz_rc(h, dv_event_record(e1, 1), "record on stream 1 (after the write)");
    hz_rc(h, dv_stream_wait_event(h->a, 0, e1), "stream 0 waits for stream 1");
    hz_rc(h, dv_event_record(e0, 0), "record on stream 0 (after the wait)");
    hz_rc(h, dv_event_sync(e0), "event sync");
    hz_copy_raw(h, pb, pa, 2); /* b <- a */
    bool corrupt = !hz_is(h, b, 2);
    hz_rc(h, dv_event_destroy(e0), "event destroy");
    hz_rc(h, dv_event_destroy(e1), "event destroy");
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
