/*
 * Correct neighbour: another thread syncs stream 1 and hands its knowledge over (dv_order_export,
 * join, dv_order_adopt) before the raw read on stream 2.
 */
#define HZ_CORRECT
#define HZ_WHAT                                                                                    \
    "another thread syncs stream 1 and hands its knowledge over (dv_order_export, join, "          \
    "dv_order_adopt) before the raw read on stream 2"
#include "hazards/hazard.h"

#include <pthread.h>

typedef struct other {
    hz *h;
    int rc;
    dv_order_token token;
} other;

static void *sync_and_export(void *arg)
{
    other *o = arg;
    o->rc = dv_sync(o->h->a, 1);
    if (o->rc == DV_OK)
        o->rc = dv_order_export(o->h->a, &o->token);
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
    hz_fill_raw(h, pa, 2, 1);
    hz_settle(h);
    other o = {h, -1, {0}};
    pthread_t t;
    if (pthread_create(&t, NULL, sync_and_export, &o) == 0) {
        pthread_join(t, NULL);
        hz_rc(h, o.rc, "the other thread's sync and export");
        hz_rc(h, dv_order_adopt(h->a, &o.token), "adopt");
    } else {
        h->failed++;
    }
    hz_copy_raw(h, pb, pa, 2);
    bool corrupt = !hz_is(h, b, 2);
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
