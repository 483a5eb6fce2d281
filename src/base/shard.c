/*
 * Thread shards (shard.h).
 */
#include <limits.h>
#include <stdatomic.h>

#include "base/shard.h"

unsigned dv__thread_shard(void)
{
    static atomic_uint next_shard;
    static _Thread_local unsigned shard = UINT_MAX;
    if (shard == UINT_MAX)
        shard = atomic_fetch_add_explicit(&next_shard, 1, memory_order_relaxed) % DV_THREAD_SHARDS;
    return shard;
}
