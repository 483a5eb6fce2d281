/*
 * The one table from raw driver codes (CUresult numbering) to dv_status,
 * and the failure detail of a driver call.
 */
#include <stdio.h>

#include "driver/port.h"

/*
 * The raw codes, by what they mean for a caller.  Sticky codes leave the
 * context unusable: every later call in it fails the same way.
 */
#define DV_DRIVER_CODE_MAP(X)                                                                      \
    X(DV_CU_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", DV_EINVAL, false)                           \
    X(DV_CU_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", DV_EDEVICE_OOM, false)                      \
    X(DV_CU_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", DV_ENODEVICE, false)                    \
    X(DV_CU_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", DV_ENODEVICE, false)                        \
    X(DV_CU_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", DV_ENODEVICE, false)                          \
    X(DV_CU_INSUFFICIENT_DRIVER, "CUDA_ERROR_INSUFFICIENT_DRIVER", DV_ENODEVICE, false)            \
    X(DV_CU_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", DV_ENODEVICE, false)                                \
    X(DV_CU_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", DV_ENODEVICE, false)                      \
    X(DV_CU_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", DV_EINVAL, false)                           \
    X(DV_CU_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", DV_EDRIVER, false)                      \
    X(DV_CU_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU", DV_ENOTSUP, false)                  \
    X(DV_CU_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", DV_ENOTSUP, false)      \
    X(DV_CU_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", DV_EINVAL, false)                               \
    X(DV_CU_ECC_UNCORRECTABLE, "CUDA_ERROR_ECC_UNCORRECTABLE", DV_ECONTEXT_LOST, true)             \
    X(DV_CU_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", DV_EINVAL, false)                         \
    X(DV_CU_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", DV_EINVAL, false)                                   \
    X(DV_CU_NOT_READY, "CUDA_ERROR_NOT_READY", DV_EAGAIN, false)                                   \
    X(DV_CU_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", DV_ECONTEXT_LOST, true)                 \
    X(DV_CU_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", DV_EINVAL, false)       \
    X(DV_CU_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT", DV_ECONTEXT_LOST, true)                   \
    X(DV_CU_ASSERT, "CUDA_ERROR_ASSERT", DV_ECONTEXT_LOST, true)                                   \
    X(DV_CU_HARDWARE_STACK_ERROR, "CUDA_ERROR_HARDWARE_STACK_ERROR", DV_ECONTEXT_LOST, true)       \
    X(DV_CU_ILLEGAL_INSTRUCTION, "CUDA_ERROR_ILLEGAL_INSTRUCTION", DV_ECONTEXT_LOST, true)         \
    X(DV_CU_MISALIGNED_ADDRESS, "CUDA_ERROR_MISALIGNED_ADDRESS", DV_ECONTEXT_LOST, true)           \
    X(DV_CU_INVALID_ADDRESS_SPACE, "CUDA_ERROR_INVALID_ADDRESS_SPACE", DV_ECONTEXT_LOST, true)     \
    X(DV_CU_INVALID_PC, "CUDA_ERROR_INVALID_PC", DV_ECONTEXT_LOST, true)                           \
    X(DV_CU_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", DV_ECONTEXT_LOST, true)                     \
    X(DV_CU_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED", DV_ECONTEXT_LOST, true)       \
    X(DV_CU_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", DV_EINVAL, \
      false)                                                                                       \
    X(DV_CU_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", DV_EINVAL, false) \
    X(DV_CU_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", DV_ENOTSUP, false)                          \
    X(DV_CU_UNKNOWN, "CUDA_ERROR_UNKNOWN", DV_EDRIVER, false)

int dv__status_from_driver(int code)
{
    switch (code) {
    case DV_CU_SUCCESS:
        return DV_OK;
#define DV__CODE_STATUS(code_, name, status, sticky)                                               \
    case code_:                                                                                    \
        return status;
        DV_DRIVER_CODE_MAP(DV__CODE_STATUS)
#undef DV__CODE_STATUS
    default:
        return DV_EDRIVER;
    }
}

bool dv__driver_code_is_sticky(int code)
{
    switch (code) {
#define DV__CODE_STICKY(code_, name, status, sticky)                                               \
    case code_:                                                                                    \
        return sticky;
        DV_DRIVER_CODE_MAP(DV__CODE_STICKY)
#undef DV__CODE_STICKY
    default:
        return false;
    }
}

const char *dv__driver_code_name(int code)
{
    switch (code) {
    case DV_CU_SUCCESS:
        return "CUDA_SUCCESS";
#define DV__CODE_NAME(code_, name, status, sticky)                                                 \
    case code_:                                                                                    \
        return name;
        DV_DRIVER_CODE_MAP(DV__CODE_NAME)
#undef DV__CODE_NAME
    default:
        return NULL;
    }
}

int dv__fail_driver(const dv_driver *drv, const char *call, int code)
{
    int status = dv__status_from_driver(code);
    const char *name = drv != NULL ? dv__drv_error_name(drv, code) : dv__driver_code_name(code);
    const char *text = drv != NULL ? dv__drv_error_string(drv, code) : "";
    if (name == NULL)
        name = "CUDA_ERROR_?";
    dv__fail(status, call, "%s failed: %s (%d): %s", call, name, code, text);
    dv_error_detail *d = dv__detail();
    d->driver_code = code;
    snprintf(d->driver_name, sizeof(d->driver_name), "%s", name);
    return status;
}
