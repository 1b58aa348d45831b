// The CPU emulation of the CUDA backend through the backend conformance suite,
// with the device block size (256 threads) and a smaller one (64: more
// threads per element mix, different channel groups and merge trees), plus
// emulator-only checks: kind/description, independence from the OpenMP thread
// count (blocks run in parallel; results must not change bit-wise).
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/emulated_backend.h"
#include "tests/kernels/backend_conformance.h"
#include "tests/support/backend_under_test.h"
#include "tests/support/compare.h"
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

INSTANTIATE_TEST_SUITE_P(Emulated, BackendConformanceTest,
                         ::testing::Values(Emulated(256), Emulated(64)), BackendName);

TEST(EmulatedBackendTest, KindAndDescription) {
  std::unique_ptr<Backend> b = kernels::CreateEmulatedCudaBackend();
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->kind(), BackendKind::kCpu);
  EXPECT_EQ(b->description(), "cuda-emulated (256 threads/block)");
  EXPECT_EQ(kernels::CreateEmulatedCudaBackend(100)->description(),
            "cuda-emulated (128 threads/block)");
}

// Blocks run on OpenMP threads; histogram adds are atomic integer adds and
// every float result has a fixed slot and order, so 1 and 2 OpenMP threads
// give bitwise identical results.
TEST(EmulatedBackendTest, ResultsDoNotDependOnTheOpenMpThreadCount) {
  const std::int64_t n = QuickMode() ? 200003 : 1000003;
  std::vector<HostTensor> tensors;
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kBFloat16, DType::kFloat8E4M3}) {
    tensors.push_back(GenerateDefaultTensor(t, n, 31 + static_cast<std::uint64_t>(t), {}, 3));
  }
  tensors.push_back(GenerateDefaultTensor(DType::kFloat16, 120000, 5, {40, 30, 100}));
  tensors.push_back(GenerateDefaultTensor(DType::kFloat32, 120000, 6, {4000, 30}));
  std::vector<ReductionRequest> requests;
  for (const HostTensor& h : tensors) {
    ReductionRequest r;
    r.tensor = h.View();
    r.options.linear_histogram.bins = 100;
    r.options.sample_count = 17;
    if (!h.shape().empty()) r.options.per_channel_axis = 1;
    requests.push_back(r);
  }
  const HostTensor labels = MakeIntegerTensor(DType::kInt32, {0, 1, 2, 3, -1, 7, 2, 2});
  ReductionRequest lr;
  lr.tensor = labels.View();
  lr.options.label_classes = 4;
  requests.push_back(lr);

  std::unique_ptr<Backend> b = kernels::CreateEmulatedCudaBackend();
  const int saved = omp_get_max_threads();
  std::vector<ReductionResult> one, two;
  omp_set_num_threads(1);
  ASSERT_TRUE(b->Reduce(requests, &one).ok());
  omp_set_num_threads(2);
  ASSERT_TRUE(b->Reduce(requests, &two).ok());
  omp_set_num_threads(saved);
  ASSERT_EQ(one.size(), requests.size());
  ASSERT_EQ(two.size(), requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    EXPECT_TRUE(ResultsBitwiseEqual(one[i], two[i])) << "request " << i;
  }
}

}  // namespace
}  // namespace tstat::testing
