/*
 * A race hidden by someone else's completion: this thread posts a raw
 * write on stream 1 with a future, hands the future to another thread
 * that waits on it, and reads the block raw on stream 2 without waiting.
 * The future completed, but only the other thread waited on it.
 */
#define HZ_WHAT                                                                                    \
    "a raw write on stream 1 whose future only another thread waits on; this thread reads the "    \
    "block raw on stream 2"
#include "hazards/hazard.h"

#include <pthread.h>

typedef struct other {
    dv_future *f;
    int rc;
} other;

static void *wait_future(void *arg)
{
    other *o = arg;
    o->rc = dv_future_wait(o->f);
    return NULL;
}

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 0, "b");
    hz_fill(h, a, 1, 0);
    hz_fill(h, b, 0, 0);
    hz_sync_all(h);
    uint64_t pa = hz_ptr(a), pb = hz_ptr(b);
    dv_arg args[] = {dv_arg_ptr_access(pa, DV_WRITE), dv_arg_u32(2), dv_arg_u64(HZ_N)};
    dv_future fw;
    dv_future_init(&fw, 0);
    hz_first(h, 1);
    int rc =
        hz_rc(h, dv_launch_async(h->a, h->fill, hz_grid, hz_block, 0, 1, args, 3, &fw), "raw fill");
    other o = {&fw, -1};
    pthread_t t;
    bool started = rc == DV_OK && pthread_create(&t, NULL, wait_future, &o) == 0;
    hz_settle(h);
    hz_copy_raw(h, pb, pa, 2); /* b <- a: meant to see 2 */
    if (started) {
        pthread_join(t, NULL);
        hz_rc(h, o.rc, "another thread's wait on the raw fill");
    } else if (rc == DV_OK) {
        h->failed++;
        dv_future_wait(&fw);
    }
    bool corrupt = !hz_is(h, b, 2);
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
