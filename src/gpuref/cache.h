/*
 * A thread's reserved handle slots of one domain (gpuref.h): what a client
 * mints from without a lock.  Apart from gpuref.h so that the inbox, which
 * keeps one per client, needs nothing of the layers below.
 */
#ifndef DV_GPUREF_CACHE_H
#define DV_GPUREF_CACHE_H

#include <stdint.h>

/* Slots a thread keeps reserved per actor, and takes at a time. */
#define DV_REF_CACHE      64u
#define DV_REF_CACHE_FILL 32u

typedef struct dv_ref_cache {
    uint32_t n;
    uint32_t idx[DV_REF_CACHE];
} dv_ref_cache;

#endif /* DV_GPUREF_CACHE_H */
