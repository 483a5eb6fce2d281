/*
 * The actor's inbox (design: queue.h).
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "actor/queue.h"
#include "driver/port.h"

CK_RING_PROTOTYPE(msg, dv_msg)

#include "base/tsan.h"

/*
 * ck publishes in both directions with its own fences, which TSan does not
 * model, and neither side can annotate between its copy and ck's publish
 * (the consumer frees a slot inside the dequeue).  So: the hand-off is
 * annotated on the ring (release before the commit, acquire once the ring
 * is seen non-empty), which orders everything the message refers to; and
 * only the copies of the message bytes into and out of ring slots are
 * hidden from TSan.
 */
#define HANDOFF_RELEASE(p) dv__tsan_release(p)
#define HANDOFF_ACQUIRE(p) dv__tsan_acquire(p)
#define SLOT_COPY_BEGIN()  dv__tsan_ignore_begin()
#define SLOT_COPY_END()    dv__tsan_ignore_end()

struct dv_ring {
    ck_ring_t ring;
    dv_msg *buf;
    atomic_uint owners;   /* the thread and the actor */
    atomic_bool orphaned; /* its thread has exited */
    uint32_t id;
    uint32_t seq; /* producer side only */
    uint64_t inbox_id;
};

struct retired_array {
    struct retired_array *next;
    dv_ring **rings;
};

struct dv_inbox {
    uint64_t uid; /* unique for the process: keys the client threads' rings */
    dv_inbox_mode mode;
    uint32_t capacity;
    struct ck_ec32 ec;
    /* The actor may be about to sleep: posters bump the event count only
     * then, so a busy actor's count line is not written per message. */
    _Alignas(64) atomic_bool parked;
    pthread_mutex_t reg_mu;    /* registering and dropping rings */
    _Atomic(dv_ring **) rings; /* published array, read by the actor */
    atomic_uint nrings;
    uint32_t cap_rings;            /* under reg_mu */
    struct retired_array *retired; /* arrays the actor may still read */
    uint32_t cursor;               /* actor: round-robin start */
    dv_ring *shared;               /* MPSC mode */
    atomic_uint next_id;
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
    syscall(SYS_futex, addr, FUTEX_WAIT_BITSET_PRIVATE, expected, deadline, NULL,
            FUTEX_BITSET_MATCH_ANY);
}

static void ec_wake32(const struct ck_ec_ops *ops, const uint32_t *addr)
{
    (void)ops;
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
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
 * Rings
 * ------------------------------------------------------------------------ */

static dv_ring *ring_new(dv_inbox *in, uint64_t inbox_id)
{
    dv_ring *r = aligned_alloc(64, (sizeof(*r) + 63) & ~(size_t)63);
    if (r == NULL)
        return NULL;
    memset(r, 0, sizeof(*r));
    r->buf = aligned_alloc(64, (size_t)in->capacity * sizeof(dv_msg));
    if (r->buf == NULL) {
        free(r);
        return NULL;
    }
    ck_ring_init(&r->ring, in->capacity);
    atomic_init(&r->owners, 2);
    atomic_init(&r->orphaned, false);
    r->id = atomic_fetch_add_explicit(&in->next_id, 1, memory_order_relaxed);
    r->inbox_id = inbox_id;
    return r;
}

/* Drop one owner; the last frees. */
static void ring_unref(dv_ring *r)
{
    /* acq_rel: the last owner sees every write the other made. */
    if (atomic_fetch_sub_explicit(&r->owners, 1, memory_order_acq_rel) == 1) {
        free(r->buf);
        free(r);
    }
}

/* Publish a new array of rings (under reg_mu).  The old one stays readable
 * until the inbox goes: the actor may be iterating it. */
static int publish_rings(dv_inbox *in, dv_ring **arr, uint32_t n)
{
    dv_ring **old = atomic_load_explicit(&in->rings, memory_order_relaxed);
    if (old != NULL && old != arr) {
        struct retired_array *ra = malloc(sizeof(*ra));
        if (ra == NULL)
            return -1;
        ra->rings = old;
        ra->next = in->retired;
        in->retired = ra;
    }
    /* Release: pairs with the actor's acquire loads in drain; a ring is
     * initialised before it is visible there. */
    atomic_store_explicit(&in->rings, arr, memory_order_release);
    atomic_store_explicit(&in->nrings, n, memory_order_release);
    return 0;
}

static int register_ring(dv_inbox *in, dv_ring *r)
{
    int rc = 0;
    pthread_mutex_lock(&in->reg_mu);
    uint32_t n = atomic_load_explicit(&in->nrings, memory_order_relaxed);
    dv_ring **cur = atomic_load_explicit(&in->rings, memory_order_relaxed);
    /* Always a fresh array: the actor may be reading the current one. */
    dv_ring **arr = malloc(((size_t)n + 1) * sizeof(*arr));
    if (arr == NULL) {
        rc = -1;
    } else {
        if (n > 0)
            memcpy(arr, cur, (size_t)n * sizeof(*arr));
        arr[n] = r;
        if (publish_rings(in, arr, n + 1) != 0) {
            free(arr);
            rc = -1;
        }
    }
    pthread_mutex_unlock(&in->reg_mu);
    return rc;
}

/* ------------------------------------------------------------------------
 * The calling thread's rings, one per inbox it posted to
 * ------------------------------------------------------------------------ */

struct thread_rings {
    uint32_t n, cap;
    dv_ring **rings;
};

static pthread_key_t rings_key;
static pthread_once_t rings_once = PTHREAD_ONCE_INIT;
static _Thread_local struct thread_rings *my_rings;

/* Thread exit: the actor may drop the thread's rings once drained. */
static void thread_rings_exit(void *arg)
{
    struct thread_rings *tr = arg;
    for (uint32_t i = 0; i < tr->n; i++) {
        atomic_store_explicit(&tr->rings[i]->orphaned, true, memory_order_release);
        ring_unref(tr->rings[i]);
    }
    free(tr->rings);
    free(tr);
}

static void rings_key_init(void)
{
    (void)pthread_key_create(&rings_key, thread_rings_exit);
}

static dv_ring *my_ring(dv_inbox *in)
{
    uint64_t inbox_id = in->uid;
    struct thread_rings *tr = my_rings;
    if (tr != NULL)
        for (uint32_t i = 0; i < tr->n; i++)
            if (tr->rings[i]->inbox_id == inbox_id)
                return tr->rings[i];
    if (tr == NULL) {
        pthread_once(&rings_once, rings_key_init);
        tr = calloc(1, sizeof(*tr));
        if (tr == NULL)
            return NULL;
        my_rings = tr;
        pthread_setspecific(rings_key, tr);
    }
    if (tr->n == tr->cap) {
        uint32_t cap = tr->cap ? tr->cap * 2 : 4;
        dv_ring **n = realloc(tr->rings, cap * sizeof(*n));
        if (n == NULL)
            return NULL;
        tr->rings = n;
        tr->cap = cap;
    }
    dv_ring *r = ring_new(in, inbox_id);
    if (r == NULL)
        return NULL;
    if (register_ring(in, r) != 0) {
        free(r->buf);
        free(r);
        return NULL;
    }
    tr->rings[tr->n++] = r;
    return r;
}

/* ------------------------------------------------------------------------
 * Inbox
 * ------------------------------------------------------------------------ */

int dv__inbox_create(dv_inbox_mode mode, uint32_t capacity, dv_inbox **out)
{
    uint32_t cap = 2;
    while (cap < capacity + 1 && cap < (1u << 24)) /* a ring of N holds N-1 */
        cap <<= 1;
    dv_inbox *in = calloc(1, sizeof(*in));
    if (in == NULL)
        return dv__fail(DV_ENOMEM, "inbox_create", "out of host memory");
    static atomic_uint_fast64_t next_uid = 1;
    in->uid = atomic_fetch_add_explicit(&next_uid, 1, memory_order_relaxed);
    in->mode = mode;
    in->capacity = cap;
    pthread_mutex_init(&in->reg_mu, NULL);
    atomic_init(&in->nrings, 0);
    atomic_init(&in->next_id, 1);
    if (mode == DV_INBOX_MPSC) {
        in->shared = ring_new(in, in->uid);
        dv_ring **arr = malloc(sizeof(*arr));
        if (in->shared == NULL || arr == NULL) {
            free(arr);
            dv__inbox_destroy(in);
            return dv__fail(DV_ENOMEM, "inbox_create", "out of host memory");
        }
        arr[0] = in->shared;
        publish_rings(in, arr, 1);
    }
    *out = in;
    return DV_OK;
}

void dv__inbox_destroy(dv_inbox *in)
{
    if (in == NULL)
        return;
    uint32_t n = atomic_load_explicit(&in->nrings, memory_order_acquire);
    dv_ring **arr = atomic_load_explicit(&in->rings, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++) {
        if (arr[i] == in->shared) {
            free(arr[i]->buf);
            free(arr[i]);
        } else {
            ring_unref(arr[i]);
        }
    }
    free(arr);
    while (in->retired != NULL) {
        struct retired_array *ra = in->retired;
        in->retired = ra->next;
        free(ra->rings);
        free(ra);
    }
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

int dv__inbox_post(dv_inbox *in, dv_msg *msg, bool try)
{
    unsigned round = 0;
    dv_msg *slot;
    if (in->mode == DV_INBOX_MPSC) {
        dv_ring *r = in->shared;
        unsigned ticket;
        msg->producer = 0;
        msg->seq = 0;
        while ((slot = ck_ring_enqueue_reserve_mpsc_msg(&r->ring, r->buf, &ticket)) == NULL) {
            if (try)
                return dv__fail(DV_EAGAIN, "post", "post: the actor's queue is full");
            backoff(&round);
        }
        SLOT_COPY_BEGIN();
        *slot = *msg;
        SLOT_COPY_END();
        HANDOFF_RELEASE(r);
        ck_ring_enqueue_commit_mpsc(&r->ring, ticket);
    } else {
        dv_ring *r = my_ring(in);
        if (r == NULL)
            return dv__fail(DV_ENOMEM, "post", "post: out of host memory for a client ring");
        while ((slot = ck_ring_enqueue_reserve_spsc_msg(&r->ring, r->buf)) == NULL) {
            if (try)
                return dv__fail(DV_EAGAIN, "post", "post: the actor's queue is full");
            backoff(&round);
        }
        msg->producer = r->id;
        msg->seq = r->seq++;
        SLOT_COPY_BEGIN();
        *slot = *msg;
        SLOT_COPY_END();
        HANDOFF_RELEASE(r);
        ck_ring_enqueue_commit_spsc(&r->ring);
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

/* Drop orphaned rings the actor has drained (actor thread). */
static void drop_orphans(dv_inbox *in)
{
    pthread_mutex_lock(&in->reg_mu);
    uint32_t n = atomic_load_explicit(&in->nrings, memory_order_relaxed);
    dv_ring **cur = atomic_load_explicit(&in->rings, memory_order_relaxed);
    dv_ring **arr = malloc((size_t)(n ? n : 1) * sizeof(*arr));
    if (arr != NULL) {
        uint32_t k = 0;
        dv_ring *gone[64];
        uint32_t ngone = 0;
        for (uint32_t i = 0; i < n; i++) {
            dv_ring *r = cur[i];
            if (ngone < 64 && atomic_load_explicit(&r->orphaned, memory_order_acquire) &&
                ck_ring_size(&r->ring) == 0)
                gone[ngone++] = r;
            else
                arr[k++] = r;
        }
        if (ngone > 0 && publish_rings(in, arr, k) == 0) {
            for (uint32_t i = 0; i < ngone; i++)
                ring_unref(gone[i]);
        } else {
            free(arr);
        }
    }
    pthread_mutex_unlock(&in->reg_mu);
}

unsigned dv__inbox_drain(dv_inbox *in, dv_msg *out, unsigned max)
{
    /* Acquire: pairs with publish_rings' release. */
    uint32_t n = atomic_load_explicit(&in->nrings, memory_order_acquire);
    dv_ring **arr = atomic_load_explicit(&in->rings, memory_order_acquire);
    unsigned got = 0;
    bool orphans = false;

    if (n == 0)
        return 0;
    unsigned quota = max / n > 0 ? max / n : 1;
    for (bool more = true; more && got < max;) {
        more = false;
        for (uint32_t k = 0; k < n && got < max; k++) {
            dv_ring *r = arr[(in->cursor + k) % n];
            unsigned taken = 0;
            while (taken < quota && got < max) {
                /* Acquire only once a message is there: its producer
                 * released the slot before committing it. */
                if (ck_ring_size(&r->ring) == 0)
                    break;
                HANDOFF_ACQUIRE(r);
                SLOT_COPY_BEGIN();
                bool dequeued = ck_ring_dequeue_spsc_msg(&r->ring, r->buf, &out[got]);
                SLOT_COPY_END();
                if (!dequeued)
                    break;
                got++;
                taken++;
            }
            more |= taken == quota;
            if (taken == 0 && r != in->shared &&
                atomic_load_explicit(&r->orphaned, memory_order_relaxed))
                orphans = true;
        }
    }
    in->cursor = (in->cursor + 1) % n;
    if (orphans)
        drop_orphans(in);
    return got;
}

static bool any_queued(dv_inbox *in)
{
    uint32_t n = atomic_load_explicit(&in->nrings, memory_order_acquire);
    dv_ring **arr = atomic_load_explicit(&in->rings, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++)
        if (ck_ring_size(&arr[i]->ring) > 0)
            return true;
    return false;
}

void dv__inbox_park(dv_inbox *in, uint64_t timeout_ns)
{
    uint32_t snap = ck_ec32_value(&in->ec);
    atomic_store_explicit(&in->parked, true, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst); /* pairs with dv__inbox_post's */
    if (any_queued(in)) {
        atomic_store_explicit(&in->parked, false, memory_order_relaxed);
        return;
    }
    if (timeout_ns == 0) {
        ck_ec32_wait(&in->ec, &ec_mode, snap, NULL);
    } else {
        struct timespec rel = {(time_t)(timeout_ns / 1000000000u),
                               (long)(timeout_ns % 1000000000u)};
        struct timespec deadline;
        if (ck_ec_deadline(&deadline, &ec_mode, &rel) == 0)
            ck_ec32_wait(&in->ec, &ec_mode, snap, &deadline);
    }
    atomic_store_explicit(&in->parked, false, memory_order_relaxed);
}

void dv__inbox_kick(dv_inbox *in)
{
    ck_ec32_inc(&in->ec, &ec_mode);
}

uint32_t dv__inbox_rings(const dv_inbox *in)
{
    return atomic_load_explicit(&in->nrings, memory_order_relaxed);
}
