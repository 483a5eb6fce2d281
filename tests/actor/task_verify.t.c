/*
 * What a task really does, verified against what it declared (the
 * checker on): on the sim through dv_task_sim_access, on cuda
 * (TASK_VERIFY_CUDA; skipped without a device) through the graph its work
 * is captured into.  The "library" is what a cuBLAS wrapper would call:
 * on cuda the driver's own cuMemsetD32Async, cuMemcpyDtoDAsync and
 * cuLaunchKernel (a kernel of its own module) on the task's native
 * stream; on the sim host functions.
 *   - a task whose library work matches its declarations runs, its data
 *     right (copies, sets, its scratch, a declared byte range);
 *   - a write of a block declared DV_READ, a use of a block not declared,
 *     a use of freed memory, work put on another stream's native stream
 *     (cuda), a library kernel given an undeclared block (cuda): the task
 *     answers DV_EHAZARD naming the task and the block, its work does not
 *     run (cuda) and the hazard is counted;
 *   - a refused task's host functions never run; their cleanups do, with
 *     DV_EHAZARD (cuda);
 *   - with the checker off nothing is verified and the work runs.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "devactor.h"
#include "support/lib_call.h"
#include "tap.h"

#ifndef TASK_VERIFY_CUDA
#define TASK_VERIFY_CUDA 0
#endif

#define N     4096u /* u32 words per block */
#define BYTES ((uint64_t)N * 4)

/* A library kernel: lib_fill(p, value, n), PTX for sm_80 and later. */
static const char lib_ptx[] = ".version 8.0\n"
                              ".target sm_80\n"
                              ".address_size 64\n"
                              "    // .globl    lib_fill\n"
                              ".visible .entry lib_fill(\n"
                              "    .param .u64 lib_fill_param_0,\n"
                              "    .param .u32 lib_fill_param_1,\n"
                              "    .param .u64 lib_fill_param_2\n"
                              ")\n"
                              "{\n"
                              "    .reg .pred     %p<3>;\n"
                              "    .reg .b32     %r<8>;\n"
                              "    .reg .b64     %rd<11>;\n"
                              "    ld.param.u64     %rd6, [lib_fill_param_0];\n"
                              "    ld.param.u32     %r2, [lib_fill_param_1];\n"
                              "    ld.param.u64     %rd7, [lib_fill_param_2];\n"
                              "    mov.u32     %r1, %ntid.x;\n"
                              "    mov.u32     %r3, %ctaid.x;\n"
                              "    mov.u32     %r4, %tid.x;\n"
                              "    mad.lo.s32     %r5, %r3, %r1, %r4;\n"
                              "    cvt.u64.u32     %rd10, %r5;\n"
                              "    setp.ge.u64     %p1, %rd10, %rd7;\n"
                              "    @%p1 bra     $L__BB0_3;\n"
                              "    mov.u32     %r6, %nctaid.x;\n"
                              "    mul.lo.s32     %r7, %r6, %r1;\n"
                              "    cvt.u64.u32     %rd2, %r7;\n"
                              "    cvta.to.global.u64     %rd3, %rd6;\n"
                              "$L__BB0_2:\n"
                              "    shl.b64     %rd8, %rd10, 2;\n"
                              "    add.s64     %rd9, %rd3, %rd8;\n"
                              "    st.global.u32     [%rd9], %r2;\n"
                              "    add.s64     %rd10, %rd10, %rd2;\n"
                              "    setp.lt.u64     %p2, %rd10, %rd7;\n"
                              "    @%p2 bra     $L__BB0_2;\n"
                              "$L__BB0_3:\n"
                              "    ret;\n"
                              "}\n";

typedef int (*cu_module_load_fn)(void **, const void *);
typedef int (*cu_get_function_fn)(void **, void *, const char *);
typedef int (*cu_launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, void *, void **, void **);
typedef int (*cu_sync_fn)(void *);


/* What a test task does. */
enum {
    T_COPY,          /* arg0 := arg1 */
    T_FILL,          /* arg0 := 7 */
    T_COPY_FROM_RAW, /* arg0 := the block at raw */
    T_FILL_HALF,     /* words [N/2, N) of arg0 := 7 */
    T_SCRATCH,       /* scratch := 7, arg0 := scratch */
    T_FOREIGN,       /* arg0 := 7 on the native stream kept from another task */
    T_KEEP_STREAM,   /* keep the native stream */
    T_KERNEL,        /* lib_fill(raw, 7, N), the library's own kernel */
    T_FILL_HOST_FN,  /* arg0 := 7, then a host function with a cleanup */
    T_SYNC,          /* arg0 := 7, then synchronise the native stream */
    T_ACCESS,        /* (sim) ask to write arg0; ran := refused as it should be */
    T_KERNEL_OPAQUE, /* T_KERNEL, its parameters said not to be read for pointers */
};

typedef struct call {
    int what;
    uint64_t raw;
    atomic_int ran, cleaned;
    int cleanup_status;
} call;

static void *kept_stream;

static void mark_ran(void *arg)
{
    atomic_store(&((call *)arg)->ran, 1);
}

static void mark_cleaned(void *arg, int status)
{
    call *c = arg;
    c->cleanup_status = status;
    atomic_store(&c->cleaned, 1);
}

static int lib_kernel(const dv_task_ctx *ctx, uint64_t p)
{
    static void *mod, *fn;
    cu_module_load_fn load = (cu_module_load_fn)lib_cuda_sym("cuModuleLoadData");
    cu_get_function_fn get = (cu_get_function_fn)lib_cuda_sym("cuModuleGetFunction");
    cu_launch_fn launch = (cu_launch_fn)lib_cuda_sym("cuLaunchKernel");
    if (load == NULL || get == NULL || launch == NULL)
        return DV_EDRIVER;
    if (mod == NULL && (load(&mod, lib_ptx) != 0 || get(&fn, mod, "lib_fill") != 0))
        return DV_EDRIVER;
    uint32_t v = 7;
    uint64_t n = N;
    void *params[] = {&p, &v, &n};
    return launch(fn, 8, 1, 1, 256, 1, 1, 0, ctx->native_stream, params, NULL) == 0 ? DV_OK
                                                                                    : DV_EDRIVER;
}

static int task(const dv_task_ctx *ctx, void *user)
{
    call *c = user;
    uint64_t s = 0;
    int rc;
    switch (c->what) {
    case T_COPY:
        return lib_call(ctx, ctx->arg[0], ctx->arg[1], 0, N);
    case T_FILL:
        return lib_call(ctx, ctx->arg[0], 0, 7, N);
    case T_COPY_FROM_RAW:
        return lib_call(ctx, ctx->arg[0], c->raw, 0, N);
    case T_FILL_HALF:
        return lib_call(ctx, c->raw + BYTES / 2, 0, 7, N / 2);
    case T_SCRATCH:
        if ((rc = dv_task_scratch(ctx, BYTES, &s)) != DV_OK)
            return rc;
        if ((rc = lib_call(ctx, s, 0, 7, N)) != DV_OK)
            return rc;
        return lib_call(ctx, ctx->arg[0], s, 0, N);
    case T_FOREIGN: {
        lib_cu_memset32_fn f = (lib_cu_memset32_fn)lib_cuda_sym("cuMemsetD32Async");
        return f != NULL && f(ctx->arg[0], 7, N, kept_stream) == 0 ? DV_OK : DV_EDRIVER;
    }
    case T_KEEP_STREAM:
        kept_stream = ctx->native_stream;
        return DV_OK;
    case T_KERNEL:
        return lib_kernel(ctx, c->raw);
    case T_KERNEL_OPAQUE:
        if ((rc = dv_task_kernel_args_opaque(ctx)) != DV_OK)
            return rc;
        return lib_kernel(ctx, c->raw);
    case T_FILL_HOST_FN:
        if ((rc = lib_call(ctx, ctx->arg[0], 0, 7, N)) != DV_OK)
            return rc;
        return dv_task_host_fn_cleanup(ctx, mark_ran, mark_cleaned, c);
    case T_SYNC: {
        cu_sync_fn f = (cu_sync_fn)lib_cuda_sym("cuStreamSynchronize");
        if ((rc = lib_call(ctx, ctx->arg[0], 0, 7, N)) != DV_OK)
            return rc;
        return f != NULL && f(ctx->native_stream) == 0 ? DV_OK : DV_EDRIVER;
    }
    case T_ACCESS: {
        void *p = dv_task_sim_access(ctx, ctx->arg[0], BYTES, DV_WRITE);
        atomic_store(&c->ran, p == NULL && dv_last_error()->status == DV_EHAZARD);
        return DV_OK;
    }
    default:
        return DV_EINVAL;
    }
}

static dv_actor *make(bool check)
{
    dv_actor_config cfg;
    dv_actor *a = NULL;
    dv_actor_config_init(&cfg);
    cfg.backend = TASK_VERIFY_CUDA ? DV_BACKEND_CUDA : DV_BACKEND_SIM;
    cfg.streams = 3;
    cfg.check_order = check;
    cfg.permissive = true;
    cfg.sim_memory_bytes = 64 << 20;
    cfg.sim_seed = 99;
    cfg.sim_delay_max_us = 50;
    return dv_actor_create(&cfg, &a) == DV_OK ? a : NULL;
}

static uint32_t host[N];

/* Every word of r equal to v (after every stream finished)? */
static bool all(dv_actor *a, dv_ref r, uint32_t v, uint32_t from, uint32_t to)
{
    for (dv_stream s = 0; s < 3; s++)
        dv_sync(a, s);
    memset(host, 0xA5, sizeof(host));
    if (dv_copy_dtoh(a, host, r, 0, BYTES, 0) != DV_OK)
        return false;
    for (uint32_t i = from; i < to; i++)
        if (host[i] != v)
            return false;
    return true;
}

static uint64_t hazards(dv_actor *a)
{
    dv_actor_stats st;
    dv_actor_stats_get(a, &st);
    return st.hazards;
}

static uint64_t ptr_of(dv_ref r)
{
    dv_ref_info info;
    return dv_ref_access(r, &info) == DV_OK ? info.ptr : 0;
}

/* Run a task on stream s with args; its status. */
static int run(dv_actor *a, call *c, int what, dv_stream s, const dv_arg *args, unsigned n)
{
    c->what = what;
    atomic_store(&c->ran, 0);
    atomic_store(&c->cleaned, 0);
    c->cleanup_status = -1;
    return dv_task(a, task, c, s, args, n);
}

/* A refused task: DV_EHAZARD, counted, the message says what. */
static void refused(dv_actor *a, int rc, uint64_t before, const char *words, const char *what)
{
    const char *msg = dv_last_error()->message;
    ok(rc == DV_EHAZARD && hazards(a) == before + 1 && strstr(msg, words) != NULL,
       "%s: DV_EHAZARD, counted, \"%s\" (%s)", what, words,
       rc == DV_EHAZARD ? msg : dv_err_name(rc));
}

int main(void)
{
    dv_actor *a = make(true);
    if (TASK_VERIFY_CUDA && a == NULL && dv_last_error()->status == DV_ENODEVICE)
        skip_all("%s", dv_last_error()->message);
    plan(TASK_VERIFY_CUDA ? 23 : 15);
    ok(a != NULL, "an actor with the checker (%s)", a ? dv_actor_backend_name(a) : "none");
    if (a == NULL)
        return tap_done();

    dv_ref x, y, z;
    dv_alloc(a, BYTES, 0, "x", &x);
    dv_alloc(a, BYTES, 1, "y", &y);
    dv_alloc(a, BYTES, 2, "z", &z);
    dv_memset(a, x, 0, 0, BYTES, 0);
    dv_memset(a, y, 0, 1, BYTES, 1);
    dv_memset(a, z, 0, 0, BYTES, 2);
    for (dv_stream s = 0; s < 3; s++)
        dv_sync(a, s);
    static call c;
    uint64_t h0;
    int rc;

    /* -- work that matches its declarations --------------------------- */
    rc =
        run(a, &c, T_COPY, 2, (dv_arg[]){dv_arg_ref(x, DV_WRITE, 0), dv_arg_ref(y, DV_READ, 0)}, 2);
    ok(rc == DV_OK && all(a, x, 0x01010101u, 0, N) && hazards(a) == 0,
       "a library copy into a block declared DV_WRITE from one declared DV_READ runs (%s)",
       dv_err_name(rc));
    rc = run(a, &c, T_FILL, 0, (dv_arg[]){dv_arg_ref(x, DV_READ_WRITE, 0)}, 1);
    ok(rc == DV_OK && all(a, x, 7, 0, N) && hazards(a) == 0,
       "a library set of a block declared DV_READ_WRITE runs");
    c.raw = ptr_of(z);
    rc = run(a, &c, T_FILL_HALF, 1, (dv_arg[]){dv_arg_ref_range(z, DV_WRITE, BYTES / 2, BYTES / 2)},
             1);
    ok(rc == DV_OK && all(a, z, 7, N / 2, N) && all(a, z, 0, 0, N / 2) && hazards(a) == 0,
       "a library set of the byte range declared (dv_arg_ref_range) runs");
    dv_memset(a, z, 0, 0, BYTES, 1);
    rc = run(a, &c, T_SCRATCH, 1, (dv_arg[]){dv_arg_ref(z, DV_WRITE, 0)}, 1);
    ok(rc == DV_OK && all(a, z, 7, 0, N) && hazards(a) == 0,
       "the task's own scratch needs no declaration");

    /* -- work that does not ------------------------------------------- */
    dv_memset(a, y, 0, 1, BYTES, 1);
    h0 = hazards(a);
    rc = run(a, &c, T_FILL, 1, (dv_arg[]){dv_arg_ref(y, DV_READ, 0)}, 1);
    refused(a, rc, h0, "declared it DV_READ only", "a library write of a block declared DV_READ");
    ok(strstr(dv_last_error()->message, "block 'y'") != NULL &&
           strstr(dv_last_error()->message, "task (stream 1") != NULL,
       "the report names the task and the block");
    if (TASK_VERIFY_CUDA)
        ok(all(a, y, 0x01010101u, 0, N), "the refused work did not run");
    h0 = hazards(a);
    c.raw = ptr_of(y);
    rc = run(a, &c, T_COPY_FROM_RAW, 0, (dv_arg[]){dv_arg_ref(x, DV_WRITE, 0)}, 1);
    refused(a, rc, h0, "did not declare it", "a library read of a block not declared");
    h0 = hazards(a);
    c.raw = ptr_of(z);
    rc = run(a, &c, T_FILL_HALF, 1, (dv_arg[]){dv_arg_ref_range(z, DV_WRITE, 0, BYTES / 2)}, 1);
    refused(a, rc, h0, "bytes [8192, 16384) of block 'z'",
            "a library write past the declared range");

    dv_ref gone;
    dv_alloc(a, BYTES, 0, "gone", &gone);
    c.raw = ptr_of(gone);
    dv_ref_release(gone);
    dv_sync(a, 0);
    h0 = hazards(a);
    rc = run(a, &c, T_COPY_FROM_RAW, 0, (dv_arg[]){dv_arg_ref(x, DV_WRITE, 0)}, 1);
    refused(a, rc, h0, "use after free", "a library read of freed memory");

    if (TASK_VERIFY_CUDA) {
        dv_memset(a, x, 0, 0, BYTES, 0);
        rc = run(a, &c, T_KEEP_STREAM, 2, NULL, 0);
        h0 = hazards(a);
        rc = run(a, &c, T_FOREIGN, 1, (dv_arg[]){dv_arg_ref(x, DV_WRITE, 0)}, 1);
        refused(a, rc, h0, "native stream of stream 2",
                "work put on another stream's native stream");
        ok(all(a, x, 0, 0, N), "the foreign work did not run");
        h0 = hazards(a);
        c.raw = ptr_of(y);
        rc = run(a, &c, T_KERNEL, 0, (dv_arg[]){dv_arg_ref(x, DV_WRITE, 0)}, 1);
        refused(a, rc, h0, "parameters of a kernel", "a library kernel given a block not declared");
        rc = run(a, &c, T_KERNEL, 0, (dv_arg[]){dv_arg_ref(y, DV_WRITE, 0)}, 1);
        ok(rc == DV_OK && all(a, y, 7, 0, N), "the same kernel given its declared block runs (%s)",
           dv_err_name(rc));
        dv_memset(a, y, 0, 0, BYTES, 0);
        h0 = hazards(a);
        c.raw = ptr_of(y);
        rc = run(a, &c, T_KERNEL_OPAQUE, 0, (dv_arg[]){dv_arg_ref(x, DV_WRITE, 0)}, 1);
        ok(rc == DV_OK && hazards(a) == h0 && all(a, y, 7, 0, N),
           "with dv_task_kernel_args_opaque its kernels' parameters are not read: the same "
           "kernel runs unchecked (%s)",
           dv_err_name(rc));
        h0 = hazards(a);
        rc = run(a, &c, T_FILL_HOST_FN, 0, (dv_arg[]){dv_arg_ref(z, DV_READ, 0)}, 1);
        refused(a, rc, h0, "declared it DV_READ only", "a refused task with a host function");
        ok(atomic_load(&c.ran) == 0 && atomic_load(&c.cleaned) == 1 &&
               c.cleanup_status == DV_EHAZARD,
           "its host function never ran; its cleanup did, with DV_EHAZARD");
        rc = run(a, &c, T_SYNC, 0, (dv_arg[]){dv_arg_ref(x, DV_WRITE, 0)}, 1);
        ok(rc != DV_OK && rc != DV_EHAZARD,
           "a task that synchronises its captured stream fails and says why (%s: %s)",
           dv_err_name(rc), dv_last_error()->message);
    } else {
        /* The accessor itself answers NULL with DV_EHAZARD, and the task
         * answers the hazard even when its function goes on. */
        h0 = hazards(a);
        rc = run(a, &c, T_ACCESS, 0, (dv_arg[]){dv_arg_ref(y, DV_READ, 0)}, 1);
        ok(rc == DV_EHAZARD && atomic_load(&c.ran) == 1 && hazards(a) == h0 + 1,
           "dv_task_sim_access refused: NULL and DV_EHAZARD inside; the task answers DV_EHAZARD");
    }
    rc = run(a, &c, T_FILL, 0, (dv_arg[]){dv_arg_ref(x, DV_WRITE, 0)}, 1);
    ok(rc == DV_OK, "the actor goes on after refusals (%s)", dv_err_name(rc));
    dv_task_ctx fake = {0};
    ok(dv_task_kernel_args_opaque(NULL) == DV_EINVAL &&
           dv_task_kernel_args_opaque(&fake) == DV_EINVAL,
       "dv_task_kernel_args_opaque outside a task: DV_EINVAL");
    dv_ref_release(x);
    dv_ref_release(y);
    dv_ref_release(z);
    dv_actor_destroy(a);

    /* -- the checker off: nothing verified ----------------------------- */
    a = make(false);
    ok(a != NULL, "an actor without the checker");
    if (a == NULL)
        return tap_done();
    dv_alloc(a, BYTES, 0, "y", &y);
    dv_memset(a, y, 0, 1, BYTES, 0);
    rc = run(a, &c, T_FILL, 0, (dv_arg[]){dv_arg_ref(y, DV_READ, 0)}, 1);
    ok(rc == DV_OK && all(a, y, 7, 0, N) && hazards(a) == 0,
       "a library write of a block declared DV_READ is not verified, and runs");
    dv_ref_release(y);
    dv_actor_destroy(a);
    return tap_done();
}
