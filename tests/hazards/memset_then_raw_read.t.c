/*
 * A tracked memset of a block is queued on stream 0; a kernel reads the
 * block through a raw pointer on stream 1.  The recorder fences the
 * handle's uses only, so the raw read does not wait for the memset.
 */
#define HZ_WHAT                                                                                    \
    "read through a raw pointer on stream 1 while a tracked memset of the block is queued on "     \
    "stream 0"
#include "hazards/hazard.h"

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 1, "b");
    hz_fill(h, a, 1, 0);
    hz_fill(h, b, 0, 1);
    hz_sync_all(h);
    uint64_t pa = hz_ptr(a), pb = hz_ptr(b);
    dv_future f;
    dv_future_init(&f, 0);
    hz_first(h, 0);
    hz_rc(h, dv_memset_async(h->a, a, 0, 0x22, HZ_BYTES, 0, &f), "memset"); /* posted, not waited */
    hz_settle(h);
    hz_copy_raw(h, pb, pa, 1);
    hz_rc(h, dv_future_wait(&f), "memset");
    bool corrupt = !hz_is(h, b, 0x22222222u);
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
