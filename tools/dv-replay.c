/*
 * dv-replay: replays an allocation log through a devactor actor and says
 * how much memory it took; with --peer, through a peer allocator too.
 *
 *     dv-replay [options] LOG.csv
 *
 * The log is devactor's own (Thread,Time,Action,Pointer,Size,Stream,
 * Device,Tag,QueryId, as cfg.log_path writes it) or RMM's
 * (Thread,Time,Action,Pointer,Size,Stream, as its logging_resource_adaptor
 * writes it), told apart by the header; a name ending in .gz is read
 * through gzip -dc.  Rows are put in time order (stable); each distinct
 * Thread gets a replay thread of its own that allocates and frees its rows
 * in that order, the threads taking turns so that every row goes out in
 * the log's order (--concurrent: they run at once, and a free made by
 * another thread than its allocation waits until the allocation was
 * replayed).  Streams are mapped
 * to the actor's streams in order of first appearance (modulo their count).
 * An action is allocate, free (or deallocate), or a failure of either,
 * which is skipped; any other refuses the log.  A free of no live block
 * (never allocated: a log begun late; or freed already) is counted and
 * skipped; a zero-byte allocation is skipped with its free; an
 * allocation at the address of a block still live frees that block first
 * (as the trace's live count does), said on stderr.  A quoted
 * field may hold line breaks (the row then runs over several lines).
 *
 * The report: rows, allocations and frees replayed, the peak of live bytes
 * (the trace's own, from its sizes), devactor's peak of bytes held and of
 * device memory reserved (dv_memory_stats), reserved / live, allocation
 * failures (the first 20 naming their rows, the others counted, and with
 * --post one still pending at its free only counted; the exit status 1),
 * ops/s, and the
 * actor's driver work per pass (dv_actor_stats: mappings made and
 * unmapped, calls into the driver).  --csv prints one line of the same.
 * The actor's configuration is the default one with --conf's text over it
 * (dv_actor_config_parse: budget, pool sizes, streams, ...), each --conf
 * over the ones before it.
 *
 * The replay threads start before the first pass and meet the timing
 * thread at the start and the end of each pass; the timed region is a
 * pass, from the first thread's start to the last one's end, each read
 * on the replay thread itself (not the barriers' wake-ups); an operation is an
 * allocation (refused or not) or the free of an allocation that
 * succeeded.  Per row, the actor's side does what a client
 * needing the memory does: dv_alloc and dv_ref_access (the device address:
 * a round trip), dv_ref_release; each replay thread ends with dv_flush, so
 * that its releases are handled inside the timed region, as the peer's
 * synchronous frees are.  --repeat N replays the log N times in a row
 * through the same actor (and peer): what a pass leaves allocated is freed
 * after it, outside the timed region; allocations, frees and ops/s count
 * every pass, and the report gives the first pass's rate apart from the
 * later passes' (the first grows from nothing, the later run warm).
 *
 * --stack replays on the actor's thread instead, inside dv_actor_resources:
 * every row, of whichever Thread, in the log's order, straight into the top
 * of the actor's resource stack (dv_resource_allocate and _deallocate), so
 * that the allocator is timed without the messages that carry clients'
 * calls to it (the peer too is called directly).  No handles are made;
 * peak held is counted by the replay, peak reserved is the most the
 * stack's pools held (dv_pool_stats.peak_chunk_bytes).
 *
 * --peer LIB.so replays the same rows the same way (the same threads, the
 * same waits for another thread's allocation, one peer stream per actor
 * stream used) through a peer allocator after the actor's replay (the
 * actor destroyed first), or instead of it with --peer-only.  The peer is
 * a library with the C interface dv-bench loads (tools/peers/):
 *
 *   const char *dv_peer_name(void);
 *   int   dv_peer_open(int device, void **stream);   0, or -1
 *   void *dv_peer_alloc(size_t bytes, void *stream);  NULL on failure
 *   void  dv_peer_free(void *p);
 *   void  dv_peer_close(void *stream);
 *
 * and, optional (where absent, the report says n/a):
 *
 *   int   dv_peer_stats(uint64_t *allocated_peak, uint64_t *reserved_peak,
 *                       uint64_t *reserved_now);     0, or not available
 *   void  dv_peer_reset_peaks(void);
 *   void  dv_peer_trim(void);       give cached memory back (emptyCache)
 *
 * Before the peer's replay, trim and reset its peaks; after it, free what
 * is still live.  The report adds the peer's failures, its own peaks of
 * bytes allocated and reserved, its ops/s, and devactor's peak reserved
 * and ops/s over the peer's.  A peer that does not load or lacks one of
 * the five functions: exit status 1.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "devactor.h"
#include "devactor_resource.h"
#include "peers/dv_peer.h"
#include "tools_common.h"

typedef struct row {
    uint64_t time_us; /* microseconds since the epoch */
    uint64_t ptr, size, thread, stream;
    int device;
    bool alloc;
    uint32_t line;
    int32_t match;     /* free: the index of its allocation, -1: none; a zero-byte
                        * allocation: the row it lies over (a live block, or another
                        * zero-byte row), -1: none */
    int32_t prior;     /* allocate: a live block at its address, freed first; -1: none */
    uint32_t seq;      /* order in the file, for a stable sort */
    uint32_t owner;    /* the replay thread of its Thread */
    dv_stream sidx;    /* the actor's stream (and the peer's) for its Stream */
    _Atomic int state; /* 0: not yet, 1: replayed, 2: refused, 3: freed */
    _Atomic int waited; /* a thread sleeps on state (row_settle wakes it) */
    dv_ref ref;        /* the actor's handle */
    dv_block block;    /* --stack: the block the stack gave */
    void *p;           /* the peer's block */
} row;

static row *rows;
static size_t nrows, caprows;
static dv_actor *actor;
static uint32_t nstreams = 4;
static int verbose_failures = 20;

/* The peer allocator (--peer), loaded at run time (peers/dv_peer.h). */
typedef struct peer_lib {
    dv_peer_api api;
    void **streams; /* one per actor stream the log uses */
    unsigned nstreams;
} peer_lib;

static peer_lib peer;
/* The replay under way: the actor's (0) or the peer's (1); its failures. */
static int target;
/* The actor's allocations post-only (--post): the outcome is read at the
 * block's free, or after the pass. */
static bool post_only;
/* --stack: the actor's replay runs on its own thread, through the top of
 * its resource stack (dv_actor_resources): the allocator without the
 * messages that carry clients' calls to it. */
static bool stack_mode;
/* The rows go out in the log's order across threads too (unless
 * --concurrent); turn is the row whose turn it is (in time order). */
static bool ordered = true;
static _Atomic size_t turn;
static _Atomic uint64_t failures[2];
/* The first pass's part of a replay's operations and time, apart from the
 * later passes' (the first grows from nothing; the later run warm). */
static uint64_t first_ops[2];
static double first_secs[2];
/* Each pass's operations and seconds, the actor's [0] and the peer's [1]
 * (--repeat: the later passes' median rate is robust to a pass the host
 * interrupted). */
static uint64_t *pass_ops[2];
static double *pass_secs[2];

/* Pass k of who's replay took ops in secs. */
static void pass_note(int who, unsigned k, uint64_t ops, double secs)
{
    if (pass_ops[who] != NULL) {
        pass_ops[who][k] = ops;
        pass_secs[who][k] = secs;
    }
}
/* The actor's counts after the first pass (what it left live freed too):
 * the later passes' driver calls are what came after. */
static dv_actor_stats first_stats;
static bool have_first_stats;

static void usage(FILE *to)
{
    fprintf(to,
            "usage: dv-replay [--backend sim|cuda] [--conf TEXT] [--peer LIB.so [--peer-only]]\n"
            "                 [--repeat N] [--scale N] [--post | --stack] [--concurrent]\n"
            "                 [--csv] [--quiet]\n"
            "                 LOG.csv[.gz]\n"
            "\n"
            "Replays an allocation log (devactor's CSV or RMM's; .gz read through gzip -dc)\n"
            "through an actor: one replay thread per Thread of the log, rows in time order,\n"
            "streams mapped.  Actions: allocate, free (or deallocate); failure rows are\n"
            "skipped, any other action refuses the log.\n"
            "  --backend B  sim or cuda (default: DV_BACKEND, else cuda if present, else sim)\n"
            "  --conf TEXT  actor configuration, as DEVACTOR_CONF (e.g. budget:8G,streams:8);\n"
            "               given again, applied over the ones before\n"
            "  --peer LIB   replay the same rows the same way through a peer allocator too\n"
            "               (a dv_peer library, as dv-bench loads: tools/peers/), after the\n"
            "               actor; compare peak reserved and ops/s\n"
            "  --peer-only  through the peer alone (the actor's columns read n/a)\n"
            "  --repeat N   replay the log N times in a row (default 1), freeing what a pass\n"
            "               leaves live; allocations, frees and ops/s count every pass (the\n"
            "               report also gives the first pass's rate and the later passes')\n"
            "  --scale N    every size of the log times N (1 to 1024): the same workload\n"
            "               over N times the memory (a larger model, say)\n"
            "  --post       allocate as devactor's clients do: post the allocation and go\n"
            "               on (the handle is usable at once); its outcome is read at its\n"
            "               free, and a refusal still pending then is counted, not named\n"
            "               (default: wait for the address, as the peer returns it)\n"
            "  --stack      replay on the actor's thread through its resource stack\n"
            "               (dv_actor_resources, dv_resource_allocate): the allocator alone,\n"
            "               no messages; every thread's rows in the log's order, on that one\n"
            "               thread; peak reserved is the pools' most held\n"
            "  --concurrent the replay threads run at once, each in its own rows' order\n"
            "               (a free by another thread still waits for its allocation);\n"
            "               by default they take turns in the log's order, so that the\n"
            "               allocator sees the rows as they were logged.  Concurrent, with\n"
            "               several threads, the bytes held may peak above the trace's\n"
            "               live peak\n"
            "  --csv        a header line, then one CSV line: rows,allocs,frees,failures,\n"
            "               peak_live,peak_held,peak_reserved,reserved_over_live,ops_per_s;\n"
            "               with --peer, then\n"
            "               peer_failures,peer_peak_allocated,peer_peak_reserved,\n"
            "               peer_ops_per_s,reserved_vs_peer,ops_vs_peer (n/a: not known);\n"
            "               then maps_per_pass,unmaps_per_pass,driver_calls_per_pass;\n"
            "               then later_ops_per_s (passes 2..N; n/a with one pass), with\n"
            "               --peer also peer_later_ops_per_s,later_vs_peer; last\n"
            "               later_calls_per_pass (the actor's driver calls a pass over\n"
            "               passes 2..N; n/a with one pass); then later_median_ops_per_s\n"
            "               (the median of passes 2..N's own rates, which a pass the host\n"
            "               interrupted does not move), with --peer also\n"
            "               peer_later_median_ops_per_s,later_median_vs_peer\n"
            "  --quiet      name no failure (by default the first 20 are named on stderr,\n"
            "               and the number of the others is said)\n"
            "The log's first line is its header, its columns in one of the two orders:\n"
            "Thread,Time,Action,Pointer,Size,Stream[,Device,Tag,QueryId].  Rows of every\n"
            "Device go to the one actor (said on stderr when there are several).\n"
            "Zero-byte allocations are skipped with their frees.  An allocation at the\n"
            "address of a block still live counts that block as freed first (said on\n"
            "stderr for the first few).  reserved_over_live: over the peak the actor held\n"
            "where allocations failed (the trace's peak counts bytes never given).\n"
            "Each Thread is a thread of the replay: a log of thousands of threads takes\n"
            "the time of as many thread switches a row, and the system's thread limit\n"
            "bounds it.\n"
            "Exit status: 0 replayed without a failure, 1 a failure, a bad log, a peer\n"
            "that does not load or output that cannot be written, 2 a usage error or an\n"
            "actor that cannot be made (a configuration refused, no device).\n");
}
/* A usage error, said in a line: exit status 2. */
static int bad(const char *what, const char *arg)
{
    fprintf(stderr, "dv-replay: %s%s%s (dv-replay --help for usage)\n", what, arg ? ": " : "",
            arg ? arg : "");
    return 2;
}

/* Did the last field end at a comma (another field follows, if empty)? */
static bool field_more;

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
        /* Text after the closing quote stays in the field (as Python's
         * csv keeps it): "100"x is 100x, which then does not parse. */
        while (*s != ',' && *s != '\0' && *s != '\r' && *s != '\n')
            *w++ = *s++;
        *w = '\0';
    } else {
        while (*s != ',' && *s != '\0' && *s != '\r' && *s != '\n')
            s++;
    }
    field_more = *s == ',';
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
    if (!isxdigit((unsigned char)*s)) /* strtoull would take a sign (and wrap -5) or spaces */
        return false;
    errno = 0;
    unsigned long long v = strtoull(s, &end, base);
    if (errno != 0 || end == s || *end != '\0')
        return false;
    *out = v;
    return true;
}

/* A time in seconds, or RMM's time of day (*of_day set), in µs: digits,
 * a fraction after a point, and for a time of day HH:MM:SS before it;
 * nothing else (no sign, exponent or hex). */
static bool parse_time(const char *s, uint64_t *us, bool *of_day)
{
    char *end;
    unsigned colons = 0, points = 0;
    for (const char *c = s; *c != '\0'; c++) {
        if (*c == ':' && points == 0)
            colons++;
        else if (*c == '.')
            points++;
        else if (*c < '0' || *c > '9')
            return false;
    }
    if ((colons != 0 && colons != 2) || points > 1 || *s < '0' || *s > '9')
        return false;
    errno = 0;
    double t = strtod(s, &end);
    if (errno != 0 || end == s || !(t < 1e12))
        return false;
    /* RMM writes a time of day (HH:MM:SS.ffffff): take it as seconds. */
    *of_day = *end == ':';
    if (*of_day) {
        unsigned h, m;
        double sec;
        if (sscanf(s, "%u:%u:%lf", &h, &m, &sec) != 3 || h > 23 || m > 59 || !(sec >= 0) ||
            !(sec < 61))
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

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The log's stream: the file, standard input ("-"), or for a name ending
 * in .gz, gzip -dc reading the file (opened here: no name goes through a
 * shell) in a child, *child its pid. */
static FILE *open_log(const char *path, pid_t *child)
{
    *child = -1;
    if (strcmp(path, "-") == 0)
        return stdin;
    FILE *f = fopen(path, "re");
    struct stat st;
    if (f != NULL && fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        errno = EISDIR;
        return NULL;
    }
    if (f == NULL || !ends_with(path, ".gz"))
        return f;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        int e = errno;
        fclose(f);
        errno = e;
        return NULL;
    }
    pid_t pid = fork();
    if (pid == 0) {
        static const char msg[] = "dv-replay: cannot run gzip\n";
        if (dup2(fileno(f), 0) >= 0 && dup2(fds[1], 1) >= 0)
            execlp("gzip", "gzip", "-dc", (char *)NULL);
        ssize_t w = write(2, msg, sizeof(msg) - 1);
        (void)w;
        _exit(127);
    }
    int e = errno;
    fclose(f);
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        errno = e;
        return NULL;
    }
    *child = pid;
    FILE *out = fdopen(fds[0], "r");
    if (out == NULL) {
        e = errno;
        close(fds[0]);
        waitpid(pid, NULL, 0);
        *child = -1;
        errno = e;
    }
    return out;
}

/* 0, or -1 where gzip failed (it said why). */
static int close_log(FILE *f, pid_t child)
{
    if (f != stdin)
        fclose(f);
    if (child <= 0)
        return 0;
    int status;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* One line of f into *buf (grown as needed), its end as '\n' whatever it
 * was: "\n", "\r\n" or a lone "\r" (old Mac files).  Its length, or -1 at
 * the end of the file or out of memory. */
static ssize_t read_line(FILE *f, char **buf, size_t *cap)
{
    size_t n = 0;
    int c = EOF;
    while ((c = getc_unlocked(f)) != EOF) {
        if (n + 2 > *cap) {
            size_t grown_cap = *cap != 0 ? *cap * 2 : 256;
            char *grown = realloc(*buf, grown_cap);
            if (grown == NULL)
                return -1;
            *buf = grown;
            *cap = grown_cap;
        }
        if (c == '\r') {
            int d = getc_unlocked(f);
            if (d != '\n' && d != EOF)
                ungetc(d, f);
            c = '\n';
        }
        (*buf)[n++] = (char)c;
        if (c == '\n')
            break;
    }
    if (n == 0)
        return -1;
    (*buf)[n] = '\0';
    return (ssize_t)n;
}

/* Does a quoted field stay open past the end of text (from state
 * *quoted, *start: at a field's start)?  A quote opens a field only at
 * its start, as field() reads it; one inside an unquoted field is text. */
static void quote_scan(const char *text, bool *quoted, bool *start)
{
    for (const char *c = text; *c != '\0'; c++) {
        if (*quoted) {
            if (*c == '"' && c[1] == '"')
                c++; /* an escaped quote */
            else if (*c == '"')
                *quoted = false;
        } else if (*c == '"' && *start) {
            *quoted = true;
        }
        *start = !*quoted && (*c == ',' || *c == '\n');
    }
}

/* While *line ends inside a quoted field, append the next line of f.  0,
 * or -1 at the end of the file, or out of memory. */
static int join_quoted(FILE *f, char **line, size_t *cap, uint32_t *lineno)
{
    bool quoted = false, start = true;
    size_t len = strlen(*line);
    quote_scan(*line, &quoted, &start);
    char *more = NULL;
    size_t more_cap = 0;
    while (quoted) {
        ssize_t n = read_line(f, &more, &more_cap);
        if (n < 0)
            break;
        (*lineno)++;
        if (len + (size_t)n + 1 > *cap) {
            char *grown = realloc(*line, len + (size_t)n + 1);
            if (grown == NULL)
                break;
            *line = grown;
            *cap = len + (size_t)n + 1;
        }
        memcpy(*line + len, more, (size_t)n + 1);
        len += (size_t)n;
        quote_scan(more, &quoted, &start);
    }
    free(more);
    return quoted ? -1 : 0;
}

/* --scale: every size of the log times this. */
static uint64_t size_scale = 1;

static int load(const char *path)
{
    pid_t child;
    FILE *f = open_log(path, &child);
    if (f == NULL) {
        fprintf(stderr, "dv-replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t line_cap = 0;
    uint32_t lineno = 0;
    bool ours = false;
    int rc = 0;
    /* RMM's times of day: a time more than 12 hours before the last is
     * on the next day (the log ran past midnight). */
    uint64_t day_us = 0, last_us = 0;
    bool day_times = false; /* the rows' times are times of day */
    const uint64_t half_day_us = UINT64_C(12) * 3600 * 1000000;
    ssize_t got;
    while (rc == 0 && (got = read_line(f, &line, &line_cap)) != -1) {
        lineno++;
        if (memchr(line, '\0', (size_t)got) != NULL) {
            fprintf(stderr, "dv-replay: %s: line %u: holds a NUL byte\n", path, lineno);
            rc = -1;
            break;
        }
        if (lineno == 1) {
            if (strncmp(line, "\xEF\xBB\xBF", 3) == 0) /* a UTF-8 byte-order mark */
                memmove(line, line + 3, (size_t)got - 2);
            /* Its names, quoted or not (as a CSV writer quoting every
             * field writes them). */
            static const char *const names[] = {"Thread", "Time",   "Action", "Pointer", "Size",
                                                "Stream", "Device", "Tag",    "QueryId"};
            char *h = line;
            unsigned n = 0;
            while (n < 9 && strcmp(field(&h), names[n]) == 0)
                n++;
            ours = n == 9;
            if (n < 6) {
                fprintf(stderr, "dv-replay: %s: line 1: not a devactor or RMM allocation log\n",
                        path);
                rc = -1;
            }
            continue;
        }
        if (line[0] == '\n' || line[0] == '\r' || line[0] == '\0')
            continue;
        /* A quoted field may hold line breaks (devactor's log quotes such a
         * tag): a row runs on until its quotes pair up. */
        uint32_t row_line = lineno;
        if (join_quoted(f, &line, &line_cap, &lineno) != 0) {
            fprintf(stderr, "dv-replay: %s: line %u: a quoted field is not closed\n", path,
                    row_line);
            rc = -1;
            break;
        }
        char *p = line;
        char *thread = field(&p), *time = field(&p), *action = field(&p), *ptr = field(&p),
             *size = field(&p), *stream = field(&p);
        char *device = ours ? field(&p) : "0";
        /* devactor's rows end with a tag and a query id (the tag's text is
         * not needed; a row cut short, without the id, is refused). */
        char *query = "0";
        if (ours) {
            (void)field(&p); /* the tag */
            query = field(&p);
        }
        if (*action == '\0' || field_more || (*p != '\0' && *p != '\r' && *p != '\n')) {
            fprintf(stderr, "dv-replay: %s: line %u: too %s fields (%s)\n", path, row_line,
                    *action == '\0' ? "few" : "many",
                    ours ? "devactor's log has 9" : "RMM's log has 6");
            rc = -1;
            break;
        }
        /* Failure rows first: their pointer may be "(nil)". */
        bool alloc = strcmp(action, "allocate") == 0;
        if (!alloc && strcmp(action, "free") != 0 && strcmp(action, "deallocate") != 0) {
            if (strcmp(action, "allocate failure") == 0 || strcmp(action, "free failure") == 0 ||
                strcmp(action, "deallocate failure") == 0)
                continue; /* nothing happened */
            fprintf(stderr, "dv-replay: %s: line %u: unknown action \"%.40s\"\n", path, row_line,
                    action);
            rc = -1;
            break;
        }
        row r = {.line = row_line, .match = -1, .prior = -1, .alloc = alloc};
        uint64_t dev = 0;
        bool of_day = false;
        /* RMM prints a null pointer (its answer to 0 bytes) as "(nil)". */
        bool okay = number(thread, 0, &r.thread) && parse_time(time, &r.time_us, &of_day) &&
                    (strcmp(ptr, "(nil)") == 0 || number(ptr, 16, &r.ptr)) &&
                    number(size, 10, &r.size) && number(stream, 0, &r.stream) &&
                    number(device, 10, &dev) && number(query, 10, &(uint64_t){0});
        if (!okay || dev > INT_MAX) {
            fprintf(stderr, "dv-replay: %s: line %u: a field does not parse\n", path, row_line);
            rc = -1;
            break;
        }
        if (nrows != 0 && of_day != day_times) {
            fprintf(stderr, "dv-replay: %s: line %u: a %s where the rows before give %s\n", path,
                    row_line, of_day ? "time of day" : "time in seconds",
                    of_day ? "seconds" : "times of day");
            rc = -1;
            break;
        }
        day_times = of_day;
        if (r.size > UINT64_MAX / size_scale) {
            fprintf(stderr, "dv-replay: %s: line %u: the size times --scale overflows\n", path,
                    row_line);
            rc = -1;
            break;
        }
        r.size *= size_scale;
        r.device = (int)dev;
        if (of_day) {
            r.time_us += day_us;
            if (r.time_us + half_day_us < last_us) {
                day_us += 2 * half_day_us;
                r.time_us += 2 * half_day_us;
            }
            last_us = r.time_us;
        }
        if (nrows == caprows) {
            size_t cap = caprows ? caprows * 2 : 4096;
            row *grown = realloc(rows, cap * sizeof(*rows));
            if (grown == NULL) {
                fprintf(stderr, "dv-replay: out of memory at line %u\n", lineno);
                rc = -1;
                break;
            }
            rows = grown;
            caprows = cap;
        }
        r.seq = (uint32_t)nrows;
        rows[nrows++] = r;
    }
    free(line);
    if (close_log(f, child) != 0 && rc == 0) {
        fprintf(stderr, "dv-replay: %s: gzip -dc failed\n", path);
        rc = -1;
    }
    if (rc == 0 && lineno == 0) {
        fprintf(stderr, "dv-replay: %s: empty: not a devactor or RMM allocation log\n", path);
        rc = -1;
    }
    if (rc == 0 && nrows != 0)
        qsort(rows, nrows, sizeof(*rows), by_time);
    return rc;
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

static uint64_t zero_allocs, over_live; /* allocations skipped; at a live block */

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
    unsigned __int128 live = 0, peak = 0; /* sizes up to 2^64 - 1 each */
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
            if (r->size == 0)
                zero_allocs++;
            if (found != SIZE_MAX && r->size == 0) {
                /* A zero-byte allocation (skipped) at a block's address:
                 * the block (or zero-byte row) stays live under it, and
                 * is the one at the address again once the zero-byte
                 * one's free comes (an alloc row's match: the row it
                 * shadows). */
                r->match = (int32_t)tab[found];
                tab[found] = (int64_t)i;
            } else if (found != SIZE_MAX) { /* reused without its free row */
                /* The block live there, under any zero-byte rows (which
                 * go with it: their frees match nothing now). */
                int64_t k = tab[found];
                while (rows[k].size == 0 && rows[k].match >= 0)
                    k = rows[k].match;
                row *old = &rows[k];
                live -= old->size;
                if (old->size != 0) {
                    /* Replayed as a free of the old block first. */
                    r->prior = (int32_t)k;
                    if (over_live++ < 5)
                        fprintf(stderr,
                                "dv-replay: line %u: allocate at 0x%" PRIx64 " while the "
                                "block of line %u is live: that block counts as freed "
                                "first\n",
                                r->line, r->ptr, old->line);
                }
                tab[found] = (int64_t)i;
            } else {
                tab[spot] = (int64_t)i;
            }
            live += r->size;
            if (live > peak)
                peak = live;
        } else if (found != SIZE_MAX) {
            const row *a = &rows[tab[found]];
            r->match = (int32_t)tab[found];
            live -= a->size;
            tab[found] = a->size == 0 && a->match >= 0 ? (int64_t)a->match : DEAD;
        } else {
            (*unmatched)++;
        }
    }
    free(tab);
    return peak > UINT64_MAX ? UINT64_MAX : (uint64_t)peak;
}

typedef struct replayer {
    uint64_t thread;
    pthread_t id;
    uint64_t ops;
    struct timespec t0, t1; /* its pass: from its first row to after its last */
    pthread_mutex_t mu; /* --ordered: sleeps on cv until its row's turn */
    pthread_cond_t cv;
} replayer;

static replayer *replayers;

/* Keys (a log's streams, its threads) in order of first appearance,
 * found by key through an open-addressing index. */
typedef struct key_order {
    uint64_t *keys; /* [n] */
    size_t *slot;   /* [cap]: a key's place + 1; 0: empty */
    size_t n, cap;
} key_order;

/* key's place in o, added last where it is new; -1 out of memory. */
static ptrdiff_t key_place(key_order *o, uint64_t key)
{
    if (2 * (o->n + 1) > o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 64;
        size_t *slot = calloc(cap, sizeof(*slot));
        uint64_t *keys = realloc(o->keys, cap / 2 * sizeof(*keys));
        if (slot == NULL || keys == NULL) {
            free(slot);
            if (keys != NULL)
                o->keys = keys;
            return -1;
        }
        o->keys = keys;
        for (size_t i = 0; i < o->n; i++) {
            size_t h = home(o->keys[i], 0, cap);
            while (slot[h] != 0)
                h = (h + 1) & (cap - 1);
            slot[h] = i + 1;
        }
        free(o->slot);
        o->slot = slot;
        o->cap = cap;
    }
    size_t h = home(key, 0, o->cap);
    for (; o->slot[h] != 0; h = (h + 1) & (o->cap - 1))
        if (o->keys[o->slot[h] - 1] == key)
            return (ptrdiff_t)o->slot[h] - 1;
    o->keys[o->n] = key;
    o->slot[h] = ++o->n;
    return (ptrdiff_t)o->n - 1;
}

static void key_order_free(key_order *o)
{
    free(o->keys);
    free(o->slot);
}

/* The log's streams: the i-th replays on the actor's stream i % nstreams
 * (rows[].sidx). */
static key_order stream_keys;

static _Atomic uint64_t noted[2]; /* failures seen at their row, named or not */

static void note_failure(const row *r, int rc)
{
    atomic_fetch_add(&failures[target], 1);
    uint64_t n = atomic_fetch_add(&noted[target], 1);
    if (n >= (uint64_t)verbose_failures)
        return;
    if (target == 1)
        fprintf(stderr, "dv-replay: peer: line %u: %" PRIu64 " bytes: refused\n", r->line, r->size);
    else
        fprintf(stderr, "dv-replay: line %u: %" PRIu64 " bytes: %s: %s\n", r->line, r->size,
                dv_err_name(rc), dv_last_error()->message);
}

/* --post: was the allocation of row r refused?  Looked at, never waited
 * for, at its free: a refusal the actor has settled by then is named; one
 * still pending is counted after the pass from the actor's statistics
 * (unnamed_failures). */
static _Atomic uint64_t named_failures;
static bool settled_failed(row *r, bool wait)
{
    /* The answer alone (no info): the replay takes no address. */
    int rc = wait ? dv_ref_access(r->ref, NULL) : dv_ref_try_access(r->ref, NULL);
    if (rc == DV_OK || rc == DV_EAGAIN)
        return false;
    note_failure(r, rc);
    atomic_fetch_add(&named_failures, 1);
    return true;
}

/* --post: the refusals the actor counted that no row named (they were
 * pending at their free), added to the failures. */
static void count_unnamed(uint64_t refused_before)
{
    dv_memory_stats ms = {0};
    if (dv_memory_stats_get(actor, &ms) != DV_OK)
        return;
    uint64_t refused = ms.failures - refused_before, named = atomic_exchange(&named_failures, 0);
    if (refused > named) {
        atomic_fetch_add(&failures[0], refused - named);
        if (verbose_failures > 0) /* --quiet names none, for whatever reason */
            fprintf(stderr, "dv-replay: %" PRIu64 " refusals not named (pending at their free)\n",
                    refused - named);
    }
}

/* --ordered: wait for row i's turn (a moment's spin, then asleep until
 * the row before wakes this thread). */
static void await_turn(replayer *rp, size_t i)
{
    for (unsigned spins = 0; spins < 256; spins++)
        if (atomic_load_explicit(&turn, memory_order_acquire) == i)
            return;
    pthread_mutex_lock(&rp->mu);
    while (atomic_load_explicit(&turn, memory_order_acquire) != i)
        pthread_cond_wait(&rp->cv, &rp->mu);
    pthread_mutex_unlock(&rp->mu);
}

/* --ordered: row i done; the turn passes to the next row's thread. */
static void pass_turn(replayer *rp, size_t i)
{
    /* Release: the next row's thread sees this one's effects. */
    atomic_store_explicit(&turn, i + 1, memory_order_release);
    if (i + 1 >= nrows)
        return;
    replayer *next = &replayers[rows[i + 1].owner];
    if (next == rp)
        return;
    pthread_mutex_lock(&next->mu); /* it sleeps or sees the turn: no lost wake */
    pthread_cond_signal(&next->cv);
    pthread_mutex_unlock(&next->mu);
}

/* Row r's outcome st, for a thread that may wait for it in free_row. */
static void row_settle(row *r, int st)
{
    atomic_store(&r->state, st);
    if (atomic_load(&r->waited))
        (void)syscall(SYS_futex, &r->state, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* The free of allocation row a (replayed by any thread); zero-byte
 * allocations were not replayed and have nothing to free. */
static void free_row(replayer *rp, row *a)
{
    if (a->size == 0)
        return;
    int st;
    /* Allocated by another thread, not yet: yield a while, then sleep on
     * the row's state until row_settle wakes this thread (thousands of
     * waiting threads that only yielded would keep the allocating one off
     * the cores). */
    for (unsigned n = 0; (st = atomic_load(&a->state)) == 0; n++) {
        if (n < 64) {
            sched_yield();
            continue;
        }
        atomic_store(&a->waited, 1); /* then state read again: no lost wake */
        if (atomic_load(&a->state) == 0)
            (void)syscall(SYS_futex, &a->state, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    }
    if (st == 3)
        return;
    if (target == 1) {
        if (st == 1)
            peer.api.free(a->p);
    } else {
        if (post_only && st == 1 && settled_failed(a, false))
            st = 2;
        dv_ref_release(a->ref); /* a refused allocation's handle too */
    }
    atomic_store_explicit(&a->state, 3, memory_order_relaxed);
    rp->ops += st == 1;
}

static void replay_pass(replayer *rp)
{
    for (size_t i = 0; i < nrows; i++) {
        row *r = &rows[i];
        if (r->thread != rp->thread)
            continue;
        if (ordered)
            await_turn(rp, i);
        if (r->alloc && r->size == 0) {
            if (r->prior >= 0)
                free_row(rp, &rows[r->prior]);
            row_settle(r, 3);
        } else if (r->alloc) {
            int rc = DV_OK;
            if (r->prior >= 0)
                free_row(rp, &rows[r->prior]);
            if (target == 1) {
                r->p = peer.api.alloc((size_t)r->size, peer.streams[r->sidx]);
                rc = r->p != NULL ? DV_OK : -1;
            } else {
                dv_ref ref = DV_REF_NULL;
                rc = dv_alloc(actor, r->size, r->sidx, "replay", &ref);
                dv_ref_info info;
                if (rc == DV_OK && !post_only)
                    rc = dv_ref_access(ref, &info); /* the address, as the peer gives it */
                r->ref = ref;
            }
            if (rc != DV_OK)
                note_failure(r, rc);
            row_settle(r, rc == DV_OK ? 1 : 2);
            rp->ops++;
        } else if (r->match >= 0) {
            free_row(rp, &rows[r->match]);
        }
        if (ordered)
            pass_turn(rp, i);
    }
    if (target == 0)
        dv_flush(actor); /* its releases handled, like the peer's frees */
}

static double seconds_between(const struct timespec *t0, const struct timespec *t1)
{
    return (double)(t1->tv_sec - t0->tv_sec) + (double)(t1->tv_nsec - t0->tv_nsec) * 1e-9;
}

/*
 * --stack: one pass on the actor's thread (dv_actor_resources runs it):
 * every row in the log's order, straight into the stack's top; timed from
 * its first row to its last.  The bytes it holds are counted here (the
 * actor's statistics see only allocations it was sent).
 */
typedef struct stack_pass {
    uint64_t ops;
    double secs;
    uint64_t held, held_peak; /* bytes of the blocks handed out */
} stack_pass;

/* --stack: the block of allocation row a back to the stack. */
static int stack_free(dv_resource *top, stack_pass *sp, row *a)
{
    sp->held -= a->block.requested;
    int rc = dv_resource_deallocate(top, &a->block);
    atomic_store_explicit(&a->state, 3, memory_order_relaxed);
    return rc;
}

static int stack_replay(dv_resource *top, void *arg)
{
    stack_pass *sp = arg;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t i = 0; i < nrows; i++) {
        row *r = &rows[i];
        if (r->alloc && r->prior >= 0 &&
            atomic_load_explicit(&rows[r->prior].state, memory_order_relaxed) == 1) {
            (void)stack_free(top, sp, &rows[r->prior]);
            sp->ops++;
        }
        if (r->alloc && r->size == 0) {
            continue;
        } else if (r->alloc) {
            dv_tag tag = {.name = "replay", .query_id = 0};
            int rc = dv_resource_allocate(top, r->size, r->sidx, tag, &r->block);
            if (rc != DV_OK) {
                note_failure(r, rc);
            } else if ((sp->held += r->block.requested) > sp->held_peak) {
                sp->held_peak = sp->held;
            }
            atomic_store_explicit(&r->state, rc == DV_OK ? 1 : 2, memory_order_relaxed);
            sp->ops++;
        } else if (r->match >= 0) {
            row *a = &rows[r->match];
            if (atomic_load_explicit(&a->state, memory_order_relaxed) != 1)
                continue; /* refused: nothing to free */
            int rc = stack_free(top, sp, a);
            if (rc != DV_OK) /* a block the stack gave, given back once: cannot happen */
                fprintf(stderr, "dv-replay: line %u: free: %s: %s\n", r->line, dv_err_name(rc),
                        dv_last_error()->message);
            sp->ops++;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    sp->secs += seconds_between(&t0, &t1);
    return DV_OK;
}

/* --stack: what a pass left allocated, freed (outside the timed region). */
static int stack_free_live(dv_resource *top, void *arg)
{
    stack_pass *sp = arg;
    for (size_t i = 0; i < nrows; i++) {
        row *r = &rows[i];
        if (r->alloc && atomic_load_explicit(&r->state, memory_order_relaxed) == 1)
            (void)stack_free(top, sp, r);
    }
    return DV_OK;
}

/* --stack: the most the stack's pools have held, summed (its bottom's
 * blocks are theirs; a stack without a pool: what the bottom holds now). */
static int stack_reserved_peak(dv_resource *top, void *arg)
{
    uint64_t *peak = arg, sum = 0;
    bool pools = false;
    dv_resource *bottom = top;
    for (dv_resource *r = top; r != NULL; r = dv_resource_upstream(r)) {
        dv_pool_stats ps;
        if (dv_resource_pool_stats(r, &ps) == DV_OK) {
            sum += ps.peak_chunk_bytes;
            pools = true;
        }
        bottom = r;
    }
    *peak = pools ? sum : dv_resource_bytes_outstanding(bottom);
    return DV_OK;
}

static void stack_run(unsigned passes, uint64_t *ops, double *secs, uint64_t *held_peak)
{
    stack_pass sp = {0};
    for (unsigned pass = 0; pass < passes; pass++) {
        for (size_t i = 0; i < nrows; i++)
            atomic_store_explicit(&rows[i].state, 0, memory_order_relaxed);
        uint64_t ops0 = sp.ops;
        double secs0 = sp.secs;
        int rc = dv_actor_resources(actor, stack_replay, &sp);
        pass_note(0, pass, sp.ops - ops0, sp.secs - secs0);
        if (rc == DV_OK)
            rc = dv_actor_resources(actor, stack_free_live, &sp);
        if (pass == 0) {
            first_ops[0] = sp.ops;
            first_secs[0] = sp.secs;
            have_first_stats = dv_actor_stats_get(actor, &first_stats) == DV_OK;
        }
        if (rc != DV_OK) {
            fprintf(stderr, "dv-replay: --stack: %s\n", dv_last_error()->message);
            exit(1);
        }
    }
    *ops = sp.ops;
    *secs = sp.secs;
    *held_peak = sp.held_peak;
}

/* The replay threads live for every pass of a run: a pass starts when all
 * of them and the timing thread meet at pass_start, and ends when they
 * meet again at pass_end (thread start-up is not the allocator's cost). */
static pthread_barrier_t pass_start, pass_end;
static bool replay_quit;

static void *replay(void *arg)
{
    replayer *rp = arg;
    for (;;) {
        pthread_barrier_wait(&pass_start);
        if (replay_quit)
            return NULL;
        clock_gettime(CLOCK_MONOTONIC, &rp->t0);
        replay_pass(rp);
        clock_gettime(CLOCK_MONOTONIC, &rp->t1);
        pthread_barrier_wait(&pass_end);
    }
}

/* What a pass left allocated (and the actor's handles of refused
 * allocations, released like any other). */
static void free_live(void)
{
    for (size_t i = 0; i < nrows; i++) {
        int st = atomic_load(&rows[i].state);
        if (!rows[i].alloc || (st != 1 && st != 2))
            continue;
        if (target == 0 && post_only && st == 1)
            (void)settled_failed(&rows[i], true); /* outside the timed region */
        if (target == 1) {
            if (st == 1)
                peer.api.free(rows[i].p);
        } else {
            dv_ref_release(rows[i].ref);
        }
        atomic_store(&rows[i].state, 3);
    }
    if (target == 0)
        dv_flush(actor);
}

/* passes replays of the whole log through the target; the replays alone
 * are timed. */
static void run(replayer *threads, size_t nthreads, unsigned passes, uint64_t *ops, double *secs)
{
    *ops = 0;
    *secs = 0;
    replay_quit = false;
    pthread_barrier_init(&pass_start, NULL, (unsigned)nthreads + 1);
    pthread_barrier_init(&pass_end, NULL, (unsigned)nthreads + 1);
    replayers = threads;
    for (size_t t = 0; t < nthreads; t++) {
        pthread_mutex_init(&threads[t].mu, NULL);
        pthread_cond_init(&threads[t].cv, NULL);
    }
    for (size_t t = 0; t < nthreads; t++) {
        int rc = pthread_create(&threads[t].id, NULL, replay, &threads[t]);
        if (rc != 0) { /* the others may wait for its rows: no way on */
            fprintf(stderr, "dv-replay: cannot start replay thread %zu of %zu: %s\n", t + 1,
                    nthreads, strerror(rc));
            exit(1);
        }
    }
    for (unsigned pass = 0; pass < passes; pass++) {
        dv_memory_stats before = {0};
        if (target == 0 && post_only)
            (void)dv_memory_stats_get(actor, &before);
        for (size_t i = 0; i < nrows; i++) {
            atomic_store_explicit(&rows[i].state, 0, memory_order_relaxed);
            atomic_store_explicit(&rows[i].waited, 0, memory_order_relaxed);
            rows[i].ref = DV_REF_NULL;
            rows[i].p = NULL;
        }
        for (size_t t = 0; t < nthreads; t++)
            threads[t].ops = 0;
        uint64_t ops0 = *ops;
        double secs0 = *secs;
        atomic_store(&turn, 0);
        pthread_barrier_wait(&pass_start);
        pthread_barrier_wait(&pass_end);
        /* The pass: from the first thread's start to the last one's end,
         * as each read its clock (not the barriers' wake-ups: --stack
         * times its pass inside it too).  No rows: no thread, no time. */
        struct timespec t0 = {0}, t1 = {0};
        if (nthreads != 0)
            t0 = threads[0].t0, t1 = threads[0].t1;
        for (size_t t = 0; t < nthreads; t++) {
            *ops += threads[t].ops;
            if (seconds_between(&threads[t].t0, &t0) > 0)
                t0 = threads[t].t0;
            if (seconds_between(&t1, &threads[t].t1) > 0)
                t1 = threads[t].t1;
        }
        *secs += seconds_between(&t0, &t1);
        pass_note(target, pass, *ops - ops0, *secs - secs0);
        if (pass == 0) {
            first_ops[target] = *ops;
            first_secs[target] = *secs;
        }
        free_live();
        if (target == 0 && post_only)
            count_unnamed(before.failures);
        if (target == 0 && pass == 0)
            have_first_stats = dv_actor_stats_get(actor, &first_stats) == DV_OK;
    }
    replay_quit = true;
    pthread_barrier_wait(&pass_start);
    for (size_t t = 0; t < nthreads; t++) {
        pthread_join(threads[t].id, NULL);
        pthread_mutex_destroy(&threads[t].mu);
        pthread_cond_destroy(&threads[t].cv);
    }
    pthread_barrier_destroy(&pass_start);
    pthread_barrier_destroy(&pass_end);
}

/* The later passes' rate (passes 2..N: warm), 0 where there is none. */
static double later_rate(int who, unsigned passes, uint64_t ops, double secs)
{
    double later = secs - first_secs[who];
    if (passes < 2 || first_secs[who] <= 0 || later <= 0)
        return 0;
    return (double)(ops - first_ops[who]) / later;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of the later passes' rates (passes 2..N), 0 where there is
 * none; *lo and *hi the slowest and the fastest. */
static double later_median(int who, unsigned passes, double *lo, double *hi)
{
    *lo = *hi = 0;
    if (passes < 2 || pass_ops[who] == NULL)
        return 0;
    double *r = malloc((passes - 1) * sizeof(*r));
    unsigned n = 0;
    for (unsigned k = 1; r != NULL && k < passes; k++)
        if (pass_secs[who][k] > 0)
            r[n++] = (double)pass_ops[who][k] / pass_secs[who][k];
    double m = 0;
    if (n > 0) {
        qsort(r, n, sizeof(*r), cmp_double);
        m = n % 2 ? r[n / 2] : (r[n / 2 - 1] + r[n / 2]) / 2;
        *lo = r[0];
        *hi = r[n - 1];
    }
    free(r);
    return m;
}

/* With several passes: the first pass's rate and the later passes'. */
static void passes_split(int who, unsigned passes, uint64_t ops, double secs)
{
    double later = later_rate(who, passes, ops, secs), lo, hi;
    double median = later_median(who, passes, &lo, &hi);
    if (later > 0)
        printf("  first pass %.0f ops/s, passes 2-%u %.0f ops/s (a pass: median %.0f, "
               "slowest %.0f, fastest %.0f)\n",
               (double)first_ops[who] / first_secs[who], passes, later, median, lo, hi);
}

/* Load the peer library: 0, or -1 having said why. */
static int peer_load(const char *path)
{
    return dv_peer_load(&peer.api, path, "dv-replay");
}

/* One peer stream per actor stream the log uses (at least one). */
static int peer_open(const char *path, int device)
{
    unsigned n = stream_keys.n < nstreams ? (unsigned)stream_keys.n : nstreams;
    if (n == 0)
        n = 1;
    peer.streams = calloc(n, sizeof(*peer.streams));
    if (peer.streams == NULL)
        return -1;
    for (; peer.nstreams < n; peer.nstreams++) {
        if (peer.api.open(device, &peer.streams[peer.nstreams]) != 0) {
            fprintf(stderr, "dv-replay: peer %s: dv_peer_open(device %d) failed (stream %u)\n",
                    path, device, peer.nstreams);
            return -1;
        }
    }
    return 0;
}

static void peer_unload(void)
{
    for (unsigned s = 0; s < peer.nstreams; s++)
        peer.api.close(peer.streams[s]);
    free(peer.streams);
    if (peer.api.lib != NULL)
        dlclose(peer.api.lib);
    memset(&peer, 0, sizeof(peer));
}

/* A CSV field or a report's value: n/a where not known. */
static const char *u64_or_na(char *buf, size_t cap, bool known, uint64_t v)
{
    if (!known)
        return "n/a";
    snprintf(buf, cap, "%" PRIu64, v);
    return buf;
}

static const char *ratio_or_na(char *buf, size_t cap, bool known, const char *fmt, double v)
{
    if (!known)
        return "n/a";
    snprintf(buf, cap, fmt, v);
    return buf;
}

int main(int argc, char **argv)
{
    const char *confs[16], *path = NULL, *peer_path = NULL;
    unsigned nconfs = 0;
    dv_backend backend = DV_BACKEND_AUTO;
    bool csv = false, peer_only = false;
    unsigned passes = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--conf") == 0 && i + 1 < argc) {
            if (nconfs == sizeof(confs) / sizeof(confs[0]))
                return bad("--conf: at most 16 of them, not more at", argv[i + 1]);
            confs[nconfs++] = argv[++i]; /* applied in order, each over the last */
        } else if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
            i++;
            backend = strcmp(argv[i], "sim") == 0    ? DV_BACKEND_SIM
                      : strcmp(argv[i], "cuda") == 0 ? DV_BACKEND_CUDA
                                                     : (dv_backend)-1;
            if ((int)backend < 0)
                return bad("--backend is sim or cuda, not", argv[i]);
        } else if (strcmp(argv[i], "--peer") == 0 && i + 1 < argc) {
            peer_path = argv[++i];
        } else if (strcmp(argv[i], "--peer-only") == 0) {
            peer_only = true;
        } else if (strcmp(argv[i], "--post") == 0) {
            post_only = true;
        } else if (strcmp(argv[i], "--stack") == 0) {
            stack_mode = true;
        } else if (strcmp(argv[i], "--ordered") == 0) {
            ordered = true; /* the default */
        } else if (strcmp(argv[i], "--concurrent") == 0) {
            ordered = false;
        } else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
            uint64_t n;
            if (!number(argv[++i], 10, &n) || n == 0 || n > 1000000)
                return bad("--repeat takes a number from 1 to 1000000, not", argv[i]);
            passes = (unsigned)n;
        } else if (strcmp(argv[i], "--scale") == 0 && i + 1 < argc) {
            if (!number(argv[++i], 10, &size_scale) || size_scale == 0 || size_scale > 1024)
                return bad("--scale takes a number from 1 to 1024, not", argv[i]);
        } else if (strcmp(argv[i], "--csv") == 0) {
            csv = true;
        } else if (strcmp(argv[i], "--quiet") == 0) {
            verbose_failures = 0;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return bad(i + 1 == argc ? "an unknown option, or one without its value"
                                     : "an unknown option",
                       argv[i]);
        } else if (path == NULL) {
            path = argv[i];
        } else {
            return bad("one log at a time; a second", argv[i]);
        }
    }
    if (path == NULL)
        return bad("no log named", NULL);
    if (peer_only && peer_path == NULL)
        return bad("--peer-only needs --peer LIB", NULL);
    note_env_conf("dv-replay", true);
    if (stack_mode && post_only)
        return bad("--stack and --post do not go together", NULL);
    if (stack_mode && !ordered)
        return bad("--stack and --concurrent do not go together (--stack replays on one thread)",
                   NULL);
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.backend = backend;
    for (unsigned k = 0; k < nconfs; k++) {
        if (dv_actor_config_parse(&cfg, confs[k]) != DV_OK) {
            fprintf(stderr, "dv-replay: --conf: %s\n", dv_last_error()->message);
            return 2;
        }
    }
    nstreams = cfg.streams;
    if (peer_path != NULL && peer_load(peer_path) != 0)
        return 1;
    int status = 1;
    replayer *threads = NULL;
    size_t nthreads = 0;
    key_order thread_keys = {0};
    if (load(path) != 0)
        goto out;
    uint64_t unmatched = 0;
    uint64_t peak_live = match(&unmatched);
    for (size_t i = 1; i < nrows; i++) {
        if (rows[i].device != rows[0].device) {
            fprintf(stderr,
                    "dv-replay: the log's rows name more than one device (%d, %d, ...): all "
                    "are replayed on the one actor\n",
                    rows[0].device, rows[i].device);
            break;
        }
    }

    /* Streams and threads, in order of first appearance. */
    for (size_t i = 0; i < nrows; i++) {
        ptrdiff_t k = key_place(&stream_keys, rows[i].stream);
        ptrdiff_t t = key_place(&thread_keys, rows[i].thread);
        if (k < 0 || t < 0) {
            fprintf(stderr, "dv-replay: out of memory\n");
            goto out;
        }
        /* (nstreams 0: the actor refuses it below) */
        rows[i].sidx = nstreams != 0 ? (dv_stream)((size_t)k % nstreams) : 0;
        rows[i].owner = (uint32_t)t;
    }
    if (thread_keys.n != 0 && (threads = calloc(thread_keys.n, sizeof(*threads))) == NULL) {
        fprintf(stderr, "dv-replay: out of memory\n");
        goto out;
    }
    for (; nthreads < thread_keys.n; nthreads++)
        threads[nthreads].thread = thread_keys.keys[nthreads];
    if (peer_path != NULL && peer_open(peer_path, cfg.device) != 0)
        goto out;

    for (int who = 0; who < 2; who++) { /* (none: no medians, said as n/a) */
        pass_ops[who] = calloc(passes, sizeof(*pass_ops[who]));
        pass_secs[who] = calloc(passes, sizeof(*pass_secs[who]));
        if (pass_ops[who] == NULL || pass_secs[who] == NULL) {
            free(pass_ops[who]);
            free(pass_secs[who]);
            pass_ops[who] = NULL;
            pass_secs[who] = NULL;
        }
    }
    /* The actor's replay; it is destroyed before the peer's begins. */
    dv_memory_stats ms = {0};
    dv_actor_stats st0 = {0}, st1 = {0};
    uint64_t ops = 0;
    double secs = 0;
    char backend_name[64] = "";
    if (!peer_only) {
        if (dv_actor_create(&cfg, &actor) != DV_OK) {
            fprintf(stderr, "dv-replay: %s\n", dv_last_error()->message);
            status = 2;
            goto out;
        }
        snprintf(backend_name, sizeof(backend_name), "%s", dv_actor_backend_name(actor));
        target = 0;
        dv_actor_stats_get(actor, &st0);
        if (stack_mode) {
            stack_run(passes, &ops, &secs, &ms.bytes.peak);
            if (dv_actor_resources(actor, stack_reserved_peak, &ms.reserved.peak) != DV_OK) {
                fprintf(stderr, "dv-replay: --stack: %s\n", dv_last_error()->message);
                goto out;
            }
        } else {
            run(threads, nthreads, passes, &ops, &secs);
            dv_memory_stats_get(actor, &ms);
        }
        dv_actor_stats_get(actor, &st1);
        dv_actor_destroy(actor);
        actor = NULL;
    }
    /* The peer's, from a clean start: its cache given back, its peaks
     * reset. */
    uint64_t peer_ops = 0, peer_alloc_peak = 0, peer_reserved_peak = 0, peer_reserved_now = 0;
    double peer_secs = 0;
    bool peer_stats = false;
    char peer_name[160] = "";
    if (peer_path != NULL) {
        const char *nm = peer.api.name();
        snprintf(peer_name, sizeof(peer_name), "%s", nm != NULL ? nm : "?");
        if (peer.api.trim != NULL)
            peer.api.trim();
        if (peer.api.reset_peaks != NULL)
            peer.api.reset_peaks();
        target = 1;
        run(threads, nthreads, passes, &peer_ops, &peer_secs);
        peer_stats = peer.api.stats != NULL &&
                     peer.api.stats(&peer_alloc_peak, &peer_reserved_peak, &peer_reserved_now) == 0;
    }

    uint64_t allocs = 0, frees = 0;
    for (size_t i = 0; i < nrows; i++) {
        allocs += rows[i].alloc && rows[i].size != 0;
        frees += !rows[i].alloc && rows[i].match >= 0 && rows[rows[i].match].size != 0;
    }
    allocs *= passes;
    frees *= passes;
    bool ours = !peer_only, theirs = peer_path != NULL;
    uint64_t nfail = atomic_load(&failures[0]), peer_nfail = atomic_load(&failures[1]);
    /* Over the trace's live peak; where allocations failed, over the peak
     * devactor held (the trace's counts bytes it never gave). */
    uint64_t live_base = nfail > 0 ? ms.bytes.peak : peak_live;
    double ratio = live_base ? (double)ms.reserved.peak / (double)live_base : 0;
    double rate = secs > 0 ? (double)ops / secs : 0;
    double peer_rate = peer_secs > 0 ? (double)peer_ops / peer_secs : 0;
    double peer_ratio = peak_live ? (double)peer_reserved_peak / (double)peak_live : 0;
    bool vs_reserved = ours && peer_stats && peer_reserved_peak > 0;
    bool vs_ops = ours && theirs && peer_rate > 0;
    double reserved_vs = vs_reserved ? (double)ms.reserved.peak / (double)peer_reserved_peak : 0;
    double ops_vs = vs_ops ? rate / peer_rate : 0;
    double later = ours ? later_rate(0, passes, ops, secs) : 0;
    double peer_later = theirs ? later_rate(1, passes, peer_ops, peer_secs) : 0;
    bool vs_later = later > 0 && peer_later > 0;
    double later_vs = vs_later ? later / peer_later : 0;
    double lo, hi;
    double median = ours ? later_median(0, passes, &lo, &hi) : 0;
    double peer_median = theirs ? later_median(1, passes, &lo, &hi) : 0;
    bool vs_median = median > 0 && peer_median > 0;
    double median_vs = vs_median ? median / peer_median : 0;
    for (int who = 0; who < 2 && verbose_failures > 0; who++) {
        uint64_t n = atomic_load(&noted[who]);
        if (n > (uint64_t)verbose_failures)
            fprintf(stderr, "dv-replay: %s%" PRIu64 " more refusals not named (the first %d are)\n",
                    who == 1 ? "peer: " : "", n - (uint64_t)verbose_failures, verbose_failures);
    }
    char b[16][32];
    /* The actor's driver work per pass: mappings made and unmapped, and
     * calls into the driver in all (the actor's start included). */
    double maps = (double)(st1.memory_maps - st0.memory_maps) / passes;
    double unmaps = (double)(st1.memory_unmaps - st0.memory_unmaps) / passes;
    double calls = (double)(st1.driver_calls - st0.driver_calls) / passes;
    double remaps = (double)(st1.memory_remaps - st0.memory_remaps) / passes;
    /* Passes 2..N alone: the steady state's calls (none, for a pool with
     * aliases that learnt a workload that repeats). */
    bool later_known = ours && passes > 1 && have_first_stats;
    double later_calls =
        later_known ? (double)(st1.driver_calls - first_stats.driver_calls) / (passes - 1) : 0;
    if (csv) {
        printf("rows,allocs,frees,failures,peak_live,peak_held,peak_reserved,reserved_over_live,"
               "ops_per_s%s,maps_per_pass,unmaps_per_pass,driver_calls_per_pass,"
               "later_ops_per_s%s,later_calls_per_pass,later_median_ops_per_s%s\n",
               theirs ? ",peer_failures,peer_peak_allocated,peer_peak_reserved,peer_ops_per_s,"
                        "reserved_vs_peer,ops_vs_peer"
                      : "",
               theirs ? ",peer_later_ops_per_s,later_vs_peer" : "",
               theirs ? ",peer_later_median_ops_per_s,later_median_vs_peer" : "");
        printf("%zu,%" PRIu64 ",%" PRIu64 ",%s,%" PRIu64 ",%s,%s,%s,%s", nrows, allocs, frees,
               u64_or_na(b[0], 32, ours, nfail), peak_live,
               u64_or_na(b[1], 32, ours, ms.bytes.peak),
               u64_or_na(b[2], 32, ours, ms.reserved.peak),
               ratio_or_na(b[3], 32, ours && live_base != 0, "%.3f", ratio),
               ratio_or_na(b[4], 32, ours, "%.0f", rate));
        if (theirs)
            printf(",%" PRIu64 ",%s,%s,%.0f,%s,%s", peer_nfail,
                   u64_or_na(b[5], 32, peer_stats, peer_alloc_peak),
                   u64_or_na(b[6], 32, peer_stats, peer_reserved_peak), peer_rate,
                   ratio_or_na(b[7], 32, vs_reserved, "%.3f", reserved_vs),
                   ratio_or_na(b[8], 32, vs_ops, "%.3f", ops_vs));
        printf(",%s,%s,%s", ratio_or_na(b[9], 32, ours, "%.1f", maps),
               ratio_or_na(b[10], 32, ours, "%.1f", unmaps),
               ratio_or_na(b[11], 32, ours, "%.1f", calls));
        /* The warm passes' rates (passes 2..N): n/a with one pass. */
        printf(",%s", ratio_or_na(b[12], 32, later > 0, "%.0f", later));
        if (theirs)
            printf(",%s,%s", ratio_or_na(b[13], 32, peer_later > 0, "%.0f", peer_later),
                   ratio_or_na(b[14], 32, vs_later, "%.3f", later_vs));
        printf(",%s", ratio_or_na(b[15], 32, later_known, "%.1f", later_calls));
        /* The median of the warm passes' own rates (n/a with one pass). */
        printf(",%s", ratio_or_na(b[12], 32, median > 0, "%.0f", median));
        if (theirs)
            printf(",%s,%s", ratio_or_na(b[13], 32, peer_median > 0, "%.0f", peer_median),
                   ratio_or_na(b[14], 32, vs_median, "%.3f", median_vs));
        printf("\n");
    } else {
        char in_passes[48] = "";
        if (passes > 1)
            snprintf(in_passes, sizeof(in_passes), " in %u passes", passes);
        printf("dv-replay: %s%s%s, %zu threads, %u streams%s\n", path, ours ? " on " : "",
               backend_name, nthreads, (unsigned)stream_keys.n, in_passes);
        printf("  rows %zu: %" PRIu64 " allocations, %" PRIu64 " frees%s (%" PRIu64
               " frees of no live block, never allocated or freed already, skipped%s)\n",
               nrows, allocs, frees, in_passes, unmatched, passes > 1 ? " in each pass" : "");
        if (zero_allocs != 0)
            printf("  %" PRIu64 " zero-byte allocations skipped, with their frees\n", zero_allocs);
        if (over_live != 0)
            printf("  %" PRIu64 " allocations at the address of a live block: that block was "
                   "freed first\n",
                   over_live);
        printf("  peak live bytes (the trace's)      %" PRIu64 "\n", peak_live);
        if (ours) {
            printf("  peak bytes held (devactor)         %" PRIu64 "%s\n", ms.bytes.peak,
                   ms.bytes.peak > peak_live && nthreads > 1 && !ordered && !stack_mode
                       ? "  (threads interleaved unlike the log, --concurrent)"
                       : "");
            if (live_base != 0)
                printf("  peak bytes reserved from device    %" PRIu64 "  (%.3f x peak %s)\n",
                       ms.reserved.peak, ratio, nfail > 0 ? "held" : "live");
            else
                printf("  peak bytes reserved from device    %" PRIu64 "\n", ms.reserved.peak);
            printf("  allocation failures                %" PRIu64 "\n", nfail);
            printf("  %.0f ops/s (%" PRIu64 " ops in %.3f s)\n", rate, ops, secs);
            passes_split(0, passes, ops, secs);
            printf("  per pass: %.1f mappings made (%.1f of moved memory), %.1f unmapped, %.1f "
                   "driver calls",
                   maps, remaps, unmaps, calls);
            if (later_known)
                printf(" (passes 2-%u: %.1f)", passes, later_calls);
            printf("\n");
        }
        if (theirs) {
            printf("peer: %s (%s), %u streams\n", peer_name, peer_path, peer.nstreams);
            printf("  peak live bytes (the same trace)   %" PRIu64 "\n", peak_live);
            printf("  peak bytes allocated (the peer's)  %s\n",
                   u64_or_na(b[5], 32, peer_stats, peer_alloc_peak));
            printf("  peak bytes reserved (the peer's)   %s",
                   u64_or_na(b[6], 32, peer_stats, peer_reserved_peak));
            if (peer_stats)
                printf("  (%.3f x peak live; %" PRIu64 " still reserved at the end)", peer_ratio,
                       peer_reserved_now);
            printf("\n");
            printf("  allocation failures                %" PRIu64 "\n", peer_nfail);
            printf("  %.0f ops/s (%" PRIu64 " ops in %.3f s)\n", peer_rate, peer_ops, peer_secs);
            passes_split(1, passes, peer_ops, peer_secs);
            if (ours)
                printf("devactor / peer: peak reserved %s, ops/s %s\n",
                       ratio_or_na(b[7], 32, vs_reserved, "%.3f", reserved_vs),
                       ratio_or_na(b[8], 32, vs_ops, "%.3f", ops_vs));
        }
    }
    status = nfail + peer_nfail > 0 ? 1 : 0;
    if (tool_stdout_done("dv-replay") != 0)
        status = 1;
out:
    if (peer_path != NULL)
        peer_unload();
    free(threads);
    free(rows);
    key_order_free(&stream_keys);
    key_order_free(&thread_keys);
    return status;
}
