// Backend conformance suite (TEST_Ps only; see backend_conformance.h): per-channel stats, label
// counts, element samples and integer tensors.
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
// Per-channel stats.
TEST_P(BackendConformanceTest, PerChannelMatchesReferenceForEveryAxis) {
  const std::vector<std::vector<std::int64_t>> shapes = {
      {8, 5},
      {2, 3, 4, 5},
      {1000, 1},
      {1, 1000},
      {3, 0, 4},
      {0, 5},
      {4, 1, 3, 1},
      {7},
      {64, 3, 1000},
      // Channels in runs of 1, 3 and 15 elements (transposed 16 channels at a
      // time, rows in chunks, the last block and chunk partial), of 16 and 64
      // (gathered into tiles, the last one partial) and of 5,000 (two tiles a
      // run).
      {600, 37},
      {100, 20, 3},
      {5, 2, 15},
      {5, 2, 16},
      {300, 2, 64},
      {3, 4, 5000}};
  for (DType t :
       {DType::kFloat32, DType::kFloat16, DType::kInt32, DType::kFloat64, DType::kFloat8E5M2}) {
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
        EXPECT_TRUE(MatchesReference(h, o))
            << Where(t, n, "shape [" + dims + "] axis " + std::to_string(axis));
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

// Feature maps with NaN, +-Inf, zeros and subnormals in some channels: each
// channel's counts, extremes and moments against the long-double reference
// (the tile kernels' exact fallback for non-finite runs included).
TEST_P(BackendConformanceTest, PerChannelOfFeatureMapsWithSpecialValues) {
  const std::vector<std::int64_t> shape = {4, 6, 32, 32};
  const std::int64_t n = 4 * 6 * 32 * 32;
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    // Finite values only, so that the channels left alone (0 and 5) take the
    // tiles' fast path.
    HostTensor h =
        GenerateTensor(t, n, Distribution::Normal(0.25, 2), ValueMix{}, SeedFor(t, n) + 7, shape);
    std::vector<double> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = h.Value(i);
    const std::int64_t map = 32 * 32;
    v[1 * map + 5] = std::numeric_limits<double>::quiet_NaN();           // batch 0, channel 1
    v[(6 + 2) * map + 17] = std::numeric_limits<double>::infinity();     // batch 1, channel 2
    v[(12 + 2) * map + 900] = -std::numeric_limits<double>::infinity();  // batch 2, channel 2
    for (std::int64_t i = 0; i < map; ++i) v[(18 + 3) * map + i] = 0.0;  // batch 3, channel 3
    v[4 * map + 3] = std::numeric_limits<double>::denorm_min();          // batch 0, channel 4
    HostTensor special = MakeTensor(t, v, shape);
    StatsOptions o;
    o.per_channel_axis = 1;
    EXPECT_TRUE(MatchesReference(special, o)) << Where(t, n, "feature maps with special values");
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
  // Label counts come with the stat set (its max tells how many classes
  // there are), not with linear histograms or per-channel stats.
  EXPECT_EQ(r.stats.count, 9u);
  EXPECT_EQ(r.stats.max, static_cast<double>(std::numeric_limits<std::int32_t>::max()));
  EXPECT_EQ(r.stats.min, static_cast<double>(std::numeric_limits<std::int32_t>::min()));
  EXPECT_EQ(r.stats.neg_count, 2u);
  ASSERT_TRUE(r.exponent_histogram.has_value());
  EXPECT_EQ(r.exponent_histogram->total(), 8u);
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
    for (std::size_t i = 0; i < 10; ++i)
      EXPECT_TRUE(SameValue(r.sample->values[i], v[i])) << k << " " << i;
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
  HostTensor i32 =
      MakeIntegerTensor(DType::kInt32, {-3, 0, 7, std::numeric_limits<std::int32_t>::max(),
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

}  // namespace
}  // namespace tstat::testing
