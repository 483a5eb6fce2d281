/*
 * A task declares only the block it writes and reads another through a
 * raw pointer with the kernel it launches inside.  The recorder fences
 * the declared block only, so the task's copy does not wait for the
 * write of its source still queued on another stream.
 */
#define HZ_WHAT                                                                                    \
    "a task on stream 1 reads a block it did not declare while a tracked write of the block is "   \
    "queued on stream 0"
#include "hazards/hazard.h"

typedef struct undeclared {
    hz *h;
    uint64_t src; /* a's raw address */
} undeclared;

/* Declared: b, DV_WRITE.  Done: b := a. */
static int task_copy_undeclared(const dv_task_ctx *ctx, void *user)
{
    const undeclared *u = user;
    dv_arg args[] = {dv_arg_ptr_access(ctx->arg[0], DV_WRITE), dv_arg_ptr_access(u->src, DV_READ),
                     dv_arg_u64(HZ_BYTES)};
    return dv_task_launch(ctx, u->h->copy, hz_grid, hz_block, 0, args, 3);
}

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 1, "b");
    hz_fill(h, a, 1, 0);
    hz_fill(h, b, 0, 1);
    hz_sync_all(h);
    hz_first(h, 0);
    hz_fill(h, a, 2, 0);
    hz_settle(h);
    undeclared u = {h, hz_ptr(a)};
    dv_arg declared[] = {dv_arg_ref(b, DV_WRITE, 0)};
    hz_rc(h, dv_task(h->a, task_copy_undeclared, &u, 1, declared, 1), "task");
    bool corrupt = !hz_is(h, b, 2); /* b should be a's new value */
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
