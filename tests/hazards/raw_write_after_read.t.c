/*
 * A kernel writes a block through a raw pointer on stream 1 while a
 * tracked read of the block is still queued on stream 0.  The recorder
 * sees no write, so it makes stream 1 wait for nothing: the read sees
 * the value written after it in program order.
 */
#define HZ_WHAT                                                                                    \
    "write through a raw pointer on stream 1 while a tracked read of the block is queued on "      \
    "stream 0 (write after read)"
#include "hazards/hazard.h"

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 0, "b");
    hz_fill(h, a, 1, 0);
    hz_fill(h, b, 0, 0);
    hz_sync_all(h);
    hz_first(h, 0);
    hz_copy(h, b, a, 0); /* b <- a, a is 1 */
    hz_settle(h);
    hz_fill_raw(h, hz_ptr(a), 3, 1); /* posted after the read */
    bool corrupt = !hz_is(h, b, 1);
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
