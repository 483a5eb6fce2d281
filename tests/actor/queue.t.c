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
    uint64_t inbox_id;
    atomic_int started;
    bool try;
    atomic_uint_fast64_t eagain;
} run;

typedef struct producer {
    run *r;
    uint64_t who;
} producer;

static void *produce(void *arg)
{
    producer *p = arg;
    atomic_fetch_add(&p->r->started, 1);
    for (uint64_t i = 0; i < PER_PRODUCER; i++) {
        dv_msg m = {.type = 7, .a = MAGIC, .b = p->who, .c = i, .d = MAGIC ^ (p->who << 32 | i)};
        int rc;
        while ((rc = dv__inbox_post(p->r->in, &m, p->r->try)) == DV_EAGAIN) {
            atomic_fetch_add(&p->r->eagain, 1);
            sched_yield();
        }
        if (rc != DV_OK)
            return (void *)1;
    }
    return NULL;
}

/* Consume until every message arrived; count violations. */
static void consume(run *r, uint64_t *bad_magic, uint64_t *out_of_order, uint64_t *total,
                    uint64_t *bad_seq)
{
    uint64_t next[PRODUCERS] = {0};
    uint64_t want = (uint64_t)r->producers * PER_PRODUCER;
    uint32_t last_ring_seq[1024];
    bool seen_ring[1024] = {false};
    dv_msg batch[64];
    *bad_magic = *out_of_order = *total = *bad_seq = 0;
    while (*total < want) {
        unsigned n = dv__inbox_drain(r->in, batch, 64);
        if (n == 0) {
            dv__inbox_park(r->in, 1000000);
            continue;
        }
        for (unsigned i = 0; i < n; i++) {
            dv_msg *m = &batch[i];
            if (m->a != MAGIC || m->d != (MAGIC ^ (m->b << 32 | m->c)) || m->b >= PRODUCERS) {
                (*bad_magic)++;
                continue;
            }
            if (m->c != next[m->b])
                (*out_of_order)++;
            next[m->b] = m->c + 1;
            /* The inbox's own per-ring sequence moves by one each time. */
            if (m->producer < 1024) {
                if (seen_ring[m->producer] && m->seq != last_ring_seq[m->producer] + 1)
                    (*bad_seq)++;
                seen_ring[m->producer] = true;
                last_ring_seq[m->producer] = m->seq;
            }
            (*total)++;
        }
    }
}

static void test_mode(dv_inbox_mode mode, int producers, uint32_t capacity, bool try,
                      const char *name)
{
    run r = {.producers = producers, .inbox_id = 1000 + (uint64_t)mode * 10 + capacity, .try = try};
    producer ps[PRODUCERS];
    pthread_t th[PRODUCERS];
    uint64_t bad_magic, ooo, total, bad_seq;

    is_status(dv__inbox_create(mode, capacity, &r.in), DV_OK, "%s: inbox", name);
    for (int i = 0; i < producers; i++) {
        ps[i] = (producer){&r, (uint64_t)i};
        pthread_create(&th[i], NULL, produce, &ps[i]);
    }
    consume(&r, &bad_magic, &ooo, &total, &bad_seq);
    int failed = 0;
    for (int i = 0; i < producers; i++) {
        void *res;
        pthread_join(th[i], &res);
        failed += res != NULL;
    }
    is_int(failed, 0, "%s: %d producers posted %llu messages each", name, producers,
           (unsigned long long)PER_PRODUCER);
    is_u64(total, (uint64_t)producers * PER_PRODUCER, "%s: nothing lost", name);
    is_u64(bad_magic, 0, "%s: every payload intact", name);
    is_u64(ooo, 0, "%s: each producer's messages in order, none twice", name);
    if (mode == DV_INBOX_SPSC)
        is_u64(bad_seq, 0, "%s: each ring's sequence moves by one", name);
    else
        ok(true, "%s: (one shared ring: per-ring sequence not kept)", name);
    dv_msg extra;
    is_int((int)dv__inbox_drain(r.in, &extra, 1), 0, "%s: nothing dequeued twice", name);
    if (try)
        ok(atomic_load(&r.eagain) > 0, "%s: a full ring answered DV_EAGAIN (%llu times)", name,
           (unsigned long long)atomic_load(&r.eagain));
    dv__inbox_destroy(r.in);
}

int main(void)
{
    plan(7 * 4 + 1 + 2);
    test_mode(DV_INBOX_SPSC, PRODUCERS, 1024, false, "per-client rings");
    test_mode(DV_INBOX_MPSC, 2, 1024, false, "shared ring");
    per_producer = 3000;
    test_mode(DV_INBOX_SPSC, PRODUCERS, 4, true, "per-client rings of 4, try");
    test_mode(DV_INBOX_SPSC, PRODUCERS, 4, false, "per-client rings of 4, blocking");

    /* A try on a full ring changes nothing. */
    dv_inbox *in;
    dv__inbox_create(DV_INBOX_SPSC, 1, &in);
    dv_msg m = {.a = 1};
    int first = dv__inbox_post(in, &m, true);
    int second = dv__inbox_post(in, &m, true);
    ok(first == DV_OK && second == DV_EAGAIN,
       "a ring of capacity 1 holds one message, then DV_EAGAIN");
    dv_msg out[4];
    is_int((int)dv__inbox_drain(in, out, 4), 1, "exactly the one message comes out");
    dv__inbox_destroy(in);
    return tap_done();
}
