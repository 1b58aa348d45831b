// RunCudaCaptureCase for builds without CUDA: says so instead of measuring.
#include "benchmarks/capture_cuda_bench.h"

namespace tstat::bench {

Result<CudaCaptureBenchResult> RunCudaCaptureCase(const CudaCaptureBenchOptions& /*options*/) {
  return Status::NotSupported("tstat was built without CUDA: CUDA capture not measured");
}

}  // namespace tstat::bench
