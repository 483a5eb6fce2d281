/*
 * A permissive actor takes a raw device pointer: a kernel writes a block
 * through it on stream 1 while a tracked kernel still has to write the
 * same block on stream 0.  The recorder cannot see the raw write, so it
 * fences nothing; the program meant the raw write (posted last) to win.
 */
#define HZ_WHAT                                                                                    \
    "write through a raw pointer on stream 1 while a tracked write of the block is queued on "     \
    "stream 0 (write after write)"
#include "hazards/hazard.h"

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a");
    hz_fill(h, a, 1, 0);
    hz_sync_all(h);
    hz_first(h, 0);
    hz_fill(h, a, 2, 0);
    hz_settle(h);
    hz_fill_raw(h, hz_ptr(a), 3, 1); /* posted last: a should end as 3 */
    bool corrupt = !hz_is(h, a, 3);
    dv_ref_release(a);
    return corrupt;
}
