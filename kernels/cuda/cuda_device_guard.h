// Host-side CUDA helpers shared by the backend's users (host/device/cuda/):
// a runtime call's error as a Status, and a scope that makes a device current
// and restores the caller's. Plain C++ over the CUDA runtime API (no kernels).
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "tstat/status.h"

namespace tstat::kernels {

// OK, or kCudaError "<what>: <cudaGetErrorString>". A non-sticky error is
// cleared so that it is not reported again by the next unrelated call.
inline Status CudaCallStatus(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::OK();
  (void)cudaGetLastError();
  return Status::CudaError(std::string(what) + ": " + cudaGetErrorString(error));
}

// Makes `device` current for the scope and restores the previous one.
// status() says whether switching failed; callers check it before work.
class CudaDeviceGuard {
 public:
  explicit CudaDeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) status_ = CudaCallStatus(cudaSetDevice(device), "cudaSetDevice");
  }
  ~CudaDeviceGuard() {
    if (previous_ >= 0) (void)cudaSetDevice(previous_);
  }
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;
  const Status& status() const { return status_; }

 private:
  int previous_ = -1;
  Status status_;
};

}  // namespace tstat::kernels
