// The reference: a plain serial computation of everything a backend returns
// for one valid request, written from the contract in tstat/stats.h and
// independent of kernels/.
//
// Values are decoded exactly (data.h) and accumulated in long double with
// compensated (Neumaier) sums; mean and M2 come from two passes (mean first,
// then the squared deviations from it). Counts follow the documented rules by
// direct comparison of the exact value with the user's double thresholds.
// The exponent histogram uses frexp on the value, the linear histogram the
// documented bucket edges (LinearHistogram::BucketLimits), per-channel stats
// index the [outer, C, inner] view explicitly, and sample positions come from
// the documented splitmix64 / multiply-high formula.
#pragma once

#include <cstdint>
#include <vector>

#include "tstat/engine.h"
#include "tstat/stats.h"
#include "tstat/tensor_view.h"

namespace tstat::testing {

// The result a correct backend returns for `request` (its tensor must be in
// host memory and the request must be valid; status is always OK).
ReductionResult ReferenceReduce(const ReductionRequest& request);
ReductionResult ReferenceReduce(const TensorView& host_view, const StatsOptions& options);

// The stat set over the elements `indices` of a host tensor (all elements when
// `indices` is null).
TensorStats ReferenceStats(const void* data, DType dtype, std::int64_t numel,
                           const StatsOptions& options,
                           const std::vector<std::int64_t>* indices = nullptr);

// Only the accurate long-double mean and population variance (two passes) of
// the finite elements; used by the precision test on very large inputs.
struct MeanVariance {
  long double mean = 0;
  long double variance = 0;
  std::uint64_t finite = 0;
};
MeanVariance ReferenceMeanVariance(const void* data, DType dtype, std::int64_t numel);

// floor(log2 |x|) clamped to the histogram range, as a bin index; x finite,
// non-zero.
int ReferenceExponentBin(double x);

// Bucket of a finite x in a linear histogram over [lo, hi] with `bins`
// buckets, by the documented edges: -1 below lo, `bins` above hi.
int ReferenceLinearBucket(double x, double lo, double hi, int bins);
// The documented right edges (TensorBoard bucket_limit) of such a histogram.
std::vector<double> ReferenceBucketLimits(double lo, double hi, int bins);

// Sample positions (see stats.h / kernels docs): SplitMix64 and the
// multiply-high mapping, reimplemented from the written formula.
std::uint64_t ReferenceSplitMix64(std::uint64_t x);
std::vector<std::int64_t> ReferenceSamplePositions(std::uint64_t seed, std::int64_t n,
                                                   std::int64_t k);

// [outer, C, inner] of a tensor for a per-channel axis (empty shape: 1-D).
void ReferenceChannelDims(const TensorView& view, int axis, std::int64_t* outer,
                          std::int64_t* channels, std::int64_t* inner);

}  // namespace tstat::testing
