/*
 * NVTX ranges around the actor's work, so Nsight Systems shows devactor's
 * operations on the actor's thread, by kind, under the domain "devactor".
 * Built where the CUDA toolkit's header-only NVTX (nvtx3) is found
 * (DV_HAVE_NVTX); without a tool attached each range costs a call that
 * returns at once.
 */
#ifndef DV_ACTOR_NVTX_H
#define DV_ACTOR_NVTX_H

#if DV_HAVE_NVTX
/* Name the calling (actor) thread "devactor device N". */
void dv__nvtx_thread(int device);
/* A range for the handling of one message of type. */
void dv__nvtx_push(unsigned type);
void dv__nvtx_pop(void);
#else
static inline void dv__nvtx_thread(int device)
{
    (void)device;
}
static inline void dv__nvtx_push(unsigned type)
{
    (void)type;
}
static inline void dv__nvtx_pop(void)
{
}
#endif

#endif
