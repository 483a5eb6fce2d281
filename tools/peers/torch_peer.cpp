// A peer allocator for dv-bench: PyTorch's CUDA caching allocator, called
// as a client calls it (c10::cuda::CUDACachingAllocator::raw_alloc_with_stream
// and raw_delete), behind the small C interface dv-bench loads at run time:
//
//   const char *dv_peer_name(void);
//   int   dv_peer_open(int device, void **stream);   0, or -1
//   void *dv_peer_alloc(size_t bytes, void *stream);  NULL on failure
//   void  dv_peer_free(void *p);
//   void  dv_peer_close(void *stream);
//
// Built on a machine with PyTorch installed (build-torch-peer.sh); devactor
// itself never links it.
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <mutex>

namespace {
std::once_flag init_once;
bool init_ok = false;
char name[160];
} // namespace

extern "C" {

__attribute__((visibility("default"))) const char *dv_peer_name(void)
{
    return name[0] ? name : "PyTorch CUDA caching allocator";
}

__attribute__((visibility("default"))) int dv_peer_open(int device, void **stream)
{
    try {
        std::call_once(init_once, [] {
            c10::cuda::CUDACachingAllocator::init(c10::cuda::device_count());
            std::snprintf(name, sizeof(name), "PyTorch %s caching allocator (%s)",
                          TORCH_VERSION_STRING_FALLBACK,
                          c10::cuda::CUDACachingAllocator::name().c_str());
            init_ok = true;
        });
        if (!init_ok || cudaSetDevice(device) != cudaSuccess)
            return -1;
        cudaStream_t s = nullptr;
        if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
            return -1;
        *stream = s;
        return 0;
    } catch (...) {
        return -1;
    }
}

__attribute__((visibility("default"))) void *dv_peer_alloc(size_t bytes, void *stream)
{
    try {
        return c10::cuda::CUDACachingAllocator::raw_alloc_with_stream(
            bytes, static_cast<cudaStream_t>(stream));
    } catch (...) {
        return nullptr;
    }
}

__attribute__((visibility("default"))) void dv_peer_free(void *p)
{
    c10::cuda::CUDACachingAllocator::raw_delete(p);
}

__attribute__((visibility("default"))) void dv_peer_close(void *stream)
{
    cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
    cudaStreamDestroy(static_cast<cudaStream_t>(stream));
}
}
