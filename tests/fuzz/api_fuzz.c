/*
 * dv-fuzz: devactor's public API driven by a byte stream (libFuzzer).
 *
 * One input is an actor configuration (two bytes) and then up to MAX_OPS
 * operations, each an opcode byte and the bytes it reads for its operands
 * (a reader that runs dry reads zeros, so every input means something).
 * The operations are the public calls with ordinary and odd arguments:
 * allocations of 0, 1, huge and absurd sizes, releases and retains,
 * access, copies and sets with odd offsets and lengths, syncs, flushes,
 * events, tasks, launches of devactor's own kernels, stale, foreign,
 * random and NULL handles, streams out of range, NULL arguments, a reset,
 * destroying and making the actor again, a second actor sharing the
 * first one's driver (peer copies, events across actors), a second client
 * thread, and the sim's faults.
 *
 * The model
 * ---------
 * The harness keeps what the contract in devactor.h promises and checks
 * it; a broken promise aborts with the operations that led there:
 *
 *   - every call's status, predicted from the arguments: the client's own
 *     refusals, then each handle in the order the actor looks them up
 *     (NULL, foreign, stale, the allocation's own failure), then the
 *     range; a blocking call answers the status, an _async call answers
 *     the refusal or posts and its future completes with the status, and a
 *     failed call leaves its status in dv_last_error();
 *   - the bytes of every block up to SHADOW_MAX: one thread's operations
 *     on a handle are ordered in posting order whatever their streams (the
 *     order rule), so a read sees exactly the bytes written before it; a
 *     device-to-host copy's buffer is checked once its future completes,
 *     or earlier once a dv_sync, dv_event_sync or dv_event_query covers it
 *     (a vector clock per stream, moved by event records and stream waits);
 *   - a second thread that was handed a handle after a write returned sees
 *     the write, and its own write is seen after a join;
 *   - tasks: the callback runs exactly when its arguments were valid, sees
 *     its context, its host functions see the block as ordered and their
 *     writes are seen by later operations (for dv_task_async the model
 *     predicts the callback's own calls succeed, and checks that at the
 *     end), cleanups run exactly once, it may post _async calls, and
 *     blocking calls from its thread or a host function answer DV_EDEADLK;
 *   - dv_flush: every future this thread posted to the actor is ordered;
 *     dv_actor_reset and dv_actor_destroy: every future is complete;
 *   - the stream-order checker, when on, finds no hazard in this (correct)
 *     program;
 *   - at the end of each input everything is released, every stream synced,
 *     and dv_actor_stats_get must show refs_alive == 0 and
 *     bytes_outstanding == 0 (the pool may keep memory; outstanding is
 *     what callers hold) before the actors are destroyed.
 *
 * After an injected fault (a poisoned context, a driver call made to fail,
 * an illegal address) an actor is in "chaos": statuses and data of its
 * work are no longer predicted (only that nothing crashes, hangs or leaks
 * handles) until a reset or a new actor starts it clean again.
 *
 * A fresh actor per input
 * -----------------------
 * Every input makes its actors and destroys them at its end: the
 * configuration is part of the input, and a crash then replays from its
 * input alone (-runs=1) instead of depending on what earlier inputs left
 * in a pool.  It costs about a millisecond per input.  What the library
 * keeps for the process (handle domains, interned tags, kept event and
 * kernel structs, the table of lost drivers) is shared across inputs, as
 * it is in any long-lived process.
 *
 * DV_FUZZ_TRACE=1 prints each operation as it runs (for a crash that is
 * not one of the harness's own checks).  The seeds named known-* are the
 * inputs of fixed findings (docs/FUZZING.md), kept as regressions.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devactor.h"
#include "devactor_sim.h"
/* For dv__actor_driver alone: a second actor on the first one's driver
 * (another device of it), for peer copies and events across actors. */
#include "devactor_testing.h"

#define MAX_OPS     64
#define MAX_BUFS    12
#define MAX_STALE   16
#define MAX_EVENTS  6
#define MAX_STREAMS 8                 /* the most a generated configuration asks for */
#define NKEYS       (2 * MAX_STREAMS) /* (actor, stream) pairs of the clocks */
#define SHADOW_MAX  (256u << 10)      /* blocks up to this size have a model */
#define SIM_MEMORY  (UINT64_C(64) << 20)
#define BUDGET      (UINT64_C(2) << 20)
/* Small allocations must succeed while an actor has been asked for no more
 * than this since its state began (no budget, no armed failures). */
#define SURE_TOTAL (UINT64_C(8) << 20)
#define SURE_SIZE  (UINT64_C(256) << 10)

/* Expected outcomes beside the statuses themselves. */
#define EXP_STALEISH 1000 /* DV_ESTALE or DV_EINVAL: a handle that is not this actor's live one */
#define EXP_ANYFAIL  1001 /* any error */
#define EXP_ANY      1002 /* anything (chaos) */
#define ST_UNKNOWN   1    /* a handle's allocation not settled as far as the model knows */

/* ------------------------------------------------------------------------
 * Reading the input
 * ------------------------------------------------------------------------ */

typedef struct rd {
    const uint8_t *p;
    size_t n;
} rd;

static uint8_t u8(rd *r)
{
    if (r->n == 0)
        return 0;
    r->n--;
    return *r->p++;
}

static uint16_t u16(rd *r)
{
    uint16_t lo = u8(r);
    uint16_t hi = u8(r);
    return (uint16_t)(lo | hi << 8);
}

static uint32_t u32(rd *r)
{
    uint32_t lo = u16(r);
    uint32_t hi = u16(r);
    return lo | hi << 16;
}

static uint64_t u64(rd *r)
{
    uint64_t lo = u32(r);
    uint64_t hi = u32(r);
    return lo | hi << 32;
}

/* ------------------------------------------------------------------------
 * The model's state (one input at a time; static so futures never move)
 * ------------------------------------------------------------------------ */

enum {
    K_FILL,
    K_COPY,
    K_ADD,
    K_CHECKSUM,
    K_POKE,
    K_SPIN,
    K_EMPTY,
    K_STORE,
    K_TOUCH8,
    K_MINE,    /* "fill_u32" of the harness's own sim image: value + 1 */
    K_ILLEGAL, /* only as a fault (op_fault) */
    K__COUNT
};
static const char *const kernel_names[K__COUNT] = {
    "fill_u32", "copy",       "add_u32", "checksum", "poke_u8",        "spin",
    "empty",    "store_args", "touch8",  "fill_u32", "illegal_address"};

/* A kernel image of the harness's own for the sim: a host twin named like
 * a built-in, which names scoped to their image keep apart. */
static int twin_fill_plus1(dv_sim_kctx *k, void **params)
{
    uint64_t n, ptr;
    uint32_t v;
    memcpy(&ptr, params[0], 8);
    memcpy(&v, params[1], 4);
    memcpy(&n, params[2], 8);
    uint8_t *p = dv_sim_kmem(k, ptr, n * 4);
    if (p == NULL)
        return DV_SIM_ILLEGAL_ADDRESS;
    v += 1;
    for (uint64_t i = 0; i < n; i++)
        memcpy(p + i * 4, &v, 4);
    return 0;
}
static const dv_sim_kernel my_twins[] = {{"fill_u32", twin_fill_plus1, 3, {8, 4, 8}}};
static const dv_sim_image my_image = DV_SIM_IMAGE(my_twins);

typedef struct actor_m {
    dv_actor *a;
    dv_actor_config cfg;
    int device;
    bool chaos;         /* a fault was injected: nothing predicted until reset */
    bool faulted;       /* one was, since it started: the health may keep it */
    bool lost;          /* a process-fatal fault: LOST for good (once it notices) */
    bool fail_armed;    /* allocation failures armed on its driver */
    uint64_t attempted; /* bytes asked of it since its state began */
    uint32_t rebuilds;  /* expected health.rebuilds */
    dv_kernel *k[K__COUNT];
    uint64_t frontier[MAX_STREAMS][NKEYS]; /* what each stream's tail waits for */
} actor_m;

typedef struct buf_m {
    bool used;
    bool busy; /* handed to the worker thread */
    int actor;
    dv_ref ref;
    uint64_t size;
    dv_stream stream;
    uint32_t refs; /* references this thread holds */
    int status;    /* DV_OK, the allocation's error, or ST_UNKNOWN */
    bool must_succeed;
    uint8_t *data, *known; /* the block's bytes as the model knows them */
} buf_m;

typedef enum href_kind { H_LIVE, H_STALE, H_RANDOM, H_NULL } href_kind;

typedef struct href {
    href_kind kind;
    int buf;
    dv_ref ref;
} href;

/* What a call should answer (see final_of). */
typedef struct expect {
    int pre;   /* refused by the client before posting */
    int first; /* the actor's refusal before any handle (the kernel, its parameters) */
    int n;
    struct {
        int buf;   /* >= 0: a live handle whose allocation status counts */
        int code;  /* the handle's own error */
        int range; /* an error after its lookup (its range) */
        int owner; /* a foreign live handle's actor, else -1 */
    } h[8];
    int post; /* an error after every lookup */
    bool any; /* chaos */
} expect;

enum { P_PLAIN, P_DTOH, P_ALLOC, P_SYNC, P_EVENT };

typedef struct pend_m {
    bool used;
    int kind;
    int actor;
    int key;
    uint64_t seq;
    dv_future f;
    expect ex;
    bool try_;
    bool verified;
    int buf; /* P_ALLOC's buffer */
    uint8_t *host, *want, *wknown;
    uint64_t len;
    uint64_t clock[NKEYS]; /* P_SYNC, P_EVENT: what completion covers */
    char what[64];
} pend_m;

typedef struct event_m {
    dv_event *e;
    int actor;
    bool timing;
    int state; /* 0 never recorded, 1 recorded, 2 recorded before a rebuild,
                * 3 unknown (recorded around a fault) */
    bool synced;
    uint64_t clock[NKEYS];
} event_m;

/* A task's behaviour and what it saw. */
enum {
    T_HOST_WRITE = 1, /* a host function writes a pattern into argument 0 */
    T_HOST_CHECK = 2, /* a host function compares argument 0 with the model */
    T_LAUNCH = 4,     /* dv_task_launch fills argument 0 */
    T_POST = 8,       /* an _async memset of argument 0 from inside the task */
    T_BAD_CALLS = 16, /* task calls with bad arguments */
    T_CHECK_CTX = 32, /* the context matches the call */
    T_SCRATCH = 64,   /* scratch memory filled, then copied into argument 0 */
    T_CLEANUP = 128,  /* a host function with a cleanup (runs exactly once) */
    T_DEADLK = 256,   /* blocking calls inside the task and its host function */
};

typedef struct task_m {
    int behaviour;
    int ret;
    dv_actor *actor;
    dv_stream stream;
    unsigned nargs;
    uint64_t len;
    uint32_t seed;
    uint8_t *want, *wknown;
    dv_kernel *fill;
    uint32_t fill_value;
    uint64_t fill_words;
    dv_kernel *copy;
    dv_actor *other; /* the other actor, or NULL */
    dv_ref mref;
    uint64_t mlen;
    uint8_t mvalue;
    dv_future mf;
    int mrc;
    uint8_t *dev;
    _Atomic int ran, host_enqueued, host_ran, mismatch, bad;
    _Atomic int cleanup_enqueued, cleanups, cleanup_status;
    int launch_rc, host_rc, scratch_rc;
    bool predicted; /* the model assumed the callback's calls succeed */
} task_m;

enum { J_READ, J_WRITE, J_ALLOC };

typedef struct job_m {
    bool running;
    bool f_live; /* f (and src) in flight: wait before reuse */
    pthread_t th;
    int kind;
    dv_actor *a;
    int actor, buf;
    dv_ref ref;
    uint64_t off, len;
    dv_stream stream, stream2;
    uint8_t value;
    uint8_t *want, *wknown, *src;
    expect ex, ex2;
    dv_future f;
    int rc, rc2, rc_rel;
    int err, err2; /* the worker's dv_last_error() after rc, rc2 */
    bool mismatch;
    uint64_t mismatch_at;
    dv_ref made;
} job_m;

static struct fuzz {
    actor_m act[2]; /* 0: the main actor; 1: a peer on its driver */
    buf_m buf[MAX_BUFS];
    dv_ref stale[MAX_STALE];
    unsigned nstale;
    pend_m pend[MAX_OPS];
    event_m ev[MAX_EVENTS];
    dv_event *just_destroyed; /* an event destroyed since the last create */
    task_m task[MAX_OPS];
    dv_arg args[MAX_OPS][DV_LAUNCH_MAX_ARGS + 1];
    uint8_t bytes[MAX_OPS][16]; /* by-value arguments of launches */
    job_m job;
    uint64_t seq;
    int op;
    bool trace;
    bool faulted;   /* a fault was injected in this input */
    bool err_valid; /* err holds the detail's status right after the last call */
    int err;
    char log[256][200]; /* a ring: the newest lines */
    unsigned nlog;
} Z;

/* ------------------------------------------------------------------------
 * Reporting
 * ------------------------------------------------------------------------ */

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
    char *line = Z.log[Z.nlog % 256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(Z.log[0]), fmt, ap);
    va_end(ap);
    if (Z.trace)
        fprintf(stderr, "dv-fuzz: %s\n", line);
    Z.nlog++;
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "\ndv-fuzz: INVARIANT BROKEN: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\ndv-fuzz: last error on this thread: %s: %s\n",
            dv_err_name(dv_last_error()->status), dv_last_error()->message);
    fprintf(stderr, "dv-fuzz: the input's operations (newest last):\n");
    for (unsigned i = Z.nlog > 256 ? Z.nlog - 256 : 0; i < Z.nlog; i++)
        fprintf(stderr, "  %s\n", Z.log[i % 256]);
    abort();
}

static const char *exp_name(int e)
{
    switch (e) {
    case EXP_STALEISH:
        return "DV_ESTALE or DV_EINVAL";
    case EXP_ANYFAIL:
        return "an error";
    case EXP_ANY:
        return "anything";
    default:
        return dv_err_name(e);
    }
}

/* ------------------------------------------------------------------------
 * Expectations
 * ------------------------------------------------------------------------ */

static bool chaotic(int ai)
{
    return Z.act[ai].chaos || Z.act[ai].lost;
}

static int buf_status(int bi);

/*
 * The status a call answers: the client's refusal, else the first handle
 * error in lookup order (a live handle's allocation failure counts, learnt
 * from dv_ref_access when not known yet, unless assume_ok), else post.
 */
static int final_of(const expect *e, bool assume_ok)
{
    if (e->any)
        return EXP_ANY;
    if (e->pre)
        return e->pre;
    if (e->first)
        return e->first;
    for (int i = 0; i < e->n; i++) {
        int c = e->h[i].code;
        if (c == 0 && e->h[i].buf >= 0) {
            int st = Z.buf[e->h[i].buf].status;
            if (st == ST_UNKNOWN && !assume_ok)
                st = buf_status(e->h[i].buf);
            if (st != ST_UNKNOWN && st != DV_OK)
                c = st;
        }
        if (c)
            return c;
        if (e->h[i].range)
            return e->h[i].range;
    }
    return e->post;
}

static bool rc_matches(int rc, int want)
{
    switch (want) {
    case EXP_ANY:
        return true;
    case EXP_ANYFAIL:
        return rc != DV_OK;
    case EXP_STALEISH:
        return rc == DV_ESTALE || rc == DV_EINVAL;
    default:
        return rc == want;
    }
}

/* The detail's status right after a call, before the model's own calls
 * (dv_ref_access to settle what it expects) can overwrite it. */
static int note_rc(int rc)
{
    Z.err = dv_last_error()->status;
    Z.err_valid = true;
    return rc;
}

/* A failed call leaves its status in the thread's detail. */
static void check_detail(const char *what, int rc)
{
    int err = Z.err_valid ? Z.err : dv_last_error()->status;
    Z.err_valid = false;
    if (rc < 0 && err != rc)
        fail("%s answered %s but dv_last_error() says %s (%s)", what, dv_err_name(rc),
             dv_err_name(err), dv_last_error()->message);
}

static void check_rc(const char *what, int rc, int want)
{
    if (!rc_matches(rc, want))
        fail("%s answered %s (%d), expected %s", what, dv_err_name(rc), rc, exp_name(want));
    if (want != EXP_ANY)
        check_detail(what, rc);
    Z.err_valid = false; /* a noted status goes with this check only */
}

/* A result another thread got, with the status its detail said. */
static void check_rc_of(const char *what, int rc, int err, int want)
{
    if (!rc_matches(rc, want))
        fail("%s answered %s (%d), expected %s", what, dv_err_name(rc), rc, exp_name(want));
    if (want != EXP_ANY && rc < 0 && err != rc)
        fail("%s answered %s but its thread's dv_last_error() says %s", what, dv_err_name(rc),
             dv_err_name(err));
}

static void ex_init(expect *e, int ai)
{
    memset(e, 0, sizeof(*e));
    e->any = ai >= 0 && chaotic(ai);
}

static void ex_pre(expect *e, bool cond, int code)
{
    if (cond && e->pre == 0)
        e->pre = code;
}

static void ex_post(expect *e, bool cond, int code)
{
    if (cond && e->post == 0)
        e->post = code;
}

/* A handle given to actor ai for [off, off + len) (len 0: an argument at
 * off, valid while off < size). */
static void ex_handle(expect *e, const href *h, int ai, uint64_t off, uint64_t len, bool arg)
{
    int i = e->n++;
    e->h[i].buf = -1;
    e->h[i].code = 0;
    e->h[i].range = 0;
    e->h[i].owner = -1;
    switch (h->kind) {
    case H_NULL:
        e->h[i].code = DV_EINVAL;
        return;
    case H_RANDOM:
        e->h[i].code = h->ref.bits == 0 || (h->ref.bits >> 56) == 0 ? DV_EINVAL : EXP_STALEISH;
        return;
    case H_STALE:
        e->h[i].code = EXP_STALEISH;
        return;
    case H_LIVE:
        break;
    }
    const buf_m *b = &Z.buf[h->buf];
    if (b->actor != ai) {
        e->h[i].code = DV_EINVAL; /* another actor's handle */
        e->h[i].owner = b->actor;
        return;
    }
    e->h[i].buf = h->buf;
    bool outside = arg ? off >= b->size : (off > b->size || len > b->size - off);
    if (outside)
        e->h[i].range = DV_EINVAL;
}

/* Tracked work on a direct_alloc actor is refused after its lookups. */
static void ex_tracked(expect *e, int ai)
{
    ex_post(e, Z.act[ai].cfg.direct_alloc, DV_ESTREAM_MISUSE);
}

/* ------------------------------------------------------------------------
 * The bytes of blocks
 * ------------------------------------------------------------------------ */

static uint8_t pattern(uint32_t seed, uint64_t i)
{
    uint32_t x = seed * 2654435761u ^ (uint32_t)(i * 40503u) ^ (uint32_t)(i >> 16);
    return (uint8_t)(x ^ x >> 11 ^ x >> 23);
}

static bool modelled(int bi)
{
    return bi >= 0 && Z.buf[bi].data != NULL && !chaotic(Z.buf[bi].actor);
}

static void sh_write(int bi, uint64_t off, const uint8_t *src, const uint8_t *known, uint64_t len)
{
    if (!modelled(bi))
        return;
    memmove(Z.buf[bi].data + off, src, len);
    if (known != NULL)
        memmove(Z.buf[bi].known + off, known, len);
    else
        memset(Z.buf[bi].known + off, 1, len);
}

static void sh_fill(int bi, uint64_t off, uint8_t value, uint64_t len)
{
    if (!modelled(bi))
        return;
    memset(Z.buf[bi].data + off, value, len);
    memset(Z.buf[bi].known + off, 1, len);
}

static void sh_forget(int bi, uint64_t off, uint64_t len)
{
    if (!modelled(bi))
        return;
    memset(Z.buf[bi].known + off, 0, len);
}

/* A copy of the model's view of [off, off + len) (unknown where none). */
static void sh_snapshot(int bi, uint64_t off, uint64_t len, uint8_t **want, uint8_t **known)
{
    /* Longer than any model: only on a block whose allocation cannot have
     * succeeded (the model did not settle it yet), never verified. */
    uint64_t n = len && len <= SHADOW_MAX ? len : 1;
    *want = calloc(1, n);
    *known = calloc(1, n);
    if (*want == NULL || *known == NULL)
        abort();
    if (!modelled(bi) || len > SHADOW_MAX)
        return;
    memcpy(*want, Z.buf[bi].data + off, len);
    memcpy(*known, Z.buf[bi].known + off, len);
}

static void verify(const char *what, const uint8_t *got, const uint8_t *want, const uint8_t *known,
                   uint64_t len)
{
    if (len > SHADOW_MAX)
        fail("%s: %" PRIu64 " bytes read from a block the model cannot hold", what, len);
    for (uint64_t i = 0; i < len; i++)
        if (known[i] && got[i] != want[i])
            fail("%s: byte %" PRIu64 " of %" PRIu64 " is 0x%02x, the model says 0x%02x", what, i,
                 len, got[i], want[i]);
}

/* ------------------------------------------------------------------------
 * Handles
 * ------------------------------------------------------------------------ */

static int key_of(int ai, dv_stream s)
{
    return ai * MAX_STREAMS + (int)(s % MAX_STREAMS);
}

static void join_worker(void);

/* A size the call accepts (up to 2^48) that a layer may still call absurd
 * once it adds its own bytes (the guard's canaries): DV_EINVAL then. */
static bool huge(uint64_t size)
{
    return size > (UINT64_C(1) << 40);
}

/* Ask dv_ref_access (it waits for a pending handle) and check what it
 * says against the model: the allocation's outcome, once learnt, never
 * changes, and a live handle describes what was asked. */
static int access_check(int bi)
{
    buf_m *b = &Z.buf[bi];
    dv_ref_info info;
    int rc = dv_ref_access(b->ref, &info);
    if (chaotic(b->actor)) {
        if (b->status == ST_UNKNOWN)
            b->status = rc == DV_OK ? DV_OK : DV_EINVAL;
        return b->status;
    }
    if (b->status != ST_UNKNOWN && rc != b->status)
        fail("ref_access(buf%d) answered %s, earlier %s", bi, dv_err_name(rc),
             dv_err_name(b->status));
    if (rc == DV_OK) {
        if (info.requested != b->size || info.bytes < b->size ||
            info.device != Z.act[b->actor].device || info.alloc_stream != b->stream ||
            info.refcount != b->refs + (b->busy ? 1 : 0))
            fail("ref_access(buf%d): requested %" PRIu64 " bytes %" PRIu64
                 " device %d stream %u refcount %u; asked %" PRIu64
                 " on device %d stream %u, refs %u",
                 bi, info.requested, info.bytes, info.device, info.alloc_stream, info.refcount,
                 b->size, Z.act[b->actor].device, b->stream, b->refs);
    } else {
        if (dv_last_error()->status != rc)
            fail("ref_access answered %s but dv_last_error() says %s", dv_err_name(rc),
                 dv_err_name(dv_last_error()->status));
        if (rc == DV_ESTALE || (rc == DV_EINVAL && !huge(b->size)) || rc == DV_EAGAIN)
            fail("ref_access(buf%d) of a live handle answered %s", bi, dv_err_name(rc));
        if (b->must_succeed)
            fail("alloc(buf%d, %" PRIu64 " bytes) failed with %s, with little asked of the "
                 "device so far",
                 bi, b->size, dv_err_name(rc));
    }
    b->status = rc;
    return rc;
}

/* What the model knows of a handle's allocation, settled when unknown. */
static int buf_status(int bi)
{
    return Z.buf[bi].status != ST_UNKNOWN ? Z.buf[bi].status : access_check(bi);
}

/* Expectations name buffers by slot, and slots are reused: before a
 * handle goes (its last release, a reset, its actor's end), settle it and
 * write its status into every expectation that names it. */
static void freeze_expect(expect *e, int ai, int bi)
{
    for (int i = 0; i < e->n; i++) {
        int b = e->h[i].buf;
        if (b < 0 || (bi >= 0 ? b != bi : Z.buf[b].actor != ai))
            continue;
        int st = buf_status(b);
        e->h[i].buf = -1;
        if (e->h[i].code == 0 && st != DV_OK)
            e->h[i].code = st;
    }
}

static void freeze_refs(int ai, int bi)
{
    for (int i = 0; i < MAX_OPS; i++)
        if (Z.pend[i].used)
            freeze_expect(&Z.pend[i].ex, ai, bi);
    freeze_expect(&Z.job.ex, ai, bi);
    freeze_expect(&Z.job.ex2, ai, bi);
}

/* Actor ai goes away: a handle of its given to another actor answers
 * DV_EINVAL while ai lives and DV_ESTALE once it shut down, and work
 * still in flight may be handled either side of that. */
static void foreign_goes(int ai)
{
    for (int i = 0; i < MAX_OPS; i++)
        for (int k = 0; Z.pend[i].used && k < Z.pend[i].ex.n; k++)
            if (Z.pend[i].ex.h[k].owner == ai)
                Z.pend[i].ex.h[k].code = EXP_STALEISH;
}

/* A fault: nothing in flight is predicted any more. */
static void chaos_on(int ai)
{
    Z.faulted = true;
    Z.act[ai].chaos = true;
    Z.act[ai].faulted = true;
    for (int i = 0; i < MAX_EVENTS; i++)
        if (Z.ev[i].e != NULL && Z.ev[i].actor == ai && Z.ev[i].state != 0)
            Z.ev[i].state = 3; /* a rebuild may or may not drop its record */
    for (int i = 0; i < MAX_OPS; i++)
        Z.pend[i].ex.any = true;
    Z.job.ex.any = Z.job.ex2.any = true;
}

static void stale_push(dv_ref ref)
{
    Z.stale[Z.nstale++ % MAX_STALE] = ref;
}

static void buf_drop(int bi)
{
    buf_m *b = &Z.buf[bi];
    stale_push(b->ref);
    free(b->data);
    free(b->known);
    memset(b, 0, sizeof(*b));
}

static int buf_new(int ai, dv_ref ref, uint64_t size, dv_stream s)
{
    for (int i = 0; i < MAX_BUFS; i++) {
        buf_m *b = &Z.buf[i];
        if (b->used)
            continue;
        memset(b, 0, sizeof(*b));
        b->used = true;
        b->actor = ai;
        b->ref = ref;
        b->size = size;
        b->stream = s;
        b->refs = 1;
        b->status = ST_UNKNOWN;
        if (size <= SHADOW_MAX) {
            b->data = calloc(1, size);
            b->known = calloc(1, size);
            if (b->data == NULL || b->known == NULL)
                abort();
        }
        return i;
    }
    return -1;
}

static int free_slots(void)
{
    int n = 0;
    for (int i = 0; i < MAX_BUFS; i++)
        n += !Z.buf[i].used;
    return n;
}

/* A live buffer, starting the search at sel; joins the worker if it holds
 * the one found. */
static int pick_buf(uint8_t sel)
{
    for (int k = 0; k < MAX_BUFS; k++) {
        int i = (sel + k) % MAX_BUFS;
        if (Z.buf[i].used) {
            if (Z.buf[i].busy)
                join_worker();
            return Z.buf[i].used ? i : -1;
        }
    }
    return -1;
}

static bool is_live_ref(dv_ref r)
{
    for (int i = 0; i < MAX_BUFS; i++)
        if (Z.buf[i].used && Z.buf[i].ref.bits == r.bits)
            return true;
    return Z.job.running; /* the worker may be minting one right now */
}

/* A handle operand: mostly a live buffer, sometimes stale, random, NULL. */
static href pick_href(rd *r)
{
    href h = {H_NULL, -1, DV_REF_NULL};
    uint8_t b = u8(r);
    if (b < 0xd0) {
        h.buf = pick_buf(b);
        if (h.buf >= 0) {
            h.kind = H_LIVE;
            h.ref = Z.buf[h.buf].ref;
        }
        return h;
    }
    if (b < 0xf0) {
        if (Z.nstale > 0) {
            unsigned n = Z.nstale < MAX_STALE ? Z.nstale : MAX_STALE;
            h.kind = H_STALE;
            h.ref = Z.stale[b % n];
        }
        return h;
    }
    if (b < 0xfc) {
        dv_ref x = {u64(r)};
        if (!is_live_ref(x)) {
            h.kind = H_RANDOM;
            h.ref = x;
        }
        return h;
    }
    return h;
}

static const char *href_str(const href *h, char *out, size_t n)
{
    switch (h->kind) {
    case H_LIVE:
        snprintf(out, n, "buf%d(a%d,%" PRIu64 "B)", h->buf, Z.buf[h->buf].actor,
                 Z.buf[h->buf].size);
        break;
    case H_STALE:
        snprintf(out, n, "stale(%016" PRIx64 ")", h->ref.bits);
        break;
    case H_RANDOM:
        snprintf(out, n, "random(%016" PRIx64 ")", h->ref.bits);
        break;
    case H_NULL:
        snprintf(out, n, "NULL");
        break;
    }
    return out;
}

/* ------------------------------------------------------------------------
 * Operands
 * ------------------------------------------------------------------------ */

/* The actor an operation goes to: the peer when bit set and it exists. */
static int pick_actor(uint8_t flags)
{
    return (flags & 1) && Z.act[1].a != NULL ? 1 : 0;
}

static dv_stream pick_stream(rd *r, int ai)
{
    uint8_t s = u8(r);
    uint32_t n = Z.act[ai].cfg.streams;
    if (s < 0xf8)
        return s % n;
    static const uint32_t odd[] = {0, 1, 2, 8, 63, 64, 0x10000, UINT32_MAX};
    return s == 0xf8 ? n : odd[s & 7] + (odd[s & 7] < 3 ? n : 0);
}

static bool stream_ok(int ai, dv_stream s)
{
    return s < Z.act[ai].cfg.streams;
}

/* An offset into a block of size sz: mostly valid, sometimes at or past
 * the end or absurd. */
static uint64_t pick_off(rd *r, uint64_t sz, uint64_t align)
{
    uint8_t s = u8(r);
    uint64_t o;
    switch (s >> 5) {
    case 0:
    case 1:
        o = 0;
        break;
    case 2:
    case 3:
    case 4:
        o = sz ? u16(r) % sz : 0;
        break;
    case 5:
        o = sz / 2;
        break;
    case 6:
        o = sz ? sz - 1 : 0;
        break;
    default: {
        static const uint64_t odd[] = {
            0, 1, 0, UINT64_MAX, UINT64_C(1) << 48, UINT64_MAX - 7, 0x100000000, 0};
        o = odd[s & 7] + ((s & 7) == 0 ? sz : (s & 7) == 2 ? sz + 1 : (s & 7) == 7 ? sz - 1 : 0);
        /* Inside the block, a kernel's pointer keeps its alignment (a
         * misaligned one is the program's bug: the GPU faults on it). */
        return o < sz ? o / align * align : o;
    }
    }
    return o / align * align;
}

/* A length from off in a block of size sz: mostly the rest or part of it,
 * sometimes 0, one too many or absurd.  Valid lengths are capped at cap. */
static uint64_t pick_len(rd *r, uint64_t sz, uint64_t off, uint64_t cap, uint64_t align)
{
    uint8_t s = u8(r);
    uint64_t rest = off <= sz ? sz - off : 0, l;
    switch (s >> 5) {
    case 0:
    case 1:
        l = rest;
        break;
    case 2:
    case 3:
    case 4:
        l = rest ? 1 + u16(r) % rest : 0;
        break;
    case 5:
        l = rest ? 1 : 0;
        break;
    case 6:
        l = rest / 2;
        break;
    default: {
        static const uint64_t odd[] = {
            0, 1, 2, UINT64_MAX, UINT64_C(1) << 48, (UINT64_C(1) << 48) + 1, 0x100000000, 0};
        return odd[s & 7] + ((s & 7) == 1 ? rest : 0);
    }
    }
    if (l > cap)
        l = cap;
    return l / align * align;
}

static uint64_t pick_size(rd *r)
{
    static const uint64_t sizes[] = {0,
                                     1,
                                     3,
                                     8,
                                     255,
                                     256,
                                     4096,
                                     4097,
                                     65536,
                                     65549,
                                     256 << 10,
                                     (1 << 20) + 1,
                                     16 << 20,
                                     60 << 20,
                                     UINT64_C(1) << 30,
                                     UINT64_C(1) << 40,
                                     (UINT64_C(1) << 40) + 1,
                                     UINT64_C(1) << 47,
                                     (UINT64_C(1) << 48) - 1,
                                     UINT64_C(1) << 48,
                                     (UINT64_C(1) << 48) + 1,
                                     UINT64_MAX};
    uint8_t s = u8(r);
    if (s < sizeof(sizes) / sizeof(sizes[0]))
        return sizes[s];
    if (s < 0xc0)
        return 1 + u16(r) % 8192;
    return 1 + u32(r) % SHADOW_MAX;
}

static const char *const tags[] = {"fuzz", "a", NULL, "", "peer", "odd tag with spaces"};

/* ------------------------------------------------------------------------
 * Pending futures
 * ------------------------------------------------------------------------ */

static pend_m *pend_new(int kind, int ai, dv_stream s, const char *what, bool try_)
{
    pend_m *p = &Z.pend[Z.op];
    memset(p, 0, sizeof(*p));
    p->used = true;
    p->kind = kind;
    p->actor = ai;
    p->key = key_of(ai, s);
    p->seq = ++Z.seq;
    p->try_ = try_;
    p->buf = -1;
    snprintf(p->what, sizeof(p->what), "op %d %s", Z.op, what);
    dv_future_init(&p->f, try_ ? DV_FUTURE_TRY : 0);
    return p;
}

static void pend_free(pend_m *p)
{
    free(p->host);
    free(p->want);
    free(p->wknown);
    p->used = false;
}

static void verify_read(pend_m *p)
{
    if (p->verified || p->kind != P_DTOH)
        return;
    p->verified = true;
    if (final_of(&p->ex, false) == DV_OK)
        verify(p->what, p->host, p->want, p->wknown, p->len);
}

/* Every read an operation's completion covers (its clock) is in place. */
static void verify_covered(const uint64_t *clock)
{
    for (int i = 0; i < MAX_OPS; i++) {
        pend_m *p = &Z.pend[i];
        if (p->used && p->kind == P_DTOH && !p->verified && p->ex.any == false &&
            clock[p->key] >= p->seq && !chaotic(p->actor))
            verify_read(p);
    }
}

static void clock_of(int ai, dv_stream s, uint64_t seq, uint64_t *clock)
{
    memcpy(clock, Z.act[ai].frontier[s % MAX_STREAMS], sizeof(uint64_t) * NKEYS);
    clock[key_of(ai, s)] = seq;
}

/* The immediate answer of an _async call: a refusal, DV_EAGAIN for a try
 * that found the ring full, or DV_OK (posted). */
static bool async_posted(pend_m *p, int rc)
{
    int pre = p->ex.any ? EXP_ANY : p->ex.pre;
    if (pre != 0 && pre != EXP_ANY) {
        check_rc(p->what, rc, pre);
        return false;
    }
    if (rc == DV_EAGAIN && p->try_)
        return false;
    if (pre != EXP_ANY && rc != DV_OK)
        fail("%s: the _async call answered %s, expected it posted", p->what, dv_err_name(rc));
    Z.err_valid = false;
    return rc == DV_OK;
}

static void pend_wait(pend_m *p)
{
    int rc = note_rc(dv_future_wait(&p->f));
    int want = p->ex.any ? EXP_ANY : final_of(&p->ex, false);
    if (p->try_ && rc == DV_EAGAIN && !p->ex.pre && want != EXP_ANY)
        want = DV_EAGAIN; /* never posted */
    if (p->kind == P_ALLOC && p->buf >= 0 && want != EXP_ANY) {
        /* The allocation's outcome: what every later use answers. */
        buf_m *b = &Z.buf[p->buf];
        if (b->used && b->ref.bits == p->f.ref.bits && b->status == ST_UNKNOWN) {
            if (rc == DV_ESTALE || (rc == DV_EINVAL && !huge(b->size)))
                fail("%s: the allocation answered %s", p->what, dv_err_name(rc));
            if (rc != DV_OK && b->must_succeed)
                fail("%s: a small allocation failed with %s", p->what, dv_err_name(rc));
            b->status = rc;
        }
        want = rc == DV_OK ? DV_OK : EXP_ANYFAIL;
    }
    check_rc(p->what, rc, want);
    if ((p->kind == P_SYNC || p->kind == P_EVENT) && rc == DV_OK && !p->ex.any)
        verify_covered(p->clock);
    if (rc == DV_OK && !p->ex.any && !chaotic(p->actor))
        verify_read(p);
    pend_free(p);
}

static void wait_all_of(int ai)
{
    for (int i = 0; i < MAX_OPS; i++)
        if (Z.pend[i].used && (ai < 0 || Z.pend[i].actor == ai))
            pend_wait(&Z.pend[i]);
}

/* A reset or a destroy completed every future of the actor. */
static void check_all_done(int ai, const char *why)
{
    for (int i = 0; i < MAX_OPS; i++) {
        pend_m *p = &Z.pend[i];
        if (p->used && p->actor == ai && !dv_future_done(&p->f))
            fail("%s: %s is not complete", why, p->what);
    }
}

/* ------------------------------------------------------------------------
 * Actors
 * ------------------------------------------------------------------------ */

static void decode_config(rd *r, dv_actor_config *cfg)
{
    static const uint32_t caps[] = {1024, 2, 3, 4, 8, 16, 64, 256};
    uint8_t c0 = u8(r), c1 = u8(r);
    dv_actor_config_init(cfg);
    cfg->backend = DV_BACKEND_SIM;
    cfg->streams = 1 + (c0 & 7);
    cfg->pool = !(c0 & 8);
    /* The pool grows by small chunks, or (bits 0x20, 0x40 of the second
     * byte) in place by mapping, or with aliases. */
    if (!(c1 & 0x60)) {
        cfg->pool_initial_bytes = UINT64_C(1) << 20;
        cfg->pool_max_chunk_bytes = UINT64_C(8) << 20;
    }
    cfg->pool_alias = (c1 & 0x40) != 0;
    cfg->guard = c0 & 16;
    cfg->budget_bytes = c0 & 32 ? BUDGET : 0;
    cfg->check_order = c0 & 64;
    cfg->synchronous = c0 & 128;
    cfg->queue_capacity = caps[c1 & 7];
    cfg->shared_queue = c1 & 8;
    cfg->sim_delay_max_us = c1 & 16 ? 20 : 0;
    cfg->direct_alloc = (c1 & 0x60) == 0x60 && (c0 & 0x18) == 0x18;
    cfg->sim_devices = c1 & 0x80 ? 2 : 1;
    cfg->sim_memory_bytes = SIM_MEMORY;
    cfg->sim_seed = (uint64_t)c0 << 8 | c1;
}

static void actor_start(int ai, const dv_actor_config *cfg)
{
    actor_m *m = &Z.act[ai];
    memset(m, 0, sizeof(*m));
    m->cfg = *cfg;
    m->device = cfg->device;
    int rc = dv_actor_create(cfg, &m->a);
    if (rc != DV_OK) {
        /* A peer on a lost driver is refused; anything else must start. */
        if (ai == 1 && (Z.act[0].lost || Z.act[0].chaos || Z.act[0].fail_armed))
            return;
        fail("actor_create(streams %u, queue %u): %s: %s", cfg->streams, cfg->queue_capacity,
             dv_err_name(rc), dv_last_error()->message);
    }
    if (ai == 1) {
        m->chaos = Z.act[0].chaos || Z.act[0].lost;
        m->lost = Z.act[0].lost;
        m->fail_armed = Z.act[0].fail_armed;
    }
}

/* Handles of actor ai go stale (a reset, a rebuild, its end). */
static void stale_all_of(int ai)
{
    for (int i = 0; i < MAX_BUFS; i++)
        if (Z.buf[i].used && Z.buf[i].actor == ai)
            buf_drop(i);
    for (int i = 0; i < MAX_EVENTS; i++)
        if (Z.ev[i].e != NULL && Z.ev[i].actor == ai && Z.ev[i].state == 1)
            Z.ev[i].state = 2;
}

static void events_forget(int ai)
{
    for (int i = 0; i < MAX_EVENTS; i++)
        if (Z.ev[i].e != NULL && Z.ev[i].actor == ai)
            memset(&Z.ev[i], 0, sizeof(Z.ev[i]));
    Z.just_destroyed = NULL;
}

static void actor_end(int ai)
{
    actor_m *m = &Z.act[ai];
    if (m->a == NULL)
        return;
    freeze_refs(ai, -1);
    foreign_goes(ai);
    check_rc("actor_destroy", dv_actor_destroy(m->a), DV_OK);
    check_all_done(ai, "actor_destroy");
    wait_all_of(ai);
    stale_all_of(ai);
    events_forget(ai);
    memset(m, 0, sizeof(*m));
}

static dv_kernel *kernel_of(int ai, int k)
{
    actor_m *m = &Z.act[ai];
    if (m->k[k] == NULL) {
        dv_kernel *got = NULL;
        int rc = k == K_MINE
                     ? dv_kernel_get(m->a, &my_image, sizeof(my_image), kernel_names[k], &got)
                     : dv_kernel_get(m->a, NULL, 0, kernel_names[k], &got);
        check_rc("kernel_get", rc, chaotic(ai) ? EXP_ANY : DV_OK);
        if (rc == DV_OK && got == NULL)
            fail("kernel_get(%s) answered DV_OK and no kernel", kernel_names[k]);
        m->k[k] = got;
    }
    return m->k[k];
}

/* Actors on the same device of the driver as ai (a poison reaches them). */
static bool same_device(int ai, int other)
{
    return Z.act[other].a != NULL && Z.act[other].device == Z.act[ai].device;
}

/* ------------------------------------------------------------------------
 * The worker: a second client thread
 * ------------------------------------------------------------------------ */

static void *worker_main(void *arg)
{
    job_m *j = arg;
    switch (j->kind) {
    case J_READ: {
        uint8_t *host = malloc(j->len ? j->len : 1);
        if (host == NULL)
            abort();
        j->rc = dv_copy_dtoh(j->a, host, j->ref, j->off, j->len, j->stream);
        j->err = dv_last_error()->status;
        if (j->rc == DV_OK) {
            for (uint64_t i = 0; i < j->len && !j->mismatch; i++) {
                if (j->wknown[i] && host[i] != j->want[i]) {
                    j->mismatch = true;
                    j->mismatch_at = i;
                }
            }
        }
        free(host);
        j->rc_rel = dv_ref_release(j->ref);
        break;
    }
    case J_WRITE:
        j->rc = dv_memset_async(j->a, j->ref, j->off, j->value, j->len, j->stream, &j->f);
        j->err = dv_last_error()->status;
        j->rc_rel = dv_ref_release(j->ref);
        break;
    case J_ALLOC:
        /* Allocate, write without waiting, hand over: the README's promise. */
        j->rc = dv_alloc(j->a, j->len, j->stream, "worker", &j->made);
        j->err = dv_last_error()->status;
        if (j->rc == DV_OK) {
            j->rc2 = dv_copy_htod_async(j->a, j->made, 0, j->src, j->len, j->stream2, &j->f);
            j->err2 = dv_last_error()->status;
        }
        break;
    }
    return NULL;
}

static void job_finish_future(void)
{
    job_m *j = &Z.job;
    if (!j->f_live)
        return;
    int rc = dv_future_wait(&j->f);
    check_rc("worker's future", rc, final_of(&j->ex2, false));
    j->f_live = false;
    free(j->src);
    j->src = NULL;
}

static void join_worker(void)
{
    job_m *j = &Z.job;
    if (!j->running)
        return;
    pthread_join(j->th, NULL);
    j->running = false;
    int ai = j->actor;
    switch (j->kind) {
    case J_READ:
        check_rc_of("worker copy_dtoh", j->rc, j->err, final_of(&j->ex, false));
        if (j->mismatch)
            fail("worker copy_dtoh of buf%d: byte %" PRIu64 " differs from what this thread "
                 "wrote before handing the handle over",
                 j->buf, j->mismatch_at);
        check_rc_of("worker release", j->rc_rel, 0, DV_OK);
        Z.buf[j->buf].busy = false;
        break;
    case J_WRITE:
        check_rc_of("worker memset_async", j->rc, j->err, j->ex.pre ? j->ex.pre : DV_OK);
        check_rc_of("worker release", j->rc_rel, 0, DV_OK);
        j->ex2 = j->ex;
        j->f_live = j->rc == DV_OK;
        if (final_of(&j->ex, true) == DV_OK)
            sh_fill(j->buf, j->off, j->value, j->len);
        Z.buf[j->buf].busy = false;
        break;
    case J_ALLOC: {
        buf_m *b = &Z.buf[j->buf];
        check_rc_of("worker alloc", j->rc, j->err, chaotic(ai) ? EXP_ANY : DV_OK);
        if (j->rc != DV_OK) {
            free(b->data);
            free(b->known);
            memset(b, 0, sizeof(*b));
            free(j->src);
            j->src = NULL;
            break;
        }
        b->ref = j->made;
        b->busy = false;
        check_rc_of("worker copy_htod_async", j->rc2, j->err2, chaotic(ai) ? EXP_ANY : DV_OK);
        memset(&j->ex2, 0, sizeof(j->ex2));
        j->ex2.any = chaotic(ai);
        j->ex2.n = 1;
        j->ex2.h[0].buf = j->buf;
        ex_tracked(&j->ex2, ai);
        freeze_expect(&j->ex2, ai, j->buf);
        j->f_live = j->rc2 == DV_OK;
        if (j->rc2 == DV_OK && final_of(&j->ex2, true) == DV_OK)
            sh_write(j->buf, 0, j->src, NULL, j->len);
        if (!j->f_live) {
            free(j->src);
            j->src = NULL;
        }
        break;
    }
    }
    free(j->want);
    free(j->wknown);
    j->want = j->wknown = NULL;
    note("  joined worker (job %d): rc %s", j->kind, dv_err_name(j->rc));
}

static void op_worker(rd *r)
{
    join_worker();
    job_finish_future();
    job_m *j = &Z.job;
    uint8_t flags = u8(r);
    int ai = pick_actor(flags);
    memset(j, 0, sizeof(*j));
    j->kind = (flags >> 1) % 3;
    j->actor = ai;
    j->a = Z.act[ai].a;
    j->stream = u8(r) % Z.act[ai].cfg.streams;
    j->stream2 = u8(r) % Z.act[ai].cfg.streams;
    dv_future_init(&j->f, 0);
    if (j->kind == J_ALLOC) {
        if (free_slots() == 0 || chaotic(ai))
            return;
        j->len = 1 + u16(r) % 4096;
        j->src = malloc(j->len);
        if (j->src == NULL)
            abort();
        uint32_t seed = u32(r);
        for (uint64_t i = 0; i < j->len; i++)
            j->src[i] = pattern(seed, i);
        j->buf = buf_new(ai, DV_REF_NULL, j->len, j->stream);
        Z.buf[j->buf].busy = true;
        Z.act[ai].attempted += j->len;
        note("op %d: worker: alloc %" PRIu64 " bytes on a%d s%u, htod_async on s%u -> buf%d", Z.op,
             j->len, ai, j->stream, j->stream2, j->buf);
    } else {
        int bi = pick_buf(u8(r));
        if (bi < 0 || Z.buf[bi].actor != ai || chaotic(ai))
            return;
        buf_m *b = &Z.buf[bi];
        j->buf = bi;
        j->ref = b->ref;
        j->off = u16(r) % b->size;
        uint64_t rest = b->size - j->off;
        j->len = 1 + u16(r) % (rest < SHADOW_MAX ? rest : SHADOW_MAX);
        j->value = u8(r);
        ex_init(&j->ex, ai);
        href h = {H_LIVE, bi, b->ref};
        ex_handle(&j->ex, &h, ai, j->off, j->len, false);
        ex_tracked(&j->ex, ai);
        freeze_expect(&j->ex, ai, bi); /* the expectations are this thread's */
        if (j->kind == J_READ)
            sh_snapshot(bi, j->off, j->len, &j->want, &j->wknown);
        /* The worker owns a reference of its own while it runs. */
        check_rc("retain for the worker", dv_ref_retain(b->ref), DV_OK);
        b->busy = true;
        note("op %d: worker: %s buf%d [%" PRIu64 " +%" PRIu64 ") on s%u", Z.op,
             j->kind == J_READ ? "copy_dtoh" : "memset_async", bi, j->off, j->len, j->stream);
    }
    j->running = true;
    if (pthread_create(&j->th, NULL, worker_main, j) != 0)
        abort();
}

/* ------------------------------------------------------------------------
 * Operations
 * ------------------------------------------------------------------------ */

static void op_alloc(rd *r, bool async)
{
    uint8_t flags = u8(r);
    int ai = pick_actor(flags);
    actor_m *m = &Z.act[ai];
    uint64_t size = pick_size(r);
    dv_stream s = pick_stream(r, ai);
    const char *tag = tags[u8(r) % (sizeof(tags) / sizeof(tags[0]))];
    bool try_ = async && (flags & 4);
    if (free_slots() == 0)
        return;
    note("op %d: alloc%s a%d %" PRIu64 " bytes s%u%s", Z.op, async ? "_async" : "", ai, size, s,
         try_ ? " try" : "");
    expect ex;
    ex_init(&ex, ai);
    ex_pre(&ex, !stream_ok(ai, s), DV_EINVAL);
    ex_pre(&ex, size == 0 || size > (UINT64_C(1) << 48), DV_EINVAL);
    dv_ref ref = {0xdead};
    int rc;
    pend_m *p = NULL;
    if (async) {
        p = pend_new(P_ALLOC, ai, s, "alloc_async", try_);
        p->ex = ex;
        rc = dv_alloc_async(m->a, size, s, tag, (flags & 8) ? NULL : &ref, &p->f);
        if (!(flags & 8) && ref.bits != p->f.ref.bits)
            fail("alloc_async: *out %016" PRIx64 " and f->ref %016" PRIx64 " differ", ref.bits,
                 p->f.ref.bits);
        ref = p->f.ref;
        if (!async_posted(p, rc)) {
            pend_wait(p);
            return;
        }
    } else {
        rc = dv_alloc(m->a, size, s, tag, &ref);
        check_rc("alloc", rc, ex.pre ? ex.pre : ex.any ? EXP_ANY : DV_OK);
    }
    if (rc != DV_OK) {
        if (ref.bits != 0)
            fail("alloc refused with %s but gave a handle", dv_err_name(rc));
        return;
    }
    if (ref.bits == 0)
        fail("alloc answered DV_OK with DV_REF_NULL");
    int bi = buf_new(ai, ref, size, s);
    m->attempted += size;
    uint64_t asked = m->attempted + (same_device(ai, 1 - ai) ? Z.act[1 - ai].attempted : 0);
    Z.buf[bi].must_succeed = !m->cfg.budget_bytes && !m->fail_armed && !chaotic(ai) &&
                             size <= SURE_SIZE && asked <= SURE_TOTAL;
    if (p != NULL)
        p->buf = bi;
    note("  -> buf%d %016" PRIx64, bi, ref.bits);
}

static void op_release(rd *r)
{
    int bi = pick_buf(u8(r));
    if (bi < 0)
        return;
    buf_m *b = &Z.buf[bi];
    note("op %d: release buf%d (refs %u)", Z.op, bi, b->refs);
    if (b->refs == 1)
        freeze_refs(-1, bi);
    int rc = dv_ref_release(b->ref);
    check_rc("release", rc, chaotic(b->actor) ? EXP_ANY : DV_OK);
    if (--b->refs == 0)
        buf_drop(bi);
}

static void op_retain(rd *r)
{
    int bi = pick_buf(u8(r));
    if (bi < 0 || Z.buf[bi].refs >= 4)
        return;
    buf_m *b = &Z.buf[bi];
    note("op %d: retain buf%d", Z.op, bi);
    int rc = dv_ref_retain(b->ref);
    check_rc("retain", rc, chaotic(b->actor) ? EXP_ANY : DV_OK);
    if (rc == DV_OK)
        b->refs++;
}

static void op_access(rd *r)
{
    uint8_t flags = u8(r);
    int bi = pick_buf(u8(r));
    if (bi < 0)
        return;
    buf_m *b = &Z.buf[bi];
    note("op %d: %s buf%d", Z.op, flags & 1 ? "try_access" : "access", bi);
    if (!(flags & 1)) {
        (void)access_check(bi);
        return;
    }
    dv_ref_info info;
    int rc = dv_ref_try_access(b->ref, &info);
    if (chaotic(b->actor))
        return;
    if (rc == DV_EAGAIN) {
        if (b->status != ST_UNKNOWN)
            fail("try_access(buf%d) answered DV_EAGAIN after the allocation settled as %s", bi,
                 dv_err_name(b->status));
        return;
    }
    note_rc(rc);
    check_detail("try_access", rc);
    int st = buf_status(bi);
    if (rc != st)
        fail("try_access(buf%d) answered %s, access %s", bi, dv_err_name(rc), dv_err_name(st));
    if (rc == DV_OK && info.refcount != b->refs)
        fail("try_access(buf%d): refcount %u, this thread holds %u", bi, info.refcount, b->refs);
}

/* Host copies (htod, dtoh) and memset. */
enum { C_HTOD, C_DTOH, C_MEMSET };

static void op_host(rd *r, int kind)
{
    static const char *const names[] = {"copy_htod", "copy_dtoh", "memset"};
    uint8_t flags = u8(r);
    int ai = pick_actor(flags);
    href h = pick_href(r);
    uint64_t sz = h.kind == H_LIVE ? Z.buf[h.buf].size : 4096;
    uint64_t off = pick_off(r, sz, 1);
    uint64_t len = pick_len(r, sz, off, SHADOW_MAX, 1);
    dv_stream s = pick_stream(r, ai);
    uint8_t value = u8(r);
    uint32_t seed = value * 977u + (uint32_t)Z.op;
    bool async = flags & 2, try_ = async && (flags & 4), null_host = (flags & 0xf8) == 0xf8;
    char hs[64];
    note("op %d: %s%s a%d %s [%" PRIu64 " +%" PRIu64 ") s%u%s", Z.op, names[kind],
         async ? "_async" : "", ai, href_str(&h, hs, sizeof(hs)), off, len, s,
         null_host && kind != C_MEMSET ? " NULL host" : "");

    expect ex;
    ex_init(&ex, ai);
    ex_pre(&ex, !stream_ok(ai, s), DV_EINVAL);
    if (kind != C_MEMSET) {
        ex_pre(&ex, null_host, DV_EINVAL);
        ex_pre(&ex, len == 0 || len > (UINT64_C(1) << 48), DV_EINVAL);
    }
    /* A zero-length memset is checked as "the block from off on" (off <
     * size), then refused by the driver. */
    ex_handle(&ex, &h, ai, off, len, kind == C_MEMSET && len == 0);
    ex_tracked(&ex, ai);
    ex_post(&ex, kind == C_MEMSET && len == 0, DV_EINVAL);
    bool ok = final_of(&ex, true) == DV_OK;
    /* A host buffer of exactly the bytes a valid call may touch: ASan
     * catches a call that goes further than it said it would. */
    uint64_t hostlen = len <= SHADOW_MAX ? len : 16;
    uint8_t *host = NULL;
    if (kind != C_MEMSET && !null_host) {
        host = malloc(hostlen ? hostlen : 1);
        if (host == NULL)
            abort();
        for (uint64_t i = 0; i < hostlen; i++)
            host[i] = kind == C_HTOD ? pattern(seed, i) : 0xee;
    }
    uint8_t *want = NULL, *wknown = NULL;
    if (kind == C_DTOH)
        sh_snapshot(h.buf, ok ? off : 0, ok ? len : 0, &want, &wknown);
    int rc;
    if (async) {
        pend_m *p = pend_new(kind == C_DTOH ? P_DTOH : P_PLAIN, ai, s, names[kind], try_);
        p->ex = ex;
        p->host = host;
        p->want = want;
        p->wknown = wknown;
        p->len = ok ? len : 0;
        if (kind == C_HTOD)
            rc = dv_copy_htod_async(Z.act[ai].a, h.ref, off, host, len, s, &p->f);
        else if (kind == C_DTOH)
            rc = dv_copy_dtoh_async(Z.act[ai].a, host, h.ref, off, len, s, &p->f);
        else
            rc = dv_memset_async(Z.act[ai].a, h.ref, off, value, len, s, &p->f);
        if (!async_posted(p, rc)) {
            pend_wait(p);
            return;
        }
    } else {
        if (kind == C_HTOD)
            rc = note_rc(dv_copy_htod(Z.act[ai].a, h.ref, off, host, len, s));
        else if (kind == C_DTOH)
            rc = note_rc(dv_copy_dtoh(Z.act[ai].a, host, h.ref, off, len, s));
        else
            rc = note_rc(dv_memset(Z.act[ai].a, h.ref, off, value, len, s));
        int fin = final_of(&ex, false);
        check_rc(names[kind], rc, fin);
        if (kind == C_DTOH && rc == DV_OK && fin == DV_OK)
            verify(names[kind], host, want, wknown, len);
        free(want);
        free(wknown);
    }
    /* Later operations on the handle come after this one (order rule). */
    if (ok && kind == C_HTOD)
        sh_write(h.buf, off, host, NULL, len);
    else if (ok && kind == C_MEMSET)
        sh_fill(h.buf, off, value, len);
    Z.seq++;
    if (!async)
        free(host);
}

static void op_dtod(rd *r)
{
    uint8_t flags = u8(r);
    int ai = pick_actor(flags);
    href d = pick_href(r), s_ = pick_href(r);
    uint64_t dsz = d.kind == H_LIVE ? Z.buf[d.buf].size : 4096;
    uint64_t ssz = s_.kind == H_LIVE ? Z.buf[s_.buf].size : 4096;
    uint64_t doff = pick_off(r, dsz, 1), soff = pick_off(r, ssz, 1);
    uint64_t len = pick_len(r, dsz < ssz ? dsz : ssz, doff > soff ? doff : soff, SHADOW_MAX, 1);
    dv_stream s = pick_stream(r, ai);
    bool async = flags & 2, try_ = async && (flags & 4);
    char ds[64], ss[64];
    note("op %d: copy_dtod%s a%d %s+%" PRIu64 " <- %s+%" PRIu64 " %" PRIu64 " bytes s%u", Z.op,
         async ? "_async" : "", ai, href_str(&d, ds, sizeof(ds)), doff,
         href_str(&s_, ss, sizeof(ss)), soff, len, s);

    uint8_t dd = (uint8_t)(d.ref.bits >> 56), sd = (uint8_t)(s_.ref.bits >> 56);
    bool peer = dd != sd && dd != 0 && sd != 0 && stream_ok(ai, s);
    expect ex;
    ex_init(&ex, ai);
    ex_pre(&ex, !stream_ok(ai, s), DV_EINVAL);
    int sai = s_.kind == H_LIVE ? Z.buf[s_.buf].actor : -1;
    if (peer) {
        /* Through the source's actor first (client.c's peer_copy). */
        if (sai >= 0 && chaotic(sai))
            ex.any = true;
        if (sai >= 0) {
            ex_handle(&ex, &s_, sai, soff, len, false);
            if (len == 0)
                ex.h[ex.n - 1].range = DV_EINVAL;
            ex_tracked(&ex, sai);
            /* The fence on the source's actor refuses before the copy. */
            if (ex.post) {
                ex.h[ex.n - 1].range = ex.h[ex.n - 1].range ? ex.h[ex.n - 1].range : ex.post;
                ex.post = 0;
            }
        } else {
            ex_handle(&ex, &s_, ai, soff, len, false);
        }
        ex_handle(&ex, &d, ai, doff, len, false);
        ex_tracked(&ex, ai);
    } else {
        ex_handle(&ex, &d, ai, doff, len == 0 ? 0 : len, len == 0);
        ex_handle(&ex, &s_, ai, soff, len == 0 ? 0 : len, len == 0);
        /* Overlapping ranges of one block: refused once both handles
         * passed their lookups and ranges (the device's copy of them is
         * undefined). */
        if (len != 0 && d.kind == H_LIVE && s_.kind == H_LIVE && d.buf == s_.buf &&
            doff < soff + len && soff < doff + len && ex.h[ex.n - 1].range == 0 &&
            ex.h[ex.n - 2].range == 0)
            ex.h[ex.n - 1].range = DV_EINVAL;
        ex_tracked(&ex, ai);
        ex_post(&ex, len == 0, DV_EINVAL);
    }
    bool ok = final_of(&ex, true) == DV_OK;
    /* The source as the model knows it at this point of the order. */
    uint8_t *want = NULL, *wknown = NULL;
    sh_snapshot(s_.buf, ok ? soff : 0, ok ? len : 0, &want, &wknown);
    int rc;
    if (async) {
        pend_m *p = pend_new(P_PLAIN, ai, s, "copy_dtod_async", try_);
        p->ex = ex;
        rc = note_rc(dv_copy_dtod_async(Z.act[ai].a, d.ref, doff, s_.ref, soff, len, s, &p->f));
        if (peer) {
            /* Between two actors the copy is made on this thread, async
             * form too (client.c): it answers with the copy's status and
             * its future is complete. */
            check_rc("copy_dtod_async between actors", rc, final_of(&ex, false));
            if (!dv_future_done(&p->f))
                fail("copy_dtod_async between actors returned before its future completed");
            pend_wait(p);
            if (rc != DV_OK)
                ok = false;
        } else if (!async_posted(p, rc)) {
            pend_wait(p);
            free(want);
            free(wknown);
            return;
        }
    } else {
        rc = note_rc(dv_copy_dtod(Z.act[ai].a, d.ref, doff, s_.ref, soff, len, s));
        check_rc("copy_dtod", rc, final_of(&ex, false));
    }
    if (ok) /* (overlapping ranges of one block were refused above) */
        sh_write(d.buf, doff, want, wknown, len);
    free(want);
    free(wknown);
    Z.seq++;
}

static void op_sync(rd *r)
{
    uint8_t flags = u8(r);
    int ai = pick_actor(flags);
    dv_stream s = pick_stream(r, ai);
    bool async = flags & 2, try_ = async && (flags & 4);
    note("op %d: sync%s a%d s%u", Z.op, async ? "_async" : "", ai, s);
    expect ex;
    ex_init(&ex, ai);
    ex_pre(&ex, !stream_ok(ai, s), DV_EINVAL);
    uint64_t clock[NKEYS];
    uint64_t seq = ++Z.seq;
    if (stream_ok(ai, s))
        clock_of(ai, s, seq, clock);
    if (async) {
        pend_m *p = pend_new(P_SYNC, ai, stream_ok(ai, s) ? s : 0, "sync_async", try_);
        p->ex = ex;
        if (stream_ok(ai, s))
            memcpy(p->clock, clock, sizeof(clock));
        int rc = dv_sync_async(Z.act[ai].a, s, &p->f);
        if (!async_posted(p, rc))
            pend_wait(p);
        return;
    }
    int rc = dv_sync(Z.act[ai].a, s);
    check_rc("sync", rc, final_of(&ex, false));
    if (rc == DV_OK && !ex.any)
        verify_covered(clock);
}

static void op_flush(rd *r)
{
    int ai = pick_actor(u8(r));
    note("op %d: flush a%d", Z.op, ai);
    int rc = dv_flush(Z.act[ai].a);
    check_rc("flush", rc, chaotic(ai) ? EXP_ANY : DV_OK);
    if (rc != DV_OK || chaotic(ai))
        return;
    for (int i = 0; i < MAX_OPS; i++) {
        pend_m *p = &Z.pend[i];
        if (p->used && p->actor == ai && !dv_future_reached(&p->f, DV_ORDERED))
            fail("flush returned but %s is not ordered", p->what);
    }
}

static void op_wait(rd *r)
{
    uint8_t sel = u8(r), mode = u8(r);
    pend_m *p = NULL;
    for (int k = 0; k < MAX_OPS && p == NULL; k++)
        if (Z.pend[(sel + k) % MAX_OPS].used)
            p = &Z.pend[(sel + k) % MAX_OPS];
    if (p == NULL)
        return;
    note("op %d: wait (mode %d) for %s", Z.op, mode % 4, p->what);
    switch (mode % 4) {
    case 0:
        pend_wait(p);
        return;
    case 1: {
        int rc = dv_future_wait_ordered(&p->f);
        if (rc != DV_OK && !dv_future_done(&p->f))
            fail("%s: wait_ordered answered %s and the future is not complete", p->what,
                 dv_err_name(rc));
        if (!dv_future_reached(&p->f, DV_ORDERED))
            fail("%s: wait_ordered returned before ordered", p->what);
        return;
    }
    case 2: {
        int rc = dv_future_wait_for(&p->f, (mode & 4) ? DV_ORDERED : DV_COMPLETE, mode * 1000u);
        if (rc == DV_ETIMEDOUT && dv_future_done(&p->f) && (mode & 4) == 0)
            ; /* it completed just after the deadline: fine */
        if (rc != DV_ETIMEDOUT && (mode & 4) == 0)
            pend_wait(p); /* complete: the same status again, and its checks */
        return;
    }
    default:
        if (dv_future_done(&p->f) && !dv_future_reached(&p->f, DV_ORDERED))
            fail("%s: complete but not ordered", p->what);
        return;
    }
}

/* ---- events */

static int pick_event(uint8_t sel)
{
    for (int k = 0; k < MAX_EVENTS; k++)
        if (Z.ev[(sel + k) % MAX_EVENTS].e != NULL)
            return (sel + k) % MAX_EVENTS;
    return -1;
}

static void op_event(rd *r)
{
    uint8_t what = u8(r), flags = u8(r);
    int ai = pick_actor(flags);
    switch (what % 8) {
    case 0: { /* create */
        int slot = -1;
        for (int i = 0; i < MAX_EVENTS && slot < 0; i++)
            if (Z.ev[i].e == NULL)
                slot = i;
        if (slot < 0)
            return;
        uint32_t ef = (flags & 6) == 6 ? 4u : (flags & 2) ? DV_EVENT_TIMING : 0u;
        note("op %d: event_create a%d flags %u", Z.op, ai, ef);
        dv_event *e = NULL;
        int rc = dv_event_create(Z.act[ai].a, ef, &e);
        Z.just_destroyed = NULL; /* its struct may come back now */
        check_rc("event_create", rc, ef == 4 ? DV_EINVAL : chaotic(ai) ? EXP_ANY : DV_OK);
        if (rc == DV_OK) {
            event_m *m = &Z.ev[slot];
            memset(m, 0, sizeof(*m));
            m->e = e;
            m->actor = ai;
            m->timing = ef == DV_EVENT_TIMING;
        }
        return;
    }
    case 1:
    case 2: { /* record */
        int i = pick_event(u8(r));
        if (i < 0)
            return;
        event_m *m = &Z.ev[i];
        dv_stream s = pick_stream(r, m->actor);
        bool async = flags & 8;
        note("op %d: event_record%s ev%d (a%d) s%u", Z.op, async ? "_async" : "", i, m->actor, s);
        expect ex;
        ex_init(&ex, m->actor);
        ex_pre(&ex, !stream_ok(m->actor, s), DV_EINVAL);
        uint64_t seq = ++Z.seq;
        int rc;
        if (async) {
            pend_m *p = pend_new(P_EVENT, m->actor, stream_ok(m->actor, s) ? s : 0,
                                 "event_record_async", false);
            p->ex = ex;
            if (stream_ok(m->actor, s))
                clock_of(m->actor, s, seq, p->clock);
            rc = dv_event_record_async(m->e, s, &p->f);
            if (!async_posted(p, rc)) {
                pend_wait(p);
                return;
            }
        } else {
            rc = dv_event_record(m->e, s);
            check_rc("event_record", rc, ex.pre ? ex.pre : ex.any ? EXP_ANY : DV_OK);
        }
        if (rc == DV_OK && stream_ok(m->actor, s)) {
            m->state = chaotic(m->actor) ? 3 : 1;
            m->synced = false;
            clock_of(m->actor, s, seq, m->clock);
        }
        return;
    }
    case 3: { /* a stream waits */
        int i = pick_event(u8(r));
        if (i < 0)
            return;
        event_m *m = &Z.ev[i];
        dv_stream s = pick_stream(r, ai);
        note("op %d: stream_wait_event a%d s%u ev%d (a%d, state %d)", Z.op, ai, s, i, m->actor,
             m->state);
        int rc = dv_stream_wait_event(Z.act[ai].a, s, m->e);
        int want = !stream_ok(ai, s) ? DV_EINVAL : DV_OK;
        if (chaotic(ai) || chaotic(m->actor))
            want = EXP_ANY;
        check_rc("stream_wait_event", rc, want);
        if (rc == DV_OK && stream_ok(ai, s) && m->state == 1) {
            uint64_t *f = Z.act[ai].frontier[s % MAX_STREAMS];
            for (int k = 0; k < NKEYS; k++)
                if (m->clock[k] > f[k])
                    f[k] = m->clock[k];
        }
        Z.seq++;
        return;
    }
    case 4:
    case 5: { /* sync, query */
        int i = pick_event(u8(r));
        if (i < 0)
            return;
        event_m *m = &Z.ev[i];
        bool sync = what % 8 == 4;
        note("op %d: event_%s ev%d (a%d, state %d)", Z.op, sync ? "sync" : "query", i, m->actor,
             m->state);
        int rc = sync ? dv_event_sync(m->e) : dv_event_query(m->e);
        int want = m->state == 2 ? DV_ESTALE : DV_OK;
        if (!sync && m->state == 1 && !m->synced && rc == DV_EAGAIN)
            want = DV_EAGAIN;
        if (chaotic(m->actor) || m->state == 3)
            want = EXP_ANY;
        check_rc(sync ? "event_sync" : "event_query", rc, want);
        if (rc == DV_OK && m->state == 1 && want != EXP_ANY) {
            m->synced = true;
            verify_covered(m->clock);
        }
        if (!chaotic(m->actor) && dv_event_native(m->e) != NULL)
            fail("event_native on the sim is not NULL");
        return;
    }
    case 6: { /* elapsed */
        int i = pick_event(u8(r)), j = pick_event(u8(r));
        if (i < 0 || j < 0)
            return;
        event_m *a = &Z.ev[i], *b = &Z.ev[j];
        bool null_ms = (flags & 0x30) == 0x30;
        note("op %d: event_elapsed ev%d ev%d", Z.op, i, j);
        float ms = -1;
        int rc = dv_event_elapsed(a->e, b->e, null_ms ? NULL : &ms);
        int want;
        if (null_ms || a->actor != b->actor || !a->timing || !b->timing)
            want = DV_EINVAL;
        else if (a->state == 3 || b->state == 3)
            want = EXP_ANY;
        else if (a->state == 0 || b->state == 0)
            want = DV_EINVAL;
        else if (a->state == 2 || b->state == 2)
            want = DV_ESTALE;
        else
            want = rc == DV_EAGAIN ? DV_EAGAIN : DV_OK;
        if (chaotic(a->actor) || chaotic(b->actor))
            want = EXP_ANY;
        check_rc("event_elapsed", rc, want);
        if (rc == DV_OK && !(ms >= 0.0f && ms < 1e9f) && i != j && want != EXP_ANY)
            ; /* the order of two records is not the order of their times across streams */
        return;
    }
    default: { /* destroy, and a use of the destroyed event */
        int i = pick_event(u8(r));
        if (i < 0)
            return;
        event_m *m = &Z.ev[i];
        note("op %d: event_destroy ev%d (a%d)", Z.op, i, m->actor);
        int rc = dv_event_destroy(m->e);
        bool chaos = chaotic(m->actor);
        check_rc("event_destroy", rc, chaos ? EXP_ANY : DV_OK);
        Z.just_destroyed = m->e;
        memset(m, 0, sizeof(*m));
        if (flags & 0x40) {
            /* The header says not to; events.c promises DV_EINVAL, not
             * freed memory, while no event was made since. */
            dv_event *e = Z.just_destroyed;
            note("  use of the destroyed event (%d)", (flags >> 4) & 3);
            switch ((flags >> 4) & 3) {
            case 0:
                check_rc("event_sync after destroy", dv_event_sync(e), chaos ? EXP_ANY : DV_EINVAL);
                break;
            case 1:
                check_rc("event_query after destroy", dv_event_query(e),
                         chaos ? EXP_ANY : DV_EINVAL);
                break;
            case 2:
                rc = dv_event_record(e, 0);
                if (rc != DV_OK)
                    check_rc("event_record after destroy", rc, chaos ? EXP_ANY : DV_EINVAL);
                break;
            default:
                rc = dv_stream_wait_event(Z.act[0].a, 0, e);
                if (rc != DV_OK)
                    check_rc("stream_wait_event after destroy", rc,
                             chaos || chaotic(0) ? EXP_ANY : DV_EINVAL);
                break;
            }
        }
        return;
    }
    }
}

/* ---- tasks */

/* A blocking call from a thread that serves an actor answers DV_EDEADLK
 * (base/proc.h): check a few, on the task's actor and the other one. */
static bool deadlk_calls(dv_actor *self, dv_actor *other, dv_stream s)
{
    dv_actor_stats st;
    dv_event *e = NULL;
    bool good = dv_flush(self) == DV_EDEADLK && dv_sync(self, s) == DV_EDEADLK &&
                dv_actor_stats_get(self, &st) == DV_EDEADLK &&
                dv_event_create(self, 0, &e) == DV_EDEADLK && e == NULL &&
                dv_actor_destroy(self) == DV_EDEADLK && dv_last_error()->status == DV_EDEADLK;
    if (other != NULL)
        good = good && dv_flush(other) == DV_EDEADLK;
    return good;
}

static void host_write(void *arg)
{
    task_m *t = arg;
    for (uint64_t i = 0; i < t->len; i++)
        t->dev[i] = pattern(t->seed, i);
    if ((t->behaviour & T_DEADLK) && !deadlk_calls(t->actor, NULL, t->stream))
        atomic_store(&t->bad, 5);
    atomic_fetch_add(&t->host_ran, 1);
}

static void host_check(void *arg)
{
    task_m *t = arg;
    for (uint64_t i = 0; i < t->len; i++)
        if (t->wknown[i] && t->dev[i] != t->want[i])
            atomic_store(&t->mismatch, (int)i + 1);
    atomic_fetch_add(&t->host_ran, 1);
}

/* Exactly once per dv_task_host_fn_cleanup, after fn when fn ran. */
static void host_cleanup(void *arg, int status)
{
    task_m *t = arg;
    atomic_fetch_add(&t->cleanups, 1);
    atomic_store(&t->cleanup_status, status);
    if (status == DV_OK && atomic_load(&t->host_ran) == 0 &&
        (t->behaviour & (T_HOST_WRITE | T_HOST_CHECK)))
        atomic_store(&t->bad, 6); /* cleanup(DV_OK) before its function */
}

static int task_fn(const dv_task_ctx *ctx, void *user)
{
    task_m *t = user;
    atomic_store(&t->ran, 1);
    if ((t->behaviour & T_CHECK_CTX) &&
        (ctx->actor != t->actor || ctx->stream != t->stream || !ctx->simulated ||
         ctx->native_stream != NULL || ctx->nargs != t->nargs))
        atomic_store(&t->bad, 1);
    if (t->behaviour & (T_HOST_WRITE | T_HOST_CHECK)) {
        t->dev = dv_task_sim_access(ctx, ctx->arg[0], t->len ? t->len : 1,
                                    t->behaviour & T_HOST_WRITE ? DV_WRITE : DV_READ);
        if (t->dev == NULL) {
            atomic_store(&t->bad, 2);
        } else {
            void (*fn)(void *) = t->behaviour & T_HOST_WRITE ? host_write : host_check;
            if (t->behaviour & T_CLEANUP)
                t->host_rc = dv_task_host_fn_cleanup(ctx, fn, host_cleanup, t);
            else
                t->host_rc = dv_task_host_fn(ctx, fn, t);
            if (t->host_rc == DV_OK) {
                atomic_fetch_add(&t->host_enqueued, 1);
                if (t->behaviour & T_CLEANUP)
                    atomic_fetch_add(&t->cleanup_enqueued, 1);
            }
        }
    } else if (t->behaviour & T_CLEANUP) {
        /* A cleanup alone: a host-side free in stream order. */
        t->host_rc = dv_task_host_fn_cleanup(ctx, NULL, host_cleanup, t);
        if (t->host_rc == DV_OK)
            atomic_fetch_add(&t->cleanup_enqueued, 1);
    }
    if (t->behaviour & T_LAUNCH) {
        dv_arg args[3] = {(t->seed & 1) ? dv_arg_ref(t->mref, DV_WRITE, 0)
                                        : dv_arg_ptr(ctx->arg[0]),
                          dv_arg_u32(t->fill_value), dv_arg_u64(t->fill_words)};
        t->launch_rc =
            dv_task_launch(ctx, t->fill, (dv_dim3){1, 1, 1}, (dv_dim3){32, 1, 1}, 0, args, 3);
    }
    if (t->behaviour & T_SCRATCH) {
        /* Fill a workspace, copy it into argument 0: the workspace is
         * reused only after this task's work (the header's promise). */
        uint64_t scratch = 0, n = t->fill_words * 4;
        t->scratch_rc = dv_task_scratch(ctx, n ? n : 1, &scratch);
        if (t->scratch_rc == DV_OK) {
            dv_arg fill[3] = {dv_arg_ptr(scratch), dv_arg_u32(~t->fill_value),
                              dv_arg_u64(t->fill_words)};
            dv_arg copy[3] = {dv_arg_ptr(ctx->arg[0]), dv_arg_ptr(scratch), dv_arg_u64(n)};
            int rc =
                dv_task_launch(ctx, t->fill, (dv_dim3){1, 1, 1}, (dv_dim3){32, 1, 1}, 0, fill, 3);
            if (rc == DV_OK)
                rc = dv_task_launch(ctx, t->copy, (dv_dim3){1, 1, 1}, (dv_dim3){32, 1, 1}, 0, copy,
                                    3);
            t->scratch_rc = rc;
        }
    }
    if (t->behaviour & T_POST)
        t->mrc = dv_memset_async(ctx->actor, t->mref, 0, t->mvalue, t->mlen, ctx->stream, &t->mf);
    if ((t->behaviour & T_DEADLK) && !deadlk_calls(ctx->actor, t->other, ctx->stream))
        atomic_store(&t->bad, 4);
    if (t->behaviour & T_BAD_CALLS) {
        dv_task_ctx fake = *ctx;
        uint64_t p = 1;
        fake.internal = NULL;
        if (dv_task_host_fn(NULL, host_write, t) != DV_EINVAL ||
            dv_task_host_fn(&fake, host_write, t) != DV_EINVAL ||
            dv_task_host_fn_cleanup(ctx, host_write, NULL, t) != DV_EINVAL ||
            dv_task_launch(NULL, t->fill, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, NULL, 0) !=
                DV_EINVAL ||
            dv_task_launch(ctx, NULL, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, NULL, 0) !=
                DV_EINVAL ||
            dv_task_scratch(ctx, 0, &p) != DV_EINVAL || p != 0 ||
            dv_task_scratch(ctx, 16, NULL) != DV_EINVAL ||
            dv_task_scratch(NULL, 16, &p) != DV_EINVAL ||
            dv_task_sim_access(ctx, 0, 1, DV_READ) != NULL ||
            dv_task_sim_access(ctx, ctx->nargs ? ctx->arg[0] : 8, UINT64_MAX / 2, DV_READ) != NULL)
            atomic_store(&t->bad, 3);
    }
    return t->ret;
}

static void op_task(rd *r)
{
    static const int rets[] = {
        0, 0, 0, 0, DV_EINVAL, DV_ENOMEM, DV_EAGAIN, DV_EDRIVER, DV_ETIMEDOUT, DV_ENOTSUP, -100, 7};
    uint8_t flags = u8(r), beh = u8(r), beh2 = u8(r), rsel = u8(r);
    int ai = pick_actor(flags);
    href h = pick_href(r);
    dv_stream s = pick_stream(r, ai);
    bool async = flags & 2, try_ = async && (flags & 4);
    task_m *t = &Z.task[Z.op];
    memset(t, 0, sizeof(*t));
    t->behaviour = (beh & 0x3f) | (beh2 & 7) << 6;
    t->ret = rets[rsel % (sizeof(rets) / sizeof(rets[0]))];
    t->actor = Z.act[ai].a;
    /* The other actor lives while this thread waits in a blocking task. */
    t->other = async ? NULL : Z.act[1 - ai].a;
    t->stream = s;
    t->seed = u32(r);
    /* Posting from inside the task is ordered before this thread's next
     * call only when this thread waited for the task (the blocking form);
     * and the other client may not fill a shared ring meanwhile. */
    if (async)
        t->behaviour &= ~T_POST;
    if (t->behaviour & T_POST)
        join_worker();
    bool live = h.kind == H_LIVE && Z.buf[h.buf].actor == ai;
    uint64_t sz = live ? Z.buf[h.buf].size : 0;
    if (!live)
        t->behaviour &= ~(T_HOST_WRITE | T_HOST_CHECK | T_LAUNCH | T_POST | T_SCRATCH);
    if ((t->behaviour & T_HOST_WRITE) && (t->behaviour & T_HOST_CHECK))
        t->behaviour &= ~T_HOST_CHECK;
    t->len = sz < 4096 ? sz : 4096;
    if (t->behaviour & (T_LAUNCH | T_BAD_CALLS | T_SCRATCH)) {
        t->fill = kernel_of(ai, K_FILL);
        t->copy = kernel_of(ai, K_COPY);
        if (t->fill == NULL || t->copy == NULL)
            t->behaviour &= ~(T_LAUNCH | T_SCRATCH);
    }
    t->fill_value = t->seed ^ 0x5a5a5a5a;
    t->fill_words = (t->len / 4) % 64;
    t->mref = h.ref;
    t->mlen = t->len ? (t->len + 1) / 2 : 0;
    t->mvalue = (uint8_t)t->seed;
    dv_future_init(&t->mf, 0);
    if (t->mlen == 0)
        t->behaviour &= ~T_POST;

    /* Argument 0 the handle, with the access the behaviour needs; then a
     * value or two. */
    dv_arg *args = Z.args[Z.op];
    unsigned nargs = 0;
    int acc = t->behaviour & (T_HOST_WRITE | T_LAUNCH | T_POST | T_SCRATCH) ? DV_WRITE : DV_READ;
    if (t->behaviour & T_HOST_CHECK)
        acc |= DV_READ;
    if ((flags & 0x30) == 0x30)
        acc = DV_READ_WRITE;
    bool with_handle = h.kind != H_NULL || (flags & 8);
    if (with_handle)
        args[nargs++] = dv_arg_ref(h.ref, (dv_arg_access)acc, 0);
    else
        t->behaviour &= ~(T_HOST_WRITE | T_HOST_CHECK | T_LAUNCH | T_POST | T_SCRATCH);
    for (unsigned k = 0; k < (unsigned)(beh >> 6); k++)
        args[nargs++] = dv_arg_u64(t->seed + k);
    unsigned claimed = (flags & 0xc0) == 0xc0 ? DV_LAUNCH_MAX_ARGS + 1 : nargs;
    bool null_fn = (flags & 0xf8) == 0xb8;
    t->nargs = nargs;

    char hs[64];
    note("op %d: task%s a%d s%u %s beh 0x%x ret %d nargs %u%s", Z.op, async ? "_async" : "", ai, s,
         href_str(&h, hs, sizeof(hs)), t->behaviour, t->ret, claimed, null_fn ? " NULL fn" : "");

    expect ex;
    ex_init(&ex, ai);
    ex_pre(&ex, !stream_ok(ai, s), DV_EINVAL);
    ex_pre(&ex, null_fn || claimed > DV_LAUNCH_MAX_ARGS, DV_EINVAL);
    if (with_handle) {
        ex_handle(&ex, &h, ai, 0, 0, true);
        ex_tracked(&ex, ai);
    }
    bool runs = final_of(&ex, true) == DV_OK;
    /* A function's answer that is no dv_status comes back DV_EINVAL. */
    int tret = t->ret != 0 && strcmp(dv_err_name(t->ret), "DV_UNKNOWN") == 0 ? DV_EINVAL : t->ret;
    if (t->behaviour & T_HOST_CHECK)
        sh_snapshot(h.buf, 0, t->len, &t->want, &t->wknown);

    int rc;
    if (async) {
        pend_m *p = pend_new(P_PLAIN, ai, stream_ok(ai, s) ? s : 0, "task_async", try_);
        p->ex = ex;
        ex_post(&p->ex, tret != 0, tret);
        rc = dv_task_async(Z.act[ai].a, null_fn ? NULL : task_fn, t, s, args, claimed, &p->f);
        if (!async_posted(p, rc)) {
            pend_wait(p);
            runs = false;
        }
    } else {
        rc = note_rc(dv_task(Z.act[ai].a, null_fn ? NULL : task_fn, t, s, args, claimed));
        expect ex2 = ex;
        ex_post(&ex2, tret != 0, tret);
        int want = final_of(&ex2, false);
        if (!rc_matches(rc, want))
            fail("task answered %s (%d), expected %s", dv_err_name(rc), rc, exp_name(want));
        if (want != EXP_ANY)
            check_detail("task", rc); /* the callback's own code too (ops.c) */
        Z.err_valid = false;
        if (runs && final_of(&ex, false) != DV_OK)
            runs = false; /* its allocation had failed */
        if (!chaotic(ai)) {
            if (atomic_load(&t->ran) != (runs ? 1 : 0))
                fail("task: the callback %s", runs ? "did not run" : "ran though refused");
            if (atomic_load(&t->bad))
                fail("task: inside the callback, check %d failed", atomic_load(&t->bad));
            if (runs && t->ret == 0 && atomic_load(&t->host_ran) != atomic_load(&t->host_enqueued))
                fail("task: complete, but its host function did not run");
            if (runs && t->ret == 0 && atomic_load(&t->mismatch))
                fail("task: its host function saw byte %d of buf%d differ from the model",
                     atomic_load(&t->mismatch) - 1, h.buf);
            if (runs && (t->behaviour & T_LAUNCH) && t->launch_rc != DV_OK)
                fail("task: dv_task_launch answered %s", dv_err_name(t->launch_rc));
            if (runs && (t->behaviour & T_SCRATCH) && t->scratch_rc != DV_OK &&
                t->scratch_rc != DV_EOUT_OF_BUDGET && t->scratch_rc != DV_EDEVICE_OOM)
                fail("task: scratch answered %s", dv_err_name(t->scratch_rc));
        }
    }
    if (!runs || chaotic(ai))
        return;
    /* An _async task may not have run yet: what its callback's own calls
     * answer is predicted (they are valid), and checked at the end of the
     * input (finish_input). */
    t->predicted = async;
    bool host_ok = async || (t->host_rc == DV_OK && t->dev != NULL);
    bool launch_ok = async || t->launch_rc == DV_OK;
    /* Its work is ordered before later operations on the block, even
     * when the callback failed after enqueueing it (in the order the
     * callback enqueued it). */
    if ((t->behaviour & T_HOST_WRITE) && host_ok) {
        uint8_t *src = malloc(t->len ? t->len : 1);
        if (src == NULL)
            abort();
        for (uint64_t i = 0; i < t->len; i++)
            src[i] = pattern(t->seed, i);
        sh_write(h.buf, 0, src, NULL, t->len);
        free(src);
    }
    if ((t->behaviour & T_LAUNCH) && launch_ok)
        for (uint64_t w = 0; w < t->fill_words; w++)
            sh_write(h.buf, w * 4, (const uint8_t *)&t->fill_value, NULL, 4);
    if ((t->behaviour & T_SCRATCH) && async) {
        sh_forget(h.buf, 0, t->fill_words * 4); /* a budget may refuse the scratch */
    } else if ((t->behaviour & T_SCRATCH) && t->scratch_rc == DV_OK) {
        uint32_t v = ~t->fill_value;
        for (uint64_t w = 0; w < t->fill_words; w++)
            sh_write(h.buf, w * 4, (const uint8_t *)&v, NULL, 4);
    } else if ((t->behaviour & T_SCRATCH) && t->scratch_rc != DV_OK) {
        sh_forget(h.buf, 0, t->fill_words * 4); /* the fill may have gone, not the copy */
    }
    if (t->behaviour & T_POST) {
        check_rc("memset_async posted by a task", t->mrc, DV_OK);
        sh_fill(h.buf, 0, t->mvalue, t->mlen);
        check_rc("memset_async posted by a task (its future)", dv_future_wait(&t->mf), DV_OK);
    }
    Z.seq++;
}

/* ---- launches */

static dv_dim3 dim_of(uint8_t g, bool grid)
{
    return grid ? (dv_dim3){1 + (g & 3), 1, 1} : (dv_dim3){1u << ((g >> 2) & 7), 1, 1};
}

static void op_launch(rd *r)
{
    uint8_t flags = u8(r), ksel = u8(r), variant = u8(r), g = u8(r);
    int ai = pick_actor(flags);
    int k = ksel % K_ILLEGAL; /* illegal_address is a fault (op_fault) */
    dv_stream s = pick_stream(r, ai);
    bool async = flags & 2, try_ = async && (flags & 4);
    dv_dim3 grid = dim_of(g, true), block = dim_of(g, false);
    dv_arg *args = Z.args[Z.op];
    unsigned nargs = 0;
    href h[8];
    int nh = 0;
    uint64_t off[8] = {0};
    uint64_t n = 0;
    uint32_t value = u32(r);
    int64_t poke = 0;

    expect ex;
    ex_init(&ex, ai);
    ex_pre(&ex, !stream_ok(ai, s), DV_EINVAL);

    /* The handles and sizes each kernel needs, in parameter order. */
    switch (k) {
    case K_FILL:
    case K_MINE: {
        h[nh] = pick_href(r);
        uint64_t sz = h[nh].kind == H_LIVE ? Z.buf[h[nh].buf].size : 0;
        off[nh] = pick_off(r, sz, 4);
        n = sz > off[0] ? (u16(r) % ((sz - off[0]) / 4 + 1)) : 0;
        args[nargs++] = dv_arg_ref(h[nh].ref, (flags & 8) ? DV_READ_WRITE : DV_WRITE, off[0]);
        nh++;
        args[nargs++] = dv_arg_u32(value);
        args[nargs++] = dv_arg_u64(n);
        break;
    }
    case K_COPY: {
        h[0] = pick_href(r);
        h[1] = pick_href(r);
        uint64_t s0 = h[0].kind == H_LIVE ? Z.buf[h[0].buf].size : 0;
        uint64_t s1 = h[1].kind == H_LIVE ? Z.buf[h[1].buf].size : 0;
        off[0] = pick_off(r, s0, 1);
        off[1] = pick_off(r, s1, 1);
        uint64_t r0 = s0 > off[0] ? s0 - off[0] : 0, r1 = s1 > off[1] ? s1 - off[1] : 0;
        uint64_t max = r0 < r1 ? r0 : r1;
        if (h[0].kind == H_LIVE && h[0].buf == h[1].buf) {
            /* No overlap: the real kernel's threads would race. */
            uint64_t gap = off[0] > off[1] ? off[0] - off[1] : off[1] - off[0];
            max = max < gap ? max : gap;
        }
        n = max ? u16(r) % (max + 1) : 0;
        if (n > SHADOW_MAX)
            n = SHADOW_MAX;
        args[nargs++] = dv_arg_ref(h[0].ref, DV_WRITE, off[0]);
        args[nargs++] = dv_arg_ref(h[1].ref, DV_READ, off[1]);
        args[nargs++] = dv_arg_u64(n);
        nh = 2;
        break;
    }
    case K_ADD: {
        uint64_t min = UINT64_MAX;
        for (nh = 0; nh < 3; nh++) {
            h[nh] = pick_href(r);
            uint64_t sz = h[nh].kind == H_LIVE ? Z.buf[h[nh].buf].size : 0;
            min = sz < min ? sz : min;
        }
        n = min / 4 ? u16(r) % (min / 4 + 1) : 0;
        if (n > SHADOW_MAX / 4)
            n = SHADOW_MAX / 4;
        args[nargs++] = dv_arg_ref(h[0].ref, DV_WRITE, 0);
        args[nargs++] = dv_arg_ref(h[1].ref, DV_READ, 0);
        args[nargs++] = dv_arg_ref(h[2].ref, DV_READ, 0);
        args[nargs++] = dv_arg_u64(n);
        /* c = a + b with c aliasing a or b: the same block gets both uses. */
        break;
    }
    case K_CHECKSUM: {
        h[0] = pick_href(r);
        h[1] = pick_href(r);
        uint64_t s0 = h[0].kind == H_LIVE ? Z.buf[h[0].buf].size : 0;
        uint64_t s1 = h[1].kind == H_LIVE ? Z.buf[h[1].buf].size : 0;
        n = s0 / 4 ? u16(r) % (s0 / 4 + 1) : 0;
        if (n > SHADOW_MAX / 4)
            n = SHADOW_MAX / 4;
        off[1] = s1 >= 8 ? pick_off(r, s1 - 7, 8) : 0;
        if (h[0].kind == H_LIVE && h[0].buf == h[1].buf && off[1] < n * 4)
            off[1] = (n * 4 + 7) / 8 * 8; /* out after the words it sums */
        args[nargs++] = dv_arg_ref(h[0].ref, DV_READ, 0);
        args[nargs++] = dv_arg_u64(n);
        args[nargs++] = dv_arg_ref(h[1].ref, DV_READ_WRITE, off[1]);
        nh = 2;
        break;
    }
    case K_POKE: {
        h[0] = pick_href(r);
        uint64_t sz = h[0].kind == H_LIVE ? Z.buf[h[0].buf].size : 1;
        off[0] = pick_off(r, sz, 1);
        poke = sz > 0 ? (int64_t)(u16(r) % sz) - (int64_t)(off[0] < sz ? off[0] : 0) : 0;
        args[nargs++] = dv_arg_ref(h[0].ref, DV_WRITE, off[0]);
        args[nargs++] = dv_arg_i64(poke);
        args[nargs++] = dv_arg_u8((uint8_t)value);
        nh = 1;
        break;
    }
    case K_SPIN:
        args[nargs++] = dv_arg_u64(value % 20000);
        break;
    case K_STORE: {
        /* store_args(out, i32, i64, f32, f64, 16 bytes by value, u8, u16):
         * each argument's bytes after out, 43 in all. */
        h[0] = pick_href(r);
        uint64_t sz = h[0].kind == H_LIVE ? Z.buf[h[0].buf].size : 0;
        off[0] = sz > 43 ? pick_off(r, sz - 42, 1) : pick_off(r, sz, 1);
        uint8_t *by = Z.bytes[Z.op];
        for (int i = 0; i < 16; i++)
            by[i] = pattern(value, (uint64_t)i + 100);
        args[nargs++] = dv_arg_ref(h[0].ref, (flags & 8) ? DV_READ_WRITE : DV_WRITE, off[0]);
        args[nargs++] = dv_arg_i32((int32_t)value);
        args[nargs++] = dv_arg_i64(-(int64_t)value * 977);
        args[nargs++] = dv_arg_f32((float)(int16_t)value);
        args[nargs++] = dv_arg_f64((double)(int32_t)value / 8.0);
        args[nargs++] = dv_arg_bytes(by, 16);
        args[nargs++] = dv_arg_u8((uint8_t)(value >> 8));
        args[nargs++] = dv_arg_u16((uint16_t)(value >> 16));
        n = 43;
        nh = 1;
        break;
    }
    case K_TOUCH8:
        /* Eight pointers it never touches: handles of any access, values. */
        for (int i = 0; i < 8; i++) {
            uint8_t sel = u8(r);
            if (sel & 1) {
                args[nargs++] = dv_arg_u64(sel);
                continue;
            }
            h[nh] = pick_href(r);
            args[nargs++] = dv_arg_ref(h[nh].ref, (dv_arg_access)(1 + (sel >> 1) % 3), 0);
            off[nh] = (uint64_t)i; /* the argument's index, for the checks below */
            nh++;
        }
        break;
    default:
        break;
    }

    /* Each handle in argument order, with what its kernel does with it. */
    bool sized = true;
    for (int i = 0; i < nh; i++) {
        int hi = k == K_CHECKSUM && i == 1 ? 2 : k == K_TOUCH8 ? (int)off[i] : i;
        ex_handle(&ex, &h[i], ai, args[hi].offset, 0, true);
        if (h[i].kind == H_LIVE) {
            uint64_t sz = Z.buf[h[i].buf].size;
            uint64_t need = k == K_FILL || k == K_MINE ? off[0] + n * 4
                            : k == K_COPY              ? off[i] + n
                            : k == K_ADD               ? n * 4
                            : k == K_CHECKSUM          ? (i == 0 ? n * 4 : off[1] + 8)
                            : k == K_POKE              ? (uint64_t)((int64_t)off[0] + poke) + 1
                            : k == K_STORE             ? off[0] + 43
                                                       : 0;
            if (args[hi].offset < sz && (need > sz || (k == K_CHECKSUM && i == 1 && sz < 8)))
                sized = false;
        }
    }
    if (!sized) {
        /* A kernel told to go past its block is the program's bug (the
         * sim would corrupt a neighbour or fault): never launched. */
        note("op %d: launch %s skipped (the kernel would leave its block)", Z.op, kernel_names[k]);
        return;
    }
    if (nh > 0)
        ex_tracked(&ex, ai);

    /* Invalid variants, each refused before anything is enqueued. */
    dv_kernel *kern = kernel_of(ai, k);
    if (kern == NULL)
        return;
    unsigned claimed = nargs;
    const dv_arg *argp = args;
    int bad = variant < 200 ? -1 : (variant - 200) % 12;
    switch (bad) {
    case 0:
        grid.x = 0;
        ex_pre(&ex, true, DV_EINVAL);
        break;
    case 1:
        block.x = 1025;
        ex_pre(&ex, true, DV_EINVAL);
        break;
    case 2:
        grid.y = 0x10000;
        ex_pre(&ex, true, DV_EINVAL);
        break;
    case 3:
        claimed = DV_LAUNCH_MAX_ARGS + 1;
        ex_pre(&ex, true, DV_EINVAL);
        break;
    case 4:
        kern = NULL;
        ex_pre(&ex, true, DV_EINVAL);
        break;
    case 5:
        if (nargs > 0) {
            argp = NULL;
            ex_pre(&ex, true, DV_EINVAL);
        }
        break;
    case 6:
    case 7:
    case 8:
        if (nh > 0 && !ex.pre) {
            /* The first handle argument made bad: a bad access, a raw
             * pointer on a strict actor, an unknown kind. */
            int hi = k == K_TOUCH8 ? (int)off[0] : 0;
            if (bad == 6)
                args[hi].access = (variant & 1) ? 0 : 4;
            else if (bad == 7)
                args[hi] = dv_arg_ptr(0x1000);
            else
                args[hi].kind = 9;
            ex.h[0].buf = -1;
            ex.h[0].range = 0;
            ex.h[0].owner = -1; /* refused for what it is, whoever owned it */
            ex.h[0].code = bad == 7 ? DV_ESTREAM_MISUSE : DV_EINVAL;
        }
        break;
    case 9:  /* one argument short of the kernel's parameters */
    case 10: /* one too many */
        if (bad == 9 && nargs == 0)
            break;
        if (bad == 10)
            args[nargs] = dv_arg_u64(0);
        claimed = bad == 9 ? nargs - 1 : nargs + 1;
        ex.first = ex.first ? ex.first : DV_EINVAL;
        break;
    case 11: /* an argument of the wrong size */
        for (unsigned i = 0; i < nargs; i++) {
            if (args[i].kind == DV_ARG_VALUE) {
                args[i].size = args[i].size == 8 ? 4 : 8;
                ex.first = ex.first ? ex.first : DV_EINVAL;
                break;
            }
        }
        break;
    default:
        break;
    }
    if (bad < 0 && (variant & 0xc0) == 0xc0 && Z.act[1 - ai].a != NULL) {
        /* Another actor's kernel. */
        dv_kernel *other = kernel_of(1 - ai, k);
        if (other != NULL) {
            kern = other;
            ex.first = DV_EINVAL; /* not this actor's: before its parameters */
            if (chaotic(1 - ai))
                ex.any = true;
        }
    }

    char hs[3][64];
    note("op %d: launch%s a%d %s s%u n %" PRIu64 " %s %s %s%s bad %d", Z.op, async ? "_async" : "",
         ai, kernel_names[k], s, n, nh > 0 ? href_str(&h[0], hs[0], 64) : "",
         nh > 1 ? href_str(&h[1], hs[1], 64) : "", nh > 2 ? href_str(&h[2], hs[2], 64) : "",
         nh > 3 ? " ..." : "", bad);

    bool ok = final_of(&ex, true) == DV_OK;
    /* What the kernel reads, as the model knows it now. */
    uint8_t *in0 = NULL, *k0 = NULL, *in1 = NULL, *k1 = NULL, *in2 = NULL, *k2 = NULL;
    if (ok && k == K_COPY)
        sh_snapshot(h[1].buf, off[1], n, &in0, &k0);
    if (ok && k == K_ADD) {
        sh_snapshot(h[1].buf, 0, n * 4, &in0, &k0);
        sh_snapshot(h[2].buf, 0, n * 4, &in1, &k1);
    }
    if (ok && k == K_CHECKSUM) {
        sh_snapshot(h[0].buf, 0, n * 4, &in0, &k0);
        sh_snapshot(h[1].buf, off[1], 8, &in2, &k2);
    }

    int rc;
    if (async) {
        pend_m *p = pend_new(P_PLAIN, ai, stream_ok(ai, s) ? s : 0, "launch_async", try_);
        p->ex = ex;
        rc = dv_launch_async(Z.act[ai].a, kern, grid, block, 0, s, argp, claimed, &p->f);
        if (!async_posted(p, rc)) {
            pend_wait(p);
            ok = false;
        }
    } else {
        rc = note_rc(dv_launch(Z.act[ai].a, kern, grid, block, 0, s, argp, claimed));
        check_rc("launch", rc, final_of(&ex, false));
    }
    if (ok) {
        switch (k) {
        case K_FILL:
        case K_MINE: {
            uint32_t v = k == K_MINE ? value + 1 : value;
            for (uint64_t w = 0; w < n; w++)
                sh_write(h[0].buf, off[0] + w * 4, (const uint8_t *)&v, NULL, 4);
            break;
        }
        case K_COPY:
            sh_write(h[0].buf, off[0], in0, k0, n);
            break;
        case K_ADD:
            for (uint64_t w = 0; w < n; w++) {
                uint32_t a, b, c;
                bool known = true;
                for (int j = 0; j < 4; j++)
                    known = known && k0[w * 4 + j] && k1[w * 4 + j];
                memcpy(&a, in0 + w * 4, 4);
                memcpy(&b, in1 + w * 4, 4);
                c = a + b;
                if (known)
                    sh_write(h[0].buf, w * 4, (const uint8_t *)&c, NULL, 4);
                else
                    sh_forget(h[0].buf, w * 4, 4);
            }
            break;
        case K_CHECKSUM: {
            bool known = true;
            for (uint64_t i = 0; i < n * 4 && known; i++)
                known = k0[i];
            for (int i = 0; i < 8 && known; i++)
                known = k2[i];
            uint64_t sum, word;
            memcpy(&sum, in2, 8);
            for (uint64_t i = 0; i < n; i++) {
                uint32_t v;
                memcpy(&v, in0 + i * 4, 4);
                word = ((uint64_t)v << 32) | (uint32_t)i;
                sum += word * UINT64_C(0x9E3779B97F4A7C15);
            }
            if (known)
                sh_write(h[1].buf, off[1], (const uint8_t *)&sum, NULL, 8);
            else
                sh_forget(h[1].buf, off[1], 8);
            break;
        }
        case K_POKE: {
            uint8_t v = (uint8_t)value;
            sh_write(h[0].buf, (uint64_t)((int64_t)off[0] + poke), &v, NULL, 1);
            break;
        }
        case K_STORE: {
            /* Little-endian bytes of each argument, in order. */
            static const unsigned sizes[7] = {4, 8, 4, 8, 16, 1, 2};
            uint8_t out[43];
            unsigned at = 0;
            for (int i = 0; i < 7; i++) {
                const dv_arg *arg = &args[i + 1];
                if (arg->kind == DV_ARG_BYTES)
                    memcpy(out + at, arg->u.bytes, sizes[i]);
                else
                    for (unsigned b = 0; b < sizes[i]; b++)
                        out[at + b] = (uint8_t)(arg->u.value >> (8 * b));
                at += sizes[i];
            }
            sh_write(h[0].buf, off[0], out, NULL, 43);
            break;
        }
        default:
            break;
        }
    }
    free(in0);
    free(k0);
    free(in1);
    free(k1);
    free(in2);
    free(k2);
    Z.seq++;
}

/* ---- stale handles and bad arguments */

static void op_stale(rd *r)
{
    uint8_t what = u8(r);
    href h = pick_href(r);
    if (h.kind == H_LIVE)
        return; /* the other operations cover live handles */
    char hs[64];
    note("op %d: stale %s: %d", Z.op, href_str(&h, hs, sizeof(hs)), what % 4);
    /* Random bits naming a domain no actor opened are malformed (the
     * model does not know which were): DV_EINVAL or DV_ESTALE. */
    int want = h.ref.bits == 0 || (h.ref.bits >> 56) == 0 ? DV_EINVAL
               : h.kind == H_RANDOM                       ? EXP_STALEISH
                                                          : DV_ESTALE;
    dv_ref_info info;
    switch (what % 4) {
    case 0:
        check_rc("access of a stale handle", dv_ref_access(h.ref, &info), want);
        break;
    case 1:
        check_rc("try_access of a stale handle", dv_ref_try_access(h.ref, &info), want);
        break;
    case 2:
        check_rc("retain of a stale handle", dv_ref_retain(h.ref), want);
        break;
    default:
        check_rc("release of a stale handle", dv_ref_release(h.ref), want);
        break;
    }
}

static void op_bad(rd *r)
{
    uint8_t what = u8(r);
    int ai = pick_actor(u8(r));
    dv_actor *a = Z.act[ai].a;
    int bi = pick_buf(u8(r));
    dv_ref ref = bi >= 0 ? Z.buf[bi].ref : DV_REF_NULL;
    int ei = pick_event(u8(r));
    dv_event *e = ei >= 0 ? Z.ev[ei].e : NULL;
    uint8_t byte = 0;
    dv_ref out;
    dv_future never, raw;
    dv_future_init(&never, 0);
    memset(&raw, 0, sizeof(raw)); /* never set up with dv_future_init */
    dv_event *eout;
    dv_kernel *kout;
    note("op %d: bad arguments %d a%d", Z.op, what % 40, ai);
    /* Refused by the client, whatever the actor's state. */
    int lostish = DV_EINVAL;
    switch (what % 40) {
    case 0:
        check_rc("alloc NULL out", dv_alloc(a, 16, 0, "x", NULL), DV_EINVAL);
        break;
    case 1:
        check_rc("alloc NULL actor", dv_alloc(NULL, 16, 0, "x", &out), DV_EINVAL);
        break;
    case 2:
        check_rc("alloc_async NULL future", dv_alloc_async(a, 16, 0, "x", &out, NULL), DV_EINVAL);
        break;
    case 3:
        check_rc("copy_htod NULL actor", dv_copy_htod(NULL, ref, 0, &byte, 1, 0), DV_EINVAL);
        break;
    case 4:
        check_rc("copy_dtoh NULL host", dv_copy_dtoh(a, NULL, ref, 0, 1, 0), lostish);
        break;
    case 5:
        check_rc("memset NULL actor", dv_memset(NULL, ref, 0, 1, 1, 0), DV_EINVAL);
        break;
    case 6:
        check_rc("sync NULL actor", dv_sync(NULL, 0), DV_EINVAL);
        break;
    case 7:
        check_rc("flush NULL actor", dv_flush(NULL), DV_EINVAL);
        break;
    case 8:
        check_rc("stats NULL out", dv_actor_stats_get(a, NULL), DV_EINVAL);
        break;
    case 9:
        check_rc("event_create NULL actor", dv_event_create(NULL, 0, &eout), DV_EINVAL);
        break;
    case 10:
        check_rc("event_create NULL out", dv_event_create(a, 0, NULL), DV_EINVAL);
        break;
    case 11:
        check_rc("event_record NULL", dv_event_record(NULL, 0), DV_EINVAL);
        break;
    case 12:
        check_rc("event_sync NULL", dv_event_sync(NULL), DV_EINVAL);
        break;
    case 13:
        check_rc("event_query NULL", dv_event_query(NULL), DV_EINVAL);
        break;
    case 14:
        if (e != NULL)
            check_rc("stream_wait_event NULL actor", dv_stream_wait_event(NULL, 0, e), DV_EINVAL);
        check_rc("stream_wait_event NULL event", dv_stream_wait_event(a, 0, NULL), DV_EINVAL);
        break;
    case 15:
        check_rc("kernel_get NULL name", dv_kernel_get(a, NULL, 0, NULL, &kout), DV_EINVAL);
        break;
    case 16:
        check_rc("kernel_get empty name", dv_kernel_get(a, NULL, 0, "", &kout), DV_EINVAL);
        break;
    case 17:
        check_rc("kernel_get image of 0 bytes", dv_kernel_get(a, "x", 0, "fill_u32", &kout),
                 DV_EINVAL);
        break;
    case 18:
        check_rc("kernel_get NULL out", dv_kernel_get(a, NULL, 0, "fill_u32", NULL), DV_EINVAL);
        break;
    case 19: {
        int rc = dv_kernel_get(a, NULL, 0, "no_such_kernel", &kout);
        check_rc("kernel_get unknown name", rc, chaotic(ai) ? EXP_ANY : DV_ENOKERNEL);
        break;
    }
    case 20:
        check_rc("task NULL fn", dv_task(a, NULL, NULL, 0, NULL, 0), lostish);
        break;
    case 21:
        check_rc("task_host_fn outside a task", dv_task_host_fn(NULL, host_write, NULL), DV_EINVAL);
        break;
    case 22:
        check_rc("task_launch outside a task",
                 dv_task_launch(NULL, NULL, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, NULL, 0),
                 DV_EINVAL);
        if (dv_task_sim_access(NULL, 0, 1, DV_READ) != NULL)
            fail("task_sim_memory outside a task is not NULL");
        break;
    case 23:
        check_rc("future_wait NULL", dv_future_wait(NULL), DV_EINVAL);
        break;
    case 24:
        check_rc("future_wait never posted", dv_future_wait(&never), DV_EINVAL);
        break;
    case 25:
        check_rc("future_wait not set up", dv_future_wait(&raw), DV_EINVAL);
        break;
    case 26:
        check_rc("future_wait_for milestone 7", dv_future_wait_for(&never, (dv_milestone)7, 1000),
                 DV_EINVAL);
        if (dv_future_done(NULL) || dv_future_reached(&raw, DV_ORDERED))
            fail("future_done(NULL) or reached of a raw future is true");
        break;
    case 27:
        check_rc("ref_access NULL", dv_ref_access(DV_REF_NULL, NULL), DV_EINVAL);
        break;
    case 28: {
        dv_actor_health hh;
        check_rc("health NULL actor", dv_actor_health_get(NULL, &hh), DV_EINVAL);
        check_rc("health NULL out", dv_actor_health_get(a, NULL), DV_EINVAL);
        break;
    }
    case 29:
        check_rc("check_host_access NULL", dv_check_host_access(a, NULL, 1, DV_READ), DV_EINVAL);
        check_rc("check_host_access access 0", dv_check_host_access(a, &byte, 1, 0), DV_EINVAL);
        check_rc("check_host_access 0 bytes", dv_check_host_access(a, &byte, 0, DV_READ),
                 DV_EINVAL);
        break;
    case 30: {
        dv_error_detail d;
        check_rc("last_hazard NULL", dv_actor_last_hazard(NULL, &d), DV_EINVAL);
        check_rc("last_hazard", dv_actor_last_hazard(a, &d), DV_OK);
        if (!Z.act[ai].cfg.check_order && d.status != 0)
            fail("last_hazard on an actor without the checker: %s", d.message);
        break;
    }
    case 31: {
        int code = (int)u32(r);
        if (dv_strerror(code) == NULL || dv_err_name(code) == NULL)
            fail("strerror or err_name of %d is NULL", code);
        break;
    }
    case 32: {
        dv_actor_config cfg = Z.act[0].cfg;
        dv_actor *bad = (dv_actor *)&cfg;
        uint8_t which = u8(r) % 4;
        if (which == 0)
            cfg.streams = 0;
        else if (which == 1)
            cfg.streams = 65;
        else if (which == 2)
            cfg.queue_capacity = 1;
        else
            cfg.backend = (dv_backend)7;
        check_rc("actor_create bad config", dv_actor_create(&cfg, &bad), DV_EINVAL);
        if (bad != NULL)
            fail("actor_create refused but *out is not NULL");
        check_rc("actor_create NULL out", dv_actor_create(&cfg, NULL), DV_EINVAL);
        break;
    }
    case 33:
        check_rc("copy_dtod_async NULL future", dv_copy_dtod_async(a, ref, 0, ref, 0, 1, 0, NULL),
                 DV_EINVAL);
        check_rc(
            "launch_async NULL future",
            dv_launch_async(a, NULL, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, 0, NULL, 0, NULL),
            DV_EINVAL);
        break;
    case 34:
        /* A future not set up: refused, and nothing was posted. */
        check_rc("sync_async with a raw future", dv_sync_async(a, 0, &raw), lostish);
        check_rc("memset_async with a raw future", dv_memset_async(a, ref, 0, 1, 1, 0, &raw),
                 lostish);
        break;
    case 35:
        if (e != NULL) {
            check_rc("event_elapsed NULL ms", dv_event_elapsed(e, e, NULL), DV_EINVAL);
            check_rc("event_record_async NULL future", dv_event_record_async(e, 0, NULL),
                     DV_EINVAL);
        }
        check_rc("event_create bad flags", dv_event_create(a, 0x80, &eout), DV_EINVAL);
        break;
    case 36:
        check_rc("task_async NULL future", dv_task_async(a, task_fn, NULL, 0, NULL, 0, NULL),
                 DV_EINVAL);
        check_rc("task NULL args", dv_task(a, task_fn, NULL, 0, NULL, 1), lostish);
        break;
    case 37:
        if (strcmp(dv_actor_backend_name(a), "sim") != 0)
            fail("backend name %s", dv_actor_backend_name(a));
        if (dv_actor_device(a) != Z.act[ai].device || dv_actor_device(NULL) != -1)
            fail("actor_device");
        check_rc("actor_destroy(NULL)", dv_actor_destroy(NULL), DV_OK);
        break;
    case 38: {
        /* A handle given to the other actor (a foreign domain). */
        if (bi >= 0 && Z.act[1 - Z.buf[bi].actor].a != NULL) {
            int other = 1 - Z.buf[bi].actor;
            int rc = dv_memset(Z.act[other].a, ref, 0, 1, 1, 0);
            check_rc("memset with another actor's handle", rc,
                     chaotic(other) ? EXP_ANY : DV_EINVAL);
        }
        break;
    }
    default: {
        dv_actor_health hh;
        check_rc("health", dv_actor_health_get(a, &hh), DV_OK);
        /* A fault mended by a rebuild stays in first_fault, for the
         * record. */
        if (!chaotic(ai) && (hh.state != DV_ACTOR_RUNNING || hh.rebuilds != Z.act[ai].rebuilds ||
                             (hh.first_fault.status != 0 && !Z.act[ai].faulted)))
            fail("health: state %d, %u rebuilds (expected %u), first fault %s", hh.state,
                 hh.rebuilds, Z.act[ai].rebuilds, hh.first_fault.message);
        break;
    }
    }
}

/* ---- whole actors */

static void check_stats(int ai, const char *when, bool empty)
{
    actor_m *m = &Z.act[ai];
    if (m->a == NULL || m->lost)
        return;
    dv_actor_stats st;
    int rc = dv_actor_stats_get(m->a, &st);
    check_rc("actor_stats_get", rc, m->chaos ? EXP_ANY : DV_OK);
    if (rc != DV_OK)
        return;
    uint64_t live = 0, held = 0;
    for (int i = 0; i < MAX_BUFS; i++) {
        if (!Z.buf[i].used || Z.buf[i].actor != ai)
            continue;
        held++;
        if (!m->chaos && buf_status(i) == DV_OK)
            live += Z.buf[i].size;
    }
    if (!m->chaos && st.refs_alive != held)
        fail("%s: stats of a%d: refs_alive %" PRIu64 ", this thread holds %" PRIu64, when, ai,
             st.refs_alive, held);
    if (m->chaos && empty && st.refs_alive != 0)
        fail("%s: stats of a%d (after a fault): refs_alive %" PRIu64 " with every handle released",
             when, ai, st.refs_alive);
    if (!m->chaos && (empty ? st.bytes_outstanding != 0 : st.bytes_outstanding < live))
        fail("%s: stats of a%d: bytes_outstanding %" PRIu64 " with %" PRIu64
             " bytes of live blocks",
             when, ai, st.bytes_outstanding, live);
    if (!m->chaos && m->cfg.check_order && st.hazards != 0) {
        dv_error_detail d;
        dv_actor_last_hazard(m->a, &d);
        fail("%s: the checker found %" PRIu64 " hazards in a correct program: %s", when, st.hazards,
             d.message);
    }
}

static void op_stats(rd *r)
{
    int ai = pick_actor(u8(r));
    join_worker();
    note("op %d: stats a%d", Z.op, ai);
    check_stats(ai, "stats", false);
}

static void op_reset(rd *r)
{
    int ai = pick_actor(u8(r));
    actor_m *m = &Z.act[ai];
    join_worker();
    job_finish_future();
    note("op %d: reset a%d", Z.op, ai);
    freeze_refs(ai, -1);
    int rc = dv_actor_reset(m->a);
    /* Armed allocation failures may refuse the rebuild's own. */
    check_rc("actor_reset", rc, m->chaos || m->fail_armed ? EXP_ANY : DV_OK);
    if (rc != DV_OK) {
        chaos_on(ai);
        return;
    }
    if (m->chaos) {
        /* What was injected and has not fired yet would fire on the
         * rebuilt actor: disarm it. */
        for (unsigned c = 0; dv_sim_call_name(c) != NULL; c++)
            dv_sim_inject(m->a, dv_sim_call_name(c), 1, 0);
    }
    if (!m->chaos)
        check_all_done(ai, "actor_reset");
    wait_all_of(ai);
    stale_all_of(ai);
    bool was_chaos = m->chaos;
    m->chaos = false;
    m->attempted = 0;
    dv_actor_health hh;
    dv_actor_health_get(m->a, &hh);
    if (!was_chaos && hh.rebuilds != m->rebuilds + 1)
        fail("after reset: %u rebuilds, expected %u", hh.rebuilds, m->rebuilds + 1);
    m->rebuilds = hh.rebuilds; /* a fault before may have rebuilt too */
    if (hh.state != DV_ACTOR_RUNNING)
        fail("after reset: state %d", hh.state);
    check_stats(ai, "after reset", true);
}

static void end_actors(void)
{
    join_worker();
    job_finish_future();
    actor_end(1);
    actor_end(0);
}

static void op_recreate(rd *r)
{
    dv_actor_config cfg;
    decode_config(r, &cfg);
    note("op %d: recreate (streams %u queue %u pool %d guard %d budget %d check %d direct %d)",
         Z.op, cfg.streams, cfg.queue_capacity, cfg.pool, cfg.guard, cfg.budget_bytes != 0,
         cfg.check_order, cfg.direct_alloc);
    end_actors();
    actor_start(0, &cfg);
}

static void op_peer(rd *r)
{
    uint8_t what = u8(r);
    join_worker();
    job_finish_future();
    if (Z.act[1].a != NULL) {
        note("op %d: destroy the peer", Z.op);
        actor_end(1);
        return;
    }
    dv_actor_config cfg = Z.act[0].cfg;
    cfg.driver = dv__actor_driver(Z.act[0].a);
    cfg.streams = 1 + (what >> 2) % MAX_STREAMS;
    /* One actor per device: the main actor's device is taken. */
    cfg.device = (what & 3) == 3 ? 0 : (what & 3) == 2 ? 7 : 1;
    note("op %d: peer on device %d, %u streams", Z.op, cfg.device, cfg.streams);
    if (cfg.device != 1 || Z.act[0].cfg.sim_devices < 2) {
        dv_actor *x = (dv_actor *)&cfg;
        int rc = dv_actor_create(&cfg, &x);
        check_rc("actor_create on a taken or absent device", rc,
                 cfg.device == 0 && !chaotic(0) ? DV_EBUSY : EXP_ANYFAIL);
        if (x != NULL)
            fail("actor_create refused but *out is not NULL");
        return;
    }
    actor_start(1, &cfg);
}

static void op_fault(rd *r)
{
    uint8_t what = u8(r);
    int ai = pick_actor(u8(r));
    actor_m *m = &Z.act[ai];
    join_worker();
    job_finish_future();
    switch (what % 5) {
    case 0: { /* the Nth allocation fails: statuses stay predictable */
        uint64_t nth = 1 + u8(r) % 4;
        note("op %d: the %" PRIu64 "th allocation on a%d's driver fails", Z.op, nth, ai);
        check_rc("sim_fail_alloc", dv_sim_fail_alloc(m->a, nth), DV_OK);
        for (int i = 0; i < 2; i++)
            if (Z.act[i].a != NULL)
                Z.act[i].fail_armed = true;
        /* "From now" is the driver's now: an allocation posted but not yet
         * made by the actor may be the one that fails. */
        for (int i = 0; i < MAX_BUFS; i++)
            if (Z.buf[i].used && Z.buf[i].status == ST_UNKNOWN)
                Z.buf[i].must_succeed = false;
        break;
    }
    case 1: /* a recoverable poison of the actor's device */
        note("op %d: poison a%d's device %d (recoverable)", Z.op, ai, m->device);
        check_rc("sim_poison", dv_sim_poison(m->a, DV_SIM_POISON_RECOVERABLE), DV_OK);
        chaos_on(ai);
        break;
    case 2: { /* a driver call made to fail */
        unsigned ncalls = 0;
        while (dv_sim_call_name(ncalls) != NULL)
            ncalls++;
        const char *call = dv_sim_call_name(u8(r) % (ncalls ? ncalls : 1));
        static const int codes[] = {1, 2, 201, 400, 700, 719, 999};
        int code = codes[u8(r) % 7];
        uint64_t nth = 1 + u8(r) % 3;
        note("op %d: driver call %s fails with %d (nth %" PRIu64 ")", Z.op, call, code, nth);
        if (call == NULL)
            break;
        check_rc("sim_inject", dv_sim_inject(m->a, call, nth, code), DV_OK);
        for (int i = 0; i < 2; i++)
            if (Z.act[i].a != NULL)
                chaos_on(i);
        break;
    }
    case 3: /* the device is gone for the process */
        note("op %d: poison a%d's device %d (fatal)", Z.op, ai, m->device);
        check_rc("sim_poison", dv_sim_poison(m->a, DV_SIM_POISON_FATAL), DV_OK);
        for (int i = 0; i < 2; i++)
            if (Z.act[i].a != NULL) {
                Z.act[i].lost = true;
                chaos_on(i);
            }
        break;
    default: { /* an illegal address: the same, by a kernel */
        note("op %d: illegal_address kernel on a%d", Z.op, ai);
        dv_kernel *k = kernel_of(ai, K_ILLEGAL);
        if (k == NULL)
            break;
        dv_arg arg = dv_arg_u64(0x10);
        (void)dv_launch(m->a, k, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, 0, &arg, 1);
        for (int i = 0; i < 2; i++)
            if (Z.act[i].a != NULL) {
                Z.act[i].lost = true;
                chaos_on(i);
            }
        break;
    }
    }
}

/* ------------------------------------------------------------------------
 * One input
 * ------------------------------------------------------------------------ */

enum {
    OP_ALLOC,
    OP_ALLOC_ASYNC,
    OP_RELEASE,
    OP_RETAIN,
    OP_ACCESS,
    OP_HTOD,
    OP_DTOH,
    OP_MEMSET,
    OP_DTOD,
    OP_SYNC,
    OP_FLUSH,
    OP_WAIT,
    OP_EVENT,
    OP_TASK,
    OP_LAUNCH,
    OP_STALE,
    OP_BAD,
    OP_WORKER,
    OP_JOIN,
    OP_STATS,
    OP_RESET,
    OP_RECREATE,
    OP_PEER,
    OP_FAULT,
    OP__COUNT
};

/* Release everything, sync, check the accounting, destroy. */
static void finish_input(void)
{
    Z.op = MAX_OPS - 1;
    note("end of input");
    join_worker();
    job_finish_future();
    wait_all_of(-1);
    for (int i = 0; i < MAX_BUFS; i++) {
        buf_m *b = &Z.buf[i];
        while (b->used) {
            int rc = dv_ref_release(b->ref);
            check_rc("release at the end", rc, chaotic(b->actor) ? EXP_ANY : DV_OK);
            if (--b->refs == 0)
                buf_drop(i);
        }
    }
    for (int i = 0; i < MAX_EVENTS; i++)
        if (Z.ev[i].e != NULL) {
            check_rc("event_destroy at the end", dv_event_destroy(Z.ev[i].e),
                     chaotic(Z.ev[i].actor) ? EXP_ANY : DV_OK);
            memset(&Z.ev[i], 0, sizeof(Z.ev[i]));
        }
    for (int ai = 0; ai < 2; ai++) {
        actor_m *m = &Z.act[ai];
        if (m->a == NULL)
            continue;
        for (dv_stream s = 0; s < m->cfg.streams; s++)
            check_rc("sync at the end", dv_sync(m->a, s), chaotic(ai) ? EXP_ANY : DV_OK);
        check_stats(ai, "end of input", true);
    }
    end_actors();
    for (int i = 0; i < MAX_OPS; i++) {
        task_m *t = &Z.task[i];
        if (!Z.faulted && atomic_load(&t->ran) && atomic_load(&t->mismatch))
            fail("op %d: a task's host function saw byte %d differ from the model", i,
                 atomic_load(&t->mismatch) - 1);
        if (atomic_load(&t->ran) && atomic_load(&t->bad))
            fail("op %d: inside a task, check %d failed", i, atomic_load(&t->bad));
        if (!Z.faulted && t->predicted && atomic_load(&t->ran) &&
            (((t->behaviour & (T_HOST_WRITE | T_HOST_CHECK)) &&
              (t->host_rc != DV_OK || t->dev == NULL)) ||
             ((t->behaviour & T_LAUNCH) && t->launch_rc != DV_OK)))
            fail("op %d: an _async task's own calls failed (host function %s, launch %s)", i,
                 dv_err_name(t->host_rc), dv_err_name(t->launch_rc));
        /* Exactly once either way, faults included (devactor.h). */
        if (atomic_load(&t->cleanups) != atomic_load(&t->cleanup_enqueued))
            fail("op %d: %d cleanups ran for %d host functions with one", i,
                 atomic_load(&t->cleanups), atomic_load(&t->cleanup_enqueued));
        free(t->want);
        free(t->wknown);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rd r = {data, size};
    bool trace = getenv("DV_FUZZ_TRACE") != NULL;
    memset(&Z, 0, sizeof(Z));
    Z.trace = trace;
    dv_error_clear();

    dv_actor_config cfg;
    decode_config(&r, &cfg);
    note("config: streams %u queue %u pool %d (%s) guard %d budget %d check %d sync %d shared %d "
         "delay %u direct %d devices %d",
         cfg.streams, cfg.queue_capacity, cfg.pool,
         cfg.pool_alias ? "aliases" : cfg.pool_initial_bytes ? "chunks" : "in place", cfg.guard,
         cfg.budget_bytes != 0, cfg.check_order, cfg.synchronous, cfg.shared_queue,
         cfg.sim_delay_max_us, cfg.direct_alloc, cfg.sim_devices);
    actor_start(0, &cfg);

    for (Z.op = 0; Z.op < MAX_OPS && r.n > 0; Z.op++) {
        if (Z.act[0].a == NULL)
            break;
        Z.err_valid = false;
        switch (u8(&r) % OP__COUNT) {
        case OP_ALLOC:
            op_alloc(&r, false);
            break;
        case OP_ALLOC_ASYNC:
            op_alloc(&r, true);
            break;
        case OP_RELEASE:
            op_release(&r);
            break;
        case OP_RETAIN:
            op_retain(&r);
            break;
        case OP_ACCESS:
            op_access(&r);
            break;
        case OP_HTOD:
            op_host(&r, C_HTOD);
            break;
        case OP_DTOH:
            op_host(&r, C_DTOH);
            break;
        case OP_MEMSET:
            op_host(&r, C_MEMSET);
            break;
        case OP_DTOD:
            op_dtod(&r);
            break;
        case OP_SYNC:
            op_sync(&r);
            break;
        case OP_FLUSH:
            op_flush(&r);
            break;
        case OP_WAIT:
            op_wait(&r);
            break;
        case OP_EVENT:
            op_event(&r);
            break;
        case OP_TASK:
            op_task(&r);
            break;
        case OP_LAUNCH:
            op_launch(&r);
            break;
        case OP_STALE:
            op_stale(&r);
            break;
        case OP_BAD:
            op_bad(&r);
            break;
        case OP_WORKER:
            op_worker(&r);
            break;
        case OP_JOIN:
            note("op %d: join the worker", Z.op);
            join_worker();
            job_finish_future();
            break;
        case OP_STATS:
            op_stats(&r);
            break;
        case OP_RESET:
            op_reset(&r);
            break;
        case OP_RECREATE:
            op_recreate(&r);
            break;
        case OP_PEER:
            op_peer(&r);
            break;
        case OP_FAULT:
            op_fault(&r);
            break;
        }
    }
    finish_input();
    return 0;
}
