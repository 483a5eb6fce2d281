/*
 * Correct neighbour: a device->host copy into a registered buffer, not
 * waited for; dv_host_unregister returns once the copies that used the
 * range finished, so the thread's read after it is ordered.
 */
#define HZ_CORRECT
#define HZ_WHAT                                                                                    \
    "a device->host copy into a registered buffer, then dv_host_unregister (it waits for the "    \
    "copy), then the host reads the buffer"
#include "hazards/hazard.h"

static uint32_t buf[HZ_N];

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a");
    hz_fill(h, a, 6, 0);
    hz_sync_all(h);
    memset(buf, 0, sizeof(buf));
    hz_rc(h, dv_host_register(h->a, buf, sizeof(buf)), "register");
    dv_future down;
    dv_future_init(&down, 0);
    hz_first(h, 1);
    hz_rc(h, dv_copy_dtoh_async(h->a, buf, a, 0, HZ_BYTES, 1, &down), "copy device->host");
    hz_settle(h);
    hz_rc(h, dv_host_unregister(h->a, buf), "unregister");
    hz_rc(h, dv_check_host_access(h->a, buf, sizeof(buf), DV_READ), "host read");
    bool corrupt = false;
    for (uint32_t w = 0; w < HZ_N; w++)
        corrupt |= buf[w] != 6;
    hz_rc(h, dv_future_wait(&down), "wait copy device->host");
    hz_rc(h, dv_ref_release(a), "release");
    return corrupt;
}
