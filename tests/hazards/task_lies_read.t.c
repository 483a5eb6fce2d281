/*
 * A task declares its block DV_READ, so the recorder fences it only
 * against other streams' writes, and then writes the block with a kernel
 * it launches inside, through the block's raw address (dv_task_launch
 * trusts raw pointers; a handle the task declared DV_READ it would refuse
 * to write).  A tracked read queued earlier on another stream sees the
 * task's value instead of the old one.
 */
#define HZ_WHAT                                                                                    \
    "a task on stream 1 declares a block DV_READ and writes it, while a tracked read of the "      \
    "block is queued on stream 0"
#include "hazards/hazard.h"

typedef struct liar {
    hz *h;
    uint64_t a; /* the block's raw address */
} liar;

/* Declared: a, DV_READ.  Done: a := 3. */
static int task_write_declared_read(const dv_task_ctx *ctx, void *user)
{
    const liar *l = user;
    dv_arg args[] = {dv_arg_ptr_access(l->a, DV_WRITE), dv_arg_u32(3), dv_arg_u64(HZ_N)};
    return dv_task_launch(ctx, l->h->fill, hz_grid, hz_block, 0, args, 3);
}

static bool hz_plant(hz *h)
{
    /* a is last written on the task's stream, so the declared read waits
     * for nothing.  Written on stream 0, the read would wait for an event
     * recorded at stream 0's tail (behind the spin and the copy), which
     * orders the task's write after the copy: no race left to plant. */
    dv_ref a = hz_alloc(h, 1, "a"), b = hz_alloc(h, 0, "b");
    hz_fill(h, a, 1, 1);
    hz_fill(h, b, 0, 0);
    hz_sync_all(h);
    hz_first(h, 0);
    hz_copy(h, b, a, 0); /* b <- a, a is 1 */
    hz_settle(h);
    liar l = {h, hz_ptr(a)};
    dv_arg declared[] = {dv_arg_ref(a, DV_READ, 0)};
    hz_rc(h, dv_task(h->a, task_write_declared_read, &l, 1, declared, 1), "task");
    bool corrupt = !hz_is(h, b, 1);
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
