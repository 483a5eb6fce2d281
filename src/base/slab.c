/*
 * Bookkeeping slabs (slab.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "base/slab.h"

void *dv__slab_alloc(size_t bytes)
{
    if (bytes < DV_SLAB_HUGE)
        return aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    /* Map one huge page more than asked, keep the aligned part. */
    size_t size = (bytes + DV_SLAB_HUGE - 1) & ~(DV_SLAB_HUGE - 1);
    uint8_t *raw =
        mmap(NULL, size + DV_SLAB_HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    uint8_t *start =
        (uint8_t *)(((uintptr_t)raw + DV_SLAB_HUGE - 1) & ~(uintptr_t)(DV_SLAB_HUGE - 1));
    size_t head = (size_t)(start - raw);
    if (head != 0)
        munmap(raw, head);
    if (head != DV_SLAB_HUGE)
        munmap(start + size, DV_SLAB_HUGE - head);
#ifdef MADV_HUGEPAGE
    (void)madvise(start, size, MADV_HUGEPAGE); /* a hint: refused is fine */
#endif
    return start;
}

void dv__slab_free(void *p, size_t bytes)
{
    if (p == NULL)
        return;
    if (bytes < DV_SLAB_HUGE)
        free(p);
    else
        munmap(p, (bytes + DV_SLAB_HUGE - 1) & ~(DV_SLAB_HUGE - 1));
}
