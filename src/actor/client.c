/*
 * The client side of the actor: creating and destroying actors, the
 * process-wide registry (dv_actor_get), and the public calls, each of
 * which posts one message and, in its blocking form, waits on a future on
 * the caller's stack.  Any thread may call everything here.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actor/actor.h"
#include "actor/actor_internal.h"
#include "driver/sim.h"

static atomic_uint_fast64_t next_actor_id = 1;

void dv_actor_config_init(dv_actor_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->backend = DV_BACKEND_AUTO;
    cfg->streams = 4;
    cfg->queue_capacity = 1024;
    cfg->pool = true;
}

/* ------------------------------------------------------------------------
 * Posting
 * ------------------------------------------------------------------------ */

static int lost_answer(const dv_actor *a)
{
    dv__lost_detail(a, dv__detail());
    return DV_EDEVICE_LOST;
}

/*
 * Post m.  The in-flight count and the state are both sequentially
 * consistent: destroy stores STOPPING and then waits for the count to
 * drain, so a poster either sees STOPPING or is counted before destroy
 * looks (the Dekker pattern).
 */
int dv__actor_post(dv_actor *a, dv_msg *m, dv_future *f)
{
    if (a == NULL)
        return dv__fail(DV_EINVAL, "post", "NULL actor");
    if (dv__driver_lost(a->drv, NULL))
        return lost_answer(a);
    /* Dekker with shutdown: our increment before our load of the state,
     * its store of the state before its loads of the counters (both
     * sequentially consistent), so one of us sees the other. */
    atomic_int *inflight = &a->inflight[dv__thread_shard()].n;
    atomic_fetch_add(inflight, 1);
    int st = atomic_load(&a->state);
    if (st == DV_ACTOR_STOPPING || st == DV_ACTOR_STOPPED) {
        atomic_fetch_sub(inflight, 1);
        return dv__fail(DV_ESHUTDOWN, "post", "device %d's actor is shutting down", a->device);
    }
    if (st == DV_ACTOR_LOST) {
        atomic_fetch_sub(inflight, 1);
        return lost_answer(a);
    }
    m->reply = f;
    int rc = dv__inbox_post(a->inbox, m, f != NULL && (f->flags & DV_FUTURE_TRY));
    atomic_fetch_sub(inflight, 1);
    return rc;
}

/* Post with f, or wait on a future of our own when f is NULL. */
static int call(dv_actor *a, dv_msg *m, dv_future *f, dv_ref *ref_out)
{
    dv_future own;
    if (f == NULL) {
        dv_future_init(&own, 0);
        int rc = dv__actor_post(a, m, &own);
        if (rc != DV_OK)
            return rc;
        rc = dv_future_wait(&own);
        if (ref_out != NULL)
            *ref_out = rc == DV_OK ? own.ref : DV_REF_NULL;
        return rc;
    }
    return dv__actor_post(a, m, f);
}

/* The free message, posted by the thread whose release reached zero. */
static int post_free(void *owner, dv_ref ref)
{
    dv_msg m = {.type = DV_MSG_FREE, .a = ref.bits};
    int rc = dv__actor_post(owner, &m, NULL);
    /* Shutting down or lost: the actor drops everything itself. */
    return rc == DV_ESHUTDOWN || rc == DV_EDEVICE_LOST ? DV_OK : rc;
}

/* ------------------------------------------------------------------------
 * Life cycle
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
    int rc = dv__actor_build(a);
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
    if (a->refs != NULL)
        dv__ref_domain_close(a->refs);
    dv__inbox_destroy(a->inbox);
    for (uint32_t s = 0; s < DV_MAX_STREAMS; s++)
        free(a->pend[s].items);
    for (uint32_t i = 0; i < a->ntags; i++)
        free(a->tags[i]);
    while (a->kernel_list != NULL) {
        struct dv_kernel *k = a->kernel_list;
        a->kernel_list = k->next;
        free(k);
    }
    free(a->tags);
    if (a->sink != NULL)
        dv__log_sink_destroy(a->sink);
    if (a->own_drv)
        dv__driver_close(a->drv);
    pthread_mutex_destroy(&a->health_mu);
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

static int actor_start(const dv_actor_config *cfg, dv_driver *shared, bool registered,
                       dv_actor **out)
{
    int rc;
    if (cfg->streams == 0 || cfg->streams > DV_MAX_STREAMS)
        return dv__fail(DV_EINVAL, "actor_create", "actor_create: %u streams (1..%u)", cfg->streams,
                        DV_MAX_STREAMS);
    if (cfg->queue_capacity < 2 || cfg->queue_capacity > (1u << 22))
        return dv__fail(DV_EINVAL, "actor_create", "actor_create: queue capacity %u (2..4M)",
                        cfg->queue_capacity);
    /* Its hot fields sit on lines of their own (actor.h): 64-aligned. */
    dv_actor *a = aligned_alloc(_Alignof(dv_actor), (sizeof(*a) + 63) & ~(size_t)63);
    if (a != NULL)
        memset(a, 0, sizeof(*a));
    if (a == NULL)
        return dv__fail(DV_ENOMEM, "actor_create", "out of host memory");
    a->cfg = *cfg;
    a->cfg.log_path = NULL; /* the caller's string; opened now */
    const char *check = getenv("DV_CHECK_ORDER");
    if (check != NULL && strcmp(check, "1") == 0)
        a->cfg.check_order = true;
    a->id = atomic_fetch_add(&next_actor_id, 1);
    a->device = cfg->device;
    a->registered = registered;
    pthread_mutex_init(&a->health_mu, NULL);
    atomic_init(&a->state, DV_ACTOR_RUNNING);
    a->health.state = DV_ACTOR_RUNNING;
    a->health.context_generation = 1;

    if (shared != NULL) {
        a->drv = shared;
    } else if ((rc = open_driver(cfg, &a->drv)) != DV_OK) {
        goto fail;
    } else {
        a->own_drv = true;
    }
    if (dv__driver_lost(a->drv, NULL)) {
        rc = lost_answer(a);
        goto fail;
    }
    if (cfg->log_path != NULL && (rc = dv__log_sink_file(cfg->log_path, &a->sink)) != DV_OK)
        goto fail;
    a->cfg.log_path = cfg->log_path != NULL ? "" : NULL; /* the sink is open */
    if ((rc = dv__inbox_create(cfg->shared_queue ? DV_INBOX_MPSC : DV_INBOX_SPSC,
                               cfg->queue_capacity, &a->inbox)) != DV_OK)
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

int dv__actor_create_registered(const dv_actor_config *cfg, dv_actor **out)
{
    return actor_start(cfg, (dv_driver *)cfg->driver, true, out);
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
    return actor_start(cfg, (dv_driver *)cfg->driver, false, out);
}

static void actor_stop(dv_actor *a)
{
    int st = atomic_load(&a->state);
    while (st != DV_ACTOR_STOPPING && st != DV_ACTOR_STOPPED) {
        if (atomic_compare_exchange_weak(&a->state, &st, DV_ACTOR_STOPPING))
            break;
    }
    dv__ref_domain_set_state(a->refs, DV_DOMAIN_CLOSING);
    pthread_mutex_lock(&a->health_mu);
    if (a->health.state != DV_ACTOR_LOST)
        a->health.state = DV_ACTOR_STOPPING;
    pthread_mutex_unlock(&a->health_mu);
    /* Every poster that saw RUNNING has enqueued by now. */
    for (unsigned i = 0; i < DV_THREAD_SHARDS; i++)
        while (atomic_load(&a->inflight[i].n) != 0)
            sched_yield();
    atomic_store_explicit(&a->draining, true, memory_order_release);
    dv__inbox_kick(a->inbox);
    pthread_join(a->thread, NULL);
    atomic_store(&a->state, DV_ACTOR_STOPPED);
    dv__actor_bind_domain(a, false);
    dv__actor_unlink(a);
}

void dv_actor_shutdown(dv_actor *a)
{
    if (a == NULL || atomic_load(&a->state) == DV_ACTOR_STOPPED)
        return;
    if (a->registered)
        dv__registry_forget(a);
    actor_stop(a);
}

void dv_actor_destroy(dv_actor *a)
{
    if (a == NULL)
        return;
    dv_actor_shutdown(a);
    actor_free(a);
}

int dv_actor_reset(dv_actor *a)
{
    dv_msg m = {.type = DV_MSG_RESET};
    return call(a, &m, NULL, NULL);
}

int dv_actor_device(const dv_actor *a)
{
    return a != NULL ? a->device : -1;
}

const char *dv_actor_backend_name(const dv_actor *a)
{
    return a != NULL ? dv__driver_backend_name(a->drv) : "none";
}

int dv_actor_health_get(const dv_actor *a, dv_actor_health *out)
{
    if (a == NULL || out == NULL)
        return dv__fail(DV_EINVAL, "actor_health", "NULL actor or out");
    dv_actor *m = (dv_actor *)a;
    pthread_mutex_lock(&m->health_mu);
    *out = m->health;
    pthread_mutex_unlock(&m->health_mu);
    if (dv__driver_lost(a->drv, NULL))
        out->state = DV_ACTOR_LOST;
    else if (atomic_load(&m->state) == DV_ACTOR_STOPPED)
        out->state = DV_ACTOR_STOPPED;
    return DV_OK;
}

int dv_actor_stats_get(dv_actor *a, dv_actor_stats *out)
{
    if (out == NULL)
        return dv__fail(DV_EINVAL, "actor_stats", "NULL out");
    dv_msg m = {.type = DV_MSG_STATS, .a = (uintptr_t)out};
    return call(a, &m, NULL, NULL);
}

/* ------------------------------------------------------------------------
 * Operations
 * ------------------------------------------------------------------------ */

static int alloc_msg(dv_actor *a, uint64_t bytes, dv_stream stream, const char *tag, dv_future *f,
                     dv_ref *out)
{
    if (bytes == 0 || bytes > DV_DRV_MAX_BYTES)
        return dv__fail(DV_EINVAL, "alloc", "alloc: size %llu is %s", (unsigned long long)bytes,
                        bytes == 0 ? "zero" : "absurd");
    dv_msg m = {.type = DV_MSG_ALLOC, .stream = stream, .a = bytes, .b = (uintptr_t)tag};
    return call(a, &m, f, out);
}

int dv_alloc(dv_actor *a, uint64_t bytes, dv_stream stream, const char *tag, dv_ref *out)
{
    if (out == NULL)
        return dv__fail(DV_EINVAL, "alloc", "alloc: NULL out");
    *out = DV_REF_NULL;
    return alloc_msg(a, bytes, stream, tag, NULL, out);
}

int dv_alloc_async(dv_actor *a, uint64_t bytes, dv_stream stream, const char *tag, dv_future *f)
{
    if (f == NULL)
        return dv__fail(DV_EINVAL, "alloc", "alloc_async: NULL future");
    return alloc_msg(a, bytes, stream, tag, f, NULL);
}

static int host_op(dv_actor *a, uint8_t type, dv_ref ref, uint64_t off, const void *host,
                   uint64_t bytes, dv_stream stream, dv_future *f)
{
    if (host == NULL)
        return dv__fail(DV_EINVAL, dv__msg_name(type), "%s: NULL host buffer", dv__msg_name(type));
    /* e: what this thread knows the device finished (the checker's). */
    dv_msg m = {.type = type,
                .stream = stream,
                .a = ref.bits,
                .b = off,
                .c = (uintptr_t)host,
                .d = bytes,
                .e = a->cfg.check_order ? (uintptr_t)dv__known_of((uint16_t)a->id) : 0};
    return call(a, &m, f, NULL);
}

int dv_copy_htod(dv_actor *a, dv_ref dst, uint64_t off, const void *src, uint64_t bytes,
                 dv_stream stream)
{
    return host_op(a, DV_MSG_HTOD, dst, off, src, bytes, stream, NULL);
}

int dv_copy_htod_async(dv_actor *a, dv_ref dst, uint64_t off, const void *src, uint64_t bytes,
                       dv_stream stream, dv_future *f)
{
    if (f == NULL)
        return dv__fail(DV_EINVAL, "copy_htod", "copy_htod_async: NULL future");
    return host_op(a, DV_MSG_HTOD, dst, off, src, bytes, stream, f);
}

int dv_copy_dtoh(dv_actor *a, void *dst, dv_ref src, uint64_t off, uint64_t bytes, dv_stream stream)
{
    return host_op(a, DV_MSG_DTOH, src, off, dst, bytes, stream, NULL);
}

int dv_copy_dtoh_async(dv_actor *a, void *dst, dv_ref src, uint64_t off, uint64_t bytes,
                       dv_stream stream, dv_future *f)
{
    if (f == NULL)
        return dv__fail(DV_EINVAL, "copy_dtoh", "copy_dtoh_async: NULL future");
    return host_op(a, DV_MSG_DTOH, src, off, dst, bytes, stream, f);
}

int dv_memset(dv_actor *a, dv_ref dst, uint64_t off, uint8_t value, uint64_t bytes,
              dv_stream stream)
{
    dv_msg m = {
        .type = DV_MSG_MEMSET, .stream = stream, .a = dst.bits, .b = off, .c = value, .d = bytes};
    return call(a, &m, NULL, NULL);
}

int dv_memset_async(dv_actor *a, dv_ref dst, uint64_t off, uint8_t value, uint64_t bytes,
                    dv_stream stream, dv_future *f)
{
    if (f == NULL)
        return dv__fail(DV_EINVAL, "memset", "memset_async: NULL future");
    dv_msg m = {
        .type = DV_MSG_MEMSET, .stream = stream, .a = dst.bits, .b = off, .c = value, .d = bytes};
    return call(a, &m, f, NULL);
}

int dv_copy_dtod(dv_actor *a, dv_ref dst, uint64_t doff, dv_ref src, uint64_t soff, uint64_t bytes,
                 dv_stream stream)
{
    return dv_copy_dtod_async(a, dst, doff, src, soff, bytes, stream, NULL);
}

int dv_copy_dtod_async(dv_actor *a, dv_ref dst, uint64_t doff, dv_ref src, uint64_t soff,
                       uint64_t bytes, dv_stream stream, dv_future *f)
{
    if (dv__ref_domain_index_of(src) != dv__ref_domain_index_of(dst) &&
        dv__ref_domain_index_of(src) != 0 && dv__ref_domain_index_of(dst) != 0)
        return dv__actor_peer_copy(a, dst, doff, src, soff, bytes, stream, f);
    dv_msg m = {.type = DV_MSG_DTOD,
                .stream = stream,
                .a = dst.bits,
                .b = doff,
                .c = src.bits,
                .d = soff,
                .e = bytes};
    return call(a, &m, f, NULL);
}

int dv_sync(dv_actor *a, dv_stream stream)
{
    dv_msg m = {.type = DV_MSG_SYNC, .stream = stream};
    return call(a, &m, NULL, NULL);
}

int dv_sync_async(dv_actor *a, dv_stream stream, dv_future *f)
{
    if (f == NULL)
        return dv__fail(DV_EINVAL, "sync", "sync_async: NULL future");
    dv_msg m = {.type = DV_MSG_SYNC, .stream = stream};
    return call(a, &m, f, NULL);
}

int dv_kernel_get(dv_actor *a, const void *image, size_t image_bytes, const char *name,
                  dv_kernel **out)
{
    if (out == NULL || name == NULL || name[0] == '\0')
        return dv__fail(DV_EINVAL, "kernel_get", "kernel_get: NULL out or empty name");
    *out = NULL;
    if (image != NULL && image_bytes == 0)
        return dv__fail(DV_EINVAL, "kernel_get", "kernel_get: an image of 0 bytes");
    dv_future f;
    dv_future_init(&f, 0);
    dv_msg m = {
        .type = DV_MSG_KERNEL_GET, .a = (uintptr_t)image, .b = image_bytes, .c = (uintptr_t)name};
    int rc = dv__actor_post(a, &m, &f);
    if (rc == DV_OK && (rc = dv_future_wait(&f)) == DV_OK)
        *out = (dv_kernel *)(uintptr_t)f.value;
    return rc;
}

static int launch_msg(dv_actor *a, dv_kernel *k, dv_dim3 grid, dv_dim3 block, uint32_t shared,
                      dv_stream stream, const dv_arg *args, unsigned nargs, dv_future *f)
{
    if (k == NULL || (nargs > 0 && args == NULL) || nargs > DV_LAUNCH_MAX_ARGS)
        return dv__fail(DV_EINVAL, "launch",
                        "launch: NULL kernel or args, or %u arguments (at "
                        "most %d)",
                        nargs, DV_LAUNCH_MAX_ARGS);
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0 ||
        grid.z > 0xffff || block.x > 1024 || block.y > 1024 || block.z > 64)
        return dv__fail(DV_EINVAL, "launch", "launch: grid %ux%ux%u block %ux%ux%u out of range",
                        grid.x, grid.y, grid.z, block.x, block.y, block.z);
    dv_msg m = {.type = DV_MSG_LAUNCH_TRACKED,
                .stream = stream,
                .a = (uintptr_t)k,
                .b = (uintptr_t)args,
                .c = nargs | ((uint64_t)shared << 32),
                .d = grid.x | ((uint64_t)grid.y << 32),
                .e = grid.z | ((uint64_t)block.x << 16) | ((uint64_t)block.y << 32) |
                     ((uint64_t)block.z << 48)};
    return call(a, &m, f, NULL);
}

int dv_launch(dv_actor *a, dv_kernel *k, dv_dim3 grid, dv_dim3 block, uint32_t shared,
              dv_stream stream, const dv_arg *args, unsigned nargs)
{
    return launch_msg(a, k, grid, block, shared, stream, args, nargs, NULL);
}

int dv_launch_async(dv_actor *a, dv_kernel *k, dv_dim3 grid, dv_dim3 block, uint32_t shared,
                    dv_stream stream, const dv_arg *args, unsigned nargs, dv_future *f)
{
    if (f == NULL)
        return dv__fail(DV_EINVAL, "launch", "launch_async: NULL future");
    return launch_msg(a, k, grid, block, shared, stream, args, nargs, f);
}

static int task_msg(dv_actor *a, dv_task_fn fn, void *user, dv_stream stream, const dv_arg *args,
                    unsigned nargs, dv_future *f)
{
    if (fn == NULL || (nargs > 0 && args == NULL) || nargs > DV_LAUNCH_MAX_ARGS)
        return dv__fail(DV_EINVAL, "task",
                        "task: NULL function or args, or %u arguments (at "
                        "most %d)",
                        nargs, DV_LAUNCH_MAX_ARGS);
    dv_msg m = {.type = DV_MSG_TASK,
                .stream = stream,
                .a = (uintptr_t)fn,
                .b = (uintptr_t)user,
                .c = (uintptr_t)args,
                .d = nargs};
    return call(a, &m, f, NULL);
}

int dv_task(dv_actor *a, dv_task_fn fn, void *user, dv_stream stream, const dv_arg *args,
            unsigned nargs)
{
    return task_msg(a, fn, user, stream, args, nargs, NULL);
}

int dv_task_async(dv_actor *a, dv_task_fn fn, void *user, dv_stream stream, const dv_arg *args,
                  unsigned nargs, dv_future *f)
{
    if (f == NULL)
        return dv__fail(DV_EINVAL, "task", "task_async: NULL future");
    return task_msg(a, fn, user, stream, args, nargs, f);
}

int dv_check_host_access(dv_actor *a, const void *ptr, uint64_t bytes, dv_arg_access access)
{
    if (a == NULL || ptr == NULL || bytes == 0 || access < DV_READ || access > DV_READ_WRITE)
        return dv__fail(DV_EINVAL, "check_host_access",
                        "check_host_access: %s",
                        a == NULL     ? "NULL actor"
                        : ptr == NULL ? "NULL buffer"
                        : bytes == 0  ? "zero bytes"
                                      : "access is not DV_READ, DV_WRITE or DV_READ_WRITE");
    if (!a->cfg.check_order)
        return DV_OK;
    dv_msg m = {.type = DV_MSG_HOST_ACCESS,
                .access = (uint8_t)access,
                .a = (uintptr_t)ptr,
                .b = bytes,
                .c = (uintptr_t)dv__known_of((uint16_t)a->id)};
    return call(a, &m, NULL, NULL);
}

int dv_actor_last_hazard(dv_actor *a, dv_error_detail *out)
{
    if (a == NULL || out == NULL)
        return dv__fail(DV_EINVAL, "actor_last_hazard", "actor_last_hazard: NULL argument");
    pthread_mutex_lock(&a->health_mu);
    *out = a->last_hazard;
    pthread_mutex_unlock(&a->health_mu);
    return DV_OK;
}

int dv__actor_launch_builtin(dv_actor *a, const char *kernel, dv_stream stream,
                             const uint64_t args[4], dv_future *f)
{
    dv_msg m = {.type = DV_MSG_LAUNCH, .stream = stream, .a = (uintptr_t)kernel};
    if (args != NULL) {
        m.b = args[0];
        m.c = args[1];
        m.d = args[2];
        m.e = args[3];
    }
    return call(a, &m, f, NULL);
}

dv_driver *dv__actor_driver(const dv_actor *a)
{
    return a != NULL ? a->drv : NULL;
}

/*
 * A copy from a block of one actor to a block of another: the source's
 * actor fences the block for reading (earlier writes done), then the
 * destination's actor copies and answers once the copy finished.  The
 * source stays retained throughout.  Both actors must share a driver.
 */
int dv__actor_peer_copy(dv_actor *a, dv_ref dst, uint64_t doff, dv_ref src, uint64_t soff,
                        uint64_t bytes, dv_stream stream, dv_future *f)
{
    dv_actor *src_actor = dv__actor_of_ref(src);
    dv_ref_info info;
    int rc;

    if (a == NULL || src_actor == NULL)
        return dv__fail(DV_ESTALE, "copy_peer", "copy_peer: the source's actor is gone");
    if (src_actor->drv != a->drv)
        return dv__fail(DV_EINVAL, "copy_peer",
                        "copy_peer: devices %d and %d are served by different drivers",
                        src_actor->device, a->device);
    if ((rc = dv_ref_retain(src)) != DV_OK)
        return rc;
    if ((rc = dv_ref_access(src, &info)) != DV_OK)
        goto out;
    if (bytes == 0 || soff > info.requested || bytes > info.requested - soff) {
        rc = dv__fail(DV_EINVAL, "copy_peer", "copy_peer: source range outside its %llu bytes",
                      (unsigned long long)info.requested);
        goto out;
    }
    dv_msg fence = {.type = DV_MSG_PEER_READ, .a = src.bits, .b = soff, .d = bytes};
    if ((rc = call(src_actor, &fence, NULL, NULL)) != DV_OK)
        goto out;
    dv_msg copy = {.type = DV_MSG_PEER_COPY,
                   .stream = stream,
                   .a = dst.bits,
                   .b = doff,
                   .c = info.ptr + soff,
                   .d = (uintptr_t)src_actor,
                   .e = bytes};
    /* Wait here even for the async form: the source must stay retained
     * until the copy finished. */
    dv_future own;
    dv_future_init(&own, 0);
    if ((rc = dv__actor_post(a, &copy, &own)) == DV_OK)
        rc = dv_future_wait(&own);
out : {
    dv_error_detail saved = *dv_last_error();
    (void)dv_ref_release(src);
    *dv__detail() = saved;
}
    if (f != NULL) {
        dv_future_init(f, f->flags);
        dv__future_complete(f, rc);
        return DV_OK;
    }
    return rc;
}
