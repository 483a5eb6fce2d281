/*
 * Asymmetric fences and hazard slots (fence.h).
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/fence.h"
#include "base/tsan.h"

#if defined(__linux__) && defined(SYS_membarrier)
#include <linux/membarrier.h>
#define HAVE_MEMBARRIER 1
#endif

atomic_bool dv__fence_asym;

static pthread_once_t fence_once = PTHREAD_ONCE_INIT;

#ifdef HAVE_MEMBARRIER
static int membarrier(int cmd)
{
    return (int)syscall(SYS_membarrier, cmd, 0, 0);
}
#endif

static void fence_choose(void)
{
#if defined(HAVE_MEMBARRIER) && !defined(DV_TSAN)
    const char *env = getenv("DV_FENCES");
    if (env != NULL && strcmp(env, "full") == 0)
        return;
    int cmds = membarrier(MEMBARRIER_CMD_QUERY);
    if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED))
        return;
    if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0)
        return;
    /* Published by pthread_once to every thread that calls dv__fence_init,
     * and through the objects made after it to their users. */
    atomic_store_explicit(&dv__fence_asym, true, memory_order_relaxed);
#endif
}

void dv__fence_init(void)
{
    pthread_once(&fence_once, fence_choose);
}

void dv__fence_heavy(void)
{
#ifdef HAVE_MEMBARRIER
    if (atomic_load_explicit(&dv__fence_asym, memory_order_relaxed)) {
        if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
            return;
        /* Registered, so this should not fail; the global command is
         * slower and just as strong. */
        if (membarrier(MEMBARRIER_CMD_GLOBAL) == 0)
            return;
        fprintf(stderr, "devactor: membarrier failed after registration\n");
        abort();
    }
#endif
    atomic_thread_fence(memory_order_seq_cst);
}

const char *dv__fence_scheme(void)
{
    return atomic_load_explicit(&dv__fence_asym, memory_order_relaxed) ? "asymmetric (membarrier)"
                                                                       : "full fences";
}

/* ------------------------------------------------------------------------
 * Hazard slots
 * ------------------------------------------------------------------------ */

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static dv_hazards *reg_head; /* every thread's, under reg_mu */
static pthread_key_t hazards_key;
static pthread_once_t hazards_once = PTHREAD_ONCE_INIT;
static _Thread_local dv_hazards mine;
static _Thread_local bool mine_registered;

static void hazards_exit(void *arg)
{
    dv_hazards *h = arg;
    pthread_mutex_lock(&reg_mu);
    if (h->prev != NULL)
        h->prev->next = h->next;
    else
        reg_head = h->next;
    if (h->next != NULL)
        h->next->prev = h->prev;
    pthread_mutex_unlock(&reg_mu);
    h->next = h->prev = NULL;
    /* A later destructor that posts registers the thread again. */
    mine_registered = false;
}

static void hazards_key_init(void)
{
    (void)pthread_key_create(&hazards_key, hazards_exit);
}

dv_hazards *dv__hazards_mine(void)
{
    if (mine_registered)
        return &mine;
    pthread_once(&hazards_once, hazards_key_init);
    if (pthread_setspecific(hazards_key, &mine) != 0)
        return NULL;
    pthread_mutex_lock(&reg_mu);
    mine.next = reg_head;
    mine.prev = NULL;
    if (reg_head != NULL)
        reg_head->prev = &mine;
    reg_head = &mine;
    pthread_mutex_unlock(&reg_mu);
    mine_registered = true;
    return &mine;
}

void dv__fence_after_fork(void)
{
    /* The parent's other threads are gone: their hazard slots with them,
     * and reg_mu may have been held by one of them. */
    pthread_mutex_init(&reg_mu, NULL);
    reg_head = NULL;
    if (mine_registered) {
        for (unsigned k = 0; k < DV_HAZARD_DEPTH; k++)
            atomic_store_explicit(&mine.slot[k], NULL, memory_order_relaxed);
        mine.depth = 0;
        mine.next = mine.prev = NULL;
        reg_head = &mine;
    }
#ifdef HAVE_MEMBARRIER
    /* Registration belongs to the address space; make sure the child's
     * has it, or fall back to full fences. */
    if (atomic_load_explicit(&dv__fence_asym, memory_order_relaxed) &&
        membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0)
        atomic_store_explicit(&dv__fence_asym, false, memory_order_relaxed);
#endif
}

void dv__hazard_wait(const void *obj)
{
    /* The handshake's other side: the caller stored the new state; after
     * this, a thread that names obj later reads that state. */
    dv__fence_heavy();
    pthread_mutex_lock(&reg_mu);
    for (dv_hazards *h = reg_head; h != NULL; h = h->next) {
        for (unsigned k = 0; k < DV_HAZARD_DEPTH; k++) {
            /* Acquire: pairs with dv__hazard_clear's release. */
            while (atomic_load_explicit(&h->slot[k], memory_order_acquire) == obj)
                sched_yield();
        }
    }
    pthread_mutex_unlock(&reg_mu);
}
