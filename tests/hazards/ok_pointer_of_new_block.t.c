/*
 * The neighbour of stale_pointer_after_reuse: the memory is handed out
 * again as a new block, and the raw write goes through the new block's
 * own address, asked for with dv_ref_access (numerically the old one).
 */
#define HZ_CORRECT
#define HZ_WHAT                                                                                    \
    "a raw write into memory handed out again, through the new block's own address "               \
    "(stale_pointer_after_reuse done right)"
#include "hazards/hazard.h"

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a");
    hz_fill(h, a, 1, 0);
    hz_sync_all(h);
    hz_rc(h, dv_ref_release(a), "release a");
    hz_sync_all(h);
    dv_ref b = hz_alloc(h, 0, "b");
    hz_first(h, 0);
    hz_fill(h, b, 7, 0);
    hz_sync_all(h);
    hz_settle(h);
    hz_fill_raw(h, hz_ptr(b), 9, 1);
    bool corrupt = !hz_is(h, b, 9);
    hz_rc(h, dv_ref_release(b), "release b");
    return corrupt;
}
