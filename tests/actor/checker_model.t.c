/*
 * The stream-order checker against a model of the contract, on random
 * programs: three threads take turns posting 48 steps over four streams
 * (raw-pointer kernels over byte ranges, pageable copies to and from host
 * buffers, futures waited or polled, syncs, event records, stream waits,
 * event syncs and queries, order tokens exported and adopted, host access
 * checks), on the sim with random stream delays.  The model is a vector
 * clock per stream, per thread, per event record and per operation, kept
 * by the rules of devactor.h's Order and checker sections:
 *   - an operation on stream s is ordered after s's earlier work and after
 *     what its posting thread knew when it posted it (a sync, a record and
 *     a stream wait too: they are operations on s);
 *   - a stream wait adds the event's record to s; one on an event never
 *     recorded posts nothing;
 *   - a thread learns an operation's clock by a wait on its future, or a
 *     poll that found it complete; a stream's by a sync; an event record's
 *     by an event sync, or a query that answered DV_OK; another thread's
 *     by adopting the token it exported;
 *   - the host side of a pageable host-to-device copy reads the buffer as
 *     the call runs: ordered after what the poster knew, and after its own
 *     stream's earlier work alone (README, Host memory).
 * Every access the checker judges (each kernel, copy and host check) must
 * get the model's verdict: DV_EHAZARD exactly where the model finds an
 * earlier conflicting access (one of them a write) that the new one is not
 * ordered after.  A refused operation enqueues nothing and changes no
 * clock.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devactor.h"
#include "devactor_sim.h"
#include "tap.h"

#define SEEDS   30
#define STREAMS 4
#define THREADS 3
#define BLOCKS  3
#define HOSTBUF 2
#define EVENTS  3
#define STEPS   48
#define WORDS   1024 /* u32 per block and per host buffer */
#define PIECE   256  /* words: ranges are one or two pieces */

/* ------------------------------------------------------------------------
 * Two sim kernels over raw pointers: a write (in two halves, a pause
 * between, so a racing read can see half of it) and a copy
 * ------------------------------------------------------------------------ */

static int k_write(dv_sim_kctx *k, void **p)
{
    uint64_t ptr = *(uint64_t *)p[0], n = *(uint64_t *)p[2];
    uint32_t v = *(uint32_t *)p[1], *x = dv_sim_kmem(k, ptr, n * 4);
    if (x == NULL)
        return DV_SIM_ILLEGAL_ADDRESS;
    for (uint64_t i = 0; i < n / 2; i++)
        x[i] = v;
    usleep(200);
    for (uint64_t i = n / 2; i < n; i++)
        x[i] = v;
    return 0;
}

static int k_copy(dv_sim_kctx *k, void **p)
{
    uint64_t dst = *(uint64_t *)p[0], src = *(uint64_t *)p[1], n = *(uint64_t *)p[2];
    uint32_t *d = dv_sim_kmem(k, dst, n * 4), *s = dv_sim_kmem(k, src, n * 4);
    if (d == NULL || s == NULL)
        return DV_SIM_ILLEGAL_ADDRESS;
    memcpy(d, s, n * 4);
    return 0;
}

static const dv_sim_kernel kernels[] = {
    {"write", k_write, 3, {8, 4, 8}},
    {"copy", k_copy, 3, {8, 8, 8}},
};
static const dv_sim_image image = DV_SIM_IMAGE(kernels);

/* ------------------------------------------------------------------------
 * The model
 * ------------------------------------------------------------------------ */

typedef struct vclock {
    uint32_t at[STREAMS];
} vclock;

static void join(vclock *into, const vclock *c)
{
    for (int i = 0; i < STREAMS; i++)
        if (c->at[i] > into->at[i])
            into->at[i] = c->at[i];
}

/* One access an operation made, once it was taken (not refused). */
typedef struct touch {
    bool host;  /* a host buffer's, else a device block's */
    int buf;    /* which */
    int lo, hi; /* words */
    bool write;
    int stream;  /* the operation's */
    uint32_t at; /* its position on that stream */
} touch;

enum kind {
    WRITE,
    COPY,
    DTOH,
    HTOD,
    WAIT,
    POLL,
    SYNC,
    RECORD,
    STREAM_WAIT,
    EVENT_SYNC,
    EVENT_QUERY,
    EXPORT,
    ADOPT,
    HOST_CHECK
};
static const char *const kind_name[] = {
    "write",  "copy",        "dtoh",       "htod",        "wait",   "poll",  "sync",
    "record", "stream_wait", "event_sync", "event_query", "export", "adopt", "host_check"};

typedef struct step {
    enum kind kind;
    int thread, stream, event, buf, buf2, lo, lo2, len, slot;
    dv_arg_access acc;
} step;

static struct {
    dv_actor *a;
    dv_kernel *write, *copy;
    uint64_t block[BLOCKS];
    dv_ref scratch[STREAMS]; /* each stream's device side of its copies */
    uint32_t *host[HOSTBUF];
    dv_event *event[EVENTS];
    dv_order_token start;
    step steps[STEPS];
    dv_future future[STEPS];
    bool posted[STEPS];
    dv_order_token token[STEPS];
    /* the model */
    vclock stream[STREAMS], thread[THREADS], record[EVENTS], op[STEPS], known_at[STEPS];
    bool recorded[EVENTS], taken[STEPS];
    uint32_t next_at[STREAMS];
    touch log[STEPS * 2];
    int nlog;
    /* the verdicts */
    atomic_int turn;
    int checks, races, hazards, mismatches;
    char first[512];
} w;

static uint64_t rng;

static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

/* Is any earlier access in conflict with these and not ordered before
 * vclock c?  (Same stream: ordered by stream order.) */
static bool races(const touch *acc, int n, int stream, const vclock *c)
{
    for (int i = 0; i < w.nlog; i++) {
        const touch *e = &w.log[i];
        for (int j = 0; j < n; j++) {
            const touch *x = &acc[j];
            if (e->host != x->host || e->buf != x->buf || e->hi <= x->lo || x->hi <= e->lo)
                continue;
            if ((!e->write && !x->write) || e->stream == stream)
                continue;
            if (c->at[e->stream] < e->at)
                return true;
        }
    }
    return false;
}

static void verdict(int i, bool race, int rc)
{
    bool hazard = rc == DV_EHAZARD;
    w.checks++;
    w.races += race;
    w.hazards += hazard;
    if (rc != DV_OK && !hazard && w.first[0] == '\0')
        snprintf(w.first, sizeof(w.first), "step %d (%s) failed: %s: %s", i,
                 kind_name[w.steps[i].kind], dv_err_name(rc), dv_last_error()->message);
    if (hazard != race) {
        w.mismatches++;
        if (w.first[0] == '\0') {
            dv_error_detail d;
            dv_actor_last_hazard(w.a, &d);
            snprintf(w.first, sizeof(w.first),
                     "step %d (%s on stream %d, thread %d): model %s, "
                     "checker %s (%s)",
                     i, kind_name[w.steps[i].kind], w.steps[i].stream, w.steps[i].thread,
                     race ? "race" : "ordered", dv_err_name(rc), hazard ? d.message : "no report");
        }
    }
}

/* An operation on a stream that accesses memory: judged, and if taken,
 * its vclock and accesses go into the model. */
static void operation(int i, touch *acc, int n, int rc)
{
    const step *p = &w.steps[i];
    vclock c = w.stream[p->stream];
    join(&c, &w.thread[p->thread]);
    uint32_t at = w.next_at[p->stream] + 1;
    c.at[p->stream] = at;
    bool race;
    if (p->kind == HTOD) {
        /* Its host side: what the poster knew, its own stream's earlier
         * work (same stream: skipped by races). */
        vclock h = w.thread[p->thread];
        h.at[p->stream] = at;
        race = races(acc, n, p->stream, &h);
    } else {
        race = races(acc, n, p->stream, &c);
    }
    if (rc == DV_OK)
        rc = dv_future_wait_ordered(&w.future[i]);
    verdict(i, race, rc);
    if (rc != DV_OK)
        return; /* refused: nothing enqueued */
    w.next_at[p->stream] = at;
    w.stream[p->stream] = c;
    w.op[i] = c;
    w.taken[i] = true;
    for (int j = 0; j < n; j++) {
        acc[j].stream = p->stream;
        acc[j].at = at;
        w.log[w.nlog++] = acc[j];
    }
}

static const dv_dim3 one = {1, 1, 1};

static void run(int i)
{
    const step *p = &w.steps[i];
    vclock *me = &w.thread[p->thread];
    touch acc[2];
    int rc;
    switch (p->kind) {
    case WRITE: {
        dv_arg args[] = {
            dv_arg_ptr_range(w.block[p->buf] + (uint64_t)p->lo * 4, DV_WRITE, (uint64_t)p->len * 4),
            dv_arg_u32((uint32_t)i), dv_arg_u64((uint64_t)p->len)};
        rc =
            dv_launch_async(w.a, w.write, one, one, 0, (dv_stream)p->stream, args, 3, &w.future[i]);
        w.posted[i] = rc == DV_OK;
        acc[0] = (touch){false, p->buf, p->lo, p->lo + p->len, true, 0, 0};
        operation(i, acc, 1, rc);
        break;
    }
    case COPY: {
        dv_arg args[] = {
            dv_arg_ptr_range(w.block[p->buf] + (uint64_t)p->lo * 4, DV_WRITE, (uint64_t)p->len * 4),
            dv_arg_ptr_range(w.block[p->buf2] + (uint64_t)p->lo2 * 4, DV_READ,
                             (uint64_t)p->len * 4),
            dv_arg_u64((uint64_t)p->len)};
        rc = dv_launch_async(w.a, w.copy, one, one, 0, (dv_stream)p->stream, args, 3, &w.future[i]);
        w.posted[i] = rc == DV_OK;
        acc[0] = (touch){false, p->buf, p->lo, p->lo + p->len, true, 0, 0};
        acc[1] = (touch){false, p->buf2, p->lo2, p->lo2 + p->len, false, 0, 0};
        operation(i, acc, 2, rc);
        break;
    }
    case DTOH:
    case HTOD: {
        uint32_t *h = w.host[p->buf] + p->lo;
        uint64_t off = (uint64_t)p->lo * 4, bytes = (uint64_t)p->len * 4;
        dv_stream s = (dv_stream)p->stream;
        rc = p->kind == DTOH
                 ? dv_copy_dtoh_async(w.a, h, w.scratch[s], off, bytes, s, &w.future[i])
                 : dv_copy_htod_async(w.a, w.scratch[s], off, h, bytes, s, &w.future[i]);
        w.posted[i] = rc == DV_OK;
        acc[0] = (touch){true, p->buf, p->lo, p->lo + p->len, p->kind == DTOH, 0, 0};
        operation(i, acc, 1, rc);
        break;
    }
    case WAIT:
        if (dv_future_wait(&w.future[p->slot]) == DV_OK && w.taken[p->slot])
            join(me, &w.op[p->slot]);
        break;
    case POLL:
        if (dv_future_done(&w.future[p->slot]) && w.future[p->slot].status == DV_OK &&
            w.taken[p->slot])
            join(me, &w.op[p->slot]);
        break;
    case SYNC:
        if (dv_sync(w.a, (dv_stream)p->stream) == DV_OK) {
            join(&w.stream[p->stream], me);
            join(me, &w.stream[p->stream]);
        }
        break;
    case RECORD:
        if (dv_event_record(w.event[p->event], (dv_stream)p->stream) == DV_OK) {
            join(&w.stream[p->stream], me);
            w.record[p->event] = w.stream[p->stream];
            w.recorded[p->event] = true;
        }
        break;
    case STREAM_WAIT:
        if (dv_stream_wait_event(w.a, (dv_stream)p->stream, w.event[p->event]) == DV_OK &&
            w.recorded[p->event]) {
            join(&w.stream[p->stream], &w.record[p->event]);
            join(&w.stream[p->stream], me);
        }
        break;
    case EVENT_SYNC:
        if (dv_event_sync(w.event[p->event]) == DV_OK && w.recorded[p->event])
            join(me, &w.record[p->event]);
        break;
    case EVENT_QUERY:
        if (dv_event_query(w.event[p->event]) == DV_OK && w.recorded[p->event])
            join(me, &w.record[p->event]);
        break;
    case EXPORT:
        if (dv_order_export(w.a, &w.token[i]) == DV_OK)
            w.known_at[i] = *me;
        break;
    case ADOPT:
        if (dv_order_adopt(w.a, &w.token[p->slot]) == DV_OK)
            join(me, &w.known_at[p->slot]);
        break;
    case HOST_CHECK: {
        rc = dv_check_host_access(w.a, w.host[p->buf] + p->lo, (uint64_t)p->len * 4, p->acc);
        acc[0] = (touch){true, p->buf, p->lo, p->lo + p->len, p->acc != DV_READ, -1, 0};
        verdict(i, races(acc, 1, -1, me), rc);
        break;
    }
    }
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    (void)dv_order_adopt(w.a, &w.start); /* the set-up, done by the main thread */
    for (int i = 0; i < STEPS; i++) {
        if (w.steps[i].thread != t)
            continue;
        while (atomic_load(&w.turn) != i)
            sched_yield();
        run(i);
        atomic_store(&w.turn, i + 1);
    }
    return NULL;
}

/* The program of a seed. */
static void generate(void)
{
    static const enum kind mix[20] = {WRITE,  WRITE,  WRITE,       COPY,        COPY,
                                      COPY,   WAIT,   WAIT,        WAIT,        SYNC,
                                      RECORD, RECORD, STREAM_WAIT, STREAM_WAIT, EVENT_SYNC,
                                      EXPORT, ADOPT,  DTOH,        HTOD,        HOST_CHECK};
    int ops[STEPS], nops = 0, tokens[STEPS], ntokens = 0;
    for (int i = 0; i < STEPS; i++) {
        step *p = &w.steps[i];
        memset(p, 0, sizeof(*p));
        p->thread = (int)(rnd() % THREADS);
        p->stream = (int)(rnd() % STREAMS);
        p->event = (int)(rnd() % EVENTS);
        p->kind = mix[rnd() % 20];
        if (rnd() % 10 == 0)
            p->kind = rnd() & 1 ? POLL : EVENT_QUERY;
        if ((p->kind == WAIT || p->kind == POLL) && nops == 0)
            p->kind = WRITE;
        if (p->kind == ADOPT && ntokens == 0)
            p->kind = EXPORT;
        p->len = PIECE * (int)(1 + rnd() % 2);
        p->lo = (int)(rnd() % (WORDS / PIECE)) * PIECE;
        if (p->lo + p->len > WORDS)
            p->lo = WORDS - p->len;
        p->lo2 = (int)(rnd() % (WORDS / PIECE)) * PIECE;
        if (p->lo2 + p->len > WORDS)
            p->lo2 = WORDS - p->len;
        p->buf = (int)(rnd() % BLOCKS);
        p->buf2 = (int)(rnd() % BLOCKS);
        if (p->kind == COPY && p->buf == p->buf2)
            p->buf2 = (p->buf + 1) % BLOCKS;
        if (p->kind == DTOH || p->kind == HTOD || p->kind == HOST_CHECK)
            p->buf = (int)(rnd() % HOSTBUF);
        p->acc = rnd() & 1 ? DV_READ : DV_WRITE;
        if (p->kind == WAIT || p->kind == POLL)
            p->slot = ops[rnd() % (uint32_t)nops];
        if (p->kind == ADOPT)
            p->slot = tokens[rnd() % (uint32_t)ntokens];
        if (p->kind == WRITE || p->kind == COPY || p->kind == DTOH || p->kind == HTOD)
            ops[nops++] = i;
        if (p->kind == EXPORT)
            tokens[ntokens++] = i;
    }
}

static int one_seed(int seed)
{
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    cfg.check_order = true;
    cfg.permissive = true; /* raw pointers */
    cfg.streams = STREAMS;
    cfg.sim_seed = (uint64_t)seed;
    cfg.sim_delay_max_us = 500;
    memset(&w, 0, sizeof(w));
    rng = UINT64_C(0x9E3779B97F4A7C15) * (uint64_t)(seed + 1);
    int rc = dv_actor_create(&cfg, &w.a);
    if (rc == DV_OK)
        rc = dv_kernel_get(w.a, &image, sizeof(image), "write", &w.write);
    if (rc == DV_OK)
        rc = dv_kernel_get(w.a, &image, sizeof(image), "copy", &w.copy);
    dv_ref block[BLOCKS];
    for (int b = 0; b < BLOCKS && rc == DV_OK; b++) {
        dv_ref_info info;
        rc = dv_alloc(w.a, WORDS * 4, 0, "block", &block[b]);
        if (rc == DV_OK)
            rc = dv_memset(w.a, block[b], 0, 0, WORDS * 4, 0);
        if (rc == DV_OK)
            rc = dv_ref_access(block[b], &info);
        w.block[b] = info.ptr;
    }
    for (int s = 0; s < STREAMS && rc == DV_OK; s++) {
        rc = dv_alloc(w.a, WORDS * 4, (dv_stream)s, "scratch", &w.scratch[s]);
        if (rc == DV_OK)
            rc = dv_memset(w.a, w.scratch[s], 0, 0, WORDS * 4, (dv_stream)s);
    }
    for (int h = 0; h < HOSTBUF; h++)
        w.host[h] = calloc(WORDS, 4);
    for (int e = 0; e < EVENTS && rc == DV_OK; e++)
        rc = dv_event_create(w.a, 0, &w.event[e]);
    for (int s = 0; s < STREAMS && rc == DV_OK; s++)
        rc = dv_sync(w.a, (dv_stream)s);
    if (rc == DV_OK)
        rc = dv_order_export(w.a, &w.start);
    if (rc != DV_OK) {
        diag("seed %d: set-up: %s: %s", seed, dv_err_name(rc), dv_last_error()->message);
        return -1;
    }
    for (int i = 0; i < STEPS; i++)
        dv_future_init(&w.future[i], 0);
    generate();
    pthread_t t[THREADS];
    for (int k = 0; k < THREADS; k++)
        pthread_create(&t[k], NULL, worker, (void *)(intptr_t)k);
    for (int k = 0; k < THREADS; k++)
        pthread_join(t[k], NULL);
    for (int i = 0; i < STEPS; i++)
        if (w.posted[i])
            (void)dv_future_wait(&w.future[i]);
    for (int e = 0; e < EVENTS; e++)
        dv_event_destroy(w.event[e]);
    dv_actor_destroy(w.a);
    for (int h = 0; h < HOSTBUF; h++)
        free(w.host[h]);
    return w.mismatches;
}

int main(void)
{
    plan(SEEDS + 1);
    int checks = 0, races_seen = 0, hazards = 0;
    for (int seed = 1; seed <= SEEDS; seed++) {
        int bad = one_seed(seed);
        ok(bad == 0 && w.first[0] == '\0',
           "seed %d: %d accesses judged, the checker agrees with the model on each%s%s", seed,
           w.checks, w.first[0] != '\0' ? ": " : "", w.first);
        checks += w.checks;
        races_seen += w.races;
        hazards += w.hazards;
    }
    ok(races_seen >= checks / 10 && hazards == races_seen,
       "%d accesses, %d races in the model, %d hazards reported: the programs race often "
       "enough to tell",
       checks, races_seen, hazards);
    return tap_done();
}
