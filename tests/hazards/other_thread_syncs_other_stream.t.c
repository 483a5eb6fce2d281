/*
 * The mistake beside ok_other_thread_sync_orders_stream: another thread
 * syncs stream 2 without having waited for the raw write on stream 1;
 * after the join this thread reads the block raw on stream 2.  The sync
 * carries what its poster knew, which is not the write: nothing orders
 * the read after it.
 */
#define HZ_WHAT                                                                                    \
    "a raw write on stream 1; another thread, which never waited for it, syncs stream 2; after "   \
    "the join this thread reads the block raw on stream 2"
#include "hazards/hazard.h"

static int sync_stream2(hz *h, void *arg)
{
    (void)arg;
    return dv_sync(h->a, 2);
}

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 0, "b");
    hz_fill(h, a, 1, 0);
    hz_fill(h, b, 0, 0);
    hz_sync_all(h);
    uint64_t pa = hz_ptr(a), pb = hz_ptr(b);
    hz_first(h, 1);
    hz_fill_raw(h, pa, 2, 1); /* waited by nobody */
    hz_on_other_thread(h, sync_stream2, NULL, "the other thread's sync of stream 2");
    hz_settle(h);
    hz_copy_raw(h, pb, pa, 2); /* b <- a: meant to see 2 */
    bool corrupt = !hz_is(h, b, 2);
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
