/*
 * A fault-injection matrix over the actor, on the sim.
 *
 * One representative workload (the steps in step_names below: create,
 * kernels, an event, a bystander block, allocations, copies htod and dtod,
 * a memset, a tracked launch of a built-in kernel, a task that launches and
 * enqueues a host function, events recorded, waited on by another stream
 * and synchronised, readbacks, syncs, releases, stats, a reset, a round
 * trip after it, a probe, destroy) runs once per cell, with a fresh sim
 * driver and a fresh actor, each cell in a child process of its own: a
 * crash or a hang fails that cell, not the program.  The cells:
 *
 *   control   no fault;
 *   oom       the Nth call of a port call answers CUDA_ERROR_OUT_OF_MEMORY
 *             (the sim's failing allocation for mem_alloc and
 *             mem_alloc_async, dv__sim_fail_alloc_nth; dv__sim_inject for
 *             the others);
 *   error     the Nth call answers CUDA_ERROR_UNKNOWN (a plain driver error);
 *   sticky    the Nth call answers the sticky CUDA_ERROR_LAUNCH_FAILED: the
 *             actor must take the context for lost and rebuild it (the sim
 *             itself stays healthy: the injected code is what the call
 *             answers, not the device's state);
 *   poison    dv__sim_poison, recoverable, right before a step;
 *   fatal     dv__sim_poison, process-fatal, right before a step.
 *
 * The port calls and their N come from clean runs of the same workload
 * (the counting runs): every call the actor made, and for each every
 * occurrence (under sanitizers, and for polled calls, the first in each
 * step and the last; see positions()).  The sim can poison
 * a device only at once, not at the Nth call of something, so the two
 * poison kinds stand before each step instead, which covers the calls the
 * step makes.
 *
 * Counting: the sim counts the calls that reach its fault check
 * (dv__sim_calls), which are the calls it can fail.  The counting runs also
 * put a spy table in front of the sim's ops (it counts every op of the
 * port's list and forwards it, and notes the step each call came in), so
 * that calls the actor makes but the sim cannot fail are listed too: each
 * of those is one SKIP line per kind, naming it.  The spy is only in the
 * counting runs: the sim's own controls refuse a driver whose ops are not
 * the sim's, and the cells arm, poison and count through them.
 *
 * Each cell prints these lines:
 *
 *   survived  the child exited 0: no crash, no sanitizer report, no hang (a
 *             watchdog aborts it after WATCHDOG_S seconds, naming the step);
 *   fired     (injected cells) the Nth call was made, so it answered the
 *             armed code; a SKIP when this run made the call fewer times
 *             (counts of some calls follow how the actor batches): that
 *             cell ran clean, and its other lines still hold;
 *   named     every failure has a detail (call or message), and the fault
 *             is named by the failures or by the actor's health (the
 *             injected call, or the sticky code);
 *   data      no silently wrong bytes: a readback that answers OK holds what
 *             was written (when every step that wrote it succeeded), comes
 *             from the context it was written in, and event_sync answering
 *             OK means the copy before the record finished; the bystander,
 *             written and verified before, reads back right or answers an
 *             error;
 *   leak      everything released: refs_alive and bytes_outstanding are 0
 *             while the actor lives, and once it is destroyed the sim holds
 *             0 bytes for the device and the driver no live object;
 *   recovers  a fault that is not fatal leaves an actor that works (a probe
 *             round trip, the second try at the latest) and, once destroyed,
 *             a driver on which the next actor works; a fatal one (or a
 *             sticky error in a rebuild) leaves an actor that is LOST and
 *             answers DV_EDEVICE_LOST, and the next actor refused.
 *
 * Known bugs (known_bugs[]: reported, not fixed yet) print as TODO.
 *
 * Environment: DV_MATRIX_FULL=1 tries every occurrence of every call;
 * DV_MATRIX_ONLY=text runs the cells whose name contains text;
 * DV_MATRIX_JOBS=n runs n cells at once (default 2).
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "devactor_testing.h"
#include "tap.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif
#ifndef UNDER_SANITIZER
#define UNDER_SANITIZER 0
#endif

#define WATCHDOG_S  20
#define BACKSTOP_S  (WATCHDOG_S + 15) /* the parent's, should the watchdog not fire */
#define COUNT_RUNS  3
#define SLOW_CELL_S 1.0 /* a cell slower than this is named */
#define MAX_TRACE   512 /* occurrences of one call whose step the counting run notes */
#define BYTES       16384u
#define WORDS       (BYTES / 4)
#define SPIN_NS     3000000u /* holds stream 3 while the event's waiter runs */
#define STREAMS     4
#define SENTINEL    0xEEu
#define TASK_MAGIC  0x7A5C0DE5u
#define FILL_D      0xC0DE0001u
#define FILL_G      0xE7E70002u
#define FILL_T      0x7A5C0003u
#define FILL_E      0xAF7E0004u
#define SET_C       0x5Au
#define SET_P       0x3Cu
#define SET_C_BYTES 4096u

/* ------------------------------------------------------------------------
 * The workload's steps
 * ------------------------------------------------------------------------ */

enum step {
    ST_NONE = -1,
    ST_CREATE,
    ST_KERNELS,
    ST_EVENT,
    ST_BYSTANDER,
    ST_ALLOC,
    ST_HTOD,
    ST_DTOD,
    ST_MEMSET,
    ST_LAUNCH,
    ST_TASK,
    ST_EVENTS,
    ST_READBACK,
    ST_SYNC,
    ST_BYSTANDER_CHECK,
    ST_RELEASE,
    ST_STATS,
    ST_RESET,
    ST_AFTER_RESET,
    ST_PROBE,
    ST_DESTROY,
    ST_NEXT, /* after destroy: the next actor on the same driver */
    ST__COUNT
};

static const char *const step_names[ST__COUNT] = {
    "create",  "kernels", "event_create", "bystander",   "alloc",    "htod",    "dtod",
    "memset",  "launch",  "task",         "events",      "readback", "sync",    "bystander_check",
    "release", "stats",   "reset",        "after_reset", "probe",    "destroy", "next_actor",
};

/* ------------------------------------------------------------------------
 * Cells and what a child reports (in memory shared with the parent)
 * ------------------------------------------------------------------------ */

enum kind { K_CONTROL, K_OOM, K_ERROR, K_STICKY, K_POISON, K_FATAL };
static const char *const kind_names[] = {"control", "oom", "error", "sticky", "poison", "fatal"};

typedef struct cell {
    enum kind kind;
    dv_drv_call call;   /* injected kinds */
    uint64_t nth;       /* the call's occurrence, 1-based */
    uint64_t alloc_nth; /* oom on an allocation call: among all allocations */
    bool polled;        /* the call's count varies from run to run */
    int step;           /* poison kinds: before this step; else where nth was seen */
    char name[96];
} cell;

static bool injected_kind(enum kind k)
{
    return k == K_OOM || k == K_ERROR || k == K_STICKY;
}

static int kind_code(const cell *c)
{
    switch (c->kind) {
    case K_OOM:
        return DV_CU_OUT_OF_MEMORY;
    case K_ERROR:
        return DV_CU_UNKNOWN;
    case K_STICKY:
    case K_POISON:
        return DV_CU_LAUNCH_FAILED;
    case K_FATAL:
        return DV_CU_ILLEGAL_ADDRESS;
    default:
        return 0;
    }
}

enum line { L_SURVIVED, L_FIRED, L_NAMED, L_DATA, L_LEAK, L_RECOVERS, L__COUNT };
static const char *const line_names[L__COUNT] = {"survived", "fired", "named",
                                                 "data",     "leak",  "recovers"};

enum verdict { V_UNSET, V_PASS, V_FAIL, V_SKIP };

typedef struct line_out {
    int verdict;
    char diag[1400];  /* what the child saw: failures and notes */
    char fails[1400]; /* the failures alone, one a line (known bugs match them) */
} line_out;

typedef struct cell_out {
    atomic_int step; /* where the child is */
    atomic_int hang; /* the watchdog fired */
    int finished;
    line_out line[L__COUNT];
} cell_out;

typedef struct count_out {
    int ok;
    char why[512];
    uint64_t count[DV_CALL__COUNT];     /* every call (the spy) */
    uint64_t sim_count[DV_CALL__COUNT]; /* those the sim can fail (dv__sim_calls) */
    uint8_t step_of[DV_CALL__COUNT][MAX_TRACE];
    uint32_t alloc_index[DV_CALL__COUNT][MAX_TRACE]; /* among all allocations */
} count_out;

static bool lines_of(const cell *c, enum line l)
{
    return l != L_FIRED || injected_kind(c->kind);
}

static void addf(line_out *l, bool failure, const char *fmt, ...) TAP_PRINTF(3, 4);
static void addf(line_out *l, bool failure, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    size_t len = strlen(l->diag);
    snprintf(l->diag + len, sizeof(l->diag) - len, "%s%s", len > 0 ? "; " : "", msg);
    if (failure) {
        l->verdict = V_FAIL;
        len = strlen(l->fails);
        snprintf(l->fails + len, sizeof(l->fails) - len, "%s\n", msg);
    }
}

/* ------------------------------------------------------------------------
 * The spy: counts every op and forwards it to the sim's
 * ------------------------------------------------------------------------ */

static atomic_int cur_step = ST_NONE;

static struct {
    _Atomic uint64_t count[DV_CALL__COUNT];
    _Atomic uint64_t allocs;
    count_out *trace;
} spy;

static dv_driver_ops spy_ops;

static void spy_enter(dv_drv_call c)
{
    uint64_t k = atomic_fetch_add(&spy.count[c], 1) + 1;
    uint64_t nalloc = 0;
    if (c == DV_CALL_MEM_ALLOC || c == DV_CALL_MEM_ALLOC_ASYNC)
        nalloc = atomic_fetch_add(&spy.allocs, 1) + 1;
    if (k <= MAX_TRACE) {
        spy.trace->step_of[c][k - 1] = (uint8_t)atomic_load(&cur_step);
        spy.trace->alloc_index[c][k - 1] = (uint32_t)nalloc;
    }
}

#define SPY(call, expr)                                                                            \
    do {                                                                                           \
        spy_enter(DV_CALL_##call);                                                                 \
        return (expr);                                                                             \
    } while (0)
#define SIM dv__sim_ops

static int spy_device_count(dv_driver *d, int *n)
{
    SPY(DEVICE_COUNT, SIM.device_count(d, n));
}
static int spy_device_info(dv_driver *d, int o, dv_device_info *i)
{
    SPY(DEVICE_INFO, SIM.device_info(d, o, i));
}
static int spy_mem_info(dv_drv_obj *c, uint64_t *f, uint64_t *t)
{
    SPY(MEM_INFO, SIM.mem_info(c, f, t));
}
static int spy_ctx_retain(dv_drv_obj *c, int o)
{
    SPY(CTX_RETAIN, SIM.ctx_retain(c, o));
}
static int spy_ctx_release(dv_drv_obj *c)
{
    SPY(CTX_RELEASE, SIM.ctx_release(c));
}
static int spy_ctx_reset(dv_drv_obj *c)
{
    SPY(CTX_RESET, SIM.ctx_reset(c));
}
static int spy_stream_create(dv_drv_obj *c, dv_drv_obj *s)
{
    SPY(STREAM_CREATE, SIM.stream_create(c, s));
}
static int spy_stream_destroy(dv_drv_obj *s)
{
    SPY(STREAM_DESTROY, SIM.stream_destroy(s));
}
static int spy_stream_sync(dv_drv_obj *s)
{
    SPY(STREAM_SYNC, SIM.stream_sync(s));
}
static int spy_stream_query(dv_drv_obj *s, bool *done)
{
    SPY(STREAM_QUERY, SIM.stream_query(s, done));
}
static int spy_event_create(dv_drv_obj *c, dv_drv_obj *e)
{
    SPY(EVENT_CREATE, SIM.event_create(c, e));
}
static int spy_event_destroy(dv_drv_obj *e)
{
    SPY(EVENT_DESTROY, SIM.event_destroy(e));
}
static int spy_event_record(dv_drv_obj *e, dv_drv_obj *s)
{
    SPY(EVENT_RECORD, SIM.event_record(e, s));
}
static int spy_event_query(dv_drv_obj *e, bool *done)
{
    SPY(EVENT_QUERY, SIM.event_query(e, done));
}
static int spy_event_sync(dv_drv_obj *e)
{
    SPY(EVENT_SYNC, SIM.event_sync(e));
}
static int spy_stream_wait_event(dv_drv_obj *s, dv_drv_obj *e)
{
    SPY(STREAM_WAIT_EVENT, SIM.stream_wait_event(s, e));
}
static int spy_event_elapsed(dv_drv_obj *a, dv_drv_obj *b, float *ms)
{
    SPY(EVENT_ELAPSED, SIM.event_elapsed(a, b, ms));
}
static int spy_mem_alloc(dv_drv_obj *c, uint64_t n, dv_dptr *p)
{
    SPY(MEM_ALLOC, SIM.mem_alloc(c, n, p));
}
static int spy_mem_free(dv_drv_obj *c, dv_dptr p)
{
    SPY(MEM_FREE, SIM.mem_free(c, p));
}
static int spy_mem_alloc_async(dv_drv_obj *s, uint64_t n, dv_dptr *p)
{
    SPY(MEM_ALLOC_ASYNC, SIM.mem_alloc_async(s, n, p));
}
static int spy_mem_free_async(dv_drv_obj *s, dv_dptr p)
{
    SPY(MEM_FREE_ASYNC, SIM.mem_free_async(s, p));
}
static int spy_pool_set(dv_drv_obj *c, uint64_t n)
{
    SPY(POOL_SET_THRESHOLD, SIM.pool_set_threshold(c, n));
}
static int spy_pool_get(dv_drv_obj *c, uint64_t *n)
{
    SPY(POOL_GET_THRESHOLD, SIM.pool_get_threshold(c, n));
}
static int spy_pool_trim(dv_drv_obj *c, uint64_t n)
{
    SPY(POOL_TRIM, SIM.pool_trim(c, n));
}
static int spy_htod(dv_drv_obj *s, dv_dptr d, const void *h, uint64_t n)
{
    SPY(MEMCPY_HTOD, SIM.memcpy_htod(s, d, h, n));
}
static int spy_dtoh(dv_drv_obj *s, void *h, dv_dptr d, uint64_t n)
{
    SPY(MEMCPY_DTOH, SIM.memcpy_dtoh(s, h, d, n));
}
static int spy_dtod(dv_drv_obj *s, dv_dptr d, dv_dptr src, uint64_t n)
{
    SPY(MEMCPY_DTOD, SIM.memcpy_dtod(s, d, src, n));
}
static int spy_peer(dv_drv_obj *s, dv_drv_obj *dc, dv_dptr d, dv_drv_obj *sc, dv_dptr src,
                    uint64_t n)
{
    SPY(MEMCPY_PEER, SIM.memcpy_peer(s, dc, d, sc, src, n));
}
static int spy_memset_d8(dv_drv_obj *s, dv_dptr d, uint8_t v, uint64_t n)
{
    SPY(MEMSET_D8, SIM.memset_d8(s, d, v, n));
}
static int spy_memset_d32(dv_drv_obj *s, dv_dptr d, uint32_t v, uint64_t n)
{
    SPY(MEMSET_D32, SIM.memset_d32(s, d, v, n));
}
static int spy_module_load(dv_drv_obj *c, dv_drv_obj *m, const void *image, size_t n)
{
    SPY(MODULE_LOAD, SIM.module_load(c, m, image, n));
}
static int spy_module_unload(dv_drv_obj *m)
{
    SPY(MODULE_UNLOAD, SIM.module_unload(m));
}
static int spy_func_get(dv_drv_obj *m, dv_drv_obj *f, const char *name)
{
    SPY(FUNC_GET, SIM.func_get(m, f, name));
}
static int spy_launch(dv_drv_obj *f, dv_dim3 g, dv_dim3 b, uint32_t sh, dv_drv_obj *s, void **p)
{
    SPY(LAUNCH, SIM.launch(f, g, b, sh, s, p));
}
static int spy_host_fn(dv_drv_obj *s, dv_host_fn fn, void *arg)
{
    SPY(HOST_FN, SIM.host_fn(s, fn, arg));
}

/* Every op of the port's list goes through the spy; the rest (an op
 * without a call of the list, such as func_params) is the sim's own. */
static void spy_install(dv_driver *drv)
{
    spy_ops = dv__sim_ops;
    spy_ops.device_count = spy_device_count;
    spy_ops.device_info = spy_device_info;
    spy_ops.mem_info = spy_mem_info;
    spy_ops.ctx_retain = spy_ctx_retain;
    spy_ops.ctx_release = spy_ctx_release;
    spy_ops.ctx_reset = spy_ctx_reset;
    spy_ops.stream_create = spy_stream_create;
    spy_ops.stream_destroy = spy_stream_destroy;
    spy_ops.stream_sync = spy_stream_sync;
    spy_ops.stream_query = spy_stream_query;
    spy_ops.event_create = spy_event_create;
    spy_ops.event_destroy = spy_event_destroy;
    spy_ops.event_record = spy_event_record;
    spy_ops.event_query = spy_event_query;
    spy_ops.event_sync = spy_event_sync;
    spy_ops.stream_wait_event = spy_stream_wait_event;
    spy_ops.event_elapsed = spy_event_elapsed;
    spy_ops.mem_alloc = spy_mem_alloc;
    spy_ops.mem_free = spy_mem_free;
    spy_ops.mem_alloc_async = spy_mem_alloc_async;
    spy_ops.mem_free_async = spy_mem_free_async;
    spy_ops.pool_set_threshold = spy_pool_set;
    spy_ops.pool_get_threshold = spy_pool_get;
    spy_ops.pool_trim = spy_pool_trim;
    spy_ops.memcpy_htod = spy_htod;
    spy_ops.memcpy_dtoh = spy_dtoh;
    spy_ops.memcpy_dtod = spy_dtod;
    spy_ops.memcpy_peer = spy_peer;
    spy_ops.memset_d8 = spy_memset_d8;
    spy_ops.memset_d32 = spy_memset_d32;
    spy_ops.module_load = spy_module_load;
    spy_ops.module_unload = spy_module_unload;
    spy_ops.func_get = spy_func_get;
    spy_ops.launch = spy_launch;
    spy_ops.host_fn = spy_host_fn;
    /* Before any thread of the driver's exists: no reader races this. */
    drv->ops = &spy_ops;
}

/* After the actor (and every stream worker) is gone. */
static void spy_remove(dv_driver *drv)
{
    drv->ops = &dv__sim_ops;
}

/* ------------------------------------------------------------------------
 * One run of the workload (in a child)
 * ------------------------------------------------------------------------ */

typedef struct fault_seen {
    int step, rc, status;
    char call[48];
    int driver_code;
    char message[256];
} fault_seen;

#define MAX_FAILS 48

typedef struct run {
    const cell *c;
    cell_out *out;
    dv_driver *drv;
    dv_actor *a;
    int nfails;
    fault_seen fails[MAX_FAILS];
    int unnamed;
    dv_actor_health health; /* the last taken (before destroy) */
    bool have_health;
    int step;       /* the step running */
    int fired_step; /* where the armed fault fired (ST__COUNT: not yet) */
    bool lost_ok;   /* the actor is LOST for a reason that allows it */
} run;

static uint32_t host_a[WORDS], host_b[WORDS], host_g[WORDS], back[WORDS];
static _Atomic uint32_t task_flag;

static uint32_t pat(uint32_t seed, uint32_t i)
{
    return (i + 1) * 2654435761u ^ seed;
}

/*
 * Enter step s.  For an injected fault, look whether the armed call has
 * been made nth times by now: then it fired in the step that just ended
 * (the sim counts every call that reaches its fault check, and the nth
 * one answered the armed code).
 */
static void set_step(run *r, int s)
{
    const cell *c = r->c;
    if (injected_kind(c->kind) && r->fired_step == ST__COUNT && r->step >= 0 &&
        dv__sim_calls(r->drv, c->call) >= c->nth)
        r->fired_step = r->step;
    r->step = s;
    atomic_store(&cur_step, s);
    atomic_store(&r->out->step, s);
}

static const char *call_name(int call)
{
    return call >= 0 && call < DV_CALL__COUNT ? dv__drv_call_name((dv_drv_call)call) : "-";
}

/* Note a call's status: a failure is kept with its detail. */
static int note(run *r, int rc)
{
    if (rc == DV_OK)
        return rc;
    const dv_error_detail *d = dv_last_error();
    bool named = (d->call != NULL && d->call[0] != '\0') || d->message[0] != '\0';
    if (!named)
        r->unnamed++;
    if (r->nfails < MAX_FAILS) {
        fault_seen *f = &r->fails[r->nfails];
        f->step = atomic_load(&cur_step);
        f->rc = rc;
        f->status = d->status;
        snprintf(f->call, sizeof(f->call), "%s", d->call != NULL ? d->call : "");
        f->driver_code = d->driver_code;
        snprintf(f->message, sizeof(f->message), "%s", d->message);
    }
    r->nfails++;
    return rc;
}

static uint64_t generation(run *r)
{
    dv_actor_health h;
    if (r->a == NULL || dv_actor_health_get(r->a, &h) != DV_OK)
        return 0;
    return h.context_generation;
}

static bool healthy(run *r)
{
    dv_actor_health h;
    return r->a != NULL && dv_actor_health_get(r->a, &h) == DV_OK && h.state == DV_ACTOR_RUNNING;
}

/* A block the workload writes, and what it should hold. */
typedef struct buf {
    const char *tag;
    dv_ref ref;
    bool allocated; /* dv_alloc answered OK (the handle exists) */
    bool written;   /* every step that wrote it answered OK */
    uint64_t gen;   /* the context generation it was written in */
    dv_stream stream;
} buf;

static int alloc_buf(run *r, buf *b, const char *tag, dv_stream s)
{
    b->tag = tag;
    b->stream = s;
    b->ref = DV_REF_NULL;
    int rc = note(r, dv_alloc(r->a, BYTES, s, tag, &b->ref));
    b->allocated = rc == DV_OK;
    b->written = b->allocated;
    b->gen = generation(r);
    return rc;
}

static void release_buf(run *r, buf *b)
{
    if (!b->allocated)
        return;
    int rc = dv_ref_release(b->ref);
    /* A release after a rebuild answers DV_ESTALE: the block went with the
     * context.  Anything else is a failure to report. */
    if (rc != DV_ESTALE)
        note(r, rc);
    b->allocated = false;
}

/* What word i of a block should hold. */
typedef uint32_t (*expect_fn)(uint32_t i);
static uint32_t expect_a(uint32_t i)
{
    return host_a[i];
}
static uint32_t expect_b(uint32_t i)
{
    return host_b[i];
}
static uint32_t expect_c(uint32_t i)
{
    return i * 4 < SET_C_BYTES ? SET_C * 0x01010101u : host_a[i];
}
static uint32_t expect_d(uint32_t i)
{
    (void)i;
    return FILL_D;
}
static uint32_t expect_g(uint32_t i)
{
    (void)i;
    return FILL_G;
}
static uint32_t expect_t(uint32_t i)
{
    (void)i;
    return FILL_T;
}
static uint32_t expect_e(uint32_t i)
{
    (void)i;
    return FILL_E;
}
static uint32_t expect_p(uint32_t i)
{
    (void)i;
    return SET_P * 0x01010101u;
}

static int first_mismatch(const uint32_t *got, expect_fn want)
{
    for (uint32_t i = 0; i < WORDS; i++)
        if (got[i] != want(i))
            return (int)i;
    return -1;
}

/*
 * Read b back on stream s and hold it to what it should be: an OK answer
 * with the right bytes from the context b was written in, or an error.
 * Errors a fault may explain: the handle stale or lost, the allocation's
 * own failure, or the fault met by this very readback.
 */
static void readback(run *r, buf *b, dv_stream s, expect_fn want, const char *what)
{
    line_out *data = &r->out->line[L_DATA];
    if (!b->allocated)
        return;
    memset(back, SENTINEL, sizeof(back));
    uint64_t gen = generation(r);
    int rc = note(r, dv_copy_dtoh(r->a, back, b->ref, 0, BYTES, s));
    if (rc != DV_OK)
        return;
    if (!b->written)
        return; /* a step that wrote it failed: its bytes are anyone's */
    if (gen != b->gen)
        addf(data, true,
             "%s: block '%s' written in context %llu read back OK in context %llu "
             "(a stale "
             "handle served)",
             what, b->tag, (unsigned long long)b->gen, (unsigned long long)gen);
    int bad = first_mismatch(back, want);
    if (bad >= 0)
        addf(data, true,
             "%s: block '%s' read back OK with wrong bytes: word %d is 0x%08x, not "
             "0x%08x",
             what, b->tag, bad, back[bad], want((uint32_t)bad));
}

static void set_task_flag(void *arg)
{
    (void)arg;
    atomic_store(&task_flag, TASK_MAGIC);
}

typedef struct task_user {
    dv_kernel *fill;
} task_user;

static int task_main(const dv_task_ctx *ctx, void *user)
{
    task_user *u = user;
    dv_arg args[] = {dv_arg_ptr(ctx->arg[0]), dv_arg_u32(FILL_T), dv_arg_u64(WORDS)};
    int rc = dv_task_launch(ctx, u->fill, (dv_dim3){WORDS / 256, 1, 1}, (dv_dim3){256, 1, 1}, 0,
                            args, 3);
    if (rc == DV_OK)
        rc = dv_task_host_fn(ctx, set_task_flag, NULL);
    return rc;
}

/* A round trip on fresh memory: alloc, memset, read back on another
 * stream, release.  DV_OK only when every step answered OK with the right
 * bytes. */
static int probe(run *r, const char *what)
{
    buf p;
    int rc = alloc_buf(r, &p, "probe", 1);
    if (rc != DV_OK)
        return rc;
    rc = note(r, dv_memset(r->a, p.ref, 0, SET_P, BYTES, 1));
    if (rc == DV_OK) {
        memset(back, SENTINEL, sizeof(back));
        rc = note(r, dv_copy_dtoh(r->a, back, p.ref, 0, BYTES, 2));
        if (rc == DV_OK && first_mismatch(back, expect_p) >= 0) {
            addf(&r->out->line[L_DATA], true, "%s: the probe read back wrong bytes", what);
            rc = DV_EINVAL;
        }
    }
    release_buf(r, &p);
    return rc;
}

static void stats_leak(run *r, const char *when)
{
    dv_actor_stats st;
    line_out *leak = &r->out->line[L_LEAK];
    if (r->a == NULL || !healthy(r))
        return;
    int rc = note(r, dv_actor_stats_get(r->a, &st));
    if (rc != DV_OK) {
        addf(leak, false, "%s: stats answered %s (not measured)", when, dv_err_name(rc));
        return;
    }
    if (st.refs_alive != 0 || st.bytes_outstanding != 0)
        addf(leak, true,
             "%s: every handle released, yet refs_alive %llu, bytes_outstanding "
             "%llu",
             when, (unsigned long long)st.refs_alive, (unsigned long long)st.bytes_outstanding);
}

static int make_actor(run *r, dv_actor **out)
{
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.driver = r->drv;
    cfg.device = 0;
    cfg.streams = STREAMS;
    *out = NULL;
    return note(r, dv_actor_create(&cfg, out));
}

/* Poison before step s when the cell says so. */
static void before(run *r, int s)
{
    set_step(r, s);
    const cell *c = r->c;
    if ((c->kind == K_POISON || c->kind == K_FATAL) && c->step == s)
        dv__sim_poison(r->drv, 0,
                       c->kind == K_FATAL ? DV_SIM_POISON_FATAL : DV_SIM_POISON_RECOVERABLE, 0);
}

/* Where the fault fired, as far as the child knows: the step, or ST__COUNT
 * when it did not (yet). */
static int fired_step(const run *r)
{
    const cell *c = r->c;
    if (c->kind == K_POISON || c->kind == K_FATAL)
        return c->step;
    return r->fired_step;
}

static void workload(run *r)
{
    const cell *c = r->c;
    line_out *data = &r->out->line[L_DATA];
    line_out *rec = &r->out->line[L_RECOVERS];
    dv_kernel *kfill = NULL, *kspin = NULL;
    dv_event *ev = NULL;
    buf B = {0}, A = {0}, C = {0}, D = {0}, T = {0}, G = {0}, H = {0}, E = {0};
    bool bystander_ok = false;

    for (uint32_t i = 0; i < WORDS; i++) {
        host_a[i] = pat(0xA11CEu, i);
        host_b[i] = pat(0xB0B0Bu, i);
    }
    atomic_store(&task_flag, 0);

    /* create */
    before(r, ST_CREATE);
    int create_rc = make_actor(r, &r->a);
    if (create_rc != DV_OK) {
        r->a = NULL;
        goto after_workload;
    }

    before(r, ST_KERNELS);
    note(r, dv_kernel_get(r->a, NULL, 0, "fill_u32", &kfill));
    note(r, dv_kernel_get(r->a, NULL, 0, "spin", &kspin));

    before(r, ST_EVENT);
    note(r, dv_event_create(r->a, 0, &ev));

    /* The bystander: written and verified before anything else. */
    before(r, ST_BYSTANDER);
    alloc_buf(r, &B, "bystander", 0);
    if (B.allocated && note(r, dv_copy_htod(r->a, B.ref, 0, host_b, BYTES, 0)) == DV_OK) {
        memset(back, SENTINEL, sizeof(back));
        if (note(r, dv_copy_dtoh(r->a, back, B.ref, 0, BYTES, 0)) == DV_OK)
            bystander_ok = first_mismatch(back, expect_b) < 0;
        B.gen = generation(r);
    }
    B.written = bystander_ok;

    before(r, ST_ALLOC);
    alloc_buf(r, &A, "A", 1);
    alloc_buf(r, &C, "C", 2);
    alloc_buf(r, &D, "D", 3);
    alloc_buf(r, &T, "T", 0);
    alloc_buf(r, &G, "G", 3);
    alloc_buf(r, &H, "H", 0);

    before(r, ST_HTOD);
    if (A.allocated)
        A.written = note(r, dv_copy_htod(r->a, A.ref, 0, host_a, BYTES, 1)) == DV_OK;
    A.gen = generation(r);

    before(r, ST_DTOD);
    if (C.allocated)
        C.written = A.written && A.allocated &&
                    note(r, dv_copy_dtod(r->a, C.ref, 0, A.ref, 0, BYTES, 2)) == DV_OK;

    before(r, ST_MEMSET);
    if (C.allocated && note(r, dv_memset(r->a, C.ref, 0, SET_C, SET_C_BYTES, 2)) != DV_OK)
        C.written = false;
    C.gen = generation(r);

    before(r, ST_LAUNCH);
    if (D.allocated) {
        D.written = false;
        if (kfill != NULL) {
            dv_arg args[] = {dv_arg_ref(D.ref, DV_WRITE, 0), dv_arg_u32(FILL_D), dv_arg_u64(WORDS)};
            D.written = note(r, dv_launch(r->a, kfill, (dv_dim3){WORDS / 256, 1, 1},
                                          (dv_dim3){256, 1, 1}, 0, 3, args, 3)) == DV_OK;
        }
    }
    D.gen = generation(r);

    before(r, ST_TASK);
    if (T.allocated) {
        T.written = false;
        if (kfill != NULL) {
            task_user u = {kfill};
            dv_arg args[] = {dv_arg_ref(T.ref, DV_WRITE, 0), dv_arg_ref(C.ref, DV_READ, 0)};
            int rc = note(r, dv_task(r->a, task_main, &u, 0, args, C.allocated ? 2 : 1));
            T.written = rc == DV_OK;
            if (rc == DV_OK && atomic_load(&task_flag) != TASK_MAGIC)
                addf(data, true, "task: answered OK but its host function did not run");
        }
    }
    T.gen = generation(r);

    /*
     * Events.  Stream 3 spins, fills G and copies it to the host; an event
     * recorded after that; stream 0 waits for the event and copies G to H
     * with an untracked built-in kernel (nothing but the event orders it);
     * the host syncs the event and reads the copy's buffer at once.
     */
    before(r, ST_EVENTS);
    if (ev != NULL && kspin != NULL && kfill != NULL && G.allocated && H.allocated) {
        dv_future fspin, ffill, fdtoh, fcopy;
        bool spin_posted, fill_posted, dtoh_posted, copy_posted = false;
        bool chain = true;
        dv_future_init(&fspin, 0);
        dv_future_init(&ffill, 0);
        dv_future_init(&fdtoh, 0);
        dv_future_init(&fcopy, 0);
        memset(host_g, SENTINEL, sizeof(host_g));
        dv_arg sargs[] = {dv_arg_u64(SPIN_NS)};
        spin_posted = note(r, dv_launch_async(r->a, kspin, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1},
                                              0, 3, sargs, 1, &fspin)) == DV_OK;
        dv_arg fargs[] = {dv_arg_ref(G.ref, DV_WRITE, 0), dv_arg_u32(FILL_G), dv_arg_u64(WORDS)};
        fill_posted =
            note(r, dv_launch_async(r->a, kfill, (dv_dim3){WORDS / 256, 1, 1}, (dv_dim3){256, 1, 1},
                                    0, 3, fargs, 3, &ffill)) == DV_OK;
        dtoh_posted =
            note(r, dv_copy_dtoh_async(r->a, host_g, G.ref, 0, BYTES, 3, &fdtoh)) == DV_OK;
        chain = chain && note(r, dv_event_record(ev, 3)) == DV_OK;
        chain = chain && note(r, dv_stream_wait_event(r->a, 0, ev)) == DV_OK;
        dv_ref_info gi, hi;
        if (note(r, dv_ref_access(G.ref, &gi)) == DV_OK &&
            note(r, dv_ref_access(H.ref, &hi)) == DV_OK) {
            uint64_t cargs[4] = {hi.ptr, gi.ptr, BYTES, 0};
            copy_posted =
                note(r, dv__actor_launch_builtin(r->a, "copy", 0, cargs, &fcopy)) == DV_OK;
        }
        int es = note(r, dv_event_sync(ev));
        /* What the host sees the moment event_sync returns: judged once
         * the futures say whether the fill and the copy succeeded. */
        static uint32_t at_sync[WORDS];
        memcpy(at_sync, host_g, sizeof(at_sync));
        int eq = es == DV_OK ? dv_event_query(ev) : DV_OK;
        if (eq != DV_EAGAIN)
            note(r, eq);
        int rs = spin_posted ? note(r, dv_future_wait(&fspin)) : DV_EINVAL;
        int rf = fill_posted ? note(r, dv_future_wait(&ffill)) : DV_EINVAL;
        int rd = dtoh_posted ? note(r, dv_future_wait(&fdtoh)) : DV_EINVAL;
        int rcp = copy_posted ? note(r, dv_future_wait(&fcopy)) : DV_EINVAL;
        (void)rs;
        if (rf == DV_OK && rd == DV_OK) {
            int bad = first_mismatch(host_g, expect_g);
            if (bad >= 0)
                addf(data, true, "events: the copy of G answered OK with host word %d 0x%08x", bad,
                     host_g[bad]);
            /* The record came after the copy on its stream: reached means
             * the copy is done. */
            bad = first_mismatch(at_sync, expect_g);
            if (es == DV_OK && bad >= 0)
                addf(data, true,
                     "events: event_sync answered OK before the copy recorded ahead of "
                     "it had "
                     "finished (host word %d was 0x%08x)",
                     bad, at_sync[bad]);
        }
        if (es == DV_OK && eq == DV_EAGAIN)
            addf(data, true, "events: event_query answered EAGAIN after event_sync answered OK");
        G.written = rf == DV_OK;
        H.written = rf == DV_OK && chain && rcp == DV_OK;
        G.gen = H.gen = generation(r);
    } else {
        G.written = H.written = false;
    }

    before(r, ST_READBACK);
    readback(r, &A, 2, expect_a, "readback");
    readback(r, &C, 1, expect_c, "readback");
    readback(r, &D, 0, expect_d, "readback");
    readback(r, &T, 1, expect_t, "readback");
    readback(r, &G, 0, expect_g, "readback");
    readback(r, &H, 2, expect_g, "readback (H, ordered by the event only)");

    before(r, ST_SYNC);
    for (dv_stream s = 0; s < STREAMS; s++)
        note(r, dv_sync(r->a, s));

    before(r, ST_BYSTANDER_CHECK);
    if (bystander_ok) {
        readback(r, &B, 1, expect_b, "bystander");
    }

    before(r, ST_RELEASE);
    release_buf(r, &A);
    release_buf(r, &B);
    release_buf(r, &C);
    release_buf(r, &D);
    release_buf(r, &T);
    release_buf(r, &G);
    release_buf(r, &H);

    before(r, ST_STATS);
    stats_leak(r, "stats after the releases");

    before(r, ST_RESET);
    note(r, dv_actor_reset(r->a));

    /* The rebuilt context: a kernel reloaded, an event recorded again. */
    before(r, ST_AFTER_RESET);
    alloc_buf(r, &E, "E", 2);
    if (E.allocated) {
        E.written = false;
        if (kfill != NULL) {
            dv_arg args[] = {dv_arg_ref(E.ref, DV_WRITE, 0), dv_arg_u32(FILL_E), dv_arg_u64(WORDS)};
            E.written = note(r, dv_launch(r->a, kfill, (dv_dim3){WORDS / 256, 1, 1},
                                          (dv_dim3){256, 1, 1}, 0, 2, args, 3)) == DV_OK;
        }
        E.gen = generation(r);
        readback(r, &E, 1, expect_e, "after reset");
        if (ev != NULL && note(r, dv_event_record(ev, 1)) == DV_OK)
            note(r, dv_event_sync(ev));
        release_buf(r, &E);
    }

after_workload:
    /* The probe: the actor works (a non-fatal fault), or it is LOST (a
     * fatal one).  An actor whose creation failed is made again. */
    before(r, ST_PROBE);
    {
        int fs = fired_step(r);
        bool fatal = c->kind == K_FATAL && fs <= ST_PROBE;
        if (r->a == NULL) {
            if (c->kind == K_CONTROL || fs > ST_CREATE)
                addf(rec, true, "actor_create answered %s with no fault before it",
                     dv_err_name(create_rc));
            if (make_actor(r, &r->a) != DV_OK) {
                r->a = NULL;
                if (fatal)
                    addf(rec, false, "made again: refused (%s), as on a lost device",
                         r->nfails > 0 ? dv_err_name(r->fails[(r->nfails - 1) % MAX_FAILS].rc)
                                       : "?");
                else
                    addf(rec, true, "after a failed actor_create, making it again failed too: %s",
                         r->nfails > 0 ? r->fails[(r->nfails - 1) % MAX_FAILS].message : "?");
            }
        }
        if (r->a != NULL) {
            int p1 = probe(r, "probe");
            int p2 = p1 == DV_OK ? DV_OK : probe(r, "second probe");
            dv_actor_health h;
            dv_actor_health_get(r->a, &h);
            if (fatal) {
                if (h.state != DV_ACTOR_LOST)
                    addf(rec, true, "a fatal poison, yet the actor is not LOST (state %d)",
                         (int)h.state);
                if (p1 == DV_OK || p2 != DV_EDEVICE_LOST)
                    addf(rec, true, "a fatal poison, yet the probes answered %s, then %s",
                         dv_err_name(p1), dv_err_name(p2));
            } else if (c->kind == K_FATAL) {
                /* Poisoned at destroy: nothing to see yet. */
            } else if (p2 != DV_OK) {
                /* A sticky error from the rebuild's own calls: the driver
                 * refused the new context, so LOST is the answer.  A
                 * transient error there (out of memory, a plain driver
                 * error) is not a refusal. */
                bool lost = h.state == DV_ACTOR_LOST && p2 == DV_EDEVICE_LOST;
                if (lost && c->kind == K_STICKY && fs == ST_RESET) {
                    r->lost_ok = true;
                    addf(rec, false,
                         "a sticky error in the rebuild (step %s): the actor is LOST and "
                         "answers DV_EDEVICE_LOST",
                         step_names[fs]);
                } else if (lost) {
                    addf(rec, true,
                         "%s in step %s, which is not a sticky error, left the actor "
                         "LOST: "
                         "the probes answer DV_EDEVICE_LOST",
                         dv__driver_code_name(kind_code(c)), fs < ST__COUNT ? step_names[fs] : "-");
                } else {
                    addf(rec, true,
                         "a fault that is not fatal (fired in step %s), yet the probe "
                         "failed "
                         "twice: %s, then %s (state %d)",
                         fs < ST__COUNT ? step_names[fs] : "-", dv_err_name(p1), dv_err_name(p2),
                         (int)h.state);
                }
            } else if (p1 != DV_OK) {
                addf(rec, false, "the first probe answered %s, the second worked", dv_err_name(p1));
            }
            stats_leak(r, "stats after the probe");
            r->have_health = dv_actor_health_get(r->a, &r->health) == DV_OK;
        }
    }

    before(r, ST_DESTROY);
    if (ev != NULL)
        note(r, dv_event_destroy(ev));
    if (r->a != NULL)
        note(r, dv_actor_destroy(r->a));
    r->a = NULL;
}

/* Does this failure name the cell's fault? */
static bool names_fault(const cell *c, const char *call, int driver_code, const char *message)
{
    int code = kind_code(c);
    if (injected_kind(c->kind)) {
        const char *want = call_name((int)c->call);
        bool by_call = strcmp(call, want) == 0 || strstr(message, want) != NULL;
        return driver_code == code && by_call;
    }
    const char *code_name = dv__driver_code_name(code);
    return driver_code == code || (code_name != NULL && strstr(message, code_name) != NULL);
}

static void judge(run *r)
{
    const cell *c = r->c;
    cell_out *o = r->out;
    line_out *named = &o->line[L_NAMED], *leak = &o->line[L_LEAK], *fired = &o->line[L_FIRED];

    /* fired */
    if (injected_kind(c->kind)) {
        uint64_t n = dv__sim_calls(r->drv, c->call);
        if (r->fired_step < ST__COUNT) {
            addf(fired, false, "%s #%llu answered %s in step %s", call_name((int)c->call),
                 (unsigned long long)c->nth, dv__driver_code_name(kind_code(c)),
                 step_names[r->fired_step]);
        } else {
            /* Not a finding: how often some calls are made depends on how
             * the actor batches what it is sent.  The cell ran clean. */
            fired->verdict = V_SKIP;
            addf(fired, false, "not reached: %s was made %llu times in this run (%s)",
                 call_name((int)c->call), (unsigned long long)n,
                 c->polled ? "a polled call" : "fewer than in the counting runs");
        }
    }

    /* named */
    if (r->unnamed > 0)
        addf(named, true, "%d failures came with an empty detail (no call, no message)",
             r->unnamed);
    int shown = r->nfails < MAX_FAILS ? r->nfails : MAX_FAILS;
    bool some = false;
    for (int i = 0; i < shown; i++)
        some =
            some || names_fault(c, r->fails[i].call, r->fails[i].driver_code, r->fails[i].message);
    bool health_names =
        r->have_health && r->health.first_fault.status != 0 &&
        names_fault(c, r->health.first_fault.call ? r->health.first_fault.call : "",
                    r->health.first_fault.driver_code, r->health.first_fault.message);
    if (c->kind == K_CONTROL) {
        if (r->nfails > 0)
            addf(named, true, "no fault, yet %d calls failed", r->nfails);
    } else if (r->nfails == 0) {
        addf(named, false, "absorbed: no call failed%s",
             health_names ? " (the health names the fault)" : "");
    } else if (!some && !health_names) {
        addf(named, true,
             "%d calls failed and none names the fault (%s); the first, in step "
             "%s: %s: %.160s",
             r->nfails,
             injected_kind(c->kind) ? call_name((int)c->call) : dv__driver_code_name(kind_code(c)),
             step_names[r->fails[0].step], dv_err_name(r->fails[0].rc), r->fails[0].message);
    }
    for (int i = 0; i < shown && i < 4; i++)
        addf(named, false, "[%s] %s call=%s code=%d: %.160s", step_names[r->fails[i].step],
             dv_err_name(r->fails[i].rc), r->fails[i].call[0] ? r->fails[i].call : "(none)",
             r->fails[i].driver_code, r->fails[i].message);
    if (r->nfails > 4)
        addf(named, false, "and %d more", r->nfails - 4);

    /* leak: the sim after the actor is gone */
    {
        uint64_t bytes = dv__sim_allocated_bytes(r->drv, 0);
        if (bytes != 0)
            addf(leak, true, "the actor is destroyed, yet the sim holds %llu bytes on device 0",
                 (unsigned long long)bytes);
        int objs = 0;
        for (dv_drv_obj *x = r->drv->live_head.live_next; x != &r->drv->live_head; x = x->live_next)
            objs++;
        if (objs != 0)
            addf(leak, true, "the actor is destroyed, yet %d driver objects are alive", objs);
    }
}

/*
 * After destroy: the next actor on the same driver.  A fault that is not
 * fatal must not outlive the actor that met it (a device left poisoned, or
 * memory left allocated, would refuse or starve the next one); after a
 * fatal one the device is refused for the rest of the process.
 */
static void next_actor(run *r)
{
    const cell *c = r->c;
    line_out *rec = &r->out->line[L_RECOVERS], *leak = &r->out->line[L_LEAK];
    set_step(r, ST_NEXT);
    /* An armed fault that never fired stays out of this. */
    if (injected_kind(c->kind)) {
        dv__sim_inject(r->drv, c->call, 0, 0);
        dv__sim_fail_alloc_nth(r->drv, 0);
    }
    int rc = make_actor(r, &r->a);
    if (c->kind == K_FATAL || r->lost_ok) {
        const char *why = c->kind == K_FATAL ? "a fatal poison" : "the actor became LOST";
        if (rc == DV_OK) {
            int p = probe(r, "next actor");
            if (p != DV_EDEVICE_LOST && p != DV_ECONTEXT_LOST)
                addf(rec, true, "after %s, the next actor's probe answered %s", why,
                     dv_err_name(p));
        } else if (rc != DV_EDEVICE_LOST && rc != DV_ECONTEXT_LOST) {
            addf(rec, true, "after %s, the next actor was refused with %s (%s)", why,
                 dv_err_name(rc), dv_last_error()->message);
        }
    } else if (rc != DV_OK) {
        addf(rec, true, "the next actor on the driver cannot be made: %s (%s)", dv_err_name(rc),
             dv_last_error()->message);
    } else {
        int p = probe(r, "next actor");
        if (p != DV_OK)
            p = probe(r, "next actor, second probe");
        if (p != DV_OK)
            addf(rec, true, "the next actor on the driver fails its probe twice: %s",
                 dv_err_name(p));
    }
    if (r->a != NULL)
        note(r, dv_actor_destroy(r->a));
    r->a = NULL;
    uint64_t bytes = dv__sim_allocated_bytes(r->drv, 0);
    if (c->kind != K_FATAL && bytes != 0)
        addf(leak, true, "the next actor is destroyed too, yet the sim holds %llu bytes",
             (unsigned long long)bytes);
}

static dv_driver *open_driver(void)
{
    dv_driver_config cfg;
    dv_driver *drv = NULL;
    dv__driver_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    cfg.sim.devices = 1;
    cfg.sim.memory_bytes = 64u << 20;
    cfg.sim.seed = 11;
    return dv__driver_open(&cfg, &drv) == DV_OK ? drv : NULL;
}

/* ------------------------------------------------------------------------
 * The watchdog (in the child)
 * ------------------------------------------------------------------------ */

static cell_out *wd_out;
static char wd_name[128];

static void wd_put(const char *s)
{
    ssize_t n = write(2, s, strlen(s));
    (void)n;
}

static void on_alarm(int sig)
{
    (void)sig;
    int saved = errno;
    atomic_store(&wd_out->hang, 1);
    int s = atomic_load(&wd_out->step);
    wd_put("fault_matrix: watchdog: cell '");
    wd_put(wd_name);
    wd_put("' hangs in step '");
    wd_put(s >= 0 && s < ST__COUNT ? step_names[s] : "-");
    wd_put("'; aborting\n");
    errno = saved;
    abort();
}

static void child_setup(cell_out *out, const char *name)
{
    wd_out = out;
    snprintf(wd_name, sizeof(wd_name), "%s", name);
    signal(SIGALRM, on_alarm);
    alarm(WATCHDOG_S);
}

static void child_cell(const cell *c, cell_out *out)
{
    run r = {.c = c, .out = out, .step = ST_NONE, .fired_step = ST__COUNT};
    child_setup(out, c->name);
    r.drv = open_driver();
    if (r.drv == NULL) {
        addf(&out->line[L_SURVIVED], true, "cannot open a sim driver: %s",
             dv_last_error()->message);
        _exit(3);
    }
    if (injected_kind(c->kind)) {
        int rc;
        if (c->kind == K_OOM && c->alloc_nth != 0)
            rc = dv__sim_fail_alloc_nth(r.drv, c->alloc_nth);
        else
            rc = dv__sim_inject(r.drv, c->call, c->nth, kind_code(c));
        if (rc != DV_OK) {
            addf(&out->line[L_FIRED], true, "arming failed: %s", dv_last_error()->message);
            _exit(3);
        }
    }
    workload(&r);
    set_step(&r, ST__COUNT);
    judge(&r);
    next_actor(&r);
    for (int l = 0; l < L__COUNT; l++)
        if (out->line[l].verdict == V_UNSET)
            out->line[l].verdict = V_PASS;
    dv__driver_close(r.drv);
    alarm(0);
    out->finished = 1;
    exit(0);
}

static void child_count(count_out *out, cell_out *progress)
{
    static const cell control = {.kind = K_CONTROL, .name = "counting run"};
    run r = {.c = &control, .out = progress, .step = ST_NONE, .fired_step = ST__COUNT};
    child_setup(progress, "counting run");
    r.drv = open_driver();
    if (r.drv == NULL) {
        snprintf(out->why, sizeof(out->why), "cannot open a sim driver");
        _exit(3);
    }
    spy.trace = out;
    spy_install(r.drv);
    workload(&r);
    spy_remove(r.drv);
    set_step(&r, ST__COUNT);
    judge(&r);
    for (int i = 0; i < DV_CALL__COUNT; i++) {
        out->count[i] = atomic_load(&spy.count[i]);
        out->sim_count[i] = dv__sim_calls(r.drv, (dv_drv_call)i);
    }
    next_actor(&r);
    for (int l = 0; l < L__COUNT; l++)
        if (progress->line[l].verdict == V_UNSET)
            progress->line[l].verdict = V_PASS;
    out->ok = r.nfails == 0 && progress->line[L_DATA].verdict == V_PASS &&
              progress->line[L_LEAK].verdict == V_PASS &&
              progress->line[L_RECOVERS].verdict == V_PASS;
    if (!out->ok)
        snprintf(out->why, sizeof(out->why),
                 "the clean run failed: %.120s | %.120s | %.120s | %.120s",
                 progress->line[L_NAMED].diag, progress->line[L_DATA].diag,
                 progress->line[L_LEAK].diag, progress->line[L_RECOVERS].diag);
    dv__driver_close(r.drv);
    alarm(0);
    progress->finished = 1;
    exit(0);
}

/* ------------------------------------------------------------------------
 * The parent: count, make the cells, run them (a few at a time), report
 * ------------------------------------------------------------------------ */

static void *shared_alloc(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        bail_out("mmap of %zu shared bytes failed", bytes);
    return p;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Describe how a child ended; true when it exited 0. */
static bool describe_exit(int status, const cell_out *o, char *why, size_t n)
{
    int s = atomic_load(&((cell_out *)o)->step);
    const char *step = s >= 0 && s < ST__COUNT ? step_names[s] : s == ST__COUNT ? "judging" : "-";
    if (atomic_load(&((cell_out *)o)->hang)) {
        snprintf(why, n, "hung in step '%s': the watchdog aborted it after %d s", step, WATCHDOG_S);
        return false;
    }
    if (WIFSIGNALED(status)) {
        snprintf(why, n, "killed by signal %d (%s) in step '%s'", WTERMSIG(status),
                 strsignal(WTERMSIG(status)), step);
        return false;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        snprintf(why, n, "exited with status %d in step '%s' (a sanitizer report on stderr?)",
                 WEXITSTATUS(status), step);
        return false;
    }
    snprintf(why, n, "exited 0");
    return true;
}

static double *durations; /* of each cell's child, seconds */

typedef struct job {
    pid_t pid;
    int index;
    double started;
    int status;
    bool killed;
} job;

static int jobs_wanted(void)
{
    const char *e = getenv("DV_MATRIX_JOBS");
    int j = e != NULL ? atoi(e) : 2;
    return j < 1 ? 1 : j > 16 ? 16 : j;
}

/* Run n children, fn(i) in child i, at most jobs at once; statuses in st. */
static void run_children(int n, void (*fn)(int i), int *st, void (*done)(int i))
{
    int jobs = jobs_wanted();
    job run_[16];
    int running = 0, next = 0;
    while (next < n || running > 0) {
        while (running < jobs && next < n) {
            fflush(stdout);
            fflush(stderr);
            pid_t pid = fork();
            if (pid < 0)
                bail_out("fork: %s", strerror(errno));
            if (pid == 0) {
                fn(next);
                _exit(4); /* fn exits */
            }
            run_[running++] = (job){pid, next, now_s(), 0, false};
            next++;
        }
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid == 0) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
            for (int i = 0; i < running; i++) {
                if (!run_[i].killed && now_s() - run_[i].started > BACKSTOP_S) {
                    kill(run_[i].pid, SIGKILL);
                    run_[i].killed = true;
                }
            }
            continue;
        }
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            bail_out("waitpid: %s", strerror(errno));
        }
        for (int i = 0; i < running; i++) {
            if (run_[i].pid != pid)
                continue;
            st[run_[i].index] = status;
            if (durations != NULL)
                durations[run_[i].index] = now_s() - run_[i].started;
            if (done != NULL)
                done(run_[i].index);
            run_[i] = run_[--running];
            break;
        }
    }
}

static count_out *counts;
static cell_out *count_progress;
static cell *cells;
static cell_out *outs;
static int *statuses;
static int ncells, reported;
static bool *completed;

static void count_child(int i)
{
    child_count(&counts[i], &count_progress[i]);
}

static void cell_child(int i)
{
    child_cell(&cells[i], &outs[i]);
}

static bool full_matrix(void)
{
    const char *e = getenv("DV_MATRIX_FULL");
    return e != NULL && strcmp(e, "1") == 0;
}

static void add_cell(int *cap, const cell *c)
{
    const char *only = getenv("DV_MATRIX_ONLY");
    if (only != NULL && only[0] != '\0' && strstr(c->name, only) == NULL)
        return;
    if (ncells == *cap) {
        *cap = *cap ? *cap * 2 : 256;
        cells = realloc(cells, (size_t)*cap * sizeof(*cells));
        if (cells == NULL)
            bail_out("out of memory");
    }
    cells[ncells++] = *c;
}

/*
 * The occurrences of a call tried: every one, up to the fewest the counting
 * runs made (when that is at most MAX_POSITIONS); for a call made more
 * often, a polled call (whose count, and so where its later occurrences
 * fall, follows the timing: see is_polled()), and under sanitizers, the first
 * occurrence in each step of the counting run, the last one, and the first
 * three of a polled call.
 */
#define MAX_POSITIONS 64

/* A call whose count varies much from run to run: the actor's polls. */
static bool is_polled(uint64_t min, uint64_t max)
{
    return max > min + min / 8 + 1;
}
static int positions(int call, uint64_t min, bool polled, uint64_t *pos)
{
    const count_out *t = &counts[0];
    uint64_t n = min < MAX_TRACE ? min : MAX_TRACE;
    int k = 0;
    if (full_matrix() || (!polled && !UNDER_SANITIZER && n <= MAX_POSITIONS)) {
        for (uint64_t i = 1; i <= n && k < MAX_POSITIONS; i++)
            pos[k++] = i;
        return k;
    }
    for (uint64_t i = 1; i <= n && k < MAX_POSITIONS; i++) {
        bool first_in_step = i == 1 || t->step_of[call][i - 1] != t->step_of[call][i - 2];
        bool want = first_in_step || i == n || (polled && i <= 3);
        bool seen_step = false;
        for (uint64_t j = 1; j < i && first_in_step; j++)
            seen_step = seen_step || t->step_of[call][j - 1] == t->step_of[call][i - 1];
        if (want && (!seen_step || i == n || (polled && i <= 3)))
            pos[k++] = i;
    }
    return k;
}

static void build_cells(const uint64_t *min, const uint64_t *max)
{
    int cap = 0;
    const count_out *t = &counts[0];
    cell c = {.kind = K_CONTROL, .step = ST__COUNT};
    snprintf(c.name, sizeof(c.name), "control");
    add_cell(&cap, &c);
    for (int k = K_OOM; k <= K_STICKY; k++) {
        for (int call = 0; call < DV_CALL__COUNT; call++) {
            if (min[call] == 0)
                continue;
            uint64_t pos[MAX_POSITIONS];
            int np = positions(call, min[call], is_polled(min[call], max[call]), pos);
            for (int i = 0; i < np; i++) {
                uint64_t nth = pos[i];
                memset(&c, 0, sizeof(c));
                c.kind = (enum kind)k;
                c.call = (dv_drv_call)call;
                c.nth = nth;
                c.polled = is_polled(min[call], max[call]);
                c.step = nth <= MAX_TRACE ? t->step_of[call][nth - 1] : ST_NONE;
                if (k == K_OOM && (call == DV_CALL_MEM_ALLOC || call == DV_CALL_MEM_ALLOC_ASYNC))
                    c.alloc_nth = nth <= MAX_TRACE ? t->alloc_index[call][nth - 1] : 0;
                snprintf(c.name, sizeof(c.name), "%s at %s #%llu (step %s)", kind_names[k],
                         dv__drv_call_name(c.call), (unsigned long long)nth,
                         c.step >= 0 && c.step < ST__COUNT ? step_names[c.step] : "?");
                add_cell(&cap, &c);
            }
        }
    }
    for (int k = K_POISON; k <= K_FATAL; k++) {
        for (int s = ST_CREATE; s <= ST_DESTROY; s++) {
            memset(&c, 0, sizeof(c));
            c.kind = (enum kind)k;
            c.call = DV_CALL__COUNT;
            c.step = s;
            snprintf(c.name, sizeof(c.name), "%s before step %s", kind_names[k], step_names[s]);
            add_cell(&cap, &c);
        }
    }
}

/*
 * Known bugs: reported, not yet fixed.  A failing line of a matching cell
 * whose every failure says one of these is a TODO (TAP: expected to fail,
 * not counted).  Which occurrence N of a call meets a bug depends on how
 * the actor batches its messages, so a match is by the cell's kind and
 * call, the line, and what the failure says -- not by N.  Anything else
 * that fails still fails.
 */
typedef struct known_bug {
    const char *cell; /* in the cell's name */
    enum line line;
    const char *says; /* in the failure's text */
    const char *bug;
} known_bug;

/* None today: every cell passes.  An entry here prints its failing cells
 * as TODO (the check and the text must match), so keep it empty unless a
 * bug is reported and not fixed yet. */
static const known_bug known_bugs[] = {
    {NULL, 0, NULL, NULL},
};

/* The known bug every failure of the line is, or NULL. */
static const char *known(const cell *c, int l, const line_out *lo)
{
    const char *bug = NULL;
    char fails[sizeof(lo->fails)];
    snprintf(fails, sizeof(fails), "%s", lo->fails);
    for (char *save = NULL, *msg = strtok_r(fails, "\n", &save); msg != NULL;
         msg = strtok_r(NULL, "\n", &save)) {
        const char *this = NULL;
        for (size_t k = 0; k < sizeof(known_bugs) / sizeof(known_bugs[0]) && this == NULL; k++) {
            const known_bug *kb = &known_bugs[k];
            if (kb->cell != NULL && (int)kb->line == l && strstr(c->name, kb->cell) != NULL &&
                strstr(msg, kb->says) != NULL)
                this = kb->bug;
        }
        if (this == NULL)
            return NULL;
        bug = this;
    }
    return bug;
}

static void print_line(const cell *c, int l, const line_out *lo)
{
    char desc[200];
    snprintf(desc, sizeof(desc), "%s: %s", c->name, line_names[l]);
    const char *bug = lo->verdict == V_FAIL ? known(c, l, lo) : NULL;
    if (bug != NULL) {
        printf("not ok %d - %s # TODO known bug: %s\n", ++tap_run, desc, bug);
        diag("  %s", lo->diag);
        return;
    }
    switch (lo->verdict) {
    case V_SKIP:
        skip("%s: %s", desc, lo->diag);
        return;
    default:
        ok(lo->verdict == V_PASS, "%s", desc);
        if (lo->diag[0] != '\0' && (lo->verdict != V_PASS || l != L_SURVIVED))
            diag("  %s", lo->diag);
    }
}

static void report_cell(int i)
{
    const cell *c = &cells[i];
    cell_out *o = &outs[i];
    char why[256];
    bool survived = describe_exit(statuses[i], o, why, sizeof(why));
    line_out sv = {.verdict = survived ? V_PASS : V_FAIL};
    snprintf(sv.diag, sizeof(sv.diag), "%s", why);
    if (durations[i] > SLOW_CELL_S)
        diag("  %s took %.1f s", c->name, durations[i]);
    for (int l = 0; l < L__COUNT; l++) {
        if (!lines_of(c, (enum line)l))
            continue;
        if (l == L_SURVIVED) {
            print_line(c, l, &sv);
            continue;
        }
        if (!o->finished && o->line[l].verdict == V_UNSET) {
            line_out lo = {.verdict = V_FAIL};
            snprintf(lo.diag, sizeof(lo.diag), "not judged: the child %s", why);
            print_line(c, l, &lo);
            continue;
        }
        print_line(c, l, &o->line[l]);
    }
}

static void cell_done(int i)
{
    completed[i] = true;
    while (reported < ncells && completed[reported])
        report_cell(reported++);
}

int main(void)
{
    double t0 = now_s();
    setvbuf(stdout, NULL, _IOLBF, 0);

    /* Counting: clean runs of the workload, every call counted. */
    counts = shared_alloc(COUNT_RUNS * sizeof(*counts));
    count_progress = shared_alloc(COUNT_RUNS * sizeof(*count_progress));
    int cst[COUNT_RUNS];
    run_children(COUNT_RUNS, count_child, cst, NULL);
    /* min, max: of the calls the sim can fail; made: of every call. */
    uint64_t min[DV_CALL__COUNT], max[DV_CALL__COUNT], made[DV_CALL__COUNT];
    for (int i = 0; i < DV_CALL__COUNT; i++) {
        min[i] = UINT64_MAX;
        max[i] = made[i] = 0;
    }
    for (int r = 0; r < COUNT_RUNS; r++) {
        char why[256];
        if (!describe_exit(cst[r], &count_progress[r], why, sizeof(why)) || !counts[r].ok)
            bail_out("counting run %d: %s %s", r, why, counts[r].why);
        for (int i = 0; i < DV_CALL__COUNT; i++) {
            uint64_t n = counts[r].sim_count[i];
            min[i] = n < min[i] ? n : min[i];
            max[i] = n > max[i] ? n : max[i];
            made[i] = counts[r].count[i] > made[i] ? counts[r].count[i] : made[i];
            if (n != 0 && n != counts[r].count[i])
                diag("counting run %d: the sim counted %llu calls of %s, the spy %llu", r,
                     (unsigned long long)n, dv__drv_call_name((dv_drv_call)i),
                     (unsigned long long)counts[r].count[i]);
        }
    }
    diag("port calls of one clean run (%d runs: fewest..most), and the steps "
         "they came in:",
         COUNT_RUNS);
    int untestable = 0;
    for (int i = 0; i < DV_CALL__COUNT; i++) {
        if (made[i] == 0)
            continue;
        untestable += max[i] == 0;
        char where[400] = "";
        size_t len = 0;
        int prev = -2, run_len = 0;
        uint64_t n = counts[0].count[i] < MAX_TRACE ? counts[0].count[i] : MAX_TRACE;
        for (uint64_t k = 0; k <= n; k++) {
            int s = k < n ? counts[0].step_of[i][k] : -3;
            if (s == prev) {
                run_len++;
                continue;
            }
            if (prev >= 0 && prev < ST__COUNT && len < sizeof(where) - 40)
                len += (size_t)snprintf(where + len, sizeof(where) - len, "%s%sx%d", len ? " " : "",
                                        step_names[prev], run_len);
            prev = s;
            run_len = 1;
        }
        if (max[i] == 0)
            diag("  %-26s %3llu        %s (the sim cannot fail it)",
                 dv__drv_call_name((dv_drv_call)i), (unsigned long long)made[i], where);
        else
            diag("  %-26s %3llu..%-3llu %s", dv__drv_call_name((dv_drv_call)i),
                 (unsigned long long)min[i], (unsigned long long)max[i], where);
    }

    build_cells(min, max);
    int nlines = untestable * (K_STICKY - K_OOM + 1);
    for (int i = 0; i < ncells; i++)
        for (int l = 0; l < L__COUNT; l++)
            nlines += lines_of(&cells[i], (enum line)l);
    diag("%d cells (%s positions, %d at once)", ncells,
         full_matrix()     ? "every"
         : UNDER_SANITIZER ? "sanitizer"
                           : "default",
         jobs_wanted());
    plan(nlines);
    /* Calls the actor makes that the sim cannot fail (its op has no fault
     * check): one line per kind, so the matrix shows the hole. */
    for (int k = K_OOM; k <= K_STICKY; k++)
        for (int i = 0; i < DV_CALL__COUNT; i++)
            if (made[i] != 0 && max[i] == 0)
                skip("%s at %s: the actor makes this call (%llu times), but the sim "
                     "cannot fail "
                     "it: its op never reaches the sim's fault check",
                     kind_names[k], dv__drv_call_name((dv_drv_call)i), (unsigned long long)made[i]);

    outs = shared_alloc((size_t)ncells * sizeof(*outs));
    statuses = calloc((size_t)ncells, sizeof(*statuses));
    durations = calloc((size_t)ncells, sizeof(*durations));
    completed = calloc((size_t)ncells, sizeof(*completed));
    if (statuses == NULL || completed == NULL)
        bail_out("out of memory");
    run_children(ncells, cell_child, statuses, cell_done);
    diag("%d cells in %.1f s", ncells, now_s() - t0);
    return tap_done();
}
