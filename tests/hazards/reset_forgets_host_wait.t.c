/*
 * What a thread knew before dv_actor_reset covers nothing after it.  The
 * thread waits for three device->host copies (and more) on stream 0, the
 * actor is reset, and in the new context the thread posts a device->host
 * copy on stream 0 and reads its buffer without waiting.  The waits
 * before the reset were for work of a context that is gone.
 */
#define HZ_WHAT                                                                                    \
    "waited copies on stream 0, dv_actor_reset, then a host read of a new device->host copy's "    \
    "buffer without waiting"
#include "hazards/hazard.h"

static uint32_t before[HZ_N], buf[HZ_N];

static bool hz_plant(hz *h)
{
    dv_ref old = hz_alloc(h, 0, "old");
    for (uint32_t i = 0; i < 8; i++) {
        hz_fill(h, old, i, 0);
        hz_wait_posted(h);
    }
    for (int i = 0; i < 3; i++) /* waited: this thread knows stream 0 far along */
        hz_rc(h, dv_copy_dtoh(h->a, before, old, 0, HZ_BYTES, 0), "copy before the reset");
    hz_rc(h, dv_ref_release(old), "release");
    hz_sync_all(h);
    hz_rc(h, dv_actor_reset(h->a), "reset");

    dv_ref a = hz_alloc(h, 0, "a");
    hz_fill(h, a, 5, 0);
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
