// The CUDA backend against the CPU backend on the same data
// (tests/kernels/vs_cpu_suite.h): every dtype (fp8 and the integer label types
// included), every tail and alignment. Without a device every test reports
// SKIPPED.
#include <gtest/gtest.h>

#include "tests/cuda/cuda_under_test.h"
#include "tests/kernels/vs_cpu_suite.h"
#include "tests/support/data.h"

namespace tstat::testing {
namespace {

INSTANTIATE_TEST_SUITE_P(Gpu, BackendVsCpuTest,
                         ::testing::Combine(::testing::Values(CudaUnderTest()),
                                            ::testing::ValuesIn(AllDTypes())),
                         BackendVsCpuName);
INSTANTIATE_TEST_SUITE_P(Gpu, BackendVsCpuLabelsTest, ::testing::Values(CudaUnderTest()),
                         BackendName);

}  // namespace
}  // namespace tstat::testing
