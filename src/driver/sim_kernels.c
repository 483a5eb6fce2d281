/*
 * The sim's kernel registry and the host twins of tools/kernels/kernels.cu:
 * same names, same parameters, same results.  A kernel reaches device
 * memory only through dv__sim_kmem(); an address outside every arena is an
 * illegal address, reported as the real GPU would report it.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "driver/sim.h"

#define MAX_KERNELS 256

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static const dv_sim_kernel *registry[MAX_KERNELS];
static int nregistry;

int dv__sim_kernel_check(const dv_sim_kernel *kernel, const char *op)
{
    if (kernel == NULL || kernel->name == NULL || kernel->name[0] == '\0' || kernel->fn == NULL)
        return dv__fail(DV_EINVAL, op, "%s: a twin without a name or a function", op);
    if (kernel->nparams > DV_LAUNCH_MAX_ARGS)
        return dv__fail(DV_EINVAL, op, "%s: %s: %u parameters (at most %d)", op, kernel->name,
                        kernel->nparams, DV_LAUNCH_MAX_ARGS);
    for (unsigned i = 0; i < kernel->nparams; i++)
        if (kernel->param_bytes[i] == 0 || kernel->param_bytes[i] > DV_ARG_MAX_BYTES)
            return dv__fail(DV_EINVAL, op, "%s: %s: parameter %u has %u bytes (1..%d)", op,
                            kernel->name, i, kernel->param_bytes[i], DV_ARG_MAX_BYTES);
    return DV_OK;
}

int dv__sim_register_kernel(const dv_sim_kernel *kernel)
{
    int rc = dv__sim_kernel_check(kernel, "sim_register_kernel");
    if (rc != DV_OK)
        return rc;
    pthread_mutex_lock(&registry_mu);
    for (int i = 0; i < nregistry; i++) {
        if (strcmp(registry[i]->name, kernel->name) == 0) {
            rc = dv__fail(DV_EINVAL, "sim_register_kernel",
                          "sim_register_kernel: \"%s\" is already registered", kernel->name);
            goto out;
        }
    }
    if (nregistry == MAX_KERNELS) {
        rc = dv__fail(DV_ENOMEM, "sim_register_kernel", "sim_register_kernel: registry full");
        goto out;
    }
    registry[nregistry++] = kernel;
out:
    pthread_mutex_unlock(&registry_mu);
    return rc;
}

const dv_sim_kernel *dv__sim_find_kernel(const char *name)
{
    const dv_sim_kernel *k = NULL;
    pthread_mutex_lock(&registry_mu);
    for (int i = 0; i < nregistry && k == NULL; i++)
        if (strcmp(registry[i]->name, name) == 0)
            k = registry[i];
    pthread_mutex_unlock(&registry_mu);
    return k;
}

/* ------------------------------------------------------------------------
 * The built-in kernels
 * ------------------------------------------------------------------------ */

#define ARG(type, i) (*(const type *)params[i])

/* A u32 or u64 the kernel would load or store at an address that is not a
 * multiple of its size: the GPU faults (MISALIGNED_ADDRESS); so does the
 * twin, rather than do a misaligned access itself.  n: the elements it
 * touches there (none, no access). */
static bool misaligned(dv_dptr ptr, unsigned size, uint64_t n)
{
    return n != 0 && (ptr & (size - 1)) != 0;
}

/* Bytes of n u32s; past the address space (n * 4 would wrap to a small
 * range that passes the bounds check) it is UINT64_MAX, which none does. */
static uint64_t u32_bytes(uint64_t n)
{
    return n > UINT64_MAX / 4 ? UINT64_MAX : n * 4;
}

static int k_fill_u32(dv_sim_kctx *k, void **params)
{
    uint64_t n = ARG(uint64_t, 2);
    uint32_t *p = dv__sim_kmem(k, ARG(dv_dptr, 0), u32_bytes(n));
    if (p == NULL)
        return DV_CU_ILLEGAL_ADDRESS;
    if (misaligned(ARG(dv_dptr, 0), 4, n))
        return DV_CU_MISALIGNED_ADDRESS;
    uint32_t v = ARG(uint32_t, 1);
    for (uint64_t i = 0; i < n; i++)
        p[i] = v;
    return 0;
}

static int k_copy(dv_sim_kctx *k, void **params)
{
    uint64_t n = ARG(uint64_t, 2);
    uint8_t *dst = dv__sim_kmem(k, ARG(dv_dptr, 0), n);
    const uint8_t *src = dv__sim_kmem(k, ARG(dv_dptr, 1), n);
    if (dst == NULL || src == NULL)
        return DV_CU_ILLEGAL_ADDRESS;
    memmove(dst, src, n);
    return 0;
}

static int k_add_u32(dv_sim_kctx *k, void **params)
{
    uint64_t n = ARG(uint64_t, 3);
    uint32_t *c = dv__sim_kmem(k, ARG(dv_dptr, 0), u32_bytes(n));
    const uint32_t *a = dv__sim_kmem(k, ARG(dv_dptr, 1), u32_bytes(n));
    const uint32_t *b = dv__sim_kmem(k, ARG(dv_dptr, 2), u32_bytes(n));
    if (c == NULL || a == NULL || b == NULL)
        return DV_CU_ILLEGAL_ADDRESS;
    if (misaligned(ARG(dv_dptr, 0), 4, n) || misaligned(ARG(dv_dptr, 1), 4, n) ||
        misaligned(ARG(dv_dptr, 2), 4, n))
        return DV_CU_MISALIGNED_ADDRESS;
    for (uint64_t i = 0; i < n; i++)
        c[i] = a[i] + b[i];
    return 0;
}

static int k_checksum(dv_sim_kctx *k, void **params)
{
    uint64_t n = ARG(uint64_t, 1);
    const uint32_t *p = dv__sim_kmem(k, ARG(dv_dptr, 0), u32_bytes(n));
    uint64_t *out = dv__sim_kmem(k, ARG(dv_dptr, 2), 8);
    if (p == NULL || out == NULL)
        return DV_CU_ILLEGAL_ADDRESS;
    if (misaligned(ARG(dv_dptr, 0), 4, n) || misaligned(ARG(dv_dptr, 2), 8, 1))
        return DV_CU_MISALIGNED_ADDRESS;
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t word = ((uint64_t)p[i] << 32) | (uint32_t)i;
        sum += word * UINT64_C(0x9E3779B97F4A7C15);
    }
    *out += sum;
    return 0;
}

static int k_oob_write(dv_sim_kctx *k, void **params)
{
    uint64_t n = ARG(uint64_t, 1);
    uint32_t over = ARG(uint32_t, 2);
    uint8_t *p = dv__sim_kmem(k, ARG(dv_dptr, 0) + n, over);
    if (p == NULL)
        return DV_CU_ILLEGAL_ADDRESS;
    memset(p, ARG(uint8_t, 3), over);
    return 0;
}

static int k_poke_u8(dv_sim_kctx *k, void **params)
{
    uint8_t *p = dv__sim_kmem(k, ARG(dv_dptr, 0) + (uint64_t)ARG(int64_t, 1), 1);
    if (p == NULL)
        return DV_CU_ILLEGAL_ADDRESS;
    *p = ARG(uint8_t, 2);
    return 0;
}

static int k_illegal_address(dv_sim_kctx *k, void **params)
{
    uint32_t *p = dv__sim_kmem(k, ARG(uint64_t, 0), 4);
    if (p == NULL)
        return DV_CU_ILLEGAL_ADDRESS;
    if (misaligned(ARG(uint64_t, 0), 4, 1))
        return DV_CU_MISALIGNED_ADDRESS;
    *p = 0xDEADBEEFu; /* the address happened to be device memory */
    return 0;
}

static int k_spin(dv_sim_kctx *k, void **params)
{
    (void)k;
    uint64_t ns = ARG(uint64_t, 0);
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
                          .tv_nsec = (long)(ns % 1000000000u)};
    nanosleep(&ts, NULL);
    return 0;
}

static int k_store_args(dv_sim_kctx *k, void **params)
{
    static const unsigned sizes[7] = {4, 8, 4, 8, 16, 1, 2};
    uint8_t *out = dv__sim_kmem(k, ARG(dv_dptr, 0), 43);
    if (out == NULL)
        return DV_CU_ILLEGAL_ADDRESS;
    for (unsigned i = 0, off = 0; i < 7; off += sizes[i], i++)
        memcpy(out + off, params[i + 1], sizes[i]);
    return 0;
}

static int k_empty(dv_sim_kctx *k, void **params)
{
    (void)k;
    (void)params;
    return 0;
}

static const dv_sim_kernel builtins[] = {
    {"fill_u32", k_fill_u32, 3, {8, 4, 8}},
    {"copy", k_copy, 3, {8, 8, 8}},
    {"add_u32", k_add_u32, 4, {8, 8, 8, 8}},
    {"checksum", k_checksum, 3, {8, 8, 8}},
    {"oob_write", k_oob_write, 4, {8, 8, 4, 1}},
    {"poke_u8", k_poke_u8, 3, {8, 8, 1}},
    {"illegal_address", k_illegal_address, 1, {8}},
    {"spin", k_spin, 1, {8}},
    {"empty", k_empty, 0, {0}},
    {"touch8", k_empty, 8, {8, 8, 8, 8, 8, 8, 8, 8}},
    {"store_args", k_store_args, 8, {8, 4, 8, 4, 8, 16, 1, 2}},
};

/* The sim's stand-in image where the build had no nvcc to make a fatbin. */
const unsigned char dv__sim_builtin_image[] = "devactor-sim-image:builtin-kernels";
const size_t dv__sim_builtin_image_size = sizeof(dv__sim_builtin_image);

static pthread_once_t builtins_once = PTHREAD_ONCE_INIT;

static void register_builtins(void)
{
    for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
        (void)dv__sim_register_kernel(&builtins[i]);
}

void dv__sim_register_builtins(void)
{
    pthread_once(&builtins_once, register_builtins);
}
