/*
 * Configuration as text: dv_actor_config_parse, and DEVACTOR_CONF for the
 * process-wide actors (dv_actor_get), in the manner of PyTorch's
 * PYTORCH_CUDA_ALLOC_CONF:
 *
 *     DEVACTOR_CONF="budget:8G,pool_initial:256M,streams:8,log:/var/log/dv-%d.csv"
 *
 * key:value pairs split by commas (spaces around either ignored).  Sizes
 * take K, M, G, T suffixes (powers of 1024; "MiB", "MB" and "m" read the
 * same; a bare "B" is bytes); switches take 1/0, true/false, on/off, yes/no.  An unknown key or
 * a value that does not parse is refused as a whole (DV_EINVAL naming the
 * key) and changes nothing.
 *
 * Strings (log) are copied to memory the library keeps for the process,
 * one copy per distinct string, since a configuration only points at them.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "actor/actor.h"
#include "base/abi.h"

#define CONF_MAX 4096 /* bytes of text taken */

typedef enum conf_kind { K_SIZE, K_U32, K_BOOL, K_STRING, K_BACKEND } conf_kind;

typedef struct conf_key {
    const char *name;
    conf_kind kind;
    size_t offset;
    const char *what;
} conf_key;

#define F(field) offsetof(dv_actor_config, field)
static const conf_key keys[] = {
    {"backend", K_BACKEND, F(backend), "auto, cuda or sim"},
    {"streams", K_U32, F(streams), "streams in the actor's pool"},
    {"queue", K_U32, F(queue_capacity), "messages per client ring"},
    {"pool", K_BOOL, F(pool), "the pool over the driver's allocator"},
    {"pool_initial", K_SIZE, F(pool_initial_bytes), "the pool's first chunk"},
    {"pool_max_chunk", K_SIZE, F(pool_max_chunk_bytes), "the pool's largest chunk"},
    {"pool_chunks", K_BOOL, F(pool_chunks), "the pool grows by chunks, not by mapping"},
    {"pool_keep_mapped", K_BOOL, F(pool_keep_mapped),
     "the pool maps more rather than moving free memory"},
    {"pool_alias", K_BOOL, F(pool_alias),
     "the pool binds memory to addresses granule by granule, kept mapped at each"},
    {"sim_memory", K_SIZE, F(sim_memory_bytes), "the simulated device's memory"},
    {"budget", K_SIZE, F(budget_bytes), "device bytes the actor may hold (0: no limit)"},
    {"guard", K_BOOL, F(guard), "canaries, poison and quarantine"},
    {"log", K_STRING, F(log_path), "CSV allocation log; %d is the device"},
    {"synchronous", K_BOOL, F(synchronous), "wait for every operation"},
    {"permissive", K_BOOL, F(permissive), "launches may pass raw pointers"},
    {"check_order", K_BOOL, F(check_order), "the stream-order checker"},
    {"host_budget", K_SIZE, F(host_budget_bytes), "page-locked bytes (0: no limit)"},
    {"staging", K_SIZE, F(staging_bytes), "staging for pageable copies"},
    {"staging_chunk", K_SIZE, F(staging_chunk_bytes), "one step of a staged copy"},
    {"copy_threads", K_U32, F(copy_threads), "threads of _async pageable copies"},
};
#undef F

/* Strings the configurations point at, for the life of the process. */
static pthread_mutex_t strings_mu = PTHREAD_MUTEX_INITIALIZER;
static struct kept {
    struct kept *next;
    char text[];
} *strings;

static const char *keep_string(const char *s, size_t n)
{
    pthread_mutex_lock(&strings_mu);
    struct kept *k;
    for (k = strings; k != NULL; k = k->next)
        if (strlen(k->text) == n && memcmp(k->text, s, n) == 0)
            break;
    if (k == NULL && (k = malloc(sizeof(*k) + n + 1)) != NULL) {
        memcpy(k->text, s, n);
        k->text[n] = '\0';
        k->next = strings;
        strings = k;
    }
    pthread_mutex_unlock(&strings_mu);
    return k != NULL ? k->text : NULL;
}

static bool parse_size(const char *v, uint64_t *out)
{
    if (!isdigit((unsigned char)*v))
        return false;
    errno = 0;
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno != 0)
        return false;
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    case 'T': shift = 40; break;
    case 'B': end++; break; /* bytes: "4096B" */
    case '\0': break;
    default: return false;
    }
    if (shift != 0) {
        end++;
        if (*end == 'i' || *end == 'I')
            end++;
        if (*end == 'B' || *end == 'b')
            end++;
    }
    if (*end != '\0' || (shift != 0 && n > (UINT64_MAX >> shift)))
        return false;
    *out = (uint64_t)n << shift;
    return true;
}

static bool parse_bool(const char *v, bool *out)
{
    static const char *const yes[] = {"1", "true", "on", "yes"}, *const no[] = {"0", "false", "off", "no"};
    for (unsigned i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0)
            return (*out = true), true;
        if (strcasecmp(v, no[i]) == 0)
            return (*out = false), true;
    }
    return false;
}

static int refuse(const char *source, const char *key, const char *value, const char *why)
{
    return dv__fail(DV_EINVAL, "config_parse", "%s: %s%s%s: %s", source, key,
                    value != NULL ? ":" : "", value != NULL ? value : "", why);
}

/* Parse text over *cfg (a full config); on failure *cfg is unchanged. */
static int parse_into(dv_actor_config *cfg, const char *text, const char *source)
{
    size_t len = strnlen(text, CONF_MAX + 1);
    if (len > CONF_MAX)
        return refuse(source, "(text)", NULL, "longer than 4096 bytes");
    char buf[CONF_MAX + 1];
    memcpy(buf, text, len + 1);
    dv_actor_config next = *cfg;
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*item))
            item++;
        char *e = item + strlen(item);
        while (e > item && isspace((unsigned char)e[-1]))
            *--e = '\0';
        if (*item == '\0')
            continue; /* "a:1,,b:2" and a trailing comma */
        char *colon = strchr(item, ':');
        if (colon == NULL)
            return refuse(source, item, NULL, "not key:value");
        *colon = '\0';
        char *key = item, *val = colon + 1;
        for (e = colon; e > key && isspace((unsigned char)e[-1]);)
            *--e = '\0';
        while (isspace((unsigned char)*val))
            val++;
        const conf_key *k = NULL;
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
            if (strcmp(keys[i].name, key) == 0)
                k = &keys[i];
        if (k == NULL) {
            /* Within a detail's message (255 characters): the known keys
             * apart by spaces, the unknown one cut where it would not
             * leave them room. */
            char known[512], shown[300];
            size_t at = 0;
            for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]) && at < sizeof(known); i++)
                at += (size_t)snprintf(known + at, sizeof(known) - at, "%s%s", i ? " " : "",
                                       keys[i].name);
            char why[600];
            snprintf(why, sizeof(why), "unknown key; known: %s", known);
            size_t room = strlen(source) + 4 + strlen(why) + 3 < 255
                              ? 255 - (strlen(source) + 4 + strlen(why) + 3)
                              : 0;
            snprintf(shown, sizeof(shown), "%.*s%s", (int)room, key,
                     strlen(key) > room ? "..." : "");
            return refuse(source, shown, NULL, why);
        }
        char *field = (char *)&next + k->offset;
        uint64_t n;
        bool b;
        switch (k->kind) {
        case K_SIZE:
            if (!parse_size(val, &n))
                return refuse(source, key, val, "not a size (a number, then B, K, M, G or T if any)");
            memcpy(field, &n, sizeof(uint64_t));
            break;
        case K_U32:
            if (!parse_size(val, &n) || n > UINT32_MAX)
                return refuse(source, key, val, "not a count");
            {
                uint32_t u = (uint32_t)n;
                memcpy(field, &u, sizeof(u));
            }
            break;
        case K_BOOL:
            if (!parse_bool(val, &b))
                return refuse(source, key, val, "not 1/0, true/false, on/off or yes/no");
            memcpy(field, &b, sizeof(b));
            break;
        case K_BACKEND: {
            dv_backend be;
            if (strcasecmp(val, "auto") == 0)
                be = DV_BACKEND_AUTO;
            else if (strcasecmp(val, "cuda") == 0)
                be = DV_BACKEND_CUDA;
            else if (strcasecmp(val, "sim") == 0)
                be = DV_BACKEND_SIM;
            else
                return refuse(source, key, val, "not auto, cuda or sim");
            memcpy(field, &be, sizeof(be));
            break;
        }
        case K_STRING: {
            const char *s = *val != '\0' ? keep_string(val, strlen(val)) : NULL;
            if (*val != '\0' && s == NULL)
                return dv__fail(DV_ENOMEM, "config_parse", "%s: out of host memory", source);
            memcpy(field, &s, sizeof(s));
            break;
        }
        }
    }
    *cfg = next;
    return DV_OK;
}

int dv_actor_config_parse(dv_actor_config *cfg, const char *text)
{
    if (cfg == NULL || text == NULL)
        return dv__fail(DV_EINVAL, "config_parse", "config_parse: NULL %s",
                        cfg == NULL ? "config" : "text");
    dv_actor_config full;
    int rc = dv__config_read(cfg, &full, "config_parse");
    if (rc != DV_OK)
        return rc;
    if ((rc = parse_into(&full, text, "config")) != DV_OK)
        return rc;
    /* The caller's bytes only (ABI: devactor.h). */
    uint32_t size = cfg->size;
    full.size = size;
    memcpy(cfg, &full, size < sizeof(full) ? size : sizeof(full));
    return DV_OK;
}

int dv__config_from_env(dv_actor_config *cfg)
{
    const char *text = getenv("DEVACTOR_CONF");
    if (text == NULL || *text == '\0')
        return DV_OK;
    return parse_into(cfg, text, "DEVACTOR_CONF");
}
