/*
 * Correct: another thread waits for the raw write on stream 1 (a sync of
 * stream 1) and then makes stream 2 wait for an event recorded earlier on
 * stream 0; after the join this thread, which never waited for the write,
 * reads the block raw on stream 2.  The stream wait is an operation on
 * stream 2 ordered after what its poster knew (the write), and the read
 * comes after it in stream 2's order.
 */
#define HZ_CORRECT
#define HZ_WHAT                                                                                    \
    "a raw write on stream 1; another thread syncs stream 1, then makes stream 2 wait for an "     \
    "event of stream 0; after the join this thread reads the block raw on stream 2"
#include "hazards/hazard.h"

static int learn_then_wait(hz *h, void *event)
{
    int rc = dv_sync(h->a, 1);
    return rc == DV_OK ? dv_stream_wait_event(h->a, 2, event) : rc;
}

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 0, "b");
    dv_event *e = NULL;
    hz_rc(h, dv_event_create(h->a, 0, &e), "event");
    hz_fill(h, a, 1, 0);
    hz_fill(h, b, 0, 0);
    hz_rc(h, dv_event_record(e, 0), "record on stream 0");
    hz_sync_all(h);
    uint64_t pa = hz_ptr(a), pb = hz_ptr(b);
    hz_first(h, 1);
    hz_fill_raw(h, pa, 2, 1); /* not waited by this thread */
    hz_settle(h);
    hz_on_other_thread(h, learn_then_wait, e, "the other thread's sync and stream wait");
    hz_copy_raw(h, pb, pa, 2); /* b <- a, after stream 2's wait */
    bool corrupt = !hz_is(h, b, 2);
    hz_rc(h, dv_event_destroy(e), "event destroy");
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
