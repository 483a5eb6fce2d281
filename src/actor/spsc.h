/*
 * A client's ring: single producer (the client's thread), single consumer
 * (the actor), messages by value in fixed slots.
 *
 * In the shape of Concurrency Kit's SPSC ring, with one change that
 * matters at millions of messages a second: ck_ring's enqueue reads the
 * consumer's index and its dequeue the producer's on every call, so a busy
 * pair moves both index lines between their cores once per message.  Here
 * the producer keeps a copy of the consumer's index and reads the real one
 * only when the ring looks full, and the consumer reads the producer's
 * index once per look and publishes its own once per batch taken
 * (Lamport's queue with cached indices, as in folly's
 * ProducerConsumerQueue).  The producer
 * also asks for the next slot's line ahead of time (a prefetch for
 * writing): the consumer read it last, and the store into it would wait
 * for the line otherwise.
 *
 * Indices count messages and wrap at 2^32; the ring holds exactly
 * `limit` messages in a power-of-two array of slots.  The producer writes
 * a slot, then publishes `tail` with a release store; the consumer reads
 * `tail` with an acquire load before it reads slots, and releases them by
 * a release store of `head` after it copied them out (pairing with the
 * producer's acquire load when it refreshes its copy).
 */
#ifndef DV_ACTOR_SPSC_H
#define DV_ACTOR_SPSC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "actor/msg.h"

/* Slots ahead of the tail whose line a commit asks for. */
#define DV_SPSC_AHEAD 4

static inline void dv__spsc_prefetch_write(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p, 1, 3);
#endif
}

typedef struct dv_spsc {
    /* The consumer's line. */
    _Alignas(64) _Atomic uint32_t head; /* next to read; written by the consumer */
    /* The producer's line. */
    _Alignas(64) _Atomic uint32_t tail; /* next to write; written by the producer */
    uint32_t head_seen;                 /* the producer's copy of head */
    uint32_t mask;                      /* slots - 1 */
    uint32_t limit;                     /* messages it holds at most */
    dv_msg *slots;
} dv_spsc;

/* limit >= 1; slots: a power of two >= limit, 64-byte aligned. */
static inline void dv__spsc_init(dv_spsc *r, dv_msg *slots, uint32_t nslots, uint32_t limit)
{
    atomic_init(&r->head, 0);
    atomic_init(&r->tail, 0);
    r->head_seen = 0;
    r->mask = nslots - 1;
    r->limit = limit;
    r->slots = slots;
}

/* Producer: the slot for the next message, or NULL when the ring is full. */
static inline dv_msg *dv__spsc_reserve(dv_spsc *r)
{
    /* Relaxed: only the producer writes tail. */
    uint32_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    if (t - r->head_seen >= r->limit) {
        /* Acquire: pairs with the consumer's release of head; the slots
         * it freed are read out by now. */
        r->head_seen = atomic_load_explicit(&r->head, memory_order_acquire);
        if (t - r->head_seen >= r->limit)
            return NULL;
    }
    return &r->slots[t & r->mask];
}

/* Producer: publish the reserved slot. */
static inline void dv__spsc_commit(dv_spsc *r)
{
    uint32_t t = atomic_load_explicit(&r->tail, memory_order_relaxed) + 1;
    /* Release: pairs with the consumer's acquire load of tail; the slot's
     * bytes are written before. */
    atomic_store_explicit(&r->tail, t, memory_order_release);
    /* Ask for a slot's line a few posts ahead, for writing, while nothing
     * waits on it (PREFETCHW: a plain prefetch would fetch it shared, and
     * the store would still wait to own it). */
    dv__spsc_prefetch_write(&r->slots[(t + DV_SPSC_AHEAD) & r->mask]);
}

/* Consumer: every message published so far (one read of tail: the
 * inbox's order needs what a ring holds at the moment it is looked at). */
static inline uint32_t dv__spsc_ready(dv_spsc *r)
{
    /* Acquire: pairs with the producer's release of tail. */
    uint32_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
    return t - atomic_load_explicit(&r->head, memory_order_relaxed);
}

/* Consumer: the i-th ready message (i < dv__spsc_ready). */
static inline const dv_msg *dv__spsc_peek(const dv_spsc *r, uint32_t i)
{
    return &r->slots[(atomic_load_explicit(&r->head, memory_order_relaxed) + i) & r->mask];
}

/* Consumer: the first n ready messages were copied out; free their slots. */
static inline void dv__spsc_release(dv_spsc *r, uint32_t n)
{
    uint32_t h = atomic_load_explicit(&r->head, memory_order_relaxed) + n;
    /* Release: pairs with the producer's acquire load of head. */
    atomic_store_explicit(&r->head, h, memory_order_release);
}

/* Any thread: is it empty right now (a hint for parking)? */
static inline bool dv__spsc_empty(dv_spsc *r)
{
    return atomic_load_explicit(&r->tail, memory_order_acquire) ==
           atomic_load_explicit(&r->head, memory_order_acquire);
}

#endif /* DV_ACTOR_SPSC_H */
