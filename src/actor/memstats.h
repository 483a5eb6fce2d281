/*
 * The actor's memory statistics: current, peak and total of the bytes and
 * blocks of live handles, for the actor and per tag and per query, and
 * the device memory its resource stack reserved.  Actor thread only: it
 * counts as it settles and frees handles, and answers readers through
 * messages (dv_memory_stats_get, dv_memory_usage_get).
 *
 * Tags are interned (base/intern.h: at most DV_INTERN_MAX names, then
 * "other"), so the tag table stays small.  Query ids are not bounded: a
 * query executor runs one after another for the life of the process.  A
 * query whose last block was freed is kept (its peak and total are what
 * its user asks for afterwards) among the most recent DV_QUERIES_KEPT
 * finished ones; older finished queries are forgotten.
 */
#ifndef DV_ACTOR_MEMSTATS_H
#define DV_ACTOR_MEMSTATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devactor.h"

#define DV_QUERIES_KEPT 4096u

typedef struct dv_memrow {
    const char *tag; /* by tag: the interned name (the key) */
    uint64_t query;  /* by query: the id (the key) */
    dv_memory_counter bytes, blocks;
    uint64_t finished; /* the finish sequence at its last block freed; 0: live */
    bool used;
} dv_memrow;

typedef struct dv_memtable {
    dv_memrow *rows;
    uint32_t n, cap; /* cap: a power of two, or 0 */
    /* The last row found: a thread allocating under one tag and query
     * finds it again without hashing.  NULL after the rows moved. */
    dv_memrow *last;
} dv_memtable;

typedef struct dv_memstats {
    dv_memory_counter bytes, blocks, reserved;
    uint64_t failures;
    dv_memtable tags, queries;
    uint64_t finish_seq;    /* queries finished so far */
    uint32_t finished_kept; /* finished queries in the table */
} dv_memstats;

void dv__memstats_init(dv_memstats *ms);
void dv__memstats_free(dv_memstats *ms);
/* A handle's block settled (bytes: as requested) or freed. */
void dv__memstats_alloc(dv_memstats *ms, const char *tag, uint64_t query, uint64_t bytes);
void dv__memstats_release(dv_memstats *ms, const char *tag, uint64_t query, uint64_t bytes);
/* The stack's bytes reserved from the device now (sampled after allocs). */
void dv__memstats_reserved(dv_memstats *ms, uint64_t now);
/* Every peak becomes its current value. */
void dv__memstats_reset_peaks(dv_memstats *ms);
/* A rebuild dropped every block: the current values are 0. */
void dv__memstats_restart(dv_memstats *ms);
/* Up to cap rows of one breakdown, most current bytes first (then the
 * highest peak); *count: how many there are.  DV_ENOMEM.  by is one of
 * the two keys (dv_memory_usage_get refuses others before posting). */
int dv__memstats_rows(const dv_memstats *ms, dv_memory_key by, dv_memory_usage *out, size_t cap,
                      size_t *count);
size_t dv__memstats_count(const dv_memstats *ms, dv_memory_key by);

#endif
