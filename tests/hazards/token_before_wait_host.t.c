/*
 * A hand-over made too early: a worker thread posts a device->host copy,
 * exports its knowledge (dv_order_export) and hands the token and the
 * buffer over, and only then waits on the copy.  The token holds what the
 * worker knew before it waited, so adopting it does not cover the copy:
 * the thread that reads the buffer may read it before the copy lands.
 */
#define HZ_WHAT                                                                                    \
    "a worker exports its order token before waiting on a device->host copy; the thread that "     \
    "adopts it reads the buffer"
#include "hazards/hazard.h"

#include <pthread.h>

static uint32_t buf[HZ_N];

typedef struct worker {
    dv_actor *a;
    dv_ref src;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool handed;
    dv_order_token start; /* what the starting thread knew, handed over */
    dv_order_token token;
    int rc_adopt, rc_post, rc_export, rc_wait;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    dv_future f;
    dv_future_init(&f, 0);
    w->rc_adopt = dv_order_adopt(w->a, &w->start); /* the hand-over done right */
    w->rc_post = dv_copy_dtoh_async(w->a, buf, w->src, 0, HZ_BYTES, 0, &f);
    w->rc_export = dv_order_export(w->a, &w->token); /* too early */
    pthread_mutex_lock(&w->mu);
    w->handed = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    w->rc_wait = w->rc_post == DV_OK ? dv_future_wait(&f) : DV_OK;
    return NULL;
}

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a");
    hz_fill(h, a, 5, 0);
    hz_sync_all(h);
    memset(buf, 0, sizeof(buf));
    static worker w;
    memset(&w, 0, sizeof(w));
    w.a = h->a;
    w.src = a;
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    hz_rc(h, dv_order_export(h->a, &w.start), "export to the worker");
    hz_first(h, 0); /* the worker's copy goes on stream 0 next */
    pthread_t t;
    bool started = pthread_create(&t, NULL, work, &w) == 0;
    bool corrupt = false;
    if (started) {
        pthread_mutex_lock(&w.mu);
        while (!w.handed)
            pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        hz_settle(h);
        hz_rc(h, w.rc_export, "export");
        hz_rc(h, dv_order_adopt(h->a, &w.token), "adopt");
        hz_rc(h, dv_check_host_access(h->a, buf, HZ_BYTES, DV_READ), "host read");
        corrupt = !hz_words_are(buf, 5);
        pthread_join(t, NULL);
        hz_rc(h, w.rc_adopt, "the worker's adopt");
        hz_rc(h, w.rc_post, "the worker's copy device->host");
        hz_rc(h, w.rc_wait, "the worker's wait");
    } else {
        h->failed++;
    }
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    hz_rc(h, dv_ref_release(a), "release");
    return corrupt;
}
