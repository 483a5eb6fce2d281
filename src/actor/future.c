/*
 * Futures: the caller owns the memory; the actor completes it once.
 * Waiting spins briefly (a reply often comes within a microsecond), then
 * sleeps on the state word with a futex.
 */
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "actor/future.h"
#include "driver/port.h"

#define SPINS  300 /* about 1-3 us of pause */
#define YIELDS 256 /* tens of us: a reply behind other clients comes without a futex wake */

static _Atomic uint32_t *state_of(const dv_future *f)
{
    return (_Atomic uint32_t *)&f->state;
}

void dv_future_init(dv_future *f, uint32_t flags)
{
    memset(f, 0, sizeof(*f));
    f->flags = flags;
    atomic_init(state_of(f), DV_FUTURE_PENDING);
}

/* Each thread knows a few actors; the tables are recycled when threads
 * exit and never freed, so an actor reading one for a message whose
 * poster has exited reads memory that is still there. */
#define ORDER_SLOTS 8
static _Thread_local dv_known *known[ORDER_SLOTS];
static pthread_mutex_t known_mu = PTHREAD_MUTEX_INITIALIZER;
static dv_known *known_free;
static pthread_key_t known_key;
static pthread_once_t known_once = PTHREAD_ONCE_INIT;

static void known_exit(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&known_mu);
    for (int i = 0; i < ORDER_SLOTS; i++) {
        if (known[i] != NULL) {
            known[i]->next_free = known_free;
            known_free = known[i];
            known[i] = NULL;
        }
    }
    pthread_mutex_unlock(&known_mu);
}

static void known_init(void)
{
    (void)pthread_key_create(&known_key, known_exit);
}

static dv_known *known_slot(uint16_t tag)
{
    dv_known *k = known[tag % ORDER_SLOTS];
    if (k != NULL && k->tag == tag)
        return k;
    if (k == NULL) {
        pthread_once(&known_once, known_init);
        pthread_mutex_lock(&known_mu);
        if ((k = known_free) != NULL)
            known_free = k->next_free;
        pthread_mutex_unlock(&known_mu);
        if (k == NULL && (k = calloc(1, sizeof(*k))) == NULL)
            return NULL;
        known[tag % ORDER_SLOTS] = k;
        (void)pthread_setspecific(known_key, k); /* any non-NULL value: run known_exit */
    }
    /* A new actor in this slot: what was known of the old one goes. */
    k->tag = tag;
    for (int i = 0; i < 64; i++)
        atomic_store_explicit(&k->seq[i], 0, memory_order_relaxed);
    return k;
}

void dv__order_note(uint64_t order)
{
    if (order == 0)
        return;
    dv_known *k = known_slot((uint16_t)(order >> DV_ORDER_TAG_SHIFT));
    if (k == NULL)
        return;
    uint32_t s = (uint32_t)(order >> DV_ORDER_STREAM_SHIFT) & 0xff;
    uint64_t seq = order & ((UINT64_C(1) << DV_ORDER_STREAM_SHIFT) - 1);
    if (s < 64 && atomic_load_explicit(&k->seq[s], memory_order_relaxed) < seq)
        atomic_store_explicit(&k->seq[s], seq, memory_order_relaxed);
}

const dv_known *dv__known_of(uint16_t tag)
{
    return known_slot(tag);
}

bool dv_future_done(const dv_future *f)
{
    if (atomic_load_explicit(state_of(f), memory_order_acquire) != DV_FUTURE_DONE)
        return false;
    dv__order_note(f->order);
    return true;
}

static void publish(dv_future *f)
{
    /* Release: pairs with the acquire in dv_future_wait / dv_future_done,
     * which then see status, ref, value and detail. */
    uint32_t prev = atomic_exchange_explicit(state_of(f), DV_FUTURE_DONE, memory_order_acq_rel);
    if (prev == DV_FUTURE_WAITING)
        syscall(SYS_futex, state_of(f), FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void dv__future_complete(dv_future *f, int status)
{
    f->status = status;
    if (status != DV_OK)
        f->detail = *dv_last_error();
    publish(f);
}

void dv__future_complete_detail(dv_future *f, int status, const dv_error_detail *detail)
{
    f->status = status;
    f->detail = *detail;
    publish(f);
}

int dv_future_wait(dv_future *f)
{
    _Atomic uint32_t *st = state_of(f);
    /* Spin for a typical reply, then yield: with more waiting clients than
     * cores, a spinning waiter would take the core the actor needs. */
    for (int i = 0; i < SPINS; i++) {
        if (atomic_load_explicit(st, memory_order_acquire) == DV_FUTURE_DONE)
            goto done;
        __builtin_ia32_pause();
    }
    for (int i = 0; i < YIELDS; i++) {
        if (atomic_load_explicit(st, memory_order_acquire) == DV_FUTURE_DONE)
            goto done;
        sched_yield();
    }
    for (;;) {
        uint32_t expect = DV_FUTURE_PENDING;
        /* Announce the sleeper; the completer's exchange sees WAITING. */
        if (atomic_compare_exchange_strong_explicit(st, &expect, DV_FUTURE_WAITING,
                                                    memory_order_acq_rel, memory_order_acquire) ||
            expect == DV_FUTURE_WAITING) {
            syscall(SYS_futex, st, FUTEX_WAIT_PRIVATE, DV_FUTURE_WAITING, NULL, NULL, 0);
            continue;
        }
        if (expect == DV_FUTURE_DONE)
            break;
    }
done:
    dv__order_note(f->order);
    if (f->status != DV_OK)
        *dv__detail() = f->detail;
    return f->status;
}
