/*
 * guard: a debug layer over any inner resource — canaries around every
 * block, poison on free, a quarantine before reuse, and a table of the
 * blocks it handed out so that double and foreign frees are named.
 *
 * Design
 * ------
 * Layout of one guard block inside its upstream block (c = canary_bytes,
 * n = the bytes asked for):
 *
 *     upstream.ptr                 ptr = upstream.ptr + c
 *     |<---- c ---->|<------ n ------>|<---- c ---->|
 *     [ head canary ][ the caller's   ][ tail canary ]( upstream slack )
 *
 * The caller gets ptr and bytes = n exactly, so one byte past n lands in
 * the tail canary even where the upstream rounded up.  c is a multiple of
 * DV_BLOCK_ALIGN, so ptr keeps the upstream's alignment (up to 256).
 *
 * The canaries are filled with DV_GUARD_CANARY_BYTE by memsets on the
 * block's alloc stream, marked as a WRITE through the upstream's tracking,
 * so later uses on other streams are ordered after them.  They are read
 * back (on deallocate, and for every live block on dv__guard_check) by
 * copies on the alloc stream after a prepare READ — which makes the alloc
 * stream wait for writes the caller declared on other streams — and a
 * stream sync; then compared on the host.  A damaged canary is
 * DV_EOUT_OF_BOUNDS with the guard's generation and the offset of the
 * damaged byte nearest the block, relative to ptr (negative: before the
 * start; >= n: after the end).  Writes on another stream that the caller
 * never declared (no prepare/finish, no record) cannot be fenced and may
 * be missed; that is the tracking contract, not the guard's.
 *
 * On deallocate the check runs first; the free goes on whatever it found
 * (a report must not leak the block).  The caller's bytes are then poisoned
 * with DV_GUARD_POISON_BYTE (another tracked WRITE) and the block enters
 * the quarantine, a FIFO whose blocks stay allocated upstream — so the
 * upstream cannot hand their memory out again — until more than
 * quarantine_blocks blocks or quarantine_bytes bytes are held; then the
 * oldest go to the upstream's deallocate.  A stale pointer used after free
 * therefore meets poison, not somebody else's data, for a while.
 *
 * The table maps ptr to the guard's entry, live or quarantined, with the
 * generation the guard handed out (its own, from dv__next_generation, so a
 * block reused by the upstream after quarantine is still told apart).
 * Every op validates a guard-level id against it — unknown, stale or
 * quarantined is DV_EUSE_AFTER_FREE, and a quarantined one is named a
 * double free — before translating it to the upstream's block for the
 * tracking ops.  The table is open addressing keyed by ptr (linear probing,
 * backward-shift deletion); entries are separate allocations, linked in
 * allocation order (live) or free order (quarantine).
 *
 * Cost: deallocate blocks the owner thread until the alloc stream reaches
 * the canary copy.  This is a debug layer; it trades speed for reports.
 * bytes_outstanding counts the upstream bytes of live blocks (canaries
 * included): what callers hold.  The quarantine is the guard's own holding,
 * not pending work of a caller, so it is not counted there (a caller who
 * freed everything and reaped sees 0) and reap_pending does not empty it;
 * it shows in the upstream's count, and destroy returns it.
 *
 * Threads: like every resource, owner thread only; bytes_outstanding is
 * an atomic, readable from any thread.
 */
#include <stdlib.h>
#include <string.h>

#include "resources/resource.h"

typedef struct guard_entry {
    dv_block user;                   /* as handed out; state LIVE or QUARANTINED */
    dv_block up;                     /* the upstream block around it */
    struct guard_entry *prev, *next; /* live list or quarantine FIFO */
} guard_entry;

/* A circular list with a sentinel. */
typedef struct entry_list {
    guard_entry head;
    uint64_t count;
    uint64_t bytes; /* upstream bytes */
} entry_list;

typedef struct guard_res {
    dv_resource base;
    uint32_t canary;
    uint32_t quarantine_blocks;
    uint64_t quarantine_bytes;
    guard_entry **slots; /* the table: power-of-two capacity, NULL = empty */
    size_t cap, count;
    entry_list live, quarantine;
    atomic_uint_fast64_t live_bytes; /* upstream bytes of live blocks */
    uint8_t *scratch;                /* host copies of canaries */
    size_t scratch_cap;
} guard_res;

#define GUARD(r) ((guard_res *)(r))

/* Blocks whose canaries one check round copies at once, and the most
 * host memory the copies of one round may take (one block at least). */
#define CHECK_BATCH       256u
#define CHECK_BATCH_BYTES (UINT64_C(4) << 20)

/* ------------------------------------------------------------------------
 * Lists and the table
 * ------------------------------------------------------------------------ */

static void list_init(entry_list *l)
{
    l->head.prev = l->head.next = &l->head;
    l->count = l->bytes = 0;
}

static bool list_empty(const entry_list *l)
{
    return l->head.next == &l->head;
}

static void list_push(entry_list *l, guard_entry *e)
{
    e->prev = l->head.prev;
    e->next = &l->head;
    l->head.prev->next = e;
    l->head.prev = e;
    l->count++;
    l->bytes += e->up.bytes;
}

static void list_unlink(entry_list *l, guard_entry *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
    e->prev = e->next = NULL;
    l->count--;
    l->bytes -= e->up.bytes;
}

static size_t slot_of(const guard_res *g, dv_dptr ptr)
{
    /* Blocks are 256-aligned: the low bits carry nothing. */
    return (size_t)(((ptr >> 8) * UINT64_C(0x9E3779B97F4A7C15)) >> 17) & (g->cap - 1);
}

static guard_entry *table_get(const guard_res *g, dv_dptr ptr)
{
    if (g->cap == 0)
        return NULL;
    for (size_t i = slot_of(g, ptr);; i = (i + 1) & (g->cap - 1)) {
        if (g->slots[i] == NULL)
            return NULL;
        if (g->slots[i]->user.ptr == ptr)
            return g->slots[i];
    }
}

static void table_place(guard_res *g, guard_entry *e)
{
    size_t i = slot_of(g, e->user.ptr);
    while (g->slots[i] != NULL)
        i = (i + 1) & (g->cap - 1);
    g->slots[i] = e;
}

/* Kept at most half full, so probes stay short. */
static int table_put(guard_res *g, guard_entry *e)
{
    if (2 * (g->count + 1) > g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 64;
        guard_entry **old = g->slots;
        size_t old_cap = g->cap;
        g->slots = calloc(cap, sizeof(*g->slots));
        if (g->slots == NULL) {
            g->slots = old;
            return dv__fail(DV_ENOMEM, "allocate", "guard: out of host memory for its table");
        }
        g->cap = cap;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i] != NULL)
                table_place(g, old[i]);
        free(old);
    }
    table_place(g, e);
    g->count++;
    return DV_OK;
}

static void table_del(guard_res *g, const guard_entry *e)
{
    size_t mask = g->cap - 1;
    size_t i = slot_of(g, e->user.ptr);
    while (g->slots[i] != e)
        i = (i + 1) & mask;
    /* Backward shift: pull later members of the run into the hole when
     * their home slot does not lie between the hole and them. */
    for (size_t j = (i + 1) & mask; g->slots[j] != NULL; j = (j + 1) & mask) {
        size_t home = slot_of(g, g->slots[j]->user.ptr);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            g->slots[i] = g->slots[j];
            i = j;
        }
    }
    g->slots[i] = NULL;
    g->count--;
}

/* ------------------------------------------------------------------------
 * Device work on a block
 * ------------------------------------------------------------------------ */

static dv_drv_stream *alloc_stream_of(const guard_res *g, const guard_entry *e)
{
    return g->base.env->streams[e->up.alloc_stream];
}

static dv_dptr tail_of(const guard_res *g, const guard_entry *e)
{
    return e->up.ptr + g->canary + e->user.requested;
}

/*
 * Enqueue work on the block's alloc stream between a prepare and a finish
 * of access a through the upstream, where it tracks.  The finish runs even
 * when the work failed part way: what was enqueued is a use all the same.
 */
typedef int (*block_work)(guard_res *g, guard_entry *e, void *arg);

static int tracked(guard_res *g, guard_entry *e, dv_access a, block_work work, void *arg)
{
    dv_resource *up = g->base.upstream;
    bool track = dv__res_supports_block_use_tracking(up);
    dv_block_id id = dv__block_id_of(&e->up);
    int rc;

    if (track && (rc = dv__res_prepare_block_use(up, id, e->up.alloc_stream, a)) != DV_OK)
        return rc;
    rc = work(g, e, arg);
    if (track) {
        int frc = dv__res_finish_block_use(up, id, e->up.alloc_stream, a);
        if (rc == DV_OK)
            rc = frc;
    }
    return rc;
}

static int fill_canaries(guard_res *g, guard_entry *e, void *arg)
{
    (void)arg;
    int rc = dv__drv_memset_d8(alloc_stream_of(g, e), e->up.ptr, DV_GUARD_CANARY_BYTE, g->canary);
    if (rc == DV_OK)
        rc =
            dv__drv_memset_d8(alloc_stream_of(g, e), tail_of(g, e), DV_GUARD_CANARY_BYTE, g->canary);
    return rc;
}

/* Copy head and tail canary into dst (2c bytes), in stream order. */
static int copy_canaries(guard_res *g, guard_entry *e, void *dst)
{
    uint8_t *d = dst;
    int rc = dv__drv_memcpy_dtoh(alloc_stream_of(g, e), d, e->up.ptr, g->canary);
    if (rc == DV_OK)
        rc = dv__drv_memcpy_dtoh(alloc_stream_of(g, e), d + g->canary, tail_of(g, e), g->canary);
    return rc;
}

static int poison(guard_res *g, guard_entry *e, void *arg)
{
    (void)arg;
    return dv__drv_memset_d8(alloc_stream_of(g, e), e->user.ptr, DV_GUARD_POISON_BYTE,
                            e->user.requested);
}

static int scratch_reserve(guard_res *g, size_t bytes)
{
    if (bytes <= g->scratch_cap)
        return DV_OK;
    uint8_t *p = realloc(g->scratch, bytes);
    if (p == NULL)
        return dv__fail(DV_ENOMEM, "guard_check", "guard: out of host memory for canary copies");
    g->scratch = p;
    g->scratch_cap = bytes;
    return DV_OK;
}

/* Wait for the streams in mask; the first failure, else prior. */
static int sync_streams(guard_res *g, uint64_t mask, int prior)
{
    int first = prior;
    for (uint32_t s = 0; s < g->base.env->nstreams; s++) {
        if (!(mask & (UINT64_C(1) << s)))
            continue;
        int rc = dv__drv_stream_sync(g->base.env->streams[s]);
        if (rc != DV_OK && first == DV_OK)
            first = rc;
    }
    return first;
}

typedef struct damage {
    int64_t offset;  /* nearest damaged byte to the block, relative to ptr */
    uint32_t before; /* damaged bytes in the head canary */
    uint32_t after;  /* ... in the tail canary */
} damage;

/* Compare a block's copied canaries; true when any byte changed. */
static bool find_damage(const guard_res *g, const guard_entry *e, const uint8_t *copy, damage *d)
{
    const uint8_t *head = copy, *tail = copy + g->canary;
    int64_t nearest_before = 0, nearest_after = -1;

    *d = (damage){0};
    for (uint32_t i = 0; i < g->canary; i++) {
        if (head[i] != DV_GUARD_CANARY_BYTE) {
            d->before++;
            nearest_before = (int64_t)i - (int64_t)g->canary; /* the last one is nearest */
        }
        if (tail[i] != DV_GUARD_CANARY_BYTE) {
            if (d->after++ == 0)
                nearest_after = (int64_t)e->user.requested + (int64_t)i;
        }
    }
    /* Underruns first: they are read as they come, from low addresses. */
    d->offset = d->before ? nearest_before : nearest_after;
    return d->before + d->after > 0;
}

static int report_damage(const guard_entry *e, const damage *d, const char *op)
{
    int rc = dv__fail(DV_EOUT_OF_BOUNDS, op,
                      "%s: block 0x%llx (size %llu, generation %llu): canary damaged at offset "
                      "%lld (%u bytes before the start, %u after the end), tag %s",
                      op, (unsigned long long)e->user.ptr, (unsigned long long)e->user.requested,
                      (unsigned long long)e->user.generation, (long long)d->offset, d->before,
                      d->after, e->user.tag.name != NULL ? e->user.tag.name : "untagged");
    dv_error_detail *detail = dv__detail();
    detail->generation = e->user.generation;
    detail->offset = d->offset;
    detail->requested = e->user.requested;
    return rc;
}

/*
 * Check the canaries of up to CHECK_BATCH entries from *cursor on (the
 * live list's order), advancing it.  Copies are all enqueued first, then
 * each stream used is synced once: always, even after a failure, since the
 * device writes into the scratch buffer.
 */
static int check_batch(guard_res *g, guard_entry **cursor, const guard_entry *end, const char *op)
{
    size_t two_c = 2 * (size_t)g->canary;
    size_t most = CHECK_BATCH_BYTES / two_c;
    guard_entry *first = *cursor, *e;
    uint64_t streams = 0;
    size_t n = 0, i;
    int rc;

    if (most > CHECK_BATCH)
        most = CHECK_BATCH;
    if (most == 0)
        most = 1;
    for (e = first; e != end && n < most; e = e->next)
        n++;
    if ((rc = scratch_reserve(g, n * two_c)) != DV_OK)
        return rc;
    for (i = 0, e = first; i < n; i++, e = e->next) {
        streams |= UINT64_C(1) << e->up.alloc_stream;
        if ((rc = tracked(g, e, DV_ACCESS_READ, copy_canaries, g->scratch + i * two_c)) != DV_OK)
            break;
    }
    if ((rc = sync_streams(g, streams, rc)) != DV_OK)
        return rc;
    *cursor = e;
    for (i = 0, e = first; i < n; i++, e = e->next) {
        damage d;
        if (find_damage(g, e, g->scratch + i * two_c, &d))
            return report_damage(e, &d, op);
    }
    return DV_OK;
}

/* ------------------------------------------------------------------------
 * Quarantine
 * ------------------------------------------------------------------------ */

/* Hand an entry's memory back upstream and forget it.  The entry goes
 * whatever the upstream answers: it keeps its own table of what it still
 * holds and returns it on destroy. */
static int release(guard_res *g, entry_list *from, guard_entry *e, uint16_t *state)
{
    list_unlink(from, e);
    table_del(g, e);
    if (from == &g->live)
        atomic_fetch_sub_explicit(&g->live_bytes, e->up.bytes, memory_order_relaxed);
    int rc = dv__res_deallocate(g->base.upstream, &e->up);
    if (state != NULL)
        *state = rc == DV_OK ? e->up.state : DV_BLOCK_FREED;
    free(e);
    return rc;
}

/* Release the oldest while over either limit.  *just_state gets the
 * upstream's state if `just` itself had to go. */
static int quarantine_trim(guard_res *g, const guard_entry *just, uint16_t *just_state)
{
    int first = DV_OK;
    while (g->quarantine.count > g->quarantine_blocks ||
           g->quarantine.bytes > g->quarantine_bytes) {
        guard_entry *oldest = g->quarantine.head.next;
        int rc = release(g, &g->quarantine, oldest, oldest == just ? just_state : NULL);
        if (rc != DV_OK && first == DV_OK)
            first = rc;
    }
    return first;
}

/* Release the whole quarantine, oldest first (a trim, the guard's end):
 * the first failure, if any. */
static int quarantine_flush(guard_res *g)
{
    int first = DV_OK;
    while (!list_empty(&g->quarantine)) {
        int rc = release(g, &g->quarantine, g->quarantine.head.next, NULL);
        if (rc != DV_OK && first == DV_OK)
            first = rc;
    }
    return first;
}

/* ------------------------------------------------------------------------
 * The resource
 * ------------------------------------------------------------------------ */

/* The entry a guard-level id names, or NULL with DV_EUSE_AFTER_FREE. */
static bool guard_holds(const dv_resource *r, dv_block_id id)
{
    guard_entry *e = table_get((const guard_res *)r, id.ptr);
    return e != NULL && e->user.generation == id.generation && e->user.state == DV_BLOCK_LIVE;
}

static guard_entry *find_live(guard_res *g, dv_block_id id, const char *op)
{
    guard_entry *e = table_get(g, id.ptr);
    if (e == NULL)
        dv__fail(DV_EUSE_AFTER_FREE, op,
                 "%s: 0x%llx (generation %llu) is not a block of this guard: never allocated "
                 "here, or freed long enough ago to have left the quarantine",
                 op, (unsigned long long)id.ptr, (unsigned long long)id.generation);
    else if (e->user.generation != id.generation)
        dv__fail(DV_EUSE_AFTER_FREE, op,
                 "%s: stale block 0x%llx: generation %llu was freed; generation %llu is there now",
                 op, (unsigned long long)id.ptr, (unsigned long long)id.generation,
                 (unsigned long long)e->user.generation);
    else if (e->user.state != DV_BLOCK_LIVE)
        dv__fail(DV_EUSE_AFTER_FREE, op,
                 "%s: %s: block 0x%llx (size %llu, generation %llu) was freed already and is "
                 "in the guard's quarantine",
                 op, strcmp(op, "deallocate") == 0 ? "double free" : "use after free",
                 (unsigned long long)id.ptr, (unsigned long long)e->user.requested,
                 (unsigned long long)id.generation);
    else
        return e;
    dv__detail()->generation = id.generation;
    return NULL;
}

static uint32_t align_within(uint32_t up_align, uint32_t offset)
{
    uint32_t a = up_align ? up_align : 1;
    while (a > 1 && offset % a != 0)
        a >>= 1;
    return a;
}

/* Return a block upstream on a failure path, keeping the failure's detail. */
static void give_back(dv_resource *upstream, dv_block *up)
{
    dv_error_detail saved = *dv_last_error();
    (void)dv__res_deallocate(upstream, up);
    *dv__detail() = saved;
}

static int guard_allocate(dv_resource *r, uint64_t bytes, dv_stream_id stream, dv_tag tag,
                          dv_block *out)
{
    guard_res *g = GUARD(r);
    uint64_t extra = 2 * (uint64_t)g->canary;
    int rc;

    if (bytes > DV_DRV_MAX_BYTES - extra) {
        /* A size the actor takes (at most 2^48) that no device holds with
         * its canaries: refused as any allocation too big for the device. */
        rc = dv__fail(DV_EDEVICE_OOM, "allocate",
                      "allocate: no device holds %llu bytes with %llu bytes of canaries",
                      (unsigned long long)bytes, (unsigned long long)extra);
        dv__detail()->requested = bytes;
        dv__detail()->remaining = 0;
        return rc;
    }
    guard_entry *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return dv__fail(DV_ENOMEM, "allocate", "guard: out of host memory");
    if ((rc = dv__res_allocate(r->upstream, bytes + extra, stream, tag, &e->up)) != DV_OK)
        goto fail_upstream;
    e->user = (dv_block){.ptr = e->up.ptr + g->canary,
                         .bytes = bytes,
                         .requested = bytes,
                         .generation = dv__next_generation(r->env),
                         .tag = tag,
                         .alloc_stream = stream,
                         .align = align_within(e->up.align, g->canary),
                         .device = e->up.device,
                         .state = DV_BLOCK_LIVE};
    if (g->canary > 0 && (rc = tracked(g, e, DV_ACCESS_WRITE, fill_canaries, NULL)) != DV_OK)
        goto fail_fill;
    if ((rc = table_put(g, e)) != DV_OK)
        goto fail_fill;
    list_push(&g->live, e);
    atomic_fetch_add_explicit(&g->live_bytes, e->up.bytes, memory_order_relaxed);
    *out = e->user;
    return DV_OK;

fail_fill:
    give_back(r->upstream, &e->up);
fail_upstream:
    free(e);
    return rc;
}

static int guard_deallocate(dv_resource *r, dv_block *block)
{
    guard_res *g = GUARD(r);
    guard_entry *e = find_live(g, dv__block_id_of(block), "deallocate");
    dv_error_detail report = {0};
    int first = DV_OK, rc;

    if (e == NULL)
        return DV_EUSE_AFTER_FREE;
    /* From here the block is freed whatever is found: the first failure is
     * kept (with its detail) and returned at the end. */
    if (g->canary > 0) {
        guard_entry *cursor = e;
        first = check_batch(g, &cursor, e->next, "deallocate");
        if (first != DV_OK)
            report = *dv_last_error();
    }
    if ((rc = tracked(g, e, DV_ACCESS_WRITE, poison, NULL)) != DV_OK && first == DV_OK) {
        first = rc;
        report = *dv_last_error();
    }
    list_unlink(&g->live, e);
    atomic_fetch_sub_explicit(&g->live_bytes, e->up.bytes, memory_order_relaxed);
    e->user.state = DV_BLOCK_QUARANTINED;
    list_push(&g->quarantine, e);
    block->state = DV_BLOCK_QUARANTINED;
    if ((rc = quarantine_trim(g, e, &block->state)) != DV_OK && first == DV_OK) {
        first = rc;
        report = *dv_last_error();
    }
    if (first != DV_OK)
        *dv__detail() = report;
    return first;
}

static uint64_t guard_bytes_outstanding(const dv_resource *r)
{
    return atomic_load_explicit(&((const guard_res *)r)->live_bytes, memory_order_relaxed);
}

static int guard_prepare(dv_resource *r, dv_block_id id, dv_stream_id stream, dv_access a)
{
    guard_entry *e = find_live(GUARD(r), id, "prepare_block_use");
    if (e == NULL)
        return DV_EUSE_AFTER_FREE;
    return dv__res_prepare_block_use(r->upstream, dv__block_id_of(&e->up), stream, a);
}

static int guard_finish(dv_resource *r, dv_block_id id, dv_stream_id stream, dv_access a)
{
    guard_entry *e = find_live(GUARD(r), id, "finish_block_use");
    if (e == NULL)
        return DV_EUSE_AFTER_FREE;
    return dv__res_finish_block_use(r->upstream, dv__block_id_of(&e->up), stream, a);
}

static int guard_record(dv_resource *r, dv_block_id id, dv_stream_id stream)
{
    guard_entry *e = find_live(GUARD(r), id, "record_block_use");
    if (e == NULL)
        return DV_EUSE_AFTER_FREE;
    return dv__res_record_block_use(r->upstream, dv__block_id_of(&e->up), stream);
}

static void guard_destroy(dv_resource *r)
{
    guard_res *g = GUARD(r);
    /* Oldest first, as the quarantine would have; then what is still live,
     * in allocation order. */
    (void)quarantine_flush(g);
    while (!list_empty(&g->live))
        (void)release(g, &g->live, g->live.head.next, NULL);
    free(g->slots);
    free(g->scratch);
    free(g);
}

static const dv_res_ops guard_ops = {
    .name = "guard",
    .allocate = guard_allocate,
    .deallocate = guard_deallocate,
    .bytes_outstanding = guard_bytes_outstanding,
    .prepare_block_use = guard_prepare,
    .finish_block_use = guard_finish,
    .record_block_use = guard_record,
    .holds_block = guard_holds,
    .destroy = guard_destroy,
};

void dv__guard_config_init(dv_guard_config *cfg)
{
    *cfg = (dv_guard_config){
        .canary_bytes = 256,
        .quarantine_blocks = 16,
        .quarantine_bytes = UINT64_C(64) << 20,
    };
}

int dv__guard_resource_create(dv_resource *upstream, const dv_guard_config *cfg, dv_resource **out)
{
    dv_guard_config defaults;
    if (upstream == NULL || out == NULL)
        return dv__fail(DV_EINVAL, "guard_resource_create",
                        "guard_resource_create: NULL upstream or out");
    if (cfg == NULL) {
        dv__guard_config_init(&defaults);
        cfg = &defaults;
    }
    /* A multiple of the block alignment keeps ptr aligned like the
     * upstream's block; 0 keeps poison, quarantine and the table only. */
    if (cfg->canary_bytes % DV_BLOCK_ALIGN != 0)
        return dv__fail(DV_EINVAL, "guard_resource_create",
                        "guard_resource_create: canary_bytes %u is not a multiple of %u",
                        cfg->canary_bytes, DV_BLOCK_ALIGN);
    guard_res *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return dv__fail(DV_ENOMEM, "guard_resource_create", "out of host memory");
    g->base = (dv_resource){
        .ops = &guard_ops, .upstream = upstream, .env = upstream->env, .device = upstream->device};
    g->canary = cfg->canary_bytes;
    g->quarantine_blocks = cfg->quarantine_blocks;
    g->quarantine_bytes = cfg->quarantine_bytes;
    list_init(&g->live);
    list_init(&g->quarantine);
    atomic_init(&g->live_bytes, 0);
    *out = &g->base;
    return DV_OK;
}

int dv__guard_flush(dv_resource *r)
{
    if (r == NULL || r->ops != &guard_ops)
        return DV_OK;
    return quarantine_flush(GUARD(r));
}

int dv__guard_check(dv_resource *guard)
{
    if (guard == NULL || guard->ops != &guard_ops)
        return dv__fail(DV_EINVAL, "guard_check", "guard_check: %s resource is not a guard",
                        dv__res_name(guard));
    dv__res_assert_owner(guard, "guard_check");
    guard_res *g = GUARD(guard);
    if (g->canary == 0)
        return DV_OK;
    guard_entry *cursor = g->live.head.next;
    while (cursor != &g->live.head) {
        int rc = check_batch(g, &cursor, &g->live.head, "guard_check");
        if (rc != DV_OK)
            return rc;
    }
    return DV_OK;
}
