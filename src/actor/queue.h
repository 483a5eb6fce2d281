/*
 * The actor's inbox: messages by value on Concurrency Kit rings, taken in
 * an order that respects what the posting threads did in real time, and an
 * event count to park the actor when idle.
 *
 * Clients
 * -------
 * Every thread that posts to an actor has a client there: its own ring
 * (single producer, single consumer) and what the layers above keep per
 * thread and actor (handle slots reserved for it, its order knowledge).
 * ck's multi-producer enqueue makes a producer preempted between reserving
 * and publishing a slot stall every later producer, which hurts exactly
 * when client threads outnumber cores; a ring per client never stalls on
 * another.  A thread's first post to an actor registers its client (a
 * mutex, once per thread and actor).  (DV_INBOX_MPSC puts every client's
 * messages on one shared multi-producer ring instead; dv-bench measures
 * both.)
 *
 * A client is shared by two owners, its thread and the actor, and freed
 * by whichever lets go last.  A thread that exits marks its clients
 * orphaned, and the actor drops an orphaned client once it has drained it.
 * An actor that goes away frees every ring buffer at once and marks its
 * clients closed; a thread forgets a closed client the next time it looks
 * for one it does not have, so a thread that outlives many actors keeps
 * neither their rings nor a long list to search.
 *
 * Order
 * -----
 * One ring is in its thread's order.  Across rings, every post takes a
 * ticket from the inbox's counter (one relaxed fetch-and-add on a line of
 * its own) before it publishes.  If thread A's post returned before thread
 * B's began, A's ticket is the smaller (the two fetch-and-adds are ordered
 * by happens-before, so by the counter's modification order).  But the
 * actor may look at A's ring before A publishes and at B's after B does,
 * and see B first.  So the actor takes messages in rounds ("collects",
 * each taking what every ring holds when looked at) and keeps them by
 * ticket; it hands out the longest run of them, from the smallest ticket
 * up, that were all seen before the latest collect:
 *
 *   - A published before B did (A returned before B began), so a collect
 *     that starts after B was seen finds A: once B is handed out, A was
 *     taken, and its smaller ticket put it first;
 *   - a message seen later with a smaller ticket than one already handed
 *     out overlapped it in time (it had not published when the later one
 *     was seen), so either order is right.
 *
 * The cost: an idle actor makes one more pass over the rings before it
 * handles a message, and posts share one counter.  Posts that overlap in
 * time are ordered one way or the other; the contract is only about posts
 * that did not.  The single ring of DV_INBOX_MPSC is in reservation
 * order, which already respects real time, so it is taken as it comes.
 *
 * Parking
 * -------
 * The actor reads the event count, checks every ring and the close flag,
 * and sleeps on the count only if nothing is there, for a bounded time; a
 * poster increments the count after publishing only when the actor may be
 * asleep (a flag), so wake-ups coalesce.  Closing the inbox (shutdown)
 * sets the flag and bumps the count, so a sleeping actor cannot miss it.
 *
 * A full ring blocks its poster (spin, then yield, then sleep), unless the
 * post is a try (DV_EAGAIN).  Nothing is dropped.
 *
 * TSan does not see ck's fences: the hand-off of a message is annotated
 * (release before the commit, acquire after dequeue, on the client).
 */
#ifndef DV_ACTOR_QUEUE_H
#define DV_ACTOR_QUEUE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <ck_ec.h>

#include "actor/known.h"
#include "actor/msg.h"
#include "actor/spsc.h"
#include "gpuref/cache.h"

typedef enum dv_inbox_mode {
    DV_INBOX_SPSC = 0, /* a ring per client thread (default) */
    DV_INBOX_MPSC,     /* one ring shared by every client */
} dv_inbox_mode;

typedef struct dv_inbox dv_inbox;

/* One thread's presence at one actor. */
typedef struct dv_client {
    dv_spsc ring; /* slots NULL once the inbox is gone (closed), and in
                   * DV_INBOX_MPSC, where it posts to the shared ring */
    /* The poster's side. */
    uint32_t id;  /* unique in the inbox: "client N" in reports */
    uint32_t seq; /* the next message's sequence number */
    uint64_t inbox_uid;
    dv_known *known;   /* the thread's knowledge of this actor (checker) */
    dv_know_list know; /* its snapshots on their way to the actor */
    dv_ref_cache refs; /* handle slots reserved for this thread */
    atomic_uint owners;
    atomic_bool orphaned; /* its thread has exited */
    atomic_bool closed;   /* its inbox is gone */
    const void *server;   /* the actor its thread serves (dv__serving), or NULL */
    /* The actor's side, on a line of its own. */
    _Alignas(64) uint32_t expect_seq; /* the next sequence number it should see */
    /* The posting thread's kernel id (logs, snapshots): set when made, read
     * by the actor with every message, so on the actor's line, not on the
     * poster's, which every post writes. */
    uint32_t tid;
} dv_client;

/* A message as the actor takes it: with the client that posted it (valid
 * while the message is being handled). */
typedef struct dv_envelope {
    dv_msg m;
    dv_client *from;
    uint64_t round; /* the inbox's: the collect that took it */
} dv_envelope;

/* Called on the actor's thread when it drops an orphaned client, so the
 * layers above reclaim what the client held (its reserved handle slots). */
typedef void (*dv_client_drop_fn)(void *arg, dv_client *c);

int dv__inbox_create(dv_inbox_mode mode, uint32_t capacity, uint64_t uid, dv_client_drop_fn drop,
                     void *drop_arg, dv_inbox **out);
/* Frees every ring buffer and what the inbox owns; clients still held by
 * their threads are marked closed.  No poster may be inside a post. */
void dv__inbox_destroy(dv_inbox *in);

/* The calling thread's client of in, registered on first use (NULL: out
 * of memory, with the detail set).  Any thread but the actor's. */
dv_client *dv__inbox_client(dv_inbox *in);

/* Benchmarks only (dv-bench's row for what the order costs): inboxes made
 * after dv__order_disable(true) take no tickets and hand messages out as
 * they come, breaking the order across threads. */
void dv__order_disable(bool off);

/* Clients the calling thread holds now (tests: a thread forgets those of
 * actors that are gone). */
unsigned dv__thread_clients(void);

/*
 * Post from any thread: the message's ticket and sequence number are
 * filled here.  Blocks while the ring is full unless try is set
 * (DV_EAGAIN).
 */
int dv__inbox_post(dv_inbox *in, dv_client *c, dv_msg *msg, bool try);

/* Actor side: up to max messages that may be handled now, in an order
 * that respects real time (design above), at *batch: the inbox's own
 * memory, valid until the next take. */
unsigned dv__inbox_take(dv_inbox *in, const dv_envelope **batch, unsigned max);
/* Messages taken but held back for a later round (never 0 while the
 * actor should not park). */
unsigned dv__inbox_held(const dv_inbox *in);
/* Park until a post or a kick arrives, the inbox closes or timeout_ns
 * passes.  Returns at once when something is queued, or when *flag (if
 * not NULL) is set: it is read after the wake-up count, so a kicker that
 * sets it and then kicks is never slept through. */
void dv__inbox_park(dv_inbox *in, uint64_t timeout_ns, const atomic_bool *flag);
/* No more posts will come: wake the actor for its last look. */
void dv__inbox_close(dv_inbox *in);
bool dv__inbox_closed(const dv_inbox *in);
/* Wake the actor (a lost driver, a reset). */
void dv__inbox_kick(dv_inbox *in);
/* Clients registered now. */
uint32_t dv__inbox_clients(const dv_inbox *in);
/* Client threads that are alive, or exited with messages not yet taken
 * (what could still release memory); takes the registry's lock. */
uint32_t dv__inbox_live_clients(dv_inbox *in, const void *self);

#endif /* DV_ACTOR_QUEUE_H */
