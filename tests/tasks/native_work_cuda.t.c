/*
 * A task's work on its native stream, enqueued by the driver directly
 * (as a library does), orders a later reuse of the memory it touched on
 * another stream, also when the pool recorded an event on that stream in
 * the middle of the task (growing by a chunk, on the task's scratch):
 * the task takes scratch, enqueues a host function that sleeps, then a
 * cuMemsetD32Async of the scratch; its scratch freed, stream 1 takes the
 * memory and writes it.  Stream 1's write must come after the task's.
 * On the real driver only (skipped where no device answers).
 */
#include <dlfcn.h>
#include <unistd.h>

#include "devactor.h"
#include "tap.h"

#define WORDS 16384u

typedef int (*host_fn_t)(void *, void (*)(void *), void *);
typedef int (*memset_t)(unsigned long long, unsigned, size_t, void *);
static host_fn_t launch_host_func;
static memset_t memset_d32_async;

static void nap(void *arg)
{
    (void)arg;
    usleep(200000);
}

static int task(const dv_task_ctx *ctx, void *user)
{
    (void)user;
    uint64_t p;
    int rc = dv_task_scratch(ctx, WORDS * 4, &p);
    if (rc != DV_OK)
        return rc;
    if (launch_host_func(ctx->native_stream, nap, NULL) != 0 ||
        memset_d32_async(p, 0xAAAAAAAAu, WORDS, ctx->native_stream) != 0)
        return DV_EDRIVER;
    return DV_OK;
}

int main(void)
{
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    if (cuda == NULL)
        skip_all("no CUDA driver library: %s", dlerror());
    launch_host_func = (host_fn_t)dlsym(cuda, "cuLaunchHostFunc");
    memset_d32_async = (memset_t)dlsym(cuda, "cuMemsetD32Async");
    if (launch_host_func == NULL || memset_d32_async == NULL)
        skip_all("the driver lacks cuLaunchHostFunc or cuMemsetD32Async");
    plan(4);
    for (int chunks = 0; chunks < 2; chunks++) {
        dv_actor_config cfg;
        dv_actor *a = NULL;
        dv_actor_config_init(&cfg);
        cfg.backend = DV_BACKEND_CUDA;
        cfg.streams = 2;
        cfg.pool_chunks = chunks;
        if (dv_actor_create(&cfg, &a) != DV_OK) {
            if (dv_last_error()->status == DV_ENODEVICE)
                skip_all("%s", dv_last_error()->message);
            bail_out("no actor: %s", dv_last_error()->message);
        }
        dv_future f;
        dv_future_init(&f, 0);
        int rc = dv_task_async(a, task, NULL, 0, NULL, 0, &f);
        if (rc == DV_OK)
            rc = dv_future_wait_ordered(&f);
        dv_ref b = DV_REF_NULL;
        static uint32_t host[WORDS];
        if (rc == DV_OK)
            rc = dv_alloc(a, WORDS * 4, 1, "b", &b);
        if (rc == DV_OK)
            rc = dv_memset(a, b, 0, 0x55, WORDS * 4, 1);
        int task_rc = dv_future_wait(&f);
        if (rc == DV_OK)
            rc = dv_copy_dtoh(a, host, b, 0, WORDS * 4, 1);
        is_status(rc == DV_OK ? task_rc : rc, DV_OK, "pool_chunks=%d: the task and the reuse ran",
                  chunks);
        ok(host[0] == 0x55555555u && host[WORDS - 1] == 0x55555555u,
           "pool_chunks=%d: stream 1's write of the reused memory came after the task's (0x%08x)",
           chunks, host[0]);
        dv_ref_release(b);
        dv_actor_destroy(a);
    }
    return tap_done();
}
