/*
 * Stream-ordered device memory resources: one contract, in the shape of
 * RMM's device_memory_resource, plus cross-stream block-use tracking.
 *
 * Every allocate and deallocate names a stream; a block's alloc_stream is
 * authoritative for ordering: the memory is valid in that stream's order
 * from the allocation on, and it is freed in that stream's order.  Work on
 * any other stream must be fenced, which is what the tracking ops do:
 *
 *   prepare_block_use(id, stream, access)   before the work is enqueued:
 *       READ waits on the last write from another stream; WRITE and
 *       READ_WRITE also wait on every outstanding read from other streams.
 *       Same-stream edges are skipped (stream order covers them).
 *   finish_block_use(id, stream, access)    after the work was enqueued:
 *       READ joins the outstanding reads; WRITE / READ_WRITE become the
 *       last write and clear the reads.
 *   record_block_use(id, stream)            work the caller enqueued
 *       without prepare: it joins the outstanding uses, so later writers
 *       and the free wait on it (it orders nothing before it).
 *   deallocate(block)                       the alloc stream waits on every
 *       outstanding use from other streams, then the free is queued.
 *
 * A stale id (no live block with that generation at that pointer) is
 * DV_EUSE_AFTER_FREE.  A resource that cannot track answers
 * DV_ESTREAM_MISUSE to every tracking op and false to
 * supports_block_use_tracking: false safety is worse than none.
 * Decorators forward.
 *
 * Threads: a resource stack belongs to one thread, its environment's owner
 * (the device actor); every op but bytes_outstanding and the statistics
 * runs there, and debug builds assert it.  bytes_outstanding and
 * statistics are atomics, readable from any thread.
 *
 * Callers use the dv_res_* wrappers below, which check arguments once for
 * every resource (NULL, zero or absurd sizes, unknown streams) and keep
 * the contract in one place; the ops tables are for implementations.
 */
#ifndef DV_RESOURCES_RESOURCE_H
#define DV_RESOURCES_RESOURCE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "devactor_resource.h"

#include "base/assert.h"
#include "base/slab.h"
#include "driver/port.h"

/* Index of a stream in the environment's table; 0 is the default stream. */
typedef uint32_t dv_stream_id;
#define DV_STREAM_DEFAULT 0u
/* Most streams an environment holds. */
#define DV_MAX_STREAMS 64u
/* Every block is aligned to at least this. */
#define DV_BLOCK_ALIGN 256u

typedef enum dv_access {
    DV_ACCESS_READ = 1,
    DV_ACCESS_WRITE = 2,
    DV_ACCESS_READ_WRITE = 3,
} dv_access;

/* dv_tag, dv_block_state and dv_block are public (devactor_resource.h). */

_Static_assert(sizeof(dv_block) == 64, "a block is one cache line");
_Static_assert(DV_MAX_STREAMS <= UINT16_MAX, "alloc_stream holds any stream id");

/* A copyable snapshot of a block's identity (slot: see dv_block). */
typedef struct dv_block_id {
    dv_dptr ptr;
    uint64_t generation;
    dv_stream_id alloc_stream;
    int device;
    uint32_t slot;
} dv_block_id;

static inline dv_block_id dv__block_id_of(const dv_block *b)
{
    return (dv_block_id){b->ptr, b->generation, b->alloc_stream, b->device, b->slot};
}

/*
 * What a resource stack runs against: the device's context and stream
 * table, and the thread that owns them.  Owned by the actor (or a test);
 * every resource of one stack shares it.
 */
typedef struct dv_res_env {
    dv_driver *drv;
    dv_drv_ctx *ctx;
    int device;
    dv_drv_stream *streams[DV_MAX_STREAMS];
    uint32_t nstreams;
    pthread_t owner;
    uint64_t gen_next, gen_end; /* block generations not handed out yet */
    /* The thread whose message the owner is serving (its kernel id), for
     * logs; 0: the owner's own work (the log names the owner). */
    uint32_t poster;
    /* Fence on the device even where the owner saw the other stream's work
     * finish (the stream-order checker is on: it sees only device edges,
     * never what the actor happened to see complete). */
    bool fence_always;
    /* Device memory pools map for themselves (growth in place), beside
     * what the bottom resource holds: both are reserved from the device. */
    _Atomic uint64_t mapped_bytes;
    /* Mappings made and unmapped by them (dv_actor_stats). */
    _Atomic uint64_t maps, unmaps, remaps;
    /* Allocations under way through the stack (a layer's allocate calls
     * its upstream's), and a count of the outermost ones: within one, a
     * layer need not ask again for what its upstream just refused. */
    uint32_t alloc_depth;
    uint64_t alloc_epoch;
    /* mapped_bytes when the latest outermost allocation began: what its
     * tries gave back to the device (a pool trims where the device
     * refused a mapping), for the refusal's detail. */
    uint64_t mapped_at_alloc;
    /* What the latest outermost allocation's refusal says of its cure
     * (set by the layer that refused, reset when one begins): no memory
     * anywhere could serve it (more than the device, or than a budget
     * holds), or the budget that refused (what it counts changes only
     * when the layers above it give memory back). */
    bool refused_for_good;
    const struct dv_resource *refused_by;
    /* Called after every allocation made through the public API
     * (dv_resource_allocate: a caller's own layers, dv_actor_resources),
     * so that the owner's statistics see memory reserved there; NULL:
     * none. */
    void (*allocated)(void *arg);
    void *allocated_arg;
} dv_res_env;

/*
 * Block generations: unique in the process (never reused, never 0), and
 * increasing within an environment, so within every resource stack.  An
 * environment takes them from the process-wide counter DV_GEN_BATCH at a
 * time: an allocation then makes no locked read-modify-write, which on x86
 * waits for every load and store before it and would keep the cache
 * misses of consecutive operations from overlapping.  Owner thread only.
 */
#define DV_GEN_BATCH 4096u
uint64_t dv__generation_batch(void);

static inline uint64_t dv__next_generation(dv_res_env *env)
{
    if (env->gen_next == env->gen_end) {
        env->gen_next = dv__generation_batch();
        env->gen_end = env->gen_next + DV_GEN_BATCH;
    }
    return env->gen_next++;
}

/* Retain the device's context and create nstreams streams; the calling
 * thread owns the environment. */
int dv__res_env_init(dv_res_env *env, dv_driver *drv, int device, uint32_t nstreams);
/* The two halves of init: retain the context (no streams yet), then
 * create streams up to nstreams (after a context reset, too). */
int dv__res_env_open(dv_res_env *env, dv_driver *drv, int device);
int dv__res_env_streams(dv_res_env *env, uint32_t nstreams);
/* Destroy the streams (work already enqueued still runs). */
void dv__res_env_drop_streams(dv_res_env *env);
/* Wait for every stream, destroy them, release the context. */
void dv__res_env_fini(dv_res_env *env);
/* Hand the environment to the calling thread. */
void dv__res_env_adopt(dv_res_env *env);
/* Wait for every stream of the environment. */
int dv__res_env_sync(dv_res_env *env);

typedef struct dv_resource dv_resource;

typedef struct dv_res_ops {
    const char *name;
    int (*allocate)(dv_resource *r, uint64_t bytes, dv_stream_id stream, dv_tag tag, dv_block *out);
    /* On success the block's state reads RETIRED, QUARANTINED or FREED. */
    int (*deallocate)(dv_resource *r, dv_block *block);
    uint64_t (*bytes_outstanding)(const dv_resource *r);
    /* Wait for queued frees and stop counting them (blocking). */
    int (*reap_pending)(dv_resource *r);
    bool (*supports_block_use_tracking)(const dv_resource *r);
    /* Is id a block this resource handed out and holds live?  Quiet (no
     * detail); NULL where the resource cannot tell. */
    bool (*holds_block)(const dv_resource *r, dv_block_id id);
    int (*prepare_block_use)(dv_resource *r, dv_block_id id, dv_stream_id stream, dv_access a);
    int (*finish_block_use)(dv_resource *r, dv_block_id id, dv_stream_id stream, dv_access a);
    int (*record_block_use)(dv_resource *r, dv_block_id id, dv_stream_id stream);
    /* Where stream is now, in the resource's own count of its work (0
     * where it keeps none), and: the caller enqueued on waiter a wait for
     * everything enqueued on signaler up to pos (a position this op gave),
     * so tracking may skip waits that one covers. */
    uint64_t (*stream_position)(const dv_resource *r, dv_stream_id stream);
    void (*note_stream_wait)(dv_resource *r, dv_stream_id waiter, dv_stream_id signaler,
                             uint64_t pos);
    /* Under the stream-order checker (fence_always) a free's position is
     * marked without an event, the checker counting the free as a step
     * after the resource's part: once the checker took it, capture the
     * frees marked on stream with an event, so that another stream taking
     * the memory waits for them and not for what stream queues later. */
    int (*capture_frees)(dv_resource *r, dv_stream_id stream);
    /* Frees what the resource holds (not its upstream). Blocks still live
     * are returned upstream first. */
    void (*destroy)(dv_resource *r);
} dv_res_ops;

/* Every op but allocate, deallocate and destroy may be NULL in a
 * decorator: the wrappers below then call the first resource upstream
 * that has it (so a decorator writes only what it changes). */

/* Base of every resource; implementations embed it first. */
struct dv_resource {
    const dv_res_ops *ops;
    dv_resource *upstream; /* NULL for direct and async */
    dv_res_env *env;
    int device;
    /* With a caller's layer above (dv_resource_adapt): the blocks this
     * resource gave through dv_resource_allocate and has not had back,
     * as it gave them (public.c); else NULL. */
    struct dv_res_given *given;
};

/* The books of blocks given to a caller's layer (public.c): a block
 * given, a block back (by generation), the books dropped. */
void dv__res_given_add(dv_resource *r, const dv_block *b);
void dv__res_given_remove(dv_resource *r, uint64_t generation);
void dv__res_given_free(dv_resource *r);

/* For resources that cannot track (direct) and their tracking ops. */
int dv__res_no_tracking(const dv_resource *r, const char *op);

/* A public call's check: r is set and the caller is its environment's
 * owner; else DV_EINVAL, said. */
int dv__res_owner_check(const dv_resource *r, const char *op);

/* Debug builds check that the caller is the environment's owner. */
void dv__res_owner_violation(const dv_resource *r, const char *op);

static inline void dv__res_assert_owner(const dv_resource *r, const char *op)
{
    if (dv_config_debug && !pthread_equal(pthread_self(), r->env->owner))
        dv__res_owner_violation(r, op);
}

/* ------------------------------------------------------------------------
 * The wrappers: the contract, once.
 * ------------------------------------------------------------------------ */

/* Allocate bytes (1 .. DV_DRV_MAX_BYTES) ordered on stream.  out->state is
 * LIVE, out->bytes >= bytes, out->ptr aligned to DV_BLOCK_ALIGN. */
int dv__res_allocate(dv_resource *r, uint64_t bytes, dv_stream_id stream, dv_tag tag, dv_block *out);
/* Return a block: its alloc stream waits on every use from other streams,
 * then the free is queued there.  Unknown or stale: DV_EUSE_AFTER_FREE. */
int dv__res_deallocate(dv_resource *r, dv_block *block);
uint64_t dv__res_bytes_outstanding(const dv_resource *r);
int dv__res_reap_pending(dv_resource *r);
bool dv__res_supports_block_use_tracking(const dv_resource *r);
/* Does the stack under r hold id live?  True where no layer can tell. */
bool dv__res_holds_block(const dv_resource *r, dv_block_id id);
int dv__res_prepare_block_use(dv_resource *r, dv_block_id id, dv_stream_id stream, dv_access a);
int dv__res_finish_block_use(dv_resource *r, dv_block_id id, dv_stream_id stream, dv_access a);
int dv__res_record_block_use(dv_resource *r, dv_block_id id, dv_stream_id stream);
/* Capture the frees marked on stream (ops.capture_frees). */
int dv__res_capture_frees(dv_resource *r, dv_stream_id stream);
/* A position of stream for dv__res_note_stream_wait (0: none kept). */
uint64_t dv__res_stream_position(dv_resource *r, dv_stream_id stream);
/* The caller enqueued on waiter a wait for signaler's work up to pos (an
 * event recorded when stream_position gave pos): tracking learns the edge
 * and skips the waits it covers. */
void dv__res_note_stream_wait(dv_resource *r, dv_stream_id waiter, dv_stream_id signaler,
                              uint64_t pos);
/* Destroy a whole stack: r, then its upstream, and so on. */
void dv__res_destroy_stack(dv_resource *r);
const char *dv__res_name(const dv_resource *r);

/* ------------------------------------------------------------------------
 * The resources.  Each constructor takes its upstream (where it has one)
 * and returns 0 or a negative dv_status.
 * ------------------------------------------------------------------------ */

/* Synchronous driver alloc/free; cannot track cross-stream uses. */
int dv__direct_resource_create(dv_res_env *env, dv_resource **out);
/* Stream-ordered driver alloc/free on the alloc stream; full tracking. */
int dv__async_resource_create(dv_res_env *env, dv_resource **out);

typedef struct dv_pool_config {
    uint64_t initial_chunk_bytes; /* first chunk from upstream (default 64 MiB) */
    uint64_t max_chunk_bytes;     /* chunks grow geometrically up to this (1 GiB) */
    uint64_t max_pool_bytes;      /* 0: no limit beyond upstream's */
    bool chunks;                  /* grow by chunks from upstream even where the
                                   * pool could map memory in place */
    bool keep_mapped;             /* never move memory: map more instead */
    bool alias;                   /* bind physical granules to address granules
                                   * as blocks come, keeping them mapped at every
                                   * address that used them (aliases) */
    bool no_defer;                /* aliases: a large block's free done whole
                                   * at once, never undone by a placement of
                                   * its like (the same placements: tests
                                   * compare the two) */
    bool no_pend;                 /* aliases: every granule a free leaves
                                   * unused made idle at once, none left
                                   * pending (the same placements: tests
                                   * compare the two) */
    uint32_t seen_units;          /* aliases: units of what was seen live
                                   * together, at most (0: the default;
                                   * tests make it small) */
} dv_pool_config;
void dv__pool_config_init(dv_pool_config *cfg);
int dv__pool_resource_create(dv_resource *upstream, const dv_pool_config *cfg, dv_resource **out);

/* dv_pool_stats: public (devactor_resource.h). */
/* Owner thread only. */
int dv__pool_stats_get(dv_resource *pool, dv_pool_stats *out);
/* Is r a pool (not a layer that merely calls itself one)? */
bool dv__res_is_pool(const dv_resource *r);
bool dv__res_is_async(const dv_resource *r);
/* Every pool of the stack under r (r included) trimmed, then the driver's
 * cache (dv_resource_trim without the owner check); *released: the bytes
 * the pools gave back. */
int dv__res_trim_stack(dv_resource *r, uint64_t *released);
/* Return every empty chunk upstream (owner thread).  *released may be NULL. */
int dv__pool_trim(dv_resource *pool, uint64_t *released);
/* Tests: ask the device how far each stream got, as a growth would, so
 * that the pool knows which frees are passed (owner thread). */
int dv__pool_learn_passed(dv_resource *pool);
/* Tests: a pool's alias books (granules, physical memory, the idle list)
 * agree with its ranges; DV_EINVAL naming the first thing that does not
 * (DV_OK for a pool without aliases). */
int dv__pool_check(dv_resource *pool);
/* Tests: granules in a unit of what a pool with aliases saw live together
 * (1, or 2, 4 ... once more granules were used than it keeps units for;
 * 0 for a pool without aliases). */
uint32_t dv__pool_seen_unit(dv_resource *pool);
/* Aliases: large frees whose granule work a placement of the same block
 * made needless (bins_defer), so far. */
uint64_t dv__pool_undone(dv_resource *pool);
/* Tests: a hash of a pool's alias books that two pools placing alike
 * share: granules (users, memory, what they learnt, pending or not), the
 * idle order, what was seen live together; not the frees noted nor the
 * idle stamps.  0 without aliases. */
uint64_t dv__pool_fingerprint(dv_resource *pool);

/* Byte limit over any inner resource; refusal is DV_EOUT_OF_BUDGET with
 * requested and remaining bytes in the detail. */
int dv__budget_resource_create(dv_resource *upstream, uint64_t limit_bytes, dv_resource **out);
uint64_t dv__budget_limit(const dv_resource *budget);
int dv__budget_stats(const dv_resource *budget, uint64_t *limit, uint64_t *used);

typedef struct dv_log_sink dv_log_sink;
/* Sinks: a file (appended, flushed per row), memory, nothing. */
int dv__log_sink_file(const char *path, dv_log_sink **out);
int dv__log_sink_memory(dv_log_sink **out);
int dv__log_sink_null(dv_log_sink **out);
/* The memory sink's text so far (NUL-terminated; owned by the sink). */
const char *dv__log_sink_text(const dv_log_sink *sink, size_t *len);
void dv__log_sink_destroy(dv_log_sink *sink);
/* CSV: header, then one row per allocate, free and failure.  The sink is
 * not owned; destroy it after the resource.  With refusals false, a
 * refused allocation writes no row: the stack's owner retries refusals
 * (the actor's out-of-memory path) and writes one row for its final
 * answer with dv__log_refusal, so that the log says what the caller got. */
int dv__logging_resource_create(dv_resource *upstream, dv_log_sink *sink, bool refusals,
                                dv_resource **out);
void dv__log_refusal(dv_log_sink *sink, uint32_t thread, uint64_t bytes, dv_stream_id stream,
                     int device, dv_tag tag);
/* A free row for a block that goes with its stack (a rebuild, a
 * shutdown), so that the log's live bytes end where the actor's do. */
void dv__log_dropped(dv_log_sink *sink, uint32_t thread, const dv_block *b);
/* The same with a file sink of its own, destroyed with it. */
int dv__logging_resource_create_file(dv_resource *upstream, const char *path, dv_resource **out);
#define DV_LOG_HEADER "Thread,Time,Action,Pointer,Size,Stream,Device,Tag,QueryId"

typedef struct dv_guard_config {
    uint32_t canary_bytes;      /* before and after each block (256) */
    uint32_t quarantine_blocks; /* freed blocks held before reuse (16) */
    uint64_t quarantine_bytes;  /* ... or this many bytes (64 MiB) */
} dv_guard_config;
void dv__guard_config_init(dv_guard_config *cfg);
int dv__guard_resource_create(dv_resource *upstream, const dv_guard_config *cfg, dv_resource **out);
/* Check every live block's canaries now (owner thread): 0, or
 * DV_EOUT_OF_BOUNDS for the first damaged one (detail: generation, offset). */
int dv__guard_check(dv_resource *guard);
/* If r is a guard: its quarantine handed back upstream now, oldest first
 * (a trim: what is held and not used goes back).  Else nothing. */
int dv__guard_flush(dv_resource *r);

/* Fill bytes of the guard (documented, so dumps can be read). */
#define DV_GUARD_CANARY_BYTE 0xCAu /* before and after every block */
#define DV_GUARD_POISON_BYTE 0xDDu /* written over a block when it is freed */

#endif /* DV_RESOURCES_RESOURCE_H */
