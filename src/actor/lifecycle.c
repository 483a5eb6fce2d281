/*
 * An actor's life: start, the device state (built by one function for the
 * start and for every rebuild), reset, LOST, shutdown and destroy.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actor/actor.h"
#include "base/abi.h"

static atomic_uint_fast64_t next_actor_uid = 1;

_Static_assert(sizeof(dv_actor_config) >= DV_ABI_CONFIG_MIN, "dv_actor_config only grows");
_Static_assert(sizeof(dv_actor_health) >= DV_ABI_HEALTH_MIN, "dv_actor_health only grows");

static void config_defaults(dv_actor_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->size = sizeof(*cfg);
    cfg->backend = DV_BACKEND_AUTO;
    cfg->streams = 4;
    cfg->queue_capacity = 1024;
    cfg->pool = true;
}

void dv_actor_config_init_sized(dv_actor_config *cfg, size_t size)
{
    if (cfg == NULL || size < sizeof(cfg->size))
        return;
    if (!dv__abi_size_ok(size, DV_ABI_CONFIG_MIN)) {
        cfg->size = 0; /* dv_actor_create answers DV_EINVAL */
        return;
    }
    dv_actor_config full;
    config_defaults(&full);
    /* The caller's bytes only; a newer caller's own fields stay as they are. */
    memcpy(cfg, &full, size < sizeof(full) ? size : sizeof(full));
    cfg->size = (uint32_t)size;
}

/* The caller's configuration over the defaults (ABI: devactor.h). */
int dv__config_read(const dv_actor_config *cfg, dv_actor_config *full, const char *op)
{
    config_defaults(full);
    if (!dv__abi_size_ok(cfg->size, DV_ABI_CONFIG_MIN))
        return dv__fail(DV_EINVAL, op,
                        "%s: dv_actor_config.size is %u: not set up with dv_actor_config_init", op,
                        cfg->size);
    if (!dv__abi_copy_in(full, sizeof(*full), cfg, cfg->size))
        return dv__fail(DV_EINVAL, op,
                        "%s: dv_actor_config of %u bytes sets fields this library (%s, %zu bytes) "
                        "does not know",
                        op, cfg->size, dv_version(), sizeof(*full));
    full->size = sizeof(*full);
    return DV_OK;
}

/* ------------------------------------------------------------------------
 * The device state (actor thread)
 * ------------------------------------------------------------------------ */

/* Does top's chain of upstreams end at bottom, every layer of it this
 * actor's?  The chain is walked a bounded number of steps: a resource
 * from elsewhere may chain anywhere. */
static bool stack_reaches(const dv_resource *top, const dv_resource *bottom)
{
    for (unsigned depth = 0; top != NULL && depth < 4096; depth++, top = top->upstream) {
        if (top->env != bottom->env)
            return false;
        if (top == bottom)
            return true;
    }
    return false;
}

static int build_stack(dv_actor *a)
{
    dv_resource *r = NULL, *top;
    int rc = a->cfg.direct_alloc ? dv__direct_resource_create(&a->env, &r)
                                 : dv__async_resource_create(&a->env, &r);
    if (rc != DV_OK)
        return rc;
    top = r;
    a->bottom = r;
    if (a->cfg.stack != NULL) {
        /* The caller's stack (devactor_resource.h), on this thread. */
        rc = a->cfg.stack(r, a->cfg.stack_user, &top);
        rc = dv__user_answer(rc, "stack", "stack: the stack function");
        if (rc == DV_OK && top == NULL)
            rc = dv__fail(DV_EINVAL, "stack", "the stack function returned no top");
        if (rc == DV_OK && !stack_reaches(top, r))
            /* Another actor's resource, or one not built on this bottom:
             * this actor would allocate from, and later destroy, what is
             * not its own.  What the function built here is its to free. */
            rc = dv__fail(DV_EINVAL, "stack",
                          "the stack function returned a resource not built on the bottom it "
                          "was given (another actor's?)");
        if (rc != DV_OK) {
            a->bottom = NULL;
            dv__res_destroy_stack(r); /* it destroyed what it made */
            return rc;
        }
        a->stack = top;
        return DV_OK;
    }
    if (a->cfg.pool && !a->cfg.direct_alloc) {
        dv_pool_config pcfg;
        dv__pool_config_init(&pcfg);
        if (a->cfg.pool_initial_bytes)
            pcfg.initial_chunk_bytes = a->cfg.pool_initial_bytes;
        if (a->cfg.pool_max_chunk_bytes)
            pcfg.max_chunk_bytes = a->cfg.pool_max_chunk_bytes;
        pcfg.chunks =
            a->cfg.pool_chunks || a->cfg.pool_initial_bytes || a->cfg.pool_max_chunk_bytes;
        pcfg.keep_mapped = a->cfg.pool_keep_mapped;
        pcfg.alias = a->cfg.pool_alias;
        if ((rc = dv__pool_resource_create(top, &pcfg, &top)) != DV_OK)
            goto fail;
    }
    if (a->cfg.guard) {
        dv_guard_config gcfg;
        dv__guard_config_init(&gcfg);
        if ((rc = dv__guard_resource_create(top, &gcfg, &top)) != DV_OK)
            goto fail;
    }
    if (a->sink != NULL && (rc = dv__logging_resource_create(top, a->sink, false, &top)) != DV_OK)
        goto fail;
    if (a->cfg.budget_bytes) {
        if ((rc = dv__budget_resource_create(top, a->cfg.budget_bytes, &top)) != DV_OK)
            goto fail;
    }
    a->stack = top;
    return DV_OK;
fail:
    a->bottom = NULL;
    dv__res_destroy_stack(top);
    return rc;
}

/* Does the stack suballocate somewhere (a pool hands memory out again)? */
static bool stack_pools(const dv_actor *a)
{
    for (const dv_resource *r = a->stack; r != NULL; r = r->upstream)
        if (dv__res_is_pool(r))
            return true;
    return false;
}

/*
 * Everything on top of a retained context: streams, the pool's release
 * threshold, the resource stack, the completion tracker, the checker.
 * The same for the start and for a rebuild; on failure what was made is
 * undone (the context and streams stay for the caller).
 */
static int build_state(dv_actor *a)
{
    int rc = dv__res_env_streams(&a->env, a->cfg.streams);
    if (rc != DV_OK)
        return rc;
    /* A driver without pools answers an error that changes nothing; a
     * sticky fault met here is the context's, and ends the build. */
    if ((rc = dv__drv_pool_set_release_threshold(a->env.ctx, UINT64_MAX)) == DV_ECONTEXT_LOST)
        return rc;
    a->env.fence_always = a->cfg.check_order;
    if ((rc = build_stack(a)) != DV_OK)
        return rc;
    if ((rc = dv__tracker_create(&a->env, &a->done)) != DV_OK)
        goto fail_stack;
    /* Reuse is checked where devactor's pool hands memory out again; the
     * driver orders its own. */
    if (a->cfg.check_order &&
        (rc = dv__checker_create(&a->env, stack_pools(a), a->uid,
                                 dv__ref_domain_context(a->refs), &a->chk)) != DV_OK)
        goto fail_done;
    /* Host memory the actor holds is pinned again in this context. */
    if ((rc = dv__host_pin_all(a)) != DV_OK || (rc = dv__staging_repin(a)) != DV_OK) {
        dv__checker_destroy(a->chk);
        a->chk = NULL;
        goto fail_done;
    }
    return DV_OK;
fail_done:
    dv__tracker_destroy(a->done);
    a->done = NULL;
fail_stack:
    dv__res_destroy_stack(a->stack);
    a->stack = NULL;
    return rc;
}

/* A block dropped with the state (a rebuild, a shutdown): its free row in
 * the actor's own allocation log. */
static void log_dropped(dv_block *block, void *arg)
{
    dv_actor *a = arg;
    if (dv__actor_logs(a))
        dv__log_dropped(a->sink, dv__thread_id(), block);
}

/* Drop blocks with the stack, then the rest of the state over the
 * context (not the streams).  kept: the context lives on (a reset the
 * caller asked for), so what was made in it is destroyed, not forgotten. */
static void teardown_state(dv_actor *a, bool kept)
{
    dv__host_unpin_all(a);
    dv__task_streams_drop(a);
    dv__kernels_forget_context(a);
    dv__events_forget_context(a, kept);
    if (a->done != NULL)
        dv__tracker_destroy(a->done);
    a->done = NULL;
    if (a->stack != NULL)
        dv__res_destroy_stack(a->stack); /* frees the blocks still live */
    a->stack = NULL;
    a->bottom = NULL;
    dv__checker_destroy(a->chk);
    a->chk = NULL;
}

int dv__actor_start_state(dv_actor *a)
{
    int rc = dv__res_env_open(&a->env, a->drv, a->device);
    if (rc == DV_OK) {
        a->env.allocated = dv__actor_sample_reserved;
        a->env.allocated_arg = a;
    }
    if (rc == DV_OK && (rc = build_state(a)) != DV_OK) {
        dv_error_detail saved = *dv_last_error();
        if (rc == DV_ECONTEXT_LOST) { /* as at a stop (dv__actor_stop_state) */
            dv__res_env_drop_streams(&a->env);
            (void)dv__drv_ctx_reset(a->env.ctx);
        }
        dv__res_env_fini(&a->env);
        *dv__detail() = saved;
    }
    return rc;
}

void dv__lost_detail(const dv_actor *a, dv_error_detail *out)
{
    if (!dv__driver_lost(a->drv, out)) {
        /* This actor alone (its rebuild failed): its first fault says why. */
        dv_actor *m = (dv_actor *)a;
        pthread_mutex_lock(&m->health_mu);
        *out = m->health.first_fault;
        pthread_mutex_unlock(&m->health_mu);
        if (out->status == 0) {
            memset(out, 0, sizeof(*out));
            snprintf(out->message, sizeof(out->message), "device %d is lost for this process",
                     a->device);
        }
    }
    out->status = DV_EDEVICE_LOST;
}

int dv__lost_answer(const dv_actor *a)
{
    dv__lost_detail(a, dv__detail());
    return DV_EDEVICE_LOST;
}

int dv__actor_refused(const dv_actor *a, int st, const char *call, const char *name)
{
    if (st == DV_ACTOR_STOPPING || st == DV_ACTOR_STOPPED)
        return dv__fail(DV_ESHUTDOWN, call, "%s: device %d's actor is shutting down", name,
                        a->device);
    return st == DV_ACTOR_LOST ? dv__lost_answer(a) : DV_OK;
}

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

/* A rebuild that failed for a reason of this actor's (memory, a driver
 * error that is not a fault): this actor is LOST, the other devices and
 * the driver are not. */
static void become_failed(dv_actor *a, const dv_error_detail *cause)
{
    dv_error_detail d = *cause;
    d.status = DV_EDEVICE_LOST;
    snprintf(d.message, sizeof(d.message), "device %d: the context could not be rebuilt: %s: %.200s",
             a->device, dv_err_name(cause->status), cause->message[0] ? cause->message : "(no detail)");
    dv__actor_mark_lost(a, &d);
}

/*
 * Rebuild on a context that lives on: devactor's memory, streams, events
 * and modules go, the context stays, and with it every other library's
 * memory in the process.  The pool gives back what it held.
 */
/* Nothing of the streams just dropped runs any more: host functions never
 * run, staged copies stop waiting for them, and host buffers forget the
 * positions of copies there. */
static void forget_in_flight(dv_actor *a)
{
    dv__host_jobs_cancel(a, DV_ECONTEXT_LOST);
    dv__staging_abort(a);
    dv__host_forget_uses(a);
}

static int rebuild_kept(dv_actor *a)
{
    /* The device finished everything (handle_reset drained it); the
     * frees the stack queues as it goes are waited for before the trim. */
    teardown_state(a, true);
    int rc = dv__res_env_sync(&a->env);
    dv__res_env_drop_streams(&a->env);
    forget_in_flight(a);
    if (rc == DV_OK) {
        rc = dv__drv_pool_trim(a->env.ctx, 0);
        if (rc == DV_ENOTSUP)
            rc = DV_OK; /* no pool: nothing held */
    }
    if (rc == DV_OK)
        rc = build_state(a);
    return rc;
}

int dv__actor_rebuild(dv_actor *a, bool keep_context)
{
    DV_ASSERT_ACTOR(a);
    /* Not over a shutdown begun meanwhile: its STOPPING must stay, or
     * posters would see the actor running again and post into a closed
     * inbox (answered by no one). */
    int st = atomic_load(&a->state);
    while (st != DV_ACTOR_STOPPING && st != DV_ACTOR_STOPPED &&
           !atomic_compare_exchange_weak(&a->state, &st, DV_ACTOR_REBUILDING))
        ;
    /* The health follows, unless a shutdown's STOPPING came first. */
    pthread_mutex_lock(&a->health_mu);
    if (atomic_load(&a->state) == DV_ACTOR_REBUILDING)
        a->health.state = DV_ACTOR_REBUILDING;
    pthread_mutex_unlock(&a->health_mu);

    dv__ref_invalidate_all(a->refs, log_dropped, a);
    /* The handles are gone: the health says so from here, so a caller who
     * met a stale handle and asks finds the new generation (or, while the
     * drop is under way, the state REBUILDING). */
    pthread_mutex_lock(&a->health_mu);
    a->health.context_generation = dv__ref_domain_context(a->refs);
    pthread_mutex_unlock(&a->health_mu);
    dv__memstats_restart(&a->mem);
    /* A failure is tried again a few times, a little later each time:
     * memory, a driver error that is no fault, or a fault that came
     * during the rebuild may be gone; a fault the driver keeps is not. */
    int rc = DV_OK;
    for (int attempt = 0; attempt < 4; attempt++) {
        if (attempt > 0) {
            struct timespec pause = {0, 1000000L << (2 * attempt)}; /* 4, 16, 64 ms */
            nanosleep(&pause, NULL);
        }
        if (keep_context) {
            rc = rebuild_kept(a);
            if (rc == DV_OK)
                break;
            /* A fault met on the way needs the context reset after all. */
            keep_context = !dv__fault_of_device(rc);
            continue;
        }
        teardown_state(a, false); /* what a failed try built, the first time the old state */
        dv__res_env_drop_streams(&a->env);
        rc = dv__drv_ctx_reset(a->env.ctx);
        a->driver_context++;
        if (rc == DV_OK) {
            forget_in_flight(a); /* nothing of the old context runs any more */
            rc = build_state(a);
        }
        /* A fault too is tried again: a recoverable one may have landed
         * during this very rebuild; one the driver keeps fails every try. */
        if (rc == DV_OK)
            break;
    }
    if (rc != DV_OK) {
        dv_error_detail cause = *dv_last_error();
        if (dv__fault_of_device(rc))
            become_lost(a, &cause); /* the driver's: every actor on it */
        else
            become_failed(a, &cause);
        return DV_EDEVICE_LOST;
    }
    pthread_mutex_lock(&a->health_mu);
    a->health.rebuilds++;
    /* Recovered: the fault stays in the health for the record, but a
     * later one starts new trouble (a LOST actor names what lost it, not
     * what was mended). */
    a->fault_mended = true;
    a->health.context_generation = dv__ref_domain_context(a->refs);
    atomic_store_explicit(&a->broken, false, memory_order_release); /* whole again */
    /* A destroy may have begun meanwhile: do not undo its STOPPING (in
     * the atomic state nor in the health, which actor_stop set under the
     * same lock). */
    int expect = DV_ACTOR_REBUILDING;
    if (atomic_compare_exchange_strong(&a->state, &expect, DV_ACTOR_RUNNING))
        a->health.state = DV_ACTOR_RUNNING;
    pthread_mutex_unlock(&a->health_mu);
    return DV_OK;
}

void dv__actor_stop_state(dv_actor *a)
{
    /* Everything posted was handled; wait for the device, answer what
     * waits on it, then drop the blocks with the stack. */
    bool lost = dv__actor_broken(a);
    if (!lost && a->stack != NULL) {
        if (dv__drain_device(a) != DV_OK) {
            dv_error_detail d = *dv_last_error();
            dv__fail_pending(a, DV_ECONTEXT_LOST, &d);
        }
    } else {
        dv_error_detail d;
        dv__lost_detail(a, &d);
        dv__fail_pending(a, DV_EDEVICE_LOST, &d);
    }
    dv__ref_invalidate_all(a->refs, log_dropped, a);
    dv__host_stop(a);
    teardown_state(a, false);
    dv__res_env_drop_streams(&a->env);
    dv__staging_abort(a); /* copies of this context wait for its device no more */
    /* A context left with a sticky error holds its memory until reset:
     * reset it, so the device is whole for the next actor.  The fault may
     * have come in the drain or after it (the teardown): ask the context
     * itself. */
    uint64_t free_bytes, total_bytes;
    if (a->env.ctx != NULL &&
        (lost || dv__drv_mem_info(a->env.ctx, &free_bytes, &total_bytes) == DV_ECONTEXT_LOST))
        (void)dv__drv_ctx_reset(a->env.ctx);
    dv__res_env_fini(&a->env);
    /* Those that ran were waited for by the drain; the rest never will. */
    dv__host_jobs_cancel(a, dv__actor_broken(a) ? DV_EDEVICE_LOST : DV_ECONTEXT_LOST);
}

/* ------------------------------------------------------------------------
 * Start, stop, destroy (the callers' threads)
 * ------------------------------------------------------------------------ */

struct start {
    dv_actor *a;
    int rc;
    dv_error_detail detail;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
};

/* The actor thread builds its own device state, reports, then serves. */
static void *start_main(void *arg)
{
    struct start *s = arg;
    dv_actor *a = s->a;
    /* This thread serves a for good: it must never wait for an actor. */
    (void)dv__serve_begin(a);
    int rc = dv__actor_start_state(a);
    pthread_mutex_lock(&s->mu);
    s->rc = rc;
    if (rc != DV_OK)
        s->detail = *dv_last_error();
    s->done = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (rc != DV_OK)
        return NULL;
    return dv__actor_main(a);
}

static void actor_free(dv_actor *a)
{
    dv__staging_free(a);
    dv__host_fini(&a->host);
    dv__device_unclaim(a);
    if (a->refs != NULL)
        dv__ref_domain_close(a->refs);
    dv__inbox_destroy(a->inbox);
    for (uint32_t s = 0; s < DV_MAX_STREAMS; s++)
        free(a->pend[s].items);
    dv__kernels_free(a);
    dv__events_free(a);
    dv__memstats_free(&a->mem);
    if (a->sink != NULL)
        dv__log_sink_destroy(a->sink);
    if (a->own_drv)
        dv__driver_close(a->drv);
    pthread_mutex_destroy(&a->health_mu);
    pthread_mutex_destroy(&a->stop_mu);
    free(a);
}

static int open_driver(const dv_actor_config *cfg, dv_driver **out)
{
    dv_driver_config dcfg;
    dv__driver_config_init(&dcfg);
    dcfg.backend = cfg->backend;
    if (cfg->sim_devices > 0)
        dcfg.sim.devices = cfg->sim_devices;
    if (cfg->sim_memory_bytes > 0)
        dcfg.sim.memory_bytes = cfg->sim_memory_bytes;
    dcfg.sim.seed = cfg->sim_seed;
    dcfg.sim.delay_max_us = cfg->sim_delay_max_us;
    return dv__driver_open(&dcfg, out);
}

/* The free message, posted by the thread whose release reached zero. */
static int post_free(void *owner, dv_ref ref)
{
    dv_msg m = {.type = DV_MSG_FREE, .u.free = {ref}};
    int rc = dv__actor_post(owner, &m, NULL);
    /* Shutting down or lost: the actor drops everything itself. */
    return rc == DV_ESHUTDOWN || rc == DV_EDEVICE_LOST ? DV_OK : rc;
}

/* A thread's client went away: its reserved handle slots are spare. */
static void client_dropped(void *arg, dv_client *c)
{
    dv_actor *a = arg;
    dv__ref_cache_return(a->refs, &c->refs);
}

int dv__actor_start(const dv_actor_config *caller_cfg, dv_driver *shared, bool registered,
                    dv_actor **out)
{
    int rc;
    dv_actor_config full;
    const dv_actor_config *cfg = &full;
    if ((rc = dv__config_read(caller_cfg, &full, registered ? "actor_get" : "actor_create")) != DV_OK)
        return rc;
    if (shared == NULL)
        shared = (dv_driver *)full.driver;
    if (cfg->backend != DV_BACKEND_AUTO && cfg->backend != DV_BACKEND_CUDA &&
        cfg->backend != DV_BACKEND_SIM)
        return dv__fail(DV_EINVAL, "actor_create",
                        "actor_create: backend %d is not AUTO, CUDA or SIM", (int)cfg->backend);
    if (cfg->streams == 0 || cfg->streams > DV_MAX_STREAMS)
        return dv__fail(DV_EINVAL, "actor_create", "actor_create: %u streams (1..%u)", cfg->streams,
                        DV_MAX_STREAMS);
    if (cfg->queue_capacity < 2 || cfg->queue_capacity > (1u << 22))
        return dv__fail(DV_EINVAL, "actor_create", "actor_create: queue capacity %u (2..4M)",
                        cfg->queue_capacity);
    /* Before anything a client could post to exists. */
    dv__fence_init();
    dv__fork_watch();
    /* Its hot fields sit on lines of their own (actor.h): 64-aligned. */
    dv_actor *a = aligned_alloc(_Alignof(dv_actor), (sizeof(*a) + 63) & ~(size_t)63);
    if (a == NULL)
        return dv__fail(DV_ENOMEM, "actor_create", "out of host memory");
    memset(a, 0, sizeof(*a));
    dv__host_init(&a->host);
    a->cfg = *cfg;
    a->cfg.log_path = NULL; /* the caller's string; opened now */
    const char *check = getenv("DV_CHECK_ORDER");
    if (check != NULL && strcmp(check, "1") == 0)
        a->cfg.check_order = true;
    const char *alias = getenv("DV_POOL_ALIAS");
    if (alias != NULL && strcmp(alias, "1") == 0)
        a->cfg.pool_alias = true;
    a->uid = atomic_fetch_add(&next_actor_uid, 1);
    a->fork_gen = dv__fork_now();
    a->device = cfg->device;
    a->registered = registered;
    a->events.next = a->events.prev = &a->events;
    pthread_mutex_init(&a->health_mu, NULL);
    pthread_mutex_init(&a->stop_mu, NULL);
    atomic_init(&a->state, DV_ACTOR_RUNNING);
    atomic_init(&a->broken, false);
    a->health.state = DV_ACTOR_RUNNING;
    a->health.context_generation = 1;
    a->driver_context = 1;

    if (shared != NULL) {
        a->drv = shared;
    } else if ((rc = open_driver(cfg, &a->drv)) != DV_OK) {
        goto fail;
    } else {
        a->own_drv = true;
    }
    if (dv__driver_lost(a->drv, NULL)) {
        rc = dv__lost_answer(a);
        goto fail;
    }
    /* The one check of the ordinal against the driver, for dv_actor_get
     * and dv_actor_create alike. */
    const char *op = registered ? "actor_get" : "actor_create";
    int count = 0;
    if ((rc = dv__drv_device_count(a->drv, &count)) != DV_OK)
        goto fail;
    if (cfg->device < 0) {
        rc = dv__fail(DV_EINVAL, op, "%s: device %d", op, cfg->device);
        goto fail;
    }
    if (cfg->device >= count) {
        rc = dv__fail(DV_ENODEVICE, op, "%s: no device %d (the %s backend has %d)", op, cfg->device,
                      dv__driver_backend_name(a->drv), count);
        goto fail;
    }
    if ((rc = dv__device_claim(a)) != DV_OK)
        goto fail;
    if (cfg->log_path != NULL) {
        /* Each "%d" in the path is the device (one file per actor). */
        char path[4096];
        size_t used = 0;
        for (const char *p = cfg->log_path; *p != '\0' && used < sizeof(path) - 1;) {
            if (p[0] == '%' && p[1] == 'd') {
                int n = snprintf(path + used, sizeof(path) - used, "%d", cfg->device);
                used += n > 0 ? (size_t)n : 0;
                p += 2;
            } else {
                path[used++] = *p++;
            }
        }
        path[used < sizeof(path) ? used : sizeof(path) - 1] = '\0';
        if ((rc = dv__log_sink_file(path, &a->sink)) != DV_OK)
            goto fail;
    }
    if ((rc = dv__inbox_create(cfg->shared_queue ? DV_INBOX_MPSC : DV_INBOX_SPSC,
                               cfg->queue_capacity, a->uid, client_dropped, a, &a->inbox)) != DV_OK)
        goto fail;
    if ((rc = dv__ref_domain_open(a, post_free, cfg->device, &a->refs)) != DV_OK)
        goto fail;

    struct start s = {.a = a};
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    if (pthread_create(&a->thread, NULL, start_main, &s) != 0) {
        rc = dv__fail(DV_ENOMEM, "actor_create", "cannot start the actor's thread");
        goto fail;
    }
    pthread_mutex_lock(&s.mu);
    while (!s.done)
        pthread_cond_wait(&s.cv, &s.mu);
    pthread_mutex_unlock(&s.mu);
    pthread_mutex_destroy(&s.mu);
    pthread_cond_destroy(&s.cv);
    if (s.rc != DV_OK) {
        pthread_join(a->thread, NULL);
        *dv__detail() = s.detail;
        rc = s.rc;
        goto fail;
    }
    dv__actor_link(a);
    dv__actor_bind_domain(a, true);
    *out = a;
    return DV_OK;
fail : {
    dv_error_detail saved = *dv_last_error();
    actor_free(a);
    *dv__detail() = saved;
}
    return rc;
}

int dv_actor_create(const dv_actor_config *cfg, dv_actor **out)
{
    dv_actor_config defaults;
    if (out == NULL)
        return dv__fail(DV_EINVAL, "actor_create", "actor_create: NULL out");
    *out = NULL;
    if (cfg == NULL) {
        dv_actor_config_init(&defaults);
        cfg = &defaults;
    }
    return dv__actor_start(cfg, NULL, false, out);
}

static void actor_stop(dv_actor *a)
{
    int st = atomic_load(&a->state);
    while (st != DV_ACTOR_STOPPING && st != DV_ACTOR_STOPPED) {
        if (atomic_compare_exchange_weak(&a->state, &st, DV_ACTOR_STOPPING))
            break;
    }
    /* Out of the registry only once it reads STOPPING: a dv_actor_get
     * that then builds the next one finds this claim stopping and waits
     * for it, where RUNNING would answer DV_EBUSY. */
    if (a->registered)
        dv__registry_forget(a);
    dv__ref_domain_set_state(a->refs, DV_DOMAIN_CLOSING);
    pthread_mutex_lock(&a->health_mu);
    if (a->health.state != DV_ACTOR_LOST)
        a->health.state = DV_ACTOR_STOPPING;
    pthread_mutex_unlock(&a->health_mu);
    dv__memory_waiters_wake(a); /* dv_alloc_wait: refused at once now */
    /* Every poster that saw RUNNING has enqueued by now (the handshake
     * with post_enter, base/fence.h). */
    dv__hazard_wait(a);
    dv__inbox_close(a->inbox);
    pthread_join(a->thread, NULL);
    /* Every copy's future is answered: its copy thread lets it go. */
    dv__staging_stop(a);
    atomic_store(&a->state, DV_ACTOR_STOPPED);
    dv__actor_bind_domain(a, false);
    dv__actor_unlink(a);
    /* The device is free for another actor. */
    dv__device_unclaim(a);
}

/* May the calling thread stop a?  Not from a thread that serves an actor
 * (a task: it would join itself, or wait on another actor), not in a
 * child on an actor of its parent (it has no thread here to join). */
static int may_stop(const dv_actor *a, const char *op)
{
    if (a == NULL)
        return dv__fail(DV_EINVAL, op, "%s: NULL actor", op);
    int rc = dv__actor_here(a, op);
    return rc != DV_OK ? rc : dv__no_wait(op);
}

static int shutdown_as(dv_actor *a, const char *op)
{
    int rc = may_stop(a, op);
    if (rc != DV_OK || atomic_load(&a->state) == DV_ACTOR_STOPPED)
        return rc;
    /* Two threads may shut it down at once: one stops it (joins its
     * thread), the other waits for that and finds it stopped. */
    pthread_mutex_lock(&a->stop_mu);
    if (atomic_load(&a->state) != DV_ACTOR_STOPPED)
        actor_stop(a);
    pthread_mutex_unlock(&a->stop_mu);
    return DV_OK;
}

int dv_actor_shutdown(dv_actor *a)
{
    return shutdown_as(a, "actor_shutdown");
}

int dv_actor_destroy(dv_actor *a)
{
    if (a == NULL)
        return DV_OK; /* as free(NULL) */
    int rc = shutdown_as(a, "actor_destroy");
    if (rc != DV_OK)
        return rc; /* nothing was done: the actor is as it was */
    actor_free(a);
    return DV_OK;
}

int dv_actor_device(const dv_actor *a)
{
    return a != NULL ? a->device : -1;
}

const char *dv_actor_backend_name(const dv_actor *a)
{
    return a != NULL ? dv__driver_backend_name(a->drv) : "none";
}

int dv_actor_health_get_sized(const dv_actor *a, dv_actor_health *caller, size_t size)
{
    if (a == NULL || caller == NULL)
        return dv__fail(DV_EINVAL, "actor_health", "NULL actor or out");
    int here = dv__actor_here(a, "actor_health");
    if (here != DV_OK)
        return here;
    if (!dv__abi_size_ok(size, DV_ABI_HEALTH_MIN))
        return dv__fail(DV_EINVAL, "actor_health", "actor_health: size %zu (at least %u)", size,
                        DV_ABI_HEALTH_MIN);
    dv_actor *m = (dv_actor *)a;
    dv_actor_health h, *out = &h;
    pthread_mutex_lock(&m->health_mu);
    *out = m->health;
    pthread_mutex_unlock(&m->health_mu);
    if (dv__driver_lost(a->drv, NULL))
        out->state = DV_ACTOR_LOST;
    else if (atomic_load(&m->state) == DV_ACTOR_STOPPED)
        out->state = DV_ACTOR_STOPPED;
    dv__abi_copy_out(caller, size, &h, sizeof(h));
    return DV_OK;
}
