/*
 * guard: canaries, poison, quarantine and the live table, over the async
 * resource on the sim, with real kernels doing the damage.
 *
 *   - a kernel on another stream writes one byte past the end: caught on
 *     free, with the block's generation and offset n;
 *   - a kernel writes one byte before the start: caught by dv__guard_check
 *     (offset -1), and intact blocks pass;
 *   - after free the caller's bytes read as poison through the upstream's
 *     pointer while the block is quarantined, the canaries still intact;
 *   - quarantine delays reuse: the upstream hands a freed block's memory
 *     out again only once the quarantine released it;
 *   - double free, stale, interior and foreign blocks: DV_EUSE_AFTER_FREE.
 *
 * Each part runs on its own driver and ends with a clean close.  The same
 * program runs on the real driver as guard_cuda.t (GUARD_ON_CUDA), where
 * the sim-only stream slowdown is not available and is left out.
 */
#include "driver/sim.h"
#include "resources/resource.h"
#include "tap.h"

#ifndef GUARD_ON_CUDA
#define GUARD_ON_CUDA 0
#endif

#define BACKEND_NAME (GUARD_ON_CUDA ? "cuda" : "sim")
#define MIB          (UINT64_C(1) << 20)
#define CANARY       256u

typedef struct fixture {
    dv_driver *drv;
    dv_res_env env;
    dv_resource *async, *guard;
    dv_drv_module *mod;
    dv_drv_func *poke, *oob;
} fixture;

static const dv_dim3 one = {1, 1, 1};

static bool setup(fixture *f, const dv_guard_config *cfg, uint64_t seed)
{
    dv_driver_config dcfg;
    const void *image;
    size_t image_bytes;

    memset(f, 0, sizeof(*f));
    dv__driver_config_init(&dcfg);
    dcfg.backend = GUARD_ON_CUDA ? DV_BACKEND_CUDA : DV_BACKEND_SIM;
    dcfg.sim.memory_bytes = 256 * MIB;
    dcfg.sim.seed = seed;
    dcfg.sim.delay_max_us = 20;
    if (dv__driver_open(&dcfg, &f->drv) != DV_OK)
        return false;
    dv__drv_builtin_image(f->drv, &image, &image_bytes);
    return dv__res_env_init(&f->env, f->drv, 0, 2) == DV_OK &&
           dv__drv_module_load(f->env.ctx, image, image_bytes, &f->mod) == DV_OK &&
           dv__drv_func_get(f->mod, "poke_u8", &f->poke) == DV_OK &&
           dv__drv_func_get(f->mod, "oob_write", &f->oob) == DV_OK &&
           dv__async_resource_create(&f->env, &f->async) == DV_OK &&
           dv__guard_resource_create(f->async, cfg, &f->guard) == DV_OK;
}

/* Two assertions: the guard gave everything back, the device holds nothing. */
static void teardown(fixture *f)
{
    uint64_t guard_bytes = dv__res_bytes_outstanding(f->guard);
    f->guard->ops->destroy(f->guard); /* flushes the quarantine upstream */
    dv__res_reap_pending(f->async);
    is_u64(dv__res_bytes_outstanding(f->async), 0,
           "clean close: the guard returned every block upstream");
    dv__res_destroy_stack(f->async);
    dv__drv_module_unload(f->mod);
    dv__res_env_fini(&f->env);
    if (GUARD_ON_CUDA) /* the real device's own count is not ours to read */
        is_u64(guard_bytes, 0, "clean close: the guard held no live bytes");
    else
        is_u64(dv__sim_allocated_bytes(f->drv, 0), 0, "clean close: the device holds nothing");
    dv__driver_close(f->drv);
}

static int poke(fixture *f, dv_stream_id s, dv_dptr p, int64_t offset, uint8_t value)
{
    void *params[] = {&p, &offset, &value};
    return dv__drv_launch(f->poke, one, one, 0, f->env.streams[s], params);
}

static int oob_write(fixture *f, dv_stream_id s, dv_dptr p, uint64_t n, uint32_t over,
                     uint8_t value)
{
    void *params[] = {&p, &n, &over, &value};
    return dv__drv_launch(f->oob, one, one, 0, f->env.streams[s], params);
}

static bool message_has(const char *needle)
{
    bool found = strstr(dv_last_error()->message, needle) != NULL;
    if (!found)
        diag("message \"%s\" lacks \"%s\"", dv_last_error()->message, needle);
    return found;
}

static void test_config(void)
{
    dv_guard_config cfg;
    dv__guard_config_init(&cfg);
    ok(cfg.canary_bytes == 256 && cfg.quarantine_blocks == 16 && cfg.quarantine_bytes == 64 * MIB,
       "defaults: 256-byte canaries, 16 blocks or 64 MiB of quarantine");
}

static void test_past_the_end(void)
{
    fixture f;
    dv_guard_config cfg;
    dv_block victim, intact;
    char hex[32];

    dv__guard_config_init(&cfg);
    ok(setup(&f, &cfg, 3001), "past the end: %s, async, guard, kernels", BACKEND_NAME);
    ok(dv__res_supports_block_use_tracking(f.guard), "the guard tracks through the async resource");
    is_status(dv__res_allocate(f.guard, 1000, 0, (dv_tag){"victim", 1}, &victim), DV_OK,
              "allocate 1000 bytes on stream 0");
    ok(victim.bytes == 1000 && victim.ptr % DV_BLOCK_ALIGN == 0 && victim.align >= DV_BLOCK_ALIGN,
       "the block is exactly 1000 bytes and 256-aligned");
    /* The damage comes from stream 1, slowed down, declared as a write:
     * the check on stream 0 sees it only if it is ordered after it. */
    dv__sim_stream_set_delay(f.env.streams[1], 20000);
    is_status(dv__res_prepare_block_use(f.guard, dv__block_id_of(&victim), 1, DV_ACCESS_WRITE), DV_OK,
              "prepare a write on stream 1 through the guard");
    is_status(oob_write(&f, 1, victim.ptr, 1000, 1, 0x11), DV_OK,
              "oob_write kernel writes one byte past the end");
    is_status(dv__res_finish_block_use(f.guard, dv__block_id_of(&victim), 1, DV_ACCESS_WRITE), DV_OK,
              "finish the write");
    is_status(dv__res_allocate(f.guard, 4096, 0, (dv_tag){"intact", 2}, &intact), DV_OK,
              "allocate an intact block on stream 0");
    is_status(dv__res_deallocate(f.guard, &intact), DV_OK, "the intact block frees clean");
    is_status(dv__res_deallocate(f.guard, &victim), DV_EOUT_OF_BOUNDS,
              "the damaged block's free reports DV_EOUT_OF_BOUNDS");
    is_u64(dv_last_error()->generation, victim.generation, "detail: the block's generation");
    is_int(dv_last_error()->offset, 1000, "detail: offset 1000, the first byte past the end");
    snprintf(hex, sizeof(hex), "0x%llx", (unsigned long long)victim.ptr);
    ok(message_has(hex) && message_has("size 1000") && message_has("offset 1000"),
       "the message names pointer, size and offset");
    is_int(victim.state, DV_BLOCK_QUARANTINED, "the free went on all the same (QUARANTINED)");
    dv__sim_stream_set_delay(f.env.streams[1], 0);
    teardown(&f);
}

static void test_before_the_start(void)
{
    fixture f;
    dv_block x, y;

    ok(setup(&f, NULL, 3002), "before the start: %s, async, guard (default config), kernels",
       BACKEND_NAME);
    dv__res_allocate(f.guard, 512, 0, (dv_tag){"x", 0}, &x);
    is_status(dv__res_allocate(f.guard, 300, 1, (dv_tag){"y", 0}, &y), DV_OK,
              "two blocks on two streams");
    is_status(dv__guard_check(f.guard), DV_OK, "intact blocks pass the check");
    is_status(poke(&f, 1, y.ptr, -1, 0x22), DV_OK, "poke_u8 writes one byte before the start");
    is_status(dv__guard_check(f.guard), DV_EOUT_OF_BOUNDS, "dv__guard_check catches it");
    is_u64(dv_last_error()->generation, y.generation, "detail: the damaged block's generation");
    is_int(dv_last_error()->offset, -1, "detail: offset -1");
    is_status(dv__res_deallocate(f.guard, &y), DV_EOUT_OF_BOUNDS, "its free reports it again");
    is_status(dv__res_deallocate(f.guard, &x), DV_OK, "the other block frees clean");
    dv_block huge;
    is_status(dv__res_allocate(f.guard, UINT64_C(1) << 48, 0, (dv_tag){"huge", 0}, &huge),
              DV_EDEVICE_OOM, "2^48 bytes and canaries: DV_EDEVICE_OOM, as any size no device holds");
    is_status(dv__guard_check(f.guard), DV_OK, "nothing live: the check passes");
    is_status(dv__guard_check(f.async), DV_EINVAL, "dv__guard_check of a non-guard is DV_EINVAL");
    teardown(&f);
}

static void test_poison(void)
{
    fixture f;
    dv_block z;
    static uint8_t back[CANARY + 1000 + CANARY];

    ok(setup(&f, NULL, 3003), "poison: %s, async, guard", BACKEND_NAME);
    dv__res_allocate(f.guard, 1000, 1, (dv_tag){"z", 0}, &z);
    is_status(dv__drv_memset_d8(f.env.streams[1], z.ptr, 0x77, 1000), DV_OK,
              "the caller fills its block with 0x77");
    is_status(dv__res_deallocate(f.guard, &z), DV_OK, "free it");
    is_int(z.state, DV_BLOCK_QUARANTINED, "it is quarantined");
    /* Through the upstream's pointer, still allocated upstream. */
    dv_dptr up = z.ptr - CANARY;
    is_status(dv__drv_memcpy_dtoh(f.env.streams[1], back, up, sizeof(back)), DV_OK,
              "read the upstream block back on its alloc stream");
    dv__drv_stream_sync(f.env.streams[1]);
    int poisoned = 0, canary = 0;
    for (size_t i = 0; i < sizeof(back); i++) {
        bool in_block = i >= CANARY && i < CANARY + 1000;
        if (in_block)
            poisoned += back[i] == DV_GUARD_POISON_BYTE;
        else
            canary += back[i] == DV_GUARD_CANARY_BYTE;
    }
    is_int(poisoned, 1000, "every byte of the freed block reads 0x%02X", DV_GUARD_POISON_BYTE);
    is_int(canary, 2 * CANARY, "both canaries still read 0x%02X", DV_GUARD_CANARY_BYTE);
    teardown(&f);
}

static void test_quarantine(void)
{
    fixture f;
    dv_guard_config cfg;
    dv_block a, a_copy, b, c, d, x;

    dv__guard_config_init(&cfg);
    cfg.quarantine_blocks = 2;
    ok(setup(&f, &cfg, 3004), "quarantine of 2 blocks: %s, async, guard", BACKEND_NAME);
    dv__res_allocate(f.guard, 4096, 0, (dv_tag){"a", 0}, &a);
    a_copy = a;
    dv_dptr a_up = a.ptr - CANARY;
    is_status(dv__res_deallocate(f.guard, &a), DV_OK, "free a: quarantined");
    dv__res_reap_pending(f.guard);
    is_status(dv__res_allocate(f.async, 4096 + 2 * CANARY, 0, (dv_tag){"x", 0}, &x), DV_OK,
              "allocate the same size straight from the upstream");
    ok(x.ptr != a_up, "the upstream does not hand out the quarantined memory");
    dv__res_deallocate(f.async, &x);
    dv__res_allocate(f.guard, 4096, 0, (dv_tag){"b", 0}, &b);
    ok(b.ptr != a.ptr, "nor does the guard");
    dv__res_deallocate(f.guard, &b);
    dv__res_reap_pending(f.guard);
    is_u64(dv__res_bytes_outstanding(f.guard), 0, "nothing live: the guard counts nothing");
    is_u64(dv__res_bytes_outstanding(f.async), 2 * (4096 + 2 * CANARY),
           "the upstream still holds the two quarantined blocks");
    dv__res_allocate(f.guard, 4096, 0, (dv_tag){"c", 0}, &c);
    is_status(dv__res_deallocate(f.guard, &c), DV_OK, "a third free pushes the oldest out");
    dv__res_reap_pending(f.guard);
    is_u64(dv__res_bytes_outstanding(f.async), 2 * (4096 + 2 * CANARY),
           "once reaped, the upstream holds two again");
    is_status(dv__res_allocate(f.guard, 4096, 0, (dv_tag){"d", 0}, &d), DV_OK,
              "allocate again once the release is reaped");
    ok(d.ptr == a.ptr, "now a's memory is handed out again");
    ok(d.generation != a.generation, "with a new generation");
    is_status(dv__res_deallocate(f.guard, &a_copy), DV_EUSE_AFTER_FREE,
              "freeing the old block by a stale copy is DV_EUSE_AFTER_FREE");
    ok(message_has("stale"), "the message says stale");
    is_status(dv__res_deallocate(f.guard, &d), DV_OK, "the new block frees clean");
    /* A trim hands the quarantine back: nothing live, nothing held. */
    is_status(dv__res_trim_stack(f.guard, NULL), DV_OK, "a trim of the stack");
    is_u64(dv__res_bytes_outstanding(f.async), 0, "the quarantine went back upstream with it");
    teardown(&f);
}

static void test_bad_frees(void)
{
    fixture f;
    dv_block a, a_copy, b, fake, foreign;

    ok(setup(&f, NULL, 3005), "bad frees: %s, async, guard", BACKEND_NAME);
    dv__res_allocate(f.guard, 2000, 0, (dv_tag){"a", 0}, &a);
    a_copy = a;
    is_status(dv__res_deallocate(f.guard, &a), DV_OK, "free a");
    is_status(dv__res_deallocate(f.guard, &a_copy), DV_EUSE_AFTER_FREE,
              "a second free by a copy is DV_EUSE_AFTER_FREE");
    ok(message_has("double free") && dv_last_error()->generation == a.generation,
       "the guard names it a double free, with the generation");
    is_status(dv__res_deallocate(f.guard, &a), DV_EUSE_AFTER_FREE,
              "a second free of the same block is DV_EUSE_AFTER_FREE");
    is_status(dv__res_prepare_block_use(f.guard, dv__block_id_of(&a_copy), 1, DV_ACCESS_READ),
              DV_EUSE_AFTER_FREE, "prepare_block_use on the freed block is DV_EUSE_AFTER_FREE");
    ok(message_has("use after free"), "the message says use after free");

    dv__res_allocate(f.guard, 2000, 1, (dv_tag){"b", 0}, &b);
    is_status(dv__res_record_block_use(f.guard, dv__block_id_of(&b), 0), DV_OK,
              "record_block_use of a live block reaches the upstream");
    fake = b;
    fake.generation += 1000;
    is_status(dv__res_deallocate(f.guard, &fake), DV_EUSE_AFTER_FREE,
              "a free with the wrong generation is DV_EUSE_AFTER_FREE");
    fake = b;
    fake.ptr += DV_BLOCK_ALIGN;
    is_status(dv__res_deallocate(f.guard, &fake), DV_EUSE_AFTER_FREE,
              "a free of an interior pointer is DV_EUSE_AFTER_FREE");
    dv__res_allocate(f.async, 2000, 0, (dv_tag){"foreign", 0}, &foreign);
    is_status(dv__res_deallocate(f.guard, &foreign), DV_EUSE_AFTER_FREE,
              "a block of the upstream given to the guard is DV_EUSE_AFTER_FREE");
    ok(message_has("not a block of this guard"), "the message says it is not the guard's");
    is_status(dv__res_deallocate(f.async, &foreign), DV_OK, "the upstream still frees it");
    is_status(dv__res_deallocate(f.guard, &b), DV_OK, "b, untouched by all that, frees clean");

    dv_guard_config cfg;
    dv_resource *bad;
    dv__guard_config_init(&cfg);
    cfg.canary_bytes = 100;
    is_status(dv__guard_resource_create(f.async, &cfg, &bad), DV_EINVAL,
              "canary_bytes not a multiple of 256 is DV_EINVAL");
    teardown(&f);
}

int main(void)
{
    if (GUARD_ON_CUDA) {
        dv_driver_config dcfg;
        dv_driver *drv;
        dv__driver_config_init(&dcfg);
        dcfg.backend = DV_BACKEND_CUDA;
        if (dv__driver_open(&dcfg, &drv) != DV_OK)
            skip_all("%s", dv_last_error()->message);
        dv__driver_close(drv);
    }
    plan(76);
    test_config();
    test_past_the_end();
    test_before_the_start();
    test_poison();
    test_quarantine();
    test_bad_frees();
    return tap_done();
}
