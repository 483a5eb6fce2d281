/*
 * Staged copies: a copy between a block and pageable host memory that
 * never keeps the actor busy for its length.
 *
 * Design
 * ------
 * The real driver makes a copy with pageable memory synchronous for the
 * thread that enqueues it, and that thread is the actor.  So devactor
 * moves the bytes itself, through page-locked chunks of a staging region
 * (host.h), on the thread that asked for the copy (a blocking call) or on
 * one of the actor's copy threads (an _async call); the actor only
 * enqueues the device's side.
 *
 * A copy of n bytes is cut into sub-copies of one chunk each (a copy of
 * fewer than 2 * DV_STAGE_K chunks into smaller ones, at least 2 MiB, so
 * that several threads move it) and holds k chunks (k <= DV_STAGE_K),
 * used in turn.  Every chunk has two 32-bit
 * words in page-locked memory, each on a line of its own:
 *   dev   written by the device (a stream memory write) once a sub-copy's
 *         DMA with the chunk is done;
 *   host  written by the host once it filled the chunk (to the device) or
 *         emptied it (from the device).
 * Values are generations: the chunk's uses are numbered, a word holds the
 * latest one, and "reached" is the cyclic compare (int32_t)(w - g) >= 0.
 *
 * The whole copy is one message, so it is one operation on its stream,
 * ordered against every other like any copy.  The actor enqueues all of
 * its steps at once, two driver calls per sub-copy i (chunk c = i % k,
 * generation g(i)): the transfer, then one batch of stream memory
 * operations (cuStreamBatchMemOp) with the word that says it is done and
 * the wait before the next transfer:
 *
 *   to the device      [wait host[c] >= g(i)]    (filled; not for the
 *                                                 steps filled by the post)
 *                      DMA chunk c -> block
 *                      write dev[c] = g(i)
 *   from the device    [wait host[c] >= g(i - k)] (emptied, when i >= k)
 *                      DMA block -> chunk c
 *                      write dev[c] = g(i)
 *                      ... and at the end a wait for every chunk's last
 *                      host word, so that what follows on the stream
 *                      (its completion, an event, a sync) comes after the
 *                      host has the data.
 *
 * The host side (the pump) fills chunk c for sub-copy i once dev[c] says
 * the DMA of sub-copy i - k is done, or empties it once dev[c] says the
 * DMA of sub-copy i is.  Any thread may do a step: a sub-copy is claimed
 * with an atomic counter, so the thread that asked for the copy and idle
 * copy threads fill or empty different chunks at once (one thread's
 * memcpy is slower than the link).  Steps of one chunk never overlap:
 * step i + k starts only once the device is done with step i, which it
 * is only after step i's word.  A copy to the device is posted once its
 * first step is filled, the next being filled meanwhile.  The stream
 * waits only on host words that a pump is sure to write (each depends on
 * earlier work of the same stream), and a pump never waits for the
 * actor, so nothing can wait in a circle; a copy thread serves all its
 * copies in turn and never waits on one.
 *
 * The caller's buffer is touched only while the copy is under way, so
 * the actor answers the caller's future itself, like any copy's, and a
 * caller told that its copy failed can free the buffer at once:
 *   - before the post the poster (and copy threads) fill steps; at the
 *     post a gate closes and the poster waits for the steps under way, so
 *     from then on a step starts only once the actor enqueued the copy;
 *   - refused (nothing, or only part, enqueued), the copy's steps never
 *     start again: its future is answered at once;
 *   - done, the device is past every fill (to the device) or past the
 *     waits for every emptying (from the device): the host is done too;
 *     so the actor asks the device nothing about the copy's stream until
 *     a pump says the host's part is over (it then kicks the actor);
 *   - its context gone (a fault, LOST, shutdown), the actor stops every
 *     copy it had enqueued and waits for the steps under way (at most one
 *     chunk's memcpy each) before it answers the futures.
 *
 * Chunks come from a FIFO under a mutex; a copy takes one (waiting when
 * there is none: the poster waits, never the actor) and then as many
 * more as it can have at once.  A chunk comes back when its copy's pump
 * is done; the next taker waits until its last DMA (dev) and fill or
 * drain (host) are reached -- or until the context that was to reach
 * them is gone (abort_gen moved: the rebuild, LOST, shutdown), when the
 * words are written by the host instead.
 */
#ifndef DV_ACTOR_STAGING_H
#define DV_ACTOR_STAGING_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "devactor.h"

#define DV_STAGE_K 4 /* chunks one copy holds at most */

struct dv_actor;
struct dv_envelope;
struct dv_staging;
struct dv_host_region;

typedef struct dv_stage_chunk {
    unsigned char *mem;
    uint32_t *dev_word, *host_word;   /* host addresses (atomics) */
    uint64_t dev_word_d, host_word_d; /* their device addresses (the actor's) */
    /* The holder's. */
    uint32_t gen;                /* the last generation given out */
    uint32_t need_dev, need_host; /* reached: the chunk is idle */
    uint32_t need_gen;           /* staging's abort_gen when they were set */
    uint16_t stream;             /* of its last copy (mu) */
    bool held;                   /* by a copy under way (mu) */
    struct dv_stage_chunk *next; /* on the free FIFO */
} dv_stage_chunk;

enum dv_stage_state { DV_STAGE_POSTED = 0, DV_STAGE_ENQUEUED, DV_STAGE_REFUSED };

typedef struct dv_stage_job {
    struct dv_staging *st;
    uint8_t dir; /* DV_MSG_HTOD or DV_MSG_DTOH */
    uint16_t stream;
    uint64_t seq; /* in the order the copies were begun (staging's mu) */
    /* To the device: a copy from the device into an overlapping range of
     * the buffer, on the same stream, begun before and not yet landed;
     * no step is filled until it landed (pump). */
    _Atomic bool after_dtoh;
    unsigned char *host;
    uint64_t bytes, sub; /* sub: a sub-copy's length (the last one's may be less) */
    uint32_t nsub, k, prefilled;
    /* The host's side: any thread may do a step (its owner, a copy thread
     * helping), one at a time per sub-copy (claim), several at once. */
    _Atomic uint32_t claim;   /* the next sub-copy to do */
    _Atomic uint32_t done;    /* steps done */
    _Atomic uint32_t active;  /* threads in a step */
    _Atomic bool stop;        /* finishing, or the context gone: no more steps */
    _Atomic bool gate;        /* posted: steps wait until the actor enqueued them */
    _Atomic bool finishing;   /* one thread finishes */
    _Atomic bool pumped;      /* done with the caller's buffer and the chunks */
    uint32_t helpers;         /* copy threads helping now (staging's mu) */
    bool helped;              /* on the staging's list of copies to help (mu) */
    struct dv_stage_job *help_prev, *help_next;
    struct dv_stage_job *live_prev, *live_next; /* every copy under way (mu) */
    dv_stage_chunk *chunk[DV_STAGE_K];
    uint32_t g0[DV_STAGE_K]; /* each chunk's generation before this copy */
    /* The actor's, published by state (release). */
    _Atomic int state;
    uint32_t started, written; /* sub-copies with any step / with their write enqueued */
    uint32_t abort_gen;        /* staging's when the actor took the copy */
    struct dv_stage_job *next; /* a copy thread's list */
} dv_stage_job;

typedef struct dv_stage_worker {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    dv_stage_job *incoming;
    bool stop;
    _Atomic uint32_t njobs;
    struct dv_staging *st;
} dv_stage_worker;

typedef struct dv_staging {
    struct dv_actor *a;
    struct dv_host_region *region;
    uint64_t chunk_bytes;
    uint32_t nchunks;
    dv_stage_chunk *chunks;
    pthread_mutex_t mu; /* the FIFO, the workers' start */
    pthread_cond_t cv;
    dv_stage_chunk *head, *tail;
    _Atomic uint32_t abort_gen;
    dv_stage_worker *workers;
    uint32_t nworkers;
    _Atomic uint32_t next_worker;
    dv_stage_job *help; /* copies of more than one chunk, to help (mu) */
    dv_stage_job *live; /* every copy under way (mu) */
    uint64_t seq;       /* the last copy begun (mu) */
} dv_staging;

enum { DV_STAGING_NONE = 0, DV_STAGING_READY, DV_STAGING_FAILED };

/* Client side (client.c): a copy with pageable memory, staged, or
 * DV_ENOTSUP where staging is unavailable (the caller copies directly). */
int dv__staged_copy(struct dv_actor *a, uint8_t dir, dv_ref ref, uint64_t off, void *host,
                    uint64_t bytes, dv_stream stream, dv_future *f);

/* Actor thread. */
/* Does a staged copy whose host side is not over yet reach into
 * [p, p + bytes)?  (Page-locked memory it runs into is not handed out
 * again or unregistered before: host.c.) */
bool dv__staging_reaches(struct dv_actor *a, const void *p, uint64_t bytes);
void dv__handle_staged(struct dv_actor *a, const struct dv_envelope *e);
void dv__handle_staging_open(struct dv_actor *a, const struct dv_envelope *e);
/* The actor answers the copy's message without enqueuing what was not
 * enqueued yet (job->started, job->written say what was): before its
 * future is completed. */
void dv__staged_refuse(dv_stage_job *j);
/* The context's work is gone (rebuild, LOST, stop): pumps stop waiting
 * for the device and write its words themselves. */
void dv__staging_abort(struct dv_actor *a);
/* After the regions were pinned in a new context: the words' device
 * addresses, or the staging is off where its region is not pinned (only
 * a fault of the context is an error). */
int dv__staging_repin(struct dv_actor *a);

/* The actor's stop and destroy (its caller's thread, after the actor's
 * thread ended): join the copy threads; free the staging. */
void dv__staging_stop(struct dv_actor *a);
void dv__staging_free(struct dv_actor *a);

#endif /* DV_ACTOR_STAGING_H */
