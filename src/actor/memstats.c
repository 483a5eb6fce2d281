/*
 * The actor's memory statistics (memstats.h).
 */
#include <stdlib.h>
#include <string.h>

#include "actor/memstats.h"
#include "base/error.h"

static void count_up(dv_memory_counter *c, uint64_t n)
{
    c->current += n;
    c->total += n;
    if (c->current > c->peak)
        c->peak = c->current;
}

static void count_down(dv_memory_counter *c, uint64_t n)
{
    c->current = c->current >= n ? c->current - n : 0;
}

static uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= UINT64_C(0xff51afd7ed558ccd);
    k ^= k >> 33;
    return k;
}

static uint64_t key_of(const dv_memrow *r, bool by_tag)
{
    return by_tag ? (uint64_t)(uintptr_t)r->tag : r->query;
}

/* The row of key, made where absent (NULL: no memory for the table). */
static dv_memrow *row_find(dv_memtable *t, uint64_t key, bool by_tag, bool make);

static dv_memrow *row_at(dv_memtable *t, uint64_t key, bool by_tag, bool make)
{
    if (t->last != NULL && key_of(t->last, by_tag) == key)
        return t->last;
    dv_memrow *r = row_find(t, key, by_tag, make);
    if (r != NULL)
        t->last = r;
    return r;
}

static dv_memrow *row_find(dv_memtable *t, uint64_t key, bool by_tag, bool make)
{
    if (make && (t->n + 1) * 2 > t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 64;
        dv_memrow *rows = calloc(cap, sizeof(*rows));
        if (rows == NULL)
            return NULL;
        for (uint32_t i = 0; i < t->cap; i++) {
            if (!t->rows[i].used)
                continue;
            uint64_t h = mix(key_of(&t->rows[i], by_tag)) & (cap - 1);
            while (rows[h].used)
                h = (h + 1) & (cap - 1);
            rows[h] = t->rows[i];
        }
        free(t->rows);
        t->rows = rows;
        t->cap = cap;
        t->last = NULL;
    }
    if (t->cap == 0)
        return NULL;
    uint64_t h = mix(key) & (t->cap - 1);
    while (t->rows[h].used) {
        if (key_of(&t->rows[h], by_tag) == key)
            return &t->rows[h];
        h = (h + 1) & (t->cap - 1);
    }
    if (!make)
        return NULL;
    dv_memrow *r = &t->rows[h];
    memset(r, 0, sizeof(*r));
    r->used = true;
    if (by_tag)
        r->tag = (const char *)(uintptr_t)key;
    else
        r->query = key;
    t->n++;
    return r;
}

void dv__memstats_init(dv_memstats *ms)
{
    memset(ms, 0, sizeof(*ms));
}

void dv__memstats_free(dv_memstats *ms)
{
    free(ms->tags.rows);
    free(ms->queries.rows);
    memset(ms, 0, sizeof(*ms));
}

static int by_finish(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* The finish sequence of the oldest of the newest `keep` finished
 * queries (those before it are forgotten, or hidden), 0 when no more
 * than keep finished; UINT64_MAX when it cannot be told (no memory). */
static uint64_t finished_cut(const dv_memstats *ms, uint32_t keep)
{
    const dv_memtable *t = &ms->queries;
    if (ms->finished_kept <= keep)
        return 0;
    uint64_t *seqs = malloc((size_t)ms->finished_kept * sizeof(*seqs));
    if (seqs == NULL)
        return UINT64_MAX;
    uint32_t n = 0;
    for (uint32_t i = 0; i < t->cap; i++)
        if (t->rows[i].used && t->rows[i].finished != 0)
            seqs[n++] = t->rows[i].finished;
    qsort(seqs, n, sizeof(*seqs), by_finish);
    uint64_t cut = n > keep ? seqs[n - keep] : 0;
    free(seqs);
    return cut;
}

/* Keep the newest DV_QUERIES_KEPT finished queries: the table is built
 * again without the others (open addressing has no cheap delete) once
 * twice as many finished, and listing shows the newest DV_QUERIES_KEPT of
 * those between.  Amortised: it runs once per DV_QUERIES_KEPT finishes. */
static void forget_old_queries(dv_memstats *ms)
{
    dv_memtable *t = &ms->queries;
    uint64_t cut = finished_cut(ms, DV_QUERIES_KEPT);
    if (cut == UINT64_MAX)
        return; /* try again at the next finish */
    dv_memtable old = *t;
    dv_memtable fresh = {0};
    uint32_t kept = 0;
    for (uint32_t i = 0; i < old.cap; i++) {
        dv_memrow *r = &old.rows[i];
        if (!r->used || (r->finished != 0 && r->finished < cut))
            continue;
        dv_memrow *to = row_at(&fresh, r->query, false, true);
        if (to == NULL) {
            free(fresh.rows);
            return; /* no memory: keep the old table */
        }
        *to = *r;
        kept += r->finished != 0;
    }
    free(old.rows);
    *t = fresh;
    ms->finished_kept = kept;
}

void dv__memstats_alloc(dv_memstats *ms, const char *tag, uint64_t query, uint64_t bytes)
{
    count_up(&ms->bytes, bytes);
    count_up(&ms->blocks, 1);
    dv_memrow *r = row_at(&ms->tags, (uint64_t)(uintptr_t)tag, true, true);
    if (r != NULL) {
        count_up(&r->bytes, bytes);
        count_up(&r->blocks, 1);
    }
    if ((r = row_at(&ms->queries, query, false, true)) != NULL) {
        if (r->finished != 0) { /* the query goes on */
            r->finished = 0;
            ms->finished_kept--;
        }
        count_up(&r->bytes, bytes);
        count_up(&r->blocks, 1);
    }
}

void dv__memstats_release(dv_memstats *ms, const char *tag, uint64_t query, uint64_t bytes)
{
    count_down(&ms->bytes, bytes);
    count_down(&ms->blocks, 1);
    dv_memrow *r = row_at(&ms->tags, (uint64_t)(uintptr_t)tag, true, false);
    if (r != NULL) {
        count_down(&r->bytes, bytes);
        count_down(&r->blocks, 1);
    }
    if ((r = row_at(&ms->queries, query, false, false)) != NULL) {
        count_down(&r->bytes, bytes);
        count_down(&r->blocks, 1);
        if (r->blocks.current == 0 && r->finished == 0 && query != 0) {
            r->finished = ++ms->finish_seq;
            if (++ms->finished_kept > 2 * DV_QUERIES_KEPT)
                forget_old_queries(ms);
        }
    }
}

void dv__memstats_reserved(dv_memstats *ms, uint64_t now)
{
    if (now > ms->reserved.current)
        ms->reserved.total += now - ms->reserved.current;
    ms->reserved.current = now;
    if (now > ms->reserved.peak)
        ms->reserved.peak = now;
}

static void table_each(dv_memtable *t, void (*fn)(dv_memrow *))
{
    for (uint32_t i = 0; i < t->cap; i++)
        if (t->rows[i].used)
            fn(&t->rows[i]);
}

static void row_reset_peak(dv_memrow *r)
{
    r->bytes.peak = r->bytes.current;
    r->blocks.peak = r->blocks.current;
}

static void row_restart(dv_memrow *r)
{
    r->bytes.current = r->blocks.current = 0;
}

void dv__memstats_reset_peaks(dv_memstats *ms)
{
    ms->bytes.peak = ms->bytes.current;
    ms->blocks.peak = ms->blocks.current;
    ms->reserved.peak = ms->reserved.current;
    table_each(&ms->tags, row_reset_peak);
    table_each(&ms->queries, row_reset_peak);
}

void dv__memstats_restart(dv_memstats *ms)
{
    ms->bytes.current = ms->blocks.current = ms->reserved.current = 0;
    table_each(&ms->tags, row_restart);
    table_each(&ms->queries, row_restart);
}

static int by_usage(const void *x, const void *y)
{
    const dv_memory_usage *a = x, *b = y;
    if (a->bytes.current != b->bytes.current)
        return a->bytes.current > b->bytes.current ? -1 : 1;
    if (a->bytes.peak != b->bytes.peak)
        return a->bytes.peak > b->bytes.peak ? -1 : 1;
    return a->query_id < b->query_id ? -1 : a->query_id > b->query_id;
}

/* Finished queries kept but past the newest DV_QUERIES_KEPT: not shown. */
static uint32_t queries_hidden(const dv_memstats *ms)
{
    return ms->finished_kept > DV_QUERIES_KEPT ? ms->finished_kept - DV_QUERIES_KEPT : 0;
}

size_t dv__memstats_count(const dv_memstats *ms, dv_memory_key by)
{
    return by == DV_MEMORY_BY_TAG ? ms->tags.n : ms->queries.n - queries_hidden(ms);
}

int dv__memstats_rows(const dv_memstats *ms, dv_memory_key by, dv_memory_usage *out, size_t cap,
                      size_t *count)
{
    const dv_memtable *t = by == DV_MEMORY_BY_TAG ? &ms->tags : &ms->queries;
    *count = dv__memstats_count(ms, by);
    if (*count == 0 || cap == 0)
        return DV_OK;
    uint64_t cut = by == DV_MEMORY_BY_QUERY ? finished_cut(ms, DV_QUERIES_KEPT) : 0;
    dv_memory_usage *all = malloc((size_t)t->n * sizeof(*all));
    if (all == NULL || cut == UINT64_MAX) {
        free(all);
        return dv__fail(DV_ENOMEM, "memory_usage", "memory_usage: out of host memory");
    }
    size_t n = 0;
    for (uint32_t i = 0; i < t->cap; i++) {
        const dv_memrow *r = &t->rows[i];
        if (!r->used || (r->finished != 0 && r->finished < cut))
            continue;
        all[n] = (dv_memory_usage){.tag = by == DV_MEMORY_BY_TAG ? r->tag : NULL,
                                   .query_id = by == DV_MEMORY_BY_QUERY ? r->query : 0,
                                   .bytes = r->bytes,
                                   .blocks = r->blocks};
        n++;
    }
    qsort(all, n, sizeof(*all), by_usage);
    memcpy(out, all, (n < cap ? n : cap) * sizeof(*out));
    free(all);
    return DV_OK;
}
