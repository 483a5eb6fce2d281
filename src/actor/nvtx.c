/*
 * NVTX ranges (nvtx.h).  The strings and the domain are registered once;
 * a range then costs one call with prepared attributes.
 */
#if DV_HAVE_NVTX
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>

#include "actor/msg.h"
#include "actor/nvtx.h"

#define NTYPES DV_MSG__COUNT

static pthread_once_t once = PTHREAD_ONCE_INIT;
static nvtxDomainHandle_t domain;
static nvtxEventAttributes_t attrs[NTYPES];

static void setup(void)
{
    domain = nvtxDomainCreateA("devactor");
    for (unsigned t = 0; t < NTYPES; t++) {
        nvtxEventAttributes_t *e = &attrs[t];
        e->version = NVTX_VERSION;
        e->size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        e->messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        e->message.registered = nvtxDomainRegisterStringA(domain, dv__msg_name(t));
        e->colorType = NVTX_COLOR_ARGB;
        e->color = 0xff76b900u; /* one colour: the kinds differ by name */
    }
}

void dv__nvtx_thread(int device)
{
    pthread_once(&once, setup);
    char name[64];
    snprintf(name, sizeof(name), "devactor device %d", device);
    nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), name);
}

void dv__nvtx_push(unsigned type)
{
    (void)nvtxDomainRangePushEx(domain, &attrs[type < NTYPES ? type : 0]);
}

void dv__nvtx_pop(void)
{
    (void)nvtxDomainRangePop(domain);
}
#else
/* No NVTX headers: nvtx.h's inline no-ops serve. */
typedef int dv__nvtx_unused;
#endif
