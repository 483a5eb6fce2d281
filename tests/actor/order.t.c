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
 * taking B's message before A's shows up as a stale read.  DV_ORDER_TRIES
 * sets the number of hand-overs per case (default 100000).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "devactor.h"
#include "tap.h"

#ifndef ORDER_ON_CUDA
#define ORDER_ON_CUDA 0
#endif
#define BYTES 4096u

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
    /* B's results. */
    unsigned stale, failed;
    char first[200];
} handover;

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

static void run_case(dv_actor *a, dv_kernel *copy, bool same_stream, unsigned tries)
{
    handover h = {.a = a, .copy = copy, .same_stream = same_stream, .tries = tries};
    pthread_mutex_init(&h.mu, NULL);
    pthread_t tb;
    pthread_create(&tb, NULL, thread_b, &h);

    dv_ref blocks[2];
    int failed = 0;
    for (int k = 0; k < 2; k++)
        failed += dv_alloc(a, BYTES, (dv_stream)k, "a's", &blocks[k]) != DV_OK;
    uint64_t rng = 0x9E3779B97F4A7C15u;
    for (unsigned i = 1; i <= tries; i++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        dv_ref block = blocks[i & 1];
        dv_stream s = (dv_stream)(rng % 3);
        uint8_t value = (uint8_t)(i * 37 + 1);
        dv_future f;
        dv_future_init(&f, 0);
        failed += dv_memset_async(a, block, 0, value, BYTES, s, &f) != DV_OK;
        /* Hand the block over at once: the post returned, nothing waited. */
        pthread_mutex_lock(&h.mu);
        h.block = block;
        h.stream = s;
        h.value = value;
        pthread_mutex_unlock(&h.mu);
        atomic_store(&h.round, i);
        while (atomic_load(&h.served) != i)
            sched_yield();
        failed += dv_future_wait(&f) != DV_OK;
    }
    pthread_join(tb, NULL);
    for (int k = 0; k < 2; k++)
        dv_ref_release(blocks[k]);
    const char *what = same_stream ? "a shared stream, different handles" : "a shared handle";
    is_int(failed + (int)h.failed, 0, "%s: every operation succeeded%s%s", what,
           h.failed ? ": " : "", h.failed ? h.first : "");
    is_int((int)h.stale, 0, "%s: %u hand-overs, 0 stale reads%s%s", what, tries,
           h.stale ? ": " : "", h.failed ? "" : h.first);
    pthread_mutex_destroy(&h.mu);
}

int main(void)
{
    unsigned tries = 100000;
    const char *env = getenv("DV_ORDER_TRIES");
    if (env != NULL && atoi(env) > 0)
        tries = (unsigned)atoi(env);

    dv_actor_config cfg;
    dv_actor *a = NULL;
    dv_actor_config_init(&cfg);
    cfg.backend = ORDER_ON_CUDA ? DV_BACKEND_CUDA : DV_BACKEND_SIM;
    cfg.streams = 3;
    cfg.permissive = true; /* the shared-stream case reads through a raw pointer */
    cfg.sim_memory_bytes = 64 << 20;
    cfg.sim_seed = 77;
    cfg.sim_delay_max_us = 5;
    int rc = dv_actor_create(&cfg, &a);
    if (ORDER_ON_CUDA && rc == DV_ENODEVICE)
        skip_all("%s", dv_last_error()->message);
    plan(7);
    is_status(rc, DV_OK, "an actor (%s; the sim with random delays)",
              a ? dv_actor_backend_name(a) : "none");
    dv_kernel *copy = NULL;
    is_status(dv_kernel_get(a, NULL, 0, "copy", &copy), DV_OK, "the copy kernel");
    run_case(a, copy, false, tries);
    run_case(a, copy, true, tries);
    dv_actor_stats st;
    dv_actor_stats_get(a, &st);
    ok(st.refs_alive == 0 && st.bytes_outstanding == 0, "clean: %llu handles, %llu bytes",
       (unsigned long long)st.refs_alive, (unsigned long long)st.bytes_outstanding);
    dv_actor_destroy(a);
    return tap_done();
}
