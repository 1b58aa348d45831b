// The CPU emulation of the CUDA backend against the CPU backend on random
// data: counts, histograms, label counts and samples exactly equal; the
// floating-point stats (sum, mean, m2, l1, l2) within 1e-6 relative (they sum
// in different orders); min/max/amax exactly (they are element values). Every
// dtype, with specials (NaN, Inf, zeros, subnormals), misaligned starts,
// per-channel stats in both channel mappings, and linear histograms.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/emulated_backend.h"
#include "tests/support/compare.h"
#include "tests/support/data.h"
#include "tstat/engine.h"

namespace tstat::testing {
namespace {

constexpr double kRelTol = 1e-6;

::testing::AssertionResult Close(const char* what, double a, double b) {
  if (SameValue(a, b)) return ::testing::AssertionSuccess();
  const double scale = std::max(std::fabs(a), std::fabs(b));
  if (std::fabs(a - b) <= kRelTol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": emulated " << a << " vs cpu " << b;
}

void ExpectStatsAgree(const TensorStats& e, const TensorStats& c, const std::string& where) {
  SCOPED_TRACE(where);
  EXPECT_EQ(e.count, c.count);
  EXPECT_EQ(e.finite_count, c.finite_count);
  EXPECT_EQ(e.nan_count, c.nan_count);
  EXPECT_EQ(e.pos_inf_count, c.pos_inf_count);
  EXPECT_EQ(e.neg_inf_count, c.neg_inf_count);
  EXPECT_EQ(e.zero_count, c.zero_count);
  EXPECT_EQ(e.neg_count, c.neg_count);
  EXPECT_EQ(e.subnormal_count, c.subnormal_count);
  EXPECT_EQ(e.band_lo_count, c.band_lo_count);
  EXPECT_EQ(e.band_hi_count, c.band_hi_count);
  EXPECT_EQ(e.small_count, c.small_count);
  EXPECT_TRUE(SameValue(e.min, c.min)) << e.min << " vs " << c.min;
  EXPECT_TRUE(SameValue(e.max, c.max)) << e.max << " vs " << c.max;
  EXPECT_TRUE(SameValue(e.amax, c.amax)) << e.amax << " vs " << c.amax;
  EXPECT_TRUE(Close("sum", e.sum, c.sum));
  EXPECT_TRUE(Close("mean", e.mean, c.mean));
  EXPECT_TRUE(Close("m2", e.m2, c.m2));
  EXPECT_TRUE(Close("l1", e.l1, c.l1));
  EXPECT_TRUE(Close("l2", e.l2, c.l2));
}

void ExpectResultsAgree(const ReductionResult& e, const ReductionResult& c,
                        const std::string& where) {
  SCOPED_TRACE(where);
  ASSERT_TRUE(e.status.ok()) << e.status.ToString();
  ASSERT_TRUE(c.status.ok()) << c.status.ToString();
  ExpectStatsAgree(e.stats, c.stats, "stats");
  ASSERT_EQ(e.exponent_histogram.has_value(), c.exponent_histogram.has_value());
  if (e.exponent_histogram) {
    EXPECT_EQ(e.exponent_histogram->counts, c.exponent_histogram->counts);
  }
  ASSERT_EQ(e.linear_histogram.has_value(), c.linear_histogram.has_value());
  if (e.linear_histogram) {
    EXPECT_EQ(e.linear_histogram->lo, c.linear_histogram->lo);
    EXPECT_EQ(e.linear_histogram->hi, c.linear_histogram->hi);
    EXPECT_EQ(e.linear_histogram->counts, c.linear_histogram->counts);
    EXPECT_EQ(e.linear_histogram->below, c.linear_histogram->below);
    EXPECT_EQ(e.linear_histogram->above, c.linear_histogram->above);
  }
  ASSERT_EQ(e.per_channel.has_value(), c.per_channel.has_value());
  if (e.per_channel) {
    EXPECT_EQ(e.per_channel->axis, c.per_channel->axis);
    ASSERT_EQ(e.per_channel->channels.size(), c.per_channel->channels.size());
    for (std::size_t k = 0; k < e.per_channel->channels.size(); ++k) {
      ExpectStatsAgree(e.per_channel->channels[k], c.per_channel->channels[k],
                       "channel " + std::to_string(k));
    }
  }
  ASSERT_EQ(e.label_counts.has_value(), c.label_counts.has_value());
  if (e.label_counts) {
    EXPECT_EQ(e.label_counts->counts, c.label_counts->counts);
    EXPECT_EQ(e.label_counts->out_of_range, c.label_counts->out_of_range);
  }
  ASSERT_EQ(e.sample.has_value(), c.sample.has_value());
  if (e.sample) {
    EXPECT_EQ(e.sample->positions, c.sample->positions);
    ASSERT_EQ(e.sample->values.size(), c.sample->values.size());
    for (std::size_t k = 0; k < e.sample->values.size(); ++k) {
      EXPECT_TRUE(SameValue(e.sample->values[k], c.sample->values[k])) << "sample " << k;
    }
  }
}

struct Case {
  HostTensor tensor;
  StatsOptions options;
  std::string name;
};

std::vector<Case> RandomCases(DType dtype) {
  const std::int64_t big = QuickMode() ? 300007 : 2000003;
  std::vector<Case> cases;
  std::uint64_t seed = 1000 + static_cast<std::uint64_t>(dtype) * 97;
  for (std::int64_t n :
       {std::int64_t{1}, std::int64_t{17}, std::int64_t{1000}, std::int64_t{100003}, big}) {
    for (std::size_t offset : {std::size_t{0}, std::size_t{3}, DTypeSize(dtype)}) {
      Case c;
      c.tensor = GenerateTensor(dtype, n, Distribution::Normal(0.25, 2.0), ValueMix::Specials(),
                                ++seed, {}, offset);
      c.options.linear_histogram.bins = 64 + static_cast<int>(offset);
      c.options.sample_count = 41;
      c.options.sample_seed = seed;
      c.name = DTypeLabel(dtype) + " n=" + std::to_string(n) + " offset=" + std::to_string(offset);
      cases.push_back(c);
    }
  }
  // Fixed range with values outside it; more bins than fit shared memory.
  Case fixed;
  fixed.tensor =
      GenerateTensor(dtype, 50000, Distribution::Uniform(-3, 3), ValueMix::Specials(), ++seed);
  fixed.options.linear_histogram = {10000, true, -1.0, 1.5};
  fixed.name = DTypeLabel(dtype) + " fixed range, 10000 bins";
  cases.push_back(fixed);
  // Per-channel: narrow mapping (inner 1 and 7), wide mapping (inner 64).
  const std::vector<std::vector<std::int64_t>> shapes = {{3000, 24}, {50, 40, 7}, {12, 9, 64}};
  for (const auto& shape : shapes) {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    for (int axis = 0; axis < static_cast<int>(shape.size()); ++axis) {
      Case c;
      c.tensor = GenerateTensor(dtype, n, Distribution::Normal(-1.0, 3.0), ValueMix::Specials(),
                                ++seed, shape, 2);
      c.options.per_channel_axis = axis;
      c.name = DTypeLabel(dtype) + " per-channel rank " + std::to_string(shape.size()) + " axis " +
               std::to_string(axis);
      cases.push_back(c);
    }
  }
  return cases;
}

class EmulatedVsCpuTest : public ::testing::TestWithParam<DType> {};

TEST_P(EmulatedVsCpuTest, RandomDataAgrees) {
  const std::vector<Case> cases = RandomCases(GetParam());
  std::vector<ReductionRequest> requests;
  for (const Case& c : cases) requests.push_back({c.tensor.View(), c.options});
  std::unique_ptr<Backend> emulated = kernels::CreateEmulatedCudaBackend();
  std::unique_ptr<Backend> cpu = CreateCpuBackend();
  std::vector<ReductionResult> e, c;
  ASSERT_TRUE(emulated->Reduce(requests, &e).ok());
  ASSERT_TRUE(cpu->Reduce(requests, &c).ok());
  ASSERT_EQ(e.size(), cases.size());
  ASSERT_EQ(c.size(), cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) ExpectResultsAgree(e[i], c[i], cases[i].name);
}

TEST(EmulatedVsCpuLabelsTest, LabelCountsAgree) {
  std::vector<HostTensor> tensors;
  std::vector<ReductionRequest> requests;
  std::uint64_t seed = 7;
  for (DType t : IntegerDTypes()) {
    for (int classes : {1, 10, 300, 20000}) {  // 20000: beyond shared-memory bins
      // Labels in [-5, classes + 5): in range mostly, some out on both sides.
      std::vector<std::int64_t> labels(70001);
      for (std::int64_t& v : labels) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        v = static_cast<std::int64_t>((seed >> 33) % static_cast<std::uint64_t>(classes + 10)) - 5;
        if (t == DType::kUInt8) v &= 0xff;
      }
      tensors.push_back(MakeIntegerTensor(t, labels, {}, 1));
      ReductionRequest r;
      r.tensor = tensors.back().View();
      r.options.label_classes = classes;
      r.options.sample_count = 9;
      requests.push_back(r);
    }
  }
  std::unique_ptr<Backend> emulated = kernels::CreateEmulatedCudaBackend();
  std::unique_ptr<Backend> cpu = CreateCpuBackend();
  std::vector<ReductionResult> e, c;
  ASSERT_TRUE(emulated->Reduce(requests, &e).ok());
  ASSERT_TRUE(cpu->Reduce(requests, &c).ok());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    ExpectResultsAgree(e[i], c[i], "label request " + std::to_string(i));
  }
}

std::string DTypeParamName(const ::testing::TestParamInfo<DType>& p) { return DTypeLabel(p.param); }

INSTANTIATE_TEST_SUITE_P(AllDTypes, EmulatedVsCpuTest, ::testing::ValuesIn(AllDTypes()),
                         DTypeParamName);

}  // namespace
}  // namespace tstat::testing
