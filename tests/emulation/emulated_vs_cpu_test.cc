// The CPU emulation of the CUDA backend against the CPU backend
// (tests/kernels/vs_cpu_suite.h): every dtype, tail, alignment and feature.
#include <gtest/gtest.h>

#include "kernels/emulated_backend.h"
#include "tests/kernels/vs_cpu_suite.h"
#include "tests/support/data.h"

namespace tstat::testing {
namespace {

BackendUnderTest Emulated() {
  BackendUnderTest b;
  b.name = "Emulated";
  b.make = []() { return kernels::CreateEmulatedCudaBackend(); };
  b.place = PlaceOnHost;
  return b;
}

INSTANTIATE_TEST_SUITE_P(Emulated, BackendVsCpuTest,
                         ::testing::Combine(::testing::Values(Emulated()),
                                            ::testing::ValuesIn(AllDTypes())),
                         BackendVsCpuName);
INSTANTIATE_TEST_SUITE_P(Emulated, BackendVsCpuLabelsTest, ::testing::Values(Emulated()),
                         BackendName);

}  // namespace
}  // namespace tstat::testing
