/*
 * Futures: the caller owns the memory; the actor completes it once.
 * Waiting spins briefly (a reply often comes within a microsecond), then
 * sleeps on the state word with a futex.
 */
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
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

/* A few actors' epochs per thread; an actor pushed out is forgotten (its
 * host accesses then look unordered: reported, never missed). */
#define ORDER_SLOTS 8
static _Thread_local uint64_t order_known[ORDER_SLOTS];

void dv__order_note(uint64_t order)
{
    if (order == 0)
        return;
    uint64_t tag = order >> DV_ORDER_EPOCH_BITS;
    uint64_t *slot = &order_known[tag % ORDER_SLOTS];
    if (*slot >> DV_ORDER_EPOCH_BITS != tag || *slot < order)
        *slot = order;
}

uint64_t dv__order_known(uint16_t tag)
{
    uint64_t v = order_known[tag % ORDER_SLOTS];
    return v >> DV_ORDER_EPOCH_BITS == tag ? v & ((UINT64_C(1) << DV_ORDER_EPOCH_BITS) - 1) : 0;
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
