/*
 * Type-stable free lists: objects that are never returned to the system.
 * A freed one goes on its type's list and comes back as the same type, so
 * a pointer kept past the object's end still reads memory of that type
 * (a handle used after its destruction reads its dead marker, not freed
 * memory).  The list links through a pointer member chosen by the type,
 * so the members that mark an object dead are left as the caller wrote
 * them.  Kernel handles and events are kept this way.
 */
#ifndef DV_BASE_KEEP_H
#define DV_BASE_KEEP_H

#include <pthread.h>
#include <stddef.h>

typedef struct dv_keep {
    pthread_mutex_t mu;
    void *head;  /* the free list */
    size_t size; /* of one object */
    size_t link; /* offset of the object's pointer member the list uses */
} dv_keep;

/* A list of objects of `type`, linked through its pointer member `member`. */
#define DV_KEEP_INIT(type, member)                                                                 \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER, NULL, sizeof(type), offsetof(type, member)                      \
    }

/* An object, zeroed: a kept one, else new.  NULL: out of host memory. */
void *dv__keep_get(dv_keep *k);
/* Keep p for the next dv__keep_get (mark it dead first). */
void dv__keep_put(dv_keep *k, void *p);

#endif /* DV_BASE_KEEP_H */
