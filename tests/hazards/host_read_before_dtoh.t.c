/*
 * The host reads the buffer of a device->host copy before waiting for
 * its future.  The copy is posted, not done: nothing on the device side
 * is wrong, so no recorder fence can help; only the host's own order
 * (wait, then read) makes the data arrive first.
 */
#define HZ_WHAT "the host reads a device->host copy's buffer before waiting for its future"
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
    hz_rc(h, dv_check_host_access(h->a, buf, HZ_BYTES, DV_READ), "host read");
    bool corrupt = !hz_words_are(buf, 5); /* read before the wait */
    hz_rc(h, dv_future_wait(&f), "wait copy device->host");
    hz_rc(h, dv_ref_release(a), "release");
    return corrupt;
}
