/*
 * The actor's inbox: messages by value on Concurrency Kit rings, and an
 * event count to park the actor when idle.
 *
 * Design
 * ------
 * Every client thread posts on a ring of its own (single producer, single
 * consumer): ck's multi-producer enqueue makes a producer preempted between
 * reserving and publishing a slot stall every later producer, which hurts
 * exactly when client threads outnumber cores.  A thread's first post to an
 * actor registers its ring (a mutex, once per thread and actor); later
 * posts touch only the thread's ring and the event count.  The actor polls
 * the registered rings round-robin, so one thread's messages are handled in
 * the order posted.  (The mode DV_INBOX_MPSC puts every client on one
 * shared multi-producer ring instead; dv-bench measures both.)
 *
 * A ring is shared by two owners, its thread and the actor, and freed by
 * whichever lets go last: a thread that exits marks its rings orphaned,
 * and the actor drops an orphaned ring once it has drained it.
 *
 * Parking: the actor reads the event count, checks every ring, and sleeps
 * on the count only if nothing arrived; a poster increments the count
 * after publishing, which wakes the actor only when it sleeps (ck_ec keeps
 * a flag for that), so wake-ups coalesce.
 *
 * A full ring blocks its poster (spin, then yield, then sleep), unless the
 * post is a try (DV_EAGAIN).  Nothing is dropped.
 *
 * TSan does not see ck's fences: the hand-off of a message is annotated
 * (release after enqueue, acquire after dequeue, on the ring).
 */
#ifndef DV_ACTOR_QUEUE_H
#define DV_ACTOR_QUEUE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <ck_ec.h>
#include <ck_ring.h>

#include "devactor.h"

/* One message: one cache line, copied into the ring. */
typedef struct dv_msg {
    uint8_t type;
    uint8_t access;
    uint16_t flags;
    uint32_t stream;
    dv_future *reply;
    uint64_t a, b, c, d, e;
    uint32_t producer; /* ring id: who posted */
    uint32_t seq;      /* per-ring sequence: order and loss checks */
} dv_msg;

_Static_assert(sizeof(dv_msg) == 64, "a message is one cache line");

typedef enum dv_inbox_mode {
    DV_INBOX_SPSC = 0, /* a ring per client thread (default) */
    DV_INBOX_MPSC,     /* one ring shared by every client */
} dv_inbox_mode;

typedef struct dv_ring dv_ring;
typedef struct dv_inbox dv_inbox;

int dv__inbox_create(dv_inbox_mode mode, uint32_t capacity, dv_inbox **out);
/* Frees every ring the inbox still owns; no poster may be inside a post. */
void dv__inbox_destroy(dv_inbox *in);

/*
 * Post from any thread.  Blocks while the ring is full unless try is set
 * (DV_EAGAIN).  The message's producer and seq are filled here.
 */
int dv__inbox_post(dv_inbox *in, dv_msg *msg, bool try);

/* Actor side: up to max messages, round-robin over the rings. */
unsigned dv__inbox_drain(dv_inbox *in, dv_msg *out, unsigned max);
/* Park until a post arrives or timeout_ns passes (0: no timeout).  Returns
 * at once when something is queued. */
void dv__inbox_park(dv_inbox *in, uint64_t timeout_ns);
/* Wake the actor (shutdown, reset). */
void dv__inbox_kick(dv_inbox *in);
/* Rings registered now. */
uint32_t dv__inbox_rings(const dv_inbox *in);

#endif /* DV_ACTOR_QUEUE_H */
