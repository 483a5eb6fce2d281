/*
 * The sim's fault controls, reached through an actor (devactor_sim.h).
 */
#include <string.h>

#include "actor/actor.h"
#include "devactor_sim.h"
#include "driver/sim.h"

static int sim_of(dv_actor *a, const char *op, dv_driver **out)
{
    if (a == NULL)
        return dv__fail(DV_EINVAL, op, "%s: NULL actor", op);
    int rc = dv__actor_here(a, op);
    if (rc != DV_OK)
        return rc;
    if (!dv__sim_is_sim(a->drv))
        return dv__fail(DV_ENOTSUP, op, "%s: the actor runs on %s, not the sim", op,
                        dv__driver_backend_name(a->drv));
    *out = a->drv;
    return DV_OK;
}

static int call_of(const char *name, const char *op, dv_drv_call *out)
{
    if (name != NULL)
        for (int i = 0; i < DV_CALL__COUNT; i++)
            if (strcmp(dv__drv_call_name((dv_drv_call)i), name) == 0) {
                *out = (dv_drv_call)i;
                return DV_OK;
            }
    return dv__fail(DV_EINVAL, op, "%s: no driver call named \"%s\" (dv_sim_call_name lists them)",
                    op, name != NULL ? name : "(null)");
}

/* The actor's sim and the call named, for the controls that take one. */
static int sim_call_of(dv_actor *a, const char *name, const char *op, dv_driver **drv,
                       dv_drv_call *call)
{
    int rc = sim_of(a, op, drv);
    return rc == DV_OK ? call_of(name, op, call) : rc;
}

const char *dv_sim_call_name(unsigned i)
{
    return i < DV_CALL__COUNT ? dv__drv_call_name((dv_drv_call)i) : NULL;
}

int dv_sim_inject(dv_actor *a, const char *call, uint64_t nth, int code)
{
    static const char op[] = "sim_inject";
    dv_driver *drv = NULL;
    dv_drv_call c = DV_CALL_DEVICE_COUNT;
    int rc = sim_call_of(a, call, op, &drv, &c);
    if (rc == DV_OK && code != 0 && nth == 0)
        rc = dv__fail(DV_EINVAL, op, "%s: nth 0 (1 is the next call)", op);
    return rc == DV_OK ? dv__sim_inject(drv, c, nth, code) : rc;
}

int dv_sim_fail_alloc(dv_actor *a, uint64_t nth)
{
    dv_driver *drv = NULL;
    int rc = sim_of(a, "sim_fail_alloc", &drv);
    return rc == DV_OK ? dv__sim_fail_alloc_nth(drv, nth) : rc;
}

int dv_sim_call_count(dv_actor *a, const char *call, uint64_t *count)
{
    static const char op[] = "sim_call_count";
    dv_driver *drv = NULL;
    dv_drv_call c = DV_CALL_DEVICE_COUNT;
    if (count == NULL)
        return dv__fail(DV_EINVAL, op, "%s: NULL count", op);
    int rc = sim_call_of(a, call, op, &drv, &c);
    *count = rc == DV_OK ? dv__sim_calls(drv, c) : 0;
    return rc;
}

int dv_sim_poison_at(dv_actor *a, const char *call, uint64_t nth, dv_sim_poison_kind kind)
{
    static const char op[] = "sim_poison_at";
    dv_driver *drv = NULL;
    dv_drv_call c = DV_CALL_DEVICE_COUNT;
    int rc = sim_call_of(a, call, op, &drv, &c);
    if (rc == DV_OK && kind != DV_SIM_POISON_RECOVERABLE && kind != DV_SIM_POISON_FATAL)
        rc = dv__fail(DV_EINVAL, op, "%s: kind %d", op, (int)kind);
    return rc == DV_OK ? dv__sim_poison_at(drv, c, nth, a->device, kind) : rc;
}

int dv_sim_poison(dv_actor *a, dv_sim_poison_kind kind)
{
    static const char op[] = "sim_poison";
    dv_driver *drv = NULL;
    int rc = sim_of(a, op, &drv);
    if (rc == DV_OK && kind != DV_SIM_POISON_RECOVERABLE && kind != DV_SIM_POISON_FATAL)
        rc = dv__fail(DV_EINVAL, op, "%s: kind %d", op, (int)kind);
    return rc == DV_OK ? dv__sim_poison(drv, a->device, kind, 0) : rc;
}
