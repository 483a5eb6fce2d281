/*
 * Life cycle: the process-wide actor (concurrent first callers get one
 * actor), bad ordinals, and posting from many threads while the actor
 * shuts down (every post either lands or answers DV_ESHUTDOWN; nothing
 * hangs; handles go stale).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "devactor.h"
#include "tap.h"

#define THREADS 8

static dv_actor *got[THREADS];
static int got_rc[THREADS];
static pthread_barrier_t start;

static void *get_actor(void *arg)
{
    int i = (int)(intptr_t)arg;
    pthread_barrier_wait(&start);
    got_rc[i] = dv_actor_get(0, &got[i]);
    return NULL;
}

typedef struct poster {
    dv_actor *a;
    atomic_int *stop_seen;
    atomic_int *posted; /* posts that succeeded, all posters */
    int ok, shutdown, other;
} poster;

static void *post_until_shutdown(void *arg)
{
    poster *p = arg;
    for (;;) {
        dv_ref r;
        int rc = dv_alloc(p->a, 4096, 0, "churn", &r);
        if (rc == DV_OK) {
            p->ok++;
            atomic_fetch_add(p->posted, 1);
            rc = dv_ref_release(r);
            if (rc != DV_OK && rc != DV_ESTALE)
                p->other++;
        } else if (rc == DV_ESHUTDOWN) {
            p->shutdown++;
            atomic_fetch_add(p->stop_seen, 1);
            return NULL;
        } else {
            p->other++;
            if (p->other > 100)
                return NULL;
        }
    }
}

int main(void)
{
    pthread_t th[THREADS];

    plan(10);
    setenv("DV_BACKEND", "sim", 1);
    pthread_barrier_init(&start, NULL, THREADS);
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, get_actor, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    bool same = true;
    for (int i = 0; i < THREADS; i++)
        same &= got_rc[i] == DV_OK && got[i] == got[0] && got[0] != NULL;
    ok(same, "%d concurrent first callers of dv_actor_get(0) got one actor", THREADS);
    dv_actor *again = NULL;
    is_status(dv_actor_get(0, &again), DV_OK, "dv_actor_get(0) again");
    ok(again == got[0], "... the same actor (fast path)");
    is_status(dv_actor_get(DV_MAX_DEVICES, &again), DV_EINVAL, "an ordinal beyond the maximum");
    is_status(dv_actor_get(3, &again), DV_ENODEVICE, "a device the sim does not have: %s",
              dv_last_error()->message);
    ok(strcmp(dv_actor_backend_name(got[0]), "sim") == 0, "DV_BACKEND=sim chose the sim");

    /* Posting while the actor shuts down. */
    dv_actor_config cfg;
    dv_actor *a;
    dv_actor_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    cfg.queue_capacity = 8; /* posters block on a full ring too */
    dv_actor_create(&cfg, &a);
    dv_ref keep;
    dv_alloc(a, 64, 0, "kept", &keep);
    atomic_int stop_seen = 0, posted = 0;
    poster ps[THREADS];
    for (int i = 0; i < THREADS; i++) {
        ps[i] = (poster){.a = a, .stop_seen = &stop_seen, .posted = &posted};
        pthread_create(&th[i], NULL, post_until_shutdown, &ps[i]);
    }
    /* Let them churn a little (until some post went through, on a loaded
     * machine the threads may start late; 10 s at most), then shut down
     * under them. */
    for (int i = 0; i < 200 || (atomic_load(&posted) < THREADS && i < 1000000); i++) {
        dv_ref r;
        if (dv_alloc(a, 128, 1, "main", &r) == DV_OK)
            dv_ref_release(r);
        if (i >= 200)
            usleep(10);
    }
    dv_actor_shutdown(a);
    int total_ok = 0, others = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        total_ok += ps[i].ok;
        others += ps[i].other;
    }
    is_int(atomic_load(&stop_seen), THREADS, "every poster saw DV_ESHUTDOWN and stopped");
    ok(total_ok > 0, "posts before the shutdown succeeded (%d)", total_ok);
    is_int(others, 0, "no other error came back");
    dv_ref_info info;
    is_status(dv_ref_access(keep, &info), DV_ESTALE, "a handle held across shutdown is stale");
    dv_actor_destroy(a);
    dv_actor_destroy(got[0]);
    return tap_done();
}
