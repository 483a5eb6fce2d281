/*
 * Two raw copies into one block on two streams, each saying which bytes
 * it touches (dv_arg_ptr_range): stream 0 copies into the first half and
 * three bytes more, stream 1 into the second half.  The ranges overlap by
 * 3 bytes, and nothing orders the two: the first may land last there.
 */
#define HZ_WHAT                                                                                    \
    "raw ranged copies into one block on streams 0 and 1 whose ranges overlap by 3 bytes"
#include "hazards/hazard.h"

#define HALF (HZ_BYTES / 2)
#define OVER 3

/* copy bytes dst <- src, raw, each with its range. */
static int copy_range(hz *h, uint64_t dst, uint64_t src, uint64_t bytes, dv_stream s)
{
    dv_arg args[] = {dv_arg_ptr_range(dst, DV_WRITE, bytes), dv_arg_ptr_range(src, DV_READ, bytes),
                     dv_arg_u64(bytes)};
    return hz_post(h, h->copy, hz_grid, hz_block, s, args, 3, "raw copy range");
}

static bool hz_plant(hz *h)
{
    dv_ref dst = hz_alloc(h, 0, "dst"), one = hz_alloc(h, 0, "one"), two = hz_alloc(h, 0, "two");
    hz_fill(h, dst, 0, 0);
    hz_fill(h, one, 0x11111111u, 0);
    hz_fill(h, two, 0x22222222u, 0);
    hz_sync_all(h);
    uint64_t pd = hz_ptr(dst), p1 = hz_ptr(one), p2 = hz_ptr(two);
    hz_first(h, 0);
    copy_range(h, pd, p1, HALF + OVER, 0); /* bytes [0, HALF + 3) */
    hz_settle(h);
    copy_range(h, pd + HALF, p2 + HALF, HZ_BYTES - HALF, 1); /* [HALF, end): posted last */
    bool corrupt = !hz_read_back(h, dst);
    const uint8_t *bytes = (const uint8_t *)h->host;
    for (uint64_t i = 0; i < HZ_BYTES && !corrupt; i++)
        corrupt = bytes[i] != (i < HALF ? 0x11 : 0x22);
    hz_rc(h, dv_ref_release(dst), "release");
    hz_rc(h, dv_ref_release(one), "release");
    hz_rc(h, dv_ref_release(two), "release");
    return corrupt;
}
