/*
 * A stack of the caller's making (devactor_resource.h): budget over pool
 * over the driver, and on top a layer of the caller's own that keeps a
 * cache of device memory and spills it when the budget refuses.
 *
 *   - the stack function runs on the actor's thread, at the start and
 *     after a reset; the layer's destroy runs when the stack goes;
 *   - an allocation the budget refuses succeeds after the layer frees its
 *     cache, and the layer sees the tag and the query;
 *   - dv_actor_resources walks the stack: names, a pool's statistics, a
 *     trim that gives the pool's chunks back;
 *   - a failing stack function fails the start with its status; calls off
 *     the actor's thread and a layer that breaks the contract (no block, a
 *     block it freed or changed, an answer that is not a dv_status) are
 *     refused; so are a stack function answering +5 and one returning
 *     another actor's resource.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "devactor.h"
#include "devactor_resource.h"
#include "tap.h"

#define MiB (UINT64_C(1) << 20)

typedef struct spill {
    dv_block cache[6]; /* 1 MiB each: memory it can give up */
    int cached;
    int spills, allocs, destroyed;
    uint64_t last_query;
    char last_tag[32];
    int builds;
    pthread_t built_on;
    int fail_build; /* the next build fails with this */
    dv_block moved; /* the real block of CHEAT_MOVED, freed by the test */
    int cheat;      /* allocate breaks the contract: one of CHEAT_* */
    dv_resource *foreign; /* the stack function returns this instead */
    int answer;           /* the stack function answers this (not a dv_status) */
    int bare_fail;        /* rebuilds answer this, with no detail */
    dv_block twice;       /* CHEAT_TWICE: the block it answers every time */
} spill;

enum {
    CHEAT_NONE,
    CHEAT_NO_BLOCK,
    CHEAT_FREED,
    CHEAT_MOVED,
    CHEAT_POSITIVE,
    CHEAT_GROWN,
    CHEAT_BARE_EIO,
    CHEAT_TWICE,
    CHEAT_SMALL,
    CHEAT_OTHER_STREAM
};

static int spill_allocate(void *self, dv_resource *up, uint64_t bytes, dv_stream stream, dv_tag tag,
                          dv_block *out)
{
    spill *s = self;
    s->allocs++;
    s->last_query = tag.query_id;
    snprintf(s->last_tag, sizeof(s->last_tag), "%s", tag.name ? tag.name : "");
    if (s->cheat == CHEAT_NO_BLOCK) {
        memset(out, 0, sizeof(*out));
        return DV_OK;
    }
    if (s->cheat == CHEAT_POSITIVE)
        return 42;
    if (s->cheat == CHEAT_BARE_EIO)
        return DV_EIO; /* no word of its own (dv_error_set) */
    if (s->cheat == CHEAT_TWICE) {
        /* One block from the upstream, answered to every request. */
        int rc = s->twice.generation != 0 ? DV_OK
                                          : dv_resource_allocate(up, bytes, stream, tag, &s->twice);
        *out = s->twice;
        return rc;
    }
    if (s->cheat == CHEAT_SMALL) /* half of what was asked, as the upstream gave it */
        return dv_resource_allocate(up, bytes / 2, stream, tag, out);
    if (s->cheat == CHEAT_OTHER_STREAM)
        return dv_resource_allocate(up, bytes, stream + 1, tag, out);
    if (s->cheat == CHEAT_GROWN) {
        /* A block it made look larger than the upstream gave it. */
        int rc = dv_resource_allocate(up, bytes, stream, tag, out);
        out->bytes *= 2;
        out->requested *= 2;
        return rc;
    }
    if (s->cheat == CHEAT_FREED || s->cheat == CHEAT_MOVED) {
        /* A block it gave back already, or one it changed. */
        int rc = dv_resource_allocate(up, bytes, stream, tag, out);
        if (rc != DV_OK)
            return rc;
        dv_block kept = *out;
        if (s->cheat == CHEAT_FREED) {
            dv_resource_deallocate(up, out);
        } else {
            s->moved = *out;
            kept.ptr += 256;
        }
        *out = kept;
        return DV_OK;
    }
    int rc = dv_resource_allocate(up, bytes, stream, tag, out);
    while ((rc == DV_EOUT_OF_BUDGET || rc == DV_EDEVICE_OOM) && s->cached > 0) {
        /* Give up what the cache holds, and ask again. */
        while (s->cached > 0)
            dv_resource_deallocate(up, &s->cache[--s->cached]);
        s->spills++;
        rc = dv_resource_allocate(up, bytes, stream, tag, out);
    }
    return rc;
}

static int spill_deallocate(void *self, dv_resource *up, dv_block *block)
{
    (void)self;
    return dv_resource_deallocate(up, block);
}

static void spill_destroy(void *self)
{
    spill *s = self;
    s->destroyed++;
    s->cached = 0; /* its blocks go with the stack */
}

static const dv_resource_ops spill_ops = {
    .name = "spill",
    .allocate = spill_allocate,
    .deallocate = spill_deallocate,
    .destroy = spill_destroy,
};

static dv_resource *captured; /* a layer, to misuse from another thread */

static int build(dv_resource *bottom, void *user, dv_resource **top)
{
    spill *s = user;
    s->builds++;
    s->built_on = pthread_self();
    if (s->foreign != NULL) {
        *top = s->foreign;
        return DV_OK;
    }
    if (s->answer != 0)
        return s->answer;
    if (s->bare_fail != 0 && s->builds > 1)
        return s->bare_fail; /* no detail of its own */
    if (s->fail_build != 0) {
        int rc = s->fail_build;
        s->fail_build = 0;
        return dv_error_set(rc, "build", 0, 0, "the stack function refuses");
    }
    dv_resource *pool = NULL, *budget = NULL, *mine = NULL;
    dv_pool_options po = {.initial_chunk_bytes = 2 * MiB, .max_chunk_bytes = 4 * MiB};
    int rc = dv_resource_pool(bottom, &po, &pool);
    if (rc == DV_OK && (rc = dv_resource_budget(pool, 8 * MiB, &budget)) != DV_OK)
        dv_resource_destroy(pool);
    if (rc == DV_OK && (rc = dv_resource_adapt(budget, &spill_ops, s, &mine)) != DV_OK) {
        dv_resource_destroy(budget);
        dv_resource_destroy(pool);
    }
    if (rc != DV_OK)
        return rc;
    /* The cache: 6 of the budget's 8 MiB. */
    s->cached = 0;
    for (int i = 0; i < 6; i++) {
        if (dv_resource_allocate(budget, MiB, 0, (dv_tag){"cache", 0}, &s->cache[i]) == DV_OK)
            s->cached++;
    }
    captured = mine;
    *top = mine;
    return DV_OK;
}

static int give_back_moved(dv_resource *top, void *user)
{
    struct give_back {
        dv_block *b;
        int rc;
    } *g = user;
    g->rc = dv_resource_deallocate(dv_resource_upstream(top), g->b);
    return DV_OK;
}

static int top_of(dv_resource *top, void *user)
{
    *(dv_resource **)user = top;
    return DV_OK;
}

/* A bottom layer that refuses everything, as a full device would, and
 * counts what it was asked; sixteen pools over it. */
static int refusals_seen;

static int full_allocate(void *self, dv_resource *up, uint64_t bytes, dv_stream stream, dv_tag tag,
                         dv_block *out)
{
    (void)self, (void)up, (void)stream, (void)tag;
    refusals_seen++;
    memset(out, 0, sizeof(*out));
    return dv_error_set(DV_EDEVICE_OOM, "full", bytes, 0, "the device is full");
}

static int full_deallocate(void *self, dv_resource *up, dv_block *block)
{
    (void)self;
    return dv_resource_deallocate(up, block);
}

static const dv_resource_ops full_ops = {
    .name = "full", .allocate = full_allocate, .deallocate = full_deallocate};

#define NESTED 16

static int build_nested(dv_resource *bottom, void *user, dv_resource **top)
{
    (void)user;
    dv_resource *r = NULL;
    int rc = dv_resource_adapt(bottom, &full_ops, NULL, &r);
    dv_pool_options po = {.initial_chunk_bytes = 2 * MiB, .max_chunk_bytes = 64 * MiB};
    for (int i = 0; rc == DV_OK && i < NESTED; i++)
        rc = dv_resource_pool(r, &po, &r);
    *top = r;
    return rc; /* a failure here fails the test's create, which it checks */
}

typedef struct walk {
    uint64_t limit, used;
    int budget_rc, guard_rc;
    char names[128];
    dv_pool_stats pool;
    int pool_rc;
    uint64_t released, outstanding_before, outstanding_after;
    int trim_rc;
    bool trim;
} walk;

static int visit(dv_resource *top, void *user)
{
    walk *w = user;
    w->names[0] = '\0';
    dv_resource *pool = NULL;
    for (dv_resource *r = top; r != NULL; r = dv_resource_upstream(r)) {
        strncat(w->names, dv_resource_name(r), sizeof(w->names) - strlen(w->names) - 2);
        strncat(w->names, " ", sizeof(w->names) - strlen(w->names) - 1);
        if (strcmp(dv_resource_name(r), "pool") == 0)
            pool = r;
    }
    w->pool_rc = pool != NULL ? dv_resource_pool_stats(pool, &w->pool) : DV_EINVAL;
    w->budget_rc = dv_resource_budget_stats(dv_resource_upstream(top), &w->limit, &w->used);
    w->guard_rc = dv_resource_guard_check(top); /* not a guard */
    if (w->trim) {
        dv_resource *bottom = top;
        while (dv_resource_upstream(bottom) != NULL)
            bottom = dv_resource_upstream(bottom);
        w->outstanding_before = dv_resource_bytes_outstanding(bottom);
        w->trim_rc = dv_resource_trim(top, &w->released);
        w->outstanding_after = dv_resource_bytes_outstanding(bottom);
    }
    return DV_OK;
}

static void *off_thread(void *arg)
{
    dv_block b;
    *(int *)arg = dv_resource_allocate(captured, 4096, 0, (dv_tag){"x", 0}, &b);
    return NULL;
}

int main(void)
{
    plan(56);
    spill s = {0};
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.backend = DV_BACKEND_SIM;
    cfg.stack = build;
    cfg.stack_user = &s;
    dv_actor *a = NULL;
    if (!is_status(dv_actor_create(&cfg, &a), DV_OK, "an actor over a stack of the caller's"))
        bail_out("no actor");
    ok(s.builds == 1 && !pthread_equal(s.built_on, pthread_self()),
       "the stack function ran once, on the actor's thread");
    is_int(s.cached, 6, "the layer holds a 6 MiB cache of the 8 MiB budget");

    walk w = {0};
    is_status(dv_actor_resources(a, visit, &w), DV_OK, "dv_actor_resources");
    is_str(w.names, "spill budget pool async ", "top to bottom: spill, budget, pool, async");
    ok(w.budget_rc == DV_OK && w.limit == 8 * MiB && w.used == 6 * MiB,
       "the budget's statistics: 8 MiB limit, the cache's 6 MiB used (%llu)",
       (unsigned long long)w.used);
    is_status(w.guard_rc, DV_EINVAL, "a guard check on a layer that is not a guard");
    ok(w.pool_rc == DV_OK && w.pool.chunk_bytes >= 6 * MiB && w.pool.chunks >= 2,
       "the pool's statistics (%llu bytes in %u chunks)", (unsigned long long)w.pool.chunk_bytes,
       w.pool.chunks);

    dv_query_set(5);
    dv_ref r = DV_REF_NULL;
    dv_ref_info info;
    int rc = dv_alloc(a, 4 * MiB, 1, "payload", &r);
    rc = rc == DV_OK ? dv_ref_access(r, &info) : rc;
    dv_query_set(0);
    is_status(rc, DV_OK, "4 MiB over a budget with 2 MiB left: granted");
    ok(s.spills == 1 && s.cached == 0, "after the layer spilled its cache (%d spill)", s.spills);
    ok(strcmp(s.last_tag, "payload") == 0 && s.last_query == 5,
       "the layer saw the tag and the query (%s, %llu)", s.last_tag,
       (unsigned long long)s.last_query);
    uint8_t back[16];
    rc = dv_memset(a, r, 0, 0x42, 4 * MiB, 1);
    rc = rc == DV_OK ? dv_copy_dtoh(a, back, r, 4 * MiB - 16, 16, 1) : rc;
    ok(rc == DV_OK && back[15] == 0x42, "the block works");
    dv_ref big = DV_REF_NULL;
    dv_alloc(a, 6 * MiB, 0, "too much", &big);
    is_status(dv_ref_access(big, &info), DV_EOUT_OF_BUDGET,
              "6 MiB more, nothing left to spill: the budget's refusal");
    dv_ref_release(big);
    dv_ref_release(r);
    dv_flush(a);

    walk t = {.trim = true};
    is_status(dv_actor_resources(a, visit, &t), DV_OK, "a trim through dv_actor_resources");
    ok(t.trim_rc == DV_OK && t.released > 0, "the pool gave back %llu bytes",
       (unsigned long long)t.released);
    ok(t.outstanding_after < t.outstanding_before,
       "the driver holds less for the actor (%llu -> %llu)",
       (unsigned long long)t.outstanding_before, (unsigned long long)t.outstanding_after);

    int off = 0;
    pthread_t th;
    pthread_create(&th, NULL, off_thread, &off);
    pthread_join(th, NULL);
    is_status(off, DV_EINVAL, "a layer used off the actor's thread: refused");
    is_status(dv_resource_allocate(NULL, 1, 0, (dv_tag){0}, NULL), DV_EINVAL, "a NULL resource");
    is_status(dv_actor_resources(a, NULL, NULL), DV_EINVAL,
              "dv_actor_resources without a function");
    /* Every call with a NULL resource, and on a layer off its thread. */
    dv_resource *o = NULL;
    dv_pool_stats ps;
    uint64_t n64;
    ok(dv_resource_deallocate(NULL, NULL) == DV_EINVAL &&
           dv_resource_pool(NULL, NULL, &o) == DV_EINVAL &&
           dv_resource_budget(NULL, 1, &o) == DV_EINVAL &&
           dv_resource_logging(NULL, "/dev/null", &o) == DV_EINVAL &&
           dv_resource_guard(NULL, &o) == DV_EINVAL &&
           dv_resource_adapt(NULL, &spill_ops, &s, &o) == DV_EINVAL &&
           dv_resource_pool_stats(NULL, &ps) == DV_EINVAL &&
           dv_resource_budget_stats(NULL, &n64, &n64) == DV_EINVAL &&
           dv_resource_guard_check(NULL) == DV_EINVAL &&
           dv_resource_trim(NULL, &n64) == DV_EINVAL && o == NULL,
       "a NULL resource: DV_EINVAL from every call, nothing made");
    ok(dv_resource_budget(captured, 1, &o) == DV_EINVAL &&
           dv_resource_trim(captured, &n64) == DV_EINVAL &&
           dv_resource_budget_stats(captured, &n64, NULL) == DV_EINVAL && o == NULL,
       "a layer used off the actor's thread (from this one): DV_EINVAL, nothing made");

    /* A rebuild builds the stack again; the old layer is destroyed. */
    is_status(dv_actor_reset(a), DV_OK, "reset");
    ok(s.builds == 2 && s.destroyed == 1 && s.cached == 6,
       "the stack was built again (builds %d, destroyed %d, cache %d)", s.builds, s.destroyed,
       s.cached);
    rc = dv_alloc(a, MiB, 0, "after", &r);
    rc = rc == DV_OK ? dv_ref_access(r, &info) : rc;
    is_status(rc, DV_OK, "and allocates");
    dv_ref_release(r);

    /* A layer that breaks its contract: DV_OK without a block, with a
     * block it freed (two handles would share it), with a block it
     * changed; an answer that is not a dv_status. */
    static const char *const cheats[] = {"", "DV_OK without a block", "a block it freed",
                                         "a block moved by 256 bytes", "+42"};
    for (int c = CHEAT_NO_BLOCK; c <= CHEAT_POSITIVE; c++) {
        s.cheat = c;
        dv_alloc(a, MiB, 0, "cheat", &r);
        is_status(dv_ref_access(r, &info), DV_EINVAL, "a layer answering %s: refused", cheats[c]);
        dv_ref_release(r);
    }
    dv_actor_stats st0, st1;
    dv_actor_stats_get(a, &st0);
    s.cheat = CHEAT_GROWN;
    dv_alloc(a, MiB, 0, "cheat", &r);
    is_status(dv_ref_access(r, &info), DV_EINVAL,
              "a layer answering a block twice the size the upstream gave: refused");
    dv_ref_release(r);
    dv_actor_stats_get(a, &st1);
    /* A layer that fails with no detail of its own, after another failure
     * on the actor's thread: the detail names it, not the earlier one. */
    s.cheat = CHEAT_BARE_EIO;
    dv_alloc(a, MiB, 0, "bare", &r);
    rc = dv_ref_access(r, &info);
    ok(rc == DV_EIO && strstr(dv_last_error()->message, "resource spill: allocate answered DV_EIO"),
       "a layer's failure with no detail of its own: named (%s)", dv_last_error()->message);
    dv_ref_release(r);
    /* A layer answering one live block twice: the second caller is
     * refused, the first keeps it. */
    s.cheat = CHEAT_TWICE;
    dv_ref r1 = DV_REF_NULL, r2 = DV_REF_NULL;
    uint32_t word = 0x600d600d, word_back = 0;
    dv_alloc(a, MiB, 0, "first", &r1);
    dv_copy_htod(a, r1, 0, &word, sizeof(word), 0);
    dv_alloc(a, MiB, 0, "second", &r2);
    is_status(dv_ref_access(r2, &info), DV_EINVAL,
              "a layer answering a block it already answered with, still live: refused");
    dv_ref_release(r2);
    rc = dv_copy_dtoh(a, &word_back, r1, 0, sizeof(word_back), 0);
    ok(rc == DV_OK && word_back == word, "... the first caller keeps it (%s, 0x%x)",
       dv_err_name(rc), word_back);
    dv_ref_release(r1);
    /* Blocks as the upstream gave them, but not what was asked: half the
     * bytes (a use of the rest would reach another block), or ordered on
     * another stream.  Both go back upstream. */
    dv_actor_stats_get(a, &st0);
    for (int c = CHEAT_SMALL; c <= CHEAT_OTHER_STREAM; c++) {
        s.cheat = c;
        dv_alloc(a, MiB, 0, "cheat", &r);
        rc = dv_ref_access(r, &info);
        ok(rc == DV_EINVAL &&
               strstr(dv_last_error()->message,
                      c == CHEAT_SMALL ? "bytes for a request" : "ordered on stream"),
           "a layer answering %s: refused (%s)",
           c == CHEAT_SMALL ? "half the bytes asked for" : "a block of another stream",
           dv_last_error()->message);
        dv_ref_release(r);
    }
    dv_actor_stats_get(a, &st1);
    ok(st1.bytes_outstanding == st0.bytes_outstanding,
       "... both went back upstream (%llu bytes outstanding before, %llu after)",
       (unsigned long long)st0.bytes_outstanding, (unsigned long long)st1.bytes_outstanding);
    s.cheat = CHEAT_NONE;
    {
        /* The real block of the moved one, given back on the actor's thread. */
        struct give_back {
            dv_block *b;
            int rc;
        } g = {&s.moved, -1};
        is_status(dv_actor_resources(a, give_back_moved, &g), DV_OK,
                  "the moved block's owner frees it too");
        is_status(g.rc, DV_EUSE_AFTER_FREE,
                  "refused: the refusal gave the block back upstream, as the upstream gave it");
    }
    rc = dv_alloc(a, MiB, 0, "honest", &r);
    rc = rc == DV_OK ? dv_ref_access(r, &info) : rc;
    is_status(rc, DV_OK, "the layer honest again: allocates");
    ok(st1.bytes_outstanding == st0.bytes_outstanding,
       "the grown block went back upstream (%llu bytes outstanding before, %llu after)",
       (unsigned long long)st0.bytes_outstanding, (unsigned long long)st1.bytes_outstanding);
    dv_ref_release(r);
    is_status(dv_actor_destroy(a), DV_OK, "destroyed");
    is_int(s.destroyed, 2, "the layer's destroy ran with the stack");

    /* A stack function that fails. */
    spill f = {.fail_build = DV_ENOMEM};
    cfg.stack_user = &f;
    a = NULL;
    is_status(dv_actor_create(&cfg, &a), DV_ENOMEM, "a failing stack function fails the start");
    ok(a == NULL && strstr(dv_last_error()->message, "refuses") != NULL, "with its own detail (%s)",
       dv_last_error()->message);

    /* Pools over pools over a full device: a refusal asks the bottom a
     * few times, not a number exponential in the depth. */
    dv_actor_config ncfg;
    dv_actor_config_init(&ncfg);
    ncfg.backend = DV_BACKEND_SIM;
    ncfg.stack = build_nested;
    dv_actor *nested = NULL;
    if (is_status(dv_actor_create(&ncfg, &nested), DV_OK, "an actor over %d pools", NESTED)) {
        refusals_seen = 0;
        dv_alloc(nested, 3 * MiB, 0, "deep", &r);
        is_status(dv_ref_access(r, &info), DV_EDEVICE_OOM, "a request the bottom refuses: refused");
        ok(refusals_seen > 0 && refusals_seen <= 4 * NESTED,
           "the bottom was asked %d times (at most %d)", refusals_seen, 4 * NESTED);
        dv_ref_release(r);
        dv_actor_destroy(nested);
    } else {
        ok(false, "no actor");
        ok(false, "no actor");
    }

    /* A rebuild whose stack function fails with no word of its own: the
     * health still names the cause. */
    spill rb = {.bare_fail = DV_EIO};
    cfg.stack = build;
    cfg.stack_user = &rb;
    a = NULL;
    if (is_status(dv_actor_create(&cfg, &a), DV_OK, "an actor whose rebuilds will fail")) {
        is_status(dv_actor_reset(a), DV_EDEVICE_LOST, "its reset: lost");
        dv_actor_health h;
        memset(&h, 0, sizeof(h));
        dv_actor_health_get(a, &h);
        ok(strstr(h.first_fault.message, "DV_EIO") != NULL, "the health names the cause (%s)",
           h.first_fault.message);
        dv_actor_destroy(a);
    } else {
        ok(false, "no actor");
        ok(false, "no actor");
    }

    /* A stack function that answers +5, or returns another actor's top. */
    spill q = {.answer = 5};
    cfg.stack_user = &q;
    a = NULL;
    is_status(dv_actor_create(&cfg, &a), DV_EINVAL, "a stack function answering +5: refused");
    cfg.stack = NULL;
    is_status(dv_actor_create(&cfg, &a), DV_OK, "without one: the default stack");
    dv_resource *theirs = NULL;
    is_status(dv_actor_resources(a, top_of, &theirs), DV_OK, "another actor's top, taken");
    dv_actor *b = NULL;
    spill fo = {.foreign = theirs};
    cfg.stack = build;
    cfg.stack_user = &fo;
    is_status(dv_actor_create(&cfg, &b), DV_EINVAL, "a stack function returning it: refused");
    ok(b == NULL, "no actor");
    rc = dv_alloc(a, MiB, 0, "still", &r);
    rc = rc == DV_OK ? dv_ref_access(r, &info) : rc;
    is_status(rc, DV_OK, "the other actor still allocates");
    dv_ref_release(r);
    is_status(dv_actor_destroy(a), DV_OK, "and is destroyed whole");
    return tap_done();
}
