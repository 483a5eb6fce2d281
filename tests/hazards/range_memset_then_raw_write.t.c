/*
 * A tracked memset of a sub-range of a block ([4096, 12288)) is queued on
 * stream 0; a kernel then writes an overlapping range through a raw
 * pointer on stream 1 (dv_arg_ptr_range, bytes [12272, 12528): 16 bytes
 * in common).  The recorder fences the handle's uses only, so the raw
 * write does not wait, and the memset may land last on the overlap.
 */
#define HZ_WHAT                                                                                    \
    "a memset of bytes [4096, 12288) on stream 0, then a raw write of [12272, 12528) on stream 1"
#include "hazards/hazard.h"

#define SET_AT    4096u
#define SET_BYTES 8192u
#define RAW_FIRST ((SET_AT + SET_BYTES) / 4 - 4) /* word 3068: 16 bytes inside the memset */
#define RAW_WORDS 64u

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a");
    hz_fill(h, a, 0, 0);
    hz_sync_all(h);
    uint64_t p = hz_ptr(a);
    dv_future f;
    dv_future_init(&f, 0);
    hz_first(h, 0);
    hz_rc(h, dv_memset_async(h->a, a, SET_AT, 0x33, SET_BYTES, 0, &f), "memset");
    hz_settle(h);
    dv_arg args[] = {dv_arg_ptr_range(p + (uint64_t)RAW_FIRST * 4, DV_WRITE, RAW_WORDS * 4),
                     dv_arg_u32(7), dv_arg_u64(RAW_WORDS)};
    hz_post(h, h->fill, hz_grid, hz_block, 1, args, 3, "raw fill range"); /* posted last */
    hz_rc(h, dv_future_wait(&f), "memset");
    bool corrupt = !hz_read_back(h, a);
    for (uint32_t i = 0; i < HZ_N && !corrupt; i++) {
        uint32_t want = 0;
        if (i >= RAW_FIRST && i < RAW_FIRST + RAW_WORDS)
            want = 7;
        else if (i >= SET_AT / 4 && i < (SET_AT + SET_BYTES) / 4)
            want = 0x33333333u;
        corrupt = h->host[i] != want;
    }
    hz_rc(h, dv_ref_release(a), "release");
    return corrupt;
}
