/*
 * dv-stress: the stress harness.  N client threads post a random mix of
 * operations on one composed actor and verify every byte they read back.
 *
 * Design
 * ------
 * Each thread owns a working set of live blocks.  A step is one of:
 * allocate (sizes log-uniform 256 B .. 16 MiB, a random alloc stream),
 * write a pattern host->device (the whole block or a sub-range), memset a
 * sub-range, copy device->device from another of the thread's blocks,
 * launch a kernel (fill_u32 over a block or a sub-range, add_u32 of two
 * u32-constant ranges, checksum of a range compared with the host's), run
 * a task that copies one block to another, read back device->host and
 * verify, verify-and-release, or sync a stream.  Every operation names a
 * random stream, and launches and tasks declare their accesses through
 * handles, so the library's cross-stream fences are what keeps the data
 * right; a missing one shows up as a mismatch (the sim delays every op by
 * a seeded random time).
 *
 * Expected contents are not shadowed in host memory: a block's contents
 * are a short sorted list of segments, each a constant byte (a memset), a
 * constant u32 word (a fill or an add), or a slice of a pattern.  A
 * pattern is a pure function of a serial (unique per write, process-wide)
 * and a byte position, and a u32 constant is a pattern of period 4, so a
 * copy just moves segment slices from one list to another, and any byte
 * can be recomputed.  When an operation would need more segments than a
 * block keeps, the block is rewritten whole instead.  An add needs both
 * inputs to be one u32 word over the range (a fill, an add or a memset),
 * so that its result is a u32 constant too; where no such inputs are at
 * hand it is a fill instead.
 *
 * A checksum launch sums a range into the thread's 8-byte result block
 * (zeroed by a memset first), which is read back and compared with the
 * sum of the expected words: a mismatch is an integrity failure like a
 * wrong byte.  A task copies on the actor's stream: on the sim a host
 * function that the stream runs in order (its arguments in one of the
 * thread's fixed slots, free again once it ran), on cuda
 * cuMemcpyDtoDAsync on the task's native stream.
 *
 * The stream-order checker is on (dv_actor_config.check_order) unless
 * --no-check-order: any hazard it counts fails the run, and the summary
 * gives the throughput so that its overhead can be compared.
 *
 * The budget sits below what the working sets want: each thread keeps up
 * to max(8, enough that all threads together average 1.25x the budget)
 * blocks, so DV_EOUT_OF_BUDGET happens; the thread counts it, releases one
 * of its blocks (verifying it first) and goes on.
 *
 * Faults (--faults, sim only): the main thread arms failed driver
 * allocations and CUDA_ERROR_UNKNOWN on memcpy calls, kernel launches and
 * task host functions every so often, and poisons the context
 * (recoverably) at 35 % and 70 % of the run.  After a poison, work in
 * flight (launches and tasks too) fails with DV_ECONTEXT_LOST, the actor
 * rebuilds and every older handle is stale: clients drop such handles and
 * go on.  A verification or a checksum counts against integrity only for
 * blocks whose whole life was inside one context generation.
 *
 * Nothing is allocated in the hot loop: each thread has one 16 MiB host
 * buffer pair, its block table, its task slots and its latency histograms
 * from the start.  Every third thread's buffers are pageable (its copies
 * are staged), every third's come from dv_host_alloc, and the rest are
 * its own memory registered with dv_host_register; the report gives the
 * copies' bandwidth for each.
 *
 * With --devices N there is one actor per device, all on one driver, and
 * thread i works on device i mod N; besides the mix, the threads make peer
 * copies and one more thread drives collectives over every actor
 * (devactor_nccl.h).  Both are described where they are made ("Several
 * devices", below); their read-backs count against integrity as any
 * other.
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "devactor_blas.h"
#include "devactor_fft.h"
#include "devactor_nccl.h"
#include "devactor_testing.h"
#include "tools_common.h"

/* SIGINT / SIGTERM during the run: it ends early, checked and reported. */
static volatile sig_atomic_t stop_signal;
static void on_stop_signal(int sig)
{
    stop_signal = sig;
    signal(sig, SIG_DFL); /* a second one kills */
}

#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)

#define MIN_BLOCK      UINT64_C(256)
#define MAX_BLOCK      (16 * MIB)
#define MIN_LIVE       8u
#define MAX_LIVE       1024u
#define MAX_SEGS       24u /* segments a block's expected contents may take */
#define HISTORY        6u  /* last operations kept per block, for reports */
#define MAX_MISMATCHES 8   /* described in the report */
#define TASK_SLOTS     32u /* host-function copies a thread may have in flight (sim) */
/* Mean of the size distribution: 16 octaves [2^k, 2^(k+1)), uniform in each. */
#define MEAN_BLOCK ((3 * (MAX_BLOCK - MIN_BLOCK)) / 32)

/* ------------------------------------------------------------------------
 * Operations, latencies, errors
 * ------------------------------------------------------------------------ */

enum op_kind {
    OP_ALLOC,
    OP_HTOD,
    OP_MEMSET,
    OP_DTOD,
    OP_DTOH,
    OP_RELEASE,
    OP_SYNC,
    OP_FILL,
    OP_ADD,
    OP_CHECKSUM,
    OP_TASK,
    OP_GEMM,
    OP_FFT,
    OP_PEER, /* the rest: --devices only */
    OP_ALL_REDUCE,
    OP_BROADCAST,
    OP_ALL_GATHER,
    OP_REDUCE_SCATTER,
    OP_KINDS
};
#define OP_SINGLE_KINDS OP_PEER /* the kinds a run on one device makes */
static const char *const op_names[OP_KINDS] = {
    "alloc", "copy_htod", "memset",     "copy_dtod", "copy_dtoh",  "ref_release",
    "sync",  "fill_u32",  "add_u32",    "checksum",  "task_copy",  "blas_gemm",
    "fft",   "peer_copy", "all_reduce", "broadcast", "all_gather", "reduce_scatter"};

/* Log-linear histogram: exact below 16 ns, then 8 buckets per power of two
 * (12.5 % wide), up to 2^42 ns. */
#define HIST_BUCKETS 320

typedef struct hist {
    uint64_t n[HIST_BUCKETS];
    uint64_t count, max;
} hist;

static unsigned hist_bucket(uint64_t ns)
{
    if (ns < 16)
        return (unsigned)ns;
    unsigned e = 63u - (unsigned)__builtin_clzll(ns);
    unsigned idx = 16 + (e - 4) * 8 + ((unsigned)(ns >> (e - 3)) & 7u);
    return idx < HIST_BUCKETS ? idx : HIST_BUCKETS - 1;
}

/* The middle of a bucket. */
static double hist_value(unsigned idx)
{
    if (idx < 16)
        return (double)idx;
    unsigned e = (idx - 16) / 8 + 4, sub = (idx - 16) % 8;
    uint64_t low = (uint64_t)(8 + sub) << (e - 3), width = UINT64_C(1) << (e - 3);
    return (double)low + (double)width / 2;
}

static void hist_add(hist *h, uint64_t ns)
{
    h->n[hist_bucket(ns)]++;
    h->count++;
    if (ns > h->max)
        h->max = ns;
}

static void hist_merge(hist *into, const hist *from)
{
    for (unsigned i = 0; i < HIST_BUCKETS; i++)
        into->n[i] += from->n[i];
    into->count += from->count;
    if (from->max > into->max)
        into->max = from->max;
}

static double hist_percentile(const hist *h, double p)
{
    if (h->count == 0)
        return 0;
    uint64_t want = (uint64_t)(p * (double)h->count + 0.999999), seen = 0;
    if (want == 0)
        want = 1;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        seen += h->n[i];
        /* A bucket's middle may lie above the largest value seen. */
        if (seen >= want)
            return hist_value(i) < (double)h->max ? hist_value(i) : (double)h->max;
    }
    return (double)h->max;
}

/* Error codes by -code: 1 .. NCODES-1; slot 0 counts codes not listed. */
#define NCODES 17

static unsigned code_slot(int rc)
{
    return rc < 0 && rc > -NCODES ? (unsigned)-rc : 0;
}

/* ------------------------------------------------------------------------
 * Patterns and expected contents
 * ------------------------------------------------------------------------ */

/* splitmix64's finaliser: the pattern word and the random numbers. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* A serial with this bit is a u32 constant: its low 32 bits are the word,
 * and pattern position p holds byte p & 3 of it (a fill writes the word at
 * 4-aligned positions equal to its block offsets). */
#define U32_CONSTANT (UINT64_C(1) << 63)

static bool is_u32_constant(uint64_t serial)
{
    return (serial & U32_CONSTANT) != 0;
}

static uint64_t pattern_word(uint64_t serial, uint64_t word)
{
    if (is_u32_constant(serial)) {
        uint64_t v = (uint32_t)serial;
        return v | (v << 32);
    }
    return mix64(serial * UINT64_C(0x9E3779B97F4A7C15) + word);
}

/* Byte pos of pattern serial: byte (pos & 7) of word (pos >> 3). */
static uint8_t pattern_byte(uint64_t serial, uint64_t pos)
{
    return (uint8_t)(pattern_word(serial, pos >> 3) >> (8 * (pos & 7)));
}

/* Word w's bytes, lowest first, at dst. */
static inline void put_word(uint8_t *dst, uint64_t w)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(dst, &w, 8);
#else
    for (unsigned k = 0; k < 8; k++)
        dst[k] = (uint8_t)(w >> (8 * k));
#endif
}

/* Every byte a read-back is compared with is made here: the kind of
 * pattern is decided once, and whole words are stored at once (it is
 * most of the clients' time otherwise). */
static void pattern_fill(uint8_t *dst, uint64_t serial, uint64_t pos, uint64_t len)
{
    while (len > 0 && (pos & 7) != 0) {
        *dst++ = pattern_byte(serial, pos++);
        len--;
    }
    if (is_u32_constant(serial)) {
        uint64_t w = pattern_word(serial, 0);
        for (; len >= 8; len -= 8, pos += 8, dst += 8)
            put_word(dst, w);
    } else {
        uint64_t k = serial * UINT64_C(0x9E3779B97F4A7C15);
        for (; len >= 8; len -= 8, pos += 8, dst += 8)
            put_word(dst, mix64(k + (pos >> 3)));
    }
    while (len > 0) {
        *dst++ = pattern_byte(serial, pos++);
        len--;
    }
}

/*
 * [start, end) of a block holds either the constant byte `pos` (serial 0)
 * or the bytes pos .. pos + (end - start) of pattern `serial` (a u32
 * constant where serial has U32_CONSTANT).
 */
typedef struct seg {
    uint64_t start, end;
    uint64_t serial;
    uint64_t pos; /* pattern position of start; for a constant, its value */
} seg;

typedef struct note {
    uint8_t kind;
    uint8_t value; /* memset */
    dv_stream stream;
    uint32_t word; /* fill: the value; add: the sum */
    uint64_t off, len;
    uint64_t serial; /* htod: the pattern; dtod, task, add: the (first) other block's id */
    uint64_t other_off;
    uint64_t other2, other2_off; /* add: the second input */
} note;

typedef struct block {
    dv_ref ref;
    uint64_t id; /* (thread << 40) | n: names the block in reports */
    uint64_t size;
    uint64_t ctx_gen; /* the context generation it was minted in */
    dv_stream alloc_stream, last_stream;
    bool known; /* segs describe every byte */
    uint32_t nsegs;
    seg segs[MAX_SEGS];
    uint32_t nnotes;
    note notes[HISTORY]; /* ring, the last HISTORY operations */
} block;

/* Append s to out[0 .. *n), merging with the last segment where they join. */
static void seg_push(seg *out, uint32_t *n, seg s)
{
    if (s.end <= s.start)
        return;
    if (*n > 0) {
        seg *last = &out[*n - 1];
        uint64_t next_pos = last->pos + (last->end - last->start);
        bool joins = last->end == s.start && last->serial == s.serial &&
                     (s.serial == 0               ? last->pos == s.pos
                      : is_u32_constant(s.serial) ? ((next_pos - s.pos) & 3) == 0
                                                  : next_pos == s.pos);
        if (joins) {
            last->end = s.end;
            return;
        }
    }
    out[(*n)++] = s;
}

/* s clipped to [lo, hi) (which must overlap it). */
static seg seg_clip(seg s, uint64_t lo, uint64_t hi)
{
    seg c = s;
    if (lo > s.start) {
        c.start = lo;
        if (s.serial != 0)
            c.pos = s.pos + (lo - s.start);
    }
    if (hi < s.end)
        c.end = hi;
    return c;
}

/*
 * out = old with [start, end) replaced by ins (which covers exactly that
 * range, sorted).  out must hold nold + nins + 1 segments.
 */
static uint32_t seg_splice(const seg *old, uint32_t nold, uint64_t start, uint64_t end,
                           const seg *ins, uint32_t nins, seg *out)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < nold && old[i].start < start; i++)
        seg_push(out, &n, seg_clip(old[i], old[i].start, start));
    for (uint32_t i = 0; i < nins; i++)
        seg_push(out, &n, ins[i]);
    for (uint32_t i = 0; i < nold; i++)
        if (old[i].end > end)
            seg_push(out, &n, seg_clip(old[i], end, old[i].end));
    return n;
}

/* The segments of [off, off + len) of b, moved to start at dst_off. */
static uint32_t seg_slice(const block *b, uint64_t off, uint64_t len, uint64_t dst_off, seg *out)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < b->nsegs; i++) {
        const seg *s = &b->segs[i];
        if (s->end <= off || s->start >= off + len)
            continue;
        seg c = seg_clip(*s, off, off + len);
        c.start = c.start - off + dst_off;
        c.end = c.end - off + dst_off;
        seg_push(out, &n, c);
    }
    return n;
}

/* The expected bytes of [off, off + len) of b. */
static void expected(const block *b, uint64_t off, uint64_t len, uint8_t *out)
{
    for (uint32_t i = 0; i < b->nsegs; i++) {
        const seg *s = &b->segs[i];
        if (s->end <= off || s->start >= off + len)
            continue;
        seg c = seg_clip(*s, off, off + len);
        if (c.serial == 0)
            memset(out + (c.start - off), (int)(uint8_t)c.pos, c.end - c.start);
        else
            pattern_fill(out + (c.start - off), c.serial, c.pos, c.end - c.start);
    }
}

/*
 * The u32 word that s holds at every 4-aligned block offset, when it is a
 * constant (byte or word); false for a pattern.
 */
static bool seg_word(const seg *s, uint32_t *out)
{
    if (s->serial == 0) {
        *out = (uint32_t)(uint8_t)s->pos * 0x01010101u;
        return true;
    }
    if (!is_u32_constant(s->serial))
        return false;
    /* Byte k of the word at aligned x is byte (pos - start + k) & 3 of v. */
    uint32_t v = (uint32_t)s->serial;
    unsigned r = (unsigned)((s->pos - s->start) & 3) * 8;
    *out = r == 0 ? v : (v >> r) | (v << (32 - r));
    return true;
}

/* The checksum kernel's sum (tools/kernels/kernels.cu) of n words. */
static uint64_t host_checksum(const uint8_t *p, uint64_t n, uint64_t first)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t v;
        memcpy(&v, p + 4 * i, 4);
        sum += (((uint64_t)v << 32) | (uint32_t)(first + i)) * UINT64_C(0x9E3779B97F4A7C15);
    }
    return sum;
}

/* The expected bytes are made and used a piece at a time, in a buffer that
 * stays in the cache: writing them all out first and reading them back
 * costs more memory traffic than the copies under test.  A multiple of 4
 * (the checksum's word). */
#define EXPECT_CHUNK (32u << 10)

/* Whether got holds the expected bytes of [off, off + len) of b. */
static bool matches(const block *b, uint64_t off, uint64_t len, const uint8_t *got, uint8_t *tmp)
{
    for (uint64_t done = 0; done < len; done += EXPECT_CHUNK) {
        uint64_t n = len - done < EXPECT_CHUNK ? len - done : EXPECT_CHUNK;
        expected(b, off + done, n, tmp);
        if (memcmp(got + done, tmp, n) != 0)
            return false;
    }
    return true;
}

/* The checksum kernel's sum of the n expected words at off of b. */
static uint64_t expected_checksum(const block *b, uint64_t off, uint64_t n, uint8_t *tmp)
{
    uint64_t sum = 0;
    for (uint64_t done = 0; done < n; done += EXPECT_CHUNK / 4) {
        uint64_t k = n - done < EXPECT_CHUNK / 4 ? n - done : EXPECT_CHUNK / 4;
        expected(b, off + 4 * done, 4 * k, tmp);
        sum += host_checksum(tmp, k, done);
    }
    return sum;
}

static const seg *seg_at(const block *b, uint64_t off)
{
    for (uint32_t i = 0; i < b->nsegs; i++)
        if (off >= b->segs[i].start && off < b->segs[i].end)
            return &b->segs[i];
    return NULL;
}

/* ------------------------------------------------------------------------
 * The run
 * ------------------------------------------------------------------------ */

typedef struct options {
    int threads;
    double seconds;
    uint64_t ops; /* 0: run for seconds */
    uint64_t seed;
    dv_backend backend;
    uint64_t budget; /* 0: the backend's default */
    bool faults;
    uint32_t sim_delay_us;
    uint32_t streams;
    uint32_t blocks; /* per thread; 0: automatic */
    bool pool;
    bool check_order;
    int device;
    int devices; /* --devices N: N actors, peer copies and collectives; 0: one */
    const char *conf; /* --conf: over the actors' configuration; NULL: none */
} options;

/* A task's copy on the sim: the host function's arguments, in one of the
 * thread's slots from the post until the stream ran it (busy). */
typedef struct task_slot {
    atomic_bool busy;
    bool enqueued; /* set by the task on the actor, read after it returned */
    void *dst;
    const void *src;
    uint64_t bytes;
} task_slot;

/* One device and what runs on it: its actor, the built-in kernels (NULL
 * where the backend has none) and the library actors (where they open). */
typedef struct device {
    int ordinal;
    dv_actor *actor;
    dv_kernel *fill, *add, *checksum;
    dv_blas *blas;
    dv_fft *fft;
    dv_actor_stats st0, st; /* at the start, at the end */
    dv_actor_health health;
} device;

typedef struct worker {
    int index;
    device *dev; /* the actor its blocks live on */
    pthread_t thread;
    uint64_t rng;
    uint8_t *wbuf, *rbuf; /* MAX_BLOCK each: what we write, what we read */
    uint8_t *ebuf;        /* EXPECT_CHUNK: expected bytes, a piece at a time */
    int host_kind;        /* HOST_PAGEABLE, HOST_ALLOCATED or HOST_REGISTERED */
    block *blocks;
    uint32_t nlive;
    uint64_t next_block;
    uint64_t next_serial;
    seg scratch_a[MAX_SEGS + 1], scratch_b[2 * MAX_SEGS + 2];
    task_slot slots[TASK_SLOTS];
    dv_ref result; /* 8 bytes for checksums; DV_REF_NULL until needed */
    uint64_t result_ctx_gen;

    /* Read by the progress line while running. */
    atomic_uint_fast64_t live_ops, live_errors;

    /* Read after join. */
    uint64_t calls[OP_KINDS], failed[OP_KINDS];
    hist lat[OP_KINDS];
    uint64_t codes[NCODES];
    uint64_t unexpected;
    uint64_t verifies, bytes_verified;
    uint64_t bad_verifies, bad_bytes;         /* integrity failures */
    uint64_t lib_checks, lib_bad;             /* GEMMs and FFTs checked, and wrong */
    uint64_t excused_verifies, excused_bytes; /* context rebuilt under the block */
    uint64_t checksums, bytes_summed;
    uint64_t bad_checksums, excused_checksums;
    uint64_t stale_dropped, budget_releases;
    uint64_t rewrites_for_segments;
    uint64_t adds_without_inputs; /* no u32-constant inputs: a fill instead */
    uint64_t tasks_without_slot;  /* every task slot in flight: a copy_dtod instead */
    uint64_t copied_bytes, copy_ns; /* host<->device copies that succeeded, time in them */
    dv_order_token handover;        /* what it waited for, for the thread that joins it */

    /* --devices: peer copies (the client threads) and collectives (the
     * thread that drives every rank). */
    uint8_t *pbuf;                             /* PEER_MAX: a peer copy read back */
    atomic_uint_fast64_t live_peer, live_coll; /* for the progress line */
    uint64_t peer_copies, peer_bytes;          /* that succeeded, both ways */
    uint64_t peer_checks, peer_bytes_checked, peer_bad, peer_bad_bytes;
    uint64_t coll_checks, coll_bytes_checked, coll_bad, coll_bad_bytes;
    uint64_t coll_no_memory; /* not run: a rank's allocation refused */
} worker;

/* Where a thread's host buffers come from: every third thread each. */
enum { HOST_PAGEABLE, HOST_ALLOCATED, HOST_REGISTERED, HOST_KINDS };
static const char *const host_kind_names[HOST_KINDS] = {"pageable (staged)", "dv_host_alloc",
                                                        "dv_host_register"};

/* cuMemcpyDtoDAsync_v2, for tasks on cuda (loaded at start). */
typedef int (*cu_memcpy_dtod_async_fn)(uint64_t dst, uint64_t src, size_t bytes, void *stream);

static struct run {
    options opt;
    device dev[DV_MAX_DEVICES]; /* --devices N: N of them, else one */
    int ndev;
    dv_driver *drv;
    uint32_t streams;
    uint32_t max_live;
    bool sim;
    bool tasks;         /* a way to copy inside a task */
    dv_nccl_comm *comm; /* --devices: over every actor; NULL without NCCL */
    cu_memcpy_dtod_async_fn cu_memcpy_dtod_async;
    atomic_bool stop;
    atomic_uint_fast64_t steps; /* operations begun, over all threads */

    pthread_mutex_t report_mu; /* the slow paths below */
    char mismatch[MAX_MISMATCHES][1024];
    int nmismatch;
    char first_message[NCODES][320];
} run = {.report_mu = PTHREAD_MUTEX_INITIALIZER};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rnd(uint64_t *state)
{
    return mix64(*state += UINT64_C(0x9E3779B97F4A7C15));
}

/* Uniform in [0, n). */
static uint64_t rnd_below(uint64_t *state, uint64_t n)
{
    return n <= 1 ? 0 : rnd(state) % n;
}

/* Log-uniform in [lo, hi]: a random octave, uniform inside it. */
static uint64_t rnd_log(uint64_t *state, uint64_t lo, uint64_t hi)
{
    unsigned lo_bits = 63u - (unsigned)__builtin_clzll(lo);
    unsigned hi_bits = 63u - (unsigned)__builtin_clzll(hi);
    unsigned k = lo_bits + (unsigned)rnd_below(state, hi_bits - lo_bits + 1);
    uint64_t v = (UINT64_C(1) << k) + rnd_below(state, UINT64_C(1) << k);
    return v < lo ? lo : v > hi ? hi : v;
}

static bool expected_error(int rc)
{
    if (rc == DV_EOUT_OF_BUDGET)
        return true;
    return run.opt.faults &&
           (rc == DV_EDEVICE_OOM || rc == DV_EDRIVER || rc == DV_ECONTEXT_LOST || rc == DV_ESTALE);
}

static void count_error(worker *w, int kind, int rc)
{
    unsigned slot = code_slot(rc);
    w->failed[kind]++;
    w->codes[slot]++;
    atomic_fetch_add_explicit(&w->live_errors, 1, memory_order_relaxed);
    bool unexpected = !expected_error(rc);
    if (unexpected)
        w->unexpected++;
    pthread_mutex_lock(&run.report_mu);
    if (run.first_message[slot][0] == '\0') {
        const dv_error_detail *d = dv_last_error();
        snprintf(run.first_message[slot], sizeof(run.first_message[slot]), "%s: %s", op_names[kind],
                 d->message[0] != '\0' ? d->message : dv_strerror(rc));
    }
    pthread_mutex_unlock(&run.report_mu);
    if (unexpected)
        fprintf(stderr, "\ndv-stress: thread %d: unexpected %s from %s: %s\n", w->index,
                dv_err_name(rc), op_names[kind], dv_last_error()->message);
}

/* Time one blocking call and count it. */
#define TIMED(w, kind, rc, call)                                                                   \
    do {                                                                                           \
        uint64_t t0_ = now_ns();                                                                   \
        (rc) = (call);                                                                             \
        hist_add(&(w)->lat[kind], now_ns() - t0_);                                                 \
        (w)->calls[kind]++;                                                                        \
        atomic_fetch_add_explicit(&(w)->live_ops, 1, memory_order_relaxed);                        \
        if ((rc) != DV_OK)                                                                         \
            count_error((w), (kind), (rc));                                                        \
    } while (0)

static void remember(block *b, note n)
{
    b->notes[b->nnotes % HISTORY] = n;
    b->nnotes++;
    b->last_stream = n.stream;
}

static dv_stream pick_stream(worker *w)
{
    return (dv_stream)rnd_below(&w->rng, run.streams);
}

/* A stream other than avoid, where there is one. */
static dv_stream pick_other_stream(worker *w, dv_stream avoid)
{
    if (run.streams < 2 || avoid >= run.streams)
        return pick_stream(w);
    dv_stream s = (dv_stream)rnd_below(&w->rng, run.streams - 1);
    return s >= avoid ? s + 1 : s;
}

/* Forget block i (its handle was released or is stale). */
static void forget(worker *w, uint32_t i)
{
    w->nlive--;
    if (i != w->nlive)
        w->blocks[i] = w->blocks[w->nlive];
}

/*
 * The block's handle failed with DV_ECONTEXT_LOST or DV_ESTALE: release
 * it if it is still valid (the actor may not have rebuilt yet), else drop
 * it; a stale release is how a client learns the handle is gone.
 */
static void drop(worker *w, uint32_t i)
{
    int rc = dv_ref_release(w->blocks[i].ref);
    if (rc == DV_ESTALE)
        w->stale_dropped++;
    else if (rc != DV_OK)
        count_error(w, OP_RELEASE, rc);
    forget(w, i);
}

/* Drop blocks idx[0 .. n) (an index may repeat), highest index first:
 * forget() moves the last block into the hole. */
static void drop_all(worker *w, uint32_t *idx, unsigned n)
{
    for (unsigned a = 0; a < n; a++) {
        for (unsigned b = a + 1; b < n; b++) {
            if (idx[b] > idx[a]) {
                uint32_t t = idx[a];
                idx[a] = idx[b];
                idx[b] = t;
            }
        }
    }
    for (unsigned k = 0; k < n; k++)
        if (k == 0 || idx[k] != idx[k - 1])
            drop(w, idx[k]);
}

/* After a failed operation on block i: what do we still know? */
static void after_failure(worker *w, uint32_t i, int rc, bool wrote)
{
    if (rc == DV_ECONTEXT_LOST || rc == DV_ESTALE)
        drop(w, i);
    else if (wrote)
        w->blocks[i].known = false; /* rewritten whole before it is used again */
}

static void describe_notes(const block *b, char *out, size_t cap)
{
    size_t len = 0;
    uint32_t first = b->nnotes > HISTORY ? b->nnotes - HISTORY : 0;
    out[0] = '\0';
    for (uint32_t k = first; k < b->nnotes && len < cap; k++) {
        const note *n = &b->notes[k % HISTORY];
        const char *sep = k == first ? "" : "; ";
        switch (n->kind) {
        case OP_HTOD:
            len += (size_t)snprintf(out + len, cap - len,
                                    "%shtod s%u [%" PRIu64 ", +%" PRIu64 ") pattern %#" PRIx64, sep,
                                    n->stream, n->off, n->len, n->serial);
            break;
        case OP_MEMSET:
            len += (size_t)snprintf(out + len, cap - len,
                                    "%smemset s%u [%" PRIu64 ", +%" PRIu64 ") = %#x", sep,
                                    n->stream, n->off, n->len, n->value);
            break;
        case OP_DTOD:
            len += (size_t)snprintf(out + len, cap - len,
                                    "%sdtod s%u [%" PRIu64 ", +%" PRIu64 ") from block %#" PRIx64
                                    " at %" PRIu64,
                                    sep, n->stream, n->off, n->len, n->serial, n->other_off);
            break;
        case OP_DTOH:
            len += (size_t)snprintf(out + len, cap - len, "%sdtoh s%u [%" PRIu64 ", +%" PRIu64 ")",
                                    sep, n->stream, n->off, n->len);
            break;
        case OP_FILL:
            len += (size_t)snprintf(out + len, cap - len,
                                    "%sfill_u32 s%u [%" PRIu64 ", +%" PRIu64 ") = %#x", sep,
                                    n->stream, n->off, n->len, n->word);
            break;
        case OP_ADD:
            len += (size_t)snprintf(out + len, cap - len,
                                    "%sadd_u32 s%u [%" PRIu64 ", +%" PRIu64 ") = block %#" PRIx64
                                    " at %" PRIu64 " + block %#" PRIx64 " at %" PRIu64 " = %#x",
                                    sep, n->stream, n->off, n->len, n->serial, n->other_off,
                                    n->other2, n->other2_off, n->word);
            break;
        case OP_CHECKSUM:
            len +=
                (size_t)snprintf(out + len, cap - len, "%schecksum s%u [%" PRIu64 ", +%" PRIu64 ")",
                                 sep, n->stream, n->off, n->len);
            break;
        case OP_TASK:
            len += (size_t)snprintf(out + len, cap - len,
                                    "%stask_copy s%u [%" PRIu64 ", +%" PRIu64
                                    ") from block %#" PRIx64 " at %" PRIu64,
                                    sep, n->stream, n->off, n->len, n->serial, n->other_off);
            break;
        case OP_PEER:
            len += (size_t)snprintf(
                out + len, cap - len,
                "%speer_copy s%u [%" PRIu64 ", +%" PRIu64 ") from device %" PRIu64
                " (a copy of block %#" PRIx64 " at %" PRIu64 ")",
                sep, n->stream, n->off, n->len, n->other2, n->serial, n->other_off);
            break;
        default:
            break;
        }
    }
}

/*
 * Read [off, off + len) of block i back on a random stream and compare
 * every byte.  Returns the call's status (the block is dropped or marked
 * unknown on failure, as for any operation).
 */
static int verify(worker *w, uint32_t i, uint64_t off, uint64_t len)
{
    block *b = &w->blocks[i];
    dv_stream s = pick_stream(w);
    int rc;
    uint64_t t0 = now_ns();
    TIMED(w, OP_DTOH, rc, dv_copy_dtoh(w->dev->actor, w->rbuf, b->ref, off, len, s));
    if (rc != DV_OK) {
        after_failure(w, i, rc, false);
        return rc;
    }
    w->copy_ns += now_ns() - t0;
    w->copied_bytes += len;
    remember(b, (note){.kind = OP_DTOH, .stream = s, .off = off, .len = len});
    if (!b->known)
        return DV_OK;
    w->verifies++;
    w->bytes_verified += len;
    if (matches(b, off, len, w->rbuf, w->ebuf))
        return DV_OK;
    expected(b, off, len, w->wbuf);

    uint64_t bad = 0, first = 0, last = 0;
    for (uint64_t k = 0; k < len; k++) {
        if (w->rbuf[k] != w->wbuf[k]) {
            if (bad == 0)
                first = k;
            last = k;
            bad++;
        }
    }
    /* Only a block whose whole life was in one context generation counts. */
    dv_ref_info info;
    bool same_context =
        dv_ref_access(b->ref, &info) == DV_OK && info.context_generation == b->ctx_gen;
    if (!same_context) {
        w->excused_verifies++;
        w->excused_bytes += bad;
    } else {
        w->bad_verifies++;
        w->bad_bytes += bad;
    }
    pthread_mutex_lock(&run.report_mu);
    if (run.nmismatch < MAX_MISMATCHES) {
        char history[512];
        const seg *sg = seg_at(b, off + first);
        const char *source = "?";
        uint64_t source_id = 0;
        if (sg != NULL) {
            source = sg->serial == 0               ? "memset"
                     : is_u32_constant(sg->serial) ? "u32 constant"
                                                   : "pattern";
            source_id = sg->serial == 0               ? sg->pos
                        : is_u32_constant(sg->serial) ? (uint32_t)sg->serial
                                                      : sg->serial;
        }
        describe_notes(b, history, sizeof(history));
        snprintf(run.mismatch[run.nmismatch++], sizeof(run.mismatch[0]),
                 "%sthread %d, block %#" PRIx64 " (%" PRIu64 " B, alloc stream %u, context %" PRIu64
                 "): read [%" PRIu64 ", +%" PRIu64 ") on stream %u: %" PRIu64
                 " bytes wrong, first at %" PRIu64 " (got %#04x want %#04x, from %s %#" PRIx64
                 "), last at %" PRIu64 "\n      last operations: %s",
                 same_context ? "" : "[excused: context rebuilt] ", w->index, b->id, b->size,
                 b->alloc_stream, b->ctx_gen, off, len, s, bad, off + first, w->rbuf[first],
                 w->wbuf[first], source, source_id, off + last, history);
    }
    pthread_mutex_unlock(&run.report_mu);
    /* Its contents are unknown from here: rewrite before more checks. */
    b->known = false;
    return DV_OK;
}

/* Verify the whole block, then release it. */
static void verify_and_release(worker *w, uint32_t i)
{
    int rc;
    if (w->blocks[i].known) {
        rc = verify(w, i, 0, w->blocks[i].size);
        if (rc == DV_ECONTEXT_LOST || rc == DV_ESTALE)
            return; /* dropped */
    }
    TIMED(w, OP_RELEASE, rc, dv_ref_release(w->blocks[i].ref));
    /* Released or stale: either way the handle is no longer ours. */
    forget(w, i);
}

/*
 * Allocate, and learn the allocation's outcome from the handle (the call
 * itself returns at once).  Half the time the handle is used first, while
 * its allocation may still be pending: a memset of the whole block, which
 * is ordered after the allocation and answers its error if it failed.
 * The timing is the round trip: the call and the access that waits.
 */
static int alloc_block(worker *w, uint64_t size, dv_stream s, const char *tag, dv_ref *ref,
                       dv_ref_info *info, int *early_value, dv_stream *early_stream)
{
    int rc, early = -1;
    /* The context's generation before the call, for a pending handle's
     * memset below (read only where there may be one, and off the clock:
     * it takes the actor's health lock). */
    dv_actor_health h0 = {0}, h1 = {0};
    if (early_value != NULL)
        (void)dv_actor_health_get(w->dev->actor, &h0);
    uint64_t t0 = now_ns();
    rc = dv_alloc(w->dev->actor, size, s, tag, ref);
    if (rc == DV_OK && early_value != NULL && rnd_below(&w->rng, 2) == 0) {
        early = (int)(rnd(&w->rng) & 0xff);
        *early_stream = pick_other_stream(w, s);
        int mrc = dv_memset(w->dev->actor, *ref, 0, (uint8_t)early, size, *early_stream);
        rc = dv_ref_access(*ref, info);
        (void)dv_actor_health_get(w->dev->actor, &h1);
        /* A use of a pending handle must answer what its allocation did;
         * a context lost meanwhile (--faults) may fail the memset, or come
         * after it (after the memset heard the allocation's failure, too),
         * and leaves the handle stale: the health then names a new
         * generation, or a rebuild still dropping the handles. */
        bool rebuilt = rc == DV_ESTALE &&
                       (mrc == DV_OK || mrc == DV_ECONTEXT_LOST || mrc == DV_EDEVICE_LOST ||
                        h1.context_generation != h0.context_generation ||
                        h1.state != DV_ACTOR_RUNNING);
        if (mrc != rc && !rebuilt && (rc == DV_OK || mrc != DV_ESTALE)) {
            w->unexpected++;
            pthread_mutex_lock(&run.report_mu);
            fprintf(stderr, "dv-stress: a memset of a pending handle answered %s, its "
                            "allocation %s\n", dv_err_name(mrc), dv_err_name(rc));
            pthread_mutex_unlock(&run.report_mu);
        }
    } else if (rc == DV_OK) {
        rc = dv_ref_access(*ref, info);
    }
    hist_add(&w->lat[OP_ALLOC], now_ns() - t0);
    w->calls[OP_ALLOC]++;
    atomic_fetch_add_explicit(&w->live_ops, 1, memory_order_relaxed);
    if (rc != DV_OK) {
        count_error(w, OP_ALLOC, rc);
        if (ref->bits != 0 && dv_ref_release(*ref) == DV_ESTALE)
            w->stale_dropped++; /* rebuilt already: stale at birth */
    }
    if (early_value != NULL)
        *early_value = early;
    return rc;
}

static void do_alloc(worker *w)
{
    uint64_t size = rnd_log(&w->rng, MIN_BLOCK, MAX_BLOCK);
    dv_stream s = pick_stream(w), early_stream = 0;
    dv_ref ref = DV_REF_NULL;
    dv_ref_info info;
    int early;
    int rc = alloc_block(w, size, s, "stress", &ref, &info, &early, &early_stream);
    if (rc == DV_EOUT_OF_BUDGET || rc == DV_EDEVICE_OOM) {
        /* Make room: give back one of ours, or let the others. */
        if (w->nlive > 0) {
            w->budget_releases++;
            verify_and_release(w, (uint32_t)rnd_below(&w->rng, w->nlive));
        } else {
            sched_yield();
        }
        return;
    }
    if (rc != DV_OK)
        return;
    block *b = &w->blocks[w->nlive++];
    b->ref = ref;
    b->id = ((uint64_t)w->index << 40) | ++w->next_block;
    b->size = size;
    b->ctx_gen = info.context_generation;
    b->alloc_stream = s;
    b->last_stream = s;
    b->known = false;
    b->nsegs = 0;
    b->nnotes = 0;
    if (early >= 0) {
        b->segs[0] = (seg){.start = 0, .end = size, .serial = 0, .pos = (uint64_t)early};
        b->nsegs = 1;
        b->known = true;
        remember(b, (note){.kind = OP_MEMSET, .stream = early_stream, .off = 0, .len = size,
                           .value = (uint8_t)early});
    }
}

static uint64_t next_serial(worker *w)
{
    /* Process-wide unique: data of another thread's block never matches. */
    return ((uint64_t)(w->index + 1) << 44) | ++w->next_serial;
}

/* Write a fresh pattern over [off, off + len) of block i (whole when not
 * known). */
static void do_write(worker *w, uint32_t i, bool whole)
{
    block *b = &w->blocks[i];
    uint64_t off = 0, len = b->size;
    if (!whole && b->known && b->size > 1) {
        len = rnd_log(&w->rng, 1, b->size);
        off = rnd_below(&w->rng, b->size - len + 1);
    }
    seg ins = {.start = off, .end = off + len, .serial = next_serial(w), .pos = off};
    uint32_t n = 1;
    if (len != b->size) {
        n = seg_splice(b->segs, b->nsegs, off, off + len, &ins, 1, w->scratch_b);
        if (n > MAX_SEGS) { /* too fragmented: the whole block instead */
            w->rewrites_for_segments++;
            off = 0;
            len = b->size;
            ins = (seg){.start = 0, .end = len, .serial = ins.serial, .pos = 0};
            n = 1;
        }
    }
    pattern_fill(w->wbuf, ins.serial, ins.pos, len);
    dv_stream s = pick_other_stream(w, b->last_stream);
    int rc;
    uint64_t t0 = now_ns();
    TIMED(w, OP_HTOD, rc, dv_copy_htod(w->dev->actor, b->ref, off, w->wbuf, len, s));
    if (rc != DV_OK) {
        after_failure(w, i, rc, true);
        return;
    }
    w->copy_ns += now_ns() - t0;
    w->copied_bytes += len;
    if (len == b->size) {
        b->segs[0] = ins;
        b->nsegs = 1;
    } else {
        memcpy(b->segs, w->scratch_b, n * sizeof(seg));
        b->nsegs = n;
    }
    b->known = true;
    remember(b, (note){.kind = OP_HTOD, .stream = s, .off = off, .len = len, .serial = ins.serial});
}

static void do_memset(worker *w, uint32_t i)
{
    block *b = &w->blocks[i];
    uint64_t len = rnd_log(&w->rng, 1, b->size);
    uint64_t off = rnd_below(&w->rng, b->size - len + 1);
    uint8_t value = (uint8_t)rnd(&w->rng);
    seg ins = {.start = off, .end = off + len, .serial = 0, .pos = value};
    uint32_t n = seg_splice(b->segs, b->nsegs, off, off + len, &ins, 1, w->scratch_b);
    if (n > MAX_SEGS) {
        w->rewrites_for_segments++;
        do_write(w, i, true);
        return;
    }
    dv_stream s = pick_other_stream(w, b->last_stream);
    int rc;
    TIMED(w, OP_MEMSET, rc, dv_memset(w->dev->actor, b->ref, off, value, len, s));
    if (rc != DV_OK) {
        after_failure(w, i, rc, true);
        return;
    }
    memcpy(b->segs, w->scratch_b, n * sizeof(seg));
    b->nsegs = n;
    remember(b, (note){.kind = OP_MEMSET, .stream = s, .off = off, .len = len, .value = value});
}

/* A random range of block si to copy onto block di, and the destination's
 * segments after it (in w->scratch_b). */
typedef struct copy_plan {
    uint64_t len, soff, doff;
    uint32_t nsegs;
} copy_plan;

/* Plan a copy; false when it would need too many segments (the
 * destination was rewritten whole instead). */
static bool plan_copy(worker *w, uint32_t di, uint32_t si, copy_plan *c)
{
    block *d = &w->blocks[di], *src = &w->blocks[si];
    uint64_t max = d->size < src->size ? d->size : src->size;
    c->len = rnd_log(&w->rng, 1, max);
    c->soff = rnd_below(&w->rng, src->size - c->len + 1);
    c->doff = rnd_below(&w->rng, d->size - c->len + 1);
    uint32_t nins = seg_slice(src, c->soff, c->len, c->doff, w->scratch_a);
    c->nsegs = seg_splice(d->segs, d->nsegs, c->doff, c->doff + c->len, w->scratch_a, nins,
                          w->scratch_b);
    if (c->nsegs <= MAX_SEGS)
        return true;
    w->rewrites_for_segments++;
    do_write(w, di, true);
    return false;
}

/* The copy (kind) on stream s answered rc: the destination's expected
 * contents follow it, or the blocks are dropped or unknown. */
static void commit_copy(worker *w, uint32_t di, uint32_t si, const copy_plan *c, int rc,
                        enum op_kind kind, dv_stream s)
{
    block *d = &w->blocks[di];
    if (rc != DV_OK) {
        if (rc == DV_ECONTEXT_LOST || rc == DV_ESTALE)
            drop_all(w, (uint32_t[]){di, si}, 2);
        else
            d->known = false;
        return;
    }
    memcpy(d->segs, w->scratch_b, c->nsegs * sizeof(seg));
    d->nsegs = c->nsegs;
    remember(d, (note){.kind = kind,
                       .stream = s,
                       .off = c->doff,
                       .len = c->len,
                       .serial = w->blocks[si].id,
                       .other_off = c->soff});
}

/* Copy a random range of block si onto block di, on a stream other than
 * the one that last touched the destination. */
static void do_dtod(worker *w, uint32_t di, uint32_t si)
{
    block *d = &w->blocks[di], *src = &w->blocks[si];
    copy_plan c;
    if (!plan_copy(w, di, si, &c))
        return;
    dv_stream s = pick_other_stream(w, d->last_stream);
    int rc;
    TIMED(w, OP_DTOD, rc, dv_copy_dtod(w->dev->actor, d->ref, c.doff, src->ref, c.soff, c.len, s));
    commit_copy(w, di, si, &c, rc, OP_DTOD, s);
}

/* Another known block than i, or i itself when there is none. */
static uint32_t pick_other_known(worker *w, uint32_t i)
{
    if (w->nlive < 2)
        return i;
    for (int tries = 0; tries < 4; tries++) {
        uint32_t j = (uint32_t)rnd_below(&w->rng, w->nlive - 1);
        j = j >= i ? j + 1 : j;
        if (w->blocks[j].known)
            return j;
    }
    return i;
}

/* ------------------------------------------------------------------------
 * Launches and tasks
 * ------------------------------------------------------------------------ */

static const dv_dim3 threads_per_block = {256, 1, 1};

/* The kernels loop grid-stride: enough blocks of 256 for n, at most 1024. */
static dv_dim3 grid_for(uint64_t n)
{
    uint64_t blocks = (n + 255) / 256;
    return (dv_dim3){blocks == 0 ? 1 : blocks > 1024 ? 1024 : (uint32_t)blocks, 1, 1};
}

/* Launch on stream: blocking, or (every other time) posted and waited on. */
static int launch(worker *w, dv_kernel *k, uint64_t n, dv_stream s, const dv_arg *args,
                  unsigned nargs)
{
    if (rnd_below(&w->rng, 2) == 0)
        return dv_launch(w->dev->actor, k, grid_for(n), threads_per_block, 0, s, args, nargs);
    dv_future f;
    dv_future_init(&f, 0);
    int rc =
        dv_launch_async(w->dev->actor, k, grid_for(n), threads_per_block, 0, s, args, nargs, &f);
    return rc == DV_OK ? dv_future_wait(&f) : rc;
}

/* fill_u32 over block i: all its whole words, or a 4-aligned sub-range. */
static void do_fill(worker *w, uint32_t i)
{
    block *b = &w->blocks[i];
    uint64_t words = b->size / 4, n = words, off = 0;
    if (rnd_below(&w->rng, 2) == 0) {
        n = rnd_log(&w->rng, 1, words);
        off = 4 * rnd_below(&w->rng, words - n + 1);
    }
    uint32_t value = (uint32_t)rnd(&w->rng);
    seg ins = {.start = off, .end = off + 4 * n, .serial = U32_CONSTANT | value, .pos = off};
    uint32_t nsegs = seg_splice(b->segs, b->nsegs, ins.start, ins.end, &ins, 1, w->scratch_b);
    if (nsegs > MAX_SEGS) {
        w->rewrites_for_segments++;
        do_write(w, i, true);
        return;
    }
    dv_stream s = pick_other_stream(w, b->last_stream);
    dv_arg args[] = {dv_arg_ref(b->ref, DV_WRITE, off), dv_arg_u32(value), dv_arg_u64(n)};
    int rc;
    TIMED(w, OP_FILL, rc, launch(w, w->dev->fill, n, s, args, 3));
    if (rc != DV_OK) {
        after_failure(w, i, rc, true);
        return;
    }
    memcpy(b->segs, w->scratch_b, nsegs * sizeof(seg));
    b->nsegs = nsegs;
    remember(b, (note){.kind = OP_FILL, .stream = s, .off = off, .len = 4 * n, .word = value});
}

/* A 4-aligned range of one of the thread's blocks that holds one u32 word
 * throughout: the aligned inside of a memset, fill or add segment. */
typedef struct u32_range {
    uint32_t index;
    uint64_t lo, hi;
    uint32_t word;
} u32_range;

static bool pick_u32_range(worker *w, u32_range *out)
{
    for (int tries = 0; tries < 4; tries++) {
        uint32_t i = (uint32_t)rnd_below(&w->rng, w->nlive);
        const block *b = &w->blocks[i];
        if (!b->known || b->nsegs == 0)
            continue;
        uint32_t first = (uint32_t)rnd_below(&w->rng, b->nsegs);
        for (uint32_t k = 0; k < b->nsegs; k++) {
            const seg *sg = &b->segs[(first + k) % b->nsegs];
            uint64_t lo = (sg->start + 3) & ~UINT64_C(3), hi = sg->end & ~UINT64_C(3);
            uint32_t word;
            if (hi > lo && seg_word(sg, &word)) {
                *out = (u32_range){.index = i, .lo = lo, .hi = hi, .word = word};
                return true;
            }
        }
    }
    return false;
}

/* Two ranges of len bytes of one block: the same or apart (a kernel that
 * writes one while reading the other, shifted, races with itself). */
static bool same_or_apart(uint64_t x, uint64_t y, uint64_t len)
{
    return x == y || x + len <= y || y + len <= x;
}

/*
 * add_u32: a range of block ci = a + b, where a and b are u32-constant
 * ranges of the thread's blocks (ci's own among them maybe, read in
 * place), so the result is the constant a + b.  A fill where there are
 * no such inputs.
 */
static void do_add(worker *w, uint32_t ci)
{
    block *c = &w->blocks[ci];
    u32_range a, b;
    if (!pick_u32_range(w, &a) || !pick_u32_range(w, &b)) {
        w->adds_without_inputs++;
        do_fill(w, ci);
        return;
    }
    uint64_t maxn = (a.hi - a.lo) / 4;
    if ((b.hi - b.lo) / 4 < maxn)
        maxn = (b.hi - b.lo) / 4;
    if (c->size / 4 < maxn)
        maxn = c->size / 4;
    uint64_t n = rnd_log(&w->rng, 1, maxn), len = 4 * n;
    uint64_t aoff = a.lo + 4 * rnd_below(&w->rng, (a.hi - a.lo) / 4 - n + 1);
    uint64_t boff = b.lo + 4 * rnd_below(&w->rng, (b.hi - b.lo) / 4 - n + 1);
    uint64_t coff = a.index == ci   ? aoff
                    : b.index == ci ? boff
                                    : 4 * rnd_below(&w->rng, c->size / 4 - n + 1);
    if ((a.index == ci && !same_or_apart(coff, aoff, len)) ||
        (b.index == ci && !same_or_apart(coff, boff, len))) {
        w->adds_without_inputs++;
        do_fill(w, ci);
        return;
    }
    uint32_t sum = a.word + b.word;
    seg ins = {.start = coff, .end = coff + len, .serial = U32_CONSTANT | sum, .pos = coff};
    uint32_t nsegs = seg_splice(c->segs, c->nsegs, ins.start, ins.end, &ins, 1, w->scratch_b);
    if (nsegs > MAX_SEGS) {
        w->rewrites_for_segments++;
        do_write(w, ci, true);
        return;
    }
    dv_stream s = pick_other_stream(w, c->last_stream);
    dv_arg args[] = {dv_arg_ref(c->ref, DV_WRITE, coff),
                     dv_arg_ref(w->blocks[a.index].ref, DV_READ, aoff),
                     dv_arg_ref(w->blocks[b.index].ref, DV_READ, boff), dv_arg_u64(n)};
    int rc;
    TIMED(w, OP_ADD, rc, launch(w, w->dev->add, n, s, args, 4));
    if (rc != DV_OK) {
        if (rc == DV_ECONTEXT_LOST || rc == DV_ESTALE)
            drop_all(w, (uint32_t[]){ci, a.index, b.index}, 3);
        else
            c->known = false;
        return;
    }
    memcpy(c->segs, w->scratch_b, nsegs * sizeof(seg));
    c->nsegs = nsegs;
    remember(c, (note){.kind = OP_ADD,
                       .stream = s,
                       .off = coff,
                       .len = len,
                       .word = sum,
                       .serial = w->blocks[a.index].id,
                       .other_off = aoff,
                       .other2 = w->blocks[b.index].id,
                       .other2_off = boff});
}

/* The thread's 8-byte checksum result, allocated on first use (and again
 * after a rebuild made it stale).  On a refused allocation a block is
 * released to make room, so the caller's block indexes are no longer
 * valid when this says false. */
static bool have_result(worker *w)
{
    if (w->result.bits != 0)
        return true;
    dv_ref ref = DV_REF_NULL;
    dv_ref_info info;
    int rc = alloc_block(w, 8, pick_stream(w), "stress-checksum", &ref, &info, NULL, NULL);
    if (rc == DV_EOUT_OF_BUDGET || rc == DV_EDEVICE_OOM) {
        if (w->nlive > 0) {
            w->budget_releases++;
            verify_and_release(w, (uint32_t)rnd_below(&w->rng, w->nlive));
        }
        return false;
    }
    if (rc != DV_OK)
        return false;
    w->result = ref;
    w->result_ctx_gen = info.context_generation;
    return true;
}

static void drop_result(worker *w)
{
    int rc = dv_ref_release(w->result);
    if (rc == DV_ESTALE)
        w->stale_dropped++;
    else if (rc != DV_OK)
        count_error(w, OP_RELEASE, rc);
    w->result = DV_REF_NULL;
}

/*
 * checksum of block i's whole words or a 4-aligned sub-range into the
 * result block (zeroed first, each step on its own random stream), read
 * back and compared with the sum of the expected words.
 */
static void do_checksum(worker *w, uint32_t i)
{
    if (!have_result(w))
        return;
    block *b = &w->blocks[i];
    uint64_t words = b->size / 4, n = words, off = 0;
    if (rnd_below(&w->rng, 2) == 0) {
        n = rnd_log(&w->rng, 1, words);
        off = 4 * rnd_below(&w->rng, words - n + 1);
    }
    uint64_t len = 4 * n;
    dv_stream zero_stream = pick_stream(w), s = pick_other_stream(w, b->last_stream);
    int rc;
    TIMED(w, OP_MEMSET, rc, dv_memset(w->dev->actor, w->result, 0, 0, 8, zero_stream));
    if (rc != DV_OK) {
        if (rc == DV_ECONTEXT_LOST || rc == DV_ESTALE)
            drop_result(w);
        return;
    }
    dv_arg args[] = {dv_arg_ref(b->ref, DV_READ, off), dv_arg_u64(n),
                     dv_arg_ref(w->result, DV_READ_WRITE, 0)};
    TIMED(w, OP_CHECKSUM, rc, launch(w, w->dev->checksum, n, s, args, 3));
    if (rc != DV_OK) {
        if (rc == DV_ECONTEXT_LOST || rc == DV_ESTALE) {
            drop_result(w);
            drop(w, i);
        }
        return;
    }
    remember(b, (note){.kind = OP_CHECKSUM, .stream = s, .off = off, .len = len});
    uint64_t got = 0;
    dv_stream read_stream = pick_stream(w);
    TIMED(w, OP_DTOH, rc, dv_copy_dtoh(w->dev->actor, &got, w->result, 0, 8, read_stream));
    if (rc != DV_OK) {
        if (rc == DV_ECONTEXT_LOST || rc == DV_ESTALE)
            drop_result(w);
        return;
    }
    uint64_t want = expected_checksum(b, off, n, w->ebuf);
    w->checksums++;
    w->bytes_summed += len;
    if (got == want)
        return;

    /* Only blocks whose whole life was in one context generation count. */
    dv_ref_info info, rinfo;
    bool same_context =
        dv_ref_access(b->ref, &info) == DV_OK && info.context_generation == b->ctx_gen &&
        dv_ref_access(w->result, &rinfo) == DV_OK && rinfo.context_generation == w->result_ctx_gen;
    if (same_context)
        w->bad_checksums++;
    else
        w->excused_checksums++;
    pthread_mutex_lock(&run.report_mu);
    if (run.nmismatch < MAX_MISMATCHES) {
        char history[512];
        describe_notes(b, history, sizeof(history));
        snprintf(run.mismatch[run.nmismatch++], sizeof(run.mismatch[0]),
                 "%sthread %d, block %#" PRIx64 " (%" PRIu64 " B, alloc stream %u, context %" PRIu64
                 "): checksum of [%" PRIu64 ", +%" PRIu64 ") on stream %u (zeroed on %u, read on "
                 "%u): got %#018" PRIx64 " want %#018" PRIx64 "\n      last operations: %s",
                 same_context ? "" : "[excused: context rebuilt] ", w->index, b->id, b->size,
                 b->alloc_stream, b->ctx_gen, off, len, s, zero_stream, read_stream, got, want,
                 history);
    }
    pthread_mutex_unlock(&run.report_mu);
    b->known = false;
}

static void host_copy(void *arg)
{
    task_slot *slot = arg;
    memmove(slot->dst, slot->src, slot->bytes);
    /* Pairs with the acquire in free_slot(): the thread may reuse it. */
    atomic_store_explicit(&slot->busy, false, memory_order_release);
}

typedef struct task_call {
    task_slot *slot; /* sim */
    uint64_t bytes;
} task_call;

/* On the actor: copy argument 1 to argument 0 in the task's stream order. */
static int copy_task(const dv_task_ctx *ctx, void *user)
{
    task_call *call = user;
    if (!ctx->simulated) {
        int cu =
            run.cu_memcpy_dtod_async(ctx->arg[0], ctx->arg[1], call->bytes, ctx->native_stream);
        return cu == 0 ? DV_OK : DV_EDRIVER;
    }
    task_slot *slot = call->slot;
    slot->dst = dv_task_sim_access(ctx, ctx->arg[0], call->bytes, DV_WRITE);
    slot->src = dv_task_sim_access(ctx, ctx->arg[1], call->bytes, DV_READ);
    slot->bytes = call->bytes;
    if (slot->dst == NULL || slot->src == NULL)
        return DV_EINVAL;
    int rc = dv_task_host_fn(ctx, host_copy, slot);
    slot->enqueued = rc == DV_OK;
    return rc;
}

/* A slot whose host function ran (or never was posted), or NULL. */
static task_slot *free_slot(worker *w)
{
    for (unsigned k = 0; k < TASK_SLOTS; k++) {
        task_slot *slot = &w->slots[k];
        /* Pairs with the release in host_copy(): its memmove is done. */
        if (!atomic_load_explicit(&slot->busy, memory_order_acquire)) {
            atomic_store_explicit(&slot->busy, true, memory_order_relaxed);
            slot->enqueued = false;
            return slot;
        }
    }
    return NULL;
}

/* Run the copy task: blocking, or (every other time) posted and waited on. */
static int task(worker *w, task_call *call, dv_stream s, const dv_arg *args, unsigned nargs)
{
    if (rnd_below(&w->rng, 2) == 0)
        return dv_task(w->dev->actor, copy_task, call, s, args, nargs);
    dv_future f;
    dv_future_init(&f, 0);
    int rc = dv_task_async(w->dev->actor, copy_task, call, s, args, nargs, &f);
    return rc == DV_OK ? dv_future_wait(&f) : rc;
}

/* A task that copies a random range of block si onto block di (READ of
 * the source, WRITE of the destination), on a stream other than the one
 * that last touched the destination.  A copy_dtod when every slot is in
 * flight. */
static void do_task(worker *w, uint32_t di, uint32_t si)
{
    block *d = &w->blocks[di], *src = &w->blocks[si];
    copy_plan c;
    if (!plan_copy(w, di, si, &c))
        return;
    task_call call = {.slot = NULL, .bytes = c.len};
    if (run.sim && (call.slot = free_slot(w)) == NULL) {
        w->tasks_without_slot++;
        do_dtod(w, di, si);
        return;
    }
    dv_stream s = pick_other_stream(w, d->last_stream);
    dv_arg args[] = {dv_arg_ref(d->ref, DV_WRITE, c.doff), dv_arg_ref(src->ref, DV_READ, c.soff)};
    int rc;
    TIMED(w, OP_TASK, rc, task(w, &call, s, args, 2));
    /* Not posted to the stream: nothing will free the slot but us. */
    if (call.slot != NULL && !call.slot->enqueued)
        atomic_store_explicit(&call.slot->busy, false, memory_order_relaxed);
    commit_copy(w, di, si, &c, rc, OP_TASK, s);
}

/*
 * The library actors (devactor_blas.h, devactor_fft.h): their own small
 * blocks, inputs written on two streams, the call on a third, the result
 * read back on a fourth and checked against the host: a GEMM against a
 * reference in double, an FFT forward and back against n times its input.
 * A failed call (a refused allocation, a fault) is counted like any
 * other and nothing is checked; nor is a result whose blocks' context was
 * rebuilt under them.
 */
static bool lib_alloc(worker *w, int kind, uint64_t bytes, dv_ref *out)
{
    int rc;
    TIMED(w, OP_ALLOC, rc, dv_alloc(w->dev->actor, bytes, pick_stream(w), op_names[kind], out));
    return rc == DV_OK;
}

static bool same_context(dv_ref r, uint64_t gen)
{
    dv_ref_info info;
    return dv_ref_access(r, &info) == DV_OK && info.context_generation == gen;
}

static void lib_checked(worker *w, bool right, const char *what)
{
    w->lib_checks++;
    if (right)
        return;
    w->lib_bad++;
    pthread_mutex_lock(&run.report_mu);
    if (run.nmismatch < MAX_MISMATCHES)
        snprintf(run.mismatch[run.nmismatch++], sizeof(run.mismatch[0]), "thread %d: %s",
                 w->index, what);
    pthread_mutex_unlock(&run.report_mu);
}

static void do_gemm(worker *w)
{
    int64_t m = 8 + (int64_t)rnd_below(&w->rng, 89), n = 8 + (int64_t)rnd_below(&w->rng, 89),
            k = 8 + (int64_t)rnd_below(&w->rng, 89);
    float *a = malloc((size_t)(m * k) * 4), *b = malloc((size_t)(k * n) * 4),
          *c = malloc((size_t)(m * n) * 4);
    dv_ref ra = DV_REF_NULL, rb = DV_REF_NULL, rc_ = DV_REF_NULL;
    int rc;
    dv_actor_health h0;
    dv_actor_health_get(w->dev->actor, &h0);
    if (a == NULL || b == NULL || c == NULL)
        goto out;
    for (int64_t e = 0; e < m * k; e++)
        a[e] = (float)(rnd_below(&w->rng, 2001) - 1000) / 1000.0f;
    for (int64_t e = 0; e < k * n; e++)
        b[e] = (float)(rnd_below(&w->rng, 2001) - 1000) / 1000.0f;
    if (!lib_alloc(w, OP_GEMM, (uint64_t)(m * k) * 4, &ra) ||
        !lib_alloc(w, OP_GEMM, (uint64_t)(k * n) * 4, &rb) ||
        !lib_alloc(w, OP_GEMM, (uint64_t)(m * n) * 4, &rc_))
        goto out;
    TIMED(w, OP_HTOD, rc,
          dv_copy_htod(w->dev->actor, ra, 0, a, (uint64_t)(m * k) * 4, pick_stream(w)));
    if (rc != DV_OK)
        goto out;
    TIMED(w, OP_HTOD, rc,
          dv_copy_htod(w->dev->actor, rb, 0, b, (uint64_t)(k * n) * 4, pick_stream(w)));
    if (rc != DV_OK)
        goto out;
    TIMED(w, OP_GEMM, rc,
          dv_blas_gemm(w->dev->blas, pick_stream(w), DV_BLAS_F32, DV_BLAS_ROW_MAJOR, DV_BLAS_N,
                       DV_BLAS_N, m, n, k, 1.0, dv_blas_mat(ra, 0, k), dv_blas_mat(rb, 0, n), 0.0,
                       dv_blas_mat(rc_, 0, n)));
    if (rc != DV_OK)
        goto out;
    TIMED(w, OP_DTOH, rc,
          dv_copy_dtoh(w->dev->actor, c, rc_, 0, (uint64_t)(m * n) * 4, pick_stream(w)));
    if (rc != DV_OK || !same_context(rc_, h0.context_generation))
        goto out;
    double worst = 0;
    for (int64_t r = 0; r < m; r++)
        for (int64_t col = 0; col < n; col++) {
            double acc = 0, mag = 1e-30;
            for (int64_t p = 0; p < k; p++) {
                acc += (double)a[r * k + p] * b[p * n + col];
                mag += fabs((double)a[r * k + p] * b[p * n + col]);
            }
            double err = fabs(c[r * n + col] - acc) / mag;
            worst = err > worst || isnan(err) ? err : worst;
        }
    char what[160];
    snprintf(what, sizeof(what), "gemm %lld x %lld x %lld: worst error %.2e of sum |a b|",
             (long long)m, (long long)n, (long long)k, worst);
    lib_checked(w, worst <= 1e-5, what);
out:
    if (ra.bits)
        TIMED(w, OP_RELEASE, rc, dv_ref_release(ra));
    if (rb.bits)
        TIMED(w, OP_RELEASE, rc, dv_ref_release(rb));
    if (rc_.bits)
        TIMED(w, OP_RELEASE, rc, dv_ref_release(rc_));
    free(a), free(b), free(c);
}

static void do_fft(worker *w)
{
    static const int64_t sizes[] = {64, 96, 125, 128, 250, 256};
    dv_fft_shape shape = {1, {sizes[rnd_below(&w->rng, 6)], 0, 0},
                          1 + (int64_t)rnd_below(&w->rng, 4)};
    int64_t n = shape.n[0], count = n * shape.batch;
    uint64_t bytes = (uint64_t)count * 8;
    float *x = malloc(bytes), *y = malloc(bytes);
    dv_ref rx = DV_REF_NULL, ry = DV_REF_NULL;
    int rc;
    dv_actor_health h0;
    dv_actor_health_get(w->dev->actor, &h0);
    if (x == NULL || y == NULL)
        goto out;
    for (int64_t e = 0; e < 2 * count; e++)
        x[e] = (float)(rnd_below(&w->rng, 2001) - 1000) / 1000.0f;
    if (!lib_alloc(w, OP_FFT, bytes, &rx) || !lib_alloc(w, OP_FFT, bytes, &ry))
        goto out;
    TIMED(w, OP_HTOD, rc, dv_copy_htod(w->dev->actor, rx, 0, x, bytes, pick_stream(w)));
    if (rc != DV_OK)
        goto out;
    /* forward out of place, then back in place: n times x */
    TIMED(w, OP_FFT, rc,
          dv_fft_exec(w->dev->fft, pick_stream(w), DV_FFT_C2C, DV_FFT_F32, DV_FFT_FORWARD, &shape,
                      rx, 0, ry, 0));
    if (rc != DV_OK)
        goto out;
    TIMED(w, OP_FFT, rc,
          dv_fft_exec(w->dev->fft, pick_stream(w), DV_FFT_C2C, DV_FFT_F32, DV_FFT_INVERSE, &shape,
                      ry, 0, ry, 0));
    if (rc != DV_OK)
        goto out;
    TIMED(w, OP_DTOH, rc, dv_copy_dtoh(w->dev->actor, y, ry, 0, bytes, pick_stream(w)));
    if (rc != DV_OK || !same_context(ry, h0.context_generation))
        goto out;
    double worst = 0;
    for (int64_t t = 0; t < shape.batch; t++) {
        double mag = 1e-30;
        for (int64_t e = 0; e < n; e++)
            mag += fabs(x[2 * (t * n + e)]) + fabs(x[2 * (t * n + e) + 1]);
        for (int64_t e = 2 * t * n; e < 2 * (t + 1) * n; e++) {
            double err = fabs(y[e] - (double)n * x[e]) / ((double)n * mag);
            worst = err > worst || isnan(err) ? err : worst;
        }
    }
    char what[160];
    snprintf(what, sizeof(what), "fft %lld x %lld forward and back: worst error %.2e",
             (long long)shape.batch, (long long)n, worst);
    lib_checked(w, worst <= 1e-5, what);
out:
    if (rx.bits)
        TIMED(w, OP_RELEASE, rc, dv_ref_release(rx));
    if (ry.bits)
        TIMED(w, OP_RELEASE, rc, dv_ref_release(ry));
    free(x), free(y);
}

/* ------------------------------------------------------------------------
 * Several devices (--devices N): peer copies and collectives
 *
 * A peer copy: a range of one of the thread's blocks (its expected
 * contents known, as for every block) copied by the peer actor into a
 * fresh block of its own, read back there and compared; half the time a
 * range of that copy goes back, a peer copy the other way, onto one of the
 * thread's blocks, whose expected contents follow it as for any copy (the
 * thread's reads check it later).
 *
 * Collectives: one thread drives every rank of a communicator over all
 * the actors, posting each rank's part with a future (a blocking call
 * from it would wait for the others, which it has not posted yet).  Each
 * rank's buffers live in one block, or two, with padding around and
 * between them, each block set to a byte and its send buffer written from
 * the host first (on random streams), the collective on another, the
 * whole blocks read back on others still, posted before the collective
 * finished: fences keep them in order.  Every byte read back is compared
 * with the host's: the padding and unused send buffers unchanged, the
 * results computed on the host.  Reductions take small integers (floats:
 * quarters and eighths), so that every sum is exact in any order.
 * ------------------------------------------------------------------------ */

#define PEER_MAX      (4 * MIB)  /* a peer copy's bytes at most */
#define ALLOC_WAIT_NS 200000000u /* dv_alloc_wait for the budget: 0.2 s */
#define COLL_PART     (1 * MIB)  /* a rank's send or receive buffer at most */
#define COLL_PAD      64u        /* elements of padding at most, each side */
#define COLL_BLOCK    (2 * COLL_PART + 4 * 8 * COLL_PAD) /* a block at most */
#define COLL_TIMEOUT  (UINT64_C(30) * 1000000000u)       /* creation, each meeting of the ranks */

/* Another device than the thread's own. */
static device *pick_peer(worker *w)
{
    int d = (int)rnd_below(&w->rng, (uint64_t)run.ndev - 1);
    int own = w->dev->ordinal;
    return &run.dev[d >= own ? d + 1 : d];
}

/* An integrity failure found by a peer copy's or a collective's read-back:
 * counted as verify() counts one, and described in the report. */
static uint64_t count_wrong(worker *w, const uint8_t *got, const uint8_t *want, uint64_t len,
                            uint64_t *first, uint64_t *last)
{
    uint64_t bad = 0;
    for (uint64_t k = 0; k < len; k++) {
        if (got[k] != want[k]) {
            if (bad == 0)
                *first = k;
            *last = k;
            bad++;
        }
    }
    w->bad_verifies++;
    w->bad_bytes += bad;
    return bad;
}

static void describe_mismatch(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void describe_mismatch(const char *fmt, ...)
{
    pthread_mutex_lock(&run.report_mu);
    if (run.nmismatch < MAX_MISMATCHES) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(run.mismatch[run.nmismatch++], sizeof(run.mismatch[0]), fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&run.report_mu);
}

/* A peer copy of a range of the thread's known block i to a fresh block
 * of another device, read back there and compared; half the time copied
 * back (a part of it) onto one of the thread's blocks. */
static void do_peer(worker *w, uint32_t i)
{
    device *peer = pick_peer(w);
    block *b = &w->blocks[i];
    uint64_t len = rnd_log(&w->rng, 1, b->size < PEER_MAX ? b->size : PEER_MAX);
    uint64_t soff = rnd_below(&w->rng, b->size - len + 1);
    uint64_t tsize = len + rnd_below(&w->rng, len < 4096 ? len + 1 : 4097);
    uint64_t toff = rnd_below(&w->rng, tsize - len + 1);
    dv_ref tmp = DV_REF_NULL;
    int rc;
    TIMED(w, OP_ALLOC, rc,
          dv_alloc_wait(peer->actor, tsize, pick_stream(w), "stress-peer", ALLOC_WAIT_NS, &tmp));
    if (rc != DV_OK)
        return;
    dv_stream s = pick_stream(w);
    TIMED(w, OP_PEER, rc, dv_copy_dtod(peer->actor, tmp, toff, b->ref, soff, len, s));
    if (rc != DV_OK) {
        after_failure(w, i, rc, false);
        goto out;
    }
    w->peer_copies++;
    w->peer_bytes += len;
    atomic_fetch_add_explicit(&w->live_peer, 1, memory_order_relaxed);
    dv_stream rs = pick_other_stream(w, s);
    TIMED(w, OP_DTOH, rc, dv_copy_dtoh(peer->actor, w->pbuf, tmp, toff, len, rs));
    if (rc != DV_OK)
        goto out;
    w->verifies++;
    w->bytes_verified += len;
    w->peer_checks++;
    w->peer_bytes_checked += len;
    if (!matches(b, soff, len, w->pbuf, w->ebuf)) {
        expected(b, soff, len, w->wbuf);
        uint64_t first = 0, last = 0;
        uint64_t bad = count_wrong(w, w->pbuf, w->wbuf, len, &first, &last);
        w->peer_bad++;
        w->peer_bad_bytes += bad;
        char history[512];
        describe_notes(b, history, sizeof(history));
        describe_mismatch("thread %d, peer copy of block %#" PRIx64 " [%" PRIu64 ", +%" PRIu64
                          ") from device %d to device %d (at %" PRIu64 " of a %" PRIu64
                          " B block) on stream %u, read back on stream %u: %" PRIu64
                          " bytes wrong, first at %" PRIu64 " (got %#04x want %#04x), last at "
                          "%" PRIu64 "\n      last operations of the source: %s",
                          w->index, b->id, soff, len, w->dev->ordinal, peer->ordinal, toff, tsize,
                          s, rs, bad, soff + first, w->pbuf[first], w->wbuf[first], soff + last,
                          history);
        goto out;
    }
    if (rnd_below(&w->rng, 2) != 0)
        goto out;

    /* Back: a part of the copy onto one of the thread's blocks (i itself,
     * maybe), at a random place: its source is the peer's block. */
    uint32_t di = pick_other_known(w, i);
    block *d = &w->blocks[di];
    uint64_t back = rnd_log(&w->rng, 1, len < d->size ? len : d->size);
    uint64_t from = rnd_below(&w->rng, len - back + 1);
    uint64_t doff = rnd_below(&w->rng, d->size - back + 1);
    uint32_t nins = seg_slice(b, soff + from, back, doff, w->scratch_a);
    uint32_t nsegs =
        seg_splice(d->segs, d->nsegs, doff, doff + back, w->scratch_a, nins, w->scratch_b);
    if (nsegs > MAX_SEGS)
        goto out; /* too fragmented: not this time */
    dv_stream bs = pick_other_stream(w, d->last_stream);
    TIMED(w, OP_PEER, rc, dv_copy_dtod(w->dev->actor, d->ref, doff, tmp, toff + from, back, bs));
    if (rc != DV_OK) {
        after_failure(w, di, rc, true);
        goto out;
    }
    w->peer_copies++;
    w->peer_bytes += back;
    atomic_fetch_add_explicit(&w->live_peer, 1, memory_order_relaxed);
    memcpy(d->segs, w->scratch_b, nsegs * sizeof(seg));
    d->nsegs = nsegs;
    remember(d, (note){.kind = OP_PEER,
                       .stream = bs,
                       .off = doff,
                       .len = back,
                       .serial = b->id,
                       .other_off = soff + from,
                       .other2 = (uint64_t)peer->ordinal});
out:
    TIMED(w, OP_RELEASE, rc, dv_ref_release(tmp));
}

enum { COLL_ALL_REDUCE, COLL_BROADCAST, COLL_ALL_GATHER, COLL_REDUCE_SCATTER, COLL_KINDS };

static const char *type_name(dv_nccl_type t)
{
    switch (t) {
    case DV_NCCL_U8:
        return "u8";
    case DV_NCCL_I32:
        return "i32";
    case DV_NCCL_I64:
        return "i64";
    case DV_NCCL_F32:
        return "f32";
    case DV_NCCL_F64:
        return "f64";
    default:
        return "?";
    }
}

static const char *op_name(dv_nccl_op op)
{
    return op == DV_NCCL_SUM ? "sum" : op == DV_NCCL_MAX ? "max" : op == DV_NCCL_MIN ? "min" : "?";
}

/* Element e of rank r's send buffer in collective serial.  raw: any bits
 * (nothing is computed on them); else a small integer (in floats a
 * quarter or an eighth of one), so that a sum over DV_MAX_DEVICES ranks
 * is exact in every type and order (--self-test checks it). */
static int64_t coll_small(uint64_t serial, int r, uint64_t e)
{
    uint64_t h = mix64(serial * UINT64_C(0x9E3779B97F4A7C15) + ((uint64_t)r << 40) + e);
    return (int64_t)(h % 2001) - 1000;
}

/* v stored as type t: itself in the integers, a quarter of it in F32
 * and an eighth in F64 (exact, and exactly summed). */
static void coll_store(uint8_t *dst, dv_nccl_type t, int64_t v)
{
    int32_t i32 = (int32_t)v;
    float f32 = (float)v * 0.25f;
    double f64 = (double)v * 0.125;
    switch (t) {
    case DV_NCCL_I32:
        memcpy(dst, &i32, 4);
        break;
    case DV_NCCL_I64:
        memcpy(dst, &v, 8);
        break;
    case DV_NCCL_F32:
        memcpy(dst, &f32, 4);
        break;
    default:
        memcpy(dst, &f64, 8);
        break;
    }
}

static void coll_value(uint8_t *dst, dv_nccl_type t, bool raw, uint64_t serial, int r, uint64_t e)
{
    if (raw) {
        uint64_t h = mix64(serial * UINT64_C(0xD1B54A32D192ED03) + ((uint64_t)r << 40) + e);
        for (unsigned k = 0; k < dv_nccl_type_size(t); k++)
            dst[k] = (uint8_t)(h >> (8 * k));
        return;
    }
    coll_store(dst, t, coll_small(serial, r, e));
}

/* op over every rank's element e, stored as type t at dst.  The small
 * integers' sums are exact in every type, whatever the order. */
static void coll_reduced(uint8_t *dst, dv_nccl_type t, dv_nccl_op op, uint64_t serial, int n,
                         uint64_t e)
{
    int64_t acc = coll_small(serial, 0, e);
    for (int r = 1; r < n; r++) {
        int64_t v = coll_small(serial, r, e);
        acc = op == DV_NCCL_SUM   ? acc + v
              : op == DV_NCCL_MAX ? (v > acc ? v : acc)
                                  : (v < acc ? v : acc);
    }
    coll_store(dst, t, acc);
}

/* The reduction the way a device makes it: in type t's own arithmetic,
 * the ranks in order (up or down). */
static void coll_reduce_in_type(uint8_t *dst, dv_nccl_type t, dv_nccl_op op, uint64_t serial, int n,
                                uint64_t e, bool down)
{
    uint8_t x[8];
    for (int k = 0; k < n; k++) {
        int r = down ? n - 1 - k : k;
        coll_value(k == 0 ? dst : x, t, false, serial, r, e);
        if (k == 0)
            continue;
#define COLL_FOLD(type)                                                                            \
    do {                                                                                           \
        type a_, b_;                                                                               \
        memcpy(&a_, dst, sizeof(type));                                                            \
        memcpy(&b_, x, sizeof(type));                                                              \
        a_ = op == DV_NCCL_SUM   ? a_ + b_                                                         \
             : op == DV_NCCL_MAX ? (b_ > a_ ? b_ : a_)                                             \
                                 : (b_ < a_ ? b_ : a_);                                            \
        memcpy(dst, &a_, sizeof(type));                                                            \
    } while (0)
        switch (t) {
        case DV_NCCL_I32:
            COLL_FOLD(int32_t);
            break;
        case DV_NCCL_I64:
            COLL_FOLD(int64_t);
            break;
        case DV_NCCL_F32:
            COLL_FOLD(float);
            break;
        default:
            COLL_FOLD(double);
            break;
        }
#undef COLL_FOLD
    }
}

/* For --self-test: coll_reduced, made in 64-bit integers, is what a
 * device computes in the type itself, whatever the order of the ranks. */
static bool coll_sums_exact(uint64_t *differ)
{
    static const dv_nccl_type types[] = {DV_NCCL_I32, DV_NCCL_I64, DV_NCCL_F32, DV_NCCL_F64};
    static const dv_nccl_op ops[] = {DV_NCCL_SUM, DV_NCCL_MAX, DV_NCCL_MIN};
    for (int n = 2; n <= DV_MAX_DEVICES; n++)
        for (unsigned ti = 0; ti < 4; ti++)
            for (unsigned oi = 0; oi < 3; oi++)
                for (uint64_t e = 0; e < 256; e++) {
                    uint8_t want[8], up[8], down[8];
                    unsigned sz = dv_nccl_type_size(types[ti]);
                    coll_reduced(want, types[ti], ops[oi], 77 + e, n, e);
                    coll_reduce_in_type(up, types[ti], ops[oi], 77 + e, n, e, false);
                    coll_reduce_in_type(down, types[ti], ops[oi], 77 + e, n, e, true);
                    *differ += memcmp(want, up, sz) != 0 || memcmp(want, down, sz) != 0;
                }
    return *differ == 0;
}

/* One rank's part of a collective: its blocks (the second DV_REF_NULL
 * when one block holds both buffers), where the buffers are, the
 * expected and the read-back contents of each block. */
typedef struct coll_rank {
    dv_ref blk[2];
    uint64_t size[2];
    int send_blk, recv_blk;
    uint64_t send_off, recv_off;
    bool send_null; /* broadcast, not the root: DV_REF_NULL for send */
    uint8_t *want[2], *got[2];
    dv_future f, rf[2];
    int rc, rrc[2];
} coll_rank;

typedef struct coll_state {
    coll_rank rank[DV_MAX_DEVICES];
    uint64_t serial;
} coll_state;

static void coll_release(worker *w, coll_state *cs)
{
    for (int r = 0; r < run.ndev; r++) {
        for (int k = 0; k < 2; k++) {
            if (cs->rank[r].blk[k].bits == 0)
                continue;
            int rc;
            TIMED(w, OP_RELEASE, rc, dv_ref_release(cs->rank[r].blk[k]));
            cs->rank[r].blk[k] = DV_REF_NULL;
        }
    }
}

/* Lay out rank r's buffers: send and recv in one block or two, padding
 * around and between (whole elements). */
static void coll_layout(worker *w, coll_rank *cr, int kind, bool in_place, int r, uint64_t count,
                        uint64_t send_bytes, uint64_t recv_bytes, unsigned esz)
{
    uint64_t pad[4];
    for (int k = 0; k < 4; k++)
        pad[k] = esz * rnd_below(&w->rng, COLL_PAD + 1);
    cr->size[1] = 0;
    cr->send_blk = cr->recv_blk = 0;
    if (in_place) {
        uint64_t region = send_bytes > recv_bytes ? send_bytes : recv_bytes;
        cr->size[0] = pad[0] + region + pad[1];
        cr->send_off = cr->recv_off = pad[0];
        if (kind == COLL_ALL_GATHER)
            cr->send_off += (uint64_t)r * count * esz;
        else if (kind == COLL_REDUCE_SCATTER)
            cr->recv_off += (uint64_t)r * count * esz;
    } else if (rnd_below(&w->rng, 2) == 0) {
        cr->size[0] = pad[0] + send_bytes + pad[1];
        cr->size[1] = pad[2] + recv_bytes + pad[3];
        cr->send_off = pad[0];
        cr->recv_blk = 1;
        cr->recv_off = pad[2];
    } else if (rnd_below(&w->rng, 2) == 0) {
        cr->size[0] = pad[0] + send_bytes + pad[1] + recv_bytes + pad[2];
        cr->send_off = pad[0];
        cr->recv_off = pad[0] + send_bytes + pad[1];
    } else {
        cr->size[0] = pad[0] + recv_bytes + pad[1] + send_bytes + pad[2];
        cr->recv_off = pad[0];
        cr->send_off = pad[0] + recv_bytes + pad[1];
    }
}

static int coll_post(coll_rank *cr, int r, int kind, dv_stream s, uint64_t count, dv_nccl_type t,
                     dv_nccl_op op, int root)
{
    dv_nccl_buf send = dv_nccl_at(cr->send_null ? DV_REF_NULL : cr->blk[cr->send_blk],
                                  cr->send_null ? 0 : cr->send_off);
    dv_nccl_buf recv = dv_nccl_at(cr->blk[cr->recv_blk], cr->recv_off);
    switch (kind) {
    case COLL_ALL_REDUCE:
        return dv_nccl_all_reduce(run.comm, r, s, send, recv, count, t, op, &cr->f);
    case COLL_BROADCAST:
        return dv_nccl_broadcast(run.comm, r, s, send, recv, count, t, root, &cr->f);
    case COLL_ALL_GATHER:
        return dv_nccl_all_gather(run.comm, r, s, send, recv, count, t, &cr->f);
    default:
        return dv_nccl_reduce_scatter(run.comm, r, s, send, recv, count, t, op, &cr->f);
    }
}

/* One collective over every rank, checked. */
static void coll_step(worker *w, coll_state *cs)
{
    static const dv_nccl_type reduce_types[] = {DV_NCCL_I32, DV_NCCL_I64, DV_NCCL_F32, DV_NCCL_F64};
    static const dv_nccl_type copy_types[] = {DV_NCCL_U8, DV_NCCL_I32, DV_NCCL_F32, DV_NCCL_I64};
    static const dv_nccl_op ops[] = {DV_NCCL_SUM, DV_NCCL_MAX, DV_NCCL_MIN};
    int n = run.ndev;
    int kind = (int)rnd_below(&w->rng, COLL_KINDS);
    bool reduce = kind == COLL_ALL_REDUCE || kind == COLL_REDUCE_SCATTER;
    dv_nccl_type t =
        reduce ? reduce_types[rnd_below(&w->rng, 4)] : copy_types[rnd_below(&w->rng, 4)];
    dv_nccl_op op = reduce ? ops[rnd_below(&w->rng, 3)] : DV_NCCL_SUM;
    unsigned esz = dv_nccl_type_size(t);
    int root = (int)rnd_below(&w->rng, (uint64_t)n);
    uint64_t most = COLL_PART / ((uint64_t)n * esz);
    uint64_t count = rnd_log(&w->rng, 1, most);
    bool in_place = rnd_below(&w->rng, 3) == 0;
    uint64_t serial = ++cs->serial;
    uint64_t send_elems = kind == COLL_REDUCE_SCATTER ? (uint64_t)n * count : count;
    uint64_t recv_elems = kind == COLL_ALL_GATHER ? (uint64_t)n * count : count;
    enum op_kind okind = (enum op_kind)(OP_ALL_REDUCE + kind);

    /* Each rank's blocks: a byte everywhere, then its send buffer. */
    for (int r = 0; r < n; r++) {
        coll_rank *cr = &cs->rank[r];
        dv_actor *a = run.dev[r].actor;
        coll_layout(w, cr, kind, in_place, r, count, send_elems * esz, recv_elems * esz, esz);
        cr->send_null = kind == COLL_BROADCAST && r != root && rnd_below(&w->rng, 2) == 0;
        for (int k = 0; k < 2 && cr->size[k] != 0; k++) {
            int rc;
            TIMED(w, OP_ALLOC, rc,
                  dv_alloc_wait(a, cr->size[k], pick_stream(w), "stress-nccl", ALLOC_WAIT_NS,
                                &cr->blk[k]));
            if (rc != DV_OK) {
                w->coll_no_memory++;
                coll_release(w, cs);
                return;
            }
            uint8_t byte = (uint8_t)rnd(&w->rng);
            memset(cr->want[k], byte, cr->size[k]);
            TIMED(w, OP_MEMSET, rc, dv_memset(a, cr->blk[k], 0, byte, cr->size[k], pick_stream(w)));
            if (rc != DV_OK) {
                coll_release(w, cs);
                return;
            }
        }
        if (cr->send_null)
            continue;
        uint8_t *in = cr->want[cr->send_blk] + cr->send_off;
        uint64_t elems = in_place && kind == COLL_ALL_GATHER ? count : send_elems;
        for (uint64_t e = 0; e < elems; e++)
            coll_value(in + e * esz, t, !reduce, serial, r, e);
        int rc;
        TIMED(
            w, OP_HTOD, rc,
            dv_copy_htod(a, cr->blk[cr->send_blk], cr->send_off, in, elems * esz, pick_stream(w)));
        if (rc != DV_OK) {
            coll_release(w, cs);
            return;
        }
    }

    /* Every rank's part, in a random order, then every block's read-back,
     * each on a random stream. */
    int order[DV_MAX_DEVICES];
    for (int r = 0; r < n; r++)
        order[r] = r;
    for (int r = n - 1; r > 0; r--) {
        int x = (int)rnd_below(&w->rng, (uint64_t)r + 1), tmp = order[r];
        order[r] = order[x];
        order[x] = tmp;
    }
    uint64_t t0 = now_ns();
    for (int k = 0; k < n; k++) {
        coll_rank *cr = &cs->rank[order[k]];
        dv_future_init(&cr->f, 0);
        cr->rc = coll_post(cr, order[k], kind, pick_stream(w), count, t, op, root);
        /* Refused before posting: the ranks posted wait out the timeout;
         * the reason is this call's. */
        if (cr->rc != DV_OK)
            fprintf(stderr, "\ndv-stress: collective %" PRIu64 ", rank %d: %s: %s\n", serial,
                    order[k], dv_err_name(cr->rc), dv_last_error()->message);
    }
    for (int r = 0; r < n; r++) {
        coll_rank *cr = &cs->rank[r];
        for (int k = 0; k < 2; k++) {
            cr->rrc[k] = DV_OK;
            if (cr->size[k] == 0)
                continue;
            dv_future_init(&cr->rf[k], 0);
            cr->rrc[k] = dv_copy_dtoh_async(run.dev[r].actor, cr->got[k], cr->blk[k], 0,
                                            cr->size[k], pick_stream(w), &cr->rf[k]);
        }
    }
    int failed = DV_OK;
    for (int r = 0; r < n; r++) {
        coll_rank *cr = &cs->rank[r];
        int rc = cr->rc == DV_OK ? dv_future_wait(&cr->f) : cr->rc;
        if (rc != DV_OK && failed == DV_OK)
            failed = rc;
    }
    hist_add(&w->lat[okind], now_ns() - t0);
    w->calls[okind]++;
    atomic_fetch_add_explicit(&w->live_ops, 1, memory_order_relaxed);
    if (failed != DV_OK)
        count_error(w, okind, failed);
    else
        atomic_fetch_add_explicit(&w->live_coll, 1, memory_order_relaxed);
    for (int r = 0; r < n; r++) {
        coll_rank *cr = &cs->rank[r];
        for (int k = 0; k < 2 && cr->size[k] != 0; k++) {
            uint64_t r0 = now_ns();
            int rc = cr->rrc[k] == DV_OK ? dv_future_wait(&cr->rf[k]) : cr->rrc[k];
            hist_add(&w->lat[OP_DTOH], now_ns() - r0);
            w->calls[OP_DTOH]++;
            atomic_fetch_add_explicit(&w->live_ops, 1, memory_order_relaxed);
            if (rc != DV_OK) {
                count_error(w, OP_DTOH, rc);
                if (failed == DV_OK)
                    failed = rc;
            }
        }
    }
    if (failed != DV_OK) {
        coll_release(w, cs);
        return;
    }

    /* The results, on the host, and every byte compared. */
    bool all_right = true;
    for (int r = 0; r < n; r++) {
        coll_rank *cr = &cs->rank[r];
        uint8_t *out = cr->want[cr->recv_blk] + cr->recv_off;
        for (uint64_t e = 0; e < recv_elems; e++) {
            uint8_t *x = out + e * esz;
            switch (kind) {
            case COLL_ALL_REDUCE:
                coll_reduced(x, t, op, serial, n, e);
                break;
            case COLL_BROADCAST:
                coll_value(x, t, true, serial, root, e);
                break;
            case COLL_ALL_GATHER:
                coll_value(x, t, true, serial, (int)(e / count), e % count);
                break;
            default:
                coll_reduced(x, t, op, serial, n, (uint64_t)r * count + e);
                break;
            }
        }
        for (int k = 0; k < 2 && cr->size[k] != 0; k++) {
            w->verifies++;
            w->bytes_verified += cr->size[k];
            w->coll_bytes_checked += cr->size[k];
            if (memcmp(cr->got[k], cr->want[k], cr->size[k]) == 0)
                continue;
            uint64_t first = 0, last = 0;
            uint64_t bad = count_wrong(w, cr->got[k], cr->want[k], cr->size[k], &first, &last);
            w->coll_bad_bytes += bad;
            all_right = false;
            describe_mismatch(
                "collective %" PRIu64 ": %s %s%s%s of %" PRIu64 " elements (root %d%s), rank %d "
                "block %d (%" PRIu64 " B, send at %" PRIu64 " in block %d%s, recv at %" PRIu64
                " in block %d): %" PRIu64 " bytes wrong, first at %" PRIu64
                " (got %#04x want %#04x), last at %" PRIu64,
                serial, op_names[okind], type_name(t), reduce ? " " : "", reduce ? op_name(op) : "",
                count, root, in_place ? ", in place" : "", r, k, cr->size[k], cr->send_off,
                cr->send_blk, cr->send_null ? " (NULL)" : "", cr->recv_off, cr->recv_blk, bad,
                first, cr->got[k][first], cr->want[k][first], last);
        }
    }
    w->coll_checks++;
    if (!all_right)
        w->coll_bad++;
    coll_release(w, cs);
}

/* The thread that drives every rank's collectives, until the run ends. */
static void *coll_main(void *arg)
{
    worker *w = arg;
    coll_state *cs = calloc(1, sizeof(*cs));
    bool ok = cs != NULL;
    for (int r = 0; ok && r < run.ndev; r++)
        for (int k = 0; k < 2 && ok; k++)
            ok = (cs->rank[r].want[k] = malloc(COLL_BLOCK)) != NULL &&
                 (cs->rank[r].got[k] = malloc(COLL_BLOCK)) != NULL;
    if (!ok) {
        fprintf(stderr, "dv-stress: no host memory for the collectives\n");
        w->unexpected++;
    }
    while (ok && !atomic_load_explicit(&run.stop, memory_order_relaxed))
        coll_step(w, cs);
    for (int r = 0; cs != NULL && r < run.ndev; r++)
        for (int k = 0; k < 2; k++) {
            free(cs->rank[r].want[k]);
            free(cs->rank[r].got[k]);
        }
    free(cs);
    return NULL;
}

static void step(worker *w)
{
    uint64_t r = rnd_below(&w->rng, 100);
    if (w->nlive == 0 || (r < 20 && w->nlive < run.max_live)) {
        do_alloc(w);
        return;
    }
    uint32_t i = (uint32_t)rnd_below(&w->rng, w->nlive);
    block *b = &w->blocks[i];
    if (!b->known) {
        do_write(w, i, true);
    } else if (run.ndev > 1 && rnd_below(&w->rng, 100) < 8) {
        do_peer(w, i); /* a draw of its own: one device's mix stays as it was */
    } else if (r < 28) {
        do_write(w, i, false);
    } else if (r < 36) {
        do_memset(w, i);
    } else if (r < 46) {
        uint32_t j = pick_other_known(w, i);
        if (j != i)
            do_dtod(w, i, j);
        else
            do_memset(w, i);
    } else if (r < 53) {
        if (w->dev->fill != NULL)
            do_fill(w, i);
        else
            do_memset(w, i);
    } else if (r < 59) {
        if (w->dev->add != NULL && w->dev->fill != NULL)
            do_add(w, i);
        else
            do_memset(w, i);
    } else if (r < 64) {
        if (w->dev->checksum != NULL)
            do_checksum(w, i);
        else
            (void)verify(w, i, 0, b->size);
    } else if (r < 70) {
        uint32_t j = pick_other_known(w, i);
        if (j == i)
            do_memset(w, i);
        else if (run.tasks)
            do_task(w, i, j);
        else
            do_dtod(w, i, j);
    } else if (r < 82) {
        uint64_t len = rnd_below(&w->rng, 2) ? b->size : rnd_log(&w->rng, 1, b->size);
        (void)verify(w, i, rnd_below(&w->rng, b->size - len + 1), len);
    } else if (r < 98) {
        verify_and_release(w, i);
    } else if (r < 99 || (w->dev->blas == NULL && w->dev->fft == NULL)) {
        int rc;
        TIMED(w, OP_SYNC, rc, dv_sync(w->dev->actor, pick_stream(w)));
    } else if (w->dev->fft == NULL || (w->dev->blas != NULL && rnd_below(&w->rng, 2) == 0)) {
        do_gemm(w);
    } else {
        do_fft(w);
    }
}

static bool keep_going(void)
{
    if (run.opt.ops > 0)
        return atomic_fetch_add_explicit(&run.steps, 1, memory_order_relaxed) < run.opt.ops &&
               !atomic_load_explicit(&run.stop, memory_order_relaxed);
    atomic_fetch_add_explicit(&run.steps, 1, memory_order_relaxed);
    return !atomic_load_explicit(&run.stop, memory_order_relaxed);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    while (keep_going())
        step(w);
    /* Clean close: verify and release everything, then wait for every
     * stream, so this thread's frees were handled before it leaves. */
    while (w->nlive > 0)
        verify_and_release(w, w->nlive - 1);
    if (w->result.bits != 0) {
        int rc;
        TIMED(w, OP_RELEASE, rc, dv_ref_release(w->result));
        w->result = DV_REF_NULL;
    }
    for (dv_stream s = 0; s < run.streams; s++) {
        int rc;
        TIMED(w, OP_SYNC, rc, dv_sync(w->dev->actor, s));
    }
    /* Its host buffers go back on the main thread, after the join: what
     * this thread waited for goes along (the checker cannot see a join). */
    (void)dv_order_export(w->dev->actor, &w->handover);
    return NULL;
}

/* ------------------------------------------------------------------------
 * Options
 * ------------------------------------------------------------------------ */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: dv-stress [--threads N] [--seconds S | --ops N] [--seed N]\n"
            "                 [--backend cuda|sim|auto] [--budget BYTES] [--faults]\n"
            "                 [--sim-delay US] [--streams N] [--blocks N] [--no-pool]\n"
            "                 [--no-check-order] [--device N | --devices N] [--conf TEXT]\n"
            "\n"
            "N client threads post a random mix on one actor: allocate (256 B .. 16 MiB,\n"
            "log-uniform, random stream), write a pattern host->device, memset a\n"
            "sub-range, copy device->device between two of the thread's blocks on\n"
            "another stream, launch fill_u32 (a block or a 4-aligned sub-range), add_u32\n"
            "(of two ranges that each hold one u32 word) and checksum (compared with\n"
            "the host's sum of the expected words), run a task that copies one block to\n"
            "another (a host function on the sim, cuMemcpyDtoDAsync on cuda), read back\n"
            "device->host and verify every byte, release; now and then a GEMM and an\n"
            "FFT through the library actors (devactor_blas.h, devactor_fft.h) on their own\n"
            "small blocks, checked against the host.  Launches and tasks declare\n"
            "their accesses through handles, so the library's fences keep data right.\n"
            "The budget is below what the working sets want, so allocations are\n"
            "refused (DV_EOUT_OF_BUDGET): the thread releases a block and goes on.\n"
            "A third of the threads copy with pageable host buffers (staged), a third\n"
            "with dv_host_alloc buffers, a third with their own registered with\n"
            "dv_host_register; the report gives each kind's copy bandwidth.\n"
            "The first line names the backend and device; a progress line goes to\n"
            "stderr (every second on a terminal, else every 5 s); the report goes to\n"
            "stdout.\n"
            "\n"
            "With --devices N, one actor per device (0 .. N-1) and the threads spread\n"
            "over them, each running the mix above on its own device; besides, the\n"
            "threads make peer copies (a range of one of their blocks copied by another\n"
            "device's actor into a fresh block there, read back and compared, half the\n"
            "time copied back onto one of their own blocks, checked by later reads),\n"
            "and one more thread drives collectives over a communicator of all N\n"
            "actors (devactor_nccl.h: NCCL on cuda, host reductions on the sim):\n"
            "all-reduce (sum, max, min of small integers or floats whose sums are\n"
            "exact), broadcast, all-gather and reduce-scatter, in place or not, each\n"
            "rank's blocks read back whole (padding included) and every byte compared\n"
            "with the host's result.  Where NCCL does not open (cuda), the peer copies\n"
            "run alone and the report says so.\n"
            "\n"
            "  --threads N     client threads (default: online CPUs, at least 3: one for\n"
            "                  each kind of host buffer)\n"
            "  --seconds S     time for new work (default 10; then the threads finish what\n"
            "                  they began and everything is checked, which a loaded machine\n"
            "                  may make long); SIGINT or SIGTERM ends the run early,\n"
            "                  its work checked and reported as at its end (a second one\n"
            "                  kills it)\n"
            "  --ops N         stop after N steps of the mix over all threads (overrides\n"
            "                  --seconds; a step is one operation, a release is a read-back\n"
            "                  and the release; the report's ops count also the read-backs,\n"
            "                  releases and syncs of the final drain)\n"
            "  --seed N        seeds the mix and the sim's delays (default: from the clock;\n"
            "                  printed on the line that sets out the run, below the\n"
            "                  backend's)\n"
            "  --backend B     cuda, sim or auto (default auto: $DV_BACKEND, else cuda when a\n"
            "                  device answers, else sim; with --faults, sim)\n"
            "  --budget BYTES  device budget (each device's), K/M/G suffixes, 16M to 262144G\n"
            "                  (default 256M on the sim, 2G on cuda)\n"
            "  --faults        sim only: arm failed driver allocations and CUDA_ERROR_UNKNOWN\n"
            "                  on memcpy calls, kernel launches and task host functions\n"
            "                  every so often, and poison the context\n"
            "                  (recoverably) at 35%% and 70%% of the run; the actor rebuilds,\n"
            "                  clients drop stale handles and keep verifying.  The actor\n"
            "                  tries a refused allocation again (it reaps and trims\n"
            "                  first), so one injected failure seldom reaches a client\n"
            "                  as DV_EDEVICE_OOM\n"
            "  --sim-delay US  random delay before each op on the sim, up to US (default 20)\n"
            "  --streams N     the actor's stream pool (default 4)\n"
            "  --blocks N      live blocks per thread at most, at least 2 (default: 8, or\n"
            "                  more so that all threads together average 1.25x the budget)\n"
            "  --no-pool       allocate straight from the driver's stream-ordered allocator\n"
            "  --conf TEXT     more of the actors' configuration, as DEVACTOR_CONF, over the\n"
            "                  options above (e.g. pool_alias:1 for the pool with aliases;\n"
            "                  keys: dv_actor_config_parse in devactor.h); given again,\n"
            "                  applied over the ones before\n"
            "  --no-check-order  run without the stream-order checker (on by default; the\n"
            "                  summary's throughput shows its overhead; DV_CHECK_ORDER=1\n"
            "                  in the environment turns it on regardless)\n"
            "  --device N      device ordinal (default 0)\n"
            "  --devices N     N devices (2 .. 16): peer copies and collectives besides\n"
            "                  the mix (above); the sim simulates N devices, cuda takes the\n"
            "                  first N visible and refuses when fewer are there; threads\n"
            "                  default to at least N; not with --faults\n"
            "  --self-test     check the harness's own verification (the expected bytes,\n"
            "                  that a wrong byte anywhere is caught, the checksum, the\n"
            "                  collectives' expected reductions) with no device; TAP on\n"
            "                  stdout, exit 1 on a failure\n"
            "  --help          this text\n"
            "\n"
            "Expected errors: DV_EOUT_OF_BUDGET; with --faults also DV_EDEVICE_OOM,\n"
            "DV_EDRIVER, DV_ECONTEXT_LOST and DV_ESTALE.  A wrong byte counts only for a\n"
            "block whose whole life was inside one context generation.\n"
            "\n"
            "The report's \"integrity:\" line counts every read-back compared (peer copies'\n"
            "and collectives' too); with --devices a \"devices:\" line counts the peer\n"
            "copies and collectives run and their wrong bytes.\n"
            "\n"
            "Exit status: 0 when every byte and every checksum matched, the stream-order\n"
            "checker found no hazard, nothing leaked (bytes outstanding and refs alive 0\n"
            "at the end) and no unexpected error occurred; 1 on an integrity failure, a\n"
            "hazard or a leak; 2 on an unexpected error (a report that could not be\n"
            "written too), a usage error or a device error\n"
            "(e.g. --backend cuda without a GPU, or with fewer than --devices asks for; a\n"
            "communicator that fails for another reason than NCCL missing).\n");
}

/*
 * The verification's own check: a harness that compared nothing would
 * pass every run.  A block of every kind of segment, its expected bytes
 * against the pattern's definition byte by byte, a wrong byte caught
 * wherever it is (chunk edges included), and the checksum made a chunk
 * at a time against one pass.
 */
static int self_test(void)
{
    static block b;
    uint64_t size = 3 * EXPECT_CHUNK + 4100;
    uint8_t *full = malloc(size), *tmp = malloc(EXPECT_CHUNK);
    int failed = 0, n = 0;
    if (full == NULL || tmp == NULL) {
        printf("Bail out! out of memory\n");
        return 1;
    }
    b.size = size;
    b.known = true;
    b.nsegs = 0;
    b.segs[b.nsegs++] = (seg){0, 1001, UINT64_C(0x1234567), 3};
    b.segs[b.nsegs++] = (seg){1001, 1500, 0, 0x5A};
    b.segs[b.nsegs++] = (seg){1500, EXPECT_CHUNK + 9, U32_CONSTANT | 0xA1B2C3D4u, 1502};
    b.segs[b.nsegs++] = (seg){EXPECT_CHUNK + 9, size, UINT64_C(0x7654321), 5};

#define SELF_OK(cond, ...)                                                                         \
    do {                                                                                           \
        bool ok_ = (cond);                                                                         \
        failed += !ok_;                                                                            \
        printf("%s %d - ", ok_ ? "ok" : "not ok", ++n);                                            \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
    } while (0)

    expected(&b, 0, size, full);
    uint64_t wrong = 0;
    for (uint64_t k = 0; k < size; k++) {
        const seg *sg = &b.segs[0];
        for (uint32_t i = 0; i < b.nsegs; i++)
            if (k >= b.segs[i].start && k < b.segs[i].end)
                sg = &b.segs[i];
        uint8_t want = sg->serial == 0 ? (uint8_t)sg->pos
                                       : pattern_byte(sg->serial, sg->pos + (k - sg->start));
        wrong += full[k] != want;
    }
    SELF_OK(wrong == 0, "expected bytes match the pattern byte by byte (%" PRIu64 " wrong)", wrong);
    SELF_OK(matches(&b, 0, size, full, tmp), "the whole block matches itself");
    SELF_OK(matches(&b, 777, size - 1000, full + 777, tmp), "a range at an odd offset matches");
    const uint64_t at[] = {0, 1000, 1001, EXPECT_CHUNK - 1, EXPECT_CHUNK, 2 * EXPECT_CHUNK + 3,
                           size - 1};
    for (unsigned i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
        full[at[i]] ^= 0x10;
        SELF_OK(!matches(&b, 0, size, full, tmp), "a wrong byte at %" PRIu64 " is caught", at[i]);
        full[at[i]] ^= 0x10;
    }
    uint64_t words = (size - 8) / 4;
    SELF_OK(expected_checksum(&b, 8, words, tmp) == host_checksum(full + 8, words, 0),
            "the checksum made a chunk at a time equals one pass");
    full[8 + 4 * (words - 1)] ^= 1;
    SELF_OK(expected_checksum(&b, 8, words, tmp) != host_checksum(full + 8, words, 0),
            "a wrong last word changes the checksum");
    uint64_t inexact = 0;
    SELF_OK(coll_sums_exact(&inexact),
            "the collectives' expected reductions equal the device's in every rank order, "
            "%" PRIu64 " differ",
            inexact);
#undef SELF_OK
    printf("1..%d\n", n);
    free(full);
    free(tmp);
    return failed ? 1 : 0;
}

static int parse_options(int argc, char **argv, options *o)
{
    static const struct option opts[] = {{"threads", required_argument, NULL, 't'},
                                         {"seconds", required_argument, NULL, 's'},
                                         {"ops", required_argument, NULL, 'o'},
                                         {"seed", required_argument, NULL, 'S'},
                                         {"backend", required_argument, NULL, 'b'},
                                         {"budget", required_argument, NULL, 'B'},
                                         {"faults", no_argument, NULL, 'f'},
                                         {"sim-delay", required_argument, NULL, 'D'},
                                         {"streams", required_argument, NULL, 'n'},
                                         {"blocks", required_argument, NULL, 'k'},
                                         {"no-pool", no_argument, NULL, 'P'},
                                         {"device", required_argument, NULL, 'd'},
                                         {"help", no_argument, NULL, 'h'},
                                         {"no-check-order", no_argument, NULL, 'C'},
                                         {"self-test", no_argument, NULL, 'T'},
                                         {"devices", required_argument, NULL, 'N'},
                                         {"conf", required_argument, NULL, 'c'},
                                         {NULL, 0, NULL, 0}};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    bool seeded = false, threads_given = false;
    uint64_t v;
    int c;

    /* At least three: one for each kind of host buffer (below). */
    *o = (options){.threads = cpus > 3 ? (int)cpus : 3,
                   .seconds = 10,
                   .backend = DV_BACKEND_AUTO,
                   .sim_delay_us = 20,
                   .streams = 4,
                   .pool = true,
                   .check_order = true};
    int which = 0;
    while ((c = getopt_long(argc, argv, "", opts, &which)) != -1) {
        switch (c) {
        case 't':
            if (!tool_whole_number(optarg, &v) || v < 1 || v > 1024)
                goto bad_value;
            o->threads = (int)v;
            threads_given = true;
            break;
        case 's': {
            char *end;
            o->seconds = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || !(o->seconds > 0) || o->seconds > 1e6)
                goto bad_value;
            break;
        }
        case 'o':
            if (!tool_whole_number(optarg, &o->ops) || o->ops == 0)
                goto bad_value;
            break;
        case 'S':
            if (!tool_whole_number(optarg, &o->seed))
                goto bad_value;
            seeded = true;
            break;
        case 'b':
            if (strcmp(optarg, "cuda") == 0)
                o->backend = DV_BACKEND_CUDA;
            else if (strcmp(optarg, "sim") == 0)
                o->backend = DV_BACKEND_SIM;
            else if (strcmp(optarg, "auto") == 0)
                o->backend = DV_BACKEND_AUTO;
            else
                goto bad_value;
            break;
        case 'B':
            if (!parse_bytes(optarg, &o->budget) || o->budget < MAX_BLOCK ||
                o->budget > (UINT64_C(1) << 48))
                goto bad_value;
            break;
        case 'f':
            o->faults = true;
            break;
        case 'D':
            if (!tool_whole_number(optarg, &v) || v > 1000000)
                goto bad_value;
            o->sim_delay_us = (uint32_t)v;
            break;
        case 'n':
            if (!tool_whole_number(optarg, &v) || v < 1 || v > 64)
                goto bad_value;
            o->streams = (uint32_t)v;
            break;
        case 'k':
            if (!tool_whole_number(optarg, &v) || v < 2 || v > MAX_LIVE)
                goto bad_value;
            o->blocks = (uint32_t)v;
            break;
        case 'P':
            o->pool = false;
            break;
        case 'C':
            o->check_order = false;
            break;
        case 'd':
            if (!tool_whole_number(optarg, &v) || v >= DV_MAX_DEVICES)
                goto bad_value;
            o->device = (int)v;
            break;
        case 'N':
            if (!tool_whole_number(optarg, &v) || v < 2 || v > DV_MAX_DEVICES)
                goto bad_value;
            o->devices = (int)v;
            break;
        case 'c': {
            /* Parsed here too, so that a bad key is a usage error. */
            dv_actor_config probe;
            dv_actor_config_init(&probe);
            if (dv_actor_config_parse(&probe, optarg) != DV_OK) {
                fprintf(stderr, "dv-stress: --conf: %s\n", dv_last_error()->message);
                return 2;
            }
            dv_actor_config plain;
            dv_actor_config_init(&plain);
            if (probe.backend != plain.backend ||
                probe.sim_memory_bytes != plain.sim_memory_bytes) {
                fprintf(stderr, "dv-stress: --conf: backend and sim_memory choose the driver, "
                                "which dv-stress opens itself: use --backend (the sim's memory "
                                "follows --budget)\n");
                return 2;
            }
            if (o->conf != NULL) { /* given again: over the ones before (leaked: a few bytes) */
                char *both = malloc(strlen(o->conf) + strlen(optarg) + 2);
                if (both == NULL)
                    return 2;
                sprintf(both, "%s,%s", o->conf, optarg);
                o->conf = both;
            } else {
                o->conf = optarg;
            }
            break;
        }
        case 'h':
            usage(stdout);
            exit(0);
        case 'T':
            exit(self_test());
        default:
            usage(stderr);
            return 2;
        }
        continue;
    bad_value:
        fprintf(stderr, "dv-stress: bad value \"%s\" for --%s\n", optarg, opts[which].name);
        usage(stderr);
        return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "dv-stress: unexpected argument \"%s\"\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (o->faults) {
        if (o->backend == DV_BACKEND_CUDA) {
            fprintf(stderr, "dv-stress: --faults needs the simulated device (--backend sim)\n");
            return 2;
        }
        o->backend = DV_BACKEND_SIM;
    }
    if (o->devices > 0) {
        if (o->faults) {
            fprintf(stderr, "dv-stress: --faults and --devices do not go together (yet)\n");
            return 2;
        }
        if (o->device != 0) {
            fprintf(stderr, "dv-stress: --devices N takes devices 0 .. N-1: leave out --device\n");
            return 2;
        }
        if (!threads_given && o->threads < o->devices)
            o->threads = o->devices;
        if (o->threads < o->devices) {
            fprintf(stderr, "dv-stress: --devices %d needs at least %d threads (one per device)\n",
                    o->devices, o->devices);
            return 2;
        }
    }
    if (!seeded)
        o->seed = mix64(now_ns() ^ ((uint64_t)getpid() << 32)) & 0xFFFFFFFFu;
    return 0;
}

/* ------------------------------------------------------------------------
 * Reporting
 * ------------------------------------------------------------------------ */

static const char *human_bytes(double b, char *buf, size_t cap)
{
    if (b >= (double)GIB)
        snprintf(buf, cap, "%.2f GiB", b / (double)GIB);
    else if (b >= (double)MIB)
        snprintf(buf, cap, "%.1f MiB", b / (double)MIB);
    else if (b >= (double)KIB)
        snprintf(buf, cap, "%.1f KiB", b / (double)KIB);
    else
        snprintf(buf, cap, "%.0f B", b);
    return buf;
}

static const char *human_ns(double ns, char *buf, size_t cap)
{
    if (ns >= 1e9)
        snprintf(buf, cap, "%.2f s", ns / 1e9);
    else if (ns >= 1e6)
        snprintf(buf, cap, "%.2f ms", ns / 1e6);
    else if (ns >= 1e3)
        snprintf(buf, cap, "%.1f us", ns / 1e3);
    else
        snprintf(buf, cap, "%.0f ns", ns);
    return buf;
}

static const char *state_name(dv_actor_state s)
{
    switch (s) {
    case DV_ACTOR_RUNNING:
        return "running";
    case DV_ACTOR_REBUILDING:
        return "rebuilding";
    case DV_ACTOR_LOST:
        return "lost";
    case DV_ACTOR_STOPPING:
        return "stopping";
    case DV_ACTOR_STOPPED:
        return "stopped";
    default:
        return "?";
    }
}

static void totals(worker *ws, int n, uint64_t *ops, uint64_t *errors)
{
    *ops = *errors = 0;
    for (int i = 0; i < n; i++) {
        *ops += atomic_load_explicit(&ws[i].live_ops, memory_order_relaxed);
        *errors += atomic_load_explicit(&ws[i].live_errors, memory_order_relaxed);
    }
}

/* The most the checker held at a progress line. */
static uint64_t check_peak_bytes, check_peak_pieces;

/* One device's statistics, or the sum over every device's (the fields
 * the report and the progress line use). */
static int stats_sum(dv_actor_stats *sum)
{
    int rc = DV_OK;
    memset(sum, 0, sizeof(*sum));
    for (int d = 0; d < run.ndev; d++) {
        dv_actor_stats st = {0};
        int src = dv_actor_stats_get(run.dev[d].actor, &st);
        if (src != DV_OK && rc == DV_OK)
            rc = src;
        sum->bytes_outstanding += st.bytes_outstanding;
        sum->refs_alive += st.refs_alive;
        sum->check_bytes += st.check_bytes;
        sum->check_pieces += st.check_pieces;
    }
    return rc;
}

static void progress(worker *ws, int n, bool tty, double elapsed, double rate)
{
    dv_actor_stats st = {0};
    uint64_t o, errors;
    char b1[32], b2[32], chk[64] = "", multi[64] = "";
    totals(ws, n, &o, &errors);
    int rc = stats_sum(&st);
    if (run.ndev > 1) {
        uint64_t peer = 0, coll = 0;
        for (int i = 0; i < n; i++) {
            peer += atomic_load_explicit(&ws[i].live_peer, memory_order_relaxed);
            coll += atomic_load_explicit(&ws[i].live_coll, memory_order_relaxed);
        }
        snprintf(multi, sizeof(multi), "  peer copies %" PRIu64 "  collectives %" PRIu64, peer,
                 coll);
    }
    if (st.check_bytes > check_peak_bytes)
        check_peak_bytes = st.check_bytes;
    if (st.check_pieces > check_peak_pieces)
        check_peak_pieces = st.check_pieces;
    if (st.check_bytes != 0)
        snprintf(chk, sizeof(chk), "  checker %" PRIu64 " pieces %s", st.check_pieces,
                 human_bytes((double)st.check_bytes, b2, sizeof(b2)));
    fprintf(stderr,
            "%s[%6.1f s] %9.0f ops/s  %10" PRIu64 " ops  outstanding %s%s  refs %" PRIu64
            "  errors %" PRIu64 "%s%s%s",
            tty ? "\r" : "", elapsed, rate, o, rc == DV_OK ? "" : "? ",
            human_bytes((double)st.bytes_outstanding, b1, sizeof(b1)), st.refs_alive, errors, multi,
            chk, tty ? "\033[K" : "\n");
    fflush(stderr);
}

/* ------------------------------------------------------------------------
 * Faults
 * ------------------------------------------------------------------------ */

typedef struct faults {
    uint64_t rng;
    uint64_t next_alloc_ns, next_inject_ns;
    int poisons_done;
    uint64_t armed_allocs, armed_calls, poisons;
} faults;

static const dv_drv_call injected_calls[] = {DV_CALL_MEMCPY_HTOD, DV_CALL_MEMCPY_DTOH,
                                             DV_CALL_MEMCPY_DTOD, DV_CALL_LAUNCH, DV_CALL_HOST_FN};
#define NINJECTED (sizeof(injected_calls) / sizeof(injected_calls[0]))

static void faults_tick(faults *f, uint64_t now, double fraction)
{
    if (now >= f->next_alloc_ns) {
        if (dv__sim_fail_alloc_nth(run.drv, 1 + rnd_below(&f->rng, 4)) == DV_OK)
            f->armed_allocs++;
        f->next_alloc_ns = now + 100000000u + rnd_below(&f->rng, 200000000u);
    }
    if (now >= f->next_inject_ns) {
        dv_drv_call call = injected_calls[rnd_below(&f->rng, NINJECTED)];
        if (dv__sim_inject(run.drv, call, 1 + rnd_below(&f->rng, 64), DV_CU_UNKNOWN) == DV_OK)
            f->armed_calls++;
        f->next_inject_ns = now + 50000000u + rnd_below(&f->rng, 150000000u);
    }
    static const double poison_at[] = {0.35, 0.70};
    if (f->poisons_done < 2 && fraction >= poison_at[f->poisons_done]) {
        if (dv__sim_poison(run.drv, run.opt.device, DV_SIM_POISON_RECOVERABLE, 0) == DV_OK)
            f->poisons++;
        f->poisons_done++;
    }
}

static void faults_disarm(void)
{
    (void)dv__sim_fail_alloc_nth(run.drv, 0);
    for (size_t i = 0; i < NINJECTED; i++)
        (void)dv__sim_inject(run.drv, injected_calls[i], 0, 0);
}

/* ------------------------------------------------------------------------
 * Main
 * ------------------------------------------------------------------------ */

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* The built-in kernels of every device (launches are left out where the
 * backend has none) and a way to copy inside a task: why tasks are left
 * out, or NULL. */
static const char *setup_kernels_and_tasks(void **libcuda)
{
    for (int d = 0; d < run.ndev; d++) {
        device *dev = &run.dev[d];
        if (dv_kernel_get(dev->actor, NULL, 0, "fill_u32", &dev->fill) != DV_OK ||
            dv_kernel_get(dev->actor, NULL, 0, "add_u32", &dev->add) != DV_OK ||
            dv_kernel_get(dev->actor, NULL, 0, "checksum", &dev->checksum) != DV_OK) {
            fprintf(stderr, "dv-stress: no built-in kernels (%s): launches are left out\n",
                    dv_last_error()->message);
            for (int k = 0; k < run.ndev; k++)
                run.dev[k].fill = run.dev[k].add = run.dev[k].checksum = NULL;
            break;
        }
    }
    if (run.sim) {
        run.tasks = true;
        return NULL;
    }
    *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (*libcuda != NULL)
        run.cu_memcpy_dtod_async = (cu_memcpy_dtod_async_fn)dlsym(*libcuda, "cuMemcpyDtoDAsync_v2");
    run.tasks = run.cu_memcpy_dtod_async != NULL;
    return run.tasks ? NULL : "none (no cuMemcpyDtoDAsync_v2 in libcuda.so.1)";
}

/* The library actors, the actors, the driver (whichever exist). */
static void teardown(dv_driver *drv)
{
    dv_nccl_comm_destroy(run.comm);
    run.comm = NULL;
    for (int d = 0; d < run.ndev; d++) {
        dv_blas_destroy(run.dev[d].blas);
        dv_fft_destroy(run.dev[d].fft);
        dv_actor_destroy(run.dev[d].actor);
        run.dev[d] = (device){0};
    }
    dv__driver_close(drv);
}

int main(int argc, char **argv)
{
    options *o = &run.opt;
    int rc = parse_options(argc, argv, o);
    if (rc != 0)
        return rc;
    note_env_conf("dv-stress", true);
    /* From here a signal ends the run with its report, even one that
     * comes while the actors and libraries are still being set up. */
    signal(SIGINT, on_stop_signal);
    signal(SIGTERM, on_stop_signal);
    bool multi = o->devices > 0;
    run.ndev = multi ? o->devices : 1;

    /* Open the driver here, so the backend (and with it the default
     * budget) is known before the actors are composed on it. */
    dv_driver_config dcfg;
    dv_driver *drv = NULL;
    dv__driver_config_init(&dcfg);
    dcfg.backend = o->backend;
    dcfg.sim.seed = o->seed;
    dcfg.sim.delay_max_us = o->sim_delay_us;
    if (multi)
        dcfg.sim.devices = o->devices;
    /* Room for the pool's fragmentation beyond the budget on the sim. */
    uint64_t sim_budget = o->budget != 0 ? o->budget : 256 * MIB;
    dcfg.sim.memory_bytes = 4 * sim_budget > GIB ? 4 * sim_budget : GIB;
    if (dcfg.sim.memory_bytes > 192 * GIB) /* the sim's devices hold less than 256 GiB */
        dcfg.sim.memory_bytes = 192 * GIB;
    rc = dv__driver_open(&dcfg, &drv);
    if (rc != DV_OK) {
        const char *why = dv_last_error()->message;
        fprintf(stderr, "dv-stress: %s\n", why[0] != '\0' ? why : dv_strerror(rc));
        return 2;
    }
    bool sim = dv__sim_is_sim(drv);
    if (multi && !sim) {
        int visible = 0;
        if (dv__drv_device_count(drv, &visible) != DV_OK || visible < o->devices) {
            fprintf(stderr,
                    "dv-stress: --devices %d needs %d CUDA devices, and %d %s visible "
                    "(CUDA_VISIBLE_DEVICES: %s)\n",
                    o->devices, o->devices, visible, visible == 1 ? "is" : "are",
                    getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "not set");
            dv__driver_close(drv);
            return 2;
        }
    }

    /* One actor per device, all on the one driver (a peer copy needs
     * both actors on one). */
    dv_actor_config cfg;
    dv_actor_config_init(&cfg);
    cfg.driver = drv;
    cfg.device = o->device;
    cfg.streams = o->streams;
    cfg.pool = o->pool;
    cfg.budget_bytes = o->budget != 0 ? o->budget : sim ? 256 * MIB : 2 * GIB;
    cfg.check_order = o->check_order;
    if (o->conf != NULL) {
        (void)dv_actor_config_parse(&cfg, o->conf); /* checked in parse_options */
        /* What the actors run with, for the threads and the report. */
        o->streams = cfg.streams;
        o->pool = cfg.pool;
        o->check_order = cfg.check_order;
        if (cfg.budget_bytes != 0)
            o->budget = cfg.budget_bytes;
    }

    run.streams = o->streams;
    /* The threads are spread over the devices: the working sets of a
     * device's threads average 1.25x its budget. */
    int per_device = (o->threads + run.ndev - 1) / run.ndev;
    if (o->blocks != 0) {
        run.max_live = o->blocks;
    } else {
        uint64_t want = (cfg.budget_bytes * 5 / 4 + (uint64_t)per_device * MEAN_BLOCK - 1) /
                        ((uint64_t)per_device * MEAN_BLOCK);
        run.max_live = want < MIN_LIVE ? MIN_LIVE : want > MAX_LIVE ? MAX_LIVE : (uint32_t)want;
    }

    for (int d = 0; d < run.ndev; d++) {
        cfg.device = multi ? d : o->device;
        run.dev[d].ordinal = cfg.device;
        rc = dv_actor_create(&cfg, &run.dev[d].actor);
        if (rc != DV_OK) {
            const char *why = dv_last_error()->message;
            fprintf(stderr, "dv-stress: %s%s\n", why[0] != '\0' ? why : dv_strerror(rc),
                    multi ? " (making the actor of one of the devices)" : "");
            teardown(drv);
            return 2;
        }
    }
    run.drv = dv__actor_driver(run.dev[0].actor); /* drv: the faults are armed on it */
    run.sim = sim;
    void *libcuda = NULL;
    const char *no_tasks = setup_kernels_and_tasks(&libcuda);
    char no_blas[320] = "", no_fft[320] = "";
    for (int d = 0; d < run.ndev; d++) {
        if (dv_blas_create(run.dev[d].actor, &run.dev[d].blas) != DV_OK && no_blas[0] == '\0')
            snprintf(no_blas, sizeof(no_blas), "%s", dv_last_error()->message);
        if (dv_fft_create(run.dev[d].actor, 0, &run.dev[d].fft) != DV_OK && no_fft[0] == '\0')
            snprintf(no_fft, sizeof(no_fft), "%s", dv_last_error()->message);
    }
    /* Collectives over every actor, rank d on device d. */
    char no_nccl[400] = "";
    int comm_rc = DV_OK;
    if (multi) {
        dv_actor *actors[DV_MAX_DEVICES];
        for (int d = 0; d < run.ndev; d++)
            actors[d] = run.dev[d].actor;
        comm_rc = dv_nccl_comm_create(actors, run.ndev, COLL_TIMEOUT, &run.comm);
        if (comm_rc != DV_OK) {
            snprintf(no_nccl, sizeof(no_nccl), "%s", dv_last_error()->message);
            run.comm = NULL;
        }
    }
    char b1[32], b2[32];
    for (int d = 0; d < run.ndev; d++) {
        dv_device_info info = {0};
        (void)dv__drv_device_info(run.drv, run.dev[d].ordinal, &info);
        printf("dv-stress: backend %s, device %d: %s (%llu MiB, cc %d.%d)\n",
               dv_actor_backend_name(run.dev[d].actor), run.dev[d].ordinal, info.name,
               (unsigned long long)(info.total_bytes >> 20), info.cc_major, info.cc_minor);
    }
    if (sim && o->backend == DV_BACKEND_AUTO && getenv("DV_BACKEND") == NULL)
        printf("dv-stress: no CUDA device answered, so this runs on the simulated device%s\n",
               multi ? "s" : "");
    printf("dv-stress: %d threads x up to %u blocks (mean %s), %u streams, budget %s%s, %s, ",
           o->threads, run.max_live, human_bytes((double)MEAN_BLOCK, b1, sizeof(b1)), run.streams,
           human_bytes((double)cfg.budget_bytes, b2, sizeof(b2)), multi ? " per device" : "",
           o->pool ? "pool" : "no pool");
    if (o->ops > 0)
        printf("%" PRIu64 " operations", o->ops);
    else
        printf("%.1f s", o->seconds);
    printf(", seed %" PRIu64 "%s", o->seed, sim ? "" : "\n");
    if (sim)
        printf(", sim delay up to %u us, faults %s\n", o->sim_delay_us, o->faults ? "on" : "off");
    const char *env_order = getenv("DV_CHECK_ORDER");
    bool env_checker = env_order != NULL && strcmp(env_order, "1") == 0;
    const char *checker = o->check_order ? "on"
                          : env_checker  ? "on (DV_CHECK_ORDER=1 in the environment)"
                                         : "off";
    printf("dv-stress: stream-order checker %s; launches: %s; tasks: %s\n", checker,
           run.dev[0].fill != NULL ? "fill_u32, add_u32, checksum" : "none (no built-in kernels)",
           run.tasks ? (sim ? "copy by host function" : "copy by cuMemcpyDtoDAsync") : no_tasks);
    printf("dv-stress: library actors: GEMM %s; FFT %s\n",
           run.dev[0].blas != NULL ? dv_blas_library(run.dev[0].blas) : no_blas,
           run.dev[0].fft != NULL ? dv_fft_library(run.dev[0].fft) : no_fft);
    if (multi) {
        printf("dv-stress: %d devices, thread i on device i mod %d; peer copies between every "
               "two; ",
               run.ndev, run.ndev);
        if (run.comm != NULL)
            printf("collectives: %s over %d ranks\n", dv_nccl_library(run.comm),
                   dv_nccl_comm_size(run.comm));
        else if (comm_rc == DV_ENOTSUP)
            printf("collectives: none, NCCL did not open (%s): PEER COPIES ONLY\n", no_nccl);
        else
            printf("collectives: none, the communicator failed (%s: %s)\n", dv_err_name(comm_rc),
                   no_nccl);
    }
    fflush(stdout);

    /* The client threads, and with --devices one more that drives the
     * collectives (it owns no blocks and no host buffers of an actor). */
    int nworkers = o->threads + (run.comm != NULL ? 1 : 0);
    worker *ws = calloc((size_t)nworkers, sizeof(*ws));
    if (ws == NULL) {
        fprintf(stderr, "dv-stress: out of host memory\n");
        return 2;
    }
    for (int i = 0; i < o->threads; i++) {
        worker *w = &ws[i];
        w->index = i;
        w->dev = &run.dev[i % run.ndev];
        w->rng = mix64(o->seed + (uint64_t)(i + 1) * UINT64_C(0xD1B54A32D192ED03));
        w->host_kind = i % HOST_KINDS;
        dv_actor *actor = w->dev->actor;
        if (w->host_kind == HOST_ALLOCATED) {
            if (dv_host_alloc(actor, MAX_BLOCK, (void **)&w->wbuf) != DV_OK ||
                dv_host_alloc(actor, MAX_BLOCK, (void **)&w->rbuf) != DV_OK)
                w->wbuf = w->rbuf = NULL;
        } else {
            w->wbuf = malloc(MAX_BLOCK);
            w->rbuf = malloc(MAX_BLOCK);
            if (w->host_kind == HOST_REGISTERED && w->wbuf != NULL && w->rbuf != NULL &&
                (dv_host_register(actor, w->wbuf, MAX_BLOCK) != DV_OK ||
                 dv_host_register(actor, w->rbuf, MAX_BLOCK) != DV_OK))
                w->wbuf = w->rbuf = NULL;
        }
        w->blocks = calloc(run.max_live, sizeof(block));
        w->ebuf = malloc(EXPECT_CHUNK);
        /* A peer's read-back: pageable (the buffers above belong to the
         * thread's own actor). */
        w->pbuf = multi ? malloc(PEER_MAX) : NULL;
        for (unsigned k = 0; k < TASK_SLOTS; k++)
            atomic_init(&w->slots[k].busy, false);
        if (w->wbuf == NULL || w->rbuf == NULL || w->blocks == NULL || w->ebuf == NULL ||
            (multi && w->pbuf == NULL)) {
            fprintf(stderr, "dv-stress: no %s buffers for thread %d: %s\n",
                    host_kind_names[w->host_kind], i, dv_last_error()->message);
            teardown(drv);
            return 2;
        }
    }
    worker *coll = NULL;
    if (run.comm != NULL) {
        coll = &ws[o->threads];
        coll->index = o->threads;
        coll->dev = &run.dev[0];
        coll->rng = mix64(o->seed ^ UINT64_C(0xC011EC7));
    }

    uint64_t t0 = now_ns();
    int started = 0;
    for (int d = 0; d < run.ndev; d++)
        (void)dv_actor_stats_get(run.dev[d].actor, &run.dev[d].st0);
    uint64_t calls0[DV_CALL__COUNT];
    dv__driver_call_counts(drv, calls0);
    for (; started < nworkers; started++) {
        void *(*fn)(void *) = &ws[started] == coll ? coll_main : worker_main;
        if (pthread_create(&ws[started].thread, NULL, fn, &ws[started]) != 0) {
            fprintf(stderr, "dv-stress: cannot start thread %d\n", started);
            atomic_store(&run.stop, true);
            break;
        }
    }

    /* Progress and faults, until the time or the operations are spent,
     * or SIGINT / SIGTERM (from main on): the run then ends as at its
     * time, with its checks and report (a second signal kills it). */
    bool tty = isatty(STDERR_FILENO) == 1;
    uint64_t every = (tty ? 1000u : 5000u) * UINT64_C(1000000);
    uint64_t next_line = t0 + every, last_ops = 0, last_t = t0;
    faults f = {.rng = mix64(o->seed ^ UINT64_C(0xFA17))};
    f.next_alloc_ns = f.next_inject_ns = t0;
    for (;;) {
        uint64_t now = now_ns();
        double elapsed = (double)(now - t0) * 1e-9;
        uint64_t steps = atomic_load_explicit(&run.steps, memory_order_relaxed);
        double fraction = o->ops > 0 ? (double)steps / (double)o->ops : elapsed / o->seconds;
        if (fraction >= 1.0 || started < nworkers || stop_signal != 0)
            break;
        if (o->faults)
            faults_tick(&f, now, fraction);
        if (now >= next_line) {
            uint64_t ops, errors;
            totals(ws, nworkers, &ops, &errors);
            progress(ws, nworkers, tty, elapsed,
                     (double)(ops - last_ops) / ((double)(now - last_t) * 1e-9));
            last_ops = ops;
            last_t = now;
            next_line += every;
        }
        sleep_ms(20);
    }
    atomic_store(&run.stop, true);
    if (o->faults)
        faults_disarm();
    for (int i = 0; i < started; i++)
        pthread_join(ws[i].thread, NULL);
    double seconds = (double)(now_ns() - t0) * 1e-9;
    if (tty)
        fprintf(stderr, "\n");

    /* Every thread released everything and synced its streams; one more
     * sync on every stream from here, then the actors' accounting (their
     * host memory given back first, the communicator destroyed). */
    int end_errors = 0;
    if (multi && run.comm == NULL && comm_rc != DV_ENOTSUP)
        end_errors++; /* a communicator that should have been there */
    for (int i = 0; i < o->threads; i++) {
        worker *w = &ws[i];
        dv_actor *actor = w->dev->actor;
        (void)dv_order_adopt(actor, &w->handover);
        for (int k = 0; k < 2; k++) {
            uint8_t *buf = k == 0 ? w->wbuf : w->rbuf;
            int hrc = DV_OK;
            if (buf != NULL && w->host_kind == HOST_ALLOCATED)
                hrc = dv_host_free(actor, buf);
            else if (buf != NULL && w->host_kind == HOST_REGISTERED)
                hrc = dv_host_unregister(actor, buf);
            if (hrc != DV_OK) {
                fprintf(stderr, "dv-stress: thread %d's %s buffer: %s\n", i,
                        host_kind_names[w->host_kind], dv_last_error()->message);
                end_errors++;
            }
        }
        if (w->host_kind == HOST_ALLOCATED)
            w->wbuf = w->rbuf = NULL; /* the actor's memory, given back */
    }
    if (run.comm != NULL) {
        int crc = dv_nccl_comm_status(run.comm);
        if (crc != DV_OK) {
            fprintf(stderr, "dv-stress: the communicator at the end: %s\n",
                    dv_last_error()->message);
            end_errors++;
        }
        dv_nccl_comm_destroy(run.comm);
        run.comm = NULL;
    }
    int lost_devices = 0;
    dv_actor_stats st = {0};
    for (int d = 0; d < run.ndev; d++) {
        device *dev = &run.dev[d];
        for (dv_stream s = 0; s < run.streams; s++) {
            int src = dv_sync(dev->actor, s);
            if (src == DV_ECONTEXT_LOST && o->faults) /* a poison noticed only now */
                src = dv_sync(dev->actor, s);
            if (src != DV_OK) {
                fprintf(stderr, "dv-stress: final sync of stream %u%s: %s\n", s,
                        multi ? (d == 0 ? " of device 0" : " of a device") : "",
                        dv_last_error()->message);
                end_errors++;
            }
        }
        if ((rc = dv_actor_stats_get(dev->actor, &dev->st)) != DV_OK) {
            fprintf(stderr, "dv-stress: stats: %s\n", dv_last_error()->message);
            end_errors++;
        }
        (void)dv_actor_health_get(dev->actor, &dev->health);
        if (dev->health.state != DV_ACTOR_RUNNING)
            lost_devices++;
        /* The sums the report gives. */
        const dv_actor_stats *a = &dev->st, *a0 = &dev->st0;
        st.bytes_outstanding += a->bytes_outstanding;
        st.refs_alive += a->refs_alive;
        st.host_bytes += a->host_bytes;
        st.host_registered += a->host_registered;
        st.staged_copies += a->staged_copies;
        st.staged_bytes += a->staged_bytes;
        st.staging_waits += a->staging_waits;
        st.direct_copies += a->direct_copies;
        st.messages += a->messages - a0->messages; /* over the run */
        st.batches += a->batches;
        st.allocs += a->allocs;
        st.frees += a->frees;
        st.copies += a->copies;
        st.memsets += a->memsets;
        st.launches += a->launches;
        st.tasks += a->tasks;
        st.syncs += a->syncs;
        st.failures += a->failures;
        st.client_rings += a->client_rings;
        st.hazards += a->hazards;
        st.check_bytes += a->check_bytes;
        st.check_pieces += a->check_pieces;
    }

    /* Totals. */
    worker all = {0};
    for (int i = 0; i < nworkers; i++) {
        worker *w = &ws[i];
        for (int k = 0; k < OP_KINDS; k++) {
            all.calls[k] += w->calls[k];
            all.failed[k] += w->failed[k];
            hist_merge(&all.lat[k], &w->lat[k]);
        }
        for (int k = 0; k < NCODES; k++)
            all.codes[k] += w->codes[k];
        all.unexpected += w->unexpected;
        all.verifies += w->verifies;
        all.bytes_verified += w->bytes_verified;
        all.bad_verifies += w->bad_verifies;
        all.lib_checks += w->lib_checks;
        all.lib_bad += w->lib_bad;
        all.bad_bytes += w->bad_bytes;
        all.excused_verifies += w->excused_verifies;
        all.excused_bytes += w->excused_bytes;
        all.checksums += w->checksums;
        all.bytes_summed += w->bytes_summed;
        all.bad_checksums += w->bad_checksums;
        all.excused_checksums += w->excused_checksums;
        all.adds_without_inputs += w->adds_without_inputs;
        all.tasks_without_slot += w->tasks_without_slot;
        all.stale_dropped += w->stale_dropped;
        all.budget_releases += w->budget_releases;
        all.rewrites_for_segments += w->rewrites_for_segments;
        all.peer_copies += w->peer_copies;
        all.peer_bytes += w->peer_bytes;
        all.peer_checks += w->peer_checks;
        all.peer_bytes_checked += w->peer_bytes_checked;
        all.peer_bad += w->peer_bad;
        all.peer_bad_bytes += w->peer_bad_bytes;
        all.coll_checks += w->coll_checks;
        all.coll_bytes_checked += w->coll_bytes_checked;
        all.coll_bad += w->coll_bad;
        all.coll_bad_bytes += w->coll_bad_bytes;
        all.coll_no_memory += w->coll_no_memory;
    }
    uint64_t calls = 0;
    for (int k = 0; k < OP_KINDS; k++)
        calls += all.calls[k];

    if (stop_signal != 0)
        printf("\ndv-stress: stopped early by %s; the work done so far is checked below\n",
               stop_signal == SIGINT ? "SIGINT" : "SIGTERM");
    printf("\nran %.2f s: %" PRIu64 " ops (%.0f ops/s), %s read back and compared, %s summed by "
           "checksums\n",
           seconds, calls, (double)calls / seconds,
           human_bytes((double)all.bytes_verified, b1, sizeof(b1)),
           human_bytes((double)all.bytes_summed, b2, sizeof(b2)));
    uint64_t kind_bytes[HOST_KINDS] = {0}, kind_ns[HOST_KINDS] = {0}, moved = 0;
    for (int i = 0; i < o->threads; i++) {
        kind_bytes[ws[i].host_kind] += ws[i].copied_bytes;
        kind_ns[ws[i].host_kind] += ws[i].copy_ns;
        moved += ws[i].copied_bytes;
    }
    printf("copies: %s between host and device (%s/s over the run); in the copy calls, by host "
           "memory:",
           human_bytes((double)moved, b1, sizeof(b1)),
           human_bytes((double)moved / seconds, b2, sizeof(b2)));
    for (int k = 0; k < HOST_KINDS; k++) {
        if (kind_ns[k] != 0)
            printf("%s %s %.2f GB/s", k ? "," : "", host_kind_names[k],
                   (double)kind_bytes[k] / (double)kind_ns[k]);
        else /* no thread copied with it */
            printf("%s %s n/a (unused)", k ? "," : "", host_kind_names[k]);
    }
    printf("\n");
    int name_width = multi ? 14 : 12; /* "reduce_scatter" */
    printf("\n  %-*s %12s %10s %12s %12s %12s\n", name_width, "operation", "calls", "failed", "p50",
           "p99", "max");
    for (int k = 0; k < (multi ? OP_KINDS : OP_SINGLE_KINDS); k++) {
        char p50[32], p99[32], mx[32];
        printf("  %-*s %12" PRIu64 " %10" PRIu64 " %12s %12s %12s\n", name_width, op_names[k],
               all.calls[k], all.failed[k],
               human_ns(hist_percentile(&all.lat[k], 0.50), p50, sizeof(p50)),
               human_ns(hist_percentile(&all.lat[k], 0.99), p99, sizeof(p99)),
               human_ns((double)all.lat[k].max, mx, sizeof(mx)));
    }
    printf("  (round trip of each call, to its completion on the device; alloc: dv_alloc, "
           "then dv_ref_access\n   until the memory was assigned, half the time after a "
           "memset of the still-pending handle)\n");
    if (multi)
        printf("  (peer_copy: one dv_copy_dtod between two actors' blocks; a collective: one call "
               "over every rank,\n   from the first rank's post until every rank's part "
               "finished)\n");
    if (all.adds_without_inputs != 0 || all.tasks_without_slot != 0)
        printf("  %" PRIu64 " adds were fills (no u32-constant inputs at hand), %" PRIu64
               " tasks were copy_dtod (every task slot in flight)\n",
               all.adds_without_inputs, all.tasks_without_slot);

    printf("\nerrors by code:");
    bool any = false;
    for (int k = 1; k < NCODES; k++) {
        if (all.codes[k] == 0)
            continue;
        any = true;
        printf("\n  %-20s %10" PRIu64 "  %s\n      first: %s", dv_err_name(-k), all.codes[k],
               expected_error(-k) ? "expected" : "UNEXPECTED", run.first_message[k]);
    }
    if (all.codes[0] != 0) {
        any = true;
        printf("\n  %-20s %10" PRIu64 "  UNEXPECTED\n      first: %s", "(unlisted)", all.codes[0],
               run.first_message[0]);
    }
    printf("%s\n", any ? "" : " none");
    printf("  %" PRIu64 " blocks released to make room after a refused allocation\n",
           all.budget_releases);
    if (o->faults)
        printf("faults: %" PRIu64 " failed allocations armed, %" PRIu64
               " memcpy/launch/host-function errors armed, %" PRIu64 " context poisons; %" PRIu64
               " stale handles dropped\n",
               f.armed_allocs, f.armed_calls, f.poisons, all.stale_dropped);

    printf("\nintegrity: %" PRIu64 " verifications, %s compared, %" PRIu64 " failed (%" PRIu64
           " bytes wrong); %" PRIu64 " checksums over %s, %" PRIu64 " failed\n",
           all.verifies, human_bytes((double)all.bytes_verified, b1, sizeof(b1)), all.bad_verifies,
           all.bad_bytes, all.checksums, human_bytes((double)all.bytes_summed, b2, sizeof(b2)),
           all.bad_checksums);
    if (all.excused_verifies != 0 || all.excused_checksums != 0)
        printf("  %" PRIu64 " more mismatched reads (%" PRIu64 " bytes) and %" PRIu64
               " mismatched checksums on blocks whose context was rebuilt under them: not "
               "counted\n",
               all.excused_verifies, all.excused_bytes, all.excused_checksums);
    if (run.dev[0].blas != NULL || run.dev[0].fft != NULL)
        printf("library actors: %" PRIu64 " GEMMs and FFTs checked against the host, %" PRIu64
               " wrong\n",
               all.lib_checks, all.lib_bad);
    if (multi) {
        char b3[32];
        uint64_t colls = 0;
        for (int k = OP_ALL_REDUCE; k <= OP_REDUCE_SCATTER; k++)
            colls += all.calls[k] - all.failed[k];
        /* One line, fixed keys: what scripts read (tests/tools/stress_devices.sh). */
        printf("devices: %d, peer_copies %" PRIu64 " (%s), peer_checks %" PRIu64 " (%s compared), "
               "peer_wrong_bytes %" PRIu64 ", collectives %" PRIu64 " (all_reduce %" PRIu64
               ", broadcast %" PRIu64 ", all_gather %" PRIu64 ", reduce_scatter %" PRIu64
               "), collective_checks %" PRIu64 " (%s compared), collective_wrong_bytes %" PRIu64
               "%s\n",
               run.ndev, all.peer_copies, human_bytes((double)all.peer_bytes, b1, sizeof(b1)),
               all.peer_checks, human_bytes((double)all.peer_bytes_checked, b2, sizeof(b2)),
               all.peer_bad_bytes, colls, all.calls[OP_ALL_REDUCE] - all.failed[OP_ALL_REDUCE],
               all.calls[OP_BROADCAST] - all.failed[OP_BROADCAST],
               all.calls[OP_ALL_GATHER] - all.failed[OP_ALL_GATHER],
               all.calls[OP_REDUCE_SCATTER] - all.failed[OP_REDUCE_SCATTER], all.coll_checks,
               human_bytes((double)all.coll_bytes_checked, b3, sizeof(b3)), all.coll_bad_bytes,
               comm_rc == DV_ENOTSUP ? " (no NCCL: peer copies only)" : "");
        if (all.coll_no_memory != 0)
            printf("  %" PRIu64 " collectives not run: a rank's allocation refused within %.1f s\n",
                   all.coll_no_memory, (double)ALLOC_WAIT_NS * 1e-9);
    }
    for (int i = 0; i < run.nmismatch; i++)
        printf("  %s\n", run.mismatch[i]);

    bool leak = st.bytes_outstanding != 0 || st.refs_alive != 0 || st.host_bytes != 0 ||
                st.host_registered != 0;
    printf("\nend: bytes outstanding %" PRIu64 ", refs alive %" PRIu64 ", host bytes %" PRIu64
           ", registered %" PRIu64
           " (after every thread released everything and a sync on every stream%s)%s\n",
           st.bytes_outstanding, st.refs_alive, st.host_bytes, st.host_registered,
           multi ? ", over every device" : "", leak ? ": LEAK" : "");
    printf("staging: %" PRIu64 " copies staged (%s), %" PRIu64 " waits for room, %" PRIu64
           " copies done by the driver on the actor's thread\n",
           st.staged_copies, human_bytes((double)st.staged_bytes, b1, sizeof(b1)),
           st.staging_waits, st.direct_copies);
    printf("actor thread%s: busy", multi ? "s" : "");
    for (int d = 0; d < run.ndev; d++)
        printf("%s %.1f %%", d ? "," : "",
               100.0 * (double)(run.dev[d].st.actor_cpu_ns - run.dev[d].st0.actor_cpu_ns) /
                   (seconds * 1e9));
    printf(" of the run (%s CPU time)\n", multi ? "each device's" : "its");
    /* What the run cost the driver, the most frequent calls first. */
    uint64_t calls1[DV_CALL__COUNT], ncalls = 0;
    dv__driver_call_counts(drv, calls1);
    int order[DV_CALL__COUNT];
    for (int c = 0; c < DV_CALL__COUNT; c++) {
        calls1[c] -= calls0[c];
        ncalls += calls1[c];
        order[c] = c;
    }
    for (int x = 1; x < DV_CALL__COUNT; x++) /* insertion sort, descending */
        for (int y = x; y > 0 && calls1[order[y]] > calls1[order[y - 1]]; y--) {
            int t = order[y];
            order[y] = order[y - 1];
            order[y - 1] = t;
        }
    double msgs = (double)st.messages;
    printf("driver: %" PRIu64 " calls (%.2f per message):", ncalls,
           msgs > 0 ? (double)ncalls / msgs : 0.0);
    for (int x = 0; x < 8 && calls1[order[x]] > 0; x++)
        printf("%s %s %.2f", x ? "," : "", dv__drv_call_name((dv_drv_call)order[x]),
               msgs > 0 ? (double)calls1[order[x]] / msgs : 0.0);
    printf("\n");
    uint64_t messages = 0;
    for (int d = 0; d < run.ndev; d++)
        messages += run.dev[d].st.messages;
    printf("actor%s: %" PRIu64 " messages in %" PRIu64 " batches, %" PRIu64 " allocs, %" PRIu64
           " frees, %" PRIu64 " copies, %" PRIu64 " memsets, %" PRIu64 " launches, %" PRIu64
           " tasks, %" PRIu64 " syncs, %" PRIu64 " failures, %u client rings\n",
           multi ? "s" : "", messages, st.batches, st.allocs, st.frees, st.copies, st.memsets,
           st.launches, st.tasks, st.syncs, st.failures, st.client_rings);
    printf("stream-order checker: %s, %" PRIu64 " hazards%s", checker, st.hazards,
           st.hazards != 0 ? ": FAIL" : "");
    for (int d = 0; d < run.ndev; d++) {
        dv_error_detail last;
        if (run.dev[d].st.hazards != 0 && dv_actor_last_hazard(run.dev[d].actor, &last) == DV_OK) {
            if (multi)
                printf(" (device %d's latest: %s)", run.dev[d].ordinal, last.message);
            else
                printf(" (the latest: %s)", last.message);
        }
    }
    if (st.check_bytes != 0)
        printf("; holds %" PRIu64 " pieces in %" PRIu64 " bytes at the end, at most %" PRIu64
               " pieces in %" PRIu64 " bytes at a progress line",
               st.check_pieces, st.check_bytes, check_peak_pieces, check_peak_bytes);
    printf("\n");
    printf("throughput: %.0f ops/s (%" PRIu64 " ops in %.2f s, %d threads%s, checker %s)\n",
           (double)calls / seconds, calls, seconds, o->threads,
           run.comm != NULL || (multi && coll != NULL) ? " and the collectives'" : "",
           o->check_order || env_checker ? "on" : "off");
    uint32_t rebuilds = 0;
    for (int d = 0; d < run.ndev; d++) {
        const dv_actor_health *h = &run.dev[d].health;
        rebuilds += h->rebuilds;
        if (multi)
            printf("%s device %d %s, context generation %" PRIu64 ", %u rebuilds",
                   d ? ";" : "health:", run.dev[d].ordinal, state_name(h->state),
                   h->context_generation, h->rebuilds);
        else
            printf("health: %s, context generation %" PRIu64 ", %u rebuilds", state_name(h->state),
                   h->context_generation, h->rebuilds);
        if (h->first_fault.status != 0)
            printf(", first fault: %s", h->first_fault.message);
    }
    printf("\n");

    int status = 0;
    char verdict[64] = "PASS";
    bool integrity = all.bad_verifies != 0 || all.bad_checksums != 0 || all.lib_bad != 0;
    if (integrity || st.hazards != 0 || leak) {
        status = 1;
        snprintf(verdict, sizeof(verdict), "FAIL (%s%s%s%s%s)", integrity ? "integrity" : "",
                 integrity && st.hazards != 0 ? ", " : "", st.hazards != 0 ? "hazards" : "",
                 (integrity || st.hazards != 0) && leak ? ", " : "", leak ? "leak" : "");
    } else if (all.unexpected != 0 || end_errors != 0 || lost_devices != 0 ||
               (o->faults && f.poisons > 0 && rebuilds == 0)) {
        status = 2;
        snprintf(verdict, sizeof(verdict), "FAIL (unexpected errors)");
    }
    printf("result: %s\n", verdict);
    if (tool_stdout_done("dv-stress") != 0 && status == 0)
        status = 2; /* the report is lost */

    teardown(drv);
    if (libcuda != NULL)
        dlclose(libcuda);
    for (int i = 0; i < o->threads; i++) {
        free(ws[i].wbuf);
        free(ws[i].rbuf);
        free(ws[i].blocks);
        free(ws[i].ebuf);
        free(ws[i].pbuf);
    }
    free(ws);
    return status;
}
