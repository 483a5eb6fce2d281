/*
 * Events (the contract: devactor.h).
 *
 * An event belongs to its actor, which makes and records its port event.
 * A record takes a number at post time (`posted`); the actor stores the
 * number it handled last in `recorded` (a release, after the port event
 * holds the record), where waits from other actors look for it.  Each
 * record also puts a mark of the actor's completion tracker at exactly
 * that point of the stream, so a sync or query of the event answers for
 * the record itself, not for work enqueued after it.
 *
 * Event structs are never returned to the system (base/keep.h): a
 * destroyed event is kept with owner 0, so an event used after its
 * destruction reads as DV_EINVAL, not freed memory.
 */
#include <sched.h>
#include <time.h>

#include "actor/actor.h"
#include "base/keep.h"

static dv_keep kept = DV_KEEP_INIT(struct dv_event, next);

static struct dv_event *event_new(void)
{
    struct dv_event *e = dv__keep_get(&kept);
    if (e != NULL) {
        atomic_init(&e->owner, 0);
        atomic_init(&e->destroying, false);
        atomic_init(&e->posted, 0);
        atomic_init(&e->recorded, 0);
        atomic_init(&e->drv, NULL);
    }
    return e;
}

static void event_put(struct dv_event *e)
{
    atomic_store_explicit(&e->owner, 0, memory_order_release);
    dv__keep_put(&kept, e);
}

/* A live event, or DV_EINVAL naming op. */
static int live(const dv_event *e, const char *op)
{
    if (e == NULL)
        return dv__fail(DV_EINVAL, op, "%s: NULL event", op);
    /* Acquire: pairs with the release stores of the owner. */
    if (atomic_load_explicit(&((dv_event *)e)->owner, memory_order_acquire) == 0 ||
        atomic_load_explicit(&((dv_event *)e)->destroying, memory_order_acquire))
        return dv__fail(DV_EINVAL, op, "%s: the event was destroyed", op);
    return dv__actor_here(e->actor, op);
}

static int check_stream(const dv_actor *a, dv_stream s, const char *op)
{
    if (s >= a->cfg.streams)
        return dv__fail(DV_EINVAL, op, "%s: unknown stream %u (the actor has %u)", op, s,
                        a->cfg.streams);
    return DV_OK;
}

/* ------------------------------------------------------------------------
 * Any thread
 * ------------------------------------------------------------------------ */

int dv_event_create(dv_actor *a, uint32_t flags, dv_event **out)
{
    static const char op[] = "event_create";
    if (a == NULL || out == NULL)
        return dv__fail(DV_EINVAL, op, "%s: NULL %s", op, a == NULL ? "actor" : "out");
    *out = NULL;
    if (flags & ~DV_EVENT_TIMING)
        return dv__fail(DV_EINVAL, op, "%s: unknown flags 0x%x", op, flags & ~DV_EVENT_TIMING);
    struct dv_event *e = event_new();
    if (e == NULL)
        return dv__fail(DV_ENOMEM, op, "%s: out of host memory", op);
    e->actor = a;
    e->flags = flags;
    dv_future f;
    dv_msg m = {.type = DV_MSG_EVENT_CREATE, .u.event = {.event = e}};
    int rc = dv__actor_call(a, &m, &f);
    if (rc != DV_OK) {
        dv_error_detail saved = *dv_last_error();
        event_put(e);
        *dv__detail() = saved;
        return rc;
    }
    *out = e;
    return DV_OK;
}

int dv_event_destroy(dv_event *e)
{
    static const char op[] = "event_destroy";
    int rc = live(e, op);
    if (rc != DV_OK)
        return rc;
    /* Once: a second destroy, before the actor handled the first, is
     * refused here rather than posted. */
    if (atomic_exchange_explicit(&e->destroying, true, memory_order_acq_rel))
        return dv__fail(DV_EINVAL, op, "%s: the event was destroyed", op);
    dv_msg m = {.type = DV_MSG_EVENT_DESTROY, .u.event = {.event = e}};
    if ((rc = dv__actor_post(e->actor, &m, NULL)) != DV_OK) {
        /* Not posted (a full queue, a shutdown): the event stays. */
        dv_error_detail saved = *dv_last_error();
        atomic_store_explicit(&e->destroying, false, memory_order_release);
        *dv__detail() = saved;
    }
    return rc;
}

static int record(dv_event *e, dv_stream s, dv_future *f, const char *op)
{
    int rc = live(e, op);
    if (rc == DV_OK)
        rc = check_stream(e->actor, s, op);
    if (rc != DV_OK) {
        if (f != NULL && dv__future_arm(f, op) == DV_OK)
            dv__future_complete(f, rc);
        return rc;
    }
    dv_msg m = {.type = DV_MSG_EVENT_RECORD, .stream = (uint16_t)s, .u.event = {.event = e}};
    /* Numbered at post time, so a wait or query posted after this names
     * this record or a later one; and the number is published only once
     * the record is posted, so nobody waits for a record that was refused
     * (a full queue, a future in flight, a shutdown).  Records of one
     * event are posted one at a time. */
    while (atomic_exchange_explicit(&e->numbering, true, memory_order_acquire))
        sched_yield();
    uint64_t n = atomic_load_explicit(&e->posted, memory_order_relaxed) + 1;
    m.u.event.record = n;
    rc = dv__actor_post(e->actor, &m, f);
    if (rc == DV_OK) /* Release: pairs with the waits' acquire loads. */
        atomic_store_explicit(&e->posted, n, memory_order_release);
    atomic_store_explicit(&e->numbering, false, memory_order_release);
    return rc;
}

int dv_event_record(dv_event *e, dv_stream s)
{
    return record(e, s, NULL, "event_record");
}

int dv_event_record_async(dv_event *e, dv_stream s, dv_future *f)
{
    if (f == NULL)
        return dv__fail(DV_EINVAL, "event_record", "event_record_async: NULL future");
    return record(e, s, f, "event_record");
}

/* The foreign event's record n is ordered on its actor: a short wait on
 * the calling thread.  Its actor must still run here (not forked away,
 * not lost, not shut down), the record done or not: an actor that is gone
 * left no event to wait on. */
static int wait_recorded(dv_event *e, uint64_t n, const char *op)
{
    for (unsigned round = 0;; round++) {
        int here = dv__actor_here(e->actor, op);
        if (here != DV_OK)
            return here;
        int st = atomic_load(&e->actor->state);
        if (st == DV_ACTOR_LOST)
            return dv__lost_answer(e->actor);
        if (st == DV_ACTOR_STOPPING || st == DV_ACTOR_STOPPED)
            return dv__fail(DV_ESHUTDOWN, op, "%s: the event's actor is shutting down", op);
        /* Acquire: pairs with the release store in handle_record, so the
         * port event read after this holds record n. */
        if (atomic_load_explicit(&e->recorded, memory_order_acquire) >= n)
            return DV_OK;
        int rc;
        if (round == 0 && (rc = dv__no_wait(op)) != DV_OK)
            return rc;
        if (round < 200) {
            __builtin_ia32_pause();
        } else if (round < 400) {
            sched_yield();
        } else {
            struct timespec ts = {0, 20000}; /* 20 us */
            nanosleep(&ts, NULL);
        }
    }
}

int dv_stream_wait_event(dv_actor *a, dv_stream s, dv_event *e)
{
    static const char op[] = "stream_wait_event";
    if (a == NULL)
        return dv__fail(DV_EINVAL, op, "%s: NULL actor", op);
    int rc = dv__actor_here(a, op);
    if (rc == DV_OK)
        rc = live(e, op);
    if (rc == DV_OK)
        rc = check_stream(a, s, op);
    if (rc != DV_OK)
        return rc;
    /* Another driver's event is refused whether recorded yet or not. */
    if (e->actor != a && e->actor->drv != a->drv)
        return dv__fail(DV_EINVAL, op, "%s: the event's actor runs on another driver", op);
    /* Another actor's event may need a wait on this thread for its
     * record: refused at once on a thread that serves an actor, whether
     * it would wait this time or not. */
    if (e->actor != a && (rc = dv__no_wait(op)) != DV_OK)
        return rc;
    /* Acquire: pairs with the acq_rel increment in record. */
    uint64_t n = atomic_load_explicit(&e->posted, memory_order_acquire);
    if (n == 0)
        return DV_OK; /* never recorded: nothing to wait for, as in CUDA */
    dv_msg m = {
        .type = DV_MSG_EVENT_WAIT, .stream = (uint16_t)s, .u.event = {.event = e, .record = n}};
    if (e->actor != a) {
        if ((rc = wait_recorded(e, n, op)) != DV_OK)
            return rc;
        m.u.event.foreign = atomic_load_explicit(&e->drv, memory_order_acquire);
        if (m.u.event.foreign == NULL)
            return DV_OK; /* its context was rebuilt since: nothing left to wait for */
        /* The port event holds the record only until its actor records it
         * again or destroys it, which this thread may post next: return
         * once this actor has taken the wait (a round trip). */
        dv_future own;
        return dv__actor_call(a, &m, &own);
    }
    return dv__actor_post(a, &m, NULL);
}

/* A round trip about e's latest record: sync or query. */
static int ask(dv_event *e, uint8_t type, const char *op)
{
    int rc = live(e, op);
    if (rc != DV_OK)
        return rc;
    dv_future f;
    dv_msg m = {.type = type, .u.event = {.event = e}};
    return dv__actor_call(e->actor, &m, &f);
}

int dv_event_sync(dv_event *e)
{
    return ask(e, DV_MSG_EVENT_SYNC, "event_sync");
}

int dv_event_query(dv_event *e)
{
    return ask(e, DV_MSG_EVENT_QUERY, "event_query");
}

int dv_event_elapsed(dv_event *start, dv_event *end, float *ms)
{
    static const char op[] = "event_elapsed";
    int rc = live(start, op);
    if (rc == DV_OK)
        rc = live(end, op);
    if (rc != DV_OK)
        return rc;
    if (ms == NULL)
        return dv__fail(DV_EINVAL, op, "%s: NULL ms", op);
    if (start->actor != end->actor)
        return dv__fail(DV_EINVAL, op, "%s: the events belong to different actors", op);
    if (!(start->flags & end->flags & DV_EVENT_TIMING))
        return dv__fail(DV_EINVAL, op, "%s: both events need DV_EVENT_TIMING", op);
    dv_future f;
    dv_msg m = {.type = DV_MSG_EVENT_ELAPSED, .u.event = {.event = start, .end = end, .ms = ms}};
    return dv__actor_call(start->actor, &m, &f);
}

void *dv_event_native(dv_event *e)
{
    if (live(e, "event_native") != DV_OK)
        return NULL;
    /* Acquire: pairs with the release store in handle_record. */
    dv_drv_event *ev = atomic_load_explicit(&e->drv, memory_order_acquire);
    return ev != NULL ? dv__drv_event_native(ev) : NULL;
}

/* ------------------------------------------------------------------------
 * The actor's side
 * ------------------------------------------------------------------------ */

/* The event's port event in the current context, made when missing. */
static int port_event(dv_actor *a, dv_event *e)
{
    uint64_t ctx = dv__ref_domain_context(a->refs);
    if (e->context == ctx && atomic_load_explicit(&e->drv, memory_order_relaxed) != NULL)
        return DV_OK;
    dv_drv_event *ev;
    uint32_t flags = e->flags & DV_EVENT_TIMING ? DV_DRV_EVENT_TIMING : 0;
    int rc = dv__drv_event_create(a->env.ctx, flags, &ev);
    if (rc != DV_OK)
        return rc;
    /* Release: pairs with the acquire loads in dv_event_native and
     * dv_stream_wait_event. */
    atomic_store_explicit(&e->drv, ev, memory_order_release);
    e->context = ctx;
    return DV_OK;
}

static int same_context(const dv_actor *a, const dv_event *e, const char *op)
{
    if (e->record_context != 0 && e->record_context != dv__ref_domain_context(a->refs))
        return dv__fail(DV_ESTALE, op,
                        "%s: the event's latest record was made before the context was rebuilt",
                        op);
    return DV_OK;
}

static void handle_create(dv_actor *a, const dv_envelope *env)
{
    DV_ASSERT_ACTOR(a);
    dv_event *e = env->m.u.event.event;
    int rc = port_event(a, e);
    if (rc == DV_OK) {
        e->next = a->events.next;
        e->prev = &a->events;
        a->events.next->prev = e;
        a->events.next = e;
        /* Release: the event is usable from here on (live()). */
        atomic_store_explicit(&e->owner, a->uid, memory_order_release);
    }
    dv__reply(a, env, rc);
}

static void handle_destroy(dv_actor *a, const dv_envelope *env)
{
    DV_ASSERT_ACTOR(a);
    dv_event *e = env->m.u.event.event;
    e->prev->next = e->next;
    e->next->prev = e->prev;
    dv_drv_event *ev = atomic_load_explicit(&e->drv, memory_order_relaxed);
    if (ev != NULL && e->context == dv__ref_domain_context(a->refs))
        (void)dv__drv_event_destroy(ev);
    atomic_store_explicit(&e->drv, NULL, memory_order_relaxed);
    event_put(e);
    dv__reply(a, env, DV_OK);
}

static void handle_record(dv_actor *a, const dv_envelope *env)
{
    DV_ASSERT_ACTOR(a);
    dv_event *e = env->m.u.event.event;
    dv_stream s = env->m.stream;
    /* The record's own point, before the record: it is ordered after
     * what its poster knew, and the event captures that with the stream
     * (a wait on it teaches the waiting stream both). */
    uint64_t point = a->chk != NULL ? dv__checker_point(a->chk, s, dv__know_of(a, env)) : 0;
    int rc = port_event(a, e);
    if (rc == DV_OK)
        rc = dv__drv_event_record(atomic_load_explicit(&e->drv, memory_order_relaxed),
                                  a->env.streams[s]);
    /* The completion tracker gets an event at exactly this point. */
    if (rc == DV_OK) {
        e->epoch = dv__tracker_mark(a->done, s);
        rc = dv__tracker_flush(a->done, s);
    }
    if (rc != DV_OK && rc != DV_ECONTEXT_LOST) {
        /* The device could not take the record (memory, a driver error
         * that is no fault).  Waiting for the stream here gives the same
         * point: everything ordered on s before the record is done, so
         * waits on it need not wait and a sync returns at once. */
        int src = dv__drv_stream_sync(a->env.streams[s]);
        if (src == DV_OK) {
            e->stream = s;
            e->host_reached = true;
            e->chk_seq = point;
            if (point != 0)
                dv__checker_publish(a->chk, s, point);
            e->record_context = dv__ref_domain_context(a->refs);
            atomic_store_explicit(&e->recorded, env->m.u.event.record, memory_order_release);
            dv__stat_inc(&a->st_events);
            dv__reply(a, env, DV_OK);
            return;
        }
        rc = src;
    }
    if (rc != DV_OK) {
        /* Nobody may wait for a record that will not come. */
        atomic_store_explicit(&e->recorded, env->m.u.event.record, memory_order_release);
        dv__reply(a, env, dv__enqueue_failed(a, rc, s, env));
        return;
    }
    e->host_reached = false;
    e->stream = s;
    /* A thread that syncs on the event learns what the stream had
     * reached, and what its poster knew. */
    e->chk_seq = point;
    if (e->chk_seq != 0)
        dv__checker_publish(a->chk, s, e->chk_seq);
    e->res_pos = dv__res_stream_position(a->stack, s);
    e->record_context = dv__ref_domain_context(a->refs);
    /* Release: pairs with the acquire load in wait_recorded. */
    atomic_store_explicit(&e->recorded, env->m.u.event.record, memory_order_release);
    dv__stat_inc(&a->st_events);
    if (env->m.reply == NULL)
        return;
    if (dv__complete_at(a, s, e->epoch, e->chk_seq, env, "event") != DV_OK)
        dv__reply(a, env, DV_ENOMEM);
}

static void handle_wait(dv_actor *a, const dv_envelope *env)
{
    DV_ASSERT_ACTOR(a);
    dv_event *e = env->m.u.event.event;
    dv_stream s = env->m.stream;
    dv_drv_event *ev = env->m.u.event.foreign;
    int rc = DV_OK;
    /* The wait is an operation on s: ordered after what its poster knew,
     * and so is what s runs after it, whoever posts that. */
    if (a->chk != NULL)
        (void)dv__checker_point(a->chk, s, dv__know_of(a, env));
    if (ev == NULL) {
        if (e->record_context == 0 || e->host_reached)
            return; /* destroyed, never recorded, or reached already */
        if ((rc = same_context(a, e, "stream_wait_event")) == DV_OK)
            ev = atomic_load_explicit(&e->drv, memory_order_relaxed);
    }
    if (rc == DV_OK && ev != NULL) {
        rc = dv__drv_stream_wait_event(a->env.streams[s], ev);
        /* The device could not take the wait: wait on the host instead,
         * so what s runs later still comes after the record. */
        if (rc != DV_OK && rc != DV_ECONTEXT_LOST)
            rc = dv__drv_event_sync(ev);
        else if (rc == DV_OK && e->actor == a)
            dv__res_note_stream_wait(a->stack, s, e->stream, e->res_pos);
    }
    if (rc != DV_OK)
        rc = dv__enqueue_failed(a, rc, s, env);
    dv__reply(a, env, rc);
}

static void handle_sync(dv_actor *a, const dv_envelope *env)
{
    DV_ASSERT_ACTOR(a);
    dv_event *e = env->m.u.event.event;
    int rc = same_context(a, e, "event_sync");
    if (rc == DV_OK && e->record_context != 0 && !e->host_reached &&
        (rc = dv__complete_at(a, e->stream, e->epoch, e->chk_seq, env, "event")) == DV_OK)
        return;
    dv__reply(a, env, rc);
}

/* Has the device reached e's latest record? */
static int reached(dv_actor *a, const dv_event *e, bool *done)
{
    *done = true;
    if (e->record_context == 0 || e->host_reached)
        return DV_OK;
    return dv__tracker_reached(a->done, (dv_stream_pos){e->stream, e->epoch}, done);
}

static void handle_query(dv_actor *a, const dv_envelope *env)
{
    DV_ASSERT_ACTOR(a);
    dv_event *e = env->m.u.event.event;
    bool done;
    int rc = same_context(a, e, "event_query");
    if (rc == DV_OK && (rc = reached(a, e, &done)) == DV_OK && !done)
        rc = dv__fail(DV_EAGAIN, "event_query", "event_query: not reached yet");
    if (rc == DV_ECONTEXT_LOST)
        rc = dv__enqueue_failed(a, rc, e->stream, env);
    if (env->m.reply == NULL)
        return;
    /* A query that answered done orders like a sync: its caller learns
     * the record's point. */
    if (rc == DV_OK && a->chk != NULL && e->chk_seq != 0 && !e->host_reached) {
        dv__known_pack(env->m.reply->internal, a->uid, dv__ref_domain_context(a->refs), e->stream,
                       e->chk_seq);
    }
    dv__future_complete(env->m.reply, rc); /* DV_EAGAIN is an answer, not a failure */
}

static void handle_elapsed(dv_actor *a, const dv_envelope *env)
{
    DV_ASSERT_ACTOR(a);
    static const char op[] = "event_elapsed";
    dv_event *start = env->m.u.event.event, *end = env->m.u.event.end;
    bool d1 = false, d2 = false;
    int rc = DV_OK;
    if (start->record_context == 0 || end->record_context == 0)
        rc = dv__fail(DV_EINVAL, op, "%s: an event was never recorded", op);
    if (rc == DV_OK && (rc = same_context(a, start, op)) == DV_OK)
        rc = same_context(a, end, op);
    if (rc == DV_OK && (rc = reached(a, start, &d1)) == DV_OK)
        rc = reached(a, end, &d2);
    if (rc == DV_OK && !(d1 && d2))
        rc = dv__fail(DV_EAGAIN, op, "%s: an event is not reached yet", op);
    if (rc == DV_OK)
        rc = dv__drv_event_elapsed(atomic_load_explicit(&start->drv, memory_order_relaxed),
                                   atomic_load_explicit(&end->drv, memory_order_relaxed),
                                   env->m.u.event.ms);
    if (env->m.reply != NULL)
        dv__future_complete(env->m.reply, rc);
}

void dv__handle_event(dv_actor *a, const dv_envelope *env)
{
    DV_ASSERT_ACTOR(a);
    dv_event *e = env->m.u.event.event;
    /* Posted before the event was destroyed, handled after: the event is
     * gone (a use after destruction; nothing of it is touched). */
    bool foreign = env->m.type == DV_MSG_EVENT_WAIT && env->m.u.event.foreign != NULL;
    if (env->m.type != DV_MSG_EVENT_CREATE && !foreign &&
        atomic_load_explicit(&e->owner, memory_order_relaxed) != a->uid) {
        dv__reply(a, env,
                  dv__fail(DV_EINVAL, dv__msg_name(env->m.type), "%s: the event was destroyed",
                           dv__msg_name(env->m.type)));
        return;
    }
    switch (env->m.type) {
    case DV_MSG_EVENT_CREATE:
        handle_create(a, env);
        break;
    case DV_MSG_EVENT_DESTROY:
        handle_destroy(a, env);
        break;
    case DV_MSG_EVENT_RECORD:
        handle_record(a, env);
        break;
    case DV_MSG_EVENT_WAIT:
        handle_wait(a, env);
        break;
    case DV_MSG_EVENT_SYNC:
        handle_sync(a, env);
        break;
    case DV_MSG_EVENT_QUERY:
        handle_query(a, env);
        break;
    case DV_MSG_EVENT_ELAPSED:
        handle_elapsed(a, env);
        break;
    default:
        dv_assert(!"not an event message");
    }
}

void dv__events_forget_context(dv_actor *a, bool context_kept)
{
    /* A reset context took every event with it; one that lives on still
     * holds them (every one left was made in it: a reset forgot the rest). */
    for (dv_event *e = a->events.next; e != &a->events; e = e->next) {
        dv_drv_event *ev = atomic_exchange_explicit(&e->drv, NULL, memory_order_acq_rel);
        if (context_kept && ev != NULL)
            (void)dv__drv_event_destroy(ev);
        e->context = 0;
    }
}

void dv__events_free(dv_actor *a)
{
    while (a->events.next != &a->events) {
        dv_event *e = a->events.next;
        a->events.next = e->next;
        event_put(e);
    }
    a->events.prev = &a->events;
}
