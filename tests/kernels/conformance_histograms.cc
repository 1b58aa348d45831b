// Backend conformance suite (TEST_Ps only; see backend_conformance.h): exponent and linear
// histograms (hand-computed bins, fixed and automatic ranges, bucket limits, empty and non-finite
// tensors).
//
// Expected values come from the long-double reference (tests/support) and,
// for the edge cases, from values computed by hand and written down here.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tests/kernels/conformance_values.h"

namespace tstat::testing {
namespace {

// ---------------------------------------------------------------------------
// Exponent histogram.
TEST_P(BackendConformanceTest, ExponentHistogramHandComputedBins) {
  HostTensor f =
      MakeTensor(DType::kFloat32,
                 {1.0, 0.75, std::ldexp(1.0, -149),
                  static_cast<double>(std::numeric_limits<float>::max()), -3.0, 0.0, kNaN, kInf});
  ReductionResult r = ReduceOne(f);
  std::array<std::uint64_t, kExpHistBins> want{};
  want[150] = 1;  // 1
  want[149] = 1;  // 0.75
  want[1] = 1;    // 2^-149
  want[277] = 1;  // FLT_MAX
  want[151] = 1;  // -3
  ASSERT_TRUE(r.exponent_histogram.has_value());
  EXPECT_EQ(r.exponent_histogram->counts, want);

  // float64 beyond the histogram range lands in the end bins.
  // (1e100, not 1e300: squares must stay finite in double for the stat set.)
  HostTensor d =
      MakeTensor(DType::kFloat64,
                 {1e-300, 1e100, std::ldexp(1.0, -1074), std::ldexp(1.0, 128), std::ldexp(1.0, 127),
                  std::ldexp(1.0, -150), -std::ldexp(1.0, -151), std::ldexp(1.0, -149)});
  r = ReduceOne(d);
  want.fill(0);
  want[0] = 4;    // 1e-300, 2^-1074, 2^-150, -2^-151
  want[278] = 2;  // 1e100, 2^128
  want[277] = 1;  // 2^127
  want[1] = 1;    // 2^-149
  ASSERT_TRUE(r.exponent_histogram.has_value());
  EXPECT_EQ(r.exponent_histogram->counts, want);
  EXPECT_TRUE(ResultMatches(r, Expected(d), ToleranceFor(DType::kFloat64)));

  // Powers of two and their neighbours below, for every dtype's range.
  for (DType t : FloatDTypes()) {
    std::vector<double> v;
    for (int e = -20; e <= 20; ++e) {
      const double p = std::ldexp(1.0, e);
      if (p > MaxFinite(t) || p < MinSubnormal(t)) continue;
      v.push_back(p);
      v.push_back(-StepInDType(t, p, -1));
    }
    HostTensor h = MakeTensor(t, v);
    EXPECT_TRUE(MatchesReference(h)) << DTypeLabel(t);
  }
}

// Magnitudes spread evenly over `octaves` octaves below 2^top (some zeros,
// both signs): every bin of a windowed histogram gets values, at sizes
// around the tile (4,096) and a vectorized kernel's blocks (16, 64, 1,024).
TEST_P(BackendConformanceTest, ExponentHistogramOfWideRangesMatchesReference) {
  struct Spread {
    int top, octaves;
  };
  const Spread spreads[] = {{0, 8}, {4, 16}, {2, 17}, {10, 40}, {-30, 24}};
  const std::int64_t sizes[] = {1,    15,   16,   17,   63,   64,   65,  1023,
                                1024, 1025, 1040, 4095, 4096, 4097, 9000};
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (const Spread& sp : spreads) {
      for (std::int64_t n : sizes) {
        std::mt19937_64 rng(static_cast<std::uint64_t>(n * 131 + sp.top * 7 + sp.octaves));
        std::uniform_real_distribution<double> u(0.0, 1.0);
        std::vector<double> v(static_cast<std::size_t>(n));
        for (double& x : v) {
          const double r = u(rng);
          x = r < 0.05 ? 0.0
                       : std::ldexp(1.0, sp.top - static_cast<int>(u(rng) * sp.octaves)) *
                             (1.0 + u(rng));
          if (u(rng) < 0.5) x = -x;
          if (std::fabs(x) > MaxFinite(t)) x = std::copysign(MaxFinite(t), x);
        }
        EXPECT_TRUE(MatchesReference(MakeTensor(t, v)))
            << DTypeLabel(t) << " n=" << n << " top=" << sp.top << " octaves=" << sp.octaves;
      }
    }
  }
}

TEST_P(BackendConformanceTest, ExponentHistogramCanBeTurnedOff) {
  HostTensor h = GenerateDefaultTensor(DType::kFloat32, 1000, 5);
  StatsOptions o;
  o.exponent_histogram = false;
  const ReductionResult r = ReduceOne(h, o);
  EXPECT_FALSE(r.exponent_histogram.has_value());
  EXPECT_TRUE(ResultMatches(r, Expected(h, o), ToleranceFor(DType::kFloat32)));
}

// ---------------------------------------------------------------------------
// Linear histogram.
TEST_P(BackendConformanceTest, LinearHistogramMatchesReferenceForEveryDType) {
  struct Case {
    std::int64_t n;
    int bins;
    bool fixed;
  };
  const Case cases[] = {{1, 7, false},        {33, 1, false},         {1025, 64, false},
                        {16385, 1000, false}, {100003, 65536, false}, {16385, 50, true},
                        {4097, 256, false},   {65537, 100, false}};
  for (DType t : AllDTypes()) {
    for (const Case& c : cases) {
      HostTensor h = GenerateDefaultTensor(t, c.n, SeedFor(t, c.n) + 2);
      StatsOptions o;
      o.linear_histogram.bins = c.bins;
      o.linear_histogram.fixed_range = c.fixed;
      o.linear_histogram.lo = IsFloatingDType(t) ? -1.5 : -1000.0;
      o.linear_histogram.hi = IsFloatingDType(t) ? 2.25 : 1000.0;
      if (t == DType::kUInt8) o.linear_histogram.lo = 20.0;
      EXPECT_TRUE(MatchesReference(h, o))
          << Where(t, c.n, "bins=" + std::to_string(c.bins) + (c.fixed ? " fixed" : " auto"));
    }
  }
}

TEST_P(BackendConformanceTest, LinearHistogramFixedRangeCountsBelowAndAbove) {
  StatsOptions o;
  o.linear_histogram.bins = 4;
  o.linear_histogram.fixed_range = true;
  o.linear_histogram.lo = -1.0;
  o.linear_histogram.hi = 1.0;
  for (DType t : FloatDTypes()) {
    // Edges -1, -0.5, 0, 0.5, 1; every value representable in every dtype.
    HostTensor h = MakeTensor(t, {-2, -1, -0.5, -0.25, 0, 0.5, 0.875, 1, 1.5, kNaN, kInf, -kInf});
    const ReductionResult r = ReduceOne(h, o);
    ASSERT_TRUE(r.linear_histogram.has_value()) << DTypeLabel(t);
    EXPECT_EQ(r.linear_histogram->lo, -1.0);
    EXPECT_EQ(r.linear_histogram->hi, 1.0);
    EXPECT_EQ(r.linear_histogram->counts, (std::vector<std::uint64_t>{1, 2, 1, 3}))
        << DTypeLabel(t);
    EXPECT_EQ(r.linear_histogram->below, 1u) << DTypeLabel(t);
    EXPECT_EQ(r.linear_histogram->above, 1u) << DTypeLabel(t);
  }
  for (DType t : IntegerDTypes()) {
    StatsOptions oi;
    oi.linear_histogram.bins = 2;
    oi.linear_histogram.fixed_range = true;
    oi.linear_histogram.lo = 1.0;
    oi.linear_histogram.hi = 3.0;  // edges 1, 2, 3
    HostTensor h = MakeTensor(t, {0, 1, 2, 3, 4, 2});
    const ReductionResult r = ReduceOne(h, oi);
    ASSERT_TRUE(r.linear_histogram.has_value()) << DTypeLabel(t);
    EXPECT_EQ(r.linear_histogram->counts, (std::vector<std::uint64_t>{1, 3})) << DTypeLabel(t);
    EXPECT_EQ(r.linear_histogram->below, 1u) << DTypeLabel(t);
    EXPECT_EQ(r.linear_histogram->above, 1u) << DTypeLabel(t);
  }
}

TEST_P(BackendConformanceTest, LinearHistogramAutomaticRange) {
  StatsOptions o;
  o.linear_histogram.bins = 4;
  for (DType t : FloatDTypes()) {
    // Range [-2, 1.5], w = 0.875: edges -1.125, -0.25, 0.625.
    HostTensor h = MakeTensor(t, {-2, -1, -0.5, -0.25, 0, 0.5, 0.875, 1, 1.5, kNaN, kInf});
    const ReductionResult r = ReduceOne(h, o);
    ASSERT_TRUE(r.linear_histogram.has_value()) << DTypeLabel(t);
    EXPECT_EQ(r.linear_histogram->lo, -2.0) << DTypeLabel(t);
    EXPECT_EQ(r.linear_histogram->hi, 1.5) << DTypeLabel(t);
    EXPECT_EQ(r.linear_histogram->counts, (std::vector<std::uint64_t>{1, 2, 3, 3}))
        << DTypeLabel(t);
    EXPECT_EQ(r.linear_histogram->below + r.linear_histogram->above, 0u) << DTypeLabel(t);
  }
}

TEST_P(BackendConformanceTest, LinearHistogramAllEqualValues) {
  for (DType t : AllDTypes()) {
    for (std::int64_t n : {1, 1000, 100003}) {
      std::vector<double> v(static_cast<std::size_t>(n), 3.0);
      if (IsFloatingDType(t) && n > 1) v[1] = kNaN;
      const std::uint64_t finite = IsFloatingDType(t) && n > 1 ? n - 1 : n;
      HostTensor h = MakeTensor(t, v);
      for (int bins : {1, 4, 10}) {
        StatsOptions o;
        o.linear_histogram.bins = bins;
        const ReductionResult r = ReduceOne(h, o);
        const std::string where = Where(t, n, "bins=" + std::to_string(bins));
        ASSERT_TRUE(r.linear_histogram.has_value()) << where;
        EXPECT_EQ(r.linear_histogram->lo, 2.5) << where;
        EXPECT_EQ(r.linear_histogram->hi, 3.5) << where;
        // 3.0 sits on an edge for bins 4 (2.75, 3.0, 3.25) and 10 (2.5+0.1*5):
        // it belongs to the bucket that starts there.
        std::vector<std::uint64_t> want(static_cast<std::size_t>(bins), 0);
        want[static_cast<std::size_t>(bins == 1 ? 0 : bins / 2)] = finite;
        EXPECT_EQ(r.linear_histogram->counts, want) << where;
        EXPECT_TRUE(ResultMatches(r, Expected(h, o), ToleranceFor(t))) << where;
      }
    }
  }
}

// TensorBoard's HistogramProto stores right edges (bucket_limit); a value equal
// to an edge belongs to the bucket that starts there, a value just below it to
// the bucket that ends there. Checked with values at and next to the edges the
// result reports.
TEST_P(BackendConformanceTest, LinearHistogramBucketLimitsAreRightEdges) {
  struct Range {
    double lo, hi;
    int bins;
  };
  const Range ranges[] = {{-1, 1, 4},        {0, 1, 10},       {-3, 7, 7},   {0.1, 0.7, 3},
                          {-1e-3, 5e-3, 12}, {-100, 1e4, 999}, {0, 1, 65536}};
  for (const Range& g : ranges) {
    StatsOptions o;
    o.linear_histogram.bins = g.bins;
    o.linear_histogram.fixed_range = true;
    o.linear_histogram.lo = g.lo;
    o.linear_histogram.hi = g.hi;
    const std::vector<double> limits = ReferenceBucketLimits(g.lo, g.hi, g.bins);
    std::vector<double> values;
    std::vector<std::uint64_t> want(static_cast<std::size_t>(g.bins), 0);
    std::uint64_t below = 0, above = 0;
    auto add = [&](double x, int bucket) {
      values.push_back(x);
      if (bucket < 0)
        ++below;
      else if (bucket >= g.bins)
        ++above;
      else
        ++want[static_cast<std::size_t>(bucket)];
    };
    add(g.lo, 0);
    add(std::nextafter(g.lo, -kInf), -1);
    add(g.hi, g.bins - 1);
    add(std::nextafter(g.hi, -kInf), g.bins - 1);
    add(std::nextafter(g.hi, kInf), g.bins);
    for (int i = 0; i + 1 < g.bins; ++i) {
      add(limits[static_cast<std::size_t>(i)], i + 1);
      add(std::nextafter(limits[static_cast<std::size_t>(i)], -kInf), i);
    }
    HostTensor h = MakeTensor(DType::kFloat64, values);
    const ReductionResult r = ReduceOne(h, o);
    const std::string where = "range [" + std::to_string(g.lo) + ", " + std::to_string(g.hi) +
                              "] bins " + std::to_string(g.bins);
    ASSERT_TRUE(r.linear_histogram.has_value()) << where;
    EXPECT_EQ(r.linear_histogram->BucketLimits(), limits) << where;
    EXPECT_EQ(r.linear_histogram->below, below) << where;
    EXPECT_EQ(r.linear_histogram->above, above) << where;
    int wrong = 0;
    std::string first;
    for (int i = 0; i < g.bins; ++i) {
      if (r.linear_histogram->counts[static_cast<std::size_t>(i)] !=
          want[static_cast<std::size_t>(i)]) {
        if (wrong++ == 0) {
          char buf[160];
          std::snprintf(buf, sizeof buf, "bucket %d: got %llu want %llu (left edge %.17g)", i,
                        static_cast<unsigned long long>(
                            r.linear_histogram->counts[static_cast<std::size_t>(i)]),
                        static_cast<unsigned long long>(want[static_cast<std::size_t>(i)]),
                        i == 0 ? g.lo : limits[static_cast<std::size_t>(i - 1)]);
          first = buf;
        }
      }
    }
    EXPECT_EQ(wrong, 0) << where << ": " << wrong << " buckets differ, first " << first;
  }
}

TEST_P(BackendConformanceTest, LinearHistogramOfEmptyAndNonFiniteTensors) {
  StatsOptions o;
  o.linear_histogram.bins = 5;
  HostTensor empty(DType::kFloat32, 0);
  ReductionResult r = ReduceOne(empty, o);
  ASSERT_TRUE(r.linear_histogram.has_value());
  EXPECT_EQ(r.linear_histogram->lo, -0.5);
  EXPECT_EQ(r.linear_histogram->hi, 0.5);
  EXPECT_EQ(r.linear_histogram->counts, std::vector<std::uint64_t>(5, 0));
  o.linear_histogram.fixed_range = true;
  o.linear_histogram.lo = -4;
  o.linear_histogram.hi = 6;
  HostTensor nans = MakeTensor(DType::kFloat16, {kNaN, kInf, -kInf, kNaN});
  r = ReduceOne(nans, o);
  ASSERT_TRUE(r.linear_histogram.has_value());
  EXPECT_EQ(r.linear_histogram->lo, -4.0);
  EXPECT_EQ(r.linear_histogram->hi, 6.0);
  EXPECT_EQ(r.linear_histogram->counts, std::vector<std::uint64_t>(5, 0));
  EXPECT_EQ(r.linear_histogram->below + r.linear_histogram->above, 0u);
}

}  // namespace
}  // namespace tstat::testing
