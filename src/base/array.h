/*
 * Growable arrays: one helper instead of a doubling loop at every site.
 *
 *     if (dv__array_reserve((void **)&v->items, &v->cap, v->n + 1, sizeof(*v->items)) != 0)
 *         return out_of_memory;
 *     v->items[v->n++] = x;
 *
 * The array grows to at least `need` elements, doubling from `first`
 * (16), and keeps its contents; on failure it is left as it was.
 */
#ifndef DV_BASE_ARRAY_H
#define DV_BASE_ARRAY_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

static inline int dv__array_reserve(void **items, uint32_t *cap, uint64_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    uint64_t n = *cap ? *cap : 16;
    while (n < need)
        n *= 2;
    if (n > UINT32_MAX || n > SIZE_MAX / elem)
        return -1;
    void *p = realloc(*items, (size_t)n * elem);
    if (p == NULL)
        return -1;
    *items = p;
    *cap = (uint32_t)n;
    return 0;
}

#endif /* DV_BASE_ARRAY_H */
