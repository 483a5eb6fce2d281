/*
 * The cuda backend of the device port: the CUDA Driver API, reached at run
 * time so that devactor builds, links and runs where there is no driver.
 *
 * Design
 * ------
 * cuda.h is included for its types and constants only; nothing here
 * references a libcuda symbol at link time.  open() dlopens libcuda.so.1,
 * takes its one stable entry point, cuGetProcAddress_v2, and resolves every
 * other call through it by base name and CUDA_VERSION, so the driver hands
 * back the ABI version of each call that matches the prototypes this file
 * was compiled against (cuMemAlloc -> cuMemAlloc_v2, and so on).
 *
 * CU_FUNCS lists those calls once.  Each entry becomes a typed pointer in
 * struct cu_api and a row of the table that open() resolves in one loop.
 * The member is written `__typeof__(fn) *fn`, so cuda.h's own #defines apply
 * to it: api->cuMemAlloc expands to api->cuMemAlloc_v2, whose type is the
 * _v2 prototype, while the table's #fn keeps the base name that
 * cuGetProcAddress wants.
 *
 * Contexts are device primary contexts, retained per dv_drv_ctx object.  The
 * driver keeps a current context per thread; every op that touches device
 * state first makes its object's context current (cu_enter).  A thread-local
 * cache skips cuCtxSetCurrent when the context is already current.  The
 * cache cannot see a context being reset or destroyed from another thread,
 * so it is tagged with a process-wide epoch that ctx_release, ctx_reset and
 * close bump: every thread then sets its context again on its next call.
 * (The cache also cannot see foreign code on the same thread switching the
 * current context; devactor's threads run no such code.)
 *
 * Return values: ops return 0 or the raw CUresult; the port maps it.  Only
 * open() fills the error detail itself, to say why there is no backend.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "driver/port.h"

/* dv_dptr and byte counts travel as 64-bit values into size_t and
 * CUdeviceptr parameters; the CUDA driver exists only for 64-bit hosts. */
_Static_assert(sizeof(size_t) >= sizeof(uint64_t), "cuda backend needs a 64-bit size_t");
_Static_assert(sizeof(CUdeviceptr) == sizeof(dv_dptr), "CUdeviceptr is not 64-bit");
/* Resolved pointers are stored through a void * (POSIX guarantees a
 * function pointer survives the round trip, as dlsym relies on). */
_Static_assert(sizeof(void *) == sizeof(void (*)(void)), "function pointers differ from void *");

/* Every driver call devactor makes, by base name. */
#define CU_FUNCS(X)                                                                                \
    X(cuGetErrorName)                                                                              \
    X(cuGetErrorString)                                                                            \
    X(cuInit)                                                                                      \
    X(cuDeviceGetCount)                                                                            \
    X(cuDeviceGet)                                                                                 \
    X(cuDeviceGetName)                                                                             \
    X(cuDeviceTotalMem)                                                                            \
    X(cuDeviceGetAttribute)                                                                        \
    X(cuDevicePrimaryCtxRetain)                                                                    \
    X(cuDevicePrimaryCtxRelease)                                                                   \
    X(cuDevicePrimaryCtxReset)                                                                     \
    X(cuCtxSetCurrent)                                                                             \
    X(cuMemGetInfo)                                                                                \
    X(cuStreamCreate)                                                                              \
    X(cuStreamDestroy)                                                                             \
    X(cuStreamSynchronize)                                                                         \
    X(cuStreamQuery)                                                                               \
    X(cuStreamWaitEvent)                                                                           \
    X(cuEventCreate)                                                                               \
    X(cuEventDestroy)                                                                              \
    X(cuEventRecord)                                                                               \
    X(cuEventQuery)                                                                                \
    X(cuEventSynchronize)                                                                          \
    X(cuEventElapsedTime)                                                                          \
    X(cuMemAlloc)                                                                                  \
    X(cuMemFree)                                                                                   \
    X(cuMemAllocFromPoolAsync)                                                                     \
    X(cuMemFreeAsync)                                                                              \
    X(cuMemPoolSetAttribute)                                                                       \
    X(cuMemPoolGetAttribute)                                                                       \
    X(cuMemPoolCreate)                                                                             \
    X(cuMemPoolDestroy)                                                                            \
    X(cuMemPoolTrimTo)                                                                             \
    X(cuMemGetAllocationGranularity)                                                               \
    X(cuMemAddressReserve)                                                                         \
    X(cuMemAddressFree)                                                                            \
    X(cuMemCreate)                                                                                 \
    X(cuMemRelease)                                                                                \
    X(cuMemMap)                                                                                    \
    X(cuMemUnmap)                                                                                  \
    X(cuMemSetAccess)                                                                              \
    X(cuMemcpyHtoDAsync)                                                                           \
    X(cuMemcpyDtoHAsync)                                                                           \
    X(cuMemcpyDtoDAsync)                                                                           \
    X(cuMemcpyPeerAsync)                                                                           \
    X(cuMemsetD8Async)                                                                             \
    X(cuMemsetD32Async)                                                                            \
    X(cuModuleLoadData)                                                                            \
    X(cuModuleUnload)                                                                              \
    X(cuModuleGetFunction)                                                                         \
    X(cuLaunchKernel)                                                                              \
    X(cuLaunchHostFunc)                                                                            \
    X(cuMemHostRegister)                                                                           \
    X(cuMemHostUnregister)                                                                         \
    X(cuMemHostGetDevicePointer)                                                                   \
    X(cuStreamBatchMemOp)                                                                          \
    X(cuStreamBeginCapture)                                                                        \
    X(cuStreamEndCapture)                                                                          \
    X(cuStreamGetCaptureInfo)                                                                      \
    X(cuGraphGetNodes)                                                                             \
    X(cuGraphNodeGetType)                                                                          \
    X(cuGraphKernelNodeGetParams)                                                                  \
    X(cuGraphMemcpyNodeGetParams)                                                                  \
    X(cuGraphMemsetNodeGetParams)                                                                  \
    X(cuGraphInstantiateWithFlags)                                                                 \
    X(cuGraphLaunch)                                                                               \
    X(cuGraphExecDestroy)                                                                          \
    X(cuGraphDestroy)

struct cu_api {
#define CU_API_MEMBER(fn) __typeof__(fn) *fn;
    CU_FUNCS(CU_API_MEMBER)
#undef CU_API_MEMBER
};

static const struct cu_symbol {
    const char *name;
    size_t offset;
} cu_symbols[] = {
#define CU_SYMBOL_ROW(fn) {#fn, offsetof(struct cu_api, fn)},
    CU_FUNCS(CU_SYMBOL_ROW)
#undef CU_SYMBOL_ROW
};

/* drv->impl. */
struct cu_impl {
    void *lib;                  /* dlopen handle of libcuda.so.1 */
    uint64_t release_threshold; /* from the config, 0 already made UINT64_MAX */
    /* Per ordinal: the primary context was reset and is not active again
     * yet (see cu_revive). */
    _Atomic bool revive[DV_DRV_MAX_DEVICES];
    struct cu_api api;
    /* Optional (CUDA 12.4 drivers and later): NULL where absent. */
    CUresult (*func_get_param_info)(CUfunction, size_t, size_t *, size_t *);
    /* CUDA 12.0 and later: the function of a library kernel in a node. */
    CUresult (*kernel_get_function)(CUfunction *, CUkernel);
};

/* The backend objects; each starts with the port's header. */
struct cu_ctx {
    dv_drv_obj hdr;
    CUcontext ctx;
    CUdevice dev;
    int ordinal;
    CUmemoryPool pool; /* devactor's own stream-ordered pool (never the device's
                        * default one, which every cudaMallocAsync user of the
                        * process shares); NULL where unsupported */
};

struct cu_stream {
    dv_drv_obj hdr;
    CUstream s;
};

struct cu_event {
    dv_drv_obj hdr;
    CUevent e;
};

struct cu_module {
    dv_drv_obj hdr;
    CUmodule m;
};

struct cu_func {
    dv_drv_obj hdr;
    CUfunction f;
};

static const struct cu_api *cu_api_of(const dv_drv_obj *obj)
{
    return &((const struct cu_impl *)obj->drv->impl)->api;
}

static struct cu_ctx *cu_ctx_of(const dv_drv_obj *obj)
{
    return (struct cu_ctx *)obj->ctx;
}

/* ------------------------------------------------------------------------
 * Current context
 * ------------------------------------------------------------------------ */

/* Bumped whenever a cached current context may no longer be what the
 * driver has current for a thread.  Starts at 1 so a zeroed cache misses. */
static _Atomic uint64_t cu_current_epoch = 1;

static _Thread_local struct {
    CUcontext ctx;
    uint64_t epoch;
} cu_current;

static void cu_forget_current(void)
{
    /* Release: pairs with the acquire load in cu_enter, so a thread that
     * sees the new epoch also sees the reset or release that caused it. */
    atomic_fetch_add_explicit(&cu_current_epoch, 1, memory_order_release);
    cu_current.ctx = NULL;
}

/*
 * Bring a reset primary context back.  The reset keeps the retain count
 * but leaves the context inactive, and making the old handle current does
 * not revive it: every call then fails with CONTEXT_IS_DESTROYED (seen on
 * driver 580 / CUDA 13.0).  A retain re-activates it under the same handle,
 * so every dv_drv_ctx of the device stays valid, and the matching release
 * puts the count back.  Where the retain fails (after a sticky fault it
 * answers that fault's code) the flag stays set, so each later call tries
 * again and reports the real cause instead of CONTEXT_IS_DESTROYED.
 * Concurrent callers may both revive: each retain is paired with its
 * release, so the count comes out right either way.
 */
static CUresult cu_revive(struct cu_impl *impl, const struct cu_ctx *c)
{
    CUcontext again;
    CUresult rc = impl->api.cuDevicePrimaryCtxRetain(&again, c->dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    (void)impl->api.cuDevicePrimaryCtxRelease(c->dev);
    atomic_store_explicit(&impl->revive[c->ordinal], false, memory_order_relaxed);
    return CUDA_SUCCESS;
}

/* Make the context of obj current on the calling thread. */
static CUresult cu_enter(const dv_drv_obj *obj)
{
    const struct cu_ctx *c = cu_ctx_of(obj);
    struct cu_impl *impl = obj->drv->impl;
    uint64_t epoch = atomic_load_explicit(&cu_current_epoch, memory_order_acquire);

    if (cu_current.ctx == c->ctx && cu_current.epoch == epoch)
        return CUDA_SUCCESS;
    /* Set before the epoch moved (cu_ctx_reset), so seen here when the
     * acquire above saw the new epoch. */
    if (atomic_load_explicit(&impl->revive[c->ordinal], memory_order_relaxed)) {
        CUresult rc = cu_revive(impl, c);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    CUresult rc = impl->api.cuCtxSetCurrent(c->ctx);
    if (rc != CUDA_SUCCESS) {
        cu_current.ctx = NULL;
        return rc;
    }
    cu_current.ctx = c->ctx;
    cu_current.epoch = epoch;
    return CUDA_SUCCESS;
}

/* Return the raw code of a failed driver call from the enclosing op. */
#define CU_TRY(expr)                                                                               \
    do {                                                                                           \
        CUresult cu_try_rc_ = (expr);                                                              \
        if (cu_try_rc_ != CUDA_SUCCESS)                                                            \
            return (int)cu_try_rc_;                                                                \
    } while (0)

/* ------------------------------------------------------------------------
 * Error names
 * ------------------------------------------------------------------------ */

/* Own buffer per caller, so a name and a description can sit in one printf. */
static const char *cu_unknown_code(char *buf, size_t size, int code)
{
    snprintf(buf, size, "CUDA_ERROR_%d", code);
    return buf;
}

/* impl may be NULL (open failed or not yet done): the fallbacks still
 * answer, since the port asks for names while filling any detail. */
static const char *cu_error_name(const dv_driver *drv, int code)
{
    const struct cu_impl *impl = drv ? drv->impl : NULL;
    const char *name = NULL;

    if (impl && impl->api.cuGetErrorName &&
        impl->api.cuGetErrorName((CUresult)code, &name) == CUDA_SUCCESS && name)
        return name;
    name = dv__driver_code_name(code);
    if (name)
        return name;
    static _Thread_local char unknown[32];
    return cu_unknown_code(unknown, sizeof unknown, code);
}

static const char *cu_error_string(const dv_driver *drv, int code)
{
    const struct cu_impl *impl = drv ? drv->impl : NULL;
    const char *text = NULL;

    if (impl && impl->api.cuGetErrorString &&
        impl->api.cuGetErrorString((CUresult)code, &text) == CUDA_SUCCESS && text)
        return text;
    text = dv__driver_code_name(code);
    if (text)
        return text;
    static _Thread_local char unknown[32];
    return cu_unknown_code(unknown, sizeof unknown, code);
}

/* ------------------------------------------------------------------------
 * Open and close
 * ------------------------------------------------------------------------ */

/* open() failed in a driver call: ENODEVICE, with the code in the detail. */
static int cu_fail_open_call(const struct cu_api *api, const char *what, CUresult rc)
{
    const char *name = NULL, *text = NULL;
    char unknown[32];

    if (api->cuGetErrorName(rc, &name) != CUDA_SUCCESS || !name)
        name = dv__driver_code_name((int)rc);
    if (!name)
        name = cu_unknown_code(unknown, sizeof unknown, (int)rc);
    if (api->cuGetErrorString(rc, &text) != CUDA_SUCCESS || !text)
        text = "no description";
    int status = dv__fail(DV_ENODEVICE, "open", "CUDA driver unusable: %s failed with %s (%s)",
                          what, name, text);
    dv_error_detail *detail = dv__detail();
    detail->driver_code = (int)rc;
    snprintf(detail->driver_name, sizeof detail->driver_name, "%s", name);
    return status;
}

/* Why cuGetProcAddress gave no pointer, in words; buf holds the driver's
 * own CUDA version where that is the reason. */
static const char *cu_lookup_failure(__typeof__(cuGetProcAddress) *get_proc, CUresult rc,
                                     CUdriverProcAddressQueryResult found, char *buf, size_t size)
{
    if (rc == CUDA_ERROR_INVALID_VALUE) {
        /* Asked for a newer CUDA than the driver knows.  cuDriverGetVersion
         * exists since CUDA 2.2, so ask for it at that version to say
         * which CUDA the driver has. */
        void *fn = NULL;
        int version = 0;
        if (get_proc("cuDriverGetVersion", &fn, 2020, CU_GET_PROC_ADDRESS_DEFAULT, NULL) ==
                CUDA_SUCCESS &&
            fn && ((__typeof__(cuDriverGetVersion) *)fn)(&version) == CUDA_SUCCESS && version > 0) {
            snprintf(buf, size, "the driver supports only CUDA %d.%d", version / 1000,
                     version % 1000 / 10);
            return buf;
        }
        return "the driver is older than the requested CUDA version";
    }
    if (rc != CUDA_SUCCESS)
        return "cuGetProcAddress failed";
    if (found == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND)
        return "symbol not found";
    if (found == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT)
        return "no ABI-compatible version";
    return "not supported on this platform";
}

static int cu_open(dv_driver *drv, const dv_driver_config *cfg)
{
    int status;
    struct cu_impl *impl = calloc(1, sizeof *impl);
    if (!impl)
        return dv__fail(DV_ENOMEM, "open", "no host memory for the cuda backend");
    uint64_t threshold = cfg ? cfg->pool_release_threshold : 0;
    impl->release_threshold = threshold ? threshold : UINT64_MAX;

    /* RTLD_LOCAL: keep libcuda's symbols out of the global namespace, so
     * a later dlopen of another CUDA user resolves its own way.
     * RTLD_NODELETE: once cuInit ran, the driver has threads and callbacks
     * running its code, which outlive any dv_driver (a host function still
     * queued at close, a context another user retained); close's dlclose
     * must never unmap it under them. */
    impl->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!impl->lib) {
        const char *why = dlerror();
        status = dv__fail(DV_ENODEVICE, "open",
                          "libcuda.so.1 not found (is the NVIDIA driver installed?): %s",
                          why ? why : "dlopen failed");
        goto fail_dlopen;
    }

    __typeof__(cuGetProcAddress) *get_proc =
        (__typeof__(cuGetProcAddress) *)dlsym(impl->lib, "cuGetProcAddress_v2");
    if (!get_proc) {
        status = dv__fail(DV_ENODEVICE, "open",
                          "libcuda.so.1 has no cuGetProcAddress_v2: the NVIDIA driver "
                          "is too old (devactor needs one for CUDA %d.%d or later)",
                          CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
        goto fail_resolve;
    }

    for (size_t i = 0; i < sizeof cu_symbols / sizeof cu_symbols[0]; i++) {
        void *fn = NULL;
        CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        CUresult rc =
            get_proc(cu_symbols[i].name, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &found);
        if (rc != CUDA_SUCCESS || found != CU_GET_PROC_ADDRESS_SUCCESS || !fn) {
            char why[64];
            status = dv__fail(DV_ENODEVICE, "open",
                              "cannot resolve %s in libcuda.so.1 for CUDA %d.%d (%s); "
                              "update the NVIDIA driver",
                              cu_symbols[i].name, CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10,
                              cu_lookup_failure(get_proc, rc, found, why, sizeof why));
            goto fail_resolve;
        }
        memcpy((char *)&impl->api + cu_symbols[i].offset, &fn, sizeof fn);
    }

    {
        void *fn = NULL;
        CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        if (get_proc("cuFuncGetParamInfo", &fn, 12040, CU_GET_PROC_ADDRESS_DEFAULT, &found) ==
                CUDA_SUCCESS &&
            found == CU_GET_PROC_ADDRESS_SUCCESS && fn != NULL)
            memcpy(&impl->func_get_param_info, &fn, sizeof fn);
        fn = NULL;
        found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        if (get_proc("cuKernelGetFunction", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &found) ==
                CUDA_SUCCESS &&
            found == CU_GET_PROC_ADDRESS_SUCCESS && fn != NULL)
            memcpy(&impl->kernel_get_function, &fn, sizeof fn);
    }

    CUresult rc = impl->api.cuInit(0);
    if (rc != CUDA_SUCCESS) {
        status = cu_fail_open_call(&impl->api, "cuInit", rc);
        goto fail_init;
    }
    int count = 0;
    rc = impl->api.cuDeviceGetCount(&count);
    if (rc != CUDA_SUCCESS) {
        status = cu_fail_open_call(&impl->api, "cuDeviceGetCount", rc);
        goto fail_init;
    }
    if (count <= 0) {
        status = dv__fail(DV_ENODEVICE, "open", "no CUDA device");
        goto fail_init;
    }

    drv->impl = impl;
    return 0;

fail_init:
fail_resolve:
    dlclose(impl->lib);
fail_dlopen:
    free(impl);
    return status;
}

/* NULL-safe: a port that calls close after a failed open finds no impl. */
static void cu_close(dv_driver *drv)
{
    struct cu_impl *impl = drv->impl;
    if (!impl)
        return;
    /* Contexts die with their last release; cached current contexts of any
     * thread must not outlive this driver. */
    cu_forget_current();
    dlclose(impl->lib);
    free(impl);
    drv->impl = NULL;
}

/* ------------------------------------------------------------------------
 * Devices and contexts
 * ------------------------------------------------------------------------ */

static int cu_device_count(dv_driver *drv, int *count)
{
    const struct cu_impl *impl = drv->impl;
    int n = 0;
    CU_TRY(impl->api.cuDeviceGetCount(&n));
    *count = n < DV_DRV_MAX_DEVICES ? n : DV_DRV_MAX_DEVICES;
    return 0;
}

static int cu_device_info(dv_driver *drv, int ordinal, dv_device_info *info)
{
    const struct cu_api *api = &((const struct cu_impl *)drv->impl)->api;
    CUdevice dev;
    size_t total = 0;

    CU_TRY(api->cuDeviceGet(&dev, ordinal));
    memset(info, 0, sizeof *info);
    info->ordinal = ordinal;
    CU_TRY(api->cuDeviceGetName(info->name, (int)sizeof info->name, dev));
    info->name[sizeof info->name - 1] = '\0';
    CU_TRY(api->cuDeviceTotalMem(&total, dev));
    info->total_bytes = total;
    CU_TRY(api->cuDeviceGetAttribute(&info->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                     dev));
    CU_TRY(api->cuDeviceGetAttribute(&info->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                     dev));
    CU_TRY(api->cuDeviceGetAttribute(&info->multiprocessors,
                                     CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    return 0;
}

static int cu_mem_info(dv_drv_obj *ctx, uint64_t *free_bytes, uint64_t *total_bytes)
{
    size_t free_now = 0, total = 0;
    CU_TRY(cu_enter(ctx));
    CU_TRY(cu_api_of(ctx)->cuMemGetInfo(&free_now, &total));
    *free_bytes = free_now;
    *total_bytes = total;
    return 0;
}

static CUresult cu_set_threshold(const struct cu_api *api, CUmemoryPool pool, uint64_t bytes)
{
    cuuint64_t value = bytes;
    return api->cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &value);
}

/* A pool of the context's own on its device, its release threshold set.
 * NOT_SUPPORTED leaves none (the pool ops answer it). */
static CUresult cu_pool_make(const struct cu_api *api, struct cu_ctx *c, uint64_t threshold)
{
    CUmemPoolProps props;
    memset(&props, 0, sizeof(props));
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = c->ordinal;
    c->pool = NULL;
    CUresult rc = api->cuMemPoolCreate(&c->pool, &props);
    if (rc != CUDA_SUCCESS) {
        c->pool = NULL;
        return rc;
    }
    rc = cu_set_threshold(api, c->pool, threshold);
    if (rc != CUDA_SUCCESS) {
        (void)api->cuMemPoolDestroy(c->pool);
        c->pool = NULL;
    }
    return rc;
}

/* Blocks still out are released by the driver once freed. */
static void cu_pool_drop(const struct cu_api *api, struct cu_ctx *c)
{
    if (c->pool != NULL)
        (void)api->cuMemPoolDestroy(c->pool);
    c->pool = NULL;
}

static int cu_ctx_retain(dv_drv_obj *obj, int ordinal)
{
    struct cu_ctx *c = (struct cu_ctx *)obj;
    struct cu_impl *impl = obj->drv->impl;
    const struct cu_api *api = &impl->api;
    CUresult rc;

    if (ordinal < 0 || ordinal >= DV_DRV_MAX_DEVICES)
        return CUDA_ERROR_INVALID_DEVICE;
    c->ordinal = ordinal;
    CU_TRY(api->cuDeviceGet(&c->dev, ordinal));
    CU_TRY(api->cuDevicePrimaryCtxRetain(&c->ctx, c->dev));
    /* This retain made the context active, even after a reset. */
    atomic_store_explicit(&impl->revive[ordinal], false, memory_order_relaxed);
    rc = cu_enter(obj);
    if (rc != CUDA_SUCCESS)
        goto fail_enter;
    /* A device without stream-ordered pools still gives a context; the
     * pool ops answer NOT_SUPPORTED there instead of failing the retain. */
    rc = cu_pool_make(api, c, impl->release_threshold);
    if (rc == CUDA_ERROR_NOT_SUPPORTED)
        return 0;
    if (rc != CUDA_SUCCESS)
        goto fail_pool;
    return 0;

fail_pool:
fail_enter:
    (void)api->cuDevicePrimaryCtxRelease(c->dev);
    cu_forget_current();
    c->ctx = NULL;
    c->pool = NULL;
    return (int)rc;
}

static int cu_ctx_release(dv_drv_obj *obj)
{
    struct cu_ctx *c = (struct cu_ctx *)obj;
    cu_pool_drop(cu_api_of(obj), c);
    CUresult rc = cu_api_of(obj)->cuDevicePrimaryCtxRelease(c->dev);
    /* The last release destroys the context under every thread that has it
     * current. */
    cu_forget_current();
    return (int)rc;
}

static int cu_ctx_reset(dv_drv_obj *obj)
{
    struct cu_ctx *c = (struct cu_ctx *)obj;
    struct cu_impl *impl = obj->drv->impl;
    const struct cu_api *api = &impl->api;

    /* A reset is no reason to forget a threshold set since the retain:
     * read the pool's value now and put it back afterwards. */
    uint64_t threshold = impl->release_threshold;
    if (c->pool) {
        cuuint64_t now;
        if (api->cuMemPoolGetAttribute(c->pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &now) ==
            CUDA_SUCCESS)
            threshold = now;
    }

    /* The pool goes first: its memory goes with the reset anyway. */
    bool had_pool = c->pool != NULL;
    cu_pool_drop(api, c);
    CUresult rc = api->cuDevicePrimaryCtxReset(c->dev);
    if (rc == CUDA_SUCCESS)
        atomic_store_explicit(&impl->revive[c->ordinal], true, memory_order_relaxed);
    cu_forget_current();
    if (rc != CUDA_SUCCESS)
        return (int)rc;

    /* Revive now rather than on the next call, so the pool settings can go
     * back.  Failures from here on are not the reset's: after a sticky
     * fault the reset "succeeds" and the next real call reports the fault,
     * as the port promises. */
    if (cu_enter(obj) == CUDA_SUCCESS && had_pool)
        (void)cu_pool_make(api, c, threshold);
    return 0;
}

/* ------------------------------------------------------------------------
 * Streams and events
 * ------------------------------------------------------------------------ */

static int cu_stream_create(dv_drv_obj *ctx, dv_drv_obj *stream)
{
    struct cu_stream *s = (struct cu_stream *)stream;
    CU_TRY(cu_enter(ctx));
    return (int)cu_api_of(ctx)->cuStreamCreate(&s->s, CU_STREAM_NON_BLOCKING);
}

static int cu_stream_destroy(dv_drv_obj *stream)
{
    struct cu_stream *s = (struct cu_stream *)stream;
    CU_TRY(cu_enter(stream));
    /* Returns at once; the driver frees the stream when its work is done. */
    CU_TRY(cu_api_of(stream)->cuStreamDestroy(s->s));
    s->s = NULL;
    return 0;
}

static int cu_stream_sync(dv_drv_obj *stream)
{
    struct cu_stream *s = (struct cu_stream *)stream;
    CU_TRY(cu_enter(stream));
    return (int)cu_api_of(stream)->cuStreamSynchronize(s->s);
}

static int cu_stream_query(dv_drv_obj *stream, bool *done)
{
    struct cu_stream *s = (struct cu_stream *)stream;
    CU_TRY(cu_enter(stream));
    CUresult rc = cu_api_of(stream)->cuStreamQuery(s->s);
    *done = rc == CUDA_SUCCESS;
    return rc == CUDA_ERROR_NOT_READY ? 0 : (int)rc;
}

static int cu_event_create(dv_drv_obj *ctx, dv_drv_obj *event)
{
    struct cu_event *e = (struct cu_event *)event;
    CU_TRY(cu_enter(ctx));
    /* Without timing an event is a plain completion marker: cheaper to
     * record, and a wait on it does not need the timestamp write. */
    unsigned flags =
        event->flags & DV_DRV_EVENT_TIMING ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING;
    return (int)cu_api_of(ctx)->cuEventCreate(&e->e, flags);
}

static int cu_event_elapsed(dv_drv_obj *start, dv_drv_obj *end, float *ms)
{
    CU_TRY(cu_enter(start));
    return (int)cu_api_of(start)->cuEventElapsedTime(ms, ((struct cu_event *)start)->e,
                                                     ((struct cu_event *)end)->e);
}

static void *cu_native_event(dv_drv_obj *event)
{
    return (void *)((struct cu_event *)event)->e;
}

static int cu_event_destroy(dv_drv_obj *event)
{
    struct cu_event *e = (struct cu_event *)event;
    CU_TRY(cu_enter(event));
    CU_TRY(cu_api_of(event)->cuEventDestroy(e->e));
    e->e = NULL;
    return 0;
}

static int cu_event_record(dv_drv_obj *event, dv_drv_obj *stream)
{
    struct cu_event *e = (struct cu_event *)event;
    struct cu_stream *s = (struct cu_stream *)stream;
    CU_TRY(cu_enter(stream));
    return (int)cu_api_of(stream)->cuEventRecord(e->e, s->s);
}

static int cu_event_query(dv_drv_obj *event, bool *done)
{
    struct cu_event *e = (struct cu_event *)event;
    CU_TRY(cu_enter(event));
    CUresult rc = cu_api_of(event)->cuEventQuery(e->e);
    *done = rc == CUDA_SUCCESS;
    return rc == CUDA_ERROR_NOT_READY ? 0 : (int)rc;
}

static int cu_event_sync(dv_drv_obj *event)
{
    struct cu_event *e = (struct cu_event *)event;
    CU_TRY(cu_enter(event));
    return (int)cu_api_of(event)->cuEventSynchronize(e->e);
}

/* The event may belong to another context; the wait is enqueued in the
 * stream's. */
static int cu_stream_wait_event(dv_drv_obj *stream, dv_drv_obj *event)
{
    struct cu_stream *s = (struct cu_stream *)stream;
    struct cu_event *e = (struct cu_event *)event;
    CU_TRY(cu_enter(stream));
    return (int)cu_api_of(stream)->cuStreamWaitEvent(s->s, e->e, 0);
}

/* ------------------------------------------------------------------------
 * Memory
 * ------------------------------------------------------------------------ */

static int cu_mem_alloc(dv_drv_obj *ctx, uint64_t bytes, dv_dptr *dptr)
{
    CUdeviceptr p = 0;
    CU_TRY(cu_enter(ctx));
    CU_TRY(cu_api_of(ctx)->cuMemAlloc(&p, (size_t)bytes));
    *dptr = p;
    return 0;
}

static int cu_mem_free(dv_drv_obj *ctx, dv_dptr dptr)
{
    CU_TRY(cu_enter(ctx));
    return (int)cu_api_of(ctx)->cuMemFree((CUdeviceptr)dptr);
}

/* From the ctx's own pool by name, never cuMemAllocAsync's "current pool
 * of the device", which other code in the process may set. */
static int cu_mem_alloc_async(dv_drv_obj *stream, uint64_t bytes, dv_dptr *dptr)
{
    struct cu_stream *s = (struct cu_stream *)stream;
    const struct cu_ctx *c = cu_ctx_of(stream);
    CUdeviceptr p = 0;

    if (!c->pool)
        return CUDA_ERROR_NOT_SUPPORTED;
    CU_TRY(cu_enter(stream));
    CU_TRY(cu_api_of(stream)->cuMemAllocFromPoolAsync(&p, (size_t)bytes, c->pool, s->s));
    *dptr = p;
    return 0;
}

static int cu_mem_free_async(dv_drv_obj *stream, dv_dptr dptr)
{
    struct cu_stream *s = (struct cu_stream *)stream;
    CU_TRY(cu_enter(stream));
    return (int)cu_api_of(stream)->cuMemFreeAsync((CUdeviceptr)dptr, s->s);
}

/* 0 is taken literally here (release at every sync); only the config's 0
 * means "never release". */
static int cu_pool_set_threshold(dv_drv_obj *ctx, uint64_t bytes)
{
    const struct cu_ctx *c = cu_ctx_of(ctx);
    if (!c->pool)
        return CUDA_ERROR_NOT_SUPPORTED;
    CU_TRY(cu_enter(ctx));
    return (int)cu_set_threshold(cu_api_of(ctx), c->pool, bytes);
}

static int cu_pool_trim(dv_drv_obj *ctx, uint64_t keep_bytes)
{
    const struct cu_ctx *c = cu_ctx_of(ctx);
    if (!c->pool)
        return CUDA_ERROR_NOT_SUPPORTED;
    CU_TRY(cu_enter(ctx));
    return (int)cu_api_of(ctx)->cuMemPoolTrimTo(c->pool, (size_t)keep_bytes);
}

static int cu_pool_get_threshold(dv_drv_obj *ctx, uint64_t *bytes)
{
    const struct cu_ctx *c = cu_ctx_of(ctx);
    cuuint64_t value = 0;
    if (!c->pool)
        return CUDA_ERROR_NOT_SUPPORTED;
    CU_TRY(cu_enter(ctx));
    CU_TRY(
        cu_api_of(ctx)->cuMemPoolGetAttribute(c->pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &value));
    *bytes = value;
    return 0;
}

/* ------------------------------------------------------------------------
 * Virtual memory
 * ------------------------------------------------------------------------ */

static void cu_vmm_prop(const struct cu_ctx *c, CUmemAllocationProp *prop)
{
    memset(prop, 0, sizeof(*prop));
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = c->ordinal;
}

static int cu_vmm_granularity(dv_drv_obj *ctx, uint64_t *bytes)
{
    const struct cu_ctx *c = cu_ctx_of(ctx);
    const struct cu_api *api = cu_api_of(ctx);
    CUmemAllocationProp prop;
    int supported = 0;
    size_t g = 0;

    CU_TRY(cu_enter(ctx));
    CU_TRY(api->cuDeviceGetAttribute(
        &supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, c->dev));
    if (!supported)
        return CUDA_ERROR_NOT_SUPPORTED;
    cu_vmm_prop(c, &prop);
    CU_TRY(api->cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    *bytes = g;
    return 0;
}

static int cu_va_reserve(dv_drv_obj *ctx, uint64_t bytes, dv_dptr *va)
{
    CUdeviceptr p = 0;
    CU_TRY(cu_enter(ctx));
    CU_TRY(cu_api_of(ctx)->cuMemAddressReserve(&p, (size_t)bytes, 0, 0, 0));
    *va = p;
    return 0;
}

static int cu_va_release(dv_drv_obj *ctx, dv_dptr va, uint64_t bytes)
{
    CU_TRY(cu_enter(ctx));
    return (int)cu_api_of(ctx)->cuMemAddressFree((CUdeviceptr)va, (size_t)bytes);
}

/* Physical memory h mapped at va, readable and writable there by the
 * context's device; on failure it is left unmapped (h is the caller's). */
static int cu_map_access(const struct cu_ctx *c, const struct cu_api *api, dv_dptr va,
                         uint64_t bytes, CUmemGenericAllocationHandle h)
{
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    CUresult rc;

    cu_vmm_prop(c, &prop);
    CU_TRY(api->cuMemMap((CUdeviceptr)va, (size_t)bytes, 0, h, 0));
    memset(&access, 0, sizeof(access));
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if ((rc = api->cuMemSetAccess((CUdeviceptr)va, (size_t)bytes, &access, 1)) != CUDA_SUCCESS) {
        (void)api->cuMemUnmap((CUdeviceptr)va, (size_t)bytes);
        return (int)rc;
    }
    return 0;
}

/* Physical memory of the context's device, mapped at va and readable and
 * writable there; nothing is left behind on failure. */
static int cu_mem_map(dv_drv_obj *ctx, dv_dptr va, uint64_t bytes, uint64_t *handle)
{
    const struct cu_ctx *c = cu_ctx_of(ctx);
    const struct cu_api *api = cu_api_of(ctx);
    CUmemAllocationProp prop;
    CUmemGenericAllocationHandle h = 0;
    int rc;

    CU_TRY(cu_enter(ctx));
    cu_vmm_prop(c, &prop);
    CU_TRY(api->cuMemCreate(&h, (size_t)bytes, &prop, 0));
    if ((rc = cu_map_access(c, api, va, bytes, h)) != 0) {
        (void)api->cuMemRelease(h);
        return rc;
    }
    *handle = h;
    return 0;
}

static int cu_mem_unmap(dv_drv_obj *ctx, dv_dptr va, uint64_t bytes, uint64_t handle)
{
    const struct cu_api *api = cu_api_of(ctx);
    CU_TRY(cu_enter(ctx));
    CUresult rc = api->cuMemUnmap((CUdeviceptr)va, (size_t)bytes);
    CUresult rc2 = api->cuMemRelease((CUmemGenericAllocationHandle)handle);
    return (int)(rc != CUDA_SUCCESS ? rc : rc2);
}

static int cu_mem_unmap_keep(dv_drv_obj *ctx, dv_dptr va, uint64_t bytes, uint64_t handle)
{
    (void)handle; /* kept: its memory stays the device's until cu_mem_release */
    CU_TRY(cu_enter(ctx));
    return (int)cu_api_of(ctx)->cuMemUnmap((CUdeviceptr)va, (size_t)bytes);
}

/* Physical memory mapped at va, readable and writable there, whether it is
 * mapped at other addresses too (cuMemMap takes a handle any number of
 * times) or nowhere; on failure it stays as it was.  From offset zero:
 * drivers refuse any other (CUDA_ERROR_NOT_SUPPORTED on an H200, driver
 * 580). */
static int cu_mem_remap(dv_drv_obj *ctx, dv_dptr va, uint64_t bytes, uint64_t handle)
{
    CU_TRY(cu_enter(ctx));
    return cu_map_access(cu_ctx_of(ctx), cu_api_of(ctx), va, bytes,
                         (CUmemGenericAllocationHandle)handle);
}

static int cu_mem_release(dv_drv_obj *ctx, uint64_t handle)
{
    CU_TRY(cu_enter(ctx));
    return (int)cu_api_of(ctx)->cuMemRelease((CUmemGenericAllocationHandle)handle);
}

/* ------------------------------------------------------------------------
 * Copies and sets
 * ------------------------------------------------------------------------ */

static int cu_memcpy_htod(dv_drv_obj *stream, dv_dptr dst, const void *src, uint64_t bytes)
{
    struct cu_stream *s = (struct cu_stream *)stream;
    CU_TRY(cu_enter(stream));
    return (int)cu_api_of(stream)->cuMemcpyHtoDAsync((CUdeviceptr)dst, src, (size_t)bytes, s->s);
}

static int cu_memcpy_dtoh(dv_drv_obj *stream, void *dst, dv_dptr src, uint64_t bytes)
{
    struct cu_stream *s = (struct cu_stream *)stream;
    CU_TRY(cu_enter(stream));
    return (int)cu_api_of(stream)->cuMemcpyDtoHAsync(dst, (CUdeviceptr)src, (size_t)bytes, s->s);
}

static int cu_memcpy_dtod(dv_drv_obj *stream, dv_dptr dst, dv_dptr src, uint64_t bytes)
{
    struct cu_stream *s = (struct cu_stream *)stream;
    CU_TRY(cu_enter(stream));
    return (int)cu_api_of(stream)->cuMemcpyDtoDAsync((CUdeviceptr)dst, (CUdeviceptr)src,
                                                     (size_t)bytes, s->s);
}

/* No peer access needed: without it the driver stages through the host. */
static int cu_memcpy_peer(dv_drv_obj *stream, dv_drv_obj *dst_ctx, dv_dptr dst, dv_drv_obj *src_ctx,
                          dv_dptr src, uint64_t bytes)
{
    struct cu_stream *s = (struct cu_stream *)stream;
    const struct cu_ctx *dc = (const struct cu_ctx *)dst_ctx;
    const struct cu_ctx *sc = (const struct cu_ctx *)src_ctx;
    CU_TRY(cu_enter(stream));
    return (int)cu_api_of(stream)->cuMemcpyPeerAsync((CUdeviceptr)dst, dc->ctx, (CUdeviceptr)src,
                                                     sc->ctx, (size_t)bytes, s->s);
}

static int cu_memset_d8(dv_drv_obj *stream, dv_dptr dst, uint8_t value, uint64_t count)
{
    struct cu_stream *s = (struct cu_stream *)stream;
    CU_TRY(cu_enter(stream));
    return (int)cu_api_of(stream)->cuMemsetD8Async((CUdeviceptr)dst, value, (size_t)count, s->s);
}

static int cu_memset_d32(dv_drv_obj *stream, dv_dptr dst, uint32_t value, uint64_t count)
{
    struct cu_stream *s = (struct cu_stream *)stream;
    CU_TRY(cu_enter(stream));
    return (int)cu_api_of(stream)->cuMemsetD32Async((CUdeviceptr)dst, value, (size_t)count, s->s);
}

/* ------------------------------------------------------------------------
 * Modules, functions, launches
 * ------------------------------------------------------------------------ */

/*
 * cuModuleLoadData takes no size: a cubin or fatbin carries its own, and
 * PTX must end in NUL.  So PTX without a NUL inside image_bytes is copied
 * to a terminated buffer, and a binary image not 8-byte aligned (the
 * driver's ELF and fatbin readers expect natural alignment) is copied to a
 * malloc'd one.
 */
#define CU_FATBIN_MAGIC         UINT32_C(0xBA55ED50) /* fatbin data header */
#define CU_FATBIN_WRAPPER_MAGIC UINT32_C(0x466243B1) /* __fatBinC_Wrapper_t */

static bool cu_image_is_binary(const void *image, size_t bytes)
{
    uint32_t magic;
    if (bytes < sizeof magic)
        return false;
    if (memcmp(image, "\177ELF", 4) == 0)
        return true;
    memcpy(&magic, image, sizeof magic);
    return magic == CU_FATBIN_MAGIC || magic == CU_FATBIN_WRAPPER_MAGIC;
}

static int cu_module_load(dv_drv_obj *ctx, dv_drv_obj *module, const void *image,
                          size_t image_bytes)
{
    struct cu_module *m = (struct cu_module *)module;
    void *copy = NULL;
    const void *load = image;

    if (cu_image_is_binary(image, image_bytes)) {
        if ((uintptr_t)image % 8 != 0) {
            copy = malloc(image_bytes);
            if (!copy)
                return CUDA_ERROR_OUT_OF_MEMORY;
            memcpy(copy, image, image_bytes);
            load = copy;
        }
    } else if (image_bytes == 0 || memchr(image, '\0', image_bytes) == NULL) {
        copy = malloc(image_bytes + 1);
        if (!copy)
            return CUDA_ERROR_OUT_OF_MEMORY;
        memcpy(copy, image, image_bytes);
        ((char *)copy)[image_bytes] = '\0';
        load = copy;
    }

    CUresult rc = cu_enter(ctx);
    if (rc == CUDA_SUCCESS)
        rc = cu_api_of(ctx)->cuModuleLoadData(&m->m, load);
    /* The driver has parsed the image by now and keeps no reference. */
    free(copy);
    return (int)rc;
}

static int cu_module_unload(dv_drv_obj *module)
{
    struct cu_module *m = (struct cu_module *)module;
    CU_TRY(cu_enter(module));
    CU_TRY(cu_api_of(module)->cuModuleUnload(m->m));
    m->m = NULL;
    return 0;
}

static int cu_func_get(dv_drv_obj *module, dv_drv_obj *func, const char *name)
{
    const struct cu_module *m = (const struct cu_module *)module;
    struct cu_func *f = (struct cu_func *)func;
    CU_TRY(cu_enter(module));
    return (int)cu_api_of(module)->cuModuleGetFunction(&f->f, m->m, name);
}

static int cu_func_params(dv_drv_obj *func, uint16_t *bytes, unsigned max, unsigned *count)
{
    const struct cu_impl *impl = func->drv->impl;
    const struct cu_func *f = (const struct cu_func *)func;
    if (impl->func_get_param_info == NULL)
        return DV_CU_NOT_SUPPORTED;
    CU_TRY(cu_enter(func));
    /* The driver answers INVALID_VALUE for the index past the last. */
    for (unsigned i = 0;; i++) {
        size_t offset = 0, size = 0;
        CUresult rc = impl->func_get_param_info(f->f, i, &offset, &size);
        if (rc == CUDA_ERROR_INVALID_VALUE) {
            *count = i;
            return CUDA_SUCCESS;
        }
        if (rc != CUDA_SUCCESS)
            return (int)rc;
        if (i < max)
            bytes[i] = size > UINT16_MAX ? UINT16_MAX : (uint16_t)size;
        if (i > 4096) /* a driver that never says "past the last" */
            return DV_CU_NOT_SUPPORTED;
    }
}

static void cu_builtin_image(const dv_driver *drv, const void **image, size_t *bytes)
{
    (void)drv;
    *bytes = dv__kernels_fatbin_size;
    *image = dv__kernels_fatbin_size ? (const void *)dv__kernels_fatbin : NULL;
}

static int cu_launch(dv_drv_obj *func, dv_dim3 grid, dv_dim3 block, uint32_t shared_bytes,
                     dv_drv_obj *stream, void **params)
{
    const struct cu_func *f = (const struct cu_func *)func;
    struct cu_stream *s = (struct cu_stream *)stream;
    CU_TRY(cu_enter(stream));
    return (int)cu_api_of(stream)->cuLaunchKernel(f->f, grid.x, grid.y, grid.z, block.x, block.y,
                                                  block.z, shared_bytes, s->s, params, NULL);
}

static void *cu_native_stream(dv_drv_obj *stream)
{
    return ((struct cu_stream *)stream)->s;
}

static int cu_make_current(dv_drv_obj *ctx)
{
    return (int)cu_enter(ctx);
}

static int cu_host_fn(dv_drv_obj *stream, dv_host_fn fn, void *arg)
{
    struct cu_stream *s = (struct cu_stream *)stream;
    CU_TRY(cu_enter(stream));
    return (int)cu_api_of(stream)->cuLaunchHostFunc(s->s, fn, arg);
}

/* Pinned and mapped for every context; with unified addressing (every
 * 64-bit driver) the device reaches it at cuMemHostGetDevicePointer's
 * address. */
static int cu_host_register(dv_drv_obj *ctx, void *p, uint64_t bytes)
{
    CU_TRY(cu_enter(ctx));
    return (int)cu_api_of(ctx)->cuMemHostRegister(
        p, (size_t)bytes, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
}

static int cu_host_unregister(dv_drv_obj *ctx, void *p)
{
    CU_TRY(cu_enter(ctx));
    return (int)cu_api_of(ctx)->cuMemHostUnregister(p);
}

static int cu_host_dptr(dv_drv_obj *ctx, void *p, dv_dptr *out)
{
    CUdeviceptr d = 0;
    CU_TRY(cu_enter(ctx));
    CUresult rc = cu_api_of(ctx)->cuMemHostGetDevicePointer(&d, p, 0);
    *out = (dv_dptr)d;
    return (int)rc;
}

/* A write orders its store after every earlier write of the stream (a
 * copy's data lands before the word that says it did). */
static int cu_value_ops(dv_drv_obj *stream, const dv_drv_value_op *ops, unsigned n)
{
    struct cu_stream *s = (struct cu_stream *)stream;
    CUstreamBatchMemOpParams p[DV_DRV_MAX_VALUE_OPS];
    memset(p, 0, n * sizeof(p[0]));
    for (unsigned i = 0; i < n; i++) {
        if (ops[i].wait) {
            p[i].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
            p[i].waitValue.address = (CUdeviceptr)ops[i].addr;
            p[i].waitValue.value = ops[i].value;
            p[i].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
        } else {
            p[i].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
            p[i].writeValue.address = (CUdeviceptr)ops[i].addr;
            p[i].writeValue.value = ops[i].value;
            p[i].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
        }
    }
    CU_TRY(cu_enter(stream));
    return (int)cu_api_of(stream)->cuStreamBatchMemOp(s->s, n, p, 0);
}

/* ------------------------------------------------------------------------
 * Stream capture (the checker's view of a task's work)
 * ------------------------------------------------------------------------ */

struct dv_drv_graph {
    dv_driver *drv; /* first: the port finds the ops through it */
    CUgraph g;
    uint64_t words[DV_NODE_MAX_WORDS];
};

static int cu_capture_begin(dv_drv_obj *stream)
{
    struct cu_stream *s = (struct cu_stream *)stream;
    CU_TRY(cu_enter(stream));
    return (int)cu_api_of(stream)->cuStreamBeginCapture(s->s, CU_STREAM_CAPTURE_MODE_RELAXED);
}

static int cu_capture_any(dv_drv_obj *stream, bool *any)
{
    struct cu_stream *s = (struct cu_stream *)stream;
    const struct cu_api *api = cu_api_of(stream);
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CUgraph g = NULL;
    size_t n = 0;
    CU_TRY(cu_enter(stream));
    CU_TRY(api->cuStreamGetCaptureInfo(s->s, &st, NULL, &g, NULL, NULL, NULL));
    if (st == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
        *any = true;
        return CUDA_SUCCESS;
    }
    if (st != CU_STREAM_CAPTURE_STATUS_ACTIVE || g == NULL)
        return CUDA_SUCCESS;
    CU_TRY(api->cuGraphGetNodes(g, NULL, &n));
    *any = n > 0;
    return CUDA_SUCCESS;
}

static int cu_capture_end(dv_drv_obj *stream, dv_drv_graph **out)
{
    struct cu_stream *s = (struct cu_stream *)stream;
    const struct cu_api *api = cu_api_of(stream);
    CUgraph g = NULL;
    size_t n = 0;
    CU_TRY(cu_enter(stream));
    CU_TRY(api->cuStreamEndCapture(s->s, &g));
    if (g == NULL)
        return CUDA_SUCCESS;
    if (api->cuGraphGetNodes(g, NULL, &n) == CUDA_SUCCESS && n == 0) {
        (void)api->cuGraphDestroy(g);
        return CUDA_SUCCESS;
    }
    struct dv_drv_graph *graph = malloc(sizeof(*graph));
    if (graph == NULL) {
        (void)api->cuGraphDestroy(g);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    graph->drv = stream->drv;
    graph->g = g;
    *out = graph;
    return CUDA_SUCCESS;
}

/* The aligned 8-byte words of a kernel node's parameters, into n;
 * whether they could be listed. */
static bool cu_node_words(struct dv_drv_graph *graph, const CUDA_KERNEL_NODE_PARAMS *p,
                          dv_drv_node *n)
{
    const struct cu_impl *impl = graph->drv->impl;
    CUfunction f = p->func;
    n->nwords = 0;
    n->words = graph->words;
    if (f == NULL && p->kern != NULL && impl->kernel_get_function != NULL)
        (void)impl->kernel_get_function(&f, p->kern);
    n->func = f;
    if (p->kernelParams == NULL && p->extra != NULL) {
        /* One buffer of every parameter's bytes. */
        const char *buf = NULL;
        size_t bytes = 0;
        for (void **e = p->extra; *e != CU_LAUNCH_PARAM_END; e += 2) {
            if (*e == CU_LAUNCH_PARAM_BUFFER_POINTER)
                buf = e[1];
            else if (*e == CU_LAUNCH_PARAM_BUFFER_SIZE)
                memcpy(&bytes, e[1], sizeof(bytes));
        }
        for (size_t off = 0; buf != NULL && off + 8 <= bytes && n->nwords < DV_NODE_MAX_WORDS;
             off += 8)
            memcpy(&graph->words[n->nwords++], buf + off, 8);
        return buf != NULL;
    }
    if (f == NULL || impl->func_get_param_info == NULL || p->kernelParams == NULL)
        return false;
    for (size_t i = 0; i <= 4096; i++) {
        size_t offset = 0, size = 0;
        CUresult rc = impl->func_get_param_info(f, i, &offset, &size);
        if (rc == CUDA_ERROR_INVALID_VALUE)
            return true; /* past the last */
        if (rc != CUDA_SUCCESS)
            return false;
        const char *v = p->kernelParams[i];
        for (size_t off = 0; v != NULL && off + 8 <= size && n->nwords < DV_NODE_MAX_WORDS;
             off += 8)
            memcpy(&graph->words[n->nwords++], v + off, 8);
    }
    return false;
}

/* The bytes a copy or set spans on one side. */
static uint64_t cu_span(uint64_t width, uint64_t height, uint64_t depth, uint64_t pitch,
                        uint64_t rows)
{
    if (height <= 1 && depth <= 1)
        return width;
    return (depth - 1) * pitch * rows + (height - 1) * pitch + width;
}

static void cu_memcpy_node(const CUDA_MEMCPY3D *p, dv_drv_node *n)
{
    uint64_t h = p->Height ? p->Height : 1, d = p->Depth ? p->Depth : 1;
    n->src_device = p->srcMemoryType != CU_MEMORYTYPE_HOST;
    n->src = (n->src_device ? (uint64_t)p->srcDevice : (uint64_t)(uintptr_t)p->srcHost) +
             p->srcXInBytes + (uint64_t)p->srcY * p->srcPitch +
             (uint64_t)p->srcZ * p->srcPitch * p->srcHeight;
    n->src_bytes = cu_span(p->WidthInBytes, h, d, p->srcPitch, p->srcHeight);
    n->dst_device = p->dstMemoryType != CU_MEMORYTYPE_HOST;
    n->dst = (n->dst_device ? (uint64_t)p->dstDevice : (uint64_t)(uintptr_t)p->dstHost) +
             p->dstXInBytes + (uint64_t)p->dstY * p->dstPitch +
             (uint64_t)p->dstZ * p->dstPitch * p->dstHeight;
    n->dst_bytes = cu_span(p->WidthInBytes, h, d, p->dstPitch, p->dstHeight);
}

static int cu_graph_nodes(struct dv_drv_graph *graph, int (*visit)(void *, const dv_drv_node *),
                          void *self)
{
    const struct cu_api *api = &((const struct cu_impl *)graph->drv->impl)->api;
    size_t count = 0;
    CUresult rc = api->cuGraphGetNodes(graph->g, NULL, &count);
    if (rc != CUDA_SUCCESS)
        return dv__fail_driver(graph->drv, "graph_nodes", (int)rc);
    CUgraphNode *nodes = count ? calloc(count, sizeof(*nodes)) : NULL;
    if (count && nodes == NULL)
        return dv__fail(DV_ENOMEM, "graph_nodes", "graph_nodes: out of host memory");
    if (count && (rc = api->cuGraphGetNodes(graph->g, nodes, &count)) != CUDA_SUCCESS) {
        free(nodes);
        return dv__fail_driver(graph->drv, "graph_nodes", (int)rc);
    }
    int out = DV_OK;
    for (size_t i = 0; i < count && out == DV_OK; i++) {
        CUgraphNodeType type;
        dv_drv_node n = {.kind = DV_NODE_OTHER};
        if (api->cuGraphNodeGetType(nodes[i], &type) != CUDA_SUCCESS)
            type = CU_GRAPH_NODE_TYPE_EMPTY;
        if (type == CU_GRAPH_NODE_TYPE_KERNEL) {
            CUDA_KERNEL_NODE_PARAMS p;
            memset(&p, 0, sizeof(p));
            n.kind = DV_NODE_KERNEL;
            if (api->cuGraphKernelNodeGetParams(nodes[i], &p) == CUDA_SUCCESS)
                n.words_known = cu_node_words(graph, &p, &n);
        } else if (type == CU_GRAPH_NODE_TYPE_MEMCPY) {
            CUDA_MEMCPY3D p;
            memset(&p, 0, sizeof(p));
            n.kind = DV_NODE_MEMCPY;
            if (api->cuGraphMemcpyNodeGetParams(nodes[i], &p) == CUDA_SUCCESS)
                cu_memcpy_node(&p, &n);
        } else if (type == CU_GRAPH_NODE_TYPE_MEMSET) {
            CUDA_MEMSET_NODE_PARAMS p;
            memset(&p, 0, sizeof(p));
            n.kind = DV_NODE_MEMSET;
            if (api->cuGraphMemsetNodeGetParams(nodes[i], &p) == CUDA_SUCCESS) {
                n.dst = p.dst;
                n.dst_device = true;
                n.dst_bytes = cu_span((uint64_t)p.elementSize * p.width, p.height ? p.height : 1, 1,
                                      p.pitch, 0);
            }
        } else if (type == CU_GRAPH_NODE_TYPE_HOST) {
            n.kind = DV_NODE_HOST;
        }
        out = visit(self, &n);
    }
    free(nodes);
    return out;
}

static int cu_graph_launch(struct dv_drv_graph *graph, dv_drv_obj *stream)
{
    const struct cu_api *api = cu_api_of(stream);
    struct cu_stream *s = (struct cu_stream *)stream;
    CUgraphExec exec = NULL;
    CU_TRY(cu_enter(stream));
    CU_TRY(api->cuGraphInstantiateWithFlags(&exec, graph->g, 0));
    CUresult rc = api->cuGraphLaunch(exec, s->s);
    /* An executable graph still in flight is freed once it completes. */
    (void)api->cuGraphExecDestroy(exec);
    return (int)rc;
}

static void cu_graph_destroy(struct dv_drv_graph *graph)
{
    const struct cu_api *api = &((const struct cu_impl *)graph->drv->impl)->api;
    (void)api->cuGraphDestroy(graph->g);
    free(graph);
}

static const void *cu_func_native(dv_drv_obj *func)
{
    return ((const struct cu_func *)func)->f;
}

const dv_driver_ops dv__cuda_ops = {
    .name = "cuda",
    .backend = DV_BACKEND_CUDA,
    .obj_size =
        {
            [DV_DRV_CTX] = sizeof(struct cu_ctx),
            [DV_DRV_STREAM] = sizeof(struct cu_stream),
            [DV_DRV_EVENT] = sizeof(struct cu_event),
            [DV_DRV_MODULE] = sizeof(struct cu_module),
            [DV_DRV_FUNC] = sizeof(struct cu_func),
        },

    .open = cu_open,
    .close = cu_close,

    .device_count = cu_device_count,
    .device_info = cu_device_info,
    .mem_info = cu_mem_info,

    .ctx_retain = cu_ctx_retain,
    .ctx_release = cu_ctx_release,
    .ctx_reset = cu_ctx_reset,

    .stream_create = cu_stream_create,
    .stream_destroy = cu_stream_destroy,
    .stream_sync = cu_stream_sync,
    .stream_query = cu_stream_query,

    .event_create = cu_event_create,
    .event_destroy = cu_event_destroy,
    .event_record = cu_event_record,
    .event_query = cu_event_query,
    .event_sync = cu_event_sync,
    .stream_wait_event = cu_stream_wait_event,
    .event_elapsed = cu_event_elapsed,
    .native_event = cu_native_event,

    .mem_alloc = cu_mem_alloc,
    .mem_free = cu_mem_free,
    .mem_alloc_async = cu_mem_alloc_async,
    .mem_free_async = cu_mem_free_async,
    .pool_set_threshold = cu_pool_set_threshold,
    .pool_get_threshold = cu_pool_get_threshold,
    .pool_trim = cu_pool_trim,
    .vmm_granularity = cu_vmm_granularity,
    .va_reserve = cu_va_reserve,
    .va_release = cu_va_release,
    .mem_map = cu_mem_map,
    .mem_unmap = cu_mem_unmap,
    .mem_unmap_keep = cu_mem_unmap_keep,
    .mem_remap = cu_mem_remap,
    .mem_release = cu_mem_release,

    .memcpy_htod = cu_memcpy_htod,
    .memcpy_dtoh = cu_memcpy_dtoh,
    .memcpy_dtod = cu_memcpy_dtod,
    .memcpy_peer = cu_memcpy_peer,
    .memset_d8 = cu_memset_d8,
    .memset_d32 = cu_memset_d32,

    .module_load = cu_module_load,
    .module_unload = cu_module_unload,
    .func_get = cu_func_get,
    .func_params = cu_func_params,
    .builtin_image = cu_builtin_image,

    .launch = cu_launch,
    .host_fn = cu_host_fn,
    .host_register = cu_host_register,
    .host_unregister = cu_host_unregister,
    .host_dptr = cu_host_dptr,
    .value_ops = cu_value_ops,
    .native_stream = cu_native_stream,
    .make_current = cu_make_current,
    .capture_begin = cu_capture_begin,
    .capture_any = cu_capture_any,
    .capture_end = cu_capture_end,
    .graph_nodes = cu_graph_nodes,
    .graph_launch = cu_graph_launch,
    .graph_destroy = cu_graph_destroy,
    .func_native = cu_func_native,

    .error_name = cu_error_name,
    .error_string = cu_error_string,
};
