/*
 * The one header devactor's own tests and tools include beside the public
 * ones.  It reaches below the public API, where a test or a benchmark must:
 * the device port (direct driver calls to compare against, the sim's fault
 * controls, counts of event records and waits), the resource stack, and
 * an actor's driver.  It is not installed and promises no stability;
 * nothing here belongs in a program that uses devactor.
 */
#ifndef DEVACTOR_TESTING_H
#define DEVACTOR_TESTING_H

#include "devactor.h"
#include "driver/port.h"
#include "driver/sim.h"
#include "resources/resource.h"

/* The driver an actor runs on (the sim's controls take it). */
dv_driver *dv__actor_driver(const dv_actor *actor);
/* Launch one of devactor's own kernels (tools/kernels) with up to four
 * 8-byte arguments, 1x1x1, untracked; f NULL: wait until complete. */
int dv__actor_launch_builtin(dv_actor *actor, const char *kernel, dv_stream stream,
                             const uint64_t args[4], dv_future *f);

/* Clients (a ring and what goes with it, one per actor posted to) the
 * calling thread holds now. */
unsigned dv__thread_clients(void);

/* Benchmarks only: actors made after dv__order_disable(true) keep no order
 * across threads (no tickets), so dv-bench can show what the order costs.
 * Never in a program that relies on the contract. */
void dv__order_disable(bool off);

/* Benchmarks only: actors made after dv__device_share(true) may share a
 * device with another actor (dv-bench runs the ordered and the unordered
 * actor side by side).  A reset or fault of one destroys the other's
 * state; never in a program. */
void dv__device_share(bool shared);

/* Tests only: a process-wide actor being shut down pauses this long (us)
 * right after it leaves the registry, so a test can reach the window
 * where the next dv_actor_get builds its successor. */
void dv__registry_leave_pause(unsigned us);

#endif /* DEVACTOR_TESTING_H */
