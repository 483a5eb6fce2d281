/*
 * A raw write on stream 0 and an event recorded after it: the right
 * event, but stream 2 waits on it, and the raw read is posted on stream 1.
 * Nothing orders stream 1 after the write.
 */
#define HZ_WHAT                                                                                    \
    "an event after a raw write on stream 0 is waited on by stream 2; the raw read goes on "       \
    "stream 1"
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
    hz_rc(h, dv_event_record(e, 0), "record");
    hz_rc(h, dv_stream_wait_event(h->a, 2, e), "wait event"); /* the wrong stream */
    hz_copy_raw(h, pb, pa, 1);                                /* b <- a: meant to see 2 */
    bool corrupt = !hz_is(h, b, 2);
    hz_rc(h, dv_event_destroy(e), "event destroy");
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
