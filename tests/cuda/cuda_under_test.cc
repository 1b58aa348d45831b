// CudaUnderTest (cuda_under_test.h).
#include "tests/cuda/cuda_under_test.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tstat/engine.h"

namespace tstat::testing {

PlacedTensor PlaceOnDevice(const void* host, DType dtype, std::vector<std::int64_t> shape,
                           std::int64_t numel) {
  PlacedTensor p;
  p.view.dtype = dtype;
  p.view.shape = std::move(shape);
  p.view.numel = numel;
  p.view.space = MemorySpace::kCuda;
  p.view.device = 0;
  if (host == nullptr) return p;  // keep null data null (validation tests)
  const std::size_t bytes = static_cast<std::size_t>(numel) * DTypeSize(dtype);
  const std::size_t phase = reinterpret_cast<std::uintptr_t>(host) % 256;
  void* base = nullptr;
  if (cudaMalloc(&base, bytes + 256) != cudaSuccess) {
    ADD_FAILURE() << "cudaMalloc of " << bytes + 256 << " bytes failed";
    return p;
  }
  p.storage = std::shared_ptr<void>(base, [](void* q) { (void)cudaFree(q); });
  unsigned char* data = static_cast<unsigned char*>(base) + phase;
  if (bytes > 0 && cudaMemcpy(data, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
    ADD_FAILURE() << "cudaMemcpy of " << bytes << " bytes failed";
  }
  p.view.data = data;
  return p;
}

namespace {

// Stand-in returned when there is no device: the test is already marked
// skipped, so its body (the only caller) never runs.
class NoDeviceBackend final : public Backend {
 public:
  BackendKind kind() const override { return BackendKind::kCuda; }
  std::string description() const override { return "no CUDA device"; }
  Status Reduce(const std::vector<ReductionRequest>&, std::vector<ReductionResult>*,
                CUstream_st*) override {
    return Status::Unavailable("no CUDA device");
  }
};

void SkipWithoutDevice() { GTEST_SKIP() << "no CUDA device"; }

}  // namespace

BackendUnderTest CudaUnderTest() {
  BackendUnderTest b;
  b.name = "Cuda";
  b.make = []() -> std::unique_ptr<Backend> {
    if (CudaDeviceCount() == 0) {
      SkipWithoutDevice();
      return std::make_unique<NoDeviceBackend>();
    }
    Result<std::unique_ptr<Backend>> backend = CreateCudaBackend(0);
    if (!backend.ok()) {
      ADD_FAILURE() << backend.status().ToString();
      return std::make_unique<NoDeviceBackend>();
    }
    return std::move(backend).value();
  };
  b.place = PlaceOnDevice;
  return b;
}

}  // namespace tstat::testing
