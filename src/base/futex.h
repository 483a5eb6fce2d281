/*
 * Sleeping on a 32-bit word (Linux futexes, process-private): the waits
 * behind futures, pending handles and the actor's park.  A wait returns
 * when the word no longer holds `expected`, on a wake, on a signal or at
 * the deadline; callers re-check their condition in a loop.
 */
#ifndef DV_BASE_FUTEX_H
#define DV_BASE_FUTEX_H

#include <limits.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Sleep while *addr == expected, at most until the absolute
 * CLOCK_MONOTONIC deadline (NULL: no deadline). */
static inline void dv__futex_wait(const void *addr, uint32_t expected,
                                  const struct timespec *deadline)
{
    syscall(SYS_futex, addr, FUTEX_WAIT_BITSET_PRIVATE, expected, deadline, NULL,
            FUTEX_BITSET_MATCH_ANY);
}

static inline void dv__futex_wake_all(const void *addr)
{
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Now on CLOCK_MONOTONIC, in nanoseconds. */
static inline uint64_t dv__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline struct timespec dv__timespec_of(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    return ts;
}

#endif /* DV_BASE_FUTEX_H */
