// CreateCudaDeviceCapture for builds without CUDA.
#include "host/device/device_capture.h"

namespace tstat::host {

Result<std::unique_ptr<DeviceCapture>> CreateCudaDeviceCapture(int /*device*/) {
  return Status::NotSupported(
      "CUDA tensors need a tstat built with CUDA (nvcc was not found at configure time)");
}

}  // namespace tstat::host
