/*
 * Launches checked against the kernel, typed arguments, and (on the sim)
 * your own kernels through devactor_sim.h.  args_cuda.t runs the checks
 * on the real driver (ARGS_ON_CUDA), where the parameter list comes from
 * cuFuncGetParamInfo.
 *   - too few, too many, a wrong size: DV_EINVAL naming the argument, and
 *     nothing enqueued (the block is untouched, the stream untouched);
 *   - i32, i64, f32, f64, u8, u16 and a 16-byte struct by value reach the
 *     kernel bit for bit;
 *   - a kernel not in the image: DV_ENOKERNEL;
 *   - sim: two images with a kernel of the same name each get their own;
 *     the fault controls by call name.
 */
#include <string.h>

#include "devactor.h"
#include "devactor_sim.h"
#include "tap.h"

#ifndef ARGS_ON_CUDA
#define ARGS_ON_CUDA 0
#endif

static const dv_dim3 one = {1, 1, 1};

struct pair16 {
    uint64_t lo, hi;
};

/* Two libraries, each with a kernel named "filter". */
static int filter_a(dv_sim_kctx *k, void **params)
{
    uint32_t *p = dv_sim_kmem(k, *(uint64_t *)params[0], 4);
    if (p == NULL)
        return DV_SIM_ILLEGAL_ADDRESS;
    *p = 0xAAAAAAAAu;
    return 0;
}
static int filter_b(dv_sim_kctx *k, void **params)
{
    uint32_t *p = dv_sim_kmem(k, *(uint64_t *)params[0], 4);
    if (p == NULL)
        return DV_SIM_ILLEGAL_ADDRESS;
    *p = 0xBBBB0000u | *(uint16_t *)params[1];
    return 0;
}
static const dv_sim_kernel lib_a_kernels[] = {{"filter", filter_a, 1, {8}}};
static const dv_sim_kernel lib_b_kernels[] = {{"filter", filter_b, 2, {8, 2}}};
static const dv_sim_image lib_a = DV_SIM_IMAGE(lib_a_kernels);
static const dv_sim_image lib_b = DV_SIM_IMAGE(lib_b_kernels);

static void test_checks(dv_actor *a)
{
    dv_kernel *fill = NULL;
    dv_ref x;
    uint32_t back[4];
    dv_kernel_get(a, NULL, 0, "fill_u32", &fill);
    dv_alloc(a, 16, 0, "x", &x);
    dv_memset(a, x, 0, 0x11, 16, 0);
    dv_arg full[3] = {dv_arg_ref(x, DV_WRITE, 0), dv_arg_u32(7), dv_arg_u64(4)};

    is_status(dv_launch(a, fill, one, one, 0, 0, full, 2), DV_EINVAL, "fill_u32 with 2 of 3");
    ok(strstr(dv_last_error()->message, "takes 3 arguments, the launch gives 2") != NULL, "... %s",
       dv_last_error()->message);
    dv_arg more[4] = {full[0], full[1], full[2], dv_arg_u32(1)};
    is_status(dv_launch(a, fill, one, one, 0, 0, more, 4), DV_EINVAL, "fill_u32 with 4");
    dv_arg wrong[3] = {full[0], dv_arg_u64(7), full[2]};
    is_status(dv_launch(a, fill, one, one, 0, 0, wrong, 3), DV_EINVAL,
              "an 8-byte value for a 4-byte parameter");
    ok(strstr(dv_last_error()->message, "argument 1") != NULL, "... names it: %s",
       dv_last_error()->message);
    dv_arg narrow[3] = {full[0], full[1], dv_arg_u32(4)};
    is_status(dv_launch(a, fill, one, one, 0, 0, narrow, 3), DV_EINVAL,
              "a 4-byte value for an 8-byte parameter");
    dv_arg handle_for_value[3] = {full[0], dv_arg_ref(x, DV_READ, 0), full[2]};
    is_status(dv_launch(a, fill, one, one, 0, 0, handle_for_value, 3), DV_EINVAL,
              "a handle (8 bytes) for a 4-byte parameter");
    dv_future f;
    dv_future_init(&f, 0);
    is_status(dv_launch_async(a, fill, one, one, 0, 0, full, 2, &f), DV_OK,
              "the async form is posted ...");
    is_status(dv_future_wait(&f), DV_EINVAL, "... and its future answers DV_EINVAL");
    dv_copy_dtoh(a, back, x, 0, 16, 0);
    ok(back[0] == 0x11111111u && back[3] == 0x11111111u,
       "none of the refused launches wrote the block");
    is_status(dv_launch(a, fill, one, one, 0, 0, full, 3), DV_OK, "the right arguments launch");
    dv_copy_dtoh(a, back, x, 0, 16, 0);
    ok(back[0] == 7 && back[3] == 7, "and the kernel wrote");
    dv_ref_release(x);

    dv_kernel *none = NULL;
    is_status(dv_kernel_get(a, NULL, 0, "no_such_kernel", &none), DV_ENOKERNEL,
              "a kernel not in the image: DV_ENOKERNEL");
    ok(none == NULL, "... and no handle");
}

static void test_typed(dv_actor *a)
{
    dv_kernel *store = NULL;
    dv_ref out;
    unsigned char got[43], want[43];
    int32_t i32 = -123456789;
    int64_t i64 = INT64_C(-9876543210123);
    float f32 = -3.25f;
    double f64 = 6.02214076e23;
    struct pair16 s = {UINT64_C(0x0123456789ABCDEF), UINT64_C(0xFEDCBA9876543210)};
    uint8_t u8 = 0xA5;
    uint16_t u16 = 0xBEEF;
    memcpy(want, &i32, 4);
    memcpy(want + 4, &i64, 8);
    memcpy(want + 12, &f32, 4);
    memcpy(want + 16, &f64, 8);
    memcpy(want + 24, &s, 16);
    memcpy(want + 40, &u8, 1);
    memcpy(want + 41, &u16, 2);

    is_status(dv_kernel_get(a, NULL, 0, "store_args", &store), DV_OK, "kernel store_args");
    dv_alloc(a, 64, 0, "out", &out);
    dv_memset(a, out, 0, 0, 64, 0);
    dv_arg args[8] = {dv_arg_ref(out, DV_WRITE, 0),
                      dv_arg_i32(i32),
                      dv_arg_i64(i64),
                      dv_arg_f32(f32),
                      dv_arg_f64(f64),
                      dv_arg_bytes(&s, sizeof s),
                      dv_arg_u8(u8),
                      dv_arg_u16(u16)};
    is_status(dv_launch(a, store, one, one, 0, 0, args, 8), DV_OK,
              "i32, i64, f32, f64, a 16-byte struct, u8, u16");
    dv_copy_dtoh(a, got, out, 0, sizeof got, 0);
    ok(memcmp(got, want, sizeof want) == 0, "each reached the kernel bit for bit");
    args[5] = dv_arg_bytes(&s, 12);
    is_status(dv_launch(a, store, one, one, 0, 0, args, 8), DV_EINVAL,
              "a by-value argument of the wrong size");
    args[5] = dv_arg_bytes(NULL, 16);
    is_status(dv_launch(a, store, one, one, 0, 0, args, 8), DV_EINVAL, "by-value bytes at NULL");
    args[5] = dv_arg_bytes(&s, sizeof s);
    args[1].size = 3;
    is_status(dv_launch(a, store, one, one, 0, 0, args, 8), DV_EINVAL, "a value of 3 bytes");
    dv_ref_release(out);
}

static void test_images(dv_actor *a)
{
    dv_kernel *ka = NULL, *kb = NULL, *none = NULL;
    dv_ref r;
    uint32_t v = 0;
    is_status(dv_kernel_get(a, &lib_a, sizeof lib_a, "filter", &ka), DV_OK,
              "library A's \"filter\"");
    is_status(dv_kernel_get(a, &lib_b, sizeof lib_b, "filter", &kb), DV_OK,
              "library B's \"filter\"");
    ok(ka != NULL && kb != NULL && ka != kb, "two handles");
    is_status(dv_kernel_get(a, &lib_a, sizeof lib_a, "fill_u32", &none), DV_ENOKERNEL,
              "a built-in name is not in library A's image");
    dv_alloc(a, 4, 0, "r", &r);
    dv_launch(a, ka, one, one, 0, 0, (dv_arg[]){dv_arg_ref(r, DV_WRITE, 0)}, 1);
    dv_copy_dtoh(a, &v, r, 0, 4, 0);
    is_int(v, 0xAAAAAAAAu, "A's filter ran A's twin");
    is_status(dv_launch(a, kb, one, one, 0, 0, (dv_arg[]){dv_arg_ref(r, DV_WRITE, 0)}, 1),
              DV_EINVAL, "B's filter takes 2: checked against B's twin");
    dv_launch(a, kb, one, one, 0, 0, (dv_arg[]){dv_arg_ref(r, DV_WRITE, 0), dv_arg_u16(0x1234)}, 2);
    dv_copy_dtoh(a, &v, r, 0, 4, 0);
    is_int(v, 0xBBBB1234u, "B's filter ran B's twin");
    dv_ref_release(r);

    static const dv_sim_kernel bad_kernels[] = {{"bad", filter_a, 1, {0}}};
    static const dv_sim_image bad = DV_SIM_IMAGE(bad_kernels);
    ok(dv_kernel_get(a, &bad, sizeof bad, "bad", &none) != DV_OK,
       "an image with a 0-byte parameter is refused: %s", dv_err_name(dv_last_error()->status));
}

static void test_faults(dv_actor *a)
{
    uint64_t before = 0, after = 0;
    dv_ref r;
    unsigned n = 0;
    while (dv_sim_call_name(n) != NULL)
        n++;
    ok(n > 10, "dv_sim_call_name lists %u driver calls", n);
    is_status(dv_sim_call_count(a, "memset_d8_async", &before), DV_OK, "count of memset calls");
    dv_alloc(a, 64, 0, "f", &r);
    dv_memset(a, r, 0, 1, 64, 0);
    dv_sim_call_count(a, "memset_d8_async", &after);
    ok(after == before + 1, "one more after a dv_memset (%llu -> %llu)", (unsigned long long)before,
       (unsigned long long)after);
    is_status(dv_sim_inject(a, "memset_d8_async", 1, 1 /* CUDA_ERROR_INVALID_VALUE */), DV_OK,
              "inject an error into the next memset");
    int rc = dv_memset(a, r, 0, 1, 64, 0);
    ok(rc != DV_OK && dv_last_error()->driver_code == 1, "it fails with the driver's code (%s, %s)",
       dv_err_name(rc), dv_last_error()->driver_name);
    is_status(dv_memset(a, r, 0, 1, 64, 0), DV_OK, "the next one works");
    is_status(dv_sim_inject(a, "no_such_call", 1, 1), DV_EINVAL, "an unknown call name");
    /* Without a pool, which would trim and try again. */
    dv_actor_config cfg;
    dv_actor *np = NULL;
    dv_actor_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    cfg.pool = false;
    dv_actor_create(&cfg, &np);
    is_status(dv_sim_fail_alloc(np, 1), DV_OK, "fail the next allocation");
    dv_ref oom;
    dv_alloc(np, 4096, 1, "oom", &oom);
    dv_ref_info info;
    int arc = dv_ref_access(oom, &info);
    /* Out of memory once is not out of memory: the actor tries again. */
    is_status(arc, DV_OK, "the refusal was absorbed: the actor tried again");
    dv_ref_release(oom);
    is_status(dv_sim_inject(np, "mem_alloc_async", 1, 999), DV_OK,
              "a driver error at the next allocation");
    dv_alloc(np, 4096, 1, "oom", &oom);
    arc = dv_ref_access(oom, &info);
    is_status(arc, DV_EDRIVER, "that allocation failed: no retry for an error that is no OOM");
    dv_ref_release(oom);

    /* Poison at a chosen call: the memset meets a sticky fault, the actor
     * rebuilds, and works again. */
    dv_ref p;
    dv_alloc(np, 64, 0, "p", &p);
    dv_memset(np, p, 0, 0, 64, 0);
    is_status(dv_sim_poison_at(np, "memset_d8_async", 1, DV_SIM_POISON_RECOVERABLE), DV_OK,
              "poison at the next memset");
    is_status(dv_memset(np, p, 0, 1, 64, 0), DV_ECONTEXT_LOST, "that memset meets the fault");
    dv_actor_health h;
    dv_actor_health_get(np, &h);
    ok(h.rebuilds == 1 && h.state == DV_ACTOR_RUNNING, "the actor rebuilt (%u) and runs",
       h.rebuilds);
    dv_ref_release(p);
    dv_actor_destroy(np);
    dv_ref_release(r);
    is_status(dv_sim_poison(NULL, DV_SIM_POISON_RECOVERABLE), DV_EINVAL, "poison a NULL actor");

    /* A count whose byte size wraps (n * 4 past 2^64) is an illegal
     * address, not a short range the kernel then overruns. */
    dv_actor *w = NULL;
    dv_actor_create(&cfg, &w);
    dv_kernel *fill = NULL;
    dv_ref x;
    dv_kernel_get(w, NULL, 0, "fill_u32", &fill);
    dv_alloc(w, 64, 0, "x", &x);
    dv_arg wrap[3] = {dv_arg_ref(x, DV_WRITE, 0), dv_arg_u32(1),
                      dv_arg_u64((UINT64_C(1) << 62) + 1)};
    int wrc = dv_launch(w, fill, one, one, 0, 0, wrap, 3);
    ok(wrc == DV_ECONTEXT_LOST || wrc == DV_EDEVICE_LOST,
       "fill_u32 with 2^62 + 1 elements faults as an illegal address (%s)", dv_err_name(wrc));
    dv_ref_release(x);
    dv_actor_destroy(w);
}

int main(void)
{
    dv_actor_config cfg;
    dv_actor *a = NULL;
    dv_actor_config_init(&cfg);
    cfg.backend = ARGS_ON_CUDA ? DV_BACKEND_CUDA : DV_BACKEND_SIM;
    cfg.streams = 2;
    int rc = dv_actor_create(&cfg, &a);
    if (ARGS_ON_CUDA && rc == DV_ENODEVICE)
        skip_all("%s", dv_last_error()->message);
    plan(ARGS_ON_CUDA ? 26 : 47);
    is_status(rc, DV_OK, "an actor (%s)", a ? dv_actor_backend_name(a) : "none");
    if (a == NULL)
        return tap_done();
    test_checks(a);
    test_typed(a);
    if (!ARGS_ON_CUDA) {
        test_images(a);
        test_faults(a);
        uint64_t c;
        is_status(dv_sim_call_count(a, "memset_d8_async", &c), DV_OK, "(sim)");
    } else {
        uint64_t c;
        is_status(dv_sim_call_count(a, "memset_d8_async", &c), DV_ENOTSUP,
                  "the sim's controls on a cuda actor: DV_ENOTSUP");
        /* One actor owns a GPU: every cuda driver of the process reaches the
         * same devices and primary contexts. */
        dv_actor *second = NULL, *shared = NULL;
        is_status(dv_actor_create(&cfg, &second), DV_EBUSY, "a second actor on the GPU: DV_EBUSY");
        is_status(dv_actor_get(0, &shared), DV_EBUSY, "the process-wide one too: DV_EBUSY");
        dv_ref r;
        uint32_t v = 9, back = 0;
        dv_alloc(a, 4, 0, "after", &r);
        dv_copy_htod(a, r, 0, &v, 4, 0);
        dv_copy_dtoh(a, &back, r, 0, 4, 0);
        is_int(back, 9, "the first actor is untouched");
        dv_ref_release(r);
    }
    dv_actor_stats st;
    dv_actor_stats_get(a, &st);
    ok(st.refs_alive == 0, "clean: %llu handles", (unsigned long long)st.refs_alive);
    dv_actor_destroy(a);
    return tap_done();
}
