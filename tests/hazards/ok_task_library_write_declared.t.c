/*
 * Correct neighbour of task_library_writes_read_block: the task declares
 * the block its library call writes DV_WRITE, so the recorder orders the
 * write after the read queued on the other stream.
 */
#define HZ_CORRECT
#define HZ_DECLARED DV_WRITE
#define HZ_WHAT                                                                                    \
    "a task on stream 1 declares DV_WRITE the block its library call writes, while a tracked "     \
    "read of the block is queued on stream 0: the recorder orders them"
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
