/*
 * A kernel writes words [0, N/2] of a block through its handle with a
 * range (dv_arg_ref_range) on stream 0; another reads 16 bytes from word
 * N/2 on through a raw pointer (dv_arg_ptr_range) on stream 1.  One word
 * is shared.  The recorder fences the handle's uses, not the raw read, so
 * the read may run first and miss it.
 */
#define HZ_WHAT                                                                                    \
    "a ranged write through a handle on stream 0, then a raw read of a range sharing one word "    \
    "with it on stream 1"
#include "hazards/hazard.h"

#define HALF (HZ_N / 2)

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 0, "b");
    hz_fill(h, a, 0, 0);
    hz_fill(h, b, 0, 0);
    hz_sync_all(h);
    uint64_t pa = hz_ptr(a), pb = hz_ptr(b);
    hz_first(h, 0);
    dv_arg w[] = {dv_arg_ref_range(a, DV_WRITE, 0, (uint64_t)(HALF + 1) * 4), dv_arg_u32(6),
                  dv_arg_u64(HALF + 1)};
    hz_post(h, h->fill, hz_grid, hz_block, 0, w, 3, "fill range"); /* words [0, HALF] */
    hz_settle(h);
    dv_arg r[] = {dv_arg_ptr_range(pb, DV_WRITE, 16),
                  dv_arg_ptr_range(pa + (uint64_t)HALF * 4, DV_READ, 16), dv_arg_u64(16)};
    hz_post(h, h->copy, hz_grid, hz_block, 1, r, 3, "raw copy b <- a range");
    bool corrupt = !hz_read_back(h, b);
    for (uint32_t i = 0; i < HZ_N && !corrupt; i++)
        corrupt = h->host[i] != (i == 0 ? 6u : 0u);
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
