/*
 * Correct neighbour: a memset of the first half on stream 0 while a raw fill writes the second half
 * on stream 1 (range_memset_then_raw_write done right).
 */
#define HZ_CORRECT
#define HZ_WHAT                                                                                    \
    "a memset of the first half on stream 0 while a raw fill writes the second half on stream 1 "  \
    "(range_memset_then_raw_write done right)"
#include "hazards/hazard.h"

#define HALF (HZ_N / 2)

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 1, "a");
    hz_fill(h, a, 1, 1);
    hz_sync_all(h);
    uint64_t p = hz_ptr(a);
    hz_first(h, 0);
    dv_future f;
    dv_future_init(&f, 0);
    hz_rc(h, dv_memset_async(h->a, a, 0, 0, (uint64_t)HALF * 4, 0, &f), "memset");
    hz_settle(h);
    dv_arg second[] = {dv_arg_ptr_range(p + (uint64_t)HALF * 4, DV_WRITE, (uint64_t)HALF * 4),
                       dv_arg_u32(3), dv_arg_u64(HALF)};
    hz_post(h, h->fill, hz_grid, hz_block, 1, second, 3, "raw fill range");
    hz_rc(h, dv_future_wait(&f), "memset");
    hz_sync_all(h);
    bool corrupt = hz_rc(h, dv_copy_dtoh(h->a, h->host, a, 0, HZ_BYTES, 0), "read back") != DV_OK;
    for (uint32_t i = 0; i < HZ_N && !corrupt; i++)
        corrupt = h->host[i] != (i < HALF ? 0u : 3u);
    hz_rc(h, dv_ref_release(a), "release");
    return corrupt;
}
