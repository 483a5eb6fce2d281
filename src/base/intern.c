/*
 * Interned strings (intern.h).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/intern.h"

#define TABLE 4096u /* four times DV_INTERN_MAX: probes stay short */

typedef struct entry {
    uint64_t hash;
    char name[];
} entry;

static _Atomic(entry *) table[TABLE];
static pthread_mutex_t insert_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned count; /* under insert_mu */

static uint64_t hash_of(const char *s)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325); /* FNV-1a */
    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * UINT64_C(0x100000001b3);
    return h;
}

/* The entry for s, or the empty slot where it would go (*slot). */
static entry *find(const char *s, uint64_t h, unsigned *slot)
{
    for (unsigned i = (unsigned)h & (TABLE - 1);; i = (i + 1) & (TABLE - 1)) {
        /* Acquire: pairs with the release store in dv__intern that
         * published the entry with its name written. */
        entry *e = atomic_load_explicit(&table[i], memory_order_acquire);
        if (e == NULL) {
            *slot = i;
            return NULL;
        }
        if (e->hash == h && strcmp(e->name, s) == 0)
            return e;
    }
}

const char *dv__intern(const char *s)
{
    if (s == NULL)
        return "untagged";
    uint64_t h = hash_of(s);
    unsigned slot;
    entry *e = find(s, h, &slot);
    if (e != NULL)
        return e->name;
    pthread_mutex_lock(&insert_mu);
    e = find(s, h, &slot); /* again: another thread may have added it */
    if (e == NULL && count < DV_INTERN_MAX) {
        size_t len = strlen(s);
        e = malloc(sizeof(*e) + len + 1);
        if (e != NULL) {
            e->hash = h;
            memcpy(e->name, s, len + 1);
            count++;
            /* Release: pairs with the acquire load in find. */
            atomic_store_explicit(&table[slot], e, memory_order_release);
        }
    }
    pthread_mutex_unlock(&insert_mu);
    return e != NULL ? e->name : "other";
}
