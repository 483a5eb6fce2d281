/*
 * A tracked memset of the last 4096 bytes of a block (an offset) is
 * queued on stream 0; a kernel then reads the 4004 bytes ending 4 bytes
 * into the memset's range through a raw pointer on stream 1
 * (dv_arg_ptr_range).  The raw read does not wait for the memset and may
 * miss the word they share.
 */
#define HZ_WHAT                                                                                    \
    "a memset of a block's last 4096 bytes on stream 0, then a raw read of a range sharing one "   \
    "word with it on stream 1"
#include "hazards/hazard.h"

#define SET_AT     (HZ_BYTES - 4096)
#define READ_BYTES 4004u
#define READ_AT    (SET_AT + 4 - READ_BYTES)

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 0, "b");
    hz_fill(h, a, 0, 0);
    hz_fill(h, b, 0, 0);
    hz_sync_all(h);
    uint64_t pa = hz_ptr(a), pb = hz_ptr(b);
    dv_future f;
    dv_future_init(&f, 0);
    hz_first(h, 0);
    hz_rc(h, dv_memset_async(h->a, a, SET_AT, 0x44, 4096, 0, &f), "memset");
    hz_settle(h);
    dv_arg args[] = {dv_arg_ptr_range(pb, DV_WRITE, READ_BYTES),
                     dv_arg_ptr_range(pa + READ_AT, DV_READ, READ_BYTES), dv_arg_u64(READ_BYTES)};
    hz_post(h, h->copy, hz_grid, hz_block, 1, args, 3, "raw copy b <- a range");
    hz_rc(h, dv_future_wait(&f), "memset");
    bool corrupt = !hz_read_back(h, b);
    for (uint32_t i = 0; i < HZ_N && !corrupt; i++)
        corrupt = h->host[i] != (i == READ_BYTES / 4 - 1 ? 0x44444444u : 0u);
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
