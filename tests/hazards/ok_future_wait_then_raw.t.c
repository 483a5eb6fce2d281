/*
 * Correct neighbour: a raw write on stream 0 whose future the thread waits on, then a raw read on
 * stream 1 (other_thread_waits_future done right).
 */
#define HZ_CORRECT
#define HZ_WHAT                                                                                    \
    "a raw write on stream 0 whose future the thread waits on, then a raw read on stream 1 "       \
    "(other_thread_waits_future done right)"
#include "hazards/hazard.h"

/* A raw fill of a whole block with its own future (waited by the caller
 * of ok_wait). */
static int raw_fill_f(hz *h, uint64_t p, uint32_t v, dv_stream s, dv_future *f, dv_arg *args)
{
    args[0] = dv_arg_ptr_access(p, DV_WRITE);
    args[1] = dv_arg_u32(v);
    args[2] = dv_arg_u64(HZ_N);
    dv_future_init(f, 0);
    return hz_rc(h, dv_launch_async(h->a, h->fill, hz_grid, hz_block, 0, s, args, 3, f),
                 "raw fill");
}

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 1, "b");
    hz_fill(h, a, 1, 0);
    hz_fill(h, b, 0, 1);
    hz_sync_all(h);
    uint64_t pa = hz_ptr(a), pb = hz_ptr(b);
    static dv_arg args[3];
    dv_future f;
    hz_first(h, 0);
    raw_fill_f(h, pa, 2, 0, &f, args);
    hz_settle(h);
    hz_rc(h, dv_future_wait(&f), "wait for the raw write");
    hz_copy_raw(h, pb, pa, 1);
    bool corrupt = !hz_is(h, b, 2);
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
