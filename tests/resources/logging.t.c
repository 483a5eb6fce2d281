/*
 * logging: the CSV log parses back into the events that made it.  A
 * scripted sequence (allocations on two streams, a tag that needs CSV
 * quoting, an injected allocation failure, a free of a block that is not
 * there, an untagged block) goes through a file-sink logger stacked on a
 * memory-sink logger stacked on the async resource.  The memory sink's rows
 * must give back action, pointer, size, stream, device, tag and query id of
 * each event, the calling thread and a time inside the run; the header is
 * exact; the file sink holds the same rows (each logger reads the clock
 * itself, so Time is left out of that comparison) and appending to it
 * later does not repeat the header.
 */
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "driver/sim.h"
#include "resources/resource.h"
#include "tap.h"

#define MIB        (UINT64_C(1) << 20)
#define NFIELDS    9
#define FIELD_SIZE 128
#define MAX_ROWS   32

typedef char record[NFIELDS][FIELD_SIZE];

typedef struct event {
    const char *action;
    dv_dptr ptr;
    uint64_t size;
    dv_stream_id stream;
    int device;
    const char *tag;
    uint64_t query_id;
} event;

/*
 * One CSV record from *p (RFC 4180: quoted fields, "" inside them); the
 * number of fields, 0 at the end of the text, -1 on malformed input.
 */
static int parse_record(const char **p, record out)
{
    const char *s = *p;
    int n = 0;

    if (*s == '\0')
        return 0;
    for (;;) {
        char field[FIELD_SIZE];
        size_t len = 0;
#define ADD(c)                                                                                     \
    do {                                                                                           \
        if (len + 1 < FIELD_SIZE)                                                                  \
            field[len++] = (c);                                                                    \
    } while (0)
        if (*s == '"') {
            for (s++;; s++) {
                if (*s == '\0')
                    return -1;
                if (*s == '"') {
                    if (s[1] != '"')
                        break;
                    s++;
                }
                ADD(*s);
            }
            s++; /* the closing quote */
        } else {
            for (; *s != '\0' && *s != ',' && *s != '\n'; s++)
                ADD(*s);
        }
#undef ADD
        field[len] = '\0';
        if (n < NFIELDS)
            memcpy(out[n], field, len + 1);
        n++;
        if (*s == ',') {
            s++;
            continue;
        }
        if (*s == '\n')
            s++;
        else if (*s != '\0')
            return -1;
        break;
    }
    *p = s;
    return n;
}

/* Parse the whole text: header into hdr, rows into rows; row count or -1. */
static int parse_log(const char *text, record hdr, record rows[MAX_ROWS])
{
    const char *p = text;
    if (parse_record(&p, hdr) != NFIELDS)
        return -1;
    int n = 0, k;
    while ((k = parse_record(&p, rows[n < MAX_ROWS ? n : MAX_ROWS - 1])) != 0) {
        if (k != NFIELDS)
            return -1;
        n++;
    }
    return n;
}

/* A record without its Time column, for comparing two loggers' rows. */
static void without_time(const record r, char *out, size_t cap)
{
    size_t n = 0;
    for (int i = 0; i < NFIELDS; i++)
        if (i != 1)
            n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s|", r[i]);
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)len + 1);
    if (text != NULL) {
        size_t got = fread(text, 1, (size_t)len, f);
        text[got] = '\0';
    }
    fclose(f);
    return text;
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int count_lines_equal(const char *text, const char *line)
{
    int n = 0;
    size_t len = strlen(line);
    for (const char *p = text; *p != '\0';) {
        const char *end = strchr(p, '\n');
        size_t l = end ? (size_t)(end - p) : strlen(p);
        n += l == len && memcmp(p, line, len) == 0;
        p += l + (end != NULL);
    }
    return n;
}

static bool row_matches(const record r, const event *e, long tid, double t0, double t1)
{
    char *end;
    bool good = true;
    double t = strtod(r[1], &end);
    good &= strtol(r[0], NULL, 10) == tid;
    /* Rows carry microseconds, truncated: allow for that and rounding. */
    good &= *end == '\0' && t >= t0 - 2e-6 && t <= t1 + 2e-6;
    good &= strcmp(r[2], e->action) == 0;
    good &= strncmp(r[3], "0x", 2) == 0 && strtoull(r[3] + 2, NULL, 16) == e->ptr;
    good &= strtoull(r[4], NULL, 10) == e->size;
    good &= strtoul(r[5], NULL, 10) == e->stream;
    good &= strtol(r[6], NULL, 10) == e->device;
    good &= strcmp(r[7], e->tag) == 0;
    good &= strtoull(r[8], NULL, 10) == e->query_id;
    if (!good)
        diag("row: %s,%s,%s,%s,%s,%s,%s,[%s],%s; wanted %s,0x%llx,%llu,%u,%d,[%s],%llu", r[0], r[1],
             r[2], r[3], r[4], r[5], r[6], r[7], r[8], e->action, (unsigned long long)e->ptr,
             (unsigned long long)e->size, e->stream, e->device, e->tag,
             (unsigned long long)e->query_id);
    return good;
}

int main(void)
{
    static record rows[MAX_ROWS], file_rows[MAX_ROWS];
    record hdr, file_hdr;
    dv_driver_config cfg;
    dv_driver *drv;
    dv_res_env env;
    dv_resource *async, *mem_log, *file_log, *null_log;
    dv_log_sink *mem, *file, *null;
    dv_block a, b, c, bad, nothing;
    event ev[MAX_ROWS];
    int nev = 0;
    char path[] = "/tmp/dv-logging-XXXXXX";
    const char *quoted_tag = "join, \"hash\" build";

    plan(37);
    dv__driver_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    cfg.sim.memory_bytes = 256 * MIB;
    cfg.sim.seed = 2002;
    cfg.sim.delay_max_us = 20;
    is_status(dv__driver_open(&cfg, &drv), DV_OK, "open the sim");
    is_status(dv__res_env_init(&env, drv, 0, 2), DV_OK, "environment with 2 streams");
    is_status(dv__async_resource_create(&env, &async), DV_OK, "async resource");
    int fd = mkstemp(path);
    ok(fd >= 0, "temporary file %s", path);
    close(fd);
    is_status(dv__log_sink_memory(&mem), DV_OK, "memory sink");
    is_status(dv__log_sink_file(path, &file), DV_OK, "file sink");
    is_status(dv__logging_resource_create(async, mem, true, &mem_log), DV_OK, "logger on the memory sink");
    is_status(dv__logging_resource_create(mem_log, file, true, &file_log), DV_OK,
              "logger on the file sink, stacked on it");
    ok(dv__res_supports_block_use_tracking(file_log), "tracking support is the async resource's");

    long tid = (long)syscall(SYS_gettid);
    double t0 = wall_now();
    is_status(dv__res_allocate(file_log, 1000, 0, (dv_tag){"scan", 7}, &a), DV_OK,
              "allocate 1000 bytes on stream 0, tag scan/7");
    ev[nev++] = (event){"allocate", a.ptr, 1000, 0, 0, "scan", 7};
    is_status(dv__res_allocate(file_log, 4096, 1, (dv_tag){quoted_tag, 8}, &b), DV_OK,
              "allocate 4096 bytes on stream 1, a tag with a comma and quotes");
    ev[nev++] = (event){"allocate", b.ptr, 4096, 1, 0, quoted_tag, 8};
    is_u64(dv__res_bytes_outstanding(file_log), dv__res_bytes_outstanding(async),
           "bytes_outstanding is the async resource's");
    is_status(dv__res_prepare_block_use(file_log, dv__block_id_of(&b), 0, DV_ACCESS_READ), DV_OK,
              "prepare_block_use forwards");
    dv__sim_fail_alloc_nth(drv, 1);
    is_status(dv__res_allocate(file_log, 2048, 0, (dv_tag){"agg", 9}, &nothing), DV_EDEVICE_OOM,
              "an injected device OOM");
    ev[nev++] = (event){"allocate failure", 0, 2048, 0, 0, "agg", 9};
    is_status(dv__res_deallocate(file_log, &a), DV_OK, "free the first block");
    ev[nev++] = (event){"free", a.ptr, 1000, 0, 0, "scan", 7};
    bad = b;
    bad.ptr += 256;
    is_status(dv__res_deallocate(file_log, &bad), DV_EUSE_AFTER_FREE,
              "free of an address inside a block fails");
    ev[nev++] = (event){"free failure", b.ptr + 256, 4096, 1, 0, quoted_tag, 8};
    is_status(dv__res_allocate(file_log, 256, 1, (dv_tag){NULL, 0}, &c), DV_OK,
              "allocate without a tag");
    ev[nev++] = (event){"allocate", c.ptr, 256, 1, 0, "untagged", 0};
    dv__res_deallocate(file_log, &b);
    ev[nev++] = (event){"free", b.ptr, 4096, 1, 0, quoted_tag, 8};
    dv__res_deallocate(file_log, &c);
    ev[nev++] = (event){"free", c.ptr, 256, 1, 0, "untagged", 0};
    double t1 = wall_now();

    size_t len;
    const char *text = dv__log_sink_text(mem, &len);
    ok(text != NULL && strlen(text) == len, "the memory sink's text is NUL-terminated at len");
    ok(strncmp(text, DV_LOG_HEADER "\n", strlen(DV_LOG_HEADER) + 1) == 0,
       "the first line is exactly the header");
    int nrows = parse_log(text, hdr, rows);
    is_int(nrows, nev, "one row per event");
    int matching = 0;
    for (int i = 0; i < nrows && i < nev; i++)
        matching += row_matches(rows[i], &ev[i], tid, t0, t1);
    is_int(matching, nev, "every row parses back into its event (thread, time, fields)");
    ok(strstr(text, "\"join, \"\"hash\"\" build\"") != NULL, "the tag is CSV-quoted");

    char *ftext = read_file(path);
    ok(ftext != NULL && parse_log(ftext, file_hdr, file_rows) == nev,
       "the file sink parses into as many rows");
    int same = 0;
    for (int i = 0; ftext != NULL && i < nev; i++) {
        char x[1024], y[1024];
        without_time(rows[i], x, sizeof(x));
        without_time(file_rows[i], y, sizeof(y));
        same += strcmp(x, y) == 0;
    }
    is_int(same, nev, "the file sink's rows are the memory sink's (Time aside)");
    ok(ftext != NULL && strncmp(ftext, text, strlen(DV_LOG_HEADER) + 1) == 0,
       "the file starts with the same header");
    free(ftext);

    /* Appending to the file later: rows added, header not repeated. */
    dv__res_destroy_stack(file_log); /* both loggers and the async resource */
    dv__log_sink_destroy(file);
    is_status(dv__async_resource_create(&env, &async), DV_OK, "a new async resource");
    is_status(dv__log_sink_file(path, &file), DV_OK, "reopen the file sink");
    dv__logging_resource_create(async, file, true, &file_log);
    dv__res_allocate(file_log, 512, 0, (dv_tag){"again", 1}, &a);
    dv__res_deallocate(file_log, &a);
    dv__res_destroy_stack(file_log);
    dv__log_sink_destroy(file);
    ftext = read_file(path);
    ok(ftext != NULL && parse_log(ftext, file_hdr, file_rows) == nev + 2,
       "appending added two rows");
    is_int(ftext ? count_lines_equal(ftext, DV_LOG_HEADER) : -1, 1, "the header is there once");
    free(ftext);
    unlink(path);

    /* The null sink takes rows and keeps nothing. */
    is_status(dv__async_resource_create(&env, &async), DV_OK, "a third async resource");
    is_status(dv__log_sink_null(&null), DV_OK, "null sink");
    dv__logging_resource_create(async, null, true, &null_log);
    is_status(dv__res_allocate(null_log, 512, 0, (dv_tag){"x", 0}, &a), DV_OK,
              "allocate through the null logger");
    is_status(dv__res_deallocate(null_log, &a), DV_OK, "free through the null logger");
    text = dv__log_sink_text(null, &len);
    ok(text != NULL && len == 0 && text[0] == '\0', "the null sink has no text");

    dv__res_reap_pending(null_log);
    is_u64(dv__res_bytes_outstanding(null_log), 0, "clean close: nothing outstanding");
    dv__res_destroy_stack(null_log);
    dv__log_sink_destroy(null);

    /* Under a guard, a damaged canary makes the free fail, and the guard
     * frees the block all the same: a free failure row, then its free. */
    dv_log_sink *gmem;
    dv_resource *guard, *guard_log;
    dv_guard_config gcfg;
    dv__guard_config_init(&gcfg);
    bool made = dv__async_resource_create(&env, &async) == DV_OK &&
                dv__guard_resource_create(async, &gcfg, &guard) == DV_OK &&
                dv__log_sink_memory(&gmem) == DV_OK &&
                dv__logging_resource_create(guard, gmem, true, &guard_log) == DV_OK;
    int frc = DV_EINVAL;
    if (made && dv__res_allocate(guard_log, 1000, 0, (dv_tag){"victim", 4}, &a) == DV_OK &&
        dv__drv_memset_d8(env.streams[0], a.ptr + 1000, 0x11, 1) == DV_OK)
        frc = dv__res_deallocate(guard_log, &a);
    text = made ? dv__log_sink_text(gmem, &len) : NULL;
    const char *failure = text != NULL ? strstr(text, ",free failure,") : NULL;
    const char *freed = failure != NULL ? strstr(failure, ",free,") : NULL;
    ok(frc == DV_EOUT_OF_BOUNDS && failure != NULL && freed != NULL,
       "a guard's damaged canary: the free fails (%s), and the log has a free failure row, "
       "then the block's free row",
       dv_err_name(frc));
    if (made) {
        dv__res_reap_pending(guard_log);
        dv__res_destroy_stack(guard_log);
        dv__log_sink_destroy(gmem);
    }
    dv__log_sink_destroy(mem);
    dv__res_env_fini(&env);
    is_u64(dv__sim_allocated_bytes(drv, 0), 0, "clean close: the device holds nothing");
    dv__driver_close(drv);
    return tap_done();
}
