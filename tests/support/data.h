/*
 * Checking device results on the host, shared by the tests.
 */
#ifndef DV_TESTS_DATA_H
#define DV_TESTS_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The checksum kernel's sum (tools/kernels/kernels.cu), on the host. */
static inline uint64_t host_checksum(const uint32_t *p, uint64_t n)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++)
        sum += (((uint64_t)p[i] << 32) | (uint32_t)i) * UINT64_C(0x9E3779B97F4A7C15);
    return sum;
}

/* Every element is v. */
static inline bool all_u32(const uint32_t *p, size_t n, uint32_t v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return false;
    return true;
}

#endif
