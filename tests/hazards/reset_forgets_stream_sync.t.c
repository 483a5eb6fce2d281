/*
 * What a thread knew before dv_actor_reset covers nothing after it.  The
 * thread waits for many writes on stream 1 and syncs it, the actor is
 * reset, and in the new context the thread writes a block raw on stream 1
 * and reads it raw on stream 2 without waiting: its old knowledge of
 * stream 1 is of a context that is gone.
 */
#define HZ_WHAT                                                                                    \
    "many waited writes on stream 1, dv_actor_reset, then a raw write on stream 1 and a raw read " \
    "on stream 2 with no wait between"
#include "hazards/hazard.h"

static bool hz_plant(hz *h)
{
    dv_ref old = hz_alloc(h, 1, "old");
    for (uint32_t i = 0; i < 16; i++) {
        hz_fill(h, old, i, 1);
        hz_wait_posted(h);
    }
    hz_rc(h, dv_ref_release(old), "release");
    hz_sync_all(h);
    hz_rc(h, dv_actor_reset(h->a), "reset");

    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 0, "b");
    hz_fill(h, a, 1, 0);
    hz_fill(h, b, 0, 0);
    hz_sync_all(h);
    uint64_t pa = hz_ptr(a), pb = hz_ptr(b);
    hz_first(h, 1);
    hz_fill_raw(h, pa, 2, 1);
    hz_settle(h);
    hz_copy_raw(h, pb, pa, 2); /* b <- a: meant to see 2 */
    bool corrupt = !hz_is(h, b, 2);
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
