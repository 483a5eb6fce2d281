/*
 * The simulated device backend (model: sim.h).
 *
 * Design
 * ------
 * Device: an arena of host memory (mmap, NORESERVE: untouched pages cost
 * nothing) at a base address that no host pointer has, a first-fit free
 * list with coalescing, and a sorted array of live allocations so that a
 * copy can be checked against the allocation it falls in.  One mutex per
 * device guards the allocator and the device's stream list.
 *
 * Stream: a FIFO of ops and a worker thread that runs them in order.  The
 * queue, the count of ops enqueued and the count done live in a refcounted
 * "timeline" with its own mutex and condition variable: the worker, host
 * threads that synchronise, and other streams' workers that wait on an
 * event all wait on that one condition.  Events hold a reference to the
 * timeline they captured, so an event (or a pending wait) outlives the
 * stream it was recorded on.  Positions are 1-based op counts: an event
 * recorded after k ops is complete once done >= k.
 *
 * Faults: a device's sticky code (recoverable poison) and the driver's
 * fatal code are atomics checked at the top of every context-bound op and
 * by workers before each op (work after a sticky error does not run).
 *
 * Physical memory (mem_map) lives in a memfd of the device's, at an offset
 * of its own; each address it is mapped at (mem_map, mem_remap) is a
 * shared mapping of that offset over the arena, so the same bytes show at
 * every alias, as on a GPU, and a pool that lets two live blocks share
 * memory gets wrong data.  Unmapped, the arena's range is anonymous again;
 * released and mapped nowhere, its pages are punched out of the memfd.
 * Without memfd_create each mapping has bytes of its own.
 *
 * The arena is "device memory": streams race on it exactly as kernels race
 * on a GPU when a caller forgets a wait.  That is the behaviour the sim
 * exists to expose, so the data-plane copies are hidden from TSan
 * (DATA_PLANE_BEGIN/END); the sim's own bookkeeping is not.
 */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "driver/sim.h"

#include "base/array.h"
#include "base/tsan.h"

#define DATA_PLANE_BEGIN() dv__tsan_ignore_begin()
#define DATA_PLANE_END()   dv__tsan_ignore_end()

#define SIM_ALIGN         256u
#define SIM_BASE          UINT64_C(0x00007a0000000000)
#define SIM_DEVICE_STRIDE (UINT64_C(1) << 40) /* 1 TiB of address space each */
#define SIM_GRANULE       (UINT64_C(2) << 20) /* of mappings, as the H100's */
/* A device's addresses: its memory, then up to 32 times as much that only
 * reservations take (address space is plentiful on a GPU too: a pool with
 * aliases reserves twice the memory for each stream), within the
 * device's stride.  Where the host refuses so much address space (a limit
 * on it, a memory checker's), 8 times, then 3 times. */
static const unsigned sim_spans[] = {33, 9, 4};

/* ------------------------------------------------------------------------
 * Types
 * ------------------------------------------------------------------------ */

enum op_kind {
    OP_HTOD,
    OP_DTOH,
    OP_DTOD,
    OP_MEMSET8,
    OP_MEMSET32,
    OP_KERNEL,
    OP_HOST_FN,
    OP_WAIT,
    OP_FREE,
    OP_STAMP, /* a timing event's record: the time the stream got here */
    OP_WRITE_VALUE,
    OP_WAIT_VALUE,
};

struct sim_timeline;
struct sim_device;

/*
 * A stream-ordered free not yet reached by its stream.  Like the real
 * driver's pool, the stream that freed the memory may allocate it again at
 * once (its later work is ordered after the free); other streams get it
 * only once the stream reaches the free.  Under the device mutex.
 */
struct sim_pending {
    struct sim_pending *next, *prev;
    dv_dptr start;
    uint64_t bytes;
    bool reused; /* handed out again by the freeing stream */
};

struct sim_op {
    struct sim_op *next;
    uint64_t pos;
    enum op_kind kind;
    union {
        struct {
            void *host;
            void *dev; /* host address of the device range */
            uint64_t bytes;
        } copy;
        struct {
            void *dst, *src;
            uint64_t bytes;
        } d2d;
        struct {
            void *dst;
            uint32_t value;
            uint64_t count;
        } set;
        struct {
            const dv_sim_kernel *kernel;
            dv_dim3 grid, block;
            void *argp[DV_LAUNCH_MAX_ARGS];
            unsigned char *args; /* the copies, after the op (one allocation) */
        } kern;
        struct {
            dv_host_fn fn;
            void *arg;
        } host;
        struct {
            struct sim_timeline *tl;
            uint64_t pos;
        } wait;
        struct {
            struct sim_pending *pending;
        } free;
        struct {
            struct sim_stamp *cell;
            uint64_t serial; /* the record it stamps */
        } stamp;
        struct {
            uint32_t *word;
            uint32_t value;
        } value;
    } u;
};

struct sim_timeline {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct sim_op *head, *tail; /* pending ops */
    uint64_t enqueued;          /* ops ever enqueued */
    uint64_t done;              /* ops finished (in order) */
    bool stopping;
    atomic_uint refs;
};

struct sim_range {
    dv_dptr start;
    uint64_t bytes;
    bool mapped; /* live: a mapping (mem_map), merged with adjacent ones */
};

struct sim_free {
    struct sim_free *next;
    dv_dptr start;
    uint64_t bytes;
};

struct sim_stream;

struct sim_device {
    int ordinal;
    struct sim_driver *sd;
    unsigned char *arena;
    uint64_t size;
    uint64_t span; /* its addresses, from base: memory, then reservations */
    dv_dptr base;
    pthread_mutex_t mu;
    struct sim_free *free_list; /* sorted by address, coalesced */
    struct sim_range *live;     /* sorted by start */
    size_t nlive, cap_live;
    uint64_t allocated; /* live + pending stream-ordered frees + mapped */
    /* Reserved address space (va_reserve), sorted by start, in the arena
     * past its first size bytes: mem_alloc never hands it out. */
    struct sim_range *va;
    size_t nva, cap_va;
    /* Physical memory mem_map made, mapped at maps addresses (mem_remap
     * maps it at one more, mem_unmap_keep unmaps one and keeps it): its
     * bytes count once in allocated until it is released (mem_release,
     * or mem_unmap) and mapped nowhere, as the driver frees it. */
    struct sim_phys {
        uint64_t handle, bytes;
        uint64_t off; /* in memfd */
        uint32_t maps;
        bool released;
    } *phys;
    uint32_t nphys, cap_phys;
    /* The mappings as made (mem_map, mem_remap), sorted by start: an
     * unmap takes whole ones, as the driver asks. */
    struct sim_range *maps;
    uint32_t nmaps, cap_maps;
    int memfd;           /* physical memory's bytes, or -1 */
    uint64_t memfd_next; /* the next offset handed out (never reused) */
    uint64_t next_handle; /* mem_map's tokens: never reused */
    uint64_t release_threshold;
    struct sim_stream *streams; /* list, for synchronous free */
    int stream_serial;
    atomic_int sticky; /* recoverable poison: raw code, 0 healthy */
};

/* A registered (page-locked) host range and the device whose context
 * registered it. */
struct sim_host_range {
    uintptr_t start;
    uint64_t bytes;
    int device;
};

struct sim_driver {
    dv_sim_config cfg;
    int ndev;
    struct sim_device *dev;
    /* Registered host memory, sorted by start, under host_mu. */
    pthread_mutex_t host_mu;
    struct sim_host_range *host;
    size_t nhost, cap_host;
    atomic_int fatal; /* process-fatal poison: raw code, 0 healthy */
    atomic_uint delay_max_us;
    atomic_uint_fast64_t stream_serial;
    /* Faults, under fault_mu; fault_armed lets the hot path skip the lock. */
    pthread_mutex_t fault_mu;
    atomic_bool fault_armed;
    uint64_t alloc_count, fail_alloc_at;
    uint64_t rng;
    struct {
        uint64_t countdown;
        int code;
        int poison; /* 0: a plain failure; 1 + dv_sim_poison_kind: poison then */
        int device; /* the device a recoverable poison hits */
    } inject[DV_CALL__COUNT];
    _Atomic uint64_t calls[DV_CALL__COUNT]; /* made so far (injected()) */
};

struct sim_ctx {
    dv_drv_obj hdr;
    struct sim_device *dev;
};

struct sim_stream {
    dv_drv_obj hdr;
    struct sim_device *dev;
    struct sim_timeline *tl;
    pthread_t thread;
    uint64_t rng;
    atomic_uint extra_us;
    struct sim_stream *next, *prev; /* device list */
    struct sim_pending *pending;    /* its frees not reached yet */
};

/* A timing event's record: the latest record's serial (process-wide,
 * never reused), and the time it was reached.  Apart from the event and
 * counted, so that a stamp still queued when the event is destroyed (and
 * its memory made another event) writes here, not over the new one. */
struct sim_stamp {
    _Atomic uint32_t refs; /* the event's, and one per queued stamp */
    _Atomic uint64_t serial, stamped_serial, stamp_ns;
};

static void stamp_unref(struct sim_stamp *c)
{
    if (c != NULL && atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1)
        free(c);
}

struct sim_event {
    dv_drv_obj hdr;
    pthread_mutex_t mu;
    struct sim_timeline *tl; /* NULL: never recorded */
    uint64_t pos;
    struct sim_stamp *stamp; /* timing events, from the first record */
};

static _Atomic uint64_t stamp_serials = 1;

struct sim_module {
    dv_drv_obj hdr;
    const dv_sim_image *image; /* a user's twins, or NULL: the registry */
};

struct sim_func {
    dv_drv_obj hdr;
    const dv_sim_kernel *kernel;
};

struct dv_sim_kctx {
    struct sim_driver *sd;
    dv_dim3 grid, block;
};

#define SD(drv)   ((struct sim_driver *)(drv)->impl)
#define CTX(o)    ((struct sim_ctx *)(o))
#define STREAM(o) ((struct sim_stream *)(o))
#define EVENT(o)  ((struct sim_event *)(o))
#define DEV_OF(o) (CTX((o)->ctx)->dev)

/* ------------------------------------------------------------------------
 * Random numbers (splitmix64: tiny, seedable, good enough for delays)
 * ------------------------------------------------------------------------ */

static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static void sleep_us(uint64_t us)
{
    struct timespec ts = {.tv_sec = (time_t)(us / 1000000), .tv_nsec = (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ------------------------------------------------------------------------
 * Faults
 * ------------------------------------------------------------------------ */

static int sticky_code(const struct sim_device *dev)
{
    int fatal = atomic_load_explicit(&dev->sd->fatal, memory_order_acquire);
    if (fatal != 0)
        return fatal;
    return atomic_load_explicit(&dev->sticky, memory_order_acquire);
}

/* An injected code for this call, or 0. */
static int injected(struct sim_driver *sd, dv_drv_call call)
{
    int code = 0;
    atomic_fetch_add_explicit(&sd->calls[call], 1, memory_order_relaxed);
    if (!atomic_load_explicit(&sd->fault_armed, memory_order_acquire))
        return 0;
    pthread_mutex_lock(&sd->fault_mu);
    if (sd->inject[call].countdown > 0 && --sd->inject[call].countdown == 0) {
        code = sd->inject[call].code;
        /* Poison at this call: the device (or the driver) keeps the code
         * from now on, as after a faulting kernel. */
        if (sd->inject[call].poison == 1 + DV_SIM_POISON_FATAL)
            atomic_store(&sd->fatal, code);
        else if (sd->inject[call].poison == 1 + DV_SIM_POISON_RECOVERABLE)
            atomic_store(&sd->dev[sd->inject[call].device].sticky, code);
        sd->inject[call].poison = 0;
    }
    pthread_mutex_unlock(&sd->fault_mu);
    return code;
}

/* Entry of every context-bound op: injected fault, then sticky state. */
#define SIM_ENTER(dev, call)                                                                       \
    do {                                                                                           \
        int code_ = injected((dev)->sd, (call));                                                   \
        if (code_ != 0 && dv__driver_code_is_sticky(code_))                                        \
            atomic_store(&(dev)->sticky, code_); /* a sticky code sticks */                        \
        if (code_ == 0)                                                                            \
            code_ = sticky_code(dev);                                                              \
        if (code_ != 0)                                                                            \
            return code_;                                                                          \
    } while (0)

static bool alloc_should_fail(struct sim_driver *sd)
{
    bool fail = false;
    pthread_mutex_lock(&sd->fault_mu);
    sd->alloc_count++;
    if (sd->fail_alloc_at != 0 && sd->alloc_count == sd->fail_alloc_at) {
        fail = true;
        sd->fail_alloc_at = 0;
    }
    if (!fail && sd->cfg.fail_alloc_rate > 0.0) {
        double u = (double)(rng_next(&sd->rng) >> 11) * (1.0 / 9007199254740992.0);
        fail = u < sd->cfg.fail_alloc_rate;
    }
    pthread_mutex_unlock(&sd->fault_mu);
    return fail;
}

/* ------------------------------------------------------------------------
 * Device memory
 * ------------------------------------------------------------------------ */

static size_t live_lower_bound(const struct sim_device *dev, dv_dptr p)
{
    size_t lo = 0, hi = dev->nlive;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (dev->live[mid].start < p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Does [start, start + len) hold [p, p + bytes)?  (No sum that could wrap.) */
static bool range_holds(uint64_t start, uint64_t len, uint64_t p, uint64_t bytes)
{
    return p >= start && bytes <= len && p - start <= len - bytes;
}

/* Index of the live allocation containing [p, p+bytes), or -1. */
static long live_containing(const struct sim_device *dev, dv_dptr p, uint64_t bytes)
{
    size_t i = live_lower_bound(dev, p + 1);
    if (i == 0)
        return -1;
    const struct sim_range *r = &dev->live[i - 1];
    if (range_holds(r->start, r->bytes, p, bytes))
        return (long)(i - 1);
    return -1;
}

static int live_insert(struct sim_device *dev, dv_dptr start, uint64_t bytes)
{
    if (dev->nlive == dev->cap_live) {
        size_t cap = dev->cap_live ? dev->cap_live * 2 : 64;
        struct sim_range *n = realloc(dev->live, cap * sizeof(*n));
        if (n == NULL)
            return -1;
        dev->live = n;
        dev->cap_live = cap;
    }
    size_t i = live_lower_bound(dev, start);
    memmove(&dev->live[i + 1], &dev->live[i], (dev->nlive - i) * sizeof(dev->live[0]));
    dev->live[i] = (struct sim_range){start, bytes, false};
    dev->nlive++;
    return 0;
}

static void live_remove_at(struct sim_device *dev, size_t i)
{
    memmove(&dev->live[i], &dev->live[i + 1], (dev->nlive - i - 1) * sizeof(dev->live[0]));
    dev->nlive--;
}

static uint64_t round_up(uint64_t n)
{
    return (n + SIM_ALIGN - 1) & ~(uint64_t)(SIM_ALIGN - 1);
}

/* First fit.  Caller holds dev->mu. */
static int range_take(struct sim_device *dev, uint64_t bytes, dv_dptr *out)
{
    uint64_t need = round_up(bytes);
    if (need > dev->size - dev->allocated)
        return -1; /* mappings hold the rest */
    for (struct sim_free **pp = &dev->free_list; *pp != NULL; pp = &(*pp)->next) {
        struct sim_free *f = *pp;
        if (f->bytes < need)
            continue;
        *out = f->start;
        f->start += need;
        f->bytes -= need;
        if (f->bytes == 0) {
            *pp = f->next;
            free(f);
        }
        dev->allocated += need;
        return 0;
    }
    return -1;
}

/* Return a range, coalescing with its neighbours.  Caller holds dev->mu. */
static void range_give(struct sim_device *dev, dv_dptr start, uint64_t bytes)
{
    uint64_t len = round_up(bytes);
    struct sim_free **pp = &dev->free_list, *prev = NULL;
    while (*pp != NULL && (*pp)->start < start) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    struct sim_free *next = *pp;
    dev->allocated -= len;
    if (prev != NULL && prev->start + prev->bytes == start) {
        prev->bytes += len;
        if (next != NULL && prev->start + prev->bytes == next->start) {
            prev->bytes += next->bytes;
            prev->next = next->next;
            free(next);
        }
        return;
    }
    if (next != NULL && start + len == next->start) {
        next->start = start;
        next->bytes += len;
        return;
    }
    struct sim_free *f = malloc(sizeof(*f));
    if (f == NULL)
        return; /* the range is lost to the sim; never happens in practice */
    f->start = start;
    f->bytes = len;
    f->next = next;
    *pp = f;
}

/* [at, at + bytes) of the arena host memory of its own again, reading
 * zeros (a memfd's mapping there gone, or its pages given back). */
static void arena_wipe(struct sim_device *dev, void *at, uint64_t bytes)
{
    if (dev->memfd < 0 || mmap(at, bytes, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
                               0) == MAP_FAILED)
        (void)madvise(at, bytes, MADV_DONTNEED);
}

static void free_list_reset(struct sim_device *dev)
{
    while (dev->free_list != NULL) {
        struct sim_free *f = dev->free_list;
        dev->free_list = f->next;
        free(f);
    }
    dev->free_list = malloc(sizeof(*dev->free_list));
    if (dev->free_list != NULL)
        *dev->free_list = (struct sim_free){NULL, dev->base, dev->size};
    dev->nlive = 0;
    dev->allocated = 0;
    dev->nva = 0; /* mappings went with the live list */
    dev->nmaps = 0;
    dev->nphys = 0;
    if (dev->memfd >= 0 && dev->memfd_next != 0) {
        /* Physical memory gone too: the reservations' addresses read host
         * memory of their own again. */
        arena_wipe(dev, dev->arena + dev->size, dev->span - dev->size);
        (void)ftruncate(dev->memfd, 0);
        dev->memfd_next = 0;
    }
}

/* Take a range and register it live.  Caller holds dev->mu. */
static int alloc_locked(struct sim_device *dev, uint64_t bytes, dv_dptr *dptr)
{
    if (range_take(dev, bytes, dptr) != 0)
        return DV_CU_OUT_OF_MEMORY;
    if (live_insert(dev, *dptr, bytes) != 0) {
        range_give(dev, *dptr, bytes);
        return DV_CU_OUT_OF_MEMORY;
    }
    return DV_CU_SUCCESS;
}

static int dev_alloc(struct sim_device *dev, uint64_t bytes, dv_dptr *dptr)
{
    if (alloc_should_fail(dev->sd))
        return DV_CU_OUT_OF_MEMORY;
    pthread_mutex_lock(&dev->mu);
    int rc = alloc_locked(dev, bytes, dptr);
    pthread_mutex_unlock(&dev->mu);
    return rc;
}

/* Host address of a device range inside one live allocation, or NULL. */
static void *dev_range(struct sim_device *dev, dv_dptr p, uint64_t bytes)
{
    void *host = NULL;
    pthread_mutex_lock(&dev->mu);
    if (live_containing(dev, p, bytes) >= 0)
        host = dev->arena + (p - dev->base);
    pthread_mutex_unlock(&dev->mu);
    return host;
}

/* Host address of a range anywhere in the driver's arenas (kernels). */
static void *arena_range(struct sim_driver *sd, dv_dptr p, uint64_t bytes)
{
    for (int i = 0; i < sd->ndev; i++) {
        struct sim_device *dev = &sd->dev[i];
        /* The allocations, then the reservations. */
        if (range_holds(dev->base, dev->span, p, bytes))
            return dev->arena + (p - dev->base);
    }
    return NULL;
}

/* ------------------------------------------------------------------------
 * Registered host memory
 * ------------------------------------------------------------------------ */

/* Index of the first range starting at or above p.  Caller holds host_mu. */
static size_t host_lower_bound(const struct sim_driver *sd, uintptr_t p)
{
    size_t lo = 0, hi = sd->nhost;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sd->host[mid].start < p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Is [p, p + bytes) inside one registered range? */
static bool host_registered(struct sim_driver *sd, const void *p, uint64_t bytes)
{
    uintptr_t a = (uintptr_t)p;
    bool in = false;
    pthread_mutex_lock(&sd->host_mu);
    size_t i = host_lower_bound(sd, a + 1);
    if (i > 0) {
        const struct sim_host_range *r = &sd->host[i - 1];
        in = range_holds(r->start, r->bytes, a, bytes);
    }
    pthread_mutex_unlock(&sd->host_mu);
    return in;
}

/* The host address of a device address of a 4-byte word: registered host
 * memory is at its own address, device memory in its arena. */
static uint32_t *value_word(struct sim_device *dev, dv_dptr addr)
{
    if (host_registered(dev->sd, (const void *)(uintptr_t)addr, 4))
        return (uint32_t *)(uintptr_t)addr;
    return arena_range(dev->sd, addr, 4);
}

/* ------------------------------------------------------------------------
 * Timelines and stream workers
 * ------------------------------------------------------------------------ */

static struct sim_timeline *timeline_new(void)
{
    struct sim_timeline *tl = calloc(1, sizeof(*tl));
    if (tl == NULL)
        return NULL;
    pthread_mutex_init(&tl->mu, NULL);
    pthread_cond_init(&tl->cv, NULL);
    atomic_init(&tl->refs, 1);
    return tl;
}

static void timeline_ref(struct sim_timeline *tl)
{
    atomic_fetch_add_explicit(&tl->refs, 1, memory_order_relaxed);
}

static void timeline_unref(struct sim_timeline *tl)
{
    if (tl == NULL)
        return;
    /* acq_rel: the last owner sees every write made under earlier refs. */
    if (atomic_fetch_sub_explicit(&tl->refs, 1, memory_order_acq_rel) != 1)
        return;
    pthread_mutex_destroy(&tl->mu);
    pthread_cond_destroy(&tl->cv);
    free(tl);
}

/* Block until the timeline has finished pos ops. */
static void timeline_wait(struct sim_timeline *tl, uint64_t pos)
{
    pthread_mutex_lock(&tl->mu);
    while (tl->done < pos)
        pthread_cond_wait(&tl->cv, &tl->mu);
    pthread_mutex_unlock(&tl->mu);
}

static void pending_unlink(struct sim_stream *s, struct sim_pending *p)
{
    if (p->prev != NULL)
        p->prev->next = p->next;
    else
        s->pending = p->next;
    if (p->next != NULL)
        p->next->prev = p->prev;
}

static void run_op(struct sim_stream *s, struct sim_op *op)
{
    struct sim_device *dev = s->dev;
    int code;

    if (op->kind == OP_WAIT) {
        timeline_wait(op->u.wait.tl, op->u.wait.pos);
        timeline_unref(op->u.wait.tl);
        return;
    }
    if (op->kind == OP_WAIT_VALUE) {
        /* As the device polls the word: until it reaches the value, the
         * device faults, or the stream is being destroyed. */
        uint32_t *w = op->u.value.word;
        for (unsigned n = 0;
             (int32_t)(__atomic_load_n(w, __ATOMIC_ACQUIRE) - op->u.value.value) < 0; n++) {
            if (sticky_code(dev) != 0)
                return;
            pthread_mutex_lock(&s->tl->mu);
            bool stopping = s->tl->stopping;
            pthread_mutex_unlock(&s->tl->mu);
            if (stopping)
                return;
            if (n < 1000)
                sched_yield(); /* the host is usually about to store it */
            else
                sleep_us(2);
        }
        return;
    }
    if (op->kind == OP_WRITE_VALUE) {
        if (sticky_code(dev) == 0)
            __atomic_store_n(op->u.value.word, op->u.value.value, __ATOMIC_RELEASE);
        return;
    }
    if (op->kind == OP_FREE) {
        /* Reusable by every stream only now that the stream got here. */
        struct sim_pending *p = op->u.free.pending;
        pthread_mutex_lock(&dev->mu);
        if (!p->reused) {
            pending_unlink(s, p);
            range_give(dev, p->start, p->bytes);
        }
        pthread_mutex_unlock(&dev->mu);
        free(p);
        return;
    }
    if (op->kind == OP_STAMP) {
        struct sim_stamp *c = op->u.stamp.cell;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        /* The event may have been recorded again since: stamp only its
         * own record. */
        if (atomic_load_explicit(&c->serial, memory_order_acquire) == op->u.stamp.serial) {
            atomic_store_explicit(&c->stamp_ns,
                                  (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
                                  memory_order_relaxed);
            atomic_store_explicit(&c->stamped_serial, op->u.stamp.serial, memory_order_release);
        }
        stamp_unref(c);
        return;
    }
    if (sticky_code(dev) != 0)
        return; /* no work runs after a sticky error */

    DATA_PLANE_BEGIN();
    switch (op->kind) {
    case OP_HTOD:
        memcpy(op->u.copy.dev, op->u.copy.host, op->u.copy.bytes);
        break;
    case OP_DTOH:
        memcpy(op->u.copy.host, op->u.copy.dev, op->u.copy.bytes);
        break;
    case OP_DTOD:
        memmove(op->u.d2d.dst, op->u.d2d.src, op->u.d2d.bytes);
        break;
    case OP_MEMSET8:
        memset(op->u.set.dst, (int)op->u.set.value, op->u.set.count);
        break;
    case OP_MEMSET32: {
        uint32_t *p = op->u.set.dst;
        for (uint64_t i = 0; i < op->u.set.count; i++)
            p[i] = op->u.set.value;
        break;
    }
    case OP_KERNEL: {
        dv_sim_kctx k = {dev->sd, op->u.kern.grid, op->u.kern.block};
        code = op->u.kern.kernel->fn(&k, op->u.kern.argp);
        if (code != 0) {
            if (dev->sd->cfg.kernel_faults_recoverable)
                atomic_store_explicit(&dev->sticky, code, memory_order_release);
            else
                atomic_store_explicit(&dev->sd->fatal, code, memory_order_release);
        }
        break;
    }
    case OP_HOST_FN:
        DATA_PLANE_END();
        op->u.host.fn(op->u.host.arg);
        DATA_PLANE_BEGIN();
        break;
    default:
        break;
    }
    DATA_PLANE_END();
}

static void *stream_main(void *arg)
{
    struct sim_stream *s = arg;
    struct sim_timeline *tl = s->tl;

    /* Delays are microseconds, as a device's are: without this the
     * kernel's default timer slack (50 us) would stretch every one. */
    (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    pthread_mutex_lock(&tl->mu);
    for (;;) {
        while (tl->head == NULL && !tl->stopping)
            pthread_cond_wait(&tl->cv, &tl->mu);
        if (tl->head == NULL)
            break; /* stopping and drained */
        struct sim_op *op = tl->head;
        tl->head = op->next;
        if (tl->head == NULL)
            tl->tail = NULL;
        pthread_mutex_unlock(&tl->mu);

        uint32_t max_us = atomic_load_explicit(&s->dev->sd->delay_max_us, memory_order_relaxed);
        uint64_t us = atomic_load_explicit(&s->extra_us, memory_order_relaxed);
        if (max_us > 0)
            us += rng_next(&s->rng) % ((uint64_t)max_us + 1);
        if (us > 0 && op->kind != OP_FREE)
            sleep_us(us);
        run_op(s, op);

        pthread_mutex_lock(&tl->mu);
        tl->done = op->pos;
        pthread_cond_broadcast(&tl->cv);
        free(op);
    }
    pthread_mutex_unlock(&tl->mu);
    return NULL;
}

static int enqueue(struct sim_stream *s, struct sim_op *op)
{
    struct sim_timeline *tl = s->tl;
    pthread_mutex_lock(&tl->mu);
    op->next = NULL;
    op->pos = ++tl->enqueued;
    if (tl->tail != NULL)
        tl->tail->next = op;
    else
        tl->head = op;
    tl->tail = op;
    pthread_cond_broadcast(&tl->cv);
    pthread_mutex_unlock(&tl->mu);
    return DV_CU_SUCCESS;
}

static struct sim_op *op_new(enum op_kind kind)
{
    struct sim_op *op = malloc(sizeof(*op));
    if (op != NULL)
        op->kind = kind;
    return op;
}

/* ------------------------------------------------------------------------
 * Driver and devices
 * ------------------------------------------------------------------------ */

static void device_fini(struct sim_device *dev)
{
    if (dev->arena != NULL)
        munmap(dev->arena, dev->span);
    if (dev->memfd >= 0)
        close(dev->memfd);
    dev->memfd = -1;
    free(dev->va);
    free(dev->maps);
    dev->maps = NULL;
    free(dev->phys);
    dev->va = NULL;
    dev->arena = NULL;
    while (dev->free_list != NULL) {
        struct sim_free *f = dev->free_list;
        dev->free_list = f->next;
        free(f);
    }
    free(dev->live);
    dev->live = NULL;
    pthread_mutex_destroy(&dev->mu);
}

static int sim_open(dv_driver *drv, const dv_driver_config *cfg)
{
    struct sim_driver *sd = calloc(1, sizeof(*sd));
    if (sd == NULL)
        return dv__fail(DV_ENOMEM, "open", "sim: out of host memory");
    sd->cfg = cfg->sim;
    sd->ndev = cfg->sim.devices > 0 ? cfg->sim.devices : 1;
    if (sd->ndev > DV_DRV_MAX_DEVICES) {
        free(sd);
        return dv__fail(DV_EINVAL, "open", "sim: %d devices requested, at most %d",
                        cfg->sim.devices, DV_DRV_MAX_DEVICES);
    }
    uint64_t size = cfg->sim.memory_bytes > 0 ? cfg->sim.memory_bytes : UINT64_C(1) << 30;
    /* Checked before rounding, which would wrap near UINT64_MAX. */
    if (size < SIM_DEVICE_STRIDE)
        size = (size + SIM_GRANULE - 1) & ~(SIM_GRANULE - 1);
    if (size >= SIM_DEVICE_STRIDE / 4) {
        free(sd);
        return dv__fail(DV_EINVAL, "open", "sim: %llu bytes per device is too large",
                        (unsigned long long)size);
    }
    sd->dev = calloc((size_t)sd->ndev, sizeof(*sd->dev));
    if (sd->dev == NULL) {
        free(sd);
        return dv__fail(DV_ENOMEM, "open", "sim: out of host memory");
    }
    pthread_mutex_init(&sd->fault_mu, NULL);
    pthread_mutex_init(&sd->host_mu, NULL);
    sd->rng = cfg->sim.seed ^ UINT64_C(0x5DEECE66D);
    sd->fail_alloc_at = cfg->sim.fail_alloc_nth;
    atomic_init(&sd->delay_max_us, cfg->sim.delay_max_us);
    atomic_init(&sd->fault_armed, false);

    for (int i = 0; i < sd->ndev; i++) {
        struct sim_device *dev = &sd->dev[i];
        dev->ordinal = i;
        dev->sd = sd;
        dev->size = size;
        dev->base = SIM_BASE + (uint64_t)i * SIM_DEVICE_STRIDE;
        dev->release_threshold = 0;
        dev->memfd = memfd_create("devactor-sim", MFD_CLOEXEC);
        pthread_mutex_init(&dev->mu, NULL);
        dev->arena = MAP_FAILED;
        for (size_t k = 0; k < sizeof(sim_spans) / sizeof(sim_spans[0]); k++) {
            uint64_t want = sim_spans[k] * size;
            dev->span = want < SIM_DEVICE_STRIDE ? want : SIM_DEVICE_STRIDE;
            dev->arena = mmap(NULL, dev->span, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (dev->arena != MAP_FAILED)
                break;
        }
        if (dev->arena == MAP_FAILED) {
            dev->arena = NULL;
            for (int j = 0; j <= i; j++)
                device_fini(&sd->dev[j]);
            free(sd->dev);
            pthread_mutex_destroy(&sd->fault_mu);
            pthread_mutex_destroy(&sd->host_mu);
            free(sd);
            return dv__fail(DV_ENOMEM, "open",
                            "sim: cannot map %llu bytes of host address space for a device of "
                            "%llu bytes (its memory and reservations; a limit on address "
                            "space, ulimit -v or a memory checker's, refuses it)",
                            (unsigned long long)dev->span, (unsigned long long)size);
        }
        free_list_reset(dev);
    }
    dv__sim_register_builtins();
    drv->impl = sd;
    return DV_OK;
}

static void stream_stop(struct sim_stream *s);

static void sim_close(dv_driver *drv)
{
    struct sim_driver *sd = SD(drv);
    for (int i = 0; i < sd->ndev; i++) {
        struct sim_device *dev = &sd->dev[i];
        /* Streams still alive: finish their work and join the workers. */
        for (;;) {
            pthread_mutex_lock(&dev->mu);
            struct sim_stream *s = dev->streams;
            pthread_mutex_unlock(&dev->mu);
            if (s == NULL)
                break;
            stream_stop(s);
        }
    }
    /* Events still alive hold timeline references. */
    for (dv_drv_obj *o = drv->live_head.live_next; o != &drv->live_head; o = o->live_next) {
        if (o->kind == DV_DRV_EVENT) {
            timeline_unref(EVENT(o)->tl);
            EVENT(o)->tl = NULL;
            stamp_unref(EVENT(o)->stamp); /* the streams ran every queued stamp */
            EVENT(o)->stamp = NULL;
            pthread_mutex_destroy(&EVENT(o)->mu);
        }
    }
    for (int i = 0; i < sd->ndev; i++)
        device_fini(&sd->dev[i]);
    free(sd->dev);
    free(sd->host);
    pthread_mutex_destroy(&sd->fault_mu);
    pthread_mutex_destroy(&sd->host_mu);
    free(sd);
    drv->impl = NULL;
}

static int sim_device_count(dv_driver *drv, int *count)
{
    *count = SD(drv)->ndev;
    return DV_CU_SUCCESS;
}

static int sim_device_info(dv_driver *drv, int ordinal, dv_device_info *info)
{
    struct sim_driver *sd = SD(drv);
    int code = injected(sd, DV_CALL_DEVICE_INFO);
    if (code != 0)
        return code;
    snprintf(info->name, sizeof(info->name), "devactor simulated device %d", ordinal);
    info->total_bytes = sd->dev[ordinal].size;
    info->cc_major = 9;
    info->cc_minor = 0;
    info->multiprocessors = 1;
    return DV_CU_SUCCESS;
}

static int sim_mem_info(dv_drv_obj *ctx, uint64_t *free_bytes, uint64_t *total_bytes)
{
    struct sim_device *dev = CTX(ctx)->dev;
    SIM_ENTER(dev, DV_CALL_MEM_INFO);
    pthread_mutex_lock(&dev->mu);
    *free_bytes = dev->size - dev->allocated;
    *total_bytes = dev->size;
    pthread_mutex_unlock(&dev->mu);
    return DV_CU_SUCCESS;
}

static int sim_ctx_retain(dv_drv_obj *ctx, int ordinal)
{
    struct sim_driver *sd = SD(ctx->drv);
    int code = injected(sd, DV_CALL_CTX_RETAIN);
    if (code == 0)
        code = atomic_load_explicit(&sd->fatal, memory_order_acquire);
    if (code != 0)
        return code;
    CTX(ctx)->dev = &sd->dev[ordinal];
    return DV_CU_SUCCESS;
}

static int sim_ctx_release(dv_drv_obj *ctx)
{
    (void)ctx;
    return DV_CU_SUCCESS;
}

static int sim_ctx_reset(dv_drv_obj *ctx)
{
    struct sim_device *dev = CTX(ctx)->dev;
    int code = injected(dev->sd, DV_CALL_CTX_RESET);
    if (code != 0)
        return code;
    /* The port destroyed every stream of the device already. */
    pthread_mutex_lock(&dev->mu);
    free_list_reset(dev);
    dev->release_threshold = 0;
    pthread_mutex_unlock(&dev->mu);
    /* Host memory registered in the context is not pinned any more. */
    struct sim_driver *sd = dev->sd;
    pthread_mutex_lock(&sd->host_mu);
    size_t kept = 0;
    for (size_t i = 0; i < sd->nhost; i++)
        if (sd->host[i].device != dev->ordinal)
            sd->host[kept++] = sd->host[i];
    sd->nhost = kept;
    pthread_mutex_unlock(&sd->host_mu);
    atomic_store_explicit(&dev->sticky, 0, memory_order_release);
    /* A process-fatal poison stays: the reset "works", nothing else does. */
    return DV_CU_SUCCESS;
}

/* ------------------------------------------------------------------------
 * Streams and events
 * ------------------------------------------------------------------------ */

static int sim_stream_create(dv_drv_obj *ctx, dv_drv_obj *obj)
{
    struct sim_device *dev = CTX(ctx)->dev;
    struct sim_stream *s = STREAM(obj);
    SIM_ENTER(dev, DV_CALL_STREAM_CREATE);

    s->dev = dev;
    s->tl = timeline_new();
    if (s->tl == NULL)
        return DV_CU_OUT_OF_MEMORY;
    uint64_t serial = atomic_fetch_add(&dev->sd->stream_serial, 1);
    s->rng = dev->sd->cfg.seed ^ (serial * UINT64_C(0xD1B54A32D192ED03));
    pthread_mutex_lock(&dev->mu);
    int index = dev->stream_serial++;
    pthread_mutex_unlock(&dev->mu);
    atomic_init(&s->extra_us, 0);
    if (dev->sd->cfg.slow_stream >= 0 && index == dev->sd->cfg.slow_stream)
        atomic_store(&s->extra_us, dev->sd->cfg.slow_stream_us);
    if (pthread_create(&s->thread, NULL, stream_main, s) != 0) {
        timeline_unref(s->tl);
        return DV_CU_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&dev->mu);
    s->prev = NULL;
    s->next = dev->streams;
    if (dev->streams != NULL)
        dev->streams->prev = s;
    dev->streams = s;
    pthread_mutex_unlock(&dev->mu);
    return DV_CU_SUCCESS;
}

/* Let the worker drain its queue, join it, unlink the stream. */
static void stream_stop(struct sim_stream *s)
{
    struct sim_device *dev = s->dev;
    pthread_mutex_lock(&s->tl->mu);
    s->tl->stopping = true;
    pthread_cond_broadcast(&s->tl->cv);
    pthread_mutex_unlock(&s->tl->mu);
    pthread_join(s->thread, NULL);

    pthread_mutex_lock(&dev->mu);
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        dev->streams = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    pthread_mutex_unlock(&dev->mu);
    timeline_unref(s->tl);
    s->tl = NULL;
}

static int sim_stream_destroy(dv_drv_obj *obj)
{
    stream_stop(STREAM(obj));
    return sticky_code(DEV_OF(obj));
}

static int sim_stream_sync(dv_drv_obj *obj)
{
    struct sim_stream *s = STREAM(obj);
    SIM_ENTER(s->dev, DV_CALL_STREAM_SYNC);
    pthread_mutex_lock(&s->tl->mu);
    uint64_t target = s->tl->enqueued;
    pthread_mutex_unlock(&s->tl->mu);
    timeline_wait(s->tl, target);
    return sticky_code(s->dev);
}

static int sim_stream_query(dv_drv_obj *obj, bool *done)
{
    struct sim_stream *s = STREAM(obj);
    SIM_ENTER(s->dev, DV_CALL_STREAM_QUERY);
    pthread_mutex_lock(&s->tl->mu);
    *done = s->tl->done == s->tl->enqueued;
    pthread_mutex_unlock(&s->tl->mu);
    /* Again after reading the position: work that faulted meanwhile is
     * reported by the query that sees it finish, as on the real driver. */
    return sticky_code(s->dev);
}

static int sim_event_create(dv_drv_obj *ctx, dv_drv_obj *obj)
{
    SIM_ENTER(CTX(ctx)->dev, DV_CALL_EVENT_CREATE);
    pthread_mutex_init(&EVENT(obj)->mu, NULL);
    EVENT(obj)->tl = NULL;
    return DV_CU_SUCCESS;
}

static int sim_event_destroy(dv_drv_obj *obj)
{
    struct sim_event *ev = EVENT(obj);
    timeline_unref(ev->tl);
    ev->tl = NULL;
    stamp_unref(ev->stamp); /* a stamp still queued keeps its cell */
    ev->stamp = NULL;
    pthread_mutex_destroy(&ev->mu);
    return sticky_code(DEV_OF(obj));
}

/* The event's captured (timeline, position), with a reference; tl NULL if
 * never recorded. */
static void event_capture(struct sim_event *ev, struct sim_timeline **tl, uint64_t *pos)
{
    pthread_mutex_lock(&ev->mu);
    *tl = ev->tl;
    *pos = ev->pos;
    if (*tl != NULL)
        timeline_ref(*tl);
    pthread_mutex_unlock(&ev->mu);
}

static int sim_event_record(dv_drv_obj *obj, dv_drv_obj *stream)
{
    struct sim_event *ev = EVENT(obj);
    struct sim_stream *s = STREAM(stream);
    SIM_ENTER(s->dev, DV_CALL_EVENT_RECORD);

    if (obj->flags & DV_DRV_EVENT_TIMING) {
        /* The record is an op of its own, which stamps the time. */
        if (ev->stamp == NULL) {
            ev->stamp = calloc(1, sizeof(*ev->stamp));
            if (ev->stamp == NULL)
                return DV_CU_OUT_OF_MEMORY;
            atomic_init(&ev->stamp->refs, 1);
        }
        struct sim_op *op = op_new(OP_STAMP);
        if (op == NULL)
            return DV_CU_OUT_OF_MEMORY;
        atomic_fetch_add_explicit(&ev->stamp->refs, 1, memory_order_relaxed);
        op->u.stamp.cell = ev->stamp;
        op->u.stamp.serial = atomic_fetch_add(&stamp_serials, 1);
        atomic_store_explicit(&ev->stamp->serial, op->u.stamp.serial, memory_order_release);
        enqueue(s, op);
    }
    pthread_mutex_lock(&s->tl->mu);
    uint64_t pos = s->tl->enqueued;
    pthread_mutex_unlock(&s->tl->mu);
    timeline_ref(s->tl);

    pthread_mutex_lock(&ev->mu);
    struct sim_timeline *old = ev->tl;
    ev->tl = s->tl;
    ev->pos = pos;
    pthread_mutex_unlock(&ev->mu);
    timeline_unref(old);
    return DV_CU_SUCCESS;
}

static int sim_event_query(dv_drv_obj *obj, bool *done)
{
    struct sim_timeline *tl;
    uint64_t pos;
    SIM_ENTER(DEV_OF(obj), DV_CALL_EVENT_QUERY);
    event_capture(EVENT(obj), &tl, &pos);
    *done = true;
    if (tl != NULL) {
        pthread_mutex_lock(&tl->mu);
        *done = tl->done >= pos;
        pthread_mutex_unlock(&tl->mu);
        timeline_unref(tl);
    }
    /* Again after reading the position (see sim_stream_query). */
    return sticky_code(DEV_OF(obj));
}

static int sim_event_sync(dv_drv_obj *obj)
{
    struct sim_timeline *tl;
    uint64_t pos;
    SIM_ENTER(DEV_OF(obj), DV_CALL_EVENT_SYNC);
    event_capture(EVENT(obj), &tl, &pos);
    if (tl != NULL) {
        timeline_wait(tl, pos);
        timeline_unref(tl);
    }
    return sticky_code(DEV_OF(obj));
}

static int sim_event_elapsed(dv_drv_obj *start, dv_drv_obj *end, float *ms)
{
    struct sim_stamp *a = EVENT(start)->stamp, *b = EVENT(end)->stamp;
    SIM_ENTER(DEV_OF(start), DV_CALL_EVENT_ELAPSED);
    if (a == NULL || b == NULL)
        return DV_CU_INVALID_HANDLE; /* never recorded, as the real driver says */
    uint64_t sa = atomic_load_explicit(&a->serial, memory_order_acquire);
    uint64_t sb = atomic_load_explicit(&b->serial, memory_order_acquire);
    if (atomic_load_explicit(&a->stamped_serial, memory_order_acquire) != sa ||
        atomic_load_explicit(&b->stamped_serial, memory_order_acquire) != sb)
        return DV_CU_NOT_READY;
    uint64_t ta = atomic_load_explicit(&a->stamp_ns, memory_order_relaxed);
    uint64_t tb = atomic_load_explicit(&b->stamp_ns, memory_order_relaxed);
    *ms = (float)((double)((int64_t)(tb - ta)) / 1e6);
    return DV_CU_SUCCESS;
}

static int sim_stream_wait_event(dv_drv_obj *stream, dv_drv_obj *event)
{
    struct sim_stream *s = STREAM(stream);
    struct sim_timeline *tl;
    uint64_t pos;
    SIM_ENTER(s->dev, DV_CALL_STREAM_WAIT_EVENT);

    event_capture(EVENT(event), &tl, &pos);
    if (tl == NULL)
        return DV_CU_SUCCESS; /* never recorded: nothing to wait for */
    if (tl == s->tl) {
        timeline_unref(tl); /* same stream: already in order */
        return DV_CU_SUCCESS;
    }
    struct sim_op *op = op_new(OP_WAIT);
    if (op == NULL) {
        timeline_unref(tl);
        return DV_CU_OUT_OF_MEMORY;
    }
    op->u.wait.tl = tl; /* the op owns the reference */
    op->u.wait.pos = pos;
    return enqueue(s, op);
}

/* ------------------------------------------------------------------------
 * Memory ops
 * ------------------------------------------------------------------------ */

static int sim_mem_alloc(dv_drv_obj *ctx, uint64_t bytes, dv_dptr *dptr)
{
    struct sim_device *dev = CTX(ctx)->dev;
    SIM_ENTER(dev, DV_CALL_MEM_ALLOC);
    return dev_alloc(dev, bytes, dptr);
}

/* Remove a live allocation that starts at dptr; its length, or 0. */
static uint64_t live_take(struct sim_device *dev, dv_dptr dptr)
{
    uint64_t bytes = 0;
    size_t i = live_lower_bound(dev, dptr);
    if (i < dev->nlive && dev->live[i].start == dptr && !dev->live[i].mapped) {
        bytes = dev->live[i].bytes;
        live_remove_at(dev, i);
    }
    return bytes;
}

static int sim_mem_free(dv_drv_obj *ctx, dv_dptr dptr)
{
    struct sim_device *dev = CTX(ctx)->dev;
    SIM_ENTER(dev, DV_CALL_MEM_FREE);

    pthread_mutex_lock(&dev->mu);
    uint64_t bytes = live_take(dev, dptr);
    /* The synchronous free waits for the device's work, as cuMemFree does:
     * hold references to every stream's timeline and its target. */
    size_t n = 0;
    for (struct sim_stream *s = dev->streams; s != NULL; s = s->next)
        n++;
    struct {
        struct sim_timeline *tl;
        uint64_t target;
    } *wait = n ? malloc(n * sizeof(*wait)) : NULL;
    size_t k = 0;
    if (wait != NULL) {
        for (struct sim_stream *s = dev->streams; s != NULL; s = s->next, k++) {
            wait[k].tl = s->tl;
            timeline_ref(s->tl);
            pthread_mutex_lock(&s->tl->mu);
            wait[k].target = s->tl->enqueued;
            pthread_mutex_unlock(&s->tl->mu);
        }
    }
    pthread_mutex_unlock(&dev->mu);
    for (size_t i = 0; i < k; i++) {
        timeline_wait(wait[i].tl, wait[i].target);
        timeline_unref(wait[i].tl);
    }
    free(wait);
    if (bytes == 0)
        return DV_CU_INVALID_VALUE;
    pthread_mutex_lock(&dev->mu);
    range_give(dev, dptr, bytes);
    pthread_mutex_unlock(&dev->mu);
    return DV_CU_SUCCESS;
}

static int sim_mem_alloc_async(dv_drv_obj *stream, uint64_t bytes, dv_dptr *dptr)
{
    struct sim_stream *s = STREAM(stream);
    struct sim_device *dev = s->dev;
    SIM_ENTER(dev, DV_CALL_MEM_ALLOC_ASYNC);

    /* Same-stream reuse of a free the stream has not reached yet, of the
     * same rounded size, as the driver's pool does. */
    if (alloc_should_fail(dev->sd))
        return DV_CU_OUT_OF_MEMORY;
    pthread_mutex_lock(&dev->mu);
    for (struct sim_pending *p = s->pending; p != NULL; p = p->next) {
        if (round_up(p->bytes) == round_up(bytes) && live_insert(dev, p->start, bytes) == 0) {
            pending_unlink(s, p);
            p->reused = true; /* its bytes never left dev->allocated */
            *dptr = p->start;
            pthread_mutex_unlock(&dev->mu);
            return DV_CU_SUCCESS;
        }
    }
    int rc = alloc_locked(dev, bytes, dptr);
    pthread_mutex_unlock(&dev->mu);
    return rc;
}

static int sim_mem_free_async(dv_drv_obj *stream, dv_dptr dptr)
{
    struct sim_stream *s = STREAM(stream);
    struct sim_device *dev = s->dev;
    SIM_ENTER(dev, DV_CALL_MEM_FREE_ASYNC);

    struct sim_op *op = op_new(OP_FREE);
    struct sim_pending *p = calloc(1, sizeof(*p));
    if (op == NULL || p == NULL) {
        free(op);
        free(p);
        return DV_CU_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&dev->mu);
    uint64_t bytes = live_take(dev, dptr);
    if (bytes != 0) {
        p->start = dptr;
        p->bytes = bytes;
        p->next = s->pending;
        if (s->pending != NULL)
            s->pending->prev = p;
        s->pending = p;
    }
    pthread_mutex_unlock(&dev->mu);
    if (bytes == 0) {
        free(op);
        free(p);
        return DV_CU_INVALID_VALUE;
    }
    op->u.free.pending = p;
    return enqueue(s, op);
}

static int sim_pool_set_threshold(dv_drv_obj *ctx, uint64_t bytes)
{
    struct sim_device *dev = CTX(ctx)->dev;
    SIM_ENTER(dev, DV_CALL_POOL_SET_THRESHOLD);
    pthread_mutex_lock(&dev->mu);
    dev->release_threshold = bytes;
    pthread_mutex_unlock(&dev->mu);
    return DV_CU_SUCCESS;
}

static int sim_pool_get_threshold(dv_drv_obj *ctx, uint64_t *bytes)
{
    struct sim_device *dev = CTX(ctx)->dev;
    SIM_ENTER(dev, DV_CALL_POOL_GET_THRESHOLD);
    pthread_mutex_lock(&dev->mu);
    *bytes = dev->release_threshold;
    pthread_mutex_unlock(&dev->mu);
    return DV_CU_SUCCESS;
}

/* The sim's pool keeps nothing it could give back (freed memory returns
 * to the device at once): a trim has nothing to do. */
static int sim_pool_trim(dv_drv_obj *ctx, uint64_t keep_bytes)
{
    struct sim_device *dev = CTX(ctx)->dev;
    (void)keep_bytes;
    SIM_ENTER(dev, DV_CALL_POOL_TRIM);
    return DV_CU_SUCCESS;
}

/* ------------------------------------------------------------------------
 * Virtual memory: reservations above the arena's first size bytes, mappings in the
 * live list (merged, so a copy may cross the granules of two mappings, as
 * on a GPU), counted as allocated against the device's size.
 * ------------------------------------------------------------------------ */

static int sim_vmm_granularity(dv_drv_obj *ctx, uint64_t *bytes)
{
    struct sim_device *dev = CTX(ctx)->dev;
    SIM_ENTER(dev, DV_CALL_VMM_GRANULARITY);
    *bytes = SIM_GRANULE;
    return DV_CU_SUCCESS;
}

/* The reservation holding [va, va + bytes), or -1.  Caller holds dev->mu. */
static long va_containing(const struct sim_device *dev, dv_dptr va, uint64_t bytes)
{
    for (size_t i = 0; i < dev->nva; i++) {
        const struct sim_range *r = &dev->va[i];
        if (range_holds(r->start, r->bytes, va, bytes))
            return (long)i;
    }
    return -1;
}

static int sim_va_reserve(dv_drv_obj *ctx, uint64_t bytes, dv_dptr *va)
{
    struct sim_device *dev = CTX(ctx)->dev;
    SIM_ENTER(dev, DV_CALL_VA_RESERVE);
    uint64_t need = (bytes + SIM_GRANULE - 1) & ~(SIM_GRANULE - 1);
    int rc = DV_CU_OUT_OF_MEMORY;

    pthread_mutex_lock(&dev->mu);
    if (dev->nva == dev->cap_va) {
        size_t cap = dev->cap_va ? dev->cap_va * 2 : 8;
        struct sim_range *n = realloc(dev->va, cap * sizeof(*n));
        if (n == NULL)
            goto out;
        dev->va = n;
        dev->cap_va = cap;
    }
    /* First fit in the gaps between reservations. */
    dv_dptr at = dev->base + dev->size, end = dev->base + dev->span;
    size_t i = 0;
    for (; i < dev->nva && dev->va[i].start - at < need; i++)
        at = dev->va[i].start + dev->va[i].bytes;
    if (need > end - at)
        goto out;
    memmove(&dev->va[i + 1], &dev->va[i], (dev->nva - i) * sizeof(dev->va[0]));
    dev->va[i] = (struct sim_range){at, need, false};
    dev->nva++;
    *va = at;
    rc = DV_CU_SUCCESS;
out:
    pthread_mutex_unlock(&dev->mu);
    return rc;
}

/* Any mapping overlapping [va, va + bytes)?  Caller holds dev->mu. */
static bool mapped_within(const struct sim_device *dev, dv_dptr va, uint64_t bytes)
{
    size_t i = live_lower_bound(dev, va);
    for (i = i > 0 ? i - 1 : 0; i < dev->nlive && dev->live[i].start < va + bytes; i++)
        if (dev->live[i].mapped && dev->live[i].start + dev->live[i].bytes > va)
            return true;
    return false;
}

static int sim_va_release(dv_drv_obj *ctx, dv_dptr va, uint64_t bytes)
{
    struct sim_device *dev = CTX(ctx)->dev;
    SIM_ENTER(dev, DV_CALL_VA_RELEASE);
    int rc = DV_CU_INVALID_VALUE;
    pthread_mutex_lock(&dev->mu);
    long i = va_containing(dev, va, bytes);
    /* Whole, and nothing mapped in it any more (as the driver asks). */
    if (i >= 0 && dev->va[i].start == va && !mapped_within(dev, va, dev->va[i].bytes)) {
        memmove(&dev->va[i], &dev->va[i + 1], (dev->nva - (size_t)i - 1) * sizeof(dev->va[0]));
        dev->nva--;
        rc = DV_CU_SUCCESS;
    }
    pthread_mutex_unlock(&dev->mu);
    return rc;
}

/* The first mapping as made ending past va.  Caller holds dev->mu. */
static size_t maps_after(const struct sim_device *dev, dv_dptr va)
{
    size_t lo = 0, hi = dev->nmaps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (dev->maps[mid].start + dev->maps[mid].bytes <= va)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Forget the mappings as made within [va, va + bytes), if no mapping lies
 * partly in it (the driver unmaps whole mappings only).  Caller holds
 * dev->mu. */
static bool maps_cut(struct sim_device *dev, dv_dptr va, uint64_t bytes)
{
    size_t i = maps_after(dev, va), j = i;
    for (; j < dev->nmaps && dev->maps[j].start < va + bytes; j++)
        if (dev->maps[j].start < va || dev->maps[j].start + dev->maps[j].bytes > va + bytes)
            return false;
    memmove(&dev->maps[i], &dev->maps[j], (dev->nmaps - j) * sizeof(dev->maps[0]));
    dev->nmaps -= j - i;
    return true;
}

/* Map [va, va + bytes) of reserved address space, joined with mappings
 * beside it.  Caller holds dev->mu; the bytes are counted by the caller. */
static int map_locked(struct sim_device *dev, dv_dptr va, uint64_t bytes)
{
    if (va_containing(dev, va, bytes) < 0 || mapped_within(dev, va, bytes))
        return DV_CU_INVALID_VALUE;
    if (dv__array_reserve((void **)&dev->maps, &dev->cap_maps, (uint64_t)dev->nmaps + 1,
                          sizeof(*dev->maps)) != 0)
        return DV_CU_OUT_OF_MEMORY;
    size_t m = maps_after(dev, va);
    memmove(&dev->maps[m + 1], &dev->maps[m], (dev->nmaps - m) * sizeof(dev->maps[0]));
    dev->maps[m] = (struct sim_range){va, bytes, true};
    dev->nmaps++;
    size_t i = live_lower_bound(dev, va);
    struct sim_range *prev = i > 0 ? &dev->live[i - 1] : NULL;
    struct sim_range *next = i < dev->nlive ? &dev->live[i] : NULL;
    bool join_prev = prev != NULL && prev->mapped && prev->start + prev->bytes == va;
    bool join_next = next != NULL && next->mapped && va + bytes == next->start;
    if (join_prev && join_next) {
        prev->bytes += bytes + next->bytes;
        live_remove_at(dev, i);
    } else if (join_prev) {
        prev->bytes += bytes;
    } else if (join_next) {
        next->start = va;
        next->bytes += bytes;
    } else {
        if (live_insert(dev, va, bytes) != 0) {
            (void)maps_cut(dev, va, bytes);
            return DV_CU_OUT_OF_MEMORY;
        }
        dev->live[i].mapped = true;
    }
    return DV_CU_SUCCESS;
}

/* Unmap [va, va + bytes), which lies in one mapping.  Caller holds
 * dev->mu; the bytes are uncounted by the caller. */
static int unmap_locked(struct sim_device *dev, dv_dptr va, uint64_t bytes)
{
    long k = live_containing(dev, va, bytes);
    if (k < 0 || !dev->live[k].mapped || va % SIM_GRANULE != 0 || bytes % SIM_GRANULE != 0 ||
        !maps_cut(dev, va, bytes))
        return DV_CU_INVALID_VALUE;
    struct sim_range whole = dev->live[k];
    dv_dptr end = va + bytes, whole_end = whole.start + whole.bytes;
    if (whole.start < va && end < whole_end) {
        /* A hole in the middle: the tail becomes a mapping of its own. */
        if (live_insert(dev, end, whole_end - end) != 0)
            return DV_CU_INVALID_VALUE;
        dev->live[k + 1].mapped = true;
        dev->live[k].bytes = va - whole.start;
    } else if (whole.start < va) {
        dev->live[k].bytes = va - whole.start;
    } else if (end < whole_end) {
        dev->live[k].start = end;
        dev->live[k].bytes = whole_end - end;
    } else {
        live_remove_at(dev, (size_t)k);
    }
    /* Its pages go back to the host (the memfd's stay with its physical
     * memory); mapped again, it reads zeros. */
    arena_wipe(dev, dev->arena + (va - dev->base), bytes);
    return DV_CU_SUCCESS;
}

/* Show physical memory at [va, va + bytes): its memfd bytes mapped over
 * the arena there.  Caller holds dev->mu and mapped the range. */
static int phys_show(struct sim_device *dev, dv_dptr va, uint64_t bytes, uint64_t off)
{
    if (dev->memfd < 0)
        return DV_CU_SUCCESS;
    void *at = mmap(dev->arena + (va - dev->base), bytes, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_FIXED, dev->memfd, (off_t)off);
    return at == MAP_FAILED ? DV_CU_OUT_OF_MEMORY : DV_CU_SUCCESS;
}

/* The physical memory of handle: its index, or -1.  Caller holds dev->mu. */
static long phys_find(const struct sim_device *dev, uint64_t handle)
{
    for (uint32_t i = 0; i < dev->nphys; i++)
        if (dev->phys[i].handle == handle)
            return (long)i;
    return -1;
}

/* One mapping of phys[i] fewer, or (released) its release: mapped nowhere
 * and released, its memory goes back.  Caller holds dev->mu. */
static void phys_drop(struct sim_device *dev, long i, bool unmapped, bool release)
{
    struct sim_phys *ph = &dev->phys[i];
    if (unmapped)
        ph->maps--;
    if (release)
        ph->released = true;
    if (ph->maps == 0 && ph->released) {
        dev->allocated -= ph->bytes;
        if (dev->memfd >= 0)
            (void)fallocate(dev->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                            (off_t)ph->off, (off_t)ph->bytes);
        *ph = dev->phys[--dev->nphys];
    }
}

static int sim_mem_map(dv_drv_obj *ctx, dv_dptr va, uint64_t bytes, uint64_t *handle)
{
    struct sim_device *dev = CTX(ctx)->dev;
    SIM_ENTER(dev, DV_CALL_MEM_MAP);
    if (va % SIM_GRANULE != 0 || bytes % SIM_GRANULE != 0)
        return DV_CU_INVALID_VALUE;
    if (alloc_should_fail(dev->sd))
        return DV_CU_OUT_OF_MEMORY;
    pthread_mutex_lock(&dev->mu);
    int rc = va_containing(dev, va, bytes) < 0 || mapped_within(dev, va, bytes)
                 ? DV_CU_INVALID_VALUE
             : bytes > dev->size - dev->allocated ? DV_CU_OUT_OF_MEMORY
             : dv__array_reserve((void **)&dev->phys, &dev->cap_phys, (uint64_t)dev->nphys + 1,
                                 sizeof(*dev->phys)) != 0
                 ? DV_CU_OUT_OF_MEMORY
                 : map_locked(dev, va, bytes);
    struct sim_phys ph = {dev->next_handle + 1, bytes, dev->memfd_next, 1, false};
    if (rc == DV_CU_SUCCESS && dev->memfd >= 0 &&
        (ftruncate(dev->memfd, (off_t)(ph.off + bytes)) != 0 ||
         phys_show(dev, va, bytes, ph.off) != DV_CU_SUCCESS)) {
        (void)unmap_locked(dev, va, bytes);
        rc = DV_CU_OUT_OF_MEMORY;
    }
    if (rc == DV_CU_SUCCESS) {
        dev->allocated += bytes;
        dev->memfd_next += bytes;
        *handle = ++dev->next_handle;
        dev->phys[dev->nphys++] = ph;
    }
    pthread_mutex_unlock(&dev->mu);
    return rc;
}

static int sim_mem_unmap(dv_drv_obj *ctx, dv_dptr va, uint64_t bytes, uint64_t handle)
{
    struct sim_device *dev = CTX(ctx)->dev;
    SIM_ENTER(dev, DV_CALL_MEM_UNMAP);
    pthread_mutex_lock(&dev->mu);
    long i = phys_find(dev, handle);
    int rc = i < 0 || dev->phys[i].maps == 0 || dev->phys[i].released ? DV_CU_INVALID_VALUE
                                                                       : unmap_locked(dev, va, bytes);
    if (rc == DV_CU_SUCCESS)
        phys_drop(dev, i, true, true);
    pthread_mutex_unlock(&dev->mu);
    return rc;
}

static int sim_mem_unmap_keep(dv_drv_obj *ctx, dv_dptr va, uint64_t bytes, uint64_t handle)
{
    struct sim_device *dev = CTX(ctx)->dev;
    SIM_ENTER(dev, DV_CALL_MEM_UNMAP_KEEP);
    pthread_mutex_lock(&dev->mu);
    long i = phys_find(dev, handle);
    int rc = i < 0 || dev->phys[i].maps == 0 ? DV_CU_INVALID_VALUE : unmap_locked(dev, va, bytes);
    if (rc == DV_CU_SUCCESS)
        phys_drop(dev, i, true, false);
    pthread_mutex_unlock(&dev->mu);
    return rc;
}

/* Memory mem_map made, all of it, mapped (again, or once more: an alias)
 * at va. */
static int sim_mem_remap(dv_drv_obj *ctx, dv_dptr va, uint64_t bytes, uint64_t handle)
{
    struct sim_device *dev = CTX(ctx)->dev;
    SIM_ENTER(dev, DV_CALL_MEM_REMAP);
    if (va % SIM_GRANULE != 0)
        return DV_CU_INVALID_VALUE;
    pthread_mutex_lock(&dev->mu);
    long i = phys_find(dev, handle);
    int rc = i < 0 || dev->phys[i].bytes != bytes || dev->phys[i].released
                 ? DV_CU_INVALID_VALUE
                 : map_locked(dev, va, bytes);
    if (rc == DV_CU_SUCCESS && phys_show(dev, va, bytes, dev->phys[i].off) !=
                                   DV_CU_SUCCESS) {
        (void)unmap_locked(dev, va, bytes);
        rc = DV_CU_OUT_OF_MEMORY;
    }
    if (rc == DV_CU_SUCCESS)
        dev->phys[i].maps++;
    pthread_mutex_unlock(&dev->mu);
    return rc;
}

/* Released: its memory goes back once it is mapped nowhere. */
static int sim_mem_release(dv_drv_obj *ctx, uint64_t handle)
{
    struct sim_device *dev = CTX(ctx)->dev;
    SIM_ENTER(dev, DV_CALL_MEM_RELEASE);
    pthread_mutex_lock(&dev->mu);
    long i = phys_find(dev, handle);
    int rc = i < 0 || dev->phys[i].released ? DV_CU_INVALID_VALUE : DV_CU_SUCCESS;
    if (rc == DV_CU_SUCCESS)
        phys_drop(dev, i, false, true);
    pthread_mutex_unlock(&dev->mu);
    return rc;
}

static int copy_op(struct sim_stream *s, enum op_kind kind, void *host, dv_dptr d, uint64_t bytes)
{
    void *dev_host = dev_range(s->dev, d, bytes);
    if (dev_host == NULL)
        return DV_CU_INVALID_VALUE;
    struct sim_op *op = op_new(kind);
    if (op == NULL)
        return DV_CU_OUT_OF_MEMORY;
    op->u.copy.host = host;
    op->u.copy.dev = dev_host;
    op->u.copy.bytes = bytes;
    return enqueue(s, op);
}

/*
 * As on the real driver, a copy between the device and pageable host
 * memory (not registered) is synchronous for the calling thread: it
 * returns once the stream got through the copy.  One to or from
 * registered memory is asynchronous.
 */
static int host_copy(struct sim_stream *s, enum op_kind kind, void *host, dv_dptr d, uint64_t bytes)
{
    int code = copy_op(s, kind, host, d, bytes);
    if (code != DV_CU_SUCCESS || host_registered(s->dev->sd, host, bytes))
        return code;
    pthread_mutex_lock(&s->tl->mu);
    uint64_t pos = s->tl->enqueued;
    pthread_mutex_unlock(&s->tl->mu);
    timeline_wait(s->tl, pos);
    return sticky_code(s->dev);
}

static int sim_memcpy_htod(dv_drv_obj *stream, dv_dptr dst, const void *src, uint64_t bytes)
{
    SIM_ENTER(STREAM(stream)->dev, DV_CALL_MEMCPY_HTOD);
    return host_copy(STREAM(stream), OP_HTOD, (void *)src, dst, bytes);
}

static int sim_memcpy_dtoh(dv_drv_obj *stream, void *dst, dv_dptr src, uint64_t bytes)
{
    SIM_ENTER(STREAM(stream)->dev, DV_CALL_MEMCPY_DTOH);
    return host_copy(STREAM(stream), OP_DTOH, dst, src, bytes);
}

static int d2d_op(struct sim_stream *s, struct sim_device *ddev, dv_dptr dst,
                  struct sim_device *sdev, dv_dptr src, uint64_t bytes)
{
    void *d = dev_range(ddev, dst, bytes);
    void *h = dev_range(sdev, src, bytes);
    if (d == NULL || h == NULL)
        return DV_CU_INVALID_VALUE;
    struct sim_op *op = op_new(OP_DTOD);
    if (op == NULL)
        return DV_CU_OUT_OF_MEMORY;
    op->u.d2d.dst = d;
    op->u.d2d.src = h;
    op->u.d2d.bytes = bytes;
    return enqueue(s, op);
}

static int sim_memcpy_dtod(dv_drv_obj *stream, dv_dptr dst, dv_dptr src, uint64_t bytes)
{
    struct sim_stream *s = STREAM(stream);
    SIM_ENTER(s->dev, DV_CALL_MEMCPY_DTOD);
    return d2d_op(s, s->dev, dst, s->dev, src, bytes);
}

static int sim_memcpy_peer(dv_drv_obj *stream, dv_drv_obj *dst_ctx, dv_dptr dst,
                           dv_drv_obj *src_ctx, dv_dptr src, uint64_t bytes)
{
    struct sim_stream *s = STREAM(stream);
    SIM_ENTER(s->dev, DV_CALL_MEMCPY_PEER);
    int code = sticky_code(CTX(dst_ctx)->dev);
    if (code == 0)
        code = sticky_code(CTX(src_ctx)->dev);
    if (code != 0)
        return code;
    return d2d_op(s, CTX(dst_ctx)->dev, dst, CTX(src_ctx)->dev, src, bytes);
}

static int set_op(struct sim_stream *s, enum op_kind kind, dv_dptr dst, uint32_t value,
                  uint64_t count, uint64_t bytes)
{
    void *d = dev_range(s->dev, dst, bytes);
    if (d == NULL)
        return DV_CU_INVALID_VALUE;
    struct sim_op *op = op_new(kind);
    if (op == NULL)
        return DV_CU_OUT_OF_MEMORY;
    op->u.set.dst = d;
    op->u.set.value = value;
    op->u.set.count = count;
    return enqueue(s, op);
}

static int sim_memset_d8(dv_drv_obj *stream, dv_dptr dst, uint8_t value, uint64_t count)
{
    SIM_ENTER(STREAM(stream)->dev, DV_CALL_MEMSET_D8);
    return set_op(STREAM(stream), OP_MEMSET8, dst, value, count, count);
}

static int sim_memset_d32(dv_drv_obj *stream, dv_dptr dst, uint32_t value, uint64_t count)
{
    SIM_ENTER(STREAM(stream)->dev, DV_CALL_MEMSET_D32);
    return set_op(STREAM(stream), OP_MEMSET32, dst, value, count, count * 4);
}

/* ------------------------------------------------------------------------
 * Modules, kernels, host functions
 * ------------------------------------------------------------------------ */

/* Recognise an image the real driver would take, or the sim's own. */
static bool image_known(const unsigned char *p, size_t n)
{
    static const unsigned char fatbin[4] = {0x50, 0xED, 0x55, 0xBA}; /* 0xBA55ED50 LE */
    static const unsigned char elf[4] = {0x7F, 'E', 'L', 'F'};
    if (n >= 4 && (memcmp(p, fatbin, 4) == 0 || memcmp(p, elf, 4) == 0))
        return true;
    if (n >= dv__sim_builtin_image_size &&
        memcmp(p, dv__sim_builtin_image, dv__sim_builtin_image_size) == 0)
        return true;
    /* PTX is text with a .version directive near the top. */
    size_t scan = n < 4096 ? n : 4096;
    for (size_t i = 0; i + 8 <= scan; i++)
        if (memcmp(p + i, ".version", 8) == 0)
            return true;
    return false;
}

bool dv__sim_is_user_image(const void *image, size_t image_bytes)
{
    return image != NULL && image_bytes >= sizeof(dv_sim_image) &&
           memcmp(((const dv_sim_image *)image)->magic, DV_SIM_IMAGE_MAGIC,
                  sizeof(DV_SIM_IMAGE_MAGIC)) == 0;
}

static int sim_module_load(dv_drv_obj *ctx, dv_drv_obj *module, const void *image,
                           size_t image_bytes)
{
    SIM_ENTER(CTX(ctx)->dev, DV_CALL_MODULE_LOAD);
    if (dv__sim_is_user_image(image, image_bytes)) {
        const dv_sim_image *img = image;
        if (img->nkernels > 0 && img->kernels == NULL)
            return DV_CU_INVALID_IMAGE;
        for (uint32_t i = 0; i < img->nkernels; i++)
            if (dv__sim_kernel_check(&img->kernels[i], "module_load") != DV_OK)
                return DV_CU_INVALID_IMAGE;
        ((struct sim_module *)module)->image = img;
        return DV_CU_SUCCESS;
    }
    return image_known(image, image_bytes) ? DV_CU_SUCCESS : DV_CU_INVALID_IMAGE;
}

static int sim_module_unload(dv_drv_obj *module)
{
    return sticky_code(DEV_OF(module));
}

static int sim_func_get(dv_drv_obj *module, dv_drv_obj *func, const char *name)
{
    SIM_ENTER(DEV_OF(module), DV_CALL_FUNC_GET);
    const dv_sim_image *img = ((struct sim_module *)module)->image;
    const dv_sim_kernel *k = NULL;
    if (img == NULL) {
        k = dv__sim_find_kernel(name);
    } else {
        for (uint32_t i = 0; i < img->nkernels && k == NULL; i++)
            if (strcmp(img->kernels[i].name, name) == 0)
                k = &img->kernels[i];
    }
    if (k == NULL)
        return DV_CU_NOT_FOUND;
    ((struct sim_func *)func)->kernel = k;
    return DV_CU_SUCCESS;
}

static void sim_builtin_image(const dv_driver *drv, const void **image, size_t *bytes)
{
    (void)drv;
    if (dv__kernels_fatbin_size > 0) {
        *image = dv__kernels_fatbin;
        *bytes = dv__kernels_fatbin_size;
    } else {
        *image = dv__sim_builtin_image;
        *bytes = dv__sim_builtin_image_size;
    }
}

static int sim_launch(dv_drv_obj *func, dv_dim3 grid, dv_dim3 block, uint32_t shared_bytes,
                      dv_drv_obj *stream, void **params)
{
    struct sim_stream *s = STREAM(stream);
    const dv_sim_kernel *k = ((struct sim_func *)func)->kernel;
    SIM_ENTER(s->dev, DV_CALL_LAUNCH);

    if (shared_bytes > 228 * 1024)
        return DV_CU_INVALID_VALUE;
    if (k->nparams > 0 && params == NULL)
        return DV_CU_INVALID_VALUE;
    size_t total = 0;
    for (unsigned i = 0; i < k->nparams; i++) {
        if (params[i] == NULL)
            return DV_CU_INVALID_VALUE;
        total += ((size_t)k->param_bytes[i] + 15) & ~(size_t)15;
    }
    /* One allocation: the op, then the argument copies (16-aligned). */
    size_t head = (sizeof(struct sim_op) + 15) & ~(size_t)15;
    struct sim_op *op = aligned_alloc(16, head + total);
    if (op == NULL)
        return DV_CU_OUT_OF_MEMORY;
    op->kind = OP_KERNEL;
    op->u.kern.kernel = k;
    op->u.kern.grid = grid;
    op->u.kern.block = block;
    op->u.kern.args = (unsigned char *)op + head;
    /* Copy the argument values now, as the real driver does. */
    size_t off = 0;
    for (unsigned i = 0; i < k->nparams; i++) {
        size_t n = k->param_bytes[i];
        memcpy(op->u.kern.args + off, params[i], n);
        op->u.kern.argp[i] = op->u.kern.args + off;
        off += (n + 15) & ~(size_t)15;
    }
    return enqueue(s, op);
}

static int sim_host_register(dv_drv_obj *ctx, void *p, uint64_t bytes)
{
    struct sim_device *dev = CTX(ctx)->dev;
    struct sim_driver *sd = dev->sd;
    SIM_ENTER(dev, DV_CALL_HOST_REGISTER);
    uintptr_t a = (uintptr_t)p;
    int code = DV_CU_SUCCESS;
    pthread_mutex_lock(&sd->host_mu);
    size_t i = host_lower_bound(sd, a);
    if ((i > 0 && sd->host[i - 1].start + sd->host[i - 1].bytes > a) ||
        (i < sd->nhost && sd->host[i].start < a + bytes)) {
        code = DV_CU_HOST_MEMORY_ALREADY_REGISTERED;
    } else if (sd->nhost == sd->cap_host) {
        size_t cap = sd->cap_host ? sd->cap_host * 2 : 32;
        struct sim_host_range *n = realloc(sd->host, cap * sizeof(*n));
        if (n == NULL) {
            code = DV_CU_OUT_OF_MEMORY;
        } else {
            sd->host = n;
            sd->cap_host = cap;
        }
    }
    if (code == DV_CU_SUCCESS) {
        memmove(&sd->host[i + 1], &sd->host[i], (sd->nhost - i) * sizeof(sd->host[0]));
        sd->host[i] = (struct sim_host_range){a, bytes, dev->ordinal};
        sd->nhost++;
    }
    pthread_mutex_unlock(&sd->host_mu);
    return code;
}

static int sim_host_unregister(dv_drv_obj *ctx, void *p)
{
    struct sim_device *dev = CTX(ctx)->dev;
    struct sim_driver *sd = dev->sd;
    SIM_ENTER(dev, DV_CALL_HOST_UNREGISTER);
    int code = DV_CU_HOST_MEMORY_NOT_REGISTERED;
    pthread_mutex_lock(&sd->host_mu);
    size_t i = host_lower_bound(sd, (uintptr_t)p);
    if (i < sd->nhost && sd->host[i].start == (uintptr_t)p) {
        memmove(&sd->host[i], &sd->host[i + 1], (sd->nhost - i - 1) * sizeof(sd->host[0]));
        sd->nhost--;
        code = DV_CU_SUCCESS;
    }
    pthread_mutex_unlock(&sd->host_mu);
    return code;
}

static int sim_host_dptr(dv_drv_obj *ctx, void *p, dv_dptr *out)
{
    struct sim_device *dev = CTX(ctx)->dev;
    SIM_ENTER(dev, DV_CALL_HOST_DPTR);
    if (!host_registered(dev->sd, p, 1))
        return DV_CU_INVALID_VALUE;
    *out = (dv_dptr)(uintptr_t)p;
    return DV_CU_SUCCESS;
}

/* Every word checked before any op is enqueued: a refused batch leaves
 * nothing behind. */
static int sim_value_ops(dv_drv_obj *stream, const dv_drv_value_op *ops, unsigned n)
{
    struct sim_stream *s = STREAM(stream);
    struct sim_op *op[DV_DRV_MAX_VALUE_OPS];
    SIM_ENTER(s->dev, DV_CALL_VALUE_OPS);
    for (unsigned i = 0; i < n; i++) {
        uint32_t *w = value_word(s->dev, ops[i].addr);
        op[i] = w != NULL ? op_new(ops[i].wait ? OP_WAIT_VALUE : OP_WRITE_VALUE) : NULL;
        if (op[i] == NULL) {
            for (unsigned k = 0; k <= i; k++)
                free(op[k]);
            return w == NULL ? DV_CU_INVALID_VALUE : DV_CU_OUT_OF_MEMORY;
        }
        op[i]->u.value.word = w;
        op[i]->u.value.value = ops[i].value;
    }
    for (unsigned i = 0; i < n; i++)
        (void)enqueue(s, op[i]);
    return DV_CU_SUCCESS;
}

static int sim_host_fn(dv_drv_obj *stream, dv_host_fn fn, void *arg)
{
    struct sim_stream *s = STREAM(stream);
    SIM_ENTER(s->dev, DV_CALL_HOST_FN);
    struct sim_op *op = op_new(OP_HOST_FN);
    if (op == NULL)
        return DV_CU_OUT_OF_MEMORY;
    op->u.host.fn = fn;
    op->u.host.arg = arg;
    return enqueue(s, op);
}

/* ------------------------------------------------------------------------
 * Kernel context
 * ------------------------------------------------------------------------ */

void *dv__sim_kmem(dv_sim_kctx *k, dv_dptr dptr, uint64_t bytes)
{
    return arena_range(k->sd, dptr, bytes);
}

void *dv_sim_kmem(dv_sim_kctx *k, uint64_t ptr, uint64_t bytes)
{
    return k != NULL ? arena_range(k->sd, ptr, bytes) : NULL;
}

dv_dim3 dv_sim_kgrid(const dv_sim_kctx *k)
{
    return k != NULL ? k->grid : (dv_dim3){0, 0, 0};
}

dv_dim3 dv_sim_kblock(const dv_sim_kctx *k)
{
    return k != NULL ? k->block : (dv_dim3){0, 0, 0};
}

static int sim_func_params(dv_drv_obj *func, uint16_t *bytes, unsigned max, unsigned *count)
{
    const dv_sim_kernel *k = ((struct sim_func *)func)->kernel;
    *count = k->nparams;
    for (unsigned i = 0; i < k->nparams && i < max; i++)
        bytes[i] = k->param_bytes[i];
    return DV_CU_SUCCESS;
}

dv_dim3 dv__sim_kgrid(const dv_sim_kctx *k)
{
    return k->grid;
}

dv_dim3 dv__sim_kblock(const dv_sim_kctx *k)
{
    return k->block;
}

/* ------------------------------------------------------------------------
 * Fault and delay controls (sim.h)
 * ------------------------------------------------------------------------ */

void *dv__sim_host_ptr(dv_driver *drv, dv_dptr dptr, uint64_t bytes)
{
    if (!dv__sim_is_sim(drv))
        return NULL;
    return arena_range(SD(drv), dptr, bytes);
}

bool dv__sim_is_sim(const dv_driver *drv)
{
    return drv != NULL && drv->ops == &dv__sim_ops;
}

#define REQUIRE_SIM(drv, call)                                                                     \
    do {                                                                                           \
        if (!dv__sim_is_sim(drv))                                                                  \
            return dv__fail(DV_EINVAL, (call), "%s: not a sim driver", (call));                    \
    } while (0)

int dv__sim_fail_alloc_nth(dv_driver *drv, uint64_t nth)
{
    REQUIRE_SIM(drv, "sim_fail_alloc_nth");
    struct sim_driver *sd = SD(drv);
    pthread_mutex_lock(&sd->fault_mu);
    sd->fail_alloc_at = nth == 0 ? 0 : sd->alloc_count + nth;
    pthread_mutex_unlock(&sd->fault_mu);
    return DV_OK;
}

uint64_t dv__sim_calls(dv_driver *drv, dv_drv_call call)
{
    if (!dv__sim_is_sim(drv) || (unsigned)call >= DV_CALL__COUNT)
        return 0;
    return atomic_load_explicit(&SD(drv)->calls[call], memory_order_relaxed);
}

int dv__sim_inject(dv_driver *drv, dv_drv_call call, uint64_t nth, int code)
{
    REQUIRE_SIM(drv, "sim_inject");
    if ((unsigned)call >= DV_CALL__COUNT || (code != 0 && nth == 0))
        return dv__fail(DV_EINVAL, "sim_inject", "sim_inject: bad call %d or nth 0", (int)call);
    struct sim_driver *sd = SD(drv);
    pthread_mutex_lock(&sd->fault_mu);
    sd->inject[call].countdown = code != 0 ? nth : 0;
    sd->inject[call].code = code;
    sd->inject[call].poison = 0;
    bool armed = false;
    for (int i = 0; i < DV_CALL__COUNT; i++)
        armed |= sd->inject[i].countdown > 0;
    atomic_store_explicit(&sd->fault_armed, armed, memory_order_release);
    pthread_mutex_unlock(&sd->fault_mu);
    return DV_OK;
}

int dv__sim_poison_at(dv_driver *drv, dv_drv_call call, uint64_t nth, int device,
                      dv_sim_poison_kind kind)
{
    REQUIRE_SIM(drv, "sim_poison_at");
    struct sim_driver *sd = SD(drv);
    if (device < 0 || device >= sd->ndev || nth == 0 || (unsigned)call >= DV_CALL__COUNT)
        return dv__fail(DV_EINVAL, "sim_poison_at", "sim_poison_at: device %d, call %d, nth %llu",
                        device, (int)call, (unsigned long long)nth);
    int code = kind == DV_SIM_POISON_FATAL ? DV_CU_ILLEGAL_ADDRESS : DV_CU_LAUNCH_FAILED;
    int rc = dv__sim_inject(drv, call, nth, code);
    if (rc == DV_OK) {
        pthread_mutex_lock(&sd->fault_mu);
        sd->inject[call].poison = 1 + (int)kind;
        sd->inject[call].device = device;
        pthread_mutex_unlock(&sd->fault_mu);
    }
    return rc;
}

int dv__sim_poison(dv_driver *drv, int device, dv_sim_poison_kind kind, int code)
{
    REQUIRE_SIM(drv, "sim_poison");
    struct sim_driver *sd = SD(drv);
    if (device < 0 || device >= sd->ndev)
        return dv__fail(DV_EINVAL, "sim_poison", "sim_poison: no device %d", device);
    if (kind == DV_SIM_POISON_FATAL)
        atomic_store(&sd->fatal, code != 0 ? code : DV_CU_ILLEGAL_ADDRESS);
    else
        atomic_store(&sd->dev[device].sticky, code != 0 ? code : DV_CU_LAUNCH_FAILED);
    return DV_OK;
}

int dv__sim_sticky_code(dv_driver *drv, int device)
{
    if (!dv__sim_is_sim(drv) || device < 0 || device >= SD(drv)->ndev)
        return 0;
    return sticky_code(&SD(drv)->dev[device]);
}

int dv__sim_set_delay(dv_driver *drv, uint32_t max_us)
{
    REQUIRE_SIM(drv, "sim_set_delay");
    atomic_store(&SD(drv)->delay_max_us, max_us);
    return DV_OK;
}

int dv__sim_stream_set_delay(dv_drv_stream *stream, uint32_t extra_us)
{
    dv_drv_obj *obj = (dv_drv_obj *)stream;
    if (obj == NULL || obj->magic != DV_DRV_MAGIC(DV_DRV_STREAM) || !dv__sim_is_sim(obj->drv))
        return dv__fail(DV_EINVAL, "sim_stream_set_delay",
                        "sim_stream_set_delay: not a sim stream");
    atomic_store(&STREAM(obj)->extra_us, extra_us);
    return DV_OK;
}

uint64_t dv__sim_allocated_bytes(dv_driver *drv, int device)
{
    if (!dv__sim_is_sim(drv) || device < 0 || device >= SD(drv)->ndev)
        return 0;
    struct sim_device *dev = &SD(drv)->dev[device];
    pthread_mutex_lock(&dev->mu);
    uint64_t n = dev->allocated;
    pthread_mutex_unlock(&dev->mu);
    return n;
}

const dv_driver_ops dv__sim_ops = {
    .name = "sim",
    .backend = DV_BACKEND_SIM,
    .obj_size =
        {
            [DV_DRV_CTX] = sizeof(struct sim_ctx),
            [DV_DRV_STREAM] = sizeof(struct sim_stream),
            [DV_DRV_EVENT] = sizeof(struct sim_event),
            [DV_DRV_MODULE] = sizeof(struct sim_module),
            [DV_DRV_FUNC] = sizeof(struct sim_func),
        },
    .open = sim_open,
    .close = sim_close,
    .device_count = sim_device_count,
    .device_info = sim_device_info,
    .mem_info = sim_mem_info,
    .ctx_retain = sim_ctx_retain,
    .ctx_release = sim_ctx_release,
    .ctx_reset = sim_ctx_reset,
    .stream_create = sim_stream_create,
    .stream_destroy = sim_stream_destroy,
    .stream_sync = sim_stream_sync,
    .stream_query = sim_stream_query,
    .event_create = sim_event_create,
    .event_destroy = sim_event_destroy,
    .event_record = sim_event_record,
    .event_query = sim_event_query,
    .event_sync = sim_event_sync,
    .stream_wait_event = sim_stream_wait_event,
    .event_elapsed = sim_event_elapsed,
    .native_event = NULL,
    .mem_alloc = sim_mem_alloc,
    .mem_free = sim_mem_free,
    .mem_alloc_async = sim_mem_alloc_async,
    .mem_free_async = sim_mem_free_async,
    .pool_set_threshold = sim_pool_set_threshold,
    .pool_get_threshold = sim_pool_get_threshold,
    .pool_trim = sim_pool_trim,
    .vmm_granularity = sim_vmm_granularity,
    .va_reserve = sim_va_reserve,
    .va_release = sim_va_release,
    .mem_map = sim_mem_map,
    .mem_unmap = sim_mem_unmap,
    .mem_unmap_keep = sim_mem_unmap_keep,
    .mem_remap = sim_mem_remap,
    .mem_release = sim_mem_release,
    .memcpy_htod = sim_memcpy_htod,
    .memcpy_dtoh = sim_memcpy_dtoh,
    .memcpy_dtod = sim_memcpy_dtod,
    .memcpy_peer = sim_memcpy_peer,
    .memset_d8 = sim_memset_d8,
    .memset_d32 = sim_memset_d32,
    .module_load = sim_module_load,
    .module_unload = sim_module_unload,
    .func_get = sim_func_get,
    .func_params = sim_func_params,
    .builtin_image = sim_builtin_image,
    .launch = sim_launch,
    .host_fn = sim_host_fn,
    .host_register = sim_host_register,
    .host_unregister = sim_host_unregister,
    .host_dptr = sim_host_dptr,
    .value_ops = sim_value_ops,
    .native_stream = NULL,
    .make_current = NULL,
    .error_name = NULL,
    .error_string = NULL,
};
