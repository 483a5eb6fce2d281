/*
 * The process and its threads: which threads must never wait for an
 * actor, and which objects were inherited across fork().
 *
 * A thread that serves an actor (its loop, a task on it) or runs a host
 * function for one (a driver or sim callback thread) must not wait for
 * any actor: its own would wait for itself, and two actors waiting for
 * each other would wait forever.  Such a thread is marked while it does
 * that work, and every call that would wait answers DV_EDEADLK instead
 * (dv__no_wait).  The mark is a thread-local pointer: one load.
 *
 * fork() copies the process but only the forking thread: an actor made
 * before it has no thread in the child, so a post would never be served.
 * Objects remember the fork generation they were made in; the child's
 * handler moves the generation, and the child's calls on older objects
 * answer DV_EFORKED before touching any lock.
 */
#ifndef DV_BASE_PROC_H
#define DV_BASE_PROC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* What the calling thread serves (an actor), or NULL. */
extern _Thread_local const void *dv__serving;

/* Mark the calling thread as serving obj until dv__serve_end. Nests:
 * returns the previous mark, which dv__serve_end puts back. */
static inline const void *dv__serve_begin(const void *obj)
{
    const void *prev = dv__serving;
    dv__serving = obj;
    return prev;
}

static inline void dv__serve_end(const void *prev)
{
    dv__serving = prev;
}

/* DV_OK, or DV_EDEADLK (detail naming op) on a thread that serves an
 * actor. */
int dv__no_wait_slow(const char *op);
static inline int dv__no_wait(const char *op)
{
    return dv__serving == NULL ? 0 : dv__no_wait_slow(op);
}

/* The process's fork generation: 0 until the first fork() in this line
 * of processes' children.  Relaxed: it changes only in a child's handler,
 * while that child has one thread. */
extern atomic_uint dv__fork_gen;
static inline uint32_t dv__fork_now(void)
{
    return atomic_load_explicit(&dv__fork_gen, memory_order_relaxed);
}

/* Install the fork handler (once; before the first actor exists). */
void dv__fork_watch(void);
/* DV_EFORKED with a detail naming op. */
int dv__forked(const char *op);

/* The calling thread's kernel id (gettid): the number debuggers, perf and
 * logs show.  Cached per thread. */
uint32_t dv__thread_id(void);

#endif /* DV_BASE_PROC_H */
