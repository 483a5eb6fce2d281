/*
 * dv-demo: a short walk through devactor's public API on the chosen
 * backend: an actor, handles used at once, copies, tracked launches on two
 * streams, timing events, a read back and a check.  Everything here is
 * what a program that uses devactor writes.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <strings.h>

#include "devactor.h"
#include "tools_common.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: dv-demo [--backend cuda|sim|auto] [--device N] [--elements N] [--rounds N]\n"
            "\n"
            "Runs allocate -> host-to-device copy -> fill_u32 / add_u32 / checksum\n"
            "kernels on two streams -> device-to-host copy -> verify, through one\n"
            "actor, and prints which backend ran and the device time the rounds\n"
            "took (timing events).  Exit status 0 when every check passed, 1 on a\n"
            "wrong result, 2 on a usage or device error or output that could not be\n"
            "written.\n"
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
    dv_actor_config cfg;
    uint64_t n = UINT64_C(4) << 20;
    int rounds = 8, c;

    dv_actor_config_init(&cfg);
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
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
                return 2;
            }
            break;
        case 'd':
        case 'n':
        case 'r': {
            uint64_t v = 0;
            if (!tool_whole_number(optarg, &v) || (c != 'n' && v > INT_MAX)) {
                fprintf(stderr, "dv-demo: %s: \"%s\" is not a number it takes\n",
                        c == 'd' ? "--device" : c == 'n' ? "--elements" : "--rounds", optarg);
                return 2;
            }
            if (c == 'd')
                cfg.device = (int)v;
            else if (c == 'n')
                n = v;
            else
                rounds = (int)v;
            break;
        }
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "dv-demo: unexpected argument \"%s\"\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (n == 0 || n > (UINT64_C(1) << 32) || rounds <= 0) {
        fprintf(stderr, "dv-demo: --elements must be 1..2^32 and --rounds positive\n");
        return 2;
    }
    note_env_conf("dv-demo", false);
    uint64_t bytes = n * 4;
    cfg.streams = 2;
    cfg.sim_memory_bytes = 4 * bytes + (UINT64_C(64) << 20);

    /* One actor owns the device; every call below posts to it. */
    dv_actor *gpu;
    int rc = dv_actor_create(&cfg, &gpu);
    if (rc != DV_OK) {
        fprintf(stderr, "dv-demo: %s\n", dv_last_error()->message);
        return 2;
    }
    printf("dv-demo: backend %s, device %d\n", dv_actor_backend_name(gpu), cfg.device);
    const char *env = getenv("DV_BACKEND");
    bool asked = env != NULL && strcasecmp(env, "sim") == 0;
    if (cfg.backend == DV_BACKEND_AUTO && !asked && strcmp(dv_actor_backend_name(gpu), "sim") == 0)
        printf("dv-demo: no CUDA device answered, so this ran on the simulated device "
               "(DV_BACKEND=cuda insists on a GPU)\n");

    /* Two host buffers, and on the sim three device buffers in host
     * memory too: refused up front where the host has not that much. */
    bool on_sim = strcmp(dv_actor_backend_name(gpu), "sim") == 0;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t have = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    uint64_t need = (on_sim ? 5 : 2) * bytes;
    if (have != 0 && need > have / 4 * 3) {
        fprintf(stderr,
                "dv-demo: --elements %llu needs about %.1f GiB of host memory%s; this machine "
                "has %.1f GiB\n",
                (unsigned long long)n, (double)need / (1 << 30),
                on_sim ? " (the simulated device keeps its memory there)" : "",
                (double)have / (1 << 30));
        dv_actor_destroy(gpu);
        return 2;
    }

    dv_kernel *fill, *add, *sum;
    TRY(dv_kernel_get(gpu, NULL, 0, "fill_u32", &fill));
    TRY(dv_kernel_get(gpu, NULL, 0, "add_u32", &add));
    TRY(dv_kernel_get(gpu, NULL, 0, "checksum", &sum));

    /* Handles are usable at once: the allocations are ordered before
     * every use below, nobody waits for them. */
    dv_ref a, b, out, total;
    TRY(dv_alloc(gpu, bytes, 0, "a", &a));
    TRY(dv_alloc(gpu, bytes, 0, "b", &b));
    TRY(dv_alloc(gpu, bytes, 1, "out", &out));
    TRY(dv_alloc(gpu, 8, 1, "sum", &total));

    uint32_t *host = malloc(bytes), *back = malloc(bytes);
    if (host == NULL || back == NULL) {
        fprintf(stderr, "dv-demo: out of host memory\n");
        return 2;
    }
    dv_event *start, *stop;
    TRY(dv_event_create(gpu, DV_EVENT_TIMING, &start));
    TRY(dv_event_create(gpu, DV_EVENT_TIMING, &stop));
    dv_dim3 grid = {256, 1, 1}, block = {256, 1, 1};
    int wrong = 0;
    TRY(dv_event_record(start, 0));
    for (int r = 0; r < rounds; r++) {
        uint32_t v = (uint32_t)r * 7u + 1u;
        for (uint64_t i = 0; i < n; i++)
            host[i] = (uint32_t)(i * 2654435761u) + (uint32_t)r;
        /* Stream 0 writes a and b; stream 1 reads them: each launch names
         * its handles with their access, and the actor fences the uses
         * across streams. */
        TRY(dv_copy_htod(gpu, a, 0, host, bytes, 0));
        dv_arg fill_args[] = {dv_arg_ref(b, DV_WRITE, 0), dv_arg_u32(v), dv_arg_u64(n)};
        TRY(dv_launch(gpu, fill, grid, block, 0, 0, fill_args, 3));
        dv_arg add_args[] = {dv_arg_ref(out, DV_WRITE, 0), dv_arg_ref(a, DV_READ, 0),
                             dv_arg_ref(b, DV_READ, 0), dv_arg_u64(n)};
        TRY(dv_launch(gpu, add, grid, block, 0, 1, add_args, 4));
        TRY(dv_memset(gpu, total, 0, 0, 8, 1));
        dv_arg sum_args[] = {dv_arg_ref(out, DV_READ, 0), dv_arg_u64(n),
                             dv_arg_ref(total, DV_READ_WRITE, 0)};
        TRY(dv_launch(gpu, sum, grid, block, 0, 1, sum_args, 3));
        uint64_t got;
        TRY(dv_copy_dtoh(gpu, back, out, 0, bytes, 1));
        TRY(dv_copy_dtoh(gpu, &got, total, 0, 8, 1));
        for (uint64_t i = 0; i < n; i++)
            host[i] += v;
        if (memcmp(host, back, bytes) != 0 || got != checksum_ref(host, n)) {
            fprintf(stderr, "dv-demo: round %d: %s\n", r,
                    memcmp(host, back, bytes) != 0 ? "wrong sum of a and b" : "wrong checksum");
            wrong++;
        }
    }
    TRY(dv_event_record(stop, 1));
    TRY(dv_event_sync(stop));
    float ms = 0;
    int timed = dv_event_elapsed(start, stop, &ms);
    printf("dv-demo: %d rounds of %llu elements (%.1f MiB per buffer), %.3f ms of device time: "
           "%s\n",
           rounds, (unsigned long long)n, (double)bytes / (1 << 20),
           timed == DV_OK ? (double)ms : -1.0, wrong ? "WRONG" : "all right");
    dv_event_destroy(start);
    dv_event_destroy(stop);
    dv_ref_release(a);
    dv_ref_release(b);
    dv_ref_release(out);
    dv_ref_release(total);
    dv_actor_destroy(gpu);
    free(host);
    free(back);
    if (tool_stdout_done("dv-demo") != 0)
        return 2;
    return wrong ? 1 : 0;
}
