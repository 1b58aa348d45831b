// Element sample on the CPU: k values at SamplePosition(seed, j, n, k).
#include "kernels/cpu/cpu_dispatch.h"
#include "kernels/cpu/cpu_passes.h"
#include "kernels/stats_ops.h"

namespace tstat::kernels::cpu {

void ComputeSample(const ReductionRequest& r, ElementSample* out) {
  const std::int64_t n = r.tensor.numel;
  const std::int64_t k = std::min(r.options.sample_count, n);
  const auto* base = static_cast<const unsigned char*>(r.tensor.data);
  out->positions.resize(k);
  out->values.resize(k);
  DispatchDType(r.tensor.dtype, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    for (std::int64_t j = 0; j < k; ++j) {
      const std::int64_t pos = SamplePosition(r.options.sample_seed, j, n, r.options.sample_count);
      out->positions[j] = pos;
      out->values[j] = static_cast<double>(LoadCompute<D>(base, pos));
    }
  });
}

}  // namespace tstat::kernels::cpu
