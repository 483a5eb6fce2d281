/*
 * A communicator across processes: this program makes an id, starts
 * itself twice (ranks 0 and 1, each on its own GPU, the id as text on the
 * command line), and each child joins with dv_nccl_comm_join, all-reduces
 * and checks the sum.  Needs two CUDA devices and NCCL; skipped without
 * them (the sim's communicators live in one process).
 */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "devactor.h"
#include "devactor_nccl.h"
#include "tap.h"

#define NRANKS 2
#define N      (1u << 20) /* elements */

extern char **environ;

/* A child: rank r of NRANKS.  Exit 0 when the sum is right, 1 when not,
 * 2 when something else failed (said on stderr). */
static int child(int r, const char *hex)
{
    dv_nccl_id id;
    dv_actor_config cfg;
    dv_actor *a = NULL;
    dv_nccl_comm *c = NULL;
    dv_ref buf = DV_REF_NULL;
    dv_actor_config_init(&cfg);
    cfg.backend = DV_BACKEND_CUDA;
    cfg.device = r;
    int rc = dv_nccl_id_parse(&id, hex);
    rc = rc == DV_OK ? dv_actor_create(&cfg, &a) : rc;
    rc = rc == DV_OK ? dv_nccl_comm_join(&a, &r, 1, NRANKS, &id, 60000000000ull, &c) : rc;
    rc = rc == DV_OK ? dv_alloc(a, N * 4, 0, "sum", &buf) : rc;
    rc = rc == DV_OK ? dv_memset(a, buf, 0, (unsigned char)(r + 1), N * 4, 0) : rc;
    rc = rc == DV_OK ? dv_nccl_all_reduce(c, r, 0, dv_nccl_at(buf, 0), dv_nccl_at(buf, 0), N,
                                          DV_NCCL_U32, DV_NCCL_SUM, NULL)
                     : rc;
    uint32_t *out = malloc(N * 4);
    rc = rc == DV_OK && out != NULL ? dv_copy_dtoh(a, out, buf, 0, N * 4, 0) : rc;
    if (rc != DV_OK) {
        fprintf(stderr, "rank %d: %s\n", r, dv_last_error()->message);
        return 2;
    }
    uint64_t bad = 0;
    for (uint32_t e = 0; e < N; e++)
        bad += out[e] != 0x03030303u; /* 0x01.. + 0x02.. */
    fprintf(stderr, "rank %d: %llu wrong of %u\n", r, (unsigned long long)bad, N);
    free(out);
    dv_ref_release(buf);
    dv_nccl_comm_destroy(c);
    dv_actor_destroy(a);
    return bad == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--rank") == 0)
        return child(atoi(argv[2]), argv[3]);
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.backend = DV_BACKEND_CUDA;
    dv_actor *a[NRANKS] = {NULL};
    for (int r = 0; r < NRANKS; r++) {
        cfg.device = r;
        if (dv_actor_create(&cfg, &a[r]) != DV_OK)
            skip_all("needs %d CUDA devices: %s", NRANKS, dv_last_error()->message);
    }
    dv_nccl_id id;
    char hex[DV_NCCL_ID_HEX];
    int rc = dv_nccl_id_make(a[0], &id);
    if (rc == DV_ENOTSUP)
        skip_all("%s", dv_last_error()->message);
    /* The children have the devices to themselves. */
    for (int r = NRANKS - 1; r >= 0; r--)
        dv_actor_destroy(a[r]);
    plan(1 + NRANKS);
    ok(rc == DV_OK && dv_nccl_id_format(&id, hex, sizeof(hex)) == DV_OK, "an id, as text");
    pid_t pid[NRANKS];
    for (int r = 0; r < NRANKS; r++) {
        char rank[8];
        snprintf(rank, sizeof(rank), "%d", r);
        char *args[] = {argv[0], "--rank", rank, hex, NULL};
        if (posix_spawn(&pid[r], "/proc/self/exe", NULL, NULL, args, environ) != 0)
            pid[r] = -1;
    }
    for (int r = 0; r < NRANKS; r++) {
        int st = 0;
        bool ran = pid[r] > 0 && waitpid(pid[r], &st, 0) == pid[r];
        ok(ran && WIFEXITED(st) && WEXITSTATUS(st) == 0,
           "rank %d, a process of its own, joined and all-reduced right (exit %d)", r,
           ran && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    return tap_done();
}
