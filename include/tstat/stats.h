// The stat set: what one pass over a tensor produces, and how to ask for it.
//
// Conventions, identical on every backend:
// - count counts every element; nan/pos_inf/neg_inf count non-finite ones.
// - min, max, sum, mean, variance, l1, l2, amax are over FINITE values only,
//   merged in double (Chan). Within one 4096-element tile the CPU backend's
//   AVX-512 path sums x - shift (shift = the running mean) in float over
//   blocks of 8 terms before adding the block sums in double; it falls back to
//   double throughout when values are far from the shift or outside
//   [2^-60, 2^61]. Measured error of that path: below 5e-8 relative.
//   float64 values above ~1.3e154 in magnitude overflow m2 and l2 (+Inf). min/max/mean/variance are
//   NaN when no finite value exists; sum, l1, l2, amax are 0 then.
// - variance is the population variance M2/n (Welford/Chan merge in double);
//   sample_variance() divides by n-1.
// - zero_count counts +0 and -0; neg_count counts x < 0 (so -0 is not
//   negative, -Inf is); band counts compare x <= band_lo / x >= band_hi
//   (NaN never counts, +-Inf do); small_count counts |x| < small_eps (zeros
//   included; NaN and Inf never).
// - Determinism: for a given backend, thread count / GPU model and build, the
//   results are bitwise reproducible (no floating-point atomics). Between CPU
//   and CUDA backends counts and histograms agree exactly; floating-point stats
//   agree within 1e-6 relative.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "tstat/dtype.h"

namespace tstat {

// ---------------------------------------------------------------------------
// Exponent histogram: counts of finite non-zero values by floor(log2|x|).
// Bin i (0 <= i < kExpHistBins) holds values with floor(log2|x|) == i + kExpHistMinExp,
// i.e. |x| in [2^(i+kExpHistMinExp), 2^(i+kExpHistMinExp+1)). The first bin also
// takes everything smaller (possible only for float64 input) and the last bin
// everything larger, so the full float64 range is covered. Float32 subnormals
// start at 2^-149 (bin 1); float32 max is in bin 277 (exponent 127).
inline constexpr int kExpHistMinExp = -150;
inline constexpr int kExpHistMaxExp = 128;
inline constexpr int kExpHistBins = kExpHistMaxExp - kExpHistMinExp + 1;  // 279

// Bins [first, first + count) of `c[0..n)` span every non-zero count
// ({0, 0}: none). Histograms are mostly zero on both sides, so it tests eight
// bins at a time from each end (bin by bin cost ~100 ns per 279-bin histogram,
// a fifth of reducing 1,000 floats).
struct NonZeroBins {
  int first = 0, count = 0;
};
inline NonZeroBins FindNonZeroBins(const std::uint64_t* c, int n) {
  auto zero8 = [c](int i) {
    return (c[i] | c[i + 1] | c[i + 2] | c[i + 3] | c[i + 4] | c[i + 5] | c[i + 6] | c[i + 7]) == 0;
  };
  int lo = 0;
  while (lo + 8 <= n && zero8(lo)) lo += 8;
  while (lo < n && c[lo] == 0) ++lo;
  if (lo == n) return {};
  int hi = n;  // one past the last non-zero bin
  while (hi - 8 >= lo && zero8(hi - 8)) hi -= 8;
  while (c[hi - 1] == 0) --hi;
  return {lo, hi - lo};
}

struct ExponentHistogram {
  std::array<std::uint64_t, kExpHistBins> counts{};
  // Every non-zero bin lies in [span_begin, span_end): a hint set by whoever
  // fills the histogram while it is still in that core's cache (the CPU
  // engine, SetSpan), so that ExponentBins, built later on another core,
  // reads only those bins (a 279-bin scan missed cache on ~35 lines and was
  // most of the session's per-record cost). The default claims nothing. Code
  // that changes counts outside the span must widen it (or ClearSpan).
  std::int16_t span_begin = 0;
  std::int16_t span_end = kExpHistBins;
  static constexpr int BinExponent(int bin) { return bin + kExpHistMinExp; }
  static constexpr int BinOf(int exponent) {
    return exponent < kExpHistMinExp   ? 0
           : exponent > kExpHistMaxExp ? kExpHistBins - 1
                                       : exponent - kExpHistMinExp;
  }
  std::uint64_t total() const {
    std::uint64_t t = 0;
    for (auto c : counts) t += c;
    return t;
  }
  // Sets the span to the bins' exact non-zero range.
  void SetSpan() {
    const NonZeroBins r = FindNonZeroBins(counts.data(), kExpHistBins);
    span_begin = static_cast<std::int16_t>(r.first);
    span_end = static_cast<std::int16_t>(r.first + r.count);
  }
  // The same, for a histogram whose bins outside [lo, hi) are known to be
  // zero: only those are scanned.
  void SetSpanWithin(int lo, int hi) {
    lo = lo < 0 ? 0 : lo;
    hi = hi > kExpHistBins ? kExpHistBins : hi;
    const NonZeroBins r = lo < hi ? FindNonZeroBins(counts.data() + lo, hi - lo) : NonZeroBins{};
    span_begin = static_cast<std::int16_t>(r.count == 0 ? 0 : lo + r.first);
    span_end = static_cast<std::int16_t>(r.count == 0 ? 0 : lo + r.first + r.count);
  }
  void ClearSpan() {
    span_begin = 0;
    span_end = kExpHistBins;
  }
  // The span clipped to the bins: 0 <= SpanFirst() <= SpanLast() <= kExpHistBins.
  int SpanFirst() const {
    return span_begin < 0 ? 0 : (span_begin > kExpHistBins ? kExpHistBins : span_begin);
  }
  int SpanLast() const {
    const int lo = SpanFirst();
    return span_end < lo ? lo : (span_end > kExpHistBins ? kExpHistBins : span_end);
  }
};

// An exponent histogram as records carry it and files store it: only the bins
// from first_bin to first_bin + counts.size() - 1; every other bin is zero.
// Typical tensors span 10-30 bins, so a record holds ~100-250 bytes here
// instead of the 2.2 KB of an ExponentHistogram, which the pipeline would
// otherwise copy, queue and scan once per tensor per step.
struct ExponentBins {
  int first_bin = 0;                  // the bin of counts[0]
  std::vector<std::uint64_t> counts;  // empty: every bin is zero

  ExponentBins() = default;
  // The non-zero range of `h` (implicit, so `record.exponent_histogram = h` works).
  // Only the bins of h's span are read.
  ExponentBins(const ExponentHistogram& h)  // NOLINT(google-explicit-constructor)
      : ExponentBins(h, std::vector<std::uint64_t>()) {}
  // The same, stored in `buffer`'s memory (its contents are discarded): no
  // allocation when it is large enough. EndStep builds records' histograms
  // in buffers the writer has finished with: a fresh vector per record,
  // allocated on the training thread and freed on the writer's, cost the
  // training thread dearly at many tensors per step.
  ExponentBins(const ExponentHistogram& h, std::vector<std::uint64_t> buffer)
      : counts(std::move(buffer)) {
    const int lo = h.SpanFirst();
    const NonZeroBins range = FindNonZeroBins(h.counts.data() + lo, h.SpanLast() - lo);
    first_bin = range.count ? lo + range.first : 0;
    counts.assign(h.counts.begin() + first_bin, h.counts.begin() + first_bin + range.count);
  }
  // True when the range lies within [0, kExpHistBins).
  bool valid() const {
    return first_bin >= 0 && first_bin <= kExpHistBins &&
           counts.size() <= static_cast<std::size_t>(kExpHistBins - first_bin);
  }
  // The count of any bin (0 outside the stored range).
  std::uint64_t operator[](int bin) const {
    const int i = bin - first_bin;
    return i >= 0 && static_cast<std::size_t>(i) < counts.size()
               ? counts[static_cast<std::size_t>(i)]
               : 0;
  }
  // Sum of the bins [begin, end).
  std::uint64_t Sum(int begin, int end) const {
    std::uint64_t t = 0;
    const int lo = begin > first_bin ? begin : first_bin;
    const int hi_stored = first_bin + static_cast<int>(counts.size());
    const int hi = end < hi_stored ? end : hi_stored;
    for (int b = lo; b < hi; ++b) t += counts[static_cast<std::size_t>(b - first_bin)];
    return t;
  }
  std::uint64_t total() const {
    std::uint64_t t = 0;
    for (auto c : counts) t += c;
    return t;
  }
  // The full 279-bin form (requires valid()).
  ExponentHistogram Expand() const {
    ExponentHistogram h;
    for (std::size_t i = 0; i < counts.size(); ++i) {
      h.counts[static_cast<std::size_t>(first_bin) + i] = counts[i];
    }
    return h;
  }
  // Equal when every bin is equal, however each side's range was chosen.
  friend bool operator==(const ExponentBins& a, const ExponentBins& b) {
    const int hi_a = a.first_bin + static_cast<int>(a.counts.size());
    const int hi_b = b.first_bin + static_cast<int>(b.counts.size());
    const int lo = a.first_bin < b.first_bin ? a.first_bin : b.first_bin;
    const int hi = hi_a > hi_b ? hi_a : hi_b;
    for (int bin = lo; bin < hi; ++bin) {
      if (a[bin] != b[bin]) return false;
    }
    return true;
  }
  friend bool operator!=(const ExponentBins& a, const ExponentBins& b) { return !(a == b); }
};

// ---------------------------------------------------------------------------
// Linear histogram of `bins` equal buckets over [lo, hi]. Bucket i covers
// [lo + i*w, lo + (i+1)*w) and the last bucket is closed at hi. Finite values
// outside [lo, hi] (possible only with a fixed range) are counted in
// below/above, never dropped. Non-finite values are not binned (they are in
// the nan/inf counts). With the automatic range, lo/hi are the tensor's finite
// min/max; if they are equal the range is [v-0.5, v+0.5] (as TensorBoard does).
struct LinearHistogramOptions {
  int bins = 0;               // 0 = off; otherwise 1..kMaxLinearBins
  bool fixed_range = false;   // false: use the tensor's own [min, max]
  double lo = 0.0, hi = 0.0;  // used when fixed_range; need lo < hi, finite
};
inline constexpr int kMaxLinearBins = 65536;

struct LinearHistogram {
  double lo = 0.0, hi = 0.0;
  std::vector<std::uint64_t> counts;
  std::uint64_t below = 0, above = 0;
  // TensorBoard HistogramProto bucket_limit: the right edge of each bucket.
  // Bucket i is [limit[i-1], limit[i]) with limit[-1] = lo; the last is closed.
  std::vector<double> BucketLimits() const {
    std::vector<double> limits(counts.size());
    const double w = (hi - lo) / static_cast<double>(counts.size());
    for (std::size_t i = 0; i < counts.size(); ++i)
      limits[i] = (i + 1 == counts.size()) ? hi : lo + w * static_cast<double>(i + 1);
    return limits;
  }
};

// ---------------------------------------------------------------------------
// Delta against the previously saved values of the same tensor (for
// weight_update_ratio / unchanged_tensor): d = x - previous, reduced in the
// same pass as the stat set. Pairs where x or previous is not finite are not
// part of the norms; they are counted in nonfinite_pairs (and count as
// changed unless both are the same non-finite value).
struct DeltaOptions {
  const void* previous = nullptr;  // null = off; same dtype, numel and memory space
  double atol = 1e-8;              // changed: |x - p| > atol + rtol * |p|
  double rtol = 1e-5;
  // Host tensors (BackendKind::kCpu) with previous: the delta pass also
  // copies x here as it reads it, so that the copy for the next delta costs
  // no pass of its own. `previous` itself (each block is copied once it is
  // read), or bytes that overlap neither x nor previous. Null: no copy.
  void* next = nullptr;
};
// float64 pairs whose difference exceeds DBL_MAX give +Inf norms.
struct DeltaStats {
  std::uint64_t count = 0;
  std::uint64_t changed_count = 0;
  std::uint64_t nonfinite_pairs = 0;
  double l1 = 0.0, l2 = 0.0, amax = 0.0;  // of x - previous over finite pairs
};

// Confusion matrix of this (label) tensor against predictions. `predictions`
// holds integer class ids with the labels' numel, or floating logits of shape
// [numel, classes] whose argmax (first maximum; a row with NaN is invalid) is
// the prediction. Needs 0 < label_classes <= 2048 (the matrix is classes^2).
struct ConfusionOptions {
  const void* predictions = nullptr;  // null = off; same memory space as the labels
  DType predictions_dtype = DType::kInt64;
  bool argmax = false;  // true: predictions are logits [numel, label_classes]
};
struct ConfusionMatrix {
  int classes = 0;
  std::vector<std::uint64_t> counts;  // classes x classes, row = label, column = prediction
  std::uint64_t invalid = 0;          // label or prediction out of range, NaN logits
};

// Counts of given integer values (e.g. padding or unknown token ids) in an
// integer tensor, for nlp_sequence_ratio.
inline constexpr int kMaxCountValues = 64;

// ---------------------------------------------------------------------------
// Options for one tensor's reduction. Defaults give the cheap set plus the
// exponent histogram.
struct StatsOptions {
  double band_lo = -0.97;   // x <= band_lo counts as low-saturated
  double band_hi = 0.97;    // x >= band_hi counts as high-saturated
  double small_eps = 1e-7;  // |x| < small_eps counts as vanishing
  bool exponent_histogram = true;
  LinearHistogramOptions linear_histogram;  // second pass when bins > 0
  int per_channel_axis = -1;                // >= 0: also per-channel stats along this axis
  int label_classes = 0;          // > 0: bincount of an integer tensor instead of the stat set
  std::int64_t sample_count = 0;  // > 0: k elements at pseudo-random positions
  std::uint64_t sample_seed = 0;  // e.g. hash(tensor name) ^ step
  DeltaOptions delta;             // float tensors, with the stat set
  ConfusionOptions confusion;     // with label_classes > 0
  std::vector<std::int64_t> count_values;  // integer tensors; at most kMaxCountValues
};

// ---------------------------------------------------------------------------
struct TensorStats {
  std::uint64_t count = 0;
  std::uint64_t finite_count = 0;
  std::uint64_t nan_count = 0;
  std::uint64_t pos_inf_count = 0;
  std::uint64_t neg_inf_count = 0;
  std::uint64_t zero_count = 0;
  std::uint64_t neg_count = 0;
  std::uint64_t subnormal_count = 0;  // finite non-zero values below the dtype's min normal
  std::uint64_t band_lo_count = 0;
  std::uint64_t band_hi_count = 0;
  std::uint64_t small_count = 0;
  double min = std::numeric_limits<double>::quiet_NaN();
  double max = std::numeric_limits<double>::quiet_NaN();
  double sum = 0.0;
  double mean = std::numeric_limits<double>::quiet_NaN();
  double m2 = 0.0;  // sum of squared deviations from the mean
  double l1 = 0.0;
  double l2 = 0.0;
  double amax = 0.0;

  double variance() const {
    return finite_count ? m2 / static_cast<double>(finite_count)
                        : std::numeric_limits<double>::quiet_NaN();
  }
  double sample_variance() const {
    return finite_count > 1 ? m2 / static_cast<double>(finite_count - 1)
                            : std::numeric_limits<double>::quiet_NaN();
  }
  double stddev() const { return std::sqrt(variance()); }
  std::uint64_t inf_count() const { return pos_inf_count + neg_inf_count; }
};

// Per-channel stats: the full TensorStats (without histograms) for every slice
// along `axis`. Channel c of a tensor viewed as [outer, C, inner] holds the
// elements (o*C + c)*inner + i.
struct PerChannelStats {
  int axis = -1;
  std::vector<TensorStats> channels;
};

// Label counts: counts[k] = number of elements equal to k, 0 <= k < classes;
// labels outside [0, classes) are counted in out_of_range.
struct LabelCounts {
  std::vector<std::uint64_t> counts;
  std::uint64_t out_of_range = 0;
};

// Element sample: values (converted to double) at deterministic positions.
// positions are a function of (seed, n, k) only; when k >= n every element is
// taken in order.
struct ElementSample {
  std::vector<std::int64_t> positions;
  std::vector<double> values;
};

}  // namespace tstat
