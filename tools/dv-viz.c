/*
 * dv-viz: renders a devactor allocation log or a live-memory snapshot as a
 * self-contained HTML page or SVG chart, or its per-series summary as CSV.
 *
 * Inputs
 * ------
 * One CSV file (or standard input), told apart by its header line:
 *
 *   log       Thread,Time,Action,Pointer,Size,Stream,Device,Tag,QueryId
 *             one row per allocate, free, allocate failure, free failure
 *             (src/resources/logging.c writes it)
 *   snapshot  Pointer,Size,Requested,Stream,Device,Tag,QueryId,Thread,Time,Age
 *             one row per block live at one moment
 *
 * Times are epoch seconds with microseconds and are kept as integer
 * microseconds, so that sorting and peak times are exact.  Fields are
 * RFC 4180 (a tag may hold quotes, commas and line breaks), lines may end
 * in CRLF, and empty lines are skipped.  Anything else (another header, a
 * row with the wrong number of fields, a number that does not parse) is
 * fatal, named by file and line: a chart drawn from a half-understood log
 * would be worse than none.
 *
 * Outputs
 * -------
 * From a log, a stacked area chart of live bytes over time, one band per
 * series (tag, query id or device); from a snapshot, bars of live bytes
 * per series and by age.  HTML adds tables of the numbers; --csv gives the
 * per-series table alone for scripts.  Only the --top series by peak get a
 * band of their own, the rest are summed into "other" (with a series of
 * the program's own named "other", which so never gets a band of its
 * own), so that a log with thousands of tags still gives a readable chart.
 *
 * Design
 * ------
 * The file is streamed through a small CSV state machine; each row becomes
 * a fixed-size event and series names are interned, so memory is a few
 * dozen bytes per row.  Threads write their rows in the order they got the
 * log's mutex, not in time order, so the events are merge-sorted (stable:
 * rows of one microsecond keep their file order) before the replay.
 *
 * The replay matches each free to its allocation by (device, pointer) in an
 * open-addressing table, turns the log into deltas of one series each and
 * finds each series' peak, which chooses the bands.  A free that matches
 * nothing (the log began late) is counted and skipped; an allocation over a
 * live block is warned about and ends the old block, since its free row is
 * what is missing.  Two cheap passes over the deltas follow: the bands'
 * peaks with each chart column's highest total, then the band values at
 * that moment.  A column keeps its maximum rather than an average or its
 * last value, so that the sampled chart never hides the peak however many
 * rows fall into one pixel; and the values at that moment, not each band's
 * own maximum, so that the stack adds up.  The SVG is then O(width x bands)
 * whatever the log's length.
 *
 * The output needs nothing else: inline SVG and CSS, tooltips from SVG
 * <title> elements rather than a script, and every user string (tags,
 * titles) XML-escaped, with bytes that are not UTF-8 replaced.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOG_NCOL  9
#define SNAP_NCOL 10
#define NBUCKET   5

static const char *const log_cols[LOG_NCOL] = {"Thread", "Time",   "Action", "Pointer", "Size",
                                               "Stream", "Device", "Tag",    "QueryId"};
static const char *const snap_cols[SNAP_NCOL] = {
    "Pointer", "Size", "Requested", "Stream", "Device", "Tag", "QueryId", "Thread", "Time", "Age"};

/* Colour-blind-friendly qualitative colours (Tableau 10 without its grey,
 * red moved last so that it is rarely next to the failure ticks). */
static const char *const palette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2",
                                      "#edc948", "#ff9da7", "#9c755f", "#e15759"};
#define PALETTE_N   (sizeof(palette) / sizeof(palette[0]))
#define OTHER_COLOR "#a5a5a5"
#define FAIL_COLOR  "#d62728"

/* Age buckets of a snapshot, upper bounds in seconds. */
#define EN_DASH "\xE2\x80\x93"
static const char *const bucket_names[NBUCKET] = {"< 1 s", "1" EN_DASH "10 s", "10" EN_DASH "60 s",
                                                  "1" EN_DASH "10 min", "> 10 min"};
static const double bucket_upper[NBUCKET - 1] = {1.0, 10.0, 60.0, 600.0};

typedef enum out_format { FMT_AUTO, FMT_HTML, FMT_SVG } out_format;
typedef enum series_by { BY_TAG, BY_QUERY, BY_DEVICE } series_by;

typedef struct options {
    const char *input;  /* NULL or "-": standard input */
    const char *output; /* NULL or "-": standard output */
    const char *title;
    out_format format;
    series_by by;
    size_t top;
    size_t width;
    size_t height;
    bool csv;
} options;

static const char *by_name(series_by by)
{
    return by == BY_TAG ? "tag" : by == BY_QUERY ? "query" : "device";
}

/* ------------------------------------------------------------------------
 * Errors and memory
 * ------------------------------------------------------------------------ */

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("dv-viz: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

/* a + b, or UINT64_MAX where that does not fit. */
static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n == 0 ? 1 : n);
    if (q == NULL)
        die("out of memory (%zu bytes)", n);
    return q;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n == 0 ? 1 : n, size == 0 ? 1 : size);
    if (p == NULL)
        die("out of memory (%zu x %zu bytes)", n, size);
    return p;
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(xrealloc(NULL, n), s, n);
}

/* p with room for need elements of size bytes (capacity *cap), doubling
 * so that appending n rows costs O(n). */
static void *grow(void *p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return p;
    size_t cap2 = *cap < 16 ? 16 : *cap;
    while (cap2 < need) {
        if (cap2 > SIZE_MAX / 2 / size)
            die("out of memory (too many rows)");
        cap2 *= 2;
    }
    *cap = cap2;
    return xrealloc(p, cap2 * size);
}

/* ------------------------------------------------------------------------
 * CSV reader
 * ------------------------------------------------------------------------ */

#define CSV_CHUNK (1u << 20)

typedef struct csv_reader {
    FILE *f;
    const char *name;
    unsigned char *buf;
    size_t len, pos;
    bool eof;
    char *rec; /* the record's fields, each NUL-terminated */
    size_t rec_len, rec_cap;
    size_t *field; /* offsets into rec */
    size_t nfield, field_cap;
    unsigned long line;      /* where the current record starts */
    unsigned long next_line; /* where the next one will */
} csv_reader;

static void die_at(const csv_reader *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "dv-viz: %s:%lu: ", r->name, r->line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static int csv_getc(csv_reader *r)
{
    if (r->pos == r->len) {
        if (r->eof)
            return EOF;
        r->len = fread(r->buf, 1, CSV_CHUNK, r->f);
        r->pos = 0;
        if (r->len == 0) {
            if (ferror(r->f))
                die("%s: %s", r->name, strerror(errno));
            r->eof = true;
            return EOF;
        }
    }
    int c = r->buf[r->pos++];
    if (c == '\0') {
        /* A string field would end there, and a number parse as its
         * digits before it: refused, not half read. */
        r->line = r->next_line;
        die_at(r, "a NUL byte: not a CSV text file");
    }
    return c;
}

/* The next byte, left unread: csv_getc just filled the buffer if it had
 * to, so the byte is still in it. */
static int csv_peek(csv_reader *r)
{
    int c = csv_getc(r);
    if (c != EOF)
        r->pos--;
    return c;
}

static void csv_put(csv_reader *r, int c)
{
    if (r->rec_len == r->rec_cap)
        r->rec = grow(r->rec, &r->rec_cap, r->rec_len + 1, 1);
    r->rec[r->rec_len++] = (char)c;
}

static void csv_open(csv_reader *r, const char *path)
{
    memset(r, 0, sizeof(*r));
    if (path == NULL || strcmp(path, "-") == 0) {
        r->f = stdin;
        r->name = "<stdin>";
    } else {
        r->f = fopen(path, "rb");
        if (r->f == NULL)
            die("%s: %s", path, strerror(errno));
        r->name = path;
    }
    r->buf = xrealloc(NULL, CSV_CHUNK);
    r->next_line = 1;
    /* A byte-order mark, as spreadsheets write them. */
    if (csv_peek(r) == 0xEF && r->len - r->pos >= 3 && r->buf[r->pos + 1] == 0xBB &&
        r->buf[r->pos + 2] == 0xBF)
        r->pos += 3;
}

static void csv_close(csv_reader *r)
{
    if (r->f != stdin)
        fclose(r->f);
    free(r->buf);
    free(r->rec);
    free(r->field);
}

/* A line break ends the record: "\n", "\r\n", or "\r" at the end of the
 * file.  c has just been read. */
static bool csv_eol(csv_reader *r, int *c)
{
    if (*c == '\n')
        return true;
    if (*c == '\r') {
        int n = csv_peek(r);
        if (n == '\n' || n == EOF) {
            *c = csv_getc(r);
            if (*c == EOF)
                *c = '\n';
            return true;
        }
    }
    return false;
}

/* Read the next record into r->rec / r->field; false at the end of the
 * file. */
static bool csv_next(csv_reader *r)
{
    for (;;) {
        r->rec_len = 0;
        r->nfield = 0;
        r->line = r->next_line;
        int c = csv_getc(r);
        if (c == EOF)
            return false;
        if (csv_eol(r, &c)) {
            r->next_line++;
            continue;
        }
        for (;;) {
            r->field = grow(r->field, &r->field_cap, r->nfield + 1, sizeof(*r->field));
            r->field[r->nfield++] = r->rec_len;
            if (c == '"') {
                for (;;) {
                    c = csv_getc(r);
                    if (c == EOF)
                        die_at(r, "a quoted field is not closed before the end of the file");
                    if (c == '"') {
                        if (csv_peek(r) != '"')
                            break;
                        csv_getc(r);
                    } else if (c == '\n') {
                        r->next_line++;
                    }
                    csv_put(r, c);
                }
                c = csv_getc(r);
                if (c != ',' && c != EOF && !csv_eol(r, &c))
                    die_at(r, "field %zu: text after its closing quote", r->nfield);
            } else {
                while (c != ',' && c != EOF && !csv_eol(r, &c)) {
                    csv_put(r, c);
                    c = csv_getc(r);
                }
            }
            csv_put(r, '\0');
            if (c != ',')
                break;
            c = csv_getc(r);
        }
        if (c == '\n')
            r->next_line++;
        return true;
    }
}

static const char *csv_field(const csv_reader *r, size_t i)
{
    return r->rec + r->field[i];
}

/* ------------------------------------------------------------------------
 * Numbers
 * ------------------------------------------------------------------------ */

static bool parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (*s == '\0')
        return false;
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9')
            return false;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

static bool parse_hex(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || s[2] == '\0')
        return false;
    for (s += 2; *s != '\0'; s++) {
        unsigned d;
        if (*s >= '0' && *s <= '9')
            d = (unsigned)(*s - '0');
        else if (*s >= 'a' && *s <= 'f')
            d = (unsigned)(*s - 'a' + 10);
        else if (*s >= 'A' && *s <= 'F')
            d = (unsigned)(*s - 'A' + 10);
        else
            return false;
        if (v >> 60)
            return false;
        v = v << 4 | d;
    }
    *out = v;
    return true;
}

static bool parse_int(const char *s, int32_t *out)
{
    bool neg = *s == '-';
    uint64_t v;
    if (!parse_u64(s + neg, &v) || v > (neg ? (uint64_t)INT32_MAX + 1 : (uint64_t)INT32_MAX))
        return false;
    *out = neg ? (int32_t)(-(int64_t)v) : (int32_t)v;
    return true;
}

/* "SECONDS[.FRACTION]" into microseconds; digits past the sixth are
 * dropped. */
static bool parse_time(const char *s, int64_t *us)
{
    uint64_t sec = 0, frac = 0;
    int digits = 0;
    if (*s < '0' || *s > '9')
        return false;
    for (; *s >= '0' && *s <= '9'; s++) {
        sec = sec * 10 + (uint64_t)(*s - '0');
        if (sec >= (uint64_t)INT64_MAX / 1000000)
            return false;
    }
    if (*s == '.') {
        s++;
        if (*s < '0' || *s > '9')
            return false;
        for (; *s >= '0' && *s <= '9'; s++, digits++)
            if (digits < 6)
                frac = frac * 10 + (uint64_t)(*s - '0');
    }
    if (*s != '\0')
        return false;
    for (; digits < 6; digits++)
        frac *= 10;
    *us = (int64_t)(sec * 1000000 + frac);
    return true;
}

/* A non-negative decimal number of seconds (a snapshot's Age). */
static bool parse_seconds(const char *s, double *out)
{
    const char *p = s;
    if (*p < '0' || *p > '9')
        return false;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p != '\0')
        return false;
    *out = strtod(s, NULL);
    return isfinite(*out);
}

static uint64_t field_u64(const csv_reader *r, size_t i, const char *col)
{
    uint64_t v;
    if (!parse_u64(csv_field(r, i), &v))
        die_at(r, "%s: \"%.40s\" is not a decimal number", col, csv_field(r, i));
    return v;
}

static uint64_t field_hex(const csv_reader *r, size_t i, const char *col)
{
    uint64_t v;
    if (!parse_hex(csv_field(r, i), &v))
        die_at(r, "%s: \"%.40s\" is not a 0x-hex address", col, csv_field(r, i));
    return v;
}

static int32_t field_int(const csv_reader *r, size_t i, const char *col)
{
    int32_t v;
    if (!parse_int(csv_field(r, i), &v))
        die_at(r, "%s: \"%.40s\" is not a decimal integer", col, csv_field(r, i));
    return v;
}

static int64_t field_time(const csv_reader *r, size_t i, const char *col)
{
    int64_t v;
    if (!parse_time(csv_field(r, i), &v))
        die_at(r, "%s: \"%.40s\" is not epoch seconds (like 1764170000.123456)", col,
               csv_field(r, i));
    return v;
}

static double field_seconds(const csv_reader *r, size_t i, const char *col)
{
    double v;
    if (!parse_seconds(csv_field(r, i), &v))
        die_at(r, "%s: \"%.40s\" is not a number of seconds", col, csv_field(r, i));
    return v;
}

/* ------------------------------------------------------------------------
 * Formatting
 * ------------------------------------------------------------------------ */

static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};

/* "512 B", "12.0 MiB": for labels, where a short number reads best. */
static const char *fmt_bytes(char *buf, size_t cap, uint64_t v)
{
    if (v < 1024) {
        snprintf(buf, cap, "%" PRIu64 " B", v);
        return buf;
    }
    double x = (double)v;
    int u = 0;
    while (x >= 1024.0 && u < 6) {
        x /= 1024.0;
        u++;
    }
    /* 1023.96 KiB would print as "1024.0 KiB". */
    if (x >= 1023.95 && u < 6) {
        x /= 1024.0;
        u++;
    }
    snprintf(buf, cap, "%.1f %s", x, units[u]);
    return buf;
}

/* An axis tick: a multiple of a power of two, so it is exact in the
 * largest unit it reaches ("768 KiB", "1.25 MiB"). */
static const char *fmt_tick(char *buf, size_t cap, uint64_t v)
{
    int u = 0;
    while (u < 6 && v >= (UINT64_C(1) << (10 * (u + 1))))
        u++;
    if (v == 0)
        snprintf(buf, cap, "0");
    else
        snprintf(buf, cap, "%.4g %s", (double)v / (double)(UINT64_C(1) << (10 * u)), units[u]);
    return buf;
}

/* Seconds with milliseconds, from microseconds. */
static const char *fmt_secs(char *buf, size_t cap, int64_t us)
{
    snprintf(buf, cap, "%.3f s", (double)us / 1e6);
    return buf;
}

static const char *fmt_utc(char *buf, size_t cap, int64_t us)
{
    time_t sec = (time_t)(us / 1000000);
    struct tm tm;
    char date[32];
    if (gmtime_r(&sec, &tm) == NULL || strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S", &tm) == 0)
        snprintf(date, sizeof(date), "%lld", (long long)sec);
    snprintf(buf, cap, "%s.%06d UTC", date, (int)(us % 1000000));
    return buf;
}

/* How many bytes the UTF-8 sequence at p has; 0 when it is not UTF-8 or
 * is a character XML does not allow (U+FFFE, U+FFFF). */
static size_t utf8_len(const unsigned char *p)
{
    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xC2 && p[0] <= 0xDF)
        return (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (p[0] >= 0xE0 && p[0] <= 0xEF) {
        unsigned lo = p[0] == 0xE0 ? 0xA0 : 0x80, hi = p[0] == 0xED ? 0x9F : 0xBF;
        if (p[1] < lo || p[1] > hi || (p[2] & 0xC0) != 0x80)
            return 0;
        if (p[0] == 0xEF && p[1] == 0xBF && p[2] >= 0xBE)
            return 0;
        return 3;
    }
    if (p[0] >= 0xF0 && p[0] <= 0xF4) {
        unsigned lo = p[0] == 0xF0 ? 0x90 : 0x80, hi = p[0] == 0xF4 ? 0x8F : 0xBF;
        if (p[1] < lo || p[1] > hi || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80)
            return 0;
        return 4;
    }
    return 0;
}

/* Write s as XML text, at most max characters of it (0: all) with an
 * ellipsis for the rest.  Tags are arbitrary bytes: what is not UTF-8
 * becomes U+FFFD and control characters spaces, so that any tag gives a
 * well-formed document. */
static void xml_put(FILE *o, const char *s, size_t max)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t chars = 0;
    for (const unsigned char *q = p; *q != '\0'; q++)
        chars += (*q & 0xC0) != 0x80;
    if (max == 0 || chars <= max)
        max = SIZE_MAX;
    else
        max--;
    for (size_t n = 0; *p != '\0'; n++) {
        if (n == max) {
            fputs("\xE2\x80\xA6", o);
            return;
        }
        size_t len = utf8_len(p);
        if (len == 0) {
            fputs("\xEF\xBF\xBD", o);
            p++;
            continue;
        }
        if (len > 1) {
            fwrite(p, 1, len, o);
            p += len;
            continue;
        }
        switch (*p) {
        case '<':
            fputs("&lt;", o);
            break;
        case '>':
            fputs("&gt;", o);
            break;
        case '&':
            fputs("&amp;", o);
            break;
        case '"':
            fputs("&quot;", o);
            break;
        case '\'':
            fputs("&#39;", o);
            break;
        default:
            fputc(*p < 0x20 ? ' ' : *p, o);
        }
        p++;
    }
}

static void csv_out(FILE *o, const char *s)
{
    if (strpbrk(s, ",\"\r\n") == NULL) {
        fputs(s, o);
        return;
    }
    fputc('"', o);
    for (; *s != '\0'; s++) {
        if (*s == '"')
            fputc('"', o);
        fputc(*s, o);
    }
    fputc('"', o);
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

/* ------------------------------------------------------------------------
 * Series: interned names
 * ------------------------------------------------------------------------ */

typedef struct series_table {
    char **name;
    size_t n, cap;
    uint32_t *slot; /* index + 1; 0 is empty */
    size_t nslot;
} series_table;

static uint64_t hash_str(const char *s)
{
    uint64_t h = UINT64_C(1469598103934665603);
    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * UINT64_C(1099511628211);
    return h;
}

static uint32_t series_intern(series_table *st, const char *name)
{
    if (st->nslot == 0 || (st->n + 1) * 2 > st->nslot) {
        size_t nslot = st->nslot == 0 ? 64 : st->nslot * 2;
        uint32_t *slot = xcalloc(nslot, sizeof(*slot));
        for (size_t i = 0; i < st->n; i++) {
            size_t j = hash_str(st->name[i]) & (nslot - 1);
            while (slot[j] != 0)
                j = (j + 1) & (nslot - 1);
            slot[j] = (uint32_t)i + 1;
        }
        free(st->slot);
        st->slot = slot;
        st->nslot = nslot;
    }
    size_t j = hash_str(name) & (st->nslot - 1);
    for (; st->slot[j] != 0; j = (j + 1) & (st->nslot - 1))
        if (strcmp(st->name[st->slot[j] - 1], name) == 0)
            return st->slot[j] - 1;
    if (st->n >= UINT32_MAX - 1)
        die("too many series");
    st->name = grow(st->name, &st->cap, st->n + 1, sizeof(*st->name));
    st->name[st->n] = xstrdup(name);
    st->slot[j] = (uint32_t)st->n + 1;
    return (uint32_t)st->n++;
}

static uint32_t series_of(series_table *st, series_by by, const char *tag, uint64_t query,
                          int32_t device)
{
    char key[48];
    switch (by) {
    case BY_QUERY:
        if (query == 0)
            return series_intern(st, "no query");
        snprintf(key, sizeof(key), "query %" PRIu64, query);
        return series_intern(st, key);
    case BY_DEVICE:
        snprintf(key, sizeof(key), "device %" PRId32, device);
        return series_intern(st, key);
    case BY_TAG:
    default:
        return series_intern(st, tag[0] != '\0' ? tag : "no tag");
    }
}

static void series_free(series_table *st)
{
    for (size_t i = 0; i < st->n; i++)
        free(st->name[i]);
    free(st->name);
    free(st->slot);
}

/* A band of the chart: one series, or "other", the sum of the series
 * beyond --top. */
typedef struct band {
    const char *name; /* "other" for the merged band */
    const char *color;
    size_t members; /* series in it */
    bool other;
    /* log */
    uint64_t peak;
    int64_t peak_t; /* µs since the first row */
    uint64_t total, count;
    /* snapshot */
    uint64_t live, requested, blocks;
    double oldest;
} band;

typedef struct rank_entry {
    uint64_t score;
    const char *name;
    uint32_t series;
} rank_entry;

static int rank_cmp(const void *a, const void *b)
{
    const rank_entry *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Order the series by score (ties by name, so that the output does not
 * depend on the order of the rows), give the first top their own band and
 * the rest one "other" band; band_of[series] says which. */
static band *make_bands(const series_table *st, const uint64_t *score, size_t top,
                        uint32_t *band_of, size_t *nband)
{
    rank_entry *rank = xcalloc(st->n, sizeof(*rank));
    for (size_t i = 0; i < st->n; i++)
        rank[i] = (rank_entry){score[i], st->name[i], (uint32_t)i};
    qsort(rank, st->n, sizeof(*rank), rank_cmp);
    if (st->n > top) {
        /* A series of the program's own named "other" joins the merged
         * band of that name, so that no two bands are called "other". */
        size_t k = 0;
        rank_entry *moved = xcalloc(st->n, sizeof(*moved));
        for (size_t i = 0; i < st->n; i++)
            if (strcmp(rank[i].name, "other") != 0)
                moved[k++] = rank[i];
        for (size_t i = 0; i < st->n; i++)
            if (strcmp(rank[i].name, "other") == 0)
                moved[k++] = rank[i];
        memcpy(rank, moved, st->n * sizeof(*rank));
        free(moved);
    }
    size_t own = st->n < top ? st->n : top;
    *nband = own + (st->n > top);
    band *b = xcalloc(*nband, sizeof(*b));
    for (size_t i = 0; i < own; i++) {
        b[i].name = rank[i].name;
        b[i].color = palette[i % PALETTE_N];
        b[i].members = 1;
        band_of[rank[i].series] = (uint32_t)i;
    }
    if (st->n > top) {
        b[own].name = "other";
        b[own].color = OTHER_COLOR;
        b[own].other = true;
        b[own].members = st->n - top;
        for (size_t i = own; i < st->n; i++)
            band_of[rank[i].series] = (uint32_t)own;
    }
    free(rank);
    return b;
}

/* A band's name as a chart shows it: "other" says how much it holds. */
static void put_band_name(FILE *o, const band *b, size_t max)
{
    if (b->other)
        fprintf(o, "other (%zu series)", b->members);
    else
        xml_put(o, b->name, max);
}

/* ------------------------------------------------------------------------
 * Allocation log: reading and replay
 * ------------------------------------------------------------------------ */

enum { ACT_ALLOC, ACT_FREE, ACT_ALLOC_FAIL, ACT_FREE_FAIL };

typedef struct log_event {
    int64_t t; /* µs since the epoch */
    uint64_t ptr;
    uint64_t size;
    uint32_t series; /* allocations */
    int32_t device;
    uint32_t line; /* for warnings; saturates */
    uint8_t action;
} log_event;

/* One change of one series' live bytes. */
typedef struct delta {
    int64_t t; /* µs since the first row */
    uint64_t bytes;
    uint32_t series;
    bool up;
} delta;

typedef struct log_result {
    size_t rows;
    series_table series;
    band *bands;
    size_t nband;
    int64_t t0, span; /* µs; span > 0 */
    int64_t last;     /* µs from the first row to the last */
    uint64_t peak;
    int64_t peak_t;
    size_t ncol;
    uint64_t *vals;  /* ncol x nband */
    int64_t *fail_t; /* allocation failures, µs since the first row */
    size_t nfail;
    uint64_t allocs, frees, free_fails, unmatched, reused, live_end;
} log_result;

/* Stable: insertion sort of short runs (cheap on a nearly sorted log),
 * then bottom-up merges; a log already in order is only checked. */
static void sort_events(log_event *a, size_t n)
{
    size_t i = 1;
    while (i < n && a[i - 1].t <= a[i].t)
        i++;
    if (i >= n)
        return;
    const size_t run = 32;
    for (size_t lo = 0; lo < n; lo += run) {
        size_t hi = lo + run < n ? lo + run : n;
        for (size_t j = lo + 1; j < hi; j++) {
            log_event e = a[j];
            size_t k = j;
            for (; k > lo && a[k - 1].t > e.t; k--)
                a[k] = a[k - 1];
            a[k] = e;
        }
    }
    log_event *tmp = xcalloc(n, sizeof(*tmp)), *src = a, *dst = tmp;
    for (size_t w = run; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t x = lo, y = mid, k = lo;
            while (x < mid && y < hi)
                dst[k++] = src[y].t < src[x].t ? src[y++] : src[x++];
            while (x < mid)
                dst[k++] = src[x++];
            while (y < hi)
                dst[k++] = src[y++];
        }
        log_event *swap = src;
        src = dst;
        dst = swap;
    }
    if (src != a)
        memcpy(a, src, n * sizeof(*a));
    free(tmp);
}

/* Live blocks by (device, pointer): linear probing with backward-shift
 * deletion, so that a long log of short-lived blocks leaves no
 * tombstones. */
typedef struct block_slot {
    uint64_t ptr, size;
    int32_t device;
    uint32_t series, line;
    bool used;
} block_slot;

typedef struct block_map {
    block_slot *slot;
    size_t cap, n;
} block_map;

static size_t block_hash(uint64_t ptr, int32_t device)
{
    uint64_t x = ptr ^ ((uint64_t)(uint32_t)device * UINT64_C(0x9E3779B97F4A7C15));
    x ^= x >> 30;
    x *= UINT64_C(0xBF58476D1CE4E5B9);
    x ^= x >> 27;
    x *= UINT64_C(0x94D049BB133111EB);
    x ^= x >> 31;
    return (size_t)x;
}

static size_t block_find(const block_map *m, uint64_t ptr, int32_t device)
{
    if (m->cap == 0)
        return SIZE_MAX;
    for (size_t i = block_hash(ptr, device) & (m->cap - 1); m->slot[i].used;
         i = (i + 1) & (m->cap - 1))
        if (m->slot[i].ptr == ptr && m->slot[i].device == device)
            return i;
    return SIZE_MAX;
}

static void block_insert(block_map *m, block_slot b)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap == 0 ? 1024 : m->cap * 2;
        block_slot *slot = xcalloc(cap, sizeof(*slot));
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->slot[i].used)
                continue;
            size_t j = block_hash(m->slot[i].ptr, m->slot[i].device) & (cap - 1);
            while (slot[j].used)
                j = (j + 1) & (cap - 1);
            slot[j] = m->slot[i];
        }
        free(m->slot);
        m->slot = slot;
        m->cap = cap;
    }
    size_t i = block_hash(b.ptr, b.device) & (m->cap - 1);
    while (m->slot[i].used)
        i = (i + 1) & (m->cap - 1);
    b.used = true;
    m->slot[i] = b;
    m->n++;
}

static void block_remove(block_map *m, size_t i)
{
    size_t mask = m->cap - 1, j = i;
    m->slot[i].used = false;
    for (;;) {
        j = (j + 1) & mask;
        if (!m->slot[j].used)
            break;
        size_t k = block_hash(m->slot[j].ptr, m->slot[j].device) & mask;
        /* Slot j may move to the hole at i unless its home lies
         * cyclically in (i, j]. */
        if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
            continue;
        m->slot[i] = m->slot[j];
        m->slot[j].used = false;
        i = j;
    }
    m->n--;
}

static uint32_t line_u32(unsigned long line)
{
    return line > UINT32_MAX ? UINT32_MAX : (uint32_t)line;
}

static void read_log(csv_reader *r, const options *opt, log_result *res, log_event **evp,
                     size_t *nevp)
{
    log_event *ev = NULL;
    size_t nev = 0, cap = 0;
    while (csv_next(r)) {
        if (r->nfield != LOG_NCOL)
            die_at(r, "%zu fields, but the header has %d", r->nfield, LOG_NCOL);
        log_event e;
        memset(&e, 0, sizeof(e));
        const char *action = csv_field(r, 2);
        if (strcmp(action, "allocate") == 0)
            e.action = ACT_ALLOC;
        else if (strcmp(action, "free") == 0)
            e.action = ACT_FREE;
        else if (strcmp(action, "allocate failure") == 0)
            e.action = ACT_ALLOC_FAIL;
        else if (strcmp(action, "free failure") == 0)
            e.action = ACT_FREE_FAIL;
        else
            die_at(r, "Action: \"%.40s\" is not allocate, free, allocate failure or free failure",
                   action);
        (void)field_u64(r, 0, "Thread");
        e.t = field_time(r, 1, "Time");
        e.ptr = field_hex(r, 3, "Pointer");
        e.size = field_u64(r, 4, "Size");
        (void)field_u64(r, 5, "Stream");
        e.device = field_int(r, 6, "Device");
        uint64_t query = field_u64(r, 8, "QueryId");
        e.line = line_u32(r->line);
        /* Only allocations name a series: a free counts against the
         * series of the block it frees. */
        if (e.action == ACT_ALLOC)
            e.series = series_of(&res->series, opt->by, csv_field(r, 7), query, e.device);
        ev = grow(ev, &cap, nev + 1, sizeof(*ev));
        ev[nev++] = e;
    }
    res->rows = nev;
    *evp = ev;
    *nevp = nev;
}

/* Match frees to allocations; the series' peaks; the deltas. */
static delta *replay(const char *name, const log_event *ev, size_t nev, log_result *res,
                     uint64_t *series_peak, uint64_t *series_total, uint64_t *series_count,
                     size_t *ndelta)
{
    size_t nser = res->series.n, nd = 0, cap = 0, fail_cap = 0;
    uint64_t *live = xcalloc(nser, sizeof(*live)), live_all = 0;
    delta *d = NULL;
    block_map map = {0};
    for (size_t i = 0; i < nev; i++) {
        const log_event *e = &ev[i];
        int64_t t = e->t - res->t0;
        size_t at;
        switch (e->action) {
        case ACT_ALLOC:
            res->allocs++;
            series_total[e->series] = sat_add(series_total[e->series], e->size);
            series_count[e->series]++;
            at = block_find(&map, e->ptr, e->device);
            if (at != SIZE_MAX) {
                /* Malformed: a block was allocated twice over.  Its free row
                 * is missing, so count it as freed here. */
                if (res->reused++ < 5)
                    fprintf(stderr,
                            "dv-viz: %s:%" PRIu32 ": warning: allocate at 0x%" PRIx64
                            " on device %" PRId32 ", still live since line %" PRIu32
                            ": counting the old block as freed\n",
                            name, e->line, e->ptr, e->device, map.slot[at].line);
                d = grow(d, &cap, nd + 1, sizeof(*d));
                d[nd++] = (delta){t, map.slot[at].size, map.slot[at].series, false};
                live[map.slot[at].series] -= map.slot[at].size;
                live_all -= map.slot[at].size;
                block_remove(&map, at);
            }
            if (e->size > UINT64_MAX - live_all)
                die("%s:%" PRIu32 ": allocate of %" PRIu64 " bytes: live bytes past 2^64 - 1", name,
                    e->line, e->size);
            live_all += e->size;
            block_insert(&map, (block_slot){.ptr = e->ptr,
                                            .size = e->size,
                                            .device = e->device,
                                            .series = e->series,
                                            .line = e->line});
            d = grow(d, &cap, nd + 1, sizeof(*d));
            d[nd++] = (delta){t, e->size, e->series, true};
            live[e->series] += e->size;
            if (live[e->series] > series_peak[e->series])
                series_peak[e->series] = live[e->series];
            break;
        case ACT_FREE:
            res->frees++;
            at = block_find(&map, e->ptr, e->device);
            if (at == SIZE_MAX) {
                /* The log began after the allocation. */
                res->unmatched++;
                break;
            }
            /* The allocation's size and series, so that live bytes return
             * to exactly what they were. */
            d = grow(d, &cap, nd + 1, sizeof(*d));
            d[nd++] = (delta){t, map.slot[at].size, map.slot[at].series, false};
            live[map.slot[at].series] -= map.slot[at].size;
            live_all -= map.slot[at].size;
            block_remove(&map, at);
            break;
        case ACT_ALLOC_FAIL:
            res->fail_t = grow(res->fail_t, &fail_cap, res->nfail + 1, sizeof(*res->fail_t));
            res->fail_t[res->nfail++] = t;
            break;
        case ACT_FREE_FAIL:
            res->free_fails++;
            break;
        }
    }
    if (res->reused > 5)
        fprintf(stderr, "dv-viz: %s: warning: %" PRIu64 " allocations in all on a live block\n",
                name, res->reused);
    for (size_t i = 0; i < nser; i++)
        res->live_end += live[i];
    free(live);
    free(map.slot);
    *ndelta = nd;
    return d;
}

static size_t column_of(const log_result *res, int64_t t)
{
    double c = (double)t / (double)res->span * (double)res->ncol;
    return c >= (double)(res->ncol - 1) ? res->ncol - 1 : c <= 0 ? 0 : (size_t)c;
}

static void analyse_log(csv_reader *r, const options *opt, log_result *res)
{
    log_event *ev;
    size_t nev;
    memset(res, 0, sizeof(*res));
    read_log(r, opt, res, &ev, &nev);
    sort_events(ev, nev);
    if (nev > 0) {
        res->t0 = ev[0].t;
        res->span = res->last = ev[nev - 1].t - ev[0].t;
    }
    /* Rows all in one microsecond (or none) still get a readable axis. */
    if (res->span <= 0)
        res->span = 1000000;

    size_t nser = res->series.n, nd;
    uint64_t *peak = xcalloc(nser, sizeof(*peak));
    uint64_t *total = xcalloc(nser, sizeof(*total));
    uint64_t *count = xcalloc(nser, sizeof(*count));
    delta *d = replay(r->name, ev, nev, res, peak, total, count, &nd);
    free(ev);

    uint32_t *band_of = xcalloc(nser, sizeof(*band_of));
    res->bands = make_bands(&res->series, peak, opt->top, band_of, &res->nband);
    for (size_t s = 0; s < nser; s++) {
        res->bands[band_of[s]].total = sat_add(res->bands[band_of[s]].total, total[s]);
        res->bands[band_of[s]].count += count[s];
    }

    /* The bands' peaks, and each column's highest total: col_at[c] deltas
     * applied give the state where column c peaks (0: none yet). */
    size_t ncol = res->ncol = opt->width, nb = res->nband, cur = 0;
    uint64_t *blive = xcalloc(nb, sizeof(*blive)), sum = 0;
    size_t *col_at = xcalloc(ncol, sizeof(*col_at));
    uint64_t *col_max = xcalloc(ncol, sizeof(*col_max));
    for (size_t i = 0; i < nd; i++) {
        size_t c = column_of(res, d[i].t);
        for (; cur < c; cur++) {
            col_max[cur + 1] = sum;
            col_at[cur + 1] = i;
        }
        band *b = &res->bands[band_of[d[i].series]];
        uint64_t *v = &blive[band_of[d[i].series]];
        if (d[i].up) {
            *v += d[i].bytes;
            sum += d[i].bytes;
        } else {
            *v -= d[i].bytes;
            sum -= d[i].bytes;
        }
        if (*v > b->peak) {
            b->peak = *v;
            b->peak_t = d[i].t;
        }
        if (sum > res->peak) {
            res->peak = sum;
            res->peak_t = d[i].t;
        }
        if (sum > col_max[c]) {
            col_max[c] = sum;
            col_at[c] = i + 1;
        }
    }
    for (; cur + 1 < ncol; cur++) {
        col_max[cur + 1] = sum;
        col_at[cur + 1] = nd;
    }

    /* The bands at each column's peak: col_at never decreases, so one
     * more walk over the deltas. */
    memset(blive, 0, nb * sizeof(*blive));
    res->vals = xcalloc(ncol * nb, sizeof(*res->vals));
    size_t applied = 0;
    for (size_t c = 0; c < ncol; c++) {
        for (; applied < col_at[c]; applied++) {
            uint64_t *v = &blive[band_of[d[applied].series]];
            *v = d[applied].up ? *v + d[applied].bytes : *v - d[applied].bytes;
        }
        memcpy(&res->vals[c * nb], blive, nb * sizeof(*blive));
    }
    free(blive);
    free(col_at);
    free(col_max);
    free(band_of);
    free(d);
    free(peak);
    free(total);
    free(count);
}

static void log_result_free(log_result *res)
{
    free(res->bands);
    free(res->vals);
    free(res->fail_t);
    series_free(&res->series);
}

/* ------------------------------------------------------------------------
 * Snapshot: reading
 * ------------------------------------------------------------------------ */

typedef struct snap_row {
    uint64_t size;
    uint32_t series;
    uint8_t bucket;
} snap_row;

typedef struct snap_result {
    size_t rows;
    series_table series;
    band *bands;
    size_t nband;
    uint64_t live, requested;
    int64_t moment; /* µs since the epoch: Time + Age, the latest */
    uint64_t bucket_bytes[NBUCKET], bucket_blocks[NBUCKET];
    uint64_t *bucket_band; /* NBUCKET x nband */
} snap_result;

static void analyse_snapshot(csv_reader *r, const options *opt, snap_result *res)
{
    snap_row *rows = NULL;
    size_t nrow = 0, cap = 0, scap = 0;
    uint64_t *live = NULL, *req = NULL;
    double *oldest = NULL;
    memset(res, 0, sizeof(*res));
    while (csv_next(r)) {
        if (r->nfield != SNAP_NCOL)
            die_at(r, "%zu fields, but the header has %d", r->nfield, SNAP_NCOL);
        (void)field_hex(r, 0, "Pointer");
        uint64_t size = field_u64(r, 1, "Size");
        uint64_t requested = field_u64(r, 2, "Requested");
        (void)field_u64(r, 3, "Stream");
        int32_t device = field_int(r, 4, "Device");
        uint64_t query = field_u64(r, 6, "QueryId");
        (void)field_u64(r, 7, "Thread");
        int64_t t = field_time(r, 8, "Time");
        double age = field_seconds(r, 9, "Age");
        if (size > UINT64_MAX - res->live || requested > UINT64_MAX - res->requested)
            die_at(r, "live bytes past 2^64 - 1");
        uint32_t s = series_of(&res->series, opt->by, csv_field(r, 5), query, device);
        if (s >= scap) {
            size_t old = scap;
            live = grow(live, &scap, (size_t)s + 1, sizeof(*live));
            req = xrealloc(req, scap * sizeof(*req));
            oldest = xrealloc(oldest, scap * sizeof(*oldest));
            memset(live + old, 0, (scap - old) * sizeof(*live));
            memset(req + old, 0, (scap - old) * sizeof(*req));
            memset(oldest + old, 0, (scap - old) * sizeof(*oldest));
        }
        live[s] += size;
        req[s] += requested;
        if (age > oldest[s])
            oldest[s] = age;
        uint8_t bucket = 0;
        while (bucket < NBUCKET - 1 && age >= bucket_upper[bucket])
            bucket++;
        res->bucket_bytes[bucket] += size;
        res->bucket_blocks[bucket]++;
        res->live += size;
        res->requested += requested;
        double age_us = age * 1e6;
        int64_t moment =
            age_us < (double)(INT64_MAX - t) ? t + (int64_t)llround(age_us) : INT64_MAX;
        if (nrow == 0 || moment > res->moment)
            res->moment = moment;
        rows = grow(rows, &cap, nrow + 1, sizeof(*rows));
        rows[nrow++] = (snap_row){size, s, bucket};
    }
    res->rows = nrow;
    size_t nser = res->series.n;
    uint32_t *band_of = xcalloc(nser, sizeof(*band_of));
    res->bands = make_bands(&res->series, live, opt->top, band_of, &res->nband);
    for (size_t s = 0; s < nser; s++) {
        band *b = &res->bands[band_of[s]];
        b->live += live[s];
        b->requested += req[s];
        if (oldest[s] > b->oldest)
            b->oldest = oldest[s];
    }
    res->bucket_band = xcalloc(NBUCKET * res->nband, sizeof(*res->bucket_band));
    for (size_t i = 0; i < nrow; i++) {
        res->bands[band_of[rows[i].series]].blocks++;
        res->bucket_band[rows[i].bucket * res->nband + band_of[rows[i].series]] += rows[i].size;
    }
    free(band_of);
    free(rows);
    free(live);
    free(req);
    free(oldest);
}

static void snap_result_free(snap_result *res)
{
    free(res->bands);
    free(res->bucket_band);
    series_free(&res->series);
}

/* ------------------------------------------------------------------------
 * SVG
 * ------------------------------------------------------------------------ */

/* The smallest power of two of bytes that divides max into about n
 * steps: ticks then read exactly in binary units. */
static uint64_t byte_step(uint64_t max, uint64_t n)
{
    uint64_t raw = max / n + (max % n != 0), step = 1;
    while (step < raw && step < (UINT64_C(1) << 62))
        step <<= 1;
    return step;
}

static uint64_t round_up(uint64_t v, uint64_t step)
{
    uint64_t r = (v + step - 1) / step * step;
    return r == 0 ? step : r;
}

static void svg_begin(FILE *o, double w, double h, bool standalone)
{
    if (standalone)
        fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", o);
    fprintf(o,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"Helvetica, Arial, sans-serif\" "
            "font-size=\"12\" fill=\"#222\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n",
            w, h, w, h);
}

static void svg_title(FILE *o, double x, double y, const char *title)
{
    fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"16\" font-weight=\"bold\">", x, y);
    xml_put(o, title, 0);
    fputs("</text>\n", o);
}

/* A horizontal byte scale: vertical grid lines from y0 to y1, labels
 * under y1.  The scale's end, in bytes. */
static uint64_t svg_byte_scale(FILE *o, double x0, double w, double y0, double y1, uint64_t max)
{
    uint64_t step = byte_step(max == 0 ? 1024 : max, w >= 500 ? 8 : 4), end = round_up(max, step);
    char buf[32];
    fputs("<g font-size=\"11\" fill=\"#555\" text-anchor=\"middle\">\n", o);
    for (uint64_t v = 0; v <= end; v += step) {
        double x = x0 + w * (double)v / (double)end;
        fprintf(o,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>"
                "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                x, y0, x, y1, x, y1 + 14, fmt_tick(buf, sizeof(buf), v));
        if (v > end - step)
            break;
    }
    fputs("</g>\n", o);
    return end;
}

/* The y of value v on a plot of height h whose top is at y0. */
static double plot_y(double y0, double h, uint64_t v, uint64_t ymax)
{
    return y0 + h - h * ((double)v / (double)ymax);
}

/* Tenths of a pixel: consecutive columns that draw the same are merged. */
static long tenths(double y)
{
    return lround(y * 10.0);
}

static void svg_log(FILE *o, const log_result *res, const options *opt, const char *title,
                    bool standalone)
{
    /* Inside a page, the page's heading is the title. */
    const double ml = 84, mt = standalone ? 64 : 34, mb = 62;
    const double pw = (double)res->ncol, ph = (double)opt->height;
    const double lx = ml + pw + 28, lw = 300, entry = 36;
    size_t nb = res->nband, ncol = res->ncol;
    double legend_h = (double)nb * entry + 64;
    double w = lx + lw, h = mt + ph + mb;
    if (mt + legend_h + 8 > h)
        h = mt + legend_h + 8;
    char buf[64], buf2[64];

    svg_begin(o, w, h, standalone);
    if (standalone)
        svg_title(o, ml, 26, title);

    /* The y axis: live bytes, ticks at powers of two. */
    uint64_t step = byte_step(res->peak == 0 ? 1024 : res->peak, 5);
    uint64_t ymax = round_up(res->peak, step);
    fputs("<g font-size=\"11\" fill=\"#555\" text-anchor=\"end\">\n", o);
    for (uint64_t v = 0; v <= ymax; v += step) {
        double y = plot_y(mt, ph, v, ymax);
        fprintf(o,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>"
                "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                ml, y, ml + pw, y, ml - 8, y + 4, fmt_tick(buf, sizeof(buf), v));
        if (v > ymax - step)
            break;
    }
    fputs("</g>\n", o);
    fprintf(o,
            "<text transform=\"translate(18 %.1f) rotate(-90)\" text-anchor=\"middle\" "
            "fill=\"#555\">live bytes</text>\n",
            mt + ph / 2);

    /* The bands, bottom up: each a closed path, its top edge drawn left to
     * right and the band below's top edge back. */
    double *low = xcalloc(ncol, sizeof(*low)), *up = xcalloc(ncol, sizeof(*up));
    for (size_t c = 0; c < ncol; c++)
        low[c] = up[c] = mt + ph;
    uint64_t *acc = xcalloc(ncol, sizeof(*acc));
    for (size_t b = 0; b < nb; b++) {
        for (size_t c = 0; c < ncol; c++) {
            acc[c] += res->vals[c * nb + b];
            low[c] = up[c];
            up[c] = plot_y(mt, ph, acc[c], ymax);
        }
        if (res->bands[b].peak == 0)
            continue;
        fprintf(o, "<path fill=\"%s\" d=\"M%.1f %.1f", res->bands[b].color, ml, up[0]);
        for (size_t c = 0; c + 1 < ncol; c++)
            if (tenths(up[c + 1]) != tenths(up[c]))
                fprintf(o, "H%.1fV%.1f", ml + (double)(c + 1), up[c + 1]);
        fprintf(o, "H%.1fV%.1f", ml + pw, low[ncol - 1]);
        for (size_t c = ncol - 1; c > 0; c--)
            if (tenths(low[c - 1]) != tenths(low[c]))
                fprintf(o, "H%.1fV%.1f", ml + (double)c, low[c - 1]);
        fprintf(o, "H%.1fZ\"><title>", ml);
        put_band_name(o, &res->bands[b], 0);
        fprintf(o, ": peak %s at %s</title></path>\n",
                fmt_bytes(buf, sizeof(buf), res->bands[b].peak),
                fmt_secs(buf2, sizeof(buf2), res->bands[b].peak_t));
    }
    /* The total's outline keeps the shape readable where bands are thin. */
    if (res->peak > 0) {
        fprintf(o, "<path fill=\"none\" stroke=\"#333\" stroke-width=\"0.8\" d=\"M%.1f %.1f", ml,
                up[0]);
        for (size_t c = 0; c + 1 < ncol; c++)
            if (tenths(up[c + 1]) != tenths(up[c]))
                fprintf(o, "H%.1fV%.1f", ml + (double)(c + 1), up[c + 1]);
        fprintf(o, "H%.1f\"/>\n", ml + pw);
    }
    free(low);
    free(up);
    free(acc);

    /* The x axis: seconds since the first row, 1-2-5 steps. */
    double span_s = (double)res->span / 1e6, target = pw / 100 < 2 ? 2 : pw / 100;
    double raw = span_s / target, mag = pow(10, floor(log10(raw))), norm = raw / mag;
    double xstep = (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10) * mag;
    int decimals = xstep >= 1 ? 0 : (int)-floor(log10(xstep) + 1e-9);
    fprintf(o,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n"
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n",
            ml, mt + ph, ml + pw, mt + ph, ml, mt, ml, mt + ph);
    fputs("<g font-size=\"11\" fill=\"#555\" text-anchor=\"middle\">\n", o);
    for (int k = 0;; k++) {
        double s = k * xstep;
        if (s > span_s * (1 + 1e-9))
            break;
        double x = ml + pw * s / span_s;
        fprintf(o,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>"
                "<text x=\"%.1f\" y=\"%.1f\">%.*f</text>\n",
                x, mt + ph, x, mt + ph + 4, x, mt + ph + 18, decimals, s);
    }
    fputs("</g>\n", o);
    fprintf(o,
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#555\">seconds since "
            "the first row (%s)</text>\n",
            ml + pw / 2, mt + ph + 40, fmt_utc(buf, sizeof(buf), res->t0));

    /* Allocation failures: red ticks across the axis, one per pixel. */
    if (res->nfail > 0) {
        fprintf(o, "<g stroke=\"%s\" stroke-width=\"2\"><title>%zu allocation failure%s</title>\n",
                FAIL_COLOR, res->nfail, res->nfail == 1 ? "" : "s");
        long last = -1;
        for (size_t i = 0; i < res->nfail; i++) {
            long px = lround(pw * (double)res->fail_t[i] / (double)res->span);
            if (px == last)
                continue;
            last = px;
            fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", ml + (double)px,
                    mt + ph - 7, ml + (double)px, mt + ph + 7);
        }
        fputs("</g>\n", o);
    }

    /* The overall peak: a line, a dot and a label above the plot, on the
     * side of the line that has room. */
    if (res->peak > 0) {
        double x = ml + pw * (double)res->peak_t / (double)res->span;
        double y = plot_y(mt, ph, res->peak, ymax);
        bool left = x > ml + pw * 0.6;
        fprintf(o,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#222\" "
                "stroke-dasharray=\"4 3\"/>\n<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" "
                "fill=\"#222\"/>\n<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" "
                "font-weight=\"bold\">peak %s at %s</text>\n",
                x, mt - 4, x, mt + ph, x, y, left ? x - 5 : x + 5, mt - 8, left ? "end" : "start",
                fmt_bytes(buf, sizeof(buf), res->peak), fmt_secs(buf2, sizeof(buf2), res->peak_t));
    } else {
        fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#777\">%s</text>\n",
                ml + pw / 2, mt + ph / 2, res->rows == 0 ? "no rows" : "no live bytes");
    }

    /* The legend: each band with its own peak. */
    double y = mt;
    fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" font-weight=\"bold\">by %s</text>\n", lx, y + 4,
            by_name(opt->by));
    y += 18;
    for (size_t b = 0; b < nb; b++, y += entry) {
        const band *bd = &res->bands[b];
        fputs("<g><title>", o);
        put_band_name(o, bd, 0);
        fprintf(o,
                "</title><rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" "
                "fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\">",
                lx, y, bd->color, lx + 18, y + 10);
        put_band_name(o, bd, 32);
        fprintf(o,
                "</text><text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#666\">"
                "peak %s at %s</text></g>\n",
                lx + 18, y + 24, fmt_bytes(buf, sizeof(buf), bd->peak),
                fmt_secs(buf2, sizeof(buf2), bd->peak_t));
    }
    if (res->nfail > 0) {
        fprintf(o,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                "stroke-width=\"2\"/><text x=\"%.1f\" y=\"%.1f\">allocation failure "
                "(%zu)</text>\n",
                lx + 6, y, lx + 6, y + 13, FAIL_COLOR, lx + 18, y + 10, res->nfail);
        y += 20;
    }
    fputs("</svg>\n", o);
}

/* One horizontal bar row's label on the left, right-aligned. */
static void svg_row_label(FILE *o, double x, double y, const band *b)
{
    fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">", x, y);
    put_band_name(o, b, 30);
    fputs("</text>\n", o);
}

static void svg_snapshot(FILE *o, const snap_result *res, const options *opt, const char *title,
                         bool standalone)
{
    const double lab = 236, val = 190, row = 26, bar = 18, age_row = 22;
    double w = (double)opt->width < 640 ? 640 : (double)opt->width;
    double top0 = standalone ? 0 : -26;
    double bx = 12 + lab, bw = w - bx - val, y = top0 + 60;
    size_t nb = res->nband;
    double h = y + (double)nb * row + 40 + 30 + NBUCKET * age_row + 44;
    char buf[64], buf2[64];

    svg_begin(o, w, h, standalone);
    if (standalone)
        svg_title(o, 12, 26, title);
    fprintf(o,
            "<text x=\"12\" y=\"%.1f\" fill=\"#555\">%s live in %zu blocks at %s, by %s</text>\n",
            top0 + 44, fmt_bytes(buf, sizeof(buf), res->live), res->rows,
            fmt_utc(buf2, sizeof(buf2), res->moment), by_name(opt->by));

    /* Bars per series, largest first ("other" last, whatever its size). */
    uint64_t max = 0;
    for (size_t b = 0; b < nb; b++)
        if (res->bands[b].live > max)
            max = res->bands[b].live;
    double top = y;
    uint64_t end = svg_byte_scale(o, bx, bw, top - 4, top + (double)nb * row + 2, max);
    for (size_t b = 0; b < nb; b++, y += row) {
        const band *bd = &res->bands[b];
        double len = bw * (double)bd->live / (double)end;
        svg_row_label(o, bx - 8, y + 13, bd);
        fprintf(o,
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.0f\" fill=\"%s\">"
                "<title>%" PRIu64 " bytes, %" PRIu64 " requested</title></rect>\n"
                "<text x=\"%.1f\" y=\"%.1f\">%s, %" PRIu64 " block%s</text>\n",
                bx, y, len, bar, bd->color, bd->live, bd->requested, bx + len + 6, y + 13,
                fmt_bytes(buf, sizeof(buf), bd->live), bd->blocks, bd->blocks == 1 ? "" : "s");
    }
    if (nb == 0)
        fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#777\">no live blocks</text>\n", bx, y + 13);
    y += 40;

    /* Live bytes by age: one bar per bucket, split by the series' colours
     * above. */
    fprintf(o, "<text x=\"12\" y=\"%.1f\" font-weight=\"bold\">live bytes by age</text>\n", y);
    y += 14;
    max = 0;
    for (int k = 0; k < NBUCKET; k++)
        if (res->bucket_bytes[k] > max)
            max = res->bucket_bytes[k];
    end = svg_byte_scale(o, bx, bw, y - 4, y + NBUCKET * age_row + 2, max);
    for (int k = 0; k < NBUCKET; k++, y += age_row) {
        fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">", bx - 8, y + 12);
        xml_put(o, bucket_names[k], 0);
        fputs("</text>\n", o);
        double x = bx;
        for (size_t b = 0; b < nb; b++) {
            uint64_t v = res->bucket_band[k * nb + b];
            if (v == 0)
                continue;
            double len = bw * (double)v / (double)end;
            fprintf(o,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"16\" fill=\"%s\">"
                    "<title>",
                    x, y, len, res->bands[b].color);
            put_band_name(o, &res->bands[b], 0);
            fprintf(o, ": %s</title></rect>\n", fmt_bytes(buf, sizeof(buf), v));
            x += len;
        }
        fprintf(o, "<text x=\"%.1f\" y=\"%.1f\">%s, %" PRIu64 " block%s</text>\n", x + 6, y + 12,
                fmt_bytes(buf, sizeof(buf), res->bucket_bytes[k]), res->bucket_blocks[k],
                res->bucket_blocks[k] == 1 ? "" : "s");
    }
    fputs("</svg>\n", o);
}

/* ------------------------------------------------------------------------
 * HTML
 * ------------------------------------------------------------------------ */

static void html_begin(FILE *o, const char *title)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>", o);
    xml_put(o, title, 0);
    fputs("</title>\n<style>\n"
          "body{font-family:Helvetica,Arial,sans-serif;margin:24px;color:#222}\n"
          "h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px}\n"
          ".meta{color:#555;margin:0 0 12px}\n"
          "svg{max-width:100%;height:auto;display:block}\n"
          "table{border-collapse:collapse;font-size:13px}\n"
          "th,td{padding:4px 12px;border-bottom:1px solid #ddd;text-align:left}\n"
          "th{background:#f4f4f4}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}\n"
          ".sw{display:inline-block;width:11px;height:11px;margin-right:7px;"
          "vertical-align:-1px}\n"
          "</style>\n</head>\n<body>\n<h1>",
          o);
    xml_put(o, title, 0);
    fputs("</h1>\n", o);
}

/* A byte count as a table cell: short, with the exact number on hover. */
static void html_bytes(FILE *o, uint64_t v)
{
    char buf[32];
    fprintf(o, "<td class=\"n\" title=\"%" PRIu64 " bytes\">%s</td>", v,
            fmt_bytes(buf, sizeof(buf), v));
}

static void html_name_cell(FILE *o, const band *b)
{
    fprintf(o, "<td><span class=\"sw\" style=\"background:%s\"></span>", b->color);
    put_band_name(o, b, 0);
    fputs("</td>", o);
}

static void html_kv(FILE *o, const char *key, const char *fmt, ...)
{
    va_list ap;
    fprintf(o, "<tr><th>%s</th><td class=\"n\">", key);
    va_start(ap, fmt);
    vfprintf(o, fmt, ap);
    va_end(ap);
    fputs("</td></tr>\n", o);
}

static void html_log(FILE *o, const log_result *res, const options *opt, const char *source,
                     const char *title)
{
    char buf[64], buf2[64];
    html_begin(o, title);
    fputs("<p class=\"meta\">", o);
    xml_put(o, source, 0);
    if (res->rows == 0)
        fputs(": no rows</p>\n", o);
    else
        fprintf(o, ": %zu rows from %s over %s</p>\n", res->rows,
                fmt_utc(buf, sizeof(buf), res->t0), fmt_secs(buf2, sizeof(buf2), res->last));
    svg_log(o, res, opt, title, false);
    fputs("<h2>Series</h2>\n<table>\n<tr><th>Series</th><th class=\"n\">Peak live</th>"
          "<th class=\"n\">Peak at</th><th class=\"n\">Total allocated</th>"
          "<th class=\"n\">Allocations</th></tr>\n",
          o);
    for (size_t b = 0; b < res->nband; b++) {
        const band *bd = &res->bands[b];
        fputs("<tr>", o);
        html_name_cell(o, bd);
        html_bytes(o, bd->peak);
        fprintf(o, "<td class=\"n\">%s</td>", fmt_secs(buf, sizeof(buf), bd->peak_t));
        html_bytes(o, bd->total);
        fprintf(o, "<td class=\"n\">%" PRIu64 "</td></tr>\n", bd->count);
    }
    fputs("</table>\n<h2>Overall</h2>\n<table>\n", o);
    html_kv(o, "Peak live", "%s (%" PRIu64 " bytes) at %s", fmt_bytes(buf, sizeof(buf), res->peak),
            res->peak, fmt_secs(buf2, sizeof(buf2), res->peak_t));
    html_kv(o, "Rows", "%zu", res->rows);
    html_kv(o, "Series", "%zu", res->series.n);
    html_kv(o, "Allocations", "%" PRIu64, res->allocs);
    html_kv(o, "Frees", "%" PRIu64, res->frees);
    html_kv(o, "Allocation failures", "%zu", res->nfail);
    html_kv(o, "Free failures", "%" PRIu64, res->free_fails);
    html_kv(o, "Frees without a matching allocation", "%" PRIu64, res->unmatched);
    html_kv(o, "Allocations over a live block", "%" PRIu64, res->reused);
    html_kv(o, "Live at the last row", "%s", fmt_bytes(buf, sizeof(buf), res->live_end));
    fputs("</table>\n</body>\n</html>\n", o);
}

static void html_snapshot(FILE *o, const snap_result *res, const options *opt, const char *source,
                          const char *title)
{
    char buf[64];
    html_begin(o, title);
    fputs("<p class=\"meta\">", o);
    xml_put(o, source, 0);
    fprintf(o, ": %zu live blocks at %s</p>\n", res->rows, fmt_utc(buf, sizeof(buf), res->moment));
    svg_snapshot(o, res, opt, title, false);
    fputs("<h2>Series</h2>\n<table>\n<tr><th>Series</th><th class=\"n\">Live</th>"
          "<th class=\"n\">Requested</th><th class=\"n\">Blocks</th>"
          "<th class=\"n\">Oldest</th></tr>\n",
          o);
    for (size_t b = 0; b < res->nband; b++) {
        const band *bd = &res->bands[b];
        fputs("<tr>", o);
        html_name_cell(o, bd);
        html_bytes(o, bd->live);
        html_bytes(o, bd->requested);
        fprintf(o, "<td class=\"n\">%" PRIu64 "</td><td class=\"n\">%.3f s</td></tr>\n", bd->blocks,
                bd->oldest);
    }
    fputs("</table>\n<h2>By age</h2>\n<table>\n<tr><th>Age</th><th class=\"n\">Live</th>"
          "<th class=\"n\">Blocks</th></tr>\n",
          o);
    for (int k = 0; k < NBUCKET; k++) {
        fputs("<tr><td>", o);
        xml_put(o, bucket_names[k], 0);
        fputs("</td>", o);
        html_bytes(o, res->bucket_bytes[k]);
        fprintf(o, "<td class=\"n\">%" PRIu64 "</td></tr>\n", res->bucket_blocks[k]);
    }
    fputs("</table>\n<h2>Overall</h2>\n<table>\n", o);
    html_kv(o, "Live", "%s (%" PRIu64 " bytes)", fmt_bytes(buf, sizeof(buf), res->live), res->live);
    html_kv(o, "Requested", "%s (%" PRIu64 " bytes)", fmt_bytes(buf, sizeof(buf), res->requested),
            res->requested);
    html_kv(o, "Blocks", "%zu", res->rows);
    html_kv(o, "Series", "%zu", res->series.n);
    fputs("</table>\n</body>\n</html>\n", o);
}

/* ------------------------------------------------------------------------
 * Main
 * ------------------------------------------------------------------------ */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: dv-viz [options] [FILE]\n"
            "\n"
            "Draws a devactor allocation log or live-memory snapshot (CSV, told apart by its\n"
            "header) as a self-contained HTML page or SVG chart.  FILE is read from standard\n"
            "input when absent or \"-\".\n"
            "\n"
            "  log       Thread,Time,Action,Pointer,Size,Stream,Device,Tag,QueryId\n"
            "            a stacked area chart of live bytes over time, one band per series,\n"
            "            the peak marked, allocation failures as red ticks on the time axis\n"
            "  snapshot  Pointer,Size,Requested,Stream,Device,Tag,QueryId,Thread,Time,Age\n"
            "            bars of live bytes per series, and by age\n"
            "\n"
            "  -o, --output FILE  write here (default: standard output, as for \"-\")\n"
            "  -f, --format F     html or svg (default: svg where -o ends in .svg, else html)\n"
            "  -b, --by KEY       series: tag (default), query (query id) or device;\n"
            "                     an empty Tag is the series \"no tag\" (one series with\n"
            "                     a tag of that name), QueryId 0 the series \"no query\"\n"
            "  -n, --top N        at most N series, by peak live bytes; the rest are summed\n"
            "                     into one series, \"other\", with a series of the\n"
            "                     program's own of that name (default 8; 1 to 256;\n"
            "                     colours repeat after 9)\n"
            "  -w, --width N      log: the plot's width in pixels, one column each, which\n"
            "                     keeps its highest total; snapshot: the chart's width\n"
            "                     (default 1000; 50 to 20000)\n"
            "      --height N     log: the plot's height in pixels (default 360)\n"
            "  -t, --title TEXT   the title (default: from FILE)\n"
            "      --csv          the per-series summary as CSV instead of a chart\n"
            "  -h, --help         this text\n"
            "\n"
            "--csv writes one row per series, \"other\" last, under the header\n"
            "  log       series,peak_bytes,peak_time_s,total_bytes,allocations\n"
            "  snapshot  series,live_bytes,requested_bytes,blocks,oldest_age_s\n"
            "peak_time_s in seconds since the first row; total_bytes (all a series\n"
            "allocated) stops at 2^64 - 1.  Live bytes past 2^64 - 1 are malformed input.\n"
            "\n"
            "A line to standard error sums up rows, series, peak live bytes and allocation\n"
            "failures.  Exit status: 0 done, 1 an unreadable or malformed input or an output\n"
            "error (named by file and line), 2 a usage error.\n");
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    if (n < m)
        return false;
    for (size_t i = 0; i < m; i++) {
        char c = s[n - m + i];
        if ((c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c) != suffix[i])
            return false;
    }
    return true;
}

static size_t arg_size(const char *opt, const char *arg, size_t lo, size_t hi)
{
    uint64_t v;
    if (!parse_u64(arg, &v) || v < lo || v > hi) {
        fprintf(stderr, "dv-viz: %s: \"%s\" is not a number from %zu to %zu\n", opt, arg, lo, hi);
        exit(2);
    }
    return (size_t)v;
}

static void parse_args(int argc, char **argv, options *opt)
{
    static const struct option longs[] = {
        {"output", required_argument, NULL, 'o'}, {"format", required_argument, NULL, 'f'},
        {"by", required_argument, NULL, 'b'},     {"top", required_argument, NULL, 'n'},
        {"width", required_argument, NULL, 'w'},  {"height", required_argument, NULL, 'H'},
        {"title", required_argument, NULL, 't'},  {"csv", no_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    *opt = (options){.format = FMT_AUTO, .by = BY_TAG, .top = 8, .width = 1000, .height = 360};
    int c;
    while ((c = getopt_long(argc, argv, "o:f:b:n:w:t:h", longs, NULL)) != -1) {
        switch (c) {
        case 'o':
            opt->output = optarg;
            break;
        case 'f':
            if (strcmp(optarg, "html") == 0)
                opt->format = FMT_HTML;
            else if (strcmp(optarg, "svg") == 0)
                opt->format = FMT_SVG;
            else {
                fprintf(stderr, "dv-viz: --format: \"%s\" is not html or svg\n", optarg);
                exit(2);
            }
            break;
        case 'b':
            if (strcmp(optarg, "tag") == 0)
                opt->by = BY_TAG;
            else if (strcmp(optarg, "query") == 0)
                opt->by = BY_QUERY;
            else if (strcmp(optarg, "device") == 0)
                opt->by = BY_DEVICE;
            else {
                fprintf(stderr, "dv-viz: --by: \"%s\" is not tag, query or device\n", optarg);
                exit(2);
            }
            break;
        case 'n':
            opt->top = arg_size("--top", optarg, 1, 256);
            break;
        case 'w':
            opt->width = arg_size("--width", optarg, 50, 20000);
            break;
        case 'H':
            opt->height = arg_size("--height", optarg, 50, 10000);
            break;
        case 't':
            opt->title = optarg;
            break;
        case 'c':
            opt->csv = true;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            exit(2);
        }
    }
    if (argc - optind > 1) {
        fprintf(stderr, "dv-viz: one input file at most\n");
        usage(stderr);
        exit(2);
    }
    opt->input = optind < argc ? argv[optind] : NULL;
    if (opt->format == FMT_AUTO)
        opt->format = opt->output != NULL && ends_with(opt->output, ".svg") ? FMT_SVG : FMT_HTML;
}

/* Which input the header says this is: 1 a log, 2 a snapshot. */
static int input_kind(const csv_reader *r)
{
    const char *const *cols[] = {log_cols, snap_cols};
    const size_t ncols[] = {LOG_NCOL, SNAP_NCOL};
    for (int k = 0; k < 2; k++) {
        if (r->nfield != ncols[k])
            continue;
        size_t i = 0;
        while (i < ncols[k] && strcmp(csv_field(r, i), cols[k][i]) == 0)
            i++;
        if (i == ncols[k])
            return k + 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    options opt;
    parse_args(argc, argv, &opt);

    csv_reader r;
    csv_open(&r, opt.input);
    if (!csv_next(&r))
        die("%s: empty: no header line", r.name);
    int kind = input_kind(&r);
    if (kind == 0)
        die_at(&r, "not a devactor allocation log or snapshot: the header is neither\n"
                   "  Thread,Time,Action,Pointer,Size,Stream,Device,Tag,QueryId nor\n"
                   "  Pointer,Size,Requested,Stream,Device,Tag,QueryId,Thread,Time,Age");

    log_result lr;
    snap_result sr;
    if (kind == 1)
        analyse_log(&r, &opt, &lr);
    else
        analyse_snapshot(&r, &opt, &sr);
    const char *source = opt.input != NULL && strcmp(opt.input, "-") != 0 ? opt.input : "<stdin>";
    csv_close(&r);

    char title[512];
    if (opt.title != NULL)
        snprintf(title, sizeof(title), "%s", opt.title);
    else if (kind == 1)
        snprintf(title, sizeof(title), "Live device memory: %s", base_name(source));
    else
        snprintf(title, sizeof(title), "Live device memory at a snapshot: %s", base_name(source));

    FILE *o = stdout;
    const char *out_name = "<stdout>";
    if (opt.output != NULL && strcmp(opt.output, "-") != 0) {
        o = fopen(opt.output, "w");
        if (o == NULL)
            die("%s: %s", opt.output, strerror(errno));
        out_name = opt.output;
    }
    static char obuf[1 << 16];
    setvbuf(o, obuf, _IOFBF, sizeof(obuf));

    if (kind == 1 && opt.csv) {
        fputs("series,peak_bytes,peak_time_s,total_bytes,allocations\n", o);
        for (size_t b = 0; b < lr.nband; b++) {
            const band *bd = &lr.bands[b];
            csv_out(o, bd->name);
            fprintf(o, ",%" PRIu64 ",%.6f,%" PRIu64 ",%" PRIu64 "\n", bd->peak,
                    (double)bd->peak_t / 1e6, bd->total, bd->count);
        }
    } else if (kind == 2 && opt.csv) {
        fputs("series,live_bytes,requested_bytes,blocks,oldest_age_s\n", o);
        for (size_t b = 0; b < sr.nband; b++) {
            const band *bd = &sr.bands[b];
            csv_out(o, bd->name);
            fprintf(o, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.6f\n", bd->live, bd->requested,
                    bd->blocks, bd->oldest);
        }
    } else if (kind == 1) {
        if (opt.format == FMT_SVG)
            svg_log(o, &lr, &opt, title, true);
        else
            html_log(o, &lr, &opt, source, title);
    } else {
        if (opt.format == FMT_SVG)
            svg_snapshot(o, &sr, &opt, title, true);
        else
            html_snapshot(o, &sr, &opt, source, title);
    }
    if (fflush(o) != 0 || ferror(o))
        die("%s: %s", out_name, strerror(errno));
    if (o != stdout && fclose(o) != 0)
        die("%s: %s", out_name, strerror(errno));

    if (kind == 1) {
        fprintf(stderr,
                "dv-viz: %s: %zu rows, %zu series, peak %" PRIu64 " bytes at %.6f s, "
                "%zu allocation failures\n",
                source, lr.rows, lr.series.n, lr.peak, (double)lr.peak_t / 1e6, lr.nfail);
        log_result_free(&lr);
    } else {
        fprintf(stderr,
                "dv-viz: %s: %zu rows, %zu series, peak %" PRIu64
                " bytes (live at the snapshot), 0 allocation failures\n",
                source, sr.rows, sr.series.n, sr.live);
        snap_result_free(&sr);
    }
    return 0;
}
