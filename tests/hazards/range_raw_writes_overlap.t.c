/*
 * Two raw writes of one block on two streams, each saying which bytes it
 * touches (dv_arg_ptr_range): stream 0 writes the first half and one word
 * more, stream 1 the second half.  The ranges overlap by 4 bytes, and
 * nothing orders the two, so the first may land last on that word.
 */
#define HZ_WHAT "raw ranged writes on streams 0 and 1 whose ranges overlap by one word (4 bytes)"
#include "hazards/hazard.h"

#define HALF (HZ_N / 2)

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a");
    hz_fill(h, a, 1, 0);
    hz_sync_all(h);
    uint64_t p = hz_ptr(a);
    hz_first(h, 0);
    hz_fill_range(h, p, 0, HALF + 1, 2, 0); /* words [0, HALF] */
    hz_settle(h);
    hz_fill_range(h, p, HALF, HZ_N - HALF, 3, 1); /* words [HALF, N): posted last */
    bool corrupt = !hz_read_back(h, a);
    for (uint32_t i = 0; i < HZ_N && !corrupt; i++)
        corrupt = h->host[i] != (i < HALF ? 2u : 3u);
    hz_rc(h, dv_ref_release(a), "release");
    return corrupt;
}
