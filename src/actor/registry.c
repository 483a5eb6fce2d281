/*
 * The process-wide actors, one per device (dv_actor_get), on one driver
 * shared by all of them; the map from handle domains to actors; the list
 * of every live actor; and the drivers the process has lost.
 *
 * The fast path is one acquire load.  First callers of an ordinal take
 * that ordinal's mutex: exactly one builds the actor, the others wait on
 * the mutex and then find it published.  The driver is opened once, by
 * the first builder, and kept for the life of the process.
 */
#include <time.h>
#include <stdlib.h>

#include <stdio.h>
#include <string.h>

#include "actor/actor.h"
#include "base/futex.h"
#include "devactor_testing.h"

static _Atomic(dv_actor *) actors[DV_MAX_DEVICES];
static pthread_mutex_t build_mu[DV_MAX_DEVICES] = {[0 ... DV_MAX_DEVICES - 1] =
                                                       PTHREAD_MUTEX_INITIALIZER};
static pthread_mutex_t driver_mu = PTHREAD_MUTEX_INITIALIZER;
static dv_driver *process_driver;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static _Atomic(dv_actor *) by_domain[DV_REF_MAX_DOMAINS + 1];

/* ------------------------------------------------------------------------
 * The process's actors, and lost drivers
 * ------------------------------------------------------------------------ */

static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static dv_actor *live_actors;

#define MAX_LOST 16
/* Keyed by the driver's serial: a driver's memory may be reused by a
 * later one, its serial never. */
static struct {
    uint64_t serial;
    dv_error_detail fault;
} lost[MAX_LOST];
static atomic_int nlost;

bool dv__driver_lost(const dv_driver *drv, dv_error_detail *fault)
{
    /* Acquire: pairs with the release in dv__actors_lose_driver; the entry
     * is written before the count moves. */
    int n = atomic_load_explicit(&nlost, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        if (lost[i].serial == drv->serial) {
            if (fault != NULL)
                *fault = lost[i].fault;
            return true;
        }
    }
    return false;
}

void dv__actors_lose_driver(dv_driver *drv, const dv_error_detail *fault)
{
    pthread_mutex_lock(&live_mu);
    if (!dv__driver_lost(drv, NULL)) {
        int n = atomic_load_explicit(&nlost, memory_order_relaxed);
        if (n < MAX_LOST) {
            lost[n].serial = drv->serial;
            lost[n].fault = *fault;
            atomic_store_explicit(&nlost, n + 1, memory_order_release);
        }
    }
    for (dv_actor *a = live_actors; a != NULL; a = a->next_live)
        if (a->drv == drv)
            dv__actor_mark_lost(a, fault);
    pthread_mutex_unlock(&live_mu);
}

void dv__actor_mark_lost(dv_actor *a, const dv_error_detail *fault)
{
    /* The actor's thread stops using what it holds, even where a shutdown
     * has begun: that keeps its STOPPING. */
    atomic_store_explicit(&a->broken, true, memory_order_release);
    int st = atomic_load(&a->state);
    while ((st == DV_ACTOR_RUNNING || st == DV_ACTOR_REBUILDING) &&
           !atomic_compare_exchange_weak(&a->state, &st, DV_ACTOR_LOST))
        ;
    dv__ref_domain_set_state(a->refs, DV_DOMAIN_LOST);
    pthread_mutex_lock(&a->health_mu);
    if (a->health.first_fault.status == 0 || a->fault_mended) {
        a->health.first_fault = *fault;
        a->fault_mended = false;
    }
    a->health.state = DV_ACTOR_LOST;
    pthread_mutex_unlock(&a->health_mu);
    dv__inbox_kick(a->inbox); /* it fails what it holds */
    dv__memory_waiters_wake(a); /* dv_alloc_wait: refused at once now */
}

/* ------------------------------------------------------------------------
 * One actor per device
 * ------------------------------------------------------------------------ */

/* Which devices a driver's ordinals name: every cuda driver of the process
 * reaches the same GPUs (and their primary contexts); a sim is a world of
 * its own. */
static const void *device_set(const dv_driver *drv)
{
    return dv__driver_backend(drv) == DV_BACKEND_SIM ? (const void *)drv : (const void *)drv->ops;
}

#define MAX_CLAIMS ((int)DV_REF_MAX_DOMAINS + 1)
static struct claim {
    const void *set;
    int device;
    const dv_actor *actor;
    bool registered;
} claims[MAX_CLAIMS];

static atomic_bool sharing;

void dv__device_share(bool shared)
{
    atomic_store(&sharing, shared);
}

/* Being shut down (it lets go of its device when stopped). */
static bool stopping(const dv_actor *a)
{
    int st = atomic_load(&((dv_actor *)a)->state);
    return st == DV_ACTOR_STOPPING || st == DV_ACTOR_STOPPED;
}

int dv__device_claim(dv_actor *a)
{
    if (atomic_load(&sharing))
        return DV_OK;
    const void *set = device_set(a->drv);
    const char *op = a->registered ? "actor_get" : "actor_create";
    int rc = DV_OK, free_at = -1;
    pthread_mutex_lock(&live_mu);
    uint64_t deadline = 0; /* of the wait for a stopping holder: 30 s */
    for (int i = 0; i < MAX_CLAIMS && rc == DV_OK; i++) {
        if (claims[i].actor == NULL) {
            if (free_at < 0)
                free_at = i;
        } else if (claims[i].set == set && claims[i].device == a->device &&
                   stopping(claims[i].actor) &&
                   (deadline == 0 || dv__now_ns() < deadline)) {
            /* Its holder is being shut down: it lets go in a moment (at
             * most 30 s waited), then the device is this one's. */
            if (deadline == 0)
                deadline = dv__now_ns() + UINT64_C(30000000000);
            pthread_mutex_unlock(&live_mu);
            struct timespec pause = {0, 100000};
            nanosleep(&pause, NULL);
            pthread_mutex_lock(&live_mu);
            i = -1, free_at = -1; /* look at every claim again */
        } else if (claims[i].set == set && claims[i].device == a->device) {
            rc = dv__fail(DV_EBUSY, op,
                          "%s: device %d (%s) already has an actor (%s); one actor "
                          "owns a device: share it, or shut it down first",
                          op, a->device, dv__driver_backend_name(a->drv),
                          claims[i].registered ? "the process-wide one, dv_actor_get"
                                               : "made by dv_actor_create");
        }
    }
    if (rc == DV_OK && free_at < 0)
        rc = dv__fail(DV_ENOMEM, op, "%s: %d actors are alive already", op, MAX_CLAIMS);
    if (rc == DV_OK)
        claims[free_at] = (struct claim){set, a->device, a, a->registered};
    pthread_mutex_unlock(&live_mu);
    return rc;
}

void dv__device_unclaim(dv_actor *a)
{
    pthread_mutex_lock(&live_mu);
    for (int i = 0; i < MAX_CLAIMS; i++)
        if (claims[i].actor == a)
            claims[i] = (struct claim){0};
    pthread_mutex_unlock(&live_mu);
}

void dv__actor_link(dv_actor *a)
{
    pthread_mutex_lock(&live_mu);
    a->next_live = live_actors;
    live_actors = a;
    pthread_mutex_unlock(&live_mu);
}

void dv__actor_unlink(dv_actor *a)
{
    pthread_mutex_lock(&live_mu);
    for (dv_actor **pp = &live_actors; *pp != NULL; pp = &(*pp)->next_live) {
        if (*pp == a) {
            *pp = a->next_live;
            break;
        }
    }
    pthread_mutex_unlock(&live_mu);
}

/* The live actor of this uid, or NULL.  live_mu held. */
static dv_actor *live_with_uid(uint64_t uid)
{
    dv_actor *a = live_actors;
    while (a != NULL && a->uid != uid)
        a = a->next_live;
    return a;
}

bool dv__actor_uid_live(uint64_t uid)
{
    pthread_mutex_lock(&live_mu);
    bool found = live_with_uid(uid) != NULL;
    pthread_mutex_unlock(&live_mu);
    return found;
}

bool dv__actor_health_if_live(const dv_actor *a, uint64_t uid, dv_actor_health *h)
{
    pthread_mutex_lock(&live_mu);
    bool found = live_with_uid(uid) == a && a != NULL && dv_actor_health_get(a, h) == DV_OK;
    pthread_mutex_unlock(&live_mu);
    return found;
}

void dv__actor_bind_domain(dv_actor *a, bool bound)
{
    uint8_t i = dv__ref_domain_index(a->refs);
    /* Release: pairs with the acquire in dv__actor_of_ref. */
    atomic_store_explicit(&by_domain[i], bound ? a : NULL, memory_order_release);
}

dv_actor *dv__actor_of_ref(dv_ref ref)
{
    return atomic_load_explicit(&by_domain[(uint8_t)(ref.bits >> 56)], memory_order_acquire);
}

/* The process-wide actors stopped at exit: shut down, not freed, since
 * other threads may still hold them (they get DV_ESHUTDOWN); kept here
 * so that their memory stays reachable until the process is gone. */
static dv_actor *stopped_at_exit[DV_MAX_DEVICES];

/* At exit, stop the process's actors so no thread is inside the driver
 * while the process tears down. */
static void stop_all(void)
{
    for (int i = 0; i < DV_MAX_DEVICES; i++) {
        dv_actor *a = atomic_load_explicit(&actors[i], memory_order_acquire);
        /* A child's inherited actors have no thread to stop (base/proc.h). */
        if (a != NULL && a->fork_gen == dv__fork_now()) {
            stopped_at_exit[i] = a;
            dv_actor_shutdown(a);
        }
    }
}

static void register_exit(void)
{
    atexit(stop_all);
}

/* backend: DEVACTOR_CONF's, for the first open (AUTO: DV_BACKEND, else
 * cuda if a device answers, else the sim). */
static int shared_driver(dv_backend backend, dv_driver **out)
{
    int rc = DV_OK;
    pthread_mutex_lock(&driver_mu);
    if (process_driver == NULL) {
        dv_driver_config cfg;
        dv__driver_config_init(&cfg);
        cfg.backend = backend;
        rc = dv__driver_open(&cfg, &process_driver);
    }
    *out = process_driver;
    pthread_mutex_unlock(&driver_mu);
    return rc;
}

int dv_actor_get(int ordinal, dv_actor **out)
{
    if (out == NULL)
        return dv__fail(DV_EINVAL, "actor_get", "actor_get: NULL out");
    *out = NULL;
    if (ordinal < 0 || ordinal >= DV_MAX_DEVICES)
        return dv__fail(DV_EINVAL, "actor_get", "actor_get: device %d is beyond 0..%d", ordinal,
                        DV_MAX_DEVICES - 1);
    /* Acquire: pairs with the release publishing a built actor. */
    dv_actor *a = atomic_load_explicit(&actors[ordinal], memory_order_acquire);
    if (a != NULL) {
        int here = dv__actor_here(a, "actor_get");
        if (here != DV_OK)
            return here;
        *out = a;
        return DV_OK;
    }
    pthread_mutex_lock(&build_mu[ordinal]);
    a = atomic_load_explicit(&actors[ordinal], memory_order_acquire);
    int rc = DV_OK;
    if (a == NULL) {
        dv_driver *drv = NULL;
        dv_actor_config cfg;
        dv_actor_config_init(&cfg);
        /* An operator's configuration, read at each build (a refused one
         * builds nothing; a later call reads it again). */
        rc = dv__config_from_env(&cfg);
        /* dv__actor_start checks the ordinal against the driver. */
        if (rc == DV_OK && (rc = shared_driver(cfg.backend, &drv)) == DV_OK) {
            cfg.device = ordinal;
            cfg.driver = drv;
            if ((rc = dv__actor_start(&cfg, drv, true, &a)) == DV_OK) {
                pthread_once(&exit_once, register_exit);
                atomic_store_explicit(&actors[ordinal], a, memory_order_release);
            } else if (rc == DV_EINVAL) {
                const char *text = getenv("DEVACTOR_CONF");
                if (text != NULL && *text != '\0') /* the operator's to mend */
                    dv__detail_append(" (the configuration came from DEVACTOR_CONF)");
            }
        }
    }
    pthread_mutex_unlock(&build_mu[ordinal]);
    if (rc == DV_OK)
        *out = a;
    return rc;
}

static atomic_uint leave_pause_us;

void dv__registry_leave_pause(unsigned us)
{
    atomic_store(&leave_pause_us, us);
}

void dv__registry_forget(dv_actor *a)
{
    if (a->device < 0 || a->device >= DV_MAX_DEVICES)
        return;
    dv_actor *expect = a;
    atomic_compare_exchange_strong(&actors[a->device], &expect, NULL);
    unsigned us = atomic_load_explicit(&leave_pause_us, memory_order_relaxed);
    if (us != 0) {
        struct timespec pause = {us / 1000000, (long)(us % 1000000) * 1000};
        nanosleep(&pause, NULL);
    }
}
