/*
 * What the library actors (devactor_blas.h, devactor_fft.h) share: opening
 * a library at run time, and the 16-bit float formats the sim converts.
 * Built on the public headers alone, like the library actors themselves.
 */
#ifndef DV_LIBS_LIBLOAD_H
#define DV_LIBS_LIBLOAD_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devactor.h"

/* dst := the symbol name of lib; whether it was there.  One that is not
 * is named by dv__lib_missing afterwards, on the same thread. */
#define DV_LIB_SYM(lib, dst, name) dv__lib_sym((lib), (void **)&(dst), (name))
bool dv__lib_sym(void *lib, void **dst, const char *name);
/* The last symbol DV_LIB_SYM did not find on this thread ("" if none). */
const char *dv__lib_missing(void);
/* Why a library is not usable, into why (cap bytes): "tried <tried>" where
 * *lib did not open, else "<path> lacks <the symbol missing>", *lib
 * closed (NULL). */
void dv__lib_why(char *why, size_t cap, void **lib, const char *tried, const char *path);

/* dlopen the first of: $env (when set: only it), then names (NULL-ended),
 * each the usual way; NULL when none opens.  tried (cap bytes) receives
 * what was tried and why the last one failed, for the caller's message;
 * path (cap bytes) what opened. */
void *dv__lib_open(const char *env, const char *const *names, char *tried, size_t cap,
                   char *path, size_t path_cap);

/* DV_EDEADLK (with its detail) on a thread that serves an actor: a library
 * call's _async form waits until its task is ordered (the call's state
 * lives on the caller's stack until then), which such a thread must not. */
int dv__lib_no_wait(const char *op);
/* DV_EFORKED (with its detail) where a is its parent's actor, in a child
 * process: a library actor is made on none of those. */
int dv__lib_here(const dv_actor *a, const char *op);
/* An operand of a library call: `bytes` from byte `off` of ref's block, in
 * elements of `es` bytes.  DV_OK with the block's address in *base; else
 * the failure, recorded as call's (dv_error_set) and named "<lead><what>:
 * operand <name>": the handle's own error, DV_EINVAL for an offset that is
 * not a multiple of es, DV_EOUT_OF_BOUNDS (requested: bytes, remaining:
 * what the block has from off) past the block as it was asked for. */
int dv__lib_operand(const char *call, const char *lead, const char *what, const char *name,
                    dv_ref ref, uint64_t off, uint64_t bytes, unsigned es, uint64_t *base);
/* DV_EINVAL (recorded as call's, "<lead><what>: unknown stream") unless
 * stream is one of actor a's. */
int dv__lib_stream(const char *call, const char *lead, const char *what, const dv_actor *a,
                   dv_stream stream);
/* A call with nothing to do (an empty result) still checks what it was
 * given: its stream on actor a, the actor's state (DV_ESHUTDOWN after a
 * shutdown, the lost answer for one lost), and each of the n handles that is not
 * DV_REF_NULL at its offset (names[i] in the message) as an operand of
 * no bytes: DV_EINVAL for an unknown stream, another actor's block or an
 * offset not a multiple of es, the handle's own error (DV_ESTALE) for one
 * released, DV_EOUT_OF_BOUNDS for an offset past its block.  Recorded as
 * call's, like dv__lib_operand. */
int dv__lib_nothing_to_do(const char *call, const char *lead, const char *what, dv_actor *a,
                          dv_stream stream, const dv_ref *refs, const uint64_t *offs, unsigned es,
                          const char *const *names, int n);
/* The actor whose block ref names (NULL for a null or unknown handle): a
 * wrapper whose task must not be refused at its fencing checks this on
 * the caller's thread. */
const dv_actor *dv__lib_actor_of(dv_ref ref);
/* An actor's identity for dv__lib_actor_health (never reused). */
uint64_t dv__lib_actor_uid(const dv_actor *a);
/* a's health while it is not shut down (its memory stays valid during
 * the read even if another thread destroys it at once); false when it
 * was shut down or destroyed: a library's own thread (a watchdog) may
 * outlive the actors it looks at. */
bool dv__lib_actor_health(const dv_actor *a, uint64_t uid, dv_actor_health *h);

/* IEEE binary16 and bfloat16 to and from float, rounding to nearest even;
 * NaN stays NaN, overflow becomes infinity. */
uint16_t dv__f32_to_f16(float f);
float dv__f16_to_f32(uint16_t h);
uint16_t dv__f32_to_bf16(float f);
float dv__bf16_to_f32(uint16_t h);
/* f rounded to TF32 (10 mantissa bits), to nearest even, kept as float. */
float dv__f32_to_tf32(float f);

#endif
