/*
 * A fake peer allocator for dv-replay's test (tests/tools/replay.sh): the
 * dv_peer interface of tools/peers/, on the host.
 *
 * An allocation is rounded up to 512 bytes and counted as allocated; the
 * "reserved" memory grows by whole 2 MiB segments when what is allocated
 * outgrows it, and shrinks only on dv_peer_trim (to the segments still
 * needed), as a caching allocator's would.  Peaks of both; the blocks
 * themselves are small malloc'd headers (nothing is backed).  A stream is
 * a malloc'd token, so that a stream never closed shows as a leak.
 *
 * Environment, for the test:
 *   REPLAY_PEER_LIMIT=BYTES  refuse an allocation that would take reserved
 *                            over BYTES
 *   REPLAY_PEER_NO_STATS=1   dv_peer_stats answers -1 (not available)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define EXPORT  __attribute__((visibility("default")))
#define ROUND   512u
#define SEGMENT (UINT64_C(2) << 20)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t allocated, allocated_peak, reserved, reserved_peak;

static uint64_t round_up(uint64_t v, uint64_t to)
{
    return (v + to - 1) / to * to;
}

static uint64_t limit(void)
{
    const char *s = getenv("REPLAY_PEER_LIMIT");
    return s != NULL && *s != '\0' ? strtoull(s, NULL, 0) : UINT64_MAX;
}

EXPORT const char *dv_peer_name(void);
EXPORT int dv_peer_open(int device, void **stream);
EXPORT void *dv_peer_alloc(size_t bytes, void *stream);
EXPORT void dv_peer_free(void *p);
EXPORT void dv_peer_close(void *stream);
EXPORT int dv_peer_stats(uint64_t *allocated_peak_out, uint64_t *reserved_peak_out,
                         uint64_t *reserved_now_out);
EXPORT void dv_peer_reset_peaks(void);
EXPORT void dv_peer_trim(void);

const char *dv_peer_name(void)
{
    return "replay test peer (malloc, 512 B rounding, 2 MiB segments)";
}

int dv_peer_open(int device, void **stream)
{
    (void)device;
    *stream = malloc(1);
    return *stream != NULL ? 0 : -1;
}

void dv_peer_close(void *stream)
{
    free(stream);
}

void *dv_peer_alloc(size_t bytes, void *stream)
{
    if (stream == NULL)
        return NULL;
    uint64_t size = round_up(bytes ? bytes : 1, ROUND);
    uint64_t *block = malloc(sizeof(*block));
    if (block == NULL)
        return NULL;
    *block = size;
    pthread_mutex_lock(&lock);
    uint64_t need = allocated + size > reserved ? round_up(allocated + size, SEGMENT) : reserved;
    if (need > limit()) {
        pthread_mutex_unlock(&lock);
        free(block);
        return NULL;
    }
    reserved = need;
    allocated += size;
    if (allocated > allocated_peak)
        allocated_peak = allocated;
    if (reserved > reserved_peak)
        reserved_peak = reserved;
    pthread_mutex_unlock(&lock);
    return block;
}

void dv_peer_free(void *p)
{
    if (p == NULL)
        return;
    uint64_t size = *(uint64_t *)p;
    free(p);
    pthread_mutex_lock(&lock);
    allocated -= size;
    pthread_mutex_unlock(&lock);
}

int dv_peer_stats(uint64_t *allocated_peak_out, uint64_t *reserved_peak_out,
                  uint64_t *reserved_now_out)
{
    const char *no = getenv("REPLAY_PEER_NO_STATS");
    if (no != NULL && *no != '\0' && *no != '0')
        return -1;
    pthread_mutex_lock(&lock);
    *allocated_peak_out = allocated_peak;
    *reserved_peak_out = reserved_peak;
    *reserved_now_out = reserved;
    pthread_mutex_unlock(&lock);
    return 0;
}

void dv_peer_reset_peaks(void)
{
    pthread_mutex_lock(&lock);
    allocated_peak = allocated;
    reserved_peak = reserved;
    pthread_mutex_unlock(&lock);
}

void dv_peer_trim(void)
{
    pthread_mutex_lock(&lock);
    reserved = round_up(allocated, SEGMENT);
    pthread_mutex_unlock(&lock);
}
