/*
 * The handle table: mint (a client's), settle (the actor's), access,
 * retain, release, recycle; pending handles (waited for, or "pending" to
 * a try); failed allocations; stale handles of every kind (released,
 * reused slot, older context, closed or lost domain, reopened domain);
 * growth past a chunk; and, with threads, that a reader racing a recycle
 * sees one generation's fields or DV_ESTALE and never a mix, that
 * concurrent retain/release pairs keep the count, and that no post
 * reaches an owner after its domain was closed.
 *
 * The test thread plays each domain's client and its actor.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include <string.h>
#include <time.h>

#include "base/error.h"
#include "gpuref/gpuref.h"
#include "tap.h"

#define SLOT_OF(bits) ((uint32_t)((bits) >> 32) & (DV_REF_MAX_SLOTS - 1u))
#define GEN_OF(bits)  ((uint32_t)(bits))
#define DOM_OF(bits)  ((uint32_t)((bits) >> 56))

/* ------------------------------------------------------------------------
 * The owner's post_free: counts calls, remembers the last handle.
 * ------------------------------------------------------------------------ */

typedef struct owner {
    _Atomic uint64_t posts;
    _Atomic uint64_t last;
    _Atomic int result;           /* what post_free answers */
    _Atomic bool closed;          /* set once its domain's close returned */
    _Atomic uint64_t after_close; /* posts running at or after that */
    bool slow;                    /* yield inside post_free (set before threads) */
} owner;

static int post_free(void *arg, dv_ref ref)
{
    owner *o = arg;
    if (atomic_load(&o->closed))
        atomic_fetch_add(&o->after_close, 1);
    atomic_store(&o->last, ref.bits);
    atomic_fetch_add(&o->posts, 1);
    if (o->slow) {
        /* Widen the window in which a close may find a post in flight. */
        for (int i = 0; i < 4; i++)
            sched_yield();
        if (atomic_load(&o->closed))
            atomic_fetch_add(&o->after_close, 1);
    }
    return atomic_load(&o->result);
}

static uint64_t posts(owner *o)
{
    return atomic_load(&o->posts);
}

static dv_block make_block(uint64_t ptr, uint64_t bytes, dv_stream_id stream, uint64_t query_id)
{
    return (dv_block){.ptr = ptr,
                      .bytes = bytes,
                      .requested = bytes - 3,
                      .generation = dv__generation_batch(), /* unique: a batch of its own */
                      .tag = {"ref.t", query_id},
                      .alloc_stream = stream,
                      .align = DV_BLOCK_ALIGN,
                      .device = 0,
                      .state = DV_BLOCK_LIVE};
}

/* The client mints, the actor settles: a handle to block. */
static dv_ref_cache cache0, cache1;
static int mint(dv_ref_domain *d, dv_ref_cache *c, const dv_block *b, dv_ref *out)
{
    int rc = dv__ref_mint(d, c, out);
    if (rc == DV_OK && dv__ref_settle(d, *out, b) == NULL)
        rc = DV_EINVAL;
    return rc;
}

/* What the actor does with a free message: the slot, recycled and spare. */
static bool actor_free(dv_ref_domain *d, dv_ref ref)
{
    dv_ref_slot *s = dv__ref_lookup_free(d, ref);
    if (s == NULL)
        return false;
    dv__ref_recycle(d, s);
    dv__ref_flush_recycled(d);
    return true;
}

static owner own0, own1, own2, own3;
static dv_ref_domain *d0, *d1;
/* Every handle d0 ever minted, to check none comes back after a reopen. */
static dv_ref history[64];
static int nhistory;

static dv_ref first_ref;

static void remember(dv_ref r)
{
    if (nhistory < (int)(sizeof(history) / sizeof(history[0])))
        history[nhistory++] = r;
}

/* ------------------------------------------------------------------------
 * Single-threaded
 * ------------------------------------------------------------------------ */

#define ROUNDTRIP_TESTS 20
static void test_roundtrip(void)
{
    dv_ref_info info;
    dv_ref r;

    is_status(dv__ref_domain_open(&own0, post_free, 3, &d0), DV_OK, "open a domain for device 3");
    ok(dv__ref_domain_index(d0) >= 1, "its index is 1..255 (%u)", dv__ref_domain_index(d0));
    is_int(dv__ref_domain_state(d0), DV_DOMAIN_OPEN, "it is OPEN");
    is_u64(dv__ref_domain_context(d0), 1, "at context generation 1");

    dv_block b = make_block(0x7f0000010000, 4096, 2, 0);
    is_status(mint(d0, &cache0, &b, &r), DV_OK, "mint a handle");
    remember(r);
    ok(DOM_OF(r.bits) == dv__ref_domain_index(d0) && GEN_OF(r.bits) != 0,
       "the handle names the domain and a non-zero generation (0x%016llx)",
       (unsigned long long)r.bits);
    memset(&info, 0xee, sizeof(info));
    is_status(dv_ref_access(r, &info), DV_OK, "access it");
    is_u64(info.ptr, b.ptr, "info.ptr");
    is_u64(info.bytes, 4096, "info.bytes");
    is_u64(info.requested, 4093, "info.requested");
    is_int(info.device, 3, "info.device comes from the domain");
    is_u64(info.alloc_stream, 2, "info.alloc_stream");
    is_u64(info.last_write_stream, DV_STREAM_NONE, "info.last_write_stream is none at first");
    is_u64(info.block_generation, b.generation, "info.block_generation");
    is_u64(info.context_generation, 1, "info.context_generation");
    is_u64(info.refcount, 1, "info.refcount is 1");
    is_u64(dv__ref_held(d0), 1, "one slot held");

    dv_ref_slot *s = dv__ref_lookup(d0, r, "test");
    ok(s != NULL && s->gen == GEN_OF(r.bits) && s->block.generation == b.generation &&
           s->block.tag.query_id == 0,
       "the actor's lookup finds the slot with its block");
    dv__ref_set_last_write(s, 1);
    dv_ref_access(r, &info);
    is_u64(info.last_write_stream, 1, "set_last_write shows in access");
    is_status(dv_ref_access(r, NULL), DV_OK, "access with no info validates only");

    first_ref = r; /* for test_counting */
}

#define COUNTING_TESTS 31
static void test_counting(void)
{
    dv_ref r = first_ref, r2;
    dv_ref_info info;

    is_status(dv_ref_retain(r), DV_OK, "retain");
    is_status(dv_ref_retain(r), DV_OK, "retain again");
    dv_ref_access(r, &info);
    is_u64(info.refcount, 3, "three references");
    is_status(dv_ref_release(r), DV_OK, "release (3 -> 2)");
    is_status(dv_ref_release(r), DV_OK, "release (2 -> 1)");
    is_u64(posts(&own0), 0, "no post while references remain");
    is_status(dv_ref_release(r), DV_OK, "the last release");
    is_u64(posts(&own0), 1, "posted the free exactly once");
    is_u64(atomic_load(&own0.last), r.bits, "... for this handle");

    ok(dv__ref_lookup(d0, r, "test") != NULL,
       "until its free is handled, the actor still finds it: what was posted before runs");
    is_status(dv_ref_release(r), DV_ESTALE, "a second release is DV_ESTALE");
    is_u64(dv_last_error()->generation, GEN_OF(r.bits), "... with the handle's generation");
    is_u64(posts(&own0), 1, "... and posts nothing");
    is_status(dv_ref_access(r, &info), DV_ESTALE, "access after the count hit zero: DV_ESTALE");
    is_status(dv_ref_retain(r), DV_ESTALE, "retain after the count hit zero: DV_ESTALE");
    is_u64(dv__ref_held(d0), 1, "the dead slot is still held until the actor recycles it");

    dv__ref_cache_return(d0, &cache0); /* so the freed slot is the next minted */
    ok(actor_free(d0, r), "the free finds it; the actor recycles it");
    is_u64(dv__ref_held(d0), 0, "no slot held");
    ok(dv__ref_lookup_free(d0, r) == NULL, "a second free finds nothing");
    ok(dv__ref_lookup(d0, r, "test") == NULL && dv_last_error()->status == DV_ESTALE,
       "the actor's lookup of the freed handle is DV_ESTALE");
    is_u64(dv_last_error()->generation, GEN_OF(r.bits), "... with the handle's generation");

    dv_block b2 = make_block(0x7f0000020000, 512, 0, 0);
    is_status(mint(d0, &cache0, &b2, &r2), DV_OK, "mint again");
    remember(r2);
    ok(SLOT_OF(r2.bits) == SLOT_OF(r.bits) && GEN_OF(r2.bits) != GEN_OF(r.bits),
       "the slot is reused with a new generation (%u -> %u)", GEN_OF(r.bits), GEN_OF(r2.bits));
    is_status(dv_ref_access(r, NULL), DV_ESTALE, "the old handle stays stale (access)");
    is_status(dv_ref_retain(r), DV_ESTALE, "the old handle stays stale (retain)");
    is_status(dv_ref_release(r), DV_ESTALE, "the old handle stays stale (release)");
    ok(dv_ref_access(r2, &info) == DV_OK && info.ptr == b2.ptr && info.refcount == 1,
       "the new handle reads the new block");

    atomic_store(&own0.result, DV_ESHUTDOWN);
    is_status(dv_ref_release(r2), DV_ESHUTDOWN, "the last release returns post_free's result");
    atomic_store(&own0.result, DV_OK);
    is_u64(posts(&own0), 2, "... having posted once");
    ok(actor_free(d0, r2), "recycled");
}

#define LOOKUP_TESTS 11
static void test_lookup(void)
{
    dv_ref r1;
    const dv_error_detail *e = dv_last_error();

    is_status(dv__ref_domain_open(&own1, post_free, 5, &d1), DV_OK,
              "open a second domain (device 5)");
    ok(d1 != d0 && dv__ref_domain_index(d1) != dv__ref_domain_index(d0), "a domain of its own");
    dv_block b = make_block(0x7f0000030000, 256, 0, 0);
    mint(d1, &cache1, &b, &r1);
    ok(dv__ref_lookup(d0, r1, "copy") == NULL && e->status == DV_EINVAL,
       "device 5's handle given to device 3's actor: DV_EINVAL");
    ok(strstr(e->message, "device 5") != NULL && strstr(e->message, "device 3") != NULL,
       "... saying so: %s", e->message);
    ok(dv__ref_lookup(d0, DV_REF_NULL, "copy") == NULL && e->status == DV_EINVAL,
       "DV_REF_NULL: DV_EINVAL (%s)", e->message);
    is_status(dv_ref_access(DV_REF_NULL, NULL), DV_EINVAL, "access(DV_REF_NULL): DV_EINVAL");
    is_status(dv_ref_release(DV_REF_NULL), DV_EINVAL, "release(DV_REF_NULL): DV_EINVAL");
    is_status(dv_ref_access((dv_ref){(UINT64_C(1) << 32) | 1}, NULL), DV_EINVAL,
              "a handle with domain bits 0: DV_EINVAL");
    is_status(dv_ref_access((dv_ref){(UINT64_C(250) << 56) | 1}, NULL), DV_EINVAL,
              "a handle of a domain never opened (malformed): DV_EINVAL");
    is_status(dv_ref_retain((dv_ref){((uint64_t)dv__ref_domain_index(d0) << 56) |
                                     (UINT64_C(0xfffff0) << 32) | 1}),
              DV_ESTALE, "a handle of a slot beyond the table: DV_ESTALE");
    dv_ref_release(r1);
    ok(actor_free(d1, r1) && posts(&own1) == 1, "device 5's handle released and recycled");
}

#define WHITEBOX_TESTS 9
static void test_limits(void)
{
    dv_ref r, w, r2;
    dv_ref_info info;
    dv_block b = make_block(0x7f0000040000, 1024, 1, 0);

    /* On device 5's domain: the wraparound makes generations repeat,
     * which test_reopen's history of device 3's domain must not see. */

    mint(d1, &cache1, &b, &r);
    _Atomic uint64_t *word = dv__ref_word(r);
    uint32_t gen = GEN_OF(r.bits);
    atomic_store(word, ((uint64_t)gen << 32) | UINT32_MAX);
    is_status(dv_ref_retain(r), DV_EINVAL, "retain at 2^32-1 references: DV_EINVAL");
    ok(dv_ref_access(r, &info) == DV_OK && info.refcount == UINT32_MAX,
       "... and the count is unchanged");
    atomic_store(word, ((uint64_t)gen << 32) | 1);

    /* Wraparound: a free slot at the last generation; minting skips 0. */
    is_status(dv_ref_release(r), DV_OK, "release it");
    dv__ref_cache_return(d1, &cache1); /* so the freed slot is the next minted */
    ok(actor_free(d1, r), "recycle it");
    atomic_store(word, UINT64_C(0xffffffff) << 32);
    w.bits = (r.bits & ~UINT64_C(0xffffffff)) | UINT32_C(0xffffffff);
    is_status(dv_ref_access(r, NULL), DV_ESTALE, "the earlier handle is stale");
    is_status(mint(d1, &cache1, &b, &r2), DV_OK, "mint the slot at generation 2^32-1");
    ok(SLOT_OF(r2.bits) == SLOT_OF(r.bits) && GEN_OF(r2.bits) == 1,
       "the next generation is 1, not 0");
    is_status(dv_ref_access(w, NULL), DV_ESTALE, "a handle of generation 2^32-1 is stale");
    dv_ref_release(r2);
    ok(actor_free(d1, r2) && dv__ref_held(d1) == 0, "recycled; nothing held");
}

/* A thread that settles a pending handle after the test waits on it. */
typedef struct late_settle {
    dv_ref_domain *d;
    dv_ref r;
    dv_block b;
} late_settle;

static void *settle_later(void *arg)
{
    late_settle *l = arg;
    struct timespec ts = {0, 20 * 1000 * 1000}; /* 20 ms: the waiter is asleep by then */
    nanosleep(&ts, NULL);
    dv__ref_settle(l->d, l->r, &l->b);
    dv__ref_wake_settled(l->d); /* as the actor does after its batch */
    return NULL;
}

#define PENDING_TESTS 12
static void test_pending(void)
{
    dv_ref r;
    dv_ref_info info;
    pthread_t t;

    is_status(dv__ref_mint(d1, &cache1, &r), DV_OK, "a client mints a handle");
    is_status(dv_ref_try_access(r, &info), DV_EAGAIN, "pending: try_access says so");
    ok(strstr(dv_last_error()->message, "pending") != NULL, "... %s", dv_last_error()->message);
    is_status(dv_ref_retain(r), DV_OK, "a pending handle can be retained");
    is_status(dv_ref_release(r), DV_OK, "... and released (not the last reference)");
    late_settle l = {d1, r, make_block(0x7f0000050000, 2048, 3, 0)};
    pthread_create(&t, NULL, settle_later, &l);
    is_status(dv_ref_access(r, &info), DV_OK, "access waits until the actor settled it");
    ok(info.ptr == l.b.ptr && info.alloc_stream == 3, "... and reads its block");
    pthread_join(t, NULL);
    dv_ref_release(r);
    ok(actor_free(d1, r), "released and recycled");

    /* A failed allocation: the handle answers its error and detail. */
    is_status(dv__ref_mint(d1, &cache1, &r), DV_OK, "mint another");
    dv__fail(DV_EOUT_OF_BUDGET, "allocate", "budget: 4096 bytes requested, 0 remaining");
    dv__detail()->requested = 4096;
    dv__ref_settle_failed(d1, r, DV_EOUT_OF_BUDGET);
    dv_error_clear();
    is_status(dv_ref_access(r, &info), DV_EOUT_OF_BUDGET, "access answers the allocation's error");
    ok(dv_last_error()->requested == 4096 && strstr(dv_last_error()->message, "budget") != NULL,
       "... with its detail: %s", dv_last_error()->message);
    ok(dv__ref_lookup(d1, r, "memset") == NULL && dv_last_error()->status == DV_EOUT_OF_BUDGET,
       "the actor's lookup answers it too");
    dv_ref_release(r);
    ok(actor_free(d1, r) && dv__ref_held(d1) == 0, "the failed handle is released and recycled");
}

/* drop() for invalidate_all: counts per block and checks that the
 * handle is already stale (the context moved on before the drops). */
static dv_ref inval_refs[6];
static int dropped[6], stale_in_drop, drops_total;

static void drop(dv_block *block, void *arg)
{
    (void)arg;
    uint64_t q = block->tag.query_id;
    drops_total++;
    if (q < 6) {
        dropped[q]++;
        stale_in_drop += dv_ref_access(inval_refs[q], NULL) == DV_ESTALE &&
                         dv_ref_retain(inval_refs[q]) == DV_ESTALE;
    }
}

#define INVALIDATE_TESTS 12
static void test_invalidate(void)
{
    dv_ref_info info;
    uint64_t before = posts(&own0);

    for (int i = 0; i < 6; i++) {
        dv_block b = make_block(0x7f0000100000 + (uint64_t)i * 0x1000, 4096, 0, (uint64_t)i);
        mint(d0, &cache0, &b, &inval_refs[i]);
        remember(inval_refs[i]);
    }
    dv_ref_release(inval_refs[0]);
    dv_ref_release(inval_refs[1]);
    dv_ref_retain(inval_refs[2]);
    is_u64(posts(&own0) - before, 2, "two of six released to zero (their frees not handled)");
    is_u64(dv__ref_held(d0), 6, "six slots held");
    drops_total = 0;
    dv__ref_invalidate_all(d0, drop, NULL);
    ok(dropped[0] == 1 && dropped[1] == 1 && dropped[2] == 1 && dropped[3] == 1 &&
           dropped[4] == 1 && dropped[5] == 1 && drops_total == 6,
       "drop called once per held block, released or not (%d in all)", drops_total);
    is_int(stale_in_drop, 6, "each handle was already stale when its block was dropped");
    is_u64(dv__ref_held(d0), 0, "nothing held");
    is_u64(dv__ref_domain_context(d0), 2, "context generation 2");
    int bad = 0;
    for (int i = 0; i < 6; i++) {
        bad += dv_ref_access(inval_refs[i], NULL) != DV_ESTALE;
        bad += dv_ref_retain(inval_refs[i]) != DV_ESTALE;
        bad += dv_ref_release(inval_refs[i]) != DV_ESTALE;
    }
    is_int(bad, 0, "every handle is stale to access, retain and release");
    is_u64(posts(&own0) - before, 2, "no post came from the invalidation");
    ok(dv__ref_lookup(d0, inval_refs[3], "test") == NULL && dv_last_error()->status == DV_ESTALE,
       "the actor's lookup: DV_ESTALE");

    dv_ref r;
    dv_block b = make_block(0x7f0000200000, 256, 0, 99);
    is_status(mint(d0, &cache0, &b, &r), DV_OK, "mint after the rebuild");
    remember(r);
    ok(dv_ref_access(r, &info) == DV_OK && info.context_generation == 2,
       "the new handle carries context 2");
    dv_ref_release(r);
    ok(actor_free(d0, r), "released and recycled");
}

static void drop_count(dv_block *block, void *arg)
{
    (void)block;
    ++*(int *)arg;
}

#define STATES_TESTS 17
static void test_states(void)
{
    static const dv_domain_state states[] = {DV_DOMAIN_CLOSING, DV_DOMAIN_GONE, DV_DOMAIN_LOST};
    static const char *const names[] = {"CLOSING", "GONE", "LOST"};
    dv_ref r[3];
    uint64_t before = posts(&own0);

    for (int i = 0; i < 3; i++) {
        dv_block b = make_block(0x7f0000300000 + (uint64_t)i * 0x1000, 256, 0, 0);
        mint(d0, &cache0, &b, &r[i]);
        remember(r[i]);
    }
    for (int i = 0; i < 3; i++) {
        dv__ref_domain_set_state(d0, states[i]);
        is_int(dv__ref_domain_state(d0), states[i], "state %s", names[i]);
        is_status(dv_ref_access(r[i], NULL), DV_ESTALE, "%s: access is DV_ESTALE", names[i]);
        is_status(dv_ref_retain(r[i]), DV_ESTALE, "%s: retain is DV_ESTALE", names[i]);
        is_status(dv_ref_release(r[i]), DV_OK, "%s: the last release is DV_OK", names[i]);
        is_u64(posts(&own0), before, "%s: ... and posts nothing", names[i]);
    }
    int drops = 0;
    dv__ref_invalidate_all(d0, drop_count, &drops);
    is_int(drops, 3, "the actor drops the three blocks itself");
    is_u64(dv__ref_held(d0), 0, "nothing held");
}

#define REOPEN_TESTS 12
static void test_reopen(void)
{
    uint8_t index = dv__ref_domain_index(d0);
    uint64_t old_posts = posts(&own0);
    dv_ref_domain *again;
    dv_ref fresh[8], h;

    dv__ref_domain_close(d0);
    is_int(dv__ref_domain_state(d0), DV_DOMAIN_GONE, "closed: GONE");
    is_status(dv__ref_domain_open(&own2, post_free, 7, &again), DV_OK, "open a domain (device 7)");
    ok(again == d0 && dv__ref_domain_index(again) == index,
       "the closed domain is reused (index %u)", index);
    is_u64(dv__ref_domain_context(again), 1, "context generation 1 again");
    int bad = 0, same = 0;
    /* A client of the domain's new life starts with an empty cache. */
    memset(&cache0, 0, sizeof(cache0));
    for (int i = 0; i < 8; i++) {
        dv_block b = make_block(0x7f0000400000 + (uint64_t)i * 0x1000, 256, 0, 0);
        bad += mint(again, &cache0, &b, &fresh[i]) != DV_OK;
    }
    for (int i = 0; i < nhistory; i++) {
        bad += dv_ref_access(history[i], NULL) != DV_ESTALE;
        bad += dv_ref_retain(history[i]) != DV_ESTALE;
        bad += dv_ref_release(history[i]) != DV_ESTALE;
        for (int j = 0; j < 8; j++)
            same += history[i].bits == fresh[j].bits;
    }
    is_int(bad, 0, "all %d handles of the earlier life are stale after the reopen", nhistory);
    is_int(same, 0, "no new handle equals an old one");
    is_u64(posts(&own2), 0, "the new owner got no post from them");
    is_u64(posts(&own0), old_posts, "the old owner got none either");
    for (int i = 0; i < 8; i++)
        dv_ref_release(fresh[i]);
    is_u64(posts(&own2), 8, "the new handles post to the new owner");
    for (int i = 0; i < 8; i++)
        actor_free(again, fresh[i]);

    /* A close with a block still held forgets it. */
    dv_block b = make_block(0x7f0000500000, 256, 0, 0);
    dv__ref_cache_return(again, &cache0);
    mint(again, &cache0, &b, &h);
    dv__ref_domain_close(again);
    is_u64(dv__ref_held(again), 0, "a close with a live handle left forgets it");
    dv__ref_domain_open(&own2, post_free, 7, &d0);
    is_status(dv_ref_access(h, NULL), DV_ESTALE, "... and it stays stale after a reopen");
    /* Its slot is minted again among the first (a reset spare list starts
     * at slot 0), under a new generation. */
    memset(&cache0, 0, sizeof(cache0));
    dv_ref again_refs[64];
    int reused = 0;
    for (int i = 0; i < 64; i++) {
        mint(d0, &cache0, &b, &again_refs[i]);
        reused += SLOT_OF(again_refs[i].bits) == SLOT_OF(h.bits) && again_refs[i].bits != h.bits;
    }
    ok(reused == 1 && dv_ref_access(h, NULL) == DV_ESTALE,
       "its slot is reused under a new generation; the old handle stays stale");
    for (int i = 0; i < 64; i++) {
        dv_ref_release(again_refs[i]);
        actor_free(d0, again_refs[i]);
    }
}

#define GROWTH_TESTS 6
static void test_growth(void)
{
    enum { N = 10000 };
    static dv_ref refs[N];
    int bad = 0, distinct = 1;
    uint32_t top = 0;
    uint64_t before = posts(&own1);

    for (int i = 0; i < N; i++) {
        dv_block b = make_block(0x100000000 + (uint64_t)i * 256, 256 + (uint64_t)i, 0, 0);
        bad += mint(d1, &cache1, &b, &refs[i]) != DV_OK;
        if (SLOT_OF(refs[i].bits) > top)
            top = SLOT_OF(refs[i].bits);
    }
    is_int(bad, 0, "minted %d handles", N);
    ok(top >= 2 * DV_REF_CHUNK_SLOTS, "they span three chunks (top slot %u)", top);
    is_u64(dv__ref_held(d1), N, "%d slots held", N);
    dv_ref_info info;
    for (int i = 0; i < N; i++) {
        bad += dv_ref_access(refs[i], &info) != DV_OK;
        bad += info.ptr != 0x100000000 + (uint64_t)i * 256 || info.bytes != 256 + (uint64_t)i;
        if (i > 0 && SLOT_OF(refs[i].bits) == SLOT_OF(refs[i - 1].bits))
            distinct = 0;
    }
    ok(bad == 0 && distinct, "each reads its own block");
    for (int i = 0; i < N; i++) {
        bad += dv_ref_release(refs[i]) != DV_OK;
        bad += !actor_free(d1, refs[i]);
    }
    ok(bad == 0 && posts(&own1) - before == N, "each released once, posted once, recycled");
    is_u64(dv__ref_held(d1), 0, "nothing held");
}

/* ------------------------------------------------------------------------
 * Threads
 * ------------------------------------------------------------------------ */

/* (a) A reader races release, recycle and re-mint of the same slot. */
enum { RACE_ITERS = 5000 };
static _Atomic uint64_t race_ref[RACE_ITERS];
static _Atomic uint32_t race_iter, race_seen;
static _Atomic bool race_stop;

static uint64_t race_ptr(uint32_t i)
{
    return 0x7e0000000000 + (uint64_t)i * 0x10000;
}
static uint64_t race_bytes(uint32_t i)
{
    return (race_ptr(i) ^ 0x5a5a5a00) & 0xffffff00;
}

typedef struct race_result {
    uint64_t good, stale, mixed, other;
} race_result;

static void *race_reader(void *arg)
{
    race_result *res = arg;
    while (!atomic_load_explicit(&race_stop, memory_order_acquire)) {
        /* Acquire: pairs with the release store of race_iter, after which
         * race_ref[i] is written. */
        uint32_t i = atomic_load_explicit(&race_iter, memory_order_acquire);
        dv_ref r = {atomic_load_explicit(&race_ref[i], memory_order_relaxed)};
        dv_ref_info info;
        int rc = dv_ref_access(r, &info);
        if (rc == DV_OK) {
            if (info.ptr != race_ptr(i) || info.bytes != race_bytes(i) ||
                info.requested != info.bytes - 3 || info.block_generation != (uint64_t)i + 1 ||
                info.alloc_stream != i % 4 || info.device != 5 || info.context_generation != 1 ||
                info.refcount != 1) {
                if (res->mixed++ == 0)
                    printf("# mixed read at %u: ptr %llx bytes %llx gen %llu\n", i,
                           (unsigned long long)info.ptr, (unsigned long long)info.bytes,
                           (unsigned long long)info.block_generation);
            } else {
                res->good++;
            }
            /* Release: pairs with the test thread's acquire load. */
            if (atomic_exchange_explicit(&race_seen, i + 1, memory_order_release) != i + 1)
                sched_yield(); /* a new handle seen: let the test thread go on */
        } else if (rc == DV_ESTALE) {
            res->stale++;
        } else {
            res->other++;
        }
    }
    return NULL;
}

#define RACE_TESTS 5
static void test_race_recycle(void)
{
    pthread_t t;
    race_result res = {0};
    int bad = 0;
    uint32_t slot0 = 0;

    for (uint32_t i = 0; i < RACE_ITERS; i++) {
        dv_block b = make_block(race_ptr(i), race_bytes(i), i % 4, 0);
        b.generation = (uint64_t)i + 1;
        dv_ref r;
        bad += mint(d1, &cache1, &b, &r) != DV_OK;
        if (i == 0)
            slot0 = SLOT_OF(r.bits);
        bad += SLOT_OF(r.bits) != slot0;
        atomic_store_explicit(&race_ref[i], r.bits, memory_order_relaxed);
        /* Release: pairs with the reader's acquire load of race_iter. */
        atomic_store_explicit(&race_iter, i, memory_order_release);
        if (i == 0)
            pthread_create(&t, NULL, race_reader, &res);
        /* Let the reader see this handle valid once (progress, not time). */
        while (atomic_load_explicit(&race_seen, memory_order_acquire) != i + 1)
            sched_yield();
        /* Release to zero, then recycle and re-mint the same slot while
         * the reader may still be reading handle i (the cache goes back
         * first, so the slot freed last is the next minted). */
        dv__ref_cache_return(d1, &cache1);
        bad += dv_ref_release(r) != DV_OK;
        bad += !actor_free(d1, r);
    }
    atomic_store_explicit(&race_stop, true, memory_order_release);
    pthread_join(t, NULL);
    diag("reader: %llu good reads, %llu stale", (unsigned long long)res.good,
         (unsigned long long)res.stale);
    is_int(bad, 0, "%d handles minted into one slot, released and recycled", RACE_ITERS);
    is_u64(res.mixed, 0, "the reader never saw fields of another generation");
    ok(res.good >= RACE_ITERS, "it read every handle valid at least once (%llu)",
       (unsigned long long)res.good);
    is_u64(res.other, 0, "and got nothing but DV_OK or DV_ESTALE");
    is_u64(dv__ref_held(d1), 0, "nothing held");
}

/* (b) Four threads retain and release one handle. */
enum { PAIR_THREADS = 4, PAIRS = 100000 };
static dv_ref pair_ref;

static void *pair_worker(void *arg)
{
    uint64_t *failures = arg;
    for (int i = 0; i < PAIRS; i++) {
        *failures += dv_ref_retain(pair_ref) != DV_OK;
        *failures += dv_ref_release(pair_ref) != DV_OK;
    }
    return NULL;
}

#define PAIRS_TESTS 7
static void test_race_pairs(void)
{
    pthread_t t[PAIR_THREADS];
    uint64_t failures[PAIR_THREADS] = {0}, total = 0;
    dv_ref_info info;
    uint64_t before = posts(&own1);

    dv_block b = make_block(0x7d0000000000, 4096, 0, 0);
    mint(d1, &cache1, &b, &pair_ref);
    is_status(dv_ref_retain(pair_ref), DV_OK, "hold one extra reference (2)");
    for (int i = 0; i < PAIR_THREADS; i++)
        pthread_create(&t[i], NULL, pair_worker, &failures[i]);
    for (int i = 0; i < PAIR_THREADS; i++) {
        pthread_join(t[i], NULL);
        total += failures[i];
    }
    is_u64(total, 0, "%d threads x %d retain+release pairs all succeed", PAIR_THREADS, PAIRS);
    int rc = dv_ref_access(pair_ref, &info);
    ok(rc == DV_OK && info.refcount == 2, "the count ends where it started (%u)", info.refcount);
    is_u64(posts(&own1) - before, 0, "post_free was never called");
    is_status(dv_ref_release(pair_ref), DV_OK, "release the extra reference");
    is_u64(posts(&own1) - before, 0, "... no post");
    dv_ref_release(pair_ref);
    ok(posts(&own1) - before == 1 && actor_free(d1, pair_ref),
       "the final release posts exactly once");
}

/* (c) Last releases racing a close: no post after close returned. */
enum { CLOSE_HANDLES = 4000 };
static dv_ref close_refs[CLOSE_HANDLES];
static _Atomic int close_released;

static void *close_releaser(void *arg)
{
    uint64_t *unexpected = arg;
    for (int i = 0; i < CLOSE_HANDLES; i++) {
        int rc = dv_ref_release(close_refs[i]);
        *unexpected += rc != DV_OK && rc != DV_ESTALE;
        atomic_fetch_add_explicit(&close_released, 1, memory_order_release);
    }
    return NULL;
}

#define CLOSE_RACE_TESTS 5
static void test_race_close(void)
{
    dv_ref_domain *d;
    pthread_t t;
    uint64_t unexpected = 0;
    int bad = 0;

    own3.slow = true;
    is_status(dv__ref_domain_open(&own3, post_free, 11, &d), DV_OK, "open a domain (device 11)");
    dv_ref_cache cache = {0};
    for (int i = 0; i < CLOSE_HANDLES; i++) {
        dv_block b = make_block(0x7c0000000000 + (uint64_t)i * 256, 256, 0, 0);
        bad += mint(d, &cache, &b, &close_refs[i]) != DV_OK;
    }
    pthread_create(&t, NULL, close_releaser, &unexpected);
    while (atomic_load_explicit(&close_released, memory_order_acquire) < CLOSE_HANDLES / 4)
        sched_yield();
    dv__ref_domain_set_state(d, DV_DOMAIN_CLOSING);
    dv__ref_invalidate_all(d, NULL, NULL);
    dv__ref_domain_close(d);
    atomic_store(&own3.closed, true);
    pthread_join(t, NULL);
    ok(bad == 0 && unexpected == 0, "releases during the close answer DV_OK or DV_ESTALE");
    is_u64(atomic_load(&own3.after_close), 0,
           "no post was running in the owner when close returned, none came after");
    diag("%llu posts before the close", (unsigned long long)posts(&own3));
    ok(posts(&own3) >= CLOSE_HANDLES / 4 && posts(&own3) <= CLOSE_HANDLES,
       "posts came for handles released while open (%llu)", (unsigned long long)posts(&own3));
    is_u64(dv__ref_held(d), 0, "nothing held");
}

#define CLOSE_TESTS 4
static void test_close(void)
{
    is_u64(dv__ref_held(d0), 0, "domain of device 7: nothing held");
    is_u64(dv__ref_held(d1), 0, "domain of device 5: nothing held");
    dv__ref_domain_close(d0);
    dv__ref_domain_close(d1);
    is_int(dv__ref_domain_state(d0), DV_DOMAIN_GONE, "device 7's domain closed");
    is_int(dv__ref_domain_state(d1), DV_DOMAIN_GONE, "device 5's domain closed");
}

int main(void)
{
    plan(ROUNDTRIP_TESTS + COUNTING_TESTS + LOOKUP_TESTS + WHITEBOX_TESTS + PENDING_TESTS +
         INVALIDATE_TESTS + STATES_TESTS + REOPEN_TESTS + GROWTH_TESTS + RACE_TESTS + PAIRS_TESTS +
         CLOSE_RACE_TESTS + CLOSE_TESTS);
    test_roundtrip();
    test_counting();
    test_lookup();
    test_limits();
    test_pending();
    test_invalidate();
    test_states();
    test_reopen();
    test_growth();
    test_race_recycle();
    test_race_pairs();
    test_race_close();
    test_close();
    return tap_done();
}
