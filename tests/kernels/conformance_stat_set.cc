// Backend conformance suite (TEST_Ps only; see backend_conformance.h): the stat set against the reference for every dtype and size, special
// values (NaN, Inf, subnormals, signed zeros, narrow-float extremes) and the
// band/small thresholds at representable boundaries.
//
// Expected values come from the long-double reference (tests/support) and,
// for the edge cases, from values computed by hand and written down here.
#include "tests/kernels/conformance_values.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BackendConformanceTest);

namespace tstat::testing {
namespace {

// ---------------------------------------------------------------------------
// The stat set, exponent histogram and a sample, for every dtype and size.
TEST_P(BackendConformanceTest, StatSetMatchesReferenceForEveryDTypeAndSize) {
  const std::vector<std::int64_t> sizes = ConformanceSizes();
  for (DType t : AllDTypes()) {
    std::vector<HostTensor> tensors;
    std::vector<ReductionRequest> requests;
    std::vector<StatsOptions> options;
    for (std::int64_t n : sizes) {
      tensors.push_back(GenerateDefaultTensor(t, n, SeedFor(t, n)));
      StatsOptions o;
      o.sample_count = 64;
      o.sample_seed = static_cast<std::uint64_t>(n) * 31 + 7;
      options.push_back(o);
    }
    for (std::size_t i = 0; i < tensors.size(); ++i) requests.push_back(Request(tensors[i], options[i]));
    const std::vector<ReductionResult> results = Reduce(requests);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      EXPECT_TRUE(ResultMatches(results[i], Expected(tensors[i], options[i]), ToleranceFor(t)))
          << Where(t, sizes[i]);
    }
  }
}

TEST_P(BackendConformanceTest, ExtremesAtFirstAndLastElement) {
  for (DType t : AllDTypes()) {
    for (std::int64_t n : {2, 33, 1025, 16384, 16385, 100003}) {
      std::vector<double> v = GenerateValues(t, n, Distribution::Uniform(-1.0, 1.0), {}, SeedFor(t, n));
      // float64: 1e150, so that squared deviations stay finite in double.
      const double hi = t == DType::kFloat64 ? 1e150 : IsFloatingDType(t) ? MaxFinite(t) : 200.0;
      const double lo = t == DType::kUInt8 ? 0.0 : -hi;
      v.front() = hi;
      v.back() = lo;
      HostTensor a = MakeTensor(t, v);
      ReductionResult r = ReduceOne(a);
      EXPECT_EQ(r.stats.max, hi) << Where(t, n);
      EXPECT_EQ(r.stats.min, lo) << Where(t, n);
      EXPECT_EQ(r.stats.count, static_cast<std::uint64_t>(n)) << Where(t, n);
      std::swap(v.front(), v.back());
      HostTensor b = MakeTensor(t, v);
      r = ReduceOne(b);
      EXPECT_EQ(r.stats.max, hi) << Where(t, n, "swapped");
      EXPECT_EQ(r.stats.min, lo) << Where(t, n, "swapped");
      EXPECT_TRUE(ResultMatches(r, Expected(b), ToleranceFor(t))) << Where(t, n);
    }
  }
}

// Squared deviations of values near the top of a dtype's range are finite in
// double (the contract accumulates in double), so m2 and l2 must be too.
TEST_P(BackendConformanceTest, LargeMagnitudesDoNotOverflowTheMoments) {
  for (DType t : FloatDTypes()) {
    const double big = t == DType::kFloat64 ? 1e150 : RoundToDType(MaxFinite(t) / 3, t);
    for (std::int64_t n : {15, 16, 64, 5000}) {
      std::vector<double> v(static_cast<std::size_t>(n));
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = (i % 3 == 0) ? big : (i % 3 == 1 ? -big : 1.0);
      HostTensor h = MakeTensor(t, v);
      const ReductionResult r = ReduceOne(h);
      EXPECT_TRUE(std::isfinite(r.stats.m2) && std::isfinite(r.stats.l2) && std::isfinite(r.stats.sum))
          << Where(t, n) << ": " << DescribeStats(r.stats);
      EXPECT_TRUE(ResultMatches(r, Expected(h), ToleranceFor(t))) << Where(t, n);
    }
  }
}

// Element-aligned and misaligned pointers: byte offsets 0..15 from 64-byte
// aligned storage, for every dtype.
TEST_P(BackendConformanceTest, ByteOffsetsFromAlignedStorageMatchReference) {
  StatsOptions o;
  o.linear_histogram.bins = 13;
  o.sample_count = 9;
  for (DType t : AllDTypes()) {
    for (std::int64_t n : {37, 1025, 16400}) {
      const HostTensor base = GenerateDefaultTensor(t, n, SeedFor(t, n) + 1);
      std::vector<HostTensor> tensors;
      std::vector<ReductionRequest> requests;
      for (std::size_t offset = 0; offset < 16; ++offset) tensors.push_back(WithOffset(base, offset));
      for (const HostTensor& h : tensors) {
        requests.push_back(Request(h, o));
        // A device placement must keep the alignment phase, or this test
        // checks nothing about misaligned device pointers.
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(requests.back().tensor.data) % 16,
                  h.byte_offset() % 16)
            << "place() changed the alignment phase";
      }
      const std::vector<ReductionResult> results = Reduce(requests);
      const ReductionResult want = Expected(base, o);
      for (std::size_t i = 0; i < results.size(); ++i) {
        EXPECT_TRUE(ResultMatches(results[i], want, ToleranceFor(t)))
            << Where(t, n, "offset=" + std::to_string(i));
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Special values.
TEST_P(BackendConformanceTest, AllNaNGivesNaNExtremesAndZeroSums) {
  const std::vector<std::pair<DType, std::vector<std::uint64_t>>> nan_patterns = {
      {DType::kFloat32, {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0x7FFFFFFFu}},
      {DType::kFloat64, {0x7FF8000000000000ull, 0xFFF0000000000001ull, 0x7FFFFFFFFFFFFFFFull}},
      {DType::kFloat16, {0x7E00u, 0xFE00u, 0x7C01u, 0xFFFFu}},
      {DType::kBFloat16, {0x7FC0u, 0xFF81u, 0x7F81u}},
      {DType::kFloat8E4M3, {0x7Fu, 0xFFu}},
      {DType::kFloat8E5M2, {0x7Du, 0x7Eu, 0x7Fu, 0xFDu, 0xFEu, 0xFFu}},
  };
  StatsOptions o;
  o.linear_histogram.bins = 8;
  o.sample_count = 3;
  for (const auto& [t, patterns] : nan_patterns) {
    for (std::int64_t n : {1, 33, 1025, 16385}) {
      std::vector<std::uint64_t> bits(static_cast<std::size_t>(n));
      for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = patterns[i % patterns.size()];
      HostTensor h = MakeBitsTensor(t, bits);
      const ReductionResult r = ReduceOne(h, o);
      const std::string where = Where(t, n);
      ASSERT_TRUE(r.status.ok()) << where << r.status.ToString();
      const TensorStats& s = r.stats;
      EXPECT_EQ(s.count, static_cast<std::uint64_t>(n)) << where;
      EXPECT_EQ(s.nan_count, static_cast<std::uint64_t>(n)) << where;
      EXPECT_EQ(s.finite_count + s.pos_inf_count + s.neg_inf_count + s.zero_count + s.neg_count +
                    s.subnormal_count + s.band_lo_count + s.band_hi_count + s.small_count,
                0u)
          << where;
      EXPECT_TRUE(std::isnan(s.min) && std::isnan(s.max) && std::isnan(s.mean)) << where;
      EXPECT_TRUE(std::isnan(s.variance())) << where;
      EXPECT_EQ(s.sum, 0.0) << where;
      EXPECT_EQ(s.l1, 0.0) << where;
      EXPECT_EQ(s.l2, 0.0) << where;
      EXPECT_EQ(s.amax, 0.0) << where;
      ASSERT_TRUE(r.exponent_histogram.has_value()) << where;
      EXPECT_EQ(r.exponent_histogram->total(), 0u) << where;
      ASSERT_TRUE(r.linear_histogram.has_value()) << where;
      EXPECT_EQ(r.linear_histogram->lo, -0.5) << where;
      EXPECT_EQ(r.linear_histogram->hi, 0.5) << where;
      EXPECT_EQ(r.linear_histogram->counts, std::vector<std::uint64_t>(8, 0)) << where;
      EXPECT_EQ(r.linear_histogram->below + r.linear_histogram->above, 0u) << where;
      ASSERT_TRUE(r.sample.has_value()) << where;
      for (double v : r.sample->values) EXPECT_TRUE(std::isnan(v)) << where;
      EXPECT_TRUE(ResultMatches(r, Expected(h, o), ToleranceFor(t))) << where;
    }
  }
}

TEST_P(BackendConformanceTest, InfinitiesAreCountedButNotAccumulated) {
  StatsOptions o;
  o.linear_histogram.bins = 3;
  for (DType t : FloatDTypes()) {
    if (t == DType::kFloat8E4M3) continue;  // no infinity (see Fp8NaNAndMax)
    HostTensor h = MakeTensor(t, {kInf, -kInf, 1.0, -2.0, kInf});
    const ReductionResult r = ReduceOne(h, o);
    const TensorStats& s = r.stats;
    const std::string where = DTypeLabel(t);
    EXPECT_EQ(s.count, 5u) << where;
    EXPECT_EQ(s.pos_inf_count, 2u) << where;
    EXPECT_EQ(s.neg_inf_count, 1u) << where;
    EXPECT_EQ(s.finite_count, 2u) << where;
    EXPECT_EQ(s.nan_count, 0u) << where;
    EXPECT_EQ(s.neg_count, 2u) << where;      // -Inf, -2
    EXPECT_EQ(s.band_lo_count, 2u) << where;  // -Inf, -2
    EXPECT_EQ(s.band_hi_count, 3u) << where;  // +Inf twice, 1
    EXPECT_EQ(s.small_count, 0u) << where;
    EXPECT_EQ(s.min, -2.0) << where;
    EXPECT_EQ(s.max, 1.0) << where;
    EXPECT_EQ(s.amax, 2.0) << where;
    EXPECT_CLOSE(s.sum, -1.0, 3.0) << where;
    EXPECT_CLOSE(s.mean, -0.5, 3.0) << where;
    EXPECT_CLOSE(s.m2, 4.5, 9.0) << where;
    EXPECT_CLOSE(s.variance(), 2.25, 9.0) << where;
    EXPECT_CLOSE(s.l1, 3.0, 3.0) << where;
    EXPECT_NEAR(s.l2, std::sqrt(5.0), 1e-15) << where;
    EXPECT_EQ(r.exponent_histogram->total(), 2u) << where;
    EXPECT_EQ(r.exponent_histogram->counts[150], 1u) << where;  // 1
    EXPECT_EQ(r.exponent_histogram->counts[151], 1u) << where;  // 2
    ASSERT_TRUE(r.linear_histogram.has_value());
    EXPECT_EQ(r.linear_histogram->lo, -2.0) << where;
    EXPECT_EQ(r.linear_histogram->hi, 1.0) << where;
    EXPECT_EQ(r.linear_histogram->counts, (std::vector<std::uint64_t>{1, 0, 1})) << where;
    EXPECT_EQ(r.linear_histogram->below + r.linear_histogram->above, 0u) << where;

    HostTensor only_inf = MakeTensor(t, {kInf, -kInf, kInf});
    const ReductionResult q = ReduceOne(only_inf, o);
    EXPECT_EQ(q.stats.finite_count, 0u) << where;
    EXPECT_TRUE(std::isnan(q.stats.min) && std::isnan(q.stats.max) && std::isnan(q.stats.mean))
        << where;
    EXPECT_EQ(q.stats.sum, 0.0) << where;
    EXPECT_EQ(q.stats.l2, 0.0) << where;
    EXPECT_EQ(q.stats.amax, 0.0) << where;
    EXPECT_EQ(q.linear_histogram->lo, -0.5) << where;
    EXPECT_EQ(q.linear_histogram->hi, 0.5) << where;
    EXPECT_EQ(q.linear_histogram->counts, (std::vector<std::uint64_t>{0, 0, 0})) << where;
    EXPECT_TRUE(ResultMatches(q, Expected(only_inf, o), ToleranceFor(t))) << where;
  }
}

TEST_P(BackendConformanceTest, SubnormalsAreCountedPerDType) {
  // floor(log2) of the smallest subnormal / largest subnormal / min normal.
  struct Case {
    DType t;
    int min_sub_exp, max_sub_exp, min_normal_exp;
  };
  const Case cases[] = {
      {DType::kFloat32, -149, -127, -126},   {DType::kFloat64, -1074, -1023, -1022},
      {DType::kFloat16, -24, -15, -14},      {DType::kBFloat16, -133, -127, -126},
      {DType::kFloat8E4M3, -9, -7, -6},      {DType::kFloat8E5M2, -16, -15, -14},
  };
  for (const Case& c : cases) {
    const double min_sub = std::ldexp(1.0, c.min_sub_exp);
    const double min_normal = std::ldexp(1.0, c.min_normal_exp);
    const double max_sub = min_normal - min_sub;
    HostTensor h = MakeTensor(c.t, {min_sub, -min_sub, max_sub, min_normal, -min_normal, 1.0, 0.0});
    ASSERT_EQ(h.Value(0), min_sub);
    ASSERT_EQ(h.Value(2), max_sub);
    const ReductionResult r = ReduceOne(h);
    const std::string where = DTypeLabel(c.t);
    EXPECT_EQ(r.stats.subnormal_count, 3u) << where;
    EXPECT_EQ(r.stats.zero_count, 1u) << where;
    EXPECT_EQ(r.stats.finite_count, 7u) << where;
    EXPECT_EQ(r.stats.min, -min_normal) << where;
    EXPECT_EQ(r.stats.max, 1.0) << where;
    EXPECT_EQ(r.stats.neg_count, 2u) << where;
    const auto bin = [](int e) { return ExponentHistogram::BinOf(e); };
    std::array<std::uint64_t, kExpHistBins> want{};
    want[static_cast<std::size_t>(bin(c.min_sub_exp))] += 2;
    want[static_cast<std::size_t>(bin(c.max_sub_exp))] += 1;
    want[static_cast<std::size_t>(bin(c.min_normal_exp))] += 2;
    want[static_cast<std::size_t>(bin(0))] += 1;
    ASSERT_TRUE(r.exponent_histogram.has_value());
    EXPECT_EQ(r.exponent_histogram->counts, want) << where;
    EXPECT_TRUE(ResultMatches(r, Expected(h), ToleranceFor(c.t))) << where;

    // Many subnormals mixed with everything else.
    ValueMix mix = ValueMix::Specials();
    mix.subnormal = 0.3;
    HostTensor big = GenerateTensor(c.t, 20011, Distribution::Normal(0.0, 0.01), mix,
                                    SeedFor(c.t, 20011));
    EXPECT_TRUE(MatchesReference(big)) << where;
  }
}

TEST_P(BackendConformanceTest, SignedZerosCountAsZeroNotNegative) {
  for (DType t : AllDTypes()) {
    const bool is_float = IsFloatingDType(t);
    std::vector<double> v = {0.0, -0.0, -0.0, 1.0, 0.0};
    if (t != DType::kUInt8) v.push_back(-1.0);
    HostTensor h = MakeTensor(t, v);
    if (is_float) {
      ASSERT_TRUE(std::signbit(h.Value(1)));
    }
    const ReductionResult r = ReduceOne(h);
    const std::string where = DTypeLabel(t);
    const bool has_neg = t != DType::kUInt8;
    EXPECT_EQ(r.stats.zero_count, 4u) << where;
    EXPECT_EQ(r.stats.neg_count, has_neg ? 1u : 0u) << where;
    EXPECT_EQ(r.stats.small_count, 4u) << where;
    EXPECT_EQ(r.stats.band_lo_count, has_neg ? 1u : 0u) << where;
    EXPECT_EQ(r.stats.band_hi_count, 1u) << where;
    EXPECT_EQ(r.stats.min, has_neg ? -1.0 : 0.0) << where;
    EXPECT_EQ(r.stats.max, 1.0) << where;
    EXPECT_CLOSE(r.stats.sum, has_neg ? 0.0 : 1.0, 2.0) << where;
    EXPECT_EQ(r.exponent_histogram->total(), has_neg ? 2u : 1u) << where;
    EXPECT_TRUE(ResultMatches(r, Expected(h), ToleranceFor(t))) << where;

    // All zeros: min = max = 0, automatic linear range [-0.5, 0.5].
    StatsOptions o;
    o.linear_histogram.bins = 2;
    std::vector<double> zeros(1000, 0.0);
    if (is_float) {
      for (std::size_t i = 0; i < zeros.size(); i += 3) zeros[i] = -0.0;
    }
    HostTensor z = MakeTensor(t, zeros);
    const ReductionResult rz = ReduceOne(z, o);
    EXPECT_EQ(rz.stats.zero_count, 1000u) << where;
    EXPECT_EQ(rz.stats.neg_count, 0u) << where;
    EXPECT_EQ(rz.stats.min, 0.0) << where;
    EXPECT_EQ(rz.stats.max, 0.0) << where;
    EXPECT_EQ(rz.stats.m2, 0.0) << where;
    EXPECT_EQ(rz.stats.l2, 0.0) << where;
    EXPECT_EQ(rz.exponent_histogram->total(), 0u) << where;
    EXPECT_EQ(rz.linear_histogram->lo, -0.5) << where;
    EXPECT_EQ(rz.linear_histogram->hi, 0.5) << where;
    EXPECT_EQ(rz.linear_histogram->counts, (std::vector<std::uint64_t>{0, 1000})) << where;
  }
}

TEST_P(BackendConformanceTest, BFloat16MaxAndMinSubnormal) {
  const double max = 3.3895313892515355e38;  // 0x7F7F = (2 - 2^-7) * 2^127
  HostTensor h = MakeBitsTensor(DType::kBFloat16, {0x7F7F, 0xFF7F, 0x0001, 0x8001, 0x7F80, 0x3F80});
  const ReductionResult r = ReduceOne(h);
  EXPECT_EQ(r.stats.max, max);
  EXPECT_EQ(r.stats.min, -max);
  EXPECT_EQ(r.stats.amax, max);
  EXPECT_EQ(r.stats.pos_inf_count, 1u);
  EXPECT_EQ(r.stats.finite_count, 5u);
  EXPECT_EQ(r.stats.subnormal_count, 2u);
  EXPECT_EQ(r.stats.neg_count, 2u);
  EXPECT_EQ(r.stats.band_hi_count, 3u);  // max, +Inf, 1
  EXPECT_NEAR(r.stats.l2, std::sqrt(2.0) * max, 1e-12 * max);
  EXPECT_NEAR(r.stats.l1, 2 * max, 1e-12 * max);
  EXPECT_TRUE(std::isfinite(r.stats.m2));
  EXPECT_NEAR(r.stats.m2, 2 * max * max, 1e-9 * max * max);
  EXPECT_EQ(r.exponent_histogram->counts[277], 2u);  // 2^127
  EXPECT_EQ(r.exponent_histogram->counts[17], 2u);   // 2^-133
  EXPECT_EQ(r.exponent_histogram->counts[150], 1u);  // 1
  EXPECT_TRUE(ResultMatches(r, Expected(h), ToleranceFor(DType::kBFloat16)));
}

TEST_P(BackendConformanceTest, Fp8NaNAndMax) {
  {
    // e4m3: 448, -448, NaN, -NaN, 256 (S.1111.000 is finite), 2^-9, 0, -0.
    HostTensor h = MakeBitsTensor(DType::kFloat8E4M3, {0x7E, 0xFE, 0x7F, 0xFF, 0x78, 0x01, 0x00, 0x80});
    const ReductionResult r = ReduceOne(h);
    EXPECT_EQ(r.stats.nan_count, 2u);
    EXPECT_EQ(r.stats.pos_inf_count + r.stats.neg_inf_count, 0u);
    EXPECT_EQ(r.stats.finite_count, 6u);
    EXPECT_EQ(r.stats.max, 448.0);
    EXPECT_EQ(r.stats.min, -448.0);
    EXPECT_EQ(r.stats.amax, 448.0);
    EXPECT_EQ(r.stats.subnormal_count, 1u);
    EXPECT_EQ(r.stats.zero_count, 2u);
    EXPECT_EQ(r.stats.neg_count, 1u);
    EXPECT_EQ(r.stats.band_lo_count, 1u);
    EXPECT_EQ(r.stats.band_hi_count, 2u);
    EXPECT_CLOSE(r.stats.sum, 256.0 + std::ldexp(1.0, -9), 1152.0);
    EXPECT_EQ(r.exponent_histogram->counts[158], 3u);  // 448, -448, 256: 2^8
    EXPECT_EQ(r.exponent_histogram->counts[141], 1u);  // 2^-9
    EXPECT_TRUE(ResultMatches(r, Expected(h), ToleranceFor(DType::kFloat8E4M3)));
  }
  {
    // e5m2: 57344, -57344, +Inf, -Inf, four NaNs, 2^-16, -0.
    HostTensor h = MakeBitsTensor(DType::kFloat8E5M2,
                                  {0x7B, 0xFB, 0x7C, 0xFC, 0x7D, 0x7E, 0x7F, 0xFF, 0x01, 0x80});
    const ReductionResult r = ReduceOne(h);
    EXPECT_EQ(r.stats.nan_count, 4u);
    EXPECT_EQ(r.stats.pos_inf_count, 1u);
    EXPECT_EQ(r.stats.neg_inf_count, 1u);
    EXPECT_EQ(r.stats.finite_count, 4u);
    EXPECT_EQ(r.stats.max, 57344.0);
    EXPECT_EQ(r.stats.min, -57344.0);
    EXPECT_EQ(r.stats.subnormal_count, 1u);
    EXPECT_EQ(r.stats.zero_count, 1u);
    EXPECT_EQ(r.stats.neg_count, 2u);
    EXPECT_EQ(r.exponent_histogram->counts[165], 2u);  // 2^15
    EXPECT_EQ(r.exponent_histogram->counts[134], 1u);  // 2^-16
    EXPECT_TRUE(ResultMatches(r, Expected(h), ToleranceFor(DType::kFloat8E5M2)));
  }
}

// ---------------------------------------------------------------------------
// Thresholds: x <= band_lo and x >= band_hi and |x| < small_eps are decided on
// the exact value, whatever the compute type of the dtype.
TEST_P(BackendConformanceTest, ThresholdsAtRepresentableBoundaries) {
  for (DType t : AllDTypes()) {
    // Representable in every floating dtype: x == band_lo / band_hi count,
    // |x| == small_eps does not.
    const double b = IsFloatingDType(t) ? 0.75 : 5.0;
    const double e = IsFloatingDType(t) ? 0.125 : 2.0;
    std::vector<double> v;
    const bool signed_type = t != DType::kUInt8;
    for (double x : NeighboursInDType(t, b)) {
      v.push_back(x);
      if (signed_type) v.push_back(-x);
    }
    std::vector<double> small = NeighboursInDType(t, e);
    for (double x : small) {
      v.push_back(x);
      if (signed_type) v.push_back(-x);
    }
    StatsOptions o;
    o.band_lo = -b;
    o.band_hi = b;
    o.small_eps = e;
    HostTensor h = MakeTensor(t, v);
    const ReductionResult r = ReduceOne(h, o);
    const std::string where = DTypeLabel(t);
    EXPECT_EQ(r.stats.band_lo_count, signed_type ? 2u : 0u) << where;  // -b and the value below it
    EXPECT_EQ(r.stats.band_hi_count, 2u) << where;  // b and the value above it
    EXPECT_EQ(r.stats.small_count, signed_type ? 2u : 1u) << where;   // the neighbour below +-e
    EXPECT_TRUE(ResultMatches(r, Expected(h, o), ToleranceFor(t))) << where;
  }
}

TEST_P(BackendConformanceTest, ThresholdsNotRepresentableInTheDTypeRoundCorrectly) {
  // Neither value nor its negative is representable in any narrow dtype; 0.7
  // rounds down in float (a naive float threshold would count -0.69999999),
  // 0.97 rounds up.
  const double thresholds[] = {0.97, 0.7, 0.1, 1e-7, 3.3e-5, 2.5};
  for (DType t : AllDTypes()) {
    for (double th : thresholds) {
      if (!IsFloatingDType(t) && th != 2.5) continue;
      if (RoundToDType(th, t) == th) continue;  // representable: covered above
      if (th < MinSubnormal(t)) continue;
      std::vector<double> v;
      const bool signed_type = t != DType::kUInt8;
      for (double x : NeighboursInDType(t, th)) {
        v.push_back(x);
        if (signed_type) v.push_back(-x);
      }
      ASSERT_EQ(v.size(), signed_type ? 4u : 2u);
      StatsOptions o;
      o.band_lo = -th;
      o.band_hi = th;
      o.small_eps = th;
      HostTensor h = MakeTensor(t, v);
      const ReductionResult r = ReduceOne(h, o);
      const std::string where = DTypeLabel(t) + " threshold " + std::to_string(th);
      EXPECT_EQ(r.stats.band_lo_count, signed_type ? 1u : 0u) << where;
      EXPECT_EQ(r.stats.band_hi_count, 1u) << where;
      EXPECT_EQ(r.stats.small_count, signed_type ? 2u : 1u) << where;
      EXPECT_TRUE(ResultMatches(r, Expected(h, o), ToleranceFor(t))) << where;
    }
  }
  // The defaults (-0.97, 0.97, 1e-7) on f16, by hand: 0xBBC3 = -0.97021484375
  // counts, 0xBBC2 = -0.9697265625 does not; 2^-24 < 1e-7 < 2^-23.
  HostTensor h = MakeBitsTensor(DType::kFloat16,
                                {0xBBC3, 0xBBC2, 0x3BC3, 0x3BC2, 0x0001, 0x8001, 0x0002, 0x0000});
  const ReductionResult r = ReduceOne(h);
  EXPECT_EQ(r.stats.band_lo_count, 1u);
  EXPECT_EQ(r.stats.band_hi_count, 1u);
  EXPECT_EQ(r.stats.small_count, 3u);  // +-2^-24 and 0
}

TEST_P(BackendConformanceTest, ExtremeThresholds) {
  for (DType t : AllDTypes()) {
    const double m = MaxFinite(t);
    std::vector<double> v = {1.0, 0.0};
    const bool is_float = IsFloatingDType(t);
    if (is_float) v.insert(v.end(), {m, -m, kInf, -kInf, MinSubnormal(t), kNaN});
    HostTensor h = MakeTensor(t, v);
    // e4m3 has no infinity: its +-Inf entries are stored as NaN.
    std::uint64_t nan = 0, pos_inf = 0, neg_inf = 0;
    for (std::int64_t i = 0; i < h.numel(); ++i) {
      const double x = h.Value(i);
      nan += std::isnan(x);
      pos_inf += x == kInf;
      neg_inf += x == -kInf;
    }
    const std::uint64_t non_nan = static_cast<std::uint64_t>(h.numel()) - nan;
    const std::uint64_t finite = non_nan - pos_inf - neg_inf;
    const std::string where = DTypeLabel(t);
    struct Case {
      const char* name;
      double lo, hi, eps;
      std::uint64_t want_lo, want_hi, want_small;
    };
    const Case cases[] = {
        // Beyond every finite value: only the infinities count; no |x| < 1e-300
        // except zero (all subnormals of these dtypes are larger).
        {"beyond finite", -1e300, 1e300, 1e-300, neg_inf, pos_inf, 1u},
        // Infinite thresholds: x <= +Inf and x >= -Inf for all but NaN; |x| < Inf for finite.
        {"infinite, inverted", kInf, -kInf, kInf, non_nan, non_nan, finite},
        {"infinite", -kInf, kInf, 0.0, neg_inf, pos_inf, 0u},
    };
    for (const Case& c : cases) {
      if (t == DType::kFloat64 && c.eps == 1e-300) continue;  // f64 subnormals are < 1e-300
      StatsOptions o;
      o.band_lo = c.lo;
      o.band_hi = c.hi;
      o.small_eps = c.eps;
      const ReductionResult r = ReduceOne(h, o);
      const std::string w = where + " " + c.name;
      EXPECT_EQ(r.stats.band_lo_count, c.want_lo) << w;
      EXPECT_EQ(r.stats.band_hi_count, c.want_hi) << w;
      EXPECT_EQ(r.stats.small_count, c.want_small) << w;
      EXPECT_TRUE(ResultMatches(r, Expected(h, o), ToleranceFor(t))) << w;
    }
  }
}

}  // namespace
}  // namespace tstat::testing
