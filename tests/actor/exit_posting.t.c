/*
 * The process exits while other threads still post to a process-wide
 * actor: the atexit handler shuts the actor down and leaves its memory, so
 * those threads get DV_OK or DV_ESHUTDOWN and nothing reads freed memory
 * (under AddressSanitizer a read of it aborts the child).  Each try is a
 * child process of its own (this program again, "--child"): four threads
 * post syncs and allocations in a loop, the main thread calls exit(0) a
 * moment later.  A thread that gets any other answer ends the child with
 * status 3.
 */
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "devactor.h"
#include "tap.h"

extern char **environ;

#define TRIES   10
#define POSTERS 4

static dv_actor *shared;

static void *post_forever(void *arg)
{
    (void)arg;
    for (;;) {
        dv_ref r;
        int rc = dv_sync(shared, 0);
        if (rc == DV_OK) {
            rc = dv_alloc(shared, 4096, 0, "late", &r);
            if (rc == DV_OK)
                rc = dv_ref_release(r);
        }
        if (rc != DV_OK && rc != DV_ESHUTDOWN && rc != DV_ESTALE)
            _exit(3);
    }
    return NULL;
}

static int child_main(void)
{
    alarm(20);
    setenv("DV_BACKEND", "sim", 1);
    if (dv_actor_get(0, &shared) != DV_OK)
        return 127;
    pthread_t t;
    for (int i = 0; i < POSTERS; i++)
        if (pthread_create(&t, NULL, post_forever, NULL) != 0)
            return 127;
    struct timespec pause = {0, 20 * 1000000L};
    nanosleep(&pause, NULL);
    exit(0); /* the atexit handler stops the actor under the posters */
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--child") == 0)
        return child_main();
    plan(1);
    int clean = 0, last = 0;
    for (int i = 0; i < TRIES; i++) {
        char self[] = "exit_posting.t", flag[] = "--child";
        char *args[] = {self, flag, NULL};
        pid_t pid;
        int status = 0;
        fflush(stdout);
        if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, environ) != 0 ||
            waitpid(pid, &status, 0) != pid)
            break;
        last = status;
        clean += WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    ok(clean == TRIES,
       "%d of %d processes that exit while four threads post to the process-wide actor exit "
       "cleanly (last status: %s %d)",
       clean, TRIES, WIFSIGNALED(last) ? "signal" : "exit",
       WIFSIGNALED(last) ? WTERMSIG(last) : WEXITSTATUS(last));
    return tap_done();
}
