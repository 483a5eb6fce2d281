/*
 * Correct neighbour: a device->host copy on stream 0, an event after it, stream 1 waits on the
 * event, the host syncs stream 1 and reads (transitive: sync_stream_not_waiting_copy done right).
 */
#define HZ_CORRECT
#define HZ_WHAT                                                                                    \
    "a device->host copy on stream 0, an event after it, stream 1 waits on the event, the host "   \
    "syncs stream 1 and reads (transitive: sync_stream_not_waiting_copy done right)"
#include "hazards/hazard.h"

static bool hz_plant(hz *h)
{
    static uint32_t buf[HZ_N];
    dv_ref a = hz_alloc(h, 0, "a");
    hz_fill(h, a, 4, 0);
    hz_sync_all(h);
    dv_event *e = NULL;
    hz_rc(h, dv_event_create(h->a, 0, &e), "event");
    hz_first(h, 0);
    dv_future f;
    dv_future_init(&f, 0);
    hz_rc(h, dv_copy_dtoh_async(h->a, buf, a, 0, HZ_BYTES, 0, &f), "dtoh");
    hz_rc(h, dv_event_record(e, 0), "record");
    hz_rc(h, dv_stream_wait_event(h->a, 1, e), "stream 1 waits");
    hz_settle(h);
    hz_rc(h, dv_sync(h->a, 1), "sync stream 1");
    hz_rc(h, dv_check_host_access(h->a, buf, HZ_BYTES, DV_READ), "host read");
    bool corrupt = !hz_words_are(buf, 4);
    hz_rc(h, dv_future_wait(&f), "dtoh");
    hz_rc(h, dv_event_destroy(e), "event destroy");
    hz_sync_all(h);
    hz_rc(h, dv_ref_release(a), "release");
    return corrupt;
}
