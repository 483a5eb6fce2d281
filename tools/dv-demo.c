/*
 * dv-demo: a short walk through the device port on the chosen backend —
 * allocate, write from the host, launch kernels, read back, verify.
 * `make stress` runs it until the stress harness exists.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver/port.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: dv-demo [--backend cuda|sim|auto] [--device N] [--elements N] [--rounds N]\n"
            "\n"
            "Runs allocate -> host-to-device copy -> fill_u32 / add_u32 / checksum\n"
            "kernels -> device-to-host copy -> verify, on two streams joined by an\n"
            "event, and prints which backend ran.  Exit status 0 when every check\n"
            "passed, 1 on a wrong result, 2 on a usage or device error.\n"
            "\n"
            "  --backend B   cuda, sim or auto (default: $DV_BACKEND, else cuda when a\n"
            "                device answers, else sim)\n"
            "  --device N    device ordinal (default 0)\n"
            "  --elements N  u32 elements per buffer (default 4194304)\n"
            "  --rounds N    rounds of the kernel sequence (default 8)\n"
            "  --help        this text\n");
}

static uint64_t checksum_ref(const uint32_t *p, uint64_t n)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++)
        sum += (((uint64_t)p[i] << 32) | (uint32_t)i) * UINT64_C(0x9E3779B97F4A7C15);
    return sum;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (rc_ != DV_OK) {                                                                        \
            fprintf(stderr, "dv-demo: %s: %s\n  %s\n", #expr, dv_strerror(rc_),                    \
                    dv_last_error()->message);                                                     \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"backend", required_argument, NULL, 'b'},  {"device", required_argument, NULL, 'd'},
        {"elements", required_argument, NULL, 'n'}, {"rounds", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0}};
    dv_driver_config cfg;
    int device = 0, rounds = 8, c;
    uint64_t n = UINT64_C(4) << 20;

    dv__driver_config_init(&cfg);
    while ((c = getopt_long(argc, argv, "b:d:n:r:h", opts, NULL)) != -1) {
        switch (c) {
        case 'b':
            if (strcmp(optarg, "cuda") == 0)
                cfg.backend = DV_BACKEND_CUDA;
            else if (strcmp(optarg, "sim") == 0)
                cfg.backend = DV_BACKEND_SIM;
            else if (strcmp(optarg, "auto") == 0)
                cfg.backend = DV_BACKEND_AUTO;
            else {
                fprintf(stderr, "dv-demo: unknown backend \"%s\"\n", optarg);
                usage(stderr);
                return 2;
            }
            break;
        case 'd':
            device = atoi(optarg);
            break;
        case 'n':
            n = strtoull(optarg, NULL, 0);
            break;
        case 'r':
            rounds = atoi(optarg);
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (n == 0 || n > (UINT64_C(1) << 32) || rounds <= 0) {
        fprintf(stderr, "dv-demo: --elements must be 1..2^32 and --rounds positive\n");
        return 2;
    }

    dv_driver *drv = NULL;
    int rc = dv__driver_open(&cfg, &drv);
    if (rc != DV_OK) {
        const char *why = dv_last_error()->message;
        fprintf(stderr, "dv-demo: %s\n", why[0] != '\0' ? why : dv_strerror(rc));
        return 2;
    }
    dv_device_info info;
    TRY(dv__drv_device_info(drv, device, &info));
    printf("dv-demo: backend %s, device %d: %s (%llu MiB, cc %d.%d)\n", dv__driver_backend_name(drv),
           device, info.name, (unsigned long long)(info.total_bytes >> 20), info.cc_major,
           info.cc_minor);
    if (dv__driver_backend(drv) == DV_BACKEND_SIM && cfg.backend == DV_BACKEND_AUTO &&
        getenv("DV_BACKEND") == NULL)
        printf("dv-demo: no CUDA device answered, so this ran on the simulated device "
               "(DV_BACKEND=cuda requires a GPU)\n");

    dv_drv_ctx *ctx;
    dv_drv_stream *s0, *s1;
    dv_drv_event *ev;
    dv_drv_module *mod;
    dv_drv_func *f_fill, *f_add, *f_sum;
    dv_dptr a, b, out, sum;
    const uint64_t bytes = n * 4;
    TRY(dv__drv_ctx_retain(drv, device, &ctx));
    TRY(dv__drv_stream_create(ctx, &s0));
    TRY(dv__drv_stream_create(ctx, &s1));
    TRY(dv__drv_event_create(ctx, 0, &ev));
    const void *image;
    size_t image_bytes;
    dv__drv_builtin_image(drv, &image, &image_bytes);
    TRY(dv__drv_module_load(ctx, image, image_bytes, &mod));
    TRY(dv__drv_func_get(mod, "fill_u32", &f_fill));
    TRY(dv__drv_func_get(mod, "add_u32", &f_add));
    TRY(dv__drv_func_get(mod, "checksum", &f_sum));
    TRY(dv__drv_mem_alloc(ctx, bytes, &a));
    TRY(dv__drv_mem_alloc_async(s0, bytes, &b));
    TRY(dv__drv_mem_alloc_async(s0, bytes, &out));
    TRY(dv__drv_mem_alloc(ctx, 8, &sum));

    uint32_t *host = malloc(bytes), *back = malloc(bytes);
    if (host == NULL || back == NULL) {
        fprintf(stderr, "dv-demo: out of host memory\n");
        return 2;
    }
    int failures = 0;
    double t0 = now_s();
    dv_dim3 grid = {256, 1, 1}, block = {256, 1, 1};
    for (int r = 0; r < rounds; r++) {
        for (uint64_t i = 0; i < n; i++)
            host[i] = (uint32_t)(i * 2654435761u) ^ (uint32_t)r;
        uint32_t add = 1000u + (uint32_t)r;
        /* s0 writes a (from the host) and b (a kernel); s1 waits, adds,
         * sums and reads back. */
        TRY(dv__drv_memcpy_htod(s0, a, host, bytes));
        void *pf[] = {&b, &add, &n};
        TRY(dv__drv_launch(f_fill, grid, block, 0, s0, pf));
        TRY(dv__drv_event_record(ev, s0));
        TRY(dv__drv_stream_wait_event(s1, ev));
        void *pa[] = {&out, &a, &b, &n};
        TRY(dv__drv_launch(f_add, grid, block, 0, s1, pa));
        TRY(dv__drv_memset_d8(s1, sum, 0, 8));
        void *ps[] = {&out, &n, &sum};
        TRY(dv__drv_launch(f_sum, grid, block, 0, s1, ps));
        uint64_t got = 0;
        TRY(dv__drv_memcpy_dtoh(s1, back, out, bytes));
        TRY(dv__drv_memcpy_dtoh(s1, &got, sum, 8));
        TRY(dv__drv_stream_sync(s1));
        uint64_t bad = 0;
        for (uint64_t i = 0; i < n; i++) {
            host[i] += add;
            bad += back[i] != host[i];
        }
        uint64_t want = checksum_ref(host, n);
        if (bad != 0 || got != want) {
            failures++;
            fprintf(stderr,
                    "dv-demo: round %d: %llu wrong elements, checksum %016llx want %016llx\n", r,
                    (unsigned long long)bad, (unsigned long long)got, (unsigned long long)want);
        }
    }
    double dt = now_s() - t0;
    TRY(dv__drv_mem_free_async(s0, b));
    TRY(dv__drv_mem_free_async(s0, out));
    TRY(dv__drv_stream_sync(s0));
    TRY(dv__drv_mem_free(ctx, a));
    TRY(dv__drv_mem_free(ctx, sum));
    TRY(dv__drv_module_unload(mod));
    TRY(dv__drv_event_destroy(ev));
    TRY(dv__drv_stream_destroy(s0));
    TRY(dv__drv_stream_destroy(s1));
    TRY(dv__drv_ctx_release(ctx));
    dv__driver_close(drv);
    free(host);
    free(back);

    printf("dv-demo: %d rounds of %llu elements (%.1f MiB per buffer) in %.3f s: %s\n", rounds,
           (unsigned long long)n, (double)bytes / (1 << 20), dt,
           failures == 0 ? "all results verified" : "WRONG RESULTS");
    return failures == 0 ? 0 : 1;
}
