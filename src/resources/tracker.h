/*
 * The block-use tracker shared by the tracking resources (async, pool):
 * the table of live blocks and the cross-stream ordering between them.
 *
 * Design
 * ------
 * Ordering is kept as stream positions, not events.  Each stream has an
 * epoch, a counter bumped every time tracked work is enqueued on it
 * (dv_tracker_mark); a use of a block is remembered as (stream, epoch).
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
 * dv_tracker_flush records one event on a stream that has unrecorded
 * epochs.  The actor flushes its completion tracker once per batch; the
 * resources' trackers record only when a wait needs it, so a batch of
 * launches on one stream costs no record, and a wait may capture more of
 * the signaling stream than the use it orders (correct, sometimes later).
 *
 * A wait matrix remembers, for each (waiter, signaler) pair, the epoch the
 * waiter already waits for: a second wait on an older or equal position is
 * skipped.  Stream order makes that exact: everything enqueued on the
 * waiter later is after the wait.
 *
 * The live table is a directory of slabs of entries, each entry two cache
 * lines.  A block's slot (dv_block.slot) names its entry: finding a block
 * is a bounds check and one access to the first line, which holds
 * everything allocate, free and a use read; the second holds the reads
 * past the last write, touched only when there are any.  Entries never
 * move, so a resource may keep a pointer to its entry; freed ones go on a
 * LIFO list (the next allocation reuses a line still in cache) and a free
 * entry's generation is 0, which no block has.
 */
#ifndef DV_RESOURCES_TRACKER_H
#define DV_RESOURCES_TRACKER_H

#include "resources/resource.h"

/* A position on a stream: everything marked up to epoch. */
typedef struct dv_stream_pos {
    dv_stream_id stream;
    uint64_t epoch; /* 0: nothing */
} dv_stream_pos;

#define DV_TRACK_INLINE_READS 4

typedef struct dv_track_entry {
    /* First line: what allocate, free and every use read. */
    _Alignas(64) dv_dptr ptr;
    uint64_t bytes;
    uint64_t generation; /* 0: free */
    union {
        void *owner_data; /* live: the resource's own per-block data */
        struct dv_track_entry *next_free;
    };
    uint64_t last_write_epoch;
    dv_stream_pos *reads; /* reads_inline, or a heap array of DV_MAX_STREAMS */
    dv_stream_id last_write_stream;
    dv_stream_id alloc_stream;
    uint32_t nreads; /* one entry per stream at most */
    uint32_t slot;   /* the block's slot */
    /* Second line. */
    dv_stream_pos reads_inline[DV_TRACK_INLINE_READS];
} dv_track_entry;

_Static_assert(sizeof(dv_track_entry) == 128, "an entry is two cache lines");

static inline dv_stream_pos dv_track_last_write(const dv_track_entry *e)
{
    return (dv_stream_pos){e->last_write_stream, e->last_write_epoch};
}

typedef struct dv_tracker dv_tracker;

typedef struct dv_tracker_stats {
    uint64_t waits;         /* cuStreamWaitEvent queued */
    uint64_t waits_skipped; /* answered by the wait matrix */
    uint64_t records;       /* cuEventRecord */
    uint64_t events;        /* event objects created (the pool) */
    uint64_t live_blocks;
} dv_tracker_stats;

int dv_tracker_create(dv_res_env *env, dv_tracker **out);
/* Events are destroyed; entries still live are dropped. */
void dv_tracker_destroy(dv_tracker *t);

/* Work was enqueued on stream: its new epoch. */
uint64_t dv_tracker_mark(dv_tracker *t, dv_stream_id stream);
/* The current position of a stream (nothing new marked). */
dv_stream_pos dv_tracker_now(const dv_tracker *t, dv_stream_id stream);
/* Make waiter wait for pos (no-op for the same stream, an empty pos, or a
 * position the waiter already waits for). */
int dv_tracker_wait(dv_tracker *t, dv_stream_id waiter, dv_stream_pos pos);
/* Record an event on stream if it has epochs no event captured yet. */
int dv_tracker_flush(dv_tracker *t, dv_stream_id stream);
/* Has the device finished pos?  Queries an event, never blocks. */
int dv_tracker_reached(dv_tracker *t, dv_stream_pos pos, bool *reached);
/* Block until the device has finished pos. */
int dv_tracker_sync(dv_tracker *t, dv_stream_pos pos);

/*
 * Register a block just allocated on block->alloc_stream (the allocation
 * was enqueued there: it counts as the block's first write, so a use on
 * another stream waits for it), and set block->slot.  Returns the entry,
 * or NULL (DV_ENOMEM).
 */
dv_track_entry *dv_tracker_insert(dv_tracker *t, dv_block *block, void *owner_data);
/* The live entry for id, or NULL with the detail set (DV_EUSE_AFTER_FREE:
 * nothing live in id's slot, or another block there). */
dv_track_entry *dv_tracker_find(dv_tracker *t, dv_block_id id, const char *op);

int dv_tracker_prepare(dv_tracker *t, dv_track_entry *e, dv_stream_id stream, dv_access a);
void dv_tracker_finish(dv_tracker *t, dv_track_entry *e, dv_stream_id stream, dv_access a);
void dv_tracker_record(dv_tracker *t, dv_track_entry *e, dv_stream_id stream);
/*
 * Retire an entry: the alloc stream waits on every use from other
 * streams; the caller then queues the free on the alloc stream and calls
 * dv_tracker_remove.  Split so a resource can fail between the two.
 */
int dv_tracker_fence_uses(dv_tracker *t, dv_track_entry *e);
void dv_tracker_remove(dv_tracker *t, dv_track_entry *e);

/* Visit every live entry (for destroy and the guard's check). */
void dv_tracker_foreach(dv_tracker *t, void (*fn)(dv_track_entry *e, void *arg), void *arg);
void dv_tracker_stats_get(const dv_tracker *t, dv_tracker_stats *out);

/* Check a stream id against the environment (DV_EINVAL with detail). */
int dv__check_stream(const dv_res_env *env, dv_stream_id stream, const char *op);

#endif /* DV_RESOURCES_TRACKER_H */
