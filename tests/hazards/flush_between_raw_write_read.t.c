/*
 * A raw write on stream 0, dv_flush, then a raw read on stream 1.  A
 * flush returns once the thread's posts are ordered (enqueued), not done:
 * it orders posts, not the device.
 */
#define HZ_WHAT "a raw write on stream 0, dv_flush, then a raw read of the block on stream 1"
#include "hazards/hazard.h"

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 0, "b");
    hz_fill(h, a, 1, 0);
    hz_fill(h, b, 0, 0);
    hz_sync_all(h);
    uint64_t pa = hz_ptr(a), pb = hz_ptr(b);
    hz_first(h, 0);
    hz_fill_raw(h, pa, 2, 0);
    hz_settle(h);
    hz_rc(h, dv_flush(h->a), "flush"); /* enqueued, not finished */
    hz_copy_raw(h, pb, pa, 1);         /* b <- a: meant to see 2 */
    bool corrupt = !hz_is(h, b, 2);
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
