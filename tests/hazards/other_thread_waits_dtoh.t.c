/*
 * A race hidden by someone else's completion, on the host: this thread
 * posts a device->host copy, another thread waits on its future, and this
 * thread reads the host buffer without waiting itself.  The copy was
 * ordered before the other thread, not before this one.
 */
#define HZ_WHAT                                                                                    \
    "another thread waits on a device->host copy's future; the thread that posted it reads the "   \
    "buffer without waiting"
#include "hazards/hazard.h"

#include <pthread.h>

static uint32_t buf[HZ_N];

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
    dv_ref a = hz_alloc(h, 0, "a");
    hz_fill(h, a, 5, 0);
    hz_sync_all(h);
    memset(buf, 0, sizeof(buf));
    dv_future f;
    dv_future_init(&f, 0);
    hz_first(h, 0);
    int rc = hz_rc(h, dv_copy_dtoh_async(h->a, buf, a, 0, HZ_BYTES, 0, &f), "copy device->host");
    other o = {&f, -1};
    pthread_t t;
    bool started = rc == DV_OK && pthread_create(&t, NULL, wait_future, &o) == 0;
    hz_settle(h);
    hz_rc(h, dv_check_host_access(h->a, buf, HZ_BYTES, DV_READ), "host read");
    bool corrupt = !hz_words_are(buf, 5); /* this thread never waited */
    if (started) {
        pthread_join(t, NULL);
        hz_rc(h, o.rc, "another thread's wait on the copy");
    } else if (rc == DV_OK) {
        h->failed++;
        dv_future_wait(&f);
    }
    hz_rc(h, dv_ref_release(a), "release");
    return corrupt;
}
