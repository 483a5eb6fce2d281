/*
 * A task's library call reads a block the task did not declare, and the
 * block is freed on its own stream right after: the free waits only for
 * the uses devactor knows of, so the memory goes to a new block, which is
 * written before the library call got to read it.
 */
#define HZ_DECLARED 1 /* arguments declared: b only */
#define HZ_WHAT                                                                                    \
    "a task on stream 1 reads a block it did not declare while the block is freed and its "        \
    "memory reused on stream 0"
#include "hazards/hazard.h"

/* Done: argument 0 := the block at *user (a raw address), by the library. */
static int task_lib_copy_from(const dv_task_ctx *ctx, void *user)
{
    return lib_call(ctx, ctx->arg[0], *(const uint64_t *)user, 0, HZ_N);
}

static bool hz_plant(hz *h)
{
    dv_ref a = hz_alloc(h, 0, "a"), b = hz_alloc(h, 1, "b");
    hz_fill(h, a, 1, 0);
    hz_fill(h, b, 0, 1);
    hz_sync_all(h);
    uint64_t pa = hz_ptr(a);
    hz_first(h, 1);
    dv_arg declared[] = {dv_arg_ref(b, DV_WRITE, 0), dv_arg_ref(a, DV_READ, 0)};
    dv_future f;
    dv_future_init(&f, 0);
    bool posted =
        hz_rc(h, dv_task_async(h->a, task_lib_copy_from, &pa, 1, declared, HZ_DECLARED, &f),
              "task") == DV_OK;
    if (posted)
        (void)dv_future_wait_ordered(&f);
    hz_settle(h);
    /* a's free waits for the uses it knows of; its memory goes to c. */
    hz_rc(h, dv_ref_release(a), "release");
    dv_ref c = hz_alloc(h, 0, "c");
    hz_fill(h, c, 9, 0);
    if (posted)
        hz_rc(h, dv_future_wait(&f), "task");
    bool corrupt = h->refused == 0 && !hz_is(h, b, 1);
    hz_rc(h, dv_ref_release(b), "release");
    hz_rc(h, dv_ref_release(c), "release");
    return corrupt;
}
