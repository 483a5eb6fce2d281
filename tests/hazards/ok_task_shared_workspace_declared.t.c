/*
 * Correct neighbour of task_shared_workspace_undeclared: both tasks
 * declare the workspace DV_WRITE, so the second waits for the first.
 */
#define HZ_CORRECT
#define HZ_DECLARED 2 /* arguments declared: the output and the workspace */
#define HZ_WHAT     "two tasks on streams 0 and 1 share a workspace block and both declare it DV_WRITE"
#include "hazards/hazard.h"

typedef struct work {
    hz *h;
    uint64_t w; /* the workspace's raw address */
    uint32_t value;
} work;

/* Done, by the library: w := value; (live: a pause); argument 0 := w. */
static int task_with_workspace(const dv_task_ctx *ctx, void *user)
{
    const work *u = user;
    int rc = lib_call(ctx, u->w, 0, u->value, HZ_N);
    if (rc == DV_OK && !u->h->quiet) {
        dv_arg spin[] = {dv_arg_u64(HZ_SPIN_NS)};
        rc = dv_task_launch(ctx, u->h->spin, (dv_dim3){1, 1, 1}, (dv_dim3){1, 1, 1}, 0, spin, 1);
    }
    return rc != DV_OK ? rc : lib_call(ctx, ctx->arg[0], u->w, 0, HZ_N);
}

static bool hz_plant(hz *h)
{
    dv_ref x = hz_alloc(h, 0, "x"), y = hz_alloc(h, 1, "y"), w = hz_alloc(h, 0, "workspace");
    hz_fill(h, x, 0, 0);
    hz_fill(h, y, 0, 1);
    hz_fill(h, w, 0, 0);
    hz_sync_all(h);
    work first = {h, hz_ptr(w), 5}, second = {h, hz_ptr(w), 6};
    dv_arg a1[] = {dv_arg_ref(x, DV_WRITE, 0), dv_arg_ref(w, DV_WRITE, 0)};
    dv_arg a2[] = {dv_arg_ref(y, DV_WRITE, 0), dv_arg_ref(w, DV_WRITE, 0)};
    dv_future f;
    dv_future_init(&f, 0);
    hz_first(h, 0);
    bool posted = hz_rc(h, dv_task_async(h->a, task_with_workspace, &first, 0, a1, HZ_DECLARED, &f),
                        "first task") == DV_OK;
    if (posted)
        (void)dv_future_wait_ordered(&f);
    hz_settle(h);
    hz_rc(h, dv_task(h->a, task_with_workspace, &second, 1, a2, HZ_DECLARED), "second task");
    if (posted)
        hz_rc(h, dv_future_wait(&f), "first task");
    bool corrupt = h->refused == 0 && (!hz_is(h, x, 5) || !hz_is(h, y, 6));
    hz_rc(h, dv_ref_release(x), "release");
    hz_rc(h, dv_ref_release(y), "release");
    hz_rc(h, dv_ref_release(w), "release");
    return corrupt;
}
