/*
 * devactor — one owner thread per CUDA device, reached through messages.
 *
 * This is the only header users include.  It grows layer by layer; today it
 * holds the error model shared by every layer:
 *
 *   - every function returns 0 on success or a negative dv_status;
 *   - dv_strerror() and dv_err_name() describe a code (never NULL);
 *   - dv_last_error() is the detail of the last failure on the calling
 *     thread: the raw driver code and its name, the call that failed,
 *     requested and remaining bytes, a block generation and offset.
 *
 * Thread safety: all functions in this header may be called from any thread.
 */
#ifndef DEVACTOR_H
#define DEVACTOR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define DV_EXPORT __attribute__((visibility("default")))
#else
#define DV_EXPORT
#endif

#define DV_VERSION_MAJOR 0
#define DV_VERSION_MINOR 1
#define DV_VERSION_PATCH 0

/*
 * The error list.  X(name, value, message): one line per code, from which
 * the enum, dv_strerror() and dv_err_name() are generated.  Values are
 * stable; new codes are appended.
 */
#define DV_ERRNO_MAP(X)                                                                            \
    X(EINVAL, -1, "invalid argument")                                                              \
    X(ENOMEM, -2, "out of host memory")                                                            \
    X(ENODEVICE, -3, "no CUDA device")                                                             \
    X(EOUT_OF_BUDGET, -4, "allocation exceeds the device budget")                                  \
    X(EDEVICE_OOM, -5, "device out of memory")                                                     \
    X(EDRIVER, -6, "CUDA driver error")                                                            \
    X(ESTREAM_MISUSE, -7, "stream-ordered contract violated")                                      \
    X(EUSE_AFTER_FREE, -8, "use after free or double free")                                        \
    X(EOUT_OF_BOUNDS, -9, "write outside the bounds of a block")                                   \
    X(ESTALE, -10, "stale handle")                                                                 \
    X(ESHUTDOWN, -11, "actor is shutting down")                                                    \
    X(ECONTEXT_LOST, -12, "CUDA context lost to a sticky error")                                   \
    X(EDEVICE_LOST, -13, "device lost for the rest of this process")                               \
    X(EAGAIN, -14, "resource temporarily unavailable, try again")                                  \
    X(EHAZARD, -15, "cross-stream ordering hazard")                                                \
    X(ENOTSUP, -16, "not supported by this build or backend")

typedef enum dv_status {
    DV_OK = 0,
#define DV__ERRNO_ENUM(name, value, msg) DV_##name = (value),
    DV_ERRNO_MAP(DV__ERRNO_ENUM)
#undef DV__ERRNO_ENUM
} dv_status;

/* Human-readable message for a code; "unknown error" for codes not listed. */
DV_EXPORT const char *dv_strerror(int status);
/* Symbolic name ("DV_EINVAL"); "DV_UNKNOWN" for codes not listed. */
DV_EXPORT const char *dv_err_name(int status);

/*
 * Detail of one failure.  Fields that do not apply are zero / empty.
 */
typedef struct dv_error_detail {
    int status;           /* the dv_status returned */
    const char *call;     /* the operation that failed, e.g. "mem_alloc" */
    int driver_code;      /* raw CUresult (or the simulated one), 0 if none */
    char driver_name[48]; /* e.g. "CUDA_ERROR_OUT_OF_MEMORY" */
    uint64_t requested;   /* bytes asked for */
    uint64_t remaining;   /* bytes that were left (budget, device) */
    uint64_t generation;  /* block generation involved, 0 if none */
    int64_t offset;       /* byte offset involved (guard reports) */
    char message[256];    /* one line for a person */
} dv_error_detail;

/* The last failure recorded on the calling thread (never NULL). */
DV_EXPORT const dv_error_detail *dv_last_error(void);
/* Forget the calling thread's last failure. */
DV_EXPORT void dv_error_clear(void);

/* "0.1.0" */
DV_EXPORT const char *dv_version(void);

#ifdef __cplusplus
}
#endif

#endif /* DEVACTOR_H */
