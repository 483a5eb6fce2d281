/*
 * Counters that many client threads move (posters in flight, releasers
 * posting a free) are split into DV_THREAD_SHARDS, one cache line each;
 * threads take the shards in turn.  Readers that must see zero wait on
 * every shard.
 */
#ifndef DV_BASE_SHARD_H
#define DV_BASE_SHARD_H

#define DV_THREAD_SHARDS 16

/* The calling thread's shard, 0 .. DV_THREAD_SHARDS-1, fixed for its life. */
unsigned dv__thread_shard(void);

#endif /* DV_BASE_SHARD_H */
