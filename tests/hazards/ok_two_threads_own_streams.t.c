/*
 * Correct neighbour: two threads, each with its own block and stream, raw writes and reads that
 * never cross.
 */
#define HZ_CORRECT
#define HZ_WHAT                                                                                    \
    "two threads, each with its own block and stream, raw writes and reads that never cross"
#include "hazards/hazard.h"

#include <pthread.h>

typedef struct worker {
    hz *h;
    dv_ref a, b;
    dv_stream s;
    dv_future f[2];
    dv_arg args[2][3];
    int rc;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    uint64_t pa = hz_ptr(w->a), pb = hz_ptr(w->b);
    w->args[0][0] = dv_arg_ptr_access(pa, DV_WRITE);
    w->args[0][1] = dv_arg_u32(10 + w->s);
    w->args[0][2] = dv_arg_u64(HZ_N);
    w->args[1][0] = dv_arg_ptr_access(pb, DV_WRITE);
    w->args[1][1] = dv_arg_ptr_access(pa, DV_READ);
    w->args[1][2] = dv_arg_u64(HZ_BYTES);
    dv_future_init(&w->f[0], 0);
    dv_future_init(&w->f[1], 0);
    w->rc =
        dv_launch_async(w->h->a, w->h->fill, hz_grid, hz_block, 0, w->s, w->args[0], 3, &w->f[0]);
    if (w->rc == DV_OK)
        w->rc = dv_launch_async(w->h->a, w->h->copy, hz_grid, hz_block, 0, w->s, w->args[1], 3,
                                &w->f[1]);
    if (w->rc == DV_OK)
        w->rc = dv_future_wait(&w->f[0]);
    if (w->rc == DV_OK)
        w->rc = dv_future_wait(&w->f[1]);
    return NULL;
}

static bool hz_plant(hz *h)
{
    worker w[2] = {{.h = h, .s = 1}, {.h = h, .s = 2}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        w[i].a = hz_alloc(h, w[i].s, "a");
        w[i].b = hz_alloc(h, w[i].s, "b");
    }
    hz_first(h, 1);
    hz_settle(h);
    bool started[2];
    for (int i = 0; i < 2; i++) {
        started[i] = pthread_create(&t[i], NULL, work, &w[i]) == 0;
        if (!started[i])
            work(&w[i]);
    }
    bool corrupt = false;
    for (int i = 0; i < 2; i++) {
        if (started[i])
            pthread_join(t[i], NULL);
        hz_rc(h, w[i].rc, "worker");
    }
    for (int i = 0; i < 2; i++) {
        corrupt |= !hz_is(h, w[i].b, 10 + w[i].s);
        hz_rc(h, dv_ref_release(w[i].a), "release");
        hz_rc(h, dv_ref_release(w[i].b), "release");
    }
    return corrupt;
}
