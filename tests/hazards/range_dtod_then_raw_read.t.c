/*
 * A tracked device->device copy fills bytes [8192, 16384) of a block on
 * stream 0; a kernel then reads bytes [4096, 8200) of it through a raw
 * pointer on stream 1 (dv_arg_ptr_range): 8 bytes in common.  The
 * recorder fences handles, not the raw read, so it may run before the
 * copy and miss those 8 bytes.
 */
#define HZ_WHAT                                                                                    \
    "a copy into bytes [8192, 16384) on stream 0, then a raw read of [4096, 8200) on stream 1"
#include "hazards/hazard.h"

#define COPY_AT    8192u
#define COPY_BYTES 8192u
#define READ_AT    4096u
#define READ_BYTES (COPY_AT - READ_AT + 8) /* 8 bytes into the copy's range */

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), src = hz_alloc(h, 0, "src"), c = hz_alloc(h, 0, "c");
    hz_fill(h, a, 0, 0);
    hz_fill(h, src, 9, 0);
    hz_fill(h, c, 0, 0);
    hz_sync_all(h);
    uint64_t pa = hz_ptr(a), pc = hz_ptr(c);
    dv_future f;
    dv_future_init(&f, 0);
    hz_first(h, 0);
    hz_rc(h, dv_copy_dtod_async(h->a, a, COPY_AT, src, 0, COPY_BYTES, 0, &f), "copy a <- src");
    hz_settle(h);
    dv_arg args[] = {dv_arg_ptr_range(pc, DV_WRITE, READ_BYTES),
                     dv_arg_ptr_range(pa + READ_AT, DV_READ, READ_BYTES), dv_arg_u64(READ_BYTES)};
    hz_post(h, h->copy, hz_grid, hz_block, 1, args, 3, "raw copy c <- a range");
    hz_rc(h, dv_future_wait(&f), "copy a <- src");
    bool corrupt = !hz_read_back(h, c);
    for (uint32_t i = 0; i < HZ_N && !corrupt; i++) {
        uint32_t want = 0;
        if (i >= (COPY_AT - READ_AT) / 4 && i < READ_BYTES / 4)
            want = 9; /* the 8 bytes the read shares with the copy */
        corrupt = h->host[i] != want;
    }
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(src), "release");
    hz_rc(h, dv_ref_release(c), "release");
    return corrupt;
}
