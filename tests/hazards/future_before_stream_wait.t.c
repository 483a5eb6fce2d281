/*
 * Transitivity done wrong: the host posts a device->host copy on stream
 * 0, a launch on stream 2, and only then makes stream 2 wait on an event
 * recorded after the copy.  It waits on the launch's future and reads the
 * copy's buffer.  The launch came before stream 2's wait: waiting on it
 * says nothing of the copy (what a wait teaches is the waited operation's
 * own point on its stream, not what the stream waited for later).  A
 * flush after the launch lets it complete on its own: handled in one
 * batch with the wait, its completion would be reported only past the
 * wait, which hides the mistake on the device (not from the checker).
 */
#define HZ_WHAT                                                                                    \
    "the host waits on a launch posted on stream 2 before stream 2 waited on a device->host "      \
    "copy, then reads the copy's buffer"
#include "hazards/hazard.h"

static uint32_t buf[HZ_N];

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), c = hz_alloc(h, 2, "c");
    dv_event *e = NULL;
    hz_rc(h, dv_event_create(h->a, 0, &e), "event");
    hz_fill(h, a, 5, 0);
    hz_fill(h, c, 0, 2);
    hz_sync_all(h);
    memset(buf, 0, sizeof(buf));
    dv_future f;
    dv_future_init(&f, 0);
    hz_first(h, 0);
    hz_rc(h, dv_copy_dtoh_async(h->a, buf, a, 0, HZ_BYTES, 0, &f), "copy device->host");
    hz_settle(h);
    dv_arg args[] = {dv_arg_ref(c, DV_WRITE, 0), dv_arg_u32(1), dv_arg_u64(HZ_N)};
    dv_future fl;
    dv_future_init(&fl, 0);
    hz_rc(h, dv_launch_async(h->a, h->fill, hz_grid, hz_block, 0, 2, args, 3, &fl), "fill c");
    hz_rc(h, dv_flush(h->a), "flush"); /* the fill is enqueued before the wait is posted */
    hz_rc(h, dv_event_record(e, 0), "record after the copy");
    hz_rc(h, dv_stream_wait_event(h->a, 2, e), "stream 2 waits on the copy, after the fill");
    hz_rc(h, dv_future_wait(&fl), "wait fill c"); /* the fill, not the stream's later wait */
    hz_rc(h, dv_check_host_access(h->a, buf, HZ_BYTES, DV_READ), "host read");
    bool corrupt = !hz_words_are(buf, 5);
    hz_rc(h, dv_future_wait(&f), "wait copy device->host");
    hz_rc(h, dv_event_destroy(e), "event destroy");
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(c), "release");
    return corrupt;
}
