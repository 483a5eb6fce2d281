/*
 * The order across threads (devactor.h, Order): an operation whose post
 * returned before another thread's post began is ordered before it on
 * the device whenever the two name the same handle or the same stream.
 *
 * Thread A posts a memset of a block and, without waiting for it, hands
 * the block to thread B under a mutex; B reads the block back.  B must
 * see A's value every time:
 *
 *   shared handle   B copies the block to the host on another stream;
 *   shared stream   B's kernel, on A's stream, copies the block through a
 *                   raw pointer into a block of its own, which it reads
 *                   back: only the stream orders it after A's memset.
 *
 * On the sim with random delays on every stream operation, the actor
 * taking B's message before A's shows up as a stale read.  The test makes
 * that as likely as it can: B's ring is registered before A's (so a look
 * at the rings meets B's first), and every HOLD_EVERY-th round A first
 * posts a task that keeps the actor's thread busy for HOLD_US, so that
 * A's memset and B's read arrive in one look.  A control run on an actor
 * with the order turned off must then see stale reads: the test can fail.
 * DV_ORDER_TRIES sets the number of hand-overs per case (default 100000,
 * 20000 under ThreadSanitizer).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devactor.h"
#include "devactor_testing.h"
#include "tap.h"

#ifndef ORDER_ON_CUDA
#define ORDER_ON_CUDA 0
#endif
/* Under ThreadSanitizer every hand-over costs a hundred times more: fewer
 * of them by default (the control still sees stale reads in 2,000). */
#if defined(__SANITIZE_THREAD__)
#define ORDER_TRIES 20000u
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ORDER_TRIES 20000u
#endif
#endif
#ifndef ORDER_TRIES
#define ORDER_TRIES 100000u
#endif
#define BYTES      4096u
#define HOLD_EVERY 4
#define HOLD_US    100

typedef struct handover {
    dv_actor *a;
    dv_kernel *copy;
    bool same_stream; /* the case: B on A's stream, through a raw pointer */
    unsigned tries;
    pthread_mutex_t mu; /* the hand-over */
    atomic_uint round;  /* the round A handed over */
    atomic_uint served; /* the round B finished */
    dv_ref block;       /* what A hands over (under mu) */
    dv_stream stream;
    uint8_t value;
    atomic_bool b_ready; /* B has posted once: its ring is registered */
    /* B's results. */
    unsigned stale, failed;
    char first[200];
    /* A's. */
    int a_failed;
} handover;

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* A task that keeps the actor's thread busy (tasks run on it). */
static int hold(const dv_task_ctx *ctx, void *user)
{
    (void)ctx;
    (void)user;
    uint64_t end = now_us() + HOLD_US;
    while (now_us() < end)
        ;
    return DV_OK;
}

static uint64_t ptr_of(dv_ref r)
{
    dv_ref_info info;
    return dv_ref_access(r, &info) == DV_OK ? info.ptr : 0;
}

static void *thread_b(void *arg)
{
    handover *h = arg;
    uint8_t back[BYTES];
    dv_ref mine = DV_REF_NULL;
    if (h->same_stream && dv_alloc(h->a, BYTES, 0, "b's", &mine) != DV_OK)
        h->failed++;
    if (dv_flush(h->a) != DV_OK)
        h->failed++;
    atomic_store(&h->b_ready, true);
    for (unsigned i = 1; i <= h->tries; i++) {
        while (atomic_load(&h->round) != i)
            sched_yield();
        pthread_mutex_lock(&h->mu);
        dv_ref block = h->block;
        dv_stream s = h->stream;
        uint8_t want = h->value;
        pthread_mutex_unlock(&h->mu);

        int rc;
        if (!h->same_stream) {
            rc = dv_copy_dtoh(h->a, back, block, 0, BYTES, (s + 1) % 3);
        } else {
            dv_arg args[] = {dv_arg_ref(mine, DV_WRITE, 0),
                             dv_arg_ptr_access(ptr_of(block), DV_READ), dv_arg_u64(BYTES)};
            rc = dv_launch(h->a, h->copy, (dv_dim3){1, 1, 1}, (dv_dim3){64, 1, 1}, 0, s, args, 3);
            if (rc == DV_OK)
                rc = dv_copy_dtoh(h->a, back, mine, 0, BYTES, (s + 2) % 3);
        }
        if (rc != DV_OK) {
            if (h->failed++ == 0)
                snprintf(h->first, sizeof(h->first), "%.190s", dv_last_error()->message);
        } else if (back[0] != want || back[BYTES - 1] != want) {
            if (h->stale++ == 0)
                snprintf(h->first, sizeof(h->first), "round %u read %#x, A wrote %#x", i, back[0],
                         want);
        }
        atomic_store(&h->served, i);
    }
    if (mine.bits != 0)
        dv_ref_release(mine);
    return NULL;
}

/* Thread A: write, hand over at once, wait for B, then for the write. */
static void *thread_a(void *arg)
{
    handover *h = arg;
    dv_ref blocks[2];
    int failed = 0;
    for (int k = 0; k < 2; k++)
        failed += dv_alloc(h->a, BYTES, (dv_stream)k, "a's", &blocks[k]) != DV_OK;
    uint64_t rng = 0x9E3779B97F4A7C15u;
    for (unsigned i = 1; i <= h->tries; i++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        dv_ref block = blocks[i & 1];
        dv_stream s = (dv_stream)(rng % 3);
        uint8_t value = (uint8_t)(i * 37 + 1);
        dv_future f, fh;
        if (i % HOLD_EVERY == 0) {
            dv_future_init(&fh, 0);
            failed +=
                dv_task_async(h->a, hold, NULL, (dv_stream)((s + 1) % 3), NULL, 0, &fh) != DV_OK;
        }
        dv_future_init(&f, 0);
        failed += dv_memset_async(h->a, block, 0, value, BYTES, s, &f) != DV_OK;
        /* Hand the block over at once: the post returned, nothing waited. */
        pthread_mutex_lock(&h->mu);
        h->block = block;
        h->stream = s;
        h->value = value;
        pthread_mutex_unlock(&h->mu);
        atomic_store(&h->round, i);
        while (atomic_load(&h->served) != i)
            sched_yield();
        failed += dv_future_wait(&f) != DV_OK;
        if (i % HOLD_EVERY == 0)
            failed += dv_future_wait(&fh) != DV_OK;
    }
    for (int k = 0; k < 2; k++)
        dv_ref_release(blocks[k]);
    h->a_failed = failed;
    return NULL;
}

/* One case: the number of stale reads. */
static unsigned run_case(dv_actor *a, dv_kernel *copy, bool same_stream, unsigned tries,
                         bool report)
{
    handover h = {.a = a, .copy = copy, .same_stream = same_stream, .tries = tries};
    pthread_mutex_init(&h.mu, NULL);
    pthread_t ta, tb;
    pthread_create(&tb, NULL, thread_b, &h);
    while (!atomic_load(&h.b_ready))
        sched_yield();
    pthread_create(&ta, NULL, thread_a, &h);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    const char *what = same_stream ? "a shared stream, different handles" : "a shared handle";
    if (report) {
        is_int(h.a_failed + (int)h.failed, 0, "%s: every operation succeeded%s%s", what,
               h.failed ? ": " : "", h.failed ? h.first : "");
        is_int((int)h.stale, 0, "%s: %u hand-overs, 0 stale reads%s%s", what, tries,
               h.stale ? ": " : "", h.failed ? "" : h.first);
    }
    pthread_mutex_destroy(&h.mu);
    return h.stale;
}

static dv_actor *make_actor(bool ordered)
{
    dv_actor_config cfg;
    dv_actor *a = NULL;
    dv_actor_config_init(&cfg);
    cfg.backend = ORDER_ON_CUDA ? DV_BACKEND_CUDA : DV_BACKEND_SIM;
    cfg.streams = 3;
    cfg.permissive = true; /* the shared-stream case reads through a raw pointer */
    cfg.sim_memory_bytes = 64 << 20;
    cfg.sim_seed = 77;
    cfg.sim_delay_max_us = 5;
    dv__order_disable(!ordered);
    int rc = dv_actor_create(&cfg, &a);
    dv__order_disable(false);
    if (ORDER_ON_CUDA && rc == DV_ENODEVICE)
        skip_all("%s", dv_last_error()->message);
    return rc == DV_OK ? a : NULL;
}

int main(void)
{
    unsigned tries = ORDER_TRIES;
    const char *env = getenv("DV_ORDER_TRIES");
    if (env != NULL && atoi(env) > 0)
        tries = (unsigned)atoi(env);

    dv_actor *a = make_actor(true);
    plan(9);
    ok(a != NULL, "an actor (%s; the sim with random delays)",
       a ? dv_actor_backend_name(a) : dv_last_error()->message);
    if (a == NULL)
        return tap_done();
    dv_kernel *copy = NULL;
    is_status(dv_kernel_get(a, NULL, 0, "copy", &copy), DV_OK, "the copy kernel");
    run_case(a, copy, false, tries, true);
    run_case(a, copy, true, tries, true);
    dv_actor_stats st;
    dv_actor_stats_get(a, &st);
    ok(st.refs_alive == 0 && st.bytes_outstanding == 0, "clean: %llu handles, %llu bytes",
       (unsigned long long)st.refs_alive, (unsigned long long)st.bytes_outstanding);
    dv_actor_destroy(a);

    /* The control: the same hand-over without the order across threads.
     * On the sim only: it shows that this test can see a stale read. */
    if (ORDER_ON_CUDA) {
        skip("the control runs on the simulated device");
        skip("the control runs on the simulated device");
        return tap_done();
    }
    dv_actor *off = make_actor(false);
    dv_kernel *copy_off = NULL;
    ok(off != NULL && dv_kernel_get(off, NULL, 0, "copy", &copy_off) == DV_OK,
       "an actor with the order off");
    /* On a loaded machine several runs may meet no stale read by chance:
     * up to twenty runs, none begun after 60 s (a sanitizer's build runs
     * slowly), and one stale read is enough. */
    unsigned ctries = tries < 2000 ? tries : 2000, stale = 0, runs = 0;
    struct timespec c0, c1;
    clock_gettime(CLOCK_MONOTONIC, &c0);
    c1 = c0;
    while (off != NULL && stale == 0 && runs < 20 && c1.tv_sec - c0.tv_sec < 60) {
        stale = run_case(off, copy_off, false, ctries, false);
        runs++;
        clock_gettime(CLOCK_MONOTONIC, &c1);
    }
    ok(stale > 0, "control: with the order off, %u of %u hand-overs read stale data (run %u)",
       stale, ctries, runs);
    dv_actor_destroy(off);
    return tap_done();
}
