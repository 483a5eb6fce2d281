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

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a");
    hz_fill(h, a, 1, 0);
    hz_sync_all(h);
    uint64_t p = hz_ptr(a);
    hz_first(h, 0);
    hz_fill_range(h, p, 0, HALF, 2, 0);
    hz_settle(h);
    hz_fill_range(h, p, HALF, HZ_N - HALF, 3, 1);
    hz_sync_all(h);
    bool corrupt = hz_rc(h, dv_copy_dtoh(h->a, h->host, a, 0, HZ_BYTES, 0), "read back") != DV_OK;
    for (uint32_t i = 0; i < HZ_N && !corrupt; i++)
        corrupt = h->host[i] != (i < HALF ? 2u : 3u);
    hz_rc(h, dv_ref_release(a), "release");
    return corrupt;
}
