/*
 * The message handlers.  Each tracked operation describes its uses and its
 * enqueue; the recorder (recorder.h) does the rest.  Actor thread only.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "actor/nvtx.h"
#include "actor/recorder.h"
#include "base/futex.h"
#include "driver/sim.h"

const char *dv__msg_name(unsigned type)
{
    switch (type) {
#define DV__MSG_NAME(name, what)                                                                   \
    case DV_MSG_##name:                                                                            \
        return what;
        DV_MSG_TYPES(DV__MSG_NAME)
#undef DV__MSG_NAME
    default:
        return "message";
    }
}

/* ------------------------------------------------------------------------
 * Memory
 * ------------------------------------------------------------------------ */

static uint64_t reserved_now(dv_actor *a)
{
    return dv__res_bytes_outstanding(a->bottom) + atomic_load(&a->env.mapped_bytes);
}

void dv__actor_sample_reserved(void *arg)
{
    dv_actor *a = arg;
    if (a->bottom != NULL)
        dv__memstats_reserved(&a->mem, reserved_now(a));
}

/*
 * An allocation the stack refused for want of memory (dv_oom_info):
 * frees in flight reaped, the stack trimmed, the user's function asked,
 * a try after each.  Returns the last try's status; on failure the detail
 * is the stack's, its message saying what was done.
 */
static int alloc_arbitrated(dv_actor *a, const dv_envelope *e, dv_block *b, int rc)
{
    const dv_msg_alloc *m = &e->m.u.alloc;
    dv_tag tag = {m->tag, m->query};
    dv_stream_id s = e->m.stream;
    /* Before the first try, which may have given mappings back already
     * (a pool trims where the device refuses a mapping). */
    uint64_t mapped = atomic_load_explicit(&a->env.mapped_bytes, memory_order_relaxed);
    uint64_t before =
        reserved_now(a) + (a->env.mapped_at_alloc > mapped ? a->env.mapped_at_alloc - mapped : 0);

    if (dv__res_reap_pending(a->stack) == DV_OK &&
        !dv__short_of_memory(rc = dv__res_allocate(a->stack, m->bytes, s, tag, b)))
        return rc;
    /* A trim gives memory back to the device (and the next pass of the
     * work maps it again): not where it could not make room, for a
     * request more than the device or a budget holds, or one a budget
     * refused by its own count with no pool above it (nothing above holds
     * memory for it).  Only the oom function can free live blocks (not
     * for the former). */
    bool for_good = a->env.refused_for_good, pool_above = false, known = false;
    uint64_t free_bytes, total_bytes;
    if (!for_good && rc == DV_EDEVICE_OOM) {
        /* More than the whole device, whatever layer refused it. */
        dv_error_detail refusal = *dv__detail();
        known = dv__drv_mem_info(a->env.ctx, &free_bytes, &total_bytes) == DV_OK;
        for_good = known && m->bytes > total_bytes;
        *dv__detail() = refusal;
    }
    for (const dv_resource *r = a->stack; r != NULL && r != a->env.refused_by; r = r->upstream)
        pool_above = pool_above || dv__res_is_pool(r);
    bool trim = !for_good && (a->env.refused_by == NULL || pool_above);
    uint64_t trimmed = 0;
    if (trim) {
        (void)dv__res_trim_stack(a->stack, &trimmed);
        if (!dv__short_of_memory(rc = dv__res_allocate(a->stack, m->bytes, s, tag, b)))
            return rc;
    }
    uint64_t reclaimed = before > reserved_now(a) ? before - reserved_now(a) : 0;
    if (trimmed > reclaimed)
        reclaimed = trimmed;
    unsigned asked = 0;
    for (uint32_t attempt = 1; a->cfg.oom != NULL && !for_good && attempt <= 4; attempt++) {
        dv_oom_info info = {.device = a->device,
                            .status = rc,
                            .bytes = m->bytes,
                            .live_bytes = a->mem.bytes.current,
                            .reserved_bytes = reserved_now(a),
                            .reclaimed_bytes = reclaimed,
                            .tag = m->tag,
                            .attempt = attempt};
        asked = attempt;
        if (!a->cfg.oom(&info, a->cfg.oom_user))
            break;
        if (!dv__short_of_memory(rc = dv__res_allocate(a->stack, m->bytes, s, tag, b)))
            return rc;
    }
    if (rc == DV_EDEVICE_OOM && dv__detail()->remaining == 0) {
        /* The device's refusal says what the device had left (requested
         * is the caller's bytes already: dv__res_allocate).  A query that
         * fails says nothing here.  Refused for good by that query above,
         * nothing was given back since: its answer stands. */
        dv_error_detail refusal = *dv__detail();
        if ((for_good && known) || dv__drv_mem_info(a->env.ctx, &free_bytes, &total_bytes) == DV_OK)
            refusal.remaining = free_bytes;
        *dv__detail() = refusal;
    }
    dv__detail_append("; reaped, %s%s: %llu reclaimed, %llu live, %llu reserved",
                      trim ? "trimmed" : for_good ? "nothing could make room" : "a trim would not help",
                      asked ? ", oom function asked" : "", (unsigned long long)reclaimed,
                      (unsigned long long)a->mem.bytes.current,
                      (unsigned long long)reserved_now(a));
    return rc;
}

/* Clients wait for memory (dv_alloc_wait): some was released. */
static void memory_released(dv_actor *a)
{
    if (atomic_load_explicit(&a->mem_interest, memory_order_relaxed) != 0)
        dv__memory_waiters_wake(a);
}

void dv__memory_waiters_wake(dv_actor *a)
{
    atomic_fetch_add_explicit(&a->mem_released, 1, memory_order_release);
    dv__futex_wake_all(&a->mem_released);
}

/* The allocation log's row for a refusal the actor answered: its own log
 * layer leaves refusals to it, so that the retries of alloc_arbitrated
 * write nothing and a refusal above the log (the budget) is not lost. */
void dv__log_refused(dv_actor *a, uint32_t thread, uint64_t bytes, dv_stream_id s, dv_tag tag)
{
    if (dv__actor_logs(a)) /* (the log touches no detail) */
        dv__log_refusal(a->sink, thread != 0 ? thread : dv__thread_id(), bytes, s, a->device, tag);
}

static void handle_alloc(dv_actor *a, const dv_envelope *e)
{
    DV_ASSERT_ACTOR(a);
    const dv_msg_alloc *m = &e->m.u.alloc;
    dv_block b;
    int rc = dv__check_stream(&a->env, e->m.stream, "alloc");
    bool reached = rc == DV_OK;
    if (rc == DV_OK)
        rc = dv__res_allocate(a->stack, m->bytes, e->m.stream, (dv_tag){m->tag, m->query}, &b);
    if (dv__short_of_memory(rc))
        rc = alloc_arbitrated(a, e, &b, rc);
    if (rc != DV_OK) {
        if (reached)
            dv__log_refused(a, e->from != NULL ? e->from->tid : 0, m->bytes, e->m.stream,
                            (dv_tag){m->tag, m->query});
        a->mem.failures++;
        if (rc == DV_ECONTEXT_LOST) {
            dv__on_fault(a, rc, e->m.stream, e);
            rc = dv_last_error()->status;
        }
        dv__ref_settle_failed(a->refs, m->ref, rc);
        dv__reply(a, e, rc);
        return;
    }
    dv_ref_slot *slot = dv__ref_settle(a->refs, m->ref, &b);
    dv_assert(slot != NULL);
    slot->poster = e->from->tid;
    slot->born = a->batch_time;
    dv__memstats_alloc(&a->mem, m->tag, m->query, b.requested);
    dv__memstats_reserved(&a->mem, reserved_now(a));
    dv__stat_inc(&a->st_allocs);
    /* A hazard here is the allocator's own: counted, the block kept. */
    if (a->chk != NULL)
        (void)dv__checked(a,
                          dv__checker_alloc(a->chk,
                                            &(dv_chk_block){b.ptr, b.bytes, m->tag, b.generation,
                                                            &slot->pub->exposed, slot->gen},
                                            e->m.stream, dv__know_of(a, e), e->from->id, e->m.seq));
    dv__reply(a, e, DV_OK);
}

static void handle_free(dv_actor *a, const dv_envelope *e)
{
    DV_ASSERT_ACTOR(a);
    dv_ref_slot *slot = dv__ref_lookup_free(a->refs, e->m.u.free.ref);
    if (slot == NULL)
        return; /* already dropped by a rebuild */
    int rc = DV_OK;
    if (slot->status == DV_OK) {
        rc = dv__res_deallocate(a->stack, &slot->block);
        if (rc != DV_OK && rc != DV_ECONTEXT_LOST && dv__res_env_sync(&a->env) == DV_OK) {
            /* The free's fence could not be enqueued: with every stream
             * drained there is nothing left to fence; try once more. */
            rc = dv__res_deallocate(a->stack, &slot->block);
        }
        if (rc != DV_OK && rc != DV_ECONTEXT_LOST)
            dv__stat_inc(&a->st_failures);
        /* The handle is gone either way. */
        dv__memstats_release(&a->mem, slot->block.tag.name, slot->block.tag.query_id,
                             slot->block.requested);
        /* After the resource fenced the free: a use it could not see races. */
        if (rc == DV_OK && a->chk != NULL) {
            (void)dv__checked(a, dv__checker_free(a->chk, slot->block.ptr, slot->block.alloc_stream,
                                                  dv__know_of(a, e), e->from->id, e->m.seq));
            /* Now the free's event, after the checker's step. */
            (void)dv__res_capture_frees(a->stack, slot->block.alloc_stream);
        }
        dv__stat_inc(&a->st_frees);
        if (rc == DV_OK)
            memory_released(a);
    }
    dv__ref_recycle(a->refs, slot);
    if (rc == DV_ECONTEXT_LOST)
        dv__on_fault(a, rc, e->m.stream, e);
}

/* ------------------------------------------------------------------------
 * Copies and sets
 * ------------------------------------------------------------------------ */

/*
 * A copy with host memory that posters found page-locked (a buffer of
 * dv_host_alloc, a registered range) is asynchronous on the stream, and
 * the buffer remembers it (reused only after).  Any other reaching here
 * is one the staging could not take (staging.h): the driver copies it,
 * synchronously for this thread, and it is counted.
 */
static int enqueue_copy(dv_recorder *r, void *arg)
{
    const dv_msg_copy *m = &r->e->m.u.copy;
    const dv_ref_slot *const *slots = arg;
    dv_actor *a = r->a;
    dv_drv_stream *st = a->env.streams[r->stream];
    uint64_t dev = slots[0]->block.ptr + m->offset;
    int rc;
    if (r->e->m.type == DV_MSG_DTOD)
        return dv__drv_memcpy_dtod(st, dev, slots[1]->block.ptr + m->src_offset, m->bytes);
    bool pinned = dv__host_pinned(&a->host, m->other.host, m->bytes);
    if (r->e->m.type == DV_MSG_HTOD)
        rc = dv__drv_memcpy_htod(st, dev, m->other.host, m->bytes);
    else
        rc = dv__drv_memcpy_dtoh(st, m->other.host, dev, m->bytes);
    if (rc == DV_OK && pinned) {
        dv__host_used(a, m->other.host, m->bytes, r->stream);
        dv__eta_transfer(a, r->stream, m->bytes);
    }
    else if (rc == DV_OK)
        dv__stat_inc(&a->st_direct);
    return rc;
}

static void handle_copy(dv_actor *a, const dv_envelope *e)
{
    DV_ASSERT_ACTOR(a);
    static const uint8_t kinds[] = {
        [DV_MSG_HTOD] = DV_CHK_HTOD, [DV_MSG_DTOH] = DV_CHK_DTOH, [DV_MSG_DTOD] = DV_CHK_DTOD};
    const dv_msg_copy *m = &e->m.u.copy;
    const dv_ref_slot *slots[2] = {NULL, NULL};
    dv_recorder r;
    int rc = dv__rec_begin(&r, a, e, kinds[e->m.type], NULL);
    if (rc == DV_OK) {
        dv_access access = e->m.type == DV_MSG_DTOH ? DV_ACCESS_READ : DV_ACCESS_WRITE;
        if ((slots[0] = dv__rec_use(&r, m->dev, m->offset, m->bytes, access)) == NULL)
            rc = dv_last_error()->status;
    }
    if (rc == DV_OK && e->m.type == DV_MSG_DTOD &&
        (slots[1] = dv__rec_use(&r, m->other.src, m->src_offset, m->bytes, DV_ACCESS_READ)) == NULL)
        rc = dv_last_error()->status;
    if (rc == DV_OK && e->m.type == DV_MSG_DTOD && slots[0] == slots[1] &&
        m->offset < m->src_offset + m->bytes && m->src_offset < m->offset + m->bytes)
        /* The device's copy of overlapping ranges is undefined. */
        rc = dv__fail(DV_EINVAL, r.op,
                      "%s: the ranges [%llu, +%llu) and [%llu, +%llu) of one block overlap", r.op,
                      (unsigned long long)m->offset, (unsigned long long)m->bytes,
                      (unsigned long long)m->src_offset, (unsigned long long)m->bytes);
    if (rc == DV_OK && e->m.type != DV_MSG_DTOD)
        dv__rec_host(&r, (uintptr_t)m->other.host, m->bytes,
                     e->m.type == DV_MSG_HTOD ? DV_READ : DV_WRITE);
    if (rc == DV_OK && (rc = dv__rec_run(&r, enqueue_copy, slots)) == DV_OK) {
        dv__stat_inc(&a->st_copies);
        if (dv__complete_later(a, r.stream, e, slots[0]->block.tag.name) == DV_OK)
            return;
        rc = DV_ENOMEM;
    }
    dv__reply(a, e, rc);
}

static int enqueue_memset(dv_recorder *r, void *arg)
{
    const dv_msg_memset *m = &r->e->m.u.memset;
    const dv_ref_slot *slot = arg;
    return dv__drv_memset_d8(r->a->env.streams[r->stream], slot->block.ptr + m->offset, m->value,
                             m->bytes);
}

static void handle_memset(dv_actor *a, const dv_envelope *e)
{
    DV_ASSERT_ACTOR(a);
    const dv_msg_memset *m = &e->m.u.memset;
    dv_ref_slot *slot = NULL;
    dv_recorder r;
    int rc = dv__rec_begin(&r, a, e, DV_CHK_MEMSET, NULL);
    if (rc == DV_OK &&
        (slot = dv__rec_use(&r, m->dst, m->offset, m->bytes, DV_ACCESS_WRITE)) == NULL)
        rc = dv_last_error()->status;
    if (rc == DV_OK && (rc = dv__rec_run(&r, enqueue_memset, slot)) == DV_OK) {
        dv__stat_inc(&a->st_memsets);
        if (dv__complete_later(a, r.stream, e, slot->block.tag.name) == DV_OK)
            return;
        rc = DV_ENOMEM;
    }
    dv__reply(a, e, rc);
}

/*
 * Peer copies, in two steps (client.c): the source's actor fences the
 * block (a READ use on its stream, complete once the device got there, so
 * earlier writes are done), then the destination's actor copies with the
 * destination used for WRITE and answers once the copy finished, so the
 * source is not reused under it.
 */
static int enqueue_nothing(dv_recorder *r, void *arg)
{
    (void)r;
    (void)arg;
    return DV_OK;
}

static int enqueue_peer(dv_recorder *r, void *arg)
{
    const dv_msg_peer *m = &r->e->m.u.peer;
    const dv_ref_slot *dst = arg;
    return dv__drv_memcpy_peer(r->a->env.streams[r->stream], r->a->env.ctx,
                               dst->block.ptr + m->offset, m->src_actor->env.ctx, m->src_ptr,
                               m->bytes);
}

static void handle_peer(dv_actor *a, const dv_envelope *e)
{
    DV_ASSERT_ACTOR(a);
    const dv_msg_peer *m = &e->m.u.peer;
    bool copy = e->m.type == DV_MSG_PEER_COPY;
    dv_ref_slot *slot = NULL;
    dv_recorder r;
    int rc = dv__rec_begin(&r, a, e, copy ? DV_CHK_PEER : DV_CHK_PEER_FROM, NULL);
    if (rc == DV_OK && (slot = dv__rec_use(&r, m->ref, m->offset, m->bytes,
                                           copy ? DV_ACCESS_WRITE : DV_ACCESS_READ)) == NULL)
        rc = dv_last_error()->status;
    if (rc == DV_OK &&
        (rc = dv__rec_run(&r, copy ? enqueue_peer : enqueue_nothing, slot)) == DV_OK) {
        if (copy)
            dv__stat_inc(&a->st_copies);
        if (dv__complete_later(a, r.stream, e, slot->block.tag.name) == DV_OK)
            return;
        rc = DV_ENOMEM;
    }
    dv__reply(a, e, rc);
}

/* ------------------------------------------------------------------------
 * Launches and tasks
 * ------------------------------------------------------------------------ */

typedef struct launch_call {
    dv_drv_func *f;
    dv_dim3 grid, block;
    uint32_t shared;
    unsigned nargs;
    const dv_arg *args;
    uint64_t values[DV_LAUNCH_MAX_ARGS];
    void *params[DV_LAUNCH_MAX_ARGS];
} launch_call;

/* The launch's parameter array.  A by-value argument's bytes are the
 * caller's (values holds their address); every other value is in values. */
static void **launch_params(launch_call *l)
{
    for (unsigned i = 0; i < l->nargs; i++)
        l->params[i] =
            l->args[i].kind == DV_ARG_BYTES ? (void *)(uintptr_t)l->values[i] : &l->values[i];
    return l->nargs ? l->params : NULL;
}

static int enqueue_launch(dv_recorder *r, void *arg)
{
    launch_call *l = arg;
    return dv__drv_launch(l->f, l->grid, l->block, l->shared, r->a->env.streams[r->stream],
                          launch_params(l));
}

/* A launch's kernel: this actor's, and its function in this context. */
static int launch_kernel(dv_actor *a, struct dv_kernel *k, const char *op, dv_drv_func **f)
{
    if (!dv__kernel_owned(a, k))
        return dv__fail(DV_EINVAL, op, "%s: the kernel is not this actor's (dv_kernel_get on it)",
                        op);
    return dv__kernel_func(a, k, f);
}

static void handle_launch(dv_actor *a, const dv_envelope *e)
{
    DV_ASSERT_ACTOR(a);
    const dv_msg_launch *m = &e->m.u.launch;
    launch_call l = {.grid = {m->grid_x, m->grid_y, m->grid_z},
                     .block = {m->block_x, m->block_y, m->block_z},
                     .shared = m->shared_bytes,
                     .nargs = m->nargs,
                     .args = m->args};
    dv_recorder r;
    int rc = launch_kernel(a, m->kernel, "launch", &l.f);
    if (rc == DV_OK)
        rc = dv__kernel_check_args(m->kernel, m->args, m->nargs, "launch");
    if (rc == DV_OK)
        rc = dv__rec_begin(&r, a, e, DV_CHK_LAUNCH, m->kernel->name);
    if (rc == DV_OK)
        rc = dv__rec_args(&r, m->args, m->nargs, l.values, a->cfg.permissive);
    if (rc == DV_OK && (rc = dv__rec_run(&r, enqueue_launch, &l)) == DV_OK) {
        dv__recent_push(a, r.stream, e, m->kernel->name);
        dv__stat_inc(&a->st_launches);
        if (dv__complete_later(a, r.stream, e, m->kernel->name) == DV_OK)
            return;
        rc = DV_ENOMEM;
    }
    dv__reply(a, e, rc);
}

/* A built-in kernel with up to four 8-byte arguments, 1x1x1, untracked
 * (tests and tools; tracked launches take the recorder). */
static void handle_launch_builtin(dv_actor *a, const dv_envelope *e)
{
    DV_ASSERT_ACTOR(a);
    const dv_msg_builtin *m = &e->m.u.builtin;
    struct dv_kernel *k;
    dv_drv_func *f = NULL;
    uint64_t args[4] = {m->args[0], m->args[1], m->args[2], m->args[3]};
    void *params[4] = {&args[0], &args[1], &args[2], &args[3]};
    dv_stream s = e->m.stream;
    int rc = dv__check_stream(&a->env, s, "launch");
    /* Through a kernel handle: the function is looked up once per context,
     * not once per launch. */
    if (rc == DV_OK)
        rc = dv__kernel_find_or_load(a, NULL, 0, m->name, &k);
    if (rc == DV_OK)
        rc = dv__kernel_func(a, k, &f);
    if (rc == DV_OK)
        rc =
            dv__drv_launch(f, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, a->env.streams[s], params);
    if (rc == DV_OK) {
        dv__stat_inc(&a->st_launches);
        /* Only a fault answers now; the launch is enqueued either way. */
        if (a->cfg.synchronous && (rc = dv__drv_stream_sync(a->env.streams[s])) == DV_ECONTEXT_LOST)
            rc = dv__enqueue_failed(a, rc, s, e);
        else if (dv__complete_later(a, s, e, m->name) == DV_OK)
            return;
    } else if (rc == DV_ECONTEXT_LOST) {
        rc = dv__enqueue_failed(a, rc, s, e);
    }
    dv__reply(a, e, rc);
}

typedef struct task_call {
    dv_task_ctx ctx;
    dv_task_fn fn;
    void *user;
} task_call;

static int enqueue_task(dv_recorder *r, void *arg)
{
    task_call *t = arg;
    dv_actor *a = r->a;
    int rc = dv__drv_ctx_make_current(a->env.ctx);
    if (rc != DV_OK)
        return rc;
    t->ctx.native_stream = dv__drv_stream_native(a->env.streams[r->stream]);
    t->ctx.simulated = dv__driver_backend(a->drv) == DV_BACKEND_SIM;
    t->ctx.internal = a;
    t->ctx.context_generation = a->health.context_generation;
    t->ctx.driver_context = a->driver_context;
    a->task_env = r->e;
    a->task_hazard = false;
    a->task_dropped = false;
    a->task_opaque_args = false;
    /* What the task's failure says is its own: nothing from before. */
    dv_error_clear();
    a->task_chk = a->chk != NULL ? &r->chk : NULL;
    rc = dv__task_run(a, r->stream, t->fn, &t->ctx, t->user);
    a->task_chk = NULL;
    /* The task may have enqueued on its native stream at any point: the
     * stream's work moved (a free after it needs a fresh event). */
    dv__drv_stream_touched(a->env.streams[r->stream]);
    rc = dv__user_answer(rc, "task", "task: its function"); /* 12345: DV_EINVAL */
    dv__task_scratch_release(a);
    a->task_env = NULL;
    dv__stat_inc(&a->st_tasks);
    if (a->task_hazard && rc != DV_EHAZARD) {
        /* The task went on after a refused launch: it answers the hazard. */
        pthread_mutex_lock(&a->health_mu);
        *dv__detail() = a->last_hazard;
        pthread_mutex_unlock(&a->health_mu);
        rc = DV_EHAZARD;
    }
    return rc;
}

static void handle_task(dv_actor *a, const dv_envelope *e)
{
    DV_ASSERT_ACTOR(a);
    const dv_msg_task *m = &e->m.u.task;
    task_call t = {
        .ctx = {.actor = a, .device = a->device, .stream = e->m.stream, .nargs = m->nargs},
        .fn = m->fn,
        .user = m->user};
    dv_recorder r;
    int rc = dv__rec_begin(&r, a, e, DV_CHK_TASK, NULL);
    if (rc == DV_OK)
        rc = dv__rec_args(&r, m->args, m->nargs, t.ctx.arg, a->cfg.permissive);
    if (rc == DV_OK) {
        /* Recorded even when the task failed: it may have enqueued work. */
        rc = dv__rec_run(&r, enqueue_task, &t);
        if (t.ctx.internal != NULL)
            dv__recent_push(a, r.stream, e, NULL);
        if (rc == DV_ECONTEXT_LOST) {
            /* A sticky error met inside the task: a fault like a launch's. */
            dv__on_fault(a, rc, r.stream, e);
            rc = dv_last_error()->status ? dv_last_error()->status : rc;
        } else if (rc == DV_OK) {
            if (dv__complete_later(a, r.stream, e, "task") == DV_OK)
                return;
            rc = DV_ENOMEM;
        } else if (t.ctx.internal != NULL &&
                   dv__complete_failed_later(a, r.stream, e, "task") == DV_OK) {
            /* Its function ran and failed: what it enqueued may still run,
             * and the checker counts its declared uses.  The waiter hears
             * the failure once the device passed the task. */
            return;
        }
    }
    dv__reply(a, e, rc);
}

/* A handle a task's launch uses, argument i: one the task declared (the
 * same handle, the range within, the access granted), since its uses
 * were fenced by its declared arguments alone.  DV_EHAZARD (counted, and
 * the task answers it) if not. */
static int task_arg_declared(dv_actor *a, const dv_arg *arg, unsigned i, const char *op)
{
    const dv_msg_task *t = &a->task_env->m.u.task;
    uint8_t granted = 0;
    for (unsigned k = 0; k < t->nargs; k++) {
        const dv_arg *d = &t->args[k];
        if (d->kind != DV_ARG_REF || d->u.ref.bits != arg->u.ref.bits || d->offset > arg->offset)
            continue;
        if (d->bytes != 0 && (arg->bytes == 0 || arg->offset - d->offset + arg->bytes > d->bytes))
            continue; /* (ranges checked against the block already: no wrap) */
        granted |= d->access;
    }
    if ((arg->access & ~granted) == 0)
        return DV_OK;
    a->task_hazard = true;
    return dv__checked(a, dv__fail(DV_EHAZARD, op,
                                   "hazard: %s: argument %u: the task %s this handle's range%s (a "
                                   "task's work is fenced by its declared arguments alone: "
                                   "declare it in dv_task's)",
                                   op, i, granted == 0 ? "did not declare" : "declared",
                                   granted == 0         ? ""
                                   : granted == DV_READ ? " DV_READ only"
                                                        : " DV_WRITE only"));
}

int dv_task_launch(const dv_task_ctx *ctx, dv_kernel *kernel, dv_dim3 grid, dv_dim3 block,
                   uint32_t shared_bytes, const dv_arg *args, unsigned nargs)
{
    static const char op[] = "task_launch";
    dv_actor *a = dv__task_actor(ctx, op);
    if (a == NULL)
        return DV_EINVAL;
    if (kernel == NULL || (nargs > 0 && args == NULL) || nargs > DV_LAUNCH_MAX_ARGS)
        return dv__fail(DV_EINVAL, op, "task_launch: %s",
                        kernel == NULL ? "kernel is NULL" : "bad argument list");
    launch_call l = {
        .grid = grid, .block = block, .shared = shared_bytes, .nargs = nargs, .args = args};
    int rc = launch_kernel(a, kernel, op, &l.f);
    if (rc == DV_OK)
        rc = dv__kernel_check_args(kernel, args, nargs, op);
    if (rc != DV_OK)
        return rc;
    /* Resolved, not fenced: raw pointers pass (on a strict actor too),
     * handles become addresses; the checker sees every access. */
    dv_recorder r;
    dv__rec_begin(&r, a, a->task_env, DV_CHK_TASK_LAUNCH, kernel->name);
    r.op = op; /* failures name this call, not the task's */
    if ((rc = dv__rec_args(&r, args, nargs, l.values, true)) != DV_OK)
        return rc;
    for (unsigned i = 0; i < nargs; i++)
        if (args[i].kind == DV_ARG_REF && (rc = task_arg_declared(a, &args[i], i, op)) != DV_OK)
            return rc;
    /* With the checker on, a raw pointer into a live block lands in what
     * the task declared (or its scratch), with the access it says, as
     * every touch of its work must (dv__task_verify). */
    for (unsigned i = 0; i < nargs && a->chk != NULL; i++)
        if (args[i].kind == DV_ARG_PTR &&
            (rc = dv__task_verify(a, args[i].u.value, args[i].bytes, args[i].access,
                                  "through dv_task_launch")) != DV_OK)
            return rc;
    if (a->chk != NULL) {
        if ((rc = dv__checked(a, dv__checker_check(a->chk, &r.chk))) != DV_OK) {
            a->task_hazard = true;
            return rc;
        }
    }
    if ((rc = dv__drv_launch(l.f, l.grid, l.block, l.shared, dv__task_stream(a, r.stream),
                             launch_params(&l))) != DV_OK)
        return rc; /* a sticky error surfaces at the task's completion */
    if (a->capturing) {
        const void *native = dv__drv_func_native(l.f);
        bool known = false;
        for (unsigned i = 0; i < a->ntask_funcs && !known; i++)
            known = a->task_funcs[i] == native;
        if (!known && a->ntask_funcs < sizeof(a->task_funcs) / sizeof(a->task_funcs[0]))
            a->task_funcs[a->ntask_funcs++] = native;
    }
    if (a->chk != NULL)
        dv__checker_commit(a->chk, &r.chk);
    dv__stat_inc(&a->st_launches);
    return DV_OK;
}

void *dv_task_sim_access(const dv_task_ctx *ctx, uint64_t ptr, uint64_t bytes, dv_arg_access access)
{
    static const char op[] = "task_sim_access";
    dv_actor *a = dv__task_actor(ctx, op);
    if (a == NULL)
        return NULL;
    if (!ctx->simulated) {
        dv__fail(DV_EINVAL, op, "%s: not on the simulated device", op);
        return NULL;
    }
    if (access < DV_READ || access > DV_READ_WRITE) {
        dv__fail(DV_EINVAL, op, "%s: access %d (DV_READ, DV_WRITE or DV_READ_WRITE)", op,
                 (int)access);
        return NULL;
    }
    void *host = bytes != 0 ? dv__sim_host_ptr(a->drv, ptr, bytes) : NULL;
    if (host == NULL) {
        dv__fail(DV_EINVAL, op, "%s: [0x%llx, +%llu) is not device memory", op,
                 (unsigned long long)ptr, (unsigned long long)bytes);
        return NULL;
    }
    if (dv__task_verify(a, ptr, bytes, (uint8_t)access, "through dv_task_sim_access") != DV_OK)
        return NULL;
    return host;
}

/* ------------------------------------------------------------------------
 * The rest
 * ------------------------------------------------------------------------ */

static void handle_sync(dv_actor *a, const dv_envelope *e)
{
    DV_ASSERT_ACTOR(a);
    int rc = dv__check_stream(&a->env, e->m.stream, "sync");
    if (rc == DV_OK) {
        dv__stat_inc(&a->st_syncs);
        /* A point of the sync's own, ordered after what its poster knew
         * (as every operation is; what another thread posts on the
         * stream after it comes after that too): its waiter learns
         * everything the stream had reached, waits included. */
        uint64_t point =
            a->chk != NULL ? dv__checker_point(a->chk, e->m.stream, dv__know_of(a, e)) : 0;
        if (e->m.reply == NULL ||
            dv__complete_at(a, e->m.stream, dv__tracker_mark(a->done, e->m.stream), point, e,
                            "sync") == DV_OK)
            return;
        rc = DV_ENOMEM;
    }
    dv__reply(a, e, rc);
}

struct snapshot_fill {
    dv_snapshot_row *rows;
    size_t n, cap;
};

static void snapshot_one(const dv_ref_slot *s, void *arg)
{
    struct snapshot_fill *f = arg;
    if (f->n == f->cap)
        return;
    f->rows[f->n++] = (dv_snapshot_row){.ptr = s->block.ptr,
                                        .bytes = s->block.bytes,
                                        .requested = s->block.requested,
                                        .query = s->block.tag.query_id,
                                        .born = s->born,
                                        .tag = s->block.tag.name,
                                        .stream = s->block.alloc_stream,
                                        .poster = s->poster,
                                        .device = s->block.device};
}

/* The memory statistics' messages: answered from the actor's counts, in
 * its order (a snapshot sees every allocation and free posted before). */
static int handle_memory(dv_actor *a, const dv_msg_stats *m)
{
    dv_memstats *ms = &a->mem;
    switch ((dv_stats_kind)m->kind) {
    case DV_STATS_MEMORY: {
        dv_memory_stats *out = m->out;
        if (a->bottom != NULL)
            dv__memstats_reserved(ms, reserved_now(a));
        out->bytes = ms->bytes;
        out->blocks = ms->blocks;
        out->reserved = ms->reserved;
        out->host = (dv_memory_counter){atomic_load(&a->host.bytes), atomic_load(&a->host.peak),
                                        atomic_load(&a->host.total)};
        out->pinned =
            (dv_memory_counter){atomic_load(&a->host.reserved), atomic_load(&a->host.reserved_peak),
                                atomic_load(&a->host.reserved_total)};
        out->failures = ms->failures;
        out->tags = dv__memstats_count(ms, DV_MEMORY_BY_TAG);
        out->queries = dv__memstats_count(ms, DV_MEMORY_BY_QUERY);
        return DV_OK;
    }
    case DV_STATS_RESET_PEAKS:
        dv__memstats_reset_peaks(ms);
        atomic_store(&a->host.peak, atomic_load(&a->host.bytes));
        atomic_store(&a->host.reserved_peak, atomic_load(&a->host.reserved));
        return DV_OK;
    case DV_STATS_USAGE: {
        size_t n;
        int rc = dv__memstats_rows(ms, (dv_memory_key)m->by, m->out, m->cap, &n);
        if (rc == DV_OK && m->count != NULL)
            *m->count = n;
        return rc;
    }
    case DV_STATS_SNAPSHOT: {
        struct snapshot_fill f = {NULL, 0, dv__ref_held(a->refs)};
        if (f.cap > 0 && (f.rows = malloc(f.cap * sizeof(*f.rows))) == NULL)
            return dv__fail(DV_ENOMEM, "memory_snapshot",
                            "memory_snapshot: no host memory for %zu rows", f.cap);
        dv__ref_each_live(a->refs, snapshot_one, &f);
        *(dv_snapshot_row **)m->out = f.rows;
        *m->count = f.n;
        return DV_OK;
    }
    case DV_STATS_VISIT: {
        const dv_stack_visit *v = m->out;
        if (a->stack == NULL)
            return dv__fail(DV_ESTALE, "actor_resources", "actor_resources: the actor has no stack");
        int rc = v->fn(a->stack, v->user);
        dv__actor_sample_reserved(a); /* what the function left reserved */
        return rc;
    }
    case DV_STATS_ACTOR:
        break;
    }
    return dv__fail(DV_EINVAL, "stats", "stats: kind %u", m->kind);
}

static void handle_stats(dv_actor *a, const dv_envelope *e)
{
    DV_ASSERT_ACTOR(a);
    if (e->m.u.stats.kind != DV_STATS_ACTOR) {
        dv__reply(a, e, handle_memory(a, &e->m.u.stats));
        return;
    }
    dv_actor_stats *out = e->m.u.stats.out;
    /* In the actor's order: frees queued before this message count as
     * outstanding only until the device reaches them, so wait for that. */
    if (a->stack != NULL) {
        int rc = dv__res_reap_pending(a->stack);
        if (rc == DV_ECONTEXT_LOST)
            dv__on_fault(a, rc, 0, e);
    }
    out->messages = atomic_load(&a->st_messages);
    out->allocs = atomic_load(&a->st_allocs);
    out->frees = atomic_load(&a->st_frees);
    out->copies = atomic_load(&a->st_copies);
    out->memsets = atomic_load(&a->st_memsets);
    out->syncs = atomic_load(&a->st_syncs);
    out->launches = atomic_load(&a->st_launches);
    out->failures = atomic_load(&a->st_failures);
    out->batches = atomic_load(&a->st_batches);
    out->hazards = atomic_load(&a->st_hazards);
    out->tasks = atomic_load(&a->st_tasks);
    out->events = atomic_load(&a->st_events);
    out->bytes_outstanding = a->stack != NULL ? dv__res_bytes_outstanding(a->stack) : 0;
    out->refs_alive = dv__ref_held(a->refs);
    out->client_rings = dv__inbox_clients(a->inbox);
    out->check_pieces = a->chk != NULL ? dv__checker_pieces(a->chk) : 0;
    out->check_bytes = a->chk != NULL ? dv__checker_bytes(a->chk) : 0;
    out->host_bytes = atomic_load(&a->host.bytes);
    out->host_peak = atomic_load(&a->host.peak);
    out->host_buffers = atomic_load(&a->host.buffers);
    out->host_reserved = atomic_load(&a->host.reserved);
    out->host_registered = atomic_load(&a->host.registered);
    out->staged_copies = atomic_load(&a->st_staged);
    out->staged_bytes = atomic_load(&a->st_staged_bytes);
    out->staging_waits = atomic_load(&a->st_staging_waits);
    out->direct_copies = atomic_load(&a->st_direct);
    out->memory_maps = atomic_load(&a->env.maps);
    out->memory_unmaps = atomic_load(&a->env.unmaps);
    out->memory_remaps = atomic_load(&a->env.remaps);
    uint64_t calls[DV_CALL__COUNT];
    dv__driver_call_counts(a->drv, calls);
    out->driver_calls = 0;
    for (int c = 0; c < DV_CALL__COUNT; c++)
        out->driver_calls += calls[c];
    struct timespec cpu;
    out->actor_cpu_ns = clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0
                            ? (uint64_t)cpu.tv_sec * 1000000000u + (uint64_t)cpu.tv_nsec
                            : 0;
    if (e->m.reply != NULL)
        dv__future_complete(e->m.reply, DV_OK);
}

static void handle_reset(dv_actor *a, const dv_envelope *e)
{
    DV_ASSERT_ACTOR(a);
    int rc = dv__drain_device(a);
    if (rc != DV_OK) {
        dv__on_fault(a, rc, 0, e);
        rc = dv_last_error()->status ? dv_last_error()->status : rc;
    } else {
        rc = dv__actor_rebuild(a, true);
    }
    memory_released(a); /* every block went with the old state */
    if (e->m.reply != NULL)
        dv__future_complete(e->m.reply, rc);
}

static void handle_kernel_get(dv_actor *a, const dv_envelope *e)
{
    DV_ASSERT_ACTOR(a);
    const dv_msg_kernel_get *m = &e->m.u.kernel_get;
    struct dv_kernel *k;
    int rc = dv__kernel_find_or_load(a, m->image, m->image_bytes, m->name, &k);
    if (rc == DV_OK && e->m.reply != NULL)
        e->m.reply->value = (uintptr_t)k;
    dv__reply(a, e, rc);
}

static void handle_host_access(dv_actor *a, const dv_envelope *e)
{
    DV_ASSERT_ACTOR(a);
    const dv_msg_host_access *m = &e->m.u.host;
    int rc = DV_OK;
    if (a->chk != NULL)
        rc = dv__checked(a, dv__checker_host_access(a->chk, m->ptr, m->bytes, m->access,
                                                    dv__know_of(a, e), e->from->id, e->m.seq));
    if (e->m.reply != NULL)
        dv__future_complete(e->m.reply, rc);
}

/* A lost actor answers everything at once; a handle's allocation fails. */
static void handle_lost(dv_actor *a, const dv_envelope *e)
{
    DV_ASSERT_ACTOR(a);
    dv_error_detail d;
    if (e->m.type == DV_MSG_HOST_FREE || e->m.type == DV_MSG_HOST_UNREGISTER) {
        dv__handle_hostmem(a, e); /* host memory needs no device */
        return;
    }
    dv__lost_detail(a, &d);
    if (e->m.type == DV_MSG_STAGED_HTOD || e->m.type == DV_MSG_STAGED_DTOH) {
        dv__staged_refuse(e->m.u.staged.job);
    } else if (e->m.type == DV_MSG_ALLOC) {
        *dv__detail() = d;
        dv__ref_settle_failed(a->refs, e->m.u.alloc.ref, DV_EDEVICE_LOST);
    } else if (e->m.type == DV_MSG_FREE) {
        dv_ref_slot *slot = dv__ref_lookup_free(a->refs, e->m.u.free.ref);
        if (slot != NULL)
            dv__ref_recycle(a->refs, slot);
    }
    if (e->m.reply != NULL)
        dv__future_complete_detail(e->m.reply, DV_EDEVICE_LOST, &d);
}

void dv__handle(dv_actor *a, const dv_envelope *e)
{
    DV_ASSERT_ACTOR(a);
    dv__stat_inc(&a->st_messages);
    if (dv__actor_broken(a)) {
        handle_lost(a, e);
        return;
    }
    /* No dv_error_clear here: a failure always writes the detail it
     * reports, and success never reads it.  The log names the thread
     * that posted what the stack does now. */
    a->env.poster = e->from != NULL ? e->from->tid : 0;
    dv__nvtx_push(e->m.type);
    switch ((enum dv_msg_type)e->m.type) {
    case DV_MSG_ALLOC:
        handle_alloc(a, e);
        break;
    case DV_MSG_FREE:
        handle_free(a, e);
        break;
    case DV_MSG_HTOD:
    case DV_MSG_DTOH:
    case DV_MSG_DTOD:
        handle_copy(a, e);
        break;
    case DV_MSG_MEMSET:
        handle_memset(a, e);
        break;
    case DV_MSG_PEER_READ:
    case DV_MSG_PEER_COPY:
        handle_peer(a, e);
        break;
    case DV_MSG_LAUNCH:
        handle_launch(a, e);
        break;
    case DV_MSG_LAUNCH_BUILTIN:
        handle_launch_builtin(a, e);
        break;
    case DV_MSG_TASK:
        handle_task(a, e);
        break;
    case DV_MSG_SYNC:
        handle_sync(a, e);
        break;
    case DV_MSG_FLUSH:
        dv__reply(a, e, DV_OK);
        break;
    case DV_MSG_STATS:
        handle_stats(a, e);
        break;
    case DV_MSG_RESET:
        handle_reset(a, e);
        break;
    case DV_MSG_KERNEL_GET:
        handle_kernel_get(a, e);
        break;
    case DV_MSG_HOST_ACCESS:
        handle_host_access(a, e);
        break;
    case DV_MSG_EVENT_CREATE:
    case DV_MSG_EVENT_DESTROY:
    case DV_MSG_EVENT_RECORD:
    case DV_MSG_EVENT_WAIT:
    case DV_MSG_EVENT_SYNC:
    case DV_MSG_EVENT_QUERY:
    case DV_MSG_EVENT_ELAPSED:
        dv__handle_event(a, e);
        break;
    case DV_MSG_HOST_ALLOC:
    case DV_MSG_HOST_FREE:
    case DV_MSG_HOST_REGISTER:
    case DV_MSG_HOST_UNREGISTER:
        dv__handle_hostmem(a, e);
        break;
    case DV_MSG_STAGING_OPEN:
        dv__handle_staging_open(a, e);
        break;
    case DV_MSG_STAGED_HTOD:
    case DV_MSG_STAGED_DTOH:
        dv__handle_staged(a, e);
        break;
    case DV_MSG_NONE:
    case DV_MSG__COUNT:
        dv__fail(DV_EINVAL, "message", "unknown message type %u", e->m.type);
        dv__reply(a, e, DV_EINVAL);
        break;
    }
    dv__nvtx_pop();
}
