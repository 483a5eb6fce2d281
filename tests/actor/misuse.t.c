/*
 * Misuse, as a table: for every public function of include/devactor.h
 * (and of include/devactor_sim.h, at the end), the bad inputs a caller can
 * give it -- NULL pointers, zero and absurd sizes, ranges that overflow,
 * stale handles (released, of an actor shut down or destroyed, from before
 * a reset), another actor's handles, kernels and events, random bits,
 * DV_REF_NULL, unknown streams, wrong access values, argument kinds and
 * sizes, too many arguments, futures in flight or never set up, calls
 * after dv_actor_shutdown, calls from a thread that must not wait, from
 * the wrong thread and from a child after fork(), and bad configurations
 * for dv_actor_create.
 *
 * Each row is one call and the dv_status the header promises for it.
 * Where the header is silent the row expects what a caller would (its
 * description ends in "[silent]").  Every row checks:
 *
 *   1. the call's status is the expected one;
 *   2. dv_last_error() holds that status, and its `call` names the
 *      operation (printed under each row as a diagnostic);
 *   3. nothing changed: each watched actor's refs_alive and
 *      bytes_outstanding are as before, a bystander block written by
 *      another thread at the start reads back exactly, a live handle of
 *      each actor still takes a memset and reads it back, no refused task
 *      ran its function, a refused _async call completed its future with
 *      its error, and a stream of each of two actors still waits on the
 *      other's event (a refused record must not count as posted).
 *
 * Functions that return no status (void, bool, a pointer, a string) have
 * rows that check the value and (3).
 *
 * Rows for behaviour the current code gets wrong are real assertions,
 * marked "# TODO known bug" (tap.h has no TODO directive: row_end prints
 * it, and a failing TODO row does not fail the program).  A TODO row that
 * passes says so in a diagnostic: the bug is fixed, drop the mark.
 *
 * Phases: the main table; then a table run while actor A's thread is held
 * in a task (pending handles, a future in flight); rows that need a thread
 * or a process of their own (fork, a task's context used from another
 * thread) run in a child and report through the exit status.
 */
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "devactor.h"
#include "devactor_sim.h"
#include "devactor_testing.h"
#include "tap.h"

/* The header's version as text, for dv_version. */
#define VERSION_STR2(x) #x
#define VERSION_STR(x)  VERSION_STR2(x)
#define VERSION_TEXT                                                                               \
    VERSION_STR(DV_VERSION_MAJOR)                                                                  \
    "." VERSION_STR(DV_VERSION_MINOR) "." VERSION_STR(DV_VERSION_PATCH)

extern char **environ;

#define STREAMS 4
#define NB      4096 /* bytes of every block the rows use */
#define BIG     (UINT64_C(64) << 20)
#define BUDGET  (UINT64_C(16) << 20)

/* Results a row's call makes up when it cannot give a dv_status. */
#define WRONG_VALUE   1001 /* a value row: not the value expected */
#define TASK_FAILED   1002 /* the task that should have made the inner call failed */
#define CHILD_FAILED  1003 /* the child could not be started or did not finish */
#define CHILD_SIGNAL  1100 /* + signal: the child died of it */
#define CHILD_DETAIL  1200 /* + -status: the child's dv_last_error() was wrong */
#define CHILD_TIMEOUT 1004

static const dv_dim3 G1 = {1, 1, 1}, B1 = {1, 1, 1}, B256 = {256, 1, 1};

/* ------------------------------------------------------------------------
 * The world the rows run in
 * ------------------------------------------------------------------------ */

static dv_actor *A;  /* the main actor: sim, 2 devices, device 0, strict, budget */
static dv_actor *B;  /* A's driver, device 1, stream-order checker on */
static dv_actor *RS; /* reset once the fixture is made: older handles are stale */
static dv_actor *SD; /* shut down (not destroyed): every post answers DV_ESHUTDOWN */
static dv_actor *XD; /* a driver of its own: another driver's handles and events */
static dv_actor *DD; /* destroyed during the set-up; its handles, kernel, event kept */

static dv_ref x, y;                                  /* A's operands (NB bytes) */
static dv_ref live;                                  /* A's, checked after every row */
static dv_ref by;                                    /* A's bystander, written by another thread */
static dv_ref bx;                                    /* B's operand */
static dv_ref blive;                                 /* B's, checked after every row */
static dv_ref rlive;                                 /* RS's, made after its reset */
static dv_ref released;                              /* A's, released once */
static dv_ref failed;                                /* A's, its allocation refused by the budget */
static dv_ref dead_h;                                /* DD's */
static dv_ref shut_h;                                /* SD's */
static dv_ref reset_h;                               /* RS's, from before the reset */
static dv_ref other_h;                               /* XD's */
static dv_ref junk = {UINT64_C(0xDEADBEEFCAFEF00D)}; /* random bits: a domain never opened */
static dv_ref junk_dom;                              /* A's domain, random slot and generation */
static dv_ref malformed = {UINT64_C(0x0000000100000001)}; /* domain 0 */
static dv_ref pend, pend_gone; /* held phase: pending; pending and released */

static dv_kernel *ka_empty, *ka_fill, *ka_spin; /* A's */
static dv_kernel *kb_empty, *kb_fill;           /* B's */
static dv_kernel *kreset_fill, *kshut, *kother, *kdead;

static dv_event *ea, *ea2;         /* A's, timing, recorded (the waiter's) */
static dv_event *ea_plain;         /* A's, no timing, recorded */
static dv_event *ea_never;         /* A's, timing, never recorded */
static dv_event *eb;               /* B's, timing, recorded (the waiter's) */
static dv_event *eb_victim;        /* B's, recorded: rows that refuse a record on it */
static dv_event *eb_victim2;       /* the same, for the held phase */
static dv_event *eother;           /* XD's, recorded */
static dv_event *eshut, *eshut2;   /* SD's, timing, recorded before the shutdown */
static dv_event *ereset, *ereset2; /* RS's, timing, recorded before the reset */
static dv_event *edestroyed;       /* A's, destroyed */
static dv_event *edead;            /* DD's: its actor destroyed */

static dv_future fut;     /* a fresh future for one row (FUT) */
static dv_future busy;    /* held phase: the task holding A, in flight */
static dv_future never;   /* set up, never posted */
static dv_future garbage; /* never set up: bytes 0x5A */
static dv_future done_f;  /* complete */

static dv_task_ctx stale_ctx; /* a copy of a task's context, after the task returned */

static uint8_t host[NB], sink[NB], pattern[NB];
static dv_ref out;
static dv_kernel *kout;
static dv_event *eout;
static float ms;
static dv_ref_info info;
static dv_actor_stats stats;
static dv_memory_stats mstats;
static dv_memory_usage usage[4];

/* For dv_actor_resources: a visit that changes nothing. */
static int visit_nothing(struct dv_resource *top, void *user)
{
    (void)top;
    (void)user;
    return DV_OK;
}

static dv_actor_health health;
static dv_error_detail hz;
static dv_actor *aout;
static uint64_t scratch_ptr;

/* ------------------------------------------------------------------------
 * Rows
 * ------------------------------------------------------------------------ */

enum { ROW_VALUE = 1 };

static bool counting = true; /* the first pass only counts the rows (plan) */
static int nrows;
static bool held;          /* A's thread is held: A is not checked */
static bool waiter_broken; /* the waiter hangs: its check is off from then on */

/* What the current row is. */
static const char *row_fn, *row_what, *row_todo;
static int row_want;
static unsigned row_flags;
/* Set by a row's call: the detail to check instead of the calling
 * thread's (an inner call made on another thread), or none to check (a
 * child checked its own); a refused future; a check of its own. */
static const dv_error_detail *detail_from;
static bool detail_checked;
static dv_future *fut_used;
static char extra_fail[200];
static char child_err[1024]; /* the start of a child's stderr, shown under its row */
static size_t child_err_len;

static struct fn_count {
    const char *fn;
    int rows;
} counts[96];
static int ncounts;

/* What each function's failure detail must name ('|': any of these). */
static const struct {
    const char *fn, *words;
} op_words[] = {
    {"dv_alloc", "alloc"},
    {"dv_alloc_wait", "alloc"},
    {"dv_copy_htod", "htod|host->device"},
    {"dv_copy_dtoh", "dtoh|device->host"},
    {"dv_copy_dtod", "dtod|device->device|peer"},
    {"dv_memset", "memset"},
    {"dv_sync", "sync"},
    {"dv_flush", "flush"},
    {"dv_actor_stats_get", "stat"},
    {"dv_actor_reset", "reset"},
    {"dv_actor_get", "actor_get"},
    {"dv_actor_create", "actor_create|open|ctx_retain|log_sink"},
    {"dv_actor_shutdown", "shutdown"},
    {"dv_actor_destroy", "destroy|shutdown"},
    {"dv_actor_health_get", "health"},
    {"dv_memory_stats_get", "memory_stats|statistics"},
    {"dv_memory_reset_peaks", "memory_reset_peaks|statistics"},
    {"dv_memory_usage_get", "memory_usage|memory_stats|statistics"},
    {"dv_memory_snapshot", "memory_snapshot|statistics"},
    {"dv_actor_resources", "actor_resources|statistics"},
    {"dv_actor_config_parse", "config"},
    {"dv_actor_last_hazard", "last_hazard"},
    {"dv_kernel_get", "kernel_get|module_load|func_get"},
    {"dv_launch", "launch"},
    {"dv_task", "task"},
    {"dv_task_launch", "task_launch|launch"},
    {"dv_task_host_fn", "host_fn"},
    {"dv_task_host_fn_cleanup", "host_fn"},
    {"dv_task_scratch", "scratch"},
    {"dv_check_host_access", "host_access|host access"},
    {"dv_order_export", "order_export"},
    {"dv_order_adopt", "order_adopt"},
    {"dv_event_create", "event_create|event create"},
    {"dv_event_destroy", "event_destroy|event destroy"},
    {"dv_event_record", "event_record|event record"},
    {"dv_stream_wait_event", "stream_wait_event|stream wait event"},
    {"dv_event_sync", "event_sync|event sync"},
    {"dv_event_query", "event_query|event query"},
    {"dv_event_elapsed", "event_elapsed|event elapsed"},
    {"dv_ref_access", "ref_access"},
    {"dv_ref_try_access", "ref_try_access"},
    {"dv_ref_retain", "ref_retain"},
    {"dv_ref_release", "ref_release"},
    {"dv_future_wait", "future_wait"},
    {"dv_future_wait_ordered", "future_wait_ordered"},
    {"dv_future_wait_for", "future_wait_for"},
    {"dv_sim_inject", "sim_inject"},
    {"dv_sim_fail_alloc", "sim_fail_alloc"},
    {"dv_sim_call_count", "sim_call_count"},
    {"dv_sim_poison", "sim_poison"},
    {"dv_sim_poison_at", "sim_poison_at"},
    {"dv_host_alloc", "host_alloc|host alloc"},
    {"dv_host_free", "host_free|host free"},
    {"dv_host_register", "host_register|host register"},
    {"dv_host_unregister", "host_unregister|host unregister"},
};

/* The words the detail of fn's failure must contain one of (fn without
 * its _async), or NULL when the table has none. */
static const char *words_of(const char *fn)
{
    char base[64];
    snprintf(base, sizeof(base), "%s", fn);
    size_t n = strlen(base);
    if (n > 6 && strcmp(base + n - 6, "_async") == 0)
        base[n - 6] = '\0';
    for (size_t i = 0; i < sizeof(op_words) / sizeof(op_words[0]); i++)
        if (strcmp(op_words[i].fn, base) == 0)
            return op_words[i].words;
    return NULL;
}

static bool names_op(const char *words, const char *call)
{
    char w[64];
    for (const char *p = words; *p != '\0';) {
        size_t n = strcspn(p, "|");
        snprintf(w, sizeof(w), "%.*s", (int)n, p);
        if (strstr(call, w) != NULL)
            return true;
        p += n + (p[n] == '|');
    }
    return false;
}

/* ---- what must not change ---------------------------------------------- */

static dv_actor **const watched[] = {&A, &B, &RS, &XD};
#define NWATCHED (sizeof(watched) / sizeof(watched[0]))

typedef struct world {
    int rc[NWATCHED];
    uint64_t refs[NWATCHED], bytes[NWATCHED];
} world;

static void world_take(world *w)
{
    for (size_t i = 0; i < NWATCHED; i++) {
        dv_actor_stats st;
        memset(&st, 0, sizeof(st));
        w->rc[i] = held && *watched[i] == A ? DV_OK : dv_actor_stats_get(*watched[i], &st);
        w->refs[i] = st.refs_alive;
        w->bytes[i] = st.bytes_outstanding;
    }
}

static atomic_int task_runs; /* count_task's */

static int count_task(const dv_task_ctx *ctx, void *user)
{
    (void)ctx;
    (void)user;
    atomic_fetch_add(&task_runs, 1);
    return DV_OK;
}

/* A handle of actor a still works: a memset, read back. */
static bool live_works(dv_actor *a, dv_ref r, uint8_t v)
{
    static uint8_t back[NB];
    if (dv_memset(a, r, 0, v, NB, 0) != DV_OK || dv_copy_dtoh(a, back, r, 0, NB, 1) != DV_OK)
        return false;
    for (int i = 0; i < NB; i++)
        if (back[i] != v)
            return false;
    return true;
}

static bool bystander_intact(void)
{
    static uint8_t back[NB];
    return dv_copy_dtoh(A, back, by, 0, NB, 2) == DV_OK && memcmp(back, pattern, NB) == 0;
}

/* The waiter: a thread of its own makes a stream of A wait on B's event
 * eb and a stream of B on A's ea.  Both records were ordered long ago, so
 * each call returns at once -- unless a refused record was counted as
 * posted, when the wait for it never ends. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int asked, answered;
    bool quit;
    int rc;
} W = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, false, 0};

static void *waiter_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&W.mu);
    for (;;) {
        while (W.asked == W.answered && !W.quit)
            pthread_cond_wait(&W.cv, &W.mu);
        if (W.quit)
            break;
        int n = W.asked;
        bool a_held = held; /* (written before the ask, under W.mu) */
        pthread_mutex_unlock(&W.mu);
        /* A held takes no wait (one on another actor's event returns once
         * the waiting actor took it): B's side alone then. */
        int rc = a_held ? DV_OK : dv_stream_wait_event(A, 3, eb);
        if (rc == DV_OK)
            rc = dv_stream_wait_event(B, 3, ea);
        pthread_mutex_lock(&W.mu);
        W.rc = rc;
        W.answered = n;
        pthread_cond_broadcast(&W.cv);
    }
    pthread_mutex_unlock(&W.mu);
    return NULL;
}

static struct timespec deadline_in(long ms_from_now)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += ms_from_now / 1000;
    t.tv_nsec += (ms_from_now % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* DV_OK, the waiter's error, or CHILD_TIMEOUT when it hangs. */
static int waiter_check(void)
{
    if (waiter_broken)
        return DV_OK;
    pthread_mutex_lock(&W.mu);
    int n = ++W.asked;
    pthread_cond_broadcast(&W.cv);
    struct timespec t = deadline_in(5000);
    int rc = DV_OK;
    while (W.answered != n && rc == DV_OK)
        rc = pthread_cond_timedwait(&W.cv, &W.mu, &t);
    int got = W.answered == n ? W.rc : CHILD_TIMEOUT;
    pthread_mutex_unlock(&W.mu);
    if (got == CHILD_TIMEOUT)
        waiter_broken = true;
    return got;
}

/* ---- a row -------------------------------------------------------------- */

static world before;
static int runs_before;

static bool row_begin(const char *fn, int want, const char *what, const char *todo, unsigned flags)
{
    nrows++;
    if (counting)
        return false;
    int i = 0;
    while (i < ncounts && strcmp(counts[i].fn, fn) != 0)
        i++;
    if (i == ncounts && ncounts < (int)(sizeof(counts) / sizeof(counts[0])))
        counts[ncounts++] = (struct fn_count){fn, 0};
    if (i < ncounts)
        counts[i].rows++;
    row_fn = fn;
    row_want = want;
    row_what = what;
    row_todo = todo;
    row_flags = flags;
    detail_from = NULL;
    detail_checked = false;
    fut_used = NULL;
    extra_fail[0] = '\0';
    child_err[0] = '\0';
    world_take(&before);
    runs_before = atomic_load(&task_runs);
    dv_error_clear();
    return true;
}

static void row_end(int got)
{
    const dv_error_detail d = detail_from != NULL ? *detail_from : *dv_last_error();
    const bool value = row_flags & ROW_VALUE;
    char why[512] = "";
    size_t w = 0;
#define WHY(...)                                                                                   \
    (w += (size_t)snprintf(why + w, w < sizeof(why) ? sizeof(why) - w : 0, __VA_ARGS__))

    /* 1. the status */
    bool ok1 = got == row_want;
    if (!ok1) {
        if (value)
            WHY(" [the value is wrong]");
        else if (got >= CHILD_SIGNAL && got < CHILD_DETAIL)
            WHY(" [the child died of signal %d, wanted %s]", got - CHILD_SIGNAL,
                dv_err_name(row_want));
        else if (got >= CHILD_DETAIL)
            WHY(" [the child got %s, its dv_last_error() was wrong; wanted %s]",
                dv_err_name(-(got - CHILD_DETAIL)), dv_err_name(row_want));
        else
            WHY(" [got %s (%d), wanted %s]", got > 1000 ? "no status" : dv_err_name(got), got,
                dv_err_name(row_want));
    }
    /* 2. the detail */
    bool ok2 = true;
    if (!value && !detail_checked) {
        if (row_want != DV_OK) {
            const char *words = words_of(row_fn);
            ok2 = d.status == row_want && d.call != NULL && d.call[0] != '\0' &&
                  (words == NULL || names_op(words, d.call));
            if (!ok2)
                WHY(" [dv_last_error(): status %s, call \"%s\", which should name %s]",
                    dv_err_name(d.status), d.call ? d.call : "(null)", words ? words : "it");
        } else if (d.status != DV_OK) {
            ok2 = false;
            WHY(" [a success left dv_last_error() at %s]", dv_err_name(d.status));
        }
    }
    /* 3. nothing changed */
    bool ok3 = true;
    if (fut_used != NULL && got != DV_OK && got < 1000 &&
        (!dv_future_done(fut_used) || fut_used->status != got)) {
        ok3 = false;
        WHY(" [refused, but its future is %s]",
            dv_future_done(fut_used) ? "complete with another status" : "not complete");
    }
    if (extra_fail[0] != '\0') {
        ok3 = false;
        WHY(" [%s]", extra_fail);
    }
    world after;
    world_take(&after);
    for (size_t i = 0; i < NWATCHED; i++) {
        if (after.rc[i] != DV_OK || after.refs[i] != before.refs[i] ||
            after.bytes[i] != before.bytes[i]) {
            ok3 = false;
            WHY(" [actor %zu: refs %llu -> %llu, bytes %llu -> %llu, %s]", i,
                (unsigned long long)before.refs[i], (unsigned long long)after.refs[i],
                (unsigned long long)before.bytes[i], (unsigned long long)after.bytes[i],
                dv_err_name(after.rc[i]));
        }
    }
    uint8_t v = (uint8_t)(tap_run + 1);
    if (!held && !bystander_intact()) {
        ok3 = false;
        WHY(" [the bystander block changed]");
    }
    if (!held && !live_works(A, live, v)) {
        ok3 = false;
        WHY(" [A's live handle failed: %s]", dv_last_error()->message);
    }
    if (!live_works(B, blive, v) || !live_works(RS, rlive, v)) {
        ok3 = false;
        WHY(" [a live handle of B or RS failed: %s]", dv_last_error()->message);
    }
    if (atomic_load(&task_runs) != runs_before) {
        ok3 = false;
        WHY(" [a refused task ran its function]");
    }
    int wrc = waiter_check();
    if (wrc != DV_OK) {
        ok3 = false;
        WHY(" [a cross-actor stream wait %s]",
            wrc == CHILD_TIMEOUT ? "hangs (its event counts a record never posted)"
                                 : dv_err_name(wrc));
    }
#undef WHY

    bool pass = ok1 && ok2 && ok3;
    tap_run++;
    if (!pass && row_todo == NULL)
        tap_failed++;
    printf("%sok %d - %s: %s -> %s%s\n", pass ? "" : "not ", tap_run, row_fn, row_what,
           value ? "as documented" : dv_err_name(row_want), row_todo ? " # TODO known bug" : "");
    if (!value && !detail_checked && got != DV_OK && got < 1000)
        diag("   call \"%s\": %s", d.call ? d.call : "(null)", d.message);
    /* The first three lines of a child's stderr. */
    const char *line = child_err;
    for (int lines = 0; *line != '\0' && lines < 3;) {
        size_t n = strcspn(line, "\n");
        if (n > 0) {
            diag("   (child's stderr) %.*s", (int)n, line);
            lines++;
        }
        line += n + (line[n] == '\n');
    }
    if (!pass)
        diag("   %s", why);
    if (row_todo != NULL)
        diag("   TODO: %s%s", row_todo, pass ? " -- it passes now: drop the TODO mark" : "");
    fflush(stdout);
}

#define ROW(fn, want, what, call)                                                                  \
    do {                                                                                           \
        if (row_begin(fn, want, what, NULL, 0))                                                    \
            row_end(call);                                                                         \
    } while (0)
#define ROW_TODO(why, fn, want, what, call)                                                        \
    do {                                                                                           \
        if (row_begin(fn, want, what, why, 0))                                                     \
            row_end(call);                                                                         \
    } while (0)
#define VAL(fn, what, cond)                                                                        \
    do {                                                                                           \
        if (row_begin(fn, DV_OK, what, NULL, ROW_VALUE))                                           \
            row_end((cond) ? DV_OK : WRONG_VALUE);                                                 \
    } while (0)
#define VAL_TODO(why, fn, what, cond)                                                              \
    do {                                                                                           \
        if (row_begin(fn, DV_OK, what, why, ROW_VALUE))                                            \
            row_end((cond) ? DV_OK : WRONG_VALUE);                                                 \
    } while (0)

/* ------------------------------------------------------------------------
 * Helpers the rows call
 * ------------------------------------------------------------------------ */

/* A fresh future for an _async row; a refusal must complete it. */
#define FUT fresh()
static dv_future *fresh(void)
{
    dv_future_init(&fut, 0);
    fut_used = &fut;
    return &fut;
}

/* An _async call: refused, its status (the future checked by row_end);
 * posted, the operation's status from its future. */
static int settle(int rc)
{
    if (rc != DV_OK || fut_used == NULL)
        return rc;
    return dv_future_wait(fut_used);
}

/* Allowed NULLs: a call that succeeds makes a handle, released again. */
static int release_out(int rc)
{
    if (rc == DV_OK && out.bits != 0)
        (void)dv_ref_release(out);
    if (rc == DV_OK && fut_used != NULL && fut_used->ref.bits != 0 &&
        fut_used->ref.bits != out.bits)
        (void)dv_ref_release(fut_used->ref);
    return rc;
}

/* dv_actor_create: an actor it makes is destroyed again at once (the row
 * checks the call's status and detail, not the actor). */
static int create(const dv_actor_config *config)
{
    aout = NULL;
    int rc = dv_actor_create(config, &aout);
    if (aout != NULL) {
        dv_error_detail d = *dv_last_error();
        dv_actor_destroy(aout);
        *dv__detail() = d; /* the detail of the call under test */
    }
    return rc;
}

/* A small sim configuration with one field set. */
enum cfg_field {
    CFG_BACKEND,
    CFG_STREAMS,
    CFG_SIZE,
    CFG_QUEUE,
    CFG_DEVICE,
    CFG_SIM_DEVICES,
    CFG_SIM_MEMORY,
    CFG_LOG_PATH, /* a path that cannot be opened */
    CFG_ON_A,     /* A's driver (2 devices: A serves 0, B serves 1), this device */
};
static dv_actor_config cfg_store;
/* A configuration in a static store (dv_actor_config_parse may write it). */
static const dv_actor_config *cfg(enum cfg_field field, uint64_t value)
{
    dv_actor_config *c = &cfg_store;
    dv_actor_config_init(c);
    c->backend = DV_BACKEND_SIM;
    c->sim_memory_bytes = 8 << 20;
    c->pool = false;
    switch (field) {
    case CFG_BACKEND:
        c->backend = (dv_backend)value;
        break;
    case CFG_STREAMS:
        c->streams = (uint32_t)value;
        break;
    case CFG_SIZE:
        c->size = (uint32_t)value;
        break;
    case CFG_QUEUE:
        c->queue_capacity = (uint32_t)value;
        break;
    case CFG_DEVICE:
        c->device = (int)value;
        break;
    case CFG_SIM_DEVICES:
        c->sim_devices = (int)value;
        break;
    case CFG_SIM_MEMORY:
        c->sim_memory_bytes = value;
        break;
    case CFG_LOG_PATH:
        c->log_path = "/nonexistent-dir/devactor-misuse.csv";
        break;
    case CFG_ON_A:
        c->driver = dv__actor_driver(A);
        c->device = (int)value;
        break;
    }
    return c;
}

/* Kernel arguments. */
static dv_arg av[DV_LAUNCH_MAX_ARGS + 1];
/* fill_u32(first, 7, NB / 4): first replaces the handle argument. */
static const dv_arg *fill(dv_arg first)
{
    av[0] = first;
    av[1] = dv_arg_u32(7);
    av[2] = dv_arg_u64(NB / 4);
    return av;
}
static dv_arg ref_access(dv_ref r, unsigned access)
{
    dv_arg a = dv_arg_ref(r, DV_READ, 0);
    a.access = (uint8_t)access;
    return a;
}
static dv_arg of_kind(unsigned kind)
{
    dv_arg a = dv_arg_ref(x, DV_WRITE, 0);
    a.kind = (uint8_t)kind;
    return a;
}
static dv_arg value_of_size(uint16_t size)
{
    dv_arg a = dv_arg_u64(0);
    a.size = size;
    return a;
}
/* fill_u32's arguments with the second replaced. */
static const dv_arg *fill_second(dv_arg second)
{
    fill(dv_arg_ref(x, DV_WRITE, 0));
    av[1] = second;
    return av;
}
static const uint8_t some_bytes[DV_ARG_MAX_BYTES + 1];
/* DV_LAUNCH_MAX_ARGS + 1 plain values. */
static const dv_arg *too_many(void)
{
    for (int i = 0; i <= DV_LAUNCH_MAX_ARGS; i++)
        av[i] = dv_arg_u64(0);
    return av;
}
static const dv_arg *one(dv_arg a)
{
    av[0] = a;
    return av;
}
static uint64_t device_ptr_of(dv_ref r)
{
    dv_ref_info i;
    return dv_ref_access(r, &i) == DV_OK ? i.ptr : 0;
}

/* A refused record must leave the event as it was: a stream of the other
 * actor still waits on it (a record counted but never posted would be
 * waited for forever).  The wait runs on a thread of its own, for at most
 * a second; a thread that hangs is joined once the event's actor stops. */
static pthread_t probes[8];
static int nprobes;
struct probe {
    dv_actor *a;
    dv_event *e;
    atomic_int done;
    int rc;
};
static struct probe probe_slots[8];

static void *probe_main(void *arg)
{
    struct probe *p = arg;
    p->rc = dv_stream_wait_event(p->a, 3, p->e);
    atomic_store(&p->done, 1);
    return NULL;
}

/* Probes whose waiter was held: looked at once it is let go. */
static int held_probes_from = -1;

static int refused_record(int rc, dv_actor *waiter, dv_event *e)
{
    dv_error_detail d = *dv_last_error();
    if (nprobes < 8) {
        struct probe *p = &probe_slots[nprobes];
        *p = (struct probe){.a = waiter, .e = e};
        if (pthread_create(&probes[nprobes], NULL, probe_main, p) == 0) {
            nprobes++;
            if (held && waiter == A) {
                /* The wait returns once A took it: after the held phase. */
                if (held_probes_from < 0)
                    held_probes_from = nprobes - 1;
                *dv__detail() = d;
                return rc;
            }
            for (int i = 0; i < 1000 && !atomic_load(&p->done); i++) {
                struct timespec t = {0, 1000000};
                nanosleep(&t, NULL);
            }
            if (!atomic_load(&p->done))
                snprintf(extra_fail, sizeof(extra_fail),
                         "a stream of another actor waiting on the event hangs: the refused "
                         "record was counted as posted");
            else if (p->rc != DV_OK)
                snprintf(extra_fail, sizeof(extra_fail), "a wait on the event answers %s",
                         dv_err_name(p->rc));
        }
    }
    *dv__detail() = d;
    return rc;
}

/* ---- calls made inside a task, or in a host function ------------------- */

enum probe_call {
    P_LAUNCH_NULL_KERNEL,
    P_LAUNCH_KERNEL_OF_B,
    P_LAUNCH_KERNEL_OF_DESTROYED,
    P_LAUNCH_TOO_MANY,
    P_LAUNCH_NULL_ARGS,
    P_LAUNCH_REF_NULL,
    P_LAUNCH_REF_RELEASED,
    P_LAUNCH_REF_OF_B,
    P_LAUNCH_REF_OF_DESTROYED,
    P_LAUNCH_ACCESS_0,
    P_LAUNCH_KIND_7,
    P_LAUNCH_OFFSET_END,
    P_LAUNCH_UNDECLARED,
    P_LAUNCH_WRITE_DECLARED_READ,
    P_LAUNCH_GRID_0,
    P_LAUNCH_COUNT,
    P_LAUNCH_BYTES_NULL,
    P_LAUNCH_BLOCK_2048,
    P_HOST_FN_NULL,
    P_CLEANUP_NULL,
    P_SCRATCH_NULL_PTR,
    P_SCRATCH_0,
    P_SCRATCH_ABSURD,
    P_SCRATCH_NINTH,
    P_SIM_MEMORY_0,
    P_SIM_MEMORY_ABSURD,
    P_SIM_MEMORY_PAST_END,
    P_SIM_ACCESS_NONE,
    P_SIM_ACCESS_ZERO_BYTES,
    P_BLOCK_SYNC,
    P_BLOCK_FLUSH,
    P_BLOCK_MEMSET,
    P_BLOCK_DTOD,
    P_BLOCK_HTOD_PAGEABLE,
    P_BLOCK_DTOH_PAGEABLE,
    P_BLOCK_STATS,
    P_BLOCK_MEMSTATS,
    P_BLOCK_SNAPSHOT,
    P_BLOCK_RESOURCES,
    P_BLOCK_KERNEL_GET,
    P_BLOCK_EVENT_SYNC,
    P_BLOCK_SHUTDOWN,
    P_BLOCK_DESTROY,
    P_BLOCK_DESTROY_OTHER,
    P_BLOCK_RESET,
    P_BLOCK_REF_ACCESS_PENDING,
    P_BLOCK_FUTURE_WAIT,
    P_BLOCK_HOST_ALLOC,
    P_BLOCK_HOST_FREE,
    P_BLOCK_HOST_REGISTER,
    P_BLOCK_HOST_UNREGISTER,
    P_BLOCK_ALLOC_WAIT,
};

static int inner_rc;
static dv_future task_fut; /* posted inside a task: it outlives the task */
static dv_error_detail inner_detail;

static void no_op(void *arg)
{
    (void)arg;
}

static int probe_task(const dv_task_ctx *ctx, void *user)
{
    dv_actor *a = ctx->actor;
    uint64_t p = 0;
    void *mem = NULL;
    int rc = DV_OK;
    switch ((enum probe_call)(intptr_t)user) {
    case P_LAUNCH_NULL_KERNEL:
        rc = dv_task_launch(ctx, NULL, G1, B1, 0, NULL, 0);
        break;
    case P_LAUNCH_KERNEL_OF_B:
        rc = dv_task_launch(ctx, kb_empty, G1, B1, 0, NULL, 0);
        break;
    case P_LAUNCH_KERNEL_OF_DESTROYED:
        rc = dv_task_launch(ctx, kdead, G1, B1, 0, NULL, 0);
        break;
    case P_LAUNCH_TOO_MANY:
        rc = dv_task_launch(ctx, ka_empty, G1, B1, 0, too_many(), DV_LAUNCH_MAX_ARGS + 1);
        break;
    case P_LAUNCH_NULL_ARGS:
        rc = dv_task_launch(ctx, ka_fill, G1, B256, 0, NULL, 3);
        break;
    case P_LAUNCH_REF_NULL:
        rc = dv_task_launch(ctx, ka_fill, G1, B256, 0, fill(dv_arg_ref(DV_REF_NULL, DV_WRITE, 0)),
                            3);
        break;
    case P_LAUNCH_REF_RELEASED:
        rc = dv_task_launch(ctx, ka_fill, G1, B256, 0, fill(dv_arg_ref(released, DV_WRITE, 0)), 3);
        break;
    case P_LAUNCH_REF_OF_B:
        rc = dv_task_launch(ctx, ka_fill, G1, B256, 0, fill(dv_arg_ref(bx, DV_WRITE, 0)), 3);
        break;
    case P_LAUNCH_REF_OF_DESTROYED:
        rc = dv_task_launch(ctx, ka_fill, G1, B256, 0, fill(dv_arg_ref(dead_h, DV_WRITE, 0)), 3);
        break;
    case P_LAUNCH_ACCESS_0:
        rc = dv_task_launch(ctx, ka_fill, G1, B256, 0, fill(ref_access(x, 0)), 3);
        break;
    case P_LAUNCH_KIND_7:
        rc = dv_task_launch(ctx, ka_fill, G1, B256, 0, fill(of_kind(7)), 3);
        break;
    case P_LAUNCH_OFFSET_END:
        rc = dv_task_launch(ctx, ka_fill, G1, B256, 0, fill(dv_arg_ref(x, DV_WRITE, NB)), 3);
        break;
    case P_LAUNCH_UNDECLARED: /* the task declares x only */
        rc = dv_task_launch(ctx, ka_fill, G1, B256, 0, fill(dv_arg_ref(y, DV_WRITE, 0)), 3);
        break;
    case P_LAUNCH_WRITE_DECLARED_READ: /* x is declared DV_READ */
        rc = dv_task_launch(ctx, ka_fill, G1, B256, 0, fill(dv_arg_ref(x, DV_WRITE, 0)), 3);
        break;
    case P_LAUNCH_COUNT:
        rc = dv_task_launch(ctx, ka_fill, G1, B256, 0, fill(dv_arg_ref(x, DV_WRITE, 0)), 2);
        break;
    case P_LAUNCH_BYTES_NULL:
        rc = dv_task_launch(ctx, ka_fill, G1, B256, 0, fill_second(dv_arg_bytes(NULL, 4)), 3);
        break;
    case P_LAUNCH_GRID_0:
        rc = dv_task_launch(ctx, ka_empty, (dv_dim3){0, 1, 1}, B1, 0, NULL, 0);
        break;
    case P_LAUNCH_BLOCK_2048:
        rc = dv_task_launch(ctx, ka_empty, G1, (dv_dim3){2048, 1, 1}, 0, NULL, 0);
        break;
    case P_HOST_FN_NULL:
        rc = dv_task_host_fn(ctx, NULL, NULL);
        break;
    case P_CLEANUP_NULL:
        rc = dv_task_host_fn_cleanup(ctx, no_op, NULL, NULL);
        break;
    case P_SCRATCH_NULL_PTR:
        rc = dv_task_scratch(ctx, 64, NULL);
        break;
    case P_SCRATCH_0:
        rc = dv_task_scratch(ctx, 0, &p);
        break;
    case P_SCRATCH_ABSURD:
        rc = dv_task_scratch(ctx, UINT64_MAX, &p);
        break;
    case P_SCRATCH_NINTH:
        for (int i = 0; i < DV_TASK_SCRATCH_MAX && rc == DV_OK; i++)
            rc = dv_task_scratch(ctx, 256, &p);
        rc = rc != DV_OK ? TASK_FAILED : dv_task_scratch(ctx, 256, &p);
        break;
    case P_SIM_MEMORY_0:
        mem = dv_task_sim_access(ctx, 0, 16, DV_READ);
        rc = mem == NULL ? DV_OK : WRONG_VALUE;
        break;
    case P_SIM_MEMORY_ABSURD:
        mem = dv_task_sim_access(ctx, ctx->arg[0], UINT64_MAX, DV_READ);
        rc = mem == NULL ? DV_OK : WRONG_VALUE;
        break;
    case P_SIM_MEMORY_PAST_END:
        mem = dv_task_sim_access(ctx, UINT64_MAX - 8, 16, DV_READ);
        rc = mem == NULL ? DV_OK : WRONG_VALUE;
        break;
    case P_SIM_ACCESS_NONE:
        mem = dv_task_sim_access(ctx, ctx->arg[0], 16, (dv_arg_access)0);
        rc = mem == NULL && dv_last_error()->status == DV_EINVAL ? DV_OK : WRONG_VALUE;
        break;
    case P_SIM_ACCESS_ZERO_BYTES:
        mem = dv_task_sim_access(ctx, ctx->arg[0], 0, DV_READ);
        rc = mem == NULL && dv_last_error()->status == DV_EINVAL ? DV_OK : WRONG_VALUE;
        break;
    case P_BLOCK_SYNC:
        rc = dv_sync(a, 0);
        break;
    case P_BLOCK_FLUSH:
        rc = dv_flush(a);
        break;
    case P_BLOCK_MEMSET:
        rc = dv_memset(a, x, 0, 1, 16, 0);
        break;
    case P_BLOCK_DTOD:
        rc = dv_copy_dtod(a, x, 0, y, 0, 16, 0);
        break;
    case P_BLOCK_HTOD_PAGEABLE:
        rc = dv_copy_htod(a, x, 0, host, 16, 0);
        break;
    case P_BLOCK_DTOH_PAGEABLE:
        rc = dv_copy_dtoh(a, sink, x, 0, 16, 0);
        break;
    case P_BLOCK_STATS:
        rc = dv_actor_stats_get(a, &stats);
        break;
    case P_BLOCK_MEMSTATS:
        rc = dv_memory_stats_get(a, &mstats);
        break;
    case P_BLOCK_SNAPSHOT:
        rc = dv_memory_snapshot(a, "/dev/null");
        break;
    case P_BLOCK_RESOURCES:
        rc = dv_actor_resources(a, visit_nothing, NULL);
        break;
    case P_BLOCK_KERNEL_GET:
        rc = dv_kernel_get(a, NULL, 0, "empty", &kout);
        break;
    case P_BLOCK_EVENT_SYNC:
        rc = dv_event_sync(ea);
        break;
    case P_BLOCK_SHUTDOWN:
        rc = dv_actor_shutdown(a);
        break;
    case P_BLOCK_DESTROY:
        rc = dv_actor_destroy(a);
        break;
    case P_BLOCK_DESTROY_OTHER:
        rc = dv_actor_destroy(B);
        break;
    case P_BLOCK_RESET:
        rc = dv_actor_reset(a);
        break;
    case P_BLOCK_REF_ACCESS_PENDING: { /* pending until this task returns */
        dv_ref r;
        rc = dv_alloc(a, 64, 0, "in a task", &r) != DV_OK ? TASK_FAILED : dv_ref_access(r, &info);
        dv_error_detail d = *dv_last_error();
        (void)dv_ref_release(r);
        *dv__detail() = d;
        break;
    }
    case P_BLOCK_HOST_ALLOC: {
        void *got = NULL;
        rc = dv_host_alloc(a, 4096, &got);
        break;
    }
    case P_BLOCK_HOST_FREE:
        rc = dv_host_free(a, host);
        break;
    case P_BLOCK_HOST_REGISTER:
        rc = dv_host_register(a, host, sizeof(host));
        break;
    case P_BLOCK_HOST_UNREGISTER:
        rc = dv_host_unregister(a, host);
        break;
    case P_BLOCK_ALLOC_WAIT: {
        dv_ref got = DV_REF_NULL;
        rc = dv_alloc_wait(a, 16, 0, "t", 1000000u, &got);
        if (got.bits != 0) /* it must not have allocated */
            rc = WRONG_VALUE;
        break;
    }
    case P_BLOCK_FUTURE_WAIT: /* the sync comes after this task */
        dv_future_init(&task_fut, 0);
        rc = dv_sync_async(a, 1, &task_fut) != DV_OK ? TASK_FAILED : dv_future_wait(&task_fut);
        break;
    }
    inner_rc = rc;
    inner_detail = *dv_last_error();
    return DV_OK;
}

/* The call `which` made inside a task on A (with x as its one argument,
 * so ctx->arg[0] is x's address): its status, and its detail for row_end. */
static int in_task(enum probe_call which)
{
    inner_rc = TASK_FAILED;
    memset(&inner_detail, 0, sizeof(inner_detail));
    dv_arg arg = dv_arg_ref(x, DV_READ, 0);
    int rc = dv_task(A, probe_task, (void *)(intptr_t)which, 0, &arg, 1);
    /* (A task whose launch was refused as a hazard answers the hazard.) */
    if (rc != DV_OK && !(rc == DV_EHAZARD && inner_rc == DV_EHAZARD))
        return TASK_FAILED;
    detail_from = &inner_detail;
    return inner_rc;
}

/* A blocking call in a host function (a thread of the driver). */
static int host_rc;
static dv_error_detail host_detail;

static void host_blocking(void *arg)
{
    (void)arg;
    host_rc = dv_sync(A, 1);
    host_detail = *dv_last_error();
}

static int host_task(const dv_task_ctx *ctx, void *user)
{
    (void)user;
    return dv_task_host_fn(ctx, host_blocking, NULL);
}

static int in_host_fn(void)
{
    host_rc = TASK_FAILED;
    /* The blocking form returns once the stream ran the host function. */
    if (dv_task(A, host_task, NULL, 0, NULL, 0) != DV_OK)
        return TASK_FAILED;
    detail_from = &host_detail;
    return host_rc;
}

/* ---- children ----------------------------------------------------------- */

static void drain(int fd)
{
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
        size_t keep = sizeof(child_err) - 1 - child_err_len;
        if (keep > (size_t)n)
            keep = (size_t)n;
        memcpy(child_err + child_err_len, buf, keep);
        child_err_len += keep;
        child_err[child_err_len] = '\0';
    }
}

/* A pipe for a child's stderr, closed on exec in this process. */
static bool stderr_pipe(int fds[2])
{
    if (pipe(fds) != 0)
        return false;
    (void)fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    (void)fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    return true;
}

/* What a child's exit status says: a status, or one of CHILD_*.  errfd
 * is the read end of its stderr (closed here). */
static int child_result(pid_t pid, int errfd)
{
    int status = 0;
    child_err_len = 0;
    child_err[0] = '\0';
    (void)fcntl(errfd, F_SETFL, O_NONBLOCK);
    for (int i = 0; i < 30000; i++) { /* 30 s */
        drain(errfd);
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid) {
            drain(errfd);
            close(errfd);
            detail_checked = true;
            if (WIFSIGNALED(status))
                return CHILD_SIGNAL + WTERMSIG(status);
            int code = WEXITSTATUS(status);
            if (code >= 64 && code < 128)
                return CHILD_DETAIL + (code - 64);
            return code < 64 ? -code : CHILD_FAILED;
        }
        if (got < 0)
            break;
        struct timespec t = {0, 1000000};
        nanosleep(&t, NULL);
    }
    close(errfd);
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return CHILD_TIMEOUT;
}

/* Exit status of a child for rc: -rc, or 64 + -rc when the detail is wrong. */
static int child_code(int rc, const char *words)
{
    const dv_error_detail *d = dv_last_error();
    bool detail_ok = rc == DV_OK || (d->status == rc && d->call != NULL && d->call[0] != '\0' &&
                                     names_op(words, d->call));
    if (rc != DV_OK)
        printf("#    (child) call \"%s\": %s\n", d->call ? d->call : "(null)", d->message);
    fflush(stdout);
    return (detail_ok ? 0 : 64) + (rc <= 0 && rc > -64 ? -rc : 63);
}

enum fork_call {
    F_ALLOC,
    F_SHUTDOWN,
    F_DESTROY,
    F_REF_ACCESS,
    F_EVENT_SYNC,
    F_KGRID_NULL,
    F_KBLOCK_NULL,
    F_HOST_ALLOC,
    F_HOST_FREE,
};

/* The call made in a child after fork() on the parent's actor. */
static int after_fork(enum fork_call which)
{
    int err[2];
    fflush(stdout);
    if (!stderr_pipe(err))
        return CHILD_FAILED;
    pid_t pid = fork();
    if (pid < 0) {
        close(err[0]);
        close(err[1]);
        return CHILD_FAILED;
    }
    if (pid == 0) {
        dup2(err[1], 2);
        alarm(20);
        int rc = DV_OK;
        const char *words = "";
        switch (which) {
        case F_ALLOC:
            rc = dv_alloc(A, 64, 0, "child", &out);
            words = "alloc";
            break;
        case F_SHUTDOWN:
            rc = dv_actor_shutdown(A);
            words = "shutdown";
            break;
        case F_DESTROY:
            rc = dv_actor_destroy(A);
            words = "destroy|shutdown";
            break;
        case F_REF_ACCESS:
            rc = dv_ref_access(live, &info);
            words = "ref_access";
            break;
        case F_EVENT_SYNC:
            rc = dv_event_sync(ea);
            words = "event_sync|event sync";
            break;
        case F_KGRID_NULL: /* returns, or the child dies */
            (void)dv_sim_kgrid(NULL);
            break;
        case F_KBLOCK_NULL:
            (void)dv_sim_kblock(NULL);
            break;
        case F_HOST_ALLOC: {
            void *got;
            rc = dv_host_alloc(A, 4096, &got);
            words = "host_alloc|host alloc";
            break;
        }
        case F_HOST_FREE:
            rc = dv_host_free(A, host);
            words = "host_free|host free";
            break;
        }
        _exit(child_code(rc, words));
    }
    close(err[1]);
    return child_result(pid, err[0]);
}

/* A task's context used from another thread while the task runs: a child
 * process of its own (the program again, "--child NAME"), since the call
 * may abort it. */
static int in_child(const char *name)
{
    char self[] = "misuse.t", flag[] = "--child";
    char *args[] = {self, flag, (char *)name, NULL};
    posix_spawn_file_actions_t fa;
    pid_t pid;
    int err[2];
    fflush(stdout);
    if (!stderr_pipe(err))
        return CHILD_FAILED;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, args, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(err[1]);
    if (rc != 0) {
        close(err[0]);
        return CHILD_FAILED;
    }
    return child_result(pid, err[0]);
}

static atomic_bool let_go;
static _Atomic(const dv_task_ctx *) running_ctx;
static dv_task_ctx running_copy;

static int hold_task(const dv_task_ctx *ctx, void *user)
{
    (void)user;
    running_copy = *ctx;
    atomic_store(&running_ctx, &running_copy);
    while (!atomic_load(&let_go))
        sched_yield();
    return DV_OK;
}

static int child_main(const char *name)
{
    dv_actor_config conf;
    dv_actor *c = NULL;
    dv_kernel *k = NULL;
    dv_future f;
    dv_actor_config_init(&conf);
    conf.backend = DV_BACKEND_SIM;
    conf.sim_memory_bytes = 8 << 20;
    alarm(20);
    if (dv_actor_create(&conf, &c) != DV_OK || dv_kernel_get(c, NULL, 0, "empty", &k) != DV_OK)
        return 127;
    dv_future_init(&f, 0);
    if (dv_task_async(c, hold_task, NULL, 0, NULL, 0, &f) != DV_OK)
        return 127;
    while (atomic_load(&running_ctx) == NULL)
        sched_yield();
    const dv_task_ctx *ctx = atomic_load(&running_ctx);
    int rc;
    const char *words;
    uint64_t p;
    if (strcmp(name, "task_launch") == 0) {
        rc = dv_task_launch(ctx, k, G1, B1, 0, NULL, 0);
        words = "task_launch|launch";
    } else if (strcmp(name, "task_host_fn") == 0) {
        rc = dv_task_host_fn(ctx, no_op, NULL);
        words = "host_fn";
    } else if (strcmp(name, "task_scratch") == 0) {
        rc = dv_task_scratch(ctx, 256, &p);
        words = "scratch";
    } else {
        return 127;
    }
    int code = child_code(rc, words);
    atomic_store(&let_go, true);
    dv_future_wait(&f);
    dv_actor_destroy(c);
    return code;
}

/* ------------------------------------------------------------------------
 * The tables
 * ------------------------------------------------------------------------ */

static void table_errors(void)
{
    VAL("dv_strerror", "a code past the list (1)", strcmp(dv_strerror(1), "unknown error") == 0);
    VAL("dv_strerror", "INT_MIN", strcmp(dv_strerror(INT_MIN), "unknown error") == 0);
    VAL("dv_err_name", "a code far past the list (-1000)",
        strcmp(dv_err_name(-1000), "DV_UNKNOWN") == 0);
    VAL("dv_err_name", "INT_MAX", strcmp(dv_err_name(INT_MAX), "DV_UNKNOWN") == 0);
    VAL("dv_last_error", "after dv_error_clear: never NULL, status 0",
        (dv_error_clear(), dv_last_error() != NULL && dv_last_error()->status == 0));
    VAL("dv_error_clear", "after a failure: the detail is zero",
        (dv_alloc(NULL, 16, 0, "t", &out), dv_error_clear(),
         dv_last_error()->status == 0 && dv_last_error()->call == NULL));
    VAL("dv_version", "never NULL, the header's version",
        dv_version() != NULL && strcmp(dv_version(), VERSION_TEXT) == 0);
}

static void table_actors(void)
{
    VAL("dv_actor_config_init", "NULL config", (dv_actor_config_init(NULL), true));

    ROW("dv_actor_config_parse", DV_EINVAL, "NULL config",
        dv_actor_config_parse(NULL, "streams:2"));
    ROW("dv_actor_config_parse", DV_EINVAL, "NULL text",
        dv_actor_config_parse((dv_actor_config *)cfg(CFG_STREAMS, 4), NULL));
    ROW("dv_actor_config_parse", DV_EINVAL, "an unknown key",
        dv_actor_config_parse((dv_actor_config *)cfg(CFG_STREAMS, 4), "streams:2,nonsense:1"));
    ROW("dv_actor_config_parse", DV_EINVAL, "a config never set up (size 0)",
        dv_actor_config_parse((dv_actor_config *)cfg(CFG_SIZE, 0), "streams:2"));
    ROW("dv_actor_create", DV_EINVAL, "a config never set up (size 0)", create(cfg(CFG_SIZE, 0)));
    ROW("dv_actor_create", DV_EINVAL, "a size that is not a multiple of 8",
        create(cfg(CFG_SIZE, 137)));

    ROW("dv_actor_get", DV_EINVAL, "NULL out", dv_actor_get(0, NULL));
    ROW("dv_actor_get", DV_EINVAL, "ordinal -1", dv_actor_get(-1, &aout));
    ROW("dv_actor_get", DV_EINVAL, "ordinal DV_MAX_DEVICES", dv_actor_get(DV_MAX_DEVICES, &aout));
    ROW("dv_actor_get", DV_EINVAL, "ordinal INT_MIN", dv_actor_get(INT_MIN, &aout));
    ROW("dv_actor_get", DV_ENODEVICE, "ordinal 15: in range, no such device",
        dv_actor_get(DV_MAX_DEVICES - 1, &aout));

    ROW("dv_actor_create", DV_EINVAL, "NULL out", dv_actor_create(cfg(CFG_STREAMS, 4), NULL));
    ROW("dv_actor_create", DV_OK, "NULL config: the defaults [silent]", create(NULL));
    ROW("dv_actor_create", DV_EINVAL, "backend 77", create(cfg(CFG_BACKEND, 77)));
    ROW("dv_actor_create", DV_EINVAL, "backend -1", create(cfg(CFG_BACKEND, (uint64_t)-1)));
    ROW("dv_actor_create", DV_EINVAL, "0 streams", create(cfg(CFG_STREAMS, 0)));
    ROW("dv_actor_create", DV_EINVAL, "65 streams [silent: the most is not in the header]",
        create(cfg(CFG_STREAMS, 65)));
    ROW("dv_actor_create", DV_EINVAL, "UINT32_MAX streams", create(cfg(CFG_STREAMS, UINT32_MAX)));
    ROW("dv_actor_create", DV_EINVAL, "queue capacity 0", create(cfg(CFG_QUEUE, 0)));
    ROW("dv_actor_create", DV_EINVAL, "queue capacity 1 (a ring of 1 holds nothing)",
        create(cfg(CFG_QUEUE, 1)));
    ROW("dv_actor_create", DV_EINVAL, "queue capacity UINT32_MAX",
        create(cfg(CFG_QUEUE, UINT32_MAX)));
    ROW("dv_actor_create", DV_EINVAL, "device -1 [silent]", create(cfg(CFG_DEVICE, (uint64_t)-1)));
    ROW("dv_actor_create", DV_ENODEVICE,
        "device 5 of a 1-device sim [silent: as dv_actor_get answers]", create(cfg(CFG_DEVICE, 5)));
    ROW("dv_actor_create", DV_EINVAL, "1000 simulated devices [silent]",
        create(cfg(CFG_SIM_DEVICES, 1000)));
    ROW("dv_actor_create", DV_EINVAL, "UINT64_MAX bytes of simulated memory [silent]",
        create(cfg(CFG_SIM_MEMORY, UINT64_MAX)));
    ROW("dv_actor_create", DV_EINVAL, "2 TiB of simulated memory (past a device's 1 TiB) [silent]",
        create(cfg(CFG_SIM_MEMORY, UINT64_C(2) << 40)));
    ROW("dv_actor_create", DV_EIO, "a log path that cannot be opened [silent]",
        create(cfg(CFG_LOG_PATH, 0)));
    ROW("dv_actor_create", DV_EBUSY, "a device that already has an actor (A's)",
        create(cfg(CFG_ON_A, 0)));
    ROW("dv_actor_create", DV_ENODEVICE,
        "device 2 of a shared 2-device driver [silent: as dv_actor_get answers]",
        create(cfg(CFG_ON_A, 2)));

    ROW("dv_actor_shutdown", DV_EINVAL, "NULL actor [silent]", dv_actor_shutdown(NULL));
    ROW("dv_actor_shutdown", DV_OK, "an actor shut down already", dv_actor_shutdown(SD));
    ROW("dv_actor_shutdown", DV_EDEADLK, "inside a task on it", in_task(P_BLOCK_SHUTDOWN));
    ROW("dv_actor_shutdown", DV_EFORKED, "in a child after fork()", after_fork(F_SHUTDOWN));
    ROW("dv_actor_destroy", DV_OK, "NULL actor", dv_actor_destroy(NULL));
    ROW("dv_actor_destroy", DV_EDEADLK, "inside a task on it", in_task(P_BLOCK_DESTROY));
    ROW("dv_actor_destroy", DV_EDEADLK, "inside a task on another actor",
        in_task(P_BLOCK_DESTROY_OTHER));
    ROW("dv_actor_destroy", DV_EFORKED, "in a child after fork()", after_fork(F_DESTROY));

    ROW("dv_actor_reset", DV_EINVAL, "NULL actor", dv_actor_reset(NULL));
    ROW("dv_actor_reset", DV_ESHUTDOWN, "after shutdown", dv_actor_reset(SD));
    ROW("dv_actor_reset", DV_EDEADLK, "inside a task on it", in_task(P_BLOCK_RESET));
    VAL("dv_actor_device", "NULL actor: -1 [silent]", dv_actor_device(NULL) == -1);
    VAL("dv_actor_backend_name", "NULL actor: not NULL [silent]",
        dv_actor_backend_name(NULL) != NULL);
    ROW("dv_flush", DV_EINVAL, "NULL actor", dv_flush(NULL));
    ROW("dv_flush", DV_ESHUTDOWN, "after shutdown", dv_flush(SD));
    ROW("dv_flush", DV_EDEADLK, "inside a task on its own actor", in_task(P_BLOCK_FLUSH));
    ROW("dv_actor_health_get", DV_EINVAL, "NULL actor", dv_actor_health_get(NULL, &health));
    ROW("dv_actor_health_get", DV_EINVAL, "NULL out", dv_actor_health_get(A, NULL));
    VAL("dv_actor_health_get", "after shutdown: DV_OK, state STOPPED [silent]",
        dv_actor_health_get(SD, &health) == DV_OK && health.state == DV_ACTOR_STOPPED);
    ROW("dv_actor_stats_get", DV_EINVAL, "NULL actor", dv_actor_stats_get(NULL, &stats));
    ROW("dv_actor_stats_get", DV_EINVAL, "NULL out", dv_actor_stats_get(A, NULL));
    ROW("dv_actor_stats_get", DV_ESHUTDOWN, "after shutdown", dv_actor_stats_get(SD, &stats));
    ROW("dv_actor_stats_get", DV_EDEADLK, "inside a task on its own actor", in_task(P_BLOCK_STATS));
    ROW("dv_memory_stats_get", DV_EINVAL, "NULL actor", dv_memory_stats_get(NULL, &mstats));
    ROW("dv_memory_stats_get", DV_EINVAL, "NULL out",
        dv_memory_stats_get_sized(A, NULL, sizeof(mstats)));
    ROW("dv_memory_stats_get", DV_EINVAL, "a size below the first layout",
        dv_memory_stats_get_sized(A, &mstats, 8));
    ROW("dv_memory_stats_get", DV_EINVAL, "a size over 4096",
        dv_memory_stats_get_sized(A, &mstats, 8192));
    ROW("dv_memory_stats_get", DV_ESHUTDOWN, "after shutdown", dv_memory_stats_get(SD, &mstats));
    ROW("dv_memory_stats_get", DV_EDEADLK, "inside a task on its own actor",
        in_task(P_BLOCK_MEMSTATS));
    ROW("dv_memory_reset_peaks", DV_EINVAL, "NULL actor", dv_memory_reset_peaks(NULL));
    ROW("dv_memory_reset_peaks", DV_ESHUTDOWN, "after shutdown", dv_memory_reset_peaks(SD));
    ROW("dv_memory_usage_get", DV_EINVAL, "NULL actor",
        dv_memory_usage_get(NULL, DV_MEMORY_BY_TAG, usage, 4, NULL));
    ROW("dv_memory_usage_get", DV_EINVAL, "key 0",
        dv_memory_usage_get(A, (dv_memory_key)0, usage, 4, NULL));
    ROW("dv_memory_usage_get", DV_EINVAL, "NULL rows with room for 4",
        dv_memory_usage_get(A, DV_MEMORY_BY_QUERY, NULL, 4, NULL));
    ROW("dv_memory_usage_get", DV_OK, "NULL rows and cap 0 (a count) [silent]",
        dv_memory_usage_get(A, DV_MEMORY_BY_QUERY, NULL, 0, NULL));
    ROW("dv_memory_usage_get", DV_ESHUTDOWN, "after shutdown",
        dv_memory_usage_get(SD, DV_MEMORY_BY_TAG, usage, 4, NULL));
    ROW("dv_memory_snapshot", DV_EINVAL, "NULL actor", dv_memory_snapshot(NULL, "/dev/null"));
    ROW("dv_memory_snapshot", DV_EINVAL, "NULL path", dv_memory_snapshot(A, NULL));
    ROW("dv_memory_snapshot", DV_EINVAL, "an empty path", dv_memory_snapshot(A, ""));
    ROW("dv_memory_snapshot", DV_EIO, "a directory that does not exist",
        dv_memory_snapshot(A, "/nonexistent/dir/snap.csv"));
    ROW("dv_memory_snapshot", DV_ESHUTDOWN, "after shutdown", dv_memory_snapshot(SD, "/dev/null"));
    ROW("dv_memory_snapshot", DV_EDEADLK, "inside a task on its own actor",
        in_task(P_BLOCK_SNAPSHOT));
    ROW("dv_actor_resources", DV_EINVAL, "NULL actor",
        dv_actor_resources(NULL, visit_nothing, NULL));
    ROW("dv_actor_resources", DV_EINVAL, "NULL function", dv_actor_resources(A, NULL, NULL));
    ROW("dv_actor_resources", DV_OK, "a function that does nothing [silent]",
        dv_actor_resources(A, visit_nothing, NULL));
    ROW("dv_actor_resources", DV_ESHUTDOWN, "after shutdown",
        dv_actor_resources(SD, visit_nothing, NULL));
    ROW("dv_actor_resources", DV_EDEADLK, "inside a task on its own actor",
        in_task(P_BLOCK_RESOURCES));
    ROW("dv_actor_last_hazard", DV_EINVAL, "NULL actor", dv_actor_last_hazard(NULL, &hz));
    ROW("dv_actor_last_hazard", DV_EINVAL, "NULL out", dv_actor_last_hazard(A, NULL));
    ROW("dv_actor_last_hazard", DV_OK, "after shutdown [silent: it reads published state]",
        dv_actor_last_hazard(SD, &hz));
}

static void table_refs(void)
{
    ROW("dv_ref_access", DV_EINVAL, "DV_REF_NULL", dv_ref_access(DV_REF_NULL, &info));
    ROW("dv_ref_access", DV_EINVAL, "domain 0 (malformed) [silent]",
        dv_ref_access(malformed, &info));
    ROW("dv_ref_access", DV_EINVAL, "random bits (a domain never opened: malformed) [silent]",
        dv_ref_access(junk, &info));
    ROW("dv_ref_access", DV_ESTALE, "random slot and generation in A's domain",
        dv_ref_access(junk_dom, &info));
    ROW("dv_ref_access", DV_ESTALE, "released", dv_ref_access(released, &info));
    ROW("dv_ref_access", DV_ESTALE, "its actor destroyed", dv_ref_access(dead_h, &info));
    ROW("dv_ref_access", DV_ESTALE, "its actor shut down", dv_ref_access(shut_h, &info));
    ROW("dv_ref_access", DV_ESTALE, "from before dv_actor_reset", dv_ref_access(reset_h, &info));
    ROW("dv_ref_access", DV_EOUT_OF_BUDGET, "its allocation refused: the allocation's error",
        dv_ref_access(failed, &info));
    ROW("dv_ref_access", DV_OK, "NULL info: validates only [silent]", dv_ref_access(live, NULL));
    ROW("dv_ref_access", DV_EFORKED, "in a child after fork()", after_fork(F_REF_ACCESS));
    ROW("dv_ref_access", DV_EDEADLK, "a handle pending behind the task it is called in",
        in_task(P_BLOCK_REF_ACCESS_PENDING));

    ROW("dv_ref_try_access", DV_EINVAL, "DV_REF_NULL", dv_ref_try_access(DV_REF_NULL, &info));
    ROW("dv_ref_try_access", DV_EINVAL, "random bits [silent]", dv_ref_try_access(junk, &info));
    ROW("dv_ref_try_access", DV_ESTALE, "released", dv_ref_try_access(released, &info));
    ROW("dv_ref_try_access", DV_ESTALE, "its actor destroyed", dv_ref_try_access(dead_h, &info));
    ROW("dv_ref_try_access", DV_ESTALE, "its actor shut down", dv_ref_try_access(shut_h, &info));
    ROW("dv_ref_try_access", DV_ESTALE, "from before dv_actor_reset",
        dv_ref_try_access(reset_h, &info));
    ROW("dv_ref_try_access", DV_EOUT_OF_BUDGET, "its allocation refused",
        dv_ref_try_access(failed, &info));

    ROW("dv_ref_retain", DV_EINVAL, "DV_REF_NULL", dv_ref_retain(DV_REF_NULL));
    ROW("dv_ref_retain", DV_EINVAL, "domain 0 (malformed) [silent]", dv_ref_retain(malformed));
    ROW("dv_ref_retain", DV_EINVAL, "random bits [silent]", dv_ref_retain(junk));
    ROW("dv_ref_retain", DV_ESTALE, "random slot and generation in A's domain",
        dv_ref_retain(junk_dom));
    ROW("dv_ref_retain", DV_ESTALE, "released", dv_ref_retain(released));
    ROW("dv_ref_retain", DV_ESTALE, "its actor destroyed", dv_ref_retain(dead_h));
    ROW("dv_ref_retain", DV_ESTALE, "its actor shut down", dv_ref_retain(shut_h));
    ROW("dv_ref_retain", DV_ESTALE, "from before dv_actor_reset", dv_ref_retain(reset_h));

    ROW("dv_ref_release", DV_EINVAL, "DV_REF_NULL", dv_ref_release(DV_REF_NULL));
    ROW("dv_ref_release", DV_EINVAL, "domain 0 (malformed) [silent]", dv_ref_release(malformed));
    ROW("dv_ref_release", DV_EINVAL, "random bits [silent]", dv_ref_release(junk));
    ROW("dv_ref_release", DV_ESTALE, "random slot and generation in A's domain",
        dv_ref_release(junk_dom));
    ROW("dv_ref_release", DV_ESTALE, "released already (a double release)",
        dv_ref_release(released));
    ROW("dv_ref_release", DV_ESTALE, "its actor destroyed", dv_ref_release(dead_h));
    ROW("dv_ref_release", DV_ESTALE, "its actor shut down", dv_ref_release(shut_h));
    ROW("dv_ref_release", DV_ESTALE, "from before dv_actor_reset", dv_ref_release(reset_h));
}

static void table_futures(void)
{
    VAL("dv_future_init", "NULL future", (dv_future_init(NULL, 0), true));
    ROW("dv_future_wait", DV_EINVAL, "NULL future", dv_future_wait(NULL));
    ROW("dv_future_wait", DV_EINVAL, "never set up (garbage)", dv_future_wait(&garbage));
    ROW("dv_future_wait", DV_EINVAL, "set up, never posted [silent]", dv_future_wait(&never));
    ROW("dv_future_wait", DV_EDEADLK, "inside a task, for an operation posted behind it",
        in_task(P_BLOCK_FUTURE_WAIT));
    ROW("dv_future_wait_ordered", DV_EINVAL, "NULL future", dv_future_wait_ordered(NULL));
    ROW("dv_future_wait_ordered", DV_EINVAL, "never set up (garbage)",
        dv_future_wait_ordered(&garbage));
    ROW("dv_future_wait_ordered", DV_EINVAL, "set up, never posted [silent]",
        dv_future_wait_ordered(&never));
    ROW("dv_future_wait_for", DV_EINVAL, "NULL future",
        dv_future_wait_for(NULL, DV_COMPLETE, 1000));
    ROW("dv_future_wait_for", DV_EINVAL, "milestone 0",
        dv_future_wait_for(&done_f, (dv_milestone)0, 1000));
    ROW("dv_future_wait_for", DV_EINVAL, "milestone 3",
        dv_future_wait_for(&done_f, (dv_milestone)3, 1000));
    ROW("dv_future_wait_for", DV_EINVAL, "never set up (garbage)",
        dv_future_wait_for(&garbage, DV_COMPLETE, 1000));
    ROW("dv_future_wait_for", DV_EINVAL, "set up, never posted [silent]",
        dv_future_wait_for(&never, DV_COMPLETE, 0));
    VAL("dv_future_done", "NULL future: false", !dv_future_done(NULL));
    VAL("dv_future_done", "never set up (garbage): false", !dv_future_done(&garbage));
    VAL("dv_future_done", "set up, never posted: false", !dv_future_done(&never));
    VAL("dv_future_reached", "NULL future: false", !dv_future_reached(NULL, DV_ORDERED));
    VAL("dv_future_reached", "never set up (garbage): false",
        !dv_future_reached(&garbage, DV_COMPLETE));
    VAL("dv_future_reached", "milestone 0 of a complete future: false [silent]",
        !dv_future_reached(&done_f, (dv_milestone)0));
}

static void table_memory(void)
{
    /* ---- dv_alloc, dv_alloc_async */
    ROW("dv_alloc", DV_EINVAL, "NULL actor", dv_alloc(NULL, 16, 0, "t", &out));
    ROW("dv_alloc", DV_EINVAL, "NULL out", dv_alloc(A, 16, 0, "t", NULL));
    ROW("dv_alloc", DV_EINVAL, "0 bytes", dv_alloc(A, 0, 0, "t", &out));
    ROW("dv_alloc", DV_EINVAL, "UINT64_MAX bytes", dv_alloc(A, UINT64_MAX, 0, "t", &out));
    ROW("dv_alloc", DV_EINVAL, "2^48 + 1 bytes (past the device port's limit) [silent]",
        dv_alloc(A, (UINT64_C(1) << 48) + 1, 0, "t", &out));
    ROW("dv_alloc", DV_EINVAL, "stream == streams", dv_alloc(A, 16, STREAMS, "t", &out));
    ROW("dv_alloc", DV_EINVAL, "DV_STREAM_NONE", dv_alloc(A, 16, DV_STREAM_NONE, "t", &out));
    ROW("dv_alloc", DV_OK, "NULL tag: allowed [silent]",
        release_out(dv_alloc(A, 16, 0, NULL, &out)));
    ROW("dv_alloc", DV_ESHUTDOWN, "after shutdown", dv_alloc(SD, 16, 0, "t", &out));
    ROW("dv_alloc", DV_EFORKED, "in a child after fork()", after_fork(F_ALLOC));
    ROW("dv_alloc_async", DV_EINVAL, "NULL future", dv_alloc_async(A, 16, 0, "t", &out, NULL));
    ROW("dv_alloc_async", DV_EINVAL, "NULL actor", dv_alloc_async(NULL, 16, 0, "t", &out, FUT));
    ROW("dv_alloc_async", DV_EINVAL, "0 bytes", dv_alloc_async(A, 0, 0, "t", &out, FUT));
    ROW("dv_alloc_async", DV_EINVAL, "UINT64_MAX bytes",
        dv_alloc_async(A, UINT64_MAX, 0, "t", &out, FUT));
    ROW("dv_alloc_async", DV_EINVAL, "stream == streams",
        dv_alloc_async(A, 16, STREAMS, "t", &out, FUT));
    ROW("dv_alloc_async", DV_EINVAL, "DV_STREAM_NONE",
        dv_alloc_async(A, 16, DV_STREAM_NONE, "t", &out, FUT));
    ROW("dv_alloc_async", DV_EINVAL, "a future never set up",
        dv_alloc_async(A, 16, 0, "t", &out, &garbage));
    ROW("dv_alloc_async", DV_OK, "NULL out: allowed (the handle is in the future)",
        release_out(settle((out = DV_REF_NULL, dv_alloc_async(A, 16, 0, "t", NULL, FUT)))));
    ROW("dv_alloc_async", DV_ESHUTDOWN, "after shutdown",
        dv_alloc_async(SD, 16, 0, "t", &out, FUT));
    ROW("dv_alloc_wait", DV_EINVAL, "NULL actor", dv_alloc_wait(NULL, 16, 0, "t", 0, &out));
    ROW("dv_alloc_wait", DV_EINVAL, "NULL out", dv_alloc_wait(A, 16, 0, "t", 0, NULL));
    ROW("dv_alloc_wait", DV_EINVAL, "0 bytes", dv_alloc_wait(A, 0, 0, "t", 0, &out));
    ROW("dv_alloc_wait", DV_EINVAL, "UINT64_MAX bytes",
        dv_alloc_wait(A, UINT64_MAX, 0, "t", 0, &out));
    ROW("dv_alloc_wait", DV_EINVAL, "stream == streams",
        dv_alloc_wait(A, 16, STREAMS, "t", 0, &out));
    ROW("dv_alloc_wait", DV_EINVAL, "DV_STREAM_NONE",
        dv_alloc_wait(A, 16, DV_STREAM_NONE, "t", 0, &out));
    ROW("dv_alloc_wait", DV_ESHUTDOWN, "after shutdown", dv_alloc_wait(SD, 16, 0, "t", 0, &out));
    ROW("dv_alloc_wait", DV_EDEADLK, "inside a task on it", in_task(P_BLOCK_ALLOC_WAIT));

    /* ---- dv_copy_htod */
    ROW("dv_copy_htod", DV_EINVAL, "NULL actor", dv_copy_htod(NULL, x, 0, host, 16, 0));
    ROW("dv_copy_htod", DV_EINVAL, "NULL host buffer", dv_copy_htod(A, x, 0, NULL, 16, 0));
    ROW("dv_copy_htod", DV_EINVAL, "0 bytes", dv_copy_htod(A, x, 0, host, 0, 0));
    ROW("dv_copy_htod", DV_EINVAL, "UINT64_MAX bytes", dv_copy_htod(A, x, 0, host, UINT64_MAX, 0));
    ROW("dv_copy_htod", DV_EINVAL, "offset at the end", dv_copy_htod(A, x, NB, host, 4, 0));
    ROW("dv_copy_htod", DV_EINVAL, "one byte past the end", dv_copy_htod(A, x, 1, host, NB, 0));
    ROW("dv_copy_htod", DV_EINVAL, "offset + bytes overflows",
        dv_copy_htod(A, x, UINT64_MAX - 1, host, 4, 0));
    ROW("dv_copy_htod", DV_EINVAL, "offset UINT64_MAX", dv_copy_htod(A, x, UINT64_MAX, host, 1, 0));
    ROW("dv_copy_htod", DV_EINVAL, "stream == streams", dv_copy_htod(A, x, 0, host, 16, STREAMS));
    ROW("dv_copy_htod", DV_EINVAL, "DV_STREAM_NONE",
        dv_copy_htod(A, x, 0, host, 16, DV_STREAM_NONE));
    ROW("dv_copy_htod", DV_EINVAL, "DV_REF_NULL", dv_copy_htod(A, DV_REF_NULL, 0, host, 16, 0));
    ROW("dv_copy_htod", DV_ESTALE, "released", dv_copy_htod(A, released, 0, host, 16, 0));
    ROW("dv_copy_htod", DV_EINVAL, "another actor's handle (B's)",
        dv_copy_htod(A, bx, 0, host, 16, 0));
    ROW("dv_copy_htod", DV_EINVAL, "another driver's handle",
        dv_copy_htod(A, other_h, 0, host, 16, 0));
    ROW("dv_copy_htod", DV_EINVAL, "random bits (not this actor's) [silent]",
        dv_copy_htod(A, junk, 0, host, 16, 0));
    ROW("dv_copy_htod", DV_ESTALE, "random slot and generation in A's domain",
        dv_copy_htod(A, junk_dom, 0, host, 16, 0));
    ROW("dv_copy_htod", DV_ESTALE, "a destroyed actor's handle",
        dv_copy_htod(A, dead_h, 0, host, 16, 0));
    ROW("dv_copy_htod", DV_ESTALE, "a shut-down actor's handle",
        dv_copy_htod(A, shut_h, 0, host, 16, 0));
    ROW("dv_copy_htod", DV_ESTALE, "from before dv_actor_reset",
        dv_copy_htod(RS, reset_h, 0, host, 16, 0));
    ROW("dv_copy_htod", DV_EOUT_OF_BUDGET, "its allocation refused",
        dv_copy_htod(A, failed, 0, host, 16, 0));
    ROW("dv_copy_htod", DV_ESHUTDOWN, "after shutdown", dv_copy_htod(SD, shut_h, 0, host, 16, 0));
    /* Pageable memory goes through the staging (made by the copies above):
     * the blocking form would wait for a copy thread. */
    ROW("dv_copy_htod", DV_EDEADLK, "pageable, inside a task on its own actor",
        in_task(P_BLOCK_HTOD_PAGEABLE));
    ROW("dv_copy_dtoh", DV_EDEADLK, "pageable, inside a task on its own actor",
        in_task(P_BLOCK_DTOH_PAGEABLE));
    ROW("dv_copy_htod_async", DV_EINVAL, "NULL future",
        dv_copy_htod_async(A, x, 0, host, 16, 0, NULL));
    ROW("dv_copy_htod_async", DV_EINVAL, "NULL actor",
        dv_copy_htod_async(NULL, x, 0, host, 16, 0, FUT));
    ROW("dv_copy_htod_async", DV_EINVAL, "NULL host buffer",
        dv_copy_htod_async(A, x, 0, NULL, 16, 0, FUT));
    ROW("dv_copy_htod_async", DV_EINVAL, "0 bytes", dv_copy_htod_async(A, x, 0, host, 0, 0, FUT));
    ROW("dv_copy_htod_async", DV_EINVAL, "stream == streams",
        dv_copy_htod_async(A, x, 0, host, 16, STREAMS, FUT));
    ROW("dv_copy_htod_async", DV_EINVAL, "offset + bytes overflows (on its future)",
        settle(dv_copy_htod_async(A, x, UINT64_MAX - 1, host, 4, 0, FUT)));
    ROW("dv_copy_htod_async", DV_ESTALE, "released (on its future)",
        settle(dv_copy_htod_async(A, released, 0, host, 16, 0, FUT)));
    ROW("dv_copy_htod_async", DV_EINVAL, "another actor's handle (on its future)",
        settle(dv_copy_htod_async(A, bx, 0, host, 16, 0, FUT)));
    ROW("dv_copy_htod_async", DV_EINVAL, "a future never set up",
        dv_copy_htod_async(A, x, 0, host, 16, 0, &garbage));
    ROW("dv_copy_htod_async", DV_ESHUTDOWN, "after shutdown",
        dv_copy_htod_async(SD, shut_h, 0, host, 16, 0, FUT));

    /* ---- dv_copy_dtoh */
    ROW("dv_copy_dtoh", DV_EINVAL, "NULL actor", dv_copy_dtoh(NULL, sink, x, 0, 16, 0));
    ROW("dv_copy_dtoh", DV_EINVAL, "NULL host buffer", dv_copy_dtoh(A, NULL, x, 0, 16, 0));
    ROW("dv_copy_dtoh", DV_EINVAL, "0 bytes", dv_copy_dtoh(A, sink, x, 0, 0, 0));
    ROW("dv_copy_dtoh", DV_EINVAL, "UINT64_MAX bytes", dv_copy_dtoh(A, sink, x, 0, UINT64_MAX, 0));
    ROW("dv_copy_dtoh", DV_EINVAL, "offset at the end", dv_copy_dtoh(A, sink, x, NB, 4, 0));
    ROW("dv_copy_dtoh", DV_EINVAL, "one byte past the end", dv_copy_dtoh(A, sink, x, 1, NB, 0));
    ROW("dv_copy_dtoh", DV_EINVAL, "offset + bytes overflows",
        dv_copy_dtoh(A, sink, x, UINT64_MAX - 1, 4, 0));
    ROW("dv_copy_dtoh", DV_EINVAL, "stream == streams", dv_copy_dtoh(A, sink, x, 0, 16, STREAMS));
    ROW("dv_copy_dtoh", DV_EINVAL, "DV_STREAM_NONE",
        dv_copy_dtoh(A, sink, x, 0, 16, DV_STREAM_NONE));
    ROW("dv_copy_dtoh", DV_EINVAL, "DV_REF_NULL", dv_copy_dtoh(A, sink, DV_REF_NULL, 0, 16, 0));
    ROW("dv_copy_dtoh", DV_ESTALE, "released", dv_copy_dtoh(A, sink, released, 0, 16, 0));
    ROW("dv_copy_dtoh", DV_EINVAL, "another actor's handle (B's)",
        dv_copy_dtoh(A, sink, bx, 0, 16, 0));
    ROW("dv_copy_dtoh", DV_EINVAL, "random bits (not this actor's) [silent]",
        dv_copy_dtoh(A, sink, junk, 0, 16, 0));
    ROW("dv_copy_dtoh", DV_ESTALE, "a destroyed actor's handle",
        dv_copy_dtoh(A, sink, dead_h, 0, 16, 0));
    ROW("dv_copy_dtoh", DV_ESTALE, "from before dv_actor_reset",
        dv_copy_dtoh(RS, sink, reset_h, 0, 16, 0));
    ROW("dv_copy_dtoh", DV_EOUT_OF_BUDGET, "its allocation refused",
        dv_copy_dtoh(A, sink, failed, 0, 16, 0));
    ROW("dv_copy_dtoh", DV_ESHUTDOWN, "after shutdown", dv_copy_dtoh(SD, sink, shut_h, 0, 16, 0));
    ROW("dv_copy_dtoh_async", DV_EINVAL, "NULL future",
        dv_copy_dtoh_async(A, sink, x, 0, 16, 0, NULL));
    ROW("dv_copy_dtoh_async", DV_EINVAL, "NULL actor",
        dv_copy_dtoh_async(NULL, sink, x, 0, 16, 0, FUT));
    ROW("dv_copy_dtoh_async", DV_EINVAL, "NULL host buffer",
        dv_copy_dtoh_async(A, NULL, x, 0, 16, 0, FUT));
    ROW("dv_copy_dtoh_async", DV_EINVAL, "DV_STREAM_NONE",
        dv_copy_dtoh_async(A, sink, x, 0, 16, DV_STREAM_NONE, FUT));
    ROW("dv_copy_dtoh_async", DV_ESTALE, "released (on its future)",
        settle(dv_copy_dtoh_async(A, sink, released, 0, 16, 0, FUT)));
    ROW("dv_copy_dtoh_async", DV_EINVAL, "a future never set up",
        dv_copy_dtoh_async(A, sink, x, 0, 16, 0, &garbage));
    ROW("dv_copy_dtoh_async", DV_ESHUTDOWN, "after shutdown",
        dv_copy_dtoh_async(SD, sink, shut_h, 0, 16, 0, FUT));

    /* ---- dv_copy_dtod (between two actors' blocks: a peer copy) */
    ROW("dv_copy_dtod", DV_EINVAL, "NULL actor", dv_copy_dtod(NULL, x, 0, y, 0, 16, 0));
    ROW("dv_copy_dtod", DV_EINVAL, "0 bytes", dv_copy_dtod(A, x, 0, y, 0, 0, 0));
    ROW("dv_copy_dtod", DV_EINVAL, "UINT64_MAX bytes", dv_copy_dtod(A, x, 0, y, 0, UINT64_MAX, 0));
    ROW("dv_copy_dtod", DV_EINVAL, "destination offset + bytes overflows",
        dv_copy_dtod(A, x, UINT64_MAX - 1, y, 0, 4, 0));
    ROW("dv_copy_dtod", DV_EINVAL, "source offset + bytes overflows",
        dv_copy_dtod(A, x, 0, y, UINT64_MAX - 1, 4, 0));
    ROW("dv_copy_dtod", DV_EINVAL, "source one byte past the end",
        dv_copy_dtod(A, x, 0, y, 1, NB, 0));
    ROW("dv_copy_dtod", DV_EINVAL, "overlapping ranges of one block",
        dv_copy_dtod(A, x, 0, x, 8, 16, 0));
    ROW("dv_copy_dtod", DV_OK, "ranges of one block side by side",
        dv_copy_dtod(A, x, 0, x, 16, 16, 0));
    ROW("dv_copy_dtod", DV_EINVAL, "stream == streams", dv_copy_dtod(A, x, 0, y, 0, 16, STREAMS));
    ROW("dv_copy_dtod", DV_EINVAL, "DV_STREAM_NONE",
        dv_copy_dtod(A, x, 0, y, 0, 16, DV_STREAM_NONE));
    ROW("dv_copy_dtod", DV_EINVAL, "destination DV_REF_NULL",
        dv_copy_dtod(A, DV_REF_NULL, 0, y, 0, 16, 0));
    ROW("dv_copy_dtod", DV_EINVAL, "source DV_REF_NULL",
        dv_copy_dtod(A, x, 0, DV_REF_NULL, 0, 16, 0));
    ROW("dv_copy_dtod", DV_ESTALE, "destination released",
        dv_copy_dtod(A, released, 0, y, 0, 16, 0));
    ROW("dv_copy_dtod", DV_ESTALE, "source released", dv_copy_dtod(A, x, 0, released, 0, 16, 0));
    ROW("dv_copy_dtod", DV_OK, "source of another actor on the driver: a peer copy (documented)",
        dv_copy_dtod(A, x, 0, bx, 0, 16, 0));
    ROW("dv_copy_dtod", DV_EINVAL, "destination of another actor (the call names A)",
        dv_copy_dtod(A, bx, 0, x, 0, 16, 0));
    ROW("dv_copy_dtod", DV_EINVAL, "peer copy of 0 bytes", dv_copy_dtod(B, bx, 0, x, 0, 0, 0));
    ROW("dv_copy_dtod", DV_EINVAL, "peer copy, source offset + bytes overflows",
        dv_copy_dtod(B, bx, 0, x, UINT64_MAX - 1, 4, 0));
    ROW("dv_copy_dtod", DV_EINVAL, "peer copy, destination offset + bytes overflows",
        dv_copy_dtod(B, bx, UINT64_MAX - 1, x, 0, 4, 0));
    ROW("dv_copy_dtod", DV_EINVAL, "source of another driver's actor [silent]",
        dv_copy_dtod(A, x, 0, other_h, 0, 16, 0));
    ROW("dv_copy_dtod", DV_ESTALE, "source of a destroyed actor",
        dv_copy_dtod(A, x, 0, dead_h, 0, 16, 0));
    ROW("dv_copy_dtod", DV_ESTALE, "source of a shut-down actor",
        dv_copy_dtod(A, x, 0, shut_h, 0, 16, 0));
    ROW("dv_copy_dtod", DV_ESTALE, "destination of a destroyed actor",
        dv_copy_dtod(A, dead_h, 0, x, 0, 16, 0));
    ROW("dv_copy_dtod", DV_ESTALE, "random bits as the source [silent]",
        dv_copy_dtod(A, x, 0, junk, 0, 16, 0));
    ROW("dv_copy_dtod", DV_ESTALE, "source from before dv_actor_reset",
        dv_copy_dtod(RS, rlive, 0, reset_h, 0, 16, 0));
    ROW("dv_copy_dtod", DV_EOUT_OF_BUDGET, "source's allocation refused",
        dv_copy_dtod(A, x, 0, failed, 0, 16, 0));
    ROW("dv_copy_dtod", DV_ESHUTDOWN, "after shutdown",
        dv_copy_dtod(SD, shut_h, 0, shut_h, 0, 16, 0));
    ROW("dv_copy_dtod", DV_EDEADLK, "inside a task on its own actor", in_task(P_BLOCK_DTOD));
    ROW("dv_copy_dtod_async", DV_EINVAL, "NULL future",
        dv_copy_dtod_async(A, x, 0, y, 0, 16, 0, NULL));
    ROW("dv_copy_dtod_async", DV_EINVAL, "NULL actor",
        dv_copy_dtod_async(NULL, x, 0, y, 0, 16, 0, FUT));
    ROW("dv_copy_dtod_async", DV_EINVAL, "unknown stream",
        dv_copy_dtod_async(A, x, 0, y, 0, 16, STREAMS, FUT));
    ROW("dv_copy_dtod_async", DV_ESTALE, "source released (on its future)",
        settle(dv_copy_dtod_async(A, x, 0, released, 0, 16, 0, FUT)));
    ROW("dv_copy_dtod_async", DV_EINVAL, "a future never set up",
        dv_copy_dtod_async(A, x, 0, y, 0, 16, 0, &garbage));
    ROW("dv_copy_dtod_async", DV_EINVAL, "a peer copy with a future never set up",
        dv_copy_dtod_async(A, x, 0, bx, 0, 16, 0, &garbage));
    ROW("dv_copy_dtod_async", DV_ESHUTDOWN, "after shutdown",
        dv_copy_dtod_async(SD, shut_h, 0, shut_h, 0, 16, 0, FUT));

    /* ---- dv_memset */
    ROW("dv_memset", DV_EINVAL, "NULL actor", dv_memset(NULL, x, 0, 1, 16, 0));
    ROW("dv_memset", DV_EINVAL, "0 bytes", dv_memset(A, x, 0, 1, 0, 0));
    ROW("dv_memset", DV_EINVAL, "UINT64_MAX bytes", dv_memset(A, x, 0, 1, UINT64_MAX, 0));
    ROW("dv_memset", DV_EINVAL, "offset at the end", dv_memset(A, x, NB, 1, 4, 0));
    ROW("dv_memset", DV_EINVAL, "one byte past the end", dv_memset(A, x, 1, 1, NB, 0));
    ROW("dv_memset", DV_EINVAL, "offset + bytes overflows",
        dv_memset(A, x, UINT64_MAX - 1, 1, 4, 0));
    ROW("dv_memset", DV_EINVAL, "stream == streams", dv_memset(A, x, 0, 1, 16, STREAMS));
    ROW("dv_memset", DV_EINVAL, "DV_STREAM_NONE", dv_memset(A, x, 0, 1, 16, DV_STREAM_NONE));
    ROW("dv_memset", DV_EINVAL, "DV_REF_NULL", dv_memset(A, DV_REF_NULL, 0, 1, 16, 0));
    ROW("dv_memset", DV_EINVAL, "domain 0 (malformed) [silent]",
        dv_memset(A, malformed, 0, 1, 16, 0));
    ROW("dv_memset", DV_ESTALE, "released", dv_memset(A, released, 0, 1, 16, 0));
    ROW("dv_memset", DV_EINVAL, "another actor's handle (B's)", dv_memset(A, bx, 0, 1, 16, 0));
    ROW("dv_memset", DV_EINVAL, "another driver's handle", dv_memset(A, other_h, 0, 1, 16, 0));
    ROW("dv_memset", DV_EINVAL, "random bits (not this actor's) [silent]",
        dv_memset(A, junk, 0, 1, 16, 0));
    ROW("dv_memset", DV_ESTALE, "random slot and generation in A's domain",
        dv_memset(A, junk_dom, 0, 1, 16, 0));
    ROW("dv_memset", DV_ESTALE, "a destroyed actor's handle", dv_memset(A, dead_h, 0, 1, 16, 0));
    ROW("dv_memset", DV_ESTALE, "a shut-down actor's handle", dv_memset(A, shut_h, 0, 1, 16, 0));
    ROW("dv_memset", DV_ESTALE, "from before dv_actor_reset", dv_memset(RS, reset_h, 0, 1, 16, 0));
    ROW("dv_memset", DV_EOUT_OF_BUDGET, "its allocation refused",
        dv_memset(A, failed, 0, 1, 16, 0));
    ROW("dv_memset", DV_ESHUTDOWN, "after shutdown", dv_memset(SD, shut_h, 0, 1, 16, 0));
    ROW("dv_memset", DV_EDEADLK, "inside a task on its own actor", in_task(P_BLOCK_MEMSET));
    ROW("dv_memset_async", DV_EINVAL, "NULL future", dv_memset_async(A, x, 0, 1, 16, 0, NULL));
    ROW("dv_memset_async", DV_EINVAL, "NULL actor", dv_memset_async(NULL, x, 0, 1, 16, 0, FUT));
    ROW("dv_memset_async", DV_EINVAL, "stream == streams",
        dv_memset_async(A, x, 0, 1, 16, STREAMS, FUT));
    ROW("dv_memset_async", DV_EINVAL, "0 bytes (on its future)",
        settle(dv_memset_async(A, x, 0, 1, 0, 0, FUT)));
    ROW("dv_memset_async", DV_ESTALE, "released (on its future)",
        settle(dv_memset_async(A, released, 0, 1, 16, 0, FUT)));
    ROW("dv_memset_async", DV_EINVAL, "a future never set up",
        dv_memset_async(A, x, 0, 1, 16, 0, &garbage));
    ROW("dv_memset_async", DV_ESHUTDOWN, "after shutdown",
        dv_memset_async(SD, shut_h, 0, 1, 16, 0, FUT));

    /* ---- dv_sync */
    ROW("dv_sync", DV_EINVAL, "NULL actor", dv_sync(NULL, 0));
    ROW("dv_sync", DV_EINVAL, "stream == streams", dv_sync(A, STREAMS));
    ROW("dv_sync", DV_EINVAL, "DV_STREAM_NONE", dv_sync(A, DV_STREAM_NONE));
    ROW("dv_sync", DV_ESHUTDOWN, "after shutdown", dv_sync(SD, 0));
    ROW("dv_sync", DV_EDEADLK, "inside a task on its own actor", in_task(P_BLOCK_SYNC));
    ROW("dv_sync", DV_EDEADLK, "in a host function", in_host_fn());
    ROW("dv_sync_async", DV_EINVAL, "NULL future", dv_sync_async(A, 0, NULL));
    ROW("dv_sync_async", DV_EINVAL, "NULL actor", dv_sync_async(NULL, 0, FUT));
    ROW("dv_sync_async", DV_EINVAL, "stream == streams", dv_sync_async(A, STREAMS, FUT));
    ROW("dv_sync_async", DV_EINVAL, "a future never set up", dv_sync_async(A, 0, &garbage));
    ROW("dv_sync_async", DV_ESHUTDOWN, "after shutdown", dv_sync_async(SD, 0, FUT));
}

/* Host twins for sim images, good and bad (devactor_sim.h). */
static int twin_noop(dv_sim_kctx *k, void **params)
{
    (void)k;
    (void)params;
    return 0;
}
static const dv_sim_kernel twin_good[] = {{"twin", twin_noop, 1, {8}}};
static const dv_sim_kernel twin_too_many[] = {{"twin", twin_noop, DV_LAUNCH_MAX_ARGS + 1, {8}}};
static const dv_sim_kernel twin_zero_param[] = {{"twin", twin_noop, 2, {8, 0}}};
static const dv_sim_kernel twin_big_param[] = {{"twin", twin_noop, 1, {DV_ARG_MAX_BYTES + 1}}};
static const dv_sim_kernel twin_no_fn[] = {{"twin", NULL, 1, {8}}};
static const dv_sim_kernel twin_no_name[] = {{NULL, twin_noop, 1, {8}}};
static const dv_sim_image img_good = DV_SIM_IMAGE(twin_good);
static const dv_sim_image img_too_many = DV_SIM_IMAGE(twin_too_many);
static const dv_sim_image img_zero_param = DV_SIM_IMAGE(twin_zero_param);
static const dv_sim_image img_big_param = DV_SIM_IMAGE(twin_big_param);
static const dv_sim_image img_no_fn = DV_SIM_IMAGE(twin_no_fn);
static const dv_sim_image img_no_name = DV_SIM_IMAGE(twin_no_name);
static const dv_sim_image img_null_list = {DV_SIM_IMAGE_MAGIC, NULL, 3};

static void table_kernels(void)
{
    static const char long_name[] = "a_kernel_name_longer_than_any_kernel_handle_keeps_"
                                    "a_kernel_name_longer_than_any_kernel_handle_keeps";
    static const char not_an_image[] = "this is not a module image at all";

    ROW("dv_kernel_get", DV_EINVAL, "NULL actor", dv_kernel_get(NULL, NULL, 0, "empty", &kout));
    ROW("dv_kernel_get", DV_EINVAL, "NULL out", dv_kernel_get(A, NULL, 0, "empty", NULL));
    ROW("dv_kernel_get", DV_EINVAL, "NULL name", dv_kernel_get(A, NULL, 0, NULL, &kout));
    ROW("dv_kernel_get", DV_EINVAL, "empty name", dv_kernel_get(A, NULL, 0, "", &kout));
    kout = (dv_kernel *)&kout; /* anything: a refusal leaves NULL */
    ROW("dv_kernel_get", DV_ENOKERNEL, "a name no kernel has",
        dv_kernel_get(A, NULL, 0, "no_such_kernel", &kout));
    VAL("dv_kernel_get", "*out NULL after a refusal", kout == NULL);
    ROW("dv_kernel_get", DV_EINVAL, "a name longer than a handle keeps [silent]",
        dv_kernel_get(A, NULL, 0, long_name, &kout));
    ROW("dv_kernel_get", DV_EINVAL, "a sim image listing 3 kernels at NULL [silent]",
        dv_kernel_get(A, &img_null_list, sizeof(dv_sim_image), "twin", &kout));
    ROW("dv_kernel_get", DV_EINVAL, "a sim image whose twin has 17 parameters [silent]",
        dv_kernel_get(A, &img_too_many, sizeof(dv_sim_image), "twin", &kout));
    ROW("dv_kernel_get", DV_EINVAL, "a sim image whose twin has a parameter of 0 bytes [silent]",
        dv_kernel_get(A, &img_zero_param, sizeof(dv_sim_image), "twin", &kout));
    ROW("dv_kernel_get", DV_EINVAL,
        "a sim image whose twin has a parameter of DV_ARG_MAX_BYTES + 1 bytes [silent]",
        dv_kernel_get(A, &img_big_param, sizeof(dv_sim_image), "twin", &kout));
    ROW("dv_kernel_get", DV_EINVAL, "a sim image whose twin has no function [silent]",
        dv_kernel_get(A, &img_no_fn, sizeof(dv_sim_image), "twin", &kout));
    ROW("dv_kernel_get", DV_EINVAL, "a sim image whose twin has no name [silent]",
        dv_kernel_get(A, &img_no_name, sizeof(dv_sim_image), "twin", &kout));
    ROW("dv_kernel_get", DV_EINVAL, "a sim image, image_bytes shorter than it [silent]",
        dv_kernel_get(A, &img_good, 8, "twin", &kout));
    ROW("dv_kernel_get", DV_ENOKERNEL, "a sim image without that name",
        dv_kernel_get(A, &img_good, sizeof(dv_sim_image), "not_in_it", &kout));
    ROW("dv_kernel_get", DV_EINVAL, "an image of 0 bytes",
        dv_kernel_get(A, not_an_image, 0, "empty", &kout));
    ROW("dv_kernel_get", DV_EINVAL, "bytes that are not a module image [silent]",
        dv_kernel_get(A, not_an_image, sizeof(not_an_image), "empty", &kout));
    ROW("dv_kernel_get", DV_ESHUTDOWN, "after shutdown",
        dv_kernel_get(SD, NULL, 0, "empty", &kout));
    ROW("dv_kernel_get", DV_EDEADLK, "inside a task on its own actor", in_task(P_BLOCK_KERNEL_GET));
}

static void table_launch(void)
{
    static const dv_dim3 G0 = {0, 1, 1}, BLK0 = {0, 1, 1}, BX2048 = {2048, 1, 1}, BZ65 = {1, 1, 65},
                         GY = {1, 65536, 1}, GX = {0x80000000u, 1, 1}, B2048 = {32, 32, 2};

    ROW("dv_launch", DV_EINVAL, "NULL actor", dv_launch(NULL, ka_empty, G1, B1, 0, 0, NULL, 0));
    ROW("dv_launch", DV_EINVAL, "NULL kernel", dv_launch(A, NULL, G1, B1, 0, 0, NULL, 0));
    ROW("dv_launch", DV_EINVAL, "a kernel of another actor (B's)",
        dv_launch(A, kb_empty, G1, B1, 0, 0, NULL, 0));
    ROW("dv_launch", DV_EINVAL, "a kernel of a destroyed actor",
        dv_launch(A, kdead, G1, B1, 0, 0, NULL, 0));
    ROW("dv_launch", DV_EINVAL, "a kernel of another driver's actor",
        dv_launch(A, kother, G1, B1, 0, 0, NULL, 0));
    ROW("dv_launch", DV_EINVAL, "a kernel of a shut-down actor",
        dv_launch(A, kshut, G1, B1, 0, 0, NULL, 0));
    ROW("dv_launch", DV_EINVAL, "DV_LAUNCH_MAX_ARGS + 1 arguments",
        dv_launch(A, ka_empty, G1, B1, 0, 0, too_many(), DV_LAUNCH_MAX_ARGS + 1));
    ROW("dv_launch", DV_EINVAL, "3 arguments, NULL args",
        dv_launch(A, ka_fill, G1, B256, 0, 0, NULL, 3));
    ROW("dv_launch", DV_EINVAL, "stream == streams",
        dv_launch(A, ka_empty, G1, B1, 0, STREAMS, NULL, 0));
    ROW("dv_launch", DV_EINVAL, "DV_STREAM_NONE",
        dv_launch(A, ka_empty, G1, B1, 0, DV_STREAM_NONE, NULL, 0));
    ROW("dv_launch", DV_EINVAL, "grid 0x1x1", dv_launch(A, ka_empty, G0, B1, 0, 0, NULL, 0));
    ROW("dv_launch", DV_EINVAL, "block 0x1x1", dv_launch(A, ka_empty, G1, BLK0, 0, 0, NULL, 0));
    ROW("dv_launch", DV_EINVAL, "block 2048x1x1",
        dv_launch(A, ka_empty, G1, BX2048, 0, 0, NULL, 0));
    ROW("dv_launch", DV_EINVAL, "block 32x32x2 (2048 threads) [silent]",
        dv_launch(A, ka_empty, G1, B2048, 0, 0, NULL, 0));
    ROW("dv_launch", DV_EINVAL, "block 1x1x65", dv_launch(A, ka_empty, G1, BZ65, 0, 0, NULL, 0));
    ROW("dv_launch", DV_EINVAL, "grid 1x65536x1", dv_launch(A, ka_empty, GY, B1, 0, 0, NULL, 0));
    ROW("dv_launch", DV_EINVAL, "grid 2^31x1x1 [silent: CUDA's limit]",
        dv_launch(A, ka_empty, GX, B1, 0, 0, NULL, 0));
    ROW("dv_launch", DV_EINVAL, "UINT32_MAX bytes of shared memory [silent]",
        dv_launch(A, ka_empty, G1, B1, UINT32_MAX, 0, NULL, 0));
    ROW("dv_launch", DV_EINVAL, "argument DV_REF_NULL",
        dv_launch(A, ka_fill, G1, B256, 0, 0, fill(dv_arg_ref(DV_REF_NULL, DV_WRITE, 0)), 3));
    ROW("dv_launch", DV_ESTALE, "argument released",
        dv_launch(A, ka_fill, G1, B256, 0, 0, fill(dv_arg_ref(released, DV_WRITE, 0)), 3));
    ROW("dv_launch", DV_EINVAL, "argument of another actor (B's)",
        dv_launch(A, ka_fill, G1, B256, 0, 0, fill(dv_arg_ref(bx, DV_WRITE, 0)), 3));
    ROW("dv_launch", DV_EINVAL, "argument of another driver's actor",
        dv_launch(A, ka_fill, G1, B256, 0, 0, fill(dv_arg_ref(other_h, DV_WRITE, 0)), 3));
    ROW("dv_launch", DV_ESTALE, "argument of a destroyed actor",
        dv_launch(A, ka_fill, G1, B256, 0, 0, fill(dv_arg_ref(dead_h, DV_WRITE, 0)), 3));
    ROW("dv_launch", DV_ESTALE, "argument of a shut-down actor",
        dv_launch(A, ka_fill, G1, B256, 0, 0, fill(dv_arg_ref(shut_h, DV_WRITE, 0)), 3));
    ROW("dv_launch", DV_EINVAL, "argument of random bits (not this actor's) [silent]",
        dv_launch(A, ka_fill, G1, B256, 0, 0, fill(dv_arg_ref(junk, DV_WRITE, 0)), 3));
    ROW("dv_launch", DV_ESTALE, "argument from before dv_actor_reset",
        dv_launch(RS, kreset_fill, G1, B256, 0, 0, fill(dv_arg_ref(reset_h, DV_WRITE, 0)), 3));
    ROW("dv_launch", DV_EOUT_OF_BUDGET, "argument whose allocation was refused",
        dv_launch(A, ka_fill, G1, B256, 0, 0, fill(dv_arg_ref(failed, DV_WRITE, 0)), 3));
    ROW("dv_launch", DV_EINVAL, "access 0",
        dv_launch(A, ka_fill, G1, B256, 0, 0, fill(ref_access(x, 0)), 3));
    ROW("dv_launch", DV_EINVAL, "access 4",
        dv_launch(A, ka_fill, G1, B256, 0, 0, fill(ref_access(x, 4)), 3));
    ROW("dv_launch", DV_EINVAL, "access 255",
        dv_launch(A, ka_fill, G1, B256, 0, 0, fill(ref_access(x, 255)), 3));
    ROW("dv_launch", DV_EINVAL, "argument kind 7",
        dv_launch(A, ka_fill, G1, B256, 0, 0, fill(of_kind(7)), 3));
    ROW("dv_launch", DV_EINVAL, "handle offset at the end of the block",
        dv_launch(A, ka_fill, G1, B256, 0, 0, fill(dv_arg_ref(x, DV_WRITE, NB)), 3));
    ROW("dv_launch", DV_EINVAL, "handle offset UINT64_MAX",
        dv_launch(A, ka_fill, G1, B256, 0, 0, fill(dv_arg_ref(x, DV_WRITE, UINT64_MAX)), 3));
    ROW("dv_launch", DV_ESTREAM_MISUSE, "a raw device pointer on a strict actor",
        dv_launch(A, ka_fill, G1, B256, 0, 0, fill(dv_arg_ptr(device_ptr_of(x))), 3));
    ROW("dv_launch", DV_EINVAL, "a value of 3 bytes (1, 2, 4 or 8)",
        dv_launch(A, ka_spin, G1, B1, 0, 0, one(value_of_size(3)), 1));
    ROW("dv_launch", DV_EINVAL, "2 arguments to a kernel of 3",
        dv_launch(A, ka_fill, G1, B256, 0, 0, fill(dv_arg_ref(x, DV_WRITE, 0)), 2));
    ROW("dv_launch", DV_EINVAL, "an argument to a kernel of none",
        dv_launch(A, ka_empty, G1, B1, 0, 0, one(dv_arg_u64(0)), 1));
    ROW("dv_launch", DV_EINVAL, "8 bytes for a parameter of 4",
        dv_launch(A, ka_fill, G1, B256, 0, 0, fill_second(dv_arg_u64(7)), 3));
    ROW("dv_launch", DV_EINVAL, "a handle for a parameter of 4",
        dv_launch(A, ka_fill, G1, B256, 0, 0, fill_second(dv_arg_ref(y, DV_READ, 0)), 3));
    ROW("dv_launch", DV_EINVAL, "a by-value argument at NULL",
        dv_launch(A, ka_fill, G1, B256, 0, 0, fill_second(dv_arg_bytes(NULL, 4)), 3));
    ROW("dv_launch", DV_EINVAL, "a by-value argument of 0 bytes",
        dv_launch(A, ka_fill, G1, B256, 0, 0, fill_second(dv_arg_bytes(some_bytes, 0)), 3));
    ROW("dv_launch", DV_EINVAL, "a by-value argument of DV_ARG_MAX_BYTES + 1 bytes",
        dv_launch(A, ka_fill, G1, B256, 0, 0,
                  fill_second(dv_arg_bytes(some_bytes, DV_ARG_MAX_BYTES + 1)), 3));
    ROW("dv_launch", DV_ESHUTDOWN, "after shutdown", dv_launch(SD, kshut, G1, B1, 0, 0, NULL, 0));
    ROW("dv_launch_async", DV_EINVAL, "NULL future",
        dv_launch_async(A, ka_empty, G1, B1, 0, 0, NULL, 0, NULL));
    ROW("dv_launch_async", DV_EINVAL, "NULL actor",
        dv_launch_async(NULL, ka_empty, G1, B1, 0, 0, NULL, 0, FUT));
    ROW("dv_launch_async", DV_EINVAL, "NULL kernel",
        dv_launch_async(A, NULL, G1, B1, 0, 0, NULL, 0, FUT));
    ROW("dv_launch_async", DV_EINVAL, "DV_LAUNCH_MAX_ARGS + 1 arguments",
        dv_launch_async(A, ka_empty, G1, B1, 0, 0, too_many(), DV_LAUNCH_MAX_ARGS + 1, FUT));
    ROW("dv_launch_async", DV_EINVAL, "a kernel of another actor (on its future)",
        settle(dv_launch_async(A, kb_empty, G1, B1, 0, 0, NULL, 0, FUT)));
    ROW("dv_launch_async", DV_ESTALE, "argument released (on its future)",
        settle(dv_launch_async(A, ka_fill, G1, B256, 0, 0, fill(dv_arg_ref(released, DV_WRITE, 0)),
                               3, FUT)));
    ROW("dv_launch_async", DV_EINVAL, "a future never set up",
        dv_launch_async(A, ka_empty, G1, B1, 0, 0, NULL, 0, &garbage));
    ROW("dv_launch_async", DV_ESHUTDOWN, "after shutdown",
        dv_launch_async(SD, kshut, G1, B1, 0, 0, NULL, 0, FUT));
}

static void table_tasks(void)
{
    ROW("dv_task", DV_EINVAL, "NULL actor", dv_task(NULL, count_task, NULL, 0, NULL, 0));
    ROW("dv_task", DV_EINVAL, "NULL function", dv_task(A, NULL, NULL, 0, NULL, 0));
    ROW("dv_task", DV_EINVAL, "DV_LAUNCH_MAX_ARGS + 1 arguments",
        dv_task(A, count_task, NULL, 0, too_many(), DV_LAUNCH_MAX_ARGS + 1));
    ROW("dv_task", DV_EINVAL, "1 argument, NULL args", dv_task(A, count_task, NULL, 0, NULL, 1));
    ROW("dv_task", DV_EINVAL, "stream == streams", dv_task(A, count_task, NULL, STREAMS, NULL, 0));
    ROW("dv_task", DV_EINVAL, "DV_STREAM_NONE",
        dv_task(A, count_task, NULL, DV_STREAM_NONE, NULL, 0));
    ROW("dv_task", DV_EINVAL, "argument DV_REF_NULL",
        dv_task(A, count_task, NULL, 0, one(dv_arg_ref(DV_REF_NULL, DV_READ, 0)), 1));
    ROW("dv_task", DV_ESTALE, "argument released",
        dv_task(A, count_task, NULL, 0, one(dv_arg_ref(released, DV_READ, 0)), 1));
    ROW("dv_task", DV_EINVAL, "argument of another actor (B's)",
        dv_task(A, count_task, NULL, 0, one(dv_arg_ref(bx, DV_READ, 0)), 1));
    ROW("dv_task", DV_ESTALE, "argument of a destroyed actor",
        dv_task(A, count_task, NULL, 0, one(dv_arg_ref(dead_h, DV_READ, 0)), 1));
    ROW("dv_task", DV_ESTALE, "argument from before dv_actor_reset",
        dv_task(RS, count_task, NULL, 0, one(dv_arg_ref(reset_h, DV_READ, 0)), 1));
    ROW("dv_task", DV_EOUT_OF_BUDGET, "argument whose allocation was refused",
        dv_task(A, count_task, NULL, 0, one(dv_arg_ref(failed, DV_READ, 0)), 1));
    ROW("dv_task", DV_EINVAL, "access 0",
        dv_task(A, count_task, NULL, 0, one(ref_access(x, 0)), 1));
    ROW("dv_task", DV_EINVAL, "a value of 3 bytes (1, 2, 4 or 8)",
        dv_task(A, count_task, NULL, 0, one(value_of_size(3)), 1));
    ROW("dv_task", DV_EINVAL, "a by-value argument at NULL",
        dv_task(A, count_task, NULL, 0, one(dv_arg_bytes(NULL, 16)), 1));
    ROW("dv_task", DV_EINVAL, "a by-value argument of 0 bytes",
        dv_task(A, count_task, NULL, 0, one(dv_arg_bytes(some_bytes, 0)), 1));
    ROW("dv_task", DV_EINVAL, "a by-value argument of DV_ARG_MAX_BYTES + 1 bytes",
        dv_task(A, count_task, NULL, 0, one(dv_arg_bytes(some_bytes, DV_ARG_MAX_BYTES + 1)), 1));
    ROW("dv_task", DV_EINVAL, "argument kind 7",
        dv_task(A, count_task, NULL, 0, one(of_kind(7)), 1));
    ROW("dv_task", DV_EINVAL, "handle offset at the end of the block",
        dv_task(A, count_task, NULL, 0, one(dv_arg_ref(x, DV_READ, NB)), 1));
    ROW("dv_task", DV_ESTREAM_MISUSE, "a raw device pointer on a strict actor (as dv_launch)",
        dv_task(A, count_task, NULL, 0, one(dv_arg_ptr(device_ptr_of(x))), 1));
    ROW("dv_task", DV_ESHUTDOWN, "after shutdown", dv_task(SD, count_task, NULL, 0, NULL, 0));
    ROW("dv_task_async", DV_EINVAL, "NULL future",
        dv_task_async(A, count_task, NULL, 0, NULL, 0, NULL));
    ROW("dv_task_async", DV_EINVAL, "NULL actor",
        dv_task_async(NULL, count_task, NULL, 0, NULL, 0, FUT));
    ROW("dv_task_async", DV_EINVAL, "NULL function", dv_task_async(A, NULL, NULL, 0, NULL, 0, FUT));
    ROW("dv_task_async", DV_ESTALE, "argument released (on its future)",
        settle(
            dv_task_async(A, count_task, NULL, 0, one(dv_arg_ref(released, DV_READ, 0)), 1, FUT)));
    ROW("dv_task_async", DV_EINVAL, "a future never set up",
        dv_task_async(A, count_task, NULL, 0, NULL, 0, &garbage));
    ROW("dv_task_async", DV_ESHUTDOWN, "after shutdown",
        dv_task_async(SD, count_task, NULL, 0, NULL, 0, FUT));

    /* Inside a task: the ctx must be the running task's, on its thread. */
    static const dv_task_ctx zeroed;
    ROW("dv_task_launch", DV_EINVAL, "NULL context",
        dv_task_launch(NULL, ka_empty, G1, B1, 0, NULL, 0));
    ROW("dv_task_launch", DV_EINVAL, "a zeroed context (not inside a task)",
        dv_task_launch(&zeroed, ka_empty, G1, B1, 0, NULL, 0));
    ROW("dv_task_launch", DV_EINVAL, "the context of a task that returned",
        dv_task_launch(&stale_ctx, ka_empty, G1, B1, 0, NULL, 0));
    ROW("dv_task_launch", DV_EINVAL,
        "a running task's context, from another thread (a child process)", in_child("task_launch"));
    ROW("dv_task_launch", DV_EINVAL, "NULL kernel", in_task(P_LAUNCH_NULL_KERNEL));
    ROW("dv_task_launch", DV_EINVAL, "a kernel of another actor", in_task(P_LAUNCH_KERNEL_OF_B));
    ROW("dv_task_launch", DV_EINVAL, "a kernel of a destroyed actor",
        in_task(P_LAUNCH_KERNEL_OF_DESTROYED));
    ROW("dv_task_launch", DV_EINVAL, "DV_LAUNCH_MAX_ARGS + 1 arguments",
        in_task(P_LAUNCH_TOO_MANY));
    ROW("dv_task_launch", DV_EINVAL, "3 arguments, NULL args", in_task(P_LAUNCH_NULL_ARGS));
    ROW("dv_task_launch", DV_EINVAL, "argument DV_REF_NULL", in_task(P_LAUNCH_REF_NULL));
    ROW("dv_task_launch", DV_ESTALE, "argument released", in_task(P_LAUNCH_REF_RELEASED));
    ROW("dv_task_launch", DV_EINVAL, "argument of another actor (B's)", in_task(P_LAUNCH_REF_OF_B));
    ROW("dv_task_launch", DV_ESTALE, "argument of a destroyed actor",
        in_task(P_LAUNCH_REF_OF_DESTROYED));
    ROW("dv_task_launch", DV_EINVAL, "access 0", in_task(P_LAUNCH_ACCESS_0));
    ROW("dv_task_launch", DV_EINVAL, "argument kind 7", in_task(P_LAUNCH_KIND_7));
    ROW("dv_task_launch", DV_EINVAL, "handle offset at the end of the block",
        in_task(P_LAUNCH_OFFSET_END));
    ROW("dv_task_launch", DV_EHAZARD, "a handle the task did not declare",
        in_task(P_LAUNCH_UNDECLARED));
    ROW("dv_task_launch", DV_EHAZARD, "writing a handle the task declared DV_READ",
        in_task(P_LAUNCH_WRITE_DECLARED_READ));
    ROW("dv_task_launch", DV_EINVAL, "2 arguments to a kernel of 3", in_task(P_LAUNCH_COUNT));
    ROW("dv_task_launch", DV_EINVAL, "a by-value argument at NULL", in_task(P_LAUNCH_BYTES_NULL));
    ROW("dv_task_launch", DV_EINVAL, "grid 0x1x1 [silent: as dv_launch]", in_task(P_LAUNCH_GRID_0));
    ROW("dv_task_launch", DV_EINVAL, "block 2048x1x1 [silent: as dv_launch]",
        in_task(P_LAUNCH_BLOCK_2048));

    ROW("dv_task_host_fn", DV_EINVAL, "NULL context", dv_task_host_fn(NULL, no_op, NULL));
    ROW("dv_task_host_fn", DV_EINVAL, "a zeroed context", dv_task_host_fn(&zeroed, no_op, NULL));
    ROW("dv_task_host_fn", DV_EINVAL, "the context of a task that returned",
        dv_task_host_fn(&stale_ctx, no_op, NULL));
    ROW("dv_task_host_fn", DV_EINVAL,
        "a running task's context, from another thread (a child process)",
        in_child("task_host_fn"));
    ROW("dv_task_host_fn", DV_EINVAL, "NULL function (inside a task)", in_task(P_HOST_FN_NULL));
    ROW("dv_task_host_fn_cleanup", DV_EINVAL, "NULL context",
        dv_task_host_fn_cleanup(NULL, no_op, NULL, NULL));
    ROW("dv_task_host_fn_cleanup", DV_EINVAL, "the context of a task that returned",
        dv_task_host_fn_cleanup(&stale_ctx, no_op, NULL, NULL));
    ROW("dv_task_host_fn_cleanup", DV_EINVAL, "NULL cleanup (inside a task) [silent]",
        in_task(P_CLEANUP_NULL));
    ROW("dv_task_scratch", DV_EINVAL, "NULL context", dv_task_scratch(NULL, 64, &scratch_ptr));
    ROW("dv_task_scratch", DV_EINVAL, "the context of a task that returned",
        dv_task_scratch(&stale_ctx, 64, &scratch_ptr));
    ROW("dv_task_scratch", DV_EINVAL,
        "a running task's context, from another thread (a child process)",
        in_child("task_scratch"));
    ROW("dv_task_scratch", DV_EINVAL, "NULL ptr (inside a task)", in_task(P_SCRATCH_NULL_PTR));
    ROW("dv_task_scratch", DV_EINVAL, "0 bytes (inside a task)", in_task(P_SCRATCH_0));
    ROW("dv_task_scratch", DV_EINVAL, "UINT64_MAX bytes (inside a task)",
        in_task(P_SCRATCH_ABSURD));
    ROW("dv_task_scratch", DV_EINVAL, "DV_TASK_SCRATCH_MAX + 1 blocks in one task [silent]",
        in_task(P_SCRATCH_NINTH));
    VAL("dv_task_sim_access", "NULL context: NULL",
        dv_task_sim_access(NULL, 0, 16, DV_READ) == NULL);
    VAL("dv_task_sim_access", "a zeroed context: NULL",
        dv_task_sim_access(&zeroed, 0, 16, DV_READ) == NULL);
    VAL("dv_task_sim_access", "the context of a task that returned: NULL",
        dv_task_sim_access(&stale_ctx, stale_ctx.arg[0], 16, DV_READ) == NULL);
    VAL("dv_task_sim_access", "device address 0 (inside a task): NULL",
        in_task(P_SIM_MEMORY_0) == DV_OK);
    VAL("dv_task_sim_access", "UINT64_MAX bytes (inside a task): NULL",
        in_task(P_SIM_MEMORY_ABSURD) == DV_OK);
    VAL("dv_task_sim_access", "a range past every arena (inside a task): NULL",
        in_task(P_SIM_MEMORY_PAST_END) == DV_OK);
    VAL("dv_task_sim_access", "access 0 (inside a task): NULL, DV_EINVAL",
        in_task(P_SIM_ACCESS_NONE) == DV_OK);
    VAL("dv_task_sim_access", "0 bytes (inside a task): NULL, DV_EINVAL",
        in_task(P_SIM_ACCESS_ZERO_BYTES) == DV_OK);

    /* The stream-order checker's host access (B has the checker on). */
    ROW("dv_check_host_access", DV_EINVAL, "NULL actor",
        dv_check_host_access(NULL, host, 16, DV_READ));
    ROW("dv_check_host_access", DV_EINVAL, "NULL buffer",
        dv_check_host_access(B, NULL, 16, DV_READ));
    ROW("dv_check_host_access", DV_EINVAL, "0 bytes", dv_check_host_access(B, host, 0, DV_READ));
    ROW("dv_check_host_access", DV_EINVAL, "access 0",
        dv_check_host_access(B, host, 16, (dv_arg_access)0));
    ROW("dv_check_host_access", DV_EINVAL, "access 4",
        dv_check_host_access(B, host, 16, (dv_arg_access)4));
    ROW("dv_check_host_access", DV_EINVAL, "UINT64_MAX bytes (the range wraps) [silent]",
        dv_check_host_access(B, host, UINT64_MAX, DV_READ));
    ROW("dv_check_host_access", DV_ESHUTDOWN, "after shutdown (checker on)",
        dv_check_host_access(SD, host, 16, DV_READ));

    /* Hand-overs between threads. */
    static dv_order_token tok_a, tok_b, tok_wide;
    if (A != NULL && B != NULL && /* not while counting the rows */
        (dv_order_export(A, &tok_a) != DV_OK || dv_order_export(B, &tok_b) != DV_OK))
        bail_out("set-up: dv_order_export: %s", dv_last_error()->message);
    if (tok_a.streams == 0)
        tok_a.streams = 1; /* not empty: an empty token is nothing from anywhere */
    tok_wide = tok_b;
    tok_wide.streams = DV_ORDER_STREAMS + 1;
    ROW("dv_order_export", DV_EINVAL, "NULL actor", dv_order_export(NULL, &tok_b));
    ROW("dv_order_export", DV_EINVAL, "NULL token", dv_order_export(B, NULL));
    ROW("dv_order_adopt", DV_EINVAL, "NULL actor", dv_order_adopt(NULL, &tok_b));
    ROW("dv_order_adopt", DV_EINVAL, "NULL token", dv_order_adopt(B, NULL));
    ROW("dv_order_adopt", DV_EINVAL, "a token (not empty) of another actor",
        dv_order_adopt(B, &tok_a));
    ROW("dv_order_adopt", DV_EINVAL, "a token of 65 streams", dv_order_adopt(B, &tok_wide));
}

static void table_events(void)
{
    ROW("dv_event_create", DV_EINVAL, "NULL actor", dv_event_create(NULL, 0, &eout));
    ROW("dv_event_create", DV_EINVAL, "NULL out", dv_event_create(A, 0, NULL));
    ROW("dv_event_create", DV_EINVAL, "flags 2", dv_event_create(A, 2, &eout));
    ROW("dv_event_create", DV_EINVAL, "flags UINT32_MAX", dv_event_create(A, UINT32_MAX, &eout));
    ROW("dv_event_create", DV_ESHUTDOWN, "after shutdown", dv_event_create(SD, 0, &eout));

    ROW("dv_event_destroy", DV_EINVAL, "NULL event", dv_event_destroy(NULL));
    ROW("dv_event_destroy", DV_EINVAL, "destroyed already (a double destroy)",
        dv_event_destroy(edestroyed));
    ROW("dv_event_destroy", DV_EINVAL, "its actor destroyed", dv_event_destroy(edead));
    ROW("dv_event_destroy", DV_ESHUTDOWN, "its actor shut down", dv_event_destroy(eshut));

    ROW("dv_event_record", DV_EINVAL, "NULL event", dv_event_record(NULL, 0));
    ROW("dv_event_record", DV_EINVAL, "destroyed", dv_event_record(edestroyed, 0));
    ROW("dv_event_record", DV_EINVAL, "its actor destroyed", dv_event_record(edead, 0));
    ROW("dv_event_record", DV_EINVAL, "stream == streams", dv_event_record(ea, STREAMS));
    ROW("dv_event_record", DV_EINVAL, "DV_STREAM_NONE", dv_event_record(eb, DV_STREAM_NONE));
    ROW("dv_event_record", DV_ESHUTDOWN, "its actor shut down", dv_event_record(eshut, 0));
    ROW("dv_event_record_async", DV_EINVAL, "NULL future", dv_event_record_async(ea, 0, NULL));
    ROW("dv_event_record_async", DV_EINVAL, "NULL event", dv_event_record_async(NULL, 0, FUT));
    ROW("dv_event_record_async", DV_EINVAL, "destroyed", dv_event_record_async(edestroyed, 0, FUT));
    ROW("dv_event_record_async", DV_EINVAL, "stream == streams",
        dv_event_record_async(eb, STREAMS, FUT));
    ROW("dv_event_record_async", DV_EINVAL, "a future never set up",
        refused_record(dv_event_record_async(eb_victim, 0, &garbage), A, eb_victim));
    ROW("dv_event_record_async", DV_ESHUTDOWN, "its actor shut down",
        dv_event_record_async(eshut, 0, FUT));

    ROW("dv_stream_wait_event", DV_EINVAL, "NULL actor", dv_stream_wait_event(NULL, 0, ea));
    ROW("dv_stream_wait_event", DV_EINVAL, "NULL event", dv_stream_wait_event(A, 0, NULL));
    ROW("dv_stream_wait_event", DV_EINVAL, "destroyed", dv_stream_wait_event(A, 0, edestroyed));
    ROW("dv_stream_wait_event", DV_EINVAL, "its actor destroyed",
        dv_stream_wait_event(A, 0, edead));
    ROW("dv_stream_wait_event", DV_EINVAL, "stream == streams",
        dv_stream_wait_event(A, STREAMS, ea));
    ROW("dv_stream_wait_event", DV_EINVAL, "DV_STREAM_NONE",
        dv_stream_wait_event(A, DV_STREAM_NONE, eb));
    ROW("dv_stream_wait_event", DV_EINVAL, "an event of another driver's actor",
        dv_stream_wait_event(A, 0, eother));
    ROW("dv_stream_wait_event", DV_OK,
        "an event recorded before dv_actor_reset (post-only: nothing to wait for) [silent]",
        dv_stream_wait_event(RS, 0, ereset));
    ROW("dv_stream_wait_event", DV_ESHUTDOWN, "its actor shut down",
        dv_stream_wait_event(SD, 0, eshut));

    ROW("dv_event_sync", DV_EINVAL, "NULL event", dv_event_sync(NULL));
    ROW("dv_event_sync", DV_EINVAL, "destroyed", dv_event_sync(edestroyed));
    ROW("dv_event_sync", DV_EINVAL, "its actor destroyed", dv_event_sync(edead));
    ROW("dv_event_sync", DV_ESTALE, "recorded before dv_actor_reset", dv_event_sync(ereset));
    ROW("dv_event_sync", DV_ESHUTDOWN, "its actor shut down", dv_event_sync(eshut));
    ROW("dv_event_sync", DV_EDEADLK, "inside a task on its own actor", in_task(P_BLOCK_EVENT_SYNC));
    ROW("dv_event_sync", DV_EFORKED, "in a child after fork()", after_fork(F_EVENT_SYNC));
    ROW("dv_event_query", DV_EINVAL, "NULL event", dv_event_query(NULL));
    ROW("dv_event_query", DV_EINVAL, "destroyed", dv_event_query(edestroyed));
    ROW("dv_event_query", DV_ESTALE, "recorded before dv_actor_reset", dv_event_query(ereset));
    ROW("dv_event_query", DV_ESHUTDOWN, "its actor shut down", dv_event_query(eshut));

    ROW("dv_event_elapsed", DV_EINVAL, "NULL start", dv_event_elapsed(NULL, ea2, &ms));
    ROW("dv_event_elapsed", DV_EINVAL, "NULL end", dv_event_elapsed(ea, NULL, &ms));
    ROW("dv_event_elapsed", DV_EINVAL, "NULL ms", dv_event_elapsed(ea, ea2, NULL));
    ROW("dv_event_elapsed", DV_EINVAL, "a destroyed start", dv_event_elapsed(edestroyed, ea2, &ms));
    ROW("dv_event_elapsed", DV_EINVAL, "without DV_EVENT_TIMING",
        dv_event_elapsed(ea_plain, ea2, &ms));
    ROW("dv_event_elapsed", DV_EINVAL, "events of different actors", dv_event_elapsed(ea, eb, &ms));
    ROW("dv_event_elapsed", DV_EINVAL, "an event never recorded [silent]",
        dv_event_elapsed(ea, ea_never, &ms));
    ROW("dv_event_elapsed", DV_ESTALE, "recorded before dv_actor_reset",
        dv_event_elapsed(ereset, ereset2, &ms));
    ROW("dv_event_elapsed", DV_ESHUTDOWN, "their actor shut down",
        dv_event_elapsed(eshut, eshut2, &ms));

    VAL("dv_event_native", "NULL event: NULL", dv_event_native(NULL) == NULL);
    VAL("dv_event_native", "destroyed: NULL", dv_event_native(edestroyed) == NULL);
    VAL("dv_event_native", "recorded before dv_actor_reset: NULL", dv_event_native(ereset) == NULL);
}

/* A's thread is held in a task: pend is pending, pend_gone pending and
 * released, busy in flight.  A is not checked row by row (its stats would
 * wait for the task); the phase is checked as a whole after. */
static void table_held(void)
{
    ROW("dv_ref_try_access", DV_EAGAIN, "pending", dv_ref_try_access(pend, &info));
    ROW("dv_ref_try_access", DV_EAGAIN, "pending, NULL info", dv_ref_try_access(pend, NULL));
    ROW("dv_ref_access", DV_ESTALE, "pending and released: answers at once",
        dv_ref_access(pend_gone, &info));
    ROW("dv_ref_try_access", DV_ESTALE, "pending and released",
        dv_ref_try_access(pend_gone, &info));
    ROW("dv_ref_retain", DV_ESTALE, "pending and released", dv_ref_retain(pend_gone));
    ROW("dv_ref_release", DV_ESTALE, "pending and released already (a double release)",
        dv_ref_release(pend_gone));
    ROW("dv_memset", DV_EINVAL, "another actor's pending handle", dv_memset(B, pend, 0, 1, 16, 0));
    ROW("dv_copy_htod", DV_EINVAL, "another actor's pending handle",
        dv_copy_htod(B, pend, 0, host, 16, 0));
    ROW("dv_copy_dtoh", DV_EINVAL, "another actor's pending handle",
        dv_copy_dtoh(B, sink, pend, 0, 16, 0));
    ROW("dv_launch", DV_EINVAL, "argument: another actor's pending handle",
        dv_launch(B, kb_fill, G1, B256, 0, 0, fill(dv_arg_ref(pend, DV_WRITE, 0)), 3));
    ROW("dv_task", DV_EINVAL, "argument: another actor's pending handle",
        dv_task(B, count_task, NULL, 0, one(dv_arg_ref(pend, DV_READ, 0)), 1));
    ROW("dv_copy_htod_async", DV_EINVAL, "pending handle, NULL host buffer: refused at once",
        dv_copy_htod_async(A, pend, 0, NULL, 16, 0, FUT));
    ROW("dv_copy_dtoh_async", DV_EINVAL, "pending handle, 0 bytes: refused at once",
        dv_copy_dtoh_async(A, sink, pend, 0, 0, 0, FUT));

    ROW("dv_future_wait_for", DV_ETIMEDOUT, "in flight, 1 us to complete",
        dv_future_wait_for(&busy, DV_COMPLETE, 1000));
    ROW("dv_future_wait_for", DV_ETIMEDOUT, "in flight, 1 us to be ordered",
        dv_future_wait_for(&busy, DV_ORDERED, 1000));
    VAL("dv_future_done", "in flight: false", !dv_future_done(&busy));
    ROW("dv_alloc_async", DV_EINVAL, "a future in flight",
        dv_alloc_async(B, 16, 0, "t", &out, &busy));
    ROW("dv_alloc_async", DV_EINVAL, "a future in flight (on the busy actor)",
        dv_alloc_async(A, 16, 0, "t", &out, &busy));
    ROW("dv_copy_htod_async", DV_EINVAL, "a future in flight",
        dv_copy_htod_async(B, bx, 0, host, 16, 0, &busy));
    ROW("dv_copy_dtoh_async", DV_EINVAL, "a future in flight",
        dv_copy_dtoh_async(B, sink, bx, 0, 16, 0, &busy));
    ROW("dv_copy_dtod_async", DV_EINVAL, "a future in flight",
        dv_copy_dtod_async(B, bx, 0, bx, 64, 16, 0, &busy));
    ROW("dv_memset_async", DV_EINVAL, "a future in flight",
        dv_memset_async(B, bx, 0, 1, 16, 0, &busy));
    ROW("dv_sync_async", DV_EINVAL, "a future in flight", dv_sync_async(B, 0, &busy));
    ROW("dv_launch_async", DV_EINVAL, "a future in flight",
        dv_launch_async(B, kb_empty, G1, B1, 0, 0, NULL, 0, &busy));
    ROW("dv_task_async", DV_EINVAL, "a future in flight",
        dv_task_async(B, count_task, NULL, 0, NULL, 0, &busy));
    ROW("dv_event_record_async", DV_EINVAL, "a future in flight",
        refused_record(dv_event_record_async(eb_victim2, 0, &busy), A, eb_victim2));
}

/* devactor_sim.h: the sim's own calls (A runs on the sim). */
static void table_sim(void)
{
    uint64_t n = 0;
    VAL("dv_sim_call_name", "UINT_MAX: NULL", dv_sim_call_name(UINT_MAX) == NULL);
    ROW("dv_sim_inject", DV_EINVAL, "NULL actor", dv_sim_inject(NULL, "launch", 1, 1));
    ROW("dv_sim_inject", DV_EINVAL, "NULL call name", dv_sim_inject(A, NULL, 1, 1));
    ROW("dv_sim_inject", DV_EINVAL, "a call name the sim does not have",
        dv_sim_inject(A, "no_such_call", 1, 1));
    ROW("dv_sim_inject", DV_EINVAL, "nth 0 with a code [silent]", dv_sim_inject(A, "launch", 0, 1));
    ROW("dv_sim_fail_alloc", DV_EINVAL, "NULL actor", dv_sim_fail_alloc(NULL, 1));
    ROW("dv_sim_call_count", DV_EINVAL, "NULL actor", dv_sim_call_count(NULL, "launch", &n));
    ROW("dv_sim_call_count", DV_EINVAL, "NULL count", dv_sim_call_count(A, "launch", NULL));
    ROW("dv_sim_call_count", DV_EINVAL, "a call name the sim does not have",
        dv_sim_call_count(A, "no_such_call", &n));
    ROW("dv_sim_poison", DV_EINVAL, "NULL actor", dv_sim_poison(NULL, DV_SIM_POISON_RECOVERABLE));
    ROW("dv_sim_poison", DV_EINVAL, "kind 7", dv_sim_poison(A, (dv_sim_poison_kind)7));
    ROW("dv_sim_poison_at", DV_EINVAL, "NULL actor",
        dv_sim_poison_at(NULL, "launch", 1, DV_SIM_POISON_RECOVERABLE));
    ROW("dv_sim_poison_at", DV_EINVAL, "NULL call name",
        dv_sim_poison_at(A, NULL, 1, DV_SIM_POISON_RECOVERABLE));
    ROW("dv_sim_poison_at", DV_EINVAL, "a call name the sim does not have",
        dv_sim_poison_at(A, "no_such_call", 1, DV_SIM_POISON_RECOVERABLE));
    ROW("dv_sim_poison_at", DV_EINVAL, "nth 0",
        dv_sim_poison_at(A, "launch", 0, DV_SIM_POISON_RECOVERABLE));
    ROW("dv_sim_poison_at", DV_EINVAL, "kind 7",
        dv_sim_poison_at(A, "launch", 1, (dv_sim_poison_kind)7));
    VAL("dv_sim_kmem", "NULL context: NULL", dv_sim_kmem(NULL, 0, 16) == NULL);
    ROW("dv_sim_kgrid", DV_OK, "NULL context: no crash (a child process) [silent]",
        after_fork(F_KGRID_NULL));
    ROW("dv_sim_kblock", DV_OK, "NULL context: no crash (a child process) [silent]",
        after_fork(F_KBLOCK_NULL));
}

/* Page-locked host memory: A's pool buffer, B's, a freed one of A's, a
 * range of the caller's registered with A. */
static void *hbuf_a, *hbuf_b, *hbuf_freed;
static unsigned char hreg[3 * 4096];

static void table_host(void)
{
    static bool made;
    if (A != NULL && B != NULL && !made) { /* not while counting the rows */
        made = true;
        if (dv_host_alloc(A, 8192, &hbuf_a) != DV_OK || dv_host_alloc(B, 8192, &hbuf_b) != DV_OK ||
            dv_host_alloc(A, 8192, &hbuf_freed) != DV_OK || dv_host_free(A, hbuf_freed) != DV_OK ||
            dv_host_register(A, hreg + 4096, 4096) != DV_OK)
            bail_out("set-up: host memory: %s", dv_last_error()->message);
    }
    void *p = NULL;
    unsigned char *a8 = hbuf_a;
    ROW("dv_host_alloc", DV_EINVAL, "NULL actor", dv_host_alloc(NULL, 64, &p));
    ROW("dv_host_alloc", DV_EINVAL, "NULL out", dv_host_alloc(A, 64, NULL));
    ROW("dv_host_alloc", DV_EINVAL, "0 bytes", dv_host_alloc(A, 0, &p));
    ROW("dv_host_alloc", DV_EINVAL, "UINT64_MAX bytes", dv_host_alloc(A, UINT64_MAX, &p));
    VAL("dv_host_alloc", "refused: *out is NULL", p == NULL);
    ROW("dv_host_alloc", DV_ESHUTDOWN, "after shutdown", dv_host_alloc(SD, 64, &p));
    ROW("dv_host_alloc", DV_EDEADLK, "inside a task on its own actor", in_task(P_BLOCK_HOST_ALLOC));
    ROW("dv_host_alloc", DV_EFORKED, "in a child after fork()", after_fork(F_HOST_ALLOC));
    ROW("dv_host_free", DV_EINVAL, "NULL actor", dv_host_free(NULL, hbuf_a));
    ROW("dv_host_free", DV_EINVAL, "NULL pointer", dv_host_free(A, NULL));
    ROW("dv_host_free", DV_EINVAL, "a pointer never allocated (static memory)",
        dv_host_free(A, host));
    ROW("dv_host_free", DV_EINVAL, "a pointer inside a buffer",
        dv_host_free(A, a8 != NULL ? a8 + 16 : host));
    ROW("dv_host_free", DV_EINVAL, "another actor's buffer (B's)", dv_host_free(A, hbuf_b));
    ROW("dv_host_free", DV_EINVAL, "a buffer freed already", dv_host_free(A, hbuf_freed));
    ROW("dv_host_free", DV_EINVAL, "a registered range, not a buffer",
        dv_host_free(A, hreg + 4096));
    ROW("dv_host_free", DV_ESHUTDOWN, "after shutdown", dv_host_free(SD, hbuf_a));
    ROW("dv_host_free", DV_EDEADLK, "inside a task on its own actor", in_task(P_BLOCK_HOST_FREE));
    ROW("dv_host_free", DV_EFORKED, "in a child after fork()", after_fork(F_HOST_FREE));
    ROW("dv_host_register", DV_EINVAL, "NULL actor", dv_host_register(NULL, hreg, 4096));
    ROW("dv_host_register", DV_EINVAL, "NULL pointer", dv_host_register(A, NULL, 4096));
    ROW("dv_host_register", DV_EINVAL, "0 bytes", dv_host_register(A, hreg, 0));
    ROW("dv_host_register", DV_EINVAL, "UINT64_MAX bytes (the range wraps)",
        dv_host_register(A, hreg, UINT64_MAX));
    ROW("dv_host_register", DV_EINVAL, "a range overlapping a registered one",
        dv_host_register(A, hreg, 2 * 4096));
    ROW("dv_host_register", DV_EINVAL, "a buffer of the actor's pool",
        dv_host_register(A, hbuf_a != NULL ? hbuf_a : hreg + 4096, 4096));
    ROW("dv_host_register", DV_ESHUTDOWN, "after shutdown", dv_host_register(SD, hreg, 4096));
    ROW("dv_host_register", DV_EDEADLK, "inside a task on its own actor",
        in_task(P_BLOCK_HOST_REGISTER));
    ROW("dv_host_unregister", DV_EINVAL, "NULL actor", dv_host_unregister(NULL, hreg + 4096));
    ROW("dv_host_unregister", DV_EINVAL, "NULL pointer", dv_host_unregister(A, NULL));
    ROW("dv_host_unregister", DV_EINVAL, "a range never registered", dv_host_unregister(A, hreg));
    ROW("dv_host_unregister", DV_EINVAL, "an address inside a registered range",
        dv_host_unregister(A, hreg + 4096 + 8));
    ROW("dv_host_unregister", DV_EINVAL, "a buffer of the pool", dv_host_unregister(A, hbuf_a));
    ROW("dv_host_unregister", DV_ESHUTDOWN, "after shutdown", dv_host_unregister(SD, hreg));
    ROW("dv_host_unregister", DV_EDEADLK, "inside a task on its own actor",
        in_task(P_BLOCK_HOST_UNREGISTER));
}

static void tables(void)
{
    table_errors();
    table_actors();
    table_refs();
    table_futures();
    table_memory();
    table_kernels();
    table_launch();
    table_tasks();
    table_events();
    table_sim();
    table_host();
}

/* ------------------------------------------------------------------------
 * Set-up and close
 * ------------------------------------------------------------------------ */

static dv_actor *make(dv_driver *shared, int device, bool check)
{
    dv_actor_config conf;
    dv_actor *a = NULL;
    dv_actor_config_init(&conf);
    conf.backend = DV_BACKEND_SIM;
    conf.streams = STREAMS;
    conf.sim_memory_bytes = BIG;
    conf.sim_devices = 2;
    conf.sim_seed = 7;
    conf.check_order = check;
    conf.driver = shared;
    conf.device = device;
    if (dv_actor_create(&conf, &a) != DV_OK)
        bail_out("cannot make an actor: %s", dv_last_error()->message);
    return a;
}

#define MUST(call)                                                                                 \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != DV_OK)                                                                          \
            bail_out("set-up: %s: %s", #call, dv_last_error()->message);                           \
    } while (0)

static void *write_bystander(void *arg)
{
    (void)arg;
    MUST(dv_copy_htod(A, by, 0, pattern, NB, 1));
    return NULL;
}

static int grab_ctx(const dv_task_ctx *ctx, void *user)
{
    (void)user;
    stale_ctx = *ctx;
    return DV_OK;
}

static dv_event *recorded(dv_actor *a, uint32_t flags)
{
    dv_event *e = NULL;
    MUST(dv_event_create(a, flags, &e));
    MUST(dv_event_record(e, 0));
    MUST(dv_event_sync(e));
    return e;
}

static void setup(void)
{
    dv_actor_config conf;
    dv_actor_config_init(&conf);
    conf.backend = DV_BACKEND_SIM;
    conf.streams = STREAMS;
    conf.sim_memory_bytes = BIG;
    conf.sim_devices = 2;
    conf.budget_bytes = BUDGET;
    if (dv_actor_create(&conf, &A) != DV_OK)
        bail_out("cannot make actor A: %s", dv_last_error()->message);
    B = make(dv__actor_driver(A), 1, true);
    RS = make(NULL, 0, false);
    SD = make(NULL, 0, true);
    XD = make(NULL, 0, false);
    DD = make(NULL, 0, false);

    MUST(dv_kernel_get(A, NULL, 0, "empty", &ka_empty));
    MUST(dv_kernel_get(A, NULL, 0, "fill_u32", &ka_fill));
    MUST(dv_kernel_get(A, NULL, 0, "spin", &ka_spin));
    MUST(dv_kernel_get(B, NULL, 0, "empty", &kb_empty));
    MUST(dv_kernel_get(B, NULL, 0, "fill_u32", &kb_fill));
    MUST(dv_kernel_get(RS, NULL, 0, "fill_u32", &kreset_fill));
    MUST(dv_kernel_get(SD, NULL, 0, "empty", &kshut));
    MUST(dv_kernel_get(XD, NULL, 0, "empty", &kother));
    MUST(dv_kernel_get(DD, NULL, 0, "empty", &kdead));

    MUST(dv_alloc(A, NB, 0, "x", &x));
    MUST(dv_alloc(A, NB, 0, "y", &y));
    MUST(dv_alloc(A, NB, 0, "live", &live));
    MUST(dv_alloc(A, NB, 0, "bystander", &by));
    MUST(dv_alloc(A, NB, 0, "released", &released));
    MUST(dv_ref_release(released));
    MUST(dv_alloc(A, BUDGET * 2, 0, "refused", &failed));
    if (dv_ref_access(failed, &info) != DV_EOUT_OF_BUDGET)
        bail_out("set-up: an allocation over the budget was not refused");
    MUST(dv_alloc(B, NB, 0, "bx", &bx));
    MUST(dv_alloc(B, NB, 0, "blive", &blive));
    MUST(dv_alloc(RS, NB, 0, "before reset", &reset_h));
    MUST(dv_alloc(SD, NB, 0, "shut", &shut_h));
    MUST(dv_alloc(XD, NB, 0, "other", &other_h));
    MUST(dv_alloc(DD, NB, 0, "dead", &dead_h));
    junk_dom.bits = (x.bits & UINT64_C(0xFF00000000000000)) | UINT64_C(0x0000ABCD12345678);
    for (int i = 0; i < NB; i++) {
        host[i] = (uint8_t)i;
        pattern[i] = (uint8_t)(i * 37 + 11);
    }
    MUST(dv_memset(A, x, 0, 0, NB, 0));
    MUST(dv_memset(A, y, 0, 0, NB, 0));
    MUST(dv_memset(B, bx, 0, 0, NB, 0));
    MUST(dv_flush(A));
    /* The bystander is written by another thread. */
    pthread_t t;
    pthread_create(&t, NULL, write_bystander, NULL);
    pthread_join(t, NULL);

    ea = recorded(A, DV_EVENT_TIMING);
    ea2 = recorded(A, DV_EVENT_TIMING);
    ea_plain = recorded(A, 0);
    MUST(dv_event_create(A, DV_EVENT_TIMING, &ea_never));
    eb = recorded(B, DV_EVENT_TIMING);
    eb_victim = recorded(B, 0);
    eb_victim2 = recorded(B, 0);
    eother = recorded(XD, 0);
    eshut = recorded(SD, DV_EVENT_TIMING);
    eshut2 = recorded(SD, DV_EVENT_TIMING);
    ereset = recorded(RS, DV_EVENT_TIMING);
    ereset2 = recorded(RS, DV_EVENT_TIMING);
    edead = recorded(DD, 0);
    /* Made last: a destroyed event's memory is reused by the next one made. */
    MUST(dv_event_create(A, 0, &edestroyed));
    MUST(dv_event_destroy(edestroyed));
    MUST(dv_flush(A));

    dv_future_init(&never, 0);
    memset(&garbage, 0x5A, sizeof(garbage));
    dv_future_init(&done_f, 0);
    MUST(dv_sync_async(A, 0, &done_f));
    MUST(dv_future_wait(&done_f));
    MUST(dv_task(A, grab_ctx, NULL, 0, one(dv_arg_ref(x, DV_READ, 0)), 1));

    MUST(dv_actor_reset(RS));
    MUST(dv_alloc(RS, NB, 0, "rlive", &rlive));
    MUST(dv_actor_shutdown(SD));
    MUST(dv_actor_destroy(DD));
    DD = NULL;
}

static int cmp_count(const void *p, const void *q)
{
    return strcmp(((const struct fn_count *)p)->fn, ((const struct fn_count *)q)->fn);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0)
        return child_main(argv[2]);

    tables();
    table_held();
    int planned = nrows;
    counting = false;
    nrows = 0;
    plan(planned + 2);
    setup();
    pthread_t waiter;
    pthread_create(&waiter, NULL, waiter_main, NULL);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tables();

    /* ---- held: A's thread in a task until let_go */
    world phase_before;
    world_take(&phase_before);
    dv_future_init(&busy, 0);
    atomic_store(&let_go, false);
    MUST(dv_task_async(A, hold_task, NULL, 0, NULL, 0, &busy));
    MUST(dv_alloc(A, NB, 0, "pending", &pend));
    MUST(dv_alloc(A, NB, 0, "pending, released", &pend_gone));
    MUST(dv_ref_release(pend_gone));
    held = true;
    table_held();
    held = false;
    atomic_store(&let_go, true);
    int busy_rc = dv_future_wait(&busy);
    /* The held phase's probes: their waits return now that A runs. */
    bool probes_done = true;
    for (int i = held_probes_from; i >= 0 && i < nprobes; i++) {
        for (int k = 0; k < 1000 && !atomic_load(&probe_slots[i].done); k++) {
            struct timespec t = {0, 1000000};
            nanosleep(&t, NULL);
        }
        probes_done =
            probes_done && atomic_load(&probe_slots[i].done) && probe_slots[i].rc == DV_OK;
    }
    int pend_rc = dv_ref_access(pend, &info);
    MUST(dv_ref_release(pend));
    world phase_after;
    world_take(&phase_after);
    ok(busy_rc == DV_OK && pend_rc == DV_OK && phase_after.refs[0] == phase_before.refs[0] &&
           phase_after.bytes[0] == phase_before.bytes[0] && bystander_intact() &&
           live_works(A, live, 0x77) && probes_done,
       "held phase: the task finished (%s), the pending handle settled (%s), A's waits on an "
       "event whose record was refused returned (%s), and A is as "
       "before (refs %llu -> %llu, bytes %llu -> %llu), its bystander and live handle intact",
       dv_err_name(busy_rc), dv_err_name(pend_rc), probes_done ? "yes" : "no",
       (unsigned long long)phase_before.refs[0], (unsigned long long)phase_after.refs[0],
       (unsigned long long)phase_before.bytes[0], (unsigned long long)phase_after.bytes[0]);
    clock_gettime(CLOCK_MONOTONIC, &t1);

    /* ---- close: release what the fixture holds, nothing may be left */
    dv_ref mine[] = {x, y, live, by, failed};
    for (size_t i = 0; i < sizeof(mine) / sizeof(mine[0]); i++)
        (void)dv_ref_release(mine[i]);
    (void)dv_ref_release(bx);
    (void)dv_ref_release(blive);
    dv_event *evs[] = {ea, ea2, ea_plain, ea_never, eb, eb_victim, eb_victim2};
    for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
        (void)dv_event_destroy(evs[i]);
    dv_actor_stats sa, sb;
    int rca = dv_actor_stats_get(A, &sa), rcb = dv_actor_stats_get(B, &sb);
    ok(rca == DV_OK && rcb == DV_OK && sa.refs_alive == 0 && sa.bytes_outstanding == 0 &&
           sb.refs_alive == 0 && sb.bytes_outstanding == 0,
       "clean close: A holds %llu handles and %llu bytes, B %llu and %llu",
       (unsigned long long)sa.refs_alive, (unsigned long long)sa.bytes_outstanding,
       (unsigned long long)sb.refs_alive, (unsigned long long)sb.bytes_outstanding);

    qsort(counts, (size_t)ncounts, sizeof(counts[0]), cmp_count);
    diag("rows per function (%d rows, %.2f s):", nrows,
         (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    for (int i = 0; i < ncounts; i++)
        diag("  %-26s %d", counts[i].fn, counts[i].rows);

    /* The waiter and any probe that hangs end once the actors stop. */
    pthread_mutex_lock(&W.mu);
    W.quit = true;
    pthread_cond_broadcast(&W.cv);
    pthread_mutex_unlock(&W.mu);
    dv_actor_shutdown(B);
    dv_actor_shutdown(A);
    pthread_join(waiter, NULL);
    for (int i = 0; i < nprobes; i++)
        pthread_join(probes[i], NULL);
    dv_actor_destroy(B);
    dv_actor_destroy(A);
    dv_actor_destroy(RS);
    dv_actor_destroy(SD);
    dv_actor_destroy(XD);
    return tap_done();
}
