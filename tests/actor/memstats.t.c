/*
 * Memory by tag and by query: dv_query_set, dv_memory_stats_get,
 * dv_memory_usage_get, dv_memory_reset_peaks, dv_memory_snapshot, and the
 * log's Thread and QueryId columns.
 *
 *   - two threads allocate under queries 7 and 9, the main thread under
 *     none: the actor's counts, each query's and each tag's add up;
 *   - the snapshot lists every live block with its tag, query and the
 *     kernel id of the thread that posted it;
 *   - the log names the posting thread (not the actor's) and the query on
 *     every row, the releasing thread on frees;
 *   - a finished query keeps its peak and total; peaks reset; exactly the
 *     most recent 4096 finished queries are listed; a rebuild zeroes what
 *     is held; misuse is refused.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "devactor.h"
#include "devactor_resource.h"
#include "tap.h"

#define MiB (UINT64_C(1) << 20)

static dv_actor *a;

typedef struct worker {
    uint64_t query;
    const char *tag;
    uint64_t bytes;
    int count;
    dv_ref refs[4];
    unsigned tid;
    int rc;
} worker;

/* Inside dv_actor_resources: 32 MiB through the stack's top, freed, the
 * stack trimmed. */
static int through_stack(dv_resource *top, void *user)
{
    (void)user;
    dv_block b;
    dv_tag t = {"direct", 0};
    int rc = dv_resource_allocate(top, 32 * MiB, 0, t, &b);
    if (rc == DV_OK)
        rc = dv_resource_deallocate(top, &b);
    return rc != DV_OK ? rc : dv_resource_trim(top, NULL); /* nothing held after */
}

static void *work(void *arg)
{
    worker *w = arg;
    w->tid = (unsigned)syscall(SYS_gettid);
    uint64_t was = dv_query_set(w->query);
    w->rc = was == 0 && dv_query_get() == w->query ? DV_OK : DV_EINVAL;
    for (int i = 0; i < w->count && w->rc == DV_OK; i++)
        w->rc = dv_alloc(a, w->bytes, 0, w->tag, &w->refs[i]);
    if (w->rc == DV_OK)
        w->rc = dv_flush(a);
    return NULL;
}

static const dv_memory_usage *find(const dv_memory_usage *rows, size_t n, const char *tag,
                                   uint64_t query)
{
    for (size_t i = 0; i < n; i++)
        if (tag != NULL ? rows[i].tag != NULL && strcmp(rows[i].tag, tag) == 0
                        : rows[i].query_id == query)
            return &rows[i];
    return NULL;
}

/* Lines of path holding every one of the needles. */
static int lines_with(const char *path, const char *n1, const char *n2, const char *n3)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    int hits = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        hits += strstr(line, n1) != NULL && (n2 == NULL || strstr(line, n2) != NULL) &&
                (n3 == NULL || strstr(line, n3) != NULL);
    if (f != NULL)
        fclose(f);
    return hits;
}

int main(void)
{
    plan(41);
    char log[128], snap[128];
    snprintf(log, sizeof(log), "/tmp/dv-memstats-%d.csv", (int)getpid());
    snprintf(snap, sizeof(snap), "/tmp/dv-memstats-%d-snap.csv", (int)getpid());
    unlink(log);
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    cfg.log_path = log;
    if (!is_status(dv_actor_create(&cfg, &a), DV_OK, "an actor with a log"))
        bail_out("no actor");

    worker w7 = {.query = 7, .tag = "scan", .bytes = MiB, .count = 2};
    worker w9 = {.query = 9, .tag = "join", .bytes = 3 * MiB, .count = 1};
    pthread_t t7, t9;
    pthread_create(&t7, NULL, work, &w7);
    pthread_create(&t9, NULL, work, &w9);
    pthread_join(t7, NULL);
    pthread_join(t9, NULL);
    ok(w7.rc == DV_OK && w9.rc == DV_OK, "queries 7 and 9 allocate on their threads");
    dv_ref misc;
    is_status(dv_alloc(a, MiB / 2, 1, "misc", &misc), DV_OK, "the main thread, under no query");
    is_int((int)dv_query_get(), 0, "the main thread's query is its own (0)");

    dv_memory_stats ms;
    is_status(dv_memory_stats_get(a, &ms), DV_OK, "dv_memory_stats_get");
    is_u64(ms.bytes.current, 5 * MiB + MiB / 2, "bytes held: 2 + 3 + 0.5 MiB");
    is_u64(ms.blocks.current, 4, "4 blocks");
    ok(ms.bytes.peak == ms.bytes.current && ms.bytes.total == ms.bytes.current,
       "peak and total match so far");
    ok(ms.reserved.current >= ms.bytes.current, "reserved from the device (%llu) covers them",
       (unsigned long long)ms.reserved.current);
    ok(ms.tags == 3 && ms.queries == 3, "3 tags, 3 queries (0, 7, 9)");

    dv_memory_usage rows[8];
    size_t n = 0;
    is_status(dv_memory_usage_get(a, DV_MEMORY_BY_QUERY, rows, 8, &n), DV_OK, "by query");
    ok(n == 3 && rows[0].query_id == 9 && rows[1].query_id == 7 && rows[2].query_id == 0,
       "most bytes first: 9, 7, 0");
    ok(rows[0].bytes.current == 3 * MiB && rows[1].bytes.current == 2 * MiB &&
           rows[1].blocks.current == 2 && rows[2].bytes.current == MiB / 2,
       "each query's bytes and blocks");
    is_status(dv_memory_usage_get(a, DV_MEMORY_BY_TAG, rows, 8, &n), DV_OK, "by tag");
    const dv_memory_usage *scan = find(rows, n, "scan", 0);
    ok(n == 3 && scan != NULL && scan->bytes.current == 2 * MiB &&
           find(rows, n, "join", 0) != NULL && find(rows, n, "misc", 0) != NULL,
       "each tag's bytes");
    size_t count = 0;
    is_status(dv_memory_usage_get(a, DV_MEMORY_BY_QUERY, NULL, 0, &count), DV_OK, "cap 0 counts");
    is_int((int)count, 3, "3 rows");
    is_status(dv_memory_usage_get(a, DV_MEMORY_BY_QUERY, rows, 1, &count), DV_OK, "cap 1");
    ok(count == 3 && rows[0].query_id == 9, "one row, the largest; the count says 3");

    /* The snapshot. */
    is_status(dv_memory_snapshot(a, snap), DV_OK, "a snapshot to %s", snap);
    char want[64];
    snprintf(want, sizeof(want), ",scan,7,%u,", w7.tid);
    is_int(lines_with(snap, want, NULL, NULL), 2, "two rows of query 7 (tag scan, thread %u)",
           w7.tid);
    snprintf(want, sizeof(want), ",join,9,%u,", w9.tid);
    is_int(lines_with(snap, want, ",3145728,3145728,", NULL), 1,
           "one row of query 9: 3 MiB, thread %u", w9.tid);
    is_int(lines_with(snap, ",misc,0,", NULL, NULL), 1, "the main thread's block under query 0");
    is_int(lines_with(snap, "Pointer,Size,Requested,Stream,Device,Tag,QueryId,Thread,Time,Age",
                      NULL, NULL),
           1, "the header");

    /* Query 7 ends: freed from the main thread. */
    dv_ref_release(w7.refs[0]);
    dv_ref_release(w7.refs[1]);
    dv_flush(a);
    is_status(dv_memory_usage_get(a, DV_MEMORY_BY_QUERY, rows, 8, &n), DV_OK, "by query again");
    const dv_memory_usage *q7 = find(rows, n, NULL, 7);
    ok(q7 != NULL && q7->bytes.current == 0 && q7->bytes.peak == 2 * MiB &&
           q7->bytes.total == 2 * MiB && q7->blocks.total == 2,
       "query 7, finished: nothing held, peak and total 2 MiB");
    dv_memory_stats_get(a, &ms);
    ok(ms.bytes.current == 3 * MiB + MiB / 2 && ms.bytes.peak == 5 * MiB + MiB / 2,
       "the actor's peak stays at 5.5 MiB");
    is_status(dv_memory_reset_peaks(a), DV_OK, "dv_memory_reset_peaks");
    dv_memory_stats_get(a, &ms);
    dv_memory_usage_get(a, DV_MEMORY_BY_QUERY, rows, 8, &n);
    q7 = find(rows, n, NULL, 7);
    ok(ms.bytes.peak == ms.bytes.current && q7 != NULL && q7->bytes.peak == 0 &&
           q7->bytes.total == 2 * MiB,
       "peaks are the current values; totals stay");

    /* The log. */
    dv_flush(a);
    snprintf(want, sizeof(want), "%u,", w7.tid);
    is_int(lines_with(log, want, ",allocate,", ",scan,7"), 2,
           "the log: query 7's allocations name their thread %u", w7.tid);
    snprintf(want, sizeof(want), "%u,", (unsigned)syscall(SYS_gettid));
    is_int(lines_with(log, want, ",free,", ",scan,7"), 2,
           "its frees name the releasing thread (the main one)");

    /* Many queries, one after another (past twice the kept, so that the
     * table was swept): the newest 4096 finished are kept. */
    for (uint64_t q = 100; q < 100 + 10000; q++) {
        dv_query_set(q);
        dv_ref r;
        dv_alloc(a, 4096, 0, "short", &r);
        dv_ref_release(r);
    }
    dv_query_set(0);
    dv_flush(a);
    dv_memory_stats_get(a, &ms);
    dv_memory_usage *all = calloc(16384, sizeof(*all));
    dv_memory_usage_get(a, DV_MEMORY_BY_QUERY, all, 16384, &n);
    size_t loop = 0;
    for (size_t i = 0; i < n; i++)
        loop += all[i].query_id >= 100 && all[i].query_id < 10100;
    ok(loop == 4096 && ms.queries == n && n <= 4096 + 3,
       "exactly the newest 4096 finished queries listed (%zu of the loop's, %zu rows, %llu "
       "counted)",
       loop, n, (unsigned long long)ms.queries);
    ok(find(all, n, NULL, 10099) != NULL && find(all, n, NULL, 6004) != NULL &&
           find(all, n, NULL, 6003) == NULL && find(all, n, NULL, 9) != NULL,
       "the newest kept down to query 6004, 6003 forgotten, a live one kept");
    free(all);

    /* A rebuild drops every block. */
    is_status(dv_actor_reset(a), DV_OK, "reset");
    dv_memory_stats_get(a, &ms);
    ok(ms.bytes.current == 0 && ms.blocks.current == 0, "nothing held after it");
    dv_ref_release(w9.refs[0]);
    dv_ref_release(misc);

    /* Misuse. */
    is_status(dv_memory_usage_get(a, (dv_memory_key)5, rows, 8, &n), DV_EINVAL, "an unknown key");
    is_status(dv_memory_usage_get(a, DV_MEMORY_BY_TAG, NULL, 8, &n), DV_EINVAL,
              "NULL rows with room for 8");
    is_status(dv_memory_snapshot(a, "/nonexistent-dir/x.csv"), DV_EIO, "an unwritable path");
    is_status(dv_memory_stats_get_sized(a, &ms, 8), DV_EINVAL, "a size smaller than any layout");
    dv_actor_destroy(a);
    unlink(log);
    unlink(snap);

    /* Without the pool, the driver's allocator may hand a block's memory
     * out again before its stream reached the free: reserved counts it
     * once, never more than the device has. */
    dv_actor_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    cfg.sim_memory_bytes = 64 * MiB;
    cfg.pool = false;
    cfg.streams = 4;
    int failed = dv_actor_create(&cfg, &a) != DV_OK;
    for (int i = 0; i < 20 && !failed; i++) {
        dv_ref r, r2;
        dv_future f;
        failed |= dv_alloc(a, 48 * MiB, (dv_stream)(i % 4), "x", &r) != DV_OK;
        failed |= dv_memset(a, r, 0, 1, 48 * MiB, (dv_stream)(i % 4)) != DV_OK;
        dv_ref_release(r);
        dv_future_init(&f, 0);
        failed |= dv_alloc_async(a, 48 * MiB, (dv_stream)((i + 1) % 4), "y", &r2, &f) != DV_OK;
        failed |= dv_future_wait(&f) != DV_OK;
        dv_ref_release(r2);
    }
    if (a != NULL && !failed)
        failed |= dv_memory_stats_get(a, &ms) != DV_OK;
    ok(!failed && ms.reserved.peak <= 64 * MiB,
       "pool off, 48 MiB freed and 48 MiB taken on the next stream, 20 times: reserved peaks at "
       "%llu MiB of the device's 64",
       (unsigned long long)(ms.reserved.peak / MiB));
    dv_actor_destroy(a);

    /* Memory reserved through the stack itself (dv_actor_resources) and
     * given back there counts in reserved's peak and total, read only
     * after. */
    dv_actor_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    failed = dv_actor_create(&cfg, &a) != DV_OK;
    failed = failed || dv_actor_resources(a, through_stack, NULL) != DV_OK ||
             dv_memory_stats_get(a, &ms) != DV_OK;
    ok(!failed && ms.reserved.peak >= 32 * MiB && ms.reserved.total >= 32 * MiB,
       "32 MiB reserved and given back inside dv_actor_resources: reserved peak %llu MiB, total "
       "%llu MiB",
       (unsigned long long)(ms.reserved.peak / MiB), (unsigned long long)(ms.reserved.total / MiB));
    dv_actor_destroy(a);
    return tap_done();
}
