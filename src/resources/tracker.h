/*
 * The block-use tracker shared by the tracking resources (async, pool):
 * the table of live blocks and the cross-stream ordering between them.
 *
 * Design
 * ------
 * Ordering is kept as stream positions, not events.  Each stream has an
 * epoch, a counter bumped every time tracked work is enqueued on it
 * (dv__tracker_mark); a use of a block is remembered as (stream, epoch).
 * finish_block_use therefore makes no driver call at all: it bumps the
 * stream's epoch and stores it.
 *
 * Events are made only when another stream must wait: waiting on
 * (S, e) needs an event recorded on S after the work marked e.  Each
 * stream keeps a small ring of events with the epoch at which each was
 * recorded; a wait picks the oldest ring event recorded at or after e (it
 * captures the work, and as little else as the ring allows), and records a
 * new one only when none is recent enough.  Events are created once per
 * ring slot and re-recorded: a cuStreamWaitEvent captures the event's state
 * when it is called, so re-recording later never changes a queued wait.
 * dv__tracker_flush records one event on a stream that has unrecorded
 * epochs.  The actor flushes its completion tracker once per batch; the
 * resources' trackers record when a wait needs it, so a batch of launches
 * on one stream costs no record, and a wait may capture more of the
 * signaling stream than the use it orders (correct, sometimes later) --
 * except for frees.  Memory freed on one stream and taken by another must
 * not wait for what the first queued after the free (a long kernel, or
 * one waiting for the host, which would wait in turn for the taker: a
 * deadlock), so a free's position is captured when it is marked
 * (dv__tracker_mark_captured): by a record if anything was enqueued on
 * the stream since its newest event (dv__drv_stream_work), else by that
 * event, its epoch moved up.  A pool free with no device work between
 * costs no driver call.
 *
 * A wait matrix remembers, for each (waiter, signaler) pair, the epoch the
 * waiter already waits for: a second wait on an older or equal position is
 * skipped.  Stream order makes that exact: everything enqueued on the
 * waiter later is after the wait.
 *
 * The live table is split by temperature.  A block's slot (dv_block.slot)
 * names two records in parallel slabs:
 *
 *   hot    16 bytes, four to a cache line: a key made of the generation
 *          and the pointer, the alloc stream, three flags, the
 *          allocation's position on its stream, and a 32-bit word that
 *          belongs to the resource (the pool keeps its range and size
 *          class there).  Allocating, finding a block and freeing one that
 *          stayed on its stream touch this and nothing else of the
 *          tracker.
 *   entry  two cache lines: the last write and the outstanding reads (and
 *          two words a resource may keep there).  Filled at the block's
 *          first use (dv__tracker_entry) from the hot record; read by uses;
 *          read by a free only when the hot record says another stream
 *          used the block.
 *
 * With a hundred thousand blocks live the hot records take 1.6 MB, which a
 * server core's L2 cache can hold where the entries (12.8 MB) cannot, and
 * a block allocated and freed without a use on another stream never brings
 * its entry into the cache at all.  Finding a block is a bounds check on
 * the slot and one read of its hot record; a foreign, forged or stale id
 * fails the check of its key (dv__track_key: the generation, never reused
 * in the process, and the pointer, both exactly).  Free slots are kept on
 * an array used as a stack (the next allocation reuses the slot freed
 * last, whose hot record is likely still in cache), so handing one out
 * reads nothing but the top of the array.
 */
#ifndef DV_RESOURCES_TRACKER_H
#define DV_RESOURCES_TRACKER_H

#include <stdlib.h>

#include "resources/resource.h"

/* A position on a stream: everything marked up to epoch. */
typedef struct dv_stream_pos {
    dv_stream_id stream;
    uint64_t epoch; /* 0: nothing */
} dv_stream_pos;

/* What allocating, finding and freeing a block touch (design above). */
typedef struct dv_track_hot {
    /* key (dv__track_key) << 9 | alloc_stream << 3 | DV_TRACK_* flags */
    uint64_t tag;
    uint32_t owner;       /* the resource's word for the block */
    uint32_t alloc_epoch; /* the allocation's epoch on alloc_stream, low 32 bits */
} dv_track_hot;

#define DV_TRACK_LIVE         1u /* 0: a free slot */
#define DV_TRACK_CROSS        2u /* a use on a stream other than alloc_stream is recorded */
#define DV_TRACK_ENTRY        4u /* the entry holds the block's history */
#define DV_TRACK_STREAM_SHIFT 3
#define DV_TRACK_KEY_SHIFT    9

_Static_assert(sizeof(dv_track_hot) == 16, "four hot records to a cache line");
_Static_assert(DV_MAX_STREAMS <= 1u << (DV_TRACK_KEY_SHIFT - DV_TRACK_STREAM_SHIFT),
               "alloc_stream fits the tag");

static inline dv_stream_id dv__track_alloc_stream(const dv_track_hot *h)
{
    return (dv_stream_id)(h->tag >> DV_TRACK_STREAM_SHIFT) & (DV_MAX_STREAMS - 1);
}

static inline bool dv__track_cross(const dv_track_hot *h)
{
    return (h->tag & DV_TRACK_CROSS) != 0;
}

#define DV_TRACK_INLINE_READS 4

/* The rest of a live block's record: its history of uses. */
typedef struct dv_track_entry {
    /* First line: what uses read and write. */
    _Alignas(64) uint64_t last_write_epoch;
    dv_stream_pos *reads; /* reads_inline, or a heap array of DV_MAX_STREAMS */
    dv_stream_id last_write_stream;
    uint32_t nreads; /* one entry per stream at most */
    /* The resource's: async and direct keep the block's address and size
     * here (the tracker neither sets nor reads them). */
    dv_dptr ptr;
    uint64_t bytes;
    /* Second line. */
    _Alignas(64) dv_stream_pos reads_inline[DV_TRACK_INLINE_READS];
} dv_track_entry;

_Static_assert(sizeof(dv_track_entry) == 128, "an entry is two cache lines");

static inline dv_stream_pos dv__track_last_write(const dv_track_entry *e)
{
    return (dv_stream_pos){e->last_write_stream, e->last_write_epoch};
}

/* A live block in the table: both of its records.  hot == NULL: none. */
typedef struct dv_tracked {
    dv_track_hot *hot;
    dv_track_entry *e;
    uint32_t slot;
} dv_tracked;

static inline bool dv__tracked_ok(dv_tracked b)
{
    return b.hot != NULL;
}

typedef struct dv_tracker dv_tracker;

typedef struct dv_tracker_stats {
    uint64_t waits;         /* cuStreamWaitEvent queued */
    uint64_t waits_skipped; /* answered by the wait matrix */
    uint64_t records;       /* cuEventRecord */
    uint64_t events;        /* event objects created (the pool) */
    uint64_t live_blocks;
} dv_tracker_stats;

int dv__tracker_create(dv_res_env *env, dv_tracker **out);
/* Events are destroyed; entries still live are dropped. */
void dv__tracker_destroy(dv_tracker *t);

/* Work was enqueued on stream: its new epoch. */
static inline uint64_t dv__tracker_mark(dv_tracker *t, dv_stream_id stream);
/* A new epoch on stream (in *epoch, always) that an event captures with
 * nothing enqueued after it: the free of a block another stream may take
 * later.  A wait for it then never waits for work queued on stream after
 * the free (a long kernel, one waiting for the host).  Costs an event
 * record when something was enqueued on stream since the last
 * (dv__drv_stream_work), else none.  The record's error, if it fails; the
 * epoch is then captured by the wait, later.  Under the stream-order
 * checker (fence_always) the event is recorded by dv__tracker_capture,
 * once the checker has taken the free. */
static inline int dv__tracker_mark_captured(dv_tracker *t, dv_stream_id stream, uint64_t *epoch);
/* Under fence_always: record an event on stream if a free marked there
 * has none yet (the checker has taken the free by now). */
int dv__tracker_capture(dv_tracker *t, dv_stream_id stream);
/* Has the device been seen past pos already (no driver call)? */
static inline bool dv__tracker_known_passed(const dv_tracker *t, dv_stream_pos pos);
/* The current position of a stream (nothing new marked). */
static inline dv_stream_pos dv__tracker_now(const dv_tracker *t, dv_stream_id stream);
/* Make waiter wait for pos (no-op for the same stream, an empty pos, or a
 * position the waiter already waits for). */
int dv__tracker_wait(dv_tracker *t, dv_stream_id waiter, dv_stream_pos pos);
/* The caller enqueued on waiter a wait for everything marked on signaler
 * up to epoch (an event of its own): later waits it covers are skipped. */
void dv__tracker_note_wait(dv_tracker *t, dv_stream_id waiter, dv_stream_id signaler,
                           uint64_t epoch);
/* Record an event on stream if it has epochs no event captured yet. */
int dv__tracker_flush(dv_tracker *t, dv_stream_id stream);
/* Has the device finished pos?  Queries an event, never blocks. */
int dv__tracker_reached(dv_tracker *t, dv_stream_pos pos, bool *reached);
/* A look: the questions of one walk over many positions (free ranges of
 * several streams, say).  Within one look an event of a stream found not
 * done answers for every later position of that stream with no driver
 * call, the device finishing a stream's work in order; a new look asks
 * afresh.  dv__tracker_reached itself never remembers a "not yet". */
uint64_t dv__tracker_new_look(dv_tracker *t);
int dv__tracker_reached_in(dv_tracker *t, uint64_t look, dv_stream_pos pos, bool *reached);
/* Block until the device has finished pos. */
int dv__tracker_sync(dv_tracker *t, dv_stream_pos pos);
/* Has the device finished everything enqueued on stream?  A stream
 * query, no event, never blocks; when it has (*idle), every epoch marked
 * there so far is passed.  For when an event cannot be made or recorded. */
int dv__tracker_drained(dv_tracker *t, dv_stream_id stream, bool *idle);

/*
 * Register a block just allocated on block->alloc_stream (the allocation
 * was enqueued there: it counts as the block's first write, so a use on
 * another stream waits for it), with the resource's word owner, and set
 * block->slot.  NULL hot, detail set: out of host memory (DV_ENOMEM), or
 * a pointer or generation at or past 2^55 (DV_EINVAL; no real one is).
 */
static inline dv_tracked dv__tracker_insert(dv_tracker *t, dv_block *block, uint32_t owner);
/* The live block id names, or hot == NULL with the detail set
 * (DV_EUSE_AFTER_FREE: nothing live in id's slot, or another block). */
static inline dv_tracked dv__tracker_find(dv_tracker *t, dv_block_id id, const char *op);

/* The block's entry, its history filled from the hot record on the first
 * call (the allocation as the last write, no reads). */
dv_track_entry *dv__tracker_entry(dv_tracker *t, dv_tracked b);
int dv__tracker_prepare(dv_tracker *t, dv_tracked b, dv_stream_id stream, dv_access a);
void dv__tracker_finish(dv_tracker *t, dv_tracked b, dv_stream_id stream, dv_access a);
void dv__tracker_record(dv_tracker *t, dv_tracked b, dv_stream_id stream);
/*
 * Retire a block: the alloc stream waits on every use from other streams
 * (reading the entry only when the hot record says there is one); the
 * caller then queues the free on the alloc stream and calls
 * dv__tracker_remove.  Split so a resource can fail between the two.
 */
static inline int dv__tracker_fence_uses(dv_tracker *t, dv_tracked b);
static inline void dv__tracker_remove(dv_tracker *t, dv_tracked b);

/* Visit every live block (for destroy); fn may remove the block it is
 * given and no other. */
void dv__tracker_foreach(dv_tracker *t, void (*fn)(dv_tracked b, void *arg), void *arg);
void dv__tracker_stats_get(const dv_tracker *t, dv_tracker_stats *out);

/* Check a stream id against the environment (DV_EINVAL with detail). */
int dv__check_stream(const dv_res_env *env, dv_stream_id stream, const char *op);

/* ------------------------------------------------------------------------
 * The tracker's state, here so that marking, finding, inserting and
 * removing a block inline into the resources' allocate and free paths.
 * Only tracker.c and the inline functions below touch it.
 * ------------------------------------------------------------------------ */

#define DV__TRACK_RING 32 /* events per stream */

struct dv__track_ring_slot {
    dv_drv_event *ev;
    uint64_t epoch; /* the stream's epoch when the event was recorded */
};

struct dv__track_stream {
    uint64_t epoch;    /* last epoch marked */
    uint64_t recorded; /* newest epoch an event captured */
    uint64_t work;     /* dv__drv_stream_work when the newest event was recorded */
    uint64_t uncaptured; /* fence_always: the newest free marked without an event */
    uint64_t passed;   /* newest epoch the device was seen past (an event done) */
    /* Within look unseen_look, the event of epoch unseen was not done. */
    uint64_t unseen_look, unseen;
    struct dv__track_ring_slot ring[DV__TRACK_RING];
    uint32_t next; /* slot the next record uses */
    /* The driver stream's hook that captures a use before the next
     * open-ended enqueue (dv__tracker_arm): its slot + 1, 0 not asked
     * yet, -1 none to be had (asked again when the driver stream changes). */
    int8_t hook;
    uint16_t id;            /* this stream's id */
    struct dv_tracker *owner; /* the hook's way back */
    dv_drv_stream *hooked;  /* the driver stream the hook is on */
    /* waited[s]: the epoch of stream s this stream already waits for. */
    uint64_t waited[DV_MAX_STREAMS];
};

/*
 * Slab k holds 32 << k slots, up to DV__TRACK_SLAB_MAX (the entries of
 * one huge page, dv__slab_alloc), as an array of hot records and one of
 * entries.  A slot is ((k + 1) << 16) | index, so 0 is no slot and
 * decoding is two shifts and a bounds check.
 */
#define DV__TRACK_SLAB_MAX   ((uint32_t)(DV_SLAB_HUGE / sizeof(dv_track_entry)))
#define DV__TRACK_SLOT_SHIFT 16
_Static_assert(DV__TRACK_SLAB_MAX <= 1u << DV__TRACK_SLOT_SHIFT,
               "an index fits below the slab number");

struct dv__track_slab {
    dv_track_hot *hot;
    dv_track_entry *entries;
    uint32_t used; /* slots handed out of it so far */
};

struct dv_tracker {
    dv_res_env *env;
    struct dv__track_slab *dir;
    uint32_t nslabs, dir_cap;
    uint32_t slots;       /* in all slabs */
    uint32_t *free_slots; /* a stack: the slot freed last on top; room for every slot */
    uint32_t nfree;
    uint64_t looks; /* dv__tracker_new_look */
    atomic_uint_fast64_t waits, waits_skipped, records, events, live_blocks;
    struct dv__track_stream st[DV_MAX_STREAMS];
};

/* A fresh slot (none free): the next of the newest slab, or a new slab.
 * 0: out of memory. */
uint32_t dv__tracker_fresh_slot(dv_tracker *t);
/* Sets the detail for a block insert cannot key (DV_EINVAL). */
void dv__tracker_unkeyable(const dv_block *block);
/* Sets the detail for an id find did not find. */
void dv__tracker_not_found(dv_block_id id, dv_tracked at, const char *op);

static inline uint64_t dv__tracker_mark(dv_tracker *t, dv_stream_id stream)
{
    return ++t->st[stream].epoch;
}

/* Where nothing was enqueued on stream since its newest event was
 * recorded (and not under the stream-order checker: it orders by the
 * records it sees, and an event recorded before a step does not cover
 * it), that event captures every epoch marked there now, at no cost:
 * true.  False: a new record is needed. */
static inline bool dv__tracker_capture_free(dv_tracker *t, dv_stream_id stream)
{
    struct dv__track_stream *s = &t->st[stream];
    struct dv__track_ring_slot *last = &s->ring[(s->next + DV__TRACK_RING - 1) % DV__TRACK_RING];
    if (last->ev == NULL || last->epoch != s->recorded || t->env->fence_always ||
        dv__drv_stream_work(t->env->streams[stream]) != s->work)
        return false;
    /* Seen done already, with nothing enqueued since: so is every epoch
     * it now captures. */
    if (s->passed >= last->epoch)
        s->passed = s->epoch;
    last->epoch = s->epoch;
    s->recorded = s->epoch;
    return true;
}

/* dv__tracker_mark_captured where the newest event does not capture the
 * mark (tracker.c). */
int dv__tracker_mark_captured_slow(dv_tracker *t, dv_stream_id stream, uint64_t epoch);

static inline int dv__tracker_mark_captured(dv_tracker *t, dv_stream_id stream, uint64_t *epoch)
{
    uint64_t e = *epoch = dv__tracker_mark(t, stream);
    return dv__tracker_capture_free(t, stream) ? DV_OK
                                               : dv__tracker_mark_captured_slow(t, stream, e);
}

/* The stream's hook asked for (tracker.c), once per driver stream. */
void dv__tracker_hook(dv_tracker *t, dv_stream_id stream);

/* What was marked on stream is captured by an event before work whose
 * end is open is enqueued there (the driver stream's hook; tracker.c). */
static inline void dv__tracker_arm(dv_tracker *t, dv_stream_id stream)
{
    struct dv__track_stream *s = &t->st[stream];
    dv_drv_stream *ds = t->env->streams[stream];
    if (s->hooked != ds)
        dv__tracker_hook(t, stream);
    if (s->hook > 0)
        dv__drv_stream_arm(ds, s->hook - 1);
}

static inline bool dv__tracker_known_passed(const dv_tracker *t, dv_stream_pos pos)
{
    return pos.epoch <= t->st[pos.stream].passed;
}

static inline dv_stream_pos dv__tracker_now(const dv_tracker *t, dv_stream_id stream)
{
    return (dv_stream_pos){stream, t->st[stream].epoch};
}

/* The records a slot names, or hot == NULL when no slot was ever handed
 * out there.  Reads the directory only. */
static inline dv_tracked dv__tracker_slot_at(const dv_tracker *t, uint32_t slot)
{
    uint32_t k = (slot >> DV__TRACK_SLOT_SHIFT) - 1;
    uint32_t i = slot & ((1u << DV__TRACK_SLOT_SHIFT) - 1);
    if (k >= t->nslabs || i >= t->dir[k].used)
        return (dv_tracked){NULL, NULL, 0};
    return (dv_tracked){&t->dir[k].hot[i], &t->dir[k].entries[i], slot};
}

/*
 * A block's key, in the tag's top 55 bits: its generation xor its pointer
 * times an odd constant.  Multiplying by an odd number is a bijection of
 * the integers modulo 2^55, so for generations and pointers below 2^55
 * (DV__TRACK_KEY_LIMIT; a generation a nanosecond would take over a year
 * to get there, and device pointers stay far below) an id with the live
 * block's pointer and another generation, or with its generation and
 * another pointer, never has its key; only an id wrong in both could, by
 * a 2^-55 chance.  Ids and blocks at or past the limit are refused, not
 * folded.  Generations are never reused, so the generation is what tells
 * a stale id from the live block.
 */
#define DV__TRACK_KEY_LIMIT (UINT64_C(1) << (64 - DV_TRACK_KEY_SHIFT))

static inline uint64_t dv__track_key(uint64_t generation, dv_dptr ptr)
{
    return (generation ^ (ptr * UINT64_C(0x9E3779B97F4A7C15))) << DV_TRACK_KEY_SHIFT;
}

/* Can the key tell this block or id apart exactly? */
static inline bool dv__track_keyable(uint64_t generation, dv_dptr ptr)
{
    return generation != 0 && (generation | ptr) < DV__TRACK_KEY_LIMIT;
}

/* Only the owner thread writes the count: a load and a store, not a
 * locked read-modify-write. */
static inline void dv__tracker_live_add(dv_tracker *t, int delta)
{
    uint64_t n = atomic_load_explicit(&t->live_blocks, memory_order_relaxed);
    atomic_store_explicit(&t->live_blocks, n + (uint64_t)(int64_t)delta, memory_order_relaxed);
}

/* A block's reads past the inline ones, when it has them: only after a
 * use on another stream (CROSS). */
static inline void dv__tracker_free_reads(dv_tracked b)
{
    if (dv__track_cross(b.hot) && b.e->reads != b.e->reads_inline)
        free(b.e->reads);
}

/* Free slots a few pops ahead are prefetched: a stack that shrinks walks
 * into slots freed long ago. */
#define DV__TRACK_SLOT_PREFETCH 32 /* slots: two cache lines */

static inline dv_tracked dv__tracker_insert(dv_tracker *t, dv_block *block, uint32_t owner)
{
    if (!dv__track_keyable(block->generation, block->ptr)) {
        dv__tracker_unkeyable(block);
        return (dv_tracked){NULL, NULL, 0};
    }
    if (t->nfree > DV__TRACK_SLOT_PREFETCH)
        __builtin_prefetch(&t->free_slots[t->nfree - 1 - DV__TRACK_SLOT_PREFETCH]);
    uint32_t slot = t->nfree > 0 ? t->free_slots[--t->nfree] : dv__tracker_fresh_slot(t);
    if (slot == 0)
        return (dv_tracked){NULL, NULL, 0};
    dv_tracked b = dv__tracker_slot_at(t, slot);
    /* The allocation was enqueued on its stream: the block's first
     * "write", kept here until an entry is needed. */
    b.hot->tag = dv__track_key(block->generation, block->ptr) |
                 (uint64_t)block->alloc_stream << DV_TRACK_STREAM_SHIFT | DV_TRACK_LIVE;
    b.hot->owner = owner;
    b.hot->alloc_epoch = (uint32_t)dv__tracker_mark(t, block->alloc_stream);
    dv__tracker_arm(t, block->alloc_stream);
    block->slot = slot;
    dv__tracker_live_add(t, 1);
    return b;
}

/* Does slot b hold id live?  The key and the live flag; not the stream,
 * CROSS or ENTRY. */
static inline bool dv__track_is(dv_tracked b, dv_block_id id)
{
    const uint64_t mask = ~(uint64_t)((1u << DV_TRACK_KEY_SHIFT) - 1) | DV_TRACK_LIVE;
    return b.hot != NULL && dv__track_keyable(id.generation, id.ptr) &&
           (b.hot->tag & mask) == (dv__track_key(id.generation, id.ptr) | DV_TRACK_LIVE);
}

/* Is id live in t?  No detail either way. */
static inline bool dv__tracker_holds(const dv_tracker *t, dv_block_id id)
{
    return dv__track_is(dv__tracker_slot_at(t, id.slot), id);
}

static inline dv_tracked dv__tracker_find(dv_tracker *t, dv_block_id id, const char *op)
{
    dv_tracked b = dv__tracker_slot_at(t, id.slot);
    if (dv__track_is(b, id))
        return b;
    dv__tracker_not_found(id, b, op);
    return (dv_tracked){NULL, NULL, 0};
}

static inline int dv__tracker_fence_uses(dv_tracker *t, dv_tracked b)
{
    if (!dv__track_cross(b.hot))
        return DV_OK; /* every use was on the alloc stream */
    return dv__tracker_prepare(t, b, dv__track_alloc_stream(b.hot), DV_ACCESS_WRITE);
}

static inline void dv__tracker_remove(dv_tracker *t, dv_tracked b)
{
    dv__tracker_free_reads(b);
    b.hot->tag = 0;
    t->free_slots[t->nfree++] = b.slot;
    dv__tracker_live_add(t, -1);
}

#endif /* DV_RESOURCES_TRACKER_H */
