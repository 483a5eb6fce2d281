/*
 * The actor's messages: one payload type per operation, defined here once.
 *
 * A message is one cache line, copied by value into its poster's ring, so
 * posting allocates nothing.  The header says what it is and where its
 * answer goes; `ticket` is the actor-wide order of posts (queue.h says
 * how it is used); the payload is a union of the operations' own structs.
 * Client code fills a payload with designated initialisers and the actor
 * reads the same fields: nothing is packed into untyped words.
 */
#ifndef DV_ACTOR_MSG_H
#define DV_ACTOR_MSG_H

#include <stdint.h>

#include "devactor.h"

/* X(name, what it is called in reports) */
#define DV_MSG_TYPES(X)                                                                            \
    X(ALLOC, "allocate")                                                                           \
    X(FREE, "free")                                                                                \
    X(HTOD, "copy host->device")                                                                   \
    X(DTOH, "copy device->host")                                                                   \
    X(DTOD, "copy device->device")                                                                 \
    X(MEMSET, "memset")                                                                            \
    X(PEER_READ, "peer copy (source fence)")                                                       \
    X(PEER_COPY, "peer copy")                                                                      \
    X(LAUNCH, "launch")                                                                            \
    X(LAUNCH_BUILTIN, "launch")                                                                    \
    X(TASK, "task")                                                                                \
    X(SYNC, "sync")                                                                                \
    X(FLUSH, "flush")                                                                              \
    X(STATS, "statistics")                                                                         \
    X(RESET, "reset")                                                                              \
    X(KERNEL_GET, "kernel_get")                                                                    \
    X(HOST_ACCESS, "host access")                                                                  \
    X(EVENT_CREATE, "event create")                                                                \
    X(EVENT_DESTROY, "event destroy")                                                              \
    X(EVENT_RECORD, "event record")                                                                \
    X(EVENT_WAIT, "stream wait event")                                                             \
    X(EVENT_SYNC, "event sync")                                                                    \
    X(EVENT_QUERY, "event query")                                                                  \
    X(EVENT_ELAPSED, "event elapsed")                                                              \
    X(HOST_ALLOC, "host alloc")                                                                    \
    X(HOST_FREE, "host free")                                                                      \
    X(HOST_REGISTER, "host register")                                                              \
    X(HOST_UNREGISTER, "host unregister")                                                          \
    X(STAGING_OPEN, "staging")                                                                     \
    X(STAGED_HTOD, "copy host->device")                                                            \
    X(STAGED_DTOH, "copy device->host")

enum dv_msg_type {
    DV_MSG_NONE = 0,
#define DV__MSG_ENUM(name, what) DV_MSG_##name,
    DV_MSG_TYPES(DV__MSG_ENUM)
#undef DV__MSG_ENUM
        DV_MSG__COUNT
};

const char *dv__msg_name(unsigned type);

struct dv_kernel;
struct dv_event;
struct dv_actor;

/* The payloads.  Sizes and offsets are checked against the blocks by the
 * actor, never trusted. */
typedef struct dv_msg_alloc {
    dv_ref ref; /* the handle the poster minted (pending until handled) */
    uint64_t bytes;
    const char *tag; /* interned: lives for the process */
    uint64_t query;  /* the poster's current query (dv_query_set), 0: none */
} dv_msg_alloc;

typedef struct dv_msg_free {
    dv_ref ref; /* its last release */
} dv_msg_free;

typedef struct dv_msg_copy {
    dv_ref dev;      /* HTOD, DTOD: the destination; DTOH: the source */
    uint64_t offset; /* into dev */
    union {
        dv_ref src; /* DTOD: the source */
        void *host; /* HTOD: the source; DTOH: the destination */
    } other;
    uint64_t src_offset; /* DTOD: into src */
    uint64_t bytes;
} dv_msg_copy;

typedef struct dv_msg_memset {
    dv_ref dst;
    uint64_t offset, bytes;
    uint8_t value;
} dv_msg_memset;

typedef struct dv_msg_peer {
    dv_ref ref; /* PEER_READ: the source; PEER_COPY: the destination */
    uint64_t offset, bytes;
    uint64_t src_ptr;           /* PEER_COPY: the source's device address */
    struct dv_actor *src_actor; /* PEER_COPY: whose context it is in */
} dv_msg_peer;

/* A grid fits in 8 bytes (x < 2^32, y and z < 2^16), a block in 6. */
typedef struct dv_msg_launch {
    struct dv_kernel *kernel;
    const dv_arg *args;
    uint32_t shared_bytes;
    uint32_t grid_x;
    uint16_t grid_y, grid_z;
    uint16_t block_x, block_y, block_z;
    uint8_t nargs;
} dv_msg_launch;

typedef struct dv_msg_builtin {
    const char *name; /* one of devactor's own kernels, 1x1x1, untracked */
    uint64_t args[4];
} dv_msg_builtin;

typedef struct dv_msg_task {
    dv_task_fn fn;
    void *user;
    const dv_arg *args;
    uint8_t nargs;
} dv_msg_task;

typedef struct dv_msg_kernel_get {
    const void *image;
    uint64_t image_bytes;
    const char *name;
} dv_msg_kernel_get;

typedef struct dv_msg_host_access {
    uint64_t ptr, bytes;
    uint8_t access;
} dv_msg_host_access;

typedef enum dv_stats_kind {
    DV_STATS_ACTOR = 0,  /* out: dv_actor_stats */
    DV_STATS_MEMORY,     /* out: dv_memory_stats */
    DV_STATS_RESET_PEAKS,
    DV_STATS_USAGE,      /* out: dv_memory_usage[cap], by; *count */
    DV_STATS_SNAPSHOT,   /* out: dv_snapshot_row ** (the actor's malloc); *count */
    DV_STATS_VISIT,      /* out: dv_stack_visit */
} dv_stats_kind;

/* dv_actor_resources: fn(the stack's top, user) on the actor's thread. */
typedef struct dv_stack_visit {
    int (*fn)(struct dv_resource *top, void *user);
    void *user;
} dv_stack_visit;

/* One live block in a snapshot. */
typedef struct dv_snapshot_row {
    uint64_t ptr, bytes, requested, query, born;
    const char *tag;
    uint32_t stream, poster;
    int device;
} dv_snapshot_row;

typedef struct dv_msg_stats {
    void *out;
    size_t cap;
    size_t *count;
    uint8_t kind; /* dv_stats_kind */
    uint8_t by;   /* dv_memory_key */
} dv_msg_stats;

struct dv_drv_event;
typedef struct dv_msg_event {
    struct dv_event *event;
    struct dv_event *end;         /* EVENT_ELAPSED: the end */
    struct dv_drv_event *foreign; /* EVENT_WAIT on another actor's event: its port event */
    uint64_t record;              /* EVENT_RECORD: its number */
    float *ms;                    /* EVENT_ELAPSED */
} dv_msg_event;

typedef struct dv_msg_hostmem {
    void *ptr;      /* HOST_FREE, HOST_REGISTER, HOST_UNREGISTER */
    uint64_t bytes; /* HOST_ALLOC, HOST_REGISTER */
} dv_msg_hostmem;

struct dv_stage_job;
typedef struct dv_msg_staged {
    dv_ref dev; /* the block: the destination (to the device) or the source */
    uint64_t offset;
    struct dv_stage_job *job; /* staging.h: the host side, the chunks, the direction */
} dv_msg_staged;

typedef struct dv_msg {
    uint8_t type;    /* enum dv_msg_type */
    uint8_t flags;   /* DV_MSGF_* */
    uint16_t stream; /* the stream it is ordered on, where it has one */
    uint32_t seq;    /* per client: order and loss checks, and reports */
    uint64_t ticket; /* actor-wide order of posts (queue.h) */
    dv_future *reply;
    union {
        dv_msg_alloc alloc;
        dv_msg_free free;
        dv_msg_copy copy;
        dv_msg_memset memset;
        dv_msg_peer peer;
        dv_msg_launch launch;
        dv_msg_builtin builtin;
        dv_msg_task task;
        dv_msg_kernel_get kernel_get;
        dv_msg_host_access host;
        dv_msg_stats stats;
        dv_msg_event event;
        dv_msg_hostmem hostmem;
        dv_msg_staged staged;
    } u;
} dv_msg;

/* The poster waits for nothing (a free, a post-only record): no reply. */
#define DV_MSGF_NONE 0u

_Static_assert(sizeof(dv_msg) == 64, "a message is one cache line");

#endif /* DV_ACTOR_MSG_H */
