// Tests of the reference itself against hand-computed statistics, so that the
// conformance suite compares backends with something known to be right.
#include "tests/support/reference.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/compare.h"
#include "tests/support/data.h"

namespace tstat::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(ReferenceTest, SimpleValues) {
  HostTensor t = MakeTensor(DType::kFloat32, {1, 2, 3, 4});
  ReductionResult r = ReferenceReduce(t.View(), StatsOptions{});
  const TensorStats& s = r.stats;
  EXPECT_EQ(s.count, 4u);
  EXPECT_EQ(s.finite_count, 4u);
  EXPECT_EQ(s.min, 1.0);
  EXPECT_EQ(s.max, 4.0);
  EXPECT_EQ(s.sum, 10.0);
  EXPECT_EQ(s.mean, 2.5);
  EXPECT_EQ(s.m2, 5.0);
  EXPECT_EQ(s.variance(), 1.25);
  EXPECT_EQ(s.l1, 10.0);
  EXPECT_EQ(s.l2, std::sqrt(30.0));
  EXPECT_EQ(s.amax, 4.0);
  EXPECT_EQ(s.band_hi_count, 4u);  // all >= 0.97
  EXPECT_EQ(s.band_lo_count, 0u);
  EXPECT_EQ(s.small_count, 0u);
  ASSERT_TRUE(r.exponent_histogram.has_value());
  EXPECT_EQ(r.exponent_histogram->counts[150], 1u);  // 1
  EXPECT_EQ(r.exponent_histogram->counts[151], 2u);  // 2, 3
  EXPECT_EQ(r.exponent_histogram->counts[152], 1u);  // 4
  EXPECT_EQ(r.exponent_histogram->total(), 4u);
  EXPECT_FALSE(r.linear_histogram.has_value());
  EXPECT_FALSE(r.per_channel.has_value());
  EXPECT_FALSE(r.label_counts.has_value());
  EXPECT_FALSE(r.sample.has_value());
}

TEST(ReferenceTest, SpecialValuesFollowTheCountingRules) {
  const double sub = std::ldexp(1.0, -130);  // f32 subnormal
  HostTensor t = MakeTensor(DType::kFloat32, {kNaN, kInf, -kInf, -0.0, 0.0, -1.5, sub});
  const TensorStats s = ReferenceReduce(t.View(), StatsOptions{}).stats;
  EXPECT_EQ(s.count, 7u);
  EXPECT_EQ(s.nan_count, 1u);
  EXPECT_EQ(s.pos_inf_count, 1u);
  EXPECT_EQ(s.neg_inf_count, 1u);
  EXPECT_EQ(s.finite_count, 4u);
  EXPECT_EQ(s.zero_count, 2u);
  EXPECT_EQ(s.neg_count, 2u);        // -Inf and -1.5; -0 is not negative
  EXPECT_EQ(s.subnormal_count, 1u);
  EXPECT_EQ(s.band_lo_count, 2u);    // -Inf, -1.5
  EXPECT_EQ(s.band_hi_count, 1u);    // +Inf
  EXPECT_EQ(s.small_count, 3u);      // -0, 0, sub
  EXPECT_EQ(s.min, -1.5);
  EXPECT_EQ(s.max, sub);
  EXPECT_EQ(s.amax, 1.5);
  EXPECT_EQ(s.sum, -1.5 + sub);
  EXPECT_EQ(s.l1, 1.5 + sub);
}

TEST(ReferenceTest, NoFiniteValue) {
  HostTensor t = MakeTensor(DType::kFloat16, {kNaN, kNaN, kInf});
  StatsOptions o;
  o.linear_histogram.bins = 3;
  ReductionResult r = ReferenceReduce(t.View(), o);
  EXPECT_TRUE(std::isnan(r.stats.min));
  EXPECT_TRUE(std::isnan(r.stats.max));
  EXPECT_TRUE(std::isnan(r.stats.mean));
  EXPECT_TRUE(std::isnan(r.stats.variance()));
  EXPECT_EQ(r.stats.sum, 0.0);
  EXPECT_EQ(r.stats.l1, 0.0);
  EXPECT_EQ(r.stats.l2, 0.0);
  EXPECT_EQ(r.stats.amax, 0.0);
  EXPECT_EQ(r.exponent_histogram->total(), 0u);
  ASSERT_TRUE(r.linear_histogram.has_value());
  EXPECT_EQ(r.linear_histogram->lo, -0.5);
  EXPECT_EQ(r.linear_histogram->hi, 0.5);
  EXPECT_EQ(r.linear_histogram->counts, (std::vector<std::uint64_t>{0, 0, 0}));
}

TEST(ReferenceTest, VarianceOfBadlyConditionedData) {
  HostTensor t = MakeTensor(DType::kFloat64, {1e8 + 1, 1e8 + 2, 1e8 + 3});
  const TensorStats s = ReferenceReduce(t.View(), StatsOptions{}).stats;
  EXPECT_EQ(s.mean, 1e8 + 2);
  EXPECT_EQ(s.m2, 2.0);
  const MeanVariance mv = ReferenceMeanVariance(t.data(), DType::kFloat64, 3);
  EXPECT_EQ(static_cast<double>(mv.mean), 1e8 + 2);
  EXPECT_NEAR(static_cast<double>(mv.variance), 2.0 / 3.0, 1e-15);
}

TEST(ReferenceTest, ExponentBins) {
  EXPECT_EQ(ReferenceExponentBin(1.0), 150);
  EXPECT_EQ(ReferenceExponentBin(-1.0), 150);
  EXPECT_EQ(ReferenceExponentBin(0.75), 149);
  EXPECT_EQ(ReferenceExponentBin(3.0), 151);
  EXPECT_EQ(ReferenceExponentBin(-8.0), 153);
  EXPECT_EQ(ReferenceExponentBin(std::ldexp(1.0, -149)), 1);   // f32 min subnormal
  EXPECT_EQ(ReferenceExponentBin(std::ldexp(1.0, -150)), 0);
  EXPECT_EQ(ReferenceExponentBin(1e-300), 0);                  // clamped
  EXPECT_EQ(ReferenceExponentBin(std::ldexp(1.0, -1074)), 0);
  EXPECT_EQ(ReferenceExponentBin(std::ldexp(1.0, 127)), 277);
  EXPECT_EQ(ReferenceExponentBin(static_cast<double>(std::numeric_limits<float>::max())), 277);
  EXPECT_EQ(ReferenceExponentBin(std::ldexp(1.0, 128)), 278);
  EXPECT_EQ(ReferenceExponentBin(1e300), 278);                 // clamped
  EXPECT_EQ(ReferenceExponentBin(std::nextafter(1.0, 0.0)), 149);
}

TEST(ReferenceTest, LinearBucketsUseTheDocumentedEdges) {
  EXPECT_EQ(ReferenceLinearBucket(-1.0, -1, 1, 4), 0);
  EXPECT_EQ(ReferenceLinearBucket(-0.5, -1, 1, 4), 1);
  EXPECT_EQ(ReferenceLinearBucket(-0.25, -1, 1, 4), 1);
  EXPECT_EQ(ReferenceLinearBucket(0.0, -1, 1, 4), 2);
  EXPECT_EQ(ReferenceLinearBucket(0.999, -1, 1, 4), 3);
  EXPECT_EQ(ReferenceLinearBucket(1.0, -1, 1, 4), 3);  // last bucket closed at hi
  EXPECT_EQ(ReferenceLinearBucket(-1.0001, -1, 1, 4), -1);
  EXPECT_EQ(ReferenceLinearBucket(1.0001, -1, 1, 4), 4);
  const std::vector<double> limits = ReferenceBucketLimits(0.0, 1.0, 10);
  ASSERT_EQ(limits.size(), 10u);
  EXPECT_EQ(limits[2], 0.30000000000000004);  // 0 + 0.1 * 3 in double
  EXPECT_EQ(limits[9], 1.0);
  EXPECT_EQ(ReferenceLinearBucket(0.3, 0.0, 1.0, 10), 2);  // 0.3 < limits[2]
  EXPECT_EQ(ReferenceLinearBucket(0.30000000000000004, 0.0, 1.0, 10), 3);
  LinearHistogram h;
  h.lo = 0.0;
  h.hi = 1.0;
  h.counts.resize(10);
  EXPECT_EQ(h.BucketLimits(), limits);  // same as the public helper
}

TEST(ReferenceTest, LinearHistogramAutoAndFixedRange) {
  HostTensor t = MakeTensor(DType::kFloat32, {-2, -1, -0.5, -0.25, 0, 0.5, 0.999, 1, 1.5, kNaN, kInf});
  StatsOptions o;
  o.linear_histogram.bins = 4;
  o.linear_histogram.fixed_range = true;
  o.linear_histogram.lo = -1;
  o.linear_histogram.hi = 1;
  LinearHistogram h = *ReferenceReduce(t.View(), o).linear_histogram;
  EXPECT_EQ(h.counts, (std::vector<std::uint64_t>{1, 2, 1, 3}));
  EXPECT_EQ(h.below, 1u);
  EXPECT_EQ(h.above, 1u);
  o.linear_histogram.fixed_range = false;
  h = *ReferenceReduce(t.View(), o).linear_histogram;
  EXPECT_EQ(h.lo, -2.0);
  EXPECT_EQ(h.hi, 1.5);  // w = 0.875: edges -1.125, -0.25, 0.625
  EXPECT_EQ(h.counts, (std::vector<std::uint64_t>{1, 2, 3, 3}));
  EXPECT_EQ(h.below + h.above, 0u);
  HostTensor same = MakeTensor(DType::kFloat32, {3, 3, 3, kNaN});
  h = *ReferenceReduce(same.View(), o).linear_histogram;
  EXPECT_EQ(h.lo, 2.5);
  EXPECT_EQ(h.hi, 3.5);
  EXPECT_EQ(h.counts, (std::vector<std::uint64_t>{0, 0, 3, 0}));
}

TEST(ReferenceTest, PerChannelIndexing) {
  HostTensor t = MakeTensor(DType::kFloat32, {0, 1, 2, 3, 4, 5}, {2, 3});
  StatsOptions o;
  o.per_channel_axis = 1;
  ReductionResult r = ReferenceReduce(t.View(), o);
  ASSERT_TRUE(r.per_channel.has_value());
  EXPECT_EQ(r.per_channel->axis, 1);
  ASSERT_EQ(r.per_channel->channels.size(), 3u);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(r.per_channel->channels[c].count, 2u);
    EXPECT_EQ(r.per_channel->channels[c].min, c);
    EXPECT_EQ(r.per_channel->channels[c].max, c + 3);
  }
  o.per_channel_axis = 0;
  r = ReferenceReduce(t.View(), o);
  ASSERT_EQ(r.per_channel->channels.size(), 2u);
  EXPECT_EQ(r.per_channel->channels[1].sum, 12.0);
  EXPECT_EQ(r.stats.sum, 15.0);  // whole-tensor stats too

  std::int64_t outer, channels, inner;
  TensorView v;
  v.shape = {2, 3, 4, 5};
  v.numel = 120;
  ReferenceChannelDims(v, 2, &outer, &channels, &inner);
  EXPECT_EQ(outer, 6);
  EXPECT_EQ(channels, 4);
  EXPECT_EQ(inner, 5);
  v.shape = {};
  v.numel = 9;
  ReferenceChannelDims(v, 0, &outer, &channels, &inner);
  EXPECT_EQ(outer, 1);
  EXPECT_EQ(channels, 9);
  EXPECT_EQ(inner, 1);
}

TEST(ReferenceTest, LabelCounts) {
  HostTensor t = MakeIntegerTensor(DType::kInt32, {-1, 0, 1, 2, 5, 3, 3});
  StatsOptions o;
  o.label_classes = 4;
  ReductionResult r = ReferenceReduce(t.View(), o);
  ASSERT_TRUE(r.label_counts.has_value());
  EXPECT_EQ(r.label_counts->counts, (std::vector<std::uint64_t>{1, 1, 1, 2}));
  EXPECT_EQ(r.label_counts->out_of_range, 2u);
  // The stat set comes with label counts.
  EXPECT_EQ(r.stats.count, 7u);
  EXPECT_EQ(r.stats.min, -1.0);
  EXPECT_EQ(r.stats.max, 5.0);
  EXPECT_EQ(r.stats.sum, 13.0);
  ASSERT_TRUE(r.exponent_histogram.has_value());
  EXPECT_EQ(r.exponent_histogram->total(), 6u);  // every non-zero value
}

TEST(ReferenceTest, SamplePositionsFromTheFormula) {
  // Values computed independently (Python integers).
  EXPECT_EQ(ReferenceSplitMix64(0), 0xe220a8397b1dcdafull);
  EXPECT_EQ(ReferenceSamplePositions(42, 1000, 5),
            (std::vector<std::int64_t>{303, 494, 115, 264, 555}));
  EXPECT_EQ(ReferenceSamplePositions(0, 7, 3), (std::vector<std::int64_t>{4, 2, 2}));
  EXPECT_EQ(ReferenceSamplePositions(0xdeadbeefcafef00dull, 1000000000000, 4),
            (std::vector<std::int64_t>{821950011415, 373971665358, 555949801229, 459271544019}));
  EXPECT_EQ(ReferenceSamplePositions(5, 4, 4), (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(ReferenceSamplePositions(5, 4, 9), (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_TRUE(ReferenceSamplePositions(5, 0, 3).empty());
  HostTensor t = MakeTensor(DType::kFloat16, {0, 1, kNaN, 3, 4, 5, 6});
  StatsOptions o;
  o.sample_count = 3;
  ReductionResult r = ReferenceReduce(t.View(), o);
  ASSERT_TRUE(r.sample.has_value());
  EXPECT_EQ(r.sample->positions, (std::vector<std::int64_t>{4, 2, 2}));
  EXPECT_EQ(r.sample->values[0], 4.0);
  EXPECT_TRUE(std::isnan(r.sample->values[1]));
}

TEST(CompareTest, DetectsDifferences) {
  HostTensor t = GenerateDefaultTensor(DType::kFloat32, 1000, 1);
  StatsOptions o;
  o.linear_histogram.bins = 10;
  o.sample_count = 5;
  const ReductionResult a = ReferenceReduce(t.View(), o);
  EXPECT_TRUE(ResultMatches(a, a, ToleranceFor(DType::kFloat32)));
  EXPECT_TRUE(ResultsBitwiseEqual(a, a));
  ReductionResult b = a;
  b.stats.sum += 1e-6 * a.stats.l1;  // the sum's condition scale is l1
  EXPECT_FALSE(ResultMatches(b, a, ToleranceFor(DType::kFloat32)));
  b = a;
  b.stats.m2 *= 1 + 1e-8;
  EXPECT_TRUE(ResultMatches(b, a, ToleranceFor(DType::kFloat32)));
  EXPECT_FALSE(ResultMatches(b, a, Tolerance{1e-10, 0.0}));
  EXPECT_FALSE(ResultsBitwiseEqual(b, a));
  b = a;
  b.stats.sum = std::nextafter(b.stats.sum, kInf);
  EXPECT_TRUE(ResultMatches(b, a, ToleranceFor(DType::kFloat32)));
  EXPECT_FALSE(ResultsBitwiseEqual(b, a));
  b = a;
  b.stats.nan_count += 1;
  EXPECT_FALSE(ResultMatches(b, a, ToleranceFor(DType::kFloat32)));
  b = a;
  b.linear_histogram->counts[3] += 1;
  EXPECT_FALSE(ResultMatches(b, a, ToleranceFor(DType::kFloat32)));
  b = a;
  b.exponent_histogram.reset();
  EXPECT_FALSE(ResultMatches(b, a, ToleranceFor(DType::kFloat32)));
  b = a;
  b.sample->positions[0] += 1;
  EXPECT_FALSE(ResultMatches(b, a, ToleranceFor(DType::kFloat32)));
  b = a;
  b.stats.min = std::nextafter(a.stats.min, kInf);
  EXPECT_FALSE(ResultMatches(b, a, ToleranceFor(DType::kFloat32)));
  b = a;
  b.status = Status::InvalidArgument("x");
  EXPECT_FALSE(ResultMatches(b, a, ToleranceFor(DType::kFloat32)));
}

}  // namespace
}  // namespace tstat::testing
