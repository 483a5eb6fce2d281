/*
 * What a task may ask of its actor beyond launches: scratch memory, and
 * host functions with a cleanup.
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
 */
#include <sched.h>
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
    if (rc != DV_OK)
        return rc;
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
        if (dv__res_deallocate(a->stack, b) == DV_OK && a->chk != NULL)
            (void)dv__checked(a, dv__checker_free(a->chk, ptr, s, NULL, a->task_env->from->id,
                                                  a->task_env->m.seq));
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
    int rc = dv__drv_launch_host_fn(a->env.streams[ctx->stream], job_run, j);
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
