// TimeOnCuda for builds without CUDA: says so instead of measuring anything.
#include "benchmarks/stats_bench.h"

namespace tstat::bench {

Result<CaseTimings> TimeOnCuda(const HostBuffer& /*data*/, const HostBuffer* /*previous*/,
                               const std::vector<std::int64_t>& /*split*/, int /*repeats*/) {
  return Status::NotSupported("tstat was built without CUDA: CUDA throughput not measured");
}

}  // namespace tstat::bench
