/*
 * The host waits for a device->host copy's future to reach ORDERED
 * (dv_future_wait_ordered) and reads the buffer.  Ordered means enqueued
 * and fenced, not finished: only COMPLETE makes the data arrive first.
 */
#define HZ_WHAT                                                                                    \
    "the host waits for a device->host copy to be ordered (not complete) and reads its buffer"
#include "hazards/hazard.h"

static uint32_t buf[HZ_N];

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a");
    hz_fill(h, a, 5, 0);
    hz_sync_all(h);
    memset(buf, 0, sizeof(buf));
    dv_future f;
    dv_future_init(&f, 0);
    hz_first(h, 0);
    hz_rc(h, dv_copy_dtoh_async(h->a, buf, a, 0, HZ_BYTES, 0, &f), "copy device->host");
    hz_settle(h);
    hz_rc(h, dv_future_wait_ordered(&f), "wait ordered");
    hz_rc(h, dv_check_host_access(h->a, buf, HZ_BYTES, DV_READ), "host read");
    bool corrupt = !hz_words_are(buf, 5);
    hz_rc(h, dv_future_wait(&f), "wait copy device->host");
    hz_rc(h, dv_ref_release(a), "release");
    return corrupt;
}
