/*
 * Memory by query, the way a query executor sees it: worker threads run
 * queries one after another, each thread sets the query it works for with
 * dv_query_set, and every allocation it posts is counted for that query.
 *
 *     dv-example-queries [--log FILE] [--snapshot FILE] [--queries N] [--threads T]
 *
 * Each query allocates a few tagged buffers ("scan", "hash", "sort"), uses
 * them, and frees them; query q's largest buffer is q MiB, so the queries'
 * peaks (1.75 q MiB) differ and can be told apart.  While every thread
 * holds its first query's buffers, the main thread writes a snapshot of
 * the live blocks (--snapshot); the log (--log) has every allocation and
 * free with its query and posting thread.  At the end it
 * prints each query's peak and total as CSV:
 *
 *     query,peak_bytes,total_bytes,allocations
 *
 * Draw the log with tools/dv-viz --by query.  Runs on the sim unless
 * DV_BACKEND says otherwise.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devactor.h"

#define MiB (UINT64_C(1) << 20)

static dv_actor *actor;
static int nqueries = 8, nthreads = 2;
static const char *snapshot_path;
static pthread_barrier_t halfway; /* the workers and the main thread */

/* hold: wait at the barrier with the buffers live (the snapshot). */
static int run_query(uint64_t q, bool hold)
{
    static const char *const tags[] = {"scan", "hash", "sort"};
    dv_ref bufs[3];
    int rc = DV_OK, made = 0;
    dv_query_set(q);
    for (int i = 0; i < 3 && rc == DV_OK; i++) {
        /* scan: q MiB; hash: half that; sort: a quarter. */
        rc = dv_alloc(actor, (q * MiB) >> i, 0, tags[i], &bufs[i]);
        made += rc == DV_OK;
    }
    for (int i = 0; i < made && rc == DV_OK; i++)
        rc = dv_memset(actor, bufs[i], 0, (uint8_t)q, 4096, 0);
    if (hold) {
        pthread_barrier_wait(&halfway); /* the main thread snapshots now */
        pthread_barrier_wait(&halfway);
    }
    for (int i = 0; i < made; i++)
        dv_ref_release(bufs[i]);
    dv_query_set(0);
    return rc;
}

typedef struct worker {
    int index;
    int rc;
} worker;

/* Thread t runs queries t+1, t+1+T, ...; each holds its first one's
 * buffers while the main thread takes the snapshot. */
static void *work(void *arg)
{
    worker *w = arg;
    for (int q = w->index + 1; q <= nqueries; q += nthreads) {
        int rc = run_query((uint64_t)q, snapshot_path != NULL && q == w->index + 1);
        if (w->rc == DV_OK)
            w->rc = rc;
    }
    return NULL;
}

static void usage(FILE *to)
{
    fprintf(to, "usage: dv-example-queries [--log FILE] [--snapshot FILE] [--queries N] "
                "[--threads T]\n");
}

int main(int argc, char **argv)
{
    const char *log_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--log") == 0 && i + 1 < argc) {
            log_path = argv[++i];
        } else if (strcmp(argv[i], "--snapshot") == 0 && i + 1 < argc) {
            snapshot_path = argv[++i];
        } else if (strcmp(argv[i], "--queries") == 0 && i + 1 < argc) {
            nqueries = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            nthreads = atoi(argv[++i]);
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (nqueries < 1 || nqueries > 64 || nthreads < 1 || nthreads > nqueries) {
        fprintf(stderr, "dv-example-queries: 1..64 queries, 1..queries threads\n");
        return 2;
    }
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.log_path = log_path;
    int rc = dv_actor_create(&cfg, &actor);
    if (rc != DV_OK) {
        fprintf(stderr, "dv-example-queries: %s\n", dv_last_error()->message);
        return 1;
    }
    pthread_barrier_init(&halfway, NULL, (unsigned)nthreads + 1);
    pthread_t threads[64];
    worker workers[64];
    for (int t = 0; t < nthreads; t++) {
        workers[t] = (worker){t, DV_OK};
        pthread_create(&threads[t], NULL, work, &workers[t]);
    }
    if (snapshot_path != NULL) {
        pthread_barrier_wait(&halfway); /* every thread holds its first query */
        int src = dv_memory_snapshot(actor, snapshot_path);
        if (src != DV_OK) {
            fprintf(stderr, "dv-example-queries: %s\n", dv_last_error()->message);
            rc = src;
        }
        pthread_barrier_wait(&halfway);
    }
    for (int t = 0; t < nthreads; t++) {
        pthread_join(threads[t], NULL);
        if (workers[t].rc != DV_OK)
            rc = workers[t].rc;
    }
    dv_memory_usage rows[128];
    size_t n = 0;
    bool said = rc != DV_OK; /* the snapshot's failure was said above */
    if (rc == DV_OK)
        rc = dv_memory_usage_get(actor, DV_MEMORY_BY_QUERY, rows, 128, &n);
    if (rc == DV_OK) {
        printf("query,peak_bytes,total_bytes,allocations\n");
        for (size_t i = 0; i < n && i < 128; i++)
            if (rows[i].query_id != 0)
                printf("%llu,%llu,%llu,%llu\n", (unsigned long long)rows[i].query_id,
                       (unsigned long long)rows[i].bytes.peak,
                       (unsigned long long)rows[i].bytes.total,
                       (unsigned long long)rows[i].blocks.total);
    } else if (!said) {
        fprintf(stderr, "dv-example-queries: %s\n", dv_last_error()->message);
    }
    pthread_barrier_destroy(&halfway);
    dv_actor_destroy(actor);
    return rc == DV_OK ? 0 : 1;
}
