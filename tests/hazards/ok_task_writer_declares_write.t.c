/*
 * Correct neighbour of task_two_readers_one_writes: the task that writes
 * the block declares DV_WRITE, so the other task's read waits for it.
 */
#define HZ_CORRECT
#define HZ_DECLARED DV_WRITE
#define HZ_WHAT                                                                                    \
    "two tasks on streams 0 and 1; the one whose library call writes the block declares DV_WRITE"
#include "hazards/hazard.h"

/* Done: argument 0 := 3, by the library. */
static int task_lib_fill(const dv_task_ctx *ctx, void *user)
{
    (void)user;
    return lib_call(ctx, ctx->arg[0], 0, 3, HZ_N);
}

/* Done: argument 1 := argument 0, by the library. */
static int task_lib_copy(const dv_task_ctx *ctx, void *user)
{
    (void)user;
    return lib_call(ctx, ctx->arg[1], ctx->arg[0], 0, HZ_N);
}

static bool hz_plant(hz *h)
{
    /* a is last written on stream 1, so the second task's declared read
     * waits for nothing there (a wait on stream 0 would be on an event
     * recorded at its tail, behind the first task). */
    dv_ref a = hz_alloc(h, 1, "a"), b = hz_alloc(h, 1, "b");
    hz_fill(h, a, 1, 1);
    hz_fill(h, b, 0, 1);
    hz_sync_all(h);
    hz_first(h, 0);
    dv_arg first[] = {dv_arg_ref(a, HZ_DECLARED, 0)};
    dv_future f;
    dv_future_init(&f, 0);
    bool posted =
        hz_rc(h, dv_task_async(h->a, task_lib_fill, NULL, 0, first, 1, &f), "first task") == DV_OK;
    if (posted)
        (void)dv_future_wait_ordered(&f); /* enqueued: ordered, not finished */
    hz_settle(h);
    /* In program order b gets the 3 the first task wrote. */
    dv_arg second[] = {dv_arg_ref(a, DV_READ, 0), dv_arg_ref(b, DV_WRITE, 0)};
    hz_rc(h, dv_task(h->a, task_lib_copy, NULL, 1, second, 2), "second task");
    if (posted)
        hz_rc(h, dv_future_wait(&f), "first task");
    bool corrupt = h->refused == 0 && !hz_is(h, b, 3);
    hz_rc(h, dv_ref_release(a), "release");
    hz_rc(h, dv_ref_release(b), "release");
    return corrupt;
}
