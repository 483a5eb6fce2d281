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

/* A piece of memory with one history.  Device pieces belong to a block
 * (blk_lo, blk_hi: the whole of it); an access to part of a block splits
 * its pieces at the access's ends, so disjoint parts keep their own. */
typedef struct chk_rec {
    uint64_t lo, hi;
    struct chk_rec *next, *prev; /* every piece of its set, by start */
    struct chk_rec *l, *r;       /* the index, when indexed */
    uint32_t prio;
    bool indexed; /* in the set's index */
    bool keyed;   /* in the set's table by start */
    bool freed;
    uint64_t blk_lo, blk_hi;
    const char *tag;
    uint64_t generation; /* the block's */
    /* The block's address was handed out (NULL: from the start). */
    const _Atomic uint32_t *exposed;
    uint32_t exposed_gen;
    /* The memory's previous owner, when it was handed out again. */
    const char *prev_tag;
    uint64_t prev_generation;
    chk_stamp prev_free;
    chk_stamp write;   /* the last write (an allocation counts as one) */
    chk_stamp freeop;  /* the free, once freed */
    chk_stamp reads[]; /* outstanding reads, one per stream */
} chk_rec;

/* The list of event shadows: its head is links alone (a struct with a
 * flexible array may not sit inside another, in ISO C). */
typedef struct ev_link {
    struct ev_link *next, *prev;
} ev_link;

/* An event's clock, as of its last record. */
typedef struct ev_shadow {
    ev_link link; /* first: a shadow's link converts back to the shadow */
    dv_checker *owner;
    dv_drv_event *event;
    uint64_t vc[];
} ev_shadow;

/*
 * A set of disjoint pieces: a list of all of them by start, and an index
 * (a treap) over some of them.  The list is the truth; the index only
 * says where to start walking it.  A block's first piece and every host
 * piece are indexed; a piece cut off inside a block is not, so cutting
 * and merging a block's pieces, which every ranged access does, changes
 * only the list.  A walk that grows long indexes where it ended.  The
 * fingers are the pieces found last: an operation's accesses, checked
 * and then committed, find their pieces there without a descent.
 */
#define CHK_FINGERS 4

/* A piece found lately, with where it starts and where the next one does:
 * it is the floor of every address in [lo, end), known without reading
 * the piece. */
typedef struct chk_finger {
    uint64_t lo, end;
    chk_rec *r; /* NULL: none */
} chk_finger;

typedef struct chk_set {
    chk_rec *root;
    chk_rec *first;
    chk_finger finger[CHK_FINGERS];
    unsigned next_finger;
    /* The device set's indexed pieces by exact start too (open
     * addressing): an access through a handle names its block's start,
     * whose piece is indexed, and is found without a descent. */
    chk_rec **byaddr;
    uint32_t byaddr_cap, byaddr_n;
    bool keyed;
} chk_set;

#define CHK_WALK_MAX 8

struct dv_checker {
    dv_res_env *env;
    uint32_t ns, nc; /* streams; clock components (streams + host) */
    bool check_reuse;
    uint64_t context; /* the context generation it checks */
    uint64_t uid;     /* the actor's: the key of published points */
    dv_drv_observer obs;
    uint64_t *vc; /* nc rows of nc: row s is stream s, row ns what the actor saw finish */
    uint64_t rng;
    chk_set dev;  /* device pieces */
    chk_set host; /* host buffers' pieces */
    uint64_t pieces, nshadows;
    uint64_t since_retire; /* commits since the last retirement sweep */
    uint64_t *floor;       /* per stream: what every stream's clock has seen */
    ev_link events;    /* list head of the event shadows made */
    uint64_t *tmp;     /* a clock for one check */
    uint64_t *tmp_host; /* and what its poster knew alone */
    chk_rec **scratch; /* overlapping pieces of one query */
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

/* V := what a poster knew (its snapshot), zero past the streams.
 * Knowledge of another context counts for nothing. */
static void know_clock(dv_checker *c, const dv_know_node *k, uint64_t *V)
{
    memset(V, 0, c->nc * sizeof(uint64_t));
    if (k == NULL || k->context != c->context)
        return;
    memcpy(V, k->vc, c->ns * sizeof(uint64_t));
}

static void know_merge(dv_checker *c, uint64_t *dst, const dv_know_node *k)
{
    if (k == NULL || k->context != c->context)
        return;
    for (uint32_t i = 0; i < c->ns; i++)
        if (k->vc[i] > dst[i])
            dst[i] = k->vc[i];
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
        e->link.next = c->events.next;
        e->link.prev = &c->events;
        c->events.next->prev = &e->link;
        c->events.next = &e->link;
        *slot = e;
        c->nshadows++;
    }
    memcpy(e->vc, row(c, s), c->nc * sizeof(uint64_t));
}

static void on_wait(void *self, dv_drv_stream *st, dv_drv_event *ev)
{
    dv_checker *c = self;
    uint32_t s = comp_of(c, st);
    ev_shadow *e = *(ev_shadow **)dv__drv_shadow(ev);
    if (s != UINT32_MAX && e != NULL && e->owner == c) {
        vc_merge(c, row(c, s), e->vc);
        /* A point of its own: what s knows has changed, so a point taken
         * before (an event's record) is not published again with it. */
        row(c, s)[s]++;
    }
}

/* What the actor saw finish orders only the actor's own decisions (a
 * pool handing memory out again), never a client's work. */
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
    e->owner->nshadows--;
    e->link.prev->next = e->link.next;
    e->link.next->prev = e->link.prev;
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
 * Treaps of pieces (device and host), by start address
 * ------------------------------------------------------------------------ */

static uint32_t next_prio(dv_checker *c)
{
    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    return (uint32_t)(c->rng >> 32);
}

/* l: pieces starting below key; r: the others. */
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

static void tree_insert(dv_checker *c, chk_rec **root, chk_rec *n)
{
    chk_rec *l, *r;
    n->l = n->r = NULL;
    n->prio = next_prio(c);
    split(*root, n->lo, &l, &r);
    *root = merge(merge(l, n), r);
    n->indexed = true;
}

static void tree_remove(chk_rec **root, chk_rec *n)
{
    chk_rec *l, *m, *r;
    split(*root, n->lo, &l, &r);
    split(r, n->lo + 1, &m, &r);
    *root = merge(l, r);
    n->indexed = false;
}

/* The indexed piece starting at or below addr nearest to it, or NULL. */
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

static inline uint32_t addr_slot(const chk_set *s, uint64_t lo)
{
    uint64_t h = (lo >> 4) * UINT64_C(0x9E3779B97F4A7C15);
    return (uint32_t)(h >> 32) & (s->byaddr_cap - 1);
}

static chk_rec *byaddr_get(const chk_set *s, uint64_t lo)
{
    if (s->byaddr_n == 0)
        return NULL;
    for (uint32_t i = addr_slot(s, lo);; i = (i + 1) & (s->byaddr_cap - 1)) {
        chk_rec *r = s->byaddr[i];
        if (r == NULL || r->lo == lo)
            return r;
    }
}

static void byaddr_put(chk_set *s, chk_rec *r)
{
    uint32_t i = addr_slot(s, r->lo);
    while (s->byaddr[i] != NULL)
        i = (i + 1) & (s->byaddr_cap - 1);
    s->byaddr[i] = r;
    s->byaddr_n++;
}

/* Out of memory the table stays as it is: lookups then descend. */
static bool byaddr_grow(chk_set *s)
{
    uint32_t cap = s->byaddr_cap ? s->byaddr_cap * 2 : 1024;
    chk_rec **t = calloc(cap, sizeof(*t)), **old = s->byaddr;
    if (t == NULL)
        return false;
    uint32_t oldcap = s->byaddr_cap;
    s->byaddr = t;
    s->byaddr_cap = cap;
    s->byaddr_n = 0;
    for (uint32_t i = 0; i < oldcap; i++)
        if (old[i] != NULL)
            byaddr_put(s, old[i]);
    free(old);
    return true;
}

/* Linear probing's deletion: shift later entries of the run back. */
static void byaddr_del(chk_set *s, const chk_rec *r)
{
    uint32_t mask = s->byaddr_cap - 1, i = addr_slot(s, r->lo);
    while (s->byaddr[i] != r) {
        if (s->byaddr[i] == NULL)
            return; /* never entered (the table could not grow) */
        i = (i + 1) & mask;
    }
    s->byaddr[i] = NULL;
    s->byaddr_n--;
    for (uint32_t j = (i + 1) & mask; s->byaddr[j] != NULL; j = (j + 1) & mask) {
        uint32_t home = addr_slot(s, s->byaddr[j]->lo);
        /* Entry j may move to the hole at i unless its home lies in (i, j]. */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            s->byaddr[i] = s->byaddr[j];
            s->byaddr[j] = NULL;
            i = j;
        }
    }
}

static void index_add(dv_checker *c, chk_set *s, chk_rec *r)
{
    tree_insert(c, &s->root, r);
    r->keyed = false;
    if (s->keyed && ((uint64_t)(s->byaddr_n + 1) * 2 <= s->byaddr_cap || byaddr_grow(s))) {
        byaddr_put(s, r);
        r->keyed = true;
    }
}

static void index_del(chk_set *s, chk_rec *r)
{
    tree_remove(&s->root, r);
    if (r->keyed)
        byaddr_del(s, r);
    r->keyed = false;
}

/* The piece starting at or below addr nearest to it, or NULL.  base: the
 * start of the block addr is in, when the access came through a handle
 * (0: not known). */
static chk_rec *set_floor_in(dv_checker *c, chk_set *s, uint64_t addr, uint64_t base)
{
    for (unsigned i = 0; i < CHK_FINGERS; i++) {
        const chk_finger *f = &s->finger[i];
        if (f->r != NULL && f->lo <= addr && addr < f->end)
            return f->r;
    }
    chk_rec *r = base != 0 && base <= addr ? byaddr_get(s, base) : NULL;
    if (r == NULL)
        r = tree_floor(s->root, addr);
    if (r == NULL) {
        r = s->first;
        if (r == NULL || r->lo > addr)
            return NULL;
    }
    unsigned steps = 0;
    while (r->next != NULL && r->next->lo <= addr) {
        r = r->next;
        steps++;
    }
    if (steps > CHK_WALK_MAX && !r->indexed)
        index_add(c, s, r);
    s->finger[s->next_finger] =
        (chk_finger){r->lo, r->next != NULL ? r->next->lo : UINT64_MAX, r};
    s->next_finger = (s->next_finger + 1) % CHK_FINGERS;
    return r;
}

static chk_rec *set_floor(dv_checker *c, chk_set *s, uint64_t addr)
{
    return set_floor_in(c, s, addr, 0);
}

/* The piece holding addr, or NULL. */
static chk_rec *set_at(dv_checker *c, chk_set *s, uint64_t addr)
{
    chk_rec *r = set_floor(c, s, addr);
    return r != NULL && addr < r->hi ? r : NULL;
}

/* The piece starting above addr nearest to it, or NULL. */
static chk_rec *set_next(dv_checker *c, chk_set *s, uint64_t addr)
{
    chk_rec *r = set_floor(c, s, addr);
    return r != NULL ? r->next : s->first;
}

/* Put n in the list after `after` (NULL: first); index it if asked. */
static void set_link(dv_checker *c, chk_set *s, chk_rec *after, chk_rec *n, bool index)
{
    n->prev = after;
    n->next = after != NULL ? after->next : s->first;
    if (n->next != NULL)
        n->next->prev = n;
    if (after != NULL)
        after->next = n;
    else
        s->first = n;
    for (unsigned i = 0; i < CHK_FINGERS; i++)
        if (after != NULL && s->finger[i].r == after)
            s->finger[i].end = n->lo;
    n->indexed = false;
    n->keyed = false;
    if (index)
        index_add(c, s, n);
    c->pieces++;
}

/* Put n (overlapping no piece) where it belongs. */
static void set_insert(dv_checker *c, chk_set *s, chk_rec *n, bool index)
{
    set_link(c, s, set_floor(c, s, n->lo), n, index);
}

/* Take r out (the caller frees it). */
static void set_remove(dv_checker *c, chk_set *s, chk_rec *r)
{
    if (r->indexed)
        index_del(s, r);
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        s->first = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    for (unsigned i = 0; i < CHK_FINGERS; i++) {
        if (s->finger[i].r == r)
            s->finger[i].r = NULL;
        else if (r->prev != NULL && s->finger[i].r == r->prev)
            s->finger[i].end = r->next != NULL ? r->next->lo : UINT64_MAX;
    }
    c->pieces--;
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

/* Pieces of s overlapping [lo, hi) into c->scratch, in address order
 * (base: set_floor_in's). */
static int overlapping_in(dv_checker *c, chk_set *s, uint64_t lo, uint64_t hi, uint64_t base)
{
    c->nscratch = 0;
    chk_rec *r = set_floor_in(c, s, lo, base);
    r = r == NULL ? s->first : r->hi <= lo ? r->next : r;
    for (; r != NULL && r->lo < hi; r = r->next)
        if (scratch_push(c, r) != DV_OK)
            return DV_ENOMEM;
    return DV_OK;
}

static int overlapping(dv_checker *c, chk_set *s, uint64_t lo, uint64_t hi)
{
    return overlapping_in(c, s, lo, hi, 0);
}

static size_t rec_size(const dv_checker *c)
{
    return sizeof(chk_rec) + c->ns * sizeof(chk_stamp);
}

static chk_rec *rec_new(dv_checker *c, uint64_t lo, uint64_t hi)
{
    chk_rec *r = calloc(1, rec_size(c));
    if (r != NULL) {
        r->lo = r->blk_lo = lo;
        r->hi = r->blk_hi = hi;
    }
    return r;
}

static chk_rec *rec_copy(dv_checker *c, const chk_rec *src, uint64_t lo, uint64_t hi)
{
    chk_rec *r = malloc(rec_size(c));
    if (r != NULL) {
        memcpy(r, src, rec_size(c));
        r->lo = lo;
        r->hi = hi;
    }
    return r;
}

/* Cut the piece holding at (if any) in two there; whether it did.  Out
 * of memory: the piece stays whole (its history then covers a little
 * more).  The right part is not indexed: it is found from the left. */
static bool cut_at_in(dv_checker *c, chk_set *s, uint64_t at, uint64_t base)
{
    chk_rec *r = set_floor_in(c, s, at, base);
    if (r != NULL && at >= r->hi)
        r = NULL;
    if (r == NULL || r->lo == at)
        return false;
    chk_rec *right = rec_copy(c, r, at, r->hi);
    if (right == NULL)
        return false;
    r->hi = at;
    set_link(c, s, r, right, false);
    return true;
}

static bool cut_at(dv_checker *c, chk_set *s, uint64_t at)
{
    return cut_at_in(c, s, at, 0);
}

static void set_free(chk_set *s)
{
    chk_rec *r = s->first;
    while (r != NULL) {
        chk_rec *next = r->next;
        free(r);
        r = next;
    }
    free(s->byaddr);
    *s = (chk_set){.keyed = s->keyed};
}

#ifdef DV_CHK_PARANOID
/* The set's invariants, checked after every change in a paranoid build. */
static uint64_t tree_count(const chk_rec *t, const chk_rec **prev)
{
    if (t == NULL)
        return 0;
    uint64_t n = tree_count(t->l, prev);
    if (!t->indexed || (*prev != NULL && (*prev)->lo >= t->lo))
        abort();
    *prev = t;
    return n + 1 + tree_count(t->r, prev);
}

static uint64_t set_sane(const chk_set *s)
{
    uint64_t n = 0, indexed = 0;
    const chk_rec *prev = NULL;
    for (const chk_rec *r = s->first; r != NULL; prev = r, r = r->next, n++) {
        if (r->prev != prev || r->lo >= r->hi || (prev != NULL && prev->hi > r->lo))
            abort();
        indexed += r->indexed;
    }
    prev = NULL;
    if (tree_count(s->root, &prev) != indexed)
        abort();
    uint32_t keyed = 0;
    for (const chk_rec *r = s->first; r != NULL; r = r->next) {
        if (r->keyed && (!r->indexed || byaddr_get(s, r->lo) != r))
            abort();
        keyed += r->keyed;
    }
    if (keyed != s->byaddr_n)
        abort();
    for (unsigned i = 0; i < CHK_FINGERS; i++) {
        const chk_finger *f = &s->finger[i];
        if (f->r != NULL && (f->r->lo != f->lo ||
                             f->end != (f->r->next != NULL ? f->r->next->lo : UINT64_MAX)))
            abort();
    }
    return n;
}

static void chk_sane(const dv_checker *c)
{
    if (set_sane(&c->dev) + set_sane(&c->host) != c->pieces)
        abort();
}
#else
static inline void chk_sane(const dv_checker *c)
{
    (void)c;
}
#endif

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
    case DV_CHK_PEER:
        return "peer copy";
    case DV_CHK_PEER_FROM:
        return "peer copy from this device";
    default:
        return "operation";
    }
}

/* "launch 'fill_u32' (stream 1 #7, client 2 msg 3)" */
static void describe(const dv_checker *c, const chk_stamp *s, char *buf, size_t size)
{
    char where[32];
    if (s->comp == c->ns)
        snprintf(where, sizeof(where), "the host");
    else
        snprintf(where, sizeof(where), "stream %u", s->comp);
    snprintf(buf, size, "%s%s%s%s (%s #%llu, client %u msg %u)", kind_name(s->kind),
             s->name ? " '" : "", s->name ? s->name : "", s->name ? "'" : "", where,
             (unsigned long long)s->seq, s->producer, s->msg);
}

/* The access [lo, hi) of piece r: the bytes both cover are named. */
static int hazard(dv_checker *c, const chk_stamp *now, const char *verb, const chk_rec *r,
                  uint64_t lo, uint64_t hi, bool host, const chk_stamp *prev, const char *prev_verb)
{
    char a[160], b[160], what[200];
    describe(c, now, a, sizeof(a));
    describe(c, prev, b, sizeof(b));
    lo = lo > r->lo ? lo : r->lo;
    hi = hi < r->hi ? hi : r->hi;
    if (host)
        snprintf(what, sizeof(what), "host buffer 0x%llx (%llu B)", (unsigned long long)lo,
                 (unsigned long long)(hi - lo));
    else if (lo == r->blk_lo && hi == r->blk_hi)
        snprintf(what, sizeof(what), "block '%s' (0x%llx, %llu B)", r->tag ? r->tag : "",
                 (unsigned long long)lo, (unsigned long long)(hi - lo));
    else
        snprintf(what, sizeof(what), "bytes [%llu, %llu) of block '%s' (0x%llx, %llu B)",
                 (unsigned long long)(lo - r->blk_lo), (unsigned long long)(hi - r->blk_lo),
                 r->tag ? r->tag : "", (unsigned long long)r->blk_lo,
                 (unsigned long long)(r->blk_hi - r->blk_lo));
    /* Two threads: their own synchronisation may order them, unseen. */
    const char *threads =
        now->producer != prev->producer && prev->kind != DV_CHK_ALLOC && prev->kind != DV_CHK_FREE
            ? " (two threads: dv_order_adopt before the waits and uses that follow)"
            : "";
    return dv__fail(DV_EHAZARD, "check_order", "hazard: %s %s %s %s by %s; nothing orders them%s",
                    a, verb, what, prev_verb, b, threads);
}

/* Has the clock V (of component comp) seen stamp p? */
static inline bool ordered(const uint64_t *V, uint32_t comp, const chk_stamp *p)
{
    return p->seq == 0 || p->comp == comp || V[p->comp] >= p->seq;
}

/* A use after free: the raw access [lo, hi) by now lands in memory of a
 * block freed by free_op (its tag and generation); now_tag: the block
 * that holds the memory now, or NULL. */
static int use_after_free(dv_checker *c, const chk_stamp *now, const char *verb, uint64_t lo,
                          const char *tag, uint64_t generation, const chk_stamp *free_op,
                          const chk_rec *now_block)
{
    char a[160], b[160], then[96] = "";
    describe(c, now, a, sizeof(a));
    describe(c, free_op, b, sizeof(b));
    if (now_block != NULL)
        snprintf(then, sizeof(then), ", now block '%s' (generation %llu)",
                 now_block->tag ? now_block->tag : "", (unsigned long long)now_block->generation);
    return dv__fail(DV_EHAZARD, "check_order",
                    "hazard: use after free: %s %s 0x%llx in block '%s' (generation %llu) freed "
                    "by %s%s",
                    a, verb, (unsigned long long)lo, tag ? tag : "", (unsigned long long)generation,
                    b, then);
}

/* Raw access of live piece r: memory handed out again whose new address
 * no client was ever given can only be reached through a pointer into
 * the block that held it before. */
static bool stale_pointer(const chk_rec *r)
{
    return !r->freed && r->prev_generation != 0 && r->exposed != NULL &&
           atomic_load_explicit(r->exposed, memory_order_relaxed) != r->exposed_gen;
}

/*
 * Check an access of r by now (whose clock is V) against r's history:
 * a read against the last write, a write (or free, or reuse) against the
 * last write and every read; anything but a reuse against a free.
 */
static int check_rec(dv_checker *c, const uint64_t *V, const chk_stamp *now, uint8_t access,
                     const chk_rec *r, uint64_t lo, uint64_t hi, bool host, const char *verb)
{
    if (r->freed && now->kind != DV_CHK_ALLOC)
        return host ? hazard(c, now, verb, r, lo, hi, host, &r->freeop, "freed")
                    : use_after_free(c, now, verb, lo > r->lo ? lo : r->lo, r->tag, r->generation,
                                     &r->freeop, NULL);
    if (r->freed && !ordered(V, now->comp, &r->freeop))
        return hazard(c, now, verb, r, lo, hi, host, &r->freeop, "freed");
    if (!ordered(V, now->comp, &r->write))
        return hazard(c, now, verb, r, lo, hi, host, &r->write, "last written");
    if (access & DV_WRITE) {
        for (uint32_t t = 0; t < c->ns; t++)
            if (!ordered(V, now->comp, &r->reads[t]))
                return hazard(c, now, verb, r, lo, hi, host, &r->reads[t], "read");
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

static chk_stamp stamp_of(const dv_chk_op *op, uint32_t comp)
{
    return (chk_stamp){.seq = op->seq,
                       .name = op->name,
                       .comp = comp,
                       .producer = op->producer,
                       .msg = op->msg,
                       .kind = op->kind};
}

/* Stream s enqueues an operation its poster knew k of: what the poster
 * knew comes before it, and everything after it on s.  Its number. */
static uint64_t tick(dv_checker *c, uint32_t s, const dv_know_node *k)
{
    uint64_t *V = row(c, s);
    know_merge(c, V, k);
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
    op->know = NULL;
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
    op->acc[op->n].staged = false;
    op->acc[op->n].raw = false;
    op->acc[op->n].base = 0;
    op->n++;
}

/* The range an access covers: a device access without a length covers
 * the whole block holding ptr; false when it touches nothing known. */
static bool acc_range(dv_checker *c, const dv_chk_op *op, unsigned i, uint64_t *lo, uint64_t *hi)
{
    uint64_t ptr = op->acc[i].ptr, bytes = op->acc[i].bytes;
    if (bytes != 0) {
        *lo = ptr;
        *hi = ptr + bytes < ptr ? UINT64_MAX : ptr + bytes;
        return true;
    }
    if (op->acc[i].host) {
        *lo = ptr;
        *hi = ptr + 1;
        return true;
    }
    chk_rec *r = set_floor_in(c, &c->dev, ptr, op->acc[i].base);
    if (r == NULL || ptr >= r->hi)
        return false;
    *lo = r->blk_lo;
    *hi = r->blk_hi;
    return true;
}

int dv__checker_check(dv_checker *c, dv_chk_op *op)
{
    if (op->stream >= c->ns)
        return DV_OK;
    /* The clock the operation will have: its stream's, with what its
     * poster knew.  Nothing changes until it is committed. */
    uint64_t *V = c->tmp;
    memcpy(V, row(c, op->stream), c->nc * sizeof(uint64_t));
    know_merge(c, V, op->know);
    op->seq = ++V[op->stream];
    chk_stamp now = stamp_of(op, op->stream);
    /* A staged copy's host read (to the device, pageable) is done by the
     * host from the post on (filling its first chunks): ordered after
     * what its poster knew of, not by its stream (an event between
     * streams orders the device, not the host).  What its own stream did
     * before it is ordered (ordered(): the library waits for a staged
     * copy from the device on the same stream). */
    uint64_t *VH = c->tmp_host;
    bool vh = false;

    for (unsigned i = 0; i < op->n; i++) {
        uint64_t lo, hi;
        uint8_t access = op->acc[i].access;
        bool host = op->acc[i].host;
        if (!acc_range(c, op, i, &lo, &hi))
            continue;
        const uint64_t *clock = V;
        if (host && op->acc[i].staged) {
            if (!vh) {
                know_clock(c, op->know, VH);
                vh = true;
            }
            clock = VH;
        }
        if (overlapping_in(c, host ? &c->host : &c->dev, lo, hi, op->acc[i].base) != DV_OK)
            return DV_OK; /* out of host memory: unchecked */
        const char *verb = access & DV_WRITE ? "writes" : "reads";
        for (uint32_t k = 0; k < c->nscratch; k++) {
            const chk_rec *r = c->scratch[k];
            if (op->acc[i].raw && stale_pointer(r))
                return use_after_free(c, &now, verb, lo > r->lo ? lo : r->lo, r->prev_tag,
                                      r->prev_generation, &r->prev_free, r);
            int rc = check_rec(c, clock, &now, access, r, lo, hi, host, verb);
            if (rc != DV_OK)
                return rc;
        }
    }
    return DV_OK;
}

/* The host pieces of [lo, hi) exactly, made where none were; whether
 * anything was cut or made. */
static bool host_cover(dv_checker *c, uint64_t lo, uint64_t hi)
{
    bool changed = cut_at(c, &c->host, lo);
    changed |= cut_at(c, &c->host, hi);
    uint64_t at = lo;
    while (at < hi) {
        chk_rec *r = set_floor(c, &c->host, at);
        if (r != NULL && at < r->hi) {
            at = r->hi;
            continue;
        }
        chk_rec *next = r != NULL ? r->next : c->host.first;
        uint64_t end = next != NULL && next->lo < hi ? next->lo : hi;
        chk_rec *n = rec_new(c, at, end);
        if (n == NULL)
            return changed;
        set_link(c, &c->host, r, n, true);
        changed = true;
        at = end;
    }
    return changed;
}

/* Field by field: a stamp's padding is never written. */
static bool stamp_eq(const chk_stamp *a, const chk_stamp *b)
{
    return a->seq == b->seq && a->name == b->name && a->comp == b->comp &&
           a->producer == b->producer && a->msg == b->msg && a->kind == b->kind;
}

/* Do a and b (a right before b) have one history, and may be one piece? */
static bool same_history(const dv_checker *c, const chk_rec *a, const chk_rec *b, bool host)
{
    if (a->hi != b->lo || a->freed != b->freed || a->tag != b->tag)
        return false;
    if (!host && (a->blk_lo != b->blk_lo || a->blk_hi != b->blk_hi))
        return false;
    if (!stamp_eq(&a->write, &b->write) || !stamp_eq(&a->freeop, &b->freeop))
        return false;
    for (uint32_t t = 0; t < c->ns; t++)
        if (!stamp_eq(&a->reads[t], &b->reads[t]))
            return false;
    return true;
}

/* Merge the pieces around [lo, hi] that have one history: a write over a
 * range leaves one piece however often it was cut before. */
static void coalesce(dv_checker *c, chk_set *s, uint64_t lo, uint64_t hi, bool host)
{
    chk_rec *r = lo > 0 ? set_at(c, s, lo - 1) : NULL;
    if (r == NULL)
        r = set_at(c, s, lo);
    while (r != NULL && r->lo <= hi) {
        chk_rec *next = r->next;
        if (next == NULL || next->lo != r->hi)
            break;
        if (same_history(c, r, next, host)) {
            uint64_t end = next->hi;
            set_remove(c, s, next);
            free(next);
            r->hi = end;
        } else {
            r = next;
        }
    }
}

/*
 * Retirement by dominance.  A stamp that every stream's clock has seen can
 * race with nothing any more: every later operation runs on some stream,
 * and its clock is at least that stream's.  (Host accesses are checked
 * with the thread's clock alone, and a thread that has learned nothing
 * must still be reported, so host pieces are never retired this way: they
 * go when a later copy covers them.)  So a device piece whose last write
 * and reads are all dominated forgets them, and the pieces of one block
 * that have forgotten everything merge back into one.  A freed piece keeps
 * its free, which names the block in a use-after-free report.
 *
 * The sweep walks every device piece: it runs once per as many commits as
 * there are pieces (and at least DV_CHK_RETIRE_MIN), so its cost per
 * operation stays constant.
 */
#define DV_CHK_RETIRE_MIN 1024

static bool dominated(const dv_checker *c, const chk_stamp *p)
{
    return p->seq == 0 || (p->comp < c->ns && c->floor[p->comp] >= p->seq);
}

static bool settle(dv_checker *c, chk_rec *r)
{
    if (!dominated(c, &r->write))
        return false;
    for (uint32_t t = 0; t < c->ns; t++)
        if (!dominated(c, &r->reads[t]))
            return false;
    memset(&r->write, 0, sizeof(r->write));
    memset(r->reads, 0, c->ns * sizeof(chk_stamp));
    return true;
}

static void retire(dv_checker *c)
{
    for (uint32_t p = 0; p < c->ns; p++) {
        uint64_t m = UINT64_MAX;
        for (uint32_t s = 0; s < c->ns; s++)
            if (row(c, s)[p] < m)
                m = row(c, s)[p];
        c->floor[p] = m;
    }
    chk_rec *prev = NULL;
    chk_rec *r = c->dev.first;
    while (r != NULL) {
        chk_rec *next = r->next;
        bool settled = settle(c, r);
        if (settled && prev != NULL && same_history(c, prev, r, false)) {
            prev->hi = r->hi;
            set_remove(c, &c->dev, r);
            free(r);
        } else {
            prev = settled ? r : NULL;
        }
        r = next;
    }
    c->since_retire = 0;
}

void dv__checker_commit(dv_checker *c, const dv_chk_op *op)
{
    if (op->stream >= c->ns || op->seq == 0)
        return;
    uint64_t *S = row(c, op->stream);
    know_merge(c, S, op->know);
    if (S[op->stream] < op->seq)
        S[op->stream] = op->seq;
    chk_stamp now = stamp_of(op, op->stream);
    for (unsigned i = 0; i < op->n; i++) {
        uint64_t lo, hi;
        bool host = op->acc[i].host;
        if (!acc_range(c, op, i, &lo, &hi))
            continue;
        bool cut;
        if (host) {
            cut = host_cover(c, lo, hi);
        } else {
            cut = cut_at_in(c, &c->dev, lo, op->acc[i].base);
            cut |= cut_at_in(c, &c->dev, hi, op->acc[i].base);
        }
        if (overlapping_in(c, host ? &c->host : &c->dev, lo, hi, op->acc[i].base) != DV_OK)
            return;
        for (uint32_t k = 0; k < c->nscratch; k++)
            if (!c->scratch[k]->freed)
                record_access(c, c->scratch[k], &now, op->acc[i].access);
        /* One piece that was not cut: its new stamp is its own, nothing
         * merges (the common case: a whole block). */
        if (cut || c->nscratch > 1)
            coalesce(c, host ? &c->host : &c->dev, lo, hi, host);
    }
    if (++c->since_retire >= c->pieces + DV_CHK_RETIRE_MIN)
        retire(c);
    chk_sane(c);
}

/* ------------------------------------------------------------------------
 * What a task really does
 * ------------------------------------------------------------------------ */

/* Does a declared access allow need?  A write is fenced against every
 * other use, so a task may read what it declared DV_WRITE; DV_READ allows
 * no write. */
static bool grants_access(uint8_t declared, uint8_t need)
{
    return (need & DV_WRITE) ? (declared & DV_WRITE) != 0 : declared != 0;
}

/* The declared access that covers addr, the strongest of those that do
 * (0: none); *end: where that cover stops. */
static uint8_t declared_at(dv_checker *c, const dv_chk_op *task, uint64_t addr, uint8_t need,
                           uint64_t *end)
{
    uint8_t best = 0;
    *end = addr + 1;
    for (unsigned i = 0; i < task->n; i++) {
        uint64_t lo, hi;
        if (task->acc[i].host || !acc_range(c, task, i, &lo, &hi) || addr < lo || addr >= hi)
            continue;
        uint8_t acc = task->acc[i].access;
        /* Prefer a cover that grants the access, then the longest. */
        bool grants = grants_access(acc, need), had = best != 0 && grants_access(best, need);
        if (best == 0 || (grants && !had) || (grants == had && hi > *end)) {
            best = acc;
            *end = hi;
        }
    }
    return best;
}

int dv__checker_task_verify(dv_checker *c, const dv_chk_op *task, const uint64_t (*own)[2],
                            unsigned nown, uint64_t ptr, uint64_t bytes, uint8_t access,
                            const char *via)
{
    uint64_t lo = ptr, hi = ptr + (bytes ? bytes : 1);
    if (hi < lo)
        hi = UINT64_MAX;
    uint8_t need = access ? access : DV_READ;
    chk_stamp now = stamp_of(task, task->stream);
    const char *verb = access == 0 ? "touches" : access & DV_WRITE ? "writes" : "reads";
    for (uint64_t at = lo; at < hi;) {
        chk_rec *r = set_at(c, &c->dev, at);
        if (r == NULL) {
            /* Memory the checker does not know (the library's own): skip
             * to the next piece it knows. */
            chk_rec *next = set_next(c, &c->dev, at);
            if (next == NULL || next->lo >= hi)
                break;
            at = next->lo;
            continue;
        }
        uint64_t piece_end = r->hi < hi ? r->hi : hi;
        if (r->freed) {
            if (access == 0) { /* a stray word that once pointed here */
                at = piece_end;
                continue;
            }
            return use_after_free(c, &now, verb, at, r->tag, r->generation, &r->freeop, NULL);
        }
        bool mine = false;
        for (unsigned k = 0; k < nown && !mine; k++)
            mine = at >= own[k][0] && at < own[k][0] + own[k][1];
        if (mine) {
            at = piece_end;
            continue;
        }
        uint64_t end;
        uint8_t declared = declared_at(c, task, at, need, &end);
        if (declared == 0 || !grants_access(declared, need)) {
            char a[160], what[200];
            describe(c, &now, a, sizeof(a));
            uint64_t stop = declared == 0 ? piece_end : (end < piece_end ? end : piece_end);
            if (access == 0) /* a pointer: into the block, where it reaches unknown */
                snprintf(what, sizeof(what), "block '%s' (0x%llx, %llu B)", r->tag ? r->tag : "",
                         (unsigned long long)r->blk_lo,
                         (unsigned long long)(r->blk_hi - r->blk_lo));
            else if (at == r->blk_lo && stop == r->blk_hi)
                snprintf(what, sizeof(what), "block '%s' (0x%llx, %llu B)", r->tag ? r->tag : "",
                         (unsigned long long)at, (unsigned long long)(stop - at));
            else
                snprintf(what, sizeof(what), "bytes [%llu, %llu) of block '%s' (0x%llx, %llu B)",
                         (unsigned long long)(at - r->blk_lo),
                         (unsigned long long)(stop - r->blk_lo), r->tag ? r->tag : "",
                         (unsigned long long)r->blk_lo,
                         (unsigned long long)(r->blk_hi - r->blk_lo));
            return dv__fail(DV_EHAZARD, "check_order", "hazard: %s %s %s %s, but %s", a, verb, what,
                            via, declared == 0 ? "did not declare it" : "declared it DV_READ only");
        }
        at = end < piece_end ? end : piece_end;
    }
    return DV_OK;
}

void dv__checker_publish(dv_checker *c, uint32_t stream, uint64_t seq)
{
    if (stream < c->ns && seq != 0 && row(c, stream)[stream] == seq)
        dv__known_publish(c->uid, c->context, stream, seq, row(c, stream), c->ns);
}

uint64_t dv__checker_point(dv_checker *c, uint32_t stream, const dv_know_node *know)
{
    return stream < c->ns ? tick(c, stream, know) : 0;
}

int dv__checker_alloc(dv_checker *c, const dv_chk_block *b, uint32_t stream,
                      const dv_know_node *know, uint32_t producer, uint32_t msg)
{
    uint64_t ptr = b->ptr, bytes = b->bytes;
    if (stream >= c->ns || bytes == 0)
        return DV_OK;
    dv_chk_op op;
    dv__chk_op_init(&op, DV_CHK_ALLOC, stream, NULL, producer, msg);
    op.seq = tick(c, stream, know);
    chk_stamp now = stamp_of(&op, stream);
    /* The pool hands memory out again on what the actor saw finish (or
     * behind a stream wait): the allocation's clock includes both. */
    uint64_t *V = c->tmp;
    memcpy(V, row(c, stream), c->nc * sizeof(uint64_t));
    vc_merge(c, V, row(c, c->ns));
    uint64_t lo = ptr, hi = ptr + bytes;
    int status = DV_OK;

    chk_rec *n = rec_new(c, lo, hi);
    if (n == NULL || overlapping(c, &c->dev, lo, hi) != DV_OK) {
        free(n);
        return DV_OK; /* unchecked */
    }
    /* Memory handed out again: ordered after the old block's free and
     * every use of it (when devactor's own pool did the handing out). */
    for (uint32_t k = 0; k < c->nscratch; k++) {
        chk_rec *old = c->scratch[k];
        if (old->freed && n->prev_generation == 0) {
            n->prev_tag = old->tag;
            n->prev_generation = old->generation;
            n->prev_free = old->freeop;
        }
        if (status == DV_OK && c->check_reuse && old->freed)
            status = check_rec(c, V, &now, DV_WRITE, old, lo, hi, false, "reuses the memory of");
        set_remove(c, &c->dev, old);
        chk_rec *left = old->lo < lo ? rec_copy(c, old, old->lo, lo) : NULL;
        chk_rec *right = old->hi > hi ? rec_copy(c, old, hi, old->hi) : NULL;
        free(old);
        if (left != NULL)
            set_insert(c, &c->dev, left, true);
        if (right != NULL)
            set_insert(c, &c->dev, right, true);
    }
    n->tag = b->tag;
    n->generation = b->generation;
    n->exposed = b->exposed;
    n->exposed_gen = b->exposed_gen;
    n->write = now;
    set_insert(c, &c->dev, n, true);
    chk_sane(c);
    return status;
}

int dv__checker_free(dv_checker *c, uint64_t ptr, uint32_t stream, const dv_know_node *know,
                     uint32_t producer, uint32_t msg)
{
    chk_rec *first = set_at(c, &c->dev, ptr);
    if (stream >= c->ns || first == NULL || first->blk_lo != ptr || first->freed)
        return DV_OK;
    uint64_t blk_hi = first->blk_hi;
    dv_chk_op op;
    dv__chk_op_init(&op, DV_CHK_FREE, stream, NULL, producer, msg);
    op.seq = tick(c, stream, know);
    chk_stamp now = stamp_of(&op, stream);
    if (overlapping(c, &c->dev, ptr, blk_hi) != DV_OK)
        return DV_OK;
    int rc = DV_OK;
    for (uint32_t k = 0; k < c->nscratch; k++) {
        chk_rec *r = c->scratch[k];
        if (rc == DV_OK)
            rc = check_rec(c, row(c, stream), &now, DV_WRITE, r, ptr, blk_hi, false, "frees");
    }
    /* The free was checked against every access (and reported if one
     * raced it): from now on only the free itself orders a reuse, and the
     * block's memory is one piece again, however it was cut. */
    for (uint32_t k = c->nscratch; k-- > 1;) {
        chk_rec *r = c->scratch[k];
        set_remove(c, &c->dev, r);
        free(r);
    }
    first->hi = blk_hi;
    first->freed = true;
    first->freeop = now;
    first->write = now;
    memset(first->reads, 0, c->ns * sizeof(chk_stamp));
    chk_sane(c);
    return rc;
}

int dv__checker_host_access(dv_checker *c, uint64_t ptr, uint64_t bytes, uint8_t access,
                            const dv_know_node *know, uint32_t producer, uint32_t msg)
{
    uint64_t *H = row(c, c->ns);
    chk_stamp now = {
        .seq = ++H[c->ns], .comp = c->ns, .producer = producer, .msg = msg, .kind = DV_CHK_HOST};
    uint64_t lo = ptr, hi = ptr + (bytes ? bytes : 1);
    access = access ? access : DV_READ_WRITE;
    know_clock(c, know, c->tmp);
    if (overlapping(c, &c->host, lo, hi) != DV_OK)
        return DV_OK;
    for (uint32_t k = 0; k < c->nscratch; k++) {
        int rc = check_rec(c, c->tmp, &now, access, c->scratch[k], lo, hi, true,
                           access & DV_WRITE ? "writes" : "reads");
        if (rc != DV_OK)
            return rc;
    }
    return DV_OK;
}

void dv__checker_host_forget(dv_checker *c, uint64_t ptr, uint64_t bytes)
{
    uint64_t hi = ptr + bytes < ptr ? UINT64_MAX : ptr + bytes;
    cut_at(c, &c->host, ptr);
    cut_at(c, &c->host, hi);
    if (overlapping(c, &c->host, ptr, hi) != DV_OK)
        return;
    for (uint32_t k = 0; k < c->nscratch; k++) {
        set_remove(c, &c->host, c->scratch[k]);
        free(c->scratch[k]);
    }
    chk_sane(c);
}

uint64_t dv__checker_pieces(const dv_checker *c)
{
    return c->pieces;
}

uint64_t dv__checker_bytes(const dv_checker *c)
{
    return sizeof(*c) + c->pieces * rec_size(c) +
           c->nshadows * (sizeof(ev_shadow) + c->nc * sizeof(uint64_t)) +
           ((uint64_t)c->nc * c->nc + 2 * c->nc) * sizeof(uint64_t) +
           c->cap_scratch * sizeof(chk_rec *);
}

/* ------------------------------------------------------------------------
 * Life
 * ------------------------------------------------------------------------ */

int dv__checker_create(dv_res_env *env, bool check_reuse, uint64_t uid, uint64_t context,
                       dv_checker **out)
{
    dv_checker *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return dv__fail(DV_ENOMEM, "check_order", "out of host memory for the checker");
    c->env = env;
    c->ns = env->nstreams;
    c->nc = env->nstreams + 1;
    c->check_reuse = check_reuse;
    c->uid = uid;
    c->context = context;
    c->rng = UINT64_C(0x9E3779B97F4A7C15);
    c->events.next = c->events.prev = &c->events;
    c->dev.keyed = true;
    c->vc = calloc((size_t)c->nc * c->nc, sizeof(uint64_t));
    c->tmp = calloc(c->nc, sizeof(uint64_t));
    c->tmp_host = calloc(c->nc, sizeof(uint64_t));
    c->floor = calloc(c->nc, sizeof(uint64_t));
    if (c->vc == NULL || c->tmp == NULL || c->tmp_host == NULL || c->floor == NULL) {
        free(c->vc);
        free(c->tmp);
        free(c->tmp_host);
        free(c->floor);
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
        shadow_free((ev_shadow *)c->events.next);
    for (uint32_t s = 0; s < c->ns; s++)
        *dv__drv_shadow(c->env->streams[s]) = NULL;
    set_free(&c->dev);
    set_free(&c->host);
    free(c->scratch);
    free(c->vc);
    free(c->tmp);
    free(c->tmp_host);
    free(c->floor);
    free(c);
}
