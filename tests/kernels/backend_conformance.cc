// The backend conformance suite: TEST_Ps only. Each backend's test target
// compiles this file and instantiates BackendConformanceTest (see
// backend_conformance.h).
//
// Expected values come from the long-double reference (tests/support) and,
// for the edge cases, from values computed by hand and written down here.
#include "tests/kernels/backend_conformance.h"

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

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The sizes every dtype is checked at: around warp (32), vector and chunk
// (16384) boundaries, a prime past 1e5, and one pseudo-random size up to 3e6
// (3e5 in quick mode), drawn from a fixed seed so a failure reproduces. 4097
// and 65537 sit just past the CPU backend's tile (4096) and parallel-pass
// (65536) thresholds.
std::vector<std::int64_t> ConformanceSizes() {
  std::vector<std::int64_t> sizes = {0,     1,     31,    32,    33,    1023,  1024, 1025,
                                     4097,  16383, 16384, 16385, 65537, 100003};
  std::mt19937_64 rng(0x7e57a11u);
  const std::uint64_t cap = QuickMode() ? 300000 : 3000000;
  sizes.push_back(static_cast<std::int64_t>(1 + rng() % cap));
  return sizes;
}

std::uint64_t SeedFor(DType t, std::int64_t n) {
  return (static_cast<std::uint64_t>(t) + 1) * 0x9e3779b97f4a7c15ull ^ static_cast<std::uint64_t>(n);
}

// The representable neighbour of x in dtype t (x representable), dir = +1/-1.
double StepInDType(DType t, double x, int dir) {
  switch (t) {
    case DType::kFloat64: return std::nextafter(x, dir * kInf);
    case DType::kFloat32:
      return static_cast<double>(std::nextafter(static_cast<float>(x), static_cast<float>(dir * kInf)));
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat8E4M3:
    case DType::kFloat8E5M2: {
      // Sign-magnitude patterns: away from zero is +1 on the magnitude.
      const bool away = (x > 0) == (dir > 0);
      if (t == DType::kFloat16) {
        const std::uint16_t b = EncodeF16(x);
        return DecodeF16(static_cast<std::uint16_t>(away ? b + 1 : b - 1));
      }
      if (t == DType::kBFloat16) {
        const std::uint16_t b = EncodeBF16(x);
        return DecodeBF16(static_cast<std::uint16_t>(away ? b + 1 : b - 1));
      }
      if (t == DType::kFloat8E4M3) {
        const std::uint8_t b = EncodeF8E4M3(x);
        return DecodeF8E4M3(static_cast<std::uint8_t>(away ? b + 1 : b - 1));
      }
      const std::uint8_t b = EncodeF8E5M2(x);
      return DecodeF8E5M2(static_cast<std::uint8_t>(away ? b + 1 : b - 1));
    }
    default:
      return x + dir;  // integers
  }
}

// The values of dtype t closest to x on both sides (and x itself when it is
// representable). x must be non-zero and inside the finite range.
std::vector<double> NeighboursInDType(DType t, double x) {
  const double r = RoundToDType(x, t);
  if (r == x) return {StepInDType(t, x, -1), x, StepInDType(t, x, +1)};
  if (r < x) return {r, StepInDType(t, r, +1)};
  return {StepInDType(t, r, -1), r};
}

std::vector<double> Iota(std::int64_t n, double start = 0.0) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = start + static_cast<double>(i);
  return v;
}

// Hand-computed floating stats: a backend may round differently from the
// obvious formula (merge order, shifted sums), so allow 1e-12 of `scale`
// (the magnitudes involved, e.g. sum |x|).
#define EXPECT_CLOSE(got, want, scale) EXPECT_NEAR((got), (want), 1e-12 * (scale))

std::string Where(DType t, std::int64_t n, const std::string& extra = "") {
  return DTypeLabel(t) + " n=" + std::to_string(n) + (extra.empty() ? "" : " " + extra);
}

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

// ---------------------------------------------------------------------------
// Exponent histogram.
TEST_P(BackendConformanceTest, ExponentHistogramHandComputedBins) {
  HostTensor f = MakeTensor(DType::kFloat32, {1.0, 0.75, std::ldexp(1.0, -149),
                                              static_cast<double>(std::numeric_limits<float>::max()),
                                              -3.0, 0.0, kNaN, kInf});
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
  HostTensor d = MakeTensor(DType::kFloat64, {1e-300, 1e100, std::ldexp(1.0, -1074), std::ldexp(1.0, 128),
                                              std::ldexp(1.0, 127), std::ldexp(1.0, -150),
                                              -std::ldexp(1.0, -151), std::ldexp(1.0, -149)});
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
  const Case cases[] = {{1, 7, false},        {33, 1, false},     {1025, 64, false},
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
    EXPECT_EQ(r.linear_histogram->counts, (std::vector<std::uint64_t>{1, 2, 1, 3})) << DTypeLabel(t);
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
    EXPECT_EQ(r.linear_histogram->counts, (std::vector<std::uint64_t>{1, 2, 3, 3})) << DTypeLabel(t);
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
  const Range ranges[] = {{-1, 1, 4},    {0, 1, 10},       {-3, 7, 7},   {0.1, 0.7, 3},
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
      if (bucket < 0) ++below;
      else if (bucket >= g.bins) ++above;
      else ++want[static_cast<std::size_t>(bucket)];
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
      if (r.linear_histogram->counts[static_cast<std::size_t>(i)] != want[static_cast<std::size_t>(i)]) {
        if (wrong++ == 0) {
          char buf[160];
          std::snprintf(buf, sizeof buf, "bucket %d: got %llu want %llu (left edge %.17g)", i,
                        static_cast<unsigned long long>(r.linear_histogram->counts[static_cast<std::size_t>(i)]),
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

// ---------------------------------------------------------------------------
// Per-channel stats.
TEST_P(BackendConformanceTest, PerChannelMatchesReferenceForEveryAxis) {
  const std::vector<std::vector<std::int64_t>> shapes = {
      {8, 5}, {2, 3, 4, 5}, {1000, 1}, {1, 1000}, {3, 0, 4}, {0, 5}, {4, 1, 3, 1}, {7}, {64, 3, 1000}};
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kInt32, DType::kFloat64,
                  DType::kFloat8E5M2}) {
    for (const auto& shape : shapes) {
      std::int64_t n = 1;
      for (auto d : shape) n *= d;
      HostTensor h = GenerateDefaultTensor(t, n, SeedFor(t, n) + 3, shape);
      for (int axis = 0; axis < static_cast<int>(shape.size()); ++axis) {
        StatsOptions o;
        o.per_channel_axis = axis;
        if (axis == 0) {
          o.linear_histogram.bins = 16;
          o.sample_count = 5;
        }
        std::string dims;
        for (auto d : shape) dims += std::to_string(d) + ",";
        EXPECT_TRUE(MatchesReference(h, o)) << Where(t, n, "shape [" + dims + "] axis " + std::to_string(axis));
      }
    }
  }
  // Every dtype on a 4-D shape.
  for (DType t : AllDTypes()) {
    HostTensor h = GenerateDefaultTensor(t, 120, SeedFor(t, 120) + 4, {2, 3, 4, 5});
    for (int axis = 0; axis < 4; ++axis) {
      StatsOptions o;
      o.per_channel_axis = axis;
      EXPECT_TRUE(MatchesReference(h, o)) << Where(t, 120, "axis " + std::to_string(axis));
    }
  }
}

TEST_P(BackendConformanceTest, PerChannelHandComputedColumnsAndRows) {
  std::vector<double> v;
  for (int r = 0; r < 8; ++r) {
    for (int c = 0; c < 5; ++c) v.push_back(100.0 * c + r);  // element (r, c)
  }
  HostTensor h = MakeTensor(DType::kFloat32, v, {8, 5});
  StatsOptions o;
  o.per_channel_axis = 1;
  ReductionResult res = ReduceOne(h, o);
  ASSERT_TRUE(res.per_channel.has_value());
  EXPECT_EQ(res.per_channel->axis, 1);
  ASSERT_EQ(res.per_channel->channels.size(), 5u);
  for (int c = 0; c < 5; ++c) {
    const TensorStats& s = res.per_channel->channels[static_cast<std::size_t>(c)];
    EXPECT_EQ(s.count, 8u) << c;
    EXPECT_EQ(s.min, 100.0 * c) << c;
    EXPECT_EQ(s.max, 100.0 * c + 7) << c;
    EXPECT_CLOSE(s.sum, 800.0 * c + 28, 800.0 * c + 28) << c;
    EXPECT_CLOSE(s.mean, 100.0 * c + 3.5, 100.0 * c + 3.5) << c;
    EXPECT_CLOSE(s.m2, 42.0, 8 * (100.0 * c + 7) * (100.0 * c + 7)) << c;  // sum (r - 3.5)^2
  }
  EXPECT_EQ(res.stats.count, 40u);  // the whole tensor as usual
  EXPECT_EQ(res.stats.max, 407.0);
  o.per_channel_axis = 0;
  res = ReduceOne(h, o);
  ASSERT_TRUE(res.per_channel.has_value());
  ASSERT_EQ(res.per_channel->channels.size(), 8u);
  for (int r = 0; r < 8; ++r) {
    const TensorStats& s = res.per_channel->channels[static_cast<std::size_t>(r)];
    EXPECT_EQ(s.count, 5u) << r;
    EXPECT_EQ(s.min, r) << r;
    EXPECT_EQ(s.max, 400.0 + r) << r;
    EXPECT_CLOSE(s.sum, 1000.0 + 5 * r, 1000.0 + 5 * r) << r;
  }
}

TEST_P(BackendConformanceTest, PerChannelOfOneDimensionalTensorIsPerElement) {
  std::vector<double> v = Iota(33, -16.0);
  v[5] = kNaN;
  HostTensor h = MakeTensor(DType::kFloat32, v);  // empty shape: 1-D
  StatsOptions o;
  o.per_channel_axis = 0;
  const ReductionResult r = ReduceOne(h, o);
  ASSERT_TRUE(r.per_channel.has_value());
  ASSERT_EQ(r.per_channel->channels.size(), 33u);
  for (std::size_t i = 0; i < 33; ++i) {
    const TensorStats& s = r.per_channel->channels[i];
    EXPECT_EQ(s.count, 1u) << i;
    if (i == 5) {
      EXPECT_EQ(s.nan_count, 1u);
      EXPECT_TRUE(std::isnan(s.min));
    } else {
      EXPECT_EQ(s.min, v[i]) << i;
      EXPECT_EQ(s.max, v[i]) << i;
      EXPECT_EQ(s.m2, 0.0) << i;
    }
  }
  EXPECT_TRUE(ResultMatches(r, Expected(h, o), ToleranceFor(DType::kFloat32)));
}

TEST_P(BackendConformanceTest, PerChannelWithZeroSizedDimensions) {
  HostTensor a = MakeTensor(DType::kFloat32, {}, {3, 0, 4});
  StatsOptions o;
  o.per_channel_axis = 1;
  ReductionResult r = ReduceOne(a, o);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_TRUE(r.per_channel.has_value());
  EXPECT_TRUE(r.per_channel->channels.empty());
  o.per_channel_axis = 0;
  r = ReduceOne(a, o);
  ASSERT_TRUE(r.per_channel.has_value());
  ASSERT_EQ(r.per_channel->channels.size(), 3u);
  for (const TensorStats& s : r.per_channel->channels) {
    EXPECT_EQ(s.count, 0u);
    EXPECT_TRUE(std::isnan(s.min));
    EXPECT_EQ(s.sum, 0.0);
  }
  HostTensor b = MakeTensor(DType::kInt32, {}, {0, 5});
  o.per_channel_axis = 1;
  r = ReduceOne(b, o);
  ASSERT_TRUE(r.per_channel.has_value());
  EXPECT_EQ(r.per_channel->channels.size(), 5u);
  EXPECT_EQ(r.stats.count, 0u);
}

// ---------------------------------------------------------------------------
// Label counts.
TEST_P(BackendConformanceTest, LabelCountsHandComputed) {
  StatsOptions o;
  o.label_classes = 4;
  HostTensor i32 = MakeIntegerTensor(
      DType::kInt32, {-1, 0, 1, 2, 5, 3, 3, std::numeric_limits<std::int32_t>::min(),
                      std::numeric_limits<std::int32_t>::max()});
  ReductionResult r = ReduceOne(i32, o);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_TRUE(r.label_counts.has_value());
  EXPECT_EQ(r.label_counts->counts, (std::vector<std::uint64_t>{1, 1, 1, 2}));
  EXPECT_EQ(r.label_counts->out_of_range, 4u);
  // Label mode fills label counts, not the stat set or histograms.
  EXPECT_EQ(r.stats.count, 0u);
  EXPECT_FALSE(r.exponent_histogram.has_value());
  EXPECT_FALSE(r.linear_histogram.has_value());
  EXPECT_FALSE(r.per_channel.has_value());
  EXPECT_FALSE(r.sample.has_value());

  o.label_classes = 10;
  const std::int64_t big = std::int64_t{1} << 40;
  HostTensor i64 = MakeIntegerTensor(
      DType::kInt64, {0, big, -big, 3, 3, 9, -1, std::numeric_limits<std::int64_t>::min(),
                      std::numeric_limits<std::int64_t>::max(), (std::int64_t{1} << 32) + 1, 10});
  r = ReduceOne(i64, o);
  ASSERT_TRUE(r.label_counts.has_value());
  EXPECT_EQ(r.label_counts->counts, (std::vector<std::uint64_t>{1, 0, 0, 2, 0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(r.label_counts->out_of_range, 7u);  // 2^40, -2^40, -1, min, max, 2^32+1, 10

  HostTensor u8 = MakeIntegerTensor(DType::kUInt8, {0, 255, 1, 1, 10, 9, 128});
  r = ReduceOne(u8, o);
  ASSERT_TRUE(r.label_counts.has_value());
  EXPECT_EQ(r.label_counts->counts, (std::vector<std::uint64_t>{1, 2, 0, 0, 0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(r.label_counts->out_of_range, 3u);  // 255, 10, 128
  o.label_classes = 256;
  r = ReduceOne(u8, o);
  ASSERT_TRUE(r.label_counts.has_value());
  EXPECT_EQ(r.label_counts->counts[255], 1u);
  EXPECT_EQ(r.label_counts->counts[128], 1u);
  EXPECT_EQ(r.label_counts->out_of_range, 0u);
}

TEST_P(BackendConformanceTest, LabelCountsMatchReference) {
  for (DType t : IntegerDTypes()) {
    for (std::int64_t n : {0, 1, 1025, 16385, 100003}) {
      for (int classes : {1, 7, 1000}) {
        std::mt19937_64 rng(SeedFor(t, n) + static_cast<std::uint64_t>(classes));
        std::vector<std::int64_t> v(static_cast<std::size_t>(n));
        for (auto& x : v) {
          x = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(classes + 5));
          if (t != DType::kUInt8 && rng() % 10 == 0) x = -x - 1;
          if (t == DType::kUInt8) x &= 0xff;
        }
        HostTensor h = MakeIntegerTensor(t, v);
        StatsOptions o;
        o.label_classes = classes;
        o.sample_count = 10;
        o.sample_seed = 99;
        EXPECT_TRUE(MatchesReference(h, o)) << Where(t, n, "classes=" + std::to_string(classes));
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Element sample.
TEST_P(BackendConformanceTest, SamplePositionsAndValuesFollowTheFormula) {
  // Positions computed independently (Python integers) for seed 42, n 1000.
  HostTensor h = MakeTensor(DType::kFloat32, Iota(1000));
  StatsOptions o;
  o.sample_count = 5;
  o.sample_seed = 42;
  ReductionResult r = ReduceOne(h, o);
  ASSERT_TRUE(r.sample.has_value());
  EXPECT_EQ(r.sample->positions, (std::vector<std::int64_t>{303, 494, 115, 264, 555}));
  EXPECT_EQ(r.sample->values, (std::vector<double>{303, 494, 115, 264, 555}));

  for (DType t : AllDTypes()) {
    HostTensor g = GenerateDefaultTensor(t, 100003, SeedFor(t, 5));
    o.sample_count = 1000;
    o.sample_seed = 0xfeedfacecafebeefull;
    EXPECT_TRUE(MatchesReference(g, o)) << DTypeLabel(t);
  }
}

TEST_P(BackendConformanceTest, SampleIsDeterministicAndDependsOnTheSeed) {
  HostTensor h = GenerateDefaultTensor(DType::kFloat16, 50000, 8);
  StatsOptions o;
  o.sample_count = 200;
  o.sample_seed = 1;
  const ReductionResult a = ReduceOne(h, o);
  const ReductionResult b = ReduceOne(h, o);
  ASSERT_TRUE(a.sample.has_value() && b.sample.has_value());
  EXPECT_TRUE(ResultsBitwiseEqual(a, b));
  o.sample_seed = 2;
  const ReductionResult c = ReduceOne(h, o);
  ASSERT_TRUE(c.sample.has_value());
  EXPECT_NE(a.sample->positions, c.sample->positions);
  EXPECT_EQ(c.sample->positions, ReferenceSamplePositions(2, 50000, 200));
}

TEST_P(BackendConformanceTest, SampleTakesEveryElementInOrderWhenKAtLeastN) {
  std::vector<double> v = Iota(10, 1.0);
  v[4] = kNaN;
  HostTensor h = MakeTensor(DType::kBFloat16, v);
  for (std::int64_t k : {10, 11, 1000}) {
    StatsOptions o;
    o.sample_count = k;
    o.sample_seed = 77;
    const ReductionResult r = ReduceOne(h, o);
    ASSERT_TRUE(r.sample.has_value()) << k;
    EXPECT_EQ(r.sample->positions, (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})) << k;
    ASSERT_EQ(r.sample->values.size(), 10u) << k;
    for (std::size_t i = 0; i < 10; ++i) EXPECT_TRUE(SameValue(r.sample->values[i], v[i])) << k << " " << i;
  }
  HostTensor empty(DType::kFloat32, 0);
  StatsOptions o;
  o.sample_count = 5;
  const ReductionResult r = ReduceOne(empty, o);
  ASSERT_TRUE(r.sample.has_value());
  EXPECT_TRUE(r.sample->positions.empty());
  EXPECT_TRUE(r.sample->values.empty());
}

// ---------------------------------------------------------------------------
// Integer tensors through the stat set.
TEST_P(BackendConformanceTest, IntegerTensorsThroughTheStatSet) {
  HostTensor i32 = MakeIntegerTensor(DType::kInt32, {-3, 0, 7, std::numeric_limits<std::int32_t>::max(),
                                                     std::numeric_limits<std::int32_t>::min()});
  ReductionResult r = ReduceOne(i32);
  EXPECT_EQ(r.stats.min, -2147483648.0);
  EXPECT_EQ(r.stats.max, 2147483647.0);
  EXPECT_CLOSE(r.stats.sum, 3.0, 4294967298.0);
  EXPECT_EQ(r.stats.zero_count, 1u);
  EXPECT_EQ(r.stats.neg_count, 2u);
  EXPECT_EQ(r.stats.subnormal_count, 0u);
  EXPECT_EQ(r.stats.small_count, 1u);
  EXPECT_EQ(r.stats.band_lo_count, 2u);
  EXPECT_EQ(r.stats.band_hi_count, 2u);
  EXPECT_EQ(r.exponent_histogram->counts[180], 1u);  // 2^31 - 1: floor(log2) 30
  EXPECT_EQ(r.exponent_histogram->counts[181], 1u);  // -2^31
  EXPECT_EQ(r.exponent_histogram->counts[152], 1u);  // 7
  EXPECT_EQ(r.exponent_histogram->counts[151], 1u);  // -3
  EXPECT_EQ(r.exponent_histogram->total(), 4u);
  EXPECT_TRUE(ResultMatches(r, Expected(i32), ToleranceFor(DType::kInt32)));

  const std::int64_t p = (std::int64_t{1} << 53) + 1;  // not a double: converts to 2^53
  HostTensor i64 = MakeIntegerTensor(DType::kInt64, {p, -p, 5});
  r = ReduceOne(i64);
  EXPECT_EQ(r.stats.max, 9007199254740992.0);
  EXPECT_EQ(r.stats.min, -9007199254740992.0);
  EXPECT_CLOSE(r.stats.sum, 5.0, 2 * 9007199254740992.0);
  EXPECT_TRUE(ResultMatches(r, Expected(i64), ToleranceFor(DType::kInt64)));

  HostTensor u8 = MakeIntegerTensor(DType::kUInt8, {0, 255, 128});
  r = ReduceOne(u8);
  EXPECT_EQ(r.stats.max, 255.0);
  EXPECT_EQ(r.stats.min, 0.0);
  EXPECT_CLOSE(r.stats.sum, 383.0, 383.0);
  EXPECT_EQ(r.stats.neg_count, 0u);
  EXPECT_EQ(r.exponent_histogram->counts[157], 2u);  // 255 and 128: 2^7
  EXPECT_TRUE(ResultMatches(r, Expected(u8), ToleranceFor(DType::kUInt8)));
}

// ---------------------------------------------------------------------------
// Batches.
TEST_P(BackendConformanceTest, MixedBatchWithOneInvalidRequest) {
  std::vector<HostTensor> tensors;
  std::vector<StatsOptions> options;
  auto add = [&](HostTensor t, StatsOptions o) {
    tensors.push_back(std::move(t));
    options.push_back(o);
  };
  StatsOptions plain;
  StatsOptions lin;
  lin.linear_histogram.bins = 32;
  StatsOptions labels;
  labels.label_classes = 17;
  StatsOptions channels;
  channels.per_channel_axis = 1;
  StatsOptions bad_axis;
  bad_axis.per_channel_axis = 3;
  StatsOptions sample;
  sample.sample_count = 40;
  sample.sample_seed = 5;
  add(GenerateDefaultTensor(DType::kFloat32, 5000, 1), plain);
  add(GenerateDefaultTensor(DType::kFloat16, 17000, 2), lin);
  add(GenerateDefaultTensor(DType::kUInt8, 3000, 3), labels);
  add(GenerateDefaultTensor(DType::kBFloat16, 100, 4, {4, 25}), channels);
  add(GenerateDefaultTensor(DType::kFloat64, 100, 5, {4, 25}), bad_axis);  // invalid
  add(GenerateDefaultTensor(DType::kFloat8E5M2, 999, 6), sample);
  add(GenerateDefaultTensor(DType::kInt64, 40000, 7), lin);
  add(HostTensor(DType::kFloat32, 0), plain);
  std::vector<ReductionRequest> requests;
  for (std::size_t i = 0; i < tensors.size(); ++i) requests.push_back(Request(tensors[i], options[i]));
  const std::vector<ReductionResult> results = Reduce(requests);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (i == 4) {
      EXPECT_TRUE(RejectedNaming(results[i], "options.per_channel_axis"));
      continue;
    }
    EXPECT_TRUE(ResultMatches(results[i], Expected(tensors[i], options[i]), ToleranceFor(tensors[i].dtype())))
        << "request " << i << " " << DTypeLabel(tensors[i].dtype());
  }
}

TEST_P(BackendConformanceTest, ManySmallTensorsInOneBatchEqualEachAlone) {
  const int kTensors = 10000;
  const std::int64_t kElems = 1000;
  const std::vector<DType> dtypes = AllDTypes();
  std::vector<HostTensor> tensors;
  std::vector<ReductionRequest> requests;
  tensors.reserve(kTensors);
  for (int i = 0; i < kTensors; ++i) {
    const DType t = dtypes[static_cast<std::size_t>(i) % dtypes.size()];
    tensors.push_back(GenerateDefaultTensor(t, kElems, 1000 + static_cast<std::uint64_t>(i), {},
                                            static_cast<std::size_t>(i) % 8));
  }
  for (int i = 0; i < kTensors; ++i) {
    StatsOptions o;
    if (i % 7 == 0) o.linear_histogram.bins = 10;
    if (i % 11 == 0) o.sample_count = 5;
    if (i % 13 == 0) o.exponent_histogram = false;
    if (i % 17 == 0 && IsIntegerDType(tensors[static_cast<std::size_t>(i)].dtype())) {
      o = StatsOptions{};
      o.label_classes = 50;
    }
    requests.push_back(Request(tensors[static_cast<std::size_t>(i)], o));
  }
  const std::vector<ReductionResult> batch = Reduce(requests);
  int failures = 0;
  for (int i = 0; i < kTensors && failures < 5; ++i) {
    const std::size_t k = static_cast<std::size_t>(i);
    const ReductionResult alone = Reduce({requests[k]})[0];
    const auto same = ResultMatches(batch[k], alone, ToleranceFor(tensors[k].dtype()));
    EXPECT_TRUE(same) << "tensor " << i;
    if (!same) ++failures;
    if (i % 97 == 0) {
      const auto ref = ResultMatches(batch[k], ReferenceReduce(tensors[k].View(), requests[k].options),
                                     ToleranceFor(tensors[k].dtype()));
      EXPECT_TRUE(ref) << "tensor " << i << " vs reference";
      if (!ref) ++failures;
    }
  }
}

TEST_P(BackendConformanceTest, SameBatchTwiceIsBitwiseEqual) {
  std::vector<HostTensor> tensors;
  std::vector<StatsOptions> options;
  const std::int64_t big = QuickMode() ? 200000 : 1000003;
  for (DType t : AllDTypes()) {
    tensors.push_back(GenerateDefaultTensor(t, big, SeedFor(t, big), {}, 3));
    StatsOptions o;
    o.linear_histogram.bins = 100;
    o.sample_count = 50;
    options.push_back(o);
    tensors.push_back(GenerateDefaultTensor(t, 6000, SeedFor(t, 6000), {20, 30, 10}));
    StatsOptions c;
    c.per_channel_axis = 1;
    options.push_back(c);
  }
  tensors.push_back(GenerateDefaultTensor(DType::kInt32, 5000, 9));
  StatsOptions labels;
  labels.label_classes = 100;
  options.push_back(labels);
  std::vector<ReductionRequest> requests;
  for (std::size_t i = 0; i < tensors.size(); ++i) requests.push_back(Request(tensors[i], options[i]));
  ReductionRequest invalid = requests[0];
  invalid.options.per_channel_axis = -5;
  requests.push_back(invalid);
  const std::vector<ReductionResult> a = Reduce(requests);
  const std::vector<ReductionResult> b = Reduce(requests);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    EXPECT_TRUE(ResultsBitwiseEqual(a[i], b[i])) << "request " << i;
  }
}

// ---------------------------------------------------------------------------
// Bad input.
TEST_P(BackendConformanceTest, InvalidRequestsAreRejectedNamingTheField) {
  const HostTensor f32 = MakeTensor(DType::kFloat32, Iota(6), {2, 3});
  const HostTensor i32 = MakeIntegerTensor(DType::kInt32, {0, 1, 2, 3, 4, 5}, {2, 3});
  const HostTensor valid_tensor = GenerateDefaultTensor(DType::kFloat32, 777, 3);
  struct Case {
    std::string name;
    bool integer;
    std::function<void(ReductionRequest&)> mutate;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"null data", false, [](ReductionRequest& r) { r.tensor.data = nullptr; }, "tensor.data"},
      {"dtype 99", false, [](ReductionRequest& r) { r.tensor.dtype = static_cast<DType>(99); }, "tensor.dtype"},
      {"negative numel", false, [](ReductionRequest& r) { r.tensor.numel = -1; r.tensor.shape.clear(); }, "tensor.numel"},
      {"shape product", false, [](ReductionRequest& r) { r.tensor.numel = 5; }, "tensor.shape"},
      {"negative dim", false, [](ReductionRequest& r) { r.tensor.shape = {-2, -3}; }, "tensor.shape"},
      {"axis out of range", false, [](ReductionRequest& r) { r.options.per_channel_axis = 2; }, "options.per_channel_axis"},
      {"axis < -1", false, [](ReductionRequest& r) { r.options.per_channel_axis = -2; }, "options.per_channel_axis"},
      {"axis on 1-D", false, [](ReductionRequest& r) { r.tensor.shape.clear(); r.options.per_channel_axis = 1; }, "options.per_channel_axis"},
      {"bins negative", false, [](ReductionRequest& r) { r.options.linear_histogram.bins = -1; }, "options.linear_histogram.bins"},
      {"bins too many", false, [](ReductionRequest& r) { r.options.linear_histogram.bins = kMaxLinearBins + 1; }, "options.linear_histogram.bins"},
      {"fixed range without bins", false, [](ReductionRequest& r) {
         r.options.linear_histogram.fixed_range = true;
         r.options.linear_histogram.lo = 0;
         r.options.linear_histogram.hi = 1;
       }, "options.linear_histogram.bins"},
      {"lo == hi", false, [](ReductionRequest& r) {
         r.options.linear_histogram = {4, true, 1.0, 1.0};
       }, "options.linear_histogram.lo"},
      {"lo > hi", false, [](ReductionRequest& r) {
         r.options.linear_histogram = {4, true, 2.0, -1.0};
       }, "options.linear_histogram.lo"},
      {"lo NaN", false, [](ReductionRequest& r) {
         r.options.linear_histogram = {4, true, kNaN, 1.0};
       }, "options.linear_histogram.lo"},
      {"hi infinite", false, [](ReductionRequest& r) {
         r.options.linear_histogram = {4, true, 0.0, kInf};
       }, "hi"},
      {"band_lo NaN", false, [](ReductionRequest& r) { r.options.band_lo = kNaN; }, "options.band_lo"},
      {"band_hi NaN", false, [](ReductionRequest& r) { r.options.band_hi = kNaN; }, "band_hi"},
      {"small_eps negative", false, [](ReductionRequest& r) { r.options.small_eps = -1e-3; }, "options.small_eps"},
      {"small_eps NaN", false, [](ReductionRequest& r) { r.options.small_eps = kNaN; }, "options.small_eps"},
      {"labels on float", false, [](ReductionRequest& r) { r.options.label_classes = 3; }, "options.label_classes"},
      {"labels negative", true, [](ReductionRequest& r) { r.options.label_classes = -3; }, "options.label_classes"},
      {"labels with per-channel", true, [](ReductionRequest& r) {
         r.options.label_classes = 3;
         r.options.per_channel_axis = 0;
       }, "options.label_classes"},
      {"labels with linear histogram", true, [](ReductionRequest& r) {
         r.options.label_classes = 3;
         r.options.linear_histogram.bins = 4;
       }, "options.label_classes"},
      {"sample_count negative", false, [](ReductionRequest& r) { r.options.sample_count = -1; }, "options.sample_count"},
      {"wrong memory space", false, [this](ReductionRequest& r) { r.tensor.space = ForeignSpace(); }, "tensor.space"},
  };
  for (const Case& c : cases) {
    ReductionRequest bad = Request(c.integer ? i32 : f32);
    c.mutate(bad);
    const ReductionRequest good = Request(valid_tensor);
    // Alone, then between two valid requests: the valid ones still get results.
    const ReductionResult alone = Reduce({bad})[0];
    EXPECT_TRUE(RejectedNaming(alone, c.field)) << c.name;
    const std::vector<ReductionResult> mixed = Reduce({good, bad, good});
    EXPECT_TRUE(RejectedNaming(mixed[1], c.field)) << c.name << " (in a batch)";
    const ReductionResult want = Expected(valid_tensor);
    EXPECT_TRUE(ResultMatches(mixed[0], want, ToleranceFor(DType::kFloat32))) << c.name;
    EXPECT_TRUE(ResultMatches(mixed[2], want, ToleranceFor(DType::kFloat32))) << c.name;
  }
}

TEST_P(BackendConformanceTest, EmptyTensorsAreValid) {
  StatsOptions o;
  o.linear_histogram.bins = 3;
  o.sample_count = 4;
  for (DType t : AllDTypes()) {
    HostTensor h(t, 0);
    ReductionRequest r = Request(h, o);
    std::vector<ReductionRequest> requests = {r};
    r.tensor.data = nullptr;  // null data is fine when numel is 0
    requests.push_back(r);
    r.options = StatsOptions{};
    r.options.per_channel_axis = 0;
    requests.push_back(r);
    for (const ReductionResult& res : Reduce(requests)) {
      ASSERT_TRUE(res.status.ok()) << DTypeLabel(t) << ": " << res.status.ToString();
      EXPECT_EQ(res.stats.count, 0u);
      EXPECT_EQ(res.stats.finite_count, 0u);
      EXPECT_TRUE(std::isnan(res.stats.min) && std::isnan(res.stats.max) && std::isnan(res.stats.mean));
      EXPECT_EQ(res.stats.sum, 0.0);
      EXPECT_EQ(res.stats.l2, 0.0);
      ASSERT_TRUE(res.exponent_histogram.has_value());
      EXPECT_EQ(res.exponent_histogram->total(), 0u);
    }
    const std::vector<ReductionResult> again = Reduce(requests);
    EXPECT_TRUE(ResultMatches(again[0], Expected(h, o), ToleranceFor(t))) << DTypeLabel(t);
    ASSERT_TRUE(again[2].per_channel.has_value());
    EXPECT_TRUE(again[2].per_channel->channels.empty());
    if (IsIntegerDType(t)) {
      StatsOptions lo;
      lo.label_classes = 3;
      HostTensor e(t, 0);
      const ReductionResult lr = ReduceOne(e, lo);
      ASSERT_TRUE(lr.label_counts.has_value());
      EXPECT_EQ(lr.label_counts->counts, (std::vector<std::uint64_t>{0, 0, 0}));
      EXPECT_EQ(lr.label_counts->out_of_range, 0u);
    }
  }
}

}  // namespace
}  // namespace tstat::testing
