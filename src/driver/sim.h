/*
 * The simulated device: what tests and tools may ask of the sim beyond the
 * port (kernel registry, fault injection, delays).
 *
 * Model
 * -----
 * Device memory is host memory (one mmap'd arena per device, addresses
 * that do not look like host pointers); physical memory of the virtual
 * memory calls lives in a memfd, the same bytes at every address it is
 * mapped at.  Every stream has a worker thread
 * that runs its ops in order; streams run concurrently.  An event records
 * a stream position; a wait blocks a stream until that position is done; a
 * stream-ordered free returns memory only when its stream reaches it.  With
 * delay_max_us set, each op sleeps a seeded random time first, so a missing
 * cross-stream wait shows up as wrong data instead of hiding.
 *
 * Faults are raw driver codes, as the real driver would return them:
 *   - the Nth allocation fails with CUDA_ERROR_OUT_OF_MEMORY;
 *   - the Nth call of a chosen port call returns a chosen code;
 *   - a context is poisoned: recoverable (every call on that device fails
 *     until ctx_reset) or process-fatal (every device of the driver fails
 *     for good; ctx_reset "succeeds", ctx_retain fails — measured on H100
 *     and H200 with driver 580 after an illegal-address fault);
 *   - a kernel touching memory outside every device arena poisons the
 *     driver process-fatally with CUDA_ERROR_ILLEGAL_ADDRESS, like the
 *     real illegal_address kernel (recoverably where the config says so);
 *   - one stream is slowed by a fixed delay per op.
 */
#ifndef DV_DRIVER_SIM_H
#define DV_DRIVER_SIM_H

#include "devactor_sim.h"
#include "driver/port.h"

/* The kernel type, the twins' context and the poison kinds are public
 * (devactor_sim.h).  Besides the images users give, the sim has a
 * process-wide registry for devactor's own kernels: */

/* Add a kernel to the process-wide registry (names are unique; the
 * registry keeps the pointer).  DV_EINVAL for a duplicate or bad entry. */
int dv__sim_register_kernel(const dv_sim_kernel *kernel);
const dv_sim_kernel *dv__sim_find_kernel(const char *name);

/* Inside a kernel: host address of [dptr, dptr + bytes) on the launching
 * driver's devices, or NULL where any byte is outside every arena. */
void *dv__sim_kmem(dv_sim_kctx *k, dv_dptr dptr, uint64_t bytes);
dv_dim3 dv__sim_kgrid(const dv_sim_kctx *k);
dv_dim3 dv__sim_kblock(const dv_sim_kctx *k);

/* Host address of [dptr, dptr + bytes) of a sim driver's device memory,
 * or NULL (host functions of tasks compute on it in stream order). */
void *dv__sim_host_ptr(dv_driver *drv, dv_dptr dptr, uint64_t bytes);

/* Is this a sim driver? */
bool dv__sim_is_sim(const dv_driver *drv);

/* The next nth allocation (1 = the very next) fails with OOM; 0 disarms. */
int dv__sim_fail_alloc_nth(dv_driver *drv, uint64_t nth);
/* The next nth call of `call` on any device returns `code`; code 0 disarms. */
int dv__sim_inject(dv_driver *drv, dv_drv_call call, uint64_t nth, int code);
/* Calls of `call` made so far (those that reach the sim's fault check). */
uint64_t dv__sim_calls(dv_driver *drv, dv_drv_call call);
/* Is image a dv_sim_image (devactor_sim.h)? */
bool dv__sim_is_user_image(const void *image, size_t image_bytes);
/* Check a twin before use: DV_EINVAL naming what is wrong. */
int dv__sim_kernel_check(const dv_sim_kernel *kernel, const char *op);

/* Poison when the nth call of `call` from now is made (it answers the
 * poison's code): LAUNCH_FAILED on device (recoverable) or ILLEGAL_ADDRESS
 * for the driver (fatal). */
int dv__sim_poison_at(dv_driver *drv, dv_drv_call call, uint64_t nth, int device,
                      dv_sim_poison_kind kind);
/* Poison now.  code 0 picks LAUNCH_FAILED (recoverable) or ILLEGAL_ADDRESS
 * (fatal). */
int dv__sim_poison(dv_driver *drv, int device, dv_sim_poison_kind kind, int code);
/* Raw sticky code of a device (0 if healthy). */
int dv__sim_sticky_code(dv_driver *drv, int device);

/* Random per-op delay of every stream, from now on (0 = off). */
int dv__sim_set_delay(dv_driver *drv, uint32_t max_us);
/* Fixed extra delay before each op of one stream. */
int dv__sim_stream_set_delay(dv_drv_stream *stream, uint32_t extra_us);
/* Bytes allocated on a device (live plus freed-but-not-yet-reached). */
uint64_t dv__sim_allocated_bytes(dv_driver *drv, int device);

/* The sim's image of the built-in kernels (used when there is no fatbin). */
extern const unsigned char dv__sim_builtin_image[];
extern const size_t dv__sim_builtin_image_size;
/* Registers the built-in kernels once (called by the sim's open). */
void dv__sim_register_builtins(void);

#endif /* DV_DRIVER_SIM_H */
