/*
 * The block-use tracker (design: tracker.h): stream epochs, a ring of
 * re-recorded events per stream, a wait matrix, and the live table.
 */
#include <stdlib.h>
#include <string.h>

#include "resources/tracker.h"

#define RING 4 /* events per stream */
#define SLAB 32

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

/*
 * Slab k of the directory holds SLAB << k entries, up to SLAB_MAX (one
 * huge page, dv__slab_alloc).  A slot is ((k + 1) << 16) | index, so 0 is
 * no slot and decoding is two shifts and a bounds check.
 */
#define SLAB_MAX   ((uint32_t)(DV_SLAB_HUGE / sizeof(dv_track_entry)))
#define SLOT_SHIFT 16
_Static_assert(SLAB_MAX <= 1u << SLOT_SHIFT, "an index fits below the slab number");

struct dv_tracker {
    dv_res_env *env;
    dv_track_entry **dir; /* slabs */
    uint32_t nslabs, dir_cap;
    uint32_t used; /* entries of the newest slab handed out so far */
    dv_track_entry *free_entries;
    atomic_uint_fast64_t waits, waits_skipped, records, events, live;
    struct stream_state st[DV_MAX_STREAMS];
};

/* Relaxed counters: statistics, read from any thread. */
#define STAT_INC(t, f) atomic_fetch_add_explicit(&(t)->f, 1, memory_order_relaxed)

/* ------------------------------------------------------------------------
 * Life cycle
 * ------------------------------------------------------------------------ */

static uint32_t slab_entries(uint32_t k)
{
    uint64_t n = k < 32 ? (uint64_t)SLAB << k : SLAB_MAX;
    return n < SLAB_MAX ? (uint32_t)n : SLAB_MAX;
}

int dv_tracker_create(dv_res_env *env, dv_tracker **out)
{
    dv_tracker *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return dv__fail(DV_ENOMEM, "tracker_create", "out of host memory");
    t->env = env;
    *out = t;
    return DV_OK;
}

/* Entries handed out of slab k (live or on the free list). */
static uint32_t slab_used(const dv_tracker *t, uint32_t k)
{
    return k + 1 == t->nslabs ? t->used : slab_entries(k);
}

/* A live entry's reads past the inline ones (destroy drops the entry). */
static void free_reads(dv_track_entry *e, void *arg)
{
    (void)arg;
    if (e->reads != e->reads_inline)
        free(e->reads);
}

void dv_tracker_destroy(dv_tracker *t)
{
    if (t == NULL)
        return;
    for (uint32_t s = 0; s < DV_MAX_STREAMS; s++)
        for (int i = 0; i < RING; i++)
            if (t->st[s].ring[i].ev != NULL)
                (void)dv_drv_event_destroy(t->st[s].ring[i].ev);
    dv_tracker_foreach(t, free_reads, NULL);
    for (uint32_t k = 0; k < t->nslabs; k++)
        dv__slab_free(t->dir[k], slab_entries(k) * sizeof(dv_track_entry));
    free(t->dir);
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

/* Only the owner thread writes the count: a plain store, not a locked
 * read-modify-write, on the allocate/free path. */
static void live_add(dv_tracker *t, int delta)
{
    uint64_t n = atomic_load_explicit(&t->live, memory_order_relaxed);
    atomic_store_explicit(&t->live, n + (uint64_t)(int64_t)delta, memory_order_relaxed);
}

static int slab_add(dv_tracker *t)
{
    if (t->nslabs == t->dir_cap) {
        if (t->dir_cap >= (1u << (32 - SLOT_SHIFT)) - 1)
            return -1;
        uint32_t cap = t->dir_cap ? 2 * t->dir_cap : 16;
        dv_track_entry **dir = realloc(t->dir, cap * sizeof(*dir));
        if (dir == NULL)
            return -1;
        t->dir = dir;
        t->dir_cap = cap;
    }
    size_t bytes = slab_entries(t->nslabs) * sizeof(dv_track_entry);
    dv_track_entry *slab = dv__slab_alloc(bytes);
    if (slab == NULL)
        return -1;
    /* A huge mapping is zero already; touching it would fault it in whole. */
    if (bytes < DV_SLAB_HUGE)
        memset(slab, 0, bytes);
    t->dir[t->nslabs++] = slab;
    t->used = 0;
    return 0;
}

/* A free entry, its slot set: the last one freed, else the next of the
 * newest slab, else a new slab.  NULL: out of memory. */
static dv_track_entry *entry_new(dv_tracker *t)
{
    dv_track_entry *e = t->free_entries;
    if (e != NULL) {
        t->free_entries = e->next_free;
        return e;
    }
    if ((t->nslabs == 0 || t->used == slab_entries(t->nslabs - 1)) && slab_add(t) != 0)
        return NULL;
    uint32_t k = t->nslabs - 1;
    e = &t->dir[k][t->used];
    e->slot = ((k + 1) << SLOT_SHIFT) | t->used;
    t->used++;
    return e;
}

dv_track_entry *dv_tracker_insert(dv_tracker *t, dv_block *block, void *owner_data)
{
    dv_track_entry *e = entry_new(t);
    if (e == NULL) {
        dv__fail(DV_ENOMEM, "allocate", "out of host memory for the live-block table");
        return NULL;
    }
    e->ptr = block->ptr;
    e->bytes = block->bytes;
    e->generation = block->generation;
    e->owner_data = owner_data;
    /* The allocation was enqueued on its stream: the first "write". */
    e->last_write_stream = block->alloc_stream;
    e->last_write_epoch = dv_tracker_mark(t, block->alloc_stream);
    e->alloc_stream = block->alloc_stream;
    e->nreads = 0;
    e->reads = e->reads_inline;
    block->slot = e->slot;
    live_add(t, 1);
    return e;
}

/* The entry a slot names, or NULL when no entry was ever handed out
 * there. */
static dv_track_entry *entry_at(const dv_tracker *t, uint32_t slot)
{
    uint32_t k = (slot >> SLOT_SHIFT) - 1, i = slot & ((1u << SLOT_SHIFT) - 1);
    return k < t->nslabs && i < slab_used(t, k) ? &t->dir[k][i] : NULL;
}

dv_track_entry *dv_tracker_find(dv_tracker *t, dv_block_id id, const char *op)
{
    dv_track_entry *e = entry_at(t, id.slot);
    if (e != NULL && e->generation == id.generation && id.generation != 0 && e->ptr == id.ptr)
        return e;
    if (e != NULL && e->generation != 0 && e->ptr == id.ptr)
        dv__fail(DV_EUSE_AFTER_FREE, op,
                 "%s: stale block 0x%llx: generation %llu was freed; generation %llu lives "
                 "there now",
                 op, (unsigned long long)id.ptr, (unsigned long long)id.generation,
                 (unsigned long long)e->generation);
    else
        dv__fail(DV_EUSE_AFTER_FREE, op,
                 "%s: no live block 0x%llx (generation %llu): freed already, or never "
                 "allocated here",
                 op, (unsigned long long)id.ptr, (unsigned long long)id.generation);
    dv__detail()->generation = id.generation;
    return NULL;
}

void dv_tracker_remove(dv_tracker *t, dv_track_entry *e)
{
    if (e->reads != e->reads_inline)
        free(e->reads);
    e->reads = NULL;
    e->generation = 0;
    e->next_free = t->free_entries;
    t->free_entries = e;
    live_add(t, -1);
}

void dv_tracker_foreach(dv_tracker *t, void (*fn)(dv_track_entry *e, void *arg), void *arg)
{
    /* Entries never move, and fn may remove only the entry it is given. */
    for (uint32_t k = 0; k < t->nslabs; k++)
        for (uint32_t i = 0, n = slab_used(t, k); i < n; i++)
            if (t->dir[k][i].generation != 0)
                fn(&t->dir[k][i], arg);
}

/* ------------------------------------------------------------------------
 * Block uses
 * ------------------------------------------------------------------------ */

int dv_tracker_prepare(dv_tracker *t, dv_track_entry *e, dv_stream_id stream, dv_access a)
{
    int rc = dv_tracker_wait(t, stream, dv_track_last_write(e));
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
            e->last_write_stream = pos.stream;
            e->last_write_epoch = pos.epoch;
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
    e->last_write_stream = pos.stream;
    e->last_write_epoch = pos.epoch;
    e->nreads = 0;
}

void dv_tracker_record(dv_tracker *t, dv_track_entry *e, dv_stream_id stream)
{
    add_read(e, (dv_stream_pos){stream, dv_tracker_mark(t, stream)});
}

int dv_tracker_fence_uses(dv_tracker *t, dv_track_entry *e)
{
    return dv_tracker_prepare(t, e, e->alloc_stream, DV_ACCESS_WRITE);
}
