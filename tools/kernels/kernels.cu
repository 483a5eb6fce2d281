/*
 * devactor's own kernels, for tests, the demo, the stress harness and the
 * benchmarks.  Compiled by nvcc into one fatbin (sm_80, sm_90, PTX) that is
 * embedded in the library; src/driver/sim_kernels.c registers host twins of
 * the same names and signatures for the simulated device.
 *
 * Every kernel is extern "C" so its name in the image is the plain name.
 * Loops are grid-stride so any launch shape covers n.
 *
 * Two kernels misbehave on purpose, for the tests that must catch them:
 *   oob_write       writes `over` bytes just past the end of a block
 *   illegal_address writes to an address that is not mapped: a sticky
 *                   ILLEGAL_ADDRESS fault that poisons the process's CUDA
 *                   state (never run it in a process that must keep going)
 */
#include <stdint.h>

#define GRID_STRIDE(i, n)                                                      \
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (uint64_t)gridDim.x * blockDim.x)

/* p[i] = value for i < n. */
extern "C" __global__ void fill_u32(uint32_t *p, uint32_t value, uint64_t n)
{
    GRID_STRIDE(i, n) p[i] = value;
}

/* dst[i] = src[i] for i < n bytes. */
extern "C" __global__ void copy(uint8_t *dst, const uint8_t *src, uint64_t n)
{
    GRID_STRIDE(i, n) dst[i] = src[i];
}

/* c[i] = a[i] + b[i] for i < n (c may alias a or b). */
extern "C" __global__ void add_u32(uint32_t *c, const uint32_t *a, const uint32_t *b,
                                   uint64_t n)
{
    GRID_STRIDE(i, n) c[i] = a[i] + b[i];
}

/*
 * *out += sum over i < n of ((v << 32) | i) * K, modulo 2^64, with
 * v = p[i] and K = 0x9E3779B97F4A7C15: order-independent, so the GPU's
 * atomic sum and the host's loop agree.  Zero *out first.
 */
extern "C" __global__ void checksum(const uint32_t *p, uint64_t n, uint64_t *out)
{
    uint64_t sum = 0;
    GRID_STRIDE(i, n)
    {
        uint64_t word = ((uint64_t)p[i] << 32) | (uint32_t)i;
        sum += word * 0x9E3779B97F4A7C15ull;
    }
    atomicAdd((unsigned long long *)out, (unsigned long long)sum);
}

/* p[n + k] = value for k < over: a deliberate write past the end. */
extern "C" __global__ void oob_write(uint8_t *p, uint64_t n, uint32_t over, uint8_t value)
{
    GRID_STRIDE(k, (uint64_t)over) p[n + k] = value;
}

/* p[offset] = value, any offset (negative writes before the start). */
extern "C" __global__ void poke_u8(uint8_t *p, int64_t offset, uint8_t value)
{
    if (blockIdx.x == 0 && threadIdx.x == 0)
        p[offset] = value;
}

/* Write to an unmapped address: a sticky ILLEGAL_ADDRESS fault. */
extern "C" __global__ void illegal_address(uint64_t addr)
{
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *(volatile uint32_t *)addr = 0xDEADBEEFu;
}

/* Busy-wait ns nanoseconds of GPU time (makes a stream slow on purpose). */
extern "C" __global__ void spin(uint64_t ns)
{
    if (threadIdx.x != 0)
        return;
    uint64_t start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}

/* Does nothing: launch overhead. */
extern "C" __global__ void empty(void) {}

/* Takes eight pointers and touches none: launches that only declare
 * accesses (the checker's tests). */
extern "C" __global__ void touch8(void *a, void *b, void *c, void *d, void *e, void *f, void *g,
                                  void *h)
{
}

/* A by-value struct of 16 bytes (dv_arg_bytes). */
struct dv_pair16 {
    unsigned long long lo, hi;
};

/* Writes the bytes of each argument after out, in order: 4 + 8 + 4 + 8 +
 * 16 + 1 + 2 = 43 bytes (typed argument constructors). */
extern "C" __global__ void store_args(unsigned char *out, int i32, long long i64, float f32,
                                      double f64, dv_pair16 s, unsigned char u8,
                                      unsigned short u16)
{
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    memcpy(out, &i32, 4);
    memcpy(out + 4, &i64, 8);
    memcpy(out + 12, &f32, 4);
    memcpy(out + 16, &f64, 8);
    memcpy(out + 24, &s, 16);
    memcpy(out + 40, &u8, 1);
    memcpy(out + 41, &u16, 2);
}
