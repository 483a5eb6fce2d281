/*
 * Threads that must not wait, and fork() (proc.h).
 */
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/error.h"
#include "base/fence.h"
#include "base/proc.h"

_Thread_local const void *dv__serving;
atomic_uint dv__fork_gen;

static pthread_once_t watch_once = PTHREAD_ONCE_INIT;

int dv__no_wait_slow(const char *op)
{
    return dv__fail(DV_EDEADLK, op,
                    "%s: called on an actor's thread (inside a task or a host function), where "
                    "waiting for an actor could wait forever; post it with the _async form and "
                    "do not wait, or make the call from another thread",
                    op);
}

int dv__forked(const char *op)
{
    return dv__fail(DV_EFORKED, op,
                    "%s: the actor was made before fork() and has no thread in this process; "
                    "make a new one in the child (the CUDA driver does not survive fork)",
                    op);
}

static void in_child(void)
{
    /* One thread now: nothing else reads these. */
    atomic_fetch_add_explicit(&dv__fork_gen, 1, memory_order_relaxed);
    dv__serving = NULL;
    dv__fence_after_fork();
}

static void watch(void)
{
    (void)pthread_atfork(NULL, NULL, in_child);
}

void dv__fork_watch(void)
{
    pthread_once(&watch_once, watch);
}

uint32_t dv__thread_id(void)
{
    static _Thread_local uint32_t tid;
    if (tid == 0)
        tid = (uint32_t)syscall(SYS_gettid);
    return tid;
}
