/*
 * The device actor: its thread, the message handlers, completions, faults
 * and rebuilds (design: actor.h).  Everything here runs on the actor's
 * thread except actor_start / dv_actor_destroy and the process-wide list.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actor/actor.h"
#include "actor/actor_internal.h"
#include "driver/sim.h"

#define BATCH    64
#define MAX_TAGS 1024

/* ------------------------------------------------------------------------
 * The process's actors, and lost drivers
 * ------------------------------------------------------------------------ */

static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static dv_actor *live_actors;

#define MAX_LOST 16
/* Keyed by the driver's serial: a driver's memory may be reused by a
 * later one, its serial never. */
static struct {
    uint64_t serial;
    dv_error_detail fault;
} lost[MAX_LOST];
static atomic_int nlost;

bool dv__driver_lost(const dv_driver *drv, dv_error_detail *fault)
{
    /* Acquire: pairs with the release in dv__actors_lose_driver; the entry
     * is written before the count moves. */
    int n = atomic_load_explicit(&nlost, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        if (lost[i].serial == drv->serial) {
            if (fault != NULL)
                *fault = lost[i].fault;
            return true;
        }
    }
    return false;
}

void dv__lost_detail(const dv_actor *a, dv_error_detail *out)
{
    if (!dv__driver_lost(a->drv, out)) {
        memset(out, 0, sizeof(*out));
        snprintf(out->message, sizeof(out->message), "device %d is lost for this process",
                 a->device);
    }
    out->status = DV_EDEVICE_LOST;
}

void dv__actors_lose_driver(dv_driver *drv, const dv_error_detail *fault)
{
    pthread_mutex_lock(&live_mu);
    if (!dv__driver_lost(drv, NULL)) {
        int n = atomic_load_explicit(&nlost, memory_order_relaxed);
        if (n < MAX_LOST) {
            lost[n].serial = drv->serial;
            lost[n].fault = *fault;
            atomic_store_explicit(&nlost, n + 1, memory_order_release);
        }
    }
    for (dv_actor *a = live_actors; a != NULL; a = a->next_live) {
        if (a->drv != drv)
            continue;
        int st = atomic_load(&a->state);
        if (st == DV_ACTOR_RUNNING || st == DV_ACTOR_REBUILDING)
            atomic_store(&a->state, DV_ACTOR_LOST);
        dv__ref_domain_set_state(a->refs, DV_DOMAIN_LOST);
        pthread_mutex_lock(&a->health_mu);
        if (a->health.first_fault.status == 0)
            a->health.first_fault = *fault;
        a->health.state = DV_ACTOR_LOST;
        pthread_mutex_unlock(&a->health_mu);
        dv__inbox_kick(a->inbox); /* it fails what it holds */
    }
    pthread_mutex_unlock(&live_mu);
}

void dv__actor_link(dv_actor *a)
{
    pthread_mutex_lock(&live_mu);
    a->next_live = live_actors;
    live_actors = a;
    pthread_mutex_unlock(&live_mu);
}

void dv__actor_unlink(dv_actor *a)
{
    pthread_mutex_lock(&live_mu);
    for (dv_actor **pp = &live_actors; *pp != NULL; pp = &(*pp)->next_live) {
        if (*pp == a) {
            *pp = a->next_live;
            break;
        }
    }
    pthread_mutex_unlock(&live_mu);
}

/* The actor is the only writer of its counters: a store, not a locked
 * add (readers on other threads load them relaxed). */
static inline void stat_inc(atomic_uint_fast64_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* ------------------------------------------------------------------------
 * Building the device state
 * ------------------------------------------------------------------------ */

static int build_stack(dv_actor *a)
{
    dv_resource *r = NULL, *top;
    int rc = a->cfg.direct_alloc ? dv__direct_resource_create(&a->env, &r)
                                 : dv__async_resource_create(&a->env, &r);
    if (rc != DV_OK)
        return rc;
    top = r;
    if (a->cfg.pool && !a->cfg.direct_alloc) {
        dv_pool_config pcfg;
        dv__pool_config_init(&pcfg);
        if (a->cfg.pool_initial_bytes)
            pcfg.initial_chunk_bytes = a->cfg.pool_initial_bytes;
        if (a->cfg.pool_max_chunk_bytes)
            pcfg.max_chunk_bytes = a->cfg.pool_max_chunk_bytes;
        if ((rc = dv__pool_resource_create(top, &pcfg, &top)) != DV_OK)
            goto fail;
    }
    if (a->cfg.guard) {
        dv_guard_config gcfg;
        dv__guard_config_init(&gcfg);
        if ((rc = dv__guard_resource_create(top, &gcfg, &top)) != DV_OK)
            goto fail;
    }
    if (a->cfg.log_path != NULL) {
        if (a->sink == NULL && (rc = dv__log_sink_file(a->cfg.log_path, &a->sink)) != DV_OK)
            goto fail;
        if ((rc = dv__logging_resource_create(top, a->sink, &top)) != DV_OK)
            goto fail;
    }
    if (a->cfg.budget_bytes) {
        if ((rc = dv__budget_resource_create(top, a->cfg.budget_bytes, &top)) != DV_OK)
            goto fail;
    }
    a->stack = top;
    return DV_OK;
fail:
    dv__res_destroy_stack(top);
    return rc;
}

/* Context, streams, resources, completion tracker (actor thread). */
int dv__actor_build(dv_actor *a)
{
    int rc = dv__res_env_init(&a->env, a->drv, a->device, a->cfg.streams);
    if (rc != DV_OK)
        return rc;
    (void)dv__drv_pool_set_release_threshold(a->env.ctx, UINT64_MAX);
    if ((rc = build_stack(a)) != DV_OK)
        goto fail_env;
    if ((rc = dv__tracker_create(&a->env, &a->done)) != DV_OK)
        goto fail_stack;
    /* Reuse is checked where devactor's pool hands memory out again; the
     * driver orders its own. */
    if (a->cfg.check_order &&
        (rc = dv__checker_create(&a->env, a->cfg.pool && !a->cfg.direct_alloc, &a->chk)) != DV_OK)
        goto fail_done;
    return DV_OK;
fail_done:
    dv__tracker_destroy(a->done);
    a->done = NULL;
fail_stack:
    dv__res_destroy_stack(a->stack);
    a->stack = NULL;
fail_env:
    dv__res_env_fini(&a->env);
    return rc;
}

/* Drop blocks with the stack, then the rest (actor thread). */
static void teardown(dv_actor *a)
{
    if (a->kernels != NULL)
        (void)dv__drv_module_unload(a->kernels);
    a->kernels = NULL;
    /* Kernel handles stay; their modules go with the context. */
    for (struct dv_kernel *k = a->kernel_list; k != NULL; k = k->next) {
        if (k->module != NULL)
            (void)dv__drv_module_unload(k->module);
        k->module = NULL;
        k->func = NULL;
        k->context = 0;
    }
    if (a->done != NULL)
        dv__tracker_destroy(a->done);
    a->done = NULL;
    if (a->stack != NULL)
        dv__res_destroy_stack(a->stack); /* frees the blocks still live */
    a->stack = NULL;
    dv__checker_destroy(a->chk);
    a->chk = NULL;
}

/* ------------------------------------------------------------------------
 * Completions
 * ------------------------------------------------------------------------ */

static void complete(dv_future *f, int status)
{
    if (f != NULL)
        dv__future_complete(f, status);
}

/* Answer an operation's message, counting a failure. */
static void reply(dv_actor *a, const dv_msg *m, int status)
{
    if (status != DV_OK)
        stat_inc(&a->st_failures);
    complete(m->reply, status);
}

/* The device finished p: its waiter learns how far stream s got. */
static void complete_pending(dv_actor *a, dv_stream s, const dv_pending *p)
{
    if (p->reply != NULL && p->chk_seq != 0)
        p->reply->order = dv__order_make(a->id, s, p->chk_seq);
    complete(p->reply, DV_OK);
}

/* A launch or task went onto stream s: remember it for fault reports. */
static void recent_push(dv_actor *a, dv_stream s, const dv_msg *m, const char *name)
{
    dv_pending_fifo *q = &a->pend[s];
    q->recent[q->recent_next] = (dv_recent){name, m->type, m->producer, m->seq};
    q->recent_next = (q->recent_next + 1) % DV_RECENT;
    if (q->nrecent < DV_RECENT)
        q->nrecent++;
}

static int pending_push(dv_actor *a, dv_stream s, const dv_msg *m, const char *what)
{
    dv_pending_fifo *q = &a->pend[s];
    if (q->count == q->cap) {
        uint32_t cap = q->cap ? q->cap * 2 : 64;
        dv_pending *n = malloc(cap * sizeof(*n));
        if (n == NULL)
            return dv__fail(DV_ENOMEM, "complete", "out of host memory for completions");
        for (uint32_t i = 0; i < q->count; i++)
            n[i] = q->items[(q->head + i) % q->cap];
        free(q->items);
        q->items = n;
        q->cap = cap;
        q->head = 0;
    }
    q->items[(q->head + q->count) % q->cap] = (dv_pending){
        .epoch = dv__tracker_mark(a->done, s),
        .reply = m->reply,
        .type = m->type,
        .producer = m->producer,
        .seq = m->seq,
        .what = what,
        .chk_seq = a->chk != NULL ? dv__checker_stream_seq(a->chk, s) : 0,
    };
    q->count++;
    q->marked = true;
    a->npending++;
    return DV_OK;
}

const char *dv__msg_name(uint8_t type)
{
    switch (type) {
    case DV_MSG_ALLOC:
        return "allocate";
    case DV_MSG_FREE:
        return "free";
    case DV_MSG_HTOD:
        return "copy host->device";
    case DV_MSG_DTOH:
        return "copy device->host";
    case DV_MSG_DTOD:
        return "copy device->device";
    case DV_MSG_PEER_READ:
        return "peer copy (source fence)";
    case DV_MSG_PEER_COPY:
        return "peer copy";
    case DV_MSG_MEMSET:
        return "memset";
    case DV_MSG_SYNC:
        return "sync";
    case DV_MSG_STATS:
        return "statistics";
    case DV_MSG_RESET:
        return "reset";
    case DV_MSG_LAUNCH:
    case DV_MSG_LAUNCH_TRACKED:
        return "launch";
    case DV_MSG_KERNEL_GET:
        return "kernel_get";
    case DV_MSG_TASK:
        return "task";
    case DV_MSG_HOST_ACCESS:
        return "host access";
    default:
        return "message";
    }
}

/* Fail every pending completion with status and detail. */
static void fail_pending(dv_actor *a, int status, const dv_error_detail *detail)
{
    for (uint32_t s = 0; s < DV_MAX_STREAMS; s++) {
        dv_pending_fifo *q = &a->pend[s];
        while (q->count > 0) {
            dv_pending *p = &q->items[q->head];
            if (p->reply != NULL)
                dv__future_complete_detail(p->reply, status, detail);
            q->head = (q->head + 1) % q->cap;
            q->count--;
        }
        q->marked = false;
        q->nrecent = 0;
    }
    a->npending = 0;
}

static int rebuild(dv_actor *a);

/*
 * A sticky error surfaced on stream s.  Name what was in flight there,
 * fail everything pending, try to rebuild.
 */
static void on_fault(dv_actor *a, int status, dv_stream s, const dv_msg *culprit)
{
    dv_error_detail d = *dv_last_error();
    char what[160] = "";
    size_t len = 0;

    if (culprit != NULL) {
        const char *call = dv_last_error()->call;
        if (culprit->type == DV_MSG_LAUNCH) /* name the kernel */
            call = (const char *)(uintptr_t)culprit->a;
        else if (culprit->type == DV_MSG_LAUNCH_TRACKED)
            call = ((const struct dv_kernel *)(uintptr_t)culprit->a)->name;
        len += (size_t)snprintf(what, sizeof(what), "%s (%s, message %u of client %u)",
                                dv__msg_name(culprit->type), call != NULL ? call : "-",
                                culprit->seq, culprit->producer);
    } else if (s < DV_MAX_STREAMS) {
        dv_pending_fifo *q = &a->pend[s];
        for (uint32_t i = 0; i < q->count && i < 3 && len < sizeof(what) - 1; i++) {
            dv_pending *p = &q->items[(q->head + i) % q->cap];
            len += (size_t)snprintf(
                what + len, sizeof(what) - len, "%s%s (%s, message %u of client %u)", i ? "; " : "",
                dv__msg_name(p->type), p->what ? p->what : "-", p->seq, p->producer);
        }
        if (q->count > 3 && len < sizeof(what) - 1)
            len += (size_t)snprintf(what + len, sizeof(what) - len, "; and %u more",
                                    q->count - 3);
        /* Launches and tasks nobody waits for: the latest few. */
        for (uint32_t i = 0; i < q->nrecent && len < sizeof(what) - 1; i++) {
            const dv_recent *r = &q->recent[(q->recent_next + DV_RECENT - 1 - i) % DV_RECENT];
            len += (size_t)snprintf(what + len, sizeof(what) - len,
                                    "%s%s (%s, message %u of client %u)", len ? "; " : "",
                                    dv__msg_name(r->type), r->name ? r->name : "-", r->seq,
                                    r->producer);
        }
    }
    d.status = DV_ECONTEXT_LOST;
    char msg[sizeof(d.message)];
    snprintf(msg, sizeof(msg), "device %d: sticky error %s on stream %u; in flight: %.150s",
             a->device, d.driver_name[0] ? d.driver_name : dv_err_name(status), s,
             what[0] ? what : "(nothing tracked)");
    memcpy(d.message, msg, sizeof(d.message));

    pthread_mutex_lock(&a->health_mu);
    if (a->health.first_fault.status == 0)
        a->health.first_fault = d;
    pthread_mutex_unlock(&a->health_mu);
    stat_inc(&a->st_failures);
    /* Rebuild (or become LOST) before answering: a caller that sees
     * DV_ECONTEXT_LOST then finds the actor rebuilt or lost. */
    (void)rebuild(a);
    fail_pending(a, DV_ECONTEXT_LOST, &d);
    /* The rebuild's own calls overwrote this thread's detail: the caller of
     * the failed operation gets the fault's. */
    *dv__detail() = d;
}

/* Complete what the device has reached; a query error is a fault. */
static void poll_completions(dv_actor *a)
{
    for (uint32_t s = 0; s < a->env.nstreams && a->npending > 0; s++) {
        dv_pending_fifo *q = &a->pend[s];
        while (q->count > 0) {
            dv_pending *p = &q->items[q->head];
            bool reached = false;
            int rc = dv__tracker_reached(a->done, (dv_stream_pos){s, p->epoch}, &reached);
            if (rc != DV_OK) {
                on_fault(a, rc, s, NULL);
                return;
            }
            if (!reached)
                break;
            complete_pending(a, s, p);
            q->head = (q->head + 1) % q->cap;
            q->count--;
            a->npending--;
        }
    }
}

/* One event per stream that gained completions this batch. */
static void flush_marks(dv_actor *a)
{
    for (uint32_t s = 0; s < a->env.nstreams; s++) {
        if (!a->pend[s].marked)
            continue;
        a->pend[s].marked = false;
        int rc = dv__tracker_flush(a->done, s);
        if (rc != DV_OK) {
            on_fault(a, rc, s, NULL);
            return;
        }
    }
}

/* ------------------------------------------------------------------------
 * Rebuild and LOST
 * ------------------------------------------------------------------------ */

static void become_lost(dv_actor *a, const dv_error_detail *cause)
{
    dv_error_detail d = *cause;
    pthread_mutex_lock(&a->health_mu);
    if (a->health.first_fault.status != 0)
        d = a->health.first_fault;
    pthread_mutex_unlock(&a->health_mu);
    d.status = DV_EDEVICE_LOST;
    dv__actors_lose_driver(a->drv, &d);
}

/*
 * Drop every block and handle, reset the context, make new streams and a
 * new resource stack (actor thread).  Handles of the old context go stale
 * at once; accounting restarts from zero.
 */
static int rebuild(dv_actor *a)
{
    atomic_store(&a->state, DV_ACTOR_REBUILDING);
    pthread_mutex_lock(&a->health_mu);
    a->health.state = DV_ACTOR_REBUILDING;
    pthread_mutex_unlock(&a->health_mu);

    dv__ref_invalidate_all(a->refs, NULL, NULL);
    teardown(a);
    for (uint32_t i = 0; i < a->env.nstreams; i++)
        (void)dv__drv_stream_destroy(a->env.streams[i]);
    a->env.nstreams = 0;
    int rc = dv__drv_ctx_reset(a->env.ctx);
    uint32_t want = a->cfg.streams;
    for (uint32_t i = 0; rc == DV_OK && i < want; i++) {
        rc = dv__drv_stream_create(a->env.ctx, &a->env.streams[i]);
        if (rc == DV_OK)
            a->env.nstreams = i + 1;
    }
    if (rc == DV_OK)
        (void)dv__drv_pool_set_release_threshold(a->env.ctx, UINT64_MAX);
    if (rc == DV_OK)
        rc = build_stack(a);
    if (rc == DV_OK)
        rc = dv__tracker_create(&a->env, &a->done);
    if (rc == DV_OK && a->cfg.check_order)
        rc = dv__checker_create(&a->env, a->cfg.pool && !a->cfg.direct_alloc, &a->chk);
    if (rc != DV_OK) {
        dv_error_detail cause = *dv_last_error();
        become_lost(a, &cause);
        return DV_EDEVICE_LOST;
    }
    pthread_mutex_lock(&a->health_mu);
    a->health.rebuilds++;
    a->health.context_generation = dv__ref_domain_context(a->refs);
    a->health.state = DV_ACTOR_RUNNING;
    pthread_mutex_unlock(&a->health_mu);
    /* A destroy may have begun meanwhile: do not undo its STOPPING. */
    int expect = DV_ACTOR_REBUILDING;
    atomic_compare_exchange_strong(&a->state, &expect, DV_ACTOR_RUNNING);
    return DV_OK;
}

/* Wait for every stream; complete what was pending (explicit reset). */
static int drain_device(dv_actor *a)
{
    int rc = dv__res_env_sync(&a->env);
    if (rc != DV_OK)
        return rc;
    for (uint32_t s = 0; s < a->env.nstreams; s++) {
        dv_pending_fifo *q = &a->pend[s];
        while (q->count > 0) {
            complete_pending(a, s, &q->items[q->head]);
            q->head = (q->head + 1) % q->cap;
            q->count--;
        }
        q->marked = false;
        q->nrecent = 0;
    }
    a->npending = 0;
    return DV_OK;
}

/* ------------------------------------------------------------------------
 * Handlers
 * ------------------------------------------------------------------------ */

static const char *intern_tag(dv_actor *a, const char *tag)
{
    if (tag == NULL)
        return "untagged";
    for (uint32_t i = 0; i < a->ntags; i++)
        if (strcmp(a->tags[i], tag) == 0)
            return a->tags[i];
    if (a->ntags == MAX_TAGS)
        return "other";
    if (a->ntags == a->cap_tags) {
        uint32_t cap = a->cap_tags ? a->cap_tags * 2 : 16;
        char **n = realloc(a->tags, cap * sizeof(*n));
        if (n == NULL)
            return "other";
        a->tags = n;
        a->cap_tags = cap;
    }
    char *copy = strdup(tag);
    if (copy == NULL)
        return "other";
    a->tags[a->ntags++] = copy;
    return copy;
}

/* The live slot of ref and the range [off, off + bytes) inside it. */
static dv_ref_slot *resolve(dv_actor *a, dv_ref ref, uint64_t off, uint64_t bytes, const char *op)
{
    dv_ref_slot *slot = dv__ref_lookup(a->refs, ref, op);
    if (slot == NULL)
        return NULL;
    uint64_t size = slot->block.requested;
    if (bytes == 0 || off > size || bytes > size - off) {
        dv__fail(DV_EINVAL, op, "%s: range [%llu, %llu + %llu) is outside the block's %llu bytes",
                 op, (unsigned long long)off, (unsigned long long)off, (unsigned long long)bytes,
                 (unsigned long long)size);
        dv__detail()->generation = slot->block.generation;
        return NULL;
    }
    return slot;
}

static int check_stream(dv_actor *a, uint32_t s, const char *op)
{
    return dv__check_stream(&a->env, s, op);
}

/* Enqueue failures after prepare: a sticky error is a fault. */
static int enqueue_failed(dv_actor *a, int rc, dv_stream s, const dv_msg *m)
{
    if (rc == DV_ECONTEXT_LOST)
        on_fault(a, rc, s, m);
    return rc;
}

/* ------------------------------------------------------------------------
 * The stream-order checker's side of the handlers
 * ------------------------------------------------------------------------ */

/* A checker verdict: a hazard is counted and kept as the latest. */
static int checked(dv_actor *a, int rc)
{
    if (rc == DV_EHAZARD) {
        stat_inc(&a->st_hazards);
        pthread_mutex_lock(&a->health_mu);
        a->last_hazard = *dv_last_error();
        pthread_mutex_unlock(&a->health_mu);
    }
    return rc;
}

static void handle_alloc(dv_actor *a, const dv_msg *m)
{
    dv_block b;
    dv_ref ref;
    const char *tag = intern_tag(a, (const char *)(uintptr_t)m->b);
    int rc = dv__res_allocate(a->stack, m->a, m->stream, (dv_tag){tag, m->c}, &b);
    if (rc == DV_OK) {
        rc = dv__ref_mint(a->refs, &b, &ref);
        if (rc != DV_OK)
            (void)dv__res_deallocate(a->stack, &b);
    }
    if (rc == DV_OK) {
        stat_inc(&a->st_allocs);
        /* A hazard here is the allocator's own: counted, the block kept. */
        if (a->chk != NULL)
            (void)checked(a, dv__checker_alloc(a->chk, b.ptr, b.bytes, m->stream, tag,
                                              m->producer, m->seq));
        if (m->reply != NULL)
            m->reply->ref = ref;
    } else if (rc == DV_ECONTEXT_LOST) {
        on_fault(a, rc, m->stream, m);
    }
    complete(m->reply, rc);
}

static void handle_free(dv_actor *a, const dv_msg *m)
{
    dv_ref_slot *slot = dv__ref_lookup_dead(a->refs, (dv_ref){m->a});
    if (slot == NULL)
        return; /* already dropped by a rebuild */
    int rc = dv__res_deallocate(a->stack, &slot->block);
    /* After the resource fenced the free: a use it could not see races. */
    if (rc == DV_OK && a->chk != NULL) {
        (void)checked(a, dv__checker_free(a->chk, slot->block.ptr, slot->block.alloc_stream,
                                         m->producer, m->seq));
    }
    dv__ref_recycle(a->refs, slot);
    stat_inc(&a->st_frees);
    if (rc == DV_ECONTEXT_LOST)
        on_fault(a, rc, m->stream, m);
}

/* prepare -> enqueue -> finish for one block (or two for a d2d copy). */
typedef struct use {
    dv_ref_slot *slot;
    dv_access access;
} use;

static int uses_prepare(dv_actor *a, use *u, int n, dv_stream s)
{
    /* The same block twice (read and write): one READ_WRITE. */
    if (n == 2 && u[0].slot == u[1].slot) {
        u[0].access = DV_ACCESS_READ_WRITE;
        n = 1;
    }
    for (int i = 0; i < n; i++) {
        int rc =
            dv__res_prepare_block_use(a->stack, dv__block_id_of(&u[i].slot->block), s, u[i].access);
        if (rc != DV_OK)
            return rc;
    }
    return n;
}

static void uses_finish(dv_actor *a, use *u, int n, dv_stream s)
{
    for (int i = 0; i < n; i++) {
        (void)dv__res_finish_block_use(a->stack, dv__block_id_of(&u[i].slot->block), s, u[i].access);
        if (u[i].access != DV_ACCESS_READ)
            dv__ref_set_last_write(u[i].slot, s);
    }
}

/* Synchronous debug mode: wait for the operation just enqueued, so a
 * fault is pinned on exactly this message.  Its status, or DV_OK. */
static int sync_debug(dv_actor *a, dv_stream s, const dv_msg *m)
{
    if (!a->cfg.synchronous)
        return DV_OK;
    int rc = dv__drv_stream_sync(a->env.streams[s]);
    if (rc == DV_ECONTEXT_LOST)
        on_fault(a, rc, s, m);
    return rc;
}

static void handle_copy(dv_actor *a, const dv_msg *m)
{
    dv_stream s = m->stream;
    use u[2];
    int n = 1, rc;
    const char *op = dv__msg_name(m->type);

    if ((rc = check_stream(a, s, op)) != DV_OK)
        goto done;
    switch (m->type) {
    case DV_MSG_HTOD:   /* a = dst ref, b = dst offset, c = host, d = bytes */
    case DV_MSG_MEMSET: /* a = dst ref, b = offset, c = value, d = bytes */
        u[0] = (use){resolve(a, (dv_ref){m->a}, m->b, m->d, op), DV_ACCESS_WRITE};
        break;
    case DV_MSG_DTOH: /* a = src ref, b = src offset, c = host, d = bytes */
        u[0] = (use){resolve(a, (dv_ref){m->a}, m->b, m->d, op), DV_ACCESS_READ};
        break;
    case DV_MSG_DTOD: /* a = dst, b = dst offset, c = src, d = src offset, e = bytes */
        u[0] = (use){resolve(a, (dv_ref){m->a}, m->b, m->e, op), DV_ACCESS_WRITE};
        u[1] = (use){u[0].slot ? resolve(a, (dv_ref){m->c}, m->d, m->e, op) : NULL, DV_ACCESS_READ};
        n = 2;
        break;
    default:
        rc = DV_EINVAL;
        goto done;
    }
    for (int i = 0; i < n; i++) {
        if (u[i].slot == NULL) {
            rc = dv_last_error()->status;
            goto done;
        }
    }
    int nuse = uses_prepare(a, u, n, s);
    if (nuse < 0) {
        rc = enqueue_failed(a, nuse, s, m); /* a sticky error while fencing */
        goto done;
    }
    dv_chk_op chk_op;
    if (a->chk != NULL) {
        static const uint8_t kinds[] = {[DV_MSG_HTOD] = DV_CHK_HTOD,
                                        [DV_MSG_DTOH] = DV_CHK_DTOH,
                                        [DV_MSG_DTOD] = DV_CHK_DTOD,
                                        [DV_MSG_MEMSET] = DV_CHK_MEMSET};
        bool host = m->type == DV_MSG_HTOD || m->type == DV_MSG_DTOH;
        uint64_t bytes = m->type == DV_MSG_DTOD ? m->e : m->d;
        dv__chk_op_init(&chk_op, kinds[m->type], s, NULL, m->producer, m->seq);
        dv__chk_op_add(&chk_op, u[0].slot->block.ptr + m->b, bytes,
                      m->type == DV_MSG_DTOH ? DV_READ : DV_WRITE, false);
        if (m->type == DV_MSG_DTOD)
            dv__chk_op_add(&chk_op, (n == 2 ? u[1].slot : u[0].slot)->block.ptr + m->d, bytes,
                          DV_READ, false);
        if (host) {
            chk_op.host_known = (const dv_known *)(uintptr_t)m->e; /* the poster's */
            dv__chk_op_add(&chk_op, m->c, bytes, m->type == DV_MSG_HTOD ? DV_READ : DV_WRITE, true);
        }
        if ((rc = checked(a, dv__checker_check(a->chk, &chk_op))) != DV_OK)
            goto done;
    }
    dv_drv_stream *st = a->env.streams[s];
    switch (m->type) {
    case DV_MSG_HTOD:
        rc = dv__drv_memcpy_htod(st, u[0].slot->block.ptr + m->b, (const void *)(uintptr_t)m->c,
                                m->d);
        break;
    case DV_MSG_DTOH:
        rc = dv__drv_memcpy_dtoh(st, (void *)(uintptr_t)m->c, u[0].slot->block.ptr + m->b, m->d);
        break;
    case DV_MSG_MEMSET:
        rc = dv__drv_memset_d8(st, u[0].slot->block.ptr + m->b, (uint8_t)m->c, m->d);
        break;
    case DV_MSG_DTOD: {
        dv_ref_slot *src = n == 2 ? u[1].slot : u[0].slot;
        rc = dv__drv_memcpy_dtod(st, u[0].slot->block.ptr + m->b, src->block.ptr + m->d, m->e);
        break;
    }
    default:
        break;
    }
    if (rc != DV_OK) {
        enqueue_failed(a, rc, s, m);
        goto done;
    }
    uses_finish(a, u, nuse, s);
    if (a->chk != NULL)
        dv__checker_commit(a->chk, &chk_op);
    if (m->type == DV_MSG_MEMSET)
        stat_inc(&a->st_memsets);
    else
        stat_inc(&a->st_copies);
    if ((rc = sync_debug(a, s, m)) != DV_OK)
        goto done;
    /* The host's buffer is in use until the device is done with it. */
    if ((m->type == DV_MSG_HTOD || m->type == DV_MSG_DTOH) && m->reply != NULL) {
        if ((rc = pending_push(a, s, m, u[0].slot->block.tag.name)) == DV_OK)
            return;
    }
done:
    reply(a, m, rc);
}

static void handle_sync(dv_actor *a, const dv_msg *m)
{
    int rc = check_stream(a, m->stream, "sync");
    if (rc == DV_OK) {
        stat_inc(&a->st_syncs);
        if (m->reply == NULL)
            return;
        if ((rc = pending_push(a, m->stream, m, "sync")) == DV_OK)
            return;
    }
    complete(m->reply, rc);
}

static void handle_stats(dv_actor *a, const dv_msg *m)
{
    dv_actor_stats *out = (dv_actor_stats *)(uintptr_t)m->a;
    /* In the actor's order: frees queued before this message count as
     * outstanding only until the device reaches them, so wait for that. */
    if (a->stack != NULL) {
        int rc = dv__res_reap_pending(a->stack);
        if (rc == DV_ECONTEXT_LOST)
            on_fault(a, rc, 0, m);
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
    out->bytes_outstanding = a->stack != NULL ? dv__res_bytes_outstanding(a->stack) : 0;
    out->refs_alive = dv__ref_held(a->refs);
    out->client_rings = dv__inbox_rings(a->inbox);
    complete(m->reply, DV_OK);
}

static void handle_reset(dv_actor *a, const dv_msg *m)
{
    int rc = drain_device(a);
    if (rc != DV_OK) {
        on_fault(a, rc, 0, m);
        complete(m->reply, dv_last_error()->status ? dv_last_error()->status : rc);
        return;
    }
    rc = rebuild(a);
    complete(m->reply, rc);
}

static int kernel_find_or_load(dv_actor *a, const void *image, size_t image_bytes, const char *name,
                               struct dv_kernel **out);
static int kernel_func(dv_actor *a, struct dv_kernel *k, dv_drv_func **out);

/* A built-in kernel with up to four 8-byte arguments, untracked (tests
 * and tools; tracked launches are a layer of their own). */
static void handle_launch(dv_actor *a, const dv_msg *m)
{
    const char *name = (const char *)(uintptr_t)m->a;
    struct dv_kernel *k;
    dv_drv_func *f = NULL;
    uint64_t args[4] = {m->b, m->c, m->d, m->e};
    void *params[4] = {&args[0], &args[1], &args[2], &args[3]};
    int rc = check_stream(a, m->stream, "launch");
    /* Through a kernel handle: the function is looked up once per context,
     * not once per launch. */
    if (rc == DV_OK)
        rc = kernel_find_or_load(a, NULL, 0, name, &k);
    if (rc == DV_OK)
        rc = kernel_func(a, k, &f);
    if (rc == DV_OK)
        rc = dv__drv_launch(f, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, a->env.streams[m->stream],
                           params);
    if (rc == DV_OK) {
        /* sync_debug handles a fault it finds itself. */
        if ((rc = sync_debug(a, m->stream, m)) == DV_OK && m->reply != NULL &&
            (rc = pending_push(a, m->stream, m, name)) == DV_OK)
            return;
    } else if (rc == DV_ECONTEXT_LOST) {
        on_fault(a, rc, m->stream, m);
    }
    complete(m->reply, rc);
}

/*
 * Peer copies, in two steps (dv__actor_peer_copy): the source's actor
 * fences the block (a READ prepared on its stream, answered once the
 * device got there, so earlier writes are done), then the destination's
 * actor copies with the destination fenced for WRITE and answers once the
 * copy finished, so the source is not reused under it.
 */
static void handle_peer(dv_actor *a, const dv_msg *m)
{
    dv_stream s = m->stream;
    const char *op = dv__msg_name(m->type);
    int rc = check_stream(a, s, op);
    if (rc != DV_OK)
        goto done;
    if (m->type == DV_MSG_PEER_READ) { /* a = src ref, b = offset, d = bytes */
        dv_ref_slot *slot = resolve(a, (dv_ref){m->a}, m->b, m->d, op);
        if (slot == NULL) {
            rc = dv_last_error()->status;
            goto done;
        }
        use u = {slot, DV_ACCESS_READ};
        if ((rc = uses_prepare(a, &u, 1, s)) < 0) {
            rc = enqueue_failed(a, rc, s, m);
            goto done;
        }
        uses_finish(a, &u, 1, s);
        rc = pending_push(a, s, m, slot->block.tag.name);
        if (rc == DV_OK)
            return;
        goto done;
    }
    /* PEER_COPY: a = dst ref, b = dst offset, c = src ptr, d = src actor, e = bytes */
    dv_actor *src = (dv_actor *)(uintptr_t)m->d;
    dv_ref_slot *slot = resolve(a, (dv_ref){m->a}, m->b, m->e, op);
    if (slot == NULL) {
        rc = dv_last_error()->status;
        goto done;
    }
    use u = {slot, DV_ACCESS_WRITE};
    if ((rc = uses_prepare(a, &u, 1, s)) < 0) {
        rc = enqueue_failed(a, rc, s, m);
        goto done;
    }
    rc = dv__drv_memcpy_peer(a->env.streams[s], a->env.ctx, slot->block.ptr + m->b, src->env.ctx,
                            m->c, m->e);
    if (rc != DV_OK) {
        enqueue_failed(a, rc, s, m);
        goto done;
    }
    uses_finish(a, &u, 1, s);
    stat_inc(&a->st_copies);
    rc = pending_push(a, s, m, slot->block.tag.name);
    if (rc == DV_OK)
        return;
done:
    reply(a, m, rc);
}

/* The kernel's function in the current context, loading it if needed. */
static int kernel_func(dv_actor *a, struct dv_kernel *k, dv_drv_func **out)
{
    uint64_t ctx = dv__ref_domain_context(a->refs);
    int rc = DV_OK;
    if (k->context != ctx || k->func == NULL) {
        dv_drv_module *mod;
        if (k->image == NULL) {
            if (a->kernels == NULL) {
                const void *image;
                size_t bytes;
                dv__drv_builtin_image(a->drv, &image, &bytes);
                rc = dv__drv_module_load(a->env.ctx, image, bytes, &a->kernels);
            }
            mod = a->kernels;
        } else {
            rc = dv__drv_module_load(a->env.ctx, k->image, k->image_bytes, &k->module);
            mod = k->module;
        }
        if (rc == DV_OK)
            rc = dv__drv_func_get(mod, k->name, &k->func);
        if (rc != DV_OK)
            return rc;
        k->context = ctx;
    }
    *out = k->func;
    return DV_OK;
}

/* The actor's handle for (image, name), made and loaded on first use. */
static int kernel_find_or_load(dv_actor *a, const void *image, size_t image_bytes, const char *name,
                               struct dv_kernel **out)
{
    struct dv_kernel *k;
    dv_drv_func *f;
    int rc;

    for (k = a->kernel_list; k != NULL; k = k->next) {
        if (k->image == image && strcmp(k->name, name) == 0) {
            *out = k;
            return DV_OK;
        }
    }
    if (strlen(name) >= sizeof(k->name))
        return dv__fail(DV_EINVAL, "kernel_get", "kernel_get: name \"%.40s...\" is too long", name);
    k = calloc(1, sizeof(*k));
    if (k == NULL)
        return dv__fail(DV_ENOMEM, "kernel_get", "out of host memory");
    k->image = image;
    k->image_bytes = image_bytes;
    snprintf(k->name, sizeof(k->name), "%s", name);
    /* Load now, so a bad image or name is reported here. */
    if ((rc = kernel_func(a, k, &f)) != DV_OK) {
        if (k->module != NULL)
            (void)dv__drv_module_unload(k->module);
        free(k);
        return rc;
    }
    k->next = a->kernel_list;
    a->kernel_list = k;
    *out = k;
    return DV_OK;
}

static void handle_kernel_get(dv_actor *a, const dv_msg *m)
{
    struct dv_kernel *k;
    int rc = kernel_find_or_load(a, (const void *)(uintptr_t)m->a, m->b,
                                 (const char *)(uintptr_t)m->c, &k);
    if (rc == DV_OK && m->reply != NULL)
        m->reply->value = (uintptr_t)k;
    reply(a, m, rc);
}

/*
 * The recorder's first half, for launches and tasks: every argument
 * resolved (a handle to its device address plus offset), handles checked,
 * uses of one block merged (the strongest access wins).  On any error
 * nothing was enqueued.
 */
static int resolve_args(dv_actor *a, const dv_arg *args, unsigned nargs, uint64_t *values,
                        use *uses, int *nuses_out, bool allow_raw, const char *op)
{
    int nuses = 0;
    for (unsigned i = 0; i < nargs; i++) {
        const dv_arg *arg = &args[i];
        switch (arg->kind) {
        case DV_ARG_VALUE:
            values[i] = arg->u.value;
            break;
        case DV_ARG_PTR:
            if (!allow_raw)
                return dv__fail(DV_ESTREAM_MISUSE, op,
                                "%s: argument %u is a raw device pointer, which a strict actor "
                                "does not accept (it cannot fence it); pass a handle",
                                op, i);
            values[i] = arg->u.ptr;
            break;
        case DV_ARG_REF: {
            if (arg->access < DV_READ || arg->access > DV_READ_WRITE)
                return dv__fail(DV_EINVAL, op, "%s: argument %u has access %u", op, i, arg->access);
            dv_ref_slot *slot = dv__ref_lookup(a->refs, arg->u.ref, op);
            if (slot == NULL)
                return dv_last_error()->status;
            if (arg->offset >= slot->block.requested)
                return dv__fail(DV_EINVAL, op,
                                "%s: argument %u: offset %llu is outside the block's %llu bytes",
                                op, i, (unsigned long long)arg->offset,
                                (unsigned long long)slot->block.requested);
            values[i] = slot->block.ptr + arg->offset;
            int j = 0;
            while (j < nuses && uses[j].slot != slot)
                j++;
            if (j == nuses)
                uses[nuses++] = (use){slot, 0};
            uses[j].access = (dv_access)(uses[j].access | arg->access);
            break;
        }
        default:
            return dv__fail(DV_EINVAL, op, "%s: argument %u has kind %u", op, i, arg->kind);
        }
    }
    if (nuses > 0 && !dv__res_supports_block_use_tracking(a->stack))
        return dv__res_no_tracking(a->stack, op);
    *nuses_out = nuses;
    return DV_OK;
}

/*
 * The checker's view of a launch or task: each handle's block with its
 * merged access, each raw pointer with the access it was given (read-write
 * when none).  DV_OK or DV_EHAZARD (counted); *op is then committed.
 */
static int check_args(dv_actor *a, dv_chk_op *op, dv_chk_kind kind, const char *name,
                      const dv_arg *args, unsigned nargs, const use *uses, int nuses,
                      dv_stream s, const dv_msg *m)
{
    dv__chk_op_init(op, kind, s, name, m->producer, m->seq);
    for (int i = 0; i < nuses; i++)
        dv__chk_op_add(op, uses[i].slot->block.ptr, 0, (uint8_t)uses[i].access, false);
    for (unsigned i = 0; i < nargs; i++)
        if (args[i].kind == DV_ARG_PTR)
            dv__chk_op_add(op, args[i].u.ptr, 0, args[i].access, false);
    return checked(a, dv__checker_check(a->chk, op));
}

/* A launch's arguments, resolved, and its function in this context. */
typedef struct launch_args {
    uint64_t values[DV_LAUNCH_MAX_ARGS];
    void *params[DV_LAUNCH_MAX_ARGS];
    use uses[DV_LAUNCH_MAX_ARGS];
    int nuses;
    dv_drv_func *f;
} launch_args;

static int launch_resolve(dv_actor *a, struct dv_kernel *k, const dv_arg *args, unsigned nargs,
                          bool allow_raw, const char *op, launch_args *l)
{
    l->nuses = 0;
    l->f = NULL;
    int rc = resolve_args(a, args, nargs, l->values, l->uses, &l->nuses, allow_raw, op);
    for (unsigned i = 0; i < nargs; i++)
        l->params[i] = &l->values[i];
    return rc == DV_OK ? kernel_func(a, k, &l->f) : rc;
}

/* Prepare every use on stream s; a sticky error is a fault. */
static int prepare_all(dv_actor *a, use *uses, int nuses, dv_stream s, const dv_msg *m)
{
    for (int i = 0; i < nuses; i++) {
        int rc = dv__res_prepare_block_use(a->stack, dv__block_id_of(&uses[i].slot->block), s,
                                          uses[i].access);
        if (rc != DV_OK)
            return enqueue_failed(a, rc, s, m);
    }
    return DV_OK;
}

/*
 * The launch recorder: validate every argument (nothing is enqueued on
 * any error), merge uses of one block (the strongest access wins),
 * prepare all, launch, finish all.
 */
static void handle_launch_tracked(dv_actor *a, const dv_msg *m)
{
    struct dv_kernel *k = (struct dv_kernel *)(uintptr_t)m->a;
    const dv_arg *args = (const dv_arg *)(uintptr_t)m->b;
    unsigned nargs = (unsigned)(m->c & 0xffffffffu);
    uint32_t shared = (uint32_t)(m->c >> 32);
    dv_dim3 grid = {(uint32_t)m->d, (uint32_t)(m->d >> 32), (uint32_t)(m->e & 0xffff)};
    dv_dim3 block = {(uint32_t)((m->e >> 16) & 0xffff), (uint32_t)((m->e >> 32) & 0xffff),
                     (uint32_t)(m->e >> 48)};
    dv_stream s = m->stream;
    launch_args l;
    int rc = check_stream(a, s, "launch");

    if (rc == DV_OK)
        rc = launch_resolve(a, k, args, nargs, a->cfg.permissive, "launch", &l);
    if (rc != DV_OK)
        goto done;
    if ((rc = prepare_all(a, l.uses, l.nuses, s, m)) != DV_OK)
        goto done;
    dv_chk_op op;
    if (a->chk != NULL &&
        (rc = check_args(a, &op, DV_CHK_LAUNCH, k->name, args, nargs, l.uses, l.nuses, s, m)) !=
            DV_OK)
        goto done;
    rc = dv__drv_launch(l.f, grid, block, shared, a->env.streams[s], nargs ? l.params : NULL);
    if (rc != DV_OK) {
        rc = enqueue_failed(a, rc, s, m);
        goto done;
    }
    uses_finish(a, l.uses, l.nuses, s);
    if (a->chk != NULL)
        dv__checker_commit(a->chk, &op);
    recent_push(a, s, m, k->name);
    stat_inc(&a->st_launches);
    rc = sync_debug(a, s, m);
done:
    reply(a, m, rc);
}

/* A task: the recorder around a callback on this thread. */
static void handle_task(dv_actor *a, const dv_msg *m)
{
    dv_task_fn fn = (dv_task_fn)(uintptr_t)m->a;
    const dv_arg *args = (const dv_arg *)(uintptr_t)m->c;
    unsigned nargs = (unsigned)m->d;
    dv_stream s = m->stream;
    use uses[DV_LAUNCH_MAX_ARGS];
    int nuses = 0;
    dv_task_ctx ctx = {.actor = a, .device = a->device, .stream = s, .nargs = nargs};
    int rc = check_stream(a, s, "task");

    if (rc == DV_OK)
        rc = resolve_args(a, args, nargs, ctx.arg, uses, &nuses, a->cfg.permissive, "task");
    if (rc == DV_OK)
        rc = prepare_all(a, uses, nuses, s, m);
    if (rc == DV_OK)
        rc = dv__drv_ctx_make_current(a->env.ctx);
    if (rc != DV_OK)
        goto done;
    if (a->chk != NULL) {
        /* The declared accesses, at the task's place on the stream; what
         * it launches through dv_task_launch is checked on its own. */
        dv_chk_op op;
        if ((rc = check_args(a, &op, DV_CHK_TASK, NULL, args, nargs, uses, nuses, s, m)) != DV_OK)
            goto done;
        dv__checker_commit(a->chk, &op);
    }
    ctx.native_stream = dv__drv_stream_native(a->env.streams[s]);
    ctx.simulated = dv__driver_backend(a->drv) == DV_BACKEND_SIM;
    ctx.internal = a;
    a->task_msg = m;
    a->task_hazard = false;
    rc = fn(&ctx, (void *)(uintptr_t)m->b);
    a->task_msg = NULL;
    stat_inc(&a->st_tasks);
    if (a->task_hazard && rc != DV_EHAZARD) {
        /* The task went on after a refused launch: it answers the hazard. */
        pthread_mutex_lock(&a->health_mu);
        *dv__detail() = a->last_hazard;
        pthread_mutex_unlock(&a->health_mu);
        rc = DV_EHAZARD;
    }
    /* Recorded even when the task failed: it may have enqueued work. */
    uses_finish(a, uses, nuses, s);
    recent_push(a, s, m, NULL);
    if (rc == DV_ECONTEXT_LOST) {
        /* A sticky error met inside the task: a fault like a launch's. */
        on_fault(a, rc, s, m);
        rc = dv_last_error()->status ? dv_last_error()->status : rc;
    } else if (rc == DV_OK) {
        rc = sync_debug(a, s, m);
    }
done:
    reply(a, m, rc);
}

int dv_task_launch(const dv_task_ctx *ctx, dv_kernel *kernel, dv_dim3 grid, dv_dim3 block,
                   uint32_t shared_bytes, const dv_arg *args, unsigned nargs)
{
    static const char op_name[] = "task_launch";
    if (ctx == NULL || ctx->internal == NULL || ((dv_actor *)ctx->internal)->task_msg == NULL)
        return dv__fail(DV_EINVAL, op_name, "task_launch: not inside a task");
    dv_actor *a = ctx->internal;
    const dv_msg *m = a->task_msg;
    if (kernel == NULL || (nargs > 0 && args == NULL) || nargs > DV_LAUNCH_MAX_ARGS)
        return dv__fail(DV_EINVAL, op_name, "task_launch: %s",
                        kernel == NULL ? "kernel is NULL" : "bad argument list");
    struct dv_kernel *k = a->kernel_list;
    while (k != NULL && k != kernel)
        k = k->next;
    if (k == NULL)
        return dv__fail(DV_EINVAL, op_name, "task_launch: the kernel is not this actor's");

    /* Resolved, not fenced: raw pointers pass (the task is trusted with
     * them), handles become addresses. */
    launch_args l;
    int rc = launch_resolve(a, k, args, nargs, true, op_name, &l);
    if (rc != DV_OK)
        return rc;
    dv_chk_op op;
    if (a->chk != NULL &&
        (rc = check_args(a, &op, DV_CHK_TASK_LAUNCH, k->name, args, nargs, l.uses, l.nuses,
                         ctx->stream, m)) != DV_OK) {
        a->task_hazard = true;
        return rc;
    }
    rc = dv__drv_launch(l.f, grid, block, shared_bytes, a->env.streams[ctx->stream],
                       nargs ? l.params : NULL);
    if (rc != DV_OK)
        return rc; /* a sticky error surfaces at the task's completion */
    if (a->chk != NULL)
        dv__checker_commit(a->chk, &op);
    stat_inc(&a->st_launches);
    return DV_OK;
}

int dv_task_host_fn(const dv_task_ctx *ctx, void (*fn)(void *), void *arg)
{
    if (ctx == NULL || ctx->internal == NULL)
        return dv__fail(DV_EINVAL, "task_host_fn", "task_host_fn: not inside a task");
    dv_actor *a = ctx->internal;
    return dv__drv_launch_host_fn(a->env.streams[ctx->stream], fn, arg);
}

void *dv_task_sim_memory(const dv_task_ctx *ctx, uint64_t ptr, uint64_t bytes)
{
    if (ctx == NULL || ctx->internal == NULL || !ctx->simulated)
        return NULL;
    return dv__sim_host_ptr(((dv_actor *)ctx->internal)->drv, ptr, bytes);
}

static void handle(dv_actor *a, const dv_msg *m)
{
    stat_inc(&a->st_messages);
    int st = atomic_load_explicit(&a->state, memory_order_acquire);
    if (st == DV_ACTOR_LOST) {
        dv_error_detail d;
        dv__lost_detail(a, &d);
        if (m->reply != NULL)
            dv__future_complete_detail(m->reply, DV_EDEVICE_LOST, &d);
        return;
    }
    /* No dv_error_clear here: a failure always writes the detail it
     * reports, and success never reads it. */
    switch (m->type) {
    case DV_MSG_ALLOC:
        handle_alloc(a, m);
        break;
    case DV_MSG_FREE:
        handle_free(a, m);
        break;
    case DV_MSG_HTOD:
    case DV_MSG_DTOH:
    case DV_MSG_DTOD:
    case DV_MSG_MEMSET:
        handle_copy(a, m);
        break;
    case DV_MSG_PEER_READ:
    case DV_MSG_PEER_COPY:
        handle_peer(a, m);
        break;
    case DV_MSG_SYNC:
        handle_sync(a, m);
        break;
    case DV_MSG_STATS:
        handle_stats(a, m);
        break;
    case DV_MSG_RESET:
        handle_reset(a, m);
        break;
    case DV_MSG_LAUNCH:
        handle_launch(a, m);
        break;
    case DV_MSG_KERNEL_GET:
        handle_kernel_get(a, m);
        break;
    case DV_MSG_LAUNCH_TRACKED:
        handle_launch_tracked(a, m);
        break;
    case DV_MSG_TASK:
        handle_task(a, m);
        break;
    case DV_MSG_HOST_ACCESS:
        /* a = host address, b = bytes, c = what the poster knew, access */
        complete(m->reply,
                 a->chk == NULL ? DV_OK
                                : checked(a, dv__checker_host_access(
                                                 a->chk, m->a, m->b, m->access,
                                                 (const dv_known *)(uintptr_t)m->c, m->producer,
                                                 m->seq)));
        break;
    default:
        dv__fail(DV_EINVAL, "message", "unknown message type %u", m->type);
        complete(m->reply, DV_EINVAL);
    }
}

/* ------------------------------------------------------------------------
 * The thread
 * ------------------------------------------------------------------------ */

static void shutdown_state(dv_actor *a)
{
    /* Everything posted was handled; wait for the device, answer what
     * waits on it, then drop the blocks with the stack. */
    if (atomic_load(&a->state) != DV_ACTOR_LOST && a->stack != NULL) {
        if (drain_device(a) != DV_OK) {
            dv_error_detail d = *dv_last_error();
            fail_pending(a, DV_ECONTEXT_LOST, &d);
        }
    } else {
        dv_error_detail d;
        dv__lost_detail(a, &d);
        fail_pending(a, DV_EDEVICE_LOST, &d);
    }
    dv__ref_invalidate_all(a->refs, NULL, NULL);
    teardown(a);
    dv__res_env_fini(&a->env);
}

void *dv__actor_main(void *arg)
{
    dv_actor *a = arg;
    dv_msg batch[BATCH];
    unsigned idle = 0;

    dv__res_env_adopt(&a->env);
    for (;;) {
        unsigned n = dv__inbox_drain(a->inbox, batch, BATCH);
        for (unsigned i = 0; i < n; i++)
            handle(a, &batch[i]);
        if (n > 0) {
            stat_inc(&a->st_batches);
            if (atomic_load(&a->state) != DV_ACTOR_LOST)
                flush_marks(a);
            idle = 0;
        }
        if (a->npending > 0) {
            if (atomic_load(&a->state) == DV_ACTOR_LOST) {
                dv_error_detail d;
                dv__lost_detail(a, &d);
                fail_pending(a, DV_EDEVICE_LOST, &d);
            } else {
                poll_completions(a);
            }
        }
        if (n > 0)
            continue;
        if (atomic_load_explicit(&a->draining, memory_order_acquire) && a->npending == 0) {
            /* No poster can be inside a post now: one last look. */
            if (dv__inbox_drain(a->inbox, batch, 1) == 0)
                break;
            handle(a, &batch[0]);
            continue;
        }
        if (a->npending > 0) {
            /* The device is working for someone: poll, a little less
             * eagerly the longer it takes. */
            idle++;
            if (idle < 64)
                sched_yield();
            else
                dv__inbox_park(a->inbox, idle < 1024 ? 20000 : 200000);
        } else {
            dv__inbox_park(a->inbox, 0);
        }
    }
    shutdown_state(a);
    return NULL;
}
