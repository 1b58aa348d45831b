// The one set of per-element and merge operations behind every backend.
//
// StatsPartial is the mergeable state of the stat set; Merge() is the only way
// two partial results combine (thread -> warp -> block -> chunk -> tensor on
// CUDA; tile -> thread -> tensor on CPU). ElementAccumulator is what a CUDA
// thread (and the CPU emulation of that thread) runs per element.
//
// Numerics: moments are (n, mean, M2) merged with Chan's formula in double.
// Inside one accumulator the values are shifted by the first finite value seen
// (d = x - shift), which keeps sum(d^2) - sum(d)^2/n free of the cancellation
// that ruins sum_sq/N - mean^2. Every expression is written so that host and
// device round identically: fma() is explicit and the build turns off
// implicit contraction (-ffp-contract=off, nvcc --fmad=false).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/hd.h"
#include "tstat/dtype.h"
#include "tstat/stats.h"

namespace tstat::kernels {

// ---------------------------------------------------------------------------
// Mergeable state.
struct StatsPartial {
  std::uint64_t count;
  std::uint64_t nan_count, pos_inf_count, neg_inf_count;
  std::uint64_t zero_count, neg_count, subnormal_count;
  std::uint64_t band_lo_count, band_hi_count, small_count;
  std::uint64_t n;  // finite values
  double mean, m2;  // over finite values
  double min, max, amax, l1;

  TSTAT_HD static StatsPartial Identity() {
    StatsPartial p;
    p.count = p.nan_count = p.pos_inf_count = p.neg_inf_count = 0;
    p.zero_count = p.neg_count = p.subnormal_count = 0;
    p.band_lo_count = p.band_hi_count = p.small_count = 0;
    p.n = 0;
    p.mean = 0.0;
    p.m2 = 0.0;
    p.min = INFINITY;
    p.max = -INFINITY;
    p.amax = 0.0;
    p.l1 = 0.0;
    return p;
  }
};

// Chan et al. pairwise update. `a` comes first in the merge order; the result
// depends on the order only through rounding.
TSTAT_HD StatsPartial Merge(const StatsPartial& a, const StatsPartial& b) {
  StatsPartial r;
  r.count = a.count + b.count;
  r.nan_count = a.nan_count + b.nan_count;
  r.pos_inf_count = a.pos_inf_count + b.pos_inf_count;
  r.neg_inf_count = a.neg_inf_count + b.neg_inf_count;
  r.zero_count = a.zero_count + b.zero_count;
  r.neg_count = a.neg_count + b.neg_count;
  r.subnormal_count = a.subnormal_count + b.subnormal_count;
  r.band_lo_count = a.band_lo_count + b.band_lo_count;
  r.band_hi_count = a.band_hi_count + b.band_hi_count;
  r.small_count = a.small_count + b.small_count;
  r.min = a.min < b.min ? a.min : b.min;
  r.max = a.max > b.max ? a.max : b.max;
  r.amax = a.amax > b.amax ? a.amax : b.amax;
  r.l1 = a.l1 + b.l1;
  r.n = a.n + b.n;
  if (a.n == 0) {
    r.mean = b.mean;
    r.m2 = b.m2;
  } else if (b.n == 0) {
    r.mean = a.mean;
    r.m2 = a.m2;
  } else {
    const double na = static_cast<double>(a.n), nb = static_cast<double>(b.n);
    const double nr = static_cast<double>(r.n);
    const double delta = b.mean - a.mean;
    if (delta - delta == 0.0) {
      r.mean = a.mean + delta * (nb / nr);
    } else {
      // Means of opposite sign near DBL_MAX: the weighted form cannot overflow.
      r.mean = a.mean * (na / nr) + b.mean * (nb / nr);
    }
    r.m2 = (a.m2 + b.m2) + delta * delta * (na * (nb / nr));
  }
  return r;
}

struct MergeOp {
  TSTAT_HD StatsPartial operator()(const StatsPartial& a, const StatsPartial& b) const {
    return Merge(a, b);
  }
};

// Converts the final partial of a tensor into the public TensorStats.
inline TensorStats ToTensorStats(const StatsPartial& p) {
  TensorStats s;
  s.count = p.count;
  s.finite_count = p.n;
  s.nan_count = p.nan_count;
  s.pos_inf_count = p.pos_inf_count;
  s.neg_inf_count = p.neg_inf_count;
  s.zero_count = p.zero_count;
  s.neg_count = p.neg_count;
  s.subnormal_count = p.subnormal_count;
  s.band_lo_count = p.band_lo_count;
  s.band_hi_count = p.band_hi_count;
  s.small_count = p.small_count;
  if (p.n > 0) {
    const double n = static_cast<double>(p.n);
    s.min = p.min;
    s.max = p.max;
    s.mean = p.mean;
    s.m2 = p.m2 > 0.0 ? p.m2 : 0.0;
    s.sum = p.mean * n;
    // sum(x^2) = M2 + n*mean^2: both terms are non-negative, no cancellation.
    s.l2 = std::sqrt(s.m2 + n * p.mean * p.mean);
    s.l1 = p.l1;
    s.amax = p.amax;
  }
  return s;
}

// ---------------------------------------------------------------------------
// Thresholds in the compute type, rounded so that comparing a value of that
// type against them gives exactly the answer of comparing in double:
// x <= lo  <=>  x <= lo_t,  x >= hi  <=>  x >= hi_t,  |x| < eps  <=>  |x| < eps_t.
template <class T>
struct Thresholds {
  T band_lo, band_hi, small_eps;
  T min_normal;  // of the input dtype (in the compute type); subnormals are below
};

// Host-only helper: builds float/double thresholds from the user's doubles.
template <class T>
Thresholds<T> MakeThresholds(double lo, double hi, double eps, double min_normal) {
  Thresholds<T> t;
  T l = static_cast<T>(lo);
  if (static_cast<double>(l) > lo) l = std::nextafter(l, -INFINITY);
  T h = static_cast<T>(hi);
  if (static_cast<double>(h) < hi) h = std::nextafter(h, static_cast<T>(INFINITY));
  T e = static_cast<T>(eps);
  if (static_cast<double>(e) < eps) e = std::nextafter(e, static_cast<T>(INFINITY));
  t.band_lo = l;
  t.band_hi = h;
  t.small_eps = e;
  t.min_normal = static_cast<T>(min_normal);
  return t;
}

// Smallest positive normal value of a dtype (subnormal_count is below it).
inline double MinNormalOf(DType t) {
  switch (t) {
    case DType::kFloat32:
      return 1.1754943508222875e-38;  // 2^-126
    case DType::kBFloat16:
      return 1.1754943508222875e-38;  // 2^-126
    case DType::kFloat16:
      return 6.103515625e-05;  // 2^-14
    case DType::kFloat64:
      return 2.2250738585072014e-308;  // 2^-1022
    case DType::kFloat8E4M3:
      return 0.015625;  // 2^-6
    case DType::kFloat8E5M2:
      return 6.103515625e-05;  // 2^-14
    default:
      return 0.0;  // integers: none
  }
}

// ---------------------------------------------------------------------------
// Exponent histogram bin of a finite non-zero value (see tstat/stats.h).
TSTAT_HD int ExponentBin(float x) {
  const std::uint32_t bits = FloatBits(x);
  const int field = static_cast<int>((bits >> 23) & 0xffu);
  const int e = field != 0 ? field - 127 : HighestBit32(bits & 0x7fffffu) - 149;
  return e - kExpHistMinExp;  // float range always fits in [1, 277]
}
TSTAT_HD int ExponentBin(double x) {
  const std::uint64_t bits = DoubleBits(x);
  const int field = static_cast<int>((bits >> 52) & 0x7ffu);
  const int e = field != 0 ? field - 1023 : HighestBit64(bits & 0xfffffffffffffull) - 1074;
  const int clamped = e < kExpHistMinExp ? kExpHistMinExp : e > kExpHistMaxExp ? kExpHistMaxExp : e;
  return clamped - kExpHistMinExp;
}

// ---------------------------------------------------------------------------
// Per-element accumulation, as one CUDA thread (or its CPU emulation) runs it.
// T is the compute type: double for f64 and integer input, float otherwise.
// `Hist` is anything with Add(int bin) (shared-memory atomics on the device, a
// plain array on the host), or NoHistogram.
struct NoHistogram {
  TSTAT_HD void Add(int) {}
};

// Count is the type of the accumulator's own counters: uint32_t where one
// accumulator sees fewer than 2^32 elements (a CUDA thread's share of a chunk:
// half the integer work of 64-bit counters in the element loop), uint64_t
// otherwise. Finish() widens them into the 64-bit StatsPartial.
template <class T, class Count = std::uint64_t>
struct ElementAccumulator {
  Count count, nan_count, pos_inf_count, neg_inf_count, zero_count, neg_count, subnormal_count,
      band_lo_count, band_hi_count, small_count, n;
  T tmin, tmax, tamax;
  double shift, sd, sd2, l1;

  TSTAT_HD void Init() {
    count = nan_count = pos_inf_count = neg_inf_count = zero_count = neg_count = 0;
    subnormal_count = band_lo_count = band_hi_count = small_count = n = 0;
    tmin = static_cast<T>(INFINITY);
    tmax = static_cast<T>(-INFINITY);
    tamax = static_cast<T>(0);
    shift = sd = sd2 = l1 = 0.0;
  }

  template <class Hist>
  TSTAT_HD void Add(T x, const Thresholds<T>& th, Hist& hist) {
    count += 1;
    const T ax = x < 0 ? -x : x;
    band_lo_count += (x <= th.band_lo);  // false for NaN
    band_hi_count += (x >= th.band_hi);
    neg_count += (x < 0);
    if (!(ax <= static_cast<T>(INFINITY))) {  // NaN
      nan_count += 1;
      return;
    }
    if (ax == static_cast<T>(INFINITY)) {
      pos_inf_count += (x > 0);
      neg_inf_count += (x < 0);
      return;
    }
    small_count += (ax < th.small_eps);
    if (x == 0) {
      zero_count += 1;
    } else {
      subnormal_count += (ax < th.min_normal);
      hist.Add(ExponentBin(x));
    }
    tmin = x < tmin ? x : tmin;
    tmax = x > tmax ? x : tmax;
    tamax = ax > tamax ? ax : tamax;
    const double xd = static_cast<double>(x);
    if (n == 0) shift = xd;
    const double d = xd - shift;
    sd += d;
    sd2 = fma(d, d, sd2);
    l1 += fabs(xd);  // |x| converted exactly: one conversion per element, not two
    n += 1;
  }

  // Turns the shifted sums into (n, mean, M2).
  TSTAT_HD StatsPartial Finish() const {
    StatsPartial r = StatsPartial::Identity();
    r.count = count;
    r.nan_count = nan_count;
    r.pos_inf_count = pos_inf_count;
    r.neg_inf_count = neg_inf_count;
    r.zero_count = zero_count;
    r.neg_count = neg_count;
    r.subnormal_count = subnormal_count;
    r.band_lo_count = band_lo_count;
    r.band_hi_count = band_hi_count;
    r.small_count = small_count;
    r.n = n;
    r.l1 = l1;
    if (n > 0) {
      const double nd = static_cast<double>(n);
      const double md = sd / nd;
      r.mean = shift + md;
      const double m2 = sd2 - sd * md;
      r.m2 = m2 > 0.0 ? m2 : 0.0;
      r.min = static_cast<double>(tmin);
      r.max = static_cast<double>(tmax);
      r.amax = static_cast<double>(tamax);
    }
    return r;
  }
};

// ---------------------------------------------------------------------------
// Linear histogram binning. `scale` = bins / (hi - lo), computed once by
// LinearScale() so both backends use the same double.
TSTAT_HD double LinearScale(double lo, double hi, int bins) {
  return static_cast<double>(bins) / (hi - lo);
}
// Left edge of bucket i (i == bins gives hi), computed exactly as
// LinearHistogram::BucketLimits() computes it, so binning and the published
// edges agree even for values that lie exactly on an edge.
TSTAT_HD double LinearEdge(double lo, double hi, int bins, int i) {
  if (i >= bins) return hi;
  return lo + ((hi - lo) / static_cast<double>(bins)) * static_cast<double>(i);
}
// Returns the bucket in [0, bins), or -1 for x < lo, or `bins` for x > hi.
// x must be finite. The scaled guess is off by at most one bucket near an
// edge; comparing with the edges themselves settles it.
TSTAT_HD int LinearBin(double x, double lo, double hi, double scale, int bins) {
  if (x < lo) return -1;
  if (x > hi) return bins;
  const double f = (x - lo) * scale;
  int b = static_cast<int>(f);  // f >= 0, so truncation is floor
  if (b >= bins) b = bins - 1;
  if (b + 1 < bins && x >= LinearEdge(lo, hi, bins, b + 1)) {
    ++b;
  } else if (b > 0 && x < LinearEdge(lo, hi, bins, b)) {
    --b;
  }
  return b;
}

// Automatic range: [min, max], or [v-0.5, v+0.5] when all finite values are v.
TSTAT_HD void AutoLinearRange(double mn, double mx, double* lo, double* hi) {
  if (mn == mx) {
    *lo = mn - 0.5;
    *hi = mx + 0.5;
  } else {
    *lo = mn;
    *hi = mx;
  }
}

// ---------------------------------------------------------------------------
// Deterministic sample positions: splitmix64 of (seed, j), mapped to [0, n)
// by a 64x64->128 multiply (Lemire), so position j depends only on seed, j, n.
TSTAT_HD std::uint64_t SplitMix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
TSTAT_HD std::int64_t SamplePosition(std::uint64_t seed, std::int64_t j, std::int64_t n,
                                     std::int64_t k) {
  if (k >= n) return j;  // take everything, in order
  const std::uint64_t r = SplitMix64(seed ^ SplitMix64(static_cast<std::uint64_t>(j)));
#if defined(__CUDA_ARCH__)
  return static_cast<std::int64_t>(__umul64hi(r, static_cast<std::uint64_t>(n)));
#else
  return static_cast<std::int64_t>(
      (static_cast<unsigned __int128>(r) * static_cast<std::uint64_t>(n)) >> 64);
#endif
}

}  // namespace tstat::kernels
