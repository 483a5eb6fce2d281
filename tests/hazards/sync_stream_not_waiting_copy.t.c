/*
 * Transitivity done wrong: the host posts a device->host copy on stream
 * 0, makes stream 2 wait on an event of stream 1, syncs stream 2 and
 * reads the copy's buffer.  Stream 2 learned stream 1's work; neither
 * waited on stream 0, so the sync says nothing of the copy.
 */
#define HZ_WHAT                                                                                    \
    "the host syncs stream 2 (which waited on stream 1, not on stream 0) and reads a "             \
    "device->host copy's buffer from stream 0"
#include "hazards/hazard.h"

static uint32_t buf[HZ_N];

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a");
    dv_event *e = NULL;
    hz_rc(h, dv_event_create(h->a, 0, &e), "event");
    hz_fill(h, a, 5, 0);
    hz_sync_all(h);
    memset(buf, 0, sizeof(buf));
    dv_future f;
    dv_future_init(&f, 0);
    hz_first(h, 0);
    hz_rc(h, dv_copy_dtoh_async(h->a, buf, a, 0, HZ_BYTES, 0, &f), "copy device->host");
    hz_settle(h);
    hz_rc(h, dv_event_record(e, 1), "record on stream 1");
    hz_rc(h, dv_stream_wait_event(h->a, 2, e), "stream 2 waits on stream 1");
    hz_rc(h, dv_sync(h->a, 2), "sync stream 2");
    hz_rc(h, dv_check_host_access(h->a, buf, HZ_BYTES, DV_READ), "host read");
    bool corrupt = !hz_words_are(buf, 5);
    hz_rc(h, dv_future_wait(&f), "wait copy device->host");
    hz_rc(h, dv_event_destroy(e), "event destroy");
    hz_rc(h, dv_ref_release(a), "release");
    return corrupt;
}
