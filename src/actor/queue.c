/*
 * The actor's inbox (design: queue.h).
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ck_ring.h>

#include "actor/queue.h"
#include "base/array.h"
#include "base/assert.h"
#include "base/error.h"
#include "base/fence.h"
#include "base/futex.h"
#include "base/proc.h"

CK_RING_PROTOTYPE(msg, dv_msg)

#include "base/tsan.h"

/*
 * The shared ring (DV_INBOX_MPSC) is ck's: ck publishes with its own
 * fences, which TSan does not model, and neither side can annotate between
 * its copy and ck's publish (the consumer frees a slot inside the
 * dequeue).  So there the hand-off is annotated on the ring (release
 * before the commit, acquire once it is seen non-empty), which orders
 * everything the message refers to, and only the copies of the message
 * bytes into and out of its slots are hidden from TSan.  The clients'
 * rings (spsc.h) use C11 atomics that TSan follows.
 */
#define HANDOFF_RELEASE(p) dv__tsan_release(p)
#define HANDOFF_ACQUIRE(p) dv__tsan_acquire(p)
#define SLOT_COPY_BEGIN()  dv__tsan_ignore_begin()
#define SLOT_COPY_END()    dv__tsan_ignore_end()

struct retired_array {
    struct retired_array *next;
    dv_client **clients;
};

struct dv_inbox {
    uint64_t uid; /* unique for the process: keys the threads' clients */
    dv_inbox_mode mode;
    bool unordered;    /* benchmarks only: no tickets, rings taken as they come */
    uint32_t capacity; /* messages a client's ring holds */
    uint32_t slots;    /* its slots: a power of two */
    dv_client_drop_fn drop;
    void *drop_arg;
    struct ck_ec32 ec;
    pthread_mutex_t reg_mu;        /* registering and dropping clients */
    _Atomic(dv_client **) clients; /* published array, read by the actor */
    atomic_uint nclients;
    struct retired_array *retired; /* arrays the actor may still read */
    atomic_uint next_id;
    ck_ring_t shared; /* MPSC: the one ring */
    dv_msg *shared_buf;
    /* The actor's, never touched by posters. */
    bool ordered;      /* by ticket (per-client rings, the order on) */
    uint64_t round;    /* collects made */
    bool orphans;      /* the last collect saw an orphaned client */
    dv_envelope *held; /* taken, not handed out yet: [hstart, hend), by ticket */
    uint32_t hstart, hend, cap_held;
    uint32_t ready;          /* of those, the first `ready` may be handed out */
    dv_envelope *spare_held; /* the merge's other buffer */
    uint32_t cap_spare_held;
    dv_envelope *incoming; /* one collect's messages */
    uint32_t nincoming, cap_incoming;
    bool incoming_sorted; /* by ticket already (one client, or taken in order) */
    struct run *runs;     /* the merge's heap */
    uint32_t cap_runs;
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

/* ck_ec's backoff sleeps to partial deadlines of 0.1, 0.8, 6.4 ms ... from
 * the start of the wait without clamping them to the caller's deadline:
 * a park of 50 us slept 0.1 ms and one of 0.9 ms slept 6.4 ms.  This
 * predicate clamps each partial deadline to the caller's (data). */
static int ec_clamp(const struct ck_ec_wait_state *state, struct timespec *partial)
{
    const struct timespec *end = state->data;
    if (partial->tv_sec > end->tv_sec ||
        (partial->tv_sec == end->tv_sec && partial->tv_nsec > end->tv_nsec))
        *partial = *end;
    return 0;
}

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
        dv_msg *slots = aligned_alloc(64, (size_t)in->slots * sizeof(dv_msg));
        if (slots == NULL) {
            free(c);
            return NULL;
        }
        dv__spsc_init(&c->ring, slots, in->slots, in->capacity);
    }
    atomic_init(&c->owners, 2);
    atomic_init(&c->orphaned, false);
    atomic_init(&c->closed, false);
    c->id = atomic_fetch_add_explicit(&in->next_id, 1, memory_order_relaxed);
    c->tid = dv__thread_id(); /* made on the thread that posts through it */
    c->server = dv__serving;
    c->inbox_uid = in->uid;
    return c;
}

/* Drop one owner; the last frees. */
static void client_unref(dv_client *c)
{
    /* acq_rel: the last owner sees every write the other made. */
    if (atomic_fetch_sub_explicit(&c->owners, 1, memory_order_acq_rel) == 1) {
        dv__know_list_free(&c->know);
        free(c->ring.slots);
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

unsigned dv__thread_clients(void)
{
    return mine.n;
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
            free(c->ring.slots);
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

static atomic_bool order_off;

void dv__order_disable(bool off)
{
    atomic_store(&order_off, off);
}

int dv__inbox_create(dv_inbox_mode mode, uint32_t capacity, uint64_t uid, dv_client_drop_fn drop,
                     void *drop_arg, dv_inbox **out)
{
    if (capacity == 0 || capacity > (1u << 24))
        return dv__fail(DV_EINVAL, "inbox_create", "inbox_create: capacity %u (1..2^24)", capacity);
    uint32_t slots = 2;
    while (slots < capacity)
        slots <<= 1;
    dv_inbox *in = aligned_alloc(_Alignof(dv_inbox), (sizeof(*in) + 63) & ~(size_t)63);
    if (in == NULL)
        return dv__fail(DV_ENOMEM, "inbox_create", "out of host memory");
    memset(in, 0, sizeof(*in));
    in->uid = uid;
    in->mode = mode;
    in->unordered = atomic_load(&order_off);
    in->ordered = mode == DV_INBOX_SPSC && !in->unordered;
    in->capacity = capacity;
    in->slots = slots;
    in->drop = drop;
    in->drop_arg = drop_arg;
    pthread_mutex_init(&in->reg_mu, NULL);
    atomic_init(&in->nclients, 0);
    atomic_init(&in->next_id, 1);
    atomic_init(&in->ticket, 1);
    if (mode == DV_INBOX_MPSC) {
        /* ck's ring of N slots holds N - 1. */
        uint32_t n = slots > capacity ? slots : slots << 1;
        if ((in->shared_buf = aligned_alloc(64, (size_t)n * sizeof(dv_msg))) == NULL) {
            dv__inbox_destroy(in);
            return dv__fail(DV_ENOMEM, "inbox_create", "out of host memory");
        }
        ck_ring_init(&in->shared, n);
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
        free(c->ring.slots);
        c->ring.slots = NULL;
        /* Release: pairs with the acquire load in forget_closed. */
        atomic_store_explicit(&c->closed, true, memory_order_release);
        client_unref(c);
    }
    free(arr);
    free(in->shared_buf);
    while (in->retired != NULL) {
        struct retired_array *ra = in->retired;
        in->retired = ra->next;
        free(ra->clients);
        free(ra);
    }
    free(in->held);
    free(in->spare_held);
    free(in->incoming);
    free(in->runs);
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

/*
 * ck_ring_enqueue_commit_mpsc, except that a poster waiting for the one
 * before it to commit yields after a while.  Commits go in reservation
 * order, so a poster descheduled between its reservation and its commit
 * holds up every later one; with more posting threads than cores, ck's
 * pure spin kept the cores busy with waiters instead of running it
 * (pairs/s fell by four orders of magnitude at 64 threads).
 */
static void shared_commit(ck_ring_t *r, unsigned ticket)
{
    unsigned spins = 0;
    while (ck_pr_load_uint(&r->p_tail) != ticket) {
        if (++spins < 64)
            ck_pr_stall();
        else
            sched_yield();
    }
    ck_pr_fence_store();
    ck_pr_store_uint(&r->p_tail, ticket + 1);
}

/* A full queue: the caller asked not to wait, or it serves an actor (a
 * task, a host function), where waiting for room could wait forever. */
static int queue_full(void)
{
    return dv__fail(DV_EAGAIN, "post",
                    dv__serving != NULL
                        ? "post: the actor's queue is full, and this thread serves an actor, "
                          "which must not wait for room"
                        : "post: the actor's queue is full");
}

int dv__inbox_post(dv_inbox *in, dv_client *c, dv_msg *msg, bool try)
{
    unsigned round = 0;
    dv_msg *slot;
    if (in->mode == DV_INBOX_MPSC) {
        unsigned ticket;
        while ((slot = ck_ring_enqueue_reserve_mpsc_msg(&in->shared, in->shared_buf, &ticket)) ==
               NULL) {
            if (try || dv__serving != NULL)
                return queue_full();
            backoff(&round);
        }
        /* The shared ring is in reservation order: the ticket field
         * carries the poster instead (dv__inbox_take). */
        msg->ticket = (uintptr_t)c;
        msg->seq = c->seq++;
        SLOT_COPY_BEGIN();
        *slot = *msg;
        SLOT_COPY_END();
        HANDOFF_RELEASE(&in->shared);
        shared_commit(&in->shared, ticket);
    } else {
        while ((slot = dv__spsc_reserve(&c->ring)) == NULL) {
            if (try || dv__serving != NULL)
                return queue_full();
            backoff(&round);
        }
        /* Relaxed: the order that matters comes from happens-before
         * between posts (queue.h), which the counter's modification order
         * follows; the message itself is published by the commit. */
        msg->ticket =
            in->unordered ? 0 : atomic_fetch_add_explicit(&in->ticket, 1, memory_order_relaxed);
        msg->seq = c->seq++;
        *slot = *msg;
        dv__spsc_commit(&c->ring);
    }
    /*
     * Dekker with dv__inbox_park: we publish the message, then read parked;
     * the actor sets parked, then looks at the rings.  With a fence on both
     * sides at least one sees the other: either the actor finds the
     * message, or we see parked and move the count its wait compares.  Ours
     * is the light one, the actor's the heavy one (base/fence.h): posts are
     * many, parks few.
     */
    dv__fence_light();
    if (atomic_load_explicit(&in->parked, memory_order_relaxed))
        ck_ec32_inc(&in->ec, &ec_mode);
    return DV_OK;
}

/* ------------------------------------------------------------------------
 * The actor's side
 * ------------------------------------------------------------------------ */

/* Room in incoming for n more messages. */
static bool incoming_room(dv_inbox *in, uint32_t n)
{
    return dv__array_reserve((void **)&in->incoming, &in->cap_incoming, (uint64_t)in->nincoming + n,
                             sizeof(*in->incoming)) == 0;
}

/* One message into incoming, from its client. */
static void take_msg(dv_inbox *in, const dv_msg *m, dv_client *from)
{
    dv_envelope *h = &in->incoming[in->nincoming];
    h->m = *m;
    /* Per client, messages come in the order posted, none lost or twice
     * (the ck-style payload invariant). */
    dv_assert_internal(h->m.seq == from->expect_seq);
    from->expect_seq = h->m.seq + 1;
    h->from = from;
    h->round = in->round;
    if (in->nincoming > 0 && h->m.ticket < in->incoming[in->nincoming - 1].m.ticket)
        in->incoming_sorted = false;
    in->nincoming++;
}

/* What client c's ring holds now, into incoming; how many. */
static uint32_t take_client(dv_inbox *in, dv_client *c)
{
    uint32_t n = dv__spsc_ready(&c->ring);
    if (n == 0 || !incoming_room(in, n))
        return 0; /* out of host memory: the messages wait in the ring */
    for (uint32_t i = 0; i < n; i++)
        take_msg(in, dv__spsc_peek(&c->ring, i), c);
    dv__spsc_release(&c->ring, n);
    return n;
}

/* What the shared ring holds now, into incoming. */
static void take_shared(dv_inbox *in)
{
    unsigned n = ck_ring_size(&in->shared);
    if (n == 0 || !incoming_room(in, n))
        return;
    for (; n > 0; n--) {
        dv_msg m;
        /* Acquire only once a message is there: its producer released the
         * slot before committing it. */
        HANDOFF_ACQUIRE(&in->shared);
        SLOT_COPY_BEGIN();
        bool dequeued = ck_ring_dequeue_spsc_msg(&in->shared, in->shared_buf, &m);
        SLOT_COPY_END();
        if (!dequeued)
            return;
        dv_client *from = (dv_client *)(uintptr_t)m.ticket;
        m.ticket = 0;
        take_msg(in, &m, from);
    }
}

/* Drop orphaned clients with nothing left (actor thread, nothing held). */
static void drop_orphans(dv_inbox *in)
{
    /* A message in the shared ring still names its poster's client. */
    if (in->mode == DV_INBOX_MPSC && ck_ring_size(&in->shared) > 0)
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
            /* Acquire: pairs with the release store in thread_clients_exit;
             * then its last post's counter is ours to read.  Every message
             * it posted must have been taken: in the shared ring one may
             * be committed behind another poster's slot not yet committed,
             * where the ring's size does not count it yet. */
            bool gone_now =
                ngone < 64 && atomic_load_explicit(&c->orphaned, memory_order_acquire) &&
                (c->ring.slots == NULL || dv__spsc_empty(&c->ring)) && c->expect_seq == c->seq;
            if (gone_now)
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

/*
 * One look at every ring: what each holds when looked at is taken into
 * incoming (no more: a producer as fast as the actor would otherwise keep
 * it on one ring).
 */
static void collect(dv_inbox *in, bool *orphans)
{
    /* Acquire: pairs with publish_clients' release. */
    uint32_t n = atomic_load_explicit(&in->nclients, memory_order_acquire);
    dv_client **arr = atomic_load_explicit(&in->clients, memory_order_acquire);

    in->round++;
    in->nincoming = 0;
    in->incoming_sorted = true;
    if (in->mode == DV_INBOX_MPSC) {
        take_shared(in);
        for (uint32_t i = 0; i < n; i++)
            *orphans |= atomic_load_explicit(&arr[i]->orphaned, memory_order_relaxed);
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        dv_client *c = arr[i];
        if (take_client(in, c) == 0 && atomic_load_explicit(&c->orphaned, memory_order_relaxed))
            *orphans = true;
    }
}

/* A run of messages in ticket order: what was held, or one client's
 * part of a collect. */
typedef struct run {
    const dv_envelope *at, *end;
} run;

static void sift_down(run *heap, uint32_t n, uint32_t i)
{
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && heap[l].at->m.ticket < heap[m].at->m.ticket)
            m = l;
        if (r < n && heap[r].at->m.ticket < heap[m].at->m.ticket)
            m = r;
        if (m == i)
            return;
        run t = heap[i];
        heap[i] = heap[m];
        heap[m] = t;
        i = m;
    }
}

/* Held becomes the n messages of *buf, and *buf the old held array (to
 * reuse); incoming is consumed. */
static void held_become(dv_inbox *in, dv_envelope **buf, uint32_t *cap, uint32_t n)
{
    dv_envelope *old = in->held;
    uint32_t old_cap = in->cap_held;
    in->held = *buf;
    in->cap_held = *cap;
    *buf = old;
    *cap = old_cap;
    in->hstart = 0;
    in->hend = n;
    in->nincoming = 0;
}

/*
 * Merge incoming into held by ticket.  Held is in ticket order and so is
 * each client's part of incoming (one thread's tickets rise with its
 * posts): a k-way merge over those runs moves each message once.  Without
 * the order (MPSC, or turned off) incoming is appended as it came.
 */
static int merge_incoming(dv_inbox *in)
{
    uint32_t nh = in->hend - in->hstart, ni = in->nincoming;
    if (ni == 0)
        return DV_OK;
    if (dv__array_reserve((void **)&in->spare_held, &in->cap_spare_held, (uint64_t)nh + ni,
                          sizeof(*in->spare_held)) != 0 ||
        dv__array_reserve((void **)&in->runs, &in->cap_runs, (uint64_t)ni + 1, sizeof(*in->runs)) !=
            0)
        return DV_ENOMEM;
    /* The common cases move nothing or append: nothing held, or every
     * new ticket after the held ones (one busy client). */
    bool sorted = !in->ordered || in->incoming_sorted;
    if (sorted && nh == 0) {
        held_become(in, &in->incoming, &in->cap_incoming, ni);
        return DV_OK;
    }
    if (sorted && (!in->ordered || in->held[in->hend - 1].m.ticket < in->incoming[0].m.ticket)) {
        /* Append; move what is held to the front only when the end is
         * reached (rarely, once the array is twice what stays held). */
        if ((uint64_t)in->hend + ni > in->cap_held && in->hstart > 0) {
            memmove(in->held, in->held + in->hstart, (size_t)nh * sizeof(*in->held));
            in->hstart = 0;
            in->hend = nh;
        }
        if (dv__array_reserve((void **)&in->held, &in->cap_held, (uint64_t)in->hend + ni,
                              sizeof(*in->held)) == 0) {
            memcpy(in->held + in->hend, in->incoming, (size_t)ni * sizeof(*in->held));
            in->hend += ni;
            in->nincoming = 0;
            return DV_OK;
        }
    }
    dv_envelope *o = in->spare_held;
    uint32_t k = 0;
    if (!in->ordered) {
        if (nh > 0)
            memcpy(o, in->held + in->hstart, (size_t)nh * sizeof(*o));
        memcpy(o + nh, in->incoming, (size_t)ni * sizeof(*o));
        k = nh + ni;
    } else {
        run *heap = in->runs;
        uint32_t n = 0;
        if (nh > 0)
            heap[n++] = (run){in->held + in->hstart, in->held + in->hend};
        for (uint32_t i = 0; i < ni;) {
            uint32_t j = i + 1;
            while (j < ni && in->incoming[j].from == in->incoming[i].from)
                j++;
            heap[n++] = (run){in->incoming + i, in->incoming + j};
            i = j;
        }
        for (uint32_t i = n / 2; i-- > 0;)
            sift_down(heap, n, i);
        while (n > 0) {
            o[k++] = *heap[0].at++;
            if (heap[0].at == heap[0].end)
                heap[0] = heap[--n];
            sift_down(heap, n, 0);
        }
    }
    held_become(in, &in->spare_held, &in->cap_spare_held, k);
    return DV_OK;
}

/* One collect, merged into held; the eligible run at its front. */
static void collect_and_merge(dv_inbox *in)
{
    collect(in, &in->orphans);
    if (merge_incoming(in) != DV_OK)
        return; /* out of host memory: taken again next time */
    if (!in->ordered) {
        in->ready = in->hend - in->hstart;
        return;
    }
    /* Seen before this collect, and before anything seen in it
     * (queue.h, Order). */
    uint32_t r = in->hstart;
    while (r < in->hend && in->held[r].round != in->round)
        r++;
    in->ready = r - in->hstart;
}

unsigned dv__inbox_take(dv_inbox *in, const dv_envelope **batch, unsigned max)
{
    if (in->ready == 0) {
        /* Messages handed out by the last take name their clients: they
         * have been handled by now, and nothing held names one either. */
        if (in->orphans && in->hstart == in->hend)
            drop_orphans(in);
        in->orphans = false;
        collect_and_merge(in);
        /* What this look found needs a second look before it may go: make
         * it now rather than on the loop's next turn. */
        if (in->ready == 0 && in->hstart < in->hend)
            collect_and_merge(in);
    }
    unsigned got = in->ready < max ? in->ready : max;
    /* Awake and working: posts need not kick any more (dv__inbox_park). */
    if (got > 0 && atomic_load_explicit(&in->parked, memory_order_relaxed))
        atomic_store_explicit(&in->parked, false, memory_order_relaxed);
    *batch = got > 0 ? in->held + in->hstart : NULL; /* held may be NULL yet */
    in->hstart += got;
    in->ready -= got;
    return got;
}

unsigned dv__inbox_held(const dv_inbox *in)
{
    return in->hend - in->hstart;
}

static bool any_queued(dv_inbox *in)
{
    if (in->mode == DV_INBOX_MPSC && ck_ring_size(&in->shared) > 0)
        return true;
    uint32_t n = atomic_load_explicit(&in->nclients, memory_order_acquire);
    dv_client **arr = atomic_load_explicit(&in->clients, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++)
        if (arr[i]->ring.slots != NULL && !dv__spsc_empty(&arr[i]->ring))
            return true;
    return false;
}

/*
 * Sleep until a post or a kick, or the timeout.  The heavy fence is paid
 * when the actor starts to park, not at every park: an actor that wakes
 * at its timeout with nothing to do (waiting for the device, it parks for
 * 20 us at a time) stays parked, and every post since the fence has seen
 * parked set and kicks.  It unparks when something woke it or it takes a
 * message (dv__inbox_take).
 */
void dv__inbox_park(dv_inbox *in, uint64_t timeout_ns, const atomic_bool *flag)
{
    /* The snapshot first: a kick or post after it moves the count, so the
     * wait below returns at once instead of missing it.  Acquire: a kick
     * the snapshot includes came after its post's message. */
    uint32_t snap = ck_ec32_value(&in->ec);
    atomic_thread_fence(memory_order_acquire);
    if (!atomic_load_explicit(&in->parked, memory_order_relaxed)) {
        atomic_store_explicit(&in->parked, true, memory_order_relaxed);
        dv__fence_heavy(); /* pairs with dv__inbox_post's light fence */
    }
    if (in->hend > in->hstart || any_queued(in) || atomic_load(&in->closing) ||
        (flag != NULL && atomic_load(flag))) {
        atomic_store_explicit(&in->parked, false, memory_order_relaxed);
        return;
    }
    struct timespec rel = dv__timespec_of(timeout_ns), deadline;
    if (ck_ec_deadline(&deadline, &ec_mode, &rel) == 0)
        ck_ec32_wait_pred(&in->ec, &ec_mode, snap, ec_clamp, &deadline, &deadline);
    if (ck_ec32_value(&in->ec) != snap)
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

uint32_t dv__inbox_live_clients(dv_inbox *in, const void *self)
{
    /* Under the registry's lock the current array's clients are alive. */
    pthread_mutex_lock(&in->reg_mu);
    uint32_t n = atomic_load_explicit(&in->nclients, memory_order_relaxed), live = 0;
    dv_client **cur = atomic_load_explicit(&in->clients, memory_order_relaxed);
    for (uint32_t i = 0; i < n; i++) {
        dv_client *c = cur[i];
        /* A thread that serves self posts only from the work of others
         * (tasks, host functions, oom functions): it counts while the actor
         * is at work (what it posted may be taken and not yet handled), as
         * one that exited counts while its messages are still to be taken. */
        bool serves = self != NULL && c->server == self;
        bool gone = atomic_load_explicit(&c->orphaned, memory_order_acquire) || serves;
        live += !gone || (c->ring.slots != NULL && !dv__spsc_empty(&c->ring)) ||
                c->expect_seq != c->seq ||
                (serves && !atomic_load_explicit(&in->parked, memory_order_acquire));
    }
    pthread_mutex_unlock(&in->reg_mu);
    return live;
}
