/*
 * A raw pointer kept past its handle's release: the pool hands the same
 * memory to the next allocation of that size on that stream, and a write
 * through the stale pointer, queued on stream 1, lands in the new block
 * after the new owner wrote it.  The recorder knows handles, not
 * addresses, so it fences nothing.
 */
#define HZ_WHAT                                                                                    \
    "write through a raw pointer kept past its handle's release, into the block that reuses "      \
    "its memory"
#include "hazards/hazard.h"

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a");
    hz_fill(h, a, 1, 0);
    hz_sync_all(h);
    uint64_t stale = hz_ptr(a);
    hz_rc(h, dv_ref_release(a), "release");
    dv_ref b = hz_alloc(h, 0, "b"); /* the pool hands a's memory back */
    bool reused = hz_ptr(b) == stale;
    if (!reused)
        diag("b (0x%llx) did not get a's memory (0x%llx)", (unsigned long long)hz_ptr(b),
             (unsigned long long)stale);
    hz_first(h, 1);
    hz_fill_raw(h, stale, 9, 1); /* meant for a, long gone */
    hz_settle(h);
    hz_fill(h, b, 5, 0); /* posted last: b should be 5 */
    bool corrupt = reused && !hz_is(h, b, 5);
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
