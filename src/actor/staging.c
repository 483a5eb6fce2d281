/*
 * Staged copies (staging.h has the design).
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "actor/actor.h"
#include "actor/recorder.h"
#include "base/tsan.h"

#define DEFAULT_STAGING_BYTES (UINT64_C(128) << 20)
#define DEFAULT_CHUNK_BYTES   (UINT64_C(8) << 20)
#define DEFAULT_COPY_THREADS  4u
#define MAX_COPY_THREADS      64u
#define WORD_STRIDE           16u /* u32 words: one 64-byte line each */
/* A copy of fewer than 2 * DV_STAGE_K chunks is cut finer, down to this,
 * so that several threads fill or empty it at once and its first transfer
 * starts sooner (one thread's memcpy is slower than the link). */
#define SUB_MIN (UINT64_C(2) << 20)
#define SUB_ALIGN (UINT64_C(64) << 10)

enum { PUMP_IDLE, PUMP_PROGRESS, PUMP_DONE };
/* How a pump ends (pump_finish). */
enum { FINISH_FORCED, FINISH_REFUSED, FINISH_OK };

/* ------------------------------------------------------------------------
 * Words and waiting
 * ------------------------------------------------------------------------ */

static inline bool reached(uint32_t w, uint32_t g)
{
    return (int32_t)(w - g) >= 0;
}

/* Acquire: the device's data (or, for host words, a pump's) came before. */
static inline uint32_t word_load(const uint32_t *w)
{
    return __atomic_load_n(w, __ATOMIC_ACQUIRE);
}

static inline void word_store(uint32_t *w, uint32_t v)
{
    __atomic_store_n(w, v, __ATOMIC_RELEASE);
}

/* A pump with nothing to do: spin a little, then yield, then sleep. */
typedef struct backoff {
    unsigned n;
} backoff;

static void backoff_wait(backoff *b)
{
    if (b->n < 64) {
        __builtin_ia32_pause();
    } else if (b->n < 2048) {
        sched_yield(); /* a few ms: a chunk's transfer takes about one */
    } else {
        struct timespec ts = {0, 20000}; /* 20 us */
        nanosleep(&ts, NULL);
    }
    b->n++;
}

static uint32_t gen_of(const dv_stage_job *j, uint32_t i)
{
    return j->g0[i % j->k] + i / j->k + 1;
}

static uint64_t sub_len(const dv_stage_job *j, uint32_t i)
{
    uint64_t c = j->sub, off = (uint64_t)i * c;
    return j->bytes - off < c ? j->bytes - off : c;
}

/* A sub-copy's length for a copy of bytes: a chunk, or less (SUB_MIN). */
static uint64_t sub_for(const dv_staging *st, uint64_t bytes)
{
    uint64_t sub = (bytes / (2 * DV_STAGE_K) + SUB_ALIGN - 1) & ~(SUB_ALIGN - 1);
    if (sub < SUB_MIN)
        sub = SUB_MIN;
    return sub < st->chunk_bytes ? sub : st->chunk_bytes;
}

/* The last sub-copy below n on chunk c, or UINT32_MAX. */
static uint32_t last_on(const dv_stage_job *j, uint32_t c, uint32_t n)
{
    if (n <= c)
        return UINT32_MAX;
    return c + (n - 1 - c) / j->k * j->k;
}

/* ------------------------------------------------------------------------
 * Chunks
 * ------------------------------------------------------------------------ */

/* The device that was to reach the words is gone: the host writes them. */
static void chunk_force(dv_staging *st, dv_stage_chunk *c)
{
    word_store(c->dev_word, c->gen);
    word_store(c->host_word, c->gen);
    c->need_dev = c->need_host = c->gen;
    c->need_gen = atomic_load_explicit(&st->abort_gen, memory_order_acquire);
}

/* Wait until c's last use is done (or its context is gone). */
static void chunk_idle(dv_staging *st, dv_stage_chunk *c)
{
    backoff b = {0};
    while (!reached(word_load(c->dev_word), c->need_dev) ||
           !reached(word_load(c->host_word), c->need_host)) {
        if (c->need_gen != atomic_load_explicit(&st->abort_gen, memory_order_acquire)) {
            chunk_force(st, c);
            return;
        }
        backoff_wait(&b);
    }
}

/* Is c idle now: has its last use been reached (or its context gone)? */
static bool chunk_is_idle(dv_staging *st, const dv_stage_chunk *c)
{
    return (reached(word_load(c->dev_word), c->need_dev) &&
            reached(word_load(c->host_word), c->need_host)) ||
           c->need_gen != atomic_load_explicit(&st->abort_gen, memory_order_acquire);
}

/* Chunks a stream may have at once, held or not yet idle: the rest stay
 * for other streams, so that copies queued behind long work on one
 * stream do not keep another stream's copies waiting for that work. */
static uint32_t stream_share(const dv_staging *st)
{
    uint32_t rest = st->nchunks / 4 > 0 ? st->nchunks / 4 : 1;
    return st->nchunks > rest ? st->nchunks - rest : 1;
}

/*
 * Chunks off the FIFO for a copy on stream s (st->mu held), up to want:
 * idle ones while s holds less than its share, then ones whose last use,
 * on s, is still ahead (the copy's own stream order waits for that);
 * where no_wait (an actor's thread), any.  A chunk whose use on another
 * stream is still ahead is not taken otherwise: that stream may be held
 * up for long, and the caller waits for whichever chunk goes idle first.
 * How many.
 */
static uint32_t chunks_pick(dv_staging *st, uint16_t s, uint32_t want, bool no_wait,
                            dv_stage_chunk **out)
{
    uint32_t ours = 0; /* s's chunks: held, or not yet idle */
    for (uint32_t i = 0; i < st->nchunks; i++) {
        const dv_stage_chunk *c = &st->chunks[i];
        ours += c->stream == s && (c->held || !chunk_is_idle(st, c));
    }
    uint32_t share = stream_share(st), n = 0;
    for (int pass = 0; pass < 3 && n < want; pass++) {
        dv_stage_chunk **link = &st->head, *prev = NULL;
        while (*link != NULL && n < want) {
            dv_stage_chunk *c = *link;
            bool idle = chunk_is_idle(st, c), same = c->stream == s && !idle;
            bool pick = pass == 0 ? idle && (ours < share || no_wait) : pass == 1 ? same : no_wait;
            if (!pick) {
                prev = c;
                link = &c->next;
                continue;
            }
            *link = c->next;
            if (st->tail == c)
                st->tail = prev;
            ours += !same;
            c->held = true;
            c->stream = s;
            out[n++] = c;
        }
    }
    return n;
}

/* Take up to want chunks for a copy on stream s, at least one: waiting
 * for it when may_wait (DV_EAGAIN otherwise), giving up when the actor
 * stops or is lost. */
static int chunks_take(dv_staging *st, uint16_t s, uint32_t want, bool may_wait, const char *op,
                       dv_stage_chunk **out, uint32_t *got)
{
    dv_actor *a = st->a;
    uint32_t n = 0;
    long look_ns = 50000; /* 50 us, doubling to 5 ms */
    bool waited = false;
    pthread_mutex_lock(&st->mu);
    while ((n = chunks_pick(st, s, want, !may_wait, out)) == 0) {
        int state = atomic_load(&a->state);
        if (!may_wait || state == DV_ACTOR_STOPPING || state == DV_ACTOR_STOPPED ||
            state == DV_ACTOR_LOST) {
            pthread_mutex_unlock(&st->mu);
            if (state == DV_ACTOR_LOST)
                return dv__lost_answer(a);
            if (state == DV_ACTOR_STOPPING || state == DV_ACTOR_STOPPED)
                return dv__fail(DV_ESHUTDOWN, op, "%s: device %d's actor is shutting down", op,
                                a->device);
            return dv__fail(DV_EAGAIN, op,
                            "%s: every staging chunk is in use (on an actor's thread, which must "
                            "not wait for one)",
                            op);
        }
        if (!waited) {
            waited = true;
            atomic_fetch_add_explicit(&a->st_staging_waits, 1, memory_order_relaxed);
        }
        /* A chunk given back wakes this; one in the FIFO going idle does
         * not (the device says so in its word): look again soon where
         * the FIFO holds any, then less often. */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += st->head != NULL ? look_ns : 10000000; /* else 10 ms */
        look_ns = look_ns < 5000000 ? 2 * look_ns : look_ns;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        (void)pthread_cond_timedwait(&st->cv, &st->mu, &until);
    }
    pthread_mutex_unlock(&st->mu);
    /* A chunk whose last use is still ahead (on this copy's stream) is
     * waited for here: a wait for room all the same. */
    bool busy = false;
    for (uint32_t i = 0; i < n && !busy; i++)
        busy = !chunk_is_idle(st, out[i]);
    if (busy && !waited)
        atomic_fetch_add_explicit(&a->st_staging_waits, 1, memory_order_relaxed);
    for (uint32_t i = 0; i < n; i++)
        chunk_idle(st, out[i]);
    *got = n;
    return DV_OK;
}

static void chunks_give(dv_staging *st, dv_stage_chunk **c, uint32_t n)
{
    pthread_mutex_lock(&st->mu);
    for (uint32_t i = 0; i < n; i++) {
        c[i]->held = false;
        c[i]->next = NULL;
        if (st->tail != NULL)
            st->tail->next = c[i];
        else
            st->head = c[i];
        st->tail = c[i];
    }
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
}

/* ------------------------------------------------------------------------
 * The pump: the host's side of one copy
 * ------------------------------------------------------------------------ */

/*
 * Done with the chunks: say for each what must be reached before it is
 * idle, and give them back.
 *   forced   the context is gone: nothing more will happen, the host
 *            writes both words;
 *   refused  the actor enqueued only the first `started` sub-copies (with
 *            their writes for the first `written`): the host words those
 *            wait for are written now, so that the stream goes on;
 *   ok       every step is enqueued and the host's are done.
 */
static void chunks_release(dv_stage_job *j, int how)
{
    dv_staging *st = j->st;
    for (uint32_t c = 0; c < j->k; c++) {
        dv_stage_chunk *ch = j->chunk[c];
        if (how == FINISH_FORCED) {
            chunk_force(st, ch);
            continue;
        }
        uint32_t started = how == FINISH_OK ? j->nsub : j->started;
        uint32_t written = how == FINISH_OK ? j->nsub : j->written;
        uint32_t ls = last_on(j, c, started), lw = last_on(j, c, written);
        if (ls != UINT32_MAX && !reached(word_load(ch->host_word), gen_of(j, ls)))
            word_store(ch->host_word, gen_of(j, ls));
        if (lw != UINT32_MAX) {
            ch->need_dev = gen_of(j, lw);
            ch->need_gen = j->abort_gen;
        }
        ch->need_host = word_load(ch->host_word);
    }
    chunks_give(st, j->chunk, j->k);
}

static void help_unlist(dv_stage_job *j)
{
    dv_staging *st = j->st;
    pthread_mutex_lock(&st->mu);
    if (j->helped) {
        if (j->help_prev != NULL)
            j->help_prev->help_next = j->help_next;
        else
            st->help = j->help_next;
        if (j->help_next != NULL)
            j->help_next->help_prev = j->help_prev;
        j->helped = false;
    }
    pthread_mutex_unlock(&st->mu);
}

/* One thread finishes: no more steps start, the ones under way end, then
 * the chunks go back. */
static void pump_finish(dv_stage_job *j, int how)
{
    dv_actor *a = j->st->a; /* j may be gone once pumped is set */
    bool no = false;
    if (!atomic_compare_exchange_strong(&j->finishing, &no, true))
        return; /* another thread does */
    atomic_store(&j->stop, true);
    /* Seq-cst against the stepper's increment and its load of stop: a
     * step either sees stop or is counted here. */
    backoff b = {0};
    while (atomic_load(&j->active) != 0)
        backoff_wait(&b);
    help_unlist(j);
    chunks_release(j, how);
    atomic_store_explicit(&j->pumped, true, memory_order_release);
    if (how == FINISH_OK) {
        /* The host's part is done, the device's last transfer (or only
         * its wait for this) is left: the actor looks for the end now
         * rather than when its polls, thinned out by the copy's length,
         * would. */
        atomic_store(&a->look_soon, true); /* then the kick (dv__inbox_park) */
        dv__inbox_kick(a->inbox);
    }
}

/*
 * The bytes of a step.  To the program this is the device's transfer: a
 * race of its own with it (a host read before the copy's wait) is the
 * stream-order checker's to report, as for the device's copies, so
 * ThreadSanitizer is not shown it (base/tsan.h); the words around it are
 * atomics it does see.  Then a full fence: large memcpys use streaming
 * stores, which a release store alone does not order before the word.
 */
static void data_copy(void *dst, const void *src, uint64_t len)
{
    dv__tsan_ignore_begin();
    memcpy(dst, src, len);
    dv__tsan_ignore_end();
    atomic_thread_fence(memory_order_seq_cst);
}

/* May sub-copy i's step start?  Only once the actor enqueued the copy
 * after the post (the gate), and the chunk ready for it. */
static bool step_ready(const dv_stage_job *j, uint32_t i, int state)
{
    const dv_stage_chunk *ch = j->chunk[i % j->k];
    if (state != DV_STAGE_ENQUEUED && atomic_load(&j->gate))
        return false;
    if (j->dir == DV_MSG_HTOD) /* the chunk's previous transfer is done */
        return i < j->k || reached(word_load(ch->dev_word), gen_of(j, i - j->k));
    /* from the device: this sub-copy's transfer is done */
    return state == DV_STAGE_ENQUEUED && reached(word_load(ch->dev_word), gen_of(j, i));
}

/* Does q's host range overlap [p, p + bytes)? */
static bool job_reaches(const dv_stage_job *q, const void *p, uint64_t bytes)
{
    const unsigned char *lo = p, *host = q->host;
    return host < lo + bytes && lo < host + q->bytes;
}

/* Is a copy from the device into host memory that j (to the device) reads,
 * on j's stream, begun before j, still to land?  The caller holds mu. */
static bool dtoh_pending(const dv_staging *st, const dv_stage_job *j)
{
    for (const dv_stage_job *q = st->live; q != NULL; q = q->live_next)
        if (q->dir == DV_MSG_DTOH && q->stream == j->stream && q->seq < j->seq &&
            job_reaches(q, j->host, j->bytes) &&
            !atomic_load_explicit(&q->pumped, memory_order_acquire))
            return true;
    return false;
}

/*
 * One step of j at most, on any thread.  Step i+k uses the chunk of step
 * i only once the device is done with it, which it is only after step i's
 * word: steps of one chunk never overlap, steps of different chunks do.
 */
static int pump(dv_stage_job *j)
{
    dv_staging *st = j->st;
    if (atomic_load_explicit(&j->pumped, memory_order_acquire))
        return PUMP_DONE;
    int state = atomic_load_explicit(&j->state, memory_order_acquire);
    if (state != DV_STAGE_POSTED &&
        j->abort_gen != atomic_load_explicit(&st->abort_gen, memory_order_acquire)) {
        pump_finish(j, FINISH_FORCED);
        return PUMP_DONE;
    }
    if (state == DV_STAGE_REFUSED) {
        pump_finish(j, FINISH_REFUSED);
        return PUMP_DONE;
    }
    if (atomic_load_explicit(&j->after_dtoh, memory_order_acquire)) {
        /* A copy from the device into this buffer, on this stream, before
         * this one: not a byte read until it landed. */
        pthread_mutex_lock(&st->mu);
        bool pending = dtoh_pending(st, j);
        pthread_mutex_unlock(&st->mu);
        if (pending)
            return PUMP_IDLE;
        atomic_store_explicit(&j->after_dtoh, false, memory_order_release);
    }
    uint32_t i = atomic_load(&j->claim);
    if (i == j->nsub) {
        /* The chunks' fate is the actor's to say; steps may be ending. */
        if (state == DV_STAGE_POSTED || atomic_load(&j->done) != j->nsub)
            return PUMP_IDLE;
        pump_finish(j, FINISH_OK);
        return PUMP_DONE;
    }
    if (!step_ready(j, i, state))
        return PUMP_IDLE;
    /* Counted first, then stop and the gate looked at again (seq-cst, as
     * their writers store them and then wait for active to fall): a step
     * either sees them or is waited for. */
    atomic_fetch_add(&j->active, 1);
    if (atomic_load(&j->stop) ||
        !step_ready(j, i, atomic_load_explicit(&j->state, memory_order_acquire)) ||
        !atomic_compare_exchange_strong(&j->claim, &i, i + 1)) {
        atomic_fetch_sub(&j->active, 1);
        return PUMP_PROGRESS; /* another thread took it, or it may not start: look again */
    }
    dv_stage_chunk *ch = j->chunk[i % j->k];
    uint64_t off = (uint64_t)i * j->sub, len = sub_len(j, i);
    if (j->dir == DV_MSG_HTOD)
        data_copy(ch->mem, j->host + off, len);
    else
        data_copy(j->host + off, ch->mem, len);
    word_store(ch->host_word, gen_of(j, i));
    atomic_fetch_add(&j->done, 1);
    atomic_fetch_sub(&j->active, 1);
    return PUMP_PROGRESS;
}

static int workers_ensure(dv_staging *st);

/* A copy of several chunks is listed for idle copy threads to help (they
 * are started at the first such copy). */
static void help_list(dv_stage_job *j)
{
    dv_staging *st = j->st;
    if (j->k < 2)
        return;
    if (workers_ensure(st) != DV_OK)
        return; /* no help: the owner does every step */
    pthread_mutex_lock(&st->mu);
    if (!j->helped && !atomic_load(&j->finishing)) {
        j->helped = true;
        j->help_prev = NULL;
        j->help_next = st->help;
        if (st->help != NULL)
            st->help->help_prev = j;
        st->help = j;
    }
    pthread_mutex_unlock(&st->mu);
    for (uint32_t i = 0; i < st->nworkers; i++) {
        pthread_mutex_lock(&st->workers[i].mu);
        pthread_cond_signal(&st->workers[i].cv);
        pthread_mutex_unlock(&st->workers[i].mu);
    }
}

/* The pump is done: wait until no copy thread still helps with j (it is
 * off the list, so none starts). */
static void helpers_gone(dv_stage_job *j)
{
    backoff b = {0};
    for (;;) {
        pthread_mutex_lock(&j->st->mu);
        uint32_t n = j->helpers;
        pthread_mutex_unlock(&j->st->mu);
        if (n == 0)
            return;
        backoff_wait(&b);
    }
}

enum { HELP_NONE, HELP_WAIT, HELP_DID };

/* An idle copy thread does steps of a copy on the help list: HELP_DID
 * when it did any, HELP_WAIT when a listed copy has steps left that are
 * not ready yet (look again soon), HELP_NONE when there is none. */
static int help_one(dv_staging *st)
{
    pthread_mutex_lock(&st->mu);
    dv_stage_job *j = st->help;
    while (j != NULL && atomic_load(&j->claim) == j->nsub)
        j = j->help_next;
    if (j != NULL)
        j->helpers++;
    pthread_mutex_unlock(&st->mu);
    if (j == NULL)
        return HELP_NONE;
    bool any = false;
    for (int r; (r = pump(j)) == PUMP_PROGRESS;)
        any = true;
    pthread_mutex_lock(&st->mu);
    j->helpers--;
    pthread_mutex_unlock(&st->mu);
    return any ? HELP_DID : HELP_WAIT;
}

/* ------------------------------------------------------------------------
 * Copy threads (the _async copies)
 * ------------------------------------------------------------------------ */

/* Every copy under way is listed, for the actor to stop at a fault, and
 * numbered: a copy to the device from pageable memory that a copy from
 * the device on the same stream writes, begun before it, reads it only
 * once that copy landed (stream order: the host's side of the one before
 * is done before the host's side of the one after reads). */
static void live_add(dv_stage_job *j)
{
    dv_staging *st = j->st;
    pthread_mutex_lock(&st->mu);
    j->seq = ++st->seq;
    if (j->dir == DV_MSG_HTOD)
        atomic_store_explicit(&j->after_dtoh, dtoh_pending(st, j), memory_order_relaxed);
    j->live_prev = NULL;
    j->live_next = st->live;
    if (st->live != NULL)
        st->live->live_prev = j;
    st->live = j;
    pthread_mutex_unlock(&st->mu);
}

bool dv__staging_reaches(dv_actor *a, const void *p, uint64_t bytes)
{
    dv_staging *st =
        atomic_load_explicit(&a->staging_state, memory_order_acquire) == DV_STAGING_READY
            ? a->staging
            : NULL;
    if (st == NULL)
        return false;
    bool in = false;
    pthread_mutex_lock(&st->mu);
    for (const dv_stage_job *q = st->live; q != NULL && !in; q = q->live_next)
        in = job_reaches(q, p, bytes);
    pthread_mutex_unlock(&st->mu);
    return in;
}

static void live_remove(dv_stage_job *j)
{
    dv_staging *st = j->st;
    pthread_mutex_lock(&st->mu);
    if (j->live_prev != NULL)
        j->live_prev->live_next = j->live_next;
    else
        st->live = j->live_next;
    if (j->live_next != NULL)
        j->live_next->live_prev = j->live_prev;
    pthread_mutex_unlock(&st->mu);
}

/* The host's side of j is over (its future is the actor's to answer):
 * once no copy thread helps with it any more, it goes. */
static void job_end(dv_stage_job *j)
{
    helpers_gone(j);
    live_remove(j);
}

/* An _async copy's thread: done with j when its pump is, then frees it. */
static bool job_settle(dv_stage_job *j)
{
    if (!atomic_load_explicit(&j->pumped, memory_order_acquire))
        return false;
    job_end(j);
    free(j);
    return true;
}

static void *worker_main(void *arg)
{
    dv_stage_worker *w = arg;
    dv_stage_job *mine = NULL;
    backoff b = {0};
    (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    for (;;) {
        pthread_mutex_lock(&w->mu);
        while (w->incoming == NULL && mine == NULL && !w->stop) {
            pthread_mutex_unlock(&w->mu);
            int h = help_one(w->st);
            if (h == HELP_WAIT)
                backoff_wait(&b);
            else if (h == HELP_DID)
                b.n = 0;
            pthread_mutex_lock(&w->mu);
            if (h == HELP_NONE && w->incoming == NULL && !w->stop)
                pthread_cond_wait(&w->cv, &w->mu);
        }
        while (w->incoming != NULL) {
            dv_stage_job *j = w->incoming;
            w->incoming = j->next;
            j->next = mine;
            mine = j;
        }
        bool stop = w->stop;
        pthread_mutex_unlock(&w->mu);
        if (mine == NULL && stop)
            break;
        bool progress = false;
        for (dv_stage_job **pp = &mine; *pp != NULL;) {
            dv_stage_job *j = *pp, *next = j->next;
            if (pump(j) == PUMP_PROGRESS)
                progress = true;
            if (job_settle(j)) { /* j is freed */
                *pp = next;
                atomic_fetch_sub_explicit(&w->njobs, 1, memory_order_relaxed);
                progress = true;
            } else {
                pp = &j->next;
            }
        }
        if (!progress)
            progress = help_one(w->st) == HELP_DID;
        if (progress)
            b.n = 0;
        else
            backoff_wait(&b);
    }
    return NULL;
}

static int workers_start(dv_staging *st)
{
    dv_actor *a = st->a;
    uint32_t n = a->cfg.copy_threads ? a->cfg.copy_threads : DEFAULT_COPY_THREADS;
    if (n > MAX_COPY_THREADS)
        n = MAX_COPY_THREADS;
    dv_stage_worker *w = calloc(n, sizeof(*w));
    if (w == NULL)
        return dv__fail(DV_ENOMEM, "staged copy", "out of host memory for copy threads");
    uint32_t started = 0;
    for (; started < n; started++) {
        w[started].st = st;
        pthread_mutex_init(&w[started].mu, NULL);
        pthread_cond_init(&w[started].cv, NULL);
        if (pthread_create(&w[started].thread, NULL, worker_main, &w[started]) != 0) {
            pthread_mutex_destroy(&w[started].mu);
            pthread_cond_destroy(&w[started].cv);
            break;
        }
    }
    if (started == 0) {
        free(w);
        return dv__fail(DV_ENOMEM, "staged copy", "cannot start a copy thread");
    }
    st->nworkers = started;
    /* Release: a poster that sees the workers sees them set up. */
    __atomic_store_n(&st->workers, w, __ATOMIC_RELEASE);
    return DV_OK;
}

/* The copy threads start at the first copy that wants them. */
static int workers_ensure(dv_staging *st)
{
    if (__atomic_load_n(&st->workers, __ATOMIC_ACQUIRE) != NULL)
        return DV_OK;
    pthread_mutex_lock(&st->mu);
    int rc = st->workers == NULL ? workers_start(st) : DV_OK;
    pthread_mutex_unlock(&st->mu);
    return rc;
}

static int worker_submit(dv_staging *st, dv_stage_job *j)
{
    int rc = workers_ensure(st);
    if (rc != DV_OK)
        return rc;
    /* The least busy of two (the next in turn and the one after). */
    uint32_t t = atomic_fetch_add_explicit(&st->next_worker, 1, memory_order_relaxed);
    dv_stage_worker *w = &st->workers[t % st->nworkers];
    dv_stage_worker *o = &st->workers[(t + 1) % st->nworkers];
    if (atomic_load_explicit(&o->njobs, memory_order_relaxed) <
        atomic_load_explicit(&w->njobs, memory_order_relaxed))
        w = o;
    atomic_fetch_add_explicit(&w->njobs, 1, memory_order_relaxed);
    help_list(j); /* before the owner has it: it may settle and free it */
    pthread_mutex_lock(&w->mu);
    j->next = w->incoming;
    w->incoming = j;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return DV_OK;
}

void dv__staging_stop(dv_actor *a)
{
    dv_staging *st = a->staging;
    if (st == NULL || st->workers == NULL)
        return;
    for (uint32_t i = 0; i < st->nworkers; i++) {
        pthread_mutex_lock(&st->workers[i].mu);
        st->workers[i].stop = true;
        pthread_cond_signal(&st->workers[i].cv);
        pthread_mutex_unlock(&st->workers[i].mu);
    }
    for (uint32_t i = 0; i < st->nworkers; i++) {
        pthread_join(st->workers[i].thread, NULL);
        pthread_mutex_destroy(&st->workers[i].mu);
        pthread_cond_destroy(&st->workers[i].cv);
    }
    free(st->workers);
    st->workers = NULL;
    st->nworkers = 0;
}

void dv__staging_free(dv_actor *a)
{
    dv_staging *st = a->staging;
    if (st == NULL)
        return;
    dv__staging_stop(a);
    pthread_mutex_destroy(&st->mu);
    pthread_cond_destroy(&st->cv);
    free(st->chunks);
    free(st);
    a->staging = NULL; /* the region goes with the host memory (dv__host_fini) */
}

/* ------------------------------------------------------------------------
 * The poster's side
 * ------------------------------------------------------------------------ */

/* The staging in *out, made at the first use (a round trip), or NULL
 * where it is off.  An error only when making it met a fault of the
 * context (the copy fails with it, as it would have). */
static int staging_get(dv_actor *a, dv_staging **out)
{
    int s = atomic_load_explicit(&a->staging_state, memory_order_acquire);
    if (s == DV_STAGING_NONE && dv__serving == NULL) {
        dv_msg m = {.type = DV_MSG_STAGING_OPEN};
        dv_future own;
        dv_error_detail saved = *dv_last_error();
        int rc = dv__actor_call(a, &m, &own);
        if (rc == DV_ECONTEXT_LOST || rc == DV_EDEVICE_LOST)
            return rc;
        *dv__detail() = saved; /* other refusals show in the copy's own post */
        s = atomic_load_explicit(&a->staging_state, memory_order_acquire);
    }
    *out = s == DV_STAGING_READY ? a->staging : NULL;
    return DV_OK;
}

int dv__staged_copy(dv_actor *a, uint8_t dir, dv_ref ref, uint64_t off, void *host, uint64_t bytes,
                    dv_stream stream, dv_future *f)
{
    const char *op = dv__msg_name(dir);
    dv_staging *st;
    /* The blocking form waits for the copy: not on an actor's thread. */
    int rc = f == NULL ? dv__no_wait(op) : DV_OK;
    if (rc != DV_OK)
        return rc;
    rc = staging_get(a, &st);
    if (rc != DV_OK)
        return f != NULL && dv__future_arm(f, op) == DV_OK ? (dv__future_complete(f, rc), rc) : rc;
    if (st == NULL)
        return DV_ENOTSUP;
    bool serving = dv__serving != NULL;
    dv_future own;
    dv_future *reply = f;
    if (f == NULL) {
        dv_future_init(&own, 0);
        reply = &own;
    }
    /* Armed now: a future in flight is refused before anything is taken. */
    if ((rc = dv__future_arm(reply, op)) != DV_OK)
        return rc;
    dv_stage_job stack_job, *j = f != NULL ? calloc(1, sizeof(*j)) : &stack_job;
    if (j == NULL) {
        rc = dv__fail(DV_ENOMEM, op, "%s: out of host memory", op);
        dv__future_complete(reply, rc);
        return rc;
    }
    if (f == NULL)
        memset(j, 0, sizeof(*j));
    j->st = st;
    j->dir = dir;
    j->stream = (uint16_t)stream;
    j->host = host;
    j->bytes = bytes;
    j->sub = sub_for(st, bytes);
    j->nsub = (uint32_t)((bytes + j->sub - 1) / j->sub);
    if ((uint64_t)j->nsub * j->sub < bytes) /* more sub-copies than a u32 holds */
        rc = dv__fail(DV_EINVAL, op, "%s: %llu bytes", op, (unsigned long long)bytes);
    uint32_t want = j->nsub < DV_STAGE_K ? j->nsub : DV_STAGE_K;
    if (rc == DV_OK)
        rc = chunks_take(st, j->stream, want, !serving, op, j->chunk, &j->k);
    if (rc != DV_OK) {
        dv__future_complete(reply, rc);
        if (f != NULL)
            free(j);
        return rc;
    }
    for (uint32_t c = 0; c < j->k; c++) {
        j->g0[c] = j->chunk[c]->gen;
        j->chunk[c]->gen += (j->nsub - c + j->k - 1) / j->k;
    }
    live_add(j);
    /* To the device: the first step is filled before the post, copy
     * threads filling the next ones meanwhile; the stream waits for no
     * step filled by the post (a copy of one step never waits), and the
     * transfer of each other step starts once it is filled.  Only for a
     * copy the actor will take as far as can be told here (a refused one
     * reads nothing of the caller's memory; with the checker on, which may
     * refuse the host access itself, none is filled before the actor took
     * it), and not on an actor's thread (a copy thread fills them all
     * there, after). */
    dv_ref_info info;
    if (dir == DV_MSG_HTOD && !serving && !a->cfg.check_order &&
        dv__ref_peek(ref, &info) == DV_OK && dv__actor_of_ref(ref) == a && off <= info.requested &&
        bytes <= info.requested - off) {
        help_list(j);
        backoff b = {0};
        while (!reached(word_load(j->chunk[0]->host_word), gen_of(j, 0)))
            if (pump(j) == PUMP_IDLE)
                backoff_wait(&b);
    }
    /* The gate: no step starts from here until the actor enqueued the
     * copy, and the ones under way end first; then every step claimed is
     * filled, from the first on. */
    atomic_store(&j->gate, true);
    backoff b = {0};
    while (atomic_load(&j->active) != 0)
        backoff_wait(&b);
    j->prefilled = dir == DV_MSG_HTOD ? atomic_load(&j->claim) : 0;
    dv_msg m = {.type = dir == DV_MSG_HTOD ? DV_MSG_STAGED_HTOD : DV_MSG_STAGED_DTOH,
                .stream = (uint16_t)stream,
                .u.staged = {.dev = ref, .offset = off, .job = j}};
    rc = dv__actor_post_armed(a, &m, reply); /* failed, reply is complete */
    if (rc != DV_OK) {
        /* Nothing was enqueued: the chunks are as they were. */
        j->abort_gen = atomic_load(&st->abort_gen);
        atomic_store_explicit(&j->state, DV_STAGE_REFUSED, memory_order_relaxed);
        pump_finish(j, FINISH_REFUSED);
        job_end(j);
        if (f != NULL)
            free(j);
        return rc;
    }
    if (f != NULL) {
        if (worker_submit(st, j) != DV_OK) {
            /* No thread to move the data: this one does (the copy is
             * posted; it must be served). */
            while (!job_settle(j))
                if (pump(j) == PUMP_IDLE)
                    backoff_wait(&b);
        }
        return DV_OK;
    }
    if (dir == DV_MSG_DTOH)
        help_list(j);
    b.n = 0;
    for (int r; (r = pump(j)) != PUMP_DONE;) {
        if (r == PUMP_IDLE)
            backoff_wait(&b);
        else
            b.n = 0;
    }
    job_end(j);
    return dv_future_wait(&own);
}

/* ------------------------------------------------------------------------
 * The actor's side
 * ------------------------------------------------------------------------ */

/* Device addresses of the words in the current context. */
static int words_locate(dv_actor *a, dv_staging *st)
{
    for (uint32_t i = 0; i < st->nchunks; i++) {
        dv_stage_chunk *c = &st->chunks[i];
        int rc = dv__drv_host_dptr(a->env.ctx, c->dev_word, &c->dev_word_d);
        if (rc == DV_OK)
            rc = dv__drv_host_dptr(a->env.ctx, c->host_word, &c->host_word_d);
        if (rc != DV_OK)
            return rc;
    }
    return DV_OK;
}

static int staging_make(dv_actor *a)
{
    uint64_t chunk = a->cfg.staging_chunk_bytes ? a->cfg.staging_chunk_bytes : DEFAULT_CHUNK_BYTES;
    uint64_t total = a->cfg.staging_bytes ? a->cfg.staging_bytes : DEFAULT_STAGING_BYTES;
    chunk = (chunk + DV_HOST_PAGE - 1) & ~(uint64_t)(DV_HOST_PAGE - 1);
    uint64_t n = total / chunk;
    if (n == 1)
        n = 2; /* two at least: one stream's copies leave one to the others */
    if (chunk < (UINT64_C(64) << 10) || n == 0 || n > 4096)
        return dv__fail(DV_EINVAL, "staging",
                        "staging: %llu bytes in chunks of %llu: need 1 to 4096 chunks of at "
                        "least 64 KiB",
                        (unsigned long long)total, (unsigned long long)chunk);
    uint64_t words = (2 * n * WORD_STRIDE * 4 + DV_HOST_PAGE - 1) & ~(uint64_t)(DV_HOST_PAGE - 1);
    dv_staging *st = calloc(1, sizeof(*st));
    if (st == NULL || (st->chunks = calloc(n, sizeof(*st->chunks))) == NULL) {
        free(st);
        return dv__fail(DV_ENOMEM, "staging", "out of host memory");
    }
    int rc = dv__host_region_new(a, n * chunk + words, DV_HR_STAGING, &st->region);
    if (rc != DV_OK) {
        free(st->chunks);
        free(st);
        return rc;
    }
    st->a = a;
    st->chunk_bytes = chunk;
    st->nchunks = (uint32_t)n;
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->cv, NULL);
    unsigned char *base = (unsigned char *)st->region->start;
    uint32_t *w = (uint32_t *)(base + n * chunk);
    for (uint32_t i = 0; i < n; i++) {
        dv_stage_chunk *c = &st->chunks[i];
        c->mem = base + (uint64_t)i * chunk;
        c->dev_word = w + (2 * i) * WORD_STRIDE;
        c->host_word = w + (2 * i + 1) * WORD_STRIDE;
        c->next = i + 1 < n ? &st->chunks[i + 1] : NULL;
    }
    st->head = &st->chunks[0];
    st->tail = &st->chunks[n - 1];
    if ((rc = words_locate(a, st)) != DV_OK) {
        dv_error_detail saved = *dv_last_error();
        dv__host_region_release(a, st->region);
        pthread_mutex_destroy(&st->mu);
        pthread_cond_destroy(&st->cv);
        free(st->chunks);
        free(st);
        *dv__detail() = saved;
        return rc;
    }
    a->staging = st;
    return DV_OK;
}

void dv__handle_staging_open(dv_actor *a, const dv_envelope *e)
{
    DV_ASSERT_ACTOR(a);
    int rc = DV_OK;
    if (atomic_load_explicit(&a->staging_state, memory_order_relaxed) == DV_STAGING_NONE) {
        /* Failed, copies with pageable memory go to the driver directly
         * (direct_copies in the statistics) until a reset tries again. */
        rc = staging_make(a);
        /* Release: a poster that sees READY sees the staging made. */
        atomic_store_explicit(&a->staging_state, rc == DV_OK ? DV_STAGING_READY : DV_STAGING_FAILED,
                              memory_order_release);
        if (rc == DV_ECONTEXT_LOST) { /* the context's fault, not the staging's */
            dv__on_fault(a, rc, 0, e);
            rc = dv_last_error()->status;
        } else {
            rc = DV_OK;
        }
    }
    dv__reply(a, e, rc);
}

void dv__staging_abort(dv_actor *a)
{
    dv_staging *st = a->staging;
    if (st == NULL)
        return;
    uint32_t old = atomic_fetch_add_explicit(&st->abort_gen, 1, memory_order_acq_rel);
    /* The copies the actor took in that context: no step starts any more,
     * and the ones under way end, before their futures are answered (the
     * callers may then free their buffers).  Copies not taken yet (posted,
     * or being filled before the post) go on. */
    pthread_mutex_lock(&st->mu);
    for (dv_stage_job *j = st->live; j != NULL; j = j->live_next) {
        if (atomic_load_explicit(&j->state, memory_order_relaxed) == DV_STAGE_POSTED ||
            j->abort_gen != old)
            continue;
        atomic_store(&j->stop, true);
        backoff b = {0};
        while (atomic_load(&j->active) != 0)
            backoff_wait(&b);
    }
    pthread_mutex_unlock(&st->mu);
}

int dv__staging_repin(dv_actor *a)
{
    dv_staging *st = a->staging;
    if (st == NULL) { /* never made, or failed to be: the next copy tries */
        atomic_store_explicit(&a->staging_state, DV_STAGING_NONE, memory_order_release);
        return DV_OK;
    }
    int rc = st->region->pinned ? words_locate(a, st) : DV_ENOTSUP;
    /* Off, posters copy directly from now on; chunks held by copies of
     * the old context come back through their pumps. */
    atomic_store_explicit(&a->staging_state, rc == DV_OK ? DV_STAGING_READY : DV_STAGING_FAILED,
                          memory_order_release);
    return rc == DV_ECONTEXT_LOST ? rc : DV_OK;
}

typedef struct staged_call {
    const dv_ref_slot *slot;
    dv_stage_job *j;
    uint64_t offset;
    bool enqueued; /* every step: the job is the pump's now */
} staged_call;

/* The stream's wait before sub-copy i's transfer, if it has one: to the
 * device, its fill (unless filled before the post); from the device, the
 * emptying of the chunk's previous use. */
static bool wait_before(const dv_stage_job *j, uint32_t i, dv_drv_value_op *op)
{
    const dv_stage_chunk *c = j->chunk[i % j->k];
    if (j->dir == DV_MSG_HTOD ? i < j->prefilled : i < j->k)
        return false;
    *op = (dv_drv_value_op){c->host_word_d, gen_of(j, j->dir == DV_MSG_HTOD ? i : i - j->k), true};
    return true;
}

/*
 * Two calls per sub-copy: its transfer, then one batch of the word that
 * says it is done and the wait before the next one (and, after the last
 * transfer from the device, the waits for every chunk's emptying).
 * started and written say how far it got, for a refusal part way.
 */
static int enqueue_staged(dv_recorder *r, void *arg)
{
    staged_call *sc = arg;
    dv_stage_job *j = sc->j;
    dv_drv_stream *s = r->a->env.streams[r->stream];
    uint64_t dev = sc->slot->block.ptr + sc->offset, chunk = j->sub;
    dv_drv_value_op ops[1 + DV_STAGE_K];
    int rc = DV_OK;
    j->started = 1;
    if (wait_before(j, 0, &ops[0]))
        rc = dv__drv_value_ops(s, ops, 1);
    for (uint32_t i = 0; i < j->nsub && rc == DV_OK; i++) {
        dv_stage_chunk *c = j->chunk[i % j->k];
        uint64_t off = (uint64_t)i * chunk, len = sub_len(j, i);
        rc = j->dir == DV_MSG_HTOD ? dv__drv_memcpy_htod(s, dev + off, c->mem, len)
                                   : dv__drv_memcpy_dtoh(s, c->mem, dev + off, len);
        if (rc != DV_OK)
            break;
        /* A transfer is on the stream: refused after this, the copy is
         * still recorded as the block's use there (its first steps run),
         * so that what uses the block next, on any stream, comes after
         * them. */
        r->partial = true;
        unsigned n = 0;
        ops[n++] = (dv_drv_value_op){c->dev_word_d, gen_of(j, i), false};
        bool next = i + 1 < j->nsub && wait_before(j, i + 1, &ops[n]);
        n += next;
        for (uint32_t k = 0; j->dir == DV_MSG_DTOH && i + 1 == j->nsub && k < j->k; k++)
            ops[n++] = (dv_drv_value_op){j->chunk[k]->host_word_d,
                                         gen_of(j, last_on(j, k, j->nsub)), true};
        if ((rc = dv__drv_value_ops(s, ops, n)) == DV_OK) {
            j->written = i + 1;
            j->started = i + 1 < j->nsub ? i + 2 : j->nsub;
        }
    }
    /* Published now, not when the handler returns: the recorder may wait
     * for the stream next (synchronous mode), which waits for the pump,
     * which moves only once it sees the steps are enqueued. */
    if (rc == DV_OK) {
        sc->enqueued = true;
        atomic_store_explicit(&j->state, DV_STAGE_ENQUEUED, memory_order_release);
    }
    return rc;
}

/*
 * Once the copy's steps are enqueued (the state published by
 * enqueue_staged) the job is the pump's: the actor reads nothing of it
 * after that.  Its future is the caller's, answered here when refused,
 * else when the stream gets past the copy (the host is done by then).
 */
void dv__handle_staged(dv_actor *a, const dv_envelope *e)
{
    DV_ASSERT_ACTOR(a);
    const dv_msg_staged *m = &e->m.u.staged;
    dv_stage_job *j = m->job;
    bool htod = j->dir == DV_MSG_HTOD;
    uint64_t bytes = j->bytes;
    const void *host = j->host; /* j may be gone once enqueued */
    staged_call sc = {.j = j, .offset = m->offset};
    dv_recorder r;
    j->abort_gen = atomic_load_explicit(&j->st->abort_gen, memory_order_relaxed);
    int rc = dv__rec_begin(&r, a, e, htod ? DV_CHK_HTOD : DV_CHK_DTOH, NULL);
    if (rc == DV_OK && (sc.slot = dv__rec_use(&r, m->dev, m->offset, bytes,
                                              htod ? DV_ACCESS_WRITE : DV_ACCESS_READ)) == NULL)
        rc = dv_last_error()->status;
    bool enqueued = false;
    if (rc == DV_OK) {
        dv__rec_host(&r, (uintptr_t)j->host, bytes, htod ? DV_READ : DV_WRITE);
        /* A staged copy to the device reads its buffer from the post on
         * (its first chunks are filled before anything on its stream is
         * waited for): a host read, ordered by what the poster knew.  One
         * from the device writes it once its transfers land, in stream
         * order (its stream waits for the chunks to be emptied). */
        if (htod && a->chk != NULL && r.chk.n > 0 && r.chk.acc[r.chk.n - 1].host)
            r.chk.acc[r.chk.n - 1].staged = true;
        rc = dv__rec_run(&r, enqueue_staged, &sc);
        enqueued = sc.enqueued;
    }
    if (!enqueued) {
        dv__staged_refuse(j); /* its steps never start: the caller may go */
        dv__reply(a, e, rc);
        return;
    }
    /* Page-locked memory the host range runs into (it reaches past such
     * memory, or it would not be staged) is held until the stream gets
     * past the copy, as for a copy the device did with it. */
    dv__host_used(a, host, bytes, r.stream);
    dv__stat_inc(&a->st_copies);
    dv__stat_inc(&a->st_staged);
    atomic_store_explicit(&a->st_staged_bytes,
                          atomic_load_explicit(&a->st_staged_bytes, memory_order_relaxed) + bytes,
                          memory_order_relaxed);
    if (rc == DV_OK && dv__complete_later(a, r.stream, e, sc.slot->block.tag.name) == DV_OK) {
        dv__pending_host_bound(a, r.stream);
        return;
    }
    /* Enqueued, then failed (a fault after it, stopped by the rebuild; or
     * no memory to track its completion: then wait for its stream, the
     * pumps going on meanwhile, before answering). */
    if (rc == DV_OK) {
        (void)dv__drv_stream_sync(a->env.streams[r.stream]);
        rc = dv__fail(DV_ENOMEM, "staged copy", "out of host memory for a completion");
    }
    dv__reply(a, e, rc);
}

void dv__staged_refuse(dv_stage_job *j)
{
    /* Release: the pump reads started and written after it. */
    atomic_store_explicit(&j->state, DV_STAGE_REFUSED, memory_order_release);
}
