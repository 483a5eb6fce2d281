/*
 * More than 64 host buffers: the thread posts 100 device->host copies,
 * each into a buffer of its own, waits on 99 of them and reads the one it
 * did not wait on.  That copy is the only one on its stream: no wait on
 * the others orders it.
 */
#define HZ_WHAT                                                                                    \
    "100 device->host copies into 100 buffers, 99 waited; the host reads the buffer of the one "   \
    "not waited (alone on its stream)"
#include "hazards/hazard.h"

#define NBUF    100
#define WORDS   64 /* per buffer */
#define SKIPPED 70

static uint32_t bufs[NBUF][WORDS];
static dv_future futs[NBUF];

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a");
    hz_fill(h, a, 5, 0);
    hz_sync_all(h);
    memset(bufs, 0, sizeof(bufs));
    int posted = 0;
    for (int i = 0; i < NBUF; i++, posted++) {
        dv_stream s = (dv_stream)(i % 2);
        if (i == SKIPPED) {
            s = 2;
            hz_first(h, s);
        }
        dv_future_init(&futs[i], 0);
        if (hz_rc(h,
                  dv_copy_dtoh_async(h->a, bufs[i], a, (uint64_t)i * WORDS * 4, WORDS * 4, s,
                                     &futs[i]),
                  "copy device->host") != DV_OK)
            break;
        if (i == SKIPPED)
            hz_settle(h);
    }
    for (int i = 0; i < posted; i++)
        if (i != SKIPPED)
            hz_rc(h, dv_future_wait(&futs[i]), "wait copy device->host");
    hz_rc(h, dv_check_host_access(h->a, bufs[SKIPPED], sizeof(bufs[SKIPPED]), DV_READ),
          "host read");
    bool corrupt = false;
    for (int w = 0; w < WORDS; w++)
        corrupt |= bufs[SKIPPED][w] != 5;
    if (posted > SKIPPED)
        hz_rc(h, dv_future_wait(&futs[SKIPPED]), "wait copy device->host");
    hz_rc(h, dv_ref_release(a), "release");
    return corrupt;
}
