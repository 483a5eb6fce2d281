/*
 * Kernel handles.  A handle belongs to the actor that made it and names
 * (image, name); its module and function are loaded in the actor's
 * current context on first use and again after every rebuild.
 *
 * Handles are never returned to the system (base/keep.h): an actor that
 * goes away keeps its handles for reuse, marked dead, so a handle kept
 * past its actor reads as "not this actor's" (DV_EINVAL) instead of
 * freed memory.  A handle's function is valid for one (actor, context)
 * pair: an actor made again at the same address, or a context rebuilt,
 * never reuses a function object of an earlier one.
 */
#include <stdio.h>
#include <string.h>

#include "actor/actor.h"
#include "base/keep.h"

static dv_keep kept = DV_KEEP_INIT(struct dv_kernel, next);

bool dv__kernel_owned(const dv_actor *a, const struct dv_kernel *k)
{
    /* Relaxed: only a's thread writes the owner of a's handles, and a
     * handle of another actor never reads as a's. */
    return k != NULL && atomic_load_explicit(&k->owner, memory_order_relaxed) == a->uid;
}

int dv__kernel_func(dv_actor *a, struct dv_kernel *k, dv_drv_func **out)
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

static struct dv_kernel *kernel_new(void)
{
    struct dv_kernel *k = dv__keep_get(&kept);
    if (k != NULL)
        atomic_init(&k->owner, 0);
    return k;
}

static void kernel_put(struct dv_kernel *k)
{
    atomic_store_explicit(&k->owner, 0, memory_order_relaxed);
    dv__keep_put(&kept, k);
}

int dv__kernel_find_or_load(dv_actor *a, const void *image, size_t image_bytes, const char *name,
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
    if ((k = kernel_new()) == NULL)
        return dv__fail(DV_ENOMEM, "kernel_get", "out of host memory");
    k->image = image;
    k->image_bytes = image_bytes;
    snprintf(k->name, sizeof(k->name), "%s", name);
    /* Load now, so a bad image or name is reported here. */
    if ((rc = dv__kernel_func(a, k, &f)) != DV_OK) {
        if (k->module != NULL)
            (void)dv__drv_module_unload(k->module);
        kernel_put(k);
        return rc;
    }
    unsigned n = 0;
    if (dv__drv_func_params(f, k->param_bytes, DV_LAUNCH_MAX_ARGS, &n) == DV_OK)
        k->nparams = (int)n;
    else
        k->nparams = -1; /* an older driver: launches go unchecked */
    atomic_store_explicit(&k->owner, a->uid, memory_order_relaxed);
    k->next = a->kernel_list;
    a->kernel_list = k;
    *out = k;
    return DV_OK;
}

static const char *kind_name(const dv_arg *arg)
{
    switch (arg->kind) {
    case DV_ARG_REF:
        return "a handle";
    case DV_ARG_PTR:
        return "a pointer";
    case DV_ARG_BYTES:
        return "a by-value argument";
    default:
        return "a value";
    }
}

int dv__kernel_check_args(const struct dv_kernel *k, const dv_arg *args, unsigned nargs,
                          const char *op)
{
    if (k->nparams < 0)
        return DV_OK;
    if (k->nparams > DV_LAUNCH_MAX_ARGS)
        return dv__fail(DV_EINVAL, op,
                        "%s: kernel \"%s\" takes %d arguments; a launch passes at "
                        "most %d",
                        op, k->name, k->nparams, DV_LAUNCH_MAX_ARGS);
    if (nargs != (unsigned)k->nparams)
        return dv__fail(DV_EINVAL, op, "%s: kernel \"%s\" takes %d argument%s, the launch gives %u",
                        op, k->name, k->nparams, k->nparams == 1 ? "" : "s", nargs);
    for (unsigned i = 0; i < nargs; i++) {
        const dv_arg *arg = &args[i];
        unsigned size = arg->kind == DV_ARG_REF || arg->kind == DV_ARG_PTR ? 8u : arg->size;
        if (size != k->param_bytes[i])
            return dv__fail(DV_EINVAL, op,
                            "%s: kernel \"%s\": argument %u is %s of %u bytes, its parameter %u "
                            "has %u",
                            op, k->name, i, kind_name(arg), size, i, k->param_bytes[i]);
    }
    return DV_OK;
}

void dv__kernels_forget_context(dv_actor *a)
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
}

void dv__kernels_free(dv_actor *a)
{
    while (a->kernel_list != NULL) {
        struct dv_kernel *k = a->kernel_list;
        a->kernel_list = k->next;
        kernel_put(k);
    }
}
