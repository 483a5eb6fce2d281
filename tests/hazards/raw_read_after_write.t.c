/*
 * A launch reads a block through a raw pointer on stream 1 while a
 * tracked write of that block is still queued on stream 0.  Its output is
 * a tracked handle, but the input is a bare address: the recorder fences
 * the handle and not the address, so stream 1 does not wait for the
 * write it was meant to see.
 */
#define HZ_WHAT                                                                                    \
    "read through a raw pointer on stream 1 while a tracked write of the block is queued on "      \
    "stream 0 (read after write)"
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
    dv_arg args[] = {dv_arg_ref(b, DV_WRITE, 0), dv_arg_ptr_access(hz_ptr(a), DV_READ),
                     dv_arg_u64(HZ_BYTES)};
    hz_rc(h, dv_launch(h->a, h->copy, hz_grid, hz_block, 0, 1, args, 3), "copy b <- raw a");
    bool corrupt = !hz_is(h, b, 2); /* b should be a's new value */
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
