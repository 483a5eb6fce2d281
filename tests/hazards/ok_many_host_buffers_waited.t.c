/*
 * Correct neighbour: 100 device->host copies into 100 host buffers, each waited for by the reading
 * thread, then every buffer read (many_host_buffers_* done right).
 */
#define HZ_CORRECT
#define HZ_WHAT                                                                                    \
    "100 device->host copies into 100 host buffers, each waited for by the reading thread, then "  \
    "every buffer read (many_host_buffers_* done right)"
#include "hazards/hazard.h"

#define NBUF  100
#define WORDS 256

static bool hz_plant(hz *h)
{
    static uint32_t bufs[NBUF][WORDS];
    static dv_future fs[NBUF];
    dv_ref a = hz_alloc(h, 0, "a");
    hz_first(h, 0);
    hz_fill(h, a, 8, 0);
    hz_sync_all(h);
    for (int i = 0; i < NBUF; i++) {
        dv_future_init(&fs[i], 0);
        hz_rc(h,
              dv_copy_dtoh_async(h->a, bufs[i], a, 0, sizeof(bufs[i]), (dv_stream)(i % 3), &fs[i]),
              "dtoh");
    }
    hz_settle(h);
    bool corrupt = false;
    for (int i = 0; i < NBUF; i++) {
        hz_rc(h, dv_future_wait(&fs[i]), "dtoh");
        hz_rc(h, dv_check_host_access(h->a, bufs[i], sizeof(bufs[i]), DV_READ), "host read");
        for (int w = 0; w < WORDS; w++)
            corrupt |= bufs[i][w] != 8;
    }
    hz_rc(h, dv_ref_release(a), "release");
    return corrupt;
}
