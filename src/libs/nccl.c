/*
 * Collectives between actors (devactor_nccl.h), written against the public
 * API alone: a task per rank and call, NCCL on cuda, host reductions in
 * stream order on the sim.
 *
 * The caller's thread checks every buffer against its block and builds the
 * task's arguments (a read range for each input, a write range for each
 * output, one read-write range for a buffer used in place), so the actor
 * fences the collective like a launch.  The task runs on the rank's actor:
 *
 *   1. it takes the rank's next step number and meets the communicator's
 *      other local ranks at that step (meet()): the step goes ahead when
 *      all of them are there and their calls agree, or fails on all of
 *      them -- a timeout naming the ranks that never came, a mismatch
 *      naming both -- without anything enqueued, and the step is spent on
 *      every rank alike, so the next one lines up again;
 *   2. on cuda it issues the rank's calls inside one NCCL group on the
 *      task's stream; on the sim it maps the buffers and enqueues a host
 *      function that, when the stream gets there, meets the other ranks'
 *      host functions (the "world", which may span several communicator
 *      objects joined by one id) and the last to come does the whole
 *      collective while the others wait, as a kernel waits for its peers.
 *
 * A watchdog thread per communicator looks at the actors' health: a LOST
 * actor, a context rebuilt or a shutdown aborts the communicator (every
 * rank's NCCL communicator is aborted; the sim's waiting host functions
 * are let go), and every later call answers why.
 */
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "devactor_nccl.h"
#include "libs/libload.h"

#define NSTREAMS           64
#define DEFAULT_TIMEOUT_NS (60ull * 1000000000ull)
#define WATCH_PERIOD_MS    20
#define MEET_SPIN_NS       50000u /* a rank looks for the others this long before it sleeps */
#define MAX_OPS            DV_LAUNCH_MAX_ARGS /* calls of one rank in one group */

/* ------------------------------------------------------------------------
 * NCCL's declarations, to build without its header
 * ------------------------------------------------------------------------ */

typedef void *nccl_comm_t;
typedef struct nccl_uid {
    char internal[DV_NCCL_ID_BYTES];
} nccl_uid;
/* The first fields of ncclConfig_t, as NCCL 2.14 defined them: NCCL reads
 * a configuration by its version and size. */
typedef struct nccl_config {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
    int cga_cluster_size;
    int min_ctas;
    int max_ctas;
    const char *net_name;
} nccl_config;
#define NCCL_CONFIG_MAGIC   0xcafebeefu
#define NCCL_CONFIG_VERSION 21403u /* 2.14.3 */
#define NCCL_UNDEF_INT      INT_MIN
enum { NCCL_OK = 0, NCCL_INVALID_ARGUMENT = 4, NCCL_IN_PROGRESS = 7 };

typedef int (*nccl_get_version_fn)(int *);
typedef int (*nccl_get_unique_id_fn)(nccl_uid *);
typedef int (*nccl_init_rank_fn)(nccl_comm_t *, int, nccl_uid, int);
typedef int (*nccl_init_rank_config_fn)(nccl_comm_t *, int, nccl_uid, int, nccl_config *);
typedef int (*nccl_comm_fn)(nccl_comm_t);
typedef int (*nccl_async_error_fn)(nccl_comm_t, int *);
typedef const char *(*nccl_error_string_fn)(int);
typedef const char *(*nccl_last_error_fn)(nccl_comm_t);
typedef int (*nccl_all_reduce_fn)(const void *, void *, size_t, int, int, nccl_comm_t, void *);
typedef int (*nccl_reduce_fn)(const void *, void *, size_t, int, int, int, nccl_comm_t, void *);
typedef int (*nccl_broadcast_fn)(const void *, void *, size_t, int, int, nccl_comm_t, void *);
typedef int (*nccl_gather_fn)(const void *, void *, size_t, int, nccl_comm_t, void *);
typedef int (*nccl_scatter_fn)(const void *, void *, size_t, int, int, nccl_comm_t, void *);
typedef int (*nccl_p2p_fn)(const void *, size_t, int, int, nccl_comm_t, void *);
typedef int (*nccl_group_fn)(void);

typedef struct nccl_lib {
    void *h;
    char name[320];
    char why[600]; /* why it did not open */
    nccl_get_version_fn get_version;
    nccl_get_unique_id_fn get_unique_id;
    nccl_init_rank_fn init_rank;
    nccl_init_rank_config_fn init_rank_config; /* NULL before 2.14 */
    nccl_comm_fn destroy, abort;
    nccl_async_error_fn async_error;
    nccl_error_string_fn error_string;
    nccl_last_error_fn last_error; /* NULL before 2.13 */
    nccl_all_reduce_fn all_reduce;
    nccl_reduce_fn reduce;
    nccl_broadcast_fn broadcast;
    nccl_gather_fn all_gather;
    nccl_scatter_fn reduce_scatter;
    nccl_p2p_fn send, recv;
    nccl_group_fn group_start, group_end;
} nccl_lib;

static nccl_lib lib;
static pthread_mutex_t lib_mu = PTHREAD_MUTEX_INITIALIZER;

/* Where pip puts NCCL (PyTorch's wheels depend on it). */
static const char *const wheel_globs[] = {
    "/usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2",
    "/usr/local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
    "/usr/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2",
    "/usr/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
    "/opt/conda/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
};

static void lib_open(void)
{
    static const char *const names[] = {"libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2",
                                        "/usr/local/cuda/lib/libnccl.so.2", NULL};
    char tried[400] = "", path[256] = "";
    lib.h = dv__lib_open("DV_NCCL_PATH", names, tried, sizeof(tried), path, sizeof(path));
    const char *forced = getenv("DV_NCCL_PATH");
    for (size_t g = 0; lib.h == NULL && (forced == NULL || forced[0] == '\0') &&
                       g < sizeof(wheel_globs) / sizeof(wheel_globs[0]);
         g++) {
        glob_t gl;
        if (glob(wheel_globs[g], 0, NULL, &gl) == 0) {
            for (size_t i = 0; lib.h == NULL && i < gl.gl_pathc; i++) {
                lib.h = dlopen(gl.gl_pathv[i], RTLD_NOW | RTLD_LOCAL);
                if (lib.h != NULL)
                    snprintf(path, sizeof(path), "%s", gl.gl_pathv[i]);
            }
            globfree(&gl);
        }
    }
    if (lib.h == NULL) {
        snprintf(lib.why, sizeof(lib.why),
                 "no NCCL (set DV_NCCL_PATH, or put libnccl.so.2 on LD_LIBRARY_PATH); tried %s%s",
                 tried, forced != NULL && forced[0] != '\0' ? "" : " and pip's nvidia/nccl");
        return;
    }
    void *h = lib.h;
    bool all = DV_LIB_SYM(h, lib.get_version, "ncclGetVersion") &&
               DV_LIB_SYM(h, lib.get_unique_id, "ncclGetUniqueId") &&
               DV_LIB_SYM(h, lib.init_rank, "ncclCommInitRank") &&
               DV_LIB_SYM(h, lib.destroy, "ncclCommDestroy") &&
               DV_LIB_SYM(h, lib.abort, "ncclCommAbort") &&
               DV_LIB_SYM(h, lib.async_error, "ncclCommGetAsyncError") &&
               DV_LIB_SYM(h, lib.error_string, "ncclGetErrorString") &&
               DV_LIB_SYM(h, lib.all_reduce, "ncclAllReduce") &&
               DV_LIB_SYM(h, lib.reduce, "ncclReduce") &&
               DV_LIB_SYM(h, lib.broadcast, "ncclBroadcast") &&
               DV_LIB_SYM(h, lib.all_gather, "ncclAllGather") &&
               DV_LIB_SYM(h, lib.reduce_scatter, "ncclReduceScatter") &&
               DV_LIB_SYM(h, lib.send, "ncclSend") && DV_LIB_SYM(h, lib.recv, "ncclRecv") &&
               DV_LIB_SYM(h, lib.group_start, "ncclGroupStart") &&
               DV_LIB_SYM(h, lib.group_end, "ncclGroupEnd");
    if (!all) {
        snprintf(lib.why, sizeof(lib.why), "%s lacks NCCL 2.7's calls (%s)", path,
                 dv__lib_missing());
        dlclose(lib.h);
        lib.h = NULL;
        return;
    }
    (void)DV_LIB_SYM(h, lib.init_rank_config, "ncclCommInitRankConfig");
    (void)DV_LIB_SYM(h, lib.last_error, "ncclGetLastError");
    int v = 0;
    (void)lib.get_version(&v);
    /* 2.9 and later: major*10000 + minor*100 + patch; before, *1000. */
    if (v >= 10000)
        snprintf(lib.name, sizeof(lib.name), "NCCL %d.%d.%d (%s)", v / 10000, v / 100 % 100,
                 v % 100, path);
    else
        snprintf(lib.name, sizeof(lib.name), "NCCL %d.%d.%d (%s)", v / 1000, v / 100 % 10, v % 100,
                 path);
}

static int need_lib(const char *call)
{
    /* Opened once; a failure is tried again next time (the environment
     * may have changed). */
    pthread_mutex_lock(&lib_mu);
    if (lib.h == NULL)
        lib_open();
    bool open = lib.h != NULL;
    char why[sizeof(lib.why)];
    memcpy(why, lib.why, sizeof(why));
    pthread_mutex_unlock(&lib_mu);
    if (!open)
        return dv_error_set(DV_ENOTSUP, call, 0, 0, "nccl_%s: %s", call, why);
    return DV_OK;
}

static int nccl_failed(int r, nccl_comm_t nc, const char *call, const char *what)
{
    const char *last = lib.last_error != NULL ? lib.last_error(nc) : "";
    return dv_error_set(DV_EDRIVER, call, 0, 0, "nccl_%s: %s: %s (%d)%s%s", call, what,
                        lib.error_string(r), r, last != NULL && last[0] ? ": " : "",
                        last != NULL ? last : "");
}

/* ------------------------------------------------------------------------
 * Calls
 * ------------------------------------------------------------------------ */

typedef enum {
    K_ALL_REDUCE,
    K_REDUCE,
    K_BROADCAST,
    K_ALL_GATHER,
    K_REDUCE_SCATTER,
    K_SEND,
    K_RECV,
} kind;

static const char *const kind_names[] = {"all_reduce",     "reduce", "broadcast", "all_gather",
                                         "reduce_scatter", "send",   "recv"};

/* One call of one rank: its buffers are task arguments (arg_send,
 * arg_recv; the same index when in place, -1 when unused), each buffer
 * `at` bytes into its argument's range. */
typedef struct nop {
    kind k;
    dv_nccl_type type;
    dv_nccl_op op;
    int root, peer;
    uint64_t count;
    uint64_t send_bytes, recv_bytes;
    int arg_send, arg_recv;
    uint64_t send_at, recv_at;
} nop;

typedef struct dv_nccl_comm dv_nccl_comm;

/* What one rank runs in one step: one call, or a group's. */
typedef struct ncall {
    dv_nccl_comm *c;
    int li; /* local index */
    dv_stream stream;
    int nops;
    nop ops[MAX_OPS];
    unsigned nargs;
    dv_arg args[DV_LAUNCH_MAX_ARGS];
    struct ncall *next, *prev; /* the communicator's calls in flight */
    /* A stand-in for a call refused before it was posted (skip_step):
     * it takes the rank's step and fails it on every local rank. */
    bool skip;
    char skip_why[256];
} ncall;

/* A stand-in's future, kept until it completes (the task frees its call
 * before the actor completes the future). */
typedef struct skip_post {
    dv_future f;
    struct skip_post *next;
} skip_post;

/* ------------------------------------------------------------------------
 * The sim's world: the ranks of one communicator, across the communicator
 * objects that joined it, meeting in stream order
 * ------------------------------------------------------------------------ */

typedef struct sim_part {
    const nop *ops; /* the job's copy */
    int nops;
    void *send[MAX_OPS], *recv[MAX_OPS];
} sim_part;

typedef struct sim_step {
    uint64_t seq;
    int arrived, left;
    bool done;
    sim_part **part; /* by rank */
    struct sim_step *next;
} sim_step;

/* A send that waits for its receive (point-to-point calls outside a
 * collective step): the receiver copies from the sender's buffer. */
typedef struct sim_msg {
    int src, dst;
    const void *data;
    uint64_t count;
    dv_nccl_type type;
    bool taken;
    struct sim_msg *next;
} sim_msg;

typedef struct sim_world {
    unsigned char id[DV_NCCL_ID_BYTES];
    int nranks, joined, refs;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sim_step *steps;
    sim_msg *msgs, **msgs_tail;                             /* in the order they were sent */
    uint64_t joined_ranks[(DV_MAX_DEVICES * 64 + 63) / 64]; /* nranks is capped below */
    int status;
    char why[300];
    uint64_t timeout_ns;
    struct sim_world *next;
} sim_world;

static pthread_mutex_t worlds_mu = PTHREAD_MUTEX_INITIALIZER;
static sim_world *worlds;

typedef struct sim_job {
    sim_world *w;
    uint64_t seq; /* its collective step; p2p: none */
    bool p2p;     /* sends and receives alone */
    int rank;
    nop ops[MAX_OPS];
    sim_part part;
} sim_job;

/* ------------------------------------------------------------------------
 * Communicators
 * ------------------------------------------------------------------------ */

typedef struct rank_state {
    dv_actor *actor;
    uint64_t uid; /* the actor's, to look at it only while it lives */
    int device;   /* the actor's, kept for messages once it is gone */
    int rank;
    nccl_comm_t nc;
    uint64_t gen;    /* context generation it was made in */
    uint64_t driver; /* the CUDA context's instance */
    uint64_t next;   /* its next step (its actor's thread only) */
    bool busy;       /* its actor is inside NCCL with nc */
    _Atomic uint64_t streams_used;
} rank_state;

/* The step number of the local ranks' meeting before creation (collectives
 * count from 0; sends and receives alone take UINT64_MAX). */
#define INIT_STEP    (UINT64_MAX - 1)
#define DESTROY_STEP (UINT64_MAX - 2) /* the sim's ranks' meeting at destroy */

/* The local ranks' meeting at one step. */
typedef struct lstep {
    uint64_t seq;
    int arrived, left;
    int state; /* 0 open, 1 go, 2 failed */
    int status;
    char why[400];
    ncall *part[DV_MAX_DEVICES];
    struct lstep *next;
} lstep;

struct dv_nccl_comm {
    bool cuda;
    bool blocking;     /* NCCL's blocking mode (else non-blocking, polled) */
    bool meet_at_init; /* every rank is local: they meet before creation */
    const char *call;  /* what made it: comm_create or comm_join */
    int nranks, nlocal;
    uint64_t timeout_ns;
    rank_state local[DV_MAX_DEVICES];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    lstep *steps;
    ncall *inflight;
    skip_post *skips; /* stand-ins posted, their futures not yet freed */
    int status; /* DV_OK, or why it cannot be used (for good) */
    char why[400];
    sim_world *world;
    pthread_t watch;
    bool watching, stop;
    pthread_cond_t watch_cv;
};

static int li_of(const dv_nccl_comm *c, int rank)
{
    for (int i = 0; i < c->nlocal; i++)
        if (c->local[i].rank == rank)
            return i;
    return -1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A timeout as text, in the unit that shows it (buf: 32 bytes). */
static const char *span_text(uint64_t ns, char *buf)
{
    if (ns >= 1000000 || ns == 0)
        snprintf(buf, 32, "%llu ms", (unsigned long long)(ns / 1000000));
    else if (ns >= 1000)
        snprintf(buf, 32, "%llu us", (unsigned long long)(ns / 1000));
    else
        snprintf(buf, 32, "%llu ns", (unsigned long long)ns);
    return buf;
}

/* now + t, saturating: a timeout of UINT64_MAX is for ever, not the past. */
static uint64_t deadline_after(uint64_t t)
{
    uint64_t now = now_ns();
    return t > UINT64_MAX - now ? UINT64_MAX : now + t;
}

static void cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
}

/* Wait on cv until the deadline or `slice_ms` from now, whichever is
 * sooner; whether the deadline passed. */
static bool wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t deadline,
                       unsigned slice_ms)
{
    uint64_t t = now_ns();
    if (t >= deadline)
        return true;
    uint64_t until = deadline;
    if (slice_ms != 0 && until - t > (uint64_t)slice_ms * 1000000ull)
        until = t + (uint64_t)slice_ms * 1000000ull;
    struct timespec ts = {(time_t)(until / 1000000000ull), (long)(until % 1000000000ull)};
    (void)pthread_cond_timedwait(cv, mu, &ts);
    return now_ns() >= deadline;
}

unsigned dv_nccl_type_size(dv_nccl_type type)
{
    switch (type) {
    case DV_NCCL_I8:
    case DV_NCCL_U8:
        return 1;
    case DV_NCCL_F16:
    case DV_NCCL_BF16:
        return 2;
    case DV_NCCL_I32:
    case DV_NCCL_U32:
    case DV_NCCL_F32:
        return 4;
    case DV_NCCL_I64:
    case DV_NCCL_U64:
    case DV_NCCL_F64:
        return 8;
    }
    return 0;
}

int dv_nccl_comm_size(const dv_nccl_comm *c)
{
    return c != NULL ? c->nranks : -1;
}

dv_actor *dv_nccl_comm_actor(const dv_nccl_comm *c, int rank)
{
    int li = c != NULL ? li_of(c, rank) : -1;
    return li >= 0 ? c->local[li].actor : NULL;
}

const char *dv_nccl_library(const dv_nccl_comm *c)
{
    if (c == NULL)
        return "";
    return c->cuda ? lib.name : "sim (host reductions in stream order)";
}

/* ------------------------------------------------------------------------
 * Aborting
 * ------------------------------------------------------------------------ */

static void world_abort(sim_world *w, int status, const char *why)
{
    pthread_mutex_lock(&w->mu);
    if (w->status == DV_OK) {
        w->status = status;
        snprintf(w->why, sizeof(w->why), "%s", why);
    }
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Make c unusable for good with status and why (the first reason stays),
 * and abort every local rank's NCCL communicator (waiting for a rank
 * whose actor is inside NCCL with it to come out).  c->mu held. */
static void abort_locked(dv_nccl_comm *c, int status, const char *why)
{
    if (c->status == DV_OK) {
        c->status = status;
        snprintf(c->why, sizeof(c->why), "%s", why);
    }
    pthread_cond_broadcast(&c->cv);
    if (c->world != NULL)
        world_abort(c->world, status, why);
    if (!c->cuda)
        return;
    for (int i = 0; i < c->nlocal; i++) {
        rank_state *rs = &c->local[i];
        /* A rank inside NCCL with nc comes out soon: a non-blocking one
         * polls and sees the status; a blocking one went in only once
         * every local rank met.  One held there past 100 ms (by a peer
         * that will not come: lost, or failed before its part) is
         * aborted anyway: NCCL allows that on a non-blocking communicator
         * at any time, and on a blocking one it is what ends a call a
         * peer holds (NCCL's waits look at the abort flag). */
        uint64_t until = deadline_after(100000000ull);
        while (rs->busy && !wait_until(&c->cv, &c->mu, until, 0))
            ;
        if (rs->nc != NULL) {
            nccl_comm_t nc = rs->nc;
            rs->nc = NULL;
            (void)lib.abort(nc);
        }
    }
}

/* Look at the actors: a lost, rebuilt or stopped one aborts c.  c->mu held. */
static void check_health_locked(dv_nccl_comm *c)
{
    if (c->status == DV_OK && c->world != NULL) {
        pthread_mutex_lock(&c->world->mu);
        int ws = c->world->status;
        char why[300];
        snprintf(why, sizeof(why), "%s", c->world->why);
        pthread_mutex_unlock(&c->world->mu);
        if (ws != DV_OK)
            abort_locked(c, ws, why);
    }
    for (int i = 0; i < c->nlocal && c->status == DV_OK; i++) {
        rank_state *rs = &c->local[i];
        dv_actor_health h;
        char why[400];
        if (!dv__lib_actor_health(rs->actor, rs->uid, &h)) {
            /* Shut down, maybe destroyed: not to be read again. */
            snprintf(why, sizeof(why), "rank %d's actor (device %d) was shut down", rs->rank,
                     rs->device);
            abort_locked(c, DV_ESHUTDOWN, why);
        } else if (h.state == DV_ACTOR_LOST) {
            snprintf(why, sizeof(why), "rank %d's actor (device %d) is lost: %s", rs->rank,
                     rs->device, h.first_fault.message[0] ? h.first_fault.message : "no detail");
            abort_locked(c, DV_EDEVICE_LOST, why);
        } else if (h.state == DV_ACTOR_STOPPING || h.state == DV_ACTOR_STOPPED) {
            snprintf(why, sizeof(why), "rank %d's actor (device %d) was shut down", rs->rank,
                     rs->device);
            abort_locked(c, DV_ESHUTDOWN, why);
        } else if (h.context_generation != rs->gen && h.state == DV_ACTOR_RUNNING) {
            /* A rebuild after a fault reset the context: its NCCL
             * communicator went with it (forgotten: aborting it would
             * free device memory of a context that is gone). */
            if (h.first_fault.status != DV_OK && !rs->busy)
                rs->nc = NULL;
            /* (While it rebuilds, wait for the outcome: rebuilt, or lost.) */
            snprintf(why, sizeof(why),
                     "rank %d's actor (device %d) rebuilt its context (generation %llu, the "
                     "communicator's %llu): make the communicator again",
                     rs->rank, rs->device, (unsigned long long)h.context_generation,
                     (unsigned long long)rs->gen);
            abort_locked(c, DV_ESTALE, why);
        }
    }
}

static int status_of_locked(dv_nccl_comm *c, const char *call)
{
    if (c->status == DV_OK)
        return DV_OK;
    return dv_error_set(c->status, call, 0, 0, "nccl_%s: the communicator cannot be used: %s", call,
                        c->why);
}

int dv_nccl_comm_status(dv_nccl_comm *c)
{
    if (c == NULL)
        return dv_error_set(DV_EINVAL, "nccl_comm_status", 0, 0,
                            "nccl_comm_status: NULL communicator");
    pthread_mutex_lock(&c->mu);
    check_health_locked(c);
    int rc = status_of_locked(c, "comm_status");
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static void *watch_main(void *arg)
{
    dv_nccl_comm *c = arg;
    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        check_health_locked(c);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += WATCH_PERIOD_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        (void)pthread_cond_timedwait(&c->watch_cv, &c->mu, &ts);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* ------------------------------------------------------------------------
 * The sim's collectives
 * ------------------------------------------------------------------------ */

typedef union num {
    int64_t i;
    uint64_t u;
    double d;
} num;

enum { DOM_I, DOM_U, DOM_D };

static int domain(dv_nccl_type t)
{
    switch (t) {
    case DV_NCCL_I8:
    case DV_NCCL_I32:
    case DV_NCCL_I64:
        return DOM_I;
    case DV_NCCL_U8:
    case DV_NCCL_U32:
    case DV_NCCL_U64:
        return DOM_U;
    default:
        return DOM_D;
    }
}

static num load(dv_nccl_type t, const void *p, uint64_t e)
{
    num v;
    switch (t) {
    case DV_NCCL_I8:
        v.i = ((const int8_t *)p)[e];
        break;
    case DV_NCCL_U8:
        v.u = ((const uint8_t *)p)[e];
        break;
    case DV_NCCL_I32:
        v.i = ((const int32_t *)p)[e];
        break;
    case DV_NCCL_U32:
        v.u = ((const uint32_t *)p)[e];
        break;
    case DV_NCCL_I64:
        v.i = ((const int64_t *)p)[e];
        break;
    case DV_NCCL_U64:
        v.u = ((const uint64_t *)p)[e];
        break;
    case DV_NCCL_F16:
        v.d = dv__f16_to_f32(((const uint16_t *)p)[e]);
        break;
    case DV_NCCL_BF16:
        v.d = dv__bf16_to_f32(((const uint16_t *)p)[e]);
        break;
    case DV_NCCL_F32:
        v.d = ((const float *)p)[e];
        break;
    default:
        v.d = ((const double *)p)[e];
        break;
    }
    return v;
}

static void store(dv_nccl_type t, void *p, uint64_t e, num v)
{
    switch (t) {
    case DV_NCCL_I8:
        ((int8_t *)p)[e] = (int8_t)v.i;
        break;
    case DV_NCCL_U8:
        ((uint8_t *)p)[e] = (uint8_t)v.u;
        break;
    case DV_NCCL_I32:
        ((int32_t *)p)[e] = (int32_t)v.i;
        break;
    case DV_NCCL_U32:
        ((uint32_t *)p)[e] = (uint32_t)v.u;
        break;
    case DV_NCCL_I64:
        ((int64_t *)p)[e] = v.i;
        break;
    case DV_NCCL_U64:
        ((uint64_t *)p)[e] = v.u;
        break;
    case DV_NCCL_F16:
        ((uint16_t *)p)[e] = dv__f32_to_f16((float)v.d);
        break;
    case DV_NCCL_BF16:
        ((uint16_t *)p)[e] = dv__f32_to_bf16((float)v.d);
        break;
    case DV_NCCL_F32:
        ((float *)p)[e] = (float)v.d;
        break;
    default:
        ((double *)p)[e] = v.d;
        break;
    }
}

/* Integers wrap as the device's do: in unsigned arithmetic. */
static num combine(int dom, dv_nccl_op op, num a, num b)
{
    num r;
    switch (dom) {
    case DOM_I:
        if (op == DV_NCCL_PROD)
            r.i = (int64_t)((uint64_t)a.i * (uint64_t)b.i);
        else if (op == DV_NCCL_MAX)
            r.i = a.i > b.i ? a.i : b.i;
        else if (op == DV_NCCL_MIN)
            r.i = a.i < b.i ? a.i : b.i;
        else
            r.i = (int64_t)((uint64_t)a.i + (uint64_t)b.i);
        break;
    case DOM_U:
        if (op == DV_NCCL_PROD)
            r.u = a.u * b.u;
        else if (op == DV_NCCL_MAX)
            r.u = a.u > b.u ? a.u : b.u;
        else if (op == DV_NCCL_MIN)
            r.u = a.u < b.u ? a.u : b.u;
        else
            r.u = a.u + b.u;
        break;
    default:
        if (op == DV_NCCL_PROD)
            r.d = a.d * b.d;
        else if (op == DV_NCCL_MAX)
            r.d = a.d > b.d ? a.d : b.d;
        else if (op == DV_NCCL_MIN)
            r.d = a.d < b.d ? a.d : b.d;
        else
            r.d = a.d + b.d;
        break;
    }
    return r;
}

/* out[e] := op over src[r] + r_off elements... for r in ranks, e < n.
 * The sum of an integer type is computed in its own width, as the device
 * does: wrap at the type's width happens at store. */
static void reduce_ranks(dv_nccl_type t, dv_nccl_op op, int nranks, void *const *src, uint64_t off,
                         uint64_t n, void *out)
{
    int dom = domain(t);
    for (uint64_t e = 0; e < n; e++) {
        num acc = load(t, src[0], off + e);
        for (int r = 1; r < nranks; r++)
            acc = combine(dom, op, acc, load(t, src[r], off + e));
        if (op == DV_NCCL_AVG) {
            if (dom == DOM_I)
                acc.i /= nranks;
            else if (dom == DOM_U)
                acc.u /= (uint64_t)nranks;
            else
                acc.d /= nranks;
        }
        store(t, out, e, acc);
    }
}

/* The i-th collective of part p (send/recv skipped); NULL when none. */
static bool is_p2p(const nop *x)
{
    return x->k == K_SEND || x->k == K_RECV;
}

/* The index in ops of the i-th collective (sends and receives skipped);
 * -1 when none. */
static int coll_index(const nop *ops, int nops, int i)
{
    for (int o = 0; o < nops; o++)
        if (!is_p2p(&ops[o]) && i-- == 0)
            return o;
    return -1;
}

/* Do two ranks' collectives agree (NULL: none)? */
static bool same_coll(const nop *a, const nop *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return a->k == b->k && a->count == b->count && a->type == b->type && a->op == b->op &&
           a->root == b->root;
}

/* The partner of ops[o] (a send or a receive of rank `self`) in its
 * peer's calls `pops`: the n-th call the other way between the two, where
 * ops[o] is the n-th its way; -1 when there is none, or it moves another
 * count or type. */
static int partner(const nop *ops, int o, int self, const nop *pops, int pnops)
{
    const nop *x = &ops[o];
    int nth = 0;
    for (int q = 0; q < o; q++)
        nth += ops[q].k == x->k && ops[q].peer == x->peer;
    kind want = x->k == K_SEND ? K_RECV : K_SEND;
    for (int q = 0; q < pnops; q++)
        if (pops[q].k == want && pops[q].peer == self && nth-- == 0)
            return pops[q].count == x->count && pops[q].type == x->type ? q : -1;
    return -1;
}

/* Run step s, every rank's part present.  A mismatch (another process's
 * communicator object, which the local meeting could not see) is written
 * to *why; nothing of that collective is written. */
static bool sim_run_step(sim_world *w, sim_step *s, char *why, size_t cap)
{
    int n = w->nranks;
    void **src = malloc(sizeof(void *) * (size_t)n);
    if (src == NULL) {
        snprintf(why, cap, "out of host memory");
        return false;
    }
    bool ok = true;
    for (int ci = 0; ok; ci++) {
        const sim_part *p0 = s->part[0];
        int o0 = coll_index(p0->ops, p0->nops, ci);
        for (int r = 1; r < n; r++) {
            int o = coll_index(s->part[r]->ops, s->part[r]->nops, ci);
            if (!same_coll(o0 >= 0 ? &p0->ops[o0] : NULL, o >= 0 ? &s->part[r]->ops[o] : NULL)) {
                snprintf(why, cap, "collective #%llu: rank 0 and rank %d made different calls",
                         (unsigned long long)s->seq, r);
                ok = false;
                break;
            }
        }
        if (!ok || o0 < 0)
            break;
        const nop *x = &s->part[0]->ops[o0];
        unsigned es = dv_nccl_type_size(x->type);
        uint64_t cnt = x->count, bytes = cnt * es;
        size_t tmp_bytes =
            (size_t)(x->k == K_ALL_GATHER || x->k == K_REDUCE_SCATTER ? bytes * (uint64_t)n
                                                                      : bytes);
        unsigned char *tmp = malloc(tmp_bytes ? tmp_bytes : 1);
        if (tmp == NULL) {
            snprintf(why, cap, "out of host memory");
            ok = false;
            break;
        }
        for (int r = 0; r < n; r++) {
            int o = coll_index(s->part[r]->ops, s->part[r]->nops, ci);
            src[r] = s->part[r]->send[o];
        }
        switch (x->k) {
        case K_ALL_REDUCE:
        case K_REDUCE:
            reduce_ranks(x->type, x->op, n, src, 0, cnt, tmp);
            for (int r = 0; r < n; r++)
                if (x->k == K_ALL_REDUCE || r == x->root)
                    memcpy(s->part[r]->recv[coll_index(s->part[r]->ops, s->part[r]->nops, ci)], tmp,
                           bytes);
            break;
        case K_BROADCAST:
            memcpy(tmp, src[x->root], bytes);
            for (int r = 0; r < n; r++)
                memmove(s->part[r]->recv[coll_index(s->part[r]->ops, s->part[r]->nops, ci)], tmp,
                        bytes);
            break;
        case K_ALL_GATHER:
            for (int r = 0; r < n; r++)
                memcpy(tmp + (size_t)r * bytes, src[r], bytes);
            for (int r = 0; r < n; r++)
                memcpy(s->part[r]->recv[coll_index(s->part[r]->ops, s->part[r]->nops, ci)], tmp,
                       (size_t)bytes * (size_t)n);
            break;
        case K_REDUCE_SCATTER:
            for (int r = 0; r < n; r++)
                reduce_ranks(x->type, x->op, n, src, (uint64_t)r * cnt, cnt,
                             tmp + (size_t)r * bytes);
            for (int r = 0; r < n; r++)
                memcpy(s->part[r]->recv[coll_index(s->part[r]->ops, s->part[r]->nops, ci)],
                       tmp + (size_t)r * bytes, bytes);
            break;
        default:
            break;
        }
        free(tmp);
    }
    /* Point to point: rank r's i-th receive from p takes p's i-th send
     * to r. */
    for (int r = 0; ok && r < n; r++) {
        const sim_part *pr = s->part[r];
        for (int o = 0; ok && o < pr->nops; o++) {
            const nop *rv = &pr->ops[o];
            if (rv->k != K_RECV)
                continue;
            const sim_part *pp = s->part[rv->peer];
            int found = partner(pr->ops, o, r, pp->ops, pp->nops);
            if (found < 0) {
                snprintf(why, cap,
                         "step #%llu: rank %d's receive from rank %d has no matching send",
                         (unsigned long long)s->seq, r, rv->peer);
                ok = false;
                break;
            }
            memcpy(pr->recv[o], pp->send[found], rv->count * dv_nccl_type_size(rv->type));
        }
    }
    free(src);
    return ok;
}

static sim_step *sim_step_of(sim_world *w, uint64_t seq)
{
    for (sim_step *s = w->steps; s != NULL; s = s->next)
        if (s->seq == seq)
            return s;
    sim_step *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->part = calloc((size_t)w->nranks, sizeof(*s->part));
    if (s->part == NULL) {
        free(s);
        return NULL;
    }
    s->seq = seq;
    s->next = w->steps;
    w->steps = s;
    return s;
}

static void sim_step_leave(sim_world *w, sim_step *s)
{
    if (++s->left < w->nranks)
        return;
    for (sim_step **pp = &w->steps; *pp != NULL; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    free(s->part);
    free(s);
}

static void world_fail_locked(sim_world *w, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void world_fail_locked(sim_world *w, int status, const char *fmt, ...)
{
    if (w->status == DV_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->why, sizeof(w->why), fmt, ap);
        va_end(ap);
        w->status = status;
    }
    pthread_cond_broadcast(&w->cv);
}

/* Sends and receives outside a collective step: each send waits until
 * its receive copied it; a receive takes the oldest send to it from its
 * peer, as NCCL pairs them.  A rank's sends are all offered before it
 * receives, so a ring does not wait on itself. */
static void sim_run_p2p(sim_job *j)
{
    sim_world *w = j->w;
    sim_msg *mine[MAX_OPS];
    int nmine = 0;
    uint64_t deadline = deadline_after(w->timeout_ns);
    for (int o = 0; o < j->part.nops && w->status == DV_OK; o++) {
        const nop *x = &j->ops[o];
        if (x->k != K_SEND)
            continue;
        sim_msg *m = calloc(1, sizeof(*m));
        if (m == NULL) {
            world_fail_locked(w, DV_ENOMEM, "out of host memory");
            break;
        }
        *m = (sim_msg){j->rank, x->peer, j->part.send[o], x->count, x->type, false, NULL};
        *w->msgs_tail = m;
        w->msgs_tail = &m->next;
        mine[nmine++] = m;
    }
    pthread_cond_broadcast(&w->cv);
    for (int o = 0; o < j->part.nops && w->status == DV_OK; o++) {
        const nop *x = &j->ops[o];
        if (x->k != K_RECV)
            continue;
        for (;;) {
            sim_msg *m = w->msgs;
            while (m != NULL && (m->taken || m->src != x->peer || m->dst != j->rank))
                m = m->next;
            if (m != NULL) {
                if (m->count != x->count || m->type != x->type) {
                    world_fail_locked(w, DV_EINVAL,
                                      "rank %d's receive of %llu (type %d) from rank %d met a "
                                      "send of %llu (type %d): no matching send",
                                      j->rank, (unsigned long long)x->count, (int)x->type, x->peer,
                                      (unsigned long long)m->count, (int)m->type);
                    break;
                }
                memcpy(j->part.recv[o], m->data, x->count * dv_nccl_type_size(x->type));
                m->taken = true;
                pthread_cond_broadcast(&w->cv);
                break;
            }
            if (w->status != DV_OK)
                break;
            if (wait_until(&w->cv, &w->mu, deadline, 0) && w->status == DV_OK) {
                world_fail_locked(w, DV_ETIMEDOUT,
                                  "rank %d's receive from rank %d: no send came within %s",
                                  j->rank, x->peer, span_text(w->timeout_ns, (char[32]){0}));
                break;
            }
        }
    }
    for (int i = 0; i < nmine; i++) {
        while (!mine[i]->taken && w->status == DV_OK)
            if (wait_until(&w->cv, &w->mu, deadline, 0) && !mine[i]->taken && w->status == DV_OK)
                world_fail_locked(w, DV_ETIMEDOUT,
                                  "rank %d's send to rank %d: not received within %s", j->rank,
                                  mine[i]->dst, span_text(w->timeout_ns, (char[32]){0}));
        /* Taken or given up: out of the list. */
        for (sim_msg **pp = &w->msgs; *pp != NULL; pp = &(*pp)->next)
            if (*pp == mine[i]) {
                *pp = mine[i]->next;
                if (w->msgs_tail == &mine[i]->next)
                    w->msgs_tail = pp;
                break;
            }
        free(mine[i]);
    }
}

/* A host function: the rank's stream reached the collective. */
static void sim_run(void *arg)
{
    sim_job *j = arg;
    sim_world *w = j->w;
    pthread_mutex_lock(&w->mu);
    if (j->p2p) {
        sim_run_p2p(j);
        pthread_mutex_unlock(&w->mu);
        return;
    }
    sim_step *s = w->status == DV_OK ? sim_step_of(w, j->seq) : NULL;
    if (s == NULL) {
        if (w->status == DV_OK) {
            w->status = DV_ENOMEM;
            snprintf(w->why, sizeof(w->why), "out of host memory");
        }
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        return;
    }
    s->part[j->rank] = &j->part;
    if (++s->arrived == w->nranks) {
        char why[300];
        if (sim_run_step(w, s, why, sizeof(why))) {
            s->done = true;
        } else if (w->status == DV_OK) {
            w->status = DV_EINVAL;
            snprintf(w->why, sizeof(w->why), "%s", why);
        }
        pthread_cond_broadcast(&w->cv);
    } else {
        uint64_t deadline = deadline_after(w->timeout_ns);
        while (!s->done && w->status == DV_OK) {
            if (wait_until(&w->cv, &w->mu, deadline, 0) && !s->done && w->status == DV_OK) {
                char missing[160] = "";
                size_t used = 0;
                for (int r = 0; r < w->nranks && used < sizeof(missing); r++)
                    if (s->part[r] == NULL) {
                        int k = snprintf(missing + used, sizeof(missing) - used, "%s%d",
                                         used ? ", " : "", r);
                        used += k > 0 ? (size_t)k : 0;
                    }
                w->status = DV_ETIMEDOUT;
                snprintf(w->why, sizeof(w->why),
                         "step #%llu: the stream of rank %s did not reach it within %s",
                         (unsigned long long)j->seq, missing,
                         span_text(w->timeout_ns, (char[32]){0}));
                pthread_cond_broadcast(&w->cv);
            }
        }
    }
    sim_step_leave(w, s);
    pthread_mutex_unlock(&w->mu);
}

static void world_put(sim_world *w);

static void world_ref(sim_world *w)
{
    pthread_mutex_lock(&worlds_mu);
    w->refs++;
    pthread_mutex_unlock(&worlds_mu);
}

/* Exactly once: after sim_run, or alone when the stream never gets there
 * (the rank's device or context was lost): then the world is aborted so
 * that no other rank waits for it. */
static void sim_done(void *arg, int status)
{
    sim_job *j = arg;
    if (status != DV_OK) {
        /* Not DV_ECONTEXT_LOST: the other ranks' contexts are fine. */
        char why[300];
        snprintf(why, sizeof(why), "rank %d's stream never reached step #%llu: %s", j->rank,
                 (unsigned long long)j->seq, dv_strerror(status));
        world_abort(j->w, status == DV_EDEVICE_LOST ? DV_EDEVICE_LOST : DV_ESTALE, why);
    }
    world_put(j->w);
    free(j);
}

static sim_world *world_get(const unsigned char *id, int nranks, uint64_t timeout_ns)
{
    pthread_mutex_lock(&worlds_mu);
    sim_world *w = NULL;
    if (id != NULL)
        for (w = worlds; w != NULL; w = w->next)
            if (memcmp(w->id, id, DV_NCCL_ID_BYTES) == 0)
                break;
    if (w != NULL && w->nranks != nranks) {
        pthread_mutex_unlock(&worlds_mu);
        return NULL;
    }
    if (w == NULL) {
        w = calloc(1, sizeof(*w));
        if (w == NULL) {
            pthread_mutex_unlock(&worlds_mu);
            return NULL;
        }
        if (id != NULL)
            memcpy(w->id, id, DV_NCCL_ID_BYTES);
        w->nranks = nranks;
        w->timeout_ns = timeout_ns;
        w->msgs_tail = &w->msgs;
        pthread_mutex_init(&w->mu, NULL);
        cond_init(&w->cv);
        w->next = worlds;
        worlds = w;
    }
    w->refs++;
    pthread_mutex_unlock(&worlds_mu);
    return w;
}

static void world_put(sim_world *w)
{
    pthread_mutex_lock(&worlds_mu);
    if (--w->refs > 0) {
        pthread_mutex_unlock(&worlds_mu);
        return;
    }
    for (sim_world **pp = &worlds; *pp != NULL; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    pthread_mutex_unlock(&worlds_mu);
    while (w->steps != NULL) {
        sim_step *s = w->steps;
        w->steps = s->next;
        free(s->part);
        free(s);
    }
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

/* ------------------------------------------------------------------------
 * The local ranks' meeting
 * ------------------------------------------------------------------------ */

static lstep *lstep_of(dv_nccl_comm *c, uint64_t seq)
{
    for (lstep *s = c->steps; s != NULL; s = s->next)
        if (s->seq == seq)
            return s;
    lstep *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->seq = seq;
    s->next = c->steps;
    c->steps = s;
    return s;
}

static void lstep_leave(dv_nccl_comm *c, lstep *s)
{
    if (++s->left < c->nlocal)
        return;
    for (lstep **pp = &c->steps; *pp != NULL; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    free(s);
}

static void describe(const ncall *k, char *out, size_t cap)
{
    size_t used = 0;
    for (int o = 0; o < k->nops && used < cap; o++) {
        const nop *x = &k->ops[o];
        int n;
        if (x->k == K_SEND || x->k == K_RECV)
            n = snprintf(out + used, cap - used, "%s%s %llu to/from %d", o ? ", " : "",
                         kind_names[x->k], (unsigned long long)x->count, x->peer);
        else
            n = snprintf(out + used, cap - used, "%s%s of %llu (type %d, op %d, root %d)",
                         o ? ", " : "", kind_names[x->k], (unsigned long long)x->count,
                         (int)x->type, (int)x->op, x->root);
        used += n > 0 ? (size_t)n : 0;
    }
}

/* Do the local ranks' calls of step s agree?  Collectives one by one;
 * sends and receives between two local ranks pair up. */
static bool agree(const dv_nccl_comm *c, const lstep *s, char *why, size_t cap)
{
    const ncall *a = s->part[0];
    for (int i = 1; i < c->nlocal; i++) {
        const ncall *b = s->part[i];
        for (int ci = 0;; ci++) {
            int oa = coll_index(a->ops, a->nops, ci), ob = coll_index(b->ops, b->nops, ci);
            if (oa < 0 && ob < 0)
                break;
            if (!same_coll(oa >= 0 ? &a->ops[oa] : NULL, ob >= 0 ? &b->ops[ob] : NULL)) {
                char da[160], db[160];
                describe(a, da, sizeof(da));
                describe(b, db, sizeof(db));
                snprintf(why, cap, "collective #%llu: rank %d made %s, rank %d made %s",
                         (unsigned long long)s->seq, c->local[0].rank, da, c->local[i].rank, db);
                return false;
            }
        }
    }
    /* Sends to local peers and their receives, in order. */
    for (int i = 0; i < c->nlocal; i++) {
        const ncall *k = s->part[i];
        for (int o = 0; o < k->nops; o++) {
            const nop *x = &k->ops[o];
            if (!is_p2p(x))
                continue;
            int pj = li_of(c, x->peer);
            if (pj < 0)
                continue; /* a rank of another process: NCCL pairs it */
            kind want = x->k == K_SEND ? K_RECV : K_SEND;
            if (partner(k->ops, o, c->local[i].rank, s->part[pj]->ops, s->part[pj]->nops) < 0) {
                snprintf(why, cap,
                         "step #%llu: rank %d's %s of %llu %s rank %d has no matching %s there",
                         (unsigned long long)s->seq, c->local[i].rank, kind_names[x->k],
                         (unsigned long long)x->count, x->k == K_SEND ? "to" : "from", x->peer,
                         kind_names[want]);
                return false;
            }
        }
    }
    return true;
}

/* Rank li's part of step seq: wait until every local rank came (DV_OK) or
 * the step failed on all of them. */
static int meet(dv_nccl_comm *c, int li, uint64_t seq, ncall *k, const char *call)
{
    if (c->nlocal == 1 || c->status != DV_OK)
        return status_of_locked(c, call); /* an aborted one meets no more */
    lstep *s = lstep_of(c, seq);
    if (s == NULL)
        return dv_error_set(DV_ENOMEM, call, 0, 0, "nccl_%s: out of host memory", call);
    s->part[li] = k;
    if (k->skip && s->state == 0) {
        /* This rank's call was refused before it was posted: the step
         * fails on every rank now, rather than at the timeout. */
        s->status = DV_EINVAL;
        snprintf(s->why, sizeof(s->why),
                 "step #%llu: rank %d's call was refused before it was posted (%s); nothing "
                 "was enqueued on any rank",
                 (unsigned long long)seq, c->local[li].rank, k->skip_why);
        __atomic_store_n(&s->state, 2, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&c->cv);
    } else if (s->state == 0 && ++s->arrived == c->nlocal) {
        char why[400];
        if (agree(c, s, why, sizeof(why))) {
            __atomic_store_n(&s->state, 1, __ATOMIC_RELEASE);
        } else {
            s->status = DV_EINVAL;
            snprintf(s->why, sizeof(s->why), "%s", why);
            __atomic_store_n(&s->state, 2, __ATOMIC_RELEASE);
        }
        pthread_cond_broadcast(&c->cv);
    } else if (s->state == 0 && c->status == DV_OK) {
        /* The others are usually microseconds behind (one thread posts
         * every rank's part): look for them a little before sleeping, so
         * that this rank does not enqueue a wake-up later than the last
         * (its kernel would wait for it on the device). */
        pthread_mutex_unlock(&c->mu);
        uint64_t until = now_ns() + MEET_SPIN_NS;
        while (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == 0 && now_ns() < until)
            sched_yield();
        pthread_mutex_lock(&c->mu);
    }
    uint64_t deadline = deadline_after(c->timeout_ns);
    while (s->state == 0 && c->status == DV_OK) {
        bool late = wait_until(&c->cv, &c->mu, deadline, WATCH_PERIOD_MS);
        check_health_locked(c);
        if (late && s->state == 0 && c->status == DV_OK) {
            char missing[160] = "";
            size_t used = 0;
            for (int i = 0; i < c->nlocal && used < sizeof(missing); i++)
                if (s->part[i] == NULL) {
                    int n = snprintf(missing + used, sizeof(missing) - used, "%s%d",
                                     used ? ", " : "", c->local[i].rank);
                    used += n > 0 ? (size_t)n : 0;
                }
            s->status = DV_ETIMEDOUT;
            __atomic_store_n(&s->state, 2, __ATOMIC_RELEASE);
            if (k->nops == 0)
                snprintf(s->why, sizeof(s->why),
                         "%s %s's actor did not take its part of the creation within %s; "
                         "no rank made its NCCL communicator",
                         strchr(missing, ',') != NULL ? "ranks" : "rank", missing,
                         span_text(c->timeout_ns, (char[32]){0}));
            else
                snprintf(s->why, sizeof(s->why),
                         "step #%llu (%s): rank %s did not come to it within %s (not "
                         "posted, or its actor busy with other work); nothing was enqueued on "
                         "any rank",
                         (unsigned long long)seq, kind_names[k->ops[0].k], missing,
                         span_text(c->timeout_ns, (char[32]){0}));
            pthread_cond_broadcast(&c->cv);
        }
    }
    int rc;
    if (c->status != DV_OK && s->state == 0) {
        /* Aborted while this step was open: it fails, and a rank that
         * comes later does not read this one's (freed) call. */
        s->status = c->status;
        snprintf(s->why, sizeof(s->why), "%s", c->why);
        __atomic_store_n(&s->state, 2, __ATOMIC_RELEASE);
    }
    s->part[li] = NULL;
    if (c->status != DV_OK)
        rc = status_of_locked(c, call);
    else if (s->state == 2)
        rc = dv_error_set(s->status, call, 0, 0, "nccl_%s: %s", call, s->why);
    else
        rc = DV_OK;
    lstep_leave(c, s);
    return rc;
}

/* ------------------------------------------------------------------------
 * The task
 * ------------------------------------------------------------------------ */

static const void *ptr_of(const dv_task_ctx *ctx, int arg, uint64_t at)
{
    return arg < 0 ? NULL : (const void *)(uintptr_t)(ctx->arg[arg] + at);
}

static int cuda_issue(const dv_task_ctx *ctx, dv_nccl_comm *c, rank_state *rs, const ncall *k,
                      const char *call)
{
    (void)dv_task_kernel_args_opaque(ctx);
    nccl_comm_t nc = rs->nc;
    void *st = ctx->native_stream;
    int r = lib.group_start();
    const char *what = "ncclGroupStart";
    for (int o = 0; r == NCCL_OK && o < k->nops; o++) {
        const nop *x = &k->ops[o];
        const void *s = ptr_of(ctx, x->arg_send, x->send_at);
        void *d = (void *)ptr_of(ctx, x->arg_recv, x->recv_at);
        what = kind_names[x->k];
        switch (x->k) {
        case K_ALL_REDUCE:
            r = lib.all_reduce(s, d, x->count, (int)x->type, (int)x->op, nc, st);
            break;
        case K_REDUCE:
            r = lib.reduce(s, d, x->count, (int)x->type, (int)x->op, x->root, nc, st);
            break;
        case K_BROADCAST:
            r = lib.broadcast(s, d, x->count, (int)x->type, x->root, nc, st);
            break;
        case K_ALL_GATHER:
            r = lib.all_gather(s, d, x->count, (int)x->type, nc, st);
            break;
        case K_REDUCE_SCATTER:
            r = lib.reduce_scatter(s, d, x->count, (int)x->type, (int)x->op, nc, st);
            break;
        case K_SEND:
            r = lib.send(s, x->count, (int)x->type, x->peer, nc, st);
            break;
        case K_RECV:
            r = lib.recv(d, x->count, (int)x->type, x->peer, nc, st);
            break;
        }
        if (r == NCCL_IN_PROGRESS)
            r = NCCL_OK; /* a non-blocking communicator queues it */
    }
    int g = lib.group_end();
    if (r == NCCL_OK) {
        r = g;
        what = "ncclGroupEnd";
    }
    /* A non-blocking communicator finishes enqueuing in the background. */
    uint64_t deadline = deadline_after(c->timeout_ns);
    for (unsigned spins = 0; r == NCCL_IN_PROGRESS; spins++) {
        int a = NCCL_OK;
        (void)lib.async_error(nc, &a);
        r = a;
        if (r == NCCL_IN_PROGRESS) {
            if (now_ns() >= deadline)
                return dv_error_set(DV_ETIMEDOUT, call, 0, 0,
                                    "nccl_%s: NCCL did not enqueue it within %s", call,
                                    span_text(c->timeout_ns, (char[32]){0}));
            if (__atomic_load_n(&c->status, __ATOMIC_RELAXED) != DV_OK)
                return dv_error_set(DV_ESTALE, call, 0, 0,
                                    "nccl_%s: the communicator was aborted while NCCL enqueued it",
                                    call);
            if (spins < 64) {
                sched_yield();
            } else {
                struct timespec ts = {0, 50000}; /* 50 us: the actor's thread waits */
                nanosleep(&ts, NULL);
            }
        }
    }
    return r == NCCL_OK ? DV_OK : nccl_failed(r, nc, call, what);
}

static int sim_issue(const dv_task_ctx *ctx, dv_nccl_comm *c, const rank_state *rs, const ncall *k,
                     uint64_t seq)
{
    sim_job *j = calloc(1, sizeof(*j));
    if (j == NULL)
        return dv_error_set(DV_ENOMEM, "nccl", sizeof(*j), 0, "nccl: out of host memory");
    j->w = c->world;
    world_ref(j->w); /* the host function may run after c is gone */
    j->seq = seq;
    j->p2p = seq == UINT64_MAX;
    j->rank = rs->rank;
    memcpy(j->ops, k->ops, sizeof(nop) * (size_t)k->nops);
    j->part.ops = j->ops;
    j->part.nops = k->nops;
    for (int o = 0; o < k->nops; o++) {
        const nop *x = &k->ops[o];
        if (x->arg_send >= 0 && x->send_bytes > 0) {
            bool inplace = x->arg_send == x->arg_recv;
            const dv_arg *a = &k->args[x->arg_send];
            unsigned char *p = dv_task_sim_access(ctx, ctx->arg[x->arg_send], a->bytes,
                                                  inplace ? DV_READ_WRITE : DV_READ);
            if (p == NULL)
                goto refused;
            j->part.send[o] = p + x->send_at;
            if (inplace)
                j->part.recv[o] = p + x->recv_at;
        }
        if (x->arg_recv >= 0 && x->recv_bytes > 0 && x->arg_recv != x->arg_send) {
            unsigned char *p = dv_task_sim_access(ctx, ctx->arg[x->arg_recv],
                                                  k->args[x->arg_recv].bytes, DV_WRITE);
            if (p == NULL)
                goto refused;
            j->part.recv[o] = p + x->recv_at;
        }
    }
    int rc = dv_task_host_fn_cleanup(ctx, sim_run, sim_done, j);
    if (rc != DV_OK) {
        world_put(j->w);
        free(j);
    }
    return rc;
refused:
    world_put(j->w);
    free(j);
    rc = dv_last_error()->status;
    return rc != DV_OK ? rc : DV_EINVAL;
}

static void unlist(dv_nccl_comm *c, ncall *k)
{
    if (k->prev != NULL)
        k->prev->next = k->next;
    else
        c->inflight = k->next;
    if (k->next != NULL)
        k->next->prev = k->prev;
}

static int nccl_task(const dv_task_ctx *ctx, void *user)
{
    ncall *k = user;
    dv_nccl_comm *c = k->c;
    rank_state *rs = &c->local[k->li];
    const char *call = k->skip ? "step" : k->nops == 1 ? kind_names[k->ops[0].k] : "group_end";
    if (ctx->stream < NSTREAMS)
        atomic_fetch_or(&rs->streams_used, UINT64_C(1) << ctx->stream);
    pthread_mutex_lock(&c->mu);
    if (c->status == DV_OK && ctx->context_generation != rs->gen) {
        char why[300];
        snprintf(why, sizeof(why),
                 "rank %d's actor (device %d) rebuilt its context since the communicator was "
                 "made: make it again",
                 rs->rank, ctx->device);
        /* A context reset took the rank's NCCL communicator with it. */
        if (ctx->driver_context != rs->driver)
            rs->nc = NULL;
        abort_locked(c, DV_ESTALE, why);
    }
    /* Sends and receives alone involve their peers, not every rank: they
     * take no step and meet no one here (NCCL pairs them; the sim's
     * host functions do, in stream order). */
    bool p2p = !k->skip && coll_index(k->ops, k->nops, 0) < 0;
    uint64_t seq = p2p ? UINT64_MAX : rs->next++;
    int rc = p2p ? status_of_locked(c, call) : meet(c, k->li, seq, k, call);
    if (rc == DV_OK && c->cuda)
        rs->busy = true;
    pthread_mutex_unlock(&c->mu);
    if (rc == DV_OK) {
        rc = c->cuda ? cuda_issue(ctx, c, rs, k, call) : sim_issue(ctx, c, rs, k, seq);
        if (rc != DV_OK) {
            /* The other ranks went ahead: their devices would wait for
             * this one for ever. */
            char why[500];
            snprintf(why, sizeof(why), "rank %d could not enqueue step #%llu: %s", rs->rank,
                     (unsigned long long)seq, dv_last_error()->message);
            dv_error_detail d = *dv_last_error();
            pthread_mutex_lock(&c->mu);
            rs->busy = false;
            abort_locked(c, rc, why);
            pthread_mutex_unlock(&c->mu);
            dv_error_set(rc, d.call, d.requested, d.remaining, "%s", d.message);
        } else if (c->cuda) {
            pthread_mutex_lock(&c->mu);
            rs->busy = false;
            pthread_cond_broadcast(&c->cv);
            pthread_mutex_unlock(&c->mu);
        }
    }
    /* Listed until here: destroy waits for the task to be over, not only
     * begun. */
    pthread_mutex_lock(&c->mu);
    unlist(c, k);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    free(k);
    return rc;
}

/* ------------------------------------------------------------------------
 * Posting
 * ------------------------------------------------------------------------ */

/* This thread's open group: one call per (communicator, rank). */
static _Thread_local int group_depth;
static _Thread_local ncall **group_parts;
static _Thread_local int group_n, group_cap;
static _Thread_local int group_rc; /* the first call refused in the group */
static _Thread_local dv_error_detail group_err;
static _Thread_local dv_nccl_comm *group_refused_c; /* its rank, -1: none */
static _Thread_local int group_refused_li = -1;
static _Thread_local dv_stream group_refused_stream;

static int post(ncall *k, dv_future *f, bool *posted)
{
    *posted = false;
    dv_nccl_comm *c = k->c;
    rank_state *rs = &c->local[k->li];
    pthread_mutex_lock(&c->mu);
    k->prev = NULL;
    k->next = c->inflight;
    if (c->inflight != NULL)
        c->inflight->prev = k;
    c->inflight = k;
    pthread_mutex_unlock(&c->mu);
    dv_future own;
    dv_future *fut = f;
    if (fut == NULL) {
        dv_future_init(&own, 0);
        fut = &own;
    }
    int rc = dv_task_async(rs->actor, nccl_task, k, k->stream, k->args, k->nargs, fut);
    if (rc != DV_OK) {
        /* Refused at the post: the task never runs. */
        dv_error_detail d = *dv_last_error();
        pthread_mutex_lock(&c->mu);
        unlist(c, k);
        pthread_mutex_unlock(&c->mu);
        free(k);
        dv_error_set(rc, d.call, d.requested, d.remaining, "%s", d.message);
        return rc;
    }
    *posted = true;
    return f == NULL ? dv_future_wait(&own) : DV_OK;
}

/* Stand-ins' futures that completed, freed (c->mu held). */
static void skips_reap_locked(dv_nccl_comm *c)
{
    for (skip_post **pp = &c->skips; *pp != NULL;) {
        skip_post *sp = *pp;
        if (dv_future_done(&sp->f)) {
            *pp = sp->next;
            free(sp);
        } else {
            pp = &sp->next;
        }
    }
}

/*
 * Rank li's call of a collective was refused before it was posted, so it
 * will not take its step: a stand-in takes it, in the rank's actor's
 * order where the call would have, and fails it on every local rank at
 * once (why: the refusal), so that the ranks' steps stay in line and the
 * next calls meet again.  The caller's error detail is kept.
 */
static void skip_step(dv_nccl_comm *c, int li, dv_stream stream, const dv_error_detail *why)
{
    if (c == NULL || li < 0 || c->nlocal == 1)
        return; /* no meeting to keep in line */
    dv_error_detail saved = *dv_last_error();
    for (int attempt = 0; attempt < 2; attempt++) {
        skip_post *sp = calloc(1, sizeof(*sp));
        ncall *k = calloc(1, sizeof(*k));
        if (sp == NULL || k == NULL) {
            free(sp);
            free(k);
            break;
        }
        k->c = c;
        k->li = li;
        k->stream = attempt == 0 ? stream : 0; /* its stream may be what was refused */
        k->skip = true;
        snprintf(k->skip_why, sizeof(k->skip_why), "%s", why->message);
        dv_future_init(&sp->f, 0);
        bool posted;
        (void)post(k, &sp->f, &posted);
        if (posted) {
            pthread_mutex_lock(&c->mu);
            skips_reap_locked(c);
            sp->next = c->skips;
            c->skips = sp;
            pthread_mutex_unlock(&c->mu);
            break;
        }
        free(sp);
        if (stream == 0)
            break;
    }
    dv_error_set(saved.status, saved.call, saved.requested, saved.remaining, "%s", saved.message);
}

static bool overlap(uint64_t a, uint64_t an, uint64_t b, uint64_t bn)
{
    return an != 0 && bn != 0 && a < b + bn && b < a + an;
}

/* Add buffer b of bytes to k's arguments; its index into *arg. */
static int add_arg(ncall *k, const char *call, const char *name, dv_nccl_buf b, uint64_t bytes,
                   dv_arg_access acc, unsigned es, int *arg)
{
    uint64_t base;
    int rc = dv__lib_operand(call, "nccl_", call, name, b.ref, b.offset, bytes, es, &base);
    if (rc != DV_OK)
        return rc;
    /* Another actor's block would be refused at the task's fencing, after
     * the other ranks took the step: refused here, nothing posted. */
    const rank_state *rs = &k->c->local[k->li];
    if (dv__lib_actor_of(b.ref) != rs->actor)
        return dv_error_set(DV_EINVAL, call, 0, 0,
                            "nccl_%s: buffer %s is a block of another actor, not of rank %d's "
                            "(device %d)",
                            call, name, rs->rank, dv_actor_device(rs->actor));
    if (k->nargs >= DV_LAUNCH_MAX_ARGS)
        return dv_error_set(DV_EINVAL, call, 0, 0,
                            "nccl_%s: a rank's group holds at most %d buffers", call,
                            DV_LAUNCH_MAX_ARGS);
    *arg = (int)k->nargs;
    k->args[k->nargs++] = dv_arg_ref_range(b.ref, acc, b.offset, bytes);
    return DV_OK;
}

/* Check one call of kind x for rank and add it to k (a fresh call or the
 * thread's group part). */
static int add_op(ncall *k, nop *x, dv_nccl_buf send, dv_nccl_buf recv, const char *call)
{
    dv_nccl_comm *c = k->c;
    int rank = c->local[k->li].rank;
    unsigned es = dv_nccl_type_size(x->type);
    uint64_t n = (uint64_t)c->nranks;
    if (x->count > UINT64_MAX / es / n)
        return dv_error_set(DV_EINVAL, call, 0, 0, "nccl_%s: count %llu is too large", call,
                            (unsigned long long)x->count);
    uint64_t one = x->count * es;
    switch (x->k) {
    case K_ALL_REDUCE:
        x->send_bytes = x->recv_bytes = one;
        break;
    case K_REDUCE:
        x->send_bytes = one;
        x->recv_bytes = rank == x->root ? one : 0;
        break;
    case K_BROADCAST:
        x->send_bytes = rank == x->root ? one : 0;
        x->recv_bytes = one;
        break;
    case K_ALL_GATHER:
        x->send_bytes = one;
        x->recv_bytes = one * n;
        break;
    case K_REDUCE_SCATTER:
        x->send_bytes = one * n;
        x->recv_bytes = one;
        break;
    case K_SEND:
        x->send_bytes = one;
        x->recv_bytes = 0;
        break;
    case K_RECV:
        x->send_bytes = 0;
        x->recv_bytes = one;
        break;
    }
    x->arg_send = x->arg_recv = -1;
    x->send_at = x->recv_at = 0;
    /* In place: the same block, send at recv's part of this rank (all-
     * gather), recv at send's part (reduce-scatter), else the same bytes. */
    bool same = x->send_bytes != 0 && x->recv_bytes != 0 && send.ref.bits == recv.ref.bits;
    if (same && overlap(send.offset, x->send_bytes, recv.offset, x->recv_bytes)) {
        uint64_t part = (uint64_t)rank * one;
        bool inplace =
            (x->k == K_ALL_GATHER && send.offset == recv.offset + part) ||
            (x->k == K_REDUCE_SCATTER && recv.offset == send.offset + part) ||
            (x->k != K_ALL_GATHER && x->k != K_REDUCE_SCATTER && send.offset == recv.offset);
        if (!inplace)
            return dv_error_set(DV_EINVAL, call, 0, 0,
                                "nccl_%s: send (byte %llu) and recv (byte %llu) share bytes of "
                                "one block without being in place",
                                call, (unsigned long long)send.offset,
                                (unsigned long long)recv.offset);
        bool outer_recv = x->k == K_ALL_GATHER;
        dv_nccl_buf whole = outer_recv ? recv : send;
        int rc =
            add_arg(k, call, outer_recv ? "recv" : "send", whole,
                    outer_recv ? x->recv_bytes : x->send_bytes, DV_READ_WRITE, es, &x->arg_send);
        if (rc != DV_OK)
            return rc;
        x->arg_recv = x->arg_send;
        x->send_at = send.offset - whole.offset;
        x->recv_at = recv.offset - whole.offset;
        return DV_OK;
    }
    if (x->send_bytes != 0) {
        int rc = add_arg(k, call, "send", send, x->send_bytes, DV_READ, es, &x->arg_send);
        if (rc != DV_OK)
            return rc;
    }
    if (x->recv_bytes != 0) {
        int rc = add_arg(k, call, "recv", recv, x->recv_bytes, DV_WRITE, es, &x->arg_recv);
        if (rc != DV_OK)
            return rc;
    }
    return DV_OK;
}

static int call_common(dv_nccl_comm *c, int rank, dv_stream stream, kind kd, dv_nccl_buf send,
                       dv_nccl_buf recv, uint64_t count, dv_nccl_type type, dv_nccl_op op, int root,
                       int peer, dv_future *f, bool *posted)
{
    *posted = false;
    const char *call = kind_names[kd];
    int rc = DV_OK;
    int li = -1;
    if (c == NULL)
        rc = dv_error_set(DV_EINVAL, call, 0, 0, "nccl_%s: NULL communicator", call);
    else if ((li = li_of(c, rank)) < 0)
        rc = dv_error_set(DV_EINVAL, call, 0, 0,
                          "nccl_%s: rank %d is not one of this process's ranks of the "
                          "communicator (%d ranks)",
                          call, rank, c->nranks);
    else if (dv_nccl_type_size(type) == 0)
        rc = dv_error_set(DV_EINVAL, call, 0, 0, "nccl_%s: unknown type %d", call, (int)type);
    else if ((kd == K_ALL_REDUCE || kd == K_REDUCE || kd == K_REDUCE_SCATTER) &&
             ((int)op < DV_NCCL_SUM || (int)op > DV_NCCL_AVG))
        rc = dv_error_set(DV_EINVAL, call, 0, 0, "nccl_%s: unknown reduction %d", call, (int)op);
    else if ((kd == K_REDUCE || kd == K_BROADCAST) && (root < 0 || root >= c->nranks))
        rc = dv_error_set(DV_EINVAL, call, 0, 0, "nccl_%s: root %d is not a rank (0..%d)", call,
                          root, c->nranks - 1);
    else if ((kd == K_SEND || kd == K_RECV) && (peer < 0 || peer >= c->nranks || peer == rank))
        rc = dv_error_set(DV_EINVAL, call, 0, 0,
                          "nccl_%s: peer %d is not another rank (0..%d, not %d)", call, peer,
                          c->nranks - 1, rank);
    else if (group_depth > 0 && f != NULL)
        rc = dv_error_set(DV_EINVAL, call, 0, 0,
                          "nccl_%s: a call in a group takes no future (group_end waits)", call);
    else
        rc = dv__lib_no_wait(call); /* it waits, at least for room to post */
    if (rc == DV_OK) {
        pthread_mutex_lock(&c->mu);
        check_health_locked(c);
        rc = status_of_locked(c, call);
        pthread_mutex_unlock(&c->mu);
    }
    if (rc != DV_OK || count == 0) {
        if (f != NULL && dv_future_fail(f, rc) != rc)
            return DV_EINVAL;
        return rc;
    }
    ncall *k = NULL;
    bool fresh = true;
    if (group_depth > 0) {
        for (int i = 0; i < group_n; i++)
            if (group_parts[i]->c == c && group_parts[i]->li == li) {
                k = group_parts[i];
                fresh = false;
            }
        if (k != NULL && k->stream != stream)
            return dv_error_set(DV_EINVAL, call, 0, 0,
                                "nccl_%s: rank %d's calls in one group use one stream (%u, "
                                "not %u)",
                                call, rank, k->stream, stream);
        if (k != NULL && k->nops >= MAX_OPS)
            return dv_error_set(DV_EINVAL, call, 0, 0,
                                "nccl_%s: a rank's group holds at most %d calls", call, MAX_OPS);
    }
    if (k == NULL) {
        k = calloc(1, sizeof(*k));
        if (k == NULL) {
            rc = dv_error_set(DV_ENOMEM, call, sizeof(*k), 0, "nccl_%s: out of host memory", call);
            if (f != NULL)
                (void)dv_future_fail(f, rc);
            return rc;
        }
        k->c = c;
        k->li = li;
        k->stream = stream;
    }
    nop x = {.k = kd, .type = type, .op = op, .root = root, .peer = peer, .count = count};
    unsigned nargs = k->nargs;
    rc = add_op(k, &x, send, recv, call);
    if (rc != DV_OK) {
        k->nargs = nargs; /* the group's part is as it was */
        if (fresh)
            free(k);
        if (f != NULL)
            (void)dv_future_fail(f, rc);
        return rc;
    }
    k->ops[k->nops++] = x;
    if (group_depth == 0)
        return post(k, f, posted);
    if (fresh) {
        if (group_n == group_cap) {
            int cap = group_cap ? group_cap * 2 : 8;
            ncall **p = realloc(group_parts, sizeof(*p) * (size_t)cap);
            if (p == NULL) {
                free(k);
                return dv_error_set(DV_ENOMEM, call, 0, 0, "nccl_%s: out of host memory", call);
            }
            group_parts = p;
            group_cap = cap;
        }
        group_parts[group_n++] = k;
    }
    return DV_OK;
}

/* In a group, a refused call spoils the group: group_end posts nothing
 * and answers the first refusal (the other ranks would otherwise wait at
 * the meeting for a part that never comes). */
static int call_checked(dv_nccl_comm *c, int rank, dv_stream stream, kind kd, dv_nccl_buf send,
                        dv_nccl_buf recv, uint64_t count, dv_nccl_type type, dv_nccl_op op,
                        int root, int peer, dv_future *f)
{
    bool posted;
    int rc = call_common(c, rank, stream, kd, send, recv, count, type, op, root, peer, f, &posted);
    if (rc == DV_OK || posted)
        return rc;
    bool coll = kd != K_SEND && kd != K_RECV;
    int li = c != NULL ? li_of(c, rank) : -1;
    if (group_depth == 0) {
        /* Refused before it was posted: the rank's step is still taken. */
        if (coll) {
            dv_error_detail d = *dv_last_error();
            skip_step(c, li, stream, &d);
        }
    } else if (group_rc == DV_OK) {
        group_rc = rc;
        group_err = *dv_last_error();
        group_refused_c = c;
        group_refused_li = li;
        group_refused_stream = stream;
    }
    return rc;
}

int dv_nccl_all_reduce(dv_nccl_comm *c, int rank, dv_stream stream, dv_nccl_buf send,
                       dv_nccl_buf recv, uint64_t count, dv_nccl_type type, dv_nccl_op op,
                       dv_future *f)
{
    return call_checked(c, rank, stream, K_ALL_REDUCE, send, recv, count, type, op, 0, -1, f);
}

int dv_nccl_reduce(dv_nccl_comm *c, int rank, dv_stream stream, dv_nccl_buf send, dv_nccl_buf recv,
                   uint64_t count, dv_nccl_type type, dv_nccl_op op, int root, dv_future *f)
{
    return call_checked(c, rank, stream, K_REDUCE, send, recv, count, type, op, root, -1, f);
}

int dv_nccl_broadcast(dv_nccl_comm *c, int rank, dv_stream stream, dv_nccl_buf send,
                      dv_nccl_buf recv, uint64_t count, dv_nccl_type type, int root, dv_future *f)
{
    return call_checked(c, rank, stream, K_BROADCAST, send, recv, count, type, DV_NCCL_SUM, root,
                        -1, f);
}

int dv_nccl_all_gather(dv_nccl_comm *c, int rank, dv_stream stream, dv_nccl_buf send,
                       dv_nccl_buf recv, uint64_t count, dv_nccl_type type, dv_future *f)
{
    return call_checked(c, rank, stream, K_ALL_GATHER, send, recv, count, type, DV_NCCL_SUM, 0, -1,
                        f);
}

int dv_nccl_reduce_scatter(dv_nccl_comm *c, int rank, dv_stream stream, dv_nccl_buf send,
                           dv_nccl_buf recv, uint64_t count, dv_nccl_type type, dv_nccl_op op,
                           dv_future *f)
{
    return call_checked(c, rank, stream, K_REDUCE_SCATTER, send, recv, count, type, op, 0, -1, f);
}

int dv_nccl_send(dv_nccl_comm *c, int rank, dv_stream stream, dv_nccl_buf send, uint64_t count,
                 dv_nccl_type type, int peer, dv_future *f)
{
    return call_checked(c, rank, stream, K_SEND, send, dv_nccl_at(DV_REF_NULL, 0), count, type,
                        DV_NCCL_SUM, 0, peer, f);
}

int dv_nccl_recv(dv_nccl_comm *c, int rank, dv_stream stream, dv_nccl_buf recv, uint64_t count,
                 dv_nccl_type type, int peer, dv_future *f)
{
    return call_checked(c, rank, stream, K_RECV, dv_nccl_at(DV_REF_NULL, 0), recv, count, type,
                        DV_NCCL_SUM, 0, peer, f);
}

/* The thread's list goes with its outermost group: none is left behind
 * when the thread exits. */
static void group_forget(void)
{
    free(group_parts);
    group_parts = NULL;
    group_cap = 0;
}

int dv_nccl_group_start(void)
{
    if (group_depth == INT_MAX)
        return dv_error_set(DV_EINVAL, "group_start", 0, 0, "nccl_group_start: nested too deep");
    group_depth++;
    return DV_OK;
}

int dv_nccl_group_end(void)
{
    if (group_depth == 0)
        return dv_error_set(DV_EINVAL, "group_end", 0, 0,
                            "nccl_group_end: no group was started on this thread");
    if (--group_depth > 0)
        return DV_OK;
    int n = group_n;
    group_n = 0;
    if (group_rc != DV_OK) {
        int rc = group_rc;
        group_rc = DV_OK;
        /* Nothing is posted: each rank with a part (and the refused
         * call's) still takes its step, failing it. */
        bool refused_has_part = false;
        for (int i = 0; i < n; i++) {
            ncall *k = group_parts[i];
            refused_has_part |= k->c == group_refused_c && k->li == group_refused_li;
            if (coll_index(k->ops, k->nops, 0) >= 0)
                skip_step(k->c, k->li, k->stream, &group_err);
            free(k);
        }
        if (!refused_has_part)
            skip_step(group_refused_c, group_refused_li, group_refused_stream, &group_err);
        group_refused_c = NULL;
        group_refused_li = -1;
        group_forget();
        return dv_error_set(rc, group_err.call, group_err.requested, group_err.remaining,
                            "nccl_group_end: nothing posted: a call in the group was refused: %s",
                            group_err.message);
    }
    if (n == 0)
        return DV_OK;
    int rc = dv__lib_no_wait("group_end");
    dv_future *fs = rc == DV_OK ? calloc((size_t)n, sizeof(*fs)) : NULL;
    if (fs == NULL) {
        if (rc == DV_OK)
            rc = dv_error_set(DV_ENOMEM, "group_end", 0, 0, "nccl_group_end: out of host memory");
        for (int i = 0; i < n; i++)
            free(group_parts[i]);
        group_forget();
        return rc;
    }
    /* Every rank's part is posted before any is waited for: one thread
     * may drive every rank. */
    bool *posted = calloc((size_t)n, sizeof(bool));
    for (int i = 0; i < n; i++) {
        dv_future_init(&fs[i], 0);
        ncall *k = group_parts[i];
        dv_nccl_comm *kc = k->c;
        int kli = k->li;
        dv_stream ks = k->stream;
        bool coll = coll_index(k->ops, k->nops, 0) >= 0, was_posted;
        int prc = post(k, &fs[i], &was_posted); /* frees k when refused */
        if (!was_posted && coll) {
            dv_error_detail d = *dv_last_error();
            skip_step(kc, kli, ks, &d);
        }
        if (posted != NULL)
            posted[i] = prc == DV_OK;
        if (prc != DV_OK && rc == DV_OK)
            rc = prc;
    }
    dv_error_detail first = *dv_last_error();
    for (int i = 0; i < n; i++) {
        if (posted != NULL && !posted[i])
            continue;
        int w = dv_future_wait(&fs[i]);
        if (w != DV_OK && rc == DV_OK) {
            rc = w;
            first = *dv_last_error();
        }
    }
    free(posted);
    free(fs);
    group_forget();
    if (rc != DV_OK)
        dv_error_set(rc, first.call, first.requested, first.remaining, "%s", first.message);
    return rc;
}

/* ------------------------------------------------------------------------
 * Making and destroying communicators
 * ------------------------------------------------------------------------ */

typedef struct init_job {
    dv_nccl_comm *c;
    int li;
    nccl_uid id;
} init_job;

static int init_task(const dv_task_ctx *ctx, void *user)
{
    init_job *j = user;
    dv_nccl_comm *c = j->c;
    rank_state *rs = &c->local[j->li];
    /* Under c->mu: the other ranks' meetings look at every rank's. */
    pthread_mutex_lock(&c->mu);
    rs->gen = ctx->context_generation;
    rs->driver = ctx->driver_context;
    int rc = DV_OK;
    if (c->meet_at_init) {
        /* Every local rank's actor is here before any enters NCCL: in the
         * blocking mode a rank that never came would hold the others
         * inside ncclCommInitRank for ever. */
        static ncall creation; /* no calls: every rank agrees */
        rc = meet(c, j->li, INIT_STEP, &creation, c->call);
    }
    pthread_mutex_unlock(&c->mu);
    if (rc != DV_OK)
        return rc;
    if (!c->cuda)
        return DV_OK;
    nccl_comm_t nc = NULL;
    int r;
    bool nonblocking = false;
    if (lib.init_rank_config != NULL) {
        nccl_config cfg = {sizeof(cfg),    NCCL_CONFIG_MAGIC, NCCL_CONFIG_VERSION, c->blocking,
                           NCCL_UNDEF_INT, NCCL_UNDEF_INT,    NCCL_UNDEF_INT,      NULL};
        r = lib.init_rank_config(&nc, c->nranks, j->id, rs->rank, &cfg);
        nonblocking = !c->blocking;
        if (r == NCCL_INVALID_ARGUMENT && nc == NULL) {
            r = lib.init_rank(&nc, c->nranks, j->id, rs->rank);
            nonblocking = false;
        }
    } else {
        r = lib.init_rank(&nc, c->nranks, j->id, rs->rank);
    }
    uint64_t deadline = deadline_after(c->timeout_ns);
    while (nonblocking && r == NCCL_IN_PROGRESS) {
        if (now_ns() >= deadline) {
            (void)lib.abort(nc);
            return dv_error_set(DV_ETIMEDOUT, c->call, 0, 0,
                                "nccl_%s: rank %d: not every rank joined within %s", c->call,
                                rs->rank, span_text(c->timeout_ns, (char[32]){0}));
        }
        usleep(200);
        int a = NCCL_OK;
        (void)lib.async_error(nc, &a);
        r = a;
    }
    if (r != NCCL_OK) {
        rc = nccl_failed(r, nc, c->call, "ncclCommInitRank");
        if (nc != NULL)
            (void)lib.abort(nc);
        return rc;
    }
    rs->nc = nc;
    return DV_OK;
}

/* Each rank's end of its communicator, on its actor.  NCCL's destroy may
 * wait there for the other local ranks' (it finalizes the communicator
 * with its peers); the sim's ranks wait for one another the same way, up
 * to the timeout, so that a destroy posted in different orders on the
 * actors shows on the sim as it would on GPUs. */
static int destroy_task(const dv_task_ctx *ctx, void *user)
{
    init_job *j = user;
    if (j == NULL)
        return DV_OK; /* a barrier: what was queued before ran */
    dv_nccl_comm *c = j->c;
    rank_state *rs = &c->local[j->li];
    if (!c->cuda) {
        static ncall ending; /* no calls: every rank agrees */
        pthread_mutex_lock(&c->mu);
        (void)meet(c, j->li, DESTROY_STEP, &ending, "comm_destroy");
        pthread_mutex_unlock(&c->mu);
        return DV_OK;
    }
    if (rs->nc != NULL && ctx->driver_context == rs->driver)
        (void)lib.destroy(rs->nc);
    rs->nc = NULL;
    return DV_OK;
}

static void comm_free(dv_nccl_comm *c)
{
    while (c->skips != NULL) {
        skip_post *sp = c->skips;
        c->skips = sp->next;
        (void)dv_future_wait(&sp->f); /* its task is over: done soon, if not already */
        free(sp);
    }
    while (c->steps != NULL) {
        lstep *s = c->steps;
        c->steps = s->next;
        free(s);
    }
    while (c->inflight != NULL) {
        ncall *k = c->inflight;
        c->inflight = k->next;
        free(k);
    }
    if (c->world != NULL)
        world_put(c->world);
    pthread_cond_destroy(&c->watch_cv);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static void sim_id(unsigned char *bytes)
{
    static _Atomic uint64_t counter;
    uint64_t words[4] = {UINT64_C(0x6476736e63636c00) /* "dvsnccl" */, (uint64_t)getpid(), now_ns(),
                         atomic_fetch_add(&counter, 1) + 1};
    memset(bytes, 0, DV_NCCL_ID_BYTES);
    memcpy(bytes, words, sizeof(words));
}

int dv_nccl_id_make(dv_actor *actor, dv_nccl_id *id)
{
    if (actor == NULL || id == NULL)
        return dv_error_set(DV_EINVAL, "id_make", 0, 0, "nccl_id_make: NULL %s",
                            actor == NULL ? "actor" : "id");
    int here = dv__lib_here(actor, "id_make");
    if (here != DV_OK)
        return here;
    if (strcmp(dv_actor_backend_name(actor), "cuda") != 0) {
        sim_id(id->bytes);
        return DV_OK;
    }
    int rc = need_lib("id_make");
    if (rc != DV_OK)
        return rc;
    nccl_uid u;
    int r = lib.get_unique_id(&u);
    if (r != NCCL_OK)
        return nccl_failed(r, NULL, "id_make", "ncclGetUniqueId");
    memcpy(id->bytes, u.internal, DV_NCCL_ID_BYTES);
    return DV_OK;
}

int dv_nccl_id_format(const dv_nccl_id *id, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    if (id == NULL || out == NULL || cap < DV_NCCL_ID_HEX)
        return dv_error_set(DV_EINVAL, "id_format", DV_NCCL_ID_HEX, cap, "nccl_id_format: %s",
                            id == NULL    ? "NULL id"
                            : out == NULL ? "NULL out"
                                          : "out has room for less than 257 bytes");
    for (int i = 0; i < DV_NCCL_ID_BYTES; i++) {
        out[2 * i] = hex[id->bytes[i] >> 4];
        out[2 * i + 1] = hex[id->bytes[i] & 15];
    }
    out[DV_NCCL_ID_HEX - 1] = '\0';
    return DV_OK;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int dv_nccl_id_parse(dv_nccl_id *id, const char *text)
{
    if (id == NULL || text == NULL)
        return dv_error_set(DV_EINVAL, "id_parse", 0, 0, "nccl_id_parse: NULL %s",
                            id == NULL ? "id" : "text");
    dv_nccl_id got;
    size_t i = 0;
    for (; text[i] != '\0' && i < DV_NCCL_ID_HEX - 1; i += 2) {
        int hi = hex_digit(text[i]), lo = text[i + 1] != '\0' ? hex_digit(text[i + 1]) : -1;
        if (hi < 0 || lo < 0)
            return dv_error_set(DV_EINVAL, "id_parse", 0, 0,
                                "nccl_id_parse: not a hex digit at character %zu",
                                hi < 0 ? i : i + 1);
        got.bytes[i / 2] = (unsigned char)(hi << 4 | lo);
    }
    if (i != DV_NCCL_ID_HEX - 1 || text[i] != '\0')
        return dv_error_set(DV_EINVAL, "id_parse", 0, 0,
                            "nccl_id_parse: an id is %d hex digits, not %zu", DV_NCCL_ID_HEX - 1,
                            strlen(text));
    *id = got;
    return DV_OK;
}

/*
 * NCCL's mode.  Since NCCL 2.23 every group a non-blocking communicator
 * ends starts a thread that does the enqueue while the caller polls: on
 * two H100s that made an 8-byte all-reduce 6-7x the direct call's time
 * and a 1 MiB one 6x.  So a communicator whose ranks are all in this
 * process runs in the blocking mode: its ranks meet on their actors
 * before creation (meet_at_init) and before every step, so none of them
 * waits inside NCCL for a rank that never comes.  One that spans
 * processes stays non-blocking: a remote rank that never joins is
 * bounded there only by polling under the timeout.  DV_NCCL_BLOCKING=1
 * or =0 asks for one mode for every communicator.
 */

/*
 * Creations and destroys of communicators whose ranks are all in this
 * process take turns, one at a time: each posts a task to every rank's
 * actor, and those tasks wait on the actors for one another (the meeting
 * before creation; NCCL's destroy, which finalizes with the peers), so
 * two of them posted in different orders on two actors would hold one
 * actor each.  A creation waits for another creation at most its
 * timeout; a destroy under way is waited for without spending it (its
 * tasks run first on the same actors, and end).
 */
static pthread_mutex_t local_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t local_cv;
static pthread_once_t local_once = PTHREAD_ONCE_INIT;
static int local_turn; /* 0 free, 1 a creation's, 2 a destroy's */

static void local_cv_init(void)
{
    cond_init(&local_cv);
}

/* A creation's turn: DV_OK, or DV_ETIMEDOUT after timeout_ns behind
 * other creations. */
static int local_turn_create(uint64_t timeout_ns)
{
    pthread_once(&local_once, local_cv_init);
    pthread_mutex_lock(&local_mu);
    uint64_t deadline = deadline_after(timeout_ns);
    while (local_turn != 0) {
        if (local_turn == 2) {
            pthread_cond_wait(&local_cv, &local_mu);
            deadline = deadline_after(timeout_ns); /* counted from its end */
        } else if (wait_until(&local_cv, &local_mu, deadline, 0) && local_turn == 1) {
            pthread_mutex_unlock(&local_mu);
            return DV_ETIMEDOUT;
        }
    }
    local_turn = 1;
    pthread_mutex_unlock(&local_mu);
    return DV_OK;
}

/* A destroy's turn: after any creation under way (bounded by its
 * timeout) and any other destroy. */
static void local_turn_destroy(void)
{
    pthread_once(&local_once, local_cv_init);
    pthread_mutex_lock(&local_mu);
    while (local_turn != 0)
        pthread_cond_wait(&local_cv, &local_mu);
    local_turn = 2;
    pthread_mutex_unlock(&local_mu);
}

static void local_turn_end(void)
{
    pthread_mutex_lock(&local_mu);
    local_turn = 0;
    pthread_cond_broadcast(&local_cv);
    pthread_mutex_unlock(&local_mu);
}

static bool blocking_mode(int nranks, int nlocal)
{
    const char *e = getenv("DV_NCCL_BLOCKING");
    if (e != NULL && (e[0] == '0' || e[0] == '1') && e[1] == '\0')
        return e[0] == '1';
    return nranks == nlocal;
}

/* dv_nccl_comm_join, answering as call (comm_join, or comm_create). */
static int comm_join_as(const char *call, dv_actor *const *actors, const int *ranks, int nlocal,
                        int nranks, const dv_nccl_id *id, uint64_t timeout_ns, dv_nccl_comm **out)
{
    if (out != NULL)
        *out = NULL;
    if (actors == NULL || ranks == NULL || id == NULL || out == NULL)
        return dv_error_set(DV_EINVAL, call, 0, 0, "nccl_%s: NULL %s", call,
                            actors == NULL  ? "actors"
                            : ranks == NULL ? "ranks"
                            : id == NULL    ? "id"
                                            : "out");
    if (nlocal < 1 || nlocal > DV_MAX_DEVICES || nranks < nlocal)
        return dv_error_set(DV_EINVAL, call, 0, 0,
                            "nccl_%s: %d local ranks of %d (1..%d local, no more than "
                            "all)", call,
                            nlocal, nranks, DV_MAX_DEVICES);
    int rc = dv__lib_no_wait(call);
    if (rc != DV_OK)
        return rc;
    bool cuda = false;
    for (int i = 0; i < nlocal; i++) {
        if (actors[i] == NULL)
            return dv_error_set(DV_EINVAL, call, 0, 0, "nccl_%s: actor %d is NULL", call, i);
        if ((rc = dv__lib_here(actors[i], call)) != DV_OK)
            return rc;
        bool is_cuda = strcmp(dv_actor_backend_name(actors[i]), "cuda") == 0;
        if (i == 0)
            cuda = is_cuda;
        else if (is_cuda != cuda)
            return dv_error_set(DV_EINVAL, call, 0, 0,
                                "nccl_%s: actors 0 and %d have different backends", call, i);
        if (ranks[i] < 0 || ranks[i] >= nranks)
            return dv_error_set(DV_EINVAL, call, 0, 0, "nccl_%s: rank %d is not in 0..%d", call,
                                ranks[i], nranks - 1);
        for (int j = 0; j < i; j++) {
            if (ranks[j] == ranks[i])
                return dv_error_set(DV_EINVAL, call, 0, 0, "nccl_%s: rank %d twice", call,
                                    ranks[i]);
            if (actors[j] == actors[i] ||
                (cuda && dv_actor_device(actors[j]) == dv_actor_device(actors[i])))
                return dv_error_set(DV_EINVAL, call, 0, 0,
                                    "nccl_%s: ranks %d and %d are on one device (%d)", call,
                                    ranks[j], ranks[i], dv_actor_device(actors[i]));
        }
    }
    if (cuda && (rc = need_lib(call)) != DV_OK)
        return rc;
    if (!cuda && nranks > DV_MAX_DEVICES * 64)
        return dv_error_set(DV_EINVAL, call, 0, 0,
                            "nccl_%s: %d ranks; the sim's communicators have at most %d", call,
                            nranks, DV_MAX_DEVICES * 64);
    dv_nccl_comm *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return dv_error_set(DV_ENOMEM, call, sizeof(*c), 0, "nccl_%s: out of host memory", call);
    c->cuda = cuda;
    c->blocking = blocking_mode(nranks, nlocal);
    c->meet_at_init = nranks == nlocal && nlocal > 1;
    c->call = call;
    c->nranks = nranks;
    c->nlocal = nlocal;
    c->timeout_ns = timeout_ns != 0 ? timeout_ns : DEFAULT_TIMEOUT_NS;
    c->status = DV_OK;
    pthread_mutex_init(&c->mu, NULL);
    cond_init(&c->cv);
    cond_init(&c->watch_cv);
    for (int i = 0; i < nlocal; i++) {
        c->local[i].actor = actors[i];
        c->local[i].uid = dv__lib_actor_uid(actors[i]);
        c->local[i].device = dv_actor_device(actors[i]);
        c->local[i].rank = ranks[i];
    }
    if (!cuda) {
        c->world = world_get(id->bytes, nranks, c->timeout_ns);
        if (c->world == NULL) {
            comm_free(c);
            return dv_error_set(DV_EINVAL, call, 0, 0,
                                "nccl_%s: the id names a communicator of another size, "
                                "or out of host memory", call);
        }
    }
    /* Every local rank's communicator at once, each on its actor.  Two
     * such creations over the same actors at once could each hold one
     * actor at their meetings while the other's part waits behind it:
     * communicators of local ranks are made one at a time. */
    bool serial = c->meet_at_init;
    if (serial && local_turn_create(c->timeout_ns) != DV_OK) {
        rc = dv_error_set(DV_ETIMEDOUT, call, 0, 0,
                          "nccl_%s: another creation of a communicator of this process's "
                          "ranks did not end within %s",
                          call, span_text(c->timeout_ns, (char[32]){0}));
        comm_free(c);
        return rc;
    }
    init_job jobs[DV_MAX_DEVICES];
    dv_future fs[DV_MAX_DEVICES];
    bool posted[DV_MAX_DEVICES] = {false};
    dv_error_detail first = {0};
    for (int i = 0; i < nlocal; i++) {
        /* The generation each rank starts from (its task sets it again):
         * a meeting's look at the actors must not take a rank whose task
         * has not run yet for one whose context was rebuilt. */
        dv_actor_health h;
        if (dv_actor_health_get(actors[i], &h) == DV_OK)
            c->local[i].gen = h.context_generation;
    }
    for (int i = 0; i < nlocal; i++) {
        jobs[i].c = c;
        jobs[i].li = i;
        memcpy(jobs[i].id.internal, id->bytes, DV_NCCL_ID_BYTES);
        dv_future_init(&fs[i], 0);
        int prc = dv_task_async(actors[i], init_task, &jobs[i], 0, NULL, 0, &fs[i]);
        posted[i] = prc == DV_OK;
        if (prc != DV_OK && rc == DV_OK) {
            rc = prc;
            first = *dv_last_error();
            /* Which rank: every actor of dv_actor_create may be device 0. */
            char msg[sizeof(first.message)];
            snprintf(msg, sizeof(msg), "nccl_%s: rank %d's actor: %.200s", call, ranks[i],
                     first.message);
            memcpy(first.message, msg, sizeof(msg));
            /* The ranks posted already do not wait at the meeting for it. */
            pthread_mutex_lock(&c->mu);
            if (c->status == DV_OK) {
                c->status = prc;
                snprintf(c->why, sizeof(c->why), "%.200s", first.message);
            }
            pthread_cond_broadcast(&c->cv);
            pthread_mutex_unlock(&c->mu);
        }
    }
    for (int i = 0; i < nlocal; i++) {
        if (!posted[i])
            continue;
        int w = dv_future_wait(&fs[i]);
        if (w != DV_OK && rc == DV_OK) {
            rc = w;
            first = *dv_last_error();
        }
    }
    if (rc == DV_OK && !cuda) {
        /* The sim's ranks meet in this process: wait for all of them. */
        sim_world *w = c->world;
        pthread_mutex_lock(&w->mu);
        for (int i = 0; i < nlocal && rc == DV_OK; i++)
            if (w->joined_ranks[ranks[i] / 64] >> (ranks[i] % 64) & 1)
                rc = dv_error_set(DV_EINVAL, call, 0, 0,
                                  "nccl_%s: rank %d of this id joined already", call, ranks[i]);
        if (rc != DV_OK) {
            first = *dv_last_error();
            pthread_mutex_unlock(&w->mu);
            goto failed;
        }
        for (int i = 0; i < nlocal; i++)
            w->joined_ranks[ranks[i] / 64] |= UINT64_C(1) << (ranks[i] % 64);
        w->joined += nlocal;
        pthread_cond_broadcast(&w->cv);
        uint64_t deadline = deadline_after(c->timeout_ns);
        while (w->joined < w->nranks && !wait_until(&w->cv, &w->mu, deadline, 0))
            ;
        if (w->joined < w->nranks) {
            rc = dv_error_set(DV_ETIMEDOUT, call, 0, 0,
                              "nccl_%s: %d of %d ranks joined within %s", call, w->joined,
                              w->nranks, span_text(c->timeout_ns, (char[32]){0}));
            first = *dv_last_error();
            w->joined -= nlocal;
            for (int i = 0; i < nlocal; i++)
                w->joined_ranks[ranks[i] / 64] &= ~(UINT64_C(1) << (ranks[i] % 64));
        }
        pthread_mutex_unlock(&w->mu);
    }
failed:
    if (serial)
        local_turn_end();
    if (rc != DV_OK) {
        for (int i = 0; i < nlocal; i++)
            if (c->local[i].nc != NULL)
                (void)lib.abort(c->local[i].nc);
        comm_free(c);
        if (first.message[0] != '\0')
            dv_error_set(rc, first.call, first.requested, first.remaining, "%s", first.message);
        return rc;
    }
    if (pthread_create(&c->watch, NULL, watch_main, c) == 0)
        c->watching = true;
    *out = c;
    return DV_OK;
}

int dv_nccl_comm_join(dv_actor *const *actors, const int *ranks, int nlocal, int nranks,
                      const dv_nccl_id *id, uint64_t timeout_ns, dv_nccl_comm **out)
{
    return comm_join_as("comm_join", actors, ranks, nlocal, nranks, id, timeout_ns, out);
}

int dv_nccl_comm_create(dv_actor *const *actors, int n, uint64_t timeout_ns, dv_nccl_comm **out)
{
    static const char call[] = "comm_create";
    if (out != NULL)
        *out = NULL;
    if (actors == NULL || out == NULL)
        return dv_error_set(DV_EINVAL, call, 0, 0, "nccl_comm_create: NULL %s",
                            actors == NULL ? "actors" : "out");
    if (n < 1 || n > DV_MAX_DEVICES)
        return dv_error_set(DV_EINVAL, call, 0, 0, "nccl_comm_create: %d actors (1..%d)", n,
                            DV_MAX_DEVICES);
    if (actors[0] == NULL)
        return dv_error_set(DV_EINVAL, call, 0, 0, "nccl_comm_create: actor 0 is NULL");
    dv_nccl_id id;
    int rc = dv_nccl_id_make(actors[0], &id);
    if (rc != DV_OK)
        return rc;
    int ranks[DV_MAX_DEVICES];
    for (int i = 0; i < n; i++)
        ranks[i] = i;
    return comm_join_as(call, actors, ranks, n, n, &id, timeout_ns, out);
}

void dv_nccl_comm_destroy(dv_nccl_comm *c)
{
    if (c == NULL || dv__lib_no_wait("comm_destroy") != DV_OK)
        return;
    if (c->watching) {
        pthread_mutex_lock(&c->mu);
        c->stop = true;
        pthread_cond_broadcast(&c->watch_cv);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->watch, NULL);
        c->watching = false;
    }
    /* Tasks posted and not over yet (other threads', queued or at the
     * meeting) hold their calls and c: wait for them while their actors
     * can still run them. */
    pthread_mutex_lock(&c->mu);
    /* A task taken late still meets for up to the timeout. */
    uint64_t deadline =
        deadline_after(c->timeout_ns > UINT64_MAX / 2 ? UINT64_MAX : 2 * c->timeout_ns);
    bool runnable = false;
    for (;;) {
        runnable = false;
        for (ncall *k = c->inflight; k != NULL && !runnable; k = k->next) {
            dv_actor_health h;
            rank_state *rs = &c->local[k->li];
            runnable = dv__lib_actor_health(rs->actor, rs->uid, &h) &&
                       (h.state == DV_ACTOR_RUNNING || h.state == DV_ACTOR_REBUILDING);
        }
        if (!runnable || wait_until(&c->cv, &c->mu, deadline, WATCH_PERIOD_MS))
            break;
    }
    check_health_locked(c);
    bool healthy = c->status == DV_OK;
    /* An actor shut down, or destroyed before its communicator, is not
     * posted to (nor read) again. */
    bool live[DV_MAX_DEVICES];
    for (int i = 0; i < c->nlocal; i++) {
        dv_actor_health h;
        live[i] = dv__lib_actor_health(c->local[i].actor, c->local[i].uid, &h);
    }
    pthread_mutex_unlock(&c->mu);
    if (runnable) {
        /* A task that may still run would find c freed: leave it (and
         * say so) rather than free it under that task. */
        /* Still c: watched again, and destroyed by a later call. */
        c->stop = false;
        if (pthread_create(&c->watch, NULL, watch_main, c) == 0)
            c->watching = true;
        (void)dv_error_set(DV_ETIMEDOUT, "comm_destroy", 0, 0,
                           "nccl_comm_destroy: calls still queued after %s; the "
                           "communicator is left allocated",
                           span_text(c->timeout_ns > UINT64_MAX / 2 ? UINT64_MAX
                                                                    : 2 * c->timeout_ns,
                                     (char[32]){0}));
        return;
    }
    /* The streams that ran collectives, then every rank's communicator at
     * once (NCCL may need its peers for that); on the sim a task on each
     * actor, so that nothing of c runs there after it. */
    for (int i = 0; i < c->nlocal; i++) {
        uint64_t used = live[i] ? atomic_load(&c->local[i].streams_used) : 0;
        for (unsigned s = 0; s < NSTREAMS; s++)
            if (used & (UINT64_C(1) << s))
                (void)dv_sync(c->local[i].actor, s);
    }
    /* Each rank's destroy may wait on its actor for the others': in its
     * turn (local_turn), so that no actor waits in one communicator's
     * end (or creation) for a rank whose part is queued behind
     * another's. */
    dv_future fs[DV_MAX_DEVICES];
    bool posted[DV_MAX_DEVICES] = {false};
    init_job jobs[DV_MAX_DEVICES];
    bool all = true;
    for (int i = 0; i < c->nlocal; i++)
        all = all && live[i];
    if (c->meet_at_init)
        local_turn_destroy();
    for (int i = 0; i < c->nlocal; i++) {
        jobs[i].c = c;
        jobs[i].li = i;
        dv_future_init(&fs[i], 0);
        /* On the sim the ranks meet: only where every one will come. */
        bool ends = healthy && (c->cuda || all);
        posted[i] = live[i] && dv_task_async(c->local[i].actor, destroy_task,
                                             ends ? &jobs[i] : NULL, 0, NULL, 0,
                                             &fs[i]) == DV_OK;
    }
    for (int i = 0; i < c->nlocal; i++)
        if (posted[i])
            (void)dv_future_wait(&fs[i]);
    if (c->meet_at_init)
        local_turn_end();
    /* Whatever was not destroyed on its actor is aborted from here. */
    for (int i = 0; c->cuda && i < c->nlocal; i++)
        if (c->local[i].nc != NULL) {
            (void)lib.abort(c->local[i].nc);
            c->local[i].nc = NULL;
        }
    /* Calls still listed belong to actors that will not run them. */
    comm_free(c);
}
