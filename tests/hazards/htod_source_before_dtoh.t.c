/*
 * A host->device copy on stream 1 takes its source from the buffer a
 * device->host copy on stream 0 is still filling.  The recorder fences
 * device blocks, not host buffers, so nothing orders the two copies:
 * the upload sends what the buffer held before the download landed.
 */
#define HZ_WHAT                                                                                    \
    "a host->device copy on stream 1 reads the buffer a device->host copy on stream 0 still "      \
    "writes"
#include "hazards/hazard.h"

static uint32_t buf[HZ_N];

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 1, "b");
    hz_fill(h, a, 5, 0);
    hz_fill(h, b, 0, 1);
    hz_sync_all(h);
    memset(buf, 0, sizeof(buf));
    dv_future down, up;
    dv_future_init(&down, 0);
    dv_future_init(&up, 0);
    hz_first(h, 0);
    hz_rc(h, dv_copy_dtoh_async(h->a, buf, a, 0, HZ_BYTES, 0, &down), "copy device->host");
    hz_settle(h);
    hz_rc(h, dv_copy_htod_async(h->a, b, 0, buf, HZ_BYTES, 1, &up), "copy host->device");
    hz_rc(h, dv_future_wait(&down), "wait copy device->host");
    hz_rc(h, dv_future_wait(&up), "wait copy host->device");
    bool corrupt = !hz_is(h, b, 5); /* b should be a's value, through buf */
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
