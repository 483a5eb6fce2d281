/*
 * Transitivity done wrong: a device->host copy on stream 0; stream 1
 * records an event and only then waits on the copy's event; stream 2
 * waits on stream 1's event; the host syncs stream 2 and reads the
 * copy's buffer.  Stream 2 learned stream 1 as it was before stream 1
 * waited on the copy, so the chain does not reach the copy.
 */
#define HZ_WHAT                                                                                    \
    "stream 2 waits on a point of stream 1 recorded before stream 1 waited on a device->host "     \
    "copy; the host syncs stream 2 and reads the copy's buffer"
#include "hazards/hazard.h"

static uint32_t buf[HZ_N];

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a");
    dv_event *e0 = NULL, *e1 = NULL;
    hz_rc(h, dv_event_create(h->a, 0, &e0), "event");
    hz_rc(h, dv_event_create(h->a, 0, &e1), "event");
    hz_fill(h, a, 5, 0);
    hz_sync_all(h);
    memset(buf, 0, sizeof(buf));
    dv_future f;
    dv_future_init(&f, 0);
    hz_first(h, 0);
    hz_rc(h, dv_copy_dtoh_async(h->a, buf, a, 0, HZ_BYTES, 0, &f), "copy device->host");
    hz_settle(h);
    hz_rc(h, dv_event_record(e0, 0), "record after the copy");
    hz_rc(h, dv_event_record(e1, 1), "record on stream 1"); /* before stream 1 waits */
    hz_rc(h, dv_stream_wait_event(h->a, 1, e0), "stream 1 waits on the copy");
    hz_rc(h, dv_stream_wait_event(h->a, 2, e1), "stream 2 waits on stream 1's early point");
    hz_rc(h, dv_sync(h->a, 2), "sync stream 2");
    hz_rc(h, dv_check_host_access(h->a, buf, HZ_BYTES, DV_READ), "host read");
    bool corrupt = !hz_words_are(buf, 5);
    hz_rc(h, dv_future_wait(&f), "wait copy device->host");
    hz_rc(h, dv_event_destroy(e0), "event destroy");
    hz_rc(h, dv_event_destroy(e1), "event destroy");
    hz_rc(h, dv_ref_release(a), "release");
    return corrupt;
}
