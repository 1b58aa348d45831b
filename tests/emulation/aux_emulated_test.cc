// The CPU emulation of the CUDA backend through the auxiliary-reduction suite
// (delta, confusion matrix, value counts) with the device block size (256) and
// a smaller one (64), plus emulator-only checks: it agrees with the CPU
// backend (counts exactly, delta norms within 1e-6 relative) on a mixed batch,
// and its results do not depend on the OpenMP thread count (bitwise).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/emulated_backend.h"
#include "kernels/plan/launch_plan.h"
#include "tests/kernels/aux_suite.h"
#include "tests/support/backend_under_test.h"
#include "tests/support/data.h"
#include "tstat/engine.h"

namespace tstat::testing {
namespace {

BackendUnderTest Emulated(int threads_per_block) {
  BackendUnderTest b;
  b.name = "Emulated" + std::to_string(threads_per_block) + "ThreadsPerBlock";
  b.make = [threads_per_block]() { return kernels::CreateEmulatedCudaBackend(threads_per_block); };
  b.place = PlaceOnHost;
  return b;
}

INSTANTIATE_TEST_SUITE_P(Emulated, AuxReductionTest, ::testing::Values(Emulated(256), Emulated(64)),
                         BackendName);

// A batch using every auxiliary reduction, with misaligned members.
class AuxBatch {
 public:
  AuxBatch() {
    const std::int64_t n = QuickMode() ? 150001 : 600001;
    for (DType t : FloatDTypes()) {
      const auto seed = static_cast<std::uint64_t>(t);
      const HostTensor& x = Keep(GenerateDefaultTensor(t, n, 10 + seed, {}, seed % 3));
      const HostTensor& p = Keep(GenerateDefaultTensor(t, n, 20 + seed, {}, seed % 5));
      ReductionRequest r;
      r.tensor = x.View();
      r.options.delta.previous = p.data();
      requests.push_back(r);
    }
    for (DType t : IntegerDTypes()) {
      const auto seed = static_cast<std::uint64_t>(t);
      const HostTensor& labels =
          Keep(GenerateTensor(t, n, Distribution::Uniform(0, 120), {}, 30 + seed, {}, 1));
      const HostTensor& preds =
          Keep(GenerateTensor(DType::kInt64, n, Distribution::Uniform(0, 120), {}, 40 + seed));
      const HostTensor& logits =
          Keep(GenerateDefaultTensor(DType::kBFloat16, n / 100 * 12, 50 + seed, {}, 2));
      ReductionRequest r;
      r.tensor = labels.View();
      r.options.label_classes = 80;  // some labels and predictions out of range
      r.options.confusion.predictions = preds.data();
      r.options.confusion.predictions_dtype = DType::kInt64;
      r.options.count_values = {0, 1, 2, 119, 200, 1};
      requests.push_back(r);
      ReductionRequest a;
      a.tensor = labels.View();
      a.tensor.numel = n / 100;
      a.options.label_classes = 12;
      a.options.confusion.predictions = logits.data();
      a.options.confusion.predictions_dtype = DType::kBFloat16;
      a.options.confusion.argmax = true;
      requests.push_back(a);
      ReductionRequest v;
      v.tensor = labels.View();
      v.options.count_values = {5, 6, 7};
      requests.push_back(v);
    }
  }
  std::vector<ReductionRequest> requests;

 private:
  const HostTensor& Keep(HostTensor t) {
    tensors_.push_back(std::make_unique<HostTensor>(std::move(t)));
    return *tensors_.back();
  }
  std::vector<std::unique_ptr<HostTensor>> tensors_;
};

bool Within(double a, double b, double rtol) {
  return std::fabs(a - b) <= rtol * std::max(std::fabs(a), std::fabs(b));
}

// The launch plan of the auxiliary reductions: the delta kernel walks the
// same chunks as the stats kernel, the confusion and value kernels those of
// their tensors; value tables are sorted and keep count_values positions.
TEST(EmulatedAuxTest, LaunchPlanOfTheAuxiliaryReductions) {
  const HostTensor x = GenerateDefaultTensor(DType::kFloat32, 100000, 1);
  const HostTensor labels = MakeIntegerTensor(DType::kInt32, std::vector<std::int64_t>(40000, 1));
  const HostTensor preds = MakeIntegerTensor(DType::kUInt8, std::vector<std::int64_t>(40000, 2));
  ReductionRequest d;
  d.tensor = x.View();
  d.options.delta.previous = x.data();
  ReductionRequest c;
  c.tensor = labels.View();
  c.options.label_classes = 91;  // 8281 cells: more than the shared bins
  c.options.confusion.predictions = preds.data();
  c.options.confusion.predictions_dtype = DType::kUInt8;
  c.options.count_values = {9, -3, 9, 4};
  ReductionRequest small = c;
  small.options.label_classes = 90;  // 8100 cells: shared
  kernels::LaunchPlan plan;
  ASSERT_TRUE(kernels::BuildLaunchPlan({d, c, small}, BackendKind::kCpu, 256, &plan).ok());
  // The stats kernel walks the label requests too (their stat set); the
  // delta kernel the chunks of d, which come first.
  std::vector<kernels::WorkItem> d_items;
  for (const kernels::WorkItem& w : plan.stats_items) {
    if (w.request == 0) d_items.push_back(w);
  }
  ASSERT_EQ(plan.delta_items.size(), d_items.size());
  ASSERT_GT(plan.stats_items.size(), d_items.size());
  for (std::size_t k = 0; k < plan.delta_items.size(); ++k) {
    EXPECT_EQ(plan.delta_items[k].begin, d_items[k].begin);
    EXPECT_EQ(plan.delta_items[k].length, d_items[k].length);
  }
  EXPECT_EQ(plan.num_delta_partials, static_cast<std::int64_t>(plan.delta_items.size()));
  EXPECT_EQ(plan.confusion_items.size(), plan.label_items.size());  // both label requests
  EXPECT_EQ(plan.confusion_shared_bins, 8100);
  EXPECT_EQ(plan.value_items.size(), plan.label_items.size());
  ASSERT_EQ(plan.value_table.size(), 8u);
  const std::vector<std::int64_t> values = {-3, 4, 9, 9}, positions = {1, 3, 0, 2};
  for (std::size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(plan.value_table[k].value, values[k]);
    EXPECT_EQ(plan.value_table[k].index, positions[k]);
  }
  // stats, merge, labels, delta, confusion, value counts.
  EXPECT_EQ(plan.KernelLaunches(), 6);
}

TEST(EmulatedAuxTest, AgreesWithTheCpuBackend) {
  const AuxBatch batch;
  std::vector<ReductionResult> emu, cpu;
  ASSERT_TRUE(kernels::CreateEmulatedCudaBackend(256)->Reduce(batch.requests, &emu).ok());
  ASSERT_TRUE(CreateCpuBackend()->Reduce(batch.requests, &cpu).ok());
  for (std::size_t k = 0; k < batch.requests.size(); ++k) {
    SCOPED_TRACE("request " + std::to_string(k));
    ASSERT_TRUE(emu[k].status.ok() && cpu[k].status.ok()) << emu[k].status.ToString();
    ASSERT_EQ(emu[k].delta.has_value(), cpu[k].delta.has_value());
    if (emu[k].delta) {
      const DeltaStats& a = *emu[k].delta;
      const DeltaStats& b = *cpu[k].delta;
      EXPECT_EQ(a.count, b.count);
      EXPECT_EQ(a.changed_count, b.changed_count);
      EXPECT_EQ(a.nonfinite_pairs, b.nonfinite_pairs);
      EXPECT_TRUE(Within(a.l1, b.l1, 1e-6)) << a.l1 << " vs " << b.l1;
      EXPECT_TRUE(Within(a.l2, b.l2, 1e-6)) << a.l2 << " vs " << b.l2;
      EXPECT_EQ(a.amax, b.amax);  // the same pair's |x - p|, rounded once
    }
    ASSERT_EQ(emu[k].confusion.has_value(), cpu[k].confusion.has_value());
    if (emu[k].confusion) {
      EXPECT_EQ(emu[k].confusion->counts, cpu[k].confusion->counts);
      EXPECT_EQ(emu[k].confusion->invalid, cpu[k].confusion->invalid);
      EXPECT_GT(emu[k].confusion->invalid, 0u);
    }
    EXPECT_EQ(emu[k].value_counts, cpu[k].value_counts);
  }
}

TEST(EmulatedAuxTest, ResultsDoNotDependOnTheOpenMpThreadCount) {
  const AuxBatch batch;
  std::unique_ptr<Backend> b = kernels::CreateEmulatedCudaBackend();
  const int saved = omp_get_max_threads();
  std::vector<ReductionResult> one, two;
  omp_set_num_threads(1);
  ASSERT_TRUE(b->Reduce(batch.requests, &one).ok());
  omp_set_num_threads(2);
  ASSERT_TRUE(b->Reduce(batch.requests, &two).ok());
  omp_set_num_threads(saved);
  for (std::size_t k = 0; k < batch.requests.size(); ++k) {
    SCOPED_TRACE("request " + std::to_string(k));
    if (one[k].delta) {
      ASSERT_TRUE(two[k].delta.has_value());
      EXPECT_TRUE(SameBits(one[k].delta->l1, two[k].delta->l1));
      EXPECT_TRUE(SameBits(one[k].delta->l2, two[k].delta->l2));
      EXPECT_EQ(one[k].delta->changed_count, two[k].delta->changed_count);
    }
    if (one[k].confusion) {
      ASSERT_TRUE(two[k].confusion.has_value());
      EXPECT_EQ(one[k].confusion->counts, two[k].confusion->counts);
    }
    EXPECT_EQ(one[k].value_counts, two[k].value_counts);
  }
}

}  // namespace
}  // namespace tstat::testing
