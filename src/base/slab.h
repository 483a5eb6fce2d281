/*
 * Host memory for bookkeeping slabs, 64-byte aligned.  From DV_SLAB_HUGE
 * bytes up it is mapped 2 MiB-aligned and advised for transparent huge
 * pages: with a hundred thousand live blocks the slabs span tens of
 * megabytes, and over 4 KiB pages most random accesses would miss the TLB
 * as well as the cache.  Callers grow slabs geometrically, up to a huge
 * page, so a small pool never maps one.  NULL: out of memory.  Free with
 * the same size.
 */
#ifndef DV_BASE_SLAB_H
#define DV_BASE_SLAB_H

#include <stddef.h>

#define DV_SLAB_HUGE ((size_t)2 << 20)
void *dv__slab_alloc(size_t bytes);
void dv__slab_free(void *p, size_t bytes);

#endif /* DV_BASE_SLAB_H */
