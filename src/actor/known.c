/*
 * What client threads know happened on actors' streams (known.h).
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

/* Drop the tables of actors that are gone. */
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
    memset(k, 0, sizeof(*k));
    k->uid = uid;
    mine.items[mine.n++] = k;
    (void)pthread_setspecific(exit_key, &mine); /* any non-NULL value: run thread_exit */
    return k;
}

/* k, brought to context `context`; NULL when that context is older than
 * what k holds (such knowledge is worthless now). */
static dv_known *in_context(uint64_t uid, uint64_t context)
{
    dv_known *k = dv__known_of(uid);
    if (k == NULL || context < k->context)
        return NULL;
    if (context > k->context) {
        memset(k->vc, 0, sizeof(k->vc));
        k->context = context;
        k->dirty = true;
    }
    return k;
}

void dv__known_absorb(uint64_t uid, uint64_t context, const uint64_t *vc, uint32_t n)
{
    dv_known *k = uid != 0 ? in_context(uid, context) : NULL;
    if (k == NULL)
        return;
    for (uint32_t s = 0; s < n && s < DV_KNOWN_STREAMS; s++) {
        if (vc[s] > k->vc[s]) {
            k->vc[s] = vc[s];
            k->dirty = true;
        }
    }
}

/* ------------------------------------------------------------------------
 * Published points: a seqlocked table, made once, never freed
 * ------------------------------------------------------------------------ */

typedef struct point {
    _Atomic uint64_t lock; /* odd while being written */
    _Atomic uint64_t uid, context, key;
    _Atomic uint32_t n;
    _Atomic uint64_t vc[DV_KNOWN_STREAMS];
} point;

static _Atomic(point *) points;

static point *points_table(bool make)
{
    point *t = atomic_load_explicit(&points, memory_order_acquire);
    if (t != NULL || !make)
        return t;
    point *n = calloc(DV_KNOWN_POINTS, sizeof(*n));
    if (n == NULL)
        return NULL;
    if (!atomic_compare_exchange_strong_explicit(&points, &t, n, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        free(n);
        return t;
    }
    return n;
}

static inline uint64_t key_of(uint32_t stream, uint64_t seq)
{
    return (uint64_t)stream << 48 | (seq & ((UINT64_C(1) << 48) - 1));
}

static point *slot_of(point *t, uint64_t uid, uint64_t context, uint64_t key)
{
    /* The stream sits in the key's top bits: a product alone would leave
     * them out of the low bits that pick the slot (every stream's point of
     * one number would share a slot), so the whole word is mixed down
     * (splitmix64's finalizer). */
    uint64_t h = uid * UINT64_C(0x9E3779B97F4A7C15) ^ context * UINT64_C(0xC2B2AE3D27D4EB4F) ^ key;
    h ^= h >> 30;
    h *= UINT64_C(0xBF58476D1CE4E5B9);
    h ^= h >> 27;
    h *= UINT64_C(0x94D049BB133111EB);
    h ^= h >> 31;
    return &t[h % DV_KNOWN_POINTS];
}

void dv__known_publish(uint64_t uid, uint64_t context, uint32_t stream, uint64_t seq,
                       const uint64_t *vc, uint32_t n)
{
    point *t = points_table(true);
    if (t == NULL || n > DV_KNOWN_STREAMS)
        return; /* out of memory: waiters learn the point alone */
    uint64_t key = key_of(stream, seq);
    point *p = slot_of(t, uid, context, key);
    uint64_t l = atomic_load_explicit(&p->lock, memory_order_relaxed);
    /* Another actor writing the same slot right now: leave it to it. */
    if ((l & 1) || !atomic_compare_exchange_strong_explicit(
                       &p->lock, &l, l + 1, memory_order_relaxed, memory_order_relaxed))
        return;
    atomic_thread_fence(memory_order_release); /* the odd word before the data */
    atomic_store_explicit(&p->uid, uid, memory_order_relaxed);
    atomic_store_explicit(&p->context, context, memory_order_relaxed);
    atomic_store_explicit(&p->key, key, memory_order_relaxed);
    atomic_store_explicit(&p->n, n, memory_order_relaxed);
    for (uint32_t s = 0; s < n; s++)
        atomic_store_explicit(&p->vc[s], vc[s], memory_order_relaxed);
    atomic_store_explicit(&p->lock, l + 2, memory_order_release);
}

/* The published clock of (uid, context, key) into vc; its length, or 0. */
static uint32_t lookup(uint64_t uid, uint64_t context, uint64_t key, uint64_t *vc)
{
    point *t = points_table(false);
    if (t == NULL)
        return 0;
    point *p = slot_of(t, uid, context, key);
    uint64_t l1 = atomic_load_explicit(&p->lock, memory_order_acquire);
    if (l1 & 1)
        return 0;
    bool same = atomic_load_explicit(&p->uid, memory_order_relaxed) == uid &&
                atomic_load_explicit(&p->context, memory_order_relaxed) == context &&
                atomic_load_explicit(&p->key, memory_order_relaxed) == key;
    uint32_t n = atomic_load_explicit(&p->n, memory_order_relaxed);
    if (!same || n > DV_KNOWN_STREAMS)
        return 0;
    for (uint32_t s = 0; s < n; s++)
        vc[s] = atomic_load_explicit(&p->vc[s], memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire); /* the data before the second look */
    return atomic_load_explicit(&p->lock, memory_order_relaxed) == l1 ? n : 0;
}

void dv__known_note(uint64_t uid, uint64_t context, uint32_t stream, uint64_t seq)
{
    if (uid == 0 || stream >= DV_KNOWN_STREAMS || seq == 0)
        return;
    uint64_t vc[DV_KNOWN_STREAMS];
    uint32_t n = lookup(uid, context, key_of(stream, seq), vc);
    if (n == 0 || stream >= n || vc[stream] < seq) {
        /* Taken by later points: the operation's own component only. */
        memset(vc, 0, sizeof(vc));
        vc[stream] = seq;
        n = stream + 1;
    }
    dv__known_absorb(uid, context, vc, n);
}

/* ------------------------------------------------------------------------
 * Snapshot lists
 * ------------------------------------------------------------------------ */

int dv__know_list_init(dv_know_list *l)
{
    dv_know_node *stub = calloc(1, sizeof(*stub));
    if (stub == NULL)
        return DV_ENOMEM;
    atomic_init(&stub->next, NULL);
    l->head = l->tail = stub;
    return DV_OK;
}

void dv__know_send(dv_know_list *l, dv_known *k, uint32_t seq)
{
    if (k == NULL || !k->dirty || l->tail == NULL)
        return;
    dv_know_node *n = malloc(sizeof(*n));
    if (n == NULL)
        return; /* stays dirty: the next post tries again */
    atomic_init(&n->next, NULL);
    n->for_seq = seq;
    n->context = k->context;
    memcpy(n->vc, k->vc, sizeof(n->vc));
    /* Release: the node's contents before the actor can see it. */
    atomic_store_explicit(&l->tail->next, n, memory_order_release);
    l->tail = n;
    k->dirty = false;
}

const dv_know_node *dv__know_at(dv_know_list *l, uint32_t seq)
{
    dv_know_node *h = l->head, *n;
    if (h == NULL)
        return NULL;
    /* Acquire: pairs with dv__know_send's release. */
    while ((n = atomic_load_explicit(&h->next, memory_order_acquire)) != NULL &&
           (int32_t)(n->for_seq - seq) <= 0) {
        free(h);
        h = n;
    }
    l->head = h;
    return h;
}

void dv__know_list_free(dv_know_list *l)
{
    dv_know_node *h = l->head;
    while (h != NULL) {
        dv_know_node *n = atomic_load_explicit(&h->next, memory_order_relaxed);
        free(h);
        h = n;
    }
    l->head = l->tail = NULL;
}
