// The public CUDA entry points of tstat/engine.h for builds with nvcc:
// device discovery that never fails loudly (no driver or no device means 0
// devices, nothing printed) and the CudaBackend factory. Thread-safe (the CUDA
// runtime's device queries are).
#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "kernels/cuda/cuda_backend.h"
#include "tstat/engine.h"

namespace tstat {

bool BuiltWithCuda() { return true; }

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver / no device: not an error for us
    return 0;
  }
  return count;
}

Result<std::unique_ptr<Backend>> CreateCudaBackend(int device) {
  const int count = CudaDeviceCount();
  if (count == 0) {
    return Status::Unavailable("no CUDA device is available (no GPU or no driver)");
  }
  if (device < 0 || device >= count) {
    return Status::InvalidArgument("device " + std::to_string(device) + " is out of range (" +
                                   std::to_string(count) + " CUDA devices)");
  }
  Result<std::unique_ptr<kernels::CudaBackend>> backend = kernels::CudaBackend::Create(device);
  if (!backend.ok()) return backend.status();
  return std::unique_ptr<Backend>(std::move(backend).value());
}

}  // namespace tstat
