// BackendVsCpuTest (vs_cpu_suite.h): the backend under test against the CPU
// backend on the same random data. The backend reads its own placed copy of
// each tensor (device memory for CUDA, at the host copy's alignment phase).
#include "tests/kernels/vs_cpu_suite.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/compare.h"
#include "tests/support/data.h"
#include "tstat/engine.h"

namespace tstat::testing {
namespace {

constexpr double kRelTol = 1e-6;

// Relative to the larger value, or to `cancellation_scale` when that is
// larger: a sum of values of both signs is ill-conditioned (two summation
// orders differ by about eps x the sum of magnitudes, not x the sum).
::testing::AssertionResult Close(const char* what, double a, double b,
                                 double cancellation_scale = 0.0) {
  if (SameValue(a, b)) return ::testing::AssertionSuccess();
  const double scale = std::max({std::fabs(a), std::fabs(b), cancellation_scale});
  if (std::fabs(a - b) <= kRelTol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": backend " << a << " vs cpu " << b;
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
  const double finite = static_cast<double>(c.finite_count);
  EXPECT_TRUE(Close("sum", e.sum, c.sum, c.l1));
  EXPECT_TRUE(Close("mean", e.mean, c.mean, finite > 0 ? c.l1 / finite : 0.0));
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

// Sizes: every tail of a 16- or 32-byte vector load (1..40 elements), the
// edges of powers of two, and sizes spanning many blocks.
std::vector<std::int64_t> CaseSizes() {
  std::vector<std::int64_t> sizes;
  for (std::int64_t n = 1; n <= 40; ++n) sizes.push_back(n);
  for (std::int64_t p : {std::int64_t{1} << 12, std::int64_t{1} << 16}) {
    for (std::int64_t d = -1; d <= 1; ++d) sizes.push_back(p + d);
  }
  sizes.push_back(100003);
  sizes.push_back(QuickMode() ? 300007 : 2000003);
  return sizes;
}

std::vector<Case> RandomCases(DType dtype) {
  std::vector<Case> cases;
  std::uint64_t seed = 1000 + static_cast<std::uint64_t>(dtype) * 97;
  for (std::int64_t n : CaseSizes()) {
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

// Reduces `hosts` with the backend under test (on its placed copies) and
// with the CPU backend (on the host data), and compares request by request.
void ExpectBackendAgreesWithCpu(const BackendUnderTest& under_test,
                                const std::vector<HostTensor>& hosts,
                                const std::vector<StatsOptions>& options,
                                const std::vector<std::string>& names) {
  std::unique_ptr<Backend> backend = under_test.make();
  if (::testing::Test::IsSkipped()) return;  // no device
  std::vector<ReductionRequest> on_host, placed_requests;
  std::vector<PlacedTensor> placed;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const HostTensor& h = hosts[i];
    on_host.push_back({h.View(), options[i]});
    placed.push_back(under_test.place(h.data(), h.dtype(), h.shape(), h.numel()));
    placed_requests.push_back({placed.back().view, options[i]});
  }
  std::unique_ptr<Backend> cpu = CreateCpuBackend();
  std::vector<ReductionResult> b, c;
  const Status sb = backend->Reduce(placed_requests, &b);
  ASSERT_TRUE(sb.ok()) << sb.ToString();
  ASSERT_TRUE(cpu->Reduce(on_host, &c).ok());
  ASSERT_EQ(b.size(), hosts.size());
  ASSERT_EQ(c.size(), hosts.size());
  for (std::size_t i = 0; i < hosts.size(); ++i) ExpectResultsAgree(b[i], c[i], names[i]);
}

}  // namespace

std::string BackendVsCpuName(const ::testing::TestParamInfo<BackendAndDType>& info) {
  return std::get<0>(info.param).name + "_" + DTypeLabel(std::get<1>(info.param));
}

TEST_P(BackendVsCpuTest, RandomDataAgrees) {
  const auto& [under_test, dtype] = GetParam();
  std::vector<HostTensor> hosts;
  std::vector<StatsOptions> options;
  std::vector<std::string> names;
  for (Case& c : RandomCases(dtype)) {
    hosts.push_back(c.tensor);
    options.push_back(c.options);
    names.push_back(c.name);
  }
  ExpectBackendAgreesWithCpu(under_test, hosts, options, names);
}

TEST_P(BackendVsCpuLabelsTest, LabelCountsAgree) {
  std::vector<HostTensor> hosts;
  std::vector<StatsOptions> options;
  std::vector<std::string> names;
  std::uint64_t seed = 7;
  for (DType t : IntegerDTypes()) {
    for (int classes : {1, 10, 300, 20000}) {  // 20000: beyond shared-memory bins
      for (std::int64_t n : {std::int64_t{1}, std::int64_t{33}, std::int64_t{70001}}) {
        // Labels in [-5, classes + 5): in range mostly, some out on both sides.
        std::vector<std::int64_t> labels(static_cast<std::size_t>(n));
        for (std::int64_t& v : labels) {
          seed = seed * 6364136223846793005ull + 1442695040888963407ull;
          v = static_cast<std::int64_t>((seed >> 33) % static_cast<std::uint64_t>(classes + 10)) -
              5;
          if (t == DType::kUInt8) v &= 0xff;
        }
        hosts.push_back(MakeIntegerTensor(t, labels, {}, 1));
        StatsOptions o;
        o.label_classes = classes;
        o.sample_count = 9;
        options.push_back(o);
        names.push_back(DTypeLabel(t) + " labels n=" + std::to_string(n) +
                        " classes=" + std::to_string(classes));
      }
    }
  }
  ExpectBackendAgreesWithCpu(GetParam(), hosts, options, names);
}

}  // namespace tstat::testing
