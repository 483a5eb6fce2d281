/*
 * Stream 1 waits on an event of stream 0 recorded BEFORE the raw write it
 * should cover, then reads the block raw.  The event captures what stream
 * 0 had before the write, so the wait orders nothing that matters.
 */
#define HZ_WHAT                                                                                    \
    "stream 1 waits on an event recorded on stream 0 before a raw write, then reads the block raw"
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
    hz_rc(h, dv_event_record(e, 0), "record"); /* too early */
    hz_first(h, 0);
    hz_fill_raw(h, pa, 2, 0);
    hz_settle(h);
    hz_rc(h, dv_stream_wait_event(h->a, 1, e), "wait event");
    hz_copy_raw(h, pb, pa, 1); /* b <- a: meant to see 2 */
    bool corrupt = !hz_is(h, b, 2);
    hz_rc(h, dv_event_destroy(e), "event destroy");
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
