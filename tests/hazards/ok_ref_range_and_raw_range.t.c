/*
 * Correct neighbour: a handle fills the first half (dv_arg_ref_range) on stream 0 while a raw
 * pointer fills the second half (dv_arg_ptr_range) on stream 1.
 */
#define HZ_CORRECT
#define HZ_WHAT                                                                                    \
    "a handle fills the first half (dv_arg_ref_range) on stream 0 while a raw pointer fills the "  \
    "second half (dv_arg_ptr_range) on stream 1"
#include "hazards/hazard.h"

#define HALF (HZ_N / 2)

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a");
    hz_fill(h, a, 1, 0);
    hz_sync_all(h);
    uint64_t p = hz_ptr(a);
    hz_first(h, 0);
    dv_arg first[] = {dv_arg_ref_range(a, DV_WRITE, 0, (uint64_t)HALF * 4), dv_arg_u32(2),
                      dv_arg_u64(HALF)};
    hz_post(h, h->fill, hz_grid, hz_block, 0, first, 3, "ref fill range");
    hz_settle(h);
    dv_arg second[] = {dv_arg_ptr_range(p + (uint64_t)HALF * 4, DV_WRITE, (uint64_t)HALF * 4),
                       dv_arg_u32(3), dv_arg_u64(HALF)};
    hz_post(h, h->fill, hz_grid, hz_block, 1, second, 3, "raw fill range");
    hz_sync_all(h);
    bool corrupt = hz_rc(h, dv_copy_dtoh(h->a, h->host, a, 0, HZ_BYTES, 0), "read back") != DV_OK;
    for (uint32_t i = 0; i < HZ_N && !corrupt; i++)
        corrupt = h->host[i] != (i < HALF ? 2u : 3u);
    hz_rc(h, dv_ref_release(a), "release");
    return corrupt;
}
