// The CUDA backend through the backend conformance suite
// (tests/kernels/backend_conformance.h). Without a device every test reports
// SKIPPED.
#include <gtest/gtest.h>

#include "tests/cuda/cuda_under_test.h"
#include "tests/kernels/backend_conformance.h"

namespace tstat::testing {
namespace {

INSTANTIATE_TEST_SUITE_P(Gpu, BackendConformanceTest, ::testing::Values(CudaUnderTest()),
                         BackendName);

}  // namespace
}  // namespace tstat::testing
