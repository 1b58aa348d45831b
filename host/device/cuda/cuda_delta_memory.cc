// CreateCudaDeltaMemory: the device memory of DeviceDeltaStore (slots of
// previous values for delta capture). Host code; needs cudart.
#include <cuda_runtime_api.h>

#include <string>

#include "host/device/device_delta.h"
#include "kernels/cuda/cuda_device_guard.h"

namespace tstat::host {
namespace {

using Guard = kernels::CudaDeviceGuard;

class CudaDeltaMemory final : public DeltaMemory {
 public:
  explicit CudaDeltaMemory(int device) : device_(device) {}
  Result<void*> Allocate(std::size_t bytes) override {
    Guard scope(device_);
    TSTAT_RETURN_IF_ERROR(scope.status());
    void* p = nullptr;
    // Once per tensor (slots are reused); cudaMalloc may synchronize.
    TSTAT_RETURN_IF_ERROR(
        kernels::CudaCallStatus(cudaMalloc(&p, bytes), "cudaMalloc (delta previous values)"));
    return p;
  }
  void Free(void* p) override {
    Guard scope(device_);
    (void)cudaFree(p);
  }
  Status CopyAsync(void* dst, const void* src, std::size_t bytes, CUstream_st* stream) override {
    Guard scope(device_);
    TSTAT_RETURN_IF_ERROR(scope.status());
    return kernels::CudaCallStatus(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream),
        "cudaMemcpyAsync (delta previous values)");
  }

 private:
  int device_;
};

}  // namespace

Result<std::unique_ptr<DeltaMemory>> CreateCudaDeltaMemory(int device) {
  return std::unique_ptr<DeltaMemory>(new CudaDeltaMemory(device));
}

}  // namespace tstat::host
