/*
 * A gate on a stream: work queued behind it does not run until the test
 * opens it, however slow or fast the machine.  Tests that assert "not
 * complete yet" use it instead of a timed spin, so nothing depends on how
 * the host schedules them.
 *
 * gate_close posts a task whose host function (run by the stream when it
 * gets there) waits until the gate opens; gate_open opens it and waits for
 * the task's future.  On cuda the host function runs on the driver's
 * callback thread and only holds that stream.
 */
#ifndef DV_TESTS_SUPPORT_GATE_H
#define DV_TESTS_SUPPORT_GATE_H

#include <sched.h>
#include <stdatomic.h>

#include "devactor.h"

typedef struct gate {
    atomic_bool open;
    dv_future posted;
} gate;

static void gate_wait_open(void *arg)
{
    gate *g = arg;
    while (!atomic_load_explicit(&g->open, memory_order_acquire))
        sched_yield();
}

static int gate_task(const dv_task_ctx *ctx, void *user)
{
    return dv_task_host_fn(ctx, gate_wait_open, user);
}

/* Hold stream s of a until gate_open(g). */
static inline int gate_close(gate *g, dv_actor *a, dv_stream s)
{
    atomic_store(&g->open, false);
    dv_future_init(&g->posted, 0);
    return dv_task_async(a, gate_task, g, s, NULL, 0, &g->posted);
}

static inline int gate_open(gate *g)
{
    atomic_store_explicit(&g->open, true, memory_order_release);
    return dv_future_wait(&g->posted);
}

#endif /* DV_TESTS_SUPPORT_GATE_H */
