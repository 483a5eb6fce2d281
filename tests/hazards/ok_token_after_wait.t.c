/*
 * Correct neighbour: a worker waits on its device->host copy, then exports; the main thread joins
 * it, adopts and reads the buffer (token_before_wait_host done right).
 */
#define HZ_CORRECT
#define HZ_WHAT                                                                                    \
    "a worker waits on its device->host copy, then exports; the main thread joins it, adopts and " \
    "reads the buffer (token_before_wait_host done right)"
#include "hazards/hazard.h"

#include <pthread.h>

typedef struct worker {
    hz *h;
    dv_ref a;
    uint32_t *buf;
    dv_order_token token;
    int rc;
} worker;

static void *copy_wait_export(void *arg)
{
    worker *w = arg;
    dv_future f;
    dv_future_init(&f, 0);
    w->rc = dv_copy_dtoh_async(w->h->a, w->buf, w->a, 0, HZ_BYTES, 0, &f);
    if (w->rc == DV_OK)
        w->rc = dv_future_wait(&f);
    if (w->rc == DV_OK)
        w->rc = dv_order_export(w->h->a, &w->token);
    return NULL;
}

static bool hz_plant(hz *h)
{
    static uint32_t buf[HZ_N];
    dv_ref a = hz_alloc(h, 0, "a");
    hz_fill(h, a, 9, 0);
    hz_sync_all(h);
    worker w = {.h = h, .a = a, .buf = buf, .rc = -1};
    hz_first(h, 0);
    pthread_t t;
    if (pthread_create(&t, NULL, copy_wait_export, &w) == 0)
        pthread_join(t, NULL);
    else
        copy_wait_export(&w);
    hz_settle(h);
    hz_rc(h, w.rc, "the worker's copy, wait and export");
    hz_rc(h, dv_order_adopt(h->a, &w.token), "adopt");
    hz_rc(h, dv_check_host_access(h->a, buf, HZ_BYTES, DV_READ), "host read");
    bool corrupt = !hz_words_are(buf, 9);
    hz_rc(h, dv_ref_release(a), "release");
    return corrupt;
}
