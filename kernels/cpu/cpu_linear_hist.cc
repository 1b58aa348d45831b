// Linear histogram on the CPU: a second pass once the stat set has given the
// tensor's range. Large tensors are split into `workers` ranges with private
// counters summed at the end (integer sums: order does not matter).
#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu_dispatch.h"
#include "kernels/cpu/cpu_passes.h"
#include "kernels/stats_ops.h"

namespace tstat::kernels::cpu {
namespace {

struct Counts {
  std::vector<std::uint64_t> bins;
  std::uint64_t below = 0, above = 0;
};

template <DType D>
void CountRange(const unsigned char* base, std::int64_t begin, std::int64_t end, double lo, double hi,
                double scale, int bins, Counts* c) {
  for (std::int64_t i = begin; i < end; ++i) {
    const double x = static_cast<double>(LoadCompute<D>(base, i));
    if (!(x - x == 0.0)) continue;  // NaN/Inf are not binned
    const int b = LinearBin(x, lo, hi, scale, bins);
    if (b < 0) {
      ++c->below;
    } else if (b >= bins) {
      ++c->above;
    } else {
      ++c->bins[b];
    }
  }
}

template <DType D>
void LinearTyped(const ReductionRequest& r, double lo, double hi, int workers, LinearHistogram* out) {
  const int bins = r.options.linear_histogram.bins;
  const double scale = LinearScale(lo, hi, bins);
  const auto* base = static_cast<const unsigned char*>(r.tensor.data);
  const std::int64_t n = r.tensor.numel;
  const int parts = n >= kParallelMinElems ? std::max(1, workers) : 1;
  std::vector<Counts> partial(parts);
  for (Counts& c : partial) c.bins.assign(bins, 0);
#pragma omp parallel for schedule(static) num_threads(parts) if (parts > 1)
  for (int p = 0; p < parts; ++p) {
    CountRange<D>(base, RangeStart(n, parts, p), RangeStart(n, parts, p + 1), lo, hi, scale, bins,
                  &partial[p]);
  }
  out->lo = lo;
  out->hi = hi;
  out->counts.assign(bins, 0);
  out->below = out->above = 0;
  for (const Counts& c : partial) {
    for (int b = 0; b < bins; ++b) out->counts[b] += c.bins[b];
    out->below += c.below;
    out->above += c.above;
  }
}

}  // namespace

void ComputeLinearHistogram(const ReductionRequest& r, const TensorStats& stats, int workers,
                            LinearHistogram* out) {
  const LinearHistogramOptions& h = r.options.linear_histogram;
  double lo, hi;
  if (h.fixed_range) {
    lo = h.lo;
    hi = h.hi;
  } else if (stats.finite_count == 0) {
    AutoLinearRange(0.0, 0.0, &lo, &hi);  // documented: [-0.5, 0.5], all zero
  } else {
    AutoLinearRange(stats.min, stats.max, &lo, &hi);
  }
  DispatchDType(r.tensor.dtype, [&](auto tag) { LinearTyped<decltype(tag)::value>(r, lo, hi, workers, out); });
}

}  // namespace tstat::kernels::cpu
