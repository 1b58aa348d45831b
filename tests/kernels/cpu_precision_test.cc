// The CPU backend's precision requirement: 10^8 float64 values with mean 1e4
// and standard deviation 1e-2 (so mean^2 / variance = 1e12: a one-pass
// sum-of-squares formula loses every digit) give a variance within 1e-6
// relative of a long-double two-pass reference. Slow; skipped under
// sanitizers and in quick mode.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/data.h"
#include "tests/support/reference.h"
#include "tstat/engine.h"

namespace tstat::testing {
namespace {

TEST(CpuPrecisionTest, VarianceOfHundredMillionValuesWithLargeMean) {
  if (QuickMode()) GTEST_SKIP() << "10^8 elements: skipped under sanitizers / TSTAT_TEST_QUICK";
  const std::int64_t n = 100000000;
  std::vector<double> values(static_cast<std::size_t>(n));
  std::mt19937_64 rng(20240611);
  std::normal_distribution<double> normal(1e4, 1e-2);
  for (double& v : values) v = normal(rng);

  const MeanVariance want = ReferenceMeanVariance(values.data(), DType::kFloat64, n);
  ASSERT_EQ(want.finite, static_cast<std::uint64_t>(n));
  // Sanity of the data itself.
  ASSERT_NEAR(static_cast<double>(want.mean), 1e4, 1e-5);
  ASSERT_NEAR(std::sqrt(static_cast<double>(want.variance)), 1e-2, 1e-5);

  for (int threads : {1, 2, 3}) {
    CpuBackendOptions o;
    o.threads = threads;
    std::unique_ptr<Backend> backend = CreateCpuBackend(o);
    ReductionRequest r;
    r.tensor = TensorView::Host(values.data(), DType::kFloat64, n);
    std::vector<ReductionResult> results;
    ASSERT_TRUE(backend->Reduce({r}, &results).ok());
    ASSERT_EQ(results.size(), 1u);
    ASSERT_TRUE(results[0].status.ok()) << results[0].status.ToString();
    const TensorStats& s = results[0].stats;
    EXPECT_EQ(s.finite_count, static_cast<std::uint64_t>(n));
    const double v = static_cast<double>(want.variance);
    EXPECT_NEAR(s.variance(), v, 1e-6 * v) << threads << " threads";
    const double m = static_cast<double>(want.mean);
    EXPECT_NEAR(s.mean, m, 1e-12 * m) << threads << " threads";
  }
}

}  // namespace
}  // namespace tstat::testing
