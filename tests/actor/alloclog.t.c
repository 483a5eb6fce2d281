/*
 * The allocation log's failure rows say what the caller got: one
 * "allocate failure" row per allocation refused, none for a refusal the
 * actor absorbed by trying again.
 *
 *   - a budget refusal (the budget sits above the log in the stack) writes
 *     its row;
 *   - a device refusal that the out-of-memory path retried (reap, trim,
 *     the oom function twice) writes one row, not one per try;
 *   - a transient refusal that a retry absorbed writes none, and the
 *     allocation's own row is there;
 *   - a task's scratch refused writes one row, tagged task-scratch;
 *   - every "%d" of the log's path is the device;
 *   - blocks a reset or the shutdown drops get their free rows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devactor.h"
#include "devactor_sim.h"
#include "tap.h"

#define MiB (UINT64_C(1) << 20)

/* Lines of path holding both needles (n2 may be NULL). */
static int lines_with(const char *path, const char *n1, const char *n2)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    int hits = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        hits += strstr(line, n1) != NULL && (n2 == NULL || strstr(line, n2) != NULL);
    if (f != NULL)
        fclose(f);
    return hits;
}

static dv_actor *make(const char *conf, const char *log, bool (*oom)(const dv_oom_info *, void *))
{
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    if (dv_actor_config_parse(&cfg, conf) != DV_OK)
        bail_out("config %s: %s", conf, dv_last_error()->message);
    cfg.log_path = log;
    cfg.oom = oom;
    dv_actor *a = NULL;
    if (dv_actor_create(&cfg, &a) != DV_OK)
        bail_out("actor: %s", dv_last_error()->message);
    return a;
}

static int oom_calls;
static bool ask_again(const dv_oom_info *info, void *user)
{
    (void)info, (void)user;
    return ++oom_calls <= 2; /* two more tries, both refused */
}

static int scratch_task(const dv_task_ctx *ctx, void *user)
{
    uint64_t ptr = 0;
    *(int *)user = dv_task_scratch(ctx, 512 * MiB, &ptr);
    return DV_OK;
}

int main(void)
{
    plan(16);
    char log[128];
    dv_ref ok_ref, big;

    /* The budget: above the log. */
    snprintf(log, sizeof(log), "/tmp/dv-alloclog-%d-budget.csv", (int)getpid());
    unlink(log);
    dv_actor *a = make("budget:64M", log, NULL);
    is_status(dv_alloc(a, 1000, 0, "fits", &ok_ref), DV_OK, "a small allocation");
    (void)dv_alloc(a, 512 * MiB, 1, "over-budget", &big);
    is_status(dv_ref_access(big, NULL), DV_EOUT_OF_BUDGET, "512 MiB over a 64 MiB budget");
    dv_ref_release(big);
    dv_ref_release(ok_ref);
    dv_actor_destroy(a);
    is_int(lines_with(log, ",allocate failure,", ",over-budget,"), 1,
           "the budget's refusal has its row");
    is_int(lines_with(log, ",allocate,", ",fits,"), 1, "and the allocation that fit its own");
    unlink(log);

    /* The device: refused after every retry. */
    snprintf(log, sizeof(log), "/tmp/dv-alloclog-%d-device.csv", (int)getpid());
    unlink(log);
    a = make("sim_memory:64M", log, ask_again);
    dv_ref held;
    (void)dv_alloc(a, 40 * MiB, 0, "held", &held);
    (void)dv_alloc(a, 32 * MiB, 1, "too-big", &big);
    is_status(dv_ref_access(big, NULL), DV_EDEVICE_OOM, "32 MiB more on a 64 MiB device holding 40");
    is_int(oom_calls, 3, "the oom function was asked 3 times (2 retries)");
    dv_ref_release(big);
    dv_ref_release(held);
    dv_actor_destroy(a);
    is_int(lines_with(log, ",allocate failure,", NULL), 1,
           "one row for the refusal, not one per try");
    unlink(log);

    /* A transient refusal, absorbed. */
    snprintf(log, sizeof(log), "/tmp/dv-alloclog-%d-absorbed.csv", (int)getpid());
    unlink(log);
    a = make("pool:0", log, NULL);
    is_status(dv_sim_fail_alloc(a, 1), DV_OK, "the next device allocation fails once");
    dv_ref r;
    (void)dv_alloc(a, 8 * MiB, 0, "absorbed", &r);
    is_status(dv_ref_access(r, NULL), DV_OK, "the allocation succeeds on a retry");
    dv_ref_release(r);
    dv_actor_destroy(a);
    is_int(lines_with(log, ",allocate failure,", NULL), 0, "no failure row for it");
    is_int(lines_with(log, ",allocate,", ",absorbed,"), 1, "its allocate row");
    unlink(log);

    /* Blocks dropped by a reset, and by the shutdown, get their free rows. */
    snprintf(log, sizeof(log), "/tmp/dv-alloclog-%d-dropped.csv", (int)getpid());
    unlink(log);
    a = make("", log, NULL);
    dv_ref before_reset, at_shutdown;
    dv_alloc(a, 4096, 0, "dropped-by-reset", &before_reset);
    dv_ref_access(before_reset, NULL);
    is_status(dv_actor_reset(a), DV_OK, "a reset with a block held");
    dv_alloc(a, 8192, 0, "dropped-at-shutdown", &at_shutdown);
    dv_ref_access(at_shutdown, NULL);
    dv_actor_destroy(a);
    ok(lines_with(log, ",free,", ",dropped-by-reset,") == 1 &&
           lines_with(log, ",free,", ",dropped-at-shutdown,") == 1,
       "each dropped block has its free row (reset %d, shutdown %d)",
       lines_with(log, ",free,", ",dropped-by-reset,"),
       lines_with(log, ",free,", ",dropped-at-shutdown,"));
    unlink(log);

    /* Every "%d" of the path is the device. */
    char pattern[128], want[128];
    snprintf(pattern, sizeof(pattern), "/tmp/dv-alloclog-%d-%%d-of-%%d.csv", (int)getpid());
    snprintf(want, sizeof(want), "/tmp/dv-alloclog-%d-0-of-0.csv", (int)getpid());
    unlink(want);
    a = make("", pattern, NULL);
    dv_actor_destroy(a);
    ok(access(want, F_OK) == 0, "log path %s: both %%d become the device (%s)", pattern, want);
    unlink(want);

    /* A task's scratch. */
    snprintf(log, sizeof(log), "/tmp/dv-alloclog-%d-scratch.csv", (int)getpid());
    unlink(log);
    a = make("sim_memory:64M", log, NULL);
    int scratch_rc = DV_OK;
    (void)dv_task(a, scratch_task, &scratch_rc, 0, NULL, 0);
    is_status(scratch_rc, DV_EDEVICE_OOM, "a task's 512 MiB scratch is refused");
    dv_actor_destroy(a);
    is_int(lines_with(log, ",allocate failure,", ",task-scratch,"), 1,
           "its row, tagged task-scratch");
    unlink(log);
    return tap_done();
}
