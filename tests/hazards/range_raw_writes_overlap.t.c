/*
 * Two raw writes of one block on two streams, each saying which bytes it
 * touches (dv_arg_ptr_range): stream 0 writes the first half and one word
 * more, stream 1 the second half.  The ranges overlap by 4 bytes, and
 * nothing orders the two, so the first may land last on that word.
 */
#define HZ_WHAT "raw ranged writes on streams 0 and 1 whose ranges overlap by one word (4 bytes)"
#include "hazards/hazard.h"

#define HALF (HZ_N / 2)

/* fill_u32 of words [first, first + words) of the block at p, raw. */
static int fill_range(hz *h, uint64_t p, uint32_t first, uint32_t words, uint32_t v, dv_stream s)
{
    dv_arg args[] = {dv_arg_ptr_range(p + (uint64_t)first * 4, DV_WRITE, (uint64_t)words * 4),
                     dv_arg_u32(v), dv_arg_u64(words)};
    return hz_post(h, h->fill, hz_grid, hz_block, s, args, 3, "raw fill range");
}

/* After every stream finished: r's words in h->host. */
static bool read_back(hz *h, dv_ref r)
{
    hz_sync_all(h);
    memset(h->host, 0xA5, sizeof(h->host));
    return hz_rc(h, dv_copy_dtoh(h->a, h->host, r, 0, HZ_BYTES, 0), "read back") == DV_OK;
}

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a");
    hz_fill(h, a, 1, 0);
    hz_sync_all(h);
    uint64_t p = hz_ptr(a);
    hz_first(h, 0);
    fill_range(h, p, 0, HALF + 1, 2, 0); /* words [0, HALF] */
    hz_settle(h);
    fill_range(h, p, HALF, HZ_N - HALF, 3, 1); /* words [HALF, N): posted last */
    bool corrupt = !read_back(h, a);
    for (uint32_t i = 0; i < HZ_N && !corrupt; i++)
        corrupt = h->host[i] != (i < HALF ? 2u : 3u);
    hz_rc(h, dv_ref_release(a), "release");
    return corrupt;
}
