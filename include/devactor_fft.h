/*
 * devactor_fft.h -- FFTs on a devactor actor: cuFFT on the cuda backend,
 * FFTW on the simulated device.
 *
 * A library actor built on the public task API alone (src/libs/fft.c),
 * like devactor_blas.h: each transform is a task on the caller's stream,
 * its input and output dv_refs (plus byte offsets) fenced like a launch's
 * and declared for exactly the bytes they reach; sizes are checked
 * against the blocks before anything is posted (DV_EOUT_OF_BOUNDS naming
 * the operand, detail.requested its bytes, detail.remaining what its
 * block has from its offset).
 *
 * Transforms: complex to complex (either direction), real to complex
 * (forward), complex to real (inverse); single or double precision; rank
 * 1, 2 or 3, sizes slowest dimension first; `batch` transforms one after
 * the other.  Complex numbers are interleaved (re, im) pairs.  Results are
 * not scaled (a forward and an inverse transform multiply by the number
 * of elements), as in cuFFT and FFTW.
 *
 * Layouts (cuFFT's and FFTW's basic ones).  With N the product of the
 * sizes and Nc = N / n_last * (n_last / 2 + 1):
 *   C2C       in and out: batch * N complex
 *   R2C       in: batch * N real; out: batch * Nc complex
 *   C2R       in: batch * Nc complex; out: batch * N real
 * In place (in and out the same block at the same offset), a real array's
 * rows are padded to 2 * (n_last / 2 + 1) reals, so both sides take
 * batch * Nc complex.  An input and output that overlap otherwise are
 * refused.  A complex-to-real transform overwrites its input (both
 * libraries do), so its input is declared read and written.
 *
 * Plans.  Made on the actor's thread on first use and cached per (stream,
 * kind, precision, sizes, batch, in place), up to a byte budget
 * (dv_fft_create's cache_bytes, 256 MiB when 0) counting each plan's work
 * area; the least recently used go first (the plan of the transform at
 * hand stays, over the budget if it alone is larger).  cuFFT's automatic
 * work-area allocation is off: each transform's work area is task
 * scratch from the actor's pool on its stream.  On a GPU a plan of a
 * context since rebuilt is made again (the sim's host plans belong to no
 * context and are kept).  Destroying a cuFFT plan frees its device memory, which
 * waits for the device: an eviction can stall the actor's thread for the
 * work in flight.
 *
 * Libraries, opened at run time (dlopen):
 *   cuda:  $DV_CUFFT_PATH when set (only it), else libcufft.so.12, .11,
 *          libcufft.so the usual way, else
 *          /usr/local/cuda/lib64/libcufft.so;
 *   sim:   $DV_FFTWF_PATH and $DV_FFTW_PATH when set (only they), else
 *          libfftw3f.so.3 and libfftw3.so.3.
 * Where they do not open, or one lacks a function, dv_fft_create answers
 * DV_ENOTSUP.
 *
 * Threads: as devactor_blas.h.  The plain form waits until the device
 * finished the transform; the _async form returns once it is enqueued and
 * its future completes when the device finished it (a refusal completes
 * the future with the refusal).
 */
#ifndef DEVACTOR_FFT_H
#define DEVACTOR_FFT_H

#include "devactor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dv_fft dv_fft;

typedef enum dv_fft_kind {
    DV_FFT_C2C = 0,
    DV_FFT_R2C = 1, /* forward only */
    DV_FFT_C2R = 2, /* inverse only */
} dv_fft_kind;

typedef enum dv_fft_precision {
    DV_FFT_F32 = 0,
    DV_FFT_F64 = 1,
} dv_fft_precision;

typedef enum dv_fft_direction {
    DV_FFT_FORWARD = -1, /* e^(-2 pi i jk / n) */
    DV_FFT_INVERSE = 1,  /* e^(+2 pi i jk / n), not scaled */
} dv_fft_direction;

/* rank sizes, slowest first (n[rank..2] unused); batch transforms. */
typedef struct dv_fft_shape {
    int rank;
    int64_t n[3];
    int64_t batch;
} dv_fft_shape;

typedef struct dv_fft_stats {
    uint64_t plans;      /* cached now */
    uint64_t bytes;      /* their work areas */
    uint64_t made;       /* plans made */
    uint64_t hits;       /* transforms that found their plan */
    uint64_t evictions;  /* plans dropped for the budget */
    uint64_t remade;     /* plans made again after a rebuild */
} dv_fft_stats;

/* The FFTs of actor, with a plan cache of cache_bytes (0: 256 MiB).
 * DV_ENOTSUP when the library does not open (the message lists the names
 * tried) or lacks a function (it names the library and the function). */
DV_EXPORT int dv_fft_create(dv_actor *actor, uint64_t cache_bytes, dv_fft **out);
/* Waits for the streams that ran transforms, destroys the plans on the
 * actor's thread, and frees f.  NULL is fine.  Inside a task it does
 * nothing (dv_last_error says DV_EDEADLK) and f stays usable, to be
 * destroyed outside; dv_fft_create there answers DV_EDEADLK. */
DV_EXPORT void dv_fft_destroy(dv_fft *f);
DV_EXPORT const char *dv_fft_library(const dv_fft *f);
/* The cache's counters (read on the actor's thread: it waits for it). */
DV_EXPORT int dv_fft_stats_get_sized(dv_fft *f, dv_fft_stats *out, size_t size);
#define dv_fft_stats_get(f, out) dv_fft_stats_get_sized((f), (out), sizeof(*(out)))

/* Bytes the input and the output of a transform reach (0 when the shape
 * is not one dv_fft_exec takes). */
DV_EXPORT uint64_t dv_fft_bytes(dv_fft_kind kind, dv_fft_precision precision,
                                const dv_fft_shape *shape, bool in_place, bool output);

/* out = FFT(in) on stream. */
DV_EXPORT int dv_fft_exec(dv_fft *f, dv_stream stream, dv_fft_kind kind,
                          dv_fft_precision precision, dv_fft_direction direction,
                          const dv_fft_shape *shape, dv_ref in, uint64_t in_offset, dv_ref out,
                          uint64_t out_offset);
DV_EXPORT int dv_fft_exec_async(dv_fft *f, dv_stream stream, dv_fft_kind kind,
                                dv_fft_precision precision, dv_fft_direction direction,
                                const dv_fft_shape *shape, dv_ref in, uint64_t in_offset,
                                dv_ref out, uint64_t out_offset, dv_future *fut);

#ifdef __cplusplus
}
#endif

#endif
