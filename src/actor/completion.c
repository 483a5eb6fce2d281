/*
 * What waits for the device: completions pending on stream positions,
 * and faults (a sticky error names what was in flight, fails everything
 * pending, and the actor rebuilds or becomes LOST).  Actor thread only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actor/actor.h"
#include "base/futex.h"

void dv__reply(dv_actor *a, const dv_envelope *e, int status)
{
    if (status != DV_OK)
        dv__stat_inc(&a->st_failures);
    if (e->m.reply != NULL)
        dv__future_complete(e->m.reply, status);
}

/* The device finished p: its waiter learns how far stream s got. */
static void complete_pending(dv_actor *a, dv_stream s, const dv_pending *p)
{
    if (p->reply == NULL)
        return;
    if (p->chk_seq != 0)
        dv__known_pack(p->reply->internal, a->uid, dv__ref_domain_context(a->refs), s, p->chk_seq);
    if (p->fail != NULL) {
        dv__future_complete_detail(p->reply, p->fail->status, p->fail);
        free(p->fail);
        return;
    }
    dv__future_complete(p->reply, DV_OK);
}

void dv__recent_push(dv_actor *a, dv_stream s, const dv_envelope *e, const char *name)
{
    if (a->done == NULL)
        return; /* the device state is gone (a fault met inside a task, a failed rebuild) */
    dv_pending_fifo *q = &a->pend[s];
    q->recent[q->recent_next] =
        (dv_recent){name, e->m.type, e->from->id, e->m.seq, dv__tracker_mark(a->done, s)};
    q->recent_next = (q->recent_next + 1) % DV_RECENT;
    if (q->nrecent < DV_RECENT)
        q->nrecent++;
}

static int fifo_grow(dv_pending_fifo *q)
{
    uint32_t cap = q->cap ? q->cap * 2 : 64;
    dv_pending *n = malloc(cap * sizeof(*n));
    if (n == NULL)
        return dv__fail(DV_ENOMEM, "complete", "out of host memory for completions");
    for (uint32_t i = 0; i < q->count; i++)
        n[i] = q->items[(q->head + i) % q->cap];
    free(q->items);
    q->items = n;
    q->cap = cap;
    q->head = 0;
    return DV_OK;
}

/* dv__complete_at, the failure to tell at the end given (heap; NULL: DV_OK). */
static int pending_add(dv_actor *a, dv_stream s, uint64_t epoch, uint64_t chk_seq,
                       const dv_envelope *e, const char *what, dv_error_detail *fail)
{
    dv_pending_fifo *q = &a->pend[s];
    if (q->count == q->cap && fifo_grow(q) != DV_OK)
        return DV_ENOMEM;
    /* By position: an earlier point goes before later ones, so a FIFO walk
     * completes each as soon as the device passes it. */
    uint32_t at = q->count;
    while (at > 0 && q->items[(q->head + at - 1) % q->cap].epoch > epoch) {
        q->items[(q->head + at) % q->cap] = q->items[(q->head + at - 1) % q->cap];
        at--;
    }
    q->items[(q->head + at) % q->cap] = (dv_pending){
        .eta = 0,
        .epoch = epoch,
        .reply = e->m.reply,
        .type = e->m.type,
        .client = e->from->id,
        .seq = e->m.seq,
        .what = what,
        .chk_seq = chk_seq,
        .fail = fail,
    };
    q->count++;
    q->unguessed++;
    q->marked = true;
    if (chk_seq != 0 && e->m.reply != NULL && a->chk != NULL)
        dv__checker_publish(a->chk, s, chk_seq);
    a->npending++;
    if (e->m.reply != NULL)
        dv__future_ordered(e->m.reply);
    return DV_OK;
}

int dv__complete_at(dv_actor *a, dv_stream s, uint64_t epoch, uint64_t chk_seq,
                    const dv_envelope *e, const char *what)
{
    return pending_add(a, s, epoch, chk_seq, e, what, NULL);
}

/* At the current end of s, with the checker's number of its work there. */
static int pending_at_end(dv_actor *a, dv_stream s, const dv_envelope *e, const char *what,
                          dv_error_detail *fail)
{
    return pending_add(a, s, dv__tracker_mark(a->done, s),
                       a->chk != NULL ? dv__checker_stream_seq(a->chk, s) : 0, e, what, fail);
}

int dv__complete_later(dv_actor *a, dv_stream s, const dv_envelope *e, const char *what)
{
    if (e->m.reply == NULL)
        return DV_OK; /* nobody waits: nothing to track */
    if (a->done == NULL) {
        /* The device state went while the operation ran (a fault inside a
         * task whose rebuild failed): its work went with it. */
        dv_error_detail d;
        dv__lost_detail(a, &d);
        dv__future_complete_detail(e->m.reply, d.status, &d);
        return DV_OK;
    }
    return pending_at_end(a, s, e, what, NULL);
}

int dv__complete_failed_later(dv_actor *a, dv_stream s, const dv_envelope *e, const char *what)
{
    if (e->m.reply == NULL || a->done == NULL)
        return DV_ENOMEM; /* answered now by the caller */
    dv_error_detail *fail = malloc(sizeof(*fail));
    if (fail == NULL)
        return DV_ENOMEM;
    *fail = *dv_last_error();
    int rc = pending_at_end(a, s, e, what, fail);
    if (rc != DV_OK)
        free(fail);
    else
        dv__stat_inc(&a->st_failures); /* answered later, a failure now */
    return rc;
}

void dv__fail_pending(dv_actor *a, int status, const dv_error_detail *detail)
{
    for (uint32_t s = 0; s < DV_MAX_STREAMS; s++) {
        dv_pending_fifo *q = &a->pend[s];
        while (q->count > 0) {
            dv_pending *p = &q->items[q->head];
            if (p->reply != NULL)
                dv__future_complete_detail(p->reply, status, detail);
            free(p->fail);
            q->head = (q->head + 1) % q->cap;
            q->count--;
        }
        q->marked = false;
        q->nrecent = 0;
        q->unguessed = 0;
        q->span_open = false;
    }
    a->npending = 0;
}

int dv__drain_device(dv_actor *a)
{
    int rc = dv__res_env_sync(&a->env);
    if (rc != DV_OK)
        return rc;
    for (uint32_t s = 0; s < a->env.nstreams; s++) {
        dv_pending_fifo *q = &a->pend[s];
        while (q->count > 0) {
            complete_pending(a, s, &q->items[q->head]);
            q->head = (q->head + 1) % q->cap;
            q->count--;
        }
        q->marked = false;
        q->nrecent = 0;
        q->unguessed = 0;
        q->span_open = false;
    }
    a->npending = 0;
    return DV_OK;
}

/* "launch (fill_u32, message 3 of client 2)" for what was in flight on s. */
static size_t describe_in_flight(const dv_actor *a, dv_stream s, char *what, size_t size)
{
    size_t len = 0;
    const dv_pending_fifo *q = &a->pend[s];
    for (uint32_t i = 0; i < q->count && i < 3 && len < size - 1; i++) {
        const dv_pending *p = &q->items[(q->head + i) % q->cap];
        len += (size_t)snprintf(what + len, size - len, "%s%s (%s, message %u of client %u)",
                                i ? "; " : "", dv__msg_name(p->type), p->what ? p->what : "-",
                                p->seq, p->client);
    }
    if (q->count > 3 && len < size - 1)
        len += (size_t)snprintf(what + len, size - len, "; and %u more", q->count - 3);
    /* Launches and tasks nobody waits for: the latest few the device was
     * not seen past (those waited for are named above already). */
    for (uint32_t i = 0; i < q->nrecent && len < size - 1; i++) {
        const dv_recent *r = &q->recent[(q->recent_next + DV_RECENT - 1 - i) % DV_RECENT];
        bool listed = dv__tracker_known_passed(a->done, (dv_stream_pos){s, r->epoch});
        for (uint32_t k = 0; k < q->count && !listed; k++) {
            const dv_pending *p = &q->items[(q->head + k) % q->cap];
            listed = p->client == r->client && p->seq == r->seq && p->type == r->type;
        }
        if (listed)
            continue;
        len += (size_t)snprintf(what + len, size - len, "%s%s (%s, message %u of client %u)",
                                len ? "; " : "", dv__msg_name(r->type), r->name ? r->name : "-",
                                r->seq, r->client);
    }
    return len;
}

void dv__on_fault(dv_actor *a, int status, dv_stream s, const dv_envelope *culprit)
{
    dv_error_detail d = *dv_last_error();
    char what[160] = "";

    if (culprit != NULL) {
        const char *call = dv_last_error()->call;
        if (culprit->m.type == DV_MSG_LAUNCH_BUILTIN) /* name the kernel */
            call = culprit->m.u.builtin.name;
        else if (culprit->m.type == DV_MSG_LAUNCH)
            call = culprit->m.u.launch.kernel->name;
        snprintf(what, sizeof(what), "%s (%s, message %u of client %u)",
                 dv__msg_name(culprit->m.type), call != NULL ? call : "-", culprit->m.seq,
                 culprit->from->id);
    } else if (s < DV_MAX_STREAMS) {
        describe_in_flight(a, s, what, sizeof(what));
    }
    d.status = DV_ECONTEXT_LOST;
    char msg[sizeof(d.message)];
    snprintf(msg, sizeof(msg), "device %d: sticky error %s on stream %u; in flight: %.150s",
             a->device, d.driver_name[0] ? d.driver_name : dv_err_name(status), s,
             what[0] ? what : "(nothing tracked)");
    memcpy(d.message, msg, sizeof(d.message));

    pthread_mutex_lock(&a->health_mu);
    if (a->health.first_fault.status == 0 || a->fault_mended) {
        a->health.first_fault = d;
        a->fault_mended = false;
    }
    pthread_mutex_unlock(&a->health_mu);
    dv__stat_inc(&a->st_failures);
    /* Rebuild (or become LOST) before answering: a caller that sees
     * DV_ECONTEXT_LOST then finds the actor rebuilt or lost. */
    (void)dv__actor_rebuild(a, false);
    dv__fail_pending(a, DV_ECONTEXT_LOST, &d);
    /* The rebuild's own calls overwrote this thread's detail: the caller of
     * the failed operation gets the fault's. */
    *dv__detail() = d;
}

int dv__enqueue_failed(dv_actor *a, int rc, dv_stream s, const dv_envelope *e)
{
    if (rc == DV_ECONTEXT_LOST) {
        dv__on_fault(a, rc, s, e);
        return dv_last_error()->status;
    }
    return rc;
}

/*
 * When to look
 * ------------
 * The actor learns that the device finished something only by asking
 * (an event query), and asking costs its thread time.  Work of unknown
 * length is asked about less often the longer it takes (loop.c), which
 * makes the answer late by a share of the wait.  A transfer with
 * page-locked host memory has a length the actor can guess: its bytes
 * over the link's speed.  Each stream keeps a span of such transfers (from
 * the first enqueued while none was pending to the latest) and the time
 * the device should be done with them; a completion takes that time when
 * its batch's event is recorded, and the loop looks eagerly once it comes.
 * The speed is the fastest ever seen (span bytes over the time from the
 * span's start to a completion seen at its end), used a little
 * optimistically: a guess early costs a few looks, never lateness, and
 * before there is one the actor looks as it would without.
 */
#define ETA_OPTIMISM   0.9
#define ETA_MIN_BYTES  (UINT64_C(1) << 20) /* shorter spans teach nothing */

void dv__eta_transfer(dv_actor *a, dv_stream s, uint64_t bytes)
{
    dv_pending_fifo *q = &a->pend[s];
    if (!q->span_open) {
        q->span_open = true;
        q->span_start = dv__now_ns();
        q->span_bytes = 0;
    }
    q->span_bytes += bytes;
    q->eta = a->link_ns_per_byte > 0
                 ? q->span_start + (uint64_t)((double)q->span_bytes * a->link_ns_per_byte *
                                              ETA_OPTIMISM)
                 : 0;
}

/* Stream s was seen past p at time now: what it teaches of the link. */
static void eta_learn(dv_actor *a, dv_pending_fifo *q, const dv_pending *p, uint64_t now)
{
    if (p->span_bytes == 0)
        return;
    if (p->span_bytes >= ETA_MIN_BYTES && now > p->span_start) {
        double ns_per_byte = (double)(now - p->span_start) / (double)p->span_bytes;
        if (a->link_ns_per_byte == 0 || ns_per_byte < a->link_ns_per_byte)
            a->link_ns_per_byte = ns_per_byte;
    }
    /* The span's every transfer done: the next starts a new one. */
    if (q->span_open && p->span_start == q->span_start && p->span_bytes == q->span_bytes)
        q->span_open = false;
}

uint64_t dv__pending_eta(const dv_actor *a, bool *all_host)
{
    uint64_t eta = 0;
    *all_host = a->npending > 0;
    for (uint32_t s = 0; s < a->env.nstreams; s++) {
        const dv_pending_fifo *q = &a->pend[s];
        if (q->count == 0)
            continue;
        uint64_t e = q->items[q->head].eta;
        if (e != DV_ETA_HOST)
            *all_host = false;
        if (e != 0 && e != DV_ETA_HOST && (eta == 0 || e < eta))
            eta = e;
    }
    return eta;
}

/*
 * A staged copy cannot complete before its host side is done (the stream
 * waits for the host's words), and its pump says when that is: until
 * then the actor need not ask the device about its stream at all.  The
 * pump's word does not say which copy, so any clears every mark.
 */
void dv__pending_host_bound(dv_actor *a, dv_stream s)
{
    dv_pending_fifo *q = &a->pend[s];
    if (q->count > 0)
        q->items[(q->head + q->count - 1) % q->cap].eta = DV_ETA_HOST;
}

void dv__pending_host_done(dv_actor *a)
{
    for (uint32_t s = 0; s < a->env.nstreams; s++) {
        dv_pending_fifo *q = &a->pend[s];
        for (uint32_t i = 0; i < q->count; i++)
            if (q->items[(q->head + i) % q->cap].eta == DV_ETA_HOST)
                q->items[(q->head + i) % q->cap].eta = 0;
    }
}

/* rc from making, recording or asking a completion event on stream s.
 * A failure that is not the device's (no event to be had: memory, a
 * transient driver error) is no fault: the stream itself is asked
 * instead (never waited for: the actor's thread goes on), and once it is
 * idle what is pending there completes without an event (*idle); nothing
 * is rebuilt.  What remains is the device's. */
static int event_or_drained(dv_actor *a, dv_stream s, int rc, bool *idle)
{
    *idle = false;
    if (rc == DV_OK || dv__fault_of_device(rc))
        return rc;
    return dv__tracker_drained(a->done, s, idle);
}

void dv__poll_completions(dv_actor *a)
{
    uint64_t now = dv__now_ns();
    for (uint32_t s = 0; s < a->env.nstreams && a->npending > 0; s++) {
        dv_pending_fifo *q = &a->pend[s];
        while (q->count > 0) {
            dv_pending *p = &q->items[q->head];
            bool reached = false;
            int rc = dv__tracker_reached(a->done, (dv_stream_pos){s, p->epoch}, &reached);
            if (rc != DV_OK) {
                bool idle;
                if ((rc = event_or_drained(a, s, rc, &idle)) == DV_OK) {
                    if (idle)
                        continue; /* every mark there is passed */
                    break;        /* asked again at the next look */
                }
            }
            if (rc != DV_OK) {
                /* Asked even while a copy's host side is not done: that
                 * side may be waiting for the device's words, which a
                 * faulted device never writes (the fault ends its wait). */
                dv__on_fault(a, rc, s, NULL);
                return;
            }
            if (!reached || p->eta == DV_ETA_HOST)
                break; /* the device, or the copy's host side, is not done */
            /* Pop first: completing may let the caller reuse the future. */
            dv_pending done = *p;
            q->head = (q->head + 1) % q->cap;
            q->count--;
            if (q->unguessed > q->count)
                q->unguessed = q->count;
            a->npending--;
            eta_learn(a, q, &done, now);
            complete_pending(a, s, &done);
        }
    }
}

void dv__flush_marks(dv_actor *a)
{
    for (uint32_t s = 0; s < a->env.nstreams; s++) {
        dv_pending_fifo *q = &a->pend[s];
        if (!q->marked)
            continue;
        q->marked = false;
        /* The batch's completions end with its event: they take the
         * stream's guess as it is now. */
        for (uint32_t i = 0; i < q->unguessed; i++) {
            dv_pending *p = &q->items[(q->head + q->count - 1 - i) % q->cap];
            if (p->eta == DV_ETA_HOST)
                continue;
            p->eta = q->span_open ? q->eta : 0;
            p->span_start = q->span_open ? q->span_start : 0;
            p->span_bytes = q->span_open ? q->span_bytes : 0;
        }
        q->unguessed = 0;
        int rc = dv__tracker_flush(a->done, s);
        bool idle; /* not idle: the next look asks again */
        if (rc != DV_OK && (rc = event_or_drained(a, s, rc, &idle)) != DV_OK) {
            dv__on_fault(a, rc, s, NULL);
            return;
        }
    }
}

int dv__checked(dv_actor *a, int rc)
{
    if (rc == DV_EHAZARD) {
        dv__stat_inc(&a->st_hazards);
        pthread_mutex_lock(&a->health_mu);
        a->last_hazard = *dv_last_error();
        pthread_mutex_unlock(&a->health_mu);
    }
    return rc;
}
