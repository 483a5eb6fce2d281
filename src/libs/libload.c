/*
 * Opening libraries at run time, and 16-bit floats (libload.h).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actor/actor.h"
#include "base/proc.h"
#include "libs/libload.h"

void *dv__lib_open(const char *env, const char *const *names, char *tried, size_t cap,
                   char *path, size_t path_cap)
{
    size_t used = 0;
    const char *last_error = "";
    const char *forced = env != NULL ? getenv(env) : NULL;
    const char *one[2] = {forced, NULL};
    if (forced != NULL && forced[0] != '\0')
        names = one;
    tried[0] = '\0';
    for (size_t i = 0; names[i] != NULL; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h != NULL) {
            snprintf(path, path_cap, "%s", names[i]);
            return h;
        }
        const char *e = dlerror();
        last_error = e != NULL ? e : "";
        if (used < cap) {
            int n = snprintf(tried + used, cap - used, "%s%s", used ? ", " : "", names[i]);
            used += n > 0 ? (size_t)n : 0;
        }
    }
    if (used < cap && last_error[0] != '\0')
        snprintf(tried + used, cap - used, " (last: %s)", last_error);
    return NULL;
}

static _Thread_local char missing[64];

bool dv__lib_sym(void *lib, void **dst, const char *name)
{
    *dst = lib != NULL ? dlsym(lib, name) : NULL;
    if (*dst == NULL)
        snprintf(missing, sizeof(missing), "%s", name);
    return *dst != NULL;
}

const char *dv__lib_missing(void)
{
    return missing;
}

void dv__lib_why(char *why, size_t cap, void **lib, const char *tried, const char *path)
{
    if (*lib == NULL) {
        snprintf(why, cap, "tried %s", tried);
        return;
    }
    snprintf(why, cap, "%s lacks %s", path, missing);
    dlclose(*lib);
    *lib = NULL;
}

int dv__lib_operand(const char *call, const char *lead, const char *what, const char *name,
                    dv_ref ref, uint64_t off, uint64_t bytes, unsigned es, uint64_t *base)
{
    dv_ref_info info;
    int rc = dv_ref_access(ref, &info);
    if (rc != DV_OK) {
        dv_error_detail d = *dv_last_error();
        return dv_error_set(rc, call, 0, 0, "%s%s: operand %s: %s", lead, what, name, d.message);
    }
    if (off % es != 0)
        return dv_error_set(DV_EINVAL, call, 0, 0,
                            "%s%s: operand %s starts at byte %llu of its block, not a multiple "
                            "of its %u-byte elements",
                            lead, what, name, (unsigned long long)off, es);
    /* The block is what was asked for (the pool may round it up). */
    uint64_t size = info.requested, left = off < size ? size - off : 0;
    if (off > size || bytes > size - off)
        return dv_error_set(DV_EOUT_OF_BOUNDS, call, bytes, left,
                            "%s%s: operand %s needs %llu bytes from byte %llu of its block, "
                            "which has %llu (%llu from there)",
                            lead, what, name, (unsigned long long)bytes, (unsigned long long)off,
                            (unsigned long long)size, (unsigned long long)left);
    *base = info.ptr;
    return DV_OK;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t dv__f32_to_f16(float f)
{
    uint32_t x = bits_of(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t exp = (x >> 23) & 0xFFu, man = x & 0x7FFFFFu;
    if (exp == 0xFF) /* infinity, NaN (kept quiet) */
        return (uint16_t)(sign | 0x7C00u | (man ? 0x200u | (man >> 13) : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 0x1F)
        return (uint16_t)(sign | 0x7C00u);
    if (e <= 0) { /* a subnormal half, or zero */
        if (e < -10)
            return sign;
        man |= 0x800000u;
        unsigned shift = (unsigned)(14 - e);
        uint32_t half = man >> shift, rest = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rest > mid || (rest == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)e << 10) | (man >> 13), rest = man & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1)))
        half++; /* may carry into the exponent, up to infinity: right */
    return (uint16_t)(sign | half);
}

float dv__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
    if (exp == 0x1F)
        return float_of(sign | 0x7F800000u | (man << 13));
    if (exp == 0) {
        if (man == 0)
            return float_of(sign);
        /* subnormal: man * 2^-24 */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return float_of(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

uint16_t dv__f32_to_bf16(float f)
{
    uint32_t x = bits_of(f);
    if ((x & 0x7F800000u) == 0x7F800000u && (x & 0x7FFFFFu) != 0)
        return (uint16_t)((x >> 16) | 0x40u); /* NaN stays NaN */
    uint32_t rounded = x + 0x7FFFu + ((x >> 16) & 1u);
    return (uint16_t)(rounded >> 16);
}

float dv__bf16_to_f32(uint16_t h)
{
    return float_of((uint32_t)h << 16);
}

float dv__f32_to_tf32(float f)
{
    uint32_t x = bits_of(f);
    if ((x & 0x7F800000u) == 0x7F800000u)
        return f;
    x += 0xFFFu + ((x >> 13) & 1u);
    return float_of(x & ~0x1FFFu);
}

int dv__lib_no_wait(const char *op)
{
    return dv__no_wait(op);
}

int dv__lib_here(const dv_actor *a, const char *op)
{
    return dv__actor_here(a, op);
}

int dv__lib_stream(const char *call, const char *lead, const char *what, const dv_actor *a,
                   dv_stream stream)
{
    if (a == NULL || stream >= a->cfg.streams)
        return dv_error_set(DV_EINVAL, call, 0, 0, "%s%s: unknown stream %u (the actor has %u)",
                            lead, what, stream, a != NULL ? a->cfg.streams : 0);
    return DV_OK;
}

int dv__lib_nothing_to_do(const char *call, const char *lead, const char *what, dv_actor *a,
                          dv_stream stream, const dv_ref *refs, const uint64_t *offs, unsigned es,
                          const char *const *names, int n)
{
    int rc = dv__lib_stream(call, lead, what, a, stream);
    if (rc != DV_OK)
        return rc;
    /* Nothing is posted, so the actor's state is read here: a call to an
     * actor shut down or lost answers as a posted one would. */
    char name[64];
    snprintf(name, sizeof(name), "%s%s", lead, what);
    if ((rc = dv__actor_refusing(a, call, name)) != DV_OK)
        return rc;
    for (int i = 0; i < n; i++) {
        if (refs[i].bits == 0)
            continue;
        uint64_t base;
        rc = dv__lib_operand(call, lead, what, names[i], refs[i], offs[i], 0, es, &base);
        if (rc != DV_OK)
            return rc;
        if (dv__actor_of_ref(refs[i]) != a)
            return dv_error_set(DV_EINVAL, call, 0, 0,
                                "%s%s: operand %s is a block of another actor", lead, what,
                                names[i]);
    }
    return DV_OK;
}

const dv_actor *dv__lib_actor_of(dv_ref ref)
{
    return ref.bits != 0 ? dv__actor_of_ref(ref) : NULL;
}

uint64_t dv__lib_actor_uid(const dv_actor *a)
{
    return a != NULL ? a->uid : 0;
}

bool dv__lib_actor_health(const dv_actor *a, uint64_t uid, dv_actor_health *h)
{
    return a != NULL && dv__actor_health_if_live(a, uid, h);
}
