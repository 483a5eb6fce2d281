/*
 * What the actor's files share among themselves (not for tests).
 */
#ifndef DV_ACTOR_ACTOR_INTERNAL_H
#define DV_ACTOR_ACTOR_INTERNAL_H

#include "actor/actor.h"

/* The actor's thread, once dv__actor_build succeeded on it. */
void *dv__actor_main(void *arg);
/* Context, streams, resource stack, completion tracker (actor thread). */
int dv__actor_build(dv_actor *a);
void dv__actor_link(dv_actor *a);
void dv__actor_unlink(dv_actor *a);
/* Post a message (any thread); f NULL: nobody waits for an answer. */
int dv__actor_post(dv_actor *a, dv_msg *m, dv_future *f);
const char *dv__msg_name(uint8_t type);
/* A registered actor is being destroyed: the registry forgets it. */
void dv__registry_forget(dv_actor *a);
/* The actor whose domain minted ref, or NULL. */
dv_actor *dv__actor_of_ref(dv_ref ref);
void dv__actor_bind_domain(dv_actor *a, bool bound);
/* A registered actor (registry.c), on cfg->driver. */
int dv__actor_create_registered(const dv_actor_config *cfg, dv_actor **out);

static inline uint8_t dv__ref_domain_index_of(dv_ref ref)
{
    return (uint8_t)(ref.bits >> 56);
}

/* Launch a built-in kernel (tools/kernels) with up to four 8-byte
 * arguments, untracked: for tests and tools.  f NULL: wait for it. */
int dv__actor_launch_builtin(dv_actor *a, const char *kernel, dv_stream stream,
                             const uint64_t args[4], dv_future *f);
dv_driver *dv__actor_driver(const dv_actor *a);

/* A device-to-device copy between two actors' blocks (client side). */
int dv__actor_peer_copy(dv_actor *dst_actor, dv_ref dst, uint64_t doff, dv_ref src, uint64_t soff,
                        uint64_t bytes, dv_stream stream, dv_future *f);

#endif
