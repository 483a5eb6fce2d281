/*
 * What a task may ask of its actor beyond launches: scratch memory, and
 * host functions with a cleanup.  And, with the checker on, what a task
 * really did.
 *
 * Scratch comes from the resource stack on the task's stream and goes
 * back there when the task's function returns: the free is stream-
 * ordered, so the memory is reused only after the work the task enqueued.
 *
 * A host function runs on a thread of the driver (the sim's stream
 * worker, CUDA's callback thread), not the actor's.  Each is wrapped in a
 * job the actor owns: the wrapper marks its thread as serving the actor
 * (so a blocking call there answers DV_EDEADLK instead of waiting for a
 * stream that waits for it), runs the function and its cleanup, and marks
 * the job done; the actor frees done jobs.  A job whose stream never gets
 * there (a sticky fault, a reset) is cleaned up by the actor once the
 * driver can no longer run it: a CAS on the job's state decides which
 * side runs it, so the cleanup runs exactly once.
 *
 * Verifying a task.  With the checker on, what a task's work touches is
 * checked against what it declared (its arguments' accesses, plus its own
 * scratch):
 *   - on the sim, a host function reaches device memory only through
 *     dv_task_sim_access, which names the range and the access;
 *   - on cuda, the task's work is captured: its native_stream is a
 *     capture stream of its stream's own (made on first use), and every
 *     other stream's capture stream captures too while it runs.  When the
 *     function returns, the graph's nodes are read (copies and memsets
 *     with their exact ranges; a kernel's parameter words that point into
 *     a live block as a use of that block, direction unknown), and the
 *     graph runs on the task's stream only when everything checked; work
 *     captured on another stream's capture stream is refused as well.
 *     Kernels dv_task_launch put there were checked as launches.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "actor/actor.h"

enum { JOB_PENDING, JOB_RUNNING, JOB_DONE, JOB_CANCELLED };

struct dv_host_job {
    void (*fn)(void *);
    void (*cleanup)(void *, int);
    void *arg;
    dv_actor *actor;
    _Atomic int state;
    struct dv_host_job *next; /* the actor's list */
};

dv_actor *dv__task_actor(const dv_task_ctx *ctx, const char *op)
{
    dv_actor *a = ctx != NULL ? ctx->internal : NULL;
    /* The context is good only on its actor's thread while the task runs:
     * the thread first (a context handed to another thread is refused
     * without reading the actor's state), then the task. */
    if (a == NULL || dv__serving != a || a->task_env == NULL) {
        dv__fail(DV_EINVAL, op,
                 "%s: not inside a task (the context is good only in the "
                 "task's callback, on its thread)",
                 op);
        return NULL;
    }
    DV_ASSERT_ACTOR(a);
    return a;
}

/* ------------------------------------------------------------------------
 * Scratch
 * ------------------------------------------------------------------------ */

int dv_task_kernel_args_opaque(const dv_task_ctx *ctx)
{
    dv_actor *a = dv__task_actor(ctx, "task_kernel_args_opaque");
    if (a == NULL)
        return dv_last_error()->status;
    a->task_opaque_args = true;
    return DV_OK;
}

int dv_task_scratch(const dv_task_ctx *ctx, uint64_t bytes, uint64_t *ptr)
{
    static const char op[] = "task_scratch";
    dv_actor *a = dv__task_actor(ctx, op);
    if (a == NULL)
        return dv_last_error()->status;
    if (ptr == NULL)
        return dv__fail(DV_EINVAL, op, "%s: NULL ptr", op);
    *ptr = 0;
    if (bytes == 0 || bytes > DV_DRV_MAX_BYTES)
        return dv__fail(DV_EINVAL, op, "%s: %llu bytes", op, (unsigned long long)bytes);
    if (a->nscratch == DV_TASK_SCRATCH_MAX)
        return dv__fail(DV_EINVAL, op, "%s: a task takes at most %d scratch blocks", op,
                        DV_TASK_SCRATCH_MAX);
    dv_block *b = &a->scratch[a->nscratch];
    int rc = dv__res_allocate(a->stack, bytes, ctx->stream, (dv_tag){"task-scratch", 0}, b);
    if (rc != DV_OK) {
        dv__log_refused(a, a->task_env->from != NULL ? a->task_env->from->tid : 0, bytes,
                        ctx->stream, (dv_tag){"task-scratch", 0});
        return rc;
    }
    a->nscratch++;
    *ptr = b->ptr;
    /* The checker knows the memory as fresh, as for dv_alloc: a block
     * freed earlier and handed out again is not a use after free. */
    if (a->chk != NULL)
        (void)dv__checked(a, dv__checker_alloc(a->chk,
                                               &(dv_chk_block){b->ptr, b->bytes, "task-scratch",
                                                               b->generation, NULL, 0},
                                               ctx->stream, NULL, a->task_env->from->id,
                                               a->task_env->m.seq));
    return DV_OK;
}

void dv__task_scratch_release(dv_actor *a)
{
    DV_ASSERT_ACTOR(a);
    /* Used on its own stream only: the free waits for nothing else. */
    for (unsigned i = 0; i < a->nscratch; i++) {
        dv_block *b = &a->scratch[i];
        uint64_t ptr = b->ptr;
        dv_stream s = b->alloc_stream;
        if (dv__res_deallocate(a->stack, b) == DV_OK && a->chk != NULL) {
            (void)dv__checked(a, dv__checker_free(a->chk, ptr, s, NULL, a->task_env->from->id,
                                                  a->task_env->m.seq));
            (void)dv__res_capture_frees(a->stack, s);
        }
    }
    a->nscratch = 0;
}

/* ------------------------------------------------------------------------
 * Host functions
 * ------------------------------------------------------------------------ */

/* On the driver's thread. */
static void job_run(void *arg)
{
    struct dv_host_job *j = arg;
    int expect = JOB_PENDING;
    if (!atomic_compare_exchange_strong_explicit(&j->state, &expect, JOB_RUNNING,
                                                 memory_order_acquire, memory_order_relaxed))
        return; /* cancelled: the actor cleaned it up */
    const void *prev = dv__serve_begin(j->actor);
    if (j->fn != NULL)
        j->fn(j->arg);
    if (j->cleanup != NULL)
        j->cleanup(j->arg, DV_OK);
    dv__serve_end(prev);
    /* Release: the actor frees j after its acquire load sees DONE; nothing
     * here touches j after the store. */
    atomic_store_explicit(&j->state, JOB_DONE, memory_order_release);
}

static int host_job(const dv_task_ctx *ctx, void (*fn)(void *), void (*cleanup)(void *, int),
                    void *arg, const char *op)
{
    dv_actor *a = dv__task_actor(ctx, op);
    if (a == NULL)
        return dv_last_error()->status;
    if (fn == NULL && cleanup == NULL)
        return dv__fail(DV_EINVAL, op, "%s: NULL function", op);
    struct dv_host_job *j = malloc(sizeof(*j));
    if (j == NULL)
        return dv__fail(DV_ENOMEM, op, "%s: out of host memory", op);
    *j = (struct dv_host_job){.fn = fn, .cleanup = cleanup, .arg = arg, .actor = a};
    atomic_init(&j->state, JOB_PENDING);
    int rc = dv__drv_launch_host_fn(dv__task_stream(a, ctx->stream), job_run, j);
    if (rc != DV_OK) {
        free(j); /* never enqueued: the caller still owns arg */
        return rc;
    }
    j->next = a->host_jobs;
    a->host_jobs = j;
    return DV_OK;
}

int dv_task_host_fn(const dv_task_ctx *ctx, void (*fn)(void *), void *arg)
{
    if (fn == NULL)
        return dv__fail(DV_EINVAL, "task_host_fn", "task_host_fn: NULL function");
    return host_job(ctx, fn, NULL, arg, "task_host_fn");
}

int dv_task_host_fn_cleanup(const dv_task_ctx *ctx, void (*fn)(void *),
                            void (*cleanup)(void *arg, int status), void *arg)
{
    if (cleanup == NULL)
        return dv__fail(DV_EINVAL, "task_host_fn_cleanup", "task_host_fn_cleanup: NULL cleanup");
    return host_job(ctx, fn, cleanup, arg, "task_host_fn_cleanup");
}

void dv__host_jobs_sweep(dv_actor *a)
{
    DV_ASSERT_ACTOR(a);
    for (struct dv_host_job **pp = &a->host_jobs; *pp != NULL;) {
        struct dv_host_job *j = *pp;
        /* Acquire: pairs with job_run's release store of DONE. */
        if (atomic_load_explicit(&j->state, memory_order_acquire) == JOB_DONE) {
            *pp = j->next;
            free(j);
        } else {
            pp = &j->next;
        }
    }
}

void dv__host_jobs_cancel(dv_actor *a, int status)
{
    while (a->host_jobs != NULL) {
        struct dv_host_job *j = a->host_jobs;
        int st = JOB_PENDING;
        if (atomic_compare_exchange_strong_explicit(&j->state, &st, JOB_CANCELLED,
                                                    memory_order_acquire, memory_order_acquire)) {
            if (j->cleanup != NULL)
                j->cleanup(j->arg, status);
        } else {
            /* Running on the driver's thread right now: let it finish. */
            while (atomic_load_explicit(&j->state, memory_order_acquire) != JOB_DONE)
                sched_yield();
        }
        a->host_jobs = j->next;
        free(j);
    }
}

/* ------------------------------------------------------------------------
 * Verifying what a task does
 * ------------------------------------------------------------------------ */

int dv__task_verify(dv_actor *a, uint64_t ptr, uint64_t bytes, uint8_t access, const char *via)
{
    if (a->chk == NULL || a->task_chk == NULL)
        return DV_OK;
    uint64_t own[DV_TASK_SCRATCH_MAX][2];
    for (unsigned i = 0; i < a->nscratch; i++) {
        own[i][0] = a->scratch[i].ptr;
        own[i][1] = a->scratch[i].bytes;
    }
    int rc = dv__checked(a, dv__checker_task_verify(a->chk, a->task_chk, (const uint64_t(*)[2])own,
                                                    a->nscratch, ptr, bytes, access, via));
    if (rc != DV_OK)
        a->task_hazard = true;
    return rc;
}

dv_drv_stream *dv__task_stream(dv_actor *a, dv_stream s)
{
    return a->capturing ? a->cap[s] : a->env.streams[s];
}

void dv__task_streams_drop(dv_actor *a)
{
    for (unsigned i = 0; i < DV_MAX_STREAMS; i++) {
        if (a->cap[i] != NULL)
            (void)dv__drv_stream_destroy(a->cap[i]);
        a->cap[i] = NULL;
    }
    a->capturing = false;
}

/* The host functions enqueued since `before` (the head of the list then)
 * never run: their graph was dropped.  Cleanups run now with status. */
static void jobs_drop_since(dv_actor *a, struct dv_host_job *before, int status)
{
    while (a->host_jobs != NULL && a->host_jobs != before) {
        struct dv_host_job *j = a->host_jobs;
        a->host_jobs = j->next;
        if (j->cleanup != NULL)
            j->cleanup(j->arg, status);
        free(j);
    }
}

/* Begin capturing on the task's stream's capture stream (made now if
 * need be) and on every other one there is. */
static int capture_start(dv_actor *a, dv_stream s)
{
    int rc = DV_OK;
    if (a->cap[s] == NULL && (rc = dv__drv_stream_create(a->env.ctx, &a->cap[s])) != DV_OK) {
        a->cap[s] = NULL;
        return rc;
    }
    for (unsigned i = 0; i < a->env.nstreams; i++) {
        if (a->cap[i] == NULL)
            continue;
        if ((rc = dv__drv_capture_begin(a->cap[i])) != DV_OK) {
            dv_error_detail d = *dv_last_error();
            for (unsigned k = 0; k < i; k++) {
                dv_drv_graph *g = NULL;
                if (a->cap[k] != NULL && dv__drv_capture_end(a->cap[k], &g) == DV_OK)
                    dv__drv_graph_destroy(g);
            }
            *dv__detail() = d;
            return rc;
        }
    }
    return DV_OK;
}

static bool task_func(const dv_actor *a, const void *f)
{
    for (unsigned i = 0; i < a->ntask_funcs; i++)
        if (a->task_funcs[i] == f)
            return true;
    return false;
}

static int verify_node(void *self, const dv_drv_node *n)
{
    dv_actor *a = self;
    int rc = DV_OK;
    switch (n->kind) {
    case DV_NODE_KERNEL:
        if (task_func(a, n->func) || !n->words_known || a->task_opaque_args)
            break;
        for (unsigned i = 0; i < n->nwords && rc == DV_OK; i++)
            rc = dv__task_verify(a, n->words[i], 1, 0,
                                 "through a pointer among the parameters of a kernel it enqueued");
        break;
    case DV_NODE_MEMCPY:
        if (n->src_device)
            rc = dv__task_verify(a, n->src, n->src_bytes, DV_READ, "with a copy it enqueued");
        if (rc == DV_OK && n->dst_device)
            rc = dv__task_verify(a, n->dst, n->dst_bytes, DV_WRITE, "with a copy it enqueued");
        break;
    case DV_NODE_MEMSET:
        rc = dv__task_verify(a, n->dst, n->dst_bytes, DV_WRITE, "with a memset it enqueued");
        break;
    default:
        break;
    }
    return rc;
}

/* The function returned: end every capture, check what was captured, and
 * run the task's graph on its stream, or refuse it all. */
static int capture_finish(dv_actor *a, dv_stream s, struct dv_host_job *jobs_before)
{
    int rc = DV_OK;
    dv_drv_graph *own = NULL;
    for (unsigned i = 0; i < a->env.nstreams; i++) {
        if (a->cap[i] == NULL || i == s)
            continue;
        bool any = false;
        (void)dv__drv_capture_any(a->cap[i], &any);
        dv_drv_graph *g = NULL;
        int end = dv__drv_capture_end(a->cap[i], &g);
        dv__drv_graph_destroy(g);
        if (rc == DV_OK && (any || end != DV_OK || g != NULL)) {
            char what[160];
            snprintf(what, sizeof(what), "task (stream %u, client %u msg %u)", s,
                     a->task_env->from->id, a->task_env->m.seq);
            rc = dv__checked(a, dv__fail(DV_EHAZARD, "check_order",
                                         "hazard: %s enqueued work on the native stream of "
                                         "stream %u, not its own: nothing orders that work "
                                         "with the task's fences",
                                         what, i));
            a->task_hazard = true;
        }
    }
    int end = dv__drv_capture_end(a->cap[s], &own);
    if (end != DV_OK) {
        if (rc == DV_OK) {
            dv_error_detail d = *dv_last_error();
            rc = dv__fail(DV_ENOTSUP, "task",
                          "task: its work on native_stream could not be captured for the "
                          "checker (%s: %s); with the checker on, a task must not synchronise "
                          "or query its stream",
                          d.driver_name[0] ? d.driver_name : dv_err_name(d.status), d.message);
        }
    } else if (own != NULL && rc == DV_OK) {
        rc = dv__drv_graph_nodes(own, verify_node, a);
        if (rc == DV_OK && (rc = dv__drv_graph_launch(own, a->env.streams[s])) != DV_OK) {
            dv__drv_graph_destroy(own);
            return rc; /* enqueued in part, maybe: a fault surfaces as one */
        }
    }
    dv__drv_graph_destroy(own);
    if (rc != DV_OK) {
        /* Nothing of the task's work runs: its host functions neither. */
        dv_error_detail d = *dv_last_error();
        jobs_drop_since(a, jobs_before, rc);
        *dv__detail() = d;
        a->task_dropped = true;
    }
    return rc;
}

int dv__task_run(dv_actor *a, dv_stream s, int (*fn)(const dv_task_ctx *, void *), dv_task_ctx *ctx,
                 void *user)
{
    a->ntask_funcs = 0;
    bool capture = a->chk != NULL && !ctx->simulated && capture_start(a, s) == DV_OK;
    if (!capture)
        return fn(ctx, user);
    dv_error_clear();
    struct dv_host_job *before = a->host_jobs;
    ctx->native_stream = dv__drv_stream_native(a->cap[s]);
    a->capturing = true;
    int rc = fn(ctx, user);
    a->capturing = false;
    dv_error_detail d = *dv_last_error();
    int vrc = capture_finish(a, s, before);
    if (vrc == DV_EHAZARD)
        return vrc;
    if (rc != DV_OK || vrc == DV_OK) {
        *dv__detail() = d; /* the function's own failure comes first */
        return rc;
    }
    return vrc;
}
