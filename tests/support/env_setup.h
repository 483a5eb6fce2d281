/*
 * Test setup shared by the resource tests: open a backend, make an
 * environment with a few streams, load the built-in kernels.
 */
#ifndef DV_TESTS_ENV_SETUP_H
#define DV_TESTS_ENV_SETUP_H

#include "resources/resource.h"
#include "tap.h"

typedef struct test_env {
    dv_driver *drv;
    dv_res_env env;
    dv_drv_module *kernels;
} test_env;

/* The sim with seeded random delays, so a missing wait shows as bad data. */
static TAP_UNUSED int test_env_sim(test_env *t, uint32_t nstreams, uint32_t delay_us)
{
    dv_driver_config cfg;
    int rc;
    memset(t, 0, sizeof(*t));
    dv__driver_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    cfg.sim.memory_bytes = UINT64_C(1) << 30;
    cfg.sim.seed = 20261121;
    cfg.sim.delay_max_us = delay_us;
    if ((rc = dv__driver_open(&cfg, &t->drv)) != DV_OK)
        return rc;
    return dv__res_env_init(&t->env, t->drv, 0, nstreams);
}

/* The real driver; DV_ENODEVICE where there is none. */
static TAP_UNUSED int test_env_cuda(test_env *t, uint32_t nstreams)
{
    dv_driver_config cfg;
    int rc;
    memset(t, 0, sizeof(*t));
    dv__driver_config_init(&cfg);
    cfg.backend = DV_BACKEND_CUDA;
    if ((rc = dv__driver_open(&cfg, &t->drv)) != DV_OK)
        return rc;
    return dv__res_env_init(&t->env, t->drv, 0, nstreams);
}

static TAP_UNUSED int test_env_kernel(test_env *t, const char *name, dv_drv_func **f)
{
    int rc;
    if (t->kernels == NULL) {
        const void *image;
        size_t bytes;
        dv__drv_builtin_image(t->drv, &image, &bytes);
        if ((rc = dv__drv_module_load(t->env.ctx, image, bytes, &t->kernels)) != DV_OK)
            return rc;
    }
    return dv__drv_func_get(t->kernels, name, f);
}

static TAP_UNUSED void test_env_close(test_env *t)
{
    if (t->kernels != NULL)
        dv__drv_module_unload(t->kernels);
    dv__res_env_fini(&t->env);
    dv__driver_close(t->drv);
}

#endif
