/*
 * A raw pointer into a block is kept after the block's handle was
 * released, and used once the memory was handed out again as a new
 * block.  Everything is ordered (the thread synced every stream between
 * the free and the use), so no stream races another: the mistake is the
 * pointer's provenance.  The checker reports a use after free naming the
 * freed block and the one that now holds the memory.
 */
#define HZ_WHAT                                                                                    \
    "a raw pointer kept past its block's release writes memory the pool handed out again "         \
    "(ordered by syncs: a use after free, not a race)"
#include "hazards/hazard.h"

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a");
    uint64_t stale = hz_ptr(a);
    hz_fill(h, a, 1, 0);
    hz_sync_all(h);
    hz_rc(h, dv_ref_release(a), "release a");
    hz_sync_all(h);
    /* The same size on the same stream: the pool hands the memory out
     * again. */
    dv_ref b = hz_alloc(h, 0, "b");
    hz_first(h, 0);
    hz_fill(h, b, 7, 0);
    hz_sync_all(h);
    hz_settle(h);
    hz_fill_raw(h, stale, 9, 1); /* meant for a, lands in b */
    bool corrupt = !hz_is(h, b, 7);
    hz_rc(h, dv_ref_release(b), "release b");
    return corrupt;
}
