/*
 * A hand-over made too early: a worker thread writes a block raw on
 * stream 1, exports its knowledge (dv_order_export) and hands the token
 * over, and only then waits on the write.  The thread that adopts the
 * token reads the block raw on stream 2: the token holds what the worker
 * knew before it waited, so nothing orders the read after the write.
 */
#define HZ_WHAT                                                                                    \
    "a worker exports its order token before waiting on its raw write on stream 1; the thread "    \
    "that adopts it reads the block raw on stream 2"
#include "hazards/hazard.h"

#include <pthread.h>

typedef struct worker {
    hz *h;
    uint64_t ptr;
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
    dv_arg args[] = {dv_arg_ptr_access(w->ptr, DV_WRITE), dv_arg_u32(2), dv_arg_u64(HZ_N)};
    w->rc_adopt = dv_order_adopt(w->h->a, &w->start); /* the hand-over done right */
    w->rc_post = dv_launch_async(w->h->a, w->h->fill, hz_grid, hz_block, 0, 1, args, 3, &f);
    w->rc_export = dv_order_export(w->h->a, &w->token); /* too early */
    pthread_mutex_lock(&w->mu);
    w->handed = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    w->rc_wait = w->rc_post == DV_OK ? dv_future_wait(&f) : DV_OK;
    return NULL;
}

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 0, "b");
    hz_fill(h, a, 1, 0);
    hz_fill(h, b, 0, 0);
    hz_sync_all(h);
    uint64_t pa = hz_ptr(a), pb = hz_ptr(b);
    static worker w;
    memset(&w, 0, sizeof(w));
    w.h = h;
    w.ptr = pa;
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    hz_rc(h, dv_order_export(h->a, &w.start), "export to the worker");
    hz_first(h, 1); /* the worker's write goes on stream 1 next */
    pthread_t t;
    bool started = pthread_create(&t, NULL, work, &w) == 0;
    if (started) {
        pthread_mutex_lock(&w.mu);
        while (!w.handed)
            pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        hz_settle(h);
        hz_rc(h, w.rc_export, "export");
        hz_rc(h, dv_order_adopt(h->a, &w.token), "adopt");
        hz_copy_raw(h, pb, pa, 2); /* b <- a: meant to see 2 */
        pthread_join(t, NULL);
        hz_rc(h, w.rc_adopt, "the worker's adopt");
        hz_rc(h, w.rc_post, "the worker's raw fill");
        hz_rc(h, w.rc_wait, "the worker's wait");
    } else {
        h->failed++;
    }
    bool corrupt = !hz_is(h, b, 2);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
