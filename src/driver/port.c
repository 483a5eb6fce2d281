/*
 * The device port's wrappers: argument checks shared by both backends, the
 * object pool behind every handle, backend selection, and the mapping of
 * raw driver codes to dv_status (see port.h for the contract).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "driver/port.h"

static const char *const call_names[DV_CALL__COUNT] = {
#define DV__CALL_NAME(id, name) [DV_CALL_##id] = name,
    DV_DRV_CALLS(DV__CALL_NAME)
#undef DV__CALL_NAME
};

const char *dv__drv_call_name(dv_drv_call call)
{
    if ((unsigned)call >= DV_CALL__COUNT)
        return "unknown";
    return call_names[call];
}

void dv__driver_config_init(dv_driver_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->backend = DV_BACKEND_AUTO;
    cfg->sim.devices = 1;
    cfg->sim.memory_bytes = UINT64_C(1) << 30;
    cfg->sim.slow_stream = -1;
}

/* ------------------------------------------------------------------------
 * Object pool.  Handles are pointers into memory the driver keeps until it
 * closes, so a dead handle is detected by its magic instead of being a
 * use-after-free.  Free lists are per kind (each kind has one size).
 * ------------------------------------------------------------------------ */

#define OBJ_LOCK(drv)   pthread_mutex_lock((pthread_mutex_t *)(drv)->obj_lock)
#define OBJ_UNLOCK(drv) pthread_mutex_unlock((pthread_mutex_t *)(drv)->obj_lock)

static dv_drv_obj *obj_new(dv_driver *drv, int kind, dv_drv_obj *ctx, int device)
{
    size_t size = drv->ops->obj_size[kind];
    dv_drv_obj *obj;

    OBJ_LOCK(drv);
    obj = drv->free_list[kind];
    if (obj != NULL)
        drv->free_list[kind] = obj->free_next;
    OBJ_UNLOCK(drv);
    if (obj == NULL) {
        obj = malloc(size);
        if (obj == NULL)
            return NULL;
    }
    memset(obj, 0, size);
    obj->kind = (uint16_t)kind;
    obj->device = (int16_t)device;
    obj->drv = drv;
    obj->ctx = ctx != NULL ? ctx : obj;
    obj->size = size;
    /* Not yet alive: the magic is set by obj_publish once created. */
    obj->magic = DV_DRV_DEAD;
    return obj;
}

/* Mark created and put on the live list. */
static void obj_publish(dv_drv_obj *obj)
{
    dv_driver *drv = obj->drv;
    OBJ_LOCK(drv);
    obj->magic = DV_DRV_MAGIC(obj->kind);
    obj->live_next = drv->live_head.live_next;
    obj->live_prev = &drv->live_head;
    drv->live_head.live_next->live_prev = obj;
    drv->live_head.live_next = obj;
    OBJ_UNLOCK(drv);
}

static void obj_unlink_locked(dv_drv_obj *obj)
{
    obj->live_prev->live_next = obj->live_next;
    obj->live_next->live_prev = obj->live_prev;
    obj->live_next = obj->live_prev = NULL;
}

static void obj_recycle_locked(dv_driver *drv, dv_drv_obj *obj)
{
    obj->magic = DV_DRV_DEAD;
    obj->free_next = drv->free_list[obj->kind];
    drv->free_list[obj->kind] = obj;
}

/* Kill a live object (after its destroy op ran). */
static void obj_kill(dv_drv_obj *obj)
{
    dv_driver *drv = obj->drv;
    OBJ_LOCK(drv);
    obj_unlink_locked(obj);
    obj_recycle_locked(drv, obj);
    OBJ_UNLOCK(drv);
}

/* Return a never-published object. */
static void obj_discard(dv_drv_obj *obj)
{
    dv_driver *drv = obj->drv;
    OBJ_LOCK(drv);
    obj_recycle_locked(drv, obj);
    OBJ_UNLOCK(drv);
}

static bool obj_alive(const void *h, int kind)
{
    const dv_drv_obj *obj = h;
    return obj != NULL && obj->magic == DV_DRV_MAGIC(kind);
}

/* The common check of a handle argument. */
#define CHECK_OBJ(h, kind, call)                                                                   \
    do {                                                                                           \
        if (!obj_alive((h), (kind)))                                                               \
            return dv__fail(DV_EINVAL, (call), "%s: %s handle is %s", (call), kind_name(kind),     \
                            (h) == NULL ? "NULL" : "dead or not of this kind");                    \
    } while (0)

#define CHECK_BYTES(n, call)                                                                       \
    do {                                                                                           \
        if ((n) == 0 || (uint64_t)(n) > DV_DRV_MAX_BYTES)                                          \
            return dv__fail(DV_EINVAL, (call), "%s: size %llu is %s", (call),                      \
                            (unsigned long long)(n), (n) == 0 ? "zero" : "absurd");                \
    } while (0)

#define CHECK_PTR(p, what, call)                                                                   \
    do {                                                                                           \
        if ((p) == 0)                                                                              \
            return dv__fail(DV_EINVAL, (call), "%s: %s is NULL", (call), (what));                  \
    } while (0)

static const char *kind_name(int kind)
{
    switch (kind) {
    case DV_DRV_CTX:
        return "context";
    case DV_DRV_STREAM:
        return "stream";
    case DV_DRV_EVENT:
        return "event";
    case DV_DRV_MODULE:
        return "module";
    case DV_DRV_FUNC:
        return "function";
    default:
        return "object";
    }
}

#define OBJ(h)   ((dv_drv_obj *)(h))
#define OPS(obj) (OBJ(obj)->drv->ops)
/* Something is about to be enqueued on stream (dv__drv_stream_work). */
#define ENQUEUES(stream) (OBJ(stream)->work++)

/* Before work whose end is open is enqueued: it may wait for another
 * stream, the host or another process (a stream wait, a host function, a
 * value wait, the native stream handed to a task or library, a captured
 * graph).  The armed hooks run first, so that a use a tracker marked is
 * captured before such work is queued behind it.  A hook's failure (the
 * context lost) fails the call. */
static int run_hooks(dv_drv_obj *o)
{
    uint8_t armed = o->armed;
    int rc = DV_OK;
    o->armed = 0; /* a hook's own calls do not run it again */
    for (unsigned i = 0; i < o->nhooks; i++)
        if ((armed & (1u << i)) && o->hooks[i].fn != NULL && rc == DV_OK)
            rc = o->hooks[i].fn(o->hooks[i].arg, (dv_drv_stream *)o);
    return rc;
}
#define OPEN_HOOKS(stream)                                                                         \
    (OBJ(stream)->armed != 0 && !OBJ(stream)->capturing ? run_hooks(OBJ(stream)) : DV_OK)

int dv__drv_stream_hook(dv_drv_stream *stream, dv_drv_stream_hook fn, void *arg)
{
    if (!obj_alive(stream, DV_DRV_STREAM) || fn == NULL)
        return -1;
    dv_drv_obj *o = OBJ(stream);
    for (unsigned i = 0; i < o->nhooks; i++)
        if (o->hooks[i].fn == NULL) {
            o->hooks[i] = (struct dv_drv_hook){fn, arg};
            return (int)i;
        }
    if (o->nhooks == DV_DRV_STREAM_HOOKS)
        return -1;
    o->hooks[o->nhooks] = (struct dv_drv_hook){fn, arg};
    return o->nhooks++;
}

void dv__drv_stream_unhook(dv_drv_stream *stream, dv_drv_stream_hook fn, void *arg)
{
    if (!obj_alive(stream, DV_DRV_STREAM))
        return;
    dv_drv_obj *o = OBJ(stream);
    for (unsigned i = 0; i < o->nhooks; i++)
        if (o->hooks[i].fn == fn && o->hooks[i].arg == arg) {
            o->hooks[i] = (struct dv_drv_hook){NULL, NULL};
            o->armed &= (uint8_t)~(1u << i);
        }
}

/* Map a backend's raw code: 0 stays 0, else detail and status. */
static int drv_result(dv_driver *drv, dv_drv_call call, int code)
{
    atomic_fetch_add_explicit(&drv->calls[call], 1, memory_order_relaxed);
    if (code == DV_CU_SUCCESS)
        return DV_OK;
    return dv__fail_driver(drv, call_names[call], code);
}

/* ------------------------------------------------------------------------
 * Open / close / selection
 * ------------------------------------------------------------------------ */

static int open_backend(const dv_driver_ops *ops, const dv_driver_config *cfg, dv_driver **out)
{
    dv_driver *drv = calloc(1, sizeof(*drv));
    pthread_mutex_t *lock = malloc(sizeof(*lock));
    int rc;

    if (drv == NULL || lock == NULL) {
        free(drv);
        free(lock);
        return dv__fail(DV_ENOMEM, "driver_open", "out of host memory");
    }
    static atomic_uint_fast64_t next_serial = 1;
    pthread_mutex_init(lock, NULL);
    drv->ops = ops;
    drv->serial = atomic_fetch_add_explicit(&next_serial, 1, memory_order_relaxed);
    drv->obj_lock = lock;
    drv->live_head.live_next = drv->live_head.live_prev = &drv->live_head;
    rc = ops->open(drv, cfg);
    if (rc != DV_OK) {
        pthread_mutex_destroy(lock);
        free(lock);
        free(drv);
        return rc;
    }
    *out = drv;
    return DV_OK;
}

int dv__driver_open(const dv_driver_config *cfg, dv_driver **out)
{
    dv_driver_config defaults;
    dv_backend backend;

    if (out == NULL)
        return dv__fail(DV_EINVAL, "driver_open", "driver_open: out is NULL");
    *out = NULL;
    if (cfg == NULL) {
        dv__driver_config_init(&defaults);
        cfg = &defaults;
    }
    backend = cfg->backend;
    if (backend == DV_BACKEND_AUTO) {
        const char *env = getenv("DV_BACKEND");
        if (env != NULL && *env != '\0') {
            if (strcasecmp(env, "cuda") == 0)
                backend = DV_BACKEND_CUDA;
            else if (strcasecmp(env, "sim") == 0)
                backend = DV_BACKEND_SIM;
            else
                return dv__fail(DV_EINVAL, "driver_open",
                                "DV_BACKEND=%s: expected \"cuda\" or \"sim\"", env);
        }
    }
    switch (backend) {
    case DV_BACKEND_SIM:
        return open_backend(&dv__sim_ops, cfg, out);
    case DV_BACKEND_CUDA:
#ifdef DV_HAVE_CUDA
    {
        int rc = open_backend(&dv__cuda_ops, cfg, out);
        dv_error_detail *d = dv__detail();
        /* Every reason the backend gives starts the same way for a person. */
        if (rc == DV_ENODEVICE && strncmp(d->message, "no CUDA device", 14) != 0) {
            char why[sizeof(d->message)];
            snprintf(why, sizeof(why), "%s", d->message);
            snprintf(d->message, sizeof(d->message), "no CUDA device: %.230s", why);
        }
        return rc;
    }
#else
        return dv__fail(DV_ENODEVICE, "driver_open",
                        "no CUDA device: this build has no cuda backend (configured "
                        "without cuda.h or with DV_CUDA=OFF)");
#endif
    case DV_BACKEND_AUTO:
    default:
#ifdef DV_HAVE_CUDA
        if (open_backend(&dv__cuda_ops, cfg, out) == DV_OK)
            return DV_OK;
#endif
        dv_error_clear();
        return open_backend(&dv__sim_ops, cfg, out);
    }
}

void dv__driver_close(dv_driver *drv)
{
    if (drv == NULL)
        return;
    drv->ops->close(drv);
    /* Objects still alive are reclaimed with the driver. */
    for (dv_drv_obj *o = drv->live_head.live_next, *next; o != &drv->live_head; o = next) {
        next = o->live_next;
        free(o);
    }
    for (int k = 0; k < DV_DRV__KINDS; k++) {
        for (dv_drv_obj *o = drv->free_list[k], *next; o != NULL; o = next) {
            next = o->free_next;
            free(o);
        }
    }
    pthread_mutex_destroy((pthread_mutex_t *)drv->obj_lock);
    free(drv->obj_lock);
    free(drv);
}

const char *dv__driver_backend_name(const dv_driver *drv)
{
    return drv != NULL ? drv->ops->name : "none";
}

dv_backend dv__driver_backend(const dv_driver *drv)
{
    return drv != NULL ? drv->ops->backend : DV_BACKEND_AUTO;
}

/* ------------------------------------------------------------------------
 * Devices and contexts
 * ------------------------------------------------------------------------ */

int dv__drv_device_count(dv_driver *drv, int *count)
{
    CHECK_PTR(drv, "driver", "device_count");
    CHECK_PTR(count, "count", "device_count");
    return drv_result(drv, DV_CALL_DEVICE_COUNT, drv->ops->device_count(drv, count));
}

static int check_ordinal(dv_driver *drv, int ordinal, const char *call)
{
    int count = 0;
    int rc = drv->ops->device_count(drv, &count);
    if (rc != DV_CU_SUCCESS)
        return drv_result(drv, DV_CALL_DEVICE_COUNT, rc);
    if (ordinal < 0 || ordinal >= count || ordinal >= DV_DRV_MAX_DEVICES)
        return dv__fail(DV_EINVAL, call, "%s: device %d does not exist (%d device%s)", call,
                        ordinal, count, count == 1 ? "" : "s");
    return DV_OK;
}

int dv__drv_device_info(dv_driver *drv, int ordinal, dv_device_info *info)
{
    int rc;
    CHECK_PTR(drv, "driver", "device_info");
    CHECK_PTR(info, "info", "device_info");
    if ((rc = check_ordinal(drv, ordinal, "device_info")) != DV_OK)
        return rc;
    memset(info, 0, sizeof(*info));
    info->ordinal = ordinal;
    return drv_result(drv, DV_CALL_DEVICE_INFO, drv->ops->device_info(drv, ordinal, info));
}

int dv__drv_ctx_retain(dv_driver *drv, int ordinal, dv_drv_ctx **ctx)
{
    dv_drv_obj *obj;
    int rc;

    CHECK_PTR(drv, "driver", "ctx_retain");
    CHECK_PTR(ctx, "ctx", "ctx_retain");
    *ctx = NULL;
    if ((rc = check_ordinal(drv, ordinal, "ctx_retain")) != DV_OK)
        return rc;
    if ((obj = obj_new(drv, DV_DRV_CTX, NULL, ordinal)) == NULL)
        return dv__fail(DV_ENOMEM, "ctx_retain", "out of host memory");
    rc = drv->ops->ctx_retain(obj, ordinal);
    if (rc != DV_CU_SUCCESS) {
        obj_discard(obj);
        return drv_result(drv, DV_CALL_CTX_RETAIN, rc);
    }
    obj_publish(obj);
    *ctx = (dv_drv_ctx *)obj;
    return DV_OK;
}

int dv__drv_ctx_release(dv_drv_ctx *ctx)
{
    CHECK_OBJ(ctx, DV_DRV_CTX, "ctx_release");
    dv_driver *drv = OBJ(ctx)->drv;
    int rc = drv->ops->ctx_release(OBJ(ctx));
    obj_kill(OBJ(ctx));
    return drv_result(drv, DV_CALL_CTX_RELEASE, rc);
}

int dv__drv_ctx_device(const dv_drv_ctx *ctx)
{
    if (!obj_alive(ctx, DV_DRV_CTX))
        return -1;
    return ((const dv_drv_obj *)ctx)->device;
}

/*
 * Reset: destroy every object of the device but its contexts (functions,
 * then modules, events, streams) through the backend's destroy ops, so
 * each backend frees what it holds, then let the backend reset the
 * context.  Destroy results are ignored: after a sticky error they fail.
 */
static int (*destroy_op(const dv_driver_ops *ops, int kind))(dv_drv_obj *)
{
    switch (kind) {
    case DV_DRV_FUNC:
        return NULL; /* functions have no driver resources of their own */
    case DV_DRV_MODULE:
        return ops->module_unload;
    case DV_DRV_EVENT:
        return ops->event_destroy;
    case DV_DRV_STREAM:
        return ops->stream_destroy;
    default:
        return NULL;
    }
}

int dv__drv_ctx_reset(dv_drv_ctx *ctx)
{
    static const int order[] = {DV_DRV_FUNC, DV_DRV_MODULE, DV_DRV_EVENT, DV_DRV_STREAM};
    CHECK_OBJ(ctx, DV_DRV_CTX, "ctx_reset");
    dv_driver *drv = OBJ(ctx)->drv;
    int device = OBJ(ctx)->device;

    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
        int (*op)(dv_drv_obj *) = destroy_op(drv->ops, order[i]);
        for (;;) {
            dv_drv_obj *victim = NULL;
            OBJ_LOCK(drv);
            for (dv_drv_obj *o = drv->live_head.live_next; o != &drv->live_head; o = o->live_next) {
                if (o->device == device && o->kind == order[i]) {
                    victim = o;
                    obj_unlink_locked(o);
                    o->magic = DV_DRV_DEAD;
                    break;
                }
            }
            OBJ_UNLOCK(drv);
            if (victim == NULL)
                break;
            if (op != NULL)
                (void)op(victim);
            OBJ_LOCK(drv);
            obj_recycle_locked(drv, victim);
            OBJ_UNLOCK(drv);
        }
    }
    return drv_result(drv, DV_CALL_CTX_RESET, drv->ops->ctx_reset(OBJ(ctx)));
}

int dv__drv_mem_info(dv_drv_ctx *ctx, uint64_t *free_bytes, uint64_t *total_bytes)
{
    CHECK_OBJ(ctx, DV_DRV_CTX, "mem_info");
    CHECK_PTR(free_bytes, "free_bytes", "mem_info");
    CHECK_PTR(total_bytes, "total_bytes", "mem_info");
    return drv_result(OBJ(ctx)->drv, DV_CALL_MEM_INFO,
                      OPS(ctx)->mem_info(OBJ(ctx), free_bytes, total_bytes));
}

/* ------------------------------------------------------------------------
 * Generic create / destroy of a context-owned object
 * ------------------------------------------------------------------------ */

typedef int (*create_op)(dv_drv_obj *ctx, dv_drv_obj *obj);

static int create_in_ctx(dv_drv_ctx *ctx, int kind, dv_drv_call call, create_op op, uint32_t flags,
                         void **out)
{
    dv_drv_obj *obj;
    int rc;

    CHECK_OBJ(ctx, DV_DRV_CTX, call_names[call]);
    CHECK_PTR(out, "out", call_names[call]);
    *out = NULL;
    obj = obj_new(OBJ(ctx)->drv, kind, OBJ(ctx), OBJ(ctx)->device);
    if (obj == NULL)
        return dv__fail(DV_ENOMEM, call_names[call], "out of host memory");
    obj->flags = flags;
    rc = op(OBJ(ctx), obj);
    if (rc != DV_CU_SUCCESS) {
        obj_discard(obj);
        return drv_result(OBJ(ctx)->drv, call, rc);
    }
    obj_publish(obj);
    *out = obj;
    return DV_OK;
}

static int destroy_obj(void *h, int kind, dv_drv_call call, int (*op)(dv_drv_obj *))
{
    CHECK_OBJ(h, kind, call_names[call]);
    dv_driver *drv = OBJ(h)->drv;
    int rc = op(OBJ(h));
    obj_kill(OBJ(h));
    return drv_result(drv, call, rc);
}

/* ------------------------------------------------------------------------
 * Streams and events
 * ------------------------------------------------------------------------ */

int dv__drv_stream_create(dv_drv_ctx *ctx, dv_drv_stream **stream)
{
    CHECK_OBJ(ctx, DV_DRV_CTX, "stream_create");
    return create_in_ctx(ctx, DV_DRV_STREAM, DV_CALL_STREAM_CREATE, OPS(ctx)->stream_create, 0,
                         (void **)stream);
}

int dv__drv_stream_destroy(dv_drv_stream *stream)
{
    CHECK_OBJ(stream, DV_DRV_STREAM, "stream_destroy");
    return destroy_obj(stream, DV_DRV_STREAM, DV_CALL_STREAM_DESTROY, OPS(stream)->stream_destroy);
}

/* The observer of an object's context, or NULL. */
static inline const dv_drv_observer *observer_of(const void *obj)
{
    return (const dv_drv_observer *)((const dv_drv_obj *)obj)->ctx->shadow;
}

void dv__drv_ctx_set_observer(dv_drv_ctx *ctx, const dv_drv_observer *observer)
{
    if (obj_alive(ctx, DV_DRV_CTX))
        OBJ(ctx)->shadow = (void *)observer;
}

void dv__driver_call_counts(const dv_driver *drv, uint64_t out[DV_CALL__COUNT])
{
    for (int c = 0; c < DV_CALL__COUNT; c++)
        out[c] = atomic_load_explicit(&drv->calls[c], memory_order_relaxed);
}

void dv__driver_order_counts(const dv_driver *drv, uint64_t *records, uint64_t *waits)
{
    *records = atomic_load_explicit(&drv->event_records, memory_order_relaxed);
    *waits = atomic_load_explicit(&drv->stream_waits, memory_order_relaxed);
}

void **dv__drv_shadow(void *event_or_stream)
{
    return &((dv_drv_obj *)event_or_stream)->shadow;
}

int dv__drv_stream_sync(dv_drv_stream *stream)
{
    CHECK_OBJ(stream, DV_DRV_STREAM, "stream_sync");
    int rc =
        drv_result(OBJ(stream)->drv, DV_CALL_STREAM_SYNC, OPS(stream)->stream_sync(OBJ(stream)));
    const dv_drv_observer *obs = observer_of(stream);
    if (rc == DV_OK && obs != NULL)
        obs->stream_done(obs->self, stream);
    return rc;
}

int dv__drv_stream_query(dv_drv_stream *stream, bool *done)
{
    CHECK_OBJ(stream, DV_DRV_STREAM, "stream_query");
    CHECK_PTR(done, "done", "stream_query");
    int rc = drv_result(OBJ(stream)->drv, DV_CALL_STREAM_QUERY,
                        OPS(stream)->stream_query(OBJ(stream), done));
    const dv_drv_observer *obs = observer_of(stream);
    if (rc == DV_OK && *done && obs != NULL)
        obs->stream_done(obs->self, stream);
    return rc;
}

int dv__drv_event_create(dv_drv_ctx *ctx, uint32_t flags, dv_drv_event **event)
{
    CHECK_OBJ(ctx, DV_DRV_CTX, "event_create");
    if (flags & ~DV_DRV_EVENT_TIMING)
        return dv__fail(DV_EINVAL, "event_create", "event_create: unknown flags 0x%x", flags);
    return create_in_ctx(ctx, DV_DRV_EVENT, DV_CALL_EVENT_CREATE, OPS(ctx)->event_create, flags,
                         (void **)event);
}

int dv__drv_event_elapsed(dv_drv_event *start, dv_drv_event *end, float *ms)
{
    CHECK_OBJ(start, DV_DRV_EVENT, "event_elapsed");
    CHECK_OBJ(end, DV_DRV_EVENT, "event_elapsed");
    CHECK_PTR(ms, "ms", "event_elapsed");
    if (!(OBJ(start)->flags & OBJ(end)->flags & DV_DRV_EVENT_TIMING))
        return dv__fail(DV_EINVAL, "event_elapsed",
                        "event_elapsed: both events need DV_DRV_EVENT_TIMING");
    if (OBJ(start)->ctx != OBJ(end)->ctx)
        return dv__fail(DV_EINVAL, "event_elapsed", "event_elapsed: events of devices %d and %d",
                        OBJ(start)->device, OBJ(end)->device);
    return drv_result(OBJ(start)->drv, DV_CALL_EVENT_ELAPSED,
                      OPS(start)->event_elapsed(OBJ(start), OBJ(end), ms));
}

void *dv__drv_event_native(dv_drv_event *event)
{
    if (event == NULL || OBJ(event)->magic != DV_DRV_MAGIC(DV_DRV_EVENT))
        return NULL;
    return OPS(event)->native_event != NULL ? OPS(event)->native_event(OBJ(event)) : NULL;
}

int dv__drv_event_destroy(dv_drv_event *event)
{
    CHECK_OBJ(event, DV_DRV_EVENT, "event_destroy");
    const dv_drv_observer *obs = observer_of(event);
    if (obs != NULL)
        obs->event_destroy(obs->self, event);
    return destroy_obj(event, DV_DRV_EVENT, DV_CALL_EVENT_DESTROY, OPS(event)->event_destroy);
}

int dv__drv_event_record(dv_drv_event *event, dv_drv_stream *stream)
{
    CHECK_OBJ(event, DV_DRV_EVENT, "event_record");
    CHECK_OBJ(stream, DV_DRV_STREAM, "event_record");
    if (OBJ(event)->ctx != OBJ(stream)->ctx)
        return dv__fail(DV_EINVAL, "event_record",
                        "event_record: event (device %d) and stream (device %d) belong to "
                        "different contexts",
                        OBJ(event)->device, OBJ(stream)->device);
    int rc = drv_result(OBJ(event)->drv, DV_CALL_EVENT_RECORD,
                        OPS(event)->event_record(OBJ(event), OBJ(stream)));
    const dv_drv_observer *obs = observer_of(stream);
    atomic_fetch_add_explicit(&OBJ(event)->drv->event_records, 1, memory_order_relaxed);
    if (rc == DV_OK && obs != NULL)
        obs->record(obs->self, event, stream);
    return rc;
}

int dv__drv_event_query(dv_drv_event *event, bool *done)
{
    CHECK_OBJ(event, DV_DRV_EVENT, "event_query");
    CHECK_PTR(done, "done", "event_query");
    int rc =
        drv_result(OBJ(event)->drv, DV_CALL_EVENT_QUERY, OPS(event)->event_query(OBJ(event), done));
    const dv_drv_observer *obs = observer_of(event);
    if (rc == DV_OK && *done && obs != NULL)
        obs->event_done(obs->self, event);
    return rc;
}

int dv__drv_event_sync(dv_drv_event *event)
{
    CHECK_OBJ(event, DV_DRV_EVENT, "event_sync");
    int rc = drv_result(OBJ(event)->drv, DV_CALL_EVENT_SYNC, OPS(event)->event_sync(OBJ(event)));
    const dv_drv_observer *obs = observer_of(event);
    if (rc == DV_OK && obs != NULL)
        obs->event_done(obs->self, event);
    return rc;
}

int dv__drv_stream_wait_event(dv_drv_stream *stream, dv_drv_event *event)
{
    CHECK_OBJ(stream, DV_DRV_STREAM, "stream_wait_event");
    CHECK_OBJ(event, DV_DRV_EVENT, "stream_wait_event");
    if (OBJ(stream)->drv != OBJ(event)->drv)
        return dv__fail(DV_EINVAL, "stream_wait_event",
                        "stream_wait_event: event belongs to another driver");
    int hooked = OPEN_HOOKS(stream);
    if (hooked != DV_OK)
        return hooked;
    ENQUEUES(stream);
    int rc = drv_result(OBJ(stream)->drv, DV_CALL_STREAM_WAIT_EVENT,
                        OPS(stream)->stream_wait_event(OBJ(stream), OBJ(event)));
    const dv_drv_observer *obs = observer_of(stream);
    atomic_fetch_add_explicit(&OBJ(stream)->drv->stream_waits, 1, memory_order_relaxed);
    if (rc == DV_OK && obs != NULL)
        obs->wait(obs->self, stream, event);
    return rc;
}

/* ------------------------------------------------------------------------
 * Memory
 * ------------------------------------------------------------------------ */

int dv__drv_mem_alloc(dv_drv_ctx *ctx, uint64_t bytes, dv_dptr *dptr)
{
    CHECK_OBJ(ctx, DV_DRV_CTX, "mem_alloc");
    CHECK_PTR(dptr, "dptr", "mem_alloc");
    *dptr = 0;
    CHECK_BYTES(bytes, "mem_alloc");
    int rc =
        drv_result(OBJ(ctx)->drv, DV_CALL_MEM_ALLOC, OPS(ctx)->mem_alloc(OBJ(ctx), bytes, dptr));
    if (rc != DV_OK)
        dv__detail()->requested = bytes;
    return rc;
}

int dv__drv_mem_free(dv_drv_ctx *ctx, dv_dptr dptr)
{
    CHECK_OBJ(ctx, DV_DRV_CTX, "mem_free");
    CHECK_PTR(dptr, "dptr", "mem_free");
    return drv_result(OBJ(ctx)->drv, DV_CALL_MEM_FREE, OPS(ctx)->mem_free(OBJ(ctx), dptr));
}

int dv__drv_mem_alloc_async(dv_drv_stream *stream, uint64_t bytes, dv_dptr *dptr)
{
    CHECK_OBJ(stream, DV_DRV_STREAM, "mem_alloc_async");
    CHECK_PTR(dptr, "dptr", "mem_alloc_async");
    *dptr = 0;
    CHECK_BYTES(bytes, "mem_alloc_async");
    ENQUEUES(stream);
    int rc = drv_result(OBJ(stream)->drv, DV_CALL_MEM_ALLOC_ASYNC,
                        OPS(stream)->mem_alloc_async(OBJ(stream), bytes, dptr));
    if (rc != DV_OK)
        dv__detail()->requested = bytes;
    return rc;
}

int dv__drv_mem_free_async(dv_drv_stream *stream, dv_dptr dptr)
{
    CHECK_OBJ(stream, DV_DRV_STREAM, "mem_free_async");
    CHECK_PTR(dptr, "dptr", "mem_free_async");
    ENQUEUES(stream);
    return drv_result(OBJ(stream)->drv, DV_CALL_MEM_FREE_ASYNC,
                      OPS(stream)->mem_free_async(OBJ(stream), dptr));
}

int dv__drv_pool_set_release_threshold(dv_drv_ctx *ctx, uint64_t bytes)
{
    CHECK_OBJ(ctx, DV_DRV_CTX, "pool_set_release_threshold");
    return drv_result(OBJ(ctx)->drv, DV_CALL_POOL_SET_THRESHOLD,
                      OPS(ctx)->pool_set_threshold(OBJ(ctx), bytes));
}

int dv__drv_pool_trim(dv_drv_ctx *ctx, uint64_t keep_bytes)
{
    CHECK_OBJ(ctx, DV_DRV_CTX, "pool_trim");
    return drv_result(OBJ(ctx)->drv, DV_CALL_POOL_TRIM, OPS(ctx)->pool_trim(OBJ(ctx), keep_bytes));
}

int dv__drv_vmm_granularity(dv_drv_ctx *ctx, uint64_t *bytes)
{
    CHECK_OBJ(ctx, DV_DRV_CTX, "vmm_granularity");
    CHECK_PTR(bytes, "bytes", "vmm_granularity");
    *bytes = 0;
    if (OPS(ctx)->vmm_granularity == NULL)
        return dv__fail(DV_ENOTSUP, "vmm_granularity", "vmm_granularity: not on this backend");
    return drv_result(OBJ(ctx)->drv, DV_CALL_VMM_GRANULARITY,
                      OPS(ctx)->vmm_granularity(OBJ(ctx), bytes));
}

int dv__drv_va_reserve(dv_drv_ctx *ctx, uint64_t bytes, dv_dptr *va)
{
    CHECK_OBJ(ctx, DV_DRV_CTX, "va_reserve");
    CHECK_PTR(va, "va", "va_reserve");
    *va = 0;
    CHECK_BYTES(bytes, "va_reserve");
    int rc =
        drv_result(OBJ(ctx)->drv, DV_CALL_VA_RESERVE, OPS(ctx)->va_reserve(OBJ(ctx), bytes, va));
    if (rc != DV_OK)
        dv__detail()->requested = bytes;
    return rc;
}

int dv__drv_va_release(dv_drv_ctx *ctx, dv_dptr va, uint64_t bytes)
{
    CHECK_OBJ(ctx, DV_DRV_CTX, "va_release");
    CHECK_PTR(va, "va", "va_release");
    return drv_result(OBJ(ctx)->drv, DV_CALL_VA_RELEASE, OPS(ctx)->va_release(OBJ(ctx), va, bytes));
}

int dv__drv_mem_map(dv_drv_ctx *ctx, dv_dptr va, uint64_t bytes, uint64_t *handle)
{
    CHECK_OBJ(ctx, DV_DRV_CTX, "mem_map");
    CHECK_PTR(va, "va", "mem_map");
    CHECK_PTR(handle, "handle", "mem_map");
    *handle = 0;
    CHECK_BYTES(bytes, "mem_map");
    int rc =
        drv_result(OBJ(ctx)->drv, DV_CALL_MEM_MAP, OPS(ctx)->mem_map(OBJ(ctx), va, bytes, handle));
    if (rc != DV_OK)
        dv__detail()->requested = bytes;
    return rc;
}

int dv__drv_mem_unmap(dv_drv_ctx *ctx, dv_dptr va, uint64_t bytes, uint64_t handle)
{
    CHECK_OBJ(ctx, DV_DRV_CTX, "mem_unmap");
    CHECK_PTR(va, "va", "mem_unmap");
    return drv_result(OBJ(ctx)->drv, DV_CALL_MEM_UNMAP,
                      OPS(ctx)->mem_unmap(OBJ(ctx), va, bytes, handle));
}

int dv__drv_mem_unmap_keep(dv_drv_ctx *ctx, dv_dptr va, uint64_t bytes, uint64_t handle)
{
    CHECK_OBJ(ctx, DV_DRV_CTX, "mem_unmap_keep");
    CHECK_PTR(va, "va", "mem_unmap_keep");
    return drv_result(OBJ(ctx)->drv, DV_CALL_MEM_UNMAP_KEEP,
                      OPS(ctx)->mem_unmap_keep(OBJ(ctx), va, bytes, handle));
}

int dv__drv_mem_remap(dv_drv_ctx *ctx, dv_dptr va, uint64_t bytes, uint64_t handle)
{
    CHECK_OBJ(ctx, DV_DRV_CTX, "mem_remap");
    CHECK_PTR(va, "va", "mem_remap");
    CHECK_BYTES(bytes, "mem_remap");
    int rc = drv_result(OBJ(ctx)->drv, DV_CALL_MEM_REMAP,
                        OPS(ctx)->mem_remap(OBJ(ctx), va, bytes, handle));
    if (rc != DV_OK)
        dv__detail()->requested = bytes;
    return rc;
}

int dv__drv_mem_release(dv_drv_ctx *ctx, uint64_t handle)
{
    CHECK_OBJ(ctx, DV_DRV_CTX, "mem_release");
    return drv_result(OBJ(ctx)->drv, DV_CALL_MEM_RELEASE,
                      OPS(ctx)->mem_release(OBJ(ctx), handle));
}

int dv__drv_pool_get_release_threshold(dv_drv_ctx *ctx, uint64_t *bytes)
{
    CHECK_OBJ(ctx, DV_DRV_CTX, "pool_get_release_threshold");
    CHECK_PTR(bytes, "bytes", "pool_get_release_threshold");
    return drv_result(OBJ(ctx)->drv, DV_CALL_POOL_GET_THRESHOLD,
                      OPS(ctx)->pool_get_threshold(OBJ(ctx), bytes));
}

int dv__drv_memcpy_htod(dv_drv_stream *stream, dv_dptr dst, const void *src, uint64_t bytes)
{
    CHECK_OBJ(stream, DV_DRV_STREAM, "memcpy_htod_async");
    CHECK_PTR(dst, "dst", "memcpy_htod_async");
    CHECK_PTR(src, "src", "memcpy_htod_async");
    CHECK_BYTES(bytes, "memcpy_htod_async");
    ENQUEUES(stream);
    return drv_result(OBJ(stream)->drv, DV_CALL_MEMCPY_HTOD,
                      OPS(stream)->memcpy_htod(OBJ(stream), dst, src, bytes));
}

int dv__drv_memcpy_dtoh(dv_drv_stream *stream, void *dst, dv_dptr src, uint64_t bytes)
{
    CHECK_OBJ(stream, DV_DRV_STREAM, "memcpy_dtoh_async");
    CHECK_PTR(dst, "dst", "memcpy_dtoh_async");
    CHECK_PTR(src, "src", "memcpy_dtoh_async");
    CHECK_BYTES(bytes, "memcpy_dtoh_async");
    ENQUEUES(stream);
    return drv_result(OBJ(stream)->drv, DV_CALL_MEMCPY_DTOH,
                      OPS(stream)->memcpy_dtoh(OBJ(stream), dst, src, bytes));
}

int dv__drv_memcpy_dtod(dv_drv_stream *stream, dv_dptr dst, dv_dptr src, uint64_t bytes)
{
    CHECK_OBJ(stream, DV_DRV_STREAM, "memcpy_dtod_async");
    CHECK_PTR(dst, "dst", "memcpy_dtod_async");
    CHECK_PTR(src, "src", "memcpy_dtod_async");
    CHECK_BYTES(bytes, "memcpy_dtod_async");
    ENQUEUES(stream);
    return drv_result(OBJ(stream)->drv, DV_CALL_MEMCPY_DTOD,
                      OPS(stream)->memcpy_dtod(OBJ(stream), dst, src, bytes));
}

int dv__drv_memcpy_peer(dv_drv_stream *stream, dv_drv_ctx *dst_ctx, dv_dptr dst,
                        dv_drv_ctx *src_ctx, dv_dptr src, uint64_t bytes)
{
    CHECK_OBJ(stream, DV_DRV_STREAM, "memcpy_peer_async");
    CHECK_OBJ(dst_ctx, DV_DRV_CTX, "memcpy_peer_async");
    CHECK_OBJ(src_ctx, DV_DRV_CTX, "memcpy_peer_async");
    CHECK_PTR(dst, "dst", "memcpy_peer_async");
    CHECK_PTR(src, "src", "memcpy_peer_async");
    CHECK_BYTES(bytes, "memcpy_peer_async");
    if (OBJ(stream)->drv != OBJ(dst_ctx)->drv || OBJ(stream)->drv != OBJ(src_ctx)->drv)
        return dv__fail(DV_EINVAL, "memcpy_peer_async",
                        "memcpy_peer_async: contexts of another driver");
    if (OBJ(stream)->ctx != OBJ(dst_ctx) && OBJ(stream)->ctx != OBJ(src_ctx))
        return dv__fail(DV_EINVAL, "memcpy_peer_async",
                        "memcpy_peer_async: the stream belongs to neither context");
    ENQUEUES(stream);
    return drv_result(
        OBJ(stream)->drv, DV_CALL_MEMCPY_PEER,
        OPS(stream)->memcpy_peer(OBJ(stream), OBJ(dst_ctx), dst, OBJ(src_ctx), src, bytes));
}

int dv__drv_memset_d8(dv_drv_stream *stream, dv_dptr dst, uint8_t value, uint64_t count)
{
    CHECK_OBJ(stream, DV_DRV_STREAM, "memset_d8_async");
    CHECK_PTR(dst, "dst", "memset_d8_async");
    CHECK_BYTES(count, "memset_d8_async");
    ENQUEUES(stream);
    return drv_result(OBJ(stream)->drv, DV_CALL_MEMSET_D8,
                      OPS(stream)->memset_d8(OBJ(stream), dst, value, count));
}

int dv__drv_memset_d32(dv_drv_stream *stream, dv_dptr dst, uint32_t value, uint64_t count)
{
    CHECK_OBJ(stream, DV_DRV_STREAM, "memset_d32_async");
    CHECK_PTR(dst, "dst", "memset_d32_async");
    CHECK_BYTES(count, "memset_d32_async");
    if (count > DV_DRV_MAX_BYTES / 4)
        return dv__fail(DV_EINVAL, "memset_d32_async", "memset_d32_async: count %llu is absurd",
                        (unsigned long long)count);
    if (dst % 4 != 0)
        return dv__fail(DV_EINVAL, "memset_d32_async",
                        "memset_d32_async: dst 0x%llx is not 4-byte aligned",
                        (unsigned long long)dst);
    ENQUEUES(stream);
    return drv_result(OBJ(stream)->drv, DV_CALL_MEMSET_D32,
                      OPS(stream)->memset_d32(OBJ(stream), dst, value, count));
}

/* ------------------------------------------------------------------------
 * Modules and launches
 * ------------------------------------------------------------------------ */

int dv__drv_module_load(dv_drv_ctx *ctx, const void *image, size_t image_bytes,
                        dv_drv_module **module)
{
    dv_drv_obj *obj;
    int rc;

    CHECK_OBJ(ctx, DV_DRV_CTX, "module_load");
    CHECK_PTR(image, "image", "module_load");
    CHECK_PTR(module, "module", "module_load");
    *module = NULL;
    CHECK_BYTES(image_bytes, "module_load");
    obj = obj_new(OBJ(ctx)->drv, DV_DRV_MODULE, OBJ(ctx), OBJ(ctx)->device);
    if (obj == NULL)
        return dv__fail(DV_ENOMEM, "module_load", "out of host memory");
    rc = OPS(ctx)->module_load(OBJ(ctx), obj, image, image_bytes);
    if (rc != DV_CU_SUCCESS) {
        obj_discard(obj);
        return drv_result(OBJ(ctx)->drv, DV_CALL_MODULE_LOAD, rc);
    }
    obj_publish(obj);
    *module = (dv_drv_module *)obj;
    return DV_OK;
}

int dv__drv_module_unload(dv_drv_module *module)
{
    CHECK_OBJ(module, DV_DRV_MODULE, "module_unload");
    /* Functions of the module die with it. */
    dv_driver *drv = OBJ(module)->drv;
    int rc = OPS(module)->module_unload(OBJ(module));
    OBJ_LOCK(drv);
    for (dv_drv_obj *o = drv->live_head.live_next, *next; o != &drv->live_head; o = next) {
        next = o->live_next;
        if (o->kind == DV_DRV_FUNC && o->parent == OBJ(module)) {
            obj_unlink_locked(o);
            obj_recycle_locked(drv, o);
        }
    }
    obj_unlink_locked(OBJ(module));
    obj_recycle_locked(drv, OBJ(module));
    OBJ_UNLOCK(drv);
    return drv_result(drv, DV_CALL_MODULE_UNLOAD, rc);
}

int dv__drv_func_get(dv_drv_module *module, const char *name, dv_drv_func **func)
{
    dv_drv_obj *obj;
    int rc;

    CHECK_OBJ(module, DV_DRV_MODULE, "func_get");
    CHECK_PTR(name, "name", "func_get");
    CHECK_PTR(func, "func", "func_get");
    *func = NULL;
    if (*name == '\0')
        return dv__fail(DV_EINVAL, "func_get", "func_get: empty name");
    obj = obj_new(OBJ(module)->drv, DV_DRV_FUNC, OBJ(module)->ctx, OBJ(module)->device);
    if (obj == NULL)
        return dv__fail(DV_ENOMEM, "func_get", "out of host memory");
    obj->parent = OBJ(module);
    rc = OPS(module)->func_get(OBJ(module), obj, name);
    if (rc != DV_CU_SUCCESS) {
        obj_discard(obj);
        int raw = rc;
        rc = drv_result(OBJ(module)->drv, DV_CALL_FUNC_GET, rc);
        if (raw == DV_CU_NOT_FOUND) {
            /* Not a driver failure: the image has no such kernel. */
            rc = DV_ENOKERNEL;
            dv__detail()->status = rc;
        }
        snprintf(dv__detail()->message, sizeof(dv__detail()->message),
                 "func_get: no kernel named \"%s\" in the module (%s)", name,
                 dv__detail()->driver_name);
        return rc;
    }
    obj_publish(obj);
    *func = (dv_drv_func *)obj;
    return DV_OK;
}

int dv__drv_func_params(dv_drv_func *func, uint16_t *bytes, unsigned max, unsigned *count)
{
    CHECK_OBJ(func, DV_DRV_FUNC, "func_params");
    CHECK_PTR(count, "count", "func_params");
    *count = 0;
    int rc = OPS(func)->func_params != NULL ? OPS(func)->func_params(OBJ(func), bytes, max, count)
                                            : DV_CU_NOT_SUPPORTED;
    if (rc == DV_CU_NOT_SUPPORTED)
        return dv__fail(DV_ENOTSUP, "func_params",
                        "func_params: the driver cannot list a kernel's parameters");
    if (rc != DV_CU_SUCCESS)
        return dv__fail_driver(OBJ(func)->drv, "func_params", rc);
    return DV_OK;
}

void dv__drv_builtin_image(const dv_driver *drv, const void **image, size_t *bytes)
{
    *image = NULL;
    *bytes = 0;
    if (drv != NULL)
        drv->ops->builtin_image(drv, image, bytes);
}

static bool dim_ok(dv_dim3 d)
{
    return d.x > 0 && d.y > 0 && d.z > 0;
}

int dv__drv_launch(dv_drv_func *func, dv_dim3 grid, dv_dim3 block, uint32_t shared_bytes,
                   dv_drv_stream *stream, void **params)
{
    CHECK_OBJ(func, DV_DRV_FUNC, "launch");
    CHECK_OBJ(stream, DV_DRV_STREAM, "launch");
    if (OBJ(func)->ctx != OBJ(stream)->ctx)
        return dv__fail(DV_EINVAL, "launch",
                        "launch: kernel (device %d) and stream (device %d) belong to different "
                        "contexts",
                        OBJ(func)->device, OBJ(stream)->device);
    if (!dim_ok(grid) || !dim_ok(block))
        return dv__fail(DV_EINVAL, "launch", "launch: grid %ux%ux%u block %ux%ux%u has a zero",
                        grid.x, grid.y, grid.z, block.x, block.y, block.z);
    if ((uint64_t)block.x * block.y * block.z > 1024)
        return dv__fail(DV_EINVAL, "launch", "launch: block %ux%ux%u exceeds 1024 threads", block.x,
                        block.y, block.z);
    if (grid.y > 65535 || grid.z > 65535 || grid.x > INT32_MAX || block.z > 64)
        return dv__fail(DV_EINVAL, "launch", "launch: grid %ux%ux%u block %ux%ux%u out of range",
                        grid.x, grid.y, grid.z, block.x, block.y, block.z);
    ENQUEUES(stream);
    return drv_result(OBJ(func)->drv, DV_CALL_LAUNCH,
                      OPS(func)->launch(OBJ(func), grid, block, shared_bytes, OBJ(stream), params));
}

int dv__drv_host_register(dv_drv_ctx *ctx, void *p, uint64_t bytes)
{
    CHECK_OBJ(ctx, DV_DRV_CTX, "host_register");
    CHECK_PTR(p, "p", "host_register");
    CHECK_BYTES(bytes, "host_register");
    if ((uintptr_t)p + bytes < (uintptr_t)p)
        return dv__fail(DV_EINVAL, "host_register", "host_register: range wraps");
    return drv_result(OBJ(ctx)->drv, DV_CALL_HOST_REGISTER,
                      OPS(ctx)->host_register(OBJ(ctx), p, bytes));
}

int dv__drv_host_unregister(dv_drv_ctx *ctx, void *p)
{
    CHECK_OBJ(ctx, DV_DRV_CTX, "host_unregister");
    CHECK_PTR(p, "p", "host_unregister");
    return drv_result(OBJ(ctx)->drv, DV_CALL_HOST_UNREGISTER,
                      OPS(ctx)->host_unregister(OBJ(ctx), p));
}

int dv__drv_host_dptr(dv_drv_ctx *ctx, void *p, dv_dptr *out)
{
    CHECK_OBJ(ctx, DV_DRV_CTX, "host_device_pointer");
    CHECK_PTR(out, "out", "host_device_pointer");
    *out = 0;
    CHECK_PTR(p, "p", "host_device_pointer");
    return drv_result(OBJ(ctx)->drv, DV_CALL_HOST_DPTR, OPS(ctx)->host_dptr(OBJ(ctx), p, out));
}

int dv__drv_value_ops(dv_drv_stream *stream, const dv_drv_value_op *ops, unsigned n)
{
    CHECK_OBJ(stream, DV_DRV_STREAM, "batch_mem_op");
    CHECK_PTR(ops, "ops", "batch_mem_op");
    if (n == 0 || n > DV_DRV_MAX_VALUE_OPS)
        return dv__fail(DV_EINVAL, "batch_mem_op", "batch_mem_op: %u operations (1..%d)", n,
                        DV_DRV_MAX_VALUE_OPS);
    for (unsigned i = 0; i < n; i++)
        if (ops[i].addr == 0 || ops[i].addr % 4 != 0)
            return dv__fail(DV_EINVAL, "batch_mem_op",
                            "batch_mem_op: operation %u's address is NULL or not 4-aligned", i);
    int hooked = OPEN_HOOKS(stream);
    if (hooked != DV_OK)
        return hooked;
    ENQUEUES(stream);
    return drv_result(OBJ(stream)->drv, DV_CALL_VALUE_OPS,
                      OPS(stream)->value_ops(OBJ(stream), ops, n));
}

int dv__drv_launch_host_fn(dv_drv_stream *stream, dv_host_fn fn, void *arg)
{
    CHECK_OBJ(stream, DV_DRV_STREAM, "launch_host_fn");
    if (fn == NULL)
        return dv__fail(DV_EINVAL, "launch_host_fn", "launch_host_fn: fn is NULL");
    int hooked = OPEN_HOOKS(stream);
    if (hooked != DV_OK)
        return hooked;
    ENQUEUES(stream);
    return drv_result(OBJ(stream)->drv, DV_CALL_HOST_FN,
                      OPS(stream)->host_fn(OBJ(stream), fn, arg));
}

void dv__drv_stream_touched(dv_drv_stream *stream)
{
    if (obj_alive(stream, DV_DRV_STREAM))
        ENQUEUES(stream);
}

void *dv__drv_stream_native(dv_drv_stream *stream)
{
    if (!obj_alive(stream, DV_DRV_STREAM) || OPS(stream)->native_stream == NULL)
        return NULL;
    if (OPEN_HOOKS(stream) != DV_OK)
        return NULL;
    ENQUEUES(stream); /* whoever asks may enqueue on it */
    return OPS(stream)->native_stream(OBJ(stream));
}

/* ------------------------------------------------------------------------
 * Stream capture
 * ------------------------------------------------------------------------ */

#define CAPTURE_OP(obj, op, call)                                                                  \
    do {                                                                                           \
        CHECK_OBJ(obj, DV_DRV_STREAM, call);                                                       \
        if (OPS(obj)->op == NULL)                                                                  \
            return dv__fail(DV_ENOTSUP, call, "%s: the %s backend cannot capture a stream", call,  \
                            dv__driver_backend_name(OBJ(obj)->drv));                               \
    } while (0)

int dv__drv_capture_begin(dv_drv_stream *stream)
{
    CAPTURE_OP(stream, capture_begin, "capture_begin");
    int hooked = OPEN_HOOKS(stream);
    if (hooked != DV_OK)
        return hooked;
    ENQUEUES(stream);
    int rc = OPS(stream)->capture_begin(OBJ(stream));
    if (rc != DV_CU_SUCCESS)
        return dv__fail_driver(OBJ(stream)->drv, "capture_begin", rc);
    OBJ(stream)->capturing = true;
    return DV_OK;
}

int dv__drv_capture_any(dv_drv_stream *stream, bool *any)
{
    CAPTURE_OP(stream, capture_any, "capture_any");
    CHECK_PTR(any, "any", "capture_any");
    *any = false;
    int rc = OPS(stream)->capture_any(OBJ(stream), any);
    return rc == DV_CU_SUCCESS ? DV_OK : dv__fail_driver(OBJ(stream)->drv, "capture_any", rc);
}

int dv__drv_capture_end(dv_drv_stream *stream, dv_drv_graph **graph)
{
    CAPTURE_OP(stream, capture_end, "capture_end");
    CHECK_PTR(graph, "graph", "capture_end");
    *graph = NULL;
    int rc = OPS(stream)->capture_end(OBJ(stream), graph);
    OBJ(stream)->capturing = false; /* ended, or invalidated and ended */
    return rc == DV_CU_SUCCESS ? DV_OK : dv__fail_driver(OBJ(stream)->drv, "capture_end", rc);
}

int dv__drv_graph_nodes(dv_drv_graph *graph, int (*visit)(void *self, const dv_drv_node *node),
                        void *self)
{
    dv_driver *drv = graph != NULL ? *(dv_driver **)graph : NULL;
    if (drv == NULL || visit == NULL)
        return dv__fail(DV_EINVAL, "graph_nodes", "graph_nodes: NULL argument");
    return drv->ops->graph_nodes(graph, visit, self);
}

int dv__drv_graph_launch(dv_drv_graph *graph, dv_drv_stream *stream)
{
    CHECK_OBJ(stream, DV_DRV_STREAM, "graph_launch");
    if (graph == NULL || *(dv_driver **)graph != OBJ(stream)->drv)
        return dv__fail(DV_EINVAL, "graph_launch", "graph_launch: no graph, or another driver's");
    int hooked = OPEN_HOOKS(stream);
    if (hooked != DV_OK)
        return hooked;
    ENQUEUES(stream);
    int rc = OPS(stream)->graph_launch(graph, OBJ(stream));
    return rc == DV_CU_SUCCESS ? DV_OK : dv__fail_driver(OBJ(stream)->drv, "graph_launch", rc);
}

void dv__drv_graph_destroy(dv_drv_graph *graph)
{
    if (graph != NULL)
        (*(dv_driver **)graph)->ops->graph_destroy(graph);
}

const void *dv__drv_func_native(dv_drv_func *func)
{
    if (!obj_alive(func, DV_DRV_FUNC) || OPS(func)->func_native == NULL)
        return NULL;
    return OPS(func)->func_native(OBJ(func));
}

int dv__drv_ctx_make_current(dv_drv_ctx *ctx)
{
    CHECK_OBJ(ctx, DV_DRV_CTX, "ctx_make_current");
    if (OPS(ctx)->make_current == NULL)
        return DV_OK;
    return drv_result(OBJ(ctx)->drv, DV_CALL_CTX_RETAIN, OPS(ctx)->make_current(OBJ(ctx)));
}

const char *dv__drv_error_name(const dv_driver *drv, int code)
{
    const char *name = NULL;
    if (drv != NULL && drv->ops->error_name != NULL)
        name = drv->ops->error_name(drv, code);
    if (name == NULL)
        name = dv__driver_code_name(code);
    return name != NULL ? name : "CUDA_ERROR_UNRECOGNIZED";
}

const char *dv__drv_error_string(const dv_driver *drv, int code)
{
    const char *text = NULL;
    if (drv != NULL && drv->ops->error_string != NULL)
        text = drv->ops->error_string(drv, code);
    return text != NULL ? text : dv_strerror(dv__status_from_driver(code));
}
