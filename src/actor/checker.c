/*
 * The stream-order checker (see checker.h for the design).
 */
#include "actor/checker.h"

_Static_assert(DV_MAX_STREAMS <= DV_KNOWN_STREAMS, "a client's knowledge covers every stream");

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One operation's stamp: its sequence number on its stream (or the host). */
typedef struct chk_stamp {
    uint64_t seq; /* 0: none */
    const char *name;
    uint32_t comp; /* stream, or the host's index */
    uint32_t producer, msg;
    uint8_t kind;
} chk_stamp;

typedef struct chk_rec {
    uint64_t lo, hi;
    struct chk_rec *l, *r;
    uint32_t prio;
    bool freed;
    const char *tag;
    chk_stamp write;   /* the last write (an allocation counts as one) */
    chk_stamp freeop;  /* the free, once freed */
    chk_stamp reads[]; /* outstanding reads, one per stream */
} chk_rec;

/* An event's clock, as of its last record. */
typedef struct ev_shadow {
    dv_checker *owner;
    struct ev_shadow *next, *prev;
    dv_drv_event *event;
    uint64_t vc[];
} ev_shadow;

struct dv_checker {
    dv_res_env *env;
    uint32_t ns, nc; /* streams; clock components (streams + host) */
    bool check_reuse;
    uint64_t context; /* the context generation it checks */
    dv_drv_observer obs;
    uint64_t *vc; /* nc rows of nc: row s is stream s, row ns the host */
    uint64_t rng;
    chk_rec *root;  /* device records, disjoint, by start */
    chk_rec **host; /* host buffers' records (may overlap) */
    uint32_t nhost, cap_host, host_sweep_at;
    ev_shadow events;     /* list head of the event shadows made */
    uint64_t *tmp, *tmp2; /* clocks for one check */
    chk_rec **scratch;    /* overlapping records of one query */
    uint32_t nscratch, cap_scratch;
};

static inline uint64_t *row(dv_checker *c, uint32_t comp)
{
    return c->vc + (size_t)comp * c->nc;
}

static void vc_merge(dv_checker *c, uint64_t *dst, const uint64_t *src)
{
    for (uint32_t i = 0; i < c->nc; i++)
        if (src[i] > dst[i])
            dst[i] = src[i];
}

uint64_t dv__checker_stream_seq(const dv_checker *c, uint32_t stream)
{
    return stream < c->ns ? c->vc[(size_t)stream * c->nc + stream] : 0;
}

/* V := what a client knows complete (per stream; the host part unknown).
 * Knowledge of another context counts for nothing. */
static void client_clock(dv_checker *c, const dv_known *k, uint64_t *V)
{
    memset(V, 0, c->nc * sizeof(uint64_t));
    if (k == NULL ||
        atomic_load_explicit(&((dv_known *)k)->context, memory_order_relaxed) != c->context)
        return;
    for (uint32_t s = 0; s < c->ns && s < DV_MAX_STREAMS; s++)
        V[s] = atomic_load_explicit(&((dv_known *)k)->seq[s], memory_order_relaxed);
}

/* The stream index of a driver stream of this context, or UINT32_MAX. */
static uint32_t comp_of(dv_checker *c, dv_drv_stream *st)
{
    uintptr_t v = (uintptr_t)*dv__drv_shadow(st);
    return v == 0 || v > c->ns ? UINT32_MAX : (uint32_t)(v - 1);
}

/* ------------------------------------------------------------------------
 * Observer hooks (the port calls them on the actor's thread)
 * ------------------------------------------------------------------------ */

static void on_record(void *self, dv_drv_event *ev, dv_drv_stream *st)
{
    dv_checker *c = self;
    uint32_t s = comp_of(c, st);
    ev_shadow **slot = (ev_shadow **)dv__drv_shadow(ev);
    ev_shadow *e = *slot;

    if (s == UINT32_MAX)
        return;
    if (e == NULL || e->owner != c) {
        e = calloc(1, sizeof(*e) + c->nc * sizeof(uint64_t));
        if (e == NULL)
            return; /* the event stays unknown: a wait on it orders nothing */
        e->owner = c;
        e->event = ev;
        e->next = c->events.next;
        e->prev = &c->events;
        c->events.next->prev = e;
        c->events.next = e;
        *slot = e;
    }
    vc_merge(c, row(c, s), row(c, c->ns));
    memcpy(e->vc, row(c, s), c->nc * sizeof(uint64_t));
}

static void on_wait(void *self, dv_drv_stream *st, dv_drv_event *ev)
{
    dv_checker *c = self;
    uint32_t s = comp_of(c, st);
    ev_shadow *e = *(ev_shadow **)dv__drv_shadow(ev);
    if (s != UINT32_MAX && e != NULL && e->owner == c)
        vc_merge(c, row(c, s), e->vc);
}

static void on_event_done(void *self, dv_drv_event *ev)
{
    dv_checker *c = self;
    ev_shadow *e = *(ev_shadow **)dv__drv_shadow(ev);
    if (e != NULL && e->owner == c)
        vc_merge(c, row(c, c->ns), e->vc);
}

static void on_stream_done(void *self, dv_drv_stream *st)
{
    dv_checker *c = self;
    uint32_t s = comp_of(c, st);
    if (s != UINT32_MAX)
        vc_merge(c, row(c, c->ns), row(c, s));
}

static void shadow_free(ev_shadow *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
    *dv__drv_shadow(e->event) = NULL;
    free(e);
}

static void on_event_destroy(void *self, dv_drv_event *ev)
{
    dv_checker *c = self;
    ev_shadow *e = *(ev_shadow **)dv__drv_shadow(ev);
    if (e != NULL && e->owner == c)
        shadow_free(e);
}

/* ------------------------------------------------------------------------
 * The treap of device records
 * ------------------------------------------------------------------------ */

static uint32_t next_prio(dv_checker *c)
{
    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    return (uint32_t)(c->rng >> 32);
}

/* l: records starting below key; r: the others. */
static void split(chk_rec *t, uint64_t key, chk_rec **l, chk_rec **r)
{
    if (t == NULL) {
        *l = *r = NULL;
    } else if (t->lo < key) {
        split(t->r, key, &t->r, r);
        *l = t;
    } else {
        split(t->l, key, l, &t->l);
        *r = t;
    }
}

static chk_rec *merge(chk_rec *a, chk_rec *b)
{
    if (a == NULL)
        return b;
    if (b == NULL)
        return a;
    if (a->prio > b->prio) {
        a->r = merge(a->r, b);
        return a;
    }
    b->l = merge(a, b->l);
    return b;
}

static void tree_insert(dv_checker *c, chk_rec *n)
{
    chk_rec *l, *r;
    n->l = n->r = NULL;
    n->prio = next_prio(c);
    split(c->root, n->lo, &l, &r);
    c->root = merge(merge(l, n), r);
}

static void tree_remove(dv_checker *c, chk_rec *n)
{
    chk_rec *l, *m, *r;
    split(c->root, n->lo, &l, &r);
    split(r, n->lo + 1, &m, &r);
    c->root = merge(l, r);
}

/* The record starting at or below addr nearest to it, or NULL. */
static chk_rec *tree_floor(chk_rec *t, uint64_t addr)
{
    chk_rec *best = NULL;
    while (t != NULL) {
        if (t->lo <= addr) {
            best = t;
            t = t->r;
        } else {
            t = t->l;
        }
    }
    return best;
}

/* The record starting above addr nearest to it, or NULL. */
static chk_rec *tree_next(chk_rec *t, uint64_t addr)
{
    chk_rec *best = NULL;
    while (t != NULL) {
        if (t->lo > addr) {
            best = t;
            t = t->l;
        } else {
            t = t->r;
        }
    }
    return best;
}

static int scratch_push(dv_checker *c, chk_rec *r)
{
    if (c->nscratch == c->cap_scratch) {
        uint32_t cap = c->cap_scratch ? c->cap_scratch * 2 : 16;
        chk_rec **n = realloc(c->scratch, cap * sizeof(*n));
        if (n == NULL)
            return DV_ENOMEM;
        c->scratch = n;
        c->cap_scratch = cap;
    }
    c->scratch[c->nscratch++] = r;
    return DV_OK;
}

/* Device records overlapping [lo, hi) into c->scratch, in address order. */
static int overlapping(dv_checker *c, uint64_t lo, uint64_t hi)
{
    c->nscratch = 0;
    chk_rec *r = tree_floor(c->root, lo);
    if (r == NULL || r->hi <= lo)
        r = tree_next(c->root, lo);
    for (; r != NULL && r->lo < hi; r = tree_next(c->root, r->lo)) {
        if (scratch_push(c, r) != DV_OK)
            return DV_ENOMEM;
    }
    return DV_OK;
}

static chk_rec *rec_new(dv_checker *c, uint64_t lo, uint64_t hi)
{
    chk_rec *r = calloc(1, sizeof(*r) + c->ns * sizeof(chk_stamp));
    if (r != NULL) {
        r->lo = lo;
        r->hi = hi;
    }
    return r;
}

static chk_rec *rec_copy(dv_checker *c, const chk_rec *src, uint64_t lo, uint64_t hi)
{
    size_t size = sizeof(*src) + c->ns * sizeof(chk_stamp);
    chk_rec *r = malloc(size);
    if (r != NULL) {
        memcpy(r, src, size);
        r->lo = lo;
        r->hi = hi;
    }
    return r;
}

static void tree_free(chk_rec *t)
{
    while (t != NULL) {
        tree_free(t->l);
        chk_rec *r = t->r;
        free(t);
        t = r;
    }
}

/* ------------------------------------------------------------------------
 * Checking
 * ------------------------------------------------------------------------ */

static const char *kind_name(uint8_t kind)
{
    switch (kind) {
    case DV_CHK_ALLOC:
        return "allocation";
    case DV_CHK_FREE:
        return "free";
    case DV_CHK_LAUNCH:
        return "launch";
    case DV_CHK_TASK:
        return "task";
    case DV_CHK_TASK_LAUNCH:
        return "launch in a task";
    case DV_CHK_HTOD:
        return "copy host->device";
    case DV_CHK_DTOH:
        return "copy device->host";
    case DV_CHK_DTOD:
        return "copy device->device";
    case DV_CHK_MEMSET:
        return "memset";
    case DV_CHK_HOST:
        return "host access";
    default:
        return "operation";
    }
}

/* "launch 'fill_u32' (stream 1, #7, message 3 of client 2)" */
static void describe(const dv_checker *c, const chk_stamp *s, char *buf, size_t size)
{
    char where[32];
    if (s->comp == c->ns)
        snprintf(where, sizeof(where), "the host");
    else
        snprintf(where, sizeof(where), "stream %u", s->comp);
    snprintf(buf, size, "%s%s%s%s (%s, #%llu, message %u of client %u)", kind_name(s->kind),
             s->name ? " '" : "", s->name ? s->name : "", s->name ? "'" : "", where,
             (unsigned long long)s->seq, s->msg, s->producer);
}

static int hazard(dv_checker *c, const chk_stamp *now, const char *verb, const chk_rec *r,
                  bool host, const chk_stamp *prev, const char *prev_verb)
{
    char a[160], b[160];
    describe(c, now, a, sizeof(a));
    describe(c, prev, b, sizeof(b));
    if (host)
        return dv__fail(DV_EHAZARD, "check_order",
                        "hazard: %s %s host buffer 0x%llx (%llu bytes) %s by %s, and nothing "
                        "orders the two",
                        a, verb, (unsigned long long)r->lo, (unsigned long long)(r->hi - r->lo),
                        prev_verb, b);
    return dv__fail(DV_EHAZARD, "check_order",
                    "hazard: %s %s block '%s' (0x%llx, %llu bytes) %s by %s, and nothing "
                    "orders the two",
                    a, verb, r->tag ? r->tag : "", (unsigned long long)r->lo,
                    (unsigned long long)(r->hi - r->lo), prev_verb, b);
}

/* Has the clock V (of component comp) seen stamp p? */
static inline bool ordered(const uint64_t *V, uint32_t comp, const chk_stamp *p)
{
    return p->seq == 0 || p->comp == comp || V[p->comp] >= p->seq;
}

/*
 * Check an access of r by now (whose clock is V) against r's history:
 * a read against the last write, a write (or free, or reuse) against the
 * last write and every read; anything against a free.
 */
static int check_rec(dv_checker *c, const uint64_t *V, const chk_stamp *now, uint8_t access,
                     const chk_rec *r, bool host, const char *verb)
{
    if (r->freed && now->kind != DV_CHK_ALLOC)
        return hazard(c, now, verb, r, host, &r->freeop, "freed");
    if (r->freed && !ordered(V, now->comp, &r->freeop))
        return hazard(c, now, verb, r, host, &r->freeop, "freed");
    if (!ordered(V, now->comp, &r->write))
        return hazard(c, now, verb, r, host, &r->write, "last written");
    if (access & DV_WRITE) {
        for (uint32_t t = 0; t < c->ns; t++)
            if (!ordered(V, now->comp, &r->reads[t]))
                return hazard(c, now, verb, r, host, &r->reads[t], "read");
    }
    return DV_OK;
}

static void record_access(dv_checker *c, chk_rec *r, const chk_stamp *now, uint8_t access)
{
    if (access & DV_WRITE) {
        r->write = *now;
        memset(r->reads, 0, c->ns * sizeof(chk_stamp));
    } else if (now->comp < c->ns) {
        r->reads[now->comp] = *now;
    }
}

/* Drop host records whose every access the host has seen complete. */
static void host_sweep(dv_checker *c)
{
    const uint64_t *H = row(c, c->ns);
    uint32_t keep = 0;
    for (uint32_t i = 0; i < c->nhost; i++) {
        chk_rec *r = c->host[i];
        bool done = ordered(H, c->ns, &r->write);
        for (uint32_t t = 0; done && t < c->ns; t++)
            done = ordered(H, c->ns, &r->reads[t]);
        if (done)
            free(r);
        else
            c->host[keep++] = r;
    }
    c->nhost = keep;
    c->host_sweep_at = keep * 2 > 64 ? keep * 2 : 64;
}

static int check_host_range(dv_checker *c, const uint64_t *V, const chk_stamp *now, uint64_t lo,
                            uint64_t hi, uint8_t access)
{
    const char *verb = access & DV_WRITE ? "writes" : "reads";
    for (uint32_t i = 0; i < c->nhost; i++) {
        chk_rec *r = c->host[i];
        if (r->lo < hi && lo < r->hi) {
            int rc = check_rec(c, V, now, access, r, true, verb);
            if (rc != DV_OK)
                return rc;
        }
    }
    return DV_OK;
}

static void commit_host_range(dv_checker *c, const chk_stamp *now, uint64_t lo, uint64_t hi,
                              uint8_t access)
{
    chk_rec *exact = NULL;
    for (uint32_t i = 0; i < c->nhost && exact == NULL; i++)
        if (c->host[i]->lo == lo && c->host[i]->hi == hi)
            exact = c->host[i];
    if (exact == NULL) {
        if (c->nhost >= c->host_sweep_at)
            host_sweep(c);
        if (c->nhost == c->cap_host) {
            uint32_t cap = c->cap_host ? c->cap_host * 2 : 64;
            chk_rec **n = realloc(c->host, cap * sizeof(*n));
            if (n == NULL)
                return;
            c->host = n;
            c->cap_host = cap;
        }
        if ((exact = rec_new(c, lo, hi)) == NULL)
            return;
        c->host[c->nhost++] = exact;
    }
    record_access(c, exact, now, access);
}

static chk_stamp stamp_of(const dv_chk_op *op, uint32_t comp)
{
    return (chk_stamp){.seq = op->seq,
                       .name = op->name,
                       .comp = comp,
                       .producer = op->producer,
                       .msg = op->msg,
                       .kind = op->kind};
}

/* Order the host's past before a new operation on s; tick s. */
static uint64_t tick(dv_checker *c, uint32_t s)
{
    uint64_t *V = row(c, s);
    vc_merge(c, V, row(c, c->ns));
    return ++V[s];
}

void dv__chk_op_init(dv_chk_op *op, dv_chk_kind kind, uint32_t stream, const char *name,
                     uint32_t producer, uint32_t msg)
{
    op->kind = (uint8_t)kind;
    op->stream = stream;
    op->name = name;
    op->producer = producer;
    op->msg = msg;
    op->seq = 0;
    op->host_known = NULL;
    op->n = 0;
}

void dv__chk_op_add(dv_chk_op *op, uint64_t ptr, uint64_t bytes, uint8_t access, bool host)
{
    if (op->n == DV_CHK_MAX_ACCESSES)
        return;
    op->acc[op->n].ptr = ptr;
    op->acc[op->n].bytes = bytes;
    op->acc[op->n].access = access ? access : DV_READ_WRITE;
    op->acc[op->n].host = host;
    op->n++;
}

static uint64_t acc_end(uint64_t ptr, uint64_t bytes)
{
    return ptr + (bytes ? bytes : 1);
}

int dv__checker_check(dv_checker *c, dv_chk_op *op)
{
    if (op->stream >= c->ns)
        return DV_OK;
    /* A host buffer's earlier uses must be ordered before this one on the
     * device, or known complete to the thread that posted it: not merely
     * seen complete by the actor. */
    memcpy(c->tmp, row(c, op->stream), c->nc * sizeof(uint64_t));
    client_clock(c, op->host_known, c->tmp2);
    vc_merge(c, c->tmp, c->tmp2);
    op->seq = tick(c, op->stream);
    const uint64_t *V = row(c, op->stream);
    chk_stamp now = stamp_of(op, op->stream);

    for (unsigned i = 0; i < op->n; i++) {
        uint64_t lo = op->acc[i].ptr, hi = acc_end(lo, op->acc[i].bytes);
        uint8_t access = op->acc[i].access;
        int rc;
        if (op->acc[i].host) {
            rc = check_host_range(c, c->tmp, &now, lo, hi, access);
        } else {
            if (overlapping(c, lo, hi) != DV_OK)
                return DV_OK; /* out of host memory: unchecked */
            rc = DV_OK;
            for (uint32_t k = 0; k < c->nscratch && rc == DV_OK; k++)
                rc = check_rec(c, V, &now, access, c->scratch[k], false,
                               access & DV_WRITE ? "writes" : "reads");
        }
        if (rc != DV_OK)
            return rc;
    }
    return DV_OK;
}

void dv__checker_commit(dv_checker *c, const dv_chk_op *op)
{
    if (op->stream >= c->ns || op->seq == 0)
        return;
    chk_stamp now = stamp_of(op, op->stream);
    for (unsigned i = 0; i < op->n; i++) {
        uint64_t lo = op->acc[i].ptr, hi = acc_end(lo, op->acc[i].bytes);
        if (op->acc[i].host) {
            commit_host_range(c, &now, lo, hi, op->acc[i].access);
            continue;
        }
        if (overlapping(c, lo, hi) != DV_OK)
            return;
        for (uint32_t k = 0; k < c->nscratch; k++)
            if (!c->scratch[k]->freed)
                record_access(c, c->scratch[k], &now, op->acc[i].access);
    }
}

int dv__checker_alloc(dv_checker *c, uint64_t ptr, uint64_t bytes, uint32_t stream, const char *tag,
                      uint32_t producer, uint32_t msg)
{
    if (stream >= c->ns || bytes == 0)
        return DV_OK;
    dv_chk_op op;
    dv__chk_op_init(&op, DV_CHK_ALLOC, stream, NULL, producer, msg);
    op.seq = tick(c, stream);
    chk_stamp now = stamp_of(&op, stream);
    const uint64_t *V = row(c, stream);
    uint64_t lo = ptr, hi = ptr + bytes;
    int status = DV_OK;

    chk_rec *n = rec_new(c, lo, hi);
    if (n == NULL || overlapping(c, lo, hi) != DV_OK) {
        free(n);
        return DV_OK; /* unchecked */
    }
    /* Memory handed out again: ordered after the old block's free and
     * every use of it (when devactor's own pool did the handing out). */
    for (uint32_t k = 0; k < c->nscratch; k++) {
        chk_rec *old = c->scratch[k];
        if (status == DV_OK && c->check_reuse && old->freed)
            status = check_rec(c, V, &now, DV_WRITE, old, false, "reuses the memory of");
        tree_remove(c, old);
        chk_rec *left = old->lo < lo ? rec_copy(c, old, old->lo, lo) : NULL;
        chk_rec *right = old->hi > hi ? rec_copy(c, old, hi, old->hi) : NULL;
        free(old);
        if (left != NULL)
            tree_insert(c, left);
        if (right != NULL)
            tree_insert(c, right);
    }
    n->tag = tag;
    n->write = now;
    tree_insert(c, n);
    return status;
}

int dv__checker_free(dv_checker *c, uint64_t ptr, uint32_t stream, uint32_t producer, uint32_t msg)
{
    chk_rec *r = tree_floor(c->root, ptr);
    if (stream >= c->ns || r == NULL || r->lo != ptr || r->freed)
        return DV_OK;
    dv_chk_op op;
    dv__chk_op_init(&op, DV_CHK_FREE, stream, NULL, producer, msg);
    op.seq = tick(c, stream);
    chk_stamp now = stamp_of(&op, stream);
    int rc = check_rec(c, row(c, stream), &now, DV_WRITE, r, false, "frees");
    r->freed = true;
    r->freeop = now;
    return rc;
}

int dv__checker_host_access(dv_checker *c, uint64_t ptr, uint64_t bytes, uint8_t access,
                            const dv_known *known, uint32_t producer, uint32_t msg)
{
    uint64_t *H = row(c, c->ns);
    chk_stamp now = {
        .seq = ++H[c->ns], .comp = c->ns, .producer = producer, .msg = msg, .kind = DV_CHK_HOST};
    client_clock(c, known, c->tmp);
    return check_host_range(c, c->tmp, &now, ptr, acc_end(ptr, bytes),
                            access ? access : DV_READ_WRITE);
}

/* ------------------------------------------------------------------------
 * Life
 * ------------------------------------------------------------------------ */

int dv__checker_create(dv_res_env *env, bool check_reuse, uint64_t context, dv_checker **out)
{
    dv_checker *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return dv__fail(DV_ENOMEM, "check_order", "out of host memory for the checker");
    c->env = env;
    c->ns = env->nstreams;
    c->nc = env->nstreams + 1;
    c->check_reuse = check_reuse;
    c->context = context;
    c->rng = UINT64_C(0x9E3779B97F4A7C15);
    c->host_sweep_at = 64;
    c->events.next = c->events.prev = &c->events;
    c->vc = calloc((size_t)c->nc * c->nc, sizeof(uint64_t));
    c->tmp = calloc(c->nc, sizeof(uint64_t));
    c->tmp2 = calloc(c->nc, sizeof(uint64_t));
    if (c->vc == NULL || c->tmp == NULL || c->tmp2 == NULL) {
        free(c->vc);
        free(c->tmp);
        free(c->tmp2);
        free(c);
        return dv__fail(DV_ENOMEM, "check_order", "out of host memory for the checker");
    }
    for (uint32_t s = 0; s < c->ns; s++)
        *dv__drv_shadow(env->streams[s]) = (void *)(uintptr_t)(s + 1);
    c->obs = (dv_drv_observer){
        .self = c,
        .record = on_record,
        .wait = on_wait,
        .event_done = on_event_done,
        .stream_done = on_stream_done,
        .event_destroy = on_event_destroy,
    };
    dv__drv_ctx_set_observer(env->ctx, &c->obs);
    *out = c;
    return DV_OK;
}

void dv__checker_destroy(dv_checker *c)
{
    if (c == NULL)
        return;
    dv__drv_ctx_set_observer(c->env->ctx, NULL);
    while (c->events.next != &c->events)
        shadow_free(c->events.next);
    for (uint32_t s = 0; s < c->ns; s++)
        *dv__drv_shadow(c->env->streams[s]) = NULL;
    tree_free(c->root);
    for (uint32_t i = 0; i < c->nhost; i++)
        free(c->host[i]);
    free(c->host);
    free(c->scratch);
    free(c->vc);
    free(c->tmp);
    free(c->tmp2);
    free(c);
}
