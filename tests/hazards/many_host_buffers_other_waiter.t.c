/*
 * More than 64 host buffers: this thread posts 100 device->host copies,
 * each into a buffer of its own; another thread waits on all of them;
 * this thread, which never waited, reads one of the early buffers.  The
 * other thread's waits order it, not this one.  The buffers are
 * page-locked (dv_host_alloc), so that posting a hundred copies never
 * waits for staging room, which would give the late copy time to finish.
 */
#define HZ_WHAT                                                                                    \
    "100 device->host copies into 100 buffers, waited by another thread; the poster reads one "    \
    "without waiting"
#include "hazards/hazard.h"

#include <pthread.h>

#define NBUF  100
#define WORDS 64 /* per buffer */
#define LATE  3  /* the copy queued behind the others' backs */

static uint32_t (*bufs)[WORDS];
static dv_future futs[NBUF];

typedef struct other {
    dv_actor *a;
    int posted;
    int rc;
    dv_order_token token; /* what it waited for, for the thread that joins it */
} other;

static void *wait_all(void *arg)
{
    other *o = arg;
    o->rc = DV_OK;
    for (int i = 0; i < o->posted; i++) {
        int rc = dv_future_wait(&futs[i]);
        if (rc != DV_OK && o->rc == DV_OK)
            o->rc = rc;
    }
    if (o->rc == DV_OK)
        o->rc = dv_order_export(o->a, &o->token);
    return NULL;
}

static bool hz_plant(hz *h)
{
    if (hz_rc(h, dv_host_alloc(h->a, sizeof(*bufs) * NBUF, (void **)&bufs), "host alloc") !=
        DV_OK)
        return false;
    dv_ref a = hz_alloc(h, 0, "a");
    hz_fill(h, a, 5, 0);
    hz_sync_all(h);
    memset(bufs, 0, sizeof(*bufs) * NBUF);
    int posted = 0;
    for (int i = 0; i < NBUF; i++, posted++) {
        dv_stream s = (dv_stream)(i % 2);
        if (i == LATE) {
            s = 2;
            hz_first(h, s);
        }
        dv_future_init(&futs[i], 0);
        if (hz_rc(h,
                  dv_copy_dtoh_async(h->a, bufs[i], a, (uint64_t)i * WORDS * 4, WORDS * 4, s,
                                     &futs[i]),
                  "copy device->host") != DV_OK)
            break;
    }
    other o = {h->a, posted, -1, {0}};
    pthread_t t;
    bool started = pthread_create(&t, NULL, wait_all, &o) == 0;
    hz_settle(h);
    hz_rc(h, dv_check_host_access(h->a, bufs[LATE], sizeof(bufs[LATE]), DV_READ), "host read");
    bool corrupt = false;
    for (int w = 0; w < WORDS; w++)
        corrupt |= bufs[LATE][w] != 5;
    if (started) {
        pthread_join(t, NULL);
        hz_rc(h, o.rc, "another thread's waits");
    } else {
        h->failed++;
        wait_all(&o);
    }
    hz_rc(h, dv_ref_release(a), "release");
    /* The buffers go after the join, ordered after every copy by what the
     * waiting thread handed over (the checker cannot see a join). */
    hz_rc(h, dv_order_adopt(h->a, &o.token), "adopt");
    hz_rc(h, dv_host_free(h->a, bufs), "host free");
    return corrupt;
}
