/*
 * budget: deterministic refusal over the stream-ordered async resource.
 * A 10 MiB limit, allocations that fit, one that does not (requested and
 * remaining exact), a free that makes room again once the pending free is
 * reaped, a block the inner resource rounds past the limit, forwarding of
 * the tracking ops, a reader on another thread that never sees the count
 * above the limit, and a clean close.
 */
#include <pthread.h>

#include "driver/sim.h"
#include "resources/resource.h"
#include "tap.h"

#define MIB (UINT64_C(1) << 20)

static dv_tag tag(const char *name)
{
    return (dv_tag){name, 0};
}

static dv_driver *open_sim(void)
{
    dv_driver_config cfg;
    dv_driver *drv = NULL;
    dv__driver_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    cfg.sim.memory_bytes = 256 * MIB;
    cfg.sim.seed = 1001;
    cfg.sim.delay_max_us = 20;
    return dv__driver_open(&cfg, &drv) == DV_OK ? drv : NULL;
}

static void test_refusal(dv_res_env *env, dv_resource *async)
{
    dv_resource *budget;
    dv_block a, b, c, d, e;

    is_status(dv__budget_resource_create(async, 10 * MIB, &budget), DV_OK, "budget of 10 MiB");
    is_u64(dv__budget_limit(budget), 10 * MIB, "dv__budget_limit says 10 MiB");
    is_u64(dv__budget_limit(async), 0, "dv__budget_limit of a resource that is not a budget is 0");
    ok(dv__res_supports_block_use_tracking(budget), "tracking support is the async resource's");

    is_status(dv__res_allocate(budget, 4 * MIB, 0, tag("a"), &a), DV_OK, "4 MiB fit");
    is_status(dv__res_allocate(budget, 4 * MIB, 1, tag("b"), &b), DV_OK, "4 MiB more fit");
    is_u64(dv__res_bytes_outstanding(budget), 8 * MIB, "8 MiB in use");

    is_status(dv__res_allocate(budget, 3 * MIB, 0, tag("c"), &c), DV_EOUT_OF_BUDGET,
              "3 MiB more do not fit");
    is_u64(dv_last_error()->requested, 3 * MIB, "detail: requested 3 MiB");
    is_u64(dv_last_error()->remaining, 2 * MIB, "detail: remaining 2 MiB");
    ok(c.ptr == 0 && c.state == 0, "the refused block is empty");
    is_u64(dv__res_bytes_outstanding(budget), 8 * MIB, "a refusal changes nothing");

    is_status(dv__res_allocate(budget, 2 * MIB, 0, tag("c"), &c), DV_OK,
              "exactly the remaining 2 MiB fit");
    is_status(dv__res_allocate(budget, 1, 0, tag("d"), &d), DV_EOUT_OF_BUDGET,
              "one byte more does not");
    ok(dv_last_error()->requested == 1 && dv_last_error()->remaining == 0,
       "detail: requested 1, remaining 0 (got %llu, %llu)",
       (unsigned long long)dv_last_error()->requested,
       (unsigned long long)dv_last_error()->remaining);

    /* Tracking ops reach the async resource with the same block. */
    is_status(dv__res_prepare_block_use(budget, dv__block_id_of(&a), 1, DV_ACCESS_WRITE), DV_OK,
              "prepare_block_use forwards");
    is_status(dv__drv_memset_d8(env->streams[1], a.ptr, 0x5a, a.requested), DV_OK,
              "write block a on stream 1");
    is_status(dv__res_finish_block_use(budget, dv__block_id_of(&a), 1, DV_ACCESS_WRITE), DV_OK,
              "finish_block_use forwards");
    is_status(dv__res_record_block_use(budget, dv__block_id_of(&b), 0), DV_OK,
              "record_block_use forwards");

    /* A free is pending until reaped: it still counts. */
    is_status(dv__res_deallocate(budget, &c), DV_OK, "free the 2 MiB block");
    is_int(c.state, DV_BLOCK_RETIRED, "its free is queued (RETIRED)");
    is_u64(dv__res_bytes_outstanding(budget), 10 * MIB, "the pending free still counts");
    is_status(dv__res_allocate(budget, 2 * MIB, 1, tag("c2"), &c), DV_OK,
              "after the free, 2 MiB fit again (the pending free was reaped first)");
    is_u64(dv__res_bytes_outstanding(async), 10 * MIB,
           "the async resource holds 10 MiB: nothing pending left");

    is_status(dv__res_deallocate(budget, &a), DV_OK, "free a (4 MiB)");
    is_status(dv__res_deallocate(budget, &b), DV_OK, "free b (4 MiB)");
    is_u64(dv__res_bytes_outstanding(async), 10 * MIB,
           "async: 2 MiB live plus 8 MiB of frees not yet reaped");
    is_status(dv__res_allocate(budget, 8 * MIB, 0, tag("d"), &d), DV_OK,
              "8 MiB fit once the pending frees are reaped");
    is_u64(dv__res_bytes_outstanding(async), 10 * MIB, "async: 10 MiB live, nothing pending");
    is_status(dv__res_allocate(budget, 1 * MIB, 0, tag("e"), &e), DV_EOUT_OF_BUDGET,
              "with nothing to reap, 1 MiB more is refused");
    is_u64(dv_last_error()->remaining, 0, "detail: remaining 0");

    is_status(dv__res_deallocate(budget, &c), DV_OK, "free c2");
    is_status(dv__res_deallocate(budget, &d), DV_OK, "free d");
    is_status(dv__res_reap_pending(budget), DV_OK, "reap");
    is_u64(dv__res_bytes_outstanding(budget), 0, "the budget counts nothing");
    is_u64(dv__res_bytes_outstanding(async), 0, "the async resource holds nothing");
    budget->ops->destroy(budget);
}

/* The async resource rounds to 256 bytes: the budget counts what it got. */
static void test_rounding(dv_resource *async)
{
    dv_resource *budget;
    dv_block b[4];

    is_status(dv__budget_resource_create(async, 1000, &budget), DV_OK, "budget of 1000 bytes");
    for (int i = 0; i < 3; i++)
        dv__res_allocate(budget, 100, 0, tag("small"), &b[i]);
    is_u64(dv__res_bytes_outstanding(budget), 768, "three 100-byte blocks count 3 x 256");
    is_status(dv__res_allocate(budget, 100, 0, tag("small"), &b[3]), DV_EOUT_OF_BUDGET,
              "a fourth fits by request (868) but not as the 256 bytes it takes");
    ok(dv_last_error()->requested == 100 && dv_last_error()->remaining == 232,
       "detail: requested 100, remaining 232 (got %llu, %llu)",
       (unsigned long long)dv_last_error()->requested,
       (unsigned long long)dv_last_error()->remaining);
    is_u64(dv__res_bytes_outstanding(budget), 768, "the count never passed the limit");
    for (int i = 0; i < 3; i++)
        dv__res_deallocate(budget, &b[i]);
    dv__res_reap_pending(budget);
    is_u64(dv__res_bytes_outstanding(async), 0, "the rounded block was given back");
    budget->ops->destroy(budget);
}

/* A budget over a resource that cannot track says so. */
static void test_no_tracking(dv_res_env *env)
{
    dv_resource *direct, *budget;
    dv_block a;

    dv__direct_resource_create(env, &direct);
    dv__budget_resource_create(direct, MIB, &budget);
    ok(!dv__res_supports_block_use_tracking(budget), "over direct: no tracking");
    dv__res_allocate(budget, 4096, 0, tag("a"), &a);
    is_status(dv__res_prepare_block_use(budget, dv__block_id_of(&a), 1, DV_ACCESS_READ),
              DV_ESTREAM_MISUSE, "over direct: prepare_block_use is DV_ESTREAM_MISUSE");
    is_status(dv__res_deallocate(budget, &a), DV_OK, "over direct: free");
    is_u64(dv__res_bytes_outstanding(budget), 0, "a synchronous free is not pending");
    dv__res_destroy_stack(budget);
}

struct reader {
    const dv_resource *budget;
    atomic_bool stop;
    uint64_t max_seen, reads;
};

static void *read_outstanding(void *arg)
{
    struct reader *rd = arg;
    while (!atomic_load(&rd->stop)) {
        uint64_t v = dv__res_bytes_outstanding(rd->budget);
        if (v > rd->max_seen)
            rd->max_seen = v;
        rd->reads++;
    }
    return NULL;
}

static void test_reader_thread(dv_resource *async)
{
    dv_resource *budget;
    struct reader rd = {0};
    pthread_t th;
    dv_block b[8];
    int refused = 0;

    dv__budget_resource_create(async, 4 * MIB, &budget);
    rd.budget = budget;
    atomic_init(&rd.stop, false);
    pthread_create(&th, NULL, read_outstanding, &rd);
    for (int round = 0; round < 200; round++) {
        int n = 0;
        for (int i = 0; i < 8; i++)
            if (dv__res_allocate(budget, MIB, (dv_stream_id)(i & 1), tag("r"), &b[n]) == DV_OK)
                n++;
            else
                refused++;
        for (int i = 0; i < n; i++)
            dv__res_deallocate(budget, &b[i]);
    }
    atomic_store(&rd.stop, true);
    pthread_join(th, NULL);
    is_int(refused, 200 * 4, "4 of 8 one-MiB blocks fit a 4 MiB budget, every round");
    ok(rd.max_seen <= 4 * MIB, "a reader on another thread never saw more than the limit (%llu)",
       (unsigned long long)rd.max_seen);
    dv__res_reap_pending(budget);
    is_u64(dv__res_bytes_outstanding(budget), 0, "nothing outstanding after the rounds");
    budget->ops->destroy(budget);
}

int main(void)
{
    dv_driver *drv;
    dv_res_env env;
    dv_resource *async;

    plan(54);
    ok((drv = open_sim()) != NULL, "open the sim (256 MiB, seed 1001, delays up to 20 us)");
    if (drv == NULL)
        return tap_done();
    is_status(dv__res_env_init(&env, drv, 0, 2), DV_OK, "environment with 2 streams");
    is_status(dv__async_resource_create(&env, &async), DV_OK, "async resource");

    test_refusal(&env, async);
    test_rounding(async);
    test_no_tracking(&env);
    test_reader_thread(async);

    is_u64(dv__res_bytes_outstanding(async), 0, "clean close: nothing outstanding");
    dv__res_destroy_stack(async);
    dv__res_env_fini(&env);
    is_u64(dv__sim_allocated_bytes(drv, 0), 0, "clean close: the device holds nothing");
    dv__driver_close(drv);
    return tap_done();
}
