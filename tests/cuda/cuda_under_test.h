// The CUDA backend on device 0 as a BackendUnderTest (for the backend-
// independent suites in tests/kernels/): tensors are copied to device memory
// (cudaMalloc + cudaMemcpy) at the host copy's address phase modulo 256 bytes,
// so misaligned starts stay misaligned. Without a device, make() marks the
// running test SKIPPED and returns a backend that reduces nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "tests/support/backend_under_test.h"

namespace tstat::testing {

PlacedTensor PlaceOnDevice(const void* host, DType dtype, std::vector<std::int64_t> shape,
                           std::int64_t numel);

BackendUnderTest CudaUnderTest();

}  // namespace tstat::testing
