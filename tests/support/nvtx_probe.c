/*
 * An NVTX tool of the smallest kind, for tests: loaded by the NVTX
 * headers of the program under test through NVTX_INJECTION64_PATH, as
 * Nsight Systems is.  It takes over domain creation, string registration,
 * thread naming and domain range push and pop, counts the ranges by name,
 * and at exit writes what it saw to NVTX_PROBE_OUT:
 *
 *     domain devactor
 *     thread devactor device 0
 *     push allocate 24
 *     pops 96
 *
 * tests/tools/nvtx.sh reads it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>

#define MAX_NAMES 256

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char *name;
    unsigned long pushes;
} names[MAX_NAMES];
static int nnames;
static char *domains[16], *threads[16];
static int ndomains, nthreads;
static unsigned long pops, unnamed;

/* A registered string's handle is its slot + 1. */
static nvtxStringHandle_t probe_register(nvtxDomainHandle_t d, const char *s)
{
    (void)d;
    pthread_mutex_lock(&mu);
    int i;
    for (i = 0; i < nnames; i++)
        if (strcmp(names[i].name, s) == 0)
            break;
    if (i == nnames && nnames < MAX_NAMES)
        names[nnames++].name = strdup(s);
    pthread_mutex_unlock(&mu);
    return (nvtxStringHandle_t)(uintptr_t)(i + 1);
}

static nvtxDomainHandle_t probe_domain(const char *name)
{
    pthread_mutex_lock(&mu);
    if (ndomains < 16)
        domains[ndomains++] = strdup(name);
    pthread_mutex_unlock(&mu);
    return (nvtxDomainHandle_t)(uintptr_t)ndomains;
}

static void probe_thread(uint32_t tid, const char *name)
{
    (void)tid;
    pthread_mutex_lock(&mu);
    if (nthreads < 16)
        threads[nthreads++] = strdup(name);
    pthread_mutex_unlock(&mu);
}

static int probe_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *e)
{
    (void)d;
    pthread_mutex_lock(&mu);
    uintptr_t h = (uintptr_t)e->message.registered;
    if (e->messageType == NVTX_MESSAGE_TYPE_REGISTERED && h >= 1 && h <= (uintptr_t)nnames)
        names[h - 1].pushes++;
    else
        unnamed++;
    pthread_mutex_unlock(&mu);
    return 0;
}

static int probe_pop(nvtxDomainHandle_t d)
{
    (void)d;
    pthread_mutex_lock(&mu);
    pops++;
    pthread_mutex_unlock(&mu);
    return 0;
}

static void report(void)
{
    const char *path = getenv("NVTX_PROBE_OUT");
    FILE *f = path != NULL ? fopen(path, "w") : NULL;
    if (f == NULL)
        return;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < ndomains; i++)
        fprintf(f, "domain %s\n", domains[i]);
    for (int i = 0; i < nthreads; i++)
        fprintf(f, "thread %s\n", threads[i]);
    for (int i = 0; i < nnames; i++)
        if (names[i].pushes > 0)
            fprintf(f, "push %s %lu\n", names[i].name, names[i].pushes);
    fprintf(f, "unnamed %lu\npops %lu\n", unnamed, pops);
    pthread_mutex_unlock(&mu);
    fclose(f);
}

static void patch(NvtxFunctionTable table, unsigned size, unsigned id, NvtxFunctionPointer fn)
{
    if (id < size && table[id] != NULL)
        *table[id] = fn;
}

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
    const NvtxExportTableCallbacks *cb = get(NVTX_ETID_CALLBACKS);
    if (cb == NULL)
        return 0;
    NvtxFunctionTable core = NULL, core2 = NULL;
    unsigned ncore = 0, ncore2 = 0;
    if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &ncore) ||
        !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &ncore2))
        return 0;
    patch(core, ncore, NVTX_CBID_CORE_NameOsThreadA, (NvtxFunctionPointer)probe_thread);
    patch(core2, ncore2, NVTX_CBID_CORE2_DomainCreateA, (NvtxFunctionPointer)probe_domain);
    patch(core2, ncore2, NVTX_CBID_CORE2_DomainRegisterStringA, (NvtxFunctionPointer)probe_register);
    patch(core2, ncore2, NVTX_CBID_CORE2_DomainRangePushEx, (NvtxFunctionPointer)probe_push);
    patch(core2, ncore2, NVTX_CBID_CORE2_DomainRangePop, (NvtxFunctionPointer)probe_pop);
    atexit(report);
    return 1;
}
