/*
 * dv-replay: replays an allocation log through a devactor actor and says
 * how much memory it took.
 *
 *     dv-replay [options] LOG.csv
 *
 * The log is devactor's own (Thread,Time,Action,Pointer,Size,Stream,
 * Device,Tag,QueryId, as cfg.log_path writes it) or RMM's
 * (Thread,Time,Action,Pointer,Size,Stream, as its logging_resource_adaptor
 * writes it), told apart by the header.  Rows are put in time order (stable);
 * each distinct Thread gets a replay thread of its own that allocates and
 * frees its rows in that order; a free made by another thread than its
 * allocation waits until the allocation was replayed.  Streams are mapped
 * to the actor's streams in order of first appearance (modulo their count).
 * Failure rows of the log are skipped; a free of a block the log never
 * allocated (a log begun late) is counted and skipped.  A row is one line:
 * a tag holding a line break is not taken (the log is refused).
 *
 * The report: rows, allocations and frees replayed, the peak of live bytes
 * (the trace's own, from its sizes), devactor's peak of bytes held and of
 * device memory reserved (dv_memory_stats), reserved / live, allocation
 * failures (each naming its row, and the exit status 1), ops/s.  --csv
 * prints one line of the same.  The actor's configuration is the default
 * one with --conf's text over it (dv_actor_config_parse: budget, pool
 * sizes, streams, ...).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devactor.h"

typedef struct row {
    uint64_t time_us; /* microseconds since the epoch */
    uint64_t ptr, size, thread, stream;
    int device;
    bool alloc;
    uint32_t line;
    int32_t match;      /* free: the index of its allocation, -1: none */
    uint32_t seq;       /* order in the file, for a stable sort */
    _Atomic int state;  /* 0: not yet, 1: replayed, 2: refused, 3: freed */
    dv_ref ref;
} row;

static row *rows;
static size_t nrows, caprows;
static dv_actor *actor;
static uint32_t nstreams = 4;
static _Atomic uint64_t failures;
static int verbose_failures = 20;

static void usage(FILE *to)
{
    fprintf(to,
            "usage: dv-replay [--backend sim|cuda] [--conf TEXT] [--csv] [--quiet] LOG.csv\n"
            "\n"
            "Replays an allocation log (devactor's CSV or RMM's) through an actor: one\n"
            "replay thread per Thread of the log, rows in time order, streams mapped.\n"
            "  --backend B  sim or cuda (default: DV_BACKEND, else cuda if present, else sim)\n"
            "  --conf TEXT  actor configuration, as DEVACTOR_CONF (e.g. budget:8G,streams:8)\n"
            "  --csv        one CSV line: rows,allocs,frees,failures,peak_live,peak_held,\n"
            "               peak_reserved,reserved_over_live,ops_per_s\n"
            "  --quiet      do not name each failure\n"
            "Exit status: 0 replayed without a failure, 1 a failure or a bad log, 2 usage.\n");
}

/* A CSV field: quoted or not; *p moves past it and its comma. */
static char *field(char **p)
{
    char *s = *p, *out = s;
    if (*s == '"') {
        char *w = s;
        s++;
        for (;;) {
            if (*s == '\0')
                break;
            if (*s == '"' && s[1] == '"') {
                *w++ = '"';
                s += 2;
                continue;
            }
            if (*s == '"') {
                s++;
                break;
            }
            *w++ = *s++;
        }
        *w = '\0';
        while (*s != ',' && *s != '\0')
            s++;
    } else {
        while (*s != ',' && *s != '\0' && *s != '\r' && *s != '\n')
            s++;
    }
    if (*s == ',')
        *s++ = '\0';
    else
        *s = '\0';
    *p = s;
    return out;
}

static bool number(const char *s, int base, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, base);
    if (errno != 0 || end == s || *end != '\0')
        return false;
    *out = v;
    return true;
}

static bool parse_time(const char *s, uint64_t *us)
{
    char *end;
    errno = 0;
    double t = strtod(s, &end);
    if (errno != 0 || end == s)
        return false;
    /* RMM writes a time of day (HH:MM:SS.ffffff): take it as seconds. */
    if (*end == ':') {
        unsigned h, m;
        double sec;
        if (sscanf(s, "%u:%u:%lf", &h, &m, &sec) != 3)
            return false;
        t = h * 3600.0 + m * 60.0 + sec;
    } else if (*end != '\0') {
        return false;
    }
    *us = (uint64_t)(t * 1e6 + 0.5);
    return true;
}

static int by_time(const void *x, const void *y)
{
    const row *a = x, *b = y;
    if (a->time_us != b->time_us)
        return a->time_us < b->time_us ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int load(const char *path)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "dv-replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[4096];
    uint32_t lineno = 0;
    bool ours = false;
    while (fgets(line, sizeof(line), f) != NULL) {
        lineno++;
        if (lineno == 1) {
            if (strncmp(line, "Thread,Time,Action,Pointer,Size,Stream,Device,Tag,QueryId", 57) == 0)
                ours = true;
            else if (strncmp(line, "Thread,Time,Action,Pointer,Size,Stream", 38) != 0) {
                fprintf(stderr, "dv-replay: %s: line 1: not a devactor or RMM allocation log\n",
                        path);
                return -1;
            }
            continue;
        }
        if (line[0] == '\n' || line[0] == '\r' || line[0] == '\0')
            continue;
        char *p = line;
        char *thread = field(&p), *time = field(&p), *action = field(&p), *ptr = field(&p),
             *size = field(&p), *stream = field(&p);
        char *device = ours ? field(&p) : "0";
        row r = {.line = lineno, .match = -1};
        uint64_t dev = 0;
        bool okay = number(thread, 0, &r.thread) && parse_time(time, &r.time_us) &&
                    number(ptr, 16, &r.ptr) && number(size, 10, &r.size) &&
                    number(stream, 0, &r.stream) && number(device, 10, &dev);
        if (!okay) {
            fprintf(stderr, "dv-replay: %s: line %u: a field does not parse\n", path, lineno);
            return -1;
        }
        r.device = (int)dev;
        if (strcmp(action, "allocate") == 0)
            r.alloc = true;
        else if (strcmp(action, "free") != 0)
            continue; /* "allocate failure", "free failure": nothing happened */
        if (r.alloc && r.size == 0)
            continue;
        if (nrows == caprows) {
            caprows = caprows ? caprows * 2 : 4096;
            rows = realloc(rows, caprows * sizeof(*rows));
            if (rows == NULL) {
                fprintf(stderr, "dv-replay: out of memory at line %u\n", lineno);
                return -1;
            }
        }
        r.seq = (uint32_t)nrows;
        rows[nrows++] = r;
    }
    if (f != stdin)
        fclose(f);
    qsort(rows, nrows, sizeof(*rows), by_time);
    return 0;
}

/* Match frees to allocations by (device, pointer); the trace's peak.  An
 * open-addressing table: EMPTY ends a probe, DEAD (a freed block) does not. */
#define EMPTY (-1)
#define DEAD  (-2)

static size_t home(uint64_t ptr, int device, size_t cap)
{
    uint64_t k = (ptr ^ ((uint64_t)device << 56)) * UINT64_C(0x9e3779b97f4a7c15);
    return (size_t)(k >> 20) & (cap - 1);
}

static uint64_t match(uint64_t *unmatched)
{
    size_t cap = 16;
    while (cap < nrows * 2)
        cap <<= 1;
    int64_t *tab = malloc(cap * sizeof(*tab));
    if (tab == NULL)
        return 0;
    for (size_t i = 0; i < cap; i++)
        tab[i] = EMPTY;
    uint64_t live = 0, peak = 0;
    *unmatched = 0;
    for (size_t i = 0; i < nrows; i++) {
        row *r = &rows[i];
        size_t h = home(r->ptr, r->device, cap), found = SIZE_MAX, spot = SIZE_MAX;
        for (; tab[h] != EMPTY; h = (h + 1) & (cap - 1)) {
            if (tab[h] == DEAD) {
                if (spot == SIZE_MAX)
                    spot = h;
            } else if (rows[tab[h]].ptr == r->ptr && rows[tab[h]].device == r->device) {
                found = h;
                break;
            }
        }
        if (spot == SIZE_MAX)
            spot = h;
        if (r->alloc) {
            if (found != SIZE_MAX) { /* reused without its free row */
                live -= rows[tab[found]].size;
                tab[found] = (int64_t)i;
            } else {
                tab[spot] = (int64_t)i;
            }
            live += r->size;
            if (live > peak)
                peak = live;
        } else if (found != SIZE_MAX) {
            r->match = (int32_t)tab[found];
            live -= rows[tab[found]].size;
            tab[found] = DEAD;
        } else {
            (*unmatched)++;
        }
    }
    free(tab);
    return peak;
}

typedef struct replayer {
    uint64_t thread;
    pthread_t id;
    uint64_t ops;
} replayer;

static uint64_t stream_keys[64];
static unsigned nstream_keys;

static dv_stream stream_of(uint64_t key)
{
    for (unsigned i = 0; i < nstream_keys; i++)
        if (stream_keys[i] == key)
            return i % nstreams;
    return 0;
}

static void *replay(void *arg)
{
    replayer *rp = arg;
    for (size_t i = 0; i < nrows; i++) {
        row *r = &rows[i];
        if (r->thread != rp->thread)
            continue;
        if (r->alloc) {
            dv_ref ref = DV_REF_NULL;
            int rc = dv_alloc(actor, r->size, stream_of(r->stream), "replay", &ref);
            dv_ref_info info;
            if (rc == DV_OK)
                rc = dv_ref_access(ref, &info);
            r->ref = ref;
            if (rc != DV_OK) {
                uint64_t n = atomic_fetch_add(&failures, 1);
                if ((int)n < verbose_failures)
                    fprintf(stderr, "dv-replay: line %u: %" PRIu64 " bytes: %s: %s\n", r->line,
                            r->size, dv_err_name(rc), dv_last_error()->message);
            }
            atomic_store_explicit(&r->state, rc == DV_OK ? 1 : 2, memory_order_release);
            rp->ops++;
        } else if (r->match >= 0) {
            row *a = &rows[r->match];
            int st;
            while ((st = atomic_load_explicit(&a->state, memory_order_acquire)) == 0)
                sched_yield(); /* allocated by another thread: not yet */
            dv_ref_release(a->ref); /* a refused allocation's handle too */
            atomic_store_explicit(&a->state, 3, memory_order_relaxed);
            rp->ops += st == 1;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *conf = NULL, *path = NULL;
    dv_backend backend = DV_BACKEND_AUTO;
    bool csv = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--conf") == 0 && i + 1 < argc) {
            conf = argv[++i];
        } else if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
            i++;
            backend = strcmp(argv[i], "sim") == 0    ? DV_BACKEND_SIM
                      : strcmp(argv[i], "cuda") == 0 ? DV_BACKEND_CUDA
                                                     : (dv_backend)-1;
            if ((int)backend < 0) {
                usage(stderr);
                return 2;
            }
        } else if (strcmp(argv[i], "--csv") == 0) {
            csv = true;
        } else if (strcmp(argv[i], "--quiet") == 0) {
            verbose_failures = 0;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            usage(stderr);
            return 2;
        } else if (path == NULL) {
            path = argv[i];
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (path == NULL) {
        usage(stderr);
        return 2;
    }
    if (load(path) != 0)
        return 1;
    uint64_t unmatched = 0;
    uint64_t peak_live = match(&unmatched);

    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.backend = backend;
    if (conf != NULL && dv_actor_config_parse(&cfg, conf) != DV_OK) {
        fprintf(stderr, "dv-replay: --conf: %s\n", dv_last_error()->message);
        return 2;
    }
    nstreams = cfg.streams;
    if (dv_actor_create(&cfg, &actor) != DV_OK) {
        fprintf(stderr, "dv-replay: %s\n", dv_last_error()->message);
        return 1;
    }
    /* Streams and threads, in order of first appearance. */
    replayer *threads = NULL;
    size_t nthreads = 0;
    for (size_t i = 0; i < nrows; i++) {
        bool seen = false;
        for (unsigned s = 0; s < nstream_keys && !seen; s++)
            seen = stream_keys[s] == rows[i].stream;
        if (!seen && nstream_keys < 64)
            stream_keys[nstream_keys++] = rows[i].stream;
        seen = false;
        for (size_t t = 0; t < nthreads && !seen; t++)
            seen = threads[t].thread == rows[i].thread;
        if (!seen) {
            threads = realloc(threads, (nthreads + 1) * sizeof(*threads));
            threads[nthreads++] = (replayer){.thread = rows[i].thread};
        }
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t t = 0; t < nthreads; t++)
        pthread_create(&threads[t].id, NULL, replay, &threads[t]);
    uint64_t ops = 0;
    for (size_t t = 0; t < nthreads; t++) {
        pthread_join(threads[t].id, NULL);
        ops += threads[t].ops;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    dv_memory_stats ms;
    dv_memory_stats_get(actor, &ms);
    uint64_t allocs = 0, frees = 0;
    for (size_t i = 0; i < nrows; i++) {
        allocs += rows[i].alloc;
        frees += !rows[i].alloc && rows[i].match >= 0;
    }
    double ratio = peak_live ? (double)ms.reserved.peak / (double)peak_live : 0;
    double rate = secs > 0 ? (double)ops / secs : 0;
    uint64_t nfail = atomic_load(&failures);
    if (csv) {
        printf("rows,allocs,frees,failures,peak_live,peak_held,peak_reserved,reserved_over_live,"
               "ops_per_s\n");
        printf("%zu,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
               ",%.3f,%.0f\n",
               nrows, allocs, frees, nfail, peak_live, ms.bytes.peak, ms.reserved.peak, ratio,
               rate);
    } else {
        printf("dv-replay: %s on %s, %zu threads, %u streams\n", path,
               dv_actor_backend_name(actor), nthreads, nstream_keys);
        printf("  rows %zu: %" PRIu64 " allocations, %" PRIu64 " frees (%" PRIu64
               " frees of blocks the log never allocated, skipped)\n",
               nrows, allocs, frees, unmatched);
        printf("  peak live bytes (the trace's)      %" PRIu64 "\n", peak_live);
        printf("  peak bytes held (devactor)         %" PRIu64 "\n", ms.bytes.peak);
        printf("  peak bytes reserved from device    %" PRIu64 "  (%.3f x peak live)\n",
               ms.reserved.peak, ratio);
        printf("  allocation failures                %" PRIu64 "\n", nfail);
        printf("  %.0f ops/s (%" PRIu64 " ops in %.3f s)\n", rate, ops, secs);
    }
    /* What the log left allocated (and the handles of refused
     * allocations, which are released like any other). */
    for (size_t i = 0; i < nrows; i++) {
        int st = atomic_load(&rows[i].state);
        if (rows[i].alloc && (st == 1 || st == 2))
            dv_ref_release(rows[i].ref);
    }
    dv_actor_destroy(actor);
    free(threads);
    free(rows);
    return nfail > 0 ? 1 : 0;
}
