/*
 * devactor — one owner thread per CUDA device, reached through messages.
 *
 * The core API: the error model, actors and their configuration, handles
 * (dv_ref), futures, allocation, copies, memsets, kernels and launches,
 * tasks, events, host memory, statistics and the memory log.  The other
 * public headers build on it: devactor_resource.h (resource stacks and a
 * caller's own layers), devactor_blas.h, devactor_fft.h and
 * devactor_nccl.h (the library actors) and devactor_sim.h (the simulated
 * device's kernels and fault controls).
 *
 *   - every function returns 0 on success or a negative dv_status;
 *   - dv_strerror() and dv_err_name() describe a code (never NULL);
 *   - dv_last_error() is the detail of the last failure on the calling
 *     thread: the raw driver code and its name, the call that failed,
 *     requested and remaining bytes, a block generation and offset.
 *
 * Threads: each function says where it may be called; most may be called
 * from any thread, and a call that would wait answers DV_EDEADLK on a
 * thread that serves an actor (a task, a host function).
 */
#ifndef DEVACTOR_H
#define DEVACTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define DV_EXPORT __attribute__((visibility("default")))
#else
#define DV_EXPORT
#endif

#define DV_VERSION_MAJOR 0
#define DV_VERSION_MINOR 2
#define DV_VERSION_PATCH 0

/*
 * The error list.  X(name, value, message): one line per code, from which
 * the enum, dv_strerror() and dv_err_name() are generated.  Values are
 * stable; new codes are appended.
 */
#define DV_ERRNO_MAP(X)                                                                            \
    X(EINVAL, -1, "invalid argument")                                                              \
    X(ENOMEM, -2, "out of host memory")                                                            \
    X(ENODEVICE, -3, "no CUDA device")                                                             \
    X(EOUT_OF_BUDGET, -4, "allocation exceeds the budget")                                         \
    X(EDEVICE_OOM, -5, "device out of memory")                                                     \
    X(EDRIVER, -6, "CUDA driver error")                                                            \
    X(ESTREAM_MISUSE, -7, "stream-ordered contract violated")                                      \
    X(EUSE_AFTER_FREE, -8, "use after free or double free")                                        \
    X(EOUT_OF_BOUNDS, -9, "write outside the bounds of a block")                                   \
    X(ESTALE, -10, "stale handle")                                                                 \
    X(ESHUTDOWN, -11, "actor is shutting down")                                                    \
    X(ECONTEXT_LOST, -12, "CUDA context lost to a sticky error")                                   \
    X(EDEVICE_LOST, -13, "device lost for the rest of this process")                               \
    X(EAGAIN, -14, "resource temporarily unavailable, try again")                                  \
    X(EHAZARD, -15, "cross-stream ordering hazard")                                                \
    X(ENOTSUP, -16, "not supported by this build or backend")                                      \
    X(ETIMEDOUT, -17, "timed out")                                                                 \
    X(EDEADLK, -18, "the call would wait on an actor's own thread")                                \
    X(EBUSY, -19, "the device already has an actor")                                               \
    X(EFORKED, -20, "the actor belongs to the parent process (inherited across fork)")             \
    X(ENOKERNEL, -21, "no such kernel in the module image")                                        \
    X(EIO, -22, "a file could not be written or read")

typedef enum dv_status {
    DV_OK = 0,
#define DV__ERRNO_ENUM(name, value, msg) DV_##name = (value),
    DV_ERRNO_MAP(DV__ERRNO_ENUM)
#undef DV__ERRNO_ENUM
} dv_status;

/* Human-readable message for a code; "unknown error" for codes not listed. */
DV_EXPORT const char *dv_strerror(int status);
/* Symbolic name ("DV_EINVAL"); "DV_UNKNOWN" for codes not listed. */
DV_EXPORT const char *dv_err_name(int status);

/*
 * Detail of one failure.  Fields that do not apply are zero / empty.
 */
typedef struct dv_error_detail {
    int status;           /* the dv_status returned */
    const char *call;     /* the operation that failed, e.g. "mem_alloc" */
    int driver_code;      /* raw CUresult (or the simulated one), 0 if none */
    char driver_name[48]; /* e.g. "CUDA_ERROR_OUT_OF_MEMORY" */
    uint64_t requested;   /* bytes asked for */
    uint64_t remaining;   /* bytes that were left (budget, device) */
    uint64_t generation;  /* block generation involved, 0 if none */
    int64_t offset;       /* byte offset involved (guard reports) */
    char message[256];    /* one line for a person */
} dv_error_detail;

/* The last failure recorded on the calling thread (never NULL). */
DV_EXPORT const dv_error_detail *dv_last_error(void);
/* Forget the calling thread's last failure. */
DV_EXPORT void dv_error_clear(void);
/* Record a failure as the calling thread's dv_last_error() and return
 * status: for wrappers built on devactor (devactor_blas.h is one) that
 * refuse or fail calls the way devactor does.  call: a name that lives
 * for the program (a string literal); requested, remaining: the bytes
 * involved (0 if none); fmt: the message, printf-style.  Inside a task,
 * a failure recorded this way and returned is the task's detail. */
DV_EXPORT int dv_error_set(int status, const char *call, uint64_t requested, uint64_t remaining,
                           const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* "MAJOR.MINOR.PATCH" of the library as built (DV_VERSION_* are the header's) */
DV_EXPORT const char *dv_version(void);

/* ========================================================================
 * ABI
 *
 * A program built against this header runs with any later library of the
 * same major version (the shared library's SONAME, libdevactor.so.MAJOR).
 * The structs keep that promise in four ways:
 *
 *   - Structs a caller allocates and passes to an init function carry
 *     `size` first: dv_future (dv_future_init) and dv_actor_config
 *     (dv_actor_config_init) set it to the caller's sizeof (the init
 *     macros pass it to the _sized functions).  The library
 *     reads and writes only that many bytes; a field beyond them takes its
 *     default.  Fields are only ever added at the end.  A size the library
 *     cannot take (0, smaller than the first layout, over 4096 or not a
 *     multiple of 8, or larger than its own with non-zero bytes past
 *     them) answers DV_EINVAL.
 *   - Structs the library fills for the caller (dv_actor_stats,
 *     dv_actor_health, dv_memory_stats, dv_fft_stats, dv_pool_stats) are
 *     read through calls that take the caller's size: the macros
 *     dv_actor_stats_get, dv_actor_health_get, dv_memory_stats_get,
 *     dv_fft_stats_get and dv_resource_pool_stats pass sizeof(*out).  The library writes that
 *     many bytes at most (zero past what it knows); they too grow only at
 *     the end.
 *   - Structs passed by value or in arrays (dv_ref, dv_ref_info, dv_dim3,
 *     dv_arg, dv_error_detail, dv_order_token, dv_memory_counter,
 *     dv_memory_usage, dv_blas_matrix, dv_blas_vector, dv_fft_shape,
 *     dv_tag, dv_block, dv_pool_options, dv_resource_ops, dv_nccl_id,
 *     dv_nccl_buf, dv_sim_*) never
 *     change within a major version; a change comes as a new struct with
 *     new functions.
 *   - Structs the library hands to the caller (dv_task_ctx, dv_oom_info)
 *     grow only at the end; dv_actor, dv_event, dv_kernel, dv_blas,
 *     dv_fft, dv_nccl_comm and dv_resource are opaque.
 *
 * Enumerations gain values, never change one.  Exported functions are
 * never removed or changed within a major version (cmake/devactor.sym).
 * ======================================================================== */

/* ========================================================================
 * Devices, actors, handles
 *
 * Threads.  Any thread may call every function below, except those marked
 * "inside a task".  Each posts a message to the device's actor (the one
 * thread that owns the device) or reads state the actor publishes;
 * nothing here touches CUDA on the calling thread.  Some calls wait for
 * the actor: every blocking form, dv_flush, dv_kernel_get,
 * dv_actor_stats_get, the dv_memory_* calls but dv_query_set,
 * dv_actor_resources, dv_actor_reset, dv_event_create, dv_event_sync,
 * dv_event_query, dv_event_elapsed, dv_ref_access on a pending handle,
 * dv_future_wait* on an operation not yet there, and dv_stream_wait_event
 * on another actor's event.  On a thread that serves an actor -- inside a
 * task, or a host function (dv_task_host_fn) -- every such call answers
 * DV_EDEADLK at once and does nothing: waiting for its own actor would
 * wait forever, and two actors waiting for each other too.  Post with the
 * _async forms there and let another thread wait.
 *
 * One actor owns a device.  A second actor on a device that has one
 * (dv_actor_create or dv_actor_get, while the first is not shut down)
 * answers DV_EBUSY: a reset or a rebuild of one would tear down the
 * other's context.  On CUDA all of a process's actors share the GPUs; a
 * simulated device made by its own dv_actor_create is a world of its own.
 *
 * fork().  An actor has no thread in a child process: the child's calls
 * on its parent's actors, their handles, events and in-flight futures
 * answer DV_EFORKED and never wait.  A child may make actors of its own
 * on the simulated device (the CUDA driver does not survive fork).
 *
 * Order.  One thread's posts to an actor are handled in the order posted.
 * Across threads: an operation whose post returned before another
 * thread's post began -- the two threads synchronised in between, through
 * a mutex, a queue, a join, an atomic flag -- is ordered before it on the
 * device whenever the two name the same handle or the same stream.  So a
 * thread may hand a handle to another as soon as its post on it returned:
 *
 *     thread A                              thread B
 *     dv_memset_async(gpu, buf, ..., &f);
 *     lock(m); shared = buf; unlock(m);
 *                                           lock(m); b = shared; unlock(m);
 *                                           dv_copy_dtoh(gpu, out, b, ...);  // sees A's memset
 *
 * Posts that overlap in time are ordered one way or the other.  Nothing
 * orders work on different handles and different streams: that is what
 * streams are for.
 *
 * Milestones.  Every operation that takes a future reaches two:
 *
 *   ordered   the actor took it in: it is enqueued on its stream, fenced
 *             against every other stream's use of its blocks, and
 *             anything posted after it on the same handle or stream, by
 *             any thread, comes after it on the device;
 *   complete  its effect is done.
 *
 *   operation                  ordered                        complete
 *   -------------------------  -----------------------------  ------------------------------
 *   dv_alloc_async             memory assigned, or refused    = ordered
 *   dv_copy_*, dv_memset       enqueued and fenced            the device finished it (a host
 *                                                             buffer may be read or reused)
 *   dv_launch                  enqueued and fenced            the kernel finished
 *   dv_task                    the callback returned, its     the device finished what it
 *                              work enqueued                  enqueued on the task's stream
 *   dv_sync                    enqueued                       everything ordered before it on
 *                                                             the stream finished
 *   dv_event_record_async      recorded                       the device reached the record
 *   dv_flush, dv_kernel_get,   handled                        = ordered
 *   dv_actor_stats_get,
 *   dv_memory_* (but
 *   dv_query_*),
 *   dv_actor_resources,
 *   dv_actor_reset
 *
 * Three kinds of call:
 *   - blocking calls (dv_copy_htod, dv_memset, dv_launch, ...) return at
 *     complete, with the operation's status;
 *   - _async calls take a dv_future, return once posted (or at once with
 *     the error when the call is refused before posting: then the future
 *     is complete with that error too), and the future reaches ordered,
 *     then complete;
 *   - post-only calls (dv_alloc, dv_ref_release, dv_event_record,
 *     dv_stream_wait_event, dv_event_destroy) return once posted; what
 *     the actor answers shows on the handle or event later.
 *
 * A future must stay valid until it is complete; then the library never
 * touches it again.  Any number of threads may wait on one future, at the
 * same time or one after another; every wait returns the same status.
 * ======================================================================== */

typedef enum dv_backend {
    DV_BACKEND_AUTO = 0, /* DV_BACKEND env, else cuda if a device answers, else sim */
    DV_BACKEND_CUDA,
    DV_BACKEND_SIM,
} dv_backend;

/* A stream of an actor's pool: 0 .. streams-1; 0 is the default stream
 * (a non-blocking stream, never the legacy NULL stream). */
typedef uint32_t dv_stream;
#define DV_STREAM_NONE UINT32_MAX

/*
 * A handle to a block of device memory: a value (domain, slot, slot
 * generation), checked on every use.  DV_REF_NULL is never valid.
 *
 * A handle is usable at once: dv_alloc returns it before the actor has
 * assigned the memory, and every operation posted on it later -- by this
 * thread, or by a thread it was handed to -- is ordered after the
 * allocation.  Until then it is *pending*.  If the allocation fails
 * (budget, device memory), every later operation on the handle answers
 * the allocation's error and detail; the handle must still be released.
 */
typedef struct dv_ref {
    uint64_t bits;
} dv_ref;
#ifdef __cplusplus
#define DV_REF_NULL (dv_ref{0})
#else
#define DV_REF_NULL ((dv_ref){0})
#endif

typedef struct dv_ref_info {
    uint64_t ptr;                /* device address */
    uint64_t bytes;              /* usable bytes */
    uint64_t requested;          /* bytes asked for */
    int device;                  /* ordinal */
    dv_stream alloc_stream;      /* the stream the block is ordered on */
    dv_stream last_write_stream; /* last stream that wrote it, DV_STREAM_NONE */
    uint64_t block_generation;   /* the block's, process-wide */
    uint64_t context_generation; /* the context it was minted in */
    uint32_t refcount;
} dv_ref_info;

/* Validate a handle and describe it.  A pending handle is waited for
 * (the allocation's own error when it failed).  DV_ESTALE once it was
 * released for good, its actor shut down or is gone, or its context was
 * rebuilt.  info may be NULL: the answer alone. */
DV_EXPORT int dv_ref_access(dv_ref ref, dv_ref_info *info);
/* The same, never waiting: DV_EAGAIN while the handle is pending. */
DV_EXPORT int dv_ref_try_access(dv_ref ref, dv_ref_info *info);
/* One more owner.  DV_ESTALE for a handle no longer valid. */
DV_EXPORT int dv_ref_retain(dv_ref ref);
/* One owner less; the last release posts the free to the actor (post-
 * only: the memory is reused only after every use ordered before has
 * finished).  Releasing more times than retained: DV_ESTALE, nothing
 * freed twice. */
DV_EXPORT int dv_ref_release(dv_ref ref);

/*
 * A completion the caller owns (see Milestones above).  Initialise it once
 * with dv_future_init; an _async call may then reuse it whenever it is
 * not in flight (posted and not yet complete: DV_EINVAL).
 */
typedef struct dv_future {
    uint32_t size;        /* sizeof(dv_future) as the caller was built:
                           * dv_future_init (ABI, above) */
    uint32_t flags;       /* DV_FUTURE_TRY: a full queue is DV_EAGAIN, not a wait */
    uint32_t state;       /* the library's: milestones reached, sleepers */
    int status;           /* the operation's, once complete */
    dv_ref ref;           /* dv_alloc_async's handle */
    uint64_t value;       /* an operation's other result */
    uint64_t internal[3]; /* the library's */
    dv_error_detail detail;
} dv_future;
#define DV_FUTURE_TRY 1u

typedef enum dv_milestone {
    DV_ORDERED = 1,
    DV_COMPLETE = 2,
} dv_milestone;

/* Set f up (size: ABI, above; the macro passes the caller's sizeof). */
DV_EXPORT void dv_future_init_sized(dv_future *f, uint32_t flags, size_t size);
#define dv_future_init(f, flags) dv_future_init_sized((f), (flags), sizeof(*(f)))
/* Wait until complete (spin briefly, then sleep); the operation's status.
 * A failure's detail becomes the calling thread's dv_last_error().  With
 * the stream-order checker on, the waiting thread (whichever thread it is)
 * is ordered after the operation from then on -- but for an allocation,
 * whose completion (the memory assigned) is nothing on the device: a raw
 * pointer to its block, used on another stream than the allocation's,
 * still wants an event recorded after it there or a sync of that stream
 * (a handle is fenced by devactor).  A future set up but not posted yet
 * answers DV_EINVAL at once (so does every wait below): a thread handed a
 * future before its call was made polls dv_future_done instead. */
DV_EXPORT int dv_future_wait(dv_future *f);
/* Wait until ordered: DV_OK, or the operation's error when it failed
 * before it was ordered (then it is complete too).  For the checker it
 * orders the caller after nothing, even where the operation happens to
 * be complete already; so does dv_future_reached(f, DV_ORDERED). */
DV_EXPORT int dv_future_wait_ordered(dv_future *f);
/* Wait for a milestone at most timeout_ns: DV_ETIMEDOUT when it was not
 * reached (the future stays in flight; wait again later).  An operation
 * that itself ended with DV_ETIMEDOUT (a collective) answers the same:
 * dv_future_reached tells them apart. */
DV_EXPORT int dv_future_wait_for(dv_future *f, dv_milestone m, uint64_t timeout_ns);
/* Complete yet?  Never blocks.  For the checker, true orders the calling
 * thread after the operation as dv_future_wait does (so does
 * dv_future_reached(f, DV_COMPLETE), and dv_future_wait_for that reached
 * DV_COMPLETE); false orders it after nothing. */
DV_EXPORT bool dv_future_done(const dv_future *f);
/* Reached milestone m yet?  Never blocks. */
DV_EXPORT bool dv_future_reached(const dv_future *f, dv_milestone m);
/* Complete f with status (both milestones), its detail the calling
 * thread's dv_last_error(), as devactor completes the future of a call it
 * refuses: for wrappers built on devactor that refuse an _async call
 * before posting anything.  Returns status; DV_EINVAL (f untouched) for a
 * NULL future, one not set up with dv_future_init, one in flight, or a
 * status that is not a dv_status. */
DV_EXPORT int dv_future_fail(dv_future *f, int status);

typedef struct dv_actor dv_actor;
struct dv_resource; /* devactor_resource.h */

/*
 * Out of memory, arbitrated.  An allocation the stack refuses
 * (DV_EDEVICE_OOM, DV_EOUT_OF_BUDGET) is not refused at once: the actor
 * first waits for the frees already queued on the streams to land, then
 * trims (the pools' free mappings and chunks, the driver's cache), trying
 * again after each; then it calls the configuration's oom function, if
 * any, which may free memory and ask for another try.  Only then is the
 * allocation refused; its detail says what was reclaimed and what is
 * held.  dv_alloc_wait further waits, bounded, for other clients to
 * release memory.
 */
typedef struct dv_oom_info {
    int device;
    int status;               /* DV_EDEVICE_OOM or DV_EOUT_OF_BUDGET, as refused */
    uint64_t bytes;           /* asked for */
    uint64_t live_bytes;      /* handed out by the actor now */
    uint64_t reserved_bytes;  /* held from the device now */
    uint64_t reclaimed_bytes; /* given back by reaping and trimming just before */
    const char *tag;          /* the allocation's */
    uint32_t attempt;         /* 1 at the first call for this allocation, at most 4 */
} dv_oom_info;
/* Called on the actor's thread (no waiting for any actor there: such calls
 * answer DV_EDEADLK).  It may give memory back through its own resource
 * layer (devactor_resource.h) and return true to have the allocation tried
 * again at once, or post frees (dv_ref_release) that land after this
 * allocation is refused (a dv_alloc_wait then gets the memory on its next
 * try), or only record the event.  Returns false to refuse. */
typedef bool (*dv_oom_fn)(const dv_oom_info *info, void *user);

/* The resource stack an actor allocates through, bottom to top:
 * the driver's stream-ordered allocator, then optional layers. */
typedef struct dv_actor_config {
    uint32_t size;           /* sizeof(dv_actor_config) as the caller was built:
                              * dv_actor_config_init (ABI, above) */
    dv_backend backend;      /* AUTO: DV_BACKEND, else cuda if present, else sim */
    int device;              /* ordinal */
    uint32_t streams;        /* stream pool size (default 4) */
    uint32_t queue_capacity; /* messages per client ring (default 1024) */
    bool pool;               /* pool over the async resource (default on) */
    uint64_t pool_initial_bytes, pool_max_chunk_bytes; /* 0: defaults */
    uint64_t budget_bytes;                             /* 0: no budget */
    bool guard;                                        /* canaries, poison, quarantine (debug) */
    const char *log_path; /* CSV allocation log, NULL: none (appended; one that cannot be
                           * opened: the actor is not made, DV_EIO) */
    bool synchronous;  /* debug: wait for every op, exact fault reports */
    bool direct_alloc; /* synchronous driver allocation, no cross-stream
                        * tracking: tracked copies and launches of handles
                        * answer DV_ESTREAM_MISUSE (tests, sanitizers) */
    bool permissive;   /* launches may pass raw device pointers, untracked
                        * (default strict: DV_ESTREAM_MISUSE) */
    bool shared_queue; /* one multi-producer ring for every client instead of
                        * a ring per client thread (for comparison: it stalls
                        * when clients outnumber cores) */
    bool check_order;  /* debug: the stream-order checker (also turned on for
                        * every actor by the environment, DV_CHECK_ORDER=1) */
    /* Host memory (dv_host_alloc, staging of pageable copies). */
    uint64_t host_budget_bytes;   /* page-locked bytes the actor may hold, 0: no limit */
    uint64_t staging_bytes;       /* staging for pageable copies (default 128 MiB);
                                   * made at the first such copy */
    uint64_t staging_chunk_bytes; /* one step of a staged copy (default 8 MiB) */
    uint32_t copy_threads;        /* threads that move the data of _async pageable
                                   * copies and help the larger ones (default 4),
                                   * started at the first that needs them */
    /* The simulated device (when the sim backend runs). */
    int sim_devices;           /* 0: 1 */
    uint64_t sim_memory_bytes; /* 0: 1 GiB */
    uint64_t sim_seed;
    uint32_t sim_delay_max_us;
    void *driver; /* devactor's own tests: an open driver to share;
                   * leave NULL (no public call makes one) */
    /* Since 0.2: a stack of resources of the caller's making
     * (devactor_resource.h); NULL: the one pool, guard, log_path and
     * budget_bytes describe.  Called on the actor's thread at its start and
     * after every rebuild, with the bottom (the driver's allocator). */
    int (*stack)(struct dv_resource *bottom, void *user, struct dv_resource **top);
    void *stack_user;
    /* Since 0.2 (later fields): the pool grows by chunks from the driver's
     * pool instead of mapping memory in place (virtual memory, where the
     * device has it).  Setting pool_initial_bytes or pool_max_chunk_bytes
     * asks for chunks too. */
    bool pool_chunks;
    /* Out of memory (dv_oom_info, above); NULL: none. */
    dv_oom_fn oom;
    void *oom_user;
    /* The pool growing in place never unmaps free memory to map it where a
     * request needs it: past the most it ever mapped it maps more instead.
     * Fewer driver calls (a move costs tens of microseconds of the actor's
     * thread), more memory held; dv_resource_trim still gives free memory
     * back.  Default false: memory moves. */
    bool pool_keep_mapped;
    /* The pool growing in place binds physical memory to the address space
     * granule by granule (2 MiB on current GPUs) as blocks come, and keeps
     * a granule mapped at every address that used it: memory moves between
     * those addresses with no driver call, so a workload that repeats
     * itself (training steps, batches) stops calling the driver once it
     * has run once or twice; work that does not repeat moves memory more
     * often than the default pool does.  Ignored where the pool grows by
     * chunks (pool_chunks, pool_initial_bytes, pool_max_chunk_bytes).
     * DV_POOL_ALIAS=1 in the environment turns it on.  Default false. */
    bool pool_alias;
} dv_actor_config;

/* Defaults, and size (ABI, above); the macro passes the caller's sizeof. */
DV_EXPORT void dv_actor_config_init_sized(dv_actor_config *cfg, size_t size);
#define dv_actor_config_init(cfg) dv_actor_config_init_sized((cfg), sizeof(*(cfg)))
/*
 * Configuration as text, over what cfg holds (set up with
 * dv_actor_config_init): key:value pairs split by commas, as
 *
 *     "budget:8G,pool_initial:256M,streams:8,guard:1,log:/tmp/dv-%d.csv"
 *
 * Keys: backend (auto, cuda, sim), streams, queue, pool, pool_initial,
 * pool_max_chunk, pool_chunks, pool_keep_mapped, pool_alias, sim_memory, budget,
 * guard, log, synchronous, permissive, check_order, host_budget, staging,
 * staging_chunk, copy_threads (the fields of dv_actor_config).  Sizes and counts take K, M, G or T, either
 * case, powers of 1024 ("1M", "1MiB", "1MB" and "1m" read the same);
 * switches 1/0, true/false, on/off, yes/no.  "%d" in a log path is the device's ordinal.  An unknown key or
 * a value that does not parse answers DV_EINVAL naming it, and cfg is
 * unchanged.  The log path is copied into memory the library keeps for
 * the life of the process.
 */
DV_EXPORT int dv_actor_config_parse(dv_actor_config *cfg, const char *text);
/* The process-wide actor of a device, started on first use (devices
 * 0 .. DV_MAX_DEVICES-1).  Concurrent first callers: one builds it, with
 * the defaults and then the environment variable DEVACTOR_CONF in the
 * syntax of dv_actor_config_parse (for every device: an operator turns
 * on a budget or a log without code).  A DEVACTOR_CONF it cannot take
 * answers DV_EINVAL naming the key, and builds nothing; the backend it
 * names applies to the first actor's driver, shared by all of them. */
#define DV_MAX_DEVICES 16
DV_EXPORT int dv_actor_get(int ordinal, dv_actor **out);
/* A composed actor with its own configuration (NULL: the defaults of
 * dv_actor_config_init); not registered. */
DV_EXPORT int dv_actor_create(const dv_actor_config *cfg, dv_actor **out);
/* Stop accepting (later posts answer DV_ESHUTDOWN), finish what was
 * posted, free every block, destroy the streams, join the thread.  Handles
 * still held answer DV_ESTALE.  The actor's memory stays valid, so threads
 * still posting get DV_ESHUTDOWN, until dv_actor_destroy.  A release made
 * while the shutdown runs may answer DV_OK or DV_ESTALE: its block is
 * freed either way, once.  For a
 * process-wide actor (dv_actor_get): it leaves the registry, and the next
 * dv_actor_get of its device builds a new one. */
DV_EXPORT int dv_actor_shutdown(dv_actor *actor);
/* Shut down (if not yet) and free the actor: no thread may use it after
 * (DV_OK for NULL).  Both answer DV_EDEADLK on a thread that serves an
 * actor (inside a task or a host function) and DV_EFORKED in a child on
 * its parent's actor, and then change nothing. */
DV_EXPORT int dv_actor_destroy(dv_actor *actor);
/* Drop everything of devactor's on the device and build it again: every
 * older handle answers DV_ESTALE, the memory statistics' current values
 * go to zero (totals, peaks and dv_actor_stats counters carry on), the
 * actor's memory goes back to the device, its streams, events and
 * modules are made again.  The CUDA context -- the device's primary
 * context, which cudart, cuBLAS, PyTorch and every other library of the
 * process share -- is kept, and so is their memory; devactor allocates
 * from a pool of its own, never the device's default pool.  (A sticky
 * fault is different: the context is already lost for every library, and
 * devactor's rebuild after one resets it.)  A transient failure on the
 * way (memory, a driver error that is not a fault) is tried again a few
 * times; if it persists, this actor alone is LOST (DV_EDEVICE_LOST, the
 * cause in its health), not the other devices. */
DV_EXPORT int dv_actor_reset(dv_actor *actor);
DV_EXPORT int dv_actor_device(const dv_actor *actor);
DV_EXPORT const char *dv_actor_backend_name(const dv_actor *actor);
/* Return once every message the calling thread posted to actor is
 * ordered (enqueued on its stream, not finished).  A round trip. */
DV_EXPORT int dv_flush(dv_actor *actor);

typedef enum dv_actor_state {
    DV_ACTOR_RUNNING = 1,
    DV_ACTOR_REBUILDING,
    DV_ACTOR_LOST, /* the driver refused to rebuild: restart the process
                    * (LOST through a shutdown too) */
    DV_ACTOR_STOPPING,
    DV_ACTOR_STOPPED,
} dv_actor_state;

typedef struct dv_actor_health {
    dv_actor_state state;
    uint64_t context_generation; /* starts at 1, +1 per rebuild, as soon as
                                  * it has dropped the old handles */
    uint32_t rebuilds;
    dv_error_detail first_fault; /* the first fault of the latest trouble (a fault
                                  * after a rebuild mended one replaces it);
                                  * status 0 when there was none */
} dv_actor_health;
/* The actor's health, from any thread, never waiting (size: ABI, above). */
DV_EXPORT int dv_actor_health_get_sized(const dv_actor *actor, dv_actor_health *out, size_t size);
#define dv_actor_health_get(actor, out) dv_actor_health_get_sized((actor), (out), sizeof(*(out)))

typedef struct dv_actor_stats {
    uint64_t messages, allocs, frees, copies, memsets, syncs, launches, failures;
    uint64_t tasks;             /* task callbacks run */
    uint64_t events;            /* event records */
    uint64_t bytes_outstanding; /* the resource stack's */
    uint64_t refs_alive;
    uint64_t batches; /* drains of the inbound queues */
    uint64_t hazards; /* ordering violations the checker found, and
                       * dv_task_launch's uses of handles the task did not
                       * declare so (refused, checker on or off) */
    uint32_t client_rings;
    uint32_t reserved;
    uint64_t check_pieces; /* memory ranges the checker keeps a history of */
    uint64_t check_bytes;  /* host memory the checker holds for them */
    /* Page-locked host memory. */
    uint64_t host_bytes;      /* handed out by dv_host_alloc, not yet freed */
    uint64_t host_peak;       /* the most host_bytes ever was */
    uint64_t host_buffers;    /* live dv_host_alloc buffers */
    uint64_t host_reserved;   /* page-locked by the actor: its pool and the staging */
    uint64_t host_registered; /* the caller's memory registered (dv_host_register) */
    /* Copies with pageable host memory. */
    uint64_t staged_copies, staged_bytes; /* moved through the staging */
    uint64_t staging_waits;               /* posters that waited for staging room */
    uint64_t direct_copies; /* done by the driver on the actor's thread (no staging) */
    uint64_t actor_cpu_ns;  /* CPU time the actor's thread has used */
    /* Physical memory the pool mapped into its address space and unmapped
     * again, one extent each (cuMemCreate + cuMemMap + cuMemSetAccess;
     * cuMemUnmap + cuMemRelease): tens of microseconds of the actor's
     * thread apiece on a GPU, where a pool allocation costs tens of
     * nanoseconds.  Growth maps; moving memory to where a request needs it
     * unmaps and maps. */
    uint64_t memory_maps, memory_unmaps;
    /* Calls into the driver so far, by every actor on this actor's
     * driver (dv_actor_get's actors share one per backend; an actor of
     * dv_actor_create has its own). */
    uint64_t driver_calls;
    /* Of memory_maps, the mappings of memory a move unmapped, mapped again
     * where the request needed it (cuMemMap + cuMemSetAccess; its unmap
     * was cuMemUnmap alone). */
    uint64_t memory_remaps;
} dv_actor_stats;
/* A snapshot, taken by the actor in its order (a message): it waits for
 * the device to reach frees queued before it, so bytes_outstanding counts
 * only memory still held. */
DV_EXPORT int dv_actor_stats_get_sized(dv_actor *actor, dv_actor_stats *out, size_t size);
#define dv_actor_stats_get(actor, out) dv_actor_stats_get_sized((actor), (out), sizeof(*(out)))

/* ------------------------------------------------------------------------
 * Memory: what it is, who holds it, and when
 *
 * Every allocation carries its tag and the posting thread's current query
 * (dv_query_set): a query executor sets the query a thread works for, and
 * the query's memory shows by its id in the statistics, the CSV log
 * (cfg.log_path: Thread names the posting thread, QueryId the query) and
 * snapshots; tools/dv-viz draws a log or a snapshot.
 * ------------------------------------------------------------------------ */

/* The calling thread's current query: the allocations it posts from now on
 * belong to query_id (0: none).  Returns the one it replaces.  Thread-local,
 * costs nothing to the actor. */
DV_EXPORT uint64_t dv_query_set(uint64_t query_id);
DV_EXPORT uint64_t dv_query_get(void);

/* current now, peak since the actor started or the last
 * dv_memory_reset_peaks, total ever added. */
typedef struct dv_memory_counter {
    uint64_t current, peak, total;
} dv_memory_counter;

typedef struct dv_memory_stats {
    dv_memory_counter bytes;    /* of live handles' blocks, as requested */
    dv_memory_counter blocks;   /* live handles */
    dv_memory_counter reserved; /* device memory the actor holds from the
                                 * driver (the pool's chunks included) */
    dv_memory_counter host;     /* page-locked bytes handed out by
                                 * dv_host_alloc */
    dv_memory_counter pinned;   /* page-locked bytes the actor holds: its
                                 * host pool and the staging of copies */
    uint64_t failures;          /* allocations refused */
    uint64_t tags, queries;     /* rows of dv_memory_usage_get now */
} dv_memory_stats;
/* In the actor's order (a message, like dv_actor_stats_get; size: ABI). */
DV_EXPORT int dv_memory_stats_get_sized(dv_actor *actor, dv_memory_stats *out, size_t size);
#define dv_memory_stats_get(actor, out) dv_memory_stats_get_sized((actor), (out), sizeof(*(out)))
/* Every peak (the actor's, each tag's and query's) becomes its current
 * value: the next peak is of what comes after. */
DV_EXPORT int dv_memory_reset_peaks(dv_actor *actor);

typedef enum dv_memory_key {
    DV_MEMORY_BY_TAG = 1,
    DV_MEMORY_BY_QUERY = 2,
} dv_memory_key;
typedef struct dv_memory_usage {
    const char *tag;   /* by tag: its name (lives for the process) */
    uint64_t query_id; /* by query: its id (0: allocations under no query) */
    dv_memory_counter bytes, blocks;
} dv_memory_usage;
/*
 * The actor's memory by tag or by query: up to cap rows into rows, most
 * bytes held first (then the highest peak); *count (may be NULL) says how
 * many there are, which may be more than cap.  A query whose memory was
 * all freed stays listed (its peak and total) among the 4096 most recently
 * finished; older ones are forgotten.  cap 0 (rows may be NULL) counts.
 */
DV_EXPORT int dv_memory_usage_get(dv_actor *actor, dv_memory_key by, dv_memory_usage *rows,
                                  size_t cap, size_t *count);
/*
 * Every live block, written to path as CSV (truncated; "-": standard
 * output), one row each:
 *
 *   Pointer,Size,Requested,Stream,Device,Tag,QueryId,Thread,Time,Age
 *
 * Size usable bytes, Requested what was asked for, Thread the kernel id of
 * the thread that posted the allocation, Time when (seconds since the
 * epoch), Age seconds since (both to a few milliseconds).  Taken in the
 * actor's order; written on the calling thread.  DV_EIO where the file
 * cannot be written.
 */
DV_EXPORT int dv_memory_snapshot(dv_actor *actor, const char *path);

/*
 * Allocate bytes ordered on stream; the handle holds one reference and is
 * usable at once (post-only: see dv_ref).  The call itself refuses only
 * what it can tell at once: a zero or absurd size, an unknown stream, a
 * NULL out, an actor shutting down or lost.  The tag is copied (interned:
 * the first 1024 distinct tags of the process keep their names, later
 * ones read "other").
 */
DV_EXPORT int dv_alloc(dv_actor *actor, uint64_t bytes, dv_stream stream, const char *tag,
                       dv_ref *out);
/* The same, with a future for the allocation's outcome (ordered = complete
 * = the memory assigned or refused); the handle is in *out (may be NULL)
 * and f->ref at once. */
DV_EXPORT int dv_alloc_async(dv_actor *actor, uint64_t bytes, dv_stream stream, const char *tag,
                             dv_ref *out, dv_future *f);
/*
 * Allocate and wait for the outcome; where the memory is not there (after
 * the arbitration of dv_oom_info), wait up to timeout_ns for another
 * client of the actor to release memory, and try again.  The handle in
 * *out only on success (DV_REF_NULL otherwise).  So that clients that all
 * wait for each other do not wait out their timeouts, a client that would
 * be the last of the actor's client threads to wait is refused at once
 * (the detail says so), and one waiting already once every client thread
 * left waits, other threads having exited (one of them: each looks every
 * 50 ms; a thread that exited counts while its messages are still to be
 * taken).  timeout_ns 0: no waiting for others, only the
 * arbitration.  Blocking, any thread but one that serves an actor (a
 * task, a host function, an oom function: DV_EDEADLK there); it returns
 * with the allocation complete, the handle usable at once.  DV_EINVAL
 * for a NULL actor or out, 0 or more than 2^48 bytes, an unknown stream;
 * DV_ESHUTDOWN after shutdown; DV_EDEVICE_OOM or DV_EOUT_OF_BUDGET still
 * refused at the timeout, or at once for the last waiter.
 */
DV_EXPORT int dv_alloc_wait(dv_actor *actor, uint64_t bytes, dv_stream stream, const char *tag,
                            uint64_t timeout_ns, dv_ref *out);
/*
 * Copies and sets, ordered on stream and fenced against every other
 * stream's use of the blocks.  Offsets and lengths are checked against the
 * blocks.  A host buffer must stay valid until the operation completes.
 * A device-to-device copy between two actors' blocks is a peer copy: the
 * source's actor fences the source first (every write ordered before the
 * copy is done), then the destination's actor copies.
 */
DV_EXPORT int dv_copy_htod(dv_actor *actor, dv_ref dst, uint64_t dst_offset, const void *src,
                           uint64_t bytes, dv_stream stream);
DV_EXPORT int dv_copy_htod_async(dv_actor *actor, dv_ref dst, uint64_t dst_offset, const void *src,
                                 uint64_t bytes, dv_stream stream, dv_future *f);
DV_EXPORT int dv_copy_dtoh(dv_actor *actor, void *dst, dv_ref src, uint64_t src_offset,
                           uint64_t bytes, dv_stream stream);
DV_EXPORT int dv_copy_dtoh_async(dv_actor *actor, void *dst, dv_ref src, uint64_t src_offset,
                                 uint64_t bytes, dv_stream stream, dv_future *f);
DV_EXPORT int dv_copy_dtod(dv_actor *actor, dv_ref dst, uint64_t dst_offset, dv_ref src,
                           uint64_t src_offset, uint64_t bytes, dv_stream stream);
DV_EXPORT int dv_copy_dtod_async(dv_actor *actor, dv_ref dst, uint64_t dst_offset, dv_ref src,
                                 uint64_t src_offset, uint64_t bytes, dv_stream stream,
                                 dv_future *f);
DV_EXPORT int dv_memset(dv_actor *actor, dv_ref dst, uint64_t offset, uint8_t value, uint64_t bytes,
                        dv_stream stream);
DV_EXPORT int dv_memset_async(dv_actor *actor, dv_ref dst, uint64_t offset, uint8_t value,
                              uint64_t bytes, dv_stream stream, dv_future *f);
/*
 * Host memory.  A copy between a block and host memory is fully
 * asynchronous on its stream when the host memory is page-locked: from
 * dv_host_alloc, or registered with dv_host_register.  Use such memory
 * for the buffers a program copies again and again.
 *
 * A copy with ordinary (pageable) memory is staged: the data goes through
 * page-locked staging chunks of the actor's (cfg.staging_bytes, in chunks
 * of cfg.staging_chunk_bytes), a few chunks per copy, in a pipeline.  The
 * actor only enqueues the copy's steps, never moves its bytes: for a
 * blocking copy the calling thread fills the chunks (host to device) or
 * empties them (device to host) while the device moves the others; for an
 * _async copy one of the actor's copy threads does (cfg.copy_threads).
 * The copy is one operation on its stream, ordered and complete like any
 * other (complete: the host buffer holds the data, or may be reused).
 * When every chunk is taken the poster waits for one (staging_waits in
 * the statistics), never the actor; one stream's copies hold at most
 * three quarters of the chunks (all but one below eight), so that work
 * queued on one stream does not hold up another's copies; on a thread
 * that serves an actor an _async copy answers DV_EAGAIN instead.  Where staging is unavailable
 * (it could not be page-locked) the driver copies on the actor's thread,
 * holding up the actor for the copy's length (direct_copies counts them).
 *
 * Page-locked memory survives dv_actor_reset: the actor pins it again in
 * the new context.  Blocking calls (DV_EDEADLK inside a task).
 */
/* A page-locked, device-mapped host buffer of at least bytes, from the
 * actor's pool (sizes are rounded to a class: 4 KiB .. 2 MiB by powers of
 * two, larger ones to 2 MiB), aligned to 4 KiB.  DV_EOUT_OF_BUDGET beyond
 * cfg.host_budget_bytes (the detail says requested and remaining),
 * DV_ENOMEM when the system refuses.  *out is NULL on failure. */
DV_EXPORT int dv_host_alloc(dv_actor *actor, uint64_t bytes, void **out);
/* Give a buffer of dv_host_alloc back.  It is handed out again only after
 * every copy that used it has finished.  DV_EINVAL for a pointer that is
 * not a live buffer's start (NULL, freed, or another actor's). */
DV_EXPORT int dv_host_free(dv_actor *actor, void *ptr);
/* Page-lock [ptr, ptr + bytes) of the caller's memory for this actor's
 * copies.  DV_EINVAL for NULL, zero bytes, or a range that overlaps one
 * registered or allocated already; the driver's own refusal otherwise. */
DV_EXPORT int dv_host_register(dv_actor *actor, void *ptr, uint64_t bytes);
/* Undo dv_host_register (ptr: the start given there).  Returns once the
 * copies that used the range have finished and it is unpinned; the memory
 * stays the caller's.  DV_EINVAL for an address that does not start a
 * registered range. */
DV_EXPORT int dv_host_unregister(dv_actor *actor, void *ptr);

/* Complete once everything ordered on stream before it has finished on
 * the device (every client's work on that stream).  To wait for one
 * operation, wait on its own future instead. */
DV_EXPORT int dv_sync(dv_actor *actor, dv_stream stream);
DV_EXPORT int dv_sync_async(dv_actor *actor, dv_stream stream, dv_future *f);

/* ------------------------------------------------------------------------
 * Events: a point on an actor's stream that other streams, of this actor
 * or another, and the host can wait for.
 *
 * An event belongs to the actor that made it.  dv_event_record captures
 * the work ordered on the stream before it (by the order rule above);
 * later records replace the captured point, as cudaEventRecord does.
 * Waits and queries name "the latest record posted before them" in the
 * same sense.  After a context rebuild an event recorded before it
 * answers DV_ESTALE until recorded again (its sync and query; a stream's
 * wait on it, post-only, waits for nothing, as for a record never made).
 * ------------------------------------------------------------------------ */

typedef struct dv_event dv_event;
#define DV_EVENT_TIMING 1u /* the event keeps a timestamp (dv_event_elapsed) */

/* flags: 0 or DV_EVENT_TIMING.  A round trip (the actor makes it). */
DV_EXPORT int dv_event_create(dv_actor *actor, uint32_t flags, dv_event **out);
/* Post-only.  Records and waits posted before still happen; the event
 * must not be used after. */
DV_EXPORT int dv_event_destroy(dv_event *event);
/* Post-only: capture the work ordered on stream so far. */
DV_EXPORT int dv_event_record(dv_event *event, dv_stream stream);
/* ordered: recorded; complete: the device reached the record. */
DV_EXPORT int dv_event_record_async(dv_event *event, dv_stream stream, dv_future *f);
/* Post-only: work ordered on actor's stream after this waits for the
 * event's latest record posted before this call.  The event may belong
 * to another actor (of the same driver): then the call first waits, on
 * the calling thread, until that record is ordered on the event's actor
 * (microseconds), so that it is the record waited for, and returns once
 * actor has taken the wait (a round trip), so that a record or destroy
 * of the event posted after it does not change what it waits for. */
DV_EXPORT int dv_stream_wait_event(dv_actor *actor, dv_stream stream, dv_event *event);
/* Block until the device reached the event's latest record posted
 * before (DV_OK at once for an event never recorded). */
DV_EXPORT int dv_event_sync(dv_event *event);
/* DV_OK when the device reached that record, DV_EAGAIN when not yet.  A
 * round trip to the actor; it does not wait for the device. */
DV_EXPORT int dv_event_query(dv_event *event);
/* Milliseconds between two timing events' records, both reached:
 * DV_EAGAIN when one is not reached yet, DV_EINVAL without
 * DV_EVENT_TIMING, of different actors, or for one never recorded.  A
 * round trip to the actor. */
DV_EXPORT int dv_event_elapsed(dv_event *start, dv_event *end, float *ms);
/* The driver's event (a CUevent) of the latest record that is ordered,
 * for interop (an Arrow device array's sync_event, a library's own
 * stream); NULL on the simulated device or before any record is ordered.
 * Valid until the event is recorded again, destroyed, or the context is
 * rebuilt. */
DV_EXPORT void *dv_event_native(dv_event *event);

/* ------------------------------------------------------------------------
 * Kernels and launches
 * ------------------------------------------------------------------------ */

typedef struct dv_dim3 {
    uint32_t x, y, z;
} dv_dim3;

/*
 * A kernel of an actor: by name from a module image (cubin, fatbin or
 * PTX; on the simulated device a dv_sim_image of host twins,
 * devactor_sim.h), or one of devactor's own kernels (tools/kernels) when
 * image is NULL.  The image must stay valid while the actor lives.  The
 * module is loaded on the actor; after a context rebuild it is loaded
 * again on first use, so a kernel handle stays valid for the actor's life
 * (the actor owns it).  A round trip.  DV_ENOKERNEL when the image has no
 * kernel of that name; DV_EINVAL (or the driver's error) for an image the
 * backend cannot load.  *out is NULL on failure.
 */
typedef struct dv_kernel dv_kernel;
DV_EXPORT int dv_kernel_get(dv_actor *actor, const void *image, size_t image_bytes,
                            const char *name, dv_kernel **out);

/* One kernel argument: a plain value, a handle with the access the kernel
 * makes (and a byte offset into the block), a raw device pointer
 * (untracked; refused unless the actor is permissive), or the bytes of a
 * value passed by value (a struct), read from the caller's memory until
 * the launch is ordered.
 *
 * A launch is checked against the kernel's parameters (on CUDA, the
 * driver's list of them; on the sim, the twin's): the count, and each
 * argument's size (a handle or a pointer is 8 bytes).  A mismatch answers
 * DV_EINVAL naming the argument, and nothing is enqueued. */
typedef enum dv_arg_kind { DV_ARG_VALUE = 0, DV_ARG_REF, DV_ARG_PTR, DV_ARG_BYTES } dv_arg_kind;
#define DV_ARG_MAX_BYTES 256 /* the largest by-value argument */
typedef enum dv_arg_access { DV_READ = 1, DV_WRITE = 2, DV_READ_WRITE = 3 } dv_arg_access;

typedef struct dv_arg {
    uint8_t kind;   /* dv_arg_kind */
    uint8_t access; /* dv_arg_access, for DV_ARG_REF and DV_ARG_PTR */
    uint16_t size;  /* bytes of a value (1, 2, 4, 8), or of DV_ARG_BYTES' */
    uint32_t reserved;
    uint64_t offset; /* into the block, for DV_ARG_REF */
    uint64_t bytes;  /* DV_ARG_REF, DV_ARG_PTR: the bytes the kernel touches
                      * from there (0: it may touch the whole block) */
    union {
        uint64_t value;
        dv_ref ref;
        uint64_t ptr;
        const void *bytes; /* DV_ARG_BYTES */
    } u;
} dv_arg;

#define DV_LAUNCH_MAX_ARGS 16

static inline dv_arg dv_arg_u32(uint32_t v)
{
    dv_arg a = {DV_ARG_VALUE, 0, 4, 0, 0, 0, {v}};
    return a;
}
static inline dv_arg dv_arg_u64(uint64_t v)
{
    dv_arg a = {DV_ARG_VALUE, 0, 8, 0, 0, 0, {v}};
    return a;
}
static inline dv_arg dv_arg_i32(int32_t v)
{
    return dv_arg_u32((uint32_t)v);
}
static inline dv_arg dv_arg_i64(int64_t v)
{
    return dv_arg_u64((uint64_t)v);
}
static inline dv_arg dv_arg_u8(uint8_t v)
{
    dv_arg a = {DV_ARG_VALUE, 0, 1, 0, 0, 0, {v}};
    return a;
}
static inline dv_arg dv_arg_u16(uint16_t v)
{
    dv_arg a = {DV_ARG_VALUE, 0, 2, 0, 0, 0, {v}};
    return a;
}
static inline dv_arg dv_arg_f32(float v)
{
    union {
        float f;
        uint32_t u;
    } b;
    b.f = v;
    return dv_arg_u32(b.u);
}
static inline dv_arg dv_arg_f64(double v)
{
    union {
        double f;
        uint64_t u;
    } b;
    b.f = v;
    return dv_arg_u64(b.u);
}
/* A value passed by value from the caller's memory (a struct of up to
 * DV_ARG_MAX_BYTES); it must stay valid until the launch is ordered. */
static inline dv_arg dv_arg_bytes(const void *value, uint16_t size)
{
    dv_arg a = {DV_ARG_BYTES, 0, size, 0, 0, 0, {0}};
    a.u.bytes = value;
    return a;
}
static inline dv_arg dv_arg_ref(dv_ref r, dv_arg_access access, uint64_t offset)
{
    dv_arg a = {DV_ARG_REF, (uint8_t)access, 8, 0, offset, 0, {r.bits}};
    return a;
}
static inline dv_arg dv_arg_ptr(uint64_t device_ptr)
{
    dv_arg a = {DV_ARG_PTR, 0, 8, 0, 0, 0, {device_ptr}};
    return a;
}
/* A raw pointer with the access the kernel makes: nothing fences it, but
 * the stream-order checker checks it (a raw pointer without an access
 * counts as read-write there). */
static inline dv_arg dv_arg_ptr_access(uint64_t device_ptr, dv_arg_access access)
{
    dv_arg a = {DV_ARG_PTR, (uint8_t)access, 8, 0, 0, 0, {device_ptr}};
    return a;
}
/* The same, saying which bytes the kernel touches: [offset, offset +
 * bytes) of the block, or [device_ptr, device_ptr + bytes).  The checker
 * then checks that range alone, so kernels working on disjoint parts of
 * one block do not conflict.  A handle is still fenced as a whole (the
 * recorder's unit is the block); a range outside the block answers
 * DV_EINVAL. */
static inline dv_arg dv_arg_ref_range(dv_ref r, dv_arg_access access, uint64_t offset,
                                      uint64_t bytes)
{
    dv_arg a = {DV_ARG_REF, (uint8_t)access, 8, 0, offset, bytes, {r.bits}};
    return a;
}
static inline dv_arg dv_arg_ptr_range(uint64_t device_ptr, dv_arg_access access, uint64_t bytes)
{
    dv_arg a = {DV_ARG_PTR, (uint8_t)access, 8, 0, 0, bytes, {device_ptr}};
    return a;
}

/*
 * Launch kernel on stream.  Every handle is validated first (stale,
 * released, another device's, an offset outside the block): on any error
 * nothing is enqueued.  A block named twice gets the strongest access
 * (read + write = read-write).  Then each block's use is prepared (waits
 * on other streams' writes, and for writes on their reads), the kernel is
 * enqueued, and each use is finished.  The blocking form returns once the
 * kernel finished; the async form's args must stay valid until ordered.
 * The kernel must be one of this actor's (dv_kernel_get on it).
 */
DV_EXPORT int dv_launch(dv_actor *actor, dv_kernel *kernel, dv_dim3 grid, dv_dim3 block,
                        uint32_t shared_bytes, dv_stream stream, const dv_arg *args,
                        unsigned nargs);
DV_EXPORT int dv_launch_async(dv_actor *actor, dv_kernel *kernel, dv_dim3 grid, dv_dim3 block,
                              uint32_t shared_bytes, dv_stream stream, const dv_arg *args,
                              unsigned nargs, dv_future *f);

/* ------------------------------------------------------------------------
 * Tasks: library calls on the actor's thread
 * ------------------------------------------------------------------------ */

/*
 * What a task sees.  It runs on the actor's thread with the device's
 * context current, after every handle argument was fenced for its access
 * on `stream`, and before the uses are recorded: the work it enqueues on
 * native_stream (cuBLAS, cuFFT, NCCL...) is ordered like a launch.  A
 * call that would wait answers DV_EDEADLK inside a task (Threads, above);
 * post-only and _async calls are fine, and a full queue answers DV_EAGAIN
 * there instead of waiting for room.  A task's non-zero return (a
 * dv_status; DV_EINVAL stands for any other value) is the call's status,
 * with a detail of its own (the failure of a devactor call it made, or
 * "task: its function answered ...").
 */
typedef struct dv_task_ctx {
    dv_actor *actor;
    int device;
    dv_stream stream;
    void *native_stream; /* the CUstream (cuda; with the checker on, a stream
                          * capturing the task's work to verify it, which
                          * runs on the task's stream when it matches);
                          * NULL on the simulated device */
    bool simulated;      /* the sim: enqueue host work with dv_task_host_fn */
    unsigned nargs;
    uint64_t arg[DV_LAUNCH_MAX_ARGS]; /* each argument resolved: a handle's
                                       * device address (plus offset), a value
                                       * or a pointer */
    void *internal;
    uint64_t context_generation; /* the actor's context (dv_actor_health):
                                  * library state made in an older one is
                                  * stale: make it again */
    uint64_t driver_context;     /* the CUDA context's own instance: changes
                                  * only when a fault made devactor reset the
                                  * context.  State made under an older one
                                  * is gone with it (forget it); made under
                                  * this one in an older generation (after
                                  * dv_actor_reset, which keeps the context)
                                  * it still holds memory: destroy it */
} dv_task_ctx;

typedef int (*dv_task_fn)(const dv_task_ctx *ctx, void *user);

/* Run fn on the actor with args validated and fenced (as dv_launch does);
 * its return value is the call's.  The blocking form returns once the
 * device finished the work the task enqueued on its stream; the async
 * form's args must stay valid until ordered. */
DV_EXPORT int dv_task(dv_actor *actor, dv_task_fn fn, void *user, dv_stream stream,
                      const dv_arg *args, unsigned nargs);
DV_EXPORT int dv_task_async(dv_actor *actor, dv_task_fn fn, void *user, dv_stream stream,
                            const dv_arg *args, unsigned nargs, dv_future *f);
/*
 * Inside a task: launch kernel on the task's stream.  Handles are resolved
 * (device address plus offset) but not fenced again: the task's own
 * arguments were, so a handle must be one of them, its range within the
 * declared one and its access granted (else DV_EHAZARD, checker on or
 * off).  Raw pointers pass on a strict actor too.  With the checker on,
 * every access is checked like a launch's, and a raw pointer into a live
 * block must land in what the task declared (or its scratch) with the
 * access it names, as every touch of the task's work must.  A hazard
 * answers DV_EHAZARD, enqueues nothing, and the task's call answers
 * DV_EHAZARD.
 */
DV_EXPORT int dv_task_launch(const dv_task_ctx *ctx, dv_kernel *kernel, dv_dim3 grid, dv_dim3 block,
                             uint32_t shared_bytes, const dv_arg *args, unsigned nargs);
/*
 * Inside a task: run fn(arg) on the host when the stream gets there.  It
 * runs on a thread of the driver, which must not wait: a blocking devactor
 * call there answers DV_EDEADLK, and CUDA calls are not allowed (as for
 * cuLaunchHostFunc).  When the stream never gets there (a sticky fault,
 * a reset, a shutdown after a fault), fn does not run.
 */
DV_EXPORT int dv_task_host_fn(const dv_task_ctx *ctx, void (*fn)(void *), void *arg);
/*
 * The same with a cleanup that runs exactly once either way: right after
 * fn (cleanup(arg, DV_OK), on the driver's thread), or, when the stream
 * never gets there, alone with the reason (DV_ECONTEXT_LOST,
 * DV_EDEVICE_LOST), on the actor's thread once the driver can no longer
 * run fn.  fn may be NULL (cleanup only: a host-side free in stream order).
 * DV_EINVAL outside a task or without a cleanup (dv_task_host_fn: without
 * fn); the driver's error when it cannot enqueue it (then nothing runs,
 * not even the cleanup: arg is still the caller's).
 */
DV_EXPORT int dv_task_host_fn_cleanup(const dv_task_ctx *ctx, void (*fn)(void *),
                                      void (*cleanup)(void *arg, int status), void *arg);
/*
 * Inside a task: bytes of device memory (a workspace) on the task's
 * stream, from the actor's pool; *ptr its device address.  It is released
 * when the task's function returns, in stream order: the memory is reused
 * only after the work the task enqueued on its stream.  At most
 * DV_TASK_SCRATCH_MAX per task.  Not a handle: untracked, like a raw
 * pointer (pass it to dv_task_launch with dv_arg_ptr).  DV_EINVAL outside
 * a task, for 0 or absurd bytes, or past the maximum; the pool's own
 * errors (DV_EDEVICE_OOM, DV_EOUT_OF_BUDGET) when it has no room.
 */
#define DV_TASK_SCRATCH_MAX 8
DV_EXPORT int dv_task_scratch(const dv_task_ctx *ctx, uint64_t bytes, uint64_t *ptr);
/*
 * Inside a task on the simulated device: the host address of device memory
 * [ptr, ptr + bytes), for a host function standing in for a library call
 * (dv_task_host_fn), which reaches device memory only this way.  access
 * says what that function will do with the bytes.  With the checker on,
 * it is verified against the task's declared arguments (their ranges and
 * accesses) and its scratch: an access the task did not declare, or a
 * write of bytes it declared DV_READ, answers NULL with DV_EHAZARD, counted,
 * and the task's call answers DV_EHAZARD.  NULL with DV_EINVAL outside a
 * task, on cuda, for a bad access, or for a range outside device memory.
 */
/*
 * Inside a task, with the checker on: the parameters of the kernels this
 * task enqueues are not read for pointers (its copies and memsets are
 * still checked by range).  For a library whose kernels' argument buffers
 * carry stale words of earlier calls -- cuFFT's and cuBLAS's do, pointers
 * to other calls' buffers among them -- which would be reported as touches
 * of blocks the task did not declare.  The wrapper then answers for its
 * kernels staying inside what it declared (devactor_fft.h and
 * devactor_blas.h check every operand's extent before posting).  DV_EINVAL
 * outside a task.
 */
DV_EXPORT int dv_task_kernel_args_opaque(const dv_task_ctx *ctx);
DV_EXPORT void *dv_task_sim_access(const dv_task_ctx *ctx, uint64_t ptr, uint64_t bytes,
                                   dv_arg_access access);

/* ------------------------------------------------------------------------
 * The stream-order checker (debug; dv_actor_config.check_order or
 * DV_CHECK_ORDER=1)
 *
 * A happens-before race detector.  Each stream and each client thread has
 * a vector clock.  Only the program's own synchronisation orders two
 * operations: stream order; event records and waits (devactor's own
 * fences for handles, and dv_event's); a thread's wait on a future, a
 * stream sync, an event sync or an event query that answered DV_OK (the
 * thread learns everything that operation's stream had reached, and what
 * that stream had itself waited for; an allocation's future teaches
 * nothing: the memory assigned is not a point the stream has reached);
 * and a hand-over between threads
 * (dv_order_export, dv_order_adopt).  An operation is ordered after what
 * its posting thread knew when it posted it.  That the device happened to
 * finish something orders nothing: the same program gets the same verdict
 * however fast the device runs.  A thread's knowledge belongs to one
 * context of the actor: after a rebuild it covers nothing new.
 *
 * Each access the actor makes or is told of (handles, raw pointers, task
 * launches, copies, memsets, the host buffers of copies) is checked per
 * byte range against the last write and outstanding reads of those bytes,
 * and each free and reuse of memory against every earlier access.  A
 * pointer or handle argument without a length (dv_arg_ptr_range,
 * dv_arg_ref_range) covers its whole block.  A violation answers
 * DV_EHAZARD naming both operations (kind, stream, tag, number on its
 * stream, poster), enqueues nothing, and is counted in
 * dv_actor_stats.hazards.  A free that races is still made (and counted).
 * A raw pointer into freed memory is a use after free, ordered or not,
 * named with the freed block's tag and generation; so is one into memory
 * handed out again as a block whose own address no client was given yet
 * (by dv_ref_access, or as a task's resolved argument).
 *
 * A task is verified against its declared arguments (ranges, accesses;
 * its scratch needs none).  On cuda, with the checker on, the task's
 * native_stream is a capture stream: what it enqueues there is captured
 * into a graph whose nodes are checked before it runs on the task's
 * stream (copies and memsets by exact range, a kernel by the pointers
 * among its parameters into live blocks); work put on another stream's
 * native stream is caught too.  A mismatch answers DV_EHAZARD and none of
 * the task's work runs (its host functions' cleanups run with
 * DV_EHAZARD).  On the sim, dv_task_sim_access is checked the same way,
 * but the sim captures nothing: the access is refused (NULL) and the task
 * answers DV_EHAZARD, while what the task enqueued before it (a host
 * function, a dv_task_launch) has run.  A task must then not synchronise or query its native_stream.  A peer
 * copy is checked on both actors (the source's read, the destination's
 * write).
 *
 * What it cannot see: whether a library kernel writes or only reads a
 * block it has a pointer to (a kernel writing a block declared DV_READ is
 * not caught on cuda); a kernel that computes addresses from data it
 * reads, or finds pointers in memory; work on a stream devactor does not
 * own; the host memory a library copies.  A raw write ordered before a
 * peer copy only by a dv_event waited on the destination's stream is
 * reported (the source's read is checked with the poster's knowledge).
 * ------------------------------------------------------------------------ */

/*
 * The host is about to read (DV_READ) or write (DV_WRITE) a host buffer:
 * DV_EHAZARD when a copy to or from it is not ordered before this thread
 * (above: the thread waited for the copy, for something ordered after it,
 * or adopted the knowledge of a thread that had).  The same rule checks
 * the host side of copies.  DV_OK at once when the checker is off (a
 * NULL actor or buffer is DV_EINVAL all the same).
 */
DV_EXPORT int dv_check_host_access(dv_actor *actor, const void *ptr, uint64_t bytes,
                                   dv_arg_access access);
/* The latest hazard's detail (status 0 when there was none). */
DV_EXPORT int dv_actor_last_hazard(dv_actor *actor, dv_error_detail *out);

/*
 * Handing order over between threads.  The checker sees a thread's own
 * waits, not the program's mutexes, queues and joins.  A thread that
 * passes work or a buffer to another through them says so: the first
 * exports what it knows of the actor (everything it waited for, and what
 * that had waited for), the token travels with the work, and the second
 * adopts it.  From then on the second is ordered after everything the
 * first had waited for when it exported.  Neither call waits for the
 * actor; both work on any thread.  With the checker off the token is
 * empty and adopting it does nothing.
 *
 * dv_order_adopt: DV_EINVAL for a NULL argument or a token of another
 * actor (or of more than DV_ORDER_STREAMS streams); DV_ESTALE, and
 * nothing learned, for a token of a context since rebuilt (dv_actor_reset).
 */
#define DV_ORDER_STREAMS 64
typedef struct dv_order_token {
    uint64_t actor;   /* whose (the actor's identity) */
    uint64_t context; /* its context generation */
    uint32_t streams; /* clock's length (0: nothing known) */
    uint32_t reserved;
    uint64_t clock[DV_ORDER_STREAMS];
} dv_order_token;
DV_EXPORT int dv_order_export(dv_actor *actor, dv_order_token *out);
DV_EXPORT int dv_order_adopt(dv_actor *actor, const dv_order_token *token);

#ifdef __cplusplus
}
#endif

#endif /* DEVACTOR_H */
