/*
 * An event is recorded on stream 0 after a raw write, then recorded again
 * on stream 1 before stream 2 waits on it.  A wait takes the latest
 * record posted before it (as cudaEventRecord replaces the captured
 * point): stream 2 waits on stream 1's point, not on the write, and reads
 * the block raw.
 */
#define HZ_WHAT                                                                                    \
    "an event recorded after a raw write on stream 0 is recorded again on stream 1 before "        \
    "stream 2 waits on it and reads the block raw"
#include "hazards/hazard.h"

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 0, "b");
    dv_event *e = NULL;
    hz_rc(h, dv_event_create(h->a, 0, &e), "event");
    hz_fill(h, a, 1, 0);
    hz_fill(h, b, 0, 0);
    hz_sync_all(h);
    uint64_t pa = hz_ptr(a), pb = hz_ptr(b);
    hz_first(h, 0);
    hz_fill_raw(h, pa, 2, 0);
    hz_settle(h);
    hz_rc(h, dv_event_record(e, 0), "record on stream 0");
    hz_rc(h, dv_event_record(e, 1), "record on stream 1"); /* replaces the first */
    hz_rc(h, dv_stream_wait_event(h->a, 2, e), "wait event");
    hz_copy_raw(h, pb, pa, 2); /* b <- a: meant to see 2 */
    bool corrupt = !hz_is(h, b, 2);
    hz_rc(h, dv_event_destroy(e), "event destroy");
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
