/*
 * The actor's thread: take messages in order (queue.h), handle them,
 * record one completion event per stream that gained any, poll what waits
 * for the device, and park when there is nothing to do.
 */
#include <sched.h>
#include <sys/prctl.h>
#include <time.h>

#include "actor/actor.h"
#include "actor/nvtx.h"
#include "base/futex.h"

#define BATCH 64

/* Idle parks are bounded: the loop looks again at least this often even
 * if a wake-up were lost. */
#define PARK_IDLE_NS 100000000u /* 100 ms */
/* The device is working for someone: after a few yields the actor parks
 * PARK_POLL_NS at a time while the device finishes something (or is
 * given new work) at least every few milliseconds; past that, a 64th of
 * the time since it last did (doubling every POLL_STEP parks towards it),
 * up to PARK_LONG_NS; back to PARK_POLL_NS whenever a look finds
 * something finished or a message gives the device work (and never past
 * PARK_WAITED_NS while a client sleeps in a wait).  So work is seen done
 * at most about 0.1 ms late, or 1.6% of the time it has been running: a
 * client waiting for a batch of long operations (collectives of 64 MiB,
 * 0.3 ms each) loses little per batch (with parks of up to
 * 1 ms, which ck_ec stretched to 6.4 ms, such a batch took 7-11% longer
 * on two H100s), and a kernel of seconds costs the actor's thread a few
 * hundred looks a second.  A look costs a query per stream that waits
 * (about 1.6 us on an H100); a park, a futex wait. */
#define PARK_POLL_NS 100000u  /* 0.1 ms */
#define PARK_LONG_NS 4000000u /* 4 ms */
#define PARK_SHARE   64       /* the cap: the time since the device finished something / 64 */
#define POLL_YIELDS  64
/* Every stream that waits, waits for a staged copy's host side: parks
 * this long (the pump's kick ends one sooner). */
#define PARK_HOST_NS 10000000u /* 10 ms */
#define POLL_STEP    8
/* The device is asked at most this often while the actor spins (each
 * look is a query per stream that waits: a look per spin would cost more
 * than the messages themselves), and at most every POLL_BUSY_NS while
 * messages keep coming (the work it waits for then takes longer). */
#define POLL_GAP_NS  5000u
#define POLL_BUSY_NS 20000u
/* An idle actor looks again this many times (a pause between: on recent
 * x86 one pause is ~140 cycles) before it sleeps: tens of microseconds,
 * so that a client's next request in a back-and-forth finds it awake,
 * soon, and needs no futex wake-up. */
#define IDLE_LOOKS 512

/* While some thread of the process sleeps in a future's wait (it may be
 * waiting for this work), parks are at most this long: its end is seen
 * within about 20 us rather than 0.1 ms or more.  On two H200s, rounds
 * of twenty 64 MiB all-reduces, each round waited for, took 1.026-1.030x
 * the direct calls' time before, 1.021-1.022x after (with the meeting's
 * spin in nccl.c).  Meanwhile a look every 20 us costs the actor's
 * thread about 8% of a core for each stream that waits (a query each). */
#define PARK_WAITED_NS 20000u

/* since: how long ago the device last finished something the actor
 * waits for (or the waiting began). */
static uint32_t poll_park_ns(unsigned idle, uint64_t since)
{
    if (idle < POLL_YIELDS)
        return POLL_GAP_NS;
    uint64_t cap = since / PARK_SHARE;
    cap = cap < PARK_POLL_NS ? PARK_POLL_NS : cap > PARK_LONG_NS ? PARK_LONG_NS : cap;
    if (atomic_load_explicit(&dv__future_sleepers, memory_order_relaxed) > 0)
        cap = PARK_WAITED_NS;
    unsigned doublings = (idle - POLL_YIELDS) / POLL_STEP;
    uint64_t park = doublings >= 16 ? cap : (uint64_t)PARK_POLL_NS << doublings;
    return (uint32_t)(park < cap ? park : cap);
}

void *dv__actor_main(void *arg)
{
    dv_actor *a = arg;
    const dv_envelope *batch;
    unsigned idle = 0, looks = 0;
    uint64_t last_poll = 0;
    /* When the device last finished something waited for, or new work
     * was given it (0: nothing waits), and the gap the last park left
     * between looks: a look is due once the park that followed the last
     * one is over, not by a threshold computed again later (which grows
     * with the time and skipped every other look). */
    uint64_t progress = 0, look_gap = POLL_GAP_NS;

    /* Parks are microseconds: without this the kernel's default timer
     * slack (50 us) would stretch every one. */
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
    dv__res_env_adopt(&a->env);
    dv__nvtx_thread(a->device);
    for (;;) {
        /* Read before the take: every post came before the close, so a
         * take that finds nothing after it has seen them all. */
        bool closed = dv__inbox_closed(a->inbox);
        unsigned n = dv__inbox_take(a->inbox, &batch, BATCH);
        if (n > 0) {
            /* The coarse clock: a few ns, to a few ms (a block's age). */
            struct timespec t;
            clock_gettime(CLOCK_REALTIME_COARSE, &t);
            a->batch_time = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
        }
        uint64_t pending_before = a->npending;
        for (unsigned i = 0; i < n; i++)
            dv__handle(a, &batch[i]);
        /* New work: its end is looked for from its start, not at the
         * pace of older work that has run long. */
        if (a->npending > pending_before)
            progress = 0;
        a->env.poster = 0;
        bool lost = dv__actor_broken(a);
        if (lost && !a->lost_seen) {
            a->lost_seen = true;
            dv__staging_abort(a); /* its copies wait for the device no more */
        }
        if (n > 0) {
            dv__stat_inc(&a->st_batches);
            if (!lost)
                dv__flush_marks(a);
            dv__ref_flush_recycled(a->refs);
            dv__ref_wake_settled(a->refs);
            looks = 0;
            /* Looked for eagerly again only where the messages gave the
             * device new work: a flush or an allocation during a long
             * kernel leaves the pace of its looks as it was. */
            if (a->npending != pending_before || a->npending == 0) {
                idle = 0;
                look_gap = POLL_GAP_NS;
            }
        }
        /* A copy's host side finished (staging.c): its end is near. */
        if (atomic_load_explicit(&a->look_soon, memory_order_relaxed) &&
            atomic_exchange_explicit(&a->look_soon, false, memory_order_relaxed)) {
            dv__pending_host_done(a);
            idle = 0;
            last_poll = 0;
        }
        if (a->npending > 0) {
            uint64_t now = dv__now_ns();
            if (progress == 0)
                progress = now;
            if (lost) {
                dv_error_detail d;
                dv__lost_detail(a, &d);
                dv__fail_pending(a, DV_EDEVICE_LOST, &d);
            } else if (now - last_poll >= (n > 0 ? POLL_BUSY_NS : look_gap)) {
                uint64_t before = a->npending;
                dv__poll_completions(a);
                last_poll = now;
                /* Work finishing one piece after another (a batch of
                 * copies): the rest is near, look often again. */
                if (a->npending < before) {
                    progress = now;
                    if (idle > POLL_YIELDS)
                        idle = POLL_YIELDS;
                }
            }
        }
        if (a->host_jobs != NULL)
            dv__host_jobs_sweep(a);
        bool host_work = dv__host_has_work(&a->host);
        if (host_work)
            dv__host_sweep(a);
        if (n > 0 || dv__inbox_held(a->inbox) > 0)
            continue;
        if (closed && a->npending == 0)
            break;
        if (a->npending > 0 || host_work) {
            /* The device is working for someone: poll, a little less
             * eagerly the longer it takes. */
            idle++;
            bool all_host;
            uint64_t at = dv__now_ns();
            if (progress == 0) /* host work alone: its wait counts too */
                progress = at;
            uint64_t park = poll_park_ns(idle, at - progress), eta = dv__pending_eta(a, &all_host);
            look_gap = park;
            if (all_host && !host_work) {
                /* Every stream waits for a copy's host side, whose pump
                 * kicks when done: nothing to ask the device meanwhile
                 * (the yields stay: a short copy's end comes soon). */
                park = PARK_HOST_NS;
            } else if (eta > a->eta_looked) {
                /* A transfer's guessed end (completion.c): look eagerly
                 * once it comes, and do not sleep past it. */
                uint64_t now = dv__now_ns();
                if (eta <= now) {
                    a->eta_looked = eta;
                    idle = 0;
                    last_poll = 0;
                } else if (eta - now < park) {
                    park = eta - now;
                    look_gap = park;
                }
            }
            if (idle < POLL_YIELDS)
                sched_yield();
            else
                dv__inbox_park(a->inbox, park, &a->look_soon);
        } else {
            progress = 0; /* nothing waits */
            if (looks < IDLE_LOOKS) {
                looks++;
                __builtin_ia32_pause();
            } else {
                dv__inbox_park(a->inbox, PARK_IDLE_NS, &a->look_soon);
            }
        }
    }
    dv__actor_stop_state(a);
    return NULL;
}
