/*
 * The public calls, on the caller's thread: check what can be checked at
 * once, post one message, and in a blocking form wait on a future on the
 * caller's stack.  Any thread may call everything here.
 *
 * One contract for every call that takes a future: when the call is
 * refused before anything is posted, it returns the error and the future
 * is complete with it too (a wait on it never hangs), provided the future
 * was set up with dv_future_init and is not in flight.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actor/actor.h"
#include "base/abi.h"
#include "base/futex.h"
#include "base/intern.h"

/* ------------------------------------------------------------------------
 * Posting
 * ------------------------------------------------------------------------ */

/* An _async call refused before posting: f completes with the error. */
static int refuse(dv_future *f, int rc, const char *op)
{
    if (f != NULL) {
        dv_error_detail saved = *dv_last_error();
        if (dv__future_arm(f, op) == DV_OK) {
            *dv__detail() = saved;
            dv__future_complete(f, rc);
        }
        *dv__detail() = saved;
    }
    return rc;
}

/*
 * Enter a post: name the actor in one of the thread's hazard slots, then
 * read its state.  Shutdown stores STOPPING and then waits until no thread
 * names the actor (base/fence.h): a poster either sees STOPPING or is
 * waited for, so nothing it enqueues is left behind.  On the fast path
 * neither side of that handshake is a locked instruction.
 */
static int post_enter(dv_actor *a, const char *op, dv_hazards **hz)
{
    int rc = dv__actor_here(a, op);
    if (rc != DV_OK)
        return rc;
    if (dv__driver_lost(a->drv, NULL))
        return dv__lost_answer(a);
    *hz = dv__hazards_mine();
    if (!dv__hazard_set(*hz, a))
        return dv__fail(DV_ENOMEM, "post", "post: out of host memory for the thread's state");
    /* After the hazard's fence (acquire costs nothing more here). */
    rc = dv__actor_refusing(a, op, op);
    if (rc != DV_OK)
        dv__hazard_clear(*hz);
    return rc;
}

static void post_leave(dv_hazards *hz)
{
    dv__hazard_clear(hz);
}

/* The calling thread's client of a; with the checker on, linked to what
 * the thread knows of a (its snapshots go with its messages). */
static dv_client *client_of(dv_actor *a)
{
    dv_client *c = dv__inbox_client(a->inbox);
    if (c != NULL && c->known == NULL && a->cfg.check_order && c->know.head == NULL) {
        if (dv__know_list_init(&c->know) != DV_OK)
            return c; /* unchecked knowledge: the thread counts as knowing nothing */
        c->known = dv__known_of(a->uid);
    }
    return c;
}

/* Into client c's ring.  An allocation takes its handle here, from the
 * thread's cache (into its future before the post publishes it, so every
 * waiter sees it), and gives it back if the post fails. */
static int enqueue(dv_actor *a, dv_client *c, dv_msg *m, bool try)
{
    /* What the thread learned since its last post goes with this one (a
     * failed post leaves it for the next, which takes the same number). */
    if (c->known != NULL)
        dv__know_send(&c->know, c->known, c->seq);
    if (m->type != DV_MSG_ALLOC)
        return dv__inbox_post(a->inbox, c, m, try);
    int rc = dv__ref_mint(a->refs, &c->refs, &m->u.alloc.ref);
    if (rc != DV_OK)
        return rc;
    if (m->reply != NULL)
        m->reply->ref = m->u.alloc.ref;
    if ((rc = dv__inbox_post(a->inbox, c, m, try)) != DV_OK) {
        dv__ref_unmint(a->refs, &c->refs, m->u.alloc.ref);
        if (m->reply != NULL)
            m->reply->ref = DV_REF_NULL;
    }
    return rc;
}

int dv__actor_post(dv_actor *a, dv_msg *m, dv_future *f)
{
    const char *op = dv__msg_name(m->type);
    int rc;
    if (a == NULL)
        return refuse(f, dv__fail(DV_EINVAL, op, "%s: NULL actor", op), op);
    if (f != NULL && (rc = dv__future_arm(f, op)) != DV_OK)
        return rc;
    return dv__actor_post_armed(a, m, f);
}

int dv__actor_post_armed(dv_actor *a, dv_msg *m, dv_future *f)
{
    const char *op = dv__msg_name(m->type);
    dv_hazards *hz;
    int rc;
    if ((rc = post_enter(a, op, &hz)) == DV_OK) {
        dv_client *c = client_of(a);
        m->reply = f;
        rc = c == NULL ? dv_last_error()->status
                       : enqueue(a, c, m, f != NULL && (f->flags & DV_FUTURE_TRY));
        post_leave(hz);
    }
    if (rc != DV_OK && f != NULL)
        dv__future_complete(f, rc);
    return rc;
}

int dv__actor_call(dv_actor *a, dv_msg *m, dv_future *own)
{
    dv_future_init(own, 0);
    /* Before anything is posted: refused, it leaves nothing behind. */
    int rc = dv__no_wait(dv__msg_name(m->type));
    if (rc != DV_OK)
        return rc;
    rc = dv__actor_post(a, m, own);
    return rc != DV_OK ? rc : dv_future_wait(own);
}

/* The calling thread's current query (dv_query_set). */
static _Thread_local uint64_t current_query;

/* Post m with f, or wait for it on a future of our own when f is NULL. */
static int call(dv_actor *a, dv_msg *m, dv_future *f)
{
    dv_future own;
    return f != NULL ? dv__actor_post(a, m, f) : dv__actor_call(a, m, &own);
}

static int check_stream(const dv_actor *a, dv_stream s, const char *op)
{
    if (a == NULL)
        return dv__fail(DV_EINVAL, op, "%s: NULL actor", op);
    if (s >= a->cfg.streams)
        return dv__fail(DV_EINVAL, op, "%s: unknown stream %u (the actor has %u)", op, s,
                        a->cfg.streams);
    return DV_OK;
}

/* ------------------------------------------------------------------------
 * Actors
 * ------------------------------------------------------------------------ */

int dv_actor_reset(dv_actor *a)
{
    dv_msg m = {.type = DV_MSG_RESET};
    return call(a, &m, NULL);
}

int dv_flush(dv_actor *a)
{
    dv_msg m = {.type = DV_MSG_FLUSH};
    return call(a, &m, NULL);
}

_Static_assert(sizeof(dv_actor_stats) >= DV_ABI_STATS_MIN, "dv_actor_stats only grows");

int dv_actor_stats_get_sized(dv_actor *a, dv_actor_stats *out, size_t size)
{
    if (out == NULL)
        return dv__fail(DV_EINVAL, "actor_stats", "actor_stats: NULL out");
    if (!dv__abi_size_ok(size, DV_ABI_STATS_MIN))
        return dv__fail(DV_EINVAL, "actor_stats", "actor_stats: size %zu (at least %u)", size,
                        DV_ABI_STATS_MIN);
    dv_actor_stats full;
    dv_msg m = {.type = DV_MSG_STATS, .u.stats = {&full}};
    int rc = call(a, &m, NULL);
    if (rc == DV_OK)
        dv__abi_copy_out(out, size, &full, sizeof(full));
    return rc;
}

/* ------------------------------------------------------------------------
 * Memory statistics, by tag and query, and snapshots
 * ------------------------------------------------------------------------ */

_Static_assert(sizeof(dv_memory_stats) >= DV_ABI_MEMORY_STATS_MIN, "dv_memory_stats only grows");

uint64_t dv_query_set(uint64_t query_id)
{
    uint64_t was = current_query;
    current_query = query_id;
    return was;
}

uint64_t dv_query_get(void)
{
    return current_query;
}

static int memory_call(dv_actor *a, dv_stats_kind kind, void *out, size_t cap, size_t *count,
                       int by, const char *op)
{
    if (a == NULL)
        return dv__fail(DV_EINVAL, op, "%s: NULL actor", op);
    dv_msg m = {.type = DV_MSG_STATS,
                .u.stats = {.out = out, .cap = cap, .count = count, .kind = (uint8_t)kind,
                            .by = (uint8_t)by}};
    return call(a, &m, NULL);
}

int dv_actor_resources(dv_actor *a, int (*fn)(struct dv_resource *top, void *user), void *user)
{
    if (fn == NULL)
        return dv__fail(DV_EINVAL, "actor_resources", "actor_resources: NULL function");
    dv_stack_visit v = {fn, user};
    return memory_call(a, DV_STATS_VISIT, &v, 0, NULL, 0, "actor_resources");
}

int dv_memory_stats_get_sized(dv_actor *a, dv_memory_stats *out, size_t size)
{
    if (out == NULL)
        return dv__fail(DV_EINVAL, "memory_stats", "memory_stats: NULL out");
    if (!dv__abi_size_ok(size, DV_ABI_MEMORY_STATS_MIN))
        return dv__fail(DV_EINVAL, "memory_stats", "memory_stats: size %zu (at least %u)", size,
                        DV_ABI_MEMORY_STATS_MIN);
    dv_memory_stats full;
    int rc = memory_call(a, DV_STATS_MEMORY, &full, 0, NULL, 0, "memory_stats");
    if (rc == DV_OK)
        dv__abi_copy_out(out, size, &full, sizeof(full));
    return rc;
}

int dv_memory_reset_peaks(dv_actor *a)
{
    return memory_call(a, DV_STATS_RESET_PEAKS, NULL, 0, NULL, 0, "memory_reset_peaks");
}

int dv_memory_usage_get(dv_actor *a, dv_memory_key by, dv_memory_usage *rows, size_t cap,
                        size_t *count)
{
    if (rows == NULL && cap > 0)
        return dv__fail(DV_EINVAL, "memory_usage", "memory_usage: NULL rows for %zu", cap);
    if (by != DV_MEMORY_BY_TAG && by != DV_MEMORY_BY_QUERY)
        return dv__fail(DV_EINVAL, "memory_usage", "memory_usage: key %d (by tag %d, by query %d)",
                        (int)by, DV_MEMORY_BY_TAG, DV_MEMORY_BY_QUERY);
    size_t n = 0;
    int rc = memory_call(a, DV_STATS_USAGE, rows, cap, &n, by, "memory_usage");
    if (rc == DV_OK && count != NULL)
        *count = n;
    return rc;
}

static void csv_text(FILE *f, const char *s)
{
    if (strpbrk(s, ",\"\r\n") == NULL) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s != '\0'; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int dv_memory_snapshot(dv_actor *a, const char *path)
{
    if (path == NULL || *path == '\0')
        return dv__fail(DV_EINVAL, "memory_snapshot", "memory_snapshot: no path");
    dv_snapshot_row *rows = NULL;
    size_t n = 0;
    int rc = memory_call(a, DV_STATS_SNAPSHOT, &rows, 0, &n, 0, "memory_snapshot");
    if (rc != DV_OK)
        return rc;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    bool out = strcmp(path, "-") == 0;
    FILE *f = out ? stdout : fopen(path, "w");
    if (f == NULL) {
        free(rows);
        return dv__fail(DV_EIO, "memory_snapshot", "memory_snapshot: %s: %s", path,
                        strerror(errno));
    }
    fputs("Pointer,Size,Requested,Stream,Device,Tag,QueryId,Thread,Time,Age\n", f);
    for (size_t i = 0; i < n; i++) {
        const dv_snapshot_row *r = &rows[i];
        uint64_t age = now_ns > r->born ? now_ns - r->born : 0;
        fprintf(f, "0x%" PRIx64 ",%" PRIu64 ",%" PRIu64 ",%u,%d,", r->ptr, r->bytes, r->requested,
                r->stream, r->device);
        csv_text(f, r->tag != NULL ? r->tag : "");
        fprintf(f, ",%" PRIu64 ",%u,%" PRIu64 ".%06" PRIu64 ",%" PRIu64 ".%03" PRIu64 "\n",
                r->query, r->poster, r->born / 1000000000u, r->born % 1000000000u / 1000u,
                age / 1000000000u, age % 1000000000u / 1000000u);
    }
    free(rows);
    bool failed = ferror(f) != 0;
    if (out)
        failed |= fflush(f) != 0;
    else
        failed |= fclose(f) != 0;
    if (failed)
        return dv__fail(DV_EIO, "memory_snapshot", "memory_snapshot: %s: write failed", path);
    return DV_OK;
}

int dv_actor_last_hazard(dv_actor *a, dv_error_detail *out)
{
    if (a == NULL || out == NULL)
        return dv__fail(DV_EINVAL, "actor_last_hazard", "actor_last_hazard: NULL argument");
    int here = dv__actor_here(a, "actor_last_hazard");
    if (here != DV_OK)
        return here;
    pthread_mutex_lock(&a->health_mu);
    *out = a->last_hazard;
    pthread_mutex_unlock(&a->health_mu);
    return DV_OK;
}

/* ------------------------------------------------------------------------
 * Memory
 * ------------------------------------------------------------------------ */

static int alloc_post(dv_actor *a, uint64_t bytes, dv_stream stream, const char *tag, dv_ref *out,
                      dv_future *f)
{
    static const char op[] = "alloc";
    int rc;
    if (out != NULL)
        *out = DV_REF_NULL;
    if ((rc = check_stream(a, stream, op)) != DV_OK)
        return refuse(f, rc, op);
    if (bytes == 0 || bytes > DV_DRV_MAX_BYTES)
        return refuse(f,
                      dv__fail(DV_EINVAL, op, "alloc: size %llu is %s", (unsigned long long)bytes,
                               bytes == 0 ? "zero" : "absurd"),
                      op);
    dv_msg m = {.type = DV_MSG_ALLOC,
                .stream = (uint16_t)stream,
                .u.alloc = {.bytes = bytes, .tag = dv__intern(tag), .query = current_query}};
    if ((rc = dv__actor_post(a, &m, f)) != DV_OK)
        return rc;
    if (out != NULL)
        *out = m.u.alloc.ref;
    return DV_OK;
}

int dv_alloc(dv_actor *a, uint64_t bytes, dv_stream stream, const char *tag, dv_ref *out)
{
    if (out == NULL)
        return dv__fail(DV_EINVAL, "alloc", "alloc: NULL out");
    return alloc_post(a, bytes, stream, tag, out, NULL);
}

int dv_alloc_async(dv_actor *a, uint64_t bytes, dv_stream stream, const char *tag, dv_ref *out,
                   dv_future *f)
{
    if (f == NULL)
        return dv__fail(DV_EINVAL, "alloc", "alloc_async: NULL future");
    return alloc_post(a, bytes, stream, tag, out, f);
}

static int alloc_wait_loop(dv_actor *a, uint64_t bytes, dv_stream stream, const char *tag,
                           uint64_t deadline, dv_ref *out);

int dv_alloc_wait(dv_actor *a, uint64_t bytes, dv_stream stream, const char *tag,
                  uint64_t timeout_ns, dv_ref *out)
{
    static const char op[] = "alloc_wait";
    int rc;
    if (out == NULL)
        return dv__fail(DV_EINVAL, op, "alloc_wait: NULL out");
    *out = DV_REF_NULL;
    if ((rc = check_stream(a, stream, op)) != DV_OK || (rc = dv__no_wait(op)) != DV_OK)
        return rc;
    uint64_t deadline = dv__now_ns() + (timeout_ns < UINT64_MAX / 2 ? timeout_ns : UINT64_MAX / 2);
    /* From before the first try, so that no release is missed. */
    atomic_fetch_add(&a->mem_interest, 1);
    rc = alloc_wait_loop(a, bytes, stream, tag, deadline, out);
    atomic_fetch_sub(&a->mem_interest, 1);
    return rc;
}

/* Shut down or lost: the try that follows answers so at once. */
static bool memory_ends(dv_actor *a)
{
    int st = atomic_load_explicit(&a->state, memory_order_acquire);
    return st == DV_ACTOR_STOPPING || st == DV_ACTOR_STOPPED || st == DV_ACTOR_LOST;
}

/* dv_alloc_wait looks at the other clients at least this often. */
#define WAIT_SLICE_NS 50000000u /* 50 ms */

static int alloc_wait_loop(dv_actor *a, uint64_t bytes, dv_stream stream, const char *tag,
                           uint64_t deadline, dv_ref *out)
{
    int rc;
    for (;;) {
        /* Read before the try: a release after it shows as a new value. */
        uint32_t seen = atomic_load_explicit(&a->mem_released, memory_order_acquire);
        dv_future f;
        dv_ref ref;
        dv_future_init(&f, 0);
        if ((rc = alloc_post(a, bytes, stream, tag, &ref, &f)) != DV_OK)
            return rc;
        rc = dv_future_wait(&f);
        if (rc == DV_OK) {
            *out = ref;
            return DV_OK;
        }
        dv_error_detail why = *dv_last_error();
        (void)dv_ref_release(ref); /* the refused handle */
        *dv__detail() = why;
        uint64_t now = dv__now_ns();
        if (!dv__short_of_memory(rc) || now >= deadline)
            return rc;
        atomic_fetch_add(&a->mem_waiters, 1);
        /* Until a release (then try again) or the deadline; in slices, to
         * look at the other clients again: one may exit meanwhile.  Threads
         * that exited count only while their messages are still to be
         * taken (a free among them may release). */
        while (atomic_load_explicit(&a->mem_released, memory_order_acquire) == seen &&
               now < deadline && !memory_ends(a)) {
            uint32_t live = dv__inbox_live_clients(a->inbox, a);
            /* Every client thread left waits (the last to join, or one
             * that waited already when a thread that did not wait exited):
             * nobody would release anything.  One of them is refused, the
             * first to see it (taking itself off the count, so that the
             * others go on waiting for what it does next). */
            uint32_t w = atomic_load(&a->mem_waiters);
            bool all = false;
            while (w >= live && w != 0 &&
                   !(all = atomic_compare_exchange_weak(&a->mem_waiters, &w, w - 1)))
                ;
            if (all || live <= 1) {
                if (atomic_load_explicit(&a->mem_released, memory_order_acquire) != seen) {
                    /* Released meanwhile (the count may have missed the
                     * one who did): try again. */
                    if (all)
                        atomic_fetch_add(&a->mem_waiters, 1);
                    continue;
                }
                if (!all)
                    atomic_fetch_sub(&a->mem_waiters, 1);
                dv__detail_append("; all %u client threads wait: the last is refused",
                                  live != 0 ? live : 1);
                return rc;
            }
            uint64_t until = deadline - now > WAIT_SLICE_NS ? now + WAIT_SLICE_NS : deadline;
            struct timespec ts = {(time_t)(until / 1000000000u), (long)(until % 1000000000u)};
            /* A release between the read and here changed the value. */
            dv__futex_wait(&a->mem_released, seen, &ts);
            now = dv__now_ns();
        }
        atomic_fetch_sub(&a->mem_waiters, 1);
    }
}

static int host_op(dv_actor *a, uint8_t type, dv_ref ref, uint64_t off, const void *host,
                   uint64_t bytes, dv_stream stream, dv_future *f)
{
    const char *op = dv__msg_name(type);
    int rc = check_stream(a, stream, op);
    if (rc == DV_OK)
        rc = dv__actor_here(a, op);
    if (rc == DV_OK && host == NULL)
        rc = dv__fail(DV_EINVAL, op, "%s: NULL host buffer", op);
    if (rc == DV_OK && (bytes == 0 || bytes > DV_DRV_MAX_BYTES))
        rc = dv__fail(DV_EINVAL, op, "%s: %llu bytes", op, (unsigned long long)bytes);
    if (rc != DV_OK)
        return refuse(f, rc, op);
    /* Pageable memory is staged (staging.h), unless the staging is off. */
    if (!dv__host_pinned(&a->host, host, bytes) &&
        (rc = dv__staged_copy(a, type, ref, off, (void *)host, bytes, stream, f)) != DV_ENOTSUP)
        return rc;
    dv_msg m = {.type = type,
                .stream = (uint16_t)stream,
                .u.copy = {.dev = ref, .offset = off, .other.host = (void *)host, .bytes = bytes}};
    return call(a, &m, f);
}

int dv_copy_htod(dv_actor *a, dv_ref dst, uint64_t off, const void *src, uint64_t bytes,
                 dv_stream stream)
{
    return host_op(a, DV_MSG_HTOD, dst, off, src, bytes, stream, NULL);
}

int dv_copy_htod_async(dv_actor *a, dv_ref dst, uint64_t off, const void *src, uint64_t bytes,
                       dv_stream stream, dv_future *f)
{
    if (f == NULL)
        return dv__fail(DV_EINVAL, "copy_htod", "copy_htod_async: NULL future");
    return host_op(a, DV_MSG_HTOD, dst, off, src, bytes, stream, f);
}

int dv_copy_dtoh(dv_actor *a, void *dst, dv_ref src, uint64_t off, uint64_t bytes, dv_stream stream)
{
    return host_op(a, DV_MSG_DTOH, src, off, dst, bytes, stream, NULL);
}

int dv_copy_dtoh_async(dv_actor *a, void *dst, dv_ref src, uint64_t off, uint64_t bytes,
                       dv_stream stream, dv_future *f)
{
    if (f == NULL)
        return dv__fail(DV_EINVAL, "copy_dtoh", "copy_dtoh_async: NULL future");
    return host_op(a, DV_MSG_DTOH, src, off, dst, bytes, stream, f);
}

/* ------------------------------------------------------------------------
 * Host memory (host.h)
 * ------------------------------------------------------------------------ */

static int hostmem_call(dv_actor *a, uint8_t type, void *ptr, uint64_t bytes, dv_future *own)
{
    dv_msg m = {.type = type, .u.hostmem = {.ptr = ptr, .bytes = bytes}};
    return dv__actor_call(a, &m, own);
}

int dv_host_alloc(dv_actor *a, uint64_t bytes, void **out)
{
    static const char op[] = "host_alloc";
    if (out == NULL)
        return dv__fail(DV_EINVAL, op, "host_alloc: NULL out");
    *out = NULL;
    if (a == NULL)
        return dv__fail(DV_EINVAL, op, "host_alloc: NULL actor");
    if (bytes == 0 || bytes > DV_DRV_MAX_BYTES)
        return dv__fail(DV_EINVAL, op, "host_alloc: size %llu is %s", (unsigned long long)bytes,
                        bytes == 0 ? "zero" : "absurd");
    dv_future own;
    int rc = hostmem_call(a, DV_MSG_HOST_ALLOC, NULL, bytes, &own);
    if (rc == DV_OK)
        *out = (void *)(uintptr_t)own.value;
    return rc;
}

int dv_host_free(dv_actor *a, void *ptr)
{
    if (a == NULL || ptr == NULL)
        return dv__fail(DV_EINVAL, "host_free", "host_free: NULL %s", a == NULL ? "actor" : "ptr");
    dv_future own;
    return hostmem_call(a, DV_MSG_HOST_FREE, ptr, 0, &own);
}

int dv_host_register(dv_actor *a, void *ptr, uint64_t bytes)
{
    static const char op[] = "host_register";
    if (a == NULL || ptr == NULL)
        return dv__fail(DV_EINVAL, op, "host_register: NULL %s", a == NULL ? "actor" : "ptr");
    if (bytes == 0 || bytes > DV_DRV_MAX_BYTES || (uintptr_t)ptr + bytes < (uintptr_t)ptr)
        return dv__fail(DV_EINVAL, op, "host_register: size %llu is %s",
                        (unsigned long long)bytes, bytes == 0 ? "zero" : "absurd");
    dv_future own;
    return hostmem_call(a, DV_MSG_HOST_REGISTER, ptr, bytes, &own);
}

int dv_host_unregister(dv_actor *a, void *ptr)
{
    if (a == NULL || ptr == NULL)
        return dv__fail(DV_EINVAL, "host_unregister", "host_unregister: NULL %s",
                        a == NULL ? "actor" : "ptr");
    dv_future own;
    return hostmem_call(a, DV_MSG_HOST_UNREGISTER, ptr, 0, &own);
}

static int memset_msg(dv_actor *a, dv_ref dst, uint64_t off, uint8_t value, uint64_t bytes,
                      dv_stream stream, dv_future *f)
{
    int rc = check_stream(a, stream, "memset");
    if (rc != DV_OK)
        return refuse(f, rc, "memset");
    dv_msg m = {.type = DV_MSG_MEMSET,
                .stream = (uint16_t)stream,
                .u.memset = {.dst = dst, .offset = off, .bytes = bytes, .value = value}};
    return call(a, &m, f);
}

int dv_memset(dv_actor *a, dv_ref dst, uint64_t off, uint8_t value, uint64_t bytes,
              dv_stream stream)
{
    return memset_msg(a, dst, off, value, bytes, stream, NULL);
}

int dv_memset_async(dv_actor *a, dv_ref dst, uint64_t off, uint8_t value, uint64_t bytes,
                    dv_stream stream, dv_future *f)
{
    if (f == NULL)
        return dv__fail(DV_EINVAL, "memset", "memset_async: NULL future");
    return memset_msg(a, dst, off, value, bytes, stream, f);
}

/*
 * A copy from a block of one actor to a block of another: the source's
 * actor fences the block for reading (earlier writes done), then the
 * destination's actor copies.  The source stays retained until the copy
 * finished, so this waits on the calling thread even for the async form
 * (whose future is complete when it returns).  Both actors must share a
 * driver.
 */
static int peer_copy(dv_actor *a, dv_ref dst, uint64_t doff, dv_ref src, uint64_t soff,
                     uint64_t bytes, dv_stream stream)
{
    static const char op[] = "copy_peer";
    dv_actor *src_actor = dv__actor_of_ref(src);
    dv_ref_info info;
    dv_future own;
    int rc;

    if (src_actor == NULL)
        return dv__fail(DV_ESTALE, op, "copy_peer: the source's actor is gone");
    if (src_actor->drv != a->drv)
        return dv__fail(DV_EINVAL, op,
                        "copy_peer: devices %d and %d are served by different drivers",
                        src_actor->device, a->device);
    if ((rc = dv_ref_retain(src)) != DV_OK)
        return rc;
    if ((rc = dv_ref_access(src, &info)) != DV_OK)
        goto out;
    if (bytes == 0 || soff > info.requested || bytes > info.requested - soff) {
        rc = dv__fail(DV_EINVAL, op, "copy_peer: source range outside its %llu bytes",
                      (unsigned long long)info.requested);
        goto out;
    }
    dv_msg fence = {.type = DV_MSG_PEER_READ,
                    .stream = 0,
                    .u.peer = {.ref = src, .offset = soff, .bytes = bytes}};
    if ((rc = dv__actor_call(src_actor, &fence, &own)) != DV_OK)
        goto out;
    dv_msg copy = {.type = DV_MSG_PEER_COPY,
                   .stream = (uint16_t)stream,
                   .u.peer = {.ref = dst,
                              .offset = doff,
                              .bytes = bytes,
                              .src_ptr = info.ptr + soff,
                              .src_actor = src_actor}};
    rc = dv__actor_call(a, &copy, &own);
out : {
    dv_error_detail saved = *dv_last_error();
    (void)dv_ref_release(src);
    *dv__detail() = saved;
}
    return rc;
}

int dv_copy_dtod(dv_actor *a, dv_ref dst, uint64_t doff, dv_ref src, uint64_t soff, uint64_t bytes,
                 dv_stream stream)
{
    dv_future own;
    dv_future_init(&own, 0);
    int rc = dv__no_wait("copy device->device");
    if (rc != DV_OK)
        return rc;
    rc = dv_copy_dtod_async(a, dst, doff, src, soff, bytes, stream, &own);
    return rc != DV_OK ? rc : dv_future_wait(&own);
}

int dv_copy_dtod_async(dv_actor *a, dv_ref dst, uint64_t doff, dv_ref src, uint64_t soff,
                       uint64_t bytes, dv_stream stream, dv_future *f)
{
    static const char op[] = "copy device->device";
    if (f == NULL)
        return dv__fail(DV_EINVAL, "copy_dtod", "copy_dtod_async: NULL future");
    int rc = check_stream(a, stream, op);
    if (rc != DV_OK)
        return refuse(f, rc, op);
    uint8_t sd = (uint8_t)(src.bits >> 56), dd = (uint8_t)(dst.bits >> 56);
    if (sd != dd && sd != 0 && dd != 0) {
        if ((rc = dv__future_arm(f, op)) != DV_OK)
            return rc;
        rc = peer_copy(a, dst, doff, src, soff, bytes, stream);
        dv__future_complete(f, rc);
        return rc;
    }
    dv_msg m = {
        .type = DV_MSG_DTOD,
        .stream = (uint16_t)stream,
        .u.copy = {
            .dev = dst, .offset = doff, .other.src = src, .src_offset = soff, .bytes = bytes}};
    return dv__actor_post(a, &m, f);
}

static int sync_msg(dv_actor *a, dv_stream stream, dv_future *f)
{
    int rc = check_stream(a, stream, "sync");
    if (rc != DV_OK)
        return refuse(f, rc, "sync");
    dv_msg m = {.type = DV_MSG_SYNC, .stream = (uint16_t)stream};
    return call(a, &m, f);
}

int dv_sync(dv_actor *a, dv_stream stream)
{
    return sync_msg(a, stream, NULL);
}

int dv_sync_async(dv_actor *a, dv_stream stream, dv_future *f)
{
    if (f == NULL)
        return dv__fail(DV_EINVAL, "sync", "sync_async: NULL future");
    return sync_msg(a, stream, f);
}

/* ------------------------------------------------------------------------
 * Kernels, launches, tasks
 * ------------------------------------------------------------------------ */

int dv_kernel_get(dv_actor *a, const void *image, size_t image_bytes, const char *name,
                  dv_kernel **out)
{
    if (out != NULL)
        *out = NULL; /* as every failure leaves it */
    if (out == NULL || name == NULL || name[0] == '\0')
        return dv__fail(DV_EINVAL, "kernel_get", "kernel_get: NULL out or empty name");
    if (image != NULL && image_bytes == 0)
        return dv__fail(DV_EINVAL, "kernel_get", "kernel_get: an image of 0 bytes");
    dv_future f;
    dv_msg m = {.type = DV_MSG_KERNEL_GET,
                .u.kernel_get = {.image = image, .image_bytes = image_bytes, .name = name}};
    int rc = dv__actor_call(a, &m, &f);
    if (rc == DV_OK)
        *out = (dv_kernel *)(uintptr_t)f.value;
    return rc;
}

static int launch_msg(dv_actor *a, dv_kernel *k, dv_dim3 grid, dv_dim3 block, uint32_t shared,
                      dv_stream stream, const dv_arg *args, unsigned nargs, dv_future *f)
{
    static const char op[] = "launch";
    int rc = check_stream(a, stream, op);
    if (rc == DV_OK && (k == NULL || (nargs > 0 && args == NULL) || nargs > DV_LAUNCH_MAX_ARGS))
        rc = dv__fail(DV_EINVAL, op, "launch: NULL kernel or args, or %u arguments (at most %d)",
                      nargs, DV_LAUNCH_MAX_ARGS);
    if (rc == DV_OK && (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 ||
                        block.z == 0 || grid.y > 0xffff || grid.z > 0xffff || block.x > 1024 ||
                        block.y > 1024 || block.z > 64))
        rc = dv__fail(DV_EINVAL, op, "launch: grid %ux%ux%u block %ux%ux%u out of range", grid.x,
                      grid.y, grid.z, block.x, block.y, block.z);
    if (rc != DV_OK)
        return refuse(f, rc, op);
    dv_msg m = {.type = DV_MSG_LAUNCH,
                .stream = (uint16_t)stream,
                .u.launch = {.kernel = k,
                             .args = args,
                             .shared_bytes = shared,
                             .grid_x = grid.x,
                             .grid_y = (uint16_t)grid.y,
                             .grid_z = (uint16_t)grid.z,
                             .block_x = (uint16_t)block.x,
                             .block_y = (uint16_t)block.y,
                             .block_z = (uint16_t)block.z,
                             .nargs = (uint8_t)nargs}};
    return call(a, &m, f);
}

int dv_launch(dv_actor *a, dv_kernel *k, dv_dim3 grid, dv_dim3 block, uint32_t shared,
              dv_stream stream, const dv_arg *args, unsigned nargs)
{
    return launch_msg(a, k, grid, block, shared, stream, args, nargs, NULL);
}

int dv_launch_async(dv_actor *a, dv_kernel *k, dv_dim3 grid, dv_dim3 block, uint32_t shared,
                    dv_stream stream, const dv_arg *args, unsigned nargs, dv_future *f)
{
    if (f == NULL)
        return dv__fail(DV_EINVAL, "launch", "launch_async: NULL future");
    return launch_msg(a, k, grid, block, shared, stream, args, nargs, f);
}

static int task_msg(dv_actor *a, dv_task_fn fn, void *user, dv_stream stream, const dv_arg *args,
                    unsigned nargs, dv_future *f)
{
    int rc = check_stream(a, stream, "task");
    if (rc == DV_OK && (fn == NULL || (nargs > 0 && args == NULL) || nargs > DV_LAUNCH_MAX_ARGS))
        rc =
            dv__fail(DV_EINVAL, "task", "task: NULL function or args, or %u arguments (at most %d)",
                     nargs, DV_LAUNCH_MAX_ARGS);
    if (rc != DV_OK)
        return refuse(f, rc, "task");
    dv_msg m = {.type = DV_MSG_TASK,
                .stream = (uint16_t)stream,
                .u.task = {.fn = fn, .user = user, .args = args, .nargs = (uint8_t)nargs}};
    return call(a, &m, f);
}

int dv_task(dv_actor *a, dv_task_fn fn, void *user, dv_stream stream, const dv_arg *args,
            unsigned nargs)
{
    return task_msg(a, fn, user, stream, args, nargs, NULL);
}

int dv_task_async(dv_actor *a, dv_task_fn fn, void *user, dv_stream stream, const dv_arg *args,
                  unsigned nargs, dv_future *f)
{
    if (f == NULL)
        return dv__fail(DV_EINVAL, "task", "task_async: NULL future");
    return task_msg(a, fn, user, stream, args, nargs, f);
}

int dv_check_host_access(dv_actor *a, const void *ptr, uint64_t bytes, dv_arg_access access)
{
    if (a == NULL || ptr == NULL || bytes == 0 || bytes > UINTPTR_MAX - (uintptr_t)ptr ||
        access < DV_READ || access > DV_READ_WRITE)
        return dv__fail(DV_EINVAL, "check_host_access", "check_host_access: %s",
                        a == NULL     ? "NULL actor"
                        : ptr == NULL ? "NULL buffer"
                        : bytes == 0  ? "zero bytes"
                        : access < DV_READ || access > DV_READ_WRITE
                            ? "access is not DV_READ, DV_WRITE or DV_READ_WRITE"
                            : "the range wraps past the end of the address space");
    int here = dv__actor_here(a, "check_host_access");
    if (here != DV_OK)
        return here;
    if (!a->cfg.check_order)
        return DV_OK;
    dv_msg m = {.type = DV_MSG_HOST_ACCESS,
                .u.host = {.ptr = (uintptr_t)ptr, .bytes = bytes, .access = (uint8_t)access}};
    return call(a, &m, NULL);
}

_Static_assert(DV_ORDER_STREAMS == DV_KNOWN_STREAMS, "a token holds a whole clock");

int dv_order_export(dv_actor *a, dv_order_token *out)
{
    static const char op[] = "order_export";
    if (a == NULL || out == NULL)
        return dv__fail(DV_EINVAL, op, "%s: NULL %s", op, a == NULL ? "actor" : "token");
    int here = dv__actor_here(a, op);
    if (here != DV_OK)
        return here;
    memset(out, 0, sizeof(*out));
    out->actor = a->uid;
    if (!a->cfg.check_order)
        return DV_OK; /* nothing to hand over */
    dv_known *k = dv__known_of(a->uid);
    if (k == NULL)
        return dv__fail(DV_ENOMEM, op, "%s: out of host memory for the thread's knowledge", op);
    out->context = dv__ref_domain_context(a->refs);
    if (k->context != out->context)
        return DV_OK; /* it knows nothing of this context: an empty token */
    out->streams = DV_ORDER_STREAMS;
    memcpy(out->clock, k->vc, sizeof(out->clock));
    return DV_OK;
}

int dv_order_adopt(dv_actor *a, const dv_order_token *t)
{
    static const char op[] = "order_adopt";
    if (a == NULL || t == NULL)
        return dv__fail(DV_EINVAL, op, "%s: NULL %s", op, a == NULL ? "actor" : "token");
    int here = dv__actor_here(a, op);
    if (here != DV_OK)
        return here;
    if (t->streams == 0)
        return DV_OK; /* empty (all zeros, or exported knowing nothing): from anywhere */
    if (t->actor != a->uid)
        return dv__fail(DV_EINVAL, op, "%s: the token was exported from another actor", op);
    if (t->streams > DV_ORDER_STREAMS)
        return dv__fail(DV_EINVAL, op, "%s: a token of %u streams (at most %u)", op, t->streams,
                        DV_ORDER_STREAMS);
    if (!a->cfg.check_order)
        return DV_OK;
    uint64_t now = dv__ref_domain_context(a->refs);
    if (t->context < now)
        return dv__fail(DV_ESTALE, op,
                        "%s: the token is of a context since rebuilt (%llu; now %llu): it orders "
                        "nothing now",
                        op, (unsigned long long)t->context, (unsigned long long)now);
    if (t->context > now) /* no export gives one: nothing learned, nothing forgotten */
        return dv__fail(DV_EINVAL, op,
                        "%s: the token is of context %llu, which this actor never had (now %llu)",
                        op, (unsigned long long)t->context, (unsigned long long)now);
    if (dv__known_of(a->uid) == NULL)
        return dv__fail(DV_ENOMEM, op, "%s: out of host memory for the thread's knowledge", op);
    dv__known_absorb(a->uid, t->context, t->clock, t->streams);
    return DV_OK;
}
