/*
 * Type-stable free lists (keep.h).
 */
#include <stdlib.h>
#include <string.h>

#include "base/keep.h"

static void **link_of(const dv_keep *k, void *p)
{
    return (void **)((char *)p + k->link);
}

void *dv__keep_get(dv_keep *k)
{
    pthread_mutex_lock(&k->mu);
    void *p = k->head;
    if (p != NULL)
        k->head = *link_of(k, p);
    pthread_mutex_unlock(&k->mu);
    if (p == NULL)
        p = malloc(k->size);
    if (p != NULL)
        memset(p, 0, k->size);
    return p;
}

void dv__keep_put(dv_keep *k, void *p)
{
    pthread_mutex_lock(&k->mu);
    *link_of(k, p) = k->head;
    k->head = p;
    pthread_mutex_unlock(&k->mu);
}
