/*
 * Correct neighbour: raw fills of the two halves of one block on two streams, each with its range
 * (range_raw_writes_overlap done right).
 */
#define HZ_CORRECT
#define HZ_WHAT                                                                                    \
    "raw fills of the two halves of one block on two streams, each with its range "                \
    "(range_raw_writes_overlap done right)"
#include "hazards/hazard.h"

#define HALF (HZ_N / 2)

static int fill_range(hz *h, uint64_t p, uint32_t first, uint32_t words, uint32_t v, dv_stream s)
{
    dv_arg args[] = {dv_arg_ptr_range(p + (uint64_t)first * 4, DV_WRITE, (uint64_t)words * 4),
                     dv_arg_u32(v), dv_arg_u64(words)};
    return hz_post(h, h->fill, hz_grid, hz_block, s, args, 3, "raw fill range");
}

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a");
    hz_fill(h, a, 1, 0);
    hz_sync_all(h);
    uint64_t p = hz_ptr(a);
    hz_first(h, 0);
    fill_range(h, p, 0, HALF, 2, 0);
    hz_settle(h);
    fill_range(h, p, HALF, HZ_N - HALF, 3, 1);
    hz_sync_all(h);
    bool corrupt = hz_rc(h, dv_copy_dtoh(h->a, h->host, a, 0, HZ_BYTES, 0), "read back") != DV_OK;
    for (uint32_t i = 0; i < HZ_N && !corrupt; i++)
        corrupt = h->host[i] != (i < HALF ? 2u : 3u);
    hz_rc(h, dv_ref_release(a), "release");
    return corrupt;
}
