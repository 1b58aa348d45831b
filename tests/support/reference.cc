// Serial long-double reference of the stat set (reference.h).
#include "tests/support/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tests/support/data.h"

namespace tstat::testing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Neumaier's compensated sum in long double.
class CompensatedSum {
 public:
  void Add(long double x) {
    const long double t = sum_ + x;
    if (std::fabs(sum_) >= std::fabs(x)) {
      comp_ += (sum_ - t) + x;
    } else {
      comp_ += (x - t) + sum_;
    }
    sum_ = t;
  }
  long double Get() const { return sum_ + comp_; }

 private:
  long double sum_ = 0;
  long double comp_ = 0;
};

// Calls fn(element_index) for every element of the selection.
template <class Fn>
void ForEachIndex(std::int64_t numel, const std::vector<std::int64_t>* indices, Fn&& fn) {
  if (indices == nullptr) {
    for (std::int64_t i = 0; i < numel; ++i) fn(i);
  } else {
    for (std::int64_t i : *indices) fn(i);
  }
}

// The documented bucket edges, precomputed once for many values.
class LinearBinner {
 public:
  LinearBinner(double lo, double hi, int bins)
      : lo_(lo), hi_(hi), bins_(bins), limits_(ReferenceBucketLimits(lo, hi, bins)) {}
  int Bucket(double x) const {
    if (x < lo_) return -1;
    if (x > hi_) return bins_;
    // Bucket i is [limit(i-1), limit(i)) with limit(-1) = lo; the last is
    // closed at hi. So the bucket is the number of inner edges <= x.
    const auto inner_end = limits_.begin() + (bins_ - 1);
    return static_cast<int>(std::upper_bound(limits_.begin(), inner_end, x) - limits_.begin());
  }

 private:
  double lo_, hi_;
  int bins_;
  std::vector<double> limits_;
};

// 64x64 -> high 64 bits, by 32-bit limbs.
std::uint64_t MulHigh64(std::uint64_t a, std::uint64_t b) {
  const std::uint64_t a_lo = a & 0xffffffffu, a_hi = a >> 32;
  const std::uint64_t b_lo = b & 0xffffffffu, b_hi = b >> 32;
  const std::uint64_t ll = a_lo * b_lo;
  const std::uint64_t lh = a_lo * b_hi;
  const std::uint64_t hl = a_hi * b_lo;
  const std::uint64_t hh = a_hi * b_hi;
  const std::uint64_t mid = (ll >> 32) + (lh & 0xffffffffu) + (hl & 0xffffffffu);
  return hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
}

}  // namespace

int ReferenceExponentBin(double x) {
  int e = 0;
  std::frexp(static_cast<long double>(std::fabs(x)), &e);  // |x| = m * 2^e, m in [0.5, 1)
  const int floor_log2 = e - 1;
  const int clamped = std::clamp(floor_log2, kExpHistMinExp, kExpHistMaxExp);
  return clamped - kExpHistMinExp;
}

std::vector<double> ReferenceBucketLimits(double lo, double hi, int bins) {
  std::vector<double> limits(static_cast<std::size_t>(bins));
  const double width = (hi - lo) / static_cast<double>(bins);
  for (int i = 0; i < bins; ++i) {
    limits[static_cast<std::size_t>(i)] =
        i == bins - 1 ? hi : lo + width * static_cast<double>(i + 1);
  }
  return limits;
}

int ReferenceLinearBucket(double x, double lo, double hi, int bins) {
  return LinearBinner(lo, hi, bins).Bucket(x);
}

std::uint64_t ReferenceSplitMix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::vector<std::int64_t> ReferenceSamplePositions(std::uint64_t seed, std::int64_t n,
                                                   std::int64_t k) {
  std::vector<std::int64_t> positions;
  if (k >= n) {
    for (std::int64_t i = 0; i < n; ++i) positions.push_back(i);
    return positions;
  }
  for (std::int64_t j = 0; j < k; ++j) {
    const std::uint64_t r =
        ReferenceSplitMix64(seed ^ ReferenceSplitMix64(static_cast<std::uint64_t>(j)));
    positions.push_back(static_cast<std::int64_t>(MulHigh64(r, static_cast<std::uint64_t>(n))));
  }
  return positions;
}

void ReferenceChannelDims(const TensorView& view, int axis, std::int64_t* outer,
                          std::int64_t* channels, std::int64_t* inner) {
  if (view.shape.empty()) {
    *outer = 1;
    *channels = view.numel;
    *inner = 1;
    return;
  }
  std::int64_t o = 1, in = 1;
  for (std::size_t d = 0; d < view.shape.size(); ++d) {
    if (static_cast<int>(d) < axis) o *= view.shape[d];
    if (static_cast<int>(d) > axis) in *= view.shape[d];
  }
  *outer = o;
  *channels = view.shape[static_cast<std::size_t>(axis)];
  *inner = in;
}

TensorStats ReferenceStats(const void* data, DType dtype, std::int64_t numel,
                           const StatsOptions& options,
                           const std::vector<std::int64_t>* indices) {
  TensorStats s;
  const double min_normal = MinNormal(dtype);  // 0 for integers: no subnormals
  CompensatedSum sum, l1, sumsq;
  double mn = std::numeric_limits<double>::infinity();
  double mx = -std::numeric_limits<double>::infinity();
  double amax = 0.0;
  // Pass 1: counts, extremes, sums.
  ForEachIndex(numel, indices, [&](std::int64_t i) {
    const double x = DecodeElement(data, dtype, i);
    s.count += 1;
    if (std::isnan(x)) {
      s.nan_count += 1;
      return;
    }
    if (x <= options.band_lo) s.band_lo_count += 1;
    if (x >= options.band_hi) s.band_hi_count += 1;
    if (x < 0) s.neg_count += 1;
    if (std::isinf(x)) {
      if (x > 0) s.pos_inf_count += 1; else s.neg_inf_count += 1;
      return;
    }
    const double ax = std::fabs(x);
    s.finite_count += 1;
    if (x == 0) s.zero_count += 1;
    if (ax < options.small_eps) s.small_count += 1;
    if (x != 0 && ax < min_normal) s.subnormal_count += 1;
    mn = std::min(mn, x);
    mx = std::max(mx, x);
    amax = std::max(amax, ax);
    sum.Add(x);
    l1.Add(ax);
    sumsq.Add(static_cast<long double>(x) * static_cast<long double>(x));
  });
  if (s.finite_count == 0) return s;  // NaN min/max/mean, zero sums (the defaults)
  const long double n = static_cast<long double>(s.finite_count);
  const long double mean = sum.Get() / n;
  // Pass 2: squared deviations from the mean, with the usual correction term
  // for the mean's own rounding (sum d)^2 / n.
  CompensatedSum dev, dev2;
  ForEachIndex(numel, indices, [&](std::int64_t i) {
    const double x = DecodeElement(data, dtype, i);
    if (!std::isfinite(x)) return;
    const long double d = static_cast<long double>(x) - mean;
    dev.Add(d);
    dev2.Add(d * d);
  });
  long double m2 = dev2.Get() - dev.Get() * dev.Get() / n;
  if (m2 < 0) m2 = 0;
  s.min = mn;
  s.max = mx;
  s.amax = amax;
  s.sum = static_cast<double>(sum.Get());
  s.mean = static_cast<double>(mean + dev.Get() / n);
  s.m2 = static_cast<double>(m2);
  s.l1 = static_cast<double>(l1.Get());
  s.l2 = static_cast<double>(std::sqrt(sumsq.Get()));
  return s;
}

MeanVariance ReferenceMeanVariance(const void* data, DType dtype, std::int64_t numel) {
  MeanVariance r;
  CompensatedSum sum;
  for (std::int64_t i = 0; i < numel; ++i) {
    const double x = DecodeElement(data, dtype, i);
    if (!std::isfinite(x)) continue;
    sum.Add(x);
    r.finite += 1;
  }
  if (r.finite == 0) {
    r.mean = r.variance = kNaN;
    return r;
  }
  const long double n = static_cast<long double>(r.finite);
  const long double mean = sum.Get() / n;
  CompensatedSum dev, dev2;
  for (std::int64_t i = 0; i < numel; ++i) {
    const double x = DecodeElement(data, dtype, i);
    if (!std::isfinite(x)) continue;
    const long double d = static_cast<long double>(x) - mean;
    dev.Add(d);
    dev2.Add(d * d);
  }
  r.mean = mean + dev.Get() / n;
  r.variance = (dev2.Get() - dev.Get() * dev.Get() / n) / n;
  return r;
}

ReductionResult ReferenceReduce(const ReductionRequest& request) {
  return ReferenceReduce(request.tensor, request.options);
}

ReductionResult ReferenceReduce(const TensorView& view, const StatsOptions& options) {
  ReductionResult r;
  const void* data = view.data;
  const DType dtype = view.dtype;
  const std::int64_t n = view.numel;

  if (options.sample_count > 0) {
    ElementSample sample;
    sample.positions = ReferenceSamplePositions(options.sample_seed, n, options.sample_count);
    for (std::int64_t p : sample.positions) sample.values.push_back(DecodeElement(data, dtype, p));
    r.sample = std::move(sample);
  }

  if (options.label_classes > 0) {
    LabelCounts labels;
    labels.counts.assign(static_cast<std::size_t>(options.label_classes), 0);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t v = DecodeIntegerElement(data, dtype, i);
      if (v >= 0 && v < options.label_classes) {
        labels.counts[static_cast<std::size_t>(v)] += 1;
      } else {
        labels.out_of_range += 1;
      }
    }
    r.label_counts = std::move(labels);
    // The stat set and the exponent histogram come with label counts.
  }

  r.stats = ReferenceStats(data, dtype, n, options);

  if (options.exponent_histogram) {
    ExponentHistogram h;
    for (std::int64_t i = 0; i < n; ++i) {
      const double x = DecodeElement(data, dtype, i);
      if (std::isfinite(x) && x != 0) h.counts[static_cast<std::size_t>(ReferenceExponentBin(x))] += 1;
    }
    r.exponent_histogram = h;
  }

  const LinearHistogramOptions& lo = options.linear_histogram;
  if (lo.bins > 0) {
    LinearHistogram h;
    if (lo.fixed_range) {
      h.lo = lo.lo;
      h.hi = lo.hi;
    } else if (r.stats.finite_count == 0) {
      h.lo = -0.5;
      h.hi = 0.5;
    } else if (r.stats.min == r.stats.max) {
      h.lo = r.stats.min - 0.5;
      h.hi = r.stats.max + 0.5;
    } else {
      h.lo = r.stats.min;
      h.hi = r.stats.max;
    }
    h.counts.assign(static_cast<std::size_t>(lo.bins), 0);
    const LinearBinner binner(h.lo, h.hi, lo.bins);
    for (std::int64_t i = 0; i < n; ++i) {
      const double x = DecodeElement(data, dtype, i);
      if (!std::isfinite(x)) continue;
      const int b = binner.Bucket(x);
      if (b < 0) {
        h.below += 1;
      } else if (b >= lo.bins) {
        h.above += 1;
      } else {
        h.counts[static_cast<std::size_t>(b)] += 1;
      }
    }
    r.linear_histogram = std::move(h);
  }

  if (options.per_channel_axis >= 0) {
    PerChannelStats pc;
    pc.axis = options.per_channel_axis;
    std::int64_t outer = 0, channels = 0, inner = 0;
    ReferenceChannelDims(view, options.per_channel_axis, &outer, &channels, &inner);
    std::vector<std::int64_t> indices;
    for (std::int64_t c = 0; c < channels; ++c) {
      indices.clear();
      for (std::int64_t o = 0; o < outer; ++o) {
        for (std::int64_t i = 0; i < inner; ++i) indices.push_back((o * channels + c) * inner + i);
      }
      pc.channels.push_back(ReferenceStats(data, dtype, n, options, &indices));
    }
    r.per_channel = std::move(pc);
  }
  return r;
}

}  // namespace tstat::testing
