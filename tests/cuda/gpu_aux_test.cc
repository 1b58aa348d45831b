// The CUDA backend through the auxiliary-reduction suite (delta, confusion
// matrix, value counts): every tensor, previous-values and predictions buffer
// is copied to device memory at the host copy's address phase modulo 256
// (CudaUnderTest), so misaligned and differently aligned pairs stay so. Plus bitwise agreement
// with the CPU emulation (256 threads per block) for the same phases. Every
// test is SKIPPED without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/emulated_backend.h"
#include "tests/cuda/cuda_under_test.h"
#include "tests/kernels/aux_suite.h"
#include "tests/support/backend_under_test.h"
#include "tests/support/data.h"
#include "tstat/engine.h"

namespace tstat::testing {
namespace {

INSTANTIATE_TEST_SUITE_P(Gpu, AuxReductionTest, ::testing::Values(CudaUnderTest()), BackendName);

// The emulator runs the kernels' per-thread code and merge order: with the
// same address phases its delta norms are the GPU's bit for bit.
TEST(GpuAuxTest, BitwiseEqualToTheEmulator) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  Result<std::unique_ptr<Backend>> gpu = CreateCudaBackend(0);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  std::vector<HostTensor> keep;
  std::vector<PlacedTensor> placed;
  std::vector<ReductionRequest> host, device;
  auto add = [&](const HostTensor& x, const HostTensor& p) {
    keep.push_back(x);
    keep.push_back(p);
    ReductionRequest h;
    h.tensor = x.View();
    h.options.delta.previous = p.data();
    host.push_back(h);
    placed.push_back(PlaceOnDevice(x.data(), x.dtype(), {}, x.numel()));
    placed.push_back(PlaceOnDevice(p.data(), p.dtype(), {}, p.numel()));
    ReductionRequest d = h;
    d.tensor = placed[placed.size() - 2].view;
    d.options.delta.previous = placed.back().view.data;
    device.push_back(d);
  };
  for (DType t : FloatDTypes()) {
    add(GenerateDefaultTensor(t, 1000003, 1, {}, 0), GenerateDefaultTensor(t, 1000003, 2, {}, 0));
    add(GenerateDefaultTensor(t, 70001, 3, {}, 2), GenerateDefaultTensor(t, 70001, 4, {}, 7));
  }
  std::vector<ReductionResult> a, b;
  ASSERT_TRUE(kernels::CreateEmulatedCudaBackend(256)->Reduce(host, &a).ok());
  ASSERT_TRUE((*gpu)->Reduce(device, &b).ok());
  for (std::size_t k = 0; k < host.size(); ++k) {
    ASSERT_TRUE(a[k].delta.has_value() && b[k].delta.has_value()) << "request " << k;
    EXPECT_EQ(a[k].delta->changed_count, b[k].delta->changed_count) << "request " << k;
    EXPECT_EQ(a[k].delta->nonfinite_pairs, b[k].delta->nonfinite_pairs) << "request " << k;
    EXPECT_TRUE(SameBits(a[k].delta->l1, b[k].delta->l1) &&
                SameBits(a[k].delta->l2, b[k].delta->l2) &&
                SameBits(a[k].delta->amax, b[k].delta->amax))
        << "request " << k;
  }
}

}  // namespace
}  // namespace tstat::testing
