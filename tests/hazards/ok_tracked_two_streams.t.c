/*
 * Correct neighbour: a tracked write on stream 0 and a tracked read on stream 1 of the same block:
 * the recorder fences them (raw_read_after_write through handles).
 */
#define HZ_CORRECT
#define HZ_WHAT                                                                                    \
    "a tracked write on stream 0 and a tracked read on stream 1 of the same block: the recorder "  \
    "fences them (raw_read_after_write through handles)"
#include "hazards/hazard.h"

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 1, "b");
    hz_fill(h, a, 1, 0);
    hz_fill(h, b, 0, 1);
    hz_sync_all(h);
    hz_first(h, 0);
    hz_fill(h, a, 2, 0);
    hz_settle(h);
    hz_copy(h, b, a, 1);
    bool corrupt = !hz_is(h, b, 2);
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
