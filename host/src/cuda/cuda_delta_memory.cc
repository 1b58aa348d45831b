// CreateCudaDeltaMemory: the device memory of DeviceDeltaStore (slots of
// previous values for delta capture). Host code; needs cudart.
#include <cuda_runtime_api.h>

#include <string>

#include "host/src/device_delta.h"

namespace tstat::host {
namespace {

Status CudaStatus(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::OK();
  (void)cudaGetLastError();  // clear a non-sticky error
  return Status::CudaError(std::string(what) + ": " + cudaGetErrorString(e));
}

// Makes `device` current for the scope and restores the previous one.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) status_ = CudaStatus(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceScope() {
    if (previous_ >= 0) (void)cudaSetDevice(previous_);
  }
  const Status& status() const { return status_; }

 private:
  int previous_ = -1;
  Status status_;
};

class CudaDeltaMemory final : public DeltaMemory {
 public:
  explicit CudaDeltaMemory(int device) : device_(device) {}
  Result<void*> Allocate(std::size_t bytes) override {
    DeviceScope scope(device_);
    TSTAT_RETURN_IF_ERROR(scope.status());
    void* p = nullptr;
    // Once per tensor (slots are reused); cudaMalloc may synchronize.
    TSTAT_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&p, bytes), "cudaMalloc (delta previous values)"));
    return p;
  }
  void Free(void* p) override {
    DeviceScope scope(device_);
    (void)cudaFree(p);
  }
  Status CopyAsync(void* dst, const void* src, std::size_t bytes, CUstream_st* stream) override {
    DeviceScope scope(device_);
    TSTAT_RETURN_IF_ERROR(scope.status());
    return CudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream),
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
