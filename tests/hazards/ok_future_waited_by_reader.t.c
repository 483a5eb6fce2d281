/*
 * Correct neighbour: thread A posts a device->host copy; thread B waits on its future, then reads
 * the buffer (a future waited from another thread teaches that thread).
 */
#define HZ_CORRECT
#define HZ_WHAT                                                                                    \
    "thread A posts a device->host copy; thread B waits on its future, then reads the buffer (a "  \
    "future waited from another thread teaches that thread)"
#include "hazards/hazard.h"

#include <pthread.h>

typedef struct reader {
    hz *h;
    dv_future *f;
    uint32_t *buf;
    int rc;
    bool right;
} reader;

static void *wait_and_read(void *arg)
{
    reader *r = arg;
    r->rc = dv_future_wait(r->f);
    if (r->rc == DV_OK)
        r->rc = dv_check_host_access(r->h->a, r->buf, HZ_BYTES, DV_READ);
    r->right = r->rc == DV_OK && hz_words_are(r->buf, 5);
    return NULL;
}

static bool hz_plant(hz *h)
{
    static uint32_t buf[HZ_N];
    dv_ref a = hz_alloc(h, 0, "a");
    hz_first(h, 0);
    hz_fill(h, a, 5, 0);
    dv_future f;
    dv_future_init(&f, 0);
    hz_rc(h, dv_copy_dtoh_async(h->a, buf, a, 0, HZ_BYTES, 0, &f), "dtoh");
    hz_settle(h);
    reader r = {h, &f, buf, -1, false};
    pthread_t t;
    if (pthread_create(&t, NULL, wait_and_read, &r) == 0) {
        pthread_join(t, NULL);
        hz_rc(h, r.rc, "the reader's wait and access");
    } else {
        h->failed++;
        dv_future_wait(&f);
    }
    hz_sync_all(h);
    hz_rc(h, dv_ref_release(a), "release");
    return !r.right;
}
