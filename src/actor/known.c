/*
 * Per-thread knowledge of finished work (known.h).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "actor/actor.h"
#include "actor/known.h"

#define PRUNE_AT 32 /* tables on a thread before those of gone actors are dropped */

static pthread_mutex_t recycle_mu = PTHREAD_MUTEX_INITIALIZER;
static dv_known *recycled;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static _Thread_local struct {
    dv_known **items;
    uint32_t n, cap;
} mine;

static void recycle(dv_known *k)
{
    pthread_mutex_lock(&recycle_mu);
    k->next_free = recycled;
    recycled = k;
    pthread_mutex_unlock(&recycle_mu);
}

static void thread_exit(void *unused)
{
    (void)unused;
    for (uint32_t i = 0; i < mine.n; i++)
        recycle(mine.items[i]);
    free(mine.items);
    mine.items = NULL;
    mine.n = mine.cap = 0;
}

static void exit_key_init(void)
{
    (void)pthread_key_create(&exit_key, thread_exit);
}

/* Drop the tables of actors that are gone: no actor reads them any more
 * (its inbox, and with it every message naming them, went first). */
static void prune(void)
{
    uint32_t keep = 0;
    for (uint32_t i = 0; i < mine.n; i++) {
        if (dv__actor_uid_live(mine.items[i]->uid))
            mine.items[keep++] = mine.items[i];
        else
            recycle(mine.items[i]);
    }
    mine.n = keep;
}

dv_known *dv__known_of(uint64_t uid)
{
    for (uint32_t i = 0; i < mine.n; i++)
        if (mine.items[i]->uid == uid)
            return mine.items[i];
    if (mine.n >= PRUNE_AT)
        prune();
    if (mine.n == mine.cap) {
        uint32_t cap = mine.cap ? mine.cap * 2 : 8;
        dv_known **n = realloc(mine.items, cap * sizeof(*n));
        if (n == NULL)
            return NULL;
        mine.items = n;
        mine.cap = cap;
    }
    pthread_once(&exit_once, exit_key_init);
    pthread_mutex_lock(&recycle_mu);
    dv_known *k = recycled;
    if (k != NULL)
        recycled = k->next_free;
    pthread_mutex_unlock(&recycle_mu);
    if (k == NULL && (k = malloc(sizeof(*k))) == NULL)
        return NULL;
    k->uid = uid;
    k->next_free = NULL;
    /* Relaxed: the table reaches the actor through a post (a release). */
    atomic_store_explicit(&k->context, 0, memory_order_relaxed);
    for (uint32_t s = 0; s < DV_KNOWN_STREAMS; s++)
        atomic_store_explicit(&k->seq[s], 0, memory_order_relaxed);
    mine.items[mine.n++] = k;
    (void)pthread_setspecific(exit_key, &mine); /* any non-NULL value: run thread_exit */
    return k;
}

void dv__known_note(uint64_t uid, uint64_t context, uint32_t stream, uint64_t seq)
{
    if (uid == 0 || stream >= DV_KNOWN_STREAMS)
        return;
    dv_known *k = dv__known_of(uid);
    if (k == NULL)
        return;
    /* Relaxed throughout: the actor reads the table for a message this
     * thread posts later, and the post's release orders these stores. */
    uint64_t have = atomic_load_explicit(&k->context, memory_order_relaxed);
    if (context < have)
        return; /* knowledge of an older context: worthless now */
    if (context > have) {
        for (uint32_t s = 0; s < DV_KNOWN_STREAMS; s++)
            atomic_store_explicit(&k->seq[s], 0, memory_order_relaxed);
        atomic_store_explicit(&k->context, context, memory_order_relaxed);
    }
    if (atomic_load_explicit(&k->seq[stream], memory_order_relaxed) < seq)
        atomic_store_explicit(&k->seq[stream], seq, memory_order_relaxed);
}
