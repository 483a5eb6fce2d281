/*
 * Two kernels write one block through raw pointers, on stream 0 and then
 * on stream 1.  Neither write is tracked, so nothing orders the two: the
 * first may land last.
 */
#define HZ_WHAT "two writes through raw pointers, on streams 0 and 1 (write after write)"
#include "hazards/hazard.h"

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a");
    hz_fill(h, a, 1, 0);
    hz_sync_all(h);
    uint64_t p = hz_ptr(a);
    hz_first(h, 0);
    hz_fill_raw(h, p, 2, 0);
    hz_settle(h);
    hz_fill_raw(h, p, 3, 1); /* posted last: a should end as 3 */
    bool corrupt = !hz_is(h, a, 3);
    hz_rc(h, dv_ref_release(a), "release");
    return corrupt;
}
