/*
 * Completing a dv_future (the actor side).  A future's state word:
 * PENDING, DONE, or WAITING (a waiter sleeps on it: the completer must
 * wake it).  The completer writes the result, then stores DONE with
 * release; a waiter's acquire load of DONE sees the result.
 */
#ifndef DV_ACTOR_FUTURE_H
#define DV_ACTOR_FUTURE_H

#include "devactor.h"

enum { DV_FUTURE_PENDING = 0, DV_FUTURE_DONE = 1, DV_FUTURE_WAITING = 2 };

/* Complete f with status; a failure copies the calling thread's detail. */
void dv__future_complete(dv_future *f, int status);
/* Complete with a detail given explicitly (fault reports). */
void dv__future_complete_detail(dv_future *f, int status, const dv_error_detail *detail);

/*
 * What a thread knows the device finished, for the stream-order checker.
 * A future of an operation the device completes (a copy to or from the
 * host, a sync) carries f->order = actor tag << 48 | stream << 40 | the
 * operation's sequence number on its stream.  The thread that waits on it
 * (or sees it done) raises its own knowledge of that stream to that
 * number.  Knowledge is per stream and not transitive: waiting on stream 1
 * says nothing of stream 0, even where stream 1 had waited on it.
 */
#define DV_ORDER_TAG_SHIFT    48
#define DV_ORDER_STREAM_SHIFT 40
typedef struct dv_known {
    uint16_t tag;
    _Atomic uint64_t seq[64]; /* per stream (DV_MAX_STREAMS) */
    struct dv_known *next_free;
} dv_known;
static inline uint64_t dv__order_make(uint64_t tag, uint32_t stream, uint64_t seq)
{
    return ((uint64_t)(uint16_t)tag << DV_ORDER_TAG_SHIFT) |
           ((uint64_t)(stream & 0xff) << DV_ORDER_STREAM_SHIFT) |
           (seq & ((UINT64_C(1) << DV_ORDER_STREAM_SHIFT) - 1));
}
void dv__order_note(uint64_t order);
/* The calling thread's knowledge of actor tag (NULL: out of memory).  It
 * stays valid after the thread exits (recycled, never freed), so the actor
 * may read it for a message the thread posted. */
const dv_known *dv__known_of(uint16_t tag);

#endif
