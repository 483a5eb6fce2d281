/*
 * logging: a CSV allocation log over any inner resource, and its sinks.
 *
 * Design
 * ------
 * One row per allocate, free and failure of either, after the inner
 * resource answered, so a row says what happened, not what was asked:
 *
 *   Thread,Time,Action,Pointer,Size,Stream,Device,Tag,QueryId
 *
 *   Thread   the kernel id (gettid) of the thread that posted the
 *            allocation or the last release (env->poster), else the
 *            calling thread's: numeric, the number debuggers and perf show
 *   Time     wall-clock seconds since the Unix epoch, with microseconds
 *   Action   allocate | free | allocate failure | free failure
 *   Pointer  0x-hex device address (0x0 for a failed allocation)
 *   Size     bytes the caller asked for (block.requested): what a replay
 *            asks for again, and the same number on a block's allocate
 *            and free rows
 *   Stream   the stream id the operation is ordered on (a free is ordered
 *            on the block's alloc stream)
 *   Device   ordinal
 *   Tag      the caller's tag, CSV-quoted where it holds a comma, a quote
 *            or a line break
 *   QueryId  the query the allocation was posted under (dv_query_set)
 *
 * The first six columns keep the names and meanings of RMM's
 * logging_resource_adaptor, so a reader of one log can read the other;
 * where RMM writes a stream handle we write our stream id, and our time
 * carries the date (seconds since the epoch) instead of a time of day.
 *
 * A row is formatted on the caller's stack and handed to the sink whole,
 * under the sink's mutex: one sink may serve the stacks of several devices,
 * each driven by its own actor thread, and rows never interleave.  Sinks
 * write the header once, when made (a file sink only into an empty file,
 * since it appends).  The log never fails an allocation: a row the sink
 * cannot take (a write error, no memory to grow) is counted and dropped.
 *
 * The actor's own log layer writes no row for a refused allocation: the
 * actor retries refusals (its out-of-memory path) and writes one row for
 * the answer its caller gets (dv__log_refusal), whichever layer refused.
 *
 * Everything but allocate and deallocate is forwarded unchanged; the
 * blocks are the inner resource's own.  A failure the dv_res_* wrapper
 * refuses before the resource is reached (a NULL block, a block already
 * marked freed) writes no row.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/proc.h"
#include "resources/resource.h"

/* ------------------------------------------------------------------------
 * Sinks
 * ------------------------------------------------------------------------ */

typedef enum sink_kind {
    SINK_FILE = 1,
    SINK_MEMORY,
    SINK_NULL,
} sink_kind;

struct dv_log_sink {
    sink_kind kind;
    pthread_mutex_t mu; /* rows from several threads stay whole */
    FILE *file;         /* SINK_FILE */
    char *text;         /* SINK_MEMORY: always NUL-terminated */
    size_t len, cap;
    uint64_t rows;
    uint64_t dropped; /* rows the sink could not take */
};

#define LOG_HEADER_LINE DV_LOG_HEADER "\n"

static int sink_new(sink_kind kind, dv_log_sink **out, const char *call)
{
    dv_log_sink *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return dv__fail(DV_ENOMEM, call, "%s: out of host memory", call);
    s->kind = kind;
    pthread_mutex_init(&s->mu, NULL);
    *out = s;
    return DV_OK;
}

static void sink_free(dv_log_sink *s)
{
    pthread_mutex_destroy(&s->mu);
    free(s->text);
    free(s);
}

/* Append to the memory sink; false when it cannot grow. */
static bool memory_append(dv_log_sink *s, const char *p, size_t n)
{
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (s->len + n + 1 > cap)
            cap *= 2;
        char *text = realloc(s->text, cap);
        if (text == NULL)
            return false;
        s->text = text;
        s->cap = cap;
    }
    memcpy(s->text + s->len, p, n);
    s->len += n;
    s->text[s->len] = '\0';
    return true;
}

/* Hand one whole row (or the header) to the sink. */
static void sink_write(dv_log_sink *s, const char *p, size_t n)
{
    pthread_mutex_lock(&s->mu);
    bool taken = true;
    switch (s->kind) {
    case SINK_FILE:
        /* Flushed per row: the log must survive the crash it explains. */
        taken = fwrite(p, 1, n, s->file) == n && fflush(s->file) == 0;
        break;
    case SINK_MEMORY:
        taken = memory_append(s, p, n);
        break;
    case SINK_NULL:
        break;
    }
    if (taken)
        s->rows++;
    else
        s->dropped++;
    pthread_mutex_unlock(&s->mu);
}

int dv__log_sink_file(const char *path, dv_log_sink **out)
{
    int rc;
    if (path == NULL || out == NULL)
        return dv__fail(DV_EINVAL, "log_sink_file", "log_sink_file: NULL path or out");
    dv_log_sink *s = NULL;
    if ((rc = sink_new(SINK_FILE, &s, "log_sink_file")) != DV_OK)
        return rc;
    /* "e": close-on-exec, so a child process does not inherit the log. */
    s->file = fopen(path, "ae");
    if (s->file == NULL) {
        int err = errno;
        sink_free(s);
        return dv__fail(DV_EIO, "log_sink_file", "log_sink_file: cannot open %s: %s", path,
                        strerror(err));
    }
    /* Appending: the header goes only into a file that has none yet. */
    if (fseek(s->file, 0, SEEK_END) != 0 || ftell(s->file) == 0) {
        if (fwrite(LOG_HEADER_LINE, 1, strlen(LOG_HEADER_LINE), s->file) !=
                strlen(LOG_HEADER_LINE) ||
            fflush(s->file) != 0) {
            fclose(s->file);
            sink_free(s);
            return dv__fail(DV_EINVAL, "log_sink_file", "log_sink_file: cannot write %s", path);
        }
    }
    *out = s;
    return DV_OK;
}

int dv__log_sink_memory(dv_log_sink **out)
{
    int rc;
    if (out == NULL)
        return dv__fail(DV_EINVAL, "log_sink_memory", "log_sink_memory: NULL out");
    dv_log_sink *s = NULL;
    if ((rc = sink_new(SINK_MEMORY, &s, "log_sink_memory")) != DV_OK)
        return rc;
    if (!memory_append(s, LOG_HEADER_LINE, strlen(LOG_HEADER_LINE))) {
        sink_free(s);
        return dv__fail(DV_ENOMEM, "log_sink_memory", "log_sink_memory: out of host memory");
    }
    *out = s;
    return DV_OK;
}

int dv__log_sink_null(dv_log_sink **out)
{
    if (out == NULL)
        return dv__fail(DV_EINVAL, "log_sink_null", "log_sink_null: NULL out");
    return sink_new(SINK_NULL, out, "log_sink_null");
}

/* Not locked: read it once the resources writing to it are quiet (the
 * pointer moves when the buffer grows). */
const char *dv__log_sink_text(const dv_log_sink *sink, size_t *len)
{
    bool has_text = sink != NULL && sink->kind == SINK_MEMORY;
    if (len != NULL)
        *len = has_text ? sink->len : 0;
    return has_text ? sink->text : "";
}

void dv__log_sink_destroy(dv_log_sink *sink)
{
    if (sink == NULL)
        return;
    if (sink->kind == SINK_FILE && sink->file != NULL)
        fclose(sink->file);
    sink_free(sink);
}

/* ------------------------------------------------------------------------
 * Rows
 * ------------------------------------------------------------------------ */

typedef struct log_row {
    uint32_t thread;
    const char *action;
    dv_dptr ptr;
    uint64_t size;
    dv_stream_id stream;
    int device;
    dv_tag tag;
} log_row;


static bool needs_quotes(const char *s)
{
    return strpbrk(s, ",\"\r\n") != NULL;
}

/* Write field into dst (cap bytes), quoted where CSV needs it; the length
 * it needs (like snprintf), whatever cap was. */
static size_t csv_field(char *dst, size_t cap, const char *field)
{
    size_t n = 0;
#define PUT(c)                                                                                     \
    do {                                                                                           \
        if (n + 1 < cap)                                                                           \
            dst[n] = (c);                                                                          \
        n++;                                                                                       \
    } while (0)
    if (!needs_quotes(field)) {
        for (const char *p = field; *p != '\0'; p++)
            PUT(*p);
    } else {
        PUT('"');
        for (const char *p = field; *p != '\0'; p++) {
            if (*p == '"')
                PUT('"');
            PUT(*p);
        }
        PUT('"');
    }
#undef PUT
    if (cap > 0)
        dst[n < cap ? n : cap - 1] = '\0';
    return n;
}

/* Format one row into buf; its length, or the length it would need. */
static size_t format_row(char *buf, size_t cap, const log_row *row, const struct timespec *now)
{
    const char *tag = row->tag.name != NULL ? row->tag.name : "";
    int head = snprintf(buf, cap, "%u,%lld.%06ld,%s,0x%" PRIx64 ",%" PRIu64 ",%u,%d,", row->thread,
                        (long long)now->tv_sec, now->tv_nsec / 1000L, row->action, row->ptr,
                        row->size, row->stream, row->device);
    size_t n = head > 0 ? (size_t)head : 0;
    n += csv_field(n < cap ? buf + n : NULL, n < cap ? cap - n : 0, tag);
    int tail = snprintf(n < cap ? buf + n : NULL, n < cap ? cap - n : 0, ",%" PRIu64 "\n",
                        row->tag.query_id);
    return n + (tail > 0 ? (size_t)tail : 0);
}

static void log_write(dv_log_sink *sink, const log_row *row)
{
    if (sink->kind == SINK_NULL)
        return;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char stack[512];
    size_t n = format_row(stack, sizeof(stack), row, &now);
    if (n < sizeof(stack)) {
        sink_write(sink, stack, n);
        return;
    }
    /* A long tag: format again into a buffer that fits. */
    char *heap = malloc(n + 1);
    if (heap == NULL) {
        pthread_mutex_lock(&sink->mu);
        sink->dropped++;
        pthread_mutex_unlock(&sink->mu);
        return;
    }
    n = format_row(heap, n + 1, row, &now);
    sink_write(sink, heap, n);
    free(heap);
}

/* ------------------------------------------------------------------------
 * The resource
 * ------------------------------------------------------------------------ */

/* The thread a row names: the one that posted what the owner serves, or
 * the calling thread where nothing was posted (the resource used alone). */
static uint32_t poster_of(const dv_resource *r)
{
    return r->env != NULL && r->env->poster != 0 ? r->env->poster : dv__thread_id();
}

typedef struct logging_res {
    dv_resource base;
    dv_log_sink *sink;
    bool owns_sink; /* made for it (dv_resource_logging): destroyed with it */
    bool refusals;  /* writes allocate failure rows (else its owner does) */
} logging_res;

#define LOGGING(r) ((logging_res *)(r))

static int logging_allocate(dv_resource *r, uint64_t bytes, dv_stream_id stream, dv_tag tag,
                            dv_block *out)
{
    int rc = dv__res_allocate(r->upstream, bytes, stream, tag, out);
    uint32_t who = poster_of(r);
    if (rc == DV_OK)
        log_write(LOGGING(r)->sink, &(log_row){who, "allocate", out->ptr, out->requested, stream,
                                               out->device, out->tag});
    else if (LOGGING(r)->refusals)
        log_write(LOGGING(r)->sink,
                  &(log_row){who, "allocate failure", 0, bytes, stream, r->device, tag});
    return rc;
}

static int logging_deallocate(dv_resource *r, dv_block *block)
{
    log_row row = {poster_of(r),  "free",        block->ptr, block->requested,
                   block->alloc_stream, block->device, block->tag};
    int rc = dv__res_deallocate(r->upstream, block);
    if (rc != DV_OK) {
        row.action = "free failure";
        log_write(LOGGING(r)->sink, &row);
        if (block->state == DV_BLOCK_LIVE)
            return rc;       /* refused: still live */
        row.action = "free"; /* given back all the same (a guard's damaged canary) */
    }
    log_write(LOGGING(r)->sink, &row);
    return rc;
}

static void logging_destroy(dv_resource *r)
{
    if (LOGGING(r)->owns_sink)
        dv__log_sink_destroy(LOGGING(r)->sink);
    free(LOGGING(r));
}

static const dv_res_ops logging_ops = {
    .name = "logging",
    .allocate = logging_allocate,
    .deallocate = logging_deallocate,
    .destroy = logging_destroy,
};

/* The free row of a block its stack's owner dropped whole (see the header). */
void dv__log_dropped(dv_log_sink *sink, uint32_t thread, const dv_block *b)
{
    log_write(sink, &(log_row){thread, "free", b->ptr, b->requested, b->alloc_stream, b->device,
                               b->tag});
}

/* The row of a refusal the owner of a stack answered (see the header). */
void dv__log_refusal(dv_log_sink *sink, uint32_t thread, uint64_t bytes, dv_stream_id stream,
                     int device, dv_tag tag)
{
    log_write(sink, &(log_row){thread, "allocate failure", 0, bytes, stream, device, tag});
}

int dv__logging_resource_create(dv_resource *upstream, dv_log_sink *sink, bool refusals,
                                dv_resource **out)
{
    if (upstream == NULL || sink == NULL || out == NULL)
        return dv__fail(DV_EINVAL, "logging_resource_create",
                        "logging_resource_create: NULL upstream, sink or out");
    logging_res *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return dv__fail(DV_ENOMEM, "logging_resource_create", "out of host memory");
    l->base = (dv_resource){.ops = &logging_ops,
                            .upstream = upstream,
                            .env = upstream->env,
                            .device = upstream->device};
    l->sink = sink;
    l->refusals = refusals;
    *out = &l->base;
    return DV_OK;
}

int dv__logging_resource_create_file(dv_resource *upstream, const char *path, dv_resource **out)
{
    dv_log_sink *sink = NULL;
    int rc = dv__log_sink_file(path, &sink);
    if (rc != DV_OK)
        return rc;
    if ((rc = dv__logging_resource_create(upstream, sink, true, out)) != DV_OK) {
        dv__log_sink_destroy(sink);
        return rc;
    }
    LOGGING(*out)->owns_sink = true;
    return DV_OK;
}
