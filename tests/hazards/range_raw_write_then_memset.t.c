/*
 * A kernel writes bytes [0, 4112) of a block through a raw pointer on
 * stream 0 (dv_arg_ptr_range); then a tracked memset of [4096, 12288) is
 * posted on stream 1.  The two overlap by 16 bytes.  The recorder cannot
 * see the raw write, so the memset waits for nothing and the raw write
 * may land last on the overlap.
 */
#define HZ_WHAT                                                                                    \
    "a raw write of bytes [0, 4112) on stream 0, then a memset of [4096, 12288) on stream 1"
#include "hazards/hazard.h"

#define RAW_WORDS 1028u /* bytes [0, 4112) */
#define SET_AT    4096u
#define SET_BYTES 8192u

static bool hz_plant(hz *h)
{
    /* a is last written on the memset's stream: the recorder's fence for
     * the memset then waits for nothing (written on stream 0, it would
     * wait for stream 0's tail, the raw write included). */
    dv_ref a = hz_alloc(h, 1, "a");
    hz_fill(h, a, 0, 1);
    hz_sync_all(h);
    uint64_t p = hz_ptr(a);
    hz_first(h, 0);
    dv_arg args[] = {dv_arg_ptr_range(p, DV_WRITE, RAW_WORDS * 4), dv_arg_u32(7),
                     dv_arg_u64(RAW_WORDS)};
    hz_post(h, h->fill, hz_grid, hz_block, 0, args, 3, "raw fill range");
    hz_settle(h);
    dv_future f;
    dv_future_init(&f, 0);
    hz_rc(h, dv_memset_async(h->a, a, SET_AT, 0x33, SET_BYTES, 1, &f), "memset"); /* last */
    hz_rc(h, dv_future_wait(&f), "memset");
    bool corrupt = !hz_read_back(h, a);
    for (uint32_t i = 0; i < HZ_N && !corrupt; i++) {
        uint32_t want = 0;
        if (i >= SET_AT / 4 && i < (SET_AT + SET_BYTES) / 4)
            want = 0x33333333u;
        else if (i < RAW_WORDS)
            want = 7;
        corrupt = h->host[i] != want;
    }
    hz_rc(h, dv_ref_release(a), "release");
    return corrupt;
}
