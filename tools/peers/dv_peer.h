/*
 * The peer allocator interface of dv-bench and dv-replay: a small library
 * (torch_peer.cpp is one) loaded at run time, so that devactor is compared
 * with an allocator it never links.
 *
 *   const char *dv_peer_name(void);
 *   int   dv_peer_open(int device, void **stream);   0, or -1
 *   void *dv_peer_alloc(size_t bytes, void *stream);  NULL on failure
 *   void  dv_peer_free(void *p);
 *   void  dv_peer_close(void *stream);
 * and, optional:
 *   int   dv_peer_stats(uint64_t *allocated_peak, uint64_t *reserved_peak,
 *                       uint64_t *reserved_now);       0, or -1
 *   void  dv_peer_reset_peaks(void);
 *   void  dv_peer_trim(void);                          its cache back
 */
#ifndef DV_TOOLS_PEER_H
#define DV_TOOLS_PEER_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct dv_peer_api {
    void *lib;
    const char *(*name)(void);
    int (*open)(int device, void **stream);
    void *(*alloc)(size_t bytes, void *stream);
    void (*free)(void *p);
    void (*close)(void *stream);
    /* optional: NULL where the library has none */
    int (*stats)(uint64_t *allocated_peak, uint64_t *reserved_peak, uint64_t *reserved_now);
    void (*reset_peaks)(void);
    void (*trim)(void);
} dv_peer_api;

/* Load the library at path into api: 0, or -1 having said why on stderr
 * (tool: the name that starts the message). */
static inline int dv_peer_load(dv_peer_api *api, const char *path, const char *tool)
{
    static const char *const need[] = {"dv_peer_name", "dv_peer_open", "dv_peer_alloc",
                                       "dv_peer_free", "dv_peer_close"};
    void *sym[5];

    memset(api, 0, sizeof(*api));
    if ((api->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL)) == NULL) {
        fprintf(stderr, "%s: peer %s: %s\n", tool, path, dlerror());
        return -1;
    }
    for (int i = 0; i < 5; i++) {
        if ((sym[i] = dlsym(api->lib, need[i])) == NULL) {
            fprintf(stderr, "%s: peer %s: no %s (not a dv_peer library)\n", tool, path, need[i]);
            dlclose(api->lib);
            api->lib = NULL;
            return -1;
        }
    }
    /* A data pointer read as a function pointer, as dlsym's users must. */
    *(void **)&api->name = sym[0];
    *(void **)&api->open = sym[1];
    *(void **)&api->alloc = sym[2];
    *(void **)&api->free = sym[3];
    *(void **)&api->close = sym[4];
    *(void **)&api->stats = dlsym(api->lib, "dv_peer_stats");
    *(void **)&api->reset_peaks = dlsym(api->lib, "dv_peer_reset_peaks");
    *(void **)&api->trim = dlsym(api->lib, "dv_peer_trim");
    return 0;
}

#endif
