/*
 * A race hidden by someone else's completion: this thread writes a block
 * raw on stream 1 and, without waiting, reads it raw on stream 2, while
 * another thread syncs stream 1.  The other thread's sync orders that
 * thread, not this one: nothing passes what it learned over (no join
 * before the read, no hand-over), so the read may run before the write.
 */
#define HZ_WHAT                                                                                    \
    "a raw write on stream 1, another thread syncs stream 1, this thread (never waiting) reads "   \
    "the block raw on stream 2"
#include "hazards/hazard.h"

#include <pthread.h>

typedef struct other {
    hz *h;
    int rc;
} other;

static void *sync_stream1(void *arg)
{
    other *o = arg;
    o->rc = dv_sync(o->h->a, 1);
    return NULL;
}

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 0, "b");
    hz_fill(h, a, 1, 0);
    hz_fill(h, b, 0, 0);
    hz_sync_all(h);
    uint64_t pa = hz_ptr(a), pb = hz_ptr(b);
    hz_first(h, 1);
    hz_fill_raw(h, pa, 2, 1); /* not waited by this thread */
    other o = {h, -1};
    pthread_t t;
    bool started = pthread_create(&t, NULL, sync_stream1, &o) == 0;
    hz_settle(h);
    hz_copy_raw(h, pb, pa, 2); /* b <- a: meant to see 2 */
    if (started) {
        pthread_join(t, NULL);
        hz_rc(h, o.rc, "another thread's sync of stream 1");
    } else {
        h->failed++;
    }
    bool corrupt = !hz_is(h, b, 2);
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
