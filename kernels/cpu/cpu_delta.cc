// Delta against the previously saved values on the CPU: a separate pass over
// x and previous (the vectorized stat-set tiles are left untouched). The
// tensor is cut into fixed blocks of kAuxBlockElems pairs; each block is
// reduced serially with AddDeltaPair (kernels/aux_ops.h, the per-pair code of
// every backend), blocks run in parallel for large tensors, and the block
// partials merge in block order: the result does not depend on `workers`.
#include <algorithm>
#include <vector>

#include "kernels/aux_ops.h"
#include "kernels/cpu/cpu_aux.h"
#include "kernels/cpu/cpu_passes.h"

namespace tstat::kernels::cpu {
namespace {

template <DType D>
DeltaPartial DeltaBlock(const unsigned char* x, const unsigned char* p, std::int64_t begin,
                        std::int64_t end, const DeltaTolerance& tol) {
  DeltaPartial acc = DeltaPartial::Identity();
  for (std::int64_t i = begin; i < end; ++i) {
    AddDeltaPair(static_cast<double>(LoadCompute<D>(x, i)),
                 static_cast<double>(LoadCompute<D>(p, i)), tol, &acc);
  }
  return acc;
}

template <DType D>
DeltaPartial DeltaTyped(const ReductionRequest& r, int workers) {
  const auto* x = static_cast<const unsigned char*>(r.tensor.data);
  const auto* p = static_cast<const unsigned char*>(r.options.delta.previous);
  const DeltaTolerance tol{r.options.delta.atol, r.options.delta.rtol};
  const std::int64_t n = r.tensor.numel;
  const std::int64_t blocks = (n + kAuxBlockElems - 1) / kAuxBlockElems;
  std::vector<DeltaPartial> partials(static_cast<std::size_t>(blocks));
  const bool parallel = n >= kParallelMinElems && workers > 1;
#pragma omp parallel for schedule(static) num_threads(workers) if (parallel)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t begin = b * kAuxBlockElems;
    partials[b] = DeltaBlock<D>(x, p, begin, std::min(n, begin + kAuxBlockElems), tol);
  }
  DeltaPartial total = DeltaPartial::Identity();
  for (const DeltaPartial& part : partials) total = MergeDelta(total, part);
  return total;
}

}  // namespace

void ComputeDelta(const ReductionRequest& r, int workers, DeltaStats* out) {
  *out = ToDeltaStats(DispatchFloatDType(
      r.tensor.dtype, [&](auto tag) { return DeltaTyped<decltype(tag)::value>(r, workers); }));
}

}  // namespace tstat::kernels::cpu
