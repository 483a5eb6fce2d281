/*
 * A block is allocated on stream 0 and written at once on stream 1
 * through its raw address.  The allocation is ordered on stream 0 only:
 * its memory came back from a block whose last write is still queued
 * there, and nothing makes stream 1 wait for it.
 */
#define HZ_WHAT                                                                                    \
    "allocate on stream 0 (memory whose last write is still queued there) and write it raw on "    \
    "stream 1"
#include "hazards/hazard.h"

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a");
    hz_first(h, 0);
    hz_fill(h, a, 1, 0);
    hz_settle(h);
    hz_rc(h, dv_ref_release(a), "release");
    dv_ref b = hz_alloc(h, 0, "b"); /* a's memory, behind a's fill */
    hz_fill_raw(h, hz_ptr(b), 4, 1);
    bool corrupt = !hz_is(h, b, 4);
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
