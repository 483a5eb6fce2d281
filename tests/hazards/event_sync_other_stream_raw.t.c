/*
 * A raw write on stream 0; the thread records an event on stream 1, syncs
 * it, and reads the block raw on stream 2.  The event sync orders the
 * thread after stream 1's work only, so the read posted after it is not
 * ordered after the write on stream 0.
 */
#define HZ_WHAT                                                                                    \
    "a raw write on stream 0, an event sync of stream 1, then a raw read of the block on "         \
    "stream 2"
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
    hz_rc(h, dv_event_record(e, 1), "record on stream 1"); /* the wrong stream */
    hz_rc(h, dv_event_sync(e), "event sync");
    hz_copy_raw(h, pb, pa, 2); /* b <- a: meant to see 2 */
    bool corrupt = !hz_is(h, b, 2);
    hz_rc(h, dv_event_destroy(e), "event destroy");
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
