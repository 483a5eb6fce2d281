/*
 * The block-use tracker (design: tracker.h): stream epochs, a ring of
 * re-recorded events per stream, a wait matrix, and the live table.
 */
#include <stdlib.h>
#include <string.h>

#include "resources/tracker.h"

#define RING 4 /* events per stream */
#define SLAB 256

struct ring_slot {
    dv_drv_event *ev;
    uint64_t epoch; /* the stream's epoch when the event was recorded */
};

struct stream_state {
    uint64_t epoch;    /* last epoch marked */
    uint64_t recorded; /* newest epoch an event captured */
    struct ring_slot ring[RING];
    uint32_t next; /* slot the next record uses */
    /* waited[s]: the epoch of stream s this stream already waits for. */
    uint64_t waited[DV_MAX_STREAMS];
};

/* The first slab holds SLAB entries, each later one twice the last, up to
 * a huge page (dv__slab_alloc). */
struct slab {
    struct slab *next;
    size_t bytes;
    dv_track_entry entries[];
};

struct dv_tracker {
    dv_res_env *env;
    dv_track_entry **table; /* open addressing, NULL = empty */
    size_t cap, count;
    unsigned shift; /* 64 - log2(cap) */
    dv_track_entry *free_entries;
    struct slab *slabs;
    atomic_uint_fast64_t waits, waits_skipped, records, events, live;
    struct stream_state st[DV_MAX_STREAMS];
};

/* Relaxed counters: statistics, read from any thread. */
#define STAT_INC(t, f) atomic_fetch_add_explicit(&(t)->f, 1, memory_order_relaxed)

/* ------------------------------------------------------------------------
 * Life cycle
 * ------------------------------------------------------------------------ */

/* A large table goes on a huge page (zeroed by the mapping). */
#define TABLE_HUGE (DV_SLAB_HUGE / 4)

static void *table_alloc(size_t bytes)
{
    return bytes >= TABLE_HUGE ? dv__slab_alloc(bytes < DV_SLAB_HUGE ? DV_SLAB_HUGE : bytes)
                               : calloc(1, bytes);
}

static void table_free(void *table, size_t bytes)
{
    if (bytes >= TABLE_HUGE)
        dv__slab_free(table, bytes < DV_SLAB_HUGE ? DV_SLAB_HUGE : bytes);
    else
        free(table);
}

static int table_init(dv_tracker *t, size_t cap)
{
    t->table = table_alloc(cap * sizeof(*t->table));
    if (t->table == NULL)
        return -1;
    t->cap = cap;
    t->shift = 64;
    for (size_t c = cap; c > 1; c >>= 1)
        t->shift--;
    return 0;
}

int dv_tracker_create(dv_res_env *env, dv_tracker **out)
{
    dv_tracker *t = calloc(1, sizeof(*t));
    if (t == NULL || table_init(t, 1024) != 0) {
        free(t);
        return dv__fail(DV_ENOMEM, "tracker_create", "out of host memory");
    }
    t->env = env;
    *out = t;
    return DV_OK;
}

void dv_tracker_destroy(dv_tracker *t)
{
    if (t == NULL)
        return;
    for (uint32_t s = 0; s < DV_MAX_STREAMS; s++)
        for (int i = 0; i < RING; i++)
            if (t->st[s].ring[i].ev != NULL)
                (void)dv_drv_event_destroy(t->st[s].ring[i].ev);
    for (size_t i = 0; i < t->cap; i++) {
        dv_track_entry *e = t->table[i];
        if (e != NULL && e->reads != e->reads_inline)
            free(e->reads);
    }
    while (t->slabs != NULL) {
        struct slab *next = t->slabs->next;
        dv__slab_free(t->slabs, t->slabs->bytes);
        t->slabs = next;
    }
    table_free(t->table, t->cap * sizeof(*t->table));
    free(t);
}

void dv_tracker_stats_get(const dv_tracker *t, dv_tracker_stats *out)
{
    out->waits = atomic_load_explicit(&t->waits, memory_order_relaxed);
    out->waits_skipped = atomic_load_explicit(&t->waits_skipped, memory_order_relaxed);
    out->records = atomic_load_explicit(&t->records, memory_order_relaxed);
    out->events = atomic_load_explicit(&t->events, memory_order_relaxed);
    out->live_blocks = atomic_load_explicit(&t->live, memory_order_relaxed);
}

/* ------------------------------------------------------------------------
 * Stream positions and events
 * ------------------------------------------------------------------------ */

uint64_t dv_tracker_mark(dv_tracker *t, dv_stream_id stream)
{
    return ++t->st[stream].epoch;
}

dv_stream_pos dv_tracker_now(const dv_tracker *t, dv_stream_id stream)
{
    return (dv_stream_pos){stream, t->st[stream].epoch};
}

/* Record an event capturing everything marked on stream so far. */
static int record(dv_tracker *t, dv_stream_id stream, struct ring_slot **slot_out)
{
    struct stream_state *s = &t->st[stream];
    struct ring_slot *slot = &s->ring[s->next];
    int rc;

    if (slot->ev == NULL) {
        if ((rc = dv_drv_event_create(t->env->ctx, &slot->ev)) != DV_OK)
            return rc;
        STAT_INC(t, events);
    }
    if ((rc = dv_drv_event_record(slot->ev, t->env->streams[stream])) != DV_OK)
        return rc;
    STAT_INC(t, records);
    slot->epoch = s->epoch;
    s->recorded = s->epoch;
    s->next = (s->next + 1) % RING;
    *slot_out = slot;
    return DV_OK;
}

/* The ring event that captures pos with the least extra work, recording a
 * new one when none is recent enough. */
static int event_for(dv_tracker *t, dv_stream_pos pos, struct ring_slot **out)
{
    struct stream_state *s = &t->st[pos.stream];
    struct ring_slot *best = NULL;

    if (s->recorded < pos.epoch)
        return record(t, pos.stream, out);
    for (int i = 0; i < RING; i++) {
        struct ring_slot *slot = &s->ring[i];
        if (slot->ev != NULL && slot->epoch >= pos.epoch &&
            (best == NULL || slot->epoch < best->epoch))
            best = slot;
    }
    /* recorded >= epoch guarantees the newest slot qualifies. */
    *out = best;
    return DV_OK;
}

int dv_tracker_wait(dv_tracker *t, dv_stream_id waiter, dv_stream_pos pos)
{
    struct stream_state *w = &t->st[waiter];
    struct ring_slot *slot;
    int rc;

    if (pos.epoch == 0 || pos.stream == waiter)
        return DV_OK;
    if (w->waited[pos.stream] >= pos.epoch) {
        STAT_INC(t, waits_skipped);
        return DV_OK;
    }
    if ((rc = event_for(t, pos, &slot)) != DV_OK)
        return rc;
    if ((rc = dv_drv_stream_wait_event(t->env->streams[waiter], slot->ev)) != DV_OK)
        return rc;
    STAT_INC(t, waits);
    /* The wait covers everything the event captured, not just pos. */
    w->waited[pos.stream] = slot->epoch;
    return DV_OK;
}

int dv_tracker_flush(dv_tracker *t, dv_stream_id stream)
{
    struct ring_slot *slot;
    if (t->st[stream].epoch <= t->st[stream].recorded)
        return DV_OK;
    return record(t, stream, &slot);
}

int dv_tracker_reached(dv_tracker *t, dv_stream_pos pos, bool *reached)
{
    struct ring_slot *slot;
    int rc;

    *reached = true;
    if (pos.epoch == 0)
        return DV_OK;
    if ((rc = event_for(t, pos, &slot)) != DV_OK)
        return rc;
    return dv_drv_event_query(slot->ev, reached);
}

int dv_tracker_sync(dv_tracker *t, dv_stream_pos pos)
{
    struct ring_slot *slot;
    int rc;

    if (pos.epoch == 0)
        return DV_OK;
    if ((rc = event_for(t, pos, &slot)) != DV_OK)
        return rc;
    return dv_drv_event_sync(slot->ev);
}

/* ------------------------------------------------------------------------
 * Live table
 * ------------------------------------------------------------------------ */

static size_t slot_of(const dv_tracker *t, dv_dptr ptr)
{
    /* Pointers are 256-byte aligned: drop the zero bits, then Fibonacci
     * hashing spreads neighbours over the table. */
    return (size_t)(((ptr >> 8) * UINT64_C(0x9E3779B97F4A7C15)) >> t->shift);
}

static void table_put(dv_tracker *t, dv_track_entry *e)
{
    size_t mask = t->cap - 1, i = slot_of(t, e->block.ptr);
    while (t->table[i] != NULL)
        i = (i + 1) & mask;
    t->table[i] = e;
    t->count++;
}

static int table_grow(dv_tracker *t)
{
    dv_track_entry **old = t->table;
    size_t old_cap = t->cap;
    if (table_init(t, old_cap * 2) != 0) {
        t->table = old;
        t->cap = old_cap;
        t->shift = 64;
        for (size_t c = old_cap; c > 1; c >>= 1)
            t->shift--;
        return -1;
    }
    t->count = 0;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i] != NULL)
            table_put(t, old[i]);
    table_free(old, old_cap * sizeof(*old));
    return 0;
}

dv_track_entry *dv_tracker_lookup(dv_tracker *t, dv_dptr ptr)
{
    size_t mask = t->cap - 1, i = slot_of(t, ptr);
    for (dv_track_entry *e; (e = t->table[i]) != NULL; i = (i + 1) & mask)
        if (e->block.ptr == ptr)
            return e;
    return NULL;
}

/* Backward-shift deletion keeps probe sequences unbroken without
 * tombstones. */
static void table_del(dv_tracker *t, dv_track_entry *victim)
{
    size_t mask = t->cap - 1, i = slot_of(t, victim->block.ptr);
    while (t->table[i] != victim)
        i = (i + 1) & mask;
    for (size_t j = (i + 1) & mask; t->table[j] != NULL; j = (j + 1) & mask) {
        size_t home = slot_of(t, t->table[j]->block.ptr);
        /* Move j back to i when its home is not in (i, j]. */
        bool between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!between) {
            t->table[i] = t->table[j];
            i = j;
        }
    }
    t->table[i] = NULL;
    t->count--;
}

/* Only the owner thread writes the count: a plain store, not a locked
 * read-modify-write, on the allocate/free path. */
static void live_add(dv_tracker *t, int delta)
{
    uint64_t n = atomic_load_explicit(&t->live, memory_order_relaxed);
    atomic_store_explicit(&t->live, n + (uint64_t)(int64_t)delta, memory_order_relaxed);
}

static dv_track_entry *entry_new(dv_tracker *t)
{
    if (t->free_entries == NULL) {
        size_t bytes = t->slabs == NULL ? sizeof(struct slab) + SLAB * sizeof(dv_track_entry)
                                        : dv__slab_next(t->slabs->bytes);
        struct slab *s = dv__slab_alloc(bytes);
        if (s == NULL)
            return NULL;
        s->bytes = bytes;
        s->next = t->slabs;
        t->slabs = s;
        for (size_t i = (bytes - sizeof(*s)) / sizeof(dv_track_entry); i-- > 0;) {
            s->entries[i].next_free = t->free_entries;
            t->free_entries = &s->entries[i];
        }
    }
    dv_track_entry *e = t->free_entries;
    t->free_entries = e->next_free;
    return e;
}

dv_track_entry *dv_tracker_insert(dv_tracker *t, const dv_block *block, void *owner_data)
{
    if (2 * (t->count + 1) > t->cap && table_grow(t) != 0) {
        dv__fail(DV_ENOMEM, "allocate", "out of host memory for the live-block table");
        return NULL;
    }
    dv_track_entry *e = entry_new(t);
    if (e == NULL) {
        dv__fail(DV_ENOMEM, "allocate", "out of host memory for the live-block table");
        return NULL;
    }
    e->block = *block;
    e->owner_data = owner_data;
    /* The allocation was enqueued on its stream: the first "write". */
    e->last_write = (dv_stream_pos){block->alloc_stream, dv_tracker_mark(t, block->alloc_stream)};
    e->nreads = 0;
    e->reads = e->reads_inline;
    table_put(t, e);
    live_add(t, 1);
    return e;
}

dv_track_entry *dv_tracker_find(dv_tracker *t, dv_block_id id, const char *op)
{
    dv_track_entry *e = dv_tracker_lookup(t, id.ptr);
    if (e != NULL && e->block.generation == id.generation)
        return e;
    if (e == NULL)
        dv__fail(DV_EUSE_AFTER_FREE, op,
                 "%s: no live block at 0x%llx (generation %llu): freed already, or never "
                 "allocated here",
                 op, (unsigned long long)id.ptr, (unsigned long long)id.generation);
    else
        dv__fail(DV_EUSE_AFTER_FREE, op,
                 "%s: stale block 0x%llx: generation %llu was freed; generation %llu lives "
                 "there now",
                 op, (unsigned long long)id.ptr, (unsigned long long)id.generation,
                 (unsigned long long)e->block.generation);
    dv__detail()->generation = id.generation;
    return NULL;
}

void dv_tracker_remove(dv_tracker *t, dv_track_entry *e)
{
    table_del(t, e);
    if (e->reads != e->reads_inline)
        free(e->reads);
    e->reads = NULL;
    e->next_free = t->free_entries;
    t->free_entries = e;
    live_add(t, -1);
}

void dv_tracker_foreach(dv_tracker *t, void (*fn)(dv_track_entry *e, void *arg), void *arg)
{
    /* Collect first: fn may remove entries, which shifts the table. */
    size_t n = 0;
    dv_track_entry **all = malloc((t->count + 1) * sizeof(*all));
    if (all == NULL)
        return;
    for (size_t i = 0; i < t->cap; i++)
        if (t->table[i] != NULL)
            all[n++] = t->table[i];
    for (size_t i = 0; i < n; i++)
        fn(all[i], arg);
    free(all);
}

/* ------------------------------------------------------------------------
 * Block uses
 * ------------------------------------------------------------------------ */

int dv_tracker_prepare(dv_tracker *t, dv_track_entry *e, dv_stream_id stream, dv_access a)
{
    int rc = dv_tracker_wait(t, stream, e->last_write);
    if (rc != DV_OK || a == DV_ACCESS_READ)
        return rc;
    for (uint32_t i = 0; i < e->nreads; i++)
        if ((rc = dv_tracker_wait(t, stream, e->reads[i])) != DV_OK)
            return rc;
    return DV_OK;
}

/* Add a use to the outstanding reads: one entry per stream (the later
 * use on a stream covers the earlier). */
static void add_read(dv_track_entry *e, dv_stream_pos pos)
{
    for (uint32_t i = 0; i < e->nreads; i++) {
        if (e->reads[i].stream == pos.stream) {
            e->reads[i].epoch = pos.epoch;
            return;
        }
    }
    if (e->nreads == DV_TRACK_INLINE_READS && e->reads == e->reads_inline) {
        dv_stream_pos *heap = malloc(DV_MAX_STREAMS * sizeof(*heap));
        if (heap == NULL) {
            /* No room for the edge: make the read the last write instead.
             * Readers and writers then wait on it too (more than needed),
             * and it covers the old last write, which its prepare waited
             * for.  Safe, only slower. */
            e->last_write = pos;
            return;
        }
        memcpy(heap, e->reads_inline, sizeof(e->reads_inline));
        e->reads = heap;
    }
    e->reads[e->nreads++] = pos;
}

void dv_tracker_finish(dv_tracker *t, dv_track_entry *e, dv_stream_id stream, dv_access a)
{
    dv_stream_pos pos = {stream, dv_tracker_mark(t, stream)};
    if (a == DV_ACCESS_READ) {
        add_read(e, pos);
        return;
    }
    e->last_write = pos;
    e->nreads = 0;
}

void dv_tracker_record(dv_tracker *t, dv_track_entry *e, dv_stream_id stream)
{
    add_read(e, (dv_stream_pos){stream, dv_tracker_mark(t, stream)});
}

int dv_tracker_fence_uses(dv_tracker *t, dv_track_entry *e)
{
    return dv_tracker_prepare(t, e, e->block.alloc_stream, DV_ACCESS_WRITE);
}
