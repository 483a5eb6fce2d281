/*
 * The library's side of the ABI rule in devactor.h: structs that carry or
 * are read with the caller's size.
 *
 * DV_ABI_*_MIN are the first layouts (0.2.0), the smallest sizes accepted;
 * they never change.  A size between the minimum and the library's own
 * sizeof is an older caller: only its bytes are read or written, the rest
 * of the library's fields take their defaults.  A larger size is a newer
 * caller: accepted where the bytes past the library's own are zero (it
 * asked for nothing this library does not know).
 */
#ifndef DV_BASE_ABI_H
#define DV_BASE_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define DV_ABI_FUTURE_MIN    416u
#define DV_ABI_CONFIG_MIN    136u
#define DV_ABI_STATS_MIN     216u
#define DV_ABI_HEALTH_MIN    384u
#define DV_ABI_FFT_STATS_MIN 48u
/* 0.2.0, later than the first layouts above. */
#define DV_ABI_MEMORY_STATS_MIN 144u
#define DV_ABI_POOL_STATS_MIN   48u

/* No struct of the rule will ever be larger: a bigger "size" is memory
 * that was never set up (and so is one that is not a multiple of 8, the
 * alignment of every such struct). */
#define DV_ABI_SIZE_MAX 4096u

/* A caller's size: at least the first layout, a multiple of 8, and not
 * past DV_ABI_SIZE_MAX. */
static inline bool dv__abi_size_ok(size_t size, size_t min)
{
    return size >= min && size <= DV_ABI_SIZE_MAX && size % 8 == 0;
}

/* Are the caller's bytes past the library's own (have of size) all zero:
 * does a newer caller ask for nothing this library does not know? */
static inline bool dv__abi_tail_zero(const void *caller, size_t have, size_t size)
{
    const unsigned char *p = caller;
    for (size_t i = have; i < size; i++)
        if (p[i] != 0)
            return false;
    return true;
}

/* An input struct of the caller's size: copy what the caller has over
 * the library's defaults in *full (have bytes).  False where bytes past
 * the library's own are not zero. */
static inline bool dv__abi_copy_in(void *full, size_t have, const void *caller, size_t size)
{
    if (!dv__abi_tail_zero(caller, have, size))
        return false;
    memcpy(full, caller, size < have ? size : have);
    return true;
}

/* An output struct: the library's full value, then zero up to size. */
static inline void dv__abi_copy_out(void *caller, size_t size, const void *full, size_t have)
{
    memcpy(caller, full, size < have ? size : have);
    if (size > have)
        memset((unsigned char *)caller + have, 0, size - have);
}

#endif
