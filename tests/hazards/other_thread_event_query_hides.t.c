/*
 * A race hidden by someone else's completion: this thread writes a block
 * raw on stream 1 and records an event after it; another thread polls the
 * event with dv_event_query until it answers DV_OK; this thread, which
 * never asked, reads the block raw on stream 2.  The query that answered
 * done orders the thread that asked, not this one.
 */
#define HZ_WHAT                                                                                    \
    "a raw write on stream 1 and an event after it; another thread queries the event until "       \
    "done; this thread reads the block raw on stream 2"
#include "hazards/hazard.h"

#include <pthread.h>

typedef struct other {
    dv_event *e;
    int rc;
} other;

static void *poll_event(void *arg)
{
    other *o = arg;
    struct timespec ts = {0, 100000}; /* 100 us */
    while ((o->rc = dv_event_query(o->e)) == DV_EAGAIN)
        nanosleep(&ts, NULL);
    return NULL;
}

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 0, "b");
    dv_event *e = NULL;
    hz_rc(h, dv_event_create(h->a, 0, &e), "event");
    hz_fill(h, a, 1, 0);
    hz_fill(h, b, 0, 0);
    hz_sync_all(h);
    uint64_t pa = hz_ptr(a), pb = hz_ptr(b);
    hz_first(h, 1);
    hz_fill_raw(h, pa, 2, 1);
    hz_rc(h, dv_event_record(e, 1), "record");
    other o = {e, -1};
    pthread_t t;
    bool started = pthread_create(&t, NULL, poll_event, &o) == 0;
    hz_settle(h);
    hz_copy_raw(h, pb, pa, 2); /* b <- a: meant to see 2 */
    if (started) {
        pthread_join(t, NULL);
        hz_rc(h, o.rc, "another thread's event query");
    } else {
        h->failed++;
    }
    bool corrupt = !hz_is(h, b, 2);
    hz_rc(h, dv_event_destroy(e), "event destroy");
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
