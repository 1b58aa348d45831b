// CUDA entry points for builds without nvcc: they say so instead of failing.
#include "tstat/engine.h"

namespace tstat {

Result<std::unique_ptr<Backend>> CreateCudaBackend(int /*device*/) {
  return Status::NotSupported("tstat was built without CUDA (nvcc was not found at configure time)");
}
bool BuiltWithCuda() { return false; }
int CudaDeviceCount() { return 0; }

}  // namespace tstat
