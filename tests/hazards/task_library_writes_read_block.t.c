/*
 * A task declares its block DV_READ, and the library call it makes (a
 * cuMemsetD32Async on its native stream; a host function on the sim)
 * writes the block.  The recorder fences a read only against other
 * streams' writes, so a tracked read of the block queued earlier on
 * another stream sees the library's value instead of the old one.
 */
#define HZ_DECLARED DV_READ
#define HZ_WHAT                                                                                    \
    "a task on stream 1 declares a block DV_READ and its library call writes the block, while a "  \
    "tracked read of the block is queued on stream 0"
#include "hazards/hazard.h"

/* Done: argument 0 := 3, by the library. */
static int task_lib_fill(const dv_task_ctx *ctx, void *user)
{
    (void)user;
    return lib_call(ctx, ctx->arg[0], 0, 3, HZ_N);
}

static bool hz_plant(hz *h)
{
    /* a is last written on the task's stream, so a declared read waits
     * for nothing there. */
    dv_ref a = hz_alloc(h, 1, "a"), b = hz_alloc(h, 0, "b");
    hz_fill(h, a, 1, 1);
    hz_fill(h, b, 0, 0);
    hz_sync_all(h);
    hz_first(h, 0);
    hz_copy(h, b, a, 0); /* b <- a, a is 1 */
    hz_settle(h);
    dv_arg declared[] = {dv_arg_ref(a, HZ_DECLARED, 0)};
    hz_rc(h, dv_task(h->a, task_lib_fill, NULL, 1, declared, 1), "task");
    bool corrupt = !hz_is(h, b, 1);
#ifdef HZ_CORRECT
    corrupt |= !hz_is(h, a, 3);
#endif
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
