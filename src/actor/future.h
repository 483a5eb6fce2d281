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
 * What the calling thread knows the device finished, for the stream-order
 * checker: f->order is (actor tag << 48 | epoch of the checker's host
 * clock when the actor completed f).  A thread that waited on f (or saw
 * it done) knows at least that epoch of that actor.
 */
#define DV_ORDER_EPOCH_BITS 48
void dv__order_note(uint64_t order);
/* The latest epoch of actor tag this thread knows (0: none). */
uint64_t dv__order_known(uint16_t tag);

#endif
