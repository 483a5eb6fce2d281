/*
 * pool: the performance tier.  Suballocates chunks of an upstream resource
 * and hands out pieces of them in O(1), stream-ordered, with full
 * block-use tracking.
 *
 * Design
 * ------
 * Regions.  Where the upstream is the driver's stream-ordered allocator
 * itself and the device has virtual memory, the pool holds its memory
 * from the driver directly: it reserves address space once (a region, as
 * large as the device's memory) and maps physical memory into it as
 * requests need it, in extents of at most 1/32 of what is mapped (1/128
 * below the most ever mapped; a granule at least, 64 MiB at most), each
 * unmapped whole.  Unmapped space
 * is a HOLE range; the last range of a region is always the reserved space
 * past its end.  A region is a chunk to the rest of this file.
 *
 * Growth maps where it maps the least: a free range next to a hole grows
 * into it (upwards, or downwards with the request placed at the top, so
 * that what is left over stays beside the hole for the next growth), or
 * two free ranges across a small hole join, or the request goes alone
 * into a hole; the space past a region's end is one of the holes, and
 * growth there maps at least a step of 1/32 of what is mapped (at most
 * 64 MiB), so a pool that grows by small requests makes few driver calls.
 * A small workload maps a granule or two.
 *
 * Moving.  Past the most it ever mapped, the pool first unmaps free
 * extents elsewhere (those in the smallest free spaces first), at least
 * as much as it is about to map: physical memory moves to where it is
 * needed instead of being added, and the peak of what the pool holds
 * stays near the peak of what it hands out.  An extent is unmapped only
 * once the device has passed every free in it; a free marked a moment ago
 * is waited for up to RECLAIM_WAIT_NS.  The donors' physical memory is
 * kept and mapped again where the growth needs an extent of the same size
 * (cuMemUnmap, then cuMemMap and cuMemSetAccess); the others are released
 * before anything new is made (cuMemRelease, cuMemCreate).  Each call
 * costs tens of microseconds on a GPU, so below that peak the pool only
 * grows.  Trim unmaps every extent that lies wholly
 * free.  When the device refuses a mapping, the pool trims and tries once
 * more at the least size.
 *
 * Chunks.  Elsewhere (a pool over another layer, chunk sizes set, or a
 * device without virtual memory) memory comes from the upstream in chunks
 * allocated on the stream of the request that needed them: the first is
 * initial_chunk_bytes, each
 * later one twice the last, up to max_chunk_bytes; a request bigger than
 * the next chunk gets a chunk of its own (rounded to 2 MiB, the driver's
 * granularity).  max_pool_bytes caps the sum.  When the upstream refuses
 * (device OOM, budget), the pool tries a chunk of about the request, then
 * trims its empty chunks and tries once more; the error, if it stays, is
 * the upstream's.
 *
 * Ranges.  A chunk is cut into ranges, host structs (never headers in
 * device memory) linked in address order within their chunk.  A range is
 * USED (handed out, or on a small-class stack) or FREE (in a stream's
 * bins).  A range is one cache line, in slabs indexed by a directory, so a
 * 26-bit index names it; the chunk keeps no counters, so the hot paths
 * never touch it.  Once the slabs are warm the alloc and free paths call
 * no malloc.
 *
 * Small classes.  Requests up to 256 KiB are rounded to an exact class
 * (256-byte steps to 1 KiB, then four classes per power of two: 36
 * classes, all multiples of 256; larger requests are only 256-rounded,
 * so that their rounding wastes little).  A freed small block goes on a
 * LIFO stack for its class and stream and is not coalesced: the next
 * request of that class on that stream pops it.  A stack is an array of
 * (address, position of the free, range index), so neither the free nor
 * the allocation that pops it reads the block's range: with a hundred
 * thousand blocks live, that line would be a cache miss on each.  A stack
 * that is empty carves a new block from the large free space.  Stacks flow back into the bins
 * (and coalesce) on trim, before a large request, and before the pool
 * would grow.
 *
 * Bins.  Free space is kept per stream in a segregated fit in the manner
 * of TLSF: sizes in 256-byte granules map to a first level (the power of
 * two) and one of 16 sub-bins (below 16 granules every size has its own
 * bin), with a bitmap of non-empty first levels and one of non-empty
 * sub-bins per level.  A search rounds the request up to the next sub-bin
 * boundary, so any range in the first non-empty bin at or above it fits:
 * two find-first-set instructions, whatever the number of ranges.  Only
 * where that fails is the request's own bin scanned (before growing, and
 * so that largest_free in the statistics is really allocatable).  A large
 * request (over 256 KiB) looks at a few more: the best fit among the first
 * 16 of its own bin, else the smallest of the first 16 of the good-fit
 * bin, so that it does not split a large range where a small one fits; of
 * equal fits the lower address (best fit with address-ordered ties
 * fragments least).  A freed range merges with its address neighbours when
 * they are free and belong to the same stream's bins.
 *
 * Streams.  Every stream has its own stacks and bins.  A block freed goes
 * to its alloc stream's lists, stamped with the position of the free on
 * that stream (after its uses were fenced onto it).  A request on stream S
 * is served from S's lists first: stream order alone makes that safe.
 * Only when S has nothing does it take from another stream T's lists, and
 * then S waits on the free's position on T before the block is handed out
 * (one event wait, skipped by the tracker when S already waits that far):
 * memory is reused on another stream only behind the free's event.  That
 * event is recorded at the free (when T had work queued since its last
 * one), so S waits for the free and never for what T queued after it.
 * (With the stream-order checker on, the event comes just after the
 * checker took the free: capture_frees.)  Memory a region just mapped is
 * no stream's work: any stream takes it
 * at once.  What is taken becomes S's; a split leaves the rest with T.
 * Two bitmaps over the streams (which have free ranges, which have a
 * given class stacked) keep that search short.  A fresh chunk's space
 * (from an upstream, in stream order) is stamped with a
 * position just after its upstream allocation, so the same rule covers it.
 * Before the pool grows, free ranges of several streams that lie side by
 * side and together hold the request become the requesting stream's, one
 * range: it waits on each of their frees (the same rule, no host query).
 * Free space the device is known to be past (the tracker saw an event
 * of that stream done; no query is made for it) is nobody's in
 * particular: a range freed beside another stream's such range takes it
 * in and merges with it, and a small block that would split a large
 * range of its own stream's takes such a small hole (at most 2 MiB) of
 * another stream's instead.  Both need no wait, and keep space that
 * several streams free side by side from splitting by who freed it.
 *
 * Aliases (an option: alias).  The region's whole address space, a
 * slice of twice the device's memory for each stream, is free space from
 * the start, and physical memory is bound to it one granule at a time as
 * blocks come: a granule with a used range in it (a live or stacked
 * block) is live and holds memory of its own; one with nothing used is
 * idle and keeps its memory mapped.  When a granule becomes live it takes
 * back the memory it had, with no driver call, if that memory is idle and
 * last served it.  Else idle memory moves there (mapped at one more
 * address: an alias; the old mapping stays), chosen so that none of its
 * other addresses was ever live together with this granule, the oldest
 * idle first; such memory will not be wanted back while this granule is
 * live.  Only where every idle granule conflicts so, and the pool holds
 * under 108% of the most granules ever live at once, is new memory made
 * (after stacked blocks are flushed).  Memory leaves an address, and an
 * address is unmapped, only once the host saw the device pass every free
 * there (waited for up to RECLAIM_WAIT_NS, or as long as it takes where
 * no more memory may be made): not even the stream whose frees they were
 * may take it on stream order alone, as the free ranges around its block
 * keep the address's stamps, and another stream taking one would wait for
 * nothing.  Each stream places in its own slice (one
 * stream's layout does not move with another's timing), by best fit
 * (bins_find_best: placement decides how many granules hold memory, and
 * addresses cost nothing), and when nothing is live the stacks are
 * flushed, so that work that starts over places as it did.  So a workload
 * that repeats itself learns which granules are live together in its
 * first pass or two and then maps nothing: on the sim, over 20 passes of
 * the captured training and inference traces, 1.01-1.09 times their live
 * peak, no driver call after the second pass.  Trim releases idle memory
 * (unmapped at every address).  The matrix of what was seen live together
 * has a row and a column for each granule while SEEN_MAX or fewer were
 * used, and past that for each unit of two, then four, ... granules in
 * the order of their first use.  A steady state costs no step per
 * granule either: granules a free leaves unused, which have learnt all
 * there is (no bind since), stay pending in runs (pool_pend; a free's
 * whole granules in one step) and the next placement over them takes them
 * back a run at a time; whatever would see the difference (a bind, a
 * granule learning, trim) first makes them idle, in their place of the
 * idle order, so placements, bytes and driver calls are the same as
 * without.  A large block's free leaves its granules' side for the next
 * call (bins_defer): a placement of the same size, stream and address,
 * its granules having learnt all there is, undoes it with no granule
 * work at all (a loop that frees a buffer and takes its like again);
 * anything else does it first.
 *
 * Returning chunks.  A chunk with nothing live or stacked is empty; trim
 * makes the chunk's alloc stream wait on the free position of each of its
 * ranges (frees may have been on other streams), then returns it to the
 * upstream, which frees it in that stream's order.
 *
 * Tracking.  The pool owns a tracker: allocate inserts the block, with its
 * range index and size class as the resource's word in the tracker's hot
 * record; deallocate finds it there (stale: DV_EUSE_AFTER_FREE; the
 * block's address is checked exactly by the tracker's key), fences its
 * uses onto the alloc stream, stamps the free, and removes it.  A small
 * block's free thus reads the caller's block and one 16-byte hot record,
 * and nothing else.  There is nothing retired beyond what the stamp
 * covers, so a freed block reads FREED at once.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/futex.h"
#include "resources/tracker.h"

#define MIB (UINT64_C(1) << 20)
/* Small helpers that the alias paths call several times a block, inlined
 * where -O3 would call them: a multi-stream replay then takes 9% fewer
 * instructions. */
#define HOT inline __attribute__((always_inline))

#define GRANULE_SHIFT 8 /* log2(DV_BLOCK_ALIGN) */
#define SMALL_MAX     (256 * 1024)
#define SMALL_HOLE    (2u << 20) /* a free range a small block may carve without splitting big space */
#define SMALL_CLASSES 36
#define NO_CLASS      0xFFu

#define SL_SHIFT 4
#define SL_COUNT (1u << SL_SHIFT)
/* Granules go up to DV_DRV_MAX_BYTES >> 8 = 2^40: first levels 0 .. 37. */
#define FL_COUNT 38

#define CHUNK_GRANULE (2 * MIB)
/* Ranges a large request looks at in a bin for the best fit; with
 * aliases, any request, in its own bin and the next non-empty one. */
#define BEST_SCAN       16
#define BEST_SCAN_ALIAS 256
/* A region maps in extents of at most this (each unmapped whole). */
#define EXTENT_MAX (64 * MIB)
/* A move looks at this many mappings at most (and keeps as many). */
#define RECLAIM_SCAN 256
/* Aliases: address space reserved for each stream, in times the device's
 * memory; new physical memory while the pool holds under SLACK_PCT percent
 * of the most granules ever live at once (where every idle one conflicts);
 * granules whose conflicts are learnt; frees kept per granule. */
#define ALIAS_VA    2
#define SLACK_PCT   108
#define SEEN_MAX    16384u
#define GRAN_FREES  2
/* Aliases: runs of granules freed blocks leave pending, at most
 * (pend_add). */
#define PEND_MAX 256
#define NO_PHYS     UINT32_MAX
/* Aliases: granule records are set up this many at a time, where a block
 * first uses one (the region is far larger than what is ever used). */
#define GRAN_GROUP 64
#define NO_GRAN     UINT32_MAX

/* Range slabs: slab k holds RANGES_FIRST << k ranges, up to a huge page. */
#define RANGES_FIRST      1024u
#define RANGE_INDEX_SHIFT 15 /* position within a slab */
#define RANGES_MAX        (1u << RANGE_INDEX_SHIFT)
#define RANGE_SLABS_MAX   (1u << (OWNER_CLASS_SHIFT - RANGE_INDEX_SHIFT))
/* The word a live block leaves in the tracker: its range's index, and its
 * size class (OWNER_LARGE above the classes) in the top bits. */
#define OWNER_CLASS_SHIFT 26
#define OWNER_INDEX_MASK  ((1u << OWNER_CLASS_SHIFT) - 1)
#define OWNER_LARGE       63u
_Static_assert(RANGES_MAX * 64 == DV_SLAB_HUGE, "a full range slab is a huge page");
_Static_assert(SMALL_CLASSES < OWNER_LARGE, "classes fit the owner word");

_Static_assert(DV_BLOCK_ALIGN == 1u << GRANULE_SHIFT, "granules are blocks' alignment");
_Static_assert(DV_MAX_STREAMS <= 64, "stream sets are 64-bit masks");

enum range_state {
    RANGE_USED = 1, /* live, or on a small-class stack */
    RANGE_FREE,     /* in a stream's bins */
    RANGE_HOLE,     /* a region's address space with nothing mapped (trimmed) */
};

/*
 * One cache line.  A small block's free and its next allocation from the
 * stack touch neither the range nor anything else of the block's but its
 * tracker record: at a hundred thousand live blocks nearly every range is
 * a cache miss.
 */
typedef struct pool_range {
    _Alignas(64) dv_dptr ptr;
    uint64_t bytes;
    struct pool_range *phys_prev, *phys_next; /* address order, within the chunk */
    struct pool_range *free_prev, *free_next; /* bin list; spare list */
    uint64_t freed_epoch;                     /* FREE: position of the free on owner */
    uint32_t index;                           /* in the range directory */
    uint8_t owner;                            /* FREE: the stream whose bins hold it */
    uint8_t state;
} pool_range;

_Static_assert(sizeof(pool_range) == 64, "a range is one cache line");

/* Physical memory mapped into a region, unmapped whole. */
typedef struct pool_map {
    uint64_t off, bytes; /* within the region */
    uint64_t handle;     /* the driver's */
} pool_map;

/*
 * A chunk from the upstream, or a region: address space reserved once,
 * memory mapped at its end as the pool grows (ranges cover [0, end); the
 * rest is reserved only), unmapped where a whole mapping lies free.
 */
typedef struct pool_chunk {
    dv_block block; /* as the upstream handed it out; a region: ptr is its base */
    uint64_t bytes; /* what the pool uses of it; a region: bytes mapped */
    struct pool_chunk *prev, *next;
    pool_range *first, *last;
    uint64_t va_bytes; /* a region: the address space reserved */
    pool_map *maps;    /* a region: in address order */
    uint32_t nmaps, cap_maps;
} pool_chunk;

/* An address granule of the alias region. */
typedef struct pool_gran {
    uint32_t phys;  /* the physical granule mapped here, or NO_PHYS */
    uint32_t users; /* used ranges (live or stacked blocks) with bytes here */
    uint8_t nfree;  /* frees here the device may not have passed yet: */
    bool many;      /* (more streams than are kept: every stream's newest) */
    bool counted;   /* counted live in its unit (seen_note .. gran_rest) */
    uint8_t fstream[GRAN_FREES];
    uint32_t learnt; /* the pool's binds when this granule last learnt */
    uint32_t sid;    /* its order of first use: its unit of what was seen live
                      * together is sid >> seen_shift */
    uint32_t pend;   /* a pending run starts here: its index in pend + 1 */
    uint64_t fepoch[GRAN_FREES];
} pool_gran;

/* A physical granule of the alias region, mapped at one address or more. */
typedef struct pool_phys {
    uint64_t handle;                /* the driver's; 0: a free slot */
    uint32_t active;                /* the granule it serves, or NO_GRAN: idle */
    uint32_t last;                  /* the granule it served last */
    uint32_t idle_prev, idle_next;  /* the idle list; a free slot's next */
    uint32_t *alias;                /* the granules it is mapped at */
    uint32_t nalias, cap_alias;
    uint64_t idle_stamp; /* idle: when it went idle (the list's order) */
    uint64_t made;       /* the env's alloc_epoch of the allocation that made it */
} pool_phys;

/*
 * A run of granules a free left with nothing used, not yet made idle
 * (pend_add): the granules keep their users' count of one and their
 * memory, and leave the count of live granules.  A placement over them
 * takes them back (alias_use); anything else that would see them (a look
 * at idle memory, a granule learning what is live with it, trim) makes
 * them idle first, in the place of the idle order they would have had.
 * No bind happens while any run is pending (gran_bind makes them idle
 * first), so each granule of a run has learnt at the pool's binds now.
 */
typedef struct pool_pend {
    uint32_t g, n;    /* first granule, count */
    uint32_t w0, w1;  /* the freed block's whole granules (w0 > w1: none) */
    uint8_t stream;   /* the free */
    uint64_t epoch;
    uint64_t stamp;   /* its first granule's place in the idle order */
} pool_pend;

/* A small block on a stack: its address, the position of its free on the
 * stack's stream, and its range (read only when the stacks are flushed). */
typedef struct pool_stacked {
    dv_dptr ptr;
    uint64_t freed_epoch;
    uint32_t index;
} pool_stacked;

/* A LIFO of small blocks of one class, freed on one stream. */
typedef struct pool_stack {
    pool_stacked *items;
    uint32_t n, cap;
} pool_stack;

/* One stream's free space. */
typedef struct pool_lists {
    uint64_t fl_map;
    uint32_t sl_map[FL_COUNT];
    pool_range *bins[FL_COUNT][SL_COUNT];
    pool_stack stacks[SMALL_CLASSES];
} pool_lists;

typedef struct pool_res {
    dv_resource base;
    dv_tracker *t;
    dv_pool_config cfg;
    uint64_t next_chunk_bytes;
    uint32_t nstreams;
    pool_lists *lists;                          /* [nstreams] */
    uint64_t streams_with_free;                 /* bit s: lists[s] has a binned range */
    uint64_t streams_with_class[SMALL_CLASSES]; /* bit s: lists[s].stacks[c] non-empty */
    uint64_t classes_stacked;                   /* bit c: streams_with_class[c] != 0 */
    pool_chunk *chunks;
    uint32_t nchunks;
    uint64_t chunk_bytes;
    /* Growth by mapping (the upstream is the driver's allocator and the
     * device has virtual memory): granule 0 means chunks. */
    uint64_t granule, va_step;
    pool_range *hole_list;  /* HOLE ranges of every region */
    uint64_t high;          /* the most chunk_bytes ever was (mapped or chunks) */
    uint64_t live_bytes;    /* owner's view of bytes_outstanding */
    uint64_t stacked_bytes; /* on small-class stacks, all streams */
    /* Aliases: the granules' side of the last large block's free, not done
     * yet (bins_defer). */
    struct {
        dv_dptr ptr;
        uint64_t bytes, epoch, mark; /* mark: its range's at placement */
        dv_stream_id s;
        bool on;
    } defer;
    uint64_t undone; /* deferred frees a placement undid */
    /* A move's donors: unmapped with their physical memory kept (keeping
     * on), mapped again where the growth needs it, the rest released. */
    bool keeping;
    uint32_t nkept;
    pool_map kept[RECLAIM_SCAN];
    pool_range *spare;
    uint32_t nspare;
    /* The least the upstream refused within the allocation alloc_epoch
     * names (chunk_add), and how. */
    uint64_t refused_epoch, refused_bytes;
    int refused_status;
    dv_error_detail refused_detail;
    /* Aliases (cfg.alias over a device with virtual memory): one region
     * whose address granules are bound to physical ones as blocks come. */
    pool_chunk *areg;
    unsigned gshift; /* log2(granule) */
    pool_gran *gran; /* [ngran], a group of GRAN_GROUP set up at its first use */
    uint32_t ngran;
    uint64_t *gran_ready; /* [ngran / GRAN_GROUP / 64 + 1]: groups set up */
    pool_phys *phys; /* [nphys_slots]: nphys of them hold memory */
    uint32_t nphys, nphys_slots, cap_phys, phys_free;
    uint32_t idle_head, idle_tail; /* idle physical granules, oldest first */
    uint32_t nlive, peak_live;     /* granules with users, now and at most */
    uint64_t *live_units;          /* [seen_max / 64]: units with a live granule */
    uint32_t *unit_live;           /* [seen_max]: live granules of each unit */
    uint64_t *seen;                /* seen_n rows of seen_n bits, by unit */
    uint32_t seen_n, nsid;         /* sids are given as granules first go live */
    uint32_t seen_max;             /* units at most (SEEN_MAX, or the config's) */
    unsigned seen_shift;           /* granules of a unit: 1 << seen_shift */
    uint32_t binds; /* memory moved or made for a granule, ever (wraps) */
    uint64_t idle_clock;      /* stamps of the idle order: one a granule */
    pool_pend pend[PEND_MAX]; /* pending runs, unordered */
    uint32_t npend;
    uint64_t *pend_bits; /* [ngran / 64 + 1]: granules in pending runs */
    pool_range **range_dir; /* range slabs: RANGES_FIRST << k ranges each */
    uint32_t nrange_slabs;
    atomic_uint_fast64_t outstanding; /* read from any thread */
} pool_res;

static const dv_res_ops pool_ops;

static pool_res *pool_of(dv_resource *r)
{
    return r != NULL && r->ops == &pool_ops ? (pool_res *)r : NULL;
}

bool dv__res_is_pool(const dv_resource *r)
{
    return r != NULL && r->ops == &pool_ops;
}

static uint64_t round_up(uint64_t n, uint64_t to)
{
    return (n + to - 1) & ~(to - 1);
}

static unsigned msb64(uint64_t x)
{
    return 63u - (unsigned)__builtin_clzll(x);
}

/* ------------------------------------------------------------------------
 * Size classes
 * ------------------------------------------------------------------------ */

/* Smallest class holding bytes (1 .. SMALL_MAX). */
static unsigned small_class(uint64_t bytes)
{
    if (bytes <= 1024)
        return (unsigned)((bytes + 255) >> 8) - 1;
    uint64_t b = bytes - 1;
    unsigned p = msb64(b);
    return 4 + (p - 10) * 4 + (unsigned)((b >> (p - 2)) & 3);
}

static uint64_t class_bytes(unsigned c)
{
    if (c < 4)
        return (uint64_t)(c + 1) << 8;
    unsigned p = 10 + (c - 4) / 4;
    return (UINT64_C(1) << p) + (uint64_t)((c - 4) % 4 + 1) * (UINT64_C(1) << (p - 2));
}

/* ------------------------------------------------------------------------
 * Range nodes
 * ------------------------------------------------------------------------ */

static uint32_t range_slab_count(uint32_t k)
{
    return k < RANGE_INDEX_SHIFT && (RANGES_FIRST << k) < RANGES_MAX ? RANGES_FIRST << k
                                                                     : RANGES_MAX;
}

static pool_range *range_at(const pool_res *p, uint32_t index)
{
    return &p->range_dir[index >> RANGE_INDEX_SHIFT][index & (RANGES_MAX - 1)];
}

static int spare_reserve(pool_res *p, uint32_t n)
{
    while (p->nspare < n) {
        uint32_t k = p->nrange_slabs;
        if (k == RANGE_SLABS_MAX)
            return dv__fail(DV_ENOMEM, "allocate",
                            "allocate: the pool holds %u ranges, the most it can index",
                            k * RANGES_MAX);
        if ((k & (k - 1)) == 0) { /* 0, 1, 2, 4, ...: the directory grows */
            pool_range **dir = realloc(p->range_dir, (k ? 2 * k : 1) * sizeof(*dir));
            if (dir == NULL)
                return dv__fail(DV_ENOMEM, "allocate",
                                "allocate: out of host memory for pool ranges");
            p->range_dir = dir;
        }
        uint32_t count = range_slab_count(k);
        pool_range *slab = dv__slab_alloc(count * sizeof(pool_range));
        if (slab == NULL)
            return dv__fail(DV_ENOMEM, "allocate", "allocate: out of host memory for pool ranges");
        p->range_dir[k] = slab;
        p->nrange_slabs++;
        for (uint32_t i = count; i-- > 0;) {
            slab[i].index = (k << RANGE_INDEX_SHIFT) | i;
            slab[i].free_next = p->spare;
            p->spare = &slab[i];
        }
        p->nspare += count;
    }
    return DV_OK;
}

static void range_slabs_free(pool_res *p)
{
    for (uint32_t k = 0; k < p->nrange_slabs; k++)
        dv__slab_free(p->range_dir[k], range_slab_count(k) * sizeof(pool_range));
    free(p->range_dir);
    p->range_dir = NULL;
    p->nrange_slabs = 0;
}

/* Callers reserved first: never NULL. */
static pool_range *spare_take(pool_res *p)
{
    pool_range *r = p->spare;
    p->spare = r->free_next;
    p->nspare--;
    return r;
}

/* Free ranges are stamped on the stream that holds them. */
static dv_stream_pos freed_pos(const pool_range *r)
{
    return (dv_stream_pos){r->owner, r->freed_epoch};
}

static void spare_put(pool_res *p, pool_range *r)
{
    r->free_next = p->spare;
    p->spare = r;
    p->nspare++;
}

/* ------------------------------------------------------------------------
 * Bins
 * ------------------------------------------------------------------------ */

static void bin_of(uint64_t granules, unsigned *fl, unsigned *sl)
{
    if (granules < SL_COUNT) {
        *fl = 0;
        *sl = (unsigned)granules;
        return;
    }
    unsigned p = msb64(granules);
    *fl = p - SL_SHIFT + 1;
    *sl = (unsigned)(granules >> (p - SL_SHIFT)) & (SL_COUNT - 1);
}

/* A bin and the pool's list of holes are lists of ranges through free_prev
 * and free_next (a range is on one of them at most). */
static void list_push(pool_range **head, pool_range *r)
{
    r->free_prev = NULL;
    r->free_next = *head;
    if (r->free_next != NULL)
        r->free_next->free_prev = r;
    *head = r;
}

static void list_unlink(pool_range **head, pool_range *r)
{
    if (r->free_prev != NULL)
        r->free_prev->free_next = r->free_next;
    else
        *head = r->free_next;
    if (r->free_next != NULL)
        r->free_next->free_prev = r->free_prev;
}

static HOT void bin_insert(pool_res *p, dv_stream_id s, pool_range *r)
{
    pool_lists *l = &p->lists[s];
    unsigned fl, sl;
    bin_of(r->bytes >> GRANULE_SHIFT, &fl, &sl);
    r->state = RANGE_FREE;
    r->owner = (uint8_t)s;
    list_push(&l->bins[fl][sl], r);
    l->sl_map[fl] |= 1u << sl;
    l->fl_map |= UINT64_C(1) << fl;
    p->streams_with_free |= UINT64_C(1) << s;
}

static HOT void bin_remove(pool_res *p, pool_range *r)
{
    pool_lists *l = &p->lists[r->owner];
    unsigned fl, sl;
    bin_of(r->bytes >> GRANULE_SHIFT, &fl, &sl);
    list_unlink(&l->bins[fl][sl], r);
    if (l->bins[fl][sl] == NULL) {
        l->sl_map[fl] &= ~(1u << sl);
        if (l->sl_map[fl] == 0) {
            l->fl_map &= ~(UINT64_C(1) << fl);
            if (l->fl_map == 0)
                p->streams_with_free &= ~(UINT64_C(1) << r->owner);
        }
    }
}

/* The better of two fits: the smaller, and of equal ones the lower (best
 * fit with address-ordered ties fragments least). */
static bool smaller(const pool_range *a, const pool_range *b)
{
    return a->bytes < b->bytes || (a->bytes == b->bytes && a->ptr < b->ptr);
}

/* The smallest range of at least need bytes among the first scan of a
 * bin's list (the lower address of equal ones), or NULL. */
static pool_range *bin_best(pool_range *r, uint64_t need, unsigned scan)
{
    pool_range *best = NULL;
    for (unsigned n = 0; r != NULL && n < scan; r = r->free_next, n++)
        if (r->bytes >= need && (best == NULL || smaller(r, best)))
            best = r;
    return best;
}

/*
 * With aliases: the smallest range that holds need (the lower address of
 * equal ones), among the first BEST_SCAN_ALIAS of the request's own bin
 * and of the next non-empty bin above it.  Placement decides how many
 * granules hold memory, and address space costs nothing, so the fit is
 * worth the walk; the lists are short where the free space is.
 */
static pool_range *bins_find_best(pool_lists *l, uint64_t need)
{
    unsigned fl, sl;
    bin_of(need >> GRANULE_SHIFT, &fl, &sl);
    pool_range *best = bin_best(l->bins[fl][sl], need, BEST_SCAN_ALIAS);
    if (best != NULL)
        return best;
    uint32_t sbits = sl + 1 < SL_COUNT ? l->sl_map[fl] & (~0u << (sl + 1)) : 0;
    if (sbits == 0) {
        uint64_t fbits = fl + 1 < FL_COUNT ? l->fl_map & (~UINT64_C(0) << (fl + 1)) : 0;
        if (fbits == 0)
            return NULL;
        fl = (unsigned)__builtin_ctzll(fbits);
        sbits = l->sl_map[fl];
    }
    return bin_best(l->bins[fl][__builtin_ctz(sbits)], need, BEST_SCAN_ALIAS);
}

/*
 * A free range of at least need bytes in l, or NULL.  Good fit first: the
 * request rounded up to its next sub-bin boundary makes every range of the
 * first non-empty bin above fit.  Then the request's own bin, which may
 * hold a range that fits although the bin's lower bound does not.
 */
static pool_range *bins_find(pool_lists *l, uint64_t need)
{
    uint64_t g = need >> GRANULE_SHIFT;
    unsigned fl, sl;

    if (l->fl_map == 0)
        return NULL;
    if (need > SMALL_MAX) {
        /* Large: the best fit among the first BEST_SCAN of the request's
         * own bin, where one fits (a good fit above would split a larger
         * range). */
        bin_of(g, &fl, &sl);
        pool_range *best = bin_best(l->bins[fl][sl], need, BEST_SCAN);
        if (best != NULL)
            return best;
    }
    uint64_t rounded = g < SL_COUNT ? g : g + (UINT64_C(1) << (msb64(g) - SL_SHIFT)) - 1;
    bin_of(rounded, &fl, &sl);
    uint32_t sbits = l->sl_map[fl] & (~0u << sl);
    if (sbits == 0) {
        uint64_t fbits = fl + 1 < FL_COUNT ? l->fl_map & (~UINT64_C(0) << (fl + 1)) : 0;
        if (fbits != 0) {
            fl = (unsigned)__builtin_ctzll(fbits);
            sbits = l->sl_map[fl];
        }
    }
    if (sbits != 0) {
        pool_range *best = l->bins[fl][__builtin_ctz(sbits)];
        if (need > SMALL_MAX) {
            /* Every range of this bin fits: the smallest of the first few. */
            unsigned n = 0;
            for (pool_range *r = best; r != NULL && n < BEST_SCAN; r = r->free_next, n++)
                if (smaller(r, best))
                    best = r;
        }
        return best;
    }
    if (g < SL_COUNT)
        return NULL; /* the good fit was the exact bin */
    bin_of(g, &fl, &sl);
    for (pool_range *r = l->bins[fl][sl]; r != NULL; r = r->free_next)
        if (r->bytes >= need)
            return r;
    return NULL;
}

/* A free range of l for need bytes: the best fit with aliases, else the
 * good fit (bins_find). */
static pool_range *fit(const pool_res *p, pool_lists *l, uint64_t need)
{
    return p->areg != NULL ? bins_find_best(l, need) : bins_find(l, need);
}

/* Put a range in its owner's bins, merged with free neighbours of the same
 * stream (their free positions are on that stream: the later covers both). */
static pool_range *bins_release(pool_res *p, pool_range *r)
{
    dv_stream_id s = r->owner;
    pool_range *prev = r->phys_prev, *next = r->phys_next;

    if (prev != NULL && prev->state == RANGE_FREE && prev->owner == s) {
        bin_remove(p, prev);
        prev->bytes += r->bytes;
        prev->phys_next = next;
        if (next != NULL)
            next->phys_prev = prev;
        if (r->freed_epoch > prev->freed_epoch)
            prev->freed_epoch = r->freed_epoch;
        spare_put(p, r);
        r = prev;
    }
    if (next != NULL && next->state == RANGE_FREE && next->owner == s) {
        bin_remove(p, next);
        r->bytes += next->bytes;
        r->phys_next = next->phys_next;
        if (next->phys_next != NULL)
            next->phys_next->phys_prev = r;
        if (next->freed_epoch > r->freed_epoch)
            r->freed_epoch = next->freed_epoch;
        spare_put(p, next);
    }
    bin_insert(p, s, r);
    return r;
}

/* A free neighbour q of a range s frees: another stream's, the device
 * known past its free (no query: what the tracker saw), so its memory is
 * idle and anyone's.  It becomes s's, with nothing to wait for, to merge
 * with the range freed beside it.  (Not under the stream-order checker,
 * which sees only the device's own edges; nor with aliases, where it makes
 * the layout depend on when the host saw the device finish, and a layout
 * that differs from one pass of a workload to the next moves memory.) */
static HOT void adopt_idle(pool_res *p, pool_range *q, dv_stream_id s)
{
    if (p->areg != NULL || q == NULL || q->state != RANGE_FREE || q->owner == s ||
        p->base.env->fence_always || !dv__tracker_known_passed(p->t, freed_pos(q)))
        return;
    bin_remove(p, q);
    q->freed_epoch = 0;
    bin_insert(p, s, q);
}

static void alias_unuse(pool_res *p, dv_dptr ptr, uint64_t bytes, dv_stream_id s, uint64_t epoch,
                        bool clean);

static HOT void defer_flush(pool_res *p);

/* With aliases, a used range's freed_epoch is the binds its placement
 * learnt at: is that placement clean (no bind since, so every granule it
 * made live learnt all there is)? */
static bool mark_clean(const pool_res *p, uint64_t mark)
{
    return mark == p->binds && p->binds != 0;
}

/* A used block's range r back into stream s's bins, stamped with its free
 * there at epoch, merged with its free neighbours: s's, and other
 * streams' that are idle.  Space freed side by side by several streams
 * then comes together as it does for one stream, not split by who freed
 * it. */
static void range_return(pool_res *p, pool_range *r, dv_stream_id s, uint64_t epoch)
{
    r->freed_epoch = epoch;
    r->owner = (uint8_t)s;
    adopt_idle(p, r->phys_prev, s);
    adopt_idle(p, r->phys_next, s);
    (void)bins_release(p, r);
}

static void bins_return(pool_res *p, pool_stacked b, dv_stream_id s)
{
    pool_range *r = range_at(p, b.index);
    defer_flush(p);
    if (p->areg != NULL)
        alias_unuse(p, r->ptr, r->bytes, s, b.freed_epoch,
                    r->bytes > SMALL_MAX && mark_clean(p, r->freed_epoch));
    range_return(p, r, s, b.freed_epoch);
}

/*
 * With aliases, a large block's free: its range goes to the bins as
 * bins_return puts it, and its granules' side (alias_unuse) waits for the
 * next operation.  When that is a placement of the same size, on the same
 * stream, at the same address, and the granules learnt all there is (so
 * that leaving and coming back would change nothing of theirs but the
 * notes of this free, which the block's next free supersedes on the same
 * stream), both sides are skipped (defer_keeps); anything else does it
 * first (defer_flush), in the order the frees came.  A loop that frees a
 * buffer and allocates its like again then does no granule work.
 */
static void bins_defer(pool_res *p, pool_stacked b, dv_stream_id s)
{
    pool_range *r = range_at(p, b.index);
    defer_flush(p);
    p->defer.ptr = r->ptr;
    p->defer.bytes = r->bytes;
    p->defer.epoch = b.freed_epoch;
    p->defer.mark = r->freed_epoch;
    p->defer.s = s;
    p->defer.on = true;
    range_return(p, r, s, b.freed_epoch);
}

static void defer_do(pool_res *p)
{
    p->defer.on = false;
    alias_unuse(p, p->defer.ptr, p->defer.bytes, p->defer.s, p->defer.epoch,
                mark_clean(p, p->defer.mark));
}

static HOT void defer_flush(pool_res *p)
{
    if (p->defer.on)
        defer_do(p);
}

/* ------------------------------------------------------------------------
 * Stacks
 * ------------------------------------------------------------------------ */

/*
 * A block of class c, freed on stream s at epoch, goes on the stack.  Its
 * range is not touched.  Where the stack cannot grow, the block goes to
 * the bins instead (coalescing).
 */
static void stack_push(pool_res *p, pool_stacked b, dv_stream_id s, unsigned c)
{
    pool_stack *st = &p->lists[s].stacks[c];
    if (st->n == st->cap) {
        uint32_t cap = st->cap ? 2 * st->cap : 64;
        pool_stacked *items = realloc(st->items, cap * sizeof(*items));
        if (items == NULL) {
            bins_return(p, b, s);
            return;
        }
        st->items = items;
        st->cap = cap;
    }
    st->items[st->n++] = b;
    p->streams_with_class[c] |= UINT64_C(1) << s;
    p->classes_stacked |= UINT64_C(1) << c;
    p->stacked_bytes += class_bytes(c);
}

/*
 * The top of a non-empty stack.  A stack that shrinks walks down into
 * entries pushed long ago (when a burst of frees filled it), out of cache
 * by now, one class among dozens and too slowly for the hardware to
 * follow: the entries a few pops ahead are prefetched.
 */
#define STACK_PREFETCH 8 /* entries: three cache lines */
static pool_stacked stack_pop(pool_res *p, dv_stream_id s, unsigned c)
{
    pool_stack *st = &p->lists[s].stacks[c];
    if (st->n > STACK_PREFETCH)
        __builtin_prefetch(&st->items[st->n - 1 - STACK_PREFETCH]);
    pool_stacked top = st->items[--st->n];
    if (st->n == 0 && (p->streams_with_class[c] &= ~(UINT64_C(1) << s)) == 0)
        p->classes_stacked &= ~(UINT64_C(1) << c);
    p->stacked_bytes -= class_bytes(c);
    return top;
}

/* Every stacked block back into the bins, coalescing. */
static void flush_stacks(pool_res *p)
{
    defer_flush(p);
    while (p->classes_stacked != 0) {
        unsigned c = (unsigned)__builtin_ctzll(p->classes_stacked);
        while (p->streams_with_class[c] != 0) {
            dv_stream_id s = (dv_stream_id)__builtin_ctzll(p->streams_with_class[c]);
            bins_return(p, stack_pop(p, s, c), s);
        }
    }
}

static void stacks_free(pool_res *p)
{
    for (uint32_t s = 0; s < p->nstreams; s++)
        for (unsigned c = 0; c < SMALL_CLASSES; c++)
            free(p->lists[s].stacks[c].items);
}

/* ------------------------------------------------------------------------
 * Taking a block
 * ------------------------------------------------------------------------ */

/*
 * A block of need bytes (class c, or NO_CLASS) for stream s from the free
 * space, or another stream's stack of class c: its address and range
 * index in *out, and true; false when there is none.  (s's own stack of
 * class c the caller pops first.)  Fails only when a cross-stream wait
 * does, and then changes nothing.
 */
static int alias_use(pool_res *p, dv_dptr ptr, uint64_t bytes, dv_stream_id s);
static bool defer_keeps(const pool_res *p, dv_dptr ptr, uint64_t bytes, dv_stream_id s);
#define ALIAS_FLUSH 1 /* alias_use: stacked blocks first */
static pool_range *bound_fit(pool_res *p, uint64_t need, dv_dptr *at);
static pool_range *split_free(pool_res *p, pool_range *r, dv_dptr at);

static int take(pool_res *p, uint64_t need, unsigned c, dv_stream_id s, pool_stacked *out,
                bool *found)
{
    pool_lists *own = &p->lists[s];
    pool_range *r;
    dv_stream_id from = s;

    *found = true;
    r = fit(p, own, need);
    if (c != NO_CLASS && (r == NULL || r->bytes > SMALL_HOLE) && !p->base.env->fence_always) {
        /* A small block would split a large range of s's, or find none:
         * a small hole another stream freed, the device known past its
         * free, serves with no wait and leaves the large space whole.
         * (Streams that each carve their own large ranges pepper them
         * with small blocks where one stream's would reuse its holes.) */
        unsigned lo, hi, sl;
        bin_of(need >> GRANULE_SHIFT, &lo, &sl);
        bin_of(SMALL_HOLE >> GRANULE_SHIFT, &hi, &sl);
        /* (A stream with no bin from need's to SMALL_HOLE's has no such
         * hole: what it would fit is larger.) */
        uint64_t holes = (~UINT64_C(0) << lo) & (~UINT64_C(0) >> (63 - hi));
        for (uint64_t o = p->streams_with_free & ~(UINT64_C(1) << s); o != 0; o &= o - 1) {
            dv_stream_id t = (dv_stream_id)__builtin_ctzll(o);
            if ((p->lists[t].fl_map & holes) == 0)
                continue;
            pool_range *q = fit(p, &p->lists[t], need);
            if (q != NULL && q->bytes <= SMALL_HOLE &&
                dv__tracker_known_passed(p->t, freed_pos(q))) {
                r = q;
                from = t;
                break;
            }
        }
    }
    if (r == NULL) {
        uint64_t others;
        if (c != NO_CLASS && (others = p->streams_with_class[c] & ~(UINT64_C(1) << s)) != 0) {
            /* Reuse on another stream only behind the free. */
            from = (dv_stream_id)__builtin_ctzll(others);
            pool_stack *st = &p->lists[from].stacks[c];
            dv_stream_pos freed = {from, st->items[st->n - 1].freed_epoch};
            int rc = dv__tracker_wait(p->t, s, freed);
            if (rc != DV_OK)
                return rc;
            *out = stack_pop(p, from, c);
            return DV_OK;
        }
        others = p->streams_with_free & ~(UINT64_C(1) << s);
        while (r == NULL && others != 0) {
            from = (dv_stream_id)__builtin_ctzll(others);
            others &= others - 1;
            r = fit(p, &p->lists[from], need);
        }
        if (r == NULL) {
            *found = false;
            return DV_OK;
        }
        /* Likewise behind the free. */
        int rc = dv__tracker_wait(p->t, s, freed_pos(r));
        if (rc != DV_OK)
            return rc;
    }

    uint32_t binds = p->binds;
    if (p->areg != NULL && p->defer.on && from == s && defer_keeps(p, r->ptr, need, s)) {
        p->defer.on = false; /* its granules as they were: nothing to do */
        p->undone++;
    } else if (p->areg != NULL) {
        /* Memory for the granules the block makes live. */
        defer_flush(p);
        int rc = alias_use(p, r->ptr, need, s);
        if (rc != DV_OK && rc != ALIAS_FLUSH && dv__short_of_memory(rc)) {
            /* None to be had: room where memory is already, or idle. */
            dv_dptr at;
            pool_range *q = bound_fit(p, need, &at);
            if (q != NULL) {
                from = q->owner;
                if (from != s && (rc = dv__tracker_wait(p->t, s, freed_pos(q))) != DV_OK)
                    return rc;
                r = at != q->ptr ? split_free(p, q, at) : q;
                rc = alias_use(p, r->ptr, need, s); /* idle memory at most */
            }
        }
        if (rc == ALIAS_FLUSH) {
            *found = false;
            return DV_OK;
        }
        if (rc != DV_OK)
            return rc;
    }
    bin_remove(p, r);
    if (r->bytes > need) {
        pool_range *rest = spare_take(p);
        rest->ptr = r->ptr + need;
        rest->bytes = r->bytes - need;
        rest->freed_epoch = r->freed_epoch;
        rest->phys_prev = r;
        rest->phys_next = r->phys_next;
        if (r->phys_next != NULL)
            r->phys_next->phys_prev = rest;
        r->phys_next = rest;
        r->bytes = need;
        bin_insert(p, from, rest);
    }
    r->state = RANGE_USED;
    if (p->areg != NULL)
        /* A used range's freed_epoch: with aliases, the binds at which
         * every granule the placement made live learnt (none since), or 0
         * (bins_return). */
        r->freed_epoch = binds == p->binds ? binds : 0;
    *out = (pool_stacked){.ptr = r->ptr, .index = r->index};
    return DV_OK;
}

/* A block of class c (or OWNER_LARGE) used on stream s goes back to s's
 * lists, stamped with the free's epoch there. */
static HOT void release(pool_res *p, pool_stacked b, dv_stream_id s, unsigned c)
{
    if (c != OWNER_LARGE)
        stack_push(p, b, s, c);
    else if (p->areg != NULL && !p->cfg.no_defer)
        bins_defer(p, b, s);
    else
        bins_return(p, b, s);
}

/* ------------------------------------------------------------------------
 * Chunks
 * ------------------------------------------------------------------------ */

/* A chunk of size bytes from the upstream on stream s; its space goes to
 * s's bins. */
static int chunk_add(pool_res *p, uint64_t size, dv_stream_id s)
{
    dv_res_env *env = p->base.env;
    if (p->refused_epoch == env->alloc_epoch && size >= p->refused_bytes) {
        /* Within one allocation, the upstream refused as much a moment
         * ago: asking again would only ask the layers under it again (a
         * pool over pools would retry exponentially in their depth). */
        *dv__detail() = p->refused_detail; /* the upstream's answer, as it gave it */
        return p->refused_status;
    }
    pool_chunk *ch = calloc(1, sizeof(*ch));
    if (ch == NULL)
        return dv__fail(DV_ENOMEM, "allocate", "allocate: out of host memory for a pool chunk");
    int rc = dv__res_allocate(p->base.upstream, size, s, (dv_tag){"pool-chunk", 0}, &ch->block);
    if (rc != DV_OK) {
        if (dv__short_of_memory(rc) &&
            (p->refused_epoch != env->alloc_epoch || size < p->refused_bytes)) {
            p->refused_epoch = env->alloc_epoch;
            p->refused_bytes = size;
            p->refused_status = rc;
            p->refused_detail = *dv_last_error();
        }
        free(ch);
        return rc;
    }
    ch->bytes = size;
    pool_range *r = spare_take(p);
    uint32_t index = r->index; /* a range keeps its place in the directory */
    *r = (pool_range){
        .ptr = ch->block.ptr,
        .bytes = size,
        .index = index,
    };
    /* After the upstream's allocation: another stream taking from this
     * space waits for it (and for nothing queued on s later; a record that
     * fails leaves the capture to that wait). */
    (void)dv__tracker_mark_captured(p->t, s, &r->freed_epoch);
    ch->first = ch->last = r;
    ch->next = p->chunks;
    if (p->chunks != NULL)
        p->chunks->prev = ch;
    p->chunks = ch;
    p->nchunks++;
    p->chunk_bytes += size;
    if (p->chunk_bytes > p->high)
        p->high = p->chunk_bytes;
    bin_insert(p, s, r);
    return DV_OK;
}

/* Order the chunk's alloc stream after every free in it. */
static int chunk_fence(pool_res *p, pool_chunk *ch)
{
    for (pool_range *r = ch->first; r != NULL; r = r->phys_next) {
        int rc = dv__tracker_wait(p->t, ch->block.alloc_stream, freed_pos(r));
        if (rc != DV_OK)
            return rc;
    }
    return DV_OK;
}

/* Nothing live or stacked in it.  A walk, not a counter: the hot paths
 * then never touch the chunk. */
static bool chunk_empty(const pool_chunk *ch)
{
    for (const pool_range *r = ch->first; r != NULL; r = r->phys_next)
        if (r->state == RANGE_USED)
            return false;
    return true;
}

static void hole_unlink(pool_res *p, pool_range *h);

/* Every range of a chunk that goes back to the spares, the free ones out
 * of their bins first. */
static void chunk_ranges_put(pool_res *p, pool_chunk *ch)
{
    for (pool_range *r = ch->first, *rn; r != NULL; r = rn) {
        rn = r->phys_next;
        if (r->state == RANGE_FREE)
            bin_remove(p, r);
        else if (r->state == RANGE_HOLE)
            hole_unlink(p, r);
        spare_put(p, r);
    }
}

/* Out of the pool's list of chunks. */
static void chunk_unlink(pool_res *p, pool_chunk *ch)
{
    if (ch->prev != NULL)
        ch->prev->next = ch->next;
    else
        p->chunks = ch->next;
    if (ch->next != NULL)
        ch->next->prev = ch->prev;
    p->nchunks--;
}

/* Return every empty chunk upstream (stacks must be flushed first to find
 * them all). */
static int release_empty_chunks(pool_res *p, uint64_t *released)
{
    pool_chunk *next;
    int rc;

    for (pool_chunk *ch = p->chunks; ch != NULL; ch = next) {
        next = ch->next;
        if (ch->va_bytes != 0 || !chunk_empty(ch))
            continue; /* a region gives back mapping by mapping */
        uint64_t bytes = ch->bytes;
        if ((rc = chunk_fence(p, ch)) != DV_OK ||
            (rc = dv__res_deallocate(p->base.upstream, &ch->block)) != DV_OK)
            return rc;
        chunk_ranges_put(p, ch);
        chunk_unlink(p, ch);
        p->chunk_bytes -= bytes;
        if (released != NULL)
            *released += bytes;
        free(ch);
        p->refused_epoch = 0; /* the upstream has more now: worth asking */
    }
    return DV_OK;
}

static int region_trim(pool_res *p, pool_chunk *ch, uint64_t *released, bool reached_only,
                       const uint64_t *pick, uint32_t npick);
static void region_drop(pool_res *p, pool_chunk *ch);
static int alias_trim(pool_res *p, uint64_t *released);

static int trim(pool_res *p, uint64_t *released)
{
    flush_stacks(p);
    int rc = release_empty_chunks(p, released);
    pool_chunk *next;
    for (pool_chunk *ch = p->chunks; rc == DV_OK && ch != NULL; ch = next) {
        next = ch->next;
        if (ch->va_bytes == 0)
            continue;
        if (ch == p->areg) {
            rc = alias_trim(p, released);
            continue;
        }
        rc = region_trim(p, ch, released, false, NULL, 0);
        if (rc == DV_OK && ch->bytes == 0)
            region_drop(p, ch);
    }
    return rc;
}

/* ------------------------------------------------------------------------
 * Regions: growth in place by mapping
 * ------------------------------------------------------------------------ */

static int grow(pool_res *p, uint64_t need, dv_stream_id s);

/*
 * Before a region grows: free ranges of other streams whose frees the
 * device has passed belong to nobody in particular any more.  They become
 * s's, with nothing to wait for, and merge with their free neighbours, so
 * space that streams freed side by side serves one large request.  True
 * when any changed hands.  (Not with the stream-order checker on: it sees
 * only the device's own edges, never what the host saw complete.)
 */
static bool reown_reached(pool_res *p, dv_stream_id s)
{
    enum { BATCH = 256 };
    pool_range *cand[BATCH];
    unsigned n = 0;
    uint64_t others = p->streams_with_free & ~(UINT64_C(1) << s);
    uint64_t look = dv__tracker_new_look(p->t); /* one query per event, not per range */

    /* Candidates first: re-binning as they are found would disturb the
     * lists being walked.  None of them merges before its turn: they
     * merge only with s's ranges, and each is another stream's till then. */
    while (others != 0 && n < BATCH) {
        dv_stream_id t = (dv_stream_id)__builtin_ctzll(others);
        others &= others - 1;
        pool_lists *l = &p->lists[t];
        for (uint64_t fm = l->fl_map; fm != 0 && n < BATCH; fm &= fm - 1) {
            unsigned fl = (unsigned)__builtin_ctzll(fm);
            for (uint32_t sm = l->sl_map[fl]; sm != 0 && n < BATCH; sm &= sm - 1) {
                for (pool_range *r = l->bins[fl][__builtin_ctz(sm)]; r != NULL && n < BATCH;
                     r = r->free_next) {
                    bool reached = false;
                    if (dv__tracker_reached_in(p->t, look, freed_pos(r), &reached) == DV_OK &&
                        reached)
                        cand[n++] = r;
                }
            }
        }
    }
    for (unsigned i = 0; i < n; i++) {
        pool_range *r = cand[i];
        bin_remove(p, r);
        r->owner = (uint8_t)s;
        r->freed_epoch = 0;
        (void)bins_release(p, r);
    }
    return n > 0;
}

/* Split free range r at address at (inside it): r keeps the front, the
 * range returned the back, both free on r's stream behind r's free.  A
 * spare must be reserved. */
static pool_range *split_free(pool_res *p, pool_range *r, dv_dptr at)
{
    pool_range *n = spare_take(p);
    bin_remove(p, r);
    n->ptr = at;
    n->bytes = r->ptr + r->bytes - at;
    n->freed_epoch = r->freed_epoch;
    n->phys_prev = r;
    n->phys_next = r->phys_next;
    if (r->phys_next != NULL)
        r->phys_next->phys_prev = n;
    r->phys_next = n;
    r->bytes = at - r->ptr;
    bin_insert(p, r->owner, r);
    bin_insert(p, r->owner, n);
    return n;
}

static void unlink_range(pool_chunk *ch, pool_range *r)
{
    if (r->phys_prev != NULL)
        r->phys_prev->phys_next = r->phys_next;
    else
        ch->first = r->phys_next;
    if (r->phys_next != NULL)
        r->phys_next->phys_prev = r->phys_prev;
}

/* r goes into ch's address order just before (or after) at. */
static void link_before(pool_chunk *ch, pool_range *at, pool_range *r)
{
    r->phys_prev = at->phys_prev;
    r->phys_next = at;
    if (at->phys_prev != NULL)
        at->phys_prev->phys_next = r;
    else
        ch->first = r;
    at->phys_prev = r;
}

static void link_after(pool_chunk *ch, pool_range *at, pool_range *r)
{
    r->phys_prev = at;
    r->phys_next = at->phys_next;
    if (at->phys_next != NULL)
        at->phys_next->phys_prev = r;
    else
        ch->last = r;
    at->phys_next = r;
}

/* Every HOLE range of every region is on one list (a hole is in no bin),
 * which growth walks. */
static void hole_link(pool_res *p, pool_range *h)
{
    h->state = RANGE_HOLE;
    list_push(&p->hole_list, h);
}

static void hole_unlink(pool_res *p, pool_range *h)
{
    list_unlink(&p->hole_list, h);
}

/* Hole r (listed) joins the holes beside it.  The hole after r survives a
 * merge, so the region's last range, the reserved space past the end,
 * stays its last. */
static void hole_merge(pool_res *p, pool_chunk *ch, pool_range *r)
{
    pool_range *next = r->phys_next;
    if (next != NULL && next->state == RANGE_HOLE) {
        next->ptr = r->ptr;
        next->bytes += r->bytes;
        unlink_range(ch, r);
        hole_unlink(p, r);
        spare_put(p, r);
        r = next;
    }
    pool_range *prev = r->phys_prev;
    if (prev != NULL && prev->state == RANGE_HOLE) {
        r->ptr = prev->ptr;
        r->bytes += prev->bytes;
        unlink_range(ch, prev);
        hole_unlink(p, prev);
        spare_put(p, prev);
    }
}

/* Its index in ch->maps (address order), or -1 without host memory. */
static long map_record(pool_chunk *ch, uint64_t off, uint64_t bytes, uint64_t handle)
{
    if (ch->nmaps == ch->cap_maps) {
        uint32_t cap = ch->cap_maps ? 2 * ch->cap_maps : 16;
        pool_map *m = realloc(ch->maps, cap * sizeof(*m));
        if (m == NULL)
            return -1;
        ch->maps = m;
        ch->cap_maps = cap;
    }
    uint32_t i = ch->nmaps;
    while (i > 0 && ch->maps[i - 1].off > off)
        i--;
    memmove(&ch->maps[i + 1], &ch->maps[i], (ch->nmaps - i) * sizeof(*ch->maps));
    ch->maps[i] = (pool_map){off, bytes, handle};
    ch->nmaps++;
    return (long)i;
}

static void mapped_add(pool_res *p, pool_chunk *ch, int64_t bytes)
{
    ch->bytes += (uint64_t)bytes;
    p->chunk_bytes += (uint64_t)bytes;
    if (p->chunk_bytes > p->high)
        p->high = p->chunk_bytes;
    atomic_fetch_add_explicit(&p->base.env->mapped_bytes, (uint64_t)bytes, memory_order_relaxed);
}

/* Kept memory given back to the device: once more after a failure (the
 * driver may have been short of something for a moment; after that the
 * memory is lost to us, as with a failed unmap). */
static void handle_release(pool_res *p, uint64_t handle)
{
    if (dv__drv_mem_release(p->base.env->ctx, handle) != DV_OK)
        (void)dv__drv_mem_release(p->base.env->ctx, handle);
}

/* Kept memory (a move's donors) given back to the device. */
static void kept_release(pool_res *p)
{
    while (p->nkept > 0)
        handle_release(p, p->kept[--p->nkept].handle);
}

/* Of the kept memory, what a growth of bytes in extents of extent bytes
 * maps again: pieces of exactly an extent's size (the last extent may be
 * shorter), so that the growth's extents are those it would have made
 * anew.  The others are released at once, before anything new is made, so
 * that the device never holds more than before the move. */
static void kept_choose(pool_res *p, uint64_t bytes, uint64_t extent)
{
    uint64_t full = bytes / extent, rest = bytes % extent;
    uint32_t n = 0;
    for (uint32_t i = 0; i < p->nkept; i++) {
        pool_map k = p->kept[i];
        if (k.bytes == extent && full > 0) {
            full--;
            p->kept[n++] = k;
        } else if (rest != 0 && k.bytes == rest) {
            rest = 0;
            p->kept[n++] = k;
        } else {
            handle_release(p, k.handle);
        }
    }
    p->nkept = n;
}

/* A kept piece of exactly bytes into *handle, taken out of p->kept:
 * false if there is none. */
static bool kept_take(pool_res *p, uint64_t bytes, uint64_t *handle)
{
    for (uint32_t i = 0; i < p->nkept; i++) {
        if (p->kept[i].bytes == bytes) {
            *handle = p->kept[i].handle;
            p->kept[i] = p->kept[--p->nkept];
            return true;
        }
    }
    return false;
}

/*
 * Map [at, at + bytes) of region ch in extents of up to 1/32 of what is
 * mapped (1/128 below the most ever mapped) or 1/64 of bytes, whichever
 * is more (a granule at least,
 * EXTENT_MAX at most): a trim gives back what
 * lies free at that grain, and a growth makes few driver calls.  An extent
 * of the size of a kept piece (a move's donor) maps that memory again
 * rather than new memory.  Nothing stays mapped on failure, and nothing
 * kept stays kept.
 */
static int extents_map(pool_res *p, pool_chunk *ch, dv_dptr at, uint64_t bytes)
{
    /* (Or 1/64 of the growth where that is more: a large request on a
     * small pool maps in few extents.)  Below the most ever mapped --
     * memory that moved here, or space a trim left -- the extents are
     * four times finer: the growth is done, and a later move then finds
     * whole free extents to take where coarse ones would still hold a
     * live block. */
    uint64_t div = p->chunk_bytes + bytes > p->high ? 32 : 128;
    uint64_t extent = p->chunk_bytes / div > bytes / 64 ? p->chunk_bytes / div : bytes / 64;
    extent = extent < p->granule ? p->granule : extent > EXTENT_MAX ? EXTENT_MAX : extent;
    extent &= ~(p->granule - 1);
    if (p->nkept > 0)
        kept_choose(p, bytes, extent);
    /* The extents of one growth lie side by side, so their records do too,
     * from first on. */
    long first = -1;
    uint32_t made = 0, again = 0;
    for (uint64_t done = 0; done < bytes;) {
        uint64_t n = bytes - done < extent ? bytes - done : extent, handle = 0;
        dv_dptr va = at + done;
        int rc = DV_EINVAL;
        bool kept = p->nkept > 0 && kept_take(p, n, &handle);
        if (kept && (rc = dv__drv_mem_remap(p->base.env->ctx, va, n, handle)) != DV_OK) {
            /* Not mapped again: given back, and new memory made instead. */
            handle_release(p, handle);
            kept = false;
        }
        if (!kept)
            rc = dv__drv_mem_map(p->base.env->ctx, va, n, &handle);
        long i = rc == DV_OK ? map_record(ch, va - ch->block.ptr, n, handle) : -1;
        if (rc == DV_OK && i < 0) {
            (void)dv__drv_mem_unmap(p->base.env->ctx, va, n, handle);
            rc = dv__fail(DV_ENOMEM, "allocate", "allocate: out of host memory for a mapping");
        }
        if (rc != DV_OK) {
            for (uint32_t k = 0; k < made; k++) {
                const pool_map *m = &ch->maps[first + k];
                (void)dv__drv_mem_unmap(p->base.env->ctx, ch->block.ptr + m->off, m->bytes,
                                        m->handle);
            }
            if (made > 0) {
                memmove(&ch->maps[first], &ch->maps[first + made],
                        (ch->nmaps - (uint32_t)first - made) * sizeof(*ch->maps));
                ch->nmaps -= made;
            }
            kept_release(p);
            return rc;
        }
        if (first < 0)
            first = i;
        made++;
        again += kept;
        done += n;
    }
    atomic_fetch_add_explicit(&p->base.env->maps, made, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->base.env->remaps, again, memory_order_relaxed);
    mapped_add(p, ch, (int64_t)bytes);
    return DV_OK;
}

/*
 * Map [at, at + bytes) of hole h in region ch, at its front or (an
 * interior hole) its back: that space becomes free on stream s, merged
 * with the free neighbours of s.  A spare must be reserved.
 */
static int hole_map(pool_res *p, pool_chunk *ch, pool_range *h, dv_dptr at, uint64_t bytes,
                    dv_stream_id s, pool_range **merged)
{
    int rc = extents_map(p, ch, at, bytes);
    if (rc != DV_OK)
        return rc;
    pool_range *r;
    if (bytes == h->bytes && h != ch->last) { /* an interior hole filled whole */
        hole_unlink(p, h);
        r = h;
    } else {
        r = spare_take(p);
        r->ptr = at;
        if (at == h->ptr) {
            link_before(ch, h, r);
            h->ptr += bytes;
        } else {
            link_after(ch, h, r);
        }
        h->bytes -= bytes;
    }
    r->bytes = bytes;
    r->owner = (uint8_t)s;
    /* Mapped now, by calls that take effect at once: no work on any stream
     * came before it (a hole was unmapped only once the device had passed
     * every free in it), so another stream takes it without a wait.  A
     * stamp on s would make that stream wait for whatever s has queued by
     * then, a long kernel included. */
    r->freed_epoch = 0;
    r->state = RANGE_FREE;
    *merged = bins_release(p, r);
    return DV_OK;
}

/* A new region of at least bytes of address space, all of it reserved
 * only: one hole, its last range. */
static int region_new(pool_res *p, uint64_t bytes, pool_chunk **out)
{
    uint64_t va_bytes = round_up(bytes > p->va_step ? bytes : p->va_step, p->granule);
    pool_chunk *ch = calloc(1, sizeof(*ch));
    dv_dptr va = 0;
    if (ch == NULL)
        return dv__fail(DV_ENOMEM, "allocate", "allocate: out of host memory for a pool region");
    int rc = dv__drv_va_reserve(p->base.env->ctx, va_bytes, &va);
    if (rc != DV_OK) {
        free(ch);
        return rc;
    }
    pool_range *h = spare_take(p);
    uint32_t index = h->index;
    *h = (pool_range){.ptr = va, .bytes = va_bytes, .index = index};
    hole_link(p, h);
    ch->block = (dv_block){.ptr = va, .bytes = va_bytes, .device = p->base.device};
    ch->va_bytes = va_bytes;
    ch->first = ch->last = h;
    ch->next = p->chunks;
    if (p->chunks != NULL)
        p->chunks->prev = ch;
    p->chunks = ch;
    p->nchunks++;
    *out = ch;
    return DV_OK;
}

/* Wait, on the host, until the device is past every free in [from, to]
 * (to NULL: to the chunk's end). */
static int ranges_sync(pool_res *p, pool_range *from, pool_range *to)
{
    for (pool_range *r = from; r != NULL; r = r->phys_next) {
        if (r->state != RANGE_HOLE) { /* a live block at a destroy: stamped as freed */
            int rc = dv__tracker_sync(p->t, freed_pos(r));
            if (rc != DV_OK)
                return rc;
        }
        if (r == to)
            return DV_OK;
    }
    return DV_OK;
}

/* Unmap ch->maps[i], every byte of it free and reached: its space becomes
 * a hole.  first is the range holding its first byte. */
static int unmap_one(pool_res *p, pool_chunk *ch, uint32_t i, pool_range *first)
{
    pool_map m = ch->maps[i];
    dv_dptr a = ch->block.ptr + m.off, b = a + m.bytes;
    pool_range *r = first, *x;

    bool keep = p->keeping && p->nkept < RECLAIM_SCAN;
    int rc = keep ? dv__drv_mem_unmap_keep(p->base.env->ctx, a, m.bytes, m.handle)
                  : dv__drv_mem_unmap(p->base.env->ctx, a, m.bytes, m.handle);
    if (rc != DV_OK)
        return rc; /* still mapped, still free */
    if (keep)
        p->kept[p->nkept++] = (pool_map){0, m.bytes, m.handle};
    memmove(&ch->maps[i], &ch->maps[i + 1], (ch->nmaps - i - 1) * sizeof(*ch->maps));
    ch->nmaps--;
    atomic_fetch_add_explicit(&p->base.env->unmaps, 1, memory_order_relaxed);
    mapped_add(p, ch, -(int64_t)m.bytes);

    if (r->ptr < a)
        r = split_free(p, r, a);
    for (x = r; x->ptr + x->bytes < b; x = x->phys_next)
        ;
    if (x->ptr + x->bytes > b)
        (void)split_free(p, x, b);
    /* r .. x cover [a, b) exactly: r becomes the hole. */
    bin_remove(p, r);
    while (r != x) {
        pool_range *n = r->phys_next;
        bin_remove(p, n);
        r->phys_next = n->phys_next;
        if (n->phys_next != NULL)
            n->phys_next->phys_prev = r;
        if (n == x)
            x = r;
        spare_put(p, n);
    }
    r->bytes = m.bytes;
    hole_link(p, r);
    hole_merge(p, ch, r);
    return DV_OK;
}

/*
 * Is every byte of [a, b) free?  r is the range holding a; *last gets the
 * range holding the last byte.
 */
static bool extent_free(pool_range *r, dv_dptr b, pool_range **last)
{
    for (;; r = r->phys_next) {
        if (r->state != RANGE_FREE)
            return false;
        if (r->ptr + r->bytes >= b) {
            *last = r;
            return true;
        }
    }
}

/*
 * Has the device passed every free in [r, b)?  Where it has not yet, look
 * again until deadline_ns (0: look once, within the caller's look): a free
 * marked a moment ago is past on an idle stream as soon as the device sees
 * the event recorded for it, and an unmap that waits a few microseconds
 * for that costs less than memory mapped for good.
 */
static bool frees_passed(pool_res *p, pool_range *r, dv_dptr b, uint64_t deadline_ns,
                         uint64_t look)
{
    for (; r != NULL && r->ptr < b; r = r->phys_next) {
        for (;;) {
            bool reached = false;
            if (dv__tracker_reached_in(p->t, look, freed_pos(r), &reached) != DV_OK)
                return false;
            if (reached)
                break;
            if (deadline_ns == 0 || dv__now_ns() > deadline_ns)
                return false;
            sched_yield();
            look = dv__tracker_new_look(p->t); /* ask the driver again */
        }
    }
    return true;
}

/*
 * Unmap mappings of region ch that lie wholly free: every one (pick NULL),
 * or those whose offsets are in pick[0 .. npick) (ascending); *released
 * counts the bytes.
 */
static int region_trim(pool_res *p, pool_chunk *ch, uint64_t *released, bool reached_only,
                       const uint64_t *pick, uint32_t npick)
{
    pool_range *r = ch->first;
    uint32_t i = 0, k = 0;
    uint64_t look = dv__tracker_new_look(p->t);
    while (i < ch->nmaps && (pick == NULL || k < npick)) {
        if (pick != NULL && ch->maps[i].off != pick[k]) {
            if (ch->maps[i].off > pick[k])
                k++;
            else
                i++;
            continue;
        }
        dv_dptr a = ch->block.ptr + ch->maps[i].off, b = a + ch->maps[i].bytes;
        while (r->ptr + r->bytes <= a)
            r = r->phys_next;
        pool_range *x = NULL;
        if (!extent_free(r, b, &x) || (reached_only && !frees_passed(p, r, b, 0, look))) {
            i++, k++;
            continue;
        }
        int rc = spare_reserve(p, 2);
        if (rc == DV_OK)
            rc = ranges_sync(p, r, x);
        if (rc != DV_OK)
            return rc;
        uint64_t bytes = ch->maps[i].bytes;
        pool_range *before = r->ptr < a ? r : r->phys_prev;
        bool before_hole = before != NULL && before->state == RANGE_HOLE;
        if ((rc = unmap_one(p, ch, i, r)) != DV_OK) {
            i++, k++; /* it stays mapped; a later trim tries again */
            continue;
        }
        k++;
        if (released != NULL)
            *released += bytes;
        /* On from the range before the new hole (a hole there may have
         * merged away). */
        r = before != NULL && !before_hole ? before : ch->first;
    }
    return DV_OK;
}

/* A region whose mappings are gone goes: what it counted as mapped, its
 * address space back, its ranges spare. */
static void region_forget(pool_res *p, pool_chunk *ch)
{
    if (ch->bytes != 0)
        mapped_add(p, ch, -(int64_t)ch->bytes);
    (void)dv__drv_va_release(p->base.env->ctx, ch->block.ptr, ch->va_bytes);
    chunk_ranges_put(p, ch);
    chunk_unlink(p, ch);
    free(ch->maps);
    free(ch);
}

/* A region with nothing mapped goes: its address space back, its ranges
 * spare. */
static void region_drop(pool_res *p, pool_chunk *ch)
{
    for (uint32_t i = 0; i < ch->nmaps; i++) {
        dv_dptr va = ch->block.ptr + ch->maps[i].off;
        /* Once more after a failure: the driver may have been short of
         * something for a moment; after that the memory is lost to us. */
        if (dv__drv_mem_unmap(p->base.env->ctx, va, ch->maps[i].bytes, ch->maps[i].handle) != DV_OK)
            (void)dv__drv_mem_unmap(p->base.env->ctx, va, ch->maps[i].bytes, ch->maps[i].handle);
    }
    atomic_fetch_add_explicit(&p->base.env->unmaps, ch->nmaps, memory_order_relaxed);
    region_forget(p, ch);
}

static pool_chunk *region_of(pool_res *p, dv_dptr ptr)
{
    for (pool_chunk *ch = p->chunks; ch != NULL; ch = ch->next)
        if (ch->va_bytes != 0 && ptr - ch->block.ptr < ch->va_bytes)
            return ch;
    return NULL;
}

/*
 * A way to make room for a request by mapping: bytes at `at` in hole h
 * of region ch, joining the free ranges before and after it (NULL: not
 * needed).  waits counts those of other streams than the request's.
 */
typedef struct growth {
    pool_chunk *ch;
    pool_range *h, *before, *after;
    dv_dptr at;
    uint64_t bytes;
    unsigned waits;
} growth;

static void growth_consider(growth *best, pool_range *h, dv_dptr at, uint64_t bytes,
                            pool_range *before, pool_range *after, dv_stream_id s)
{
    unsigned waits = (before != NULL && before->owner != s) + (after != NULL && after->owner != s);
    if (best->h == NULL || bytes < best->bytes || (bytes == best->bytes && waits < best->waits))
        *best = (growth){NULL, h, before, after, at, bytes, waits};
}

/*
 * The way to room for need bytes that maps the least: a free range next
 * to a hole grown into it (from either side, or joined with the one
 * across it when the hole is small), else the request alone in a hole.
 * The reserved space past a region's end is a hole too, so growth in
 * place at the end is one of the ways.
 */
static growth growth_best(pool_res *p, uint64_t need, dv_stream_id s)
{
    uint64_t g = p->granule, want = round_up(need, g);
    growth best = {0};
    for (pool_range *h = p->hole_list; h != NULL; h = h->free_next) {
        pool_range *b = h->phys_prev, *a = h->phys_next;
        bool tail = a == NULL;
        uint64_t room = h->bytes;
        uint64_t pf = b != NULL && b->state == RANGE_FREE ? b->bytes : 0;
        uint64_t nf = a != NULL && a->state == RANGE_FREE ? a->bytes : 0;
        if (pf != 0) {
            uint64_t n = need > pf ? round_up(need - pf, g) : g;
            if (n <= room)
                growth_consider(&best, h, h->ptr, n, b, NULL, s);
        }
        if (nf != 0) {
            uint64_t n = need > nf ? round_up(need - nf, g) : g;
            if (n <= room)
                growth_consider(&best, h, h->ptr + room - n, n, NULL, a, s);
            if (pf != 0 && pf + room + nf >= need)
                growth_consider(&best, h, h->ptr, room, b, a, s);
        }
        if (want <= room && (tail || want < room || pf + nf == 0))
            growth_consider(&best, h, h->ptr, want, NULL, NULL, s);
    }
    if (best.h != NULL)
        best.ch = region_of(p, best.h->ptr);
    return best;
}

/*
 * Before mapping more than the most ever mapped: unmap free mappings
 * elsewhere, at least want bytes, those in the smallest free spaces first
 * (the last one the smallest that covers what is left), so that what is
 * mapped anew takes their place rather than adding to it.
 * Mappings overlapping [keep_lo, keep_hi) stay.  Those whose frees the
 * device has not passed yet are waited for, RECLAIM_WAIT_NS at most in
 * all.  What is unmapped counts in *got.
 */
#define RECLAIM_WAIT_NS (200 * 1000)
static int reclaim(pool_res *p, uint64_t want, dv_dptr keep_lo, dv_dptr keep_hi, uint64_t *got)
{
    struct cand {
        pool_chunk *ch;
        pool_range *first; /* holding its first byte, until something is unmapped */
        uint64_t off, bytes, space;
        bool passed;
    } cand[RECLAIM_SCAN];
    uint32_t n = 0;
    uint64_t look = dv__tracker_new_look(p->t);

    for (pool_chunk *ch = p->chunks; ch != NULL && n < RECLAIM_SCAN; ch = ch->next) {
        if (ch->va_bytes == 0)
            continue;
        pool_range *r = ch->first;
        for (uint32_t i = 0; i < ch->nmaps && n < RECLAIM_SCAN; i++) {
            dv_dptr a = ch->block.ptr + ch->maps[i].off, b = a + ch->maps[i].bytes;
            while (r->ptr + r->bytes <= a)
                r = r->phys_next;
            pool_range *x = NULL;
            if ((a < keep_hi && keep_lo < b) || !extent_free(r, b, &x))
                continue;
            /* The free space the mapping lies in: the free ranges around it. */
            uint64_t space = 0;
            for (pool_range *y = r; y != NULL && y->state == RANGE_FREE; y = y->phys_prev)
                space += y->bytes;
            for (pool_range *y = r->phys_next; y != NULL && y->state == RANGE_FREE; y = y->phys_next)
                space += y->bytes;
            cand[n++] = (struct cand){ch, r, ch->maps[i].off, ch->maps[i].bytes, space,
                                      frees_passed(p, r, b, 0, look)};
        }
    }
    /* Passed first, then the smallest free space (an insertion sort: n is
     * small). */
    for (uint32_t i = 1; i < n; i++) {
        struct cand c = cand[i];
        uint32_t j = i;
        for (; j > 0 && (cand[j - 1].passed < c.passed ||
                         (cand[j - 1].passed == c.passed && cand[j - 1].space > c.space));
             j--)
            cand[j] = cand[j - 1];
        cand[j] = c;
    }
    uint64_t sum = 0, deadline = 0;
    uint32_t take = 0;
    for (uint32_t i = 0; i < n && sum < want; i++) {
        /* The last piece: the smallest mapping (of those passed) that
         * covers what is still wanted, rather than a larger one moved in
         * vain. */
        uint32_t fit = i;
        for (uint32_t j = i; j < n && cand[j].passed; j++)
            if (cand[j].bytes >= want - sum &&
                (cand[fit].bytes < want - sum || cand[j].bytes < cand[fit].bytes))
                fit = j;
        if (fit != i && cand[fit].bytes >= want - sum && cand[fit].bytes < cand[i].bytes) {
            struct cand tmp = cand[i];
            cand[i] = cand[fit];
            cand[fit] = tmp;
        }
        if (!cand[i].passed) {
            if (deadline == 0)
                deadline = dv__now_ns() + RECLAIM_WAIT_NS;
            dv_dptr b = cand[i].ch->block.ptr + cand[i].off + cand[i].bytes;
            if (!frees_passed(p, cand[i].first, b, deadline, dv__tracker_new_look(p->t)))
                break; /* the device is busy: not now */
        }
        sum += cand[i].bytes;
        cand[take++] = cand[i];
    }
    /* Unmapped region by region, in address order. */
    for (pool_chunk *ch = p->chunks; ch != NULL; ch = ch->next) {
        uint64_t pick[RECLAIM_SCAN];
        uint32_t npick = 0;
        for (uint32_t i = 0; i < take; i++)
            if (cand[i].ch == ch)
                pick[npick++] = cand[i].off;
        if (npick == 0)
            continue;
        for (uint32_t i = 1; i < npick; i++) {
            uint64_t v = pick[i];
            uint32_t j = i;
            for (; j > 0 && pick[j - 1] > v; j--)
                pick[j] = pick[j - 1];
            pick[j] = v;
        }
        int rc = region_trim(p, ch, got, true, pick, npick);
        if (rc != DV_OK)
            return rc;
    }
    return DV_OK;
}

/* Free range r becomes stream s's, s ordered after its free. */
static int reown(pool_res *p, pool_range *r, dv_stream_id s)
{
    if (r->owner == s)
        return DV_OK;
    int rc = dv__tracker_wait(p->t, s, freed_pos(r));
    if (rc != DV_OK)
        return rc;
    bin_remove(p, r);
    /* A record that fails leaves the capture to a later wait. */
    (void)dv__tracker_mark_captured(p->t, s, &r->freed_epoch);
    bin_insert(p, s, r);
    return DV_OK;
}

/*
 * Free space of several streams side by side, at least need bytes in all,
 * becomes one range of stream s: s waits for each of their frees on the
 * device (an event wait, no host query), and they merge.  The run that
 * fits best (address-ordered ties); true when one was found.  Before
 * growing: space freed side by side by streams that shared the work serves
 * a request larger than any of its pieces.
 */
static int merge_across(pool_res *p, uint64_t need, dv_stream_id s, bool *merged)
{
    pool_range *best = NULL;
    uint64_t best_bytes = 0;
    *merged = false;
    if ((p->streams_with_free & (p->streams_with_free - 1)) == 0)
        return DV_OK; /* one stream's space merges by itself */
    for (pool_chunk *ch = p->chunks; ch != NULL; ch = ch->next) {
        for (pool_range *r = ch->first; r != NULL;) {
            if (r->state != RANGE_FREE) {
                r = r->phys_next;
                continue;
            }
            pool_range *first = r;
            uint64_t bytes = 0;
            bool mixed = false;
            for (; r != NULL && r->state == RANGE_FREE; r = r->phys_next) {
                bytes += r->bytes;
                mixed |= r->owner != first->owner;
            }
            if (mixed && bytes >= need && (best == NULL || bytes < best_bytes))
                best = first, best_bytes = bytes;
        }
    }
    if (best == NULL)
        return DV_OK;
    for (pool_range *r = best; r != NULL && r->state == RANGE_FREE; r = r->phys_next) {
        int rc = reown(p, r, s);
        if (rc != DV_OK)
            return rc;
        bin_remove(p, r); /* binned again, merged with the run so far */
        r = bins_release(p, r);
    }
    *merged = true;
    return DV_OK;
}

/* A request of need bytes, more than the device holds: refused before
 * anything is mapped, and for good (no trim or oom function could serve
 * it: the actor tries neither). */
static int refuse_past_device(pool_res *p, uint64_t need)
{
    int rc =
        dv__fail(DV_EDEVICE_OOM, "allocate", "allocate: %llu bytes is more than the device's %llu",
                 (unsigned long long)need, (unsigned long long)p->va_step);
    dv__detail()->requested = need;
    dv__detail()->remaining = 0; /* what the device has left: the actor asks it */
    p->base.env->refused_for_good = true;
    return rc;
}

/*
 * Make room for need bytes on stream s by mapping, where it maps the least
 * (growth_best).  At the end of a region a step maps at least 1/32 of what
 * is mapped (at most 64 MiB), so a pool that grows by many small steps
 * makes few driver calls.  Past the most ever mapped, free mappings
 * elsewhere are unmapped first (reclaim).
 */
static int region_grow(pool_res *p, uint64_t need, dv_stream_id s)
{
    uint64_t g = p->granule, step = p->chunk_bytes / 32;
    int rc;

    if (step > 64 * MIB)
        step = 64 * MIB;
    step &= ~(g - 1);
    if (p->va_step != 0 && need > p->va_step)
        return refuse_past_device(p, need);
    for (int attempt = 0;; attempt++) {
        if ((rc = spare_reserve(p, 4)) != DV_OK)
            return rc;
        growth gr = growth_best(p, need, s);
        if (gr.h == NULL) {
            /* No room in any region: a new one. */
            pool_chunk *ch = NULL;
            rc = region_new(p, need > step ? need : step, &ch);
            if (rc != DV_OK && p->nchunks == 0 && dv__short_of_memory(rc)) {
                /* No address space at all (another pool holds it, say):
                 * this pool grows by chunks instead. */
                p->granule = 0;
                return grow(p, need, s);
            }
            if (rc != DV_OK)
                return rc;
            gr = growth_best(p, need, s);
            if (gr.h == NULL) /* the new region holds need: cannot happen */
                return dv__fail(DV_EINVAL, "allocate", "allocate: pool lost its new region");
        }
        uint64_t least = gr.bytes, cap = p->cfg.max_pool_bytes;
        /* A step at a region's end. */
        if (gr.h->phys_next == NULL && gr.bytes < step && step <= gr.h->bytes)
            gr.bytes = step;
        /* Past the most ever mapped (never, keeping what is mapped) and
         * past the cap, memory moves rather than being added. */
        uint64_t limit = p->cfg.keep_mapped ? UINT64_MAX : p->high;
        if (cap != 0 && cap < limit)
            limit = cap;
        if (p->chunk_bytes + least > limit && p->chunk_bytes > p->live_bytes) {
            /* The hole's neighbours stay: the growth joins them. */
            pool_range *b = gr.h->phys_prev, *a = gr.h->phys_next;
            dv_dptr lo = b != NULL ? b->ptr : gr.h->ptr;
            dv_dptr hi = a != NULL ? a->ptr + a->bytes : gr.h->ptr + gr.h->bytes;
            uint64_t over = p->chunk_bytes + least - (limit > p->chunk_bytes ? limit : p->chunk_bytes);
            uint64_t got = 0;
            /* The donors' memory kept, for the growth to map again. */
            p->keeping = true;
            rc = reclaim(p, over, lo, hi, &got);
            p->keeping = false;
            if (rc != DV_OK) {
                kept_release(p);
                return rc;
            }
            if (got != 0)
                gr.bytes = least; /* no step while moving */
        }
        if (cap != 0 && p->chunk_bytes + gr.bytes > cap) {
            if (p->chunk_bytes + least > cap) {
                kept_release(p);
                rc = dv__fail(DV_EOUT_OF_BUDGET, "allocate",
                              "allocate: %llu bytes would take the pool past max_pool_bytes "
                              "%llu (%llu mapped)",
                              (unsigned long long)need, (unsigned long long)cap,
                              (unsigned long long)p->chunk_bytes);
                dv__detail()->requested = need;
                dv__detail()->remaining = cap > p->chunk_bytes ? cap - p->chunk_bytes : 0;
                return rc;
            }
            gr.bytes = least;
        }
        pool_range *merged = NULL;
        if ((gr.before == NULL || (rc = reown(p, gr.before, s)) == DV_OK) &&
            (gr.after == NULL || (rc = reown(p, gr.after, s)) == DV_OK))
            rc = hole_map(p, gr.ch, gr.h, gr.at, gr.bytes, s, &merged);
        kept_release(p); /* a reown failed: nothing was mapped again */
        if (rc == DV_OK && gr.after != NULL && gr.before == NULL && merged->bytes > need)
            /* Grown downwards: the request at the top, what is left over
             * beside the hole, where a later growth extends it. */
            (void)split_free(p, merged, merged->ptr + merged->bytes - need);
        if (rc == DV_OK || !dv__short_of_memory(rc) || attempt > 0)
            return rc;
        /* The device is short: give back what lies free, then once more at
         * the least size. */
        step = 0;
        (void)trim(p, NULL);
    }
}

/* ------------------------------------------------------------------------
 * Aliases: physical granules bound to address granules
 * ------------------------------------------------------------------------ */

/* Granules of the alias region (index of ptr's). */
static uint32_t gran_of(const pool_res *p, dv_dptr ptr)
{
    return (uint32_t)((ptr - p->areg->block.ptr) >> p->gshift);
}

static dv_dptr gran_va(const pool_res *p, uint32_t g)
{
    return p->areg->block.ptr + ((uint64_t)g << p->gshift);
}

/* Is granule g's record set up? */
static bool gran_is_ready(const pool_res *p, uint32_t g)
{
    uint32_t k = g / GRAN_GROUP;
    return p->gran_ready[k / 64] >> (k % 64) & 1;
}

/* Granule records g0 .. g1 set up where they are not yet (gran_array_new
 * left them zero: no page of the array is touched before its granules
 * are). */
static void gran_ready(pool_res *p, uint32_t g0, uint32_t g1)
{
    for (uint32_t k = g0 / GRAN_GROUP; k <= g1 / GRAN_GROUP; k++) {
        if (gran_is_ready(p, k * GRAN_GROUP))
            continue;
        p->gran_ready[k / 64] |= UINT64_C(1) << (k % 64);
        for (uint32_t g = k * GRAN_GROUP; g < (k + 1) * GRAN_GROUP && g < p->ngran; g++)
            p->gran[g] = (pool_gran){.phys = NO_PHYS, .sid = NO_GRAN};
    }
}

/* The granule records of a region: zero pages the kernel gives when first
 * touched (a calloc may clear them all at once, whatever the allocator),
 * so a region's unused address space costs no host memory; NULL if
 * refused. */
static pool_gran *gran_array_new(uint32_t n)
{
    void *m = mmap(NULL, (size_t)n * sizeof(pool_gran), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return m == MAP_FAILED ? NULL : m;
}

static void gran_array_free(pool_gran *gran, uint32_t n)
{
    if (gran != NULL)
        (void)munmap(gran, (size_t)n * sizeof(pool_gran));
}

/* The region's books of granules (records, marks, what was seen live
 * together) given back. */
static void alias_books_free(pool_res *p)
{
    gran_array_free(p->gran, p->ngran);
    free(p->gran_ready);
    free(p->live_units);
    free(p->unit_live);
    free(p->pend_bits);
    free(p->seen);
    p->gran = NULL;
    p->gran_ready = NULL;
    p->live_units = NULL;
    p->unit_live = NULL;
    p->pend_bits = NULL;
    p->seen = NULL;
}

static bool pend_at(const pool_res *p, uint32_t g);
static void pend_flush(pool_res *p);
static HOT uint32_t pend_find(const pool_res *p, uint32_t g);
static HOT pool_pend pend_cut(pool_res *p, uint32_t i, uint32_t x, uint32_t y);
static void pend_piece_idle(pool_res *p, pool_pend r);
static uint32_t idle_before(const pool_res *p, uint64_t stamp);
static HOT uint32_t gran_leave(pool_res *p, uint32_t g);

/* Idle physical granules are a list in the order they went idle (by
 * stamp): memory q goes in after memory after (NO_PHYS: first). */
static void idle_insert(pool_res *p, uint32_t q, uint32_t after, uint64_t stamp)
{
    pool_phys *ph = &p->phys[q];
    ph->idle_stamp = stamp;
    ph->idle_prev = after;
    ph->idle_next = after != NO_PHYS ? p->phys[after].idle_next : p->idle_head;
    if (ph->idle_next != NO_PHYS)
        p->phys[ph->idle_next].idle_prev = q;
    else
        p->idle_tail = q;
    if (after != NO_PHYS)
        p->phys[after].idle_next = q;
    else
        p->idle_head = q;
}

static void idle_unlink(pool_res *p, uint32_t q)
{
    pool_phys *ph = &p->phys[q];
    if (ph->idle_prev != NO_PHYS)
        p->phys[ph->idle_prev].idle_next = ph->idle_next;
    else
        p->idle_head = ph->idle_next;
    if (ph->idle_next != NO_PHYS)
        p->phys[ph->idle_next].idle_prev = ph->idle_prev;
    else
        p->idle_tail = ph->idle_prev;
}

/* The unit of granule g's sid in the matrix of what was seen live
 * together. */
static uint32_t unit_of(const pool_res *p, const pool_gran *gr)
{
    return gr->sid >> p->seen_shift;
}

/* Was w ever live while v became live, or v while w did?  Known by unit:
 * two granules of one unit count as seen together.  Where the matrix
 * could not grow (out of host memory), they may have been: memory does
 * not move between such granules while others have room. */
static bool seen_together(const pool_res *p, uint32_t gv, uint32_t gw)
{
    const pool_gran *a = &p->gran[gv], *b = &p->gran[gw];
    if (a->sid == NO_GRAN || b->sid == NO_GRAN)
        return true;
    uint32_t v = unit_of(p, a), w = unit_of(p, b);
    if (v >= p->seen_n || w >= p->seen_n)
        return true;
    uint32_t words = p->seen_n / 64;
    return (p->seen[(uint64_t)v * words + w / 64] >> (w % 64) & 1) ||
           (p->seen[(uint64_t)w * words + v / 64] >> (v % 64) & 1);
}

/* The even bits of x, side by side in its low 32. */
static uint64_t even_bits(uint64_t x)
{
    x &= UINT64_C(0x5555555555555555);
    x = (x | x >> 1) & UINT64_C(0x3333333333333333);
    x = (x | x >> 2) & UINT64_C(0x0F0F0F0F0F0F0F0F);
    x = (x | x >> 4) & UINT64_C(0x00FF00FF00FF00FF);
    x = (x | x >> 8) & UINT64_C(0x0000FFFF0000FFFF);
    x = (x | x >> 16) & UINT64_C(0x00000000FFFFFFFF);
    return x;
}

/* Units twice as large: units 2a and 2a + 1 become unit a, which was seen
 * with whatever either was (what was learnt stays true, coarser).  The
 * matrix is folded in place (row a is written after rows 2a and 2a + 1
 * are read); a matrix of one word a row keeps its size, its upper half
 * cleared. */
static void seen_fold(pool_res *p)
{
    uint32_t n = p->seen_n, ow = n / 64;
    uint32_t rows = n / 2, nw = ow > 1 ? ow / 2 : 1;
    for (uint32_t a = 0; a < rows && p->seen != NULL; a++) {
        const uint64_t *r0 = &p->seen[(uint64_t)(2 * a) * ow];
        const uint64_t *r1 = &p->seen[(uint64_t)(2 * a + 1) * ow];
        uint64_t out[SEEN_MAX / 128 + 1]; /* nw words */
        for (uint32_t i = 0; i < nw; i++) {
            uint64_t lo = r0[2 * i] | r1[2 * i];
            uint64_t hi = ow > 1 ? r0[2 * i + 1] | r1[2 * i + 1] : 0;
            out[i] = even_bits(lo | lo >> 1) | even_bits(hi | hi >> 1) << 32;
        }
        memcpy(&p->seen[(uint64_t)a * nw], out, nw * sizeof(uint64_t));
    }
    if (p->seen != NULL && ow > 1)
        p->seen_n = rows;
    else if (p->seen != NULL)
        memset(&p->seen[rows], 0, rows * sizeof(uint64_t));
    memset(p->live_units, 0, p->seen_max / 8);
    for (uint32_t a = 0; a < p->seen_max / 2; a++) {
        p->unit_live[a] = p->unit_live[2 * a] + p->unit_live[2 * a + 1];
        if (p->unit_live[a] != 0)
            p->live_units[a / 64] |= UINT64_C(1) << (a % 64);
    }
    memset(&p->unit_live[p->seen_max / 2], 0, p->seen_max / 2 * sizeof(uint32_t));
    p->seen_shift++;
}

/* Granule v becomes live: it learns which others are live with it.  What
 * is known is kept by unit: granules by their order of first use, one
 * each while there are at most seen_max, and pairs, fours and so on past
 * that (a unit's granules, first used one after another, are mostly the
 * pieces of the same blocks).  The matrix grows with the highest unit
 * used.  Where no granule got memory anew (moved or made) since v last
 * learnt, the workload is repeating what v has seen: the row stays, and
 * a steady state costs no walk of the live set. */
static void seen_note(pool_res *p, uint32_t g)
{
    pool_gran *gr = &p->gran[g];
    if (gr->sid == NO_GRAN)
        gr->sid = p->nsid++;
    while (unit_of(p, gr) >= p->seen_max)
        seen_fold(p);
    uint32_t v = unit_of(p, gr);
    if (!gr->counted) {
        gr->counted = true;
        if (p->unit_live[v]++ == 0)
            p->live_units[v / 64] |= UINT64_C(1) << (v % 64);
    }
    if (gr->learnt == p->binds && gr->learnt != 0)
        return;
    if (p->npend != 0)
        pend_flush(p); /* what is live, exactly */
    gr->learnt = p->binds;
    if (v >= p->seen_n) {
        uint32_t n = p->seen_n != 0 ? p->seen_n : 64;
        while (n <= v)
            n *= 2;
        uint64_t *m = calloc((uint64_t)n * (n / 64), sizeof(uint64_t));
        if (m != NULL) {
            for (uint32_t r = 0; r < p->seen_n; r++)
                memcpy(&m[(uint64_t)r * (n / 64)], &p->seen[(uint64_t)r * (p->seen_n / 64)],
                       p->seen_n / 8);
            free(p->seen);
            p->seen = m;
            p->seen_n = n;
        }
    }
    if (v < p->seen_n) {
        uint64_t *row = &p->seen[(uint64_t)v * (p->seen_n / 64)];
        for (uint32_t i = 0; i < p->seen_n / 64; i++)
            row[i] |= p->live_units[i];
    }
}

/* Aliases of q (other than v) that were ever live together with v. */
static uint32_t conflicts(const pool_res *p, uint32_t v, const pool_phys *q)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < q->nalias; i++)
        n += q->alias[i] != v && seen_together(p, v, q->alias[i]);
    return n;
}

/* A free in granule g: its position kept (the latest per stream, a few
 * streams) until the device is known past it. */
static HOT void gran_note_free(pool_res *p, pool_gran *gr, dv_stream_id s, uint64_t epoch)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < gr->nfree; i++) {
        dv_stream_pos f = {gr->fstream[i], gr->fepoch[i]};
        if (f.stream == s && f.epoch > epoch)
            epoch = f.epoch; /* stacks flush newest first: the later counts */
        if (f.stream == s || dv__tracker_known_passed(p->t, f))
            continue;
        gr->fstream[k] = gr->fstream[i];
        gr->fepoch[k++] = gr->fepoch[i];
    }
    gr->nfree = (uint8_t)k;
    if (k < GRAN_FREES) {
        gr->fstream[k] = (uint8_t)s;
        gr->fepoch[k] = epoch;
        gr->nfree++;
    } else {
        gr->many = true;
    }
}

/* The frees kept at granule gr, in pos (room for DV_MAX_STREAMS): those
 * noted, or where they came from more streams than are kept, every
 * stream's newest position.  Their count. */
static uint32_t gran_frees(const pool_res *p, const pool_gran *gr, dv_stream_pos *pos)
{
    if (gr->many) {
        for (uint32_t t = 0; t < p->nstreams; t++)
            pos[t] = dv__tracker_now(p->t, (dv_stream_id)t);
        return p->nstreams;
    }
    for (uint32_t i = 0; i < gr->nfree; i++)
        pos[i] = (dv_stream_pos){gr->fstream[i], gr->fepoch[i]};
    return gr->nfree;
}

/* May memory leave granule gr: has the host seen the device pass every
 * free kept there (within look)?  (Not the frees on the stream that takes
 * the memory either: its stream order would cover its own work, but the
 * free ranges around the block take their stamps from the address, and
 * another stream that took one would not wait.)  A driver error (a fault)
 * is the caller's. */
static HOT int gran_passed(pool_res *p, const pool_gran *gr, uint64_t look, bool *passed)
{
    *passed = true;
    if (!gr->many) { /* its frees as kept; those known passed ask nothing */
        for (uint32_t i = 0; i < gr->nfree; i++) {
            dv_stream_pos f = {gr->fstream[i], gr->fepoch[i]};
            if (dv__tracker_known_passed(p->t, f))
                continue;
            int rc = dv__tracker_reached_in(p->t, look, f, passed);
            if (rc != DV_OK || !*passed) {
                *passed = *passed && rc == DV_OK;
                return rc;
            }
        }
        return DV_OK;
    }
    dv_stream_pos pos[DV_MAX_STREAMS];
    uint32_t n = gran_frees(p, gr, pos);
    int rc = DV_OK;
    *passed = true;
    for (uint32_t i = 0; i < n && *passed && rc == DV_OK; i++)
        rc = dv__tracker_reached_in(p->t, look, pos[i], passed);
    if (rc != DV_OK)
        *passed = false;
    return rc;
}

/* Stream s waits on the device for every free in granule g (the order the
 * stream-order checker sees; no-ops for what s already waits for). */
static int gran_wait(pool_res *p, const pool_gran *gr, dv_stream_id s)
{
    if (!p->base.env->fence_always)
        return DV_OK; /* passed: the host saw it */
    dv_stream_pos pos[DV_MAX_STREAMS];
    uint32_t n = gran_frees(p, gr, pos);
    int rc = DV_OK;
    for (uint32_t i = 0; i < n && rc == DV_OK; i++)
        rc = dv__tracker_wait(p->t, s, pos[i]);
    return rc;
}

static int alias_add(pool_phys *ph, uint32_t g)
{
    if (ph->nalias == ph->cap_alias) {
        uint32_t cap = ph->cap_alias ? 2 * ph->cap_alias : 4;
        uint32_t *a = realloc(ph->alias, cap * sizeof(*a));
        if (a == NULL)
            return dv__fail(DV_ENOMEM, "allocate", "allocate: out of host memory for an alias");
        ph->alias = a;
        ph->cap_alias = cap;
    }
    ph->alias[ph->nalias++] = g;
    return DV_OK;
}

static void alias_remove(pool_phys *ph, uint32_t g)
{
    for (uint32_t i = 0; i < ph->nalias; i++) {
        if (ph->alias[i] == g) {
            ph->alias[i] = ph->alias[--ph->nalias];
            return;
        }
    }
}

/* Wait, on the host, until the device passed every free in granule g: an
 * unmap takes effect at once.  (Memory left g for another granule of the
 * same stream without the host seeing those frees done.) */
static int gran_sync(pool_res *p, const pool_gran *gr)
{
    dv_stream_pos pos[DV_MAX_STREAMS];
    uint32_t n = gran_frees(p, gr, pos);
    int rc = DV_OK;
    for (uint32_t i = 0; i < n && rc == DV_OK; i++)
        rc = dv__tracker_sync(p->t, pos[i]);
    return rc;
}

/* Unmap what granule g maps (nothing serves there), once the device is
 * past every free there.  The physical memory stays, mapped at its other
 * addresses or at none. */
static int gran_unbind(pool_res *p, uint32_t g)
{
    pool_gran *gr = &p->gran[g];
    if (gr->phys == NO_PHYS)
        return DV_OK;
    pool_phys *ph = &p->phys[gr->phys];
    int rc = gran_sync(p, gr);
    if (rc != DV_OK)
        return rc;
    rc = dv__drv_mem_unmap_keep(p->base.env->ctx, gran_va(p, g), p->granule, ph->handle);
    if (rc != DV_OK)
        return rc;
    atomic_fetch_add_explicit(&p->base.env->unmaps, 1, memory_order_relaxed);
    alias_remove(ph, g);
    gr->phys = NO_PHYS;
    return DV_OK;
}

/* A slot for one more physical granule: its index, or NO_PHYS without
 * host memory. */
static uint32_t phys_slot(pool_res *p)
{
    if (p->phys_free != NO_PHYS) {
        uint32_t q = p->phys_free;
        p->phys_free = p->phys[q].idle_next;
        return q;
    }
    if (p->nphys_slots == p->cap_phys) {
        uint32_t cap = p->cap_phys ? 2 * p->cap_phys : 64;
        pool_phys *a = realloc(p->phys, cap * sizeof(*a));
        if (a == NULL)
            return NO_PHYS;
        p->phys = a;
        p->cap_phys = cap;
    }
    return p->nphys_slots++;
}

/* Physical granule q, idle and mapped at no address any more, released. */
static void phys_drop(pool_res *p, uint32_t q)
{
    pool_phys *ph = &p->phys[q];
    handle_release(p, ph->handle);
    free(ph->alias);
    *ph = (pool_phys){.idle_next = p->phys_free};
    p->phys_free = q;
    p->nphys--;
    mapped_add(p, p->areg, -(int64_t)p->granule);
}

/* New physical memory mapped at granule g (which maps nothing), serving
 * it. */
static int gran_make(pool_res *p, uint32_t g)
{
    uint32_t q = phys_slot(p);
    uint64_t handle = 0;
    if (q == NO_PHYS)
        return dv__fail(DV_ENOMEM, "allocate", "allocate: out of host memory for memory");
    int rc = dv__drv_mem_map(p->base.env->ctx, gran_va(p, g), p->granule, &handle);
    if (rc == DV_OK) {
        p->phys[q] = (pool_phys){.handle = handle,
                                 .active = g,
                                 .last = g,
                                 .idle_prev = NO_PHYS,
                                 .idle_next = NO_PHYS,
                                 .made = p->base.env->alloc_epoch};
        if ((rc = alias_add(&p->phys[q], g)) != DV_OK)
            (void)dv__drv_mem_unmap(p->base.env->ctx, gran_va(p, g), p->granule, handle);
    }
    if (rc != DV_OK) {
        p->phys[q] = (pool_phys){.idle_next = p->phys_free};
        p->phys_free = q;
        return rc;
    }
    p->gran[g].phys = q;
    p->nphys++;
    dv_assert_internal(p->npend == 0); /* pending granules learnt at binds as they are */
    p->binds++;
    mapped_add(p, p->areg, (int64_t)p->granule);
    atomic_fetch_add_explicit(&p->base.env->maps, 1, memory_order_relaxed);
    return DV_OK;
}

/* The best idle granule for g whose frees the device has passed: the
 * fewest conflicts, the oldest first; NO_PHYS if none. */
static int idle_best(pool_res *p, uint32_t g, uint64_t look, uint32_t *best, uint32_t *conf)
{
    *best = NO_PHYS;
    *conf = UINT32_MAX;
    for (uint32_t q = p->idle_head; q != NO_PHYS && *conf != 0; q = p->phys[q].idle_next) {
        pool_phys *ph = &p->phys[q];
        uint32_t c = conflicts(p, g, ph);
        bool passed = false;
        if (c >= *conf)
            continue;
        int rc = gran_passed(p, &p->gran[ph->last], look, &passed);
        if (rc != DV_OK)
            return rc;
        if (passed) {
            *best = q;
            *conf = c;
        }
    }
    return DV_OK;
}

/* Idle granule q serves g (where it is mapped) now. */
static void phys_activate(pool_res *p, uint32_t q, uint32_t g)
{
    idle_unlink(p, q);
    p->phys[q].active = p->phys[q].last = g;
}

/* May granule g's own memory ph (serving no address now) serve g: has the
 * device passed every free where it served last (nothing to pass where
 * that was g)?  If so, s waits for those frees on the device (for the
 * stream-order checker).  A driver error is the caller's. */
static HOT int own_passed(pool_res *p, const pool_phys *ph, uint32_t g, dv_stream_id s,
                          uint64_t look, bool *passed)
{
    *passed = ph->last == g;
    if (*passed)
        return DV_OK;
    int rc = gran_passed(p, &p->gran[ph->last], look, passed);
    if (rc == DV_OK && *passed)
        rc = gran_wait(p, &p->gran[ph->last], s);
    return rc;
}

/*
 * Physical memory for granule g, which has just become live for stream s:
 * its own, when that is idle and was last here (no driver call); else an
 * idle granule whose other addresses were never live together with g
 * (the oldest idle of the fewest such conflicts), mapped here; else new
 * memory, while the pool holds under SLACK times the most granules ever
 * live at once; else the best idle one.  Memory that leaves another
 * address does so once the device has passed every free there.
 * ALIAS_FLUSH: new memory would be made while small blocks are stacked
 * (the caller flushes them and asks again).
 */
static int gran_bind(pool_res *p, uint32_t g, dv_stream_id s, uint64_t look)
{
    pool_gran *gr = &p->gran[g];
    uint32_t own = gr->phys;
    int rc;
    if (p->npend != 0 && own != NO_PHYS && p->phys[own].active != NO_GRAN &&
        pend_at(p, p->phys[own].active)) {
        /* Its own memory, pending at another address h: h is left as
         * pend_piece_idle leaves it, and the memory comes here straight
         * when the device passed the frees where it was (as it would
         * from the idle list, without going through it); else it is idle
         * in its place and looked at below with the rest. */
        uint32_t h = p->phys[own].active;
        pool_pend piece = pend_cut(p, pend_find(p, h), h, h);
        pool_gran *hr = &p->gran[h];
        pool_phys *ph = &p->phys[own];
        dv_assert_internal(hr->phys == own); /* mapped at h, where it serves */
        gran_note_free(p, hr, piece.stream, piece.epoch);
        hr->users = 0;
        (void)gran_leave(p, h); /* own, off h */
        bool passed;
        rc = own_passed(p, ph, g, s, look, &passed);
        if (rc == DV_OK && passed) {
            ph->active = ph->last = g;
            return DV_OK;
        }
        idle_insert(p, own, idle_before(p, piece.stamp), piece.stamp);
        if (rc != DV_OK)
            return rc;
    }
    if (own != NO_PHYS && p->phys[own].active == NO_GRAN) {
        bool passed;
        if ((rc = own_passed(p, &p->phys[own], g, s, look, &passed)) != DV_OK)
            return rc;
        if (passed) {
            phys_activate(p, own, g);
            return DV_OK;
        }
    }
    uint32_t best_conf, best;
    if (p->npend != 0)
        pend_flush(p); /* every idle granule a candidate */
    if ((rc = idle_best(p, g, look, &best, &best_conf)) != DV_OK)
        return rc;
    if (best == NO_PHYS && p->idle_head != NO_PHYS) {
        /* Idle memory whose frees the device has not passed yet: a free
         * marked a moment ago is past as soon as the device sees its
         * event, and waiting a few microseconds for that costs less than
         * memory made for good. */
        uint64_t deadline = dv__now_ns() + RECLAIM_WAIT_NS;
        while (best == NO_PHYS && dv__now_ns() < deadline) {
            sched_yield();
            rc = idle_best(p, g, dv__tracker_new_look(p->t), &best, &best_conf);
            if (rc != DV_OK)
                return rc;
        }
    }
    if (best != NO_PHYS && best == own) {
        /* Its own, once the device passed the frees where it was since. */
        pool_phys *ph = &p->phys[own];
        if ((rc = gran_wait(p, &p->gran[ph->last], s)) != DV_OK)
            return rc;
        phys_activate(p, own, g);
        return DV_OK;
    }
    uint64_t cap = p->cfg.max_pool_bytes;
    bool fits = cap == 0 || p->chunk_bytes + p->granule <= cap; /* one granule more */
    bool room = fits && (uint64_t)p->nphys * 100 < (uint64_t)SLACK_PCT * p->peak_live;
    bool make = best == NO_PHYS || (best_conf > 0 && room);
    if (make && p->stacked_bytes != 0)
        return ALIAS_FLUSH;
    rc = gran_unbind(p, g);
    if (rc != DV_OK)
        return rc;
    gr->nfree = 0; /* frees of memory no longer here */
    gr->many = false;
    if (make && fits) {
        rc = gran_make(p, g);
        if (rc == DV_OK || !dv__short_of_memory(rc) || (best == NO_PHYS && p->idle_head == NO_PHYS))
            return rc; /* the device's answer */
    } else if (best == NO_PHYS && p->idle_head == NO_PHYS) {
        rc = dv__fail(DV_EOUT_OF_BUDGET, "allocate",
                      "allocate: another granule would take the pool past max_pool_bytes %llu "
                      "(%llu mapped, none idle)",
                      (unsigned long long)cap, (unsigned long long)p->chunk_bytes);
        dv__detail()->requested = p->granule;
        dv__detail()->remaining = cap > p->chunk_bytes ? cap - p->chunk_bytes : 0;
        return rc;
    }
    if (best == NO_PHYS) {
        /* No room for more, and the idle memory still has frees the device
         * has not passed: wait for the oldest's on the host (as an unmap
         * would) rather than refuse. */
        best = p->idle_head;
        if ((rc = gran_sync(p, &p->gran[p->phys[best].last])) != DV_OK)
            return rc;
    }
    /* An idle granule moves here. */
    pool_phys *ph = &p->phys[best];
    if ((rc = gran_wait(p, &p->gran[ph->last], s)) != DV_OK)
        return rc;
    if ((rc = alias_add(ph, g)) != DV_OK)
        return rc;
    if ((rc = dv__drv_mem_remap(p->base.env->ctx, gran_va(p, g), p->granule, ph->handle)) != DV_OK) {
        ph->nalias--;
        /* Not mapped here (the driver refuses a second address, say):
         * new memory instead, where there is room, unless the device is
         * gone. */
        if (dv__fault_of_device(rc) || !fits)
            return rc;
        return gran_make(p, g);
    }
    /* A mapping made (env.maps), of memory mapped elsewhere already. */
    atomic_fetch_add_explicit(&p->base.env->maps, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->base.env->remaps, 1, memory_order_relaxed);
    phys_activate(p, best, g);
    gr->phys = best;
    dv_assert_internal(p->npend == 0);
    p->binds++;
    return DV_OK;
}

/* Granule gr leaves its unit's count of live granules. */
static void gran_uncount(pool_res *p, pool_gran *gr)
{
    if (gr->counted) {
        uint32_t v = unit_of(p, gr);
        gr->counted = false;
        if (--p->unit_live[v] == 0)
            p->live_units[v / 64] &= ~(UINT64_C(1) << (v % 64));
    }
}

/* Granule g is live no more: out of its unit's count, and its memory (if
 * it serves g) serves nothing now.  That memory, or NO_PHYS. */
static HOT uint32_t gran_leave(pool_res *p, uint32_t g)
{
    pool_gran *gr = &p->gran[g];
    gran_uncount(p, gr);
    if (gr->phys == NO_PHYS || p->phys[gr->phys].active != g)
        return NO_PHYS;
    p->phys[gr->phys].active = NO_GRAN;
    return gr->phys;
}

/* Granule g is live no more: its memory (if it serves g) goes into the
 * idle order after memory after, stamped.  What is last in the order
 * then. */
static uint32_t gran_rest(pool_res *p, uint32_t g, uint32_t after, uint64_t stamp)
{
    uint32_t q = gran_leave(p, g);
    if (q == NO_PHYS)
        return after;
    idle_insert(p, q, after, stamp);
    return q;
}

/* Granule g has nothing used in it any more: its memory is idle. */
static void gran_idle(pool_res *p, uint32_t g)
{
    p->nlive--;
    (void)gran_rest(p, g, p->idle_tail, ++p->idle_clock);
}

/* ------------------------------------------------------------------------
 * Aliases: pending runs
 * ------------------------------------------------------------------------ */

static bool pend_at(const pool_res *p, uint32_t g)
{
    return p->pend_bits[g / 64] >> (g % 64) & 1;
}

/* Is any granule of [g0, g1] in a pending run? */
static bool pend_any(const pool_res *p, uint32_t g0, uint32_t g1)
{
    for (uint32_t w = g0 / 64; w <= g1 / 64; w++) {
        uint64_t m = p->pend_bits[w];
        if (w == g0 / 64)
            m &= ~UINT64_C(0) << (g0 % 64);
        if (w == g1 / 64 && g1 % 64 != 63)
            m &= (UINT64_C(1) << (g1 % 64 + 1)) - 1;
        if (m != 0)
            return true;
    }
    return false;
}

static void pend_bits_set(pool_res *p, uint32_t g, uint32_t n, bool on)
{
    if (n == 1) { /* the common cut: one granule */
        uint64_t m = UINT64_C(1) << (g % 64);
        p->pend_bits[g / 64] = on ? p->pend_bits[g / 64] | m : p->pend_bits[g / 64] & ~m;
        return;
    }
    while (n != 0) {
        uint32_t k = 64 - g % 64 < n ? 64 - g % 64 : n;
        uint64_t m = (k == 64 ? ~UINT64_C(0) : (UINT64_C(1) << k) - 1) << (g % 64);
        if (on)
            p->pend_bits[g / 64] |= m;
        else
            p->pend_bits[g / 64] &= ~m;
        g += k;
        n -= k;
    }
}

/* Pending run i off the list (its granules' marks as they are). */
static void pend_unlist(pool_res *p, uint32_t i)
{
    p->gran[p->pend[i].g].pend = 0;
    if (i != --p->npend) {
        p->pend[i] = p->pend[p->npend];
        p->gran[p->pend[i].g].pend = i + 1;
    }
}

/* Pending run i off the list and unmarked, its granules as they are. */
static void pend_remove(pool_res *p, uint32_t i)
{
    pend_bits_set(p, p->pend[i].g, p->pend[i].n, false);
    pend_unlist(p, i);
}

/* The last idle memory stamped no later than stamp, or NO_PHYS: a run
 * made idle goes after it (as its free would have put it). */
static uint32_t idle_before(const pool_res *p, uint64_t stamp)
{
    uint32_t after = p->idle_tail;
    while (after != NO_PHYS && p->phys[after].idle_stamp > stamp)
        after = p->phys[after].idle_prev;
    return after;
}

/* The granules of run r (off the list, unmarked) made idle, as its free
 * would have left them. */
static void pend_piece_idle(pool_res *p, pool_pend r)
{
    uint32_t after = idle_before(p, r.stamp);
    for (uint32_t g = r.g; g < r.g + r.n; g++) {
        gran_note_free(p, &p->gran[g], r.stream, r.epoch);
        p->gran[g].users = 0;
        after = gran_rest(p, g, after, r.stamp + (g - r.g));
    }
}

/* Pending run i made idle. */
static void pend_idle(pool_res *p, uint32_t i)
{
    pool_pend r = p->pend[i];
    pend_remove(p, i);
    pend_piece_idle(p, r);
}

static void pend_flush(pool_res *p)
{
    while (p->npend != 0)
        pend_idle(p, p->npend - 1);
}

/* The pending run that holds granule g (marked pending). */
static HOT uint32_t pend_find(const pool_res *p, uint32_t g)
{
    if (p->gran[g].pend != 0)
        return p->gran[g].pend - 1; /* the run starts here */
    uint32_t i = 0;
    while (p->pend[i].g > g || p->pend[i].g + p->pend[i].n <= g)
        i++;
    return i;
}

/* Granules x .. y of pending run i taken out of it (what is left on either
 * side stays pending; without room for a second run, the right side is
 * made idle): returned as a run of their own, off the list. */
static HOT pool_pend pend_cut(pool_res *p, uint32_t i, uint32_t x, uint32_t y)
{
    pool_pend *run = &p->pend[i], piece = *run;
    piece.g = x;
    piece.n = y - x + 1;
    piece.stamp = run->stamp + (x - run->g);
    pend_bits_set(p, x, piece.n, false);
    uint32_t end = run->g + run->n - 1;
    if (x == run->g && y < end) {
        /* Its head: the rest stays where it is, starting after y. */
        p->gran[x].pend = 0;
        run->g = y + 1;
        run->n = end - y;
        run->stamp = piece.stamp + piece.n;
        p->gran[run->g].pend = i + 1;
        return piece;
    }
    pool_pend r = *run;
    if (y < end) {
        pool_pend right = r;
        right.g = y + 1;
        right.n = end - y;
        right.stamp = r.stamp + (y + 1 - r.g);
        if (p->npend < PEND_MAX) {
            p->pend[p->npend] = right;
            p->gran[right.g].pend = ++p->npend;
        } else {
            pend_bits_set(p, right.g, right.n, false);
            pend_piece_idle(p, right);
        }
    }
    if (x > r.g)
        p->pend[i].n = x - r.g;
    else
        pend_unlist(p, i);
    return piece;
}

/* The n granules from g, left with nothing used by a free on s at epoch,
 * each learnt at the pool's binds now, the freed block's whole granules
 * w0 .. w1 among them: pending (the oldest run made idle where PEND_MAX
 * are). */
static void pend_add(pool_res *p, uint32_t g, uint32_t n, dv_stream_id s, uint64_t epoch,
                     uint32_t w0, uint32_t w1)
{
    if (p->npend == PEND_MAX) {
        uint32_t old = 0;
        for (uint32_t i = 1; i < p->npend; i++)
            if (p->pend[i].stamp < p->pend[old].stamp)
                old = i;
        pend_idle(p, old);
    }
    p->pend[p->npend] = (pool_pend){.g = g, .n = n, .w0 = w0, .w1 = w1,
                                    .stream = (uint8_t)s, .epoch = epoch,
                                    .stamp = p->idle_clock + 1};
    p->idle_clock += n; /* a stamp for each of its granules */
    p->gran[g].pend = ++p->npend;
    pend_bits_set(p, g, n, true);
    p->nlive -= n;
}

/* The whole granules of [ptr, ptr + bytes): *ga .. *gb (none: *ga > *gb). */
static void whole_granules(const pool_res *p, dv_dptr ptr, uint64_t bytes, uint32_t *ga,
                           uint32_t *gb)
{
    uint64_t off = ptr - p->areg->block.ptr, end = off + bytes;
    *ga = (uint32_t)((off + p->granule - 1) >> p->gshift);
    *gb = (uint32_t)(end >> p->gshift) - 1; /* end >= granule where *ga <= *gb */
    if ((end >> p->gshift) == 0)
        *ga = 1, *gb = 0;
}

/* Would a placement of [ptr, ptr + bytes) for s undo the deferred free
 * exactly?  Its block was clean (placed with no bind since, so its whole
 * granules learnt then), and an edge granule it had alone learnt at the
 * binds now: leaving would make them pending or idle, coming back take
 * them back with no bind and nothing to learn. */
static bool defer_keeps(const pool_res *p, dv_dptr ptr, uint64_t bytes, dv_stream_id s)
{
    if (!p->defer.on || ptr != p->defer.ptr || bytes != p->defer.bytes || s != p->defer.s ||
        !mark_clean(p, p->defer.mark) || p->cfg.no_pend)
        return false;
    uint32_t g0 = gran_of(p, ptr), g1 = gran_of(p, ptr + bytes - 1), wa, wb;
    whole_granules(p, ptr, bytes, &wa, &wb);
    for (uint32_t g = g0; g <= g1; g++) {
        if (wa <= wb && g == wa)
            g = wb; /* whole: learnt at placement */
        else if (p->gran[g].users == 1 && p->gran[g].learnt != p->binds)
            return false;
    }
    return true;
}

/* How many granules of [ptr, ptr + bytes) need memory for a block there
 * (neither live nor pending with their memory there); UINT32_MAX where
 * the range is not the alias region's. */
static uint32_t gran_unused(const pool_res *p, dv_dptr ptr, uint64_t bytes)
{
    if (ptr < p->areg->block.ptr || ptr + bytes - p->areg->block.ptr > p->areg->va_bytes)
        return UINT32_MAX; /* not the alias region's */
    uint32_t n = 0;
    for (uint32_t g = gran_of(p, ptr), g1 = gran_of(p, ptr + bytes - 1); g <= g1; g++)
        n += !gran_is_ready(p, g) || p->gran[g].users == 0;
    return n;
}

/*
 * No new memory to be had for the granules a placement would make live:
 * of every stream's free ranges with room for need bytes, at their start
 * or at their end, the one where the fewest granules need memory, at most
 * as many as there is idle memory (the smaller range where two need as
 * many); *at, where.  NULL if none.  Each stream places in its own slice
 * of addresses, so a device held whole by the blocks of many streams has
 * room in one slice's granules that another slice cannot otherwise use.
 * Only when memory has run out: every stream's free space is walked.
 */
static pool_range *bound_fit(pool_res *p, uint64_t need, dv_dptr *at)
{
    pool_range *best = NULL;
    uint32_t idle = 0, best_n = UINT32_MAX;
    for (uint32_t q = p->idle_head; q != NO_PHYS; q = p->phys[q].idle_next)
        idle++;
    for (uint32_t t = 0; t < p->nstreams; t++) {
        const pool_lists *l = &p->lists[t];
        for (uint64_t fb = l->fl_map; fb != 0; fb &= fb - 1) {
            unsigned fl = (unsigned)__builtin_ctzll(fb);
            for (uint32_t sb = l->sl_map[fl]; sb != 0; sb &= sb - 1) {
                pool_range *r = l->bins[fl][__builtin_ctz(sb)];
                for (; r != NULL; r = r->free_next) {
                    if (r->bytes < need)
                        continue;
                    dv_dptr end = r->ptr + r->bytes - need;
                    uint32_t head = gran_unused(p, r->ptr, need);
                    uint32_t tail = end != r->ptr ? gran_unused(p, end, need) : head;
                    uint32_t n = head <= tail ? head : tail;
                    if (n > idle || n > best_n ||
                        (n == best_n && best != NULL && !smaller(r, best)))
                        continue;
                    best = r;
                    best_n = n;
                    *at = head <= tail ? r->ptr : end;
                }
            }
        }
    }
    return best;
}

/* A taken-back piece's free noted at its granules in [x, y] (what its
 * free would have noted there, kept while they are live again). */
static void piece_note(pool_res *p, const pool_pend *piece, uint32_t x, uint32_t y)
{
    for (uint32_t g = x; g <= y; g++)
        gran_note_free(p, &p->gran[g], piece->stream, piece->epoch);
}

#define TAKEN_MAX 8 /* pending pieces one placement takes back */

/* [ptr, ptr + bytes) is used now, for stream s: its granules count it, and
 * those that became live get memory.  Its pending granules come back live
 * with their memory, a piece of a run at a time: no bind came since their
 * free, so each has learnt all there is, and its memory is its own and
 * served it last, where gran_bind looks first.  Their free is noted where
 * a later use need not be ordered after it: at an edge of the block that
 * freed them (another range in the granule may serve another stream with
 * no wait for it).  A whole granule of that block needs no note: whatever
 * uses its bytes again took them from a free range stamped with that free
 * or later, and is ordered after it.  On failure nothing changed (or
 * ALIAS_FLUSH): taken-back granules become idle with their free noted. */
static int alias_use(pool_res *p, dv_dptr ptr, uint64_t bytes, dv_stream_id s)
{
    uint32_t g0 = gran_of(p, ptr), g1 = gran_of(p, ptr + bytes - 1), g;
    uint32_t peak = p->peak_live, ntaken = 0;
    gran_ready(p, g0, g1);
    pool_pend taken[TAKEN_MAX];
    uint64_t look = 0;
    int rc = DV_OK;
    bool pending = p->npend != 0 && pend_any(p, g0, g1);
    for (g = g0; g <= g1; g++) {
        pool_gran *gr = &p->gran[g];
        if (pending && pend_at(p, g)) {
            /* (Still pending: nothing before it in the block made the
             * pending runs idle.) */
            uint32_t i = pend_find(p, g), end = p->pend[i].g + p->pend[i].n - 1;
            uint32_t y = end < g1 ? end : g1;
            pool_pend piece = pend_cut(p, i, g, y);
            if (ntaken == TAKEN_MAX) {
                pend_piece_idle(p, piece); /* and g on as any idle granule */
            } else {
                if (piece.w0 > piece.w1) {
                    piece_note(p, &piece, g, y); /* edges only (two at most) */
                } else {
                    if (g < piece.w0) /* the edge below: w0 - 1 */
                        piece_note(p, &piece, g, g);
                    if (y > piece.w1) /* the edge above: w1 + 1 */
                        piece_note(p, &piece, y, y);
                }
                taken[ntaken++] = piece;
                if ((p->nlive += y - g + 1) > p->peak_live)
                    p->peak_live = p->nlive;
                g = y;
                continue;
            }
        }
        if (gr->users++ != 0)
            continue;
        if (++p->nlive > p->peak_live)
            p->peak_live = p->nlive;
        seen_note(p, g);
        if (look == 0)
            look = dv__tracker_new_look(p->t);
        if ((rc = gran_bind(p, g, s, look)) != DV_OK) {
            g++; /* counted live, given no memory: undone below with the others */
            break;
        }
    }
    if (rc == DV_OK)
        return DV_OK;
    for (uint32_t k = 0; k < ntaken; k++)
        piece_note(p, &taken[k], taken[k].g, taken[k].g + taken[k].n - 1);
    while (g-- > g0)
        if (--p->gran[g].users == 0)
            gran_idle(p, g);
    p->peak_live = peak; /* nothing was placed */
    return rc;
}

/* A use of granule g ends with a free on s at epoch. */
static void gran_unuse(pool_res *p, uint32_t g, dv_stream_id s, uint64_t epoch)
{
    gran_note_free(p, &p->gran[g], s, epoch);
    if (--p->gran[g].users == 0)
        gran_idle(p, g);
}

/* Granules run .. end - 1, each with this free its only use left (the
 * freed block's whole granules: wa .. wb): pending where there are two or
 * more; one alone becomes idle (a single granule costs less that way than
 * a run). */
static void run_close(pool_res *p, uint32_t run, uint32_t end, dv_stream_id s, uint64_t epoch,
                      uint32_t wa, uint32_t wb)
{
    if (end - run >= 2)
        pend_add(p, run, end - run, s, epoch, wa, wb);
    else
        gran_unuse(p, run, s, epoch);
}

/* [ptr, ptr + bytes) is free now, on stream s at epoch.  The granules it
 * leaves with nothing used that have learnt at the pool's binds now (so a
 * placement there would learn nothing) are left pending, in runs of two
 * or more (pend_add): its whole granules at once where the block is clean (each
 * learnt when it was placed, and no bind came since), the others by their
 * own mark.  The rest become idle. */
static void alias_unuse(pool_res *p, dv_dptr ptr, uint64_t bytes, dv_stream_id s, uint64_t epoch,
                        bool clean)
{
    uint32_t g0 = gran_of(p, ptr), g1 = gran_of(p, ptr + bytes - 1), g, wa, wb, run = NO_GRAN;
    bool learnt = p->binds != 0 && !p->cfg.no_pend;
    whole_granules(p, ptr, bytes, &wa, &wb);
    bool whole = clean && learnt && wa <= wb; /* wa .. wb pending at once */
    for (g = g0; g <= g1; g++) {
        pool_gran *gr = &p->gran[g];
        if ((whole && g == wa) || (learnt && gr->users == 1 && gr->learnt == p->binds)) {
            if (run == NO_GRAN)
                run = g;
            if (whole && g == wa)
                g = wb;
            continue;
        }
        if (run != NO_GRAN) {
            run_close(p, run, g, s, epoch, wa, wb);
            run = NO_GRAN;
        }
        gran_unuse(p, g, s, epoch);
    }
    if (run != NO_GRAN)
        run_close(p, run, g, s, epoch, wa, wb);
}

/* The alias region: for each stream a slice of address space ALIAS_VA
 * times the device's memory (where the driver refuses so much, halved
 * until it gives, the device's memory at least), free on its stream from
 * the start; nothing mapped.  A stream may come to hold all the device's
 * memory, and its layout repeats only if it never has to place in another
 * stream's slice; address space is plentiful, and the granule records of
 * a slice cost host memory only where its blocks go. */
static int alias_region_new(pool_res *p)
{
    uint64_t va_bytes = (uint64_t)ALIAS_VA * p->nstreams * p->va_step;
    pool_chunk *ch = calloc(1, sizeof(*ch));
    dv_dptr va = 0;
    int rc = DV_ENOMEM;
    if (ch == NULL)
        return dv__fail(DV_ENOMEM, "allocate", "allocate: out of host memory for a pool region");
    /* (At most 2^32 granules: a granule's index is 32 bits.) */
    while (va_bytes / p->granule >= UINT32_MAX)
        va_bytes /= 2;
    for (;;) {
        va_bytes = round_up(va_bytes, p->granule);
        if ((rc = dv__drv_va_reserve(p->base.env->ctx, va_bytes, &va)) == DV_OK ||
            va_bytes <= p->va_step)
            break;
        va_bytes = va_bytes / 2 > p->va_step ? va_bytes / 2 : p->va_step;
    }
    if (rc != DV_OK) {
        free(ch);
        return rc;
    }
    p->ngran = (uint32_t)(va_bytes / p->granule);
    p->gran = gran_array_new(p->ngran);
    p->gran_ready = calloc(p->ngran / GRAN_GROUP / 64 + 1, sizeof(uint64_t));
    p->seen_max = p->cfg.seen_units >= 64 && p->cfg.seen_units < SEEN_MAX ? p->cfg.seen_units
                                                                          : SEEN_MAX;
    p->seen_max = UINT32_C(1) << (31 - __builtin_clz(p->seen_max)); /* a power of two */
    p->live_units = calloc(p->seen_max / 64, sizeof(uint64_t));
    p->unit_live = calloc(p->seen_max, sizeof(uint32_t));
    p->pend_bits = calloc(p->ngran / 64 + 1, sizeof(uint64_t));
    if (p->gran == NULL || p->gran_ready == NULL || p->live_units == NULL || p->unit_live == NULL ||
        p->pend_bits == NULL || spare_reserve(p, p->nstreams) != DV_OK) {
        alias_books_free(p);
        (void)dv__drv_va_release(p->base.env->ctx, va, va_bytes);
        free(ch);
        return dv__fail(DV_ENOMEM, "allocate", "allocate: out of host memory for a pool region");
    }
    p->npend = 0;
    ch->block = (dv_block){.ptr = va, .bytes = va_bytes, .device = p->base.device};
    ch->va_bytes = va_bytes;
    /* A slice of the address space for each stream, in its bins: what one
     * stream places does not interleave with what another does, so each
     * stream's layout repeats when its work does. */
    uint64_t slice = (va_bytes / p->nstreams) & ~(p->granule - 1);
    for (uint32_t k = 0; k < p->nstreams; k++) {
        pool_range *r = spare_take(p);
        uint32_t index = r->index;
        dv_dptr at = va + k * slice;
        *r = (pool_range){.ptr = at,
                          .bytes = k + 1 < p->nstreams ? slice : va + va_bytes - at,
                          .index = index,
                          .phys_prev = ch->last};
        if (ch->last != NULL)
            ch->last->phys_next = r;
        else
            ch->first = r;
        ch->last = r;
        bin_insert(p, (dv_stream_id)k, r);
    }
    ch->next = p->chunks;
    if (p->chunks != NULL)
        p->chunks->prev = ch;
    p->chunks = ch;
    p->nchunks++;
    p->areg = ch;
    return DV_OK;
}

/* Give back idle physical granules whose frees the device has passed:
 * unmapped at every address, released.  *released counts the bytes. */
static int alias_trim(pool_res *p, uint64_t *released)
{
    uint64_t look = dv__tracker_new_look(p->t);
    pend_flush(p);
    for (uint32_t q = p->idle_head, next; q != NO_PHYS; q = next) {
        pool_phys *ph = &p->phys[q];
        next = ph->idle_next;
        bool passed = true;
        for (uint32_t k = 0; k < ph->nalias && passed; k++) {
            int rc = gran_passed(p, &p->gran[ph->alias[k]], look, &passed);
            if (rc != DV_OK)
                return rc;
        }
        if (!passed)
            continue; /* not now: a later trim */
        while (ph->nalias > 0) {
            int rc = gran_unbind(p, ph->alias[ph->nalias - 1]);
            if (rc != DV_OK)
                return rc;
        }
        idle_unlink(p, q);
        phys_drop(p, q);
        if (released != NULL)
            *released += p->granule;
    }
    return DV_OK;
}

/* An allocation refused for want of memory: the memory it made, idle
 * again, given back (as trim would), so that the refusal leaves the pool
 * holding what it held. */
static void alias_unmake(pool_res *p)
{
    uint64_t epoch = p->base.env->alloc_epoch, look = 0;
    for (uint32_t q = p->idle_head, next; q != NO_PHYS; q = next) {
        pool_phys *ph = &p->phys[q];
        next = ph->idle_next;
        if (ph->made != epoch)
            continue;
        bool passed = true;
        if (look == 0)
            look = dv__tracker_new_look(p->t);
        for (uint32_t k = 0; k < ph->nalias && passed; k++)
            if (gran_passed(p, &p->gran[ph->alias[k]], look, &passed) != DV_OK)
                return;
        if (!passed)
            continue; /* (cannot be: nothing it served was freed; trim's) */
        while (ph->nalias > 0)
            if (gran_unbind(p, ph->alias[ph->nalias - 1]) != DV_OK)
                return; /* the driver's: left to trim */
        idle_unlink(p, q);
        phys_drop(p, q);
    }
}

/* At a destroy (the device past every free): every mapping and all the
 * physical memory given back, the region's address space too. */
static void alias_drop(pool_res *p)
{
    pend_flush(p);
    for (uint32_t g = 0; g < p->ngran; g++)
        if (gran_is_ready(p, g) && p->gran[g].phys != NO_PHYS && gran_unbind(p, g) != DV_OK)
            (void)gran_unbind(p, g); /* once more; after that it is lost to us */
    for (uint32_t q = 0; q < p->nphys_slots; q++) {
        if (p->phys[q].handle != 0) {
            handle_release(p, p->phys[q].handle);
            p->nphys--;
        }
        free(p->phys[q].alias);
    }
    region_forget(p, p->areg);
    free(p->phys);
    alias_books_free(p);
    p->areg = NULL;
}

/* Grow by one chunk that can hold need bytes, allocated on stream s. */
static int grow(pool_res *p, uint64_t need, dv_stream_id s)
{
    if (p->areg != NULL) {
        /* The alias region's addresses are all free space from the start:
         * a request none of it holds is more than the device, or finds
         * the addresses too cut up. */
        if (need > p->va_step)
            return refuse_past_device(p, need);
        int rc = dv__fail(DV_EDEVICE_OOM, "allocate",
                          "allocate: no free address range of %llu bytes in the pool's %llu",
                          (unsigned long long)need, (unsigned long long)p->areg->va_bytes);
        dv__detail()->requested = need;
        dv__detail()->remaining = p->va_step;
        return rc;
    }
    if (p->granule != 0)
        return region_grow(p, need, s);
    uint64_t size = p->next_chunk_bytes;
    bool geometric = true;
    int rc;

    if (need > size) {
        size = round_up(need, CHUNK_GRANULE);
        geometric = false;
    }
    if (p->cfg.max_pool_bytes != 0) {
        uint64_t max = p->cfg.max_pool_bytes;
        if (p->chunk_bytes + need > max && (rc = trim(p, NULL)) != DV_OK)
            return rc;
        uint64_t room = max > p->chunk_bytes ? max - p->chunk_bytes : 0;
        room &= ~(uint64_t)(DV_BLOCK_ALIGN - 1);
        if (need > room) {
            rc = dv__fail(DV_EOUT_OF_BUDGET, "allocate",
                          "allocate: %llu bytes would take the pool past max_pool_bytes %llu "
                          "(%llu held, %llu room)",
                          (unsigned long long)need, (unsigned long long)max,
                          (unsigned long long)p->chunk_bytes, (unsigned long long)room);
            dv__detail()->requested = need;
            dv__detail()->remaining = room;
            return rc;
        }
        if (size > room) {
            size = room;
            geometric = false;
        }
    }
    rc = chunk_add(p, size, s);
    if (dv__short_of_memory(rc) && geometric && size / 2 >= p->cfg.initial_chunk_bytes)
        p->next_chunk_bytes = size / 2; /* so the next growth does not ask in vain */
    uint64_t smaller = round_up(need, CHUNK_GRANULE) < size ? round_up(need, CHUNK_GRANULE) : need;
    if (dv__short_of_memory(rc) && smaller < size) {
        /* The device may still hold a chunk of about the request. */
        size = smaller;
        geometric = false;
        rc = chunk_add(p, size, s);
    }
    if (dv__short_of_memory(rc)) {
        /* Empty chunks back, their frees reached, one more try.  The
         * answer is the upstream's, detail included. */
        uint64_t released = 0;
        if (trim(p, &released) == DV_OK && released > 0)
            (void)dv__res_reap_pending(p->base.upstream);
        rc = chunk_add(p, size, s);
    }
    if (rc == DV_OK && geometric)
        p->next_chunk_bytes = size * 2 < p->cfg.max_chunk_bytes ? size * 2 : p->cfg.max_chunk_bytes;
    return rc;
}

/* ------------------------------------------------------------------------
 * The ops
 * ------------------------------------------------------------------------ */

static int pool_place(pool_res *p, uint64_t bytes, dv_stream_id s, dv_tag tag, dv_block *out);

static int pool_allocate(dv_resource *res, uint64_t bytes, dv_stream_id s, dv_tag tag,
                         dv_block *out)
{
    pool_res *p = (pool_res *)res;
    int rc = pool_place(p, bytes, s, tag, out);
    if (p->areg != NULL && rc != DV_OK && dv__short_of_memory(rc))
        alias_unmake(p); /* nothing held for a request refused */
    return rc;
}

static int pool_place(pool_res *p, uint64_t bytes, dv_stream_id s, dv_tag tag, dv_block *out)
{
    dv_resource *res = &p->base;
    unsigned c = bytes <= SMALL_MAX ? small_class(bytes) : NO_CLASS;
    uint64_t need = c != NO_CLASS ? class_bytes(c) : round_up(bytes, DV_BLOCK_ALIGN);
    pool_stacked b;
    bool found;
    int rc;

    /* A split needs one node, a new chunk one more. */
    if (p->nspare < 2 && (rc = spare_reserve(p, 2)) != DV_OK)
        return rc;
    if (p->cfg.alias && p->granule != 0 && p->areg == NULL) {
        /* Aliases: the region, all of it free space, at the first request. */
        rc = alias_region_new(p);
        if (rc != DV_OK && p->nchunks == 0 && dv__short_of_memory(rc))
            p->granule = 0; /* no address space: chunks instead */
        else if (rc != DV_OK)
            return rc;
    }
    if (p->areg != NULL && need > p->va_step)
        return grow(p, need, s); /* more than the device: refused before anything is mapped */
    if (p->defer.on && (c != NO_CLASS || need != p->defer.bytes || s != p->defer.s))
        defer_flush(p);
    if (c == NO_CLASS && p->stacked_bytes != 0)
        /* A large request sees the space small blocks freed around it
         * merged (each stacked block is flushed once per push). */
        flush_stacks(p);
    if (c != NO_CLASS && p->lists[s].stacks[c].n != 0) {
        /* The common small request: its class's stack on its stream.  (No
         * later try finds it filled: nothing here pushes a block.) */
        b = stack_pop(p, s, c);
        found = true;
    } else if ((rc = take(p, need, c, s, &b, &found)) != DV_OK) {
        return rc;
    }
    if (!found)
        defer_flush(p);
    if (!found && p->stacked_bytes != 0) {
        /* Stacked blocks of other classes may coalesce into room. */
        flush_stacks(p);
        if ((rc = take(p, need, c, s, &b, &found)) != DV_OK)
            return rc;
    }
    if (!found && p->granule != 0 && !p->base.env->fence_always && reown_reached(p, s)) {
        /* Free space of other streams the device has passed merged. */
        if ((rc = take(p, need, c, s, &b, &found)) != DV_OK)
            return rc;
    }
    bool merged = false;
    if (!found && (rc = merge_across(p, need, s, &merged)) != DV_OK)
        return rc;
    if (merged && (rc = take(p, need, c, s, &b, &found)) != DV_OK)
        return rc;
    if (!found) {
        if ((rc = grow(p, need, s)) != DV_OK)
            return rc;
        if ((rc = take(p, need, c, s, &b, &found)) != DV_OK)
            return rc;
        if (!found) /* the new chunk is in s's bins: cannot happen */
            return dv__fail(DV_EINVAL, "allocate", "allocate: pool lost its new chunk");
    }

    unsigned owner_class = c != NO_CLASS ? c : OWNER_LARGE;
    *out = (dv_block){.ptr = b.ptr,
                      .bytes = need,
                      .requested = bytes,
                      .generation = dv__next_generation(res->env),
                      .tag = tag,
                      .alloc_stream = (uint16_t)s,
                      .align = DV_BLOCK_ALIGN,
                      .device = res->device,
                      .state = DV_BLOCK_LIVE};
    if (!dv__tracked_ok(
            dv__tracker_insert(p->t, out, owner_class << OWNER_CLASS_SHIFT | b.index))) {
        /* Back to s: the stamp covers any wait take queued on s.  The
         * answer is the tracker's, detail set. */
        (void)dv__tracker_mark_captured(p->t, s, &b.freed_epoch);
        release(p, b, s, owner_class);
        out->state = DV_BLOCK_FREED;
        return dv__detail()->status;
    }
    p->live_bytes += need;
    atomic_store_explicit(&p->outstanding, p->live_bytes, memory_order_relaxed);
    return DV_OK;
}

static int pool_deallocate(dv_resource *res, dv_block *block)
{
    pool_res *p = (pool_res *)res;
    dv_tracked t = dv__tracker_find(p->t, dv__block_id_of(block), "deallocate");
    if (!dv__tracked_ok(t))
        return DV_EUSE_AFTER_FREE;
    int rc = dv__tracker_fence_uses(p->t, t);
    if (rc != DV_OK)
        return rc;
    /* The hot record and the block (its pointer checked by find) say it
     * all; a small block's range is not read. */
    dv_stream_id s = dv__track_alloc_stream(t.hot);
    unsigned c = t.hot->owner >> OWNER_CLASS_SHIFT;
    /* Stamped where an event captures it: another stream that takes the
     * block waits for this free, not for what s queues after it. */
    /* A record that fails leaves the capture to a later wait; a fault of
     * the device is the caller's to hear (the rebuild drops the pool). */
    uint64_t freed;
    rc = dv__tracker_mark_captured(p->t, s, &freed);
    if (rc == DV_ECONTEXT_LOST || rc == DV_EDEVICE_LOST)
        return rc;
    pool_stacked b = {.ptr = block->ptr, .freed_epoch = freed, .index = t.hot->owner & OWNER_INDEX_MASK};
    uint64_t bytes = c != OWNER_LARGE ? class_bytes(c) : range_at(p, b.index)->bytes;
    release(p, b, s, c);
    dv__tracker_remove(p->t, t);
    p->live_bytes -= bytes;
    /* Only this thread writes it: a store, not a locked add. */
    atomic_store_explicit(&p->outstanding, p->live_bytes, memory_order_relaxed);
    if (p->areg != NULL && p->live_bytes == 0 && p->stacked_bytes >= p->granule)
        /* Nothing live: the free space whole again, as at the start, so
         * that work that starts over places as it did (and finds the
         * memory where it left it). */
        flush_stacks(p);
    block->state = DV_BLOCK_FREED;
    return DV_OK;
}

static uint64_t pool_bytes_outstanding(const dv_resource *res)
{
    return atomic_load_explicit(&((const pool_res *)res)->outstanding, memory_order_relaxed);
}

static int pool_reap_pending(dv_resource *res)
{
    /* The pool holds nothing retired: a free is reusable at once in stream
     * order.  Chunks trimmed earlier may still be pending upstream. */
    return dv__res_reap_pending(res->upstream);
}

static bool pool_supports_tracking(const dv_resource *res)
{
    (void)res;
    return true;
}

static bool pool_holds(const dv_resource *res, dv_block_id id)
{
    return dv__tracker_holds(((const pool_res *)res)->t, id);
}

static int pool_prepare(dv_resource *res, dv_block_id id, dv_stream_id s, dv_access a)
{
    pool_res *p = (pool_res *)res;
    dv_tracked b = dv__tracker_find(p->t, id, "prepare_block_use");
    return dv__tracked_ok(b) ? dv__tracker_prepare(p->t, b, s, a) : DV_EUSE_AFTER_FREE;
}

static int pool_finish(dv_resource *res, dv_block_id id, dv_stream_id s, dv_access a)
{
    pool_res *p = (pool_res *)res;
    dv_tracked b = dv__tracker_find(p->t, id, "finish_block_use");
    if (!dv__tracked_ok(b))
        return DV_EUSE_AFTER_FREE;
    dv__tracker_finish(p->t, b, s, a);
    return DV_OK;
}

static int pool_record(dv_resource *res, dv_block_id id, dv_stream_id s)
{
    pool_res *p = (pool_res *)res;
    dv_tracked b = dv__tracker_find(p->t, id, "record_block_use");
    if (!dv__tracked_ok(b))
        return DV_EUSE_AFTER_FREE;
    dv__tracker_record(p->t, b, s);
    return DV_OK;
}

/* A block the caller never freed: its uses are fenced and it is stamped as
 * if freed, so its chunk goes upstream behind them. */
static void stamp_leaked(dv_tracked b, void *arg)
{
    pool_res *p = arg;
    pool_range *r = range_at(p, b.hot->owner & OWNER_INDEX_MASK);
    (void)dv__tracker_fence_uses(p->t, b);
    r->owner = (uint8_t)dv__track_alloc_stream(b.hot);
    r->freed_epoch = dv__tracker_mark(p->t, r->owner);
}

static void pool_destroy(dv_resource *res)
{
    pool_res *p = (pool_res *)res;

    dv__tracker_foreach(p->t, stamp_leaked, p);
    flush_stacks(p); /* stamps every stacked range with its free */
    while (p->chunks != NULL) {
        pool_chunk *ch = p->chunks;
        if (ch->va_bytes != 0) {
            /* Unmapping is at once: the device must be past every free. */
            /* (An alias region's last range may have split or merged:
             * its ch->last is not kept.) */
            (void)ranges_sync(p, ch->first, ch == p->areg ? NULL : ch->last);
            if (ch == p->areg)
                alias_drop(p);
            else
                region_drop(p, ch);
            continue;
        }
        p->chunks = ch->next;
        (void)chunk_fence(p, ch);
        (void)dv__res_deallocate(p->base.upstream, &ch->block);
        free(ch);
    }
    dv__tracker_destroy(p->t);
    range_slabs_free(p);
    stacks_free(p);
    free(p->lists);
    free(p);
}

static uint64_t pool_stream_position(const dv_resource *res, dv_stream_id stream)
{
    return dv__tracker_now(((const pool_res *)res)->t, stream).epoch;
}

static void pool_note_stream_wait(dv_resource *res, dv_stream_id waiter, dv_stream_id signaler,
                                  uint64_t pos)
{
    dv__tracker_note_wait(pool_of(res)->t, waiter, signaler, pos);
}

static int pool_capture_frees(dv_resource *res, dv_stream_id stream)
{
    return dv__tracker_capture(pool_of(res)->t, stream);
}

static const dv_res_ops pool_ops = {
    .name = "pool",
    .allocate = pool_allocate,
    .deallocate = pool_deallocate,
    .bytes_outstanding = pool_bytes_outstanding,
    .reap_pending = pool_reap_pending,
    .supports_block_use_tracking = pool_supports_tracking,
    .holds_block = pool_holds,
    .prepare_block_use = pool_prepare,
    .finish_block_use = pool_finish,
    .record_block_use = pool_record,
    .stream_position = pool_stream_position,
    .note_stream_wait = pool_note_stream_wait,
    .capture_frees = pool_capture_frees,
    .destroy = pool_destroy,
};

/* ------------------------------------------------------------------------
 * Construction, statistics, trim
 * ------------------------------------------------------------------------ */

void dv__pool_config_init(dv_pool_config *cfg)
{
    *cfg = (dv_pool_config){
        .initial_chunk_bytes = 64 * MIB,
        .max_chunk_bytes = 1024 * MIB,
        .max_pool_bytes = 0,
    };
}

int dv__pool_resource_create(dv_resource *upstream, const dv_pool_config *cfg, dv_resource **out)
{
    dv_pool_config c;
    pool_res *p;
    int rc;

    if (upstream == NULL || out == NULL || upstream->env == NULL)
        return dv__fail(DV_EINVAL, "pool_resource_create",
                        "pool_resource_create: NULL upstream, environment or out");
    if (cfg != NULL)
        c = *cfg;
    else
        dv__pool_config_init(&c);
    if (c.initial_chunk_bytes == 0 || c.initial_chunk_bytes > DV_DRV_MAX_BYTES ||
        c.max_chunk_bytes < c.initial_chunk_bytes || c.max_chunk_bytes > DV_DRV_MAX_BYTES ||
        c.max_pool_bytes > DV_DRV_MAX_BYTES)
        return dv__fail(DV_EINVAL, "pool_resource_create",
                        "pool_resource_create: chunk sizes %llu .. %llu (max pool %llu): want "
                        "0 < initial <= max <= 2^48",
                        (unsigned long long)c.initial_chunk_bytes,
                        (unsigned long long)c.max_chunk_bytes,
                        (unsigned long long)c.max_pool_bytes);
    c.initial_chunk_bytes = round_up(c.initial_chunk_bytes, DV_BLOCK_ALIGN);
    c.max_chunk_bytes = round_up(c.max_chunk_bytes, DV_BLOCK_ALIGN);
    const char *units = getenv("DV_POOL_SEEN_UNITS");
    if (c.seen_units == 0 && units != NULL)
        /* Tests: learning in units of several granules after a few. */
        c.seen_units = (uint32_t)strtoul(units, NULL, 10);

    if ((p = calloc(1, sizeof(*p))) == NULL) {
        rc = dv__fail(DV_ENOMEM, "pool_resource_create", "out of host memory");
        goto fail_pool;
    }
    p->nstreams = upstream->env->nstreams;
    if ((p->lists = calloc(p->nstreams ? p->nstreams : 1, sizeof(*p->lists))) == NULL) {
        rc = dv__fail(DV_ENOMEM, "pool_resource_create", "out of host memory");
        goto fail_lists;
    }
    if ((rc = dv__tracker_create(upstream->env, &p->t)) != DV_OK)
        goto fail_tracker;
    if ((rc = spare_reserve(p, 2)) != DV_OK)
        goto fail_spare;
    p->base = (dv_resource){
        .ops = &pool_ops, .upstream = upstream, .env = upstream->env, .device = upstream->device};
    p->cfg = c;
    p->phys_free = p->idle_head = p->idle_tail = NO_PHYS;
    p->next_chunk_bytes = c.initial_chunk_bytes;
    /* Growth by mapping where the upstream is the driver's stream-ordered
     * allocator itself and the device can map: the pool then holds its
     * memory from the driver directly, the upstream none of it. */
    uint64_t g = 0, free_now = 0, total = 0;
    if (!c.chunks && upstream->upstream == NULL && dv__res_is_async(upstream)) {
        rc = dv__drv_vmm_granularity(upstream->env->ctx, &g);
        if (rc == DV_OK)
            rc = dv__drv_mem_info(upstream->env->ctx, &free_now, &total);
        if (rc == DV_OK && g != 0 && (g & (g - 1)) == 0) {
            p->granule = g;
            p->gshift = (unsigned)__builtin_ctzll(g);
            p->va_step = round_up(total, g);
        } else if (rc != DV_OK && rc != DV_ENOTSUP) {
            goto fail_vmm; /* a device that fails here fails the next call too */
        }
    }
    atomic_init(&p->outstanding, 0);
    *out = &p->base;
    return DV_OK;

fail_vmm:
fail_spare:
    range_slabs_free(p);
    dv__tracker_destroy(p->t);
fail_tracker:
    free(p->lists);
fail_lists:
    free(p);
fail_pool:
    return rc;
}

/* The largest request the free space serves without growing: a binned
 * range of at most SMALL_MAX serves only the classes it holds whole. */
static uint64_t largest_free(pool_res *p)
{
    uint64_t best = 0;
    for (uint32_t s = 0; s < p->nstreams; s++) {
        pool_lists *l = &p->lists[s];
        if (l->fl_map == 0)
            continue;
        unsigned fl = msb64(l->fl_map);
        unsigned sl = 31u - (unsigned)__builtin_clz(l->sl_map[fl]);
        uint64_t top = 0;
        for (pool_range *r = l->bins[fl][sl]; r != NULL; r = r->free_next)
            if (r->bytes > top)
                top = r->bytes;
        if (top <= SMALL_MAX) {
            unsigned c = small_class(top);
            top = class_bytes(c) > top ? (c > 0 ? class_bytes(c - 1) : 0) : top;
        }
        if (top > best)
            best = top;
    }
    for (unsigned c = SMALL_CLASSES; c-- > 0;) {
        if (p->streams_with_class[c] != 0) {
            if (class_bytes(c) > best)
                best = class_bytes(c);
            break;
        }
    }
    return best;
}

uint64_t dv__pool_undone(dv_resource *pool)
{
    pool_res *p = pool_of(pool);
    return p != NULL ? p->undone : 0;
}

static uint64_t fp_mix(uint64_t h, uint64_t v)
{
    h ^= v + UINT64_C(0x9E3779B97F4A7C15) + (h << 6) + (h >> 2);
    return h * UINT64_C(0xFF51AFD7ED558CCD);
}

uint64_t dv__pool_fingerprint(dv_resource *pool)
{
    pool_res *p = pool_of(pool);
    if (p == NULL || p->areg == NULL)
        return 0;
    uint64_t h = fp_mix(0, p->nlive);
    h = fp_mix(h, p->peak_live);
    h = fp_mix(h, p->binds);
    h = fp_mix(h, p->nphys);
    h = fp_mix(h, p->nsid);
    h = fp_mix(h, p->seen_shift);
    for (uint32_t g = 0; g < p->ngran; g++) {
        if (!gran_is_ready(p, g))
            continue;
        const pool_gran *gr = &p->gran[g];
        if (gr->users == 0 && gr->phys == NO_PHYS && gr->sid == NO_GRAN)
            continue;
        h = fp_mix(h, g);
        h = fp_mix(h, (uint64_t)gr->users << 32 | gr->phys);
        h = fp_mix(h, (uint64_t)gr->learnt << 32 | gr->sid);
        h = fp_mix(h, (uint64_t)gr->counted << 1 | pend_at(p, g));
    }
    for (uint32_t q = p->idle_head; q != NO_PHYS; q = p->phys[q].idle_next)
        h = fp_mix(h, q);
    for (uint32_t q = 0; q < p->nphys_slots; q++) {
        const pool_phys *ph = &p->phys[q];
        if (ph->handle == 0)
            continue;
        h = fp_mix(h, (uint64_t)ph->active << 32 | ph->last);
        for (uint32_t i = 0; i < ph->nalias; i++)
            h = fp_mix(h, ph->alias[i]);
    }
    uint64_t runs = 0; /* the pending runs, in any order */
    for (uint32_t i = 0; i < p->npend; i++) {
        const pool_pend *r = &p->pend[i];
        runs += fp_mix(fp_mix(fp_mix(r->g, r->n), (uint64_t)r->w0 << 32 | r->w1), r->epoch);
    }
    h = fp_mix(h, runs);
    for (uint64_t i = 0; i < (uint64_t)p->seen_n * (p->seen_n / 64); i++)
        h = fp_mix(h, p->seen[i]);
    for (uint32_t v = 0; v < p->seen_max && v <= p->nsid >> p->seen_shift; v++)
        h = fp_mix(h, p->unit_live[v]); /* (units past the sids given: none live) */
    return h;
}

uint32_t dv__pool_seen_unit(dv_resource *pool)
{
    pool_res *p = pool_of(pool);
    return p != NULL && p->areg != NULL ? UINT32_C(1) << p->seen_shift : 0;
}

int dv__pool_learn_passed(dv_resource *pool)
{
    if (!dv__res_is_pool(pool))
        return dv__fail(DV_EINVAL, "pool_learn_passed", "pool_learn_passed: not a pool");
    pool_res *p = pool_of(pool);
    for (uint32_t s = 0; s < p->nstreams; s++) {
        bool reached;
        int rc = dv__tracker_reached(p->t, dv__tracker_now(p->t, (dv_stream_id)s), &reached);
        if (rc != DV_OK)
            return rc;
    }
    return DV_OK;
}

int dv__pool_stats_get(dv_resource *pool, dv_pool_stats *out)
{
    pool_res *p = pool_of(pool);
    if (p == NULL || out == NULL)
        return dv__fail(DV_EINVAL, "pool_stats_get", "pool_stats_get: %s",
                        out == NULL ? "NULL out" : "not a pool");
    dv__res_assert_owner(pool, "pool_stats_get");
    uint64_t free_bytes = p->chunk_bytes - p->live_bytes;
    uint64_t largest = largest_free(p);
    if (p->areg != NULL && largest > free_bytes)
        largest = free_bytes; /* the rest is address space with no memory yet */
    *out = (dv_pool_stats){
        .chunk_bytes = p->chunk_bytes,
        .free_bytes = free_bytes,
        .stacked_bytes = p->stacked_bytes,
        .largest_free = largest,
        .chunks = p->nchunks,
        .fragmentation = free_bytes != 0 ? 1.0 - (double)largest / (double)free_bytes : 0.0,
        .peak_chunk_bytes = p->high,
    };
    return DV_OK;
}

int dv__pool_trim(dv_resource *pool, uint64_t *released)
{
    pool_res *p = pool_of(pool);
    uint64_t n = 0;
    if (released != NULL)
        *released = 0;
    if (p == NULL)
        return dv__fail(DV_EINVAL, "pool_trim", "pool_trim: not a pool");
    dv__res_assert_owner(pool, "pool_trim");
    int rc = trim(p, &n);
    if (released != NULL)
        *released = n;
    return rc;
}

static int check_fail(const char *what, uint64_t a, uint64_t b)
{
    return dv__fail(DV_EINVAL, "pool_check", "pool_check: %s (%llu, %llu)", what,
                    (unsigned long long)a, (unsigned long long)b);
}

int dv__pool_check(dv_resource *pool)
{
    pool_res *p = pool_of(pool);
    if (p == NULL)
        return dv__fail(DV_EINVAL, "pool_check", "pool_check: not a pool");
    if (p->areg == NULL)
        return DV_OK;
    uint32_t *users = calloc(p->ngran, sizeof(*users));
    uint32_t *units = calloc(p->seen_max, sizeof(*units)); /* granules counted live in each */
    if (users == NULL || units == NULL) {
        free(users);
        free(units);
        return dv__fail(DV_ENOMEM, "pool_check", "pool_check: out of host memory");
    }
    int rc = DV_OK;
    for (pool_range *r = p->areg->first; r != NULL; r = r->phys_next)
        if (r->state == RANGE_USED)
            for (uint32_t g = gran_of(p, r->ptr), g1 = gran_of(p, r->ptr + r->bytes - 1); g <= g1;
                 g++)
                users[g]++;
    if (p->defer.on) /* in the bins, its granules' side not done yet */
        for (uint32_t g = gran_of(p, p->defer.ptr),
                      g1 = gran_of(p, p->defer.ptr + p->defer.bytes - 1);
             g <= g1; g++)
            users[g]++;
    uint32_t npending = 0, nbits = 0;
    for (uint32_t i = 0; i < p->npend && rc == DV_OK; i++) {
        const pool_pend *pr = &p->pend[i];
        if (pr->n == 0 || pr->g + pr->n > p->ngran || p->gran[pr->g].pend != i + 1)
            rc = check_fail("a pending run is not where it says", i, pr->g);
        for (uint32_t g = pr->g; g < pr->g + pr->n && rc == DV_OK; g++) {
            if (!pend_at(p, g) || users[g] != 0)
                rc = check_fail("a pending granule is marked wrong or used", g, users[g]);
            users[g] = 1; /* its count kept */
        }
        npending += pr->n;
    }
    for (uint32_t w = 0; w <= p->ngran / 64; w++)
        nbits += (uint32_t)__builtin_popcountll(p->pend_bits[w]);
    if (rc == DV_OK && nbits != npending)
        rc = check_fail("granules marked pending differ from the runs", nbits, npending);
    uint32_t nlive = 0, nphys = 0, nidle = 0;
    for (uint32_t g = 0; g < p->ngran && rc == DV_OK; g++) {
        const pool_gran *gr = &p->gran[g];
        if (!gran_is_ready(p, g)) {
            if (users[g] != 0 || pend_at(p, g))
                rc = check_fail("a granule in use was never set up", g, users[g]);
            continue;
        }
        if (users[g] != gr->users)
            rc = check_fail("a granule's users differ from its used ranges", g, gr->users);
        else if (gr->users != 0 && gr->phys == NO_PHYS)
            rc = check_fail("a live granule maps nothing", g, 0);
        else if (gr->users != 0 && p->phys[gr->phys].active != g)
            rc = check_fail("a live granule's memory serves another", g, p->phys[gr->phys].active);
        else if (gr->phys != NO_PHYS && (gr->phys >= p->nphys_slots || p->phys[gr->phys].handle == 0))
            rc = check_fail("a granule maps memory the pool does not hold", g, gr->phys);
        if (rc == DV_OK && gr->pend != 0 && (gr->pend > p->npend || p->pend[gr->pend - 1].g != g))
            rc = check_fail("a granule marks a pending run that does not start there", g, gr->pend);
        if (rc == DV_OK && gr->counted && (gr->sid == NO_GRAN || unit_of(p, gr) >= p->seen_max))
            rc = check_fail("a granule counted live has no unit", g, gr->sid);
        else if (rc == DV_OK && gr->counted)
            units[unit_of(p, gr)]++;
        nlive += gr->users != 0;
        if (rc == DV_OK && gr->phys != NO_PHYS) {
            const pool_phys *ph = &p->phys[gr->phys];
            uint32_t k = 0;
            while (k < ph->nalias && ph->alias[k] != g)
                k++;
            if (k == ph->nalias)
                rc = check_fail("a granule is not among its memory's addresses", g, gr->phys);
        }
    }
    for (uint32_t q = 0; q < p->nphys_slots && rc == DV_OK; q++) {
        const pool_phys *ph = &p->phys[q];
        if (ph->handle == 0)
            continue;
        nphys++;
        for (uint32_t k = 0; k < ph->nalias && rc == DV_OK; k++)
            if (p->gran[ph->alias[k]].phys != q)
                rc = check_fail("memory lists an address that maps other memory", q, ph->alias[k]);
        if (rc == DV_OK && ph->active != NO_GRAN && p->gran[ph->active].users == 0)
            rc = check_fail("memory serves a granule with nothing used", q, ph->active);
    }
    for (uint32_t q = p->idle_head; q != NO_PHYS && rc == DV_OK; q = p->phys[q].idle_next) {
        if (p->phys[q].active != NO_GRAN)
            rc = check_fail("memory on the idle list serves a granule", q, p->phys[q].active);
        nidle++;
    }
    if (rc == DV_OK && nlive != p->nlive + npending)
        rc = check_fail("granules live differ from the count", nlive, p->nlive + npending);
    else if (rc == DV_OK && nphys != p->nphys)
        rc = check_fail("physical granules differ from the count", nphys, p->nphys);
    else if (rc == DV_OK && nphys != nlive + nidle)
        rc = check_fail("memory neither serves nor is idle", nphys, nlive + nidle);
    else if (rc == DV_OK && p->chunk_bytes != (uint64_t)nphys << p->gshift)
        rc = check_fail("bytes held differ from the memory", p->chunk_bytes, nphys);
    for (uint32_t u = 0; u < p->seen_max && rc == DV_OK; u++)
        if (units[u] != p->unit_live[u] ||
            (units[u] != 0) != (bool)(p->live_units[u / 64] >> (u % 64) & 1))
            rc = check_fail("a unit's live count is wrong", u, p->unit_live[u]);
    free(users);
    free(units);
    return rc;
}
