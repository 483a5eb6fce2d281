/*
 * Correct neighbour: the thread itself syncs stream 1 between a raw write there and a raw read on
 * stream 2 (other_thread_sync_hides done right).
 */
#define HZ_CORRECT
#define HZ_WHAT                                                                                    \
    "the thread itself syncs stream 1 between a raw write there and a raw read on stream 2 "       \
    "(other_thread_sync_hides done right)"
#include "hazards/hazard.h"

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 0, "b");
    hz_fill(h, a, 1, 0);
    hz_fill(h, b, 0, 0);
    hz_sync_all(h);
    uint64_t pa = hz_ptr(a), pb = hz_ptr(b);
    hz_first(h, 1);
    hz_fill_raw(h, pa, 2, 1);
    hz_settle(h);
    hz_rc(h, dv_sync(h->a, 1), "sync stream 1");
    hz_copy_raw(h, pb, pa, 2);
    bool corrupt = !hz_is(h, b, 2);
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
