/*
 * Asymmetric fences and hazard slots (src/base/fence.h): which scheme is
 * chosen, and the handshake that shutdown and handle domains rely on:
 * once dv__hazard_wait returns, no thread that named the object before the
 * retire is still using it, and none starts to.  Run in both schemes
 * (ctest runs it again with DV_FENCES=full).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/fence.h"
#include "base/tsan.h"
#include "tap.h"

#if defined(SYS_membarrier)
#include <linux/membarrier.h>
#endif

enum { WORKERS = 3, ROUNDS = 300, SPAN = 200 };

/* The object being retired: workers write their own counter while it is
 * live; the retirer reads them after the wait. */
static struct {
    _Atomic int live;
    long used[WORKERS]; /* plain: written only inside a hazard section */
} obj;

static atomic_bool stop;
static atomic_long sections, refused;

static void *worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    dv_hazards *h = dv__hazards_mine();
    unsigned n = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        if (!dv__hazard_set(h, &obj))
            abort();
        if (atomic_load_explicit(&obj.live, memory_order_acquire)) {
            /* A section long enough to be caught in. */
            for (int k = 0; k < SPAN; k++) {
                obj.used[me]++;
                atomic_signal_fence(memory_order_seq_cst);
            }
            atomic_fetch_add_explicit(&sections, 1, memory_order_relaxed);
        } else {
            atomic_fetch_add_explicit(&refused, 1, memory_order_relaxed);
        }
        dv__hazard_clear(h);
        if ((++n & 255) == 0)
            sched_yield(); /* the retirer shares the cores */
    }
    return NULL;
}

static void pause_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

static long sum_used(void)
{
    long s = 0;
    for (int i = 0; i < WORKERS; i++)
        s += obj.used[i];
    return s;
}

static bool membarrier_expedited(void)
{
#if defined(SYS_membarrier)
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    return cmds >= 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED);
#else
    return false;
#endif
}

static void *exiting_thread(void *arg)
{
    (void)arg;
    dv_hazards *h = dv__hazards_mine();
    if (dv__hazard_set(h, &obj))
        dv__hazard_clear(h);
    return NULL;
}

int main(void)
{
    plan(8);

    dv__fence_init();
    const char *env = getenv("DV_FENCES");
    bool want_full = (env != NULL && strcmp(env, "full") == 0) || !membarrier_expedited();
#ifdef DV_TSAN
    want_full = true; /* TSan does not model membarrier */
#endif
    ok(atomic_load(&dv__fence_asym) == !want_full, "scheme: %s (DV_FENCES=%s, membarrier %s)",
       dv__fence_scheme(), env ? env : "unset", membarrier_expedited() ? "available" : "missing");
    dv__fence_init();
    ok(atomic_load(&dv__fence_asym) == !want_full, "a second init changes nothing");

    /* Nesting. */
    dv_hazards *h = dv__hazards_mine();
    int a[DV_HAZARD_DEPTH + 1];
    bool all = true;
    for (int i = 0; i < DV_HAZARD_DEPTH; i++)
        all &= dv__hazard_set(h, &a[i]);
    ok(all && !dv__hazard_set(h, &a[DV_HAZARD_DEPTH]),
       "%d names nest; one more is refused, not written past the slots", DV_HAZARD_DEPTH);
    for (int i = 0; i < DV_HAZARD_DEPTH; i++)
        dv__hazard_clear(h);
    ok(h->depth == 0, "cleared in turn");

    /* A thread that exits leaves the registry: waits do not look at it. */
    pthread_t t;
    pthread_create(&t, NULL, exiting_thread, NULL);
    pthread_join(t, NULL);
    atomic_store(&obj.live, 0);
    dv__hazard_wait(&obj);
    ok(1, "a wait after a named thread exited returns");

    /* The handshake under load: retire, wait, then nothing moves. */
    pthread_t w[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&w[i], NULL, worker, (void *)(intptr_t)i);
    int moved = 0;
    for (int r = 0; r < ROUNDS; r++) {
        atomic_store_explicit(&obj.live, 1, memory_order_release);
        pause_us(50);
        atomic_store_explicit(&obj.live, 0, memory_order_seq_cst);
        dv__hazard_wait(&obj);
        long before = sum_used();
        pause_us(20);
        if (sum_used() != before)
            moved++;
    }
    atomic_store(&stop, true);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(w[i], NULL);
    long in = atomic_load(&sections), out = atomic_load(&refused);
    ok(moved == 0, "after %d waits no thread was still inside (%d rounds saw a write after)",
       ROUNDS, moved);
    ok(in > 0 && out > 0, "the workers both entered (%ld) and saw it retired (%ld)", in, out);
    ok(sum_used() == in * SPAN, "every write happened inside a section (%ld of %ld)", sum_used(),
       in * SPAN);
    return tap_done();
}
