/*
 * The device port: the narrow set of driver calls devactor needs, behind one
 * ops table with two backends.
 *
 *   cuda  real CUDA Driver API, libcuda.so.1 opened with dlopen and resolved
 *         with cuGetProcAddress; answers DV_ENODEVICE where there is no
 *         driver or no device.
 *   sim   a simulated device in host memory (see sim.h): every stream runs
 *         its queue in order on its own worker thread, streams run
 *         concurrently, optional seeded random delays, fault injection.
 *
 * Design
 * ------
 * Backends implement dv_driver_ops and return raw driver codes (CUresult
 * numbering; the sim uses the same numbers).  Callers never call the ops
 * directly: they call the dv_drv_* wrappers declared below, which
 *
 *   1. validate arguments the same way for both backends (NULL or dead
 *      handles, handles of another driver or context, zero or absurd sizes)
 *      and answer DV_EINVAL without reaching the backend;
 *   2. call the op;
 *   3. map a non-zero driver code to a dv_status through one table
 *      (dv__status_from_driver) and fill the calling thread's
 *      dv_error_detail with the raw code, its name and the call.
 *
 * So both backends give the same status for the same mistake, and the
 * contract below is written once, on the wrappers.
 *
 * Handles
 * -------
 * Contexts, streams, events, modules and functions are opaque pointers to
 * backend objects that start with a dv_drv_obj header.  Objects come from a
 * per-driver pool and are never returned to the system while the driver is
 * open: a destroyed handle keeps its memory, its magic reads DEAD, and the
 * wrappers answer DV_EINVAL for it instead of touching freed memory.  (A
 * destroyed handle's memory may be reused by a later object of the same
 * kind; from then on the old pointer names the new object.)
 *
 * Threads
 * -------
 * The port is thread-safe across devices.  For one device, object lifetime
 * calls (create/destroy, ctx_reset) are made by one thread at a time — the
 * device's actor; enqueue calls on distinct streams may come from several.
 * The cuda backend makes the right context current on the calling thread
 * when a call needs one.
 */
#ifndef DV_DRIVER_PORT_H
#define DV_DRIVER_PORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* A device address.  0 is never a valid allocation. */
typedef uint64_t dv_dptr;

/* Largest byte count any single call accepts (256 TiB); above: DV_EINVAL. */
#define DV_DRV_MAX_BYTES (UINT64_C(1) << 48)
/* Most devices a driver reports. */
#define DV_DRV_MAX_DEVICES 64

typedef struct dv_driver dv_driver;
typedef struct dv_drv_ctx dv_drv_ctx;
typedef struct dv_drv_stream dv_drv_stream;
typedef struct dv_drv_event dv_drv_event;
typedef struct dv_drv_module dv_drv_module;
typedef struct dv_drv_func dv_drv_func;

typedef void (*dv_host_fn)(void *arg);

/* dv_dim3 is public (devactor.h). */

/* dv_backend is public (devactor.h). */

typedef struct dv_device_info {
    int ordinal;
    char name[128];
    uint64_t total_bytes;
    int cc_major, cc_minor; /* compute capability; the sim reports 9.0 */
    int multiprocessors;
} dv_device_info;

/* Settings of the simulated device; ignored by the cuda backend. */
typedef struct dv_sim_config {
    int devices;           /* simulated devices; 0 means 1 */
    uint64_t memory_bytes; /* per device; 0 means 1 GiB */
    uint64_t seed;         /* seeds delays and random faults */
    uint32_t delay_max_us; /* random delay before each stream op, 0 = off */
    /* Fault injection (see sim.h for calls that arm faults at run time). */
    uint64_t fail_alloc_nth; /* the Nth allocation (1-based) fails with OOM */
    double fail_alloc_rate;  /* each allocation fails with this probability */
    int slow_stream;         /* creation index (per device) of a slow stream; -1 none */
    uint32_t slow_stream_us; /* extra delay before each op of that stream */
    /* A kernel fault (illegal address) poisons only its device, until
     * ctx_reset, instead of the whole driver for good. */
    bool kernel_faults_recoverable;
} dv_sim_config;

typedef struct dv_driver_config {
    dv_backend backend;
    /* Release threshold set on each context's own stream-ordered pool
     * when it is made (cuda).  0 means UINT64_MAX: keep freed
     * memory in the pool instead of returning it at every sync. */
    uint64_t pool_release_threshold;
    dv_sim_config sim;
} dv_driver_config;

/* Default values for every field (backend AUTO, sim defaults, no faults). */
void dv__driver_config_init(dv_driver_config *cfg);

/*
 * Open a driver.  AUTO picks the DV_BACKEND environment variable ("cuda" or
 * "sim") when set, else cuda when a device answers, else sim.
 * An explicit cuda without driver or device: DV_ENODEVICE, and the detail's
 * message says why ("libcuda.so.1 not found", "no CUDA device", ...).
 */
int dv__driver_open(const dv_driver_config *cfg, dv_driver **out);
/* Close a driver; every object it made must be gone or is reclaimed. */
void dv__driver_close(dv_driver *drv);
/* "cuda" or "sim". */
const char *dv__driver_backend_name(const dv_driver *drv);
dv_backend dv__driver_backend(const dv_driver *drv);

/* The X-macro of port calls: names for error detail and fault injection. */
#define DV_DRV_CALLS(X)                                                                            \
    X(DEVICE_COUNT, "device_count")                                                                \
    X(DEVICE_INFO, "device_info")                                                                  \
    X(MEM_INFO, "mem_info")                                                                        \
    X(CTX_RETAIN, "ctx_retain")                                                                    \
    X(CTX_RELEASE, "ctx_release")                                                                  \
    X(CTX_RESET, "ctx_reset")                                                                      \
    X(STREAM_CREATE, "stream_create")                                                              \
    X(STREAM_DESTROY, "stream_destroy")                                                            \
    X(STREAM_SYNC, "stream_sync")                                                                  \
    X(STREAM_QUERY, "stream_query")                                                                \
    X(EVENT_CREATE, "event_create")                                                                \
    X(EVENT_DESTROY, "event_destroy")                                                              \
    X(EVENT_RECORD, "event_record")                                                                \
    X(EVENT_QUERY, "event_query")                                                                  \
    X(EVENT_SYNC, "event_sync")                                                                    \
    X(EVENT_ELAPSED, "event_elapsed")                                                              \
    X(STREAM_WAIT_EVENT, "stream_wait_event")                                                      \
    X(MEM_ALLOC, "mem_alloc")                                                                      \
    X(MEM_FREE, "mem_free")                                                                        \
    X(MEM_ALLOC_ASYNC, "mem_alloc_async")                                                          \
    X(MEM_FREE_ASYNC, "mem_free_async")                                                            \
    X(POOL_SET_THRESHOLD, "pool_set_release_threshold")                                            \
    X(POOL_GET_THRESHOLD, "pool_get_release_threshold")                                            \
    X(POOL_TRIM, "pool_trim")                                                                      \
    X(VMM_GRANULARITY, "vmm_granularity")                                                          \
    X(VA_RESERVE, "va_reserve")                                                                    \
    X(VA_RELEASE, "va_release")                                                                    \
    X(MEM_MAP, "mem_map")                                                                          \
    X(MEM_UNMAP, "mem_unmap")                                                                      \
    X(MEMCPY_HTOD, "memcpy_htod_async")                                                            \
    X(MEMCPY_DTOH, "memcpy_dtoh_async")                                                            \
    X(MEMCPY_DTOD, "memcpy_dtod_async")                                                            \
    X(MEMCPY_PEER, "memcpy_peer_async")                                                            \
    X(MEMSET_D8, "memset_d8_async")                                                                \
    X(MEMSET_D32, "memset_d32_async")                                                              \
    X(MODULE_LOAD, "module_load")                                                                  \
    X(MODULE_UNLOAD, "module_unload")                                                              \
    X(FUNC_GET, "func_get")                                                                        \
    X(LAUNCH, "launch")                                                                            \
    X(HOST_FN, "launch_host_fn")                                                                  \
    X(HOST_REGISTER, "host_register")                                                              \
    X(HOST_UNREGISTER, "host_unregister")                                                          \
    X(HOST_DPTR, "host_device_pointer")                                                            \
    X(VALUE_OPS, "batch_mem_op")                                                                   \
    X(MEM_UNMAP_KEEP, "mem_unmap_keep")                                                            \
    X(MEM_REMAP, "mem_remap")                                                                      \
    X(MEM_RELEASE, "mem_release")

typedef enum dv_drv_call {
#define DV__DRV_CALL_ENUM(id, name) DV_CALL_##id,
    DV_DRV_CALLS(DV__DRV_CALL_ENUM)
#undef DV__DRV_CALL_ENUM
        DV_CALL__COUNT
} dv_drv_call;

const char *dv__drv_call_name(dv_drv_call call);

/* ------------------------------------------------------------------------
 * The wrappers.  Every one returns 0 or a negative dv_status and, on
 * failure, fills dv_last_error() with the call's name and the raw code.
 * ------------------------------------------------------------------------ */

int dv__drv_device_count(dv_driver *drv, int *count);
int dv__drv_device_info(dv_driver *drv, int ordinal, dv_device_info *info);

/* Primary context of a device, retained.  The sim answers DV_ECONTEXT_LOST
 * after a process-fatal poison, like the real driver after a sticky fault. */
int dv__drv_ctx_retain(dv_driver *drv, int ordinal, dv_drv_ctx **ctx);
int dv__drv_ctx_release(dv_drv_ctx *ctx);
/*
 * Reset the device's primary context: every stream, event, module,
 * function and allocation made in it is gone (their handles read DEAD and
 * answer DV_EINVAL).  The context handle itself stays retained and usable.
 * Clears a recoverable poison; after a process-fatal one it "succeeds" but
 * later calls still fail, as on the real driver.
 */
int dv__drv_ctx_reset(dv_drv_ctx *ctx);
int dv__drv_ctx_device(const dv_drv_ctx *ctx); /* ordinal, -1 if not a ctx */
/* Free and total device memory. */
int dv__drv_mem_info(dv_drv_ctx *ctx, uint64_t *free_bytes, uint64_t *total_bytes);

/* Streams are always non-blocking (never synchronise with the legacy
 * NULL stream). */
int dv__drv_stream_create(dv_drv_ctx *ctx, dv_drv_stream **stream);
/* Work already enqueued still runs; the handle is dead at once. */
int dv__drv_stream_destroy(dv_drv_stream *stream);
int dv__drv_stream_sync(dv_drv_stream *stream);
/* *done = true when every op enqueued so far has finished. */
int dv__drv_stream_query(dv_drv_stream *stream, bool *done);

/* flags: 0, or DV_DRV_EVENT_TIMING for an event that keeps the time its
 * record was reached (dv__drv_event_elapsed); without it an event is a
 * plain completion marker, cheaper to record. */
#define DV_DRV_EVENT_TIMING 1u
int dv__drv_event_create(dv_drv_ctx *ctx, uint32_t flags, dv_drv_event **event);
/* Milliseconds from start's record to end's, both reached (DV_EAGAIN:
 * not yet), both timing events of one context. */
int dv__drv_event_elapsed(dv_drv_event *start, dv_drv_event *end, float *ms);
/* The backend's own handle of an event (a CUevent), NULL on the sim or
 * for a dead handle. */
void *dv__drv_event_native(dv_drv_event *event);
int dv__drv_event_destroy(dv_drv_event *event);
/* Capture the work enqueued on stream so far.  Event and stream must
 * belong to the same context. */
int dv__drv_event_record(dv_drv_event *event, dv_drv_stream *stream);
/* *done = true when the captured work has finished (or never recorded). */
int dv__drv_event_query(dv_drv_event *event, bool *done);
int dv__drv_event_sync(dv_drv_event *event);
/* Later work on stream waits for the event's captured work.  Works across
 * contexts of the same driver. */
int dv__drv_stream_wait_event(dv_drv_stream *stream, dv_drv_event *event);

/* Synchronous allocation: usable on every stream at once.  mem_free waits
 * for the device's outstanding work first (as the real driver does). */
int dv__drv_mem_alloc(dv_drv_ctx *ctx, uint64_t bytes, dv_dptr *dptr);
int dv__drv_mem_free(dv_drv_ctx *ctx, dv_dptr dptr);
/* Stream-ordered allocation from the context's own pool (made with the
 * context, never the device's default pool, which belongs to every
 * cudaMallocAsync user of the process).  The memory is
 * usable in stream order on stream; after free_async it is reusable only
 * once stream reaches the free. */
int dv__drv_mem_alloc_async(dv_drv_stream *stream, uint64_t bytes, dv_dptr *dptr);
int dv__drv_mem_free_async(dv_drv_stream *stream, dv_dptr dptr);
/* Release threshold of the context's pool. */
int dv__drv_pool_set_release_threshold(dv_drv_ctx *ctx, uint64_t bytes);
int dv__drv_pool_get_release_threshold(dv_drv_ctx *ctx, uint64_t *bytes);
/* Give the device back what the pool holds unused, beyond keep_bytes
 * (cuMemPoolTrimTo); memory of frees not yet reached stays. */
int dv__drv_pool_trim(dv_drv_ctx *ctx, uint64_t keep_bytes);

/*
 * Virtual memory: address space reserved once, physical memory mapped into
 * it and unmapped again in multiples of the granularity.  Mapped memory is
 * usable on every stream at once; unmapping is immediate, so the caller
 * makes sure the device is done with the range first.  A device without
 * it answers DV_ENOTSUP from vmm_granularity.  handle: the backend's token
 * for a mapping, given back to unmap it (whole: a mapping is unmapped as
 * it was made).  The sim keeps its reservations apart from the memory
 * mem_alloc hands out, and counts mapped bytes as allocated.
 */
int dv__drv_vmm_granularity(dv_drv_ctx *ctx, uint64_t *bytes);
int dv__drv_va_reserve(dv_drv_ctx *ctx, uint64_t bytes, dv_dptr *va);
int dv__drv_va_release(dv_drv_ctx *ctx, dv_dptr va, uint64_t bytes);
int dv__drv_mem_map(dv_drv_ctx *ctx, dv_dptr va, uint64_t bytes, uint64_t *handle);
int dv__drv_mem_unmap(dv_drv_ctx *ctx, dv_dptr va, uint64_t bytes, uint64_t handle);
/* Physical memory apart from its addresses: mem_unmap_keep unmaps one
 * mapping and keeps its physical memory (still the device's, still
 * counted); mem_remap maps memory mem_map made, all of it (bytes as when
 * it was made: the driver maps from offset zero only), at va as well (va
 * a multiple of the granularity), readable and writable, whether it is
 * mapped elsewhere still (an alias: the same bytes at two addresses) or
 * nowhere; an unmap takes a whole mapping, as it was made or remapped;
 * mem_release gives the memory back once it is mapped nowhere (at once if
 * it is already). */
int dv__drv_mem_unmap_keep(dv_drv_ctx *ctx, dv_dptr va, uint64_t bytes, uint64_t handle);
int dv__drv_mem_remap(dv_drv_ctx *ctx, dv_dptr va, uint64_t bytes, uint64_t handle);
int dv__drv_mem_release(dv_drv_ctx *ctx, uint64_t handle);

/* Asynchronous copies and sets, ordered on stream.  Host buffers are read
 * or written when the stream reaches the op, not at the call. */
int dv__drv_memcpy_htod(dv_drv_stream *stream, dv_dptr dst, const void *src, uint64_t bytes);
int dv__drv_memcpy_dtoh(dv_drv_stream *stream, void *dst, dv_dptr src, uint64_t bytes);
int dv__drv_memcpy_dtod(dv_drv_stream *stream, dv_dptr dst, dv_dptr src, uint64_t bytes);
/* Copy between devices; stream may belong to either context. */
int dv__drv_memcpy_peer(dv_drv_stream *stream, dv_drv_ctx *dst_ctx, dv_dptr dst,
                        dv_drv_ctx *src_ctx, dv_dptr src, uint64_t bytes);
int dv__drv_memset_d8(dv_drv_stream *stream, dv_dptr dst, uint8_t value, uint64_t count);
int dv__drv_memset_d32(dv_drv_stream *stream, dv_dptr dst, uint32_t value, uint64_t count);

/*
 * Modules.  image is a cubin, fatbin or PTX (cuda); the sim accepts the same
 * images and resolves function names against its kernel registry, so one
 * image works on both.  dv__drv_builtin_image() is the image of devactor's
 * own kernels (tools/kernels): the embedded fatbin, or a sim image where
 * the build had no nvcc.
 */
int dv__drv_module_load(dv_drv_ctx *ctx, const void *image, size_t image_bytes,
                        dv_drv_module **module);
int dv__drv_module_unload(dv_drv_module *module);
int dv__drv_func_get(dv_drv_module *module, const char *name, dv_drv_func **func);
/* The function's parameters: their count, and the size of each of the
 * first max.  DV_ENOTSUP where the driver cannot tell (older than CUDA
 * 12.4): then launches are not checked. */
int dv__drv_func_params(dv_drv_func *func, uint16_t *bytes, unsigned max, unsigned *count);
void dv__drv_builtin_image(const dv_driver *drv, const void **image, size_t *bytes);

/* params: an array of pointers to the argument values, as cuLaunchKernel. */
int dv__drv_launch(dv_drv_func *func, dv_dim3 grid, dv_dim3 block, uint32_t shared_bytes,
                   dv_drv_stream *stream, void **params);
/* fn runs once the stream reaches this point; it must not call the port. */
int dv__drv_launch_host_fn(dv_drv_stream *stream, dv_host_fn fn, void *arg);

/*
 * Page-locked host memory.  host_register pins [p, p + bytes) of the
 * caller's memory and maps it for the device (every context of the
 * driver); copies to and from it are asynchronous on their stream.  The
 * registration belongs to ctx: a reset of ctx drops it (the memory stays
 * the caller's, unpinned), and the same range may then be registered
 * again.  Registering a range that overlaps a registered one answers
 * DV_EINVAL (CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED), unregistering
 * an address that does not start one DV_EINVAL too.
 */
int dv__drv_host_register(dv_drv_ctx *ctx, void *p, uint64_t bytes);
int dv__drv_host_unregister(dv_drv_ctx *ctx, void *p);
/* The device address of registered host memory (for stream memory
 * operations). */
int dv__drv_host_dptr(dv_drv_ctx *ctx, void *p, dv_dptr *out);

/*
 * Stream memory operations on 32-bit words (registered host memory or
 * device memory, by device address), n of them in order as one call
 * (cuStreamBatchMemOp).  A write, once the stream gets there and
 * everything before it on the stream is visible, stores value; a wait
 * makes later work on the stream wait until (int32_t)(*addr - value) >= 0
 * (a cyclic greater-or-equal), however long that takes: the host thread
 * that is to store the word must not itself wait for this stream.
 */
#define DV_DRV_MAX_VALUE_OPS 16
typedef struct dv_drv_value_op {
    dv_dptr addr;
    uint32_t value;
    bool wait; /* else a write */
} dv_drv_value_op;
int dv__drv_value_ops(dv_drv_stream *stream, const dv_drv_value_op *ops, unsigned n);

/* The backend's own handle of a stream (a CUstream), NULL on the sim or
 * for a dead handle; for library calls (cuBLAS, cuFFT, NCCL) in tasks. */
void *dv__drv_stream_native(dv_drv_stream *stream);
/* A count that moves whenever something may have been enqueued on stream
 * since it was last read: every enqueuing call, and every hand-out of the
 * native stream (a task or library enqueues on it directly).  Recording an
 * event on it or waiting for it does not move it.  The owner thread's. */
static inline uint64_t dv__drv_stream_work(const dv_drv_stream *stream);
/*
 * Hooks: fn(arg, stream) runs once before the next call that enqueues
 * work whose end is open on the stream (a stream wait, a host function, a
 * value wait, the native stream handed out, a capture begun, a graph
 * launched) after dv__drv_stream_arm(stream, slot), before its work is
 * counted; not while the stream captures (it stays armed).  A tracker
 * uses one to record an event after a block's use, before work that may
 * wait for the host or another stream is queued behind it.  A hook's
 * status other than DV_OK (its detail set) fails the enqueuing call.
 * dv__drv_stream_hook answers the slot, or -1 when the stream has
 * DV_DRV_STREAM_HOOKS already or is not alive; dv__drv_stream_unhook
 * forgets fn with arg (no-op when not there).
 */
#define DV_DRV_STREAM_HOOKS 4
typedef int (*dv_drv_stream_hook)(void *arg, dv_drv_stream *stream);
int dv__drv_stream_hook(dv_drv_stream *stream, dv_drv_stream_hook fn, void *arg);
void dv__drv_stream_unhook(dv_drv_stream *stream, dv_drv_stream_hook fn, void *arg);
static inline void dv__drv_stream_arm(dv_drv_stream *stream, int slot);
/* Something may have been enqueued on stream behind the port's back (a
 * task's work on its native stream): the count moves. */
void dv__drv_stream_touched(dv_drv_stream *stream);
/* Make ctx current on the calling thread (the CUDA context a library call
 * runs in); a no-op on the sim. */
int dv__drv_ctx_make_current(dv_drv_ctx *ctx);

/*
 * Stream capture (cuda; the sim answers DV_ENOTSUP): between begin and
 * end, work enqueued on stream is recorded into a graph instead of run
 * (relaxed mode: the calling thread may make any other call meanwhile).
 * The stream-order checker reads what a task really enqueued this way.
 */
typedef struct dv_drv_graph dv_drv_graph;
int dv__drv_capture_begin(dv_drv_stream *stream);
/* *any: something was captured since begin. */
int dv__drv_capture_any(dv_drv_stream *stream, bool *any);
/* The capture's graph in *graph (NULL when nothing was captured).  An
 * invalidated capture (a call not allowed while capturing) is an error;
 * the stream no longer captures either way. */
int dv__drv_capture_end(dv_drv_stream *stream, dv_drv_graph **graph);

/* One node of a captured graph, as the checker needs it. */
typedef enum dv_drv_node_kind {
    DV_NODE_KERNEL = 1,
    DV_NODE_MEMCPY,
    DV_NODE_MEMSET,
    DV_NODE_HOST,
    DV_NODE_OTHER,
} dv_drv_node_kind;
#define DV_NODE_MAX_WORDS 512
typedef struct dv_drv_node {
    dv_drv_node_kind kind;
    const void *func; /* kernel: the backend's function (a CUfunction) */
    bool words_known; /* kernel: its parameters could be listed */
    unsigned nwords;  /* kernel: its parameters' aligned 8-byte words */
    const uint64_t *words;
    uint64_t dst, dst_bytes; /* memcpy, memset: the span written */
    bool dst_device;         /* a device address (else host) */
    uint64_t src, src_bytes; /* memcpy: the span read */
    bool src_device;
} dv_drv_node;
/* visit each node; a non-zero return stops the walk and is returned. */
int dv__drv_graph_nodes(dv_drv_graph *graph, int (*visit)(void *self, const dv_drv_node *node),
                        void *self);
/* Run the graph on stream (its work in stream order there). */
int dv__drv_graph_launch(dv_drv_graph *graph, dv_drv_stream *stream);
void dv__drv_graph_destroy(dv_drv_graph *graph);
/* The backend function of a port function (a CUfunction), for matching
 * kernel nodes; NULL on the sim. */
const void *dv__drv_func_native(dv_drv_func *func);

/*
 * An observer of a context's ordering operations (the stream-order
 * checker).  Each hook runs on the calling thread after the operation
 * succeeded: an event recorded on a stream, a stream made to wait on an
 * event, an event or a stream the host saw complete (a query that answered
 * done, or a sync), an event about to be destroyed.  Observers keep their
 * data in dv__drv_shadow() of events and streams (NULL when created).
 */
typedef struct dv_drv_observer {
    void *self;
    void (*record)(void *self, dv_drv_event *event, dv_drv_stream *stream);
    void (*wait)(void *self, dv_drv_stream *stream, dv_drv_event *event);
    void (*event_done)(void *self, dv_drv_event *event);
    void (*stream_done)(void *self, dv_drv_stream *stream);
    void (*event_destroy)(void *self, dv_drv_event *event);
} dv_drv_observer;
/* Set (or, with NULL, clear) the observer of ctx; it must outlive its use. */
void dv__drv_ctx_set_observer(dv_drv_ctx *ctx, const dv_drv_observer *observer);
/* Calls made through the port so far, by kind (DV_CALL__COUNT of them). */
void dv__driver_call_counts(const dv_driver *drv, uint64_t out[DV_CALL__COUNT]);
/* Event records and stream waits made through the port so far. */
void dv__driver_order_counts(const dv_driver *drv, uint64_t *records, uint64_t *waits);
/* The observer's slot in an event or stream object. */
void **dv__drv_shadow(void *event_or_stream);

/* Name and description of a raw driver code (never NULL). */
const char *dv__drv_error_name(const dv_driver *drv, int code);
const char *dv__drv_error_string(const dv_driver *drv, int code);

/* ------------------------------------------------------------------------
 * Shared with the backends.
 * ------------------------------------------------------------------------ */

/* Raw driver codes the port interprets (CUresult numbering). */
enum {
    DV_CU_SUCCESS = 0,
    DV_CU_INVALID_VALUE = 1,
    DV_CU_OUT_OF_MEMORY = 2,
    DV_CU_NOT_INITIALIZED = 3,
    DV_CU_DEINITIALIZED = 4,
    DV_CU_STUB_LIBRARY = 34,
    DV_CU_INSUFFICIENT_DRIVER = 35,
    DV_CU_NO_DEVICE = 100,
    DV_CU_INVALID_DEVICE = 101,
    DV_CU_ECC_UNCORRECTABLE = 214,
    DV_CU_INVALID_IMAGE = 200,
    DV_CU_INVALID_CONTEXT = 201,
    DV_CU_NO_BINARY_FOR_GPU = 209,
    DV_CU_INVALID_PTX = 218,
    DV_CU_INVALID_HANDLE = 400,
    DV_CU_NOT_FOUND = 500,
    DV_CU_NOT_READY = 600,
    DV_CU_ILLEGAL_ADDRESS = 700,
    DV_CU_LAUNCH_OUT_OF_RESOURCES = 701,
    DV_CU_LAUNCH_TIMEOUT = 702,
    DV_CU_PEER_ACCESS_UNSUPPORTED = 217,
    DV_CU_ASSERT = 710,
    DV_CU_HARDWARE_STACK_ERROR = 714,
    DV_CU_ILLEGAL_INSTRUCTION = 715,
    DV_CU_MISALIGNED_ADDRESS = 716,
    DV_CU_INVALID_ADDRESS_SPACE = 717,
    DV_CU_INVALID_PC = 718,
    DV_CU_LAUNCH_FAILED = 719,
    DV_CU_CONTEXT_IS_DESTROYED = 709,
    DV_CU_HOST_MEMORY_ALREADY_REGISTERED = 712,
    DV_CU_HOST_MEMORY_NOT_REGISTERED = 713,
    DV_CU_NOT_SUPPORTED = 801,
    DV_CU_UNKNOWN = 999,
};

/* One table from raw driver code to dv_status. */
int dv__status_from_driver(int code);
/* True for the codes after which the context is unusable (sticky). */
bool dv__driver_code_is_sticky(int code);
/* Name of a CUresult code from the port's own table, NULL if unknown. */
const char *dv__driver_code_name(int code);

enum dv_drv_kind {
    DV_DRV_CTX = 1,
    DV_DRV_STREAM,
    DV_DRV_EVENT,
    DV_DRV_MODULE,
    DV_DRV_FUNC,
    DV_DRV__KINDS
};

/*
 * Header of every backend object.  Owned by port.c: it allocates the object
 * (ops->obj_size[kind] bytes, zeroed), fills the header and passes it to the
 * create op, which fills the rest.  On destroy the port calls the op, then
 * marks the header dead and keeps the memory for reuse.
 */
#define DV_DRV_MAGIC(kind) (UINT32_C(0x44560000) | (uint32_t)(kind))
#define DV_DRV_DEAD        UINT32_C(0xDEADD0D0)

typedef struct dv_drv_obj {
    uint32_t magic; /* DV_DRV_MAGIC(kind) while alive, DEAD after */
    uint16_t kind;
    int16_t device; /* ordinal */
    dv_driver *drv;
    struct dv_drv_obj *ctx;                   /* the context header (self for a context) */
    struct dv_drv_obj *parent;                /* a function's module; NULL otherwise */
    struct dv_drv_obj *live_next, *live_prev; /* driver's list of live objects */
    struct dv_drv_obj *free_next;             /* pool free list */
    size_t size;                              /* bytes of the whole backend object */
    uint32_t flags;                           /* what it was created with (events) */
    void *shadow; /* a context's observer; an event's or stream's observer data */
    /* A stream's: bumped by every call that enqueues on it (dv__drv_stream_work). */
    uint64_t work;
    /* A stream's: hooks run once before the next open-ended enqueue on it,
     * each while its bit of armed is set (dv__drv_stream_arm), never while
     * the stream captures. */
    uint8_t armed, nhooks;
    bool capturing;
    struct dv_drv_hook {
        dv_drv_stream_hook fn;
        void *arg;
    } hooks[DV_DRV_STREAM_HOOKS];
} dv_drv_obj;

static inline uint64_t dv__drv_stream_work(const dv_drv_stream *stream)
{
    return ((const dv_drv_obj *)(const void *)stream)->work;
}

static inline void dv__drv_stream_arm(dv_drv_stream *stream, int slot)
{
    ((dv_drv_obj *)(void *)stream)->armed |= (uint8_t)(1u << slot);
}

typedef struct dv_driver_ops {
    const char *name;
    dv_backend backend;
    /* Sizes of the backend objects, each starting with a dv_drv_obj. */
    size_t obj_size[DV_DRV__KINDS];

    /* Unlike the other ops, open returns a dv_status and fills the detail
     * itself (dv__fail / dv__fail_driver), so it can say why a backend is
     * not available: DV_ENODEVICE for no driver library, no device, or a
     * driver too old.  drv->impl is the backend's to set. */
    int (*open)(dv_driver *drv, const dv_driver_config *cfg);
    void (*close)(dv_driver *drv);

    int (*device_count)(dv_driver *drv, int *count);
    int (*device_info)(dv_driver *drv, int ordinal, dv_device_info *info);
    int (*mem_info)(dv_drv_obj *ctx, uint64_t *free_bytes, uint64_t *total_bytes);

    /* ctx is a fresh object (header filled); the op fills the rest. */
    int (*ctx_retain)(dv_drv_obj *ctx, int ordinal);
    int (*ctx_release)(dv_drv_obj *ctx);
    /* Called after the port destroyed (through their destroy ops, results
     * ignored) every function, module, event and stream of the device, in
     * that order.  The backend resets the device's context. */
    int (*ctx_reset)(dv_drv_obj *ctx);

    int (*stream_create)(dv_drv_obj *ctx, dv_drv_obj *stream);
    int (*stream_destroy)(dv_drv_obj *stream);
    int (*stream_sync)(dv_drv_obj *stream);
    int (*stream_query)(dv_drv_obj *stream, bool *done);

    /* event->flags holds the DV_DRV_EVENT_* flags asked for. */
    int (*event_create)(dv_drv_obj *ctx, dv_drv_obj *event);
    int (*event_destroy)(dv_drv_obj *event);
    int (*event_record)(dv_drv_obj *event, dv_drv_obj *stream);
    int (*event_query)(dv_drv_obj *event, bool *done);
    int (*event_sync)(dv_drv_obj *event);
    int (*stream_wait_event)(dv_drv_obj *stream, dv_drv_obj *event);
    int (*event_elapsed)(dv_drv_obj *start, dv_drv_obj *end, float *ms);
    void *(*native_event)(dv_drv_obj *event); /* NULL: none */

    int (*mem_alloc)(dv_drv_obj *ctx, uint64_t bytes, dv_dptr *dptr);
    int (*mem_free)(dv_drv_obj *ctx, dv_dptr dptr);
    int (*mem_alloc_async)(dv_drv_obj *stream, uint64_t bytes, dv_dptr *dptr);
    int (*mem_free_async)(dv_drv_obj *stream, dv_dptr dptr);
    int (*pool_set_threshold)(dv_drv_obj *ctx, uint64_t bytes);
    int (*pool_get_threshold)(dv_drv_obj *ctx, uint64_t *bytes);
    int (*pool_trim)(dv_drv_obj *ctx, uint64_t keep_bytes);
    int (*vmm_granularity)(dv_drv_obj *ctx, uint64_t *bytes);
    int (*va_reserve)(dv_drv_obj *ctx, uint64_t bytes, dv_dptr *va);
    int (*va_release)(dv_drv_obj *ctx, dv_dptr va, uint64_t bytes);
    int (*mem_map)(dv_drv_obj *ctx, dv_dptr va, uint64_t bytes, uint64_t *handle);
    int (*mem_unmap)(dv_drv_obj *ctx, dv_dptr va, uint64_t bytes, uint64_t handle);
    int (*mem_unmap_keep)(dv_drv_obj *ctx, dv_dptr va, uint64_t bytes, uint64_t handle);
    int (*mem_remap)(dv_drv_obj *ctx, dv_dptr va, uint64_t bytes, uint64_t handle);
    int (*mem_release)(dv_drv_obj *ctx, uint64_t handle);

    int (*memcpy_htod)(dv_drv_obj *stream, dv_dptr dst, const void *src, uint64_t bytes);
    int (*memcpy_dtoh)(dv_drv_obj *stream, void *dst, dv_dptr src, uint64_t bytes);
    int (*memcpy_dtod)(dv_drv_obj *stream, dv_dptr dst, dv_dptr src, uint64_t bytes);
    int (*memcpy_peer)(dv_drv_obj *stream, dv_drv_obj *dst_ctx, dv_dptr dst, dv_drv_obj *src_ctx,
                       dv_dptr src, uint64_t bytes);
    int (*memset_d8)(dv_drv_obj *stream, dv_dptr dst, uint8_t value, uint64_t count);
    int (*memset_d32)(dv_drv_obj *stream, dv_dptr dst, uint32_t value, uint64_t count);

    int (*module_load)(dv_drv_obj *ctx, dv_drv_obj *module, const void *image, size_t image_bytes);
    int (*module_unload)(dv_drv_obj *module);
    int (*func_get)(dv_drv_obj *module, dv_drv_obj *func, const char *name);
    int (*func_params)(dv_drv_obj *func, uint16_t *bytes, unsigned max, unsigned *count);
    void (*builtin_image)(const dv_driver *drv, const void **image, size_t *bytes);

    int (*launch)(dv_drv_obj *func, dv_dim3 grid, dv_dim3 block, uint32_t shared_bytes,
                  dv_drv_obj *stream, void **params);
    int (*host_fn)(dv_drv_obj *stream, dv_host_fn fn, void *arg);
    int (*host_register)(dv_drv_obj *ctx, void *p, uint64_t bytes);
    int (*host_unregister)(dv_drv_obj *ctx, void *p);
    int (*host_dptr)(dv_drv_obj *ctx, void *p, dv_dptr *out);
    int (*value_ops)(dv_drv_obj *stream, const dv_drv_value_op *ops, unsigned n);
    /* For library calls made on the owning thread (tasks): the backend's
     * own stream handle (CUstream; NULL on the sim), and making a context
     * current on the calling thread (a no-op on the sim). */
    void *(*native_stream)(dv_drv_obj *stream);
    int (*make_current)(dv_drv_obj *ctx);
    /* Stream capture (NULL: not supported).  Graphs start with their
     * driver: struct dv_drv_graph { dv_driver *drv; ... }. */
    int (*capture_begin)(dv_drv_obj *stream);
    int (*capture_any)(dv_drv_obj *stream, bool *any);
    int (*capture_end)(dv_drv_obj *stream, dv_drv_graph **graph);
    int (*graph_nodes)(dv_drv_graph *graph, int (*visit)(void *, const dv_drv_node *), void *self);
    int (*graph_launch)(dv_drv_graph *graph, dv_drv_obj *stream);
    void (*graph_destroy)(dv_drv_graph *graph);
    const void *(*func_native)(dv_drv_obj *func);

    /* NULL: the port's own table of names is used. */
    const char *(*error_name)(const dv_driver *drv, int code);
    const char *(*error_string)(const dv_driver *drv, int code);
} dv_driver_ops;

/* Base of every driver; backends allocate a larger struct starting with it. */
struct dv_driver {
    const dv_driver_ops *ops;
    uint64_t serial; /* unique for the process, never reused */
    void *impl;      /* backend state */
    /* Object pool and live list (port.c), guarded by obj_lock. */
    void *obj_lock;
    dv_drv_obj *free_list[DV_DRV__KINDS];
    dv_drv_obj live_head;
    /* Ordering calls made through the port (tests check batching). */
    _Atomic uint64_t event_records, stream_waits;
    /* Every call made through the port, by kind (what a workload costs
     * the driver: dv-stress reports it). */
    _Atomic uint64_t calls[DV_CALL__COUNT];
};

extern const dv_driver_ops dv__sim_ops;
#ifdef DV_HAVE_CUDA
extern const dv_driver_ops dv__cuda_ops;
#endif

/* The embedded fatbin of tools/kernels (NULL/0 when built without nvcc). */
extern const unsigned char dv__kernels_fatbin[];
extern const size_t dv__kernels_fatbin_size;

/* Record a driver failure (code, name) and return the mapped status. */
int dv__fail_driver(const dv_driver *drv, const char *call, int code);

#endif /* DV_DRIVER_PORT_H */
