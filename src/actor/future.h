/*
 * Futures, the actor's side (the contract: devactor.h, Milestones).
 *
 * A future's state word holds bits: POSTED (in flight: posted and not
 * complete), ORDERED, DONE, and SLEEPERS (a waiter sleeps on the word: the
 * completer must wake it).  The poster sets POSTED; the actor sets ORDERED
 * when it took the operation in, and DONE, clearing POSTED, when it is
 * complete, after writing the status and detail.  Each milestone is a
 * release, and a waiter's acquire load of it sees what came before.  After
 * DONE the library never touches the future again, except that a wake-up
 * may reach its address after the caller reused it (a spurious wake-up,
 * which waiters tolerate).
 */
#ifndef DV_ACTOR_FUTURE_H
#define DV_ACTOR_FUTURE_H

#include "devactor.h"

enum {
    DV__FUTURE_POSTED = 1u,
    DV__FUTURE_ORDERED = 2u,
    DV__FUTURE_DONE = 4u,
    DV__FUTURE_SLEEPERS = 8u,
    /* The fork generation (base/proc.h) it was armed in, low 8 bits. */
    DV__FUTURE_FORK_SHIFT = 16,
    DV__FUTURE_FORK_MASK = 0xffu << 16,
};

/* The poster: f is about to be posted.  DV_EINVAL (detail set) when it
 * was never initialised or is still in flight; otherwise it is reset and
 * marked POSTED. */
int dv__future_arm(dv_future *f, const char *op);
/* The actor: f's operation is ordered. */
void dv__future_ordered(dv_future *f);
/* The actor, or a poster whose post failed after arming: complete f
 * with status; a failure copies the calling thread's detail. */
void dv__future_complete(dv_future *f, int status);
/* Complete with a detail given explicitly (fault reports). */
void dv__future_complete_detail(dv_future *f, int status, const dv_error_detail *detail);

/* Threads of this process asleep in a future's wait: while there are
 * some, an actor waiting for the device looks more often (loop.c), so
 * that the end of the work they wait for is seen soon. */
extern _Atomic unsigned dv__future_sleepers;

#endif /* DV_ACTOR_FUTURE_H */
