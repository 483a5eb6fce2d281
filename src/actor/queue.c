/*
 * The actor's inbox (design: queue.h).
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actor/queue.h"
#include "base/array.h"
#include "base/assert.h"
#include "base/error.h"
#include "base/futex.h"

CK_RING_PROTOTYPE(msg, dv_msg)

#include "base/tsan.h"

/*
 * ck publishes in both directions with its own fences, which TSan does not
 * model, and neither side can annotate between its copy and ck's publish
 * (the consumer frees a slot inside the dequeue).  So: the hand-off is
 * annotated on the client (release before the commit, acquire once the
 * ring is seen non-empty), which orders everything the message refers to;
 * and only the copies of the message bytes into and out of ring slots are
 * hidden from TSan.
 */
#define HANDOFF_RELEASE(p) dv__tsan_release(p)
#define HANDOFF_ACQUIRE(p) dv__tsan_acquire(p)
#define SLOT_COPY_BEGIN()  dv__tsan_ignore_begin()
#define SLOT_COPY_END()    dv__tsan_ignore_end()

/* Messages a collect takes from all rings together, before the caps. */
#define COLLECT 64u

struct retired_array {
    struct retired_array *next;
    dv_client **clients;
};

typedef struct held_msg {
    dv_envelope env;
    uint64_t round; /* the collect that took it */
} held_msg;

struct dv_inbox {
    uint64_t uid; /* unique for the process: keys the threads' clients */
    dv_inbox_mode mode;
    uint32_t capacity;
    dv_client_drop_fn drop;
    void *drop_arg;
    struct ck_ec32 ec;
    pthread_mutex_t reg_mu;        /* registering and dropping clients */
    _Atomic(dv_client **) clients; /* published array, read by the actor */
    atomic_uint nclients;
    struct retired_array *retired; /* arrays the actor may still read */
    atomic_uint next_id;
    dv_client *shared; /* MPSC: the one ring */
    /* The actor's, never touched by posters. */
    uint32_t cursor; /* round-robin start */
    uint64_t round;  /* collects made */
    bool orphans;    /* the last collect saw an orphaned client */
    held_msg *held;  /* taken, not handed out yet; by ticket */
    uint32_t nheld, cap_held;
    /* The actor may be about to sleep: posters bump the event count only
     * then, so a busy actor's count line is not written per message. */
    _Alignas(64) atomic_bool parked;
    atomic_bool closing;
    /* Every post takes a ticket here: a line of its own. */
    _Alignas(64) atomic_uint_fast64_t ticket;
};

/* ------------------------------------------------------------------------
 * Event count on futexes
 * ------------------------------------------------------------------------ */

static int ec_gettime(const struct ck_ec_ops *ops, struct timespec *out)
{
    (void)ops;
    return clock_gettime(CLOCK_MONOTONIC, out);
}

static void ec_wait32(const struct ck_ec_wait_state *state, const uint32_t *addr, uint32_t expected,
                      const struct timespec *deadline)
{
    (void)state;
    /* BITSET takes an absolute CLOCK_MONOTONIC deadline, as ck_ec gives. */
    dv__futex_wait(addr, expected, deadline);
}

static void ec_wake32(const struct ck_ec_ops *ops, const uint32_t *addr)
{
    (void)ops;
    dv__futex_wake_all(addr);
}

static const struct ck_ec_ops ec_ops = {
    .gettime = ec_gettime,
    .wait32 = ec_wait32,
    .wait64 = NULL,
    .wake32 = ec_wake32,
    .wake64 = NULL,
    .busy_loop_iter = 200,
    .initial_wait_ns = 100000, /* 0.1 ms, then backing off */
    .wait_scale_factor = 8,
    .wait_shift_count = 0,
};

static const struct ck_ec_mode ec_mode = {.ops = &ec_ops, .single_producer = false};

/* ------------------------------------------------------------------------
 * Clients
 * ------------------------------------------------------------------------ */

static dv_client *client_new(dv_inbox *in, bool with_ring)
{
    dv_client *c = aligned_alloc(_Alignof(dv_client), (sizeof(*c) + 63) & ~(size_t)63);
    if (c == NULL)
        return NULL;
    memset(c, 0, sizeof(*c));
    if (with_ring) {
        c->buf = aligned_alloc(64, (size_t)in->capacity * sizeof(dv_msg));
        if (c->buf == NULL) {
            free(c);
            return NULL;
        }
        ck_ring_init(&c->ring, in->capacity);
    }
    atomic_init(&c->owners, 2);
    atomic_init(&c->orphaned, false);
    atomic_init(&c->closed, false);
    c->id = atomic_fetch_add_explicit(&in->next_id, 1, memory_order_relaxed);
    c->inbox_uid = in->uid;
    return c;
}

/* Drop one owner; the last frees. */
static void client_unref(dv_client *c)
{
    /* acq_rel: the last owner sees every write the other made. */
    if (atomic_fetch_sub_explicit(&c->owners, 1, memory_order_acq_rel) == 1) {
        free(c->buf);
        free(c);
    }
}

/* Publish a new array of clients (under reg_mu).  The old one stays
 * readable until the inbox goes: the actor may be iterating it. */
static int publish_clients(dv_inbox *in, dv_client **arr, uint32_t n)
{
    dv_client **old = atomic_load_explicit(&in->clients, memory_order_relaxed);
    if (old != NULL && old != arr) {
        struct retired_array *ra = malloc(sizeof(*ra));
        if (ra == NULL)
            return -1;
        ra->clients = old;
        ra->next = in->retired;
        in->retired = ra;
    }
    /* Release: pairs with the actor's acquire loads in collect; a client
     * is initialised before it is visible there. */
    atomic_store_explicit(&in->clients, arr, memory_order_release);
    atomic_store_explicit(&in->nclients, n, memory_order_release);
    return 0;
}

static int register_client(dv_inbox *in, dv_client *c)
{
    int rc = 0;
    pthread_mutex_lock(&in->reg_mu);
    uint32_t n = atomic_load_explicit(&in->nclients, memory_order_relaxed);
    dv_client **cur = atomic_load_explicit(&in->clients, memory_order_relaxed);
    /* Always a fresh array: the actor may be reading the current one. */
    dv_client **arr = malloc(((size_t)n + 1) * sizeof(*arr));
    if (arr == NULL) {
        rc = -1;
    } else {
        if (n > 0)
            memcpy(arr, cur, (size_t)n * sizeof(*arr));
        arr[n] = c;
        if (publish_clients(in, arr, n + 1) != 0) {
            free(arr);
            rc = -1;
        }
    }
    pthread_mutex_unlock(&in->reg_mu);
    return rc;
}

/* The calling thread's clients, one per inbox it posted to. */
static pthread_key_t clients_key;
static pthread_once_t clients_once = PTHREAD_ONCE_INIT;
static _Thread_local struct thread_clients {
    dv_client **items;
    uint32_t n, cap;
    dv_client *last; /* the one used last */
} mine;

/* Thread exit: the actor may drop the thread's clients once drained. */
static void thread_clients_exit(void *unused)
{
    (void)unused;
    for (uint32_t i = 0; i < mine.n; i++) {
        /* Release: pairs with the actor's acquire load of orphaned. */
        atomic_store_explicit(&mine.items[i]->orphaned, true, memory_order_release);
        client_unref(mine.items[i]);
    }
    free(mine.items);
    memset(&mine, 0, sizeof(mine));
}

static void clients_key_init(void)
{
    (void)pthread_key_create(&clients_key, thread_clients_exit);
}

/* Forget the clients of inboxes that are gone. */
static void forget_closed(void)
{
    uint32_t keep = 0;
    for (uint32_t i = 0; i < mine.n; i++) {
        dv_client *c = mine.items[i];
        /* Acquire: pairs with the release store in dv__inbox_destroy. */
        if (atomic_load_explicit(&c->closed, memory_order_acquire))
            client_unref(c);
        else
            mine.items[keep++] = c;
    }
    mine.n = keep;
    mine.last = NULL;
}

dv_client *dv__inbox_client(dv_inbox *in)
{
    if (mine.last != NULL && mine.last->inbox_uid == in->uid)
        return mine.last;
    for (uint32_t i = 0; i < mine.n; i++) {
        if (mine.items[i]->inbox_uid == in->uid)
            return mine.last = mine.items[i];
    }
    forget_closed();
    pthread_once(&clients_once, clients_key_init);
    if (dv__array_reserve((void **)&mine.items, &mine.cap, mine.n + 1, sizeof(*mine.items)) != 0) {
        dv__fail(DV_ENOMEM, "post", "post: out of host memory for a client");
        return NULL;
    }
    dv_client *c = client_new(in, in->mode == DV_INBOX_SPSC);
    if (c == NULL || register_client(in, c) != 0) {
        if (c != NULL) {
            free(c->buf);
            free(c);
        }
        dv__fail(DV_ENOMEM, "post", "post: out of host memory for a client ring");
        return NULL;
    }
    (void)pthread_setspecific(clients_key, &mine); /* any non-NULL value: run the exit */
    mine.items[mine.n++] = c;
    return mine.last = c;
}

/* ------------------------------------------------------------------------
 * Inbox
 * ------------------------------------------------------------------------ */

int dv__inbox_create(dv_inbox_mode mode, uint32_t capacity, uint64_t uid, dv_client_drop_fn drop,
                     void *drop_arg, dv_inbox **out)
{
    uint32_t cap = 2;
    while (cap < capacity + 1 && cap < (1u << 24)) /* a ring of N holds N-1 */
        cap <<= 1;
    dv_inbox *in = aligned_alloc(_Alignof(dv_inbox), (sizeof(*in) + 63) & ~(size_t)63);
    if (in == NULL)
        return dv__fail(DV_ENOMEM, "inbox_create", "out of host memory");
    memset(in, 0, sizeof(*in));
    in->uid = uid;
    in->mode = mode;
    in->capacity = cap;
    in->drop = drop;
    in->drop_arg = drop_arg;
    pthread_mutex_init(&in->reg_mu, NULL);
    atomic_init(&in->nclients, 0);
    atomic_init(&in->next_id, 1);
    atomic_init(&in->ticket, 1);
    if (mode == DV_INBOX_MPSC && (in->shared = client_new(in, true)) == NULL) {
        dv__inbox_destroy(in);
        return dv__fail(DV_ENOMEM, "inbox_create", "out of host memory");
    }
    *out = in;
    return DV_OK;
}

void dv__inbox_destroy(dv_inbox *in)
{
    if (in == NULL)
        return;
    uint32_t n = atomic_load_explicit(&in->nclients, memory_order_acquire);
    dv_client **arr = atomic_load_explicit(&in->clients, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++) {
        dv_client *c = arr[i];
        /* The ring is what is big; its thread never posts to it again. */
        free(c->buf);
        c->buf = NULL;
        /* Release: pairs with the acquire load in forget_closed. */
        atomic_store_explicit(&c->closed, true, memory_order_release);
        client_unref(c);
    }
    free(arr);
    if (in->shared != NULL) {
        free(in->shared->buf);
        free(in->shared);
    }
    while (in->retired != NULL) {
        struct retired_array *ra = in->retired;
        in->retired = ra->next;
        free(ra->clients);
        free(ra);
    }
    free(in->held);
    pthread_mutex_destroy(&in->reg_mu);
    free(in);
}

static void backoff(unsigned *round)
{
    unsigned r = (*round)++;
    if (r < 64) {
        __builtin_ia32_pause();
    } else if (r < 128) {
        sched_yield();
    } else {
        struct timespec ts = {0, 50000}; /* 50 us */
        nanosleep(&ts, NULL);
    }
}

int dv__inbox_post(dv_inbox *in, dv_client *c, dv_msg *msg, bool try)
{
    unsigned round = 0;
    dv_msg *slot;
    if (in->mode == DV_INBOX_MPSC) {
        dv_client *r = in->shared;
        unsigned ticket;
        while ((slot = ck_ring_enqueue_reserve_mpsc_msg(&r->ring, r->buf, &ticket)) == NULL) {
            if (try)
                return dv__fail(DV_EAGAIN, "post", "post: the actor's queue is full");
            backoff(&round);
        }
        /* The shared ring is in reservation order: the ticket field
         * carries the poster instead (dv__inbox_take). */
        msg->ticket = (uintptr_t)c;
        msg->seq = c->seq++;
        SLOT_COPY_BEGIN();
        *slot = *msg;
        SLOT_COPY_END();
        HANDOFF_RELEASE(r);
        ck_ring_enqueue_commit_mpsc(&r->ring, ticket);
    } else {
        while ((slot = ck_ring_enqueue_reserve_spsc_msg(&c->ring, c->buf)) == NULL) {
            if (try)
                return dv__fail(DV_EAGAIN, "post", "post: the actor's queue is full");
            backoff(&round);
        }
        /* Relaxed: the order that matters comes from happens-before
         * between posts (queue.h), which the counter's modification order
         * follows; the message itself is published by the commit. */
        msg->ticket = atomic_fetch_add_explicit(&in->ticket, 1, memory_order_relaxed);
        msg->seq = c->seq++;
        SLOT_COPY_BEGIN();
        *slot = *msg;
        SLOT_COPY_END();
        HANDOFF_RELEASE(c);
        ck_ring_enqueue_commit_spsc(&c->ring);
    }
    /*
     * Dekker with dv__inbox_park: we publish the message, then read parked;
     * the actor sets parked, then looks at the rings.  With a full fence on
     * both sides at least one sees the other: either the actor finds the
     * message, or we see parked and move the count its wait compares.
     */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&in->parked, memory_order_relaxed))
        ck_ec32_inc(&in->ec, &ec_mode);
    return DV_OK;
}

/* ------------------------------------------------------------------------
 * The actor's side
 * ------------------------------------------------------------------------ */

/* Take one message of client c's ring (or the shared ring r) into held. */
static bool take_one(dv_inbox *in, dv_client *r)
{
    if (ck_ring_size(&r->ring) == 0)
        return false;
    if (dv__array_reserve((void **)&in->held, &in->cap_held, (uint64_t)in->nheld + 1,
                          sizeof(*in->held)) != 0)
        return false; /* out of host memory: the message waits in its ring */
    held_msg *h = &in->held[in->nheld];
    /* Acquire only once a message is there: its producer released the
     * slot before committing it. */
    HANDOFF_ACQUIRE(r);
    SLOT_COPY_BEGIN();
    bool dequeued = ck_ring_dequeue_spsc_msg(&r->ring, r->buf, &h->env.m);
    SLOT_COPY_END();
    if (!dequeued)
        return false;
    dv_client *from = r;
    if (r == in->shared) {
        from = (dv_client *)(uintptr_t)h->env.m.ticket;
        h->env.m.ticket = 0;
    }
    /* Per client, messages come in the order posted, none lost or twice
     * (the ck-style payload invariant). */
    dv_assert_internal(h->env.m.seq == from->expect_seq);
    from->expect_seq = h->env.m.seq + 1;
    h->env.from = from;
    h->round = in->round;
    in->nheld++;
    return true;
}

/* Drop orphaned clients with nothing left (actor thread, nothing held). */
static void drop_orphans(dv_inbox *in)
{
    /* A message in the shared ring still names its poster's client. */
    if (in->shared != NULL && ck_ring_size(&in->shared->ring) > 0)
        return;
    pthread_mutex_lock(&in->reg_mu);
    uint32_t n = atomic_load_explicit(&in->nclients, memory_order_relaxed);
    dv_client **cur = atomic_load_explicit(&in->clients, memory_order_relaxed);
    dv_client **arr = malloc((size_t)(n ? n : 1) * sizeof(*arr));
    if (arr != NULL) {
        uint32_t k = 0, ngone = 0;
        dv_client *gone[64];
        for (uint32_t i = 0; i < n; i++) {
            dv_client *c = cur[i];
            bool empty = c->buf == NULL || ck_ring_size(&c->ring) == 0;
            /* Acquire: pairs with the release store in thread_clients_exit. */
            if (ngone < 64 && empty && atomic_load_explicit(&c->orphaned, memory_order_acquire))
                gone[ngone++] = c;
            else
                arr[k++] = c;
        }
        if (ngone > 0 && publish_clients(in, arr, k) == 0) {
            for (uint32_t i = 0; i < ngone; i++) {
                if (in->drop != NULL)
                    in->drop(in->drop_arg, gone[i]);
                client_unref(gone[i]);
            }
        } else {
            free(arr);
        }
    }
    pthread_mutex_unlock(&in->reg_mu);
}

/* One look at every ring; returns the smallest cap (UINT64_MAX: none). */
static uint64_t collect(dv_inbox *in, bool *orphans)
{
    /* Acquire: pairs with publish_clients' release. */
    uint32_t n = atomic_load_explicit(&in->nclients, memory_order_acquire);
    dv_client **arr = atomic_load_explicit(&in->clients, memory_order_acquire);
    uint64_t cap = UINT64_MAX;

    in->round++;
    if (in->mode == DV_INBOX_MPSC) {
        for (unsigned i = 0; i < COLLECT && take_one(in, in->shared); i++)
            ;
        for (uint32_t k = 0; k < n; k++)
            *orphans |= atomic_load_explicit(&arr[k]->orphaned, memory_order_relaxed);
        return cap;
    }
    if (n == 0)
        return cap;
    unsigned quota = COLLECT / n > 0 ? COLLECT / n : 1;
    for (uint32_t k = 0; k < n; k++) {
        dv_client *c = arr[(in->cursor + k) % n];
        unsigned taken = 0;
        while (taken < quota && take_one(in, c))
            taken++;
        if (taken == quota && take_one(in, c)) {
            /* Messages left behind have larger tickets than this one. */
            uint64_t t = in->held[in->nheld - 1].env.m.ticket;
            cap = t < cap ? t : cap;
        }
        if (taken == 0 && atomic_load_explicit(&c->orphaned, memory_order_relaxed))
            *orphans = true;
    }
    in->cursor = (in->cursor + 1) % n;
    return cap;
}

/* Sort held by ticket: a sorted prefix (held back from before) and runs
 * appended in ticket order per client; insertion sort suits that. */
static void sort_held(dv_inbox *in, uint32_t from)
{
    for (uint32_t i = from > 0 ? from : 1; i < in->nheld; i++) {
        if (in->held[i - 1].env.m.ticket <= in->held[i].env.m.ticket)
            continue;
        held_msg x = in->held[i];
        uint32_t j = i;
        while (j > 0 && in->held[j - 1].env.m.ticket > x.env.m.ticket) {
            in->held[j] = in->held[j - 1];
            j--;
        }
        in->held[j] = x;
    }
}

unsigned dv__inbox_take(dv_inbox *in, dv_envelope *out, unsigned max)
{
    /* Messages handed out by the last take name their clients: they have
     * been handled by now, and nothing held names one either. */
    if (in->orphans && in->nheld == 0)
        drop_orphans(in);
    in->orphans = false;
    uint32_t before = in->nheld;
    uint64_t cap = collect(in, &in->orphans);
    unsigned got = 0;

    if (in->mode == DV_INBOX_MPSC) {
        /* One ring in reservation order: already the order to keep. */
        while (got < max && got < in->nheld) {
            out[got] = in->held[got].env;
            got++;
        }
    } else {
        sort_held(in, before);
        while (got < max && got < in->nheld) {
            const held_msg *h = &in->held[got];
            if (h->round == in->round || h->env.m.ticket > cap)
                break; /* not yet: see queue.h */
            out[got] = h->env;
            got++;
        }
    }
    if (got > 0) {
        memmove(in->held, in->held + got, (size_t)(in->nheld - got) * sizeof(*in->held));
        in->nheld -= got;
    }
    return got;
}

unsigned dv__inbox_held(const dv_inbox *in)
{
    return in->nheld;
}

static bool any_queued(dv_inbox *in)
{
    if (in->shared != NULL && ck_ring_size(&in->shared->ring) > 0)
        return true;
    uint32_t n = atomic_load_explicit(&in->nclients, memory_order_acquire);
    dv_client **arr = atomic_load_explicit(&in->clients, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++)
        if (arr[i]->buf != NULL && ck_ring_size(&arr[i]->ring) > 0)
            return true;
    return false;
}

void dv__inbox_park(dv_inbox *in, uint64_t timeout_ns)
{
    /* The snapshot first: a kick or post after it moves the count, so the
     * wait below returns at once instead of missing it. */
    uint32_t snap = ck_ec32_value(&in->ec);
    atomic_store_explicit(&in->parked, true, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst); /* pairs with dv__inbox_post's */
    if (in->nheld > 0 || any_queued(in) || atomic_load(&in->closing)) {
        atomic_store_explicit(&in->parked, false, memory_order_relaxed);
        return;
    }
    struct timespec rel = dv__timespec_of(timeout_ns), deadline;
    if (ck_ec_deadline(&deadline, &ec_mode, &rel) == 0)
        ck_ec32_wait(&in->ec, &ec_mode, snap, &deadline);
    atomic_store_explicit(&in->parked, false, memory_order_relaxed);
}

void dv__inbox_close(dv_inbox *in)
{
    atomic_store(&in->closing, true);
    ck_ec32_inc(&in->ec, &ec_mode);
}

bool dv__inbox_closed(const dv_inbox *in)
{
    return atomic_load(&((dv_inbox *)in)->closing);
}

void dv__inbox_kick(dv_inbox *in)
{
    ck_ec32_inc(&in->ec, &ec_mode);
}

uint32_t dv__inbox_clients(const dv_inbox *in)
{
    return atomic_load_explicit(&((dv_inbox *)in)->nclients, memory_order_relaxed);
}
