/*
 * Futures (design: future.h; contract: devactor.h).  Waiting spins briefly
 * (a reply often comes within a microsecond), yields a while, then sleeps
 * on the state word with a futex.
 */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "actor/future.h"
#include "actor/known.h"
#include "base/abi.h"
#include "base/error.h"
#include "base/futex.h"
#include "base/proc.h"

#define SPINS  300 /* about 1-3 us of pause */
#define YIELDS 256 /* tens of us: a reply behind other clients comes without a futex wake */

static _Atomic uint32_t *state_of(const dv_future *f)
{
    return (_Atomic uint32_t *)&f->state;
}

_Static_assert(sizeof(dv_future) >= DV_ABI_FUTURE_MIN, "dv_future only grows");

void dv_future_init_sized(dv_future *f, uint32_t flags, size_t size)
{
    if (f == NULL || size < sizeof(f->size))
        return;
    if (!dv__abi_size_ok(size, DV_ABI_FUTURE_MIN)) {
        f->size = 0; /* every use answers DV_EINVAL */
        return;
    }
    /* All of the caller's bytes, as a newer library's init would: its
     * fields past this library's read zero, asking for nothing. */
    memset(f, 0, size);
    f->size = (uint32_t)size;
    f->flags = flags;
    atomic_init(state_of(f), 0);
}

static bool future_set_up(const dv_future *f)
{
    return dv__abi_size_ok(f->size, DV_ABI_FUTURE_MIN);
}

static uint32_t fork_bits(void)
{
    return (dv__fork_now() & 0xffu) << DV__FUTURE_FORK_SHIFT;
}

int dv_future_fail(dv_future *f, int status)
{
    if (!dv__is_status(status))
        return dv__fail(DV_EINVAL, "future_fail", "future_fail: %d is not a dv_status", status);
    dv_error_detail saved = *dv_last_error();
    int rc = dv__future_arm(f, "future_fail");
    if (rc != DV_OK)
        return rc;
    *dv__detail() = saved;
    dv__future_complete(f, status);
    *dv__detail() = saved;
    return status;
}

int dv__future_arm(dv_future *f, const char *op)
{
    if (f == NULL)
        return dv__fail(DV_EINVAL, op, "%s: NULL future", op);
    if (!future_set_up(f))
        return dv__fail(DV_EINVAL, op, "%s: the future was not set up with dv_future_init", op);
    /* A newer caller's future with something set past this library's
     * fields asks for what it does not know. */
    if (!dv__abi_tail_zero(f, sizeof(*f), f->size))
        return dv__fail(DV_EINVAL, op,
                        "%s: the future (%u bytes) has bytes set past the %zu this library "
                        "knows",
                        op, f->size, sizeof(*f));
    /* Acquire: a future whose last operation completed is reused only
     * after that completion (pairs with publish's release). */
    if (atomic_load_explicit(state_of(f), memory_order_acquire) & DV__FUTURE_POSTED)
        return dv__fail(DV_EINVAL, op, "%s: the future is still in flight", op);
    f->status = DV_OK;
    f->ref = DV_REF_NULL;
    f->value = 0;
    memset(f->internal, 0, sizeof(f->internal));
    /* Relaxed: the post that carries f to the actor publishes it.  The
     * fork generation goes along: a child never waits on its parent's. */
    atomic_store_explicit(state_of(f), DV__FUTURE_POSTED | fork_bits(), memory_order_relaxed);
    return DV_OK;
}

static void publish(dv_future *f, uint32_t bits, uint32_t clear)
{
    _Atomic uint32_t *st = state_of(f);
    uint32_t old = atomic_load_explicit(st, memory_order_relaxed), next;
    do {
        next = (old | bits) & ~(clear | DV__FUTURE_SLEEPERS);
        /* Release: pairs with the waiters' acquire loads, which then see
         * status, ref, value and detail. */
    } while (!atomic_compare_exchange_weak_explicit(st, &old, next, memory_order_acq_rel,
                                                    memory_order_relaxed));
    if (old & DV__FUTURE_SLEEPERS)
        dv__futex_wake_all(st);
}

void dv__future_ordered(dv_future *f)
{
    publish(f, DV__FUTURE_ORDERED, 0);
}

void dv__future_complete(dv_future *f, int status)
{
    f->status = status;
    if (status != DV_OK)
        f->detail = *dv_last_error();
    publish(f, DV__FUTURE_ORDERED | DV__FUTURE_DONE, DV__FUTURE_POSTED);
}

void dv__future_complete_detail(dv_future *f, int status, const dv_error_detail *detail)
{
    f->status = status;
    f->detail = *detail;
    publish(f, DV__FUTURE_ORDERED | DV__FUTURE_DONE, DV__FUTURE_POSTED);
}

static uint32_t want_of(dv_milestone m)
{
    return m == DV_ORDERED ? DV__FUTURE_ORDERED : DV__FUTURE_DONE;
}

bool dv_future_reached(const dv_future *f, dv_milestone m)
{
    if (f == NULL || !future_set_up(f) || (m != DV_ORDERED && m != DV_COMPLETE))
        return false;
    uint32_t st = atomic_load_explicit(state_of(f), memory_order_acquire);
    if ((st & want_of(m)) == 0)
        return false;
    /* Only a look for completion orders the caller after the operation:
     * that it was done when it was asked whether it was ordered is the
     * run's doing, not the program's. */
    if ((st & DV__FUTURE_DONE) && m == DV_COMPLETE)
        dv__known_note(f->internal[0], f->internal[1], (uint32_t)(f->internal[2] >> 48),
                       f->internal[2] & ((UINT64_C(1) << 48) - 1));
    return true;
}

bool dv_future_done(const dv_future *f)
{
    return dv_future_reached(f, DV_COMPLETE);
}

/* What a wait that reached its milestone answers. */
static int reached(dv_future *f, uint32_t st, dv_milestone m)
{
    if (!(st & DV__FUTURE_DONE))
        return DV_OK;     /* ordered, not complete: no status yet */
    if (m == DV_COMPLETE) /* waiting for ordered orders nothing (dv_future_reached) */
        dv__known_note(f->internal[0], f->internal[1], (uint32_t)(f->internal[2] >> 48),
                       f->internal[2] & ((UINT64_C(1) << 48) - 1));
    if (f->status != DV_OK)
        *dv__detail() = f->detail;
    else if (m == DV_ORDERED)
        return DV_OK;
    return f->status;
}

_Atomic unsigned dv__future_sleepers;

/* Wait for milestone m until deadline_ns (0: none). */
static int wait_until(dv_future *f, dv_milestone m, uint64_t deadline_ns, const char *op)
{
    if (f == NULL || !future_set_up(f))
        return dv__fail(DV_EINVAL, op, "%s: %s", op,
                        f == NULL ? "NULL future"
                                  : "the future was not set up with dv_future_init");
    _Atomic uint32_t *st = state_of(f);
    uint32_t want = want_of(m), s;
    if (!((s = atomic_load_explicit(st, memory_order_acquire)) & (want | DV__FUTURE_POSTED)))
        return dv__fail(DV_EINVAL, op, "%s: the future was never posted", op);
    if (s & want)
        return reached(f, s, m);
    if ((s & DV__FUTURE_FORK_MASK) != fork_bits())
        return dv__forked(op);
    /* An actor's thread must not wait: not even for another actor. */
    int rc = dv__no_wait(op);
    if (rc != DV_OK)
        return rc;
    /* Spin for a typical reply, then yield: with more waiting clients than
     * cores, a spinning waiter would take the core the actor needs. */
    for (int i = 0; i < SPINS + YIELDS; i++) {
        /* Acquire: pairs with publish's release. */
        if ((s = atomic_load_explicit(st, memory_order_acquire)) & want)
            return reached(f, s, m);
        if (i < SPINS)
            __builtin_ia32_pause();
        else
            sched_yield();
        if (deadline_ns != 0 && (i & 31) == 31 && dv__now_ns() >= deadline_ns)
            break;
    }
    for (;;) {
        s = atomic_load_explicit(st, memory_order_acquire);
        if (s & want)
            return reached(f, s, m);
        if (deadline_ns != 0 && dv__now_ns() >= deadline_ns)
            return dv__fail(DV_ETIMEDOUT, op, "%s: the operation did not reach %s in time", op,
                            m == DV_ORDERED ? "ordered" : "complete");
        /* Announce the sleeper; the completer's publish sees SLEEPERS. */
        if (!(s & DV__FUTURE_SLEEPERS) &&
            !atomic_compare_exchange_weak_explicit(st, &s, s | DV__FUTURE_SLEEPERS,
                                                   memory_order_acq_rel, memory_order_acquire))
            continue;
        struct timespec ts = dv__timespec_of(deadline_ns);
        atomic_fetch_add_explicit(&dv__future_sleepers, 1, memory_order_relaxed);
        dv__futex_wait(st, s | DV__FUTURE_SLEEPERS, deadline_ns != 0 ? &ts : NULL);
        atomic_fetch_sub_explicit(&dv__future_sleepers, 1, memory_order_relaxed);
    }
}

int dv_future_wait(dv_future *f)
{
    return wait_until(f, DV_COMPLETE, 0, "future_wait");
}

int dv_future_wait_ordered(dv_future *f)
{
    return wait_until(f, DV_ORDERED, 0, "future_wait_ordered");
}

int dv_future_wait_for(dv_future *f, dv_milestone m, uint64_t timeout_ns)
{
    if (m != DV_ORDERED && m != DV_COMPLETE)
        return dv__fail(DV_EINVAL, "future_wait_for", "future_wait_for: milestone %d", (int)m);
    uint64_t now = dv__now_ns();
    uint64_t deadline = timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
    return wait_until(f, m, deadline == 0 ? 1 : deadline, "future_wait_for");
}
