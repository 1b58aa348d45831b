// Label counts (bincount) on the CPU, with private per-worker counters for
// large tensors.
#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu_dispatch.h"
#include "kernels/cpu/cpu_passes.h"

namespace tstat::kernels::cpu {
namespace {

template <DType D>
std::int64_t LoadLabel(const unsigned char* base, std::int64_t i) {
  if constexpr (D == DType::kInt32) {
    std::int32_t v;
    std::memcpy(&v, base + i * 4, 4);
    return v;
  } else if constexpr (D == DType::kInt64) {
    std::int64_t v;
    std::memcpy(&v, base + i * 8, 8);
    return v;
  } else {
    return base[i];
  }
}

template <DType D>
void LabelsTyped(const ReductionRequest& r, int workers, LabelCounts* out) {
  const std::int64_t classes = r.options.label_classes;
  const auto* base = static_cast<const unsigned char*>(r.tensor.data);
  const std::int64_t n = r.tensor.numel;
  const int parts = n >= kParallelMinElems ? std::max(1, workers) : 1;
  std::vector<std::vector<std::uint64_t>> counts(parts, std::vector<std::uint64_t>(classes, 0));
  std::vector<std::uint64_t> out_of_range(parts, 0);
#pragma omp parallel for schedule(static) num_threads(parts) if (parts > 1)
  for (int p = 0; p < parts; ++p) {
    std::uint64_t* c = counts[p].data();
    std::uint64_t bad = 0;
    for (std::int64_t i = RangeStart(n, parts, p), e = RangeStart(n, parts, p + 1); i < e; ++i) {
      const std::int64_t v = LoadLabel<D>(base, i);
      if (v >= 0 && v < classes) {
        ++c[v];
      } else {
        ++bad;
      }
    }
    out_of_range[p] = bad;
  }
  out->counts.assign(classes, 0);
  out->out_of_range = 0;
  for (int p = 0; p < parts; ++p) {
    for (std::int64_t k = 0; k < classes; ++k) out->counts[k] += counts[p][k];
    out->out_of_range += out_of_range[p];
  }
}

}  // namespace

void ComputeLabelCounts(const ReductionRequest& r, int workers, LabelCounts* out) {
  switch (r.tensor.dtype) {
    case DType::kInt32: return LabelsTyped<DType::kInt32>(r, workers, out);
    case DType::kInt64: return LabelsTyped<DType::kInt64>(r, workers, out);
    default: return LabelsTyped<DType::kUInt8>(r, workers, out);  // CheckRequest allows only these
  }
}

}  // namespace tstat::kernels::cpu
