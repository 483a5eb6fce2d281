/*
 * A device->host copy on stream 0 fills a pageable buffer; stream 1 waits
 * on an event recorded after it, then copies the buffer to the device.
 * The event orders the device, not the host: a staged host->device copy
 * reads its pageable source from the post on (its first chunks are
 * filled before anything on its stream is waited for), so it sends what
 * the buffer held before the download landed.  Only a host wait (the
 * download's future) orders it.
 */
#define HZ_WHAT                                                                                    \
    "a pageable host->device copy on stream 1, after an event of stream 0, reads the buffer a "    \
    "device->host copy before that event still fills"
#include "hazards/hazard.h"

static uint32_t buf[HZ_N];

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 1, "b");
    dv_event *e = NULL;
    hz_rc(h, dv_event_create(h->a, 0, &e), "event");
    hz_fill(h, a, 5, 0);
    hz_fill(h, b, 0, 1);
    hz_sync_all(h);
    memset(buf, 0, sizeof(buf));
    dv_future down, up;
    dv_future_init(&down, 0);
    dv_future_init(&up, 0);
    hz_first(h, 0);
    hz_rc(h, dv_copy_dtoh_async(h->a, buf, a, 0, HZ_BYTES, 0, &down), "copy device->host");
    hz_rc(h, dv_event_record(e, 0), "record");
    hz_settle(h);
    hz_rc(h, dv_stream_wait_event(h->a, 1, e), "wait event");
    hz_rc(h, dv_copy_htod_async(h->a, b, 0, buf, HZ_BYTES, 1, &up), "copy host->device");
    hz_rc(h, dv_future_wait(&down), "wait copy device->host");
    hz_rc(h, dv_future_wait(&up), "wait copy host->device");
    bool corrupt = !hz_is(h, b, 5); /* b should be a's value, through buf */
    hz_rc(h, dv_event_destroy(e), "event destroy");
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
