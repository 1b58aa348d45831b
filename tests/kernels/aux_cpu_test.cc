// The CPU backend through the auxiliary-reduction suite (delta, confusion
// matrix, value counts) with 1, 2 and 3 OpenMP workers, plus a CPU-only check:
// the delta pass partitions by fixed blocks, so its norms are bitwise the same
// for every worker count (and counts always are).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/kernels/aux_suite.h"
#include "tests/support/backend_under_test.h"
#include "tests/support/data.h"
#include "tstat/engine.h"

namespace tstat::testing {
namespace {

BackendUnderTest CpuBackend(int threads) {
  BackendUnderTest b;
  b.name = "Cpu" + std::to_string(threads) + "Threads";
  b.make = [threads]() {
    CpuBackendOptions o;
    o.threads = threads;
    return CreateCpuBackend(o);
  };
  b.place = PlaceOnHost;
  return b;
}

INSTANTIATE_TEST_SUITE_P(Cpu, AuxReductionTest,
                         ::testing::Values(CpuBackend(1), CpuBackend(2), CpuBackend(3)),
                         BackendName);

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(CpuAuxTest, ResultsDoNotDependOnTheWorkerCount) {
  const std::int64_t n = 300001;
  const HostTensor x = GenerateDefaultTensor(DType::kFloat32, n, 1);
  const HostTensor p = GenerateDefaultTensor(DType::kFloat32, n, 2);
  const HostTensor labels = GenerateTensor(DType::kInt32, n, Distribution::Uniform(-1, 40), {}, 3);
  const HostTensor preds = GenerateTensor(DType::kInt32, n, Distribution::Uniform(0, 40), {}, 4);
  ReductionRequest dr;
  dr.tensor = x.View();
  dr.options.delta.previous = p.data();
  ReductionRequest cr;
  cr.tensor = labels.View();
  cr.options.label_classes = 40;
  cr.options.confusion.predictions = preds.data();
  cr.options.confusion.predictions_dtype = DType::kInt32;
  cr.options.count_values = {0, 5, 39, -1};
  std::vector<std::vector<ReductionResult>> runs;
  for (int threads : {1, 2, 3}) {
    CpuBackendOptions o;
    o.threads = threads;
    std::vector<ReductionResult> results;
    ASSERT_TRUE(CreateCpuBackend(o)->Reduce({dr, cr}, &results).ok());
    ASSERT_TRUE(results[0].delta.has_value());
    ASSERT_TRUE(results[1].confusion.has_value());
    runs.push_back(std::move(results));
  }
  for (std::size_t k = 1; k < runs.size(); ++k) {
    const DeltaStats& a = *runs[0][0].delta;
    const DeltaStats& b = *runs[k][0].delta;
    EXPECT_EQ(a.changed_count, b.changed_count);
    EXPECT_EQ(a.nonfinite_pairs, b.nonfinite_pairs);
    EXPECT_TRUE(SameBits(a.l1, b.l1) && SameBits(a.l2, b.l2) && SameBits(a.amax, b.amax));
    EXPECT_EQ(runs[0][1].confusion->counts, runs[k][1].confusion->counts);
    EXPECT_EQ(runs[0][1].confusion->invalid, runs[k][1].confusion->invalid);
    EXPECT_EQ(runs[0][1].value_counts, runs[k][1].value_counts);
  }
}

}  // namespace
}  // namespace tstat::testing
