// CreateCudaDeltaMemory for builds without CUDA.
#include "host/device/device_delta.h"

namespace tstat::host {

Result<std::unique_ptr<DeltaMemory>> CreateCudaDeltaMemory(int /*device*/) {
  return Status::NotSupported("delta capture of CUDA tensors needs a tstat built with CUDA");
}

}  // namespace tstat::host
