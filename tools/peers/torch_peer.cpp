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
// and the optional statistics dv-replay reads (--peer), of the device the
// last dv_peer_open named, as torch.cuda.memory_stats gives them:
//
//   int   dv_peer_stats(uint64_t *allocated_peak, uint64_t *reserved_peak,
//                       uint64_t *reserved_now);     0, or -1
//   void  dv_peer_reset_peaks(void);                 resetPeakStats(device)
//   void  dv_peer_trim(void);                        emptyCache()
//
// Built on a machine with PyTorch installed (build-torch-peer.sh); devactor
// itself never links it.
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>

namespace {
std::once_flag init_once;
bool init_ok = false;
char name[160];
std::atomic<int> stats_device{0}; // the device of the last dv_peer_open

// StatType::AGGREGATE, the index of the all-pools figure in a StatArray.
// It is 0 in every PyTorch; the enum moved (c10::cuda::CUDACachingAllocator
// until 2.4, c10::CachingAllocator / c10::CachingDeviceAllocator since), so
// it is not named here, to build against either.
constexpr std::size_t kAggregate = 0;
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
        stats_device.store(device);
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

__attribute__((visibility("default"))) int dv_peer_stats(uint64_t *allocated_peak,
                                                          uint64_t *reserved_peak,
                                                          uint64_t *reserved_now)
{
    if (!init_ok)
        return -1;
    try {
        const auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(
            static_cast<c10::DeviceIndex>(stats_device.load()));
        *allocated_peak = static_cast<uint64_t>(s.allocated_bytes[kAggregate].peak);
        *reserved_peak = static_cast<uint64_t>(s.reserved_bytes[kAggregate].peak);
        *reserved_now = static_cast<uint64_t>(s.reserved_bytes[kAggregate].current);
        return 0;
    } catch (...) {
        return -1;
    }
}

__attribute__((visibility("default"))) void dv_peer_reset_peaks(void)
{
    if (!init_ok)
        return;
    try {
        c10::cuda::CUDACachingAllocator::resetPeakStats(
            static_cast<c10::DeviceIndex>(stats_device.load()));
    } catch (...) {
    }
}

// The cached blocks of every device back to the driver (what
// torch.cuda.empty_cache does); the blocks still allocated stay.
__attribute__((visibility("default"))) void dv_peer_trim(void)
{
    if (!init_ok)
        return;
    try {
        c10::cuda::CUDACachingAllocator::emptyCache();
    } catch (...) {
    }
}
}
