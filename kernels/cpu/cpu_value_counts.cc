// Value counts on the CPU: for each element of an integer tensor, the
// positions of options.count_values equal to it (MatchValue: binary search of
// the sorted value table, kernels/aux_ops.h) get one more count. Workers count
// contiguous ranges into private counters, summed at the end.
#include <algorithm>
#include <vector>

#include "kernels/aux_ops.h"
#include "kernels/cpu/cpu_aux.h"
#include "kernels/cpu/cpu_passes.h"

namespace tstat::kernels::cpu {
namespace {

struct CounterSink {
  std::uint64_t* counts;
  void Add(int i) { ++counts[i]; }
};

template <DType D>
void ValueCountsTyped(const ReductionRequest& r, int parts, const std::vector<ValueEntry>& table,
                      std::vector<std::vector<std::uint64_t>>* counts) {
  const auto* base = static_cast<const unsigned char*>(r.tensor.data);
  const std::int64_t n = r.tensor.numel;
  const int entries = static_cast<int>(table.size());
#pragma omp parallel for schedule(static) num_threads(parts) if (parts > 1)
  for (int part = 0; part < parts; ++part) {
    CounterSink sink{(*counts)[part].data()};
    for (std::int64_t i = RangeStart(n, parts, part), e = RangeStart(n, parts, part + 1); i < e;
         ++i) {
      MatchValue(table.data(), entries, LoadInteger<D>(base, i), sink);
    }
  }
}

}  // namespace

void ComputeValueCounts(const ReductionRequest& r, int workers, std::vector<std::uint64_t>* out) {
  const std::vector<ValueEntry> table = BuildValueTable(r.options.count_values);
  const int parts = r.tensor.numel >= kParallelMinElems ? std::max(1, workers) : 1;
  std::vector<std::vector<std::uint64_t>> counts(parts,
                                                 std::vector<std::uint64_t>(table.size(), 0));
  DispatchIntegerDType(r.tensor.dtype, [&](auto tag) {
    ValueCountsTyped<decltype(tag)::value>(r, parts, table, &counts);
  });
  out->assign(table.size(), 0);
  for (const auto& part : counts) {
    for (std::size_t k = 0; k < part.size(); ++k) (*out)[k] += part[k];
  }
}

}  // namespace tstat::kernels::cpu
