/*
 * Correct neighbour: a raw write on stream 0, an event after it, the thread syncs the event, then a
 * raw read on stream 2 (event_sync_other_stream_raw done right).
 */
#define HZ_CORRECT
#define HZ_WHAT                                                                                    \
    "a raw write on stream 0, an event after it, the thread syncs the event, then a raw read on "  \
    "stream 2 (event_sync_other_stream_raw done right)"
#include "hazards/hazard.h"

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 2, "b");
    hz_fill(h, a, 1, 0);
    hz_fill(h, b, 0, 2);
    hz_sync_all(h);
    uint64_t pa = hz_ptr(a), pb = hz_ptr(b);
    dv_event *e = NULL;
    hz_rc(h, dv_event_create(h->a, 0, &e), "event");
    hz_first(h, 0);
    hz_fill_raw(h, pa, 2, 0);
    hz_rc(h, dv_event_record(e, 0), "record");
    hz_settle(h);
    hz_rc(h, dv_event_sync(e), "event sync");
    hz_copy_raw(h, pb, pa, 2);
    bool corrupt = !hz_is(h, b, 2);
    hz_rc(h, dv_event_destroy(e), "event destroy");
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
