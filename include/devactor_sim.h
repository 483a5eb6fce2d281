/*
 * devactor on the simulated device: your own kernels, and its faults.
 *
 * The sim backend (DV_BACKEND_SIM) runs where there is no GPU: device
 * memory is host memory, each stream a thread, and a kernel is a host
 * function -- a "host twin" of the CUDA kernel, with the same name and
 * parameters.  A program that brings its own kernels ships a module image
 * for CUDA (cubin, fatbin, PTX) and, for the sim, a dv_sim_image listing
 * the twins; dv_kernel_get takes either:
 *
 *     static int scale_twin(dv_sim_kctx *k, void **params) { ... }
 *     static const dv_sim_kernel twins[] = {
 *         {"scale", scale_twin, 3, {8, 4, 8}},     // float *p, float s, size_t n
 *     };
 *     static const dv_sim_image image = DV_SIM_IMAGE(twins);
 *
 *     const void *img = on_cuda ? fatbin : (const void *)&image;
 *     size_t bytes = on_cuda ? sizeof fatbin : sizeof image;
 *     dv_kernel_get(actor, img, bytes, "scale", &k);
 *
 * Names are looked up in the image given, so two libraries' "scale"
 * kernels do not collide.  A launch is checked against the twin's
 * parameters as against a CUDA kernel's.
 *
 * The fault controls make the sim fail as the real driver fails, for
 * tests of what a program does then.
 */
#ifndef DEVACTOR_SIM_H
#define DEVACTOR_SIM_H

#include "devactor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Host twins
 * ------------------------------------------------------------------------ */

/* What a twin sees of its launch. */
typedef struct dv_sim_kctx dv_sim_kctx;

/* A twin: params as cuLaunchKernel's (a pointer to each argument's
 * bytes).  It runs on the thread of the stream it was launched on, in
 * stream order, and like device code it must not call devactor.  Returns 0, or a raw CUDA
 * error code to fault the device as the kernel would (DV_SIM_ILLEGAL_ADDRESS when dv_sim_kmem said
 * no): a sticky fault, which, as on current NVIDIA drivers, leaves the process unable to make a
 * new context, so the actor becomes LOST (README, "When the device faults"). */
typedef int (*dv_sim_kernel_fn)(dv_sim_kctx *k, void **params);
#define DV_SIM_ILLEGAL_ADDRESS 700 /* CUDA_ERROR_ILLEGAL_ADDRESS */

typedef struct dv_sim_kernel {
    const char *name;
    dv_sim_kernel_fn fn;
    uint8_t nparams;                          /* up to DV_LAUNCH_MAX_ARGS */
    uint16_t param_bytes[DV_LAUNCH_MAX_ARGS]; /* each 1 .. DV_ARG_MAX_BYTES */
} dv_sim_kernel;

/* A module image for the sim: pass its address and size to dv_kernel_get.
 * It (and the kernels it lists) must stay valid while an actor uses it. */
typedef struct dv_sim_image {
    char magic[16]; /* DV_SIM_IMAGE_MAGIC */
    const dv_sim_kernel *kernels;
    uint32_t nkernels;
} dv_sim_image;
#define DV_SIM_IMAGE_MAGIC "devactor-sim-v1"
#define DV_SIM_IMAGE(kernel_array)                                                                 \
    {                                                                                              \
        DV_SIM_IMAGE_MAGIC, (kernel_array),                                                        \
            (uint32_t)(sizeof(kernel_array) / sizeof((kernel_array)[0]))                           \
    }

/* Inside a twin: the host address of [ptr, ptr + bytes) of device memory,
 * or NULL when any byte is outside every device's memory (then return
 * DV_SIM_ILLEGAL_ADDRESS, as the GPU would fault). */
DV_EXPORT void *dv_sim_kmem(dv_sim_kctx *k, uint64_t ptr, uint64_t bytes);
DV_EXPORT dv_dim3 dv_sim_kgrid(const dv_sim_kctx *k);
DV_EXPORT dv_dim3 dv_sim_kblock(const dv_sim_kctx *k);

/* ------------------------------------------------------------------------
 * Faults
 *
 * Any thread may call these; none waits for the actor (they arm the
 * driver under it, and take effect at its next matching driver call).
 * Each answers DV_EINVAL for a NULL actor, an unknown call name or kind,
 * or nth 0 with a code, and DV_ENOTSUP when the actor does not run on the
 * sim; a refused call arms nothing.
 * ------------------------------------------------------------------------ */

/* The driver calls the sim can fail, by name ("mem_alloc_async",
 * "launch", "stream_create", ...): the i-th, NULL past the last. */
DV_EXPORT const char *dv_sim_call_name(unsigned i);
/* The nth call (1: the next) of `call` on the actor's driver, from now,
 * returns the raw CUDA code `code` (2: out of memory, 1: invalid value,
 * 999: unknown, ...); 0 disarms.  DV_EINVAL for an unknown call name. */
DV_EXPORT int dv_sim_inject(dv_actor *actor, const char *call, uint64_t nth, int code);
/* The nth allocation from now fails with out of memory; 0 disarms. */
DV_EXPORT int dv_sim_fail_alloc(dv_actor *actor, uint64_t nth);
/* How many times `call` was made on the actor's driver so far. */
DV_EXPORT int dv_sim_call_count(dv_actor *actor, const char *call, uint64_t *count);

typedef enum dv_sim_poison_kind {
    DV_SIM_POISON_RECOVERABLE, /* a sticky error: the actor rebuilds its context */
    DV_SIM_POISON_FATAL,       /* the device is gone for the process */
} dv_sim_poison_kind;
/* Poison the actor's device now, as a faulting kernel would. */
DV_EXPORT int dv_sim_poison(dv_actor *actor, dv_sim_poison_kind kind);
/* Poison it when the nth call of `call` from now is made: that call
 * answers the fault's code (LAUNCH_FAILED, or ILLEGAL_ADDRESS for a fatal
 * one) and every later one on the device (or the driver) too. */
DV_EXPORT int dv_sim_poison_at(dv_actor *actor, const char *call, uint64_t nth,
                               dv_sim_poison_kind kind);

#ifdef __cplusplus
}
#endif

#endif /* DEVACTOR_SIM_H */
