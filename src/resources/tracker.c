/*
 * The block-use tracker (design: tracker.h): stream epochs, a ring of
 * re-recorded events per stream, a wait matrix, and the live table.  The
 * live table's hot paths (insert, find, remove) are inline in tracker.h.
 */
#include <stdlib.h>
#include <string.h>

#include "resources/tracker.h"

#define SLAB_FIRST 32 /* slots of slab 0 */

/* Relaxed counters: statistics, read from any thread. */
#define STAT_INC(t, f) atomic_fetch_add_explicit(&(t)->f, 1, memory_order_relaxed)

/* ------------------------------------------------------------------------
 * Life cycle
 * ------------------------------------------------------------------------ */

static uint32_t slab_slots(uint32_t k)
{
    uint64_t n = k < 32 ? (uint64_t)SLAB_FIRST << k : DV__TRACK_SLAB_MAX;
    return n < DV__TRACK_SLAB_MAX ? (uint32_t)n : DV__TRACK_SLAB_MAX;
}

int dv__tracker_create(dv_res_env *env, dv_tracker **out)
{
    dv_tracker *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return dv__fail(DV_ENOMEM, "tracker_create", "out of host memory");
    t->env = env;
    *out = t;
    return DV_OK;
}

/* A live entry's reads past the inline ones (destroy drops the entry). */
static void free_reads(dv_tracked b, void *arg)
{
    (void)arg;
    dv__tracker_free_reads(b);
}

static int capture_hook(void *arg, dv_drv_stream *stream);

void dv__tracker_destroy(dv_tracker *t)
{
    if (t == NULL)
        return;
    for (uint32_t s = 0; s < DV_MAX_STREAMS; s++)
        if (t->st[s].hooked != NULL)
            dv__drv_stream_unhook(t->st[s].hooked, capture_hook, &t->st[s]);
    for (uint32_t s = 0; s < DV_MAX_STREAMS; s++)
        for (int i = 0; i < DV__TRACK_RING; i++)
            if (t->st[s].ring[i].ev != NULL)
                (void)dv__drv_event_destroy(t->st[s].ring[i].ev);
    dv__tracker_foreach(t, free_reads, NULL);
    for (uint32_t k = 0; k < t->nslabs; k++) {
        dv__slab_free(t->dir[k].hot, slab_slots(k) * sizeof(dv_track_hot));
        dv__slab_free(t->dir[k].entries, slab_slots(k) * sizeof(dv_track_entry));
    }
    free(t->dir);
    free(t->free_slots);
    free(t);
}

void dv__tracker_stats_get(const dv_tracker *t, dv_tracker_stats *out)
{
    out->waits = atomic_load_explicit(&t->waits, memory_order_relaxed);
    out->waits_skipped = atomic_load_explicit(&t->waits_skipped, memory_order_relaxed);
    out->records = atomic_load_explicit(&t->records, memory_order_relaxed);
    out->events = atomic_load_explicit(&t->events, memory_order_relaxed);
    out->live_blocks = atomic_load_explicit(&t->live_blocks, memory_order_relaxed);
}

/* ------------------------------------------------------------------------
 * Stream positions and events
 * ------------------------------------------------------------------------ */

/* Record an event capturing everything marked on stream so far. */
static int record(dv_tracker *t, dv_stream_id stream, struct dv__track_ring_slot **slot_out)
{
    struct dv__track_stream *s = &t->st[stream];
    struct dv__track_ring_slot *slot = &s->ring[s->next];
    int rc;

    if (slot->ev == NULL) {
        if ((rc = dv__drv_event_create(t->env->ctx, 0, &slot->ev)) != DV_OK)
            return rc;
        STAT_INC(t, events);
    }
    if ((rc = dv__drv_event_record(slot->ev, t->env->streams[stream])) != DV_OK)
        return rc;
    STAT_INC(t, records);
    slot->epoch = s->epoch;
    s->recorded = s->epoch;
    s->work = dv__drv_stream_work(t->env->streams[stream]);
    s->next = (s->next + 1) % DV__TRACK_RING;
    *slot_out = slot;
    return DV_OK;
}

/* The ring event that captures pos with the least extra work, recording a
 * new one when none is recent enough. */
static int event_for(dv_tracker *t, dv_stream_pos pos, struct dv__track_ring_slot **out)
{
    struct dv__track_stream *s = &t->st[pos.stream];
    struct dv__track_ring_slot *best = NULL;

    if (s->recorded < pos.epoch)
        return record(t, pos.stream, out);
    for (int i = 0; i < DV__TRACK_RING; i++) {
        struct dv__track_ring_slot *slot = &s->ring[i];
        if (slot->ev != NULL && slot->epoch >= pos.epoch &&
            (best == NULL || slot->epoch < best->epoch))
            best = slot;
    }
    /* recorded >= epoch guarantees the newest slot qualifies. */
    *out = best;
    return DV_OK;
}

/* An event captures every epoch marked on stream: the newest one, at no
 * cost, where it can (dv__tracker_capture_free), else a new record. */
static int capture_marks(dv_tracker *t, dv_stream_id stream)
{
    struct dv__track_ring_slot *slot;
    return dv__tracker_capture_free(t, stream) ? DV_OK : record(t, stream, &slot);
}

int dv__tracker_mark_captured_slow(dv_tracker *t, dv_stream_id stream, uint64_t epoch)
{
    struct dv__track_stream *s = &t->st[stream];
    /* The stream-order checker counts the free itself as a step of the
     * stream, after the resource's part: an event recorded here would come
     * before it.  There the wait records its event, as for any position. */
    if (t->env->fence_always) {
        s->uncaptured = epoch; /* dv__tracker_capture, once the checker took it */
        return DV_OK;
    }
    /* The newest event does not capture it (the inline half looked): a
     * record. */
    struct dv__track_ring_slot *slot;
    return record(t, stream, &slot);
}

/*
 * A use marked on a stream is captured by an event before work whose end
 * is open is enqueued behind it (the driver stream's hook, armed by the
 * use, runs before a stream wait, a host function, a task's or library's
 * native stream, a graph): a stream that uses the block later waits for
 * that use and at most the kernels, copies and sets the actor queued
 * after it, never for a task, a collective or a wait for the host.  (A
 * record before every enqueue would cost an event per operation.)
 * Where nothing was enqueued since the newest event, that event captures
 * the use at no cost.  A record that fails leaves the capture to the wait
 * (the event then recorded at the stream's tail), unless the context is
 * lost: then the enqueue fails with the record's error.
 */
static int capture_hook(void *arg, dv_drv_stream *stream)
{
    struct dv__track_stream *s = arg;
    (void)stream; /* s->owner's stream s->id */
    if (s->epoch <= s->recorded)
        return DV_OK;
    dv_error_detail saved = *dv_last_error(); /* the enqueue's caller's */
    int rc = capture_marks(s->owner, s->id);
    /* A lost context is the enqueue's answer too, named by the record. */
    if (rc == DV_ECONTEXT_LOST || rc == DV_EDEVICE_LOST)
        return rc;
    *dv__detail() = saved;
    return DV_OK;
}

void dv__tracker_hook(dv_tracker *t, dv_stream_id stream)
{
    struct dv__track_stream *s = &t->st[stream];
    dv_drv_stream *ds = t->env->streams[stream];
    if (s->hooked != NULL)
        dv__drv_stream_unhook(s->hooked, capture_hook, s);
    s->owner = t;
    s->id = (uint16_t)stream;
    s->hooked = ds;
    int slot = ds != NULL ? dv__drv_stream_hook(ds, capture_hook, s) : -1;
    s->hook = (int8_t)(slot < 0 ? -1 : slot + 1);
}

int dv__tracker_capture(dv_tracker *t, dv_stream_id stream)
{
    struct dv__track_stream *s = &t->st[stream];
    struct dv__track_ring_slot *slot;
    return s->uncaptured > s->recorded ? record(t, stream, &slot) : DV_OK;
}

int dv__tracker_wait(dv_tracker *t, dv_stream_id waiter, dv_stream_pos pos)
{
    struct dv__track_stream *w = &t->st[waiter];
    struct dv__track_ring_slot *slot;
    int rc;

    if (pos.epoch == 0 || pos.stream == waiter)
        return DV_OK;
    /* Seen done already: everything enqueued from now on comes after it
     * (an edge the checker, when on, must see made on the device). */
    if (w->waited[pos.stream] >= pos.epoch ||
        (!t->env->fence_always && t->st[pos.stream].passed >= pos.epoch)) {
        STAT_INC(t, waits_skipped);
        return DV_OK;
    }
    if ((rc = event_for(t, pos, &slot)) != DV_OK)
        return rc;
    if ((rc = dv__drv_stream_wait_event(t->env->streams[waiter], slot->ev)) != DV_OK)
        return rc;
    STAT_INC(t, waits);
    /* The wait covers everything the event captured, not just pos. */
    w->waited[pos.stream] = slot->epoch;
    return DV_OK;
}

void dv__tracker_note_wait(dv_tracker *t, dv_stream_id waiter, dv_stream_id signaler,
                           uint64_t epoch)
{
    struct dv__track_stream *w = &t->st[waiter];
    /* Stream order: everything enqueued on the waiter later is after it. */
    if (waiter != signaler && epoch <= t->st[signaler].epoch && w->waited[signaler] < epoch)
        w->waited[signaler] = epoch;
}

int dv__tracker_flush(dv_tracker *t, dv_stream_id stream)
{
    struct dv__track_ring_slot *slot;
    if (t->st[stream].epoch <= t->st[stream].recorded)
        return DV_OK;
    return record(t, stream, &slot);
}

/* The device is past slot's epoch on stream: so it is past every earlier
 * one, and no later question about them needs the driver. */
static void note_passed(struct dv__track_stream *s, const struct dv__track_ring_slot *slot)
{
    if (slot->epoch > s->passed)
        s->passed = slot->epoch;
}

int dv__tracker_reached(dv_tracker *t, dv_stream_pos pos, bool *reached)
{
    return dv__tracker_reached_in(t, 0, pos, reached);
}

uint64_t dv__tracker_new_look(dv_tracker *t)
{
    return ++t->looks;
}

int dv__tracker_reached_in(dv_tracker *t, uint64_t look, dv_stream_pos pos, bool *reached)
{
    struct dv__track_stream *s = &t->st[pos.stream];
    struct dv__track_ring_slot *slot;
    bool known = look != 0 && s->unseen_look == look;
    int rc;

    *reached = true;
    if (pos.epoch <= s->passed)
        return DV_OK;
    if (known && pos.epoch >= s->unseen) {
        *reached = false; /* at or after an event this look saw not done */
        return DV_OK;
    }
    if ((rc = event_for(t, pos, &slot)) != DV_OK)
        return rc;
    if (known && slot->epoch >= s->unseen) {
        *reached = false; /* that event's answer */
        return DV_OK;
    }
    if ((rc = dv__drv_event_query(slot->ev, reached)) != DV_OK)
        return rc;
    if (*reached) {
        note_passed(s, slot);
    } else if (look != 0) {
        s->unseen_look = look;
        s->unseen = slot->epoch;
    }
    return DV_OK;
}

int dv__tracker_drained(dv_tracker *t, dv_stream_id stream, bool *idle)
{
    struct dv__track_stream *s = &t->st[stream];
    uint64_t epoch = s->epoch;
    *idle = false;
    int rc = dv__drv_stream_query(t->env->streams[stream], idle);
    if (rc == DV_OK && *idle && epoch > s->passed)
        s->passed = epoch;
    return rc;
}

int dv__tracker_sync(dv_tracker *t, dv_stream_pos pos)
{
    struct dv__track_ring_slot *slot;
    int rc;

    if (pos.epoch <= t->st[pos.stream].passed)
        return DV_OK;
    if ((rc = event_for(t, pos, &slot)) != DV_OK)
        return rc;
    if ((rc = dv__drv_event_sync(slot->ev)) == DV_OK)
        note_passed(&t->st[pos.stream], slot);
    return rc;
}

/* ------------------------------------------------------------------------
 * Live table (the hot paths are inline in tracker.h)
 * ------------------------------------------------------------------------ */

/* One more slab, with room on the free stack for every slot there is, so
 * a remove never needs memory.  -1: out of memory. */
static int slab_add(dv_tracker *t)
{
    uint32_t n = slab_slots(t->nslabs);
    /* Slab k's slots carry k + 1 in their top 16 bits, never 0. */
    if (t->nslabs == (1u << (32 - DV__TRACK_SLOT_SHIFT)) - 1)
        return -1;
    if (t->nslabs == t->dir_cap) {
        uint32_t cap = t->dir_cap ? 2 * t->dir_cap : 16;
        struct dv__track_slab *dir = realloc(t->dir, cap * sizeof(*dir));
        if (dir == NULL)
            return -1;
        t->dir = dir;
        t->dir_cap = cap;
    }
    uint64_t slots = (uint64_t)t->slots + n;
    if (slots > UINT32_MAX)
        return -1;
    uint32_t *free_slots = realloc(t->free_slots, slots * sizeof(*free_slots));
    if (free_slots == NULL)
        return -1;
    t->free_slots = free_slots;
    struct dv__track_slab slab = {dv__slab_alloc(n * sizeof(dv_track_hot)),
                                  dv__slab_alloc(n * sizeof(dv_track_entry)), 0};
    if (slab.hot == NULL || slab.entries == NULL) {
        dv__slab_free(slab.hot, n * sizeof(dv_track_hot));
        dv__slab_free(slab.entries, n * sizeof(dv_track_entry));
        return -1;
    }
    t->dir[t->nslabs++] = slab;
    t->slots = (uint32_t)slots;
    return 0;
}

uint32_t dv__tracker_fresh_slot(dv_tracker *t)
{
    uint32_t k = t->nslabs - 1;
    if ((t->nslabs == 0 || t->dir[k].used == slab_slots(k)) && slab_add(t) != 0) {
        dv__fail(DV_ENOMEM, "allocate", "out of host memory for the live-block table");
        return 0;
    }
    k = t->nslabs - 1;
    return ((k + 1) << DV__TRACK_SLOT_SHIFT) | t->dir[k].used++;
}

void dv__tracker_unkeyable(const dv_block *block)
{
    dv__fail(DV_EINVAL, "allocate",
             "allocate: block 0x%llx of generation %llu cannot be tracked: the live table keys "
             "pointers and generations below 2^55",
             (unsigned long long)block->ptr, (unsigned long long)block->generation);
}

void dv__tracker_not_found(dv_block_id id, dv_tracked at, const char *op)
{
    if (at.hot == NULL)
        dv__fail(DV_EUSE_AFTER_FREE, op,
                 "%s: no block 0x%llx (generation %llu) was ever allocated here: foreign or "
                 "forged",
                 op, (unsigned long long)id.ptr, (unsigned long long)id.generation);
    else if (!(at.hot->tag & DV_TRACK_LIVE))
        dv__fail(DV_EUSE_AFTER_FREE, op,
                 "%s: no live block 0x%llx (generation %llu): freed already", op,
                 (unsigned long long)id.ptr, (unsigned long long)id.generation);
    else
        dv__fail(DV_EUSE_AFTER_FREE, op,
                 "%s: stale or foreign block 0x%llx: generation %llu is not the block that "
                 "lives in its slot (freed, and the slot reused)",
                 op, (unsigned long long)id.ptr, (unsigned long long)id.generation);
    dv__detail()->generation = id.generation;
}

void dv__tracker_foreach(dv_tracker *t, void (*fn)(dv_tracked b, void *arg), void *arg)
{
    /* Records never move, and fn may remove only the block it is given. */
    for (uint32_t k = 0; k < t->nslabs; k++)
        for (uint32_t i = 0; i < t->dir[k].used; i++)
            if (t->dir[k].hot[i].tag & DV_TRACK_LIVE)
                fn((dv_tracked){&t->dir[k].hot[i], &t->dir[k].entries[i],
                                ((k + 1) << DV__TRACK_SLOT_SHIFT) | i},
                   arg);
}

/* ------------------------------------------------------------------------
 * Block uses
 * ------------------------------------------------------------------------ */

dv_track_entry *dv__tracker_entry(dv_tracker *t, dv_tracked b)
{
    dv_track_entry *e = b.e;
    if (b.hot->tag & DV_TRACK_ENTRY)
        return e;
    /* The allocation's epoch from its low 32 bits: the latest epoch of the
     * stream with those bits.  Exact unless the stream marked 2^32 epochs
     * since, and then later than the allocation: a wait on it is longer
     * than needed, never too short. */
    dv_stream_id s = dv__track_alloc_stream(b.hot);
    uint64_t now = t->st[s].epoch;
    e->last_write_stream = s;
    e->last_write_epoch = now - (uint32_t)((uint32_t)now - b.hot->alloc_epoch);
    e->nreads = 0;
    e->reads = e->reads_inline;
    b.hot->tag |= DV_TRACK_ENTRY;
    return e;
}

int dv__tracker_prepare(dv_tracker *t, dv_tracked b, dv_stream_id stream, dv_access a)
{
    const dv_track_entry *e = dv__tracker_entry(t, b);
    int rc = dv__tracker_wait(t, stream, dv__track_last_write(e));
    if (rc != DV_OK || a == DV_ACCESS_READ)
        return rc;
    for (uint32_t i = 0; i < e->nreads; i++)
        if ((rc = dv__tracker_wait(t, stream, e->reads[i])) != DV_OK)
            return rc;
    return DV_OK;
}

/* Add a use to the outstanding reads: one entry per stream (the later
 * use on a stream covers the earlier). */
static void add_read(dv_tracker *t, dv_track_entry *e, dv_stream_pos pos)
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
            /* No room for the edge: the read becomes the last write.  The
             * old last write must stay covered (a recorded use had no
             * prepare that waited for it), so the read's stream waits for
             * it, behind the read, and the position after that wait is
             * the new last write.  Readers and writers then wait on more
             * than needed; never less.  Should the wait itself fail, the
             * driver has failed the context, and every later call with
             * it. */
            if (dv__tracker_wait(t, pos.stream, dv__track_last_write(e)) == DV_OK)
                pos.epoch = dv__tracker_mark(t, pos.stream);
            e->last_write_stream = pos.stream;
            e->last_write_epoch = pos.epoch;
            return;
        }
        memcpy(heap, e->reads_inline, sizeof(e->reads_inline));
        e->reads = heap;
    }
    e->reads[e->nreads++] = pos;
}

/*
 * cross says a free must look at the entry: a use on another stream is
 * recorded there, or the reads went to the heap (kept until the free, so
 * a block read from many streams over and over allocates once).  Without
 * it every recorded use is on the alloc stream, whose order covers the
 * free already.
 */
static void update_cross(dv_tracked b, dv_stream_id stream)
{
    if (stream != dv__track_alloc_stream(b.hot) || b.e->reads != b.e->reads_inline)
        b.hot->tag |= DV_TRACK_CROSS;
}

void dv__tracker_finish(dv_tracker *t, dv_tracked b, dv_stream_id stream, dv_access a)
{
    dv_track_entry *e = dv__tracker_entry(t, b);
    dv_stream_pos pos = {stream, dv__tracker_mark(t, stream)};
    dv__tracker_arm(t, stream);
    if (a == DV_ACCESS_READ) {
        add_read(t, e, pos);
        update_cross(b, stream);
        return;
    }
    e->last_write_stream = pos.stream;
    e->last_write_epoch = pos.epoch;
    e->nreads = 0;
    /* The write replaces every earlier use. */
    b.hot->tag &= ~(uint64_t)DV_TRACK_CROSS;
    update_cross(b, stream);
}

void dv__tracker_record(dv_tracker *t, dv_tracked b, dv_stream_id stream)
{
    add_read(t, dv__tracker_entry(t, b), (dv_stream_pos){stream, dv__tracker_mark(t, stream)});
    dv__tracker_arm(t, stream);
    update_cross(b, stream);
}
