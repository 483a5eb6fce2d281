/*
 * Correct neighbour: after dv_actor_reset, new blocks, a device->host copy waited for, then the
 * host reads (reset_forgets_host_wait done right).
 */
#define HZ_CORRECT
#define HZ_WHAT                                                                                    \
    "after dv_actor_reset, new blocks, a device->host copy waited for, then the host reads "       \
    "(reset_forgets_host_wait done right)"
#include "hazards/hazard.h"

static bool hz_plant(hz *h)
{
    static uint32_t buf[HZ_N];
    dv_ref old = hz_alloc(h, 0, "old");
    for (int i = 0; i < 3; i++)
        hz_rc(h, dv_copy_dtoh(h->a, buf, old, 0, HZ_BYTES, 0), "dtoh before the reset");
    hz_sync_all(h);
    hz_rc(h, dv_ref_release(old), "release");
    hz_rc(h, dv_actor_reset(h->a), "reset");
    /* Kernels survive a reset (dv_kernel_get again would find them). */
    dv_ref a = hz_alloc(h, 0, "a");
    hz_first(h, 0);
    hz_fill(h, a, 6, 0);
    dv_future f;
    dv_future_init(&f, 0);
    hz_rc(h, dv_copy_dtoh_async(h->a, buf, a, 0, HZ_BYTES, 0, &f), "dtoh");
    hz_settle(h);
    hz_rc(h, dv_future_wait(&f), "dtoh");
    hz_rc(h, dv_check_host_access(h->a, buf, HZ_BYTES, DV_READ), "host read");
    bool corrupt = !hz_words_are(buf, 6);
    hz_sync_all(h);
    hz_rc(h, dv_ref_release(a), "release");
    return corrupt;
}
