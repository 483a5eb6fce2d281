/*
 * A block is released while a raw read of it is still queued on another
 * stream.  The free is fenced only against the uses the recorder saw, so
 * the pool hands the memory to the next allocation on the block's stream
 * at once, and a write there lands before the raw read.
 */
#define HZ_WHAT                                                                                    \
    "release a block while a raw read of it is queued on another stream; the pool hands its "      \
    "memory out again"
#include "hazards/hazard.h"

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 1, "b");
    hz_fill(h, a, 1, 0);
    hz_fill(h, b, 0, 1);
    hz_sync_all(h);
    hz_first(h, 1);
    hz_copy_raw(h, hz_ptr(b), hz_ptr(a), 1); /* b <- a, a is 1 */
    hz_settle(h);
    hz_rc(h, dv_ref_release(a), "release");
    dv_ref c = hz_alloc(h, 0, "c"); /* a's memory, a's stream */
    hz_fill(h, c, 7, 0);
    bool corrupt = !hz_is(h, b, 1);
    hz_rc(h, dv_ref_release(b), "release");
    hz_rc(h, dv_ref_release(c), "release");
    return corrupt;
}
