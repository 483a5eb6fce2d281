/*
 * The inbox under many producers, validated by payload invariants (as
 * Concurrency Kit validates its rings): every message carries a magic
 * number, its producer and a per-producer sequence; the consumer checks
 * that each producer's messages arrive in order, none twice, none lost, and
 * the magic intact.  Per-client rings with more producers than cores, and
 * backpressure through tiny rings; the shared ring with two producers (with
 * more producers than cores, ck's multi-producer commit stalls behind any
 * preempted producer for whole time slices: dv-bench measures that, it is
 * why clients get rings of their own).
 *
 * And the order across threads: producer A posts, then lets producer B go
 * (an atomic flag), B posts; the consumer must take A's message first,
 * every time, although the two sit in different rings.
 */
#include <pthread.h>
#include <sched.h>

#include "actor/queue.h"
#include "tap.h"

#define PRODUCERS 8
/* Tiny rings block their producers often, which costs time under TSan. */
static uint64_t per_producer = 20000;
#define PER_PRODUCER per_producer
#define MAGIC        UINT64_C(0xD5A5F00DC0FFEE11)

typedef struct run {
    int producers;
    dv_inbox *in;
    atomic_int started;
    bool try;
    atomic_uint_fast64_t eagain;
} run;

typedef struct producer {
    run *r;
    uint64_t who;
} producer;

static uint64_t next_uid = 1000;

static void *produce(void *arg)
{
    producer *p = arg;
    atomic_fetch_add(&p->r->started, 1);
    dv_client *c = dv__inbox_client(p->r->in);
    if (c == NULL)
        return (void *)1;
    for (uint64_t i = 0; i < PER_PRODUCER; i++) {
        dv_msg m = {.type = DV_MSG_FLUSH,
                    .u.builtin.args = {MAGIC, p->who, i, MAGIC ^ (p->who << 32 | i)}};
        int rc;
        while ((rc = dv__inbox_post(p->r->in, c, &m, p->r->try)) == DV_EAGAIN) {
            atomic_fetch_add(&p->r->eagain, 1);
            sched_yield();
        }
        if (rc != DV_OK)
            return (void *)1;
    }
    return NULL;
}

/* Consume until every message arrived; count violations. */
static void consume(run *r, uint64_t *bad_magic, uint64_t *out_of_order, uint64_t *total)
{
    uint64_t next[PRODUCERS] = {0};
    uint64_t want = (uint64_t)r->producers * PER_PRODUCER;
    const dv_envelope *batch;
    *bad_magic = *out_of_order = *total = 0;
    while (*total < want) {
        unsigned n = dv__inbox_take(r->in, &batch, 64);
        if (n == 0) {
            dv__inbox_park(r->in, 1000000, NULL);
            continue;
        }
        for (unsigned i = 0; i < n; i++) {
            const uint64_t *x = batch[i].m.u.builtin.args;
            if (x[0] != MAGIC || x[3] != (MAGIC ^ (x[1] << 32 | x[2])) || x[1] >= PRODUCERS ||
                batch[i].from == NULL) {
                (*bad_magic)++;
                continue;
            }
            if (x[2] != next[x[1]])
                (*out_of_order)++;
            next[x[1]] = x[2] + 1;
            (*total)++;
        }
    }
}

static void test_mode(dv_inbox_mode mode, int producers, uint32_t capacity, bool try,
                      const char *name)
{
    run r = {.producers = producers, .try = try};
    producer ps[PRODUCERS];
    pthread_t th[PRODUCERS];
    uint64_t bad_magic, ooo, total;

    is_status(dv__inbox_create(mode, capacity, next_uid++, NULL, NULL, &r.in), DV_OK, "%s: inbox",
              name);
    for (int i = 0; i < producers; i++) {
        ps[i] = (producer){&r, (uint64_t)i};
        pthread_create(&th[i], NULL, produce, &ps[i]);
    }
    consume(&r, &bad_magic, &ooo, &total);
    int failed = 0;
    for (int i = 0; i < producers; i++) {
        void *res;
        pthread_join(th[i], &res);
        failed += res != NULL;
    }
    is_int(failed, 0, "%s: %d producers posted %llu messages each", name, producers,
           (unsigned long long)PER_PRODUCER);
    is_u64(total, (uint64_t)producers * PER_PRODUCER, "%s: nothing lost", name);
    is_u64(bad_magic, 0, "%s: every payload intact, with its client", name);
    is_u64(ooo, 0, "%s: each producer's messages in order, none twice", name);
    const dv_envelope *extra;
    unsigned more = dv__inbox_take(r.in, &extra, 1) + dv__inbox_take(r.in, &extra, 1);
    is_int((int)more, 0, "%s: nothing taken twice", name);
    is_int((int)dv__inbox_clients(r.in), 0,
           "%s: the exited producers' clients were dropped once drained", name);
    if (try)
        ok(atomic_load(&r.eagain) > 0, "%s: a full ring answered DV_EAGAIN (%llu times)", name,
           (unsigned long long)atomic_load(&r.eagain));
    dv__inbox_destroy(r.in);
}

/* ---- the order across threads ---------------------------------------- */

#define HANDOVERS 20000

typedef struct handover {
    dv_inbox *in;
    atomic_uint go;   /* round A has posted */
    atomic_uint done; /* round B has posted */
} handover;

static void *post_a(void *arg)
{
    handover *h = arg;
    dv_client *c = dv__inbox_client(h->in);
    for (unsigned i = 1; i <= HANDOVERS; i++) {
        dv_msg m = {.type = DV_MSG_FLUSH, .u.builtin.args = {'A', i}};
        dv__inbox_post(h->in, c, &m, false);
        /* Release: B's post begins after A's returned. */
        atomic_store_explicit(&h->go, i, memory_order_release);
        while (atomic_load_explicit(&h->done, memory_order_acquire) != i)
            sched_yield();
    }
    return NULL;
}

static void *post_b(void *arg)
{
    handover *h = arg;
    dv_client *c = dv__inbox_client(h->in);
    for (unsigned i = 1; i <= HANDOVERS; i++) {
        while (atomic_load_explicit(&h->go, memory_order_acquire) != i)
            sched_yield();
        dv_msg m = {.type = DV_MSG_FLUSH, .u.builtin.args = {'B', i}};
        dv__inbox_post(h->in, c, &m, false);
        atomic_store_explicit(&h->done, i, memory_order_release);
    }
    return NULL;
}

static void test_handover(void)
{
    handover h = {0};
    pthread_t ta, tb;
    is_status(dv__inbox_create(DV_INBOX_SPSC, 64, next_uid++, NULL, NULL, &h.in), DV_OK,
              "hand-over: inbox");
    pthread_create(&ta, NULL, post_a, &h);
    pthread_create(&tb, NULL, post_b, &h);
    unsigned seen_a = 0, seen_b = 0, b_first = 0, total = 0;
    const dv_envelope *batch;
    while (total < 2 * HANDOVERS) {
        unsigned n = dv__inbox_take(h.in, &batch, 64);
        for (unsigned i = 0; i < n; i++, total++) {
            const uint64_t *x = batch[i].m.u.builtin.args;
            if (x[0] == 'A')
                seen_a = (unsigned)x[1];
            else if ((seen_b = (unsigned)x[1]) > seen_a)
                b_first++;
        }
        if (n == 0)
            sched_yield();
    }
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    is_int((int)b_first, 0, "hand-over: in %d rounds across two rings, B never before A",
           HANDOVERS);
    ok(seen_a == HANDOVERS && seen_b == HANDOVERS, "hand-over: every message came");
    dv__inbox_destroy(h.in);
}

int main(void)
{
    plan(7 * 4 + 1 + 3 + 2);
    test_mode(DV_INBOX_SPSC, PRODUCERS, 1024, false, "per-client rings");
    test_mode(DV_INBOX_MPSC, 2, 1024, false, "shared ring");
    per_producer = 3000;
    test_mode(DV_INBOX_SPSC, PRODUCERS, 4, true, "per-client rings of 4, try");
    test_mode(DV_INBOX_SPSC, PRODUCERS, 4, false, "per-client rings of 4, blocking");
    test_handover();

    /* A try on a full ring changes nothing. */
    dv_inbox *in;
    dv__inbox_create(DV_INBOX_SPSC, 1, next_uid++, NULL, NULL, &in);
    dv_client *c = dv__inbox_client(in);
    dv_msg m = {.type = DV_MSG_FLUSH};
    int first = dv__inbox_post(in, c, &m, true);
    int second = dv__inbox_post(in, c, &m, true);
    ok(first == DV_OK && second == DV_EAGAIN,
       "a ring of capacity 1 holds one message, then DV_EAGAIN");
    const dv_envelope *out;
    unsigned got = dv__inbox_take(in, &out, 4);
    got += dv__inbox_take(in, &out, 4 - got);
    is_int((int)got, 1, "exactly the one message comes out");
    dv__inbox_destroy(in);
    return tap_done();
}
