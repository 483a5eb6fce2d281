/*
 * The host overwrites the source of a host->device copy before its
 * future completes.  The source is page-locked (dv_host_alloc): the copy
 * reads it when the stream gets to it, not when it is posted; no
 * device-side fence can see the host's store.
 */
#define HZ_WHAT                                                                                    \
    "the host overwrites a page-locked host->device copy's source before its future completes"
#include "hazards/hazard.h"

static bool hz_plant(hz *h)
{
    uint32_t *buf = NULL;
    if (hz_rc(h, dv_host_alloc(h->a, HZ_BYTES, (void **)&buf), "host alloc") != DV_OK)
        return false;
    dv_ref a = hz_alloc(h, 0, "a");
    hz_fill(h, a, 0, 0);
    hz_sync_all(h);
    for (uint32_t i = 0; i < HZ_N; i++)
        buf[i] = 1;
    dv_future f;
    dv_future_init(&f, 0);
    hz_first(h, 0);
    hz_rc(h, dv_copy_htod_async(h->a, a, 0, buf, HZ_BYTES, 0, &f), "copy host->device");
    hz_settle(h);
    hz_rc(h, dv_check_host_access(h->a, buf, HZ_BYTES, DV_WRITE), "host write");
    for (uint32_t i = 0; i < HZ_N; i++) /* before the wait */
        buf[i] = 9;
    hz_rc(h, dv_future_wait(&f), "wait copy host->device");
    bool corrupt = !hz_is(h, a, 1); /* a should be what buf held when posted */
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_host_free(h->a, buf), "host free");
    return corrupt;
}
