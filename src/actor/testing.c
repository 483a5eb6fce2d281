/*
 * What devactor_testing.h gives tests and tools of an actor.
 */
#include "actor/actor.h"
#include "devactor_testing.h"

dv_driver *dv__actor_driver(const dv_actor *a)
{
    return a != NULL ? a->drv : NULL;
}

int dv__actor_launch_builtin(dv_actor *a, const char *kernel, dv_stream stream,
                             const uint64_t args[4], dv_future *f)
{
    dv_future own;
    dv_msg m = {
        .type = DV_MSG_LAUNCH_BUILTIN, .stream = (uint16_t)stream, .u.builtin = {.name = kernel}};
    if (args != NULL)
        for (int i = 0; i < 4; i++)
            m.u.builtin.args[i] = args[i];
    return f != NULL ? dv__actor_post(a, &m, f) : dv__actor_call(a, &m, &own);
}
