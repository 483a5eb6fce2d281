/*
 * Correct neighbour of other_thread_sync_hides: another thread waits for
 * the raw write on stream 1 (a sync of stream 1) and then syncs stream 2;
 * after the join this thread, which never waited for the write, reads the
 * block raw on stream 2.  The sync on stream 2 is ordered after what its
 * poster knew (the write), and the read after the sync by stream order.
 */
#define HZ_CORRECT
#define HZ_WHAT                                                                                    \
    "a raw write on stream 1; another thread syncs stream 1, then stream 2; after the join this "  \
    "thread reads the block raw on stream 2"
#include "hazards/hazard.h"

static int learn_then_sync(hz *h, void *arg)
{
    (void)arg;
    int rc = dv_sync(h->a, 1);
    return rc == DV_OK ? dv_sync(h->a, 2) : rc;
}

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 0, "b");
    hz_fill(h, a, 1, 0);
    hz_fill(h, b, 0, 0);
    hz_sync_all(h);
    uint64_t pa = hz_ptr(a), pb = hz_ptr(b);
    hz_first(h, 1);
    hz_fill_raw(h, pa, 2, 1); /* not waited by this thread */
    hz_settle(h);
    hz_on_other_thread(h, learn_then_sync, NULL, "the other thread's syncs");
    hz_copy_raw(h, pb, pa, 2); /* b <- a, after stream 2's sync */
    bool corrupt = !hz_is(h, b, 2);
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
