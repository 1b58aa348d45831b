// GPU-only checks of the CUDA backend beyond the conformance suite: a batch of
// 10,000 tensors x 1,000 elements in a bounded number of kernel launches, and
// bitwise agreement with the CPU emulation (threads_per_block 256) when the
// data has the same address phase modulo 16 bytes; Enqueue/Collect on a
// caller stream; misaligned device pointers; buffer growth. Every test is
// SKIPPED without a device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/emulated_backend.h"
#include "tests/support/compare.h"
#include "tests/support/data.h"
#include "tstat/engine.h"

namespace tstat::testing {
namespace {

// Device bytes that mirror a host buffer (same length, copied in SetUp).
struct DeviceCopy {
  std::shared_ptr<void> base;
  unsigned char* data = nullptr;
};
DeviceCopy CopyToDevice(const void* host, std::size_t bytes) {
  DeviceCopy d;
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, bytes + 256), cudaSuccess);
  d.base = std::shared_ptr<void>(p, [](void* q) { (void)cudaFree(q); });
  // cudaMalloc is 256-aligned: keep the host address phase modulo 256.
  d.data = static_cast<unsigned char*>(p) + reinterpret_cast<std::uintptr_t>(host) % 256;
  EXPECT_EQ(cudaMemcpy(d.data, host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}

class GpuBatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    Result<std::unique_ptr<kernels::CudaBackend>> b = kernels::CudaBackend::Create(0);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    backend_ = std::move(b).value();
  }

  // The same requests with their tensors pointing into `device` instead of
  // `host_base` (same offsets).
  static std::vector<ReductionRequest> OnDevice(std::vector<ReductionRequest> requests,
                                                const void* host_base, unsigned char* device) {
    for (ReductionRequest& r : requests) {
      const auto offset = static_cast<const unsigned char*>(r.tensor.data) -
                          static_cast<const unsigned char*>(host_base);
      r.tensor.data = device + offset;
      r.tensor.space = MemorySpace::kCuda;
      r.tensor.device = 0;
    }
    return requests;
  }

  // Reduces on the GPU and in the emulator; every result bitwise equal.
  void ExpectBitwiseEqualToEmulator(const std::vector<ReductionRequest>& host_requests,
                                    const void* host_base, std::size_t bytes) {
    DeviceCopy d = CopyToDevice(host_base, bytes);
    const std::vector<ReductionRequest> device_requests =
        OnDevice(host_requests, host_base, d.data);
    std::vector<ReductionResult> gpu, emulated;
    const Status s = backend_->Reduce(device_requests, &gpu);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(kernels::CreateEmulatedCudaBackend(256)->Reduce(host_requests, &emulated).ok());
    ASSERT_EQ(gpu.size(), host_requests.size());
    for (std::size_t i = 0; i < gpu.size(); ++i) {
      ASSERT_TRUE(ResultsBitwiseEqual(gpu[i], emulated[i])) << "request " << i;
    }
  }

  std::unique_ptr<kernels::CudaBackend> backend_;
};

struct AlignedHost {
  explicit AlignedHost(std::size_t bytes)
      : data(static_cast<unsigned char*>(std::aligned_alloc(256, (bytes + 255) / 256 * 256))) {}
  ~AlignedHost() { std::free(data); }
  unsigned char* data;
};

TEST_F(GpuBatchTest, TenThousandTensorsInBoundedLaunchesMatchEmulatorBitwise) {
  constexpr int kTensors = 10000;
  constexpr std::int64_t kElems = 1000;
  const std::vector<double> values = GenerateValues(
      DType::kFloat32, kTensors * kElems, Distribution::Normal(0.5, 3.0), ValueMix::Specials(), 99);
  AlignedHost host(values.size() * sizeof(float));
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float f = static_cast<float>(values[i]);
    std::memcpy(host.data + 4 * i, &f, 4);
  }
  std::vector<ReductionRequest> requests;
  for (int i = 0; i < kTensors; ++i) {
    requests.push_back({TensorView::Host(host.data + 4 * kElems * i, DType::kFloat32, kElems), {}});
  }
  ExpectBitwiseEqualToEmulator(requests, host.data, values.size() * sizeof(float));
  EXPECT_EQ(backend_->last_kernel_launches(), 2);  // stats + merge for the whole batch

  for (ReductionRequest& r : requests) {  // every feature: still a bounded count
    r.options.linear_histogram.bins = 50;
    r.options.sample_count = 5;
  }
  ExpectBitwiseEqualToEmulator(requests, host.data, values.size() * sizeof(float));
  EXPECT_LE(backend_->last_kernel_launches(), 6);
}

TEST_F(GpuBatchTest, EveryFeatureAndDTypeMatchesEmulatorBitwise) {
  const std::vector<std::int64_t> shape = {1009, 997};
  const std::int64_t n = shape[0] * shape[1];
  std::vector<ReductionRequest> requests;
  AlignedHost host(static_cast<std::size_t>(n) * 8 * 9 + 4096);
  std::size_t offset = 0;
  std::uint64_t seed = 5;
  for (DType t : AllDTypes()) {
    const HostTensor h = GenerateDefaultTensor(t, n, ++seed, shape, 0);
    offset += 3;  // every tensor at a different phase, some element-misaligned
    std::memcpy(host.data + offset, h.data(), h.bytes());
    ReductionRequest r{TensorView::Host(host.data + offset, t, shape), {}};
    r.options.linear_histogram.bins = 1000;
    r.options.per_channel_axis = static_cast<int>(seed % 2);
    r.options.sample_count = 100;
    if (IsIntegerDType(t)) {
      ReductionRequest labels = r;
      labels.options = StatsOptions{};
      labels.options.label_classes = 77;
      requests.push_back(labels);
    }
    requests.push_back(r);
    offset += h.bytes();
  }
  ExpectBitwiseEqualToEmulator(requests, host.data, offset);
}

TEST_F(GpuBatchTest, EnqueueCollectOnACallerStream) {
  const HostTensor h = GenerateDefaultTensor(DType::kBFloat16, 500000, 3);
  DeviceCopy d = CopyToDevice(h.data(), h.bytes());
  ReductionRequest r{h.View(), {}};
  r.tensor.data = d.data;
  r.tensor.space = MemorySpace::kCuda;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_TRUE(backend_->Enqueue({r}, stream).ok());
  EXPECT_TRUE(backend_->pending());
  EXPECT_EQ(backend_->Enqueue({r}, stream).code(), StatusCode::kFailedPrecondition);
  std::vector<ReductionResult> on_stream, on_default;
  ASSERT_TRUE(backend_->Collect(&on_stream).ok());
  EXPECT_FALSE(backend_->pending());
  EXPECT_EQ(backend_->Collect(&on_stream).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(backend_->Reduce({r}, &on_default).ok());
  ASSERT_EQ(on_stream.size(), 1u);
  EXPECT_TRUE(ResultsBitwiseEqual(on_stream[0], on_default[0]));
  EXPECT_EQ(on_stream[0].stats.count, 500000u);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST_F(GpuBatchTest, MisalignedDevicePointersMatchEmulatorBitwise) {
  std::vector<ReductionRequest> requests;
  AlignedHost host(8 * 100000 + 64);
  const HostTensor h = GenerateDefaultTensor(DType::kFloat64, 100000, 8);
  std::memcpy(host.data, h.data(), h.bytes());
  for (std::size_t off : {1, 2, 3, 5, 7}) {
    requests.push_back({TensorView::Host(host.data + off, DType::kFloat32, 100000), {}});
    requests.push_back({TensorView::Host(host.data + off, DType::kFloat16, 100000), {}});
    requests.push_back({TensorView::Host(host.data + off, DType::kFloat64, 90000), {}});
    requests.back().options.sample_count = 33;
  }
  ExpectBitwiseEqualToEmulator(requests, host.data, 8 * 100000 + 64);
}

TEST_F(GpuBatchTest, HostTensorsAreRejectedAndBuffersGrow) {
  const HostTensor small = GenerateDefaultTensor(DType::kFloat32, 10, 1);
  std::vector<ReductionResult> results;
  ASSERT_TRUE(backend_->Reduce({{small.View(), {}}}, &results).ok());
  EXPECT_EQ(results[0].status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(results[0].status.message().find("tensor.space"), std::string::npos);
  for (std::int64_t n : {std::int64_t{1} << 10, std::int64_t{1} << 20, std::int64_t{1} << 25}) {
    const HostTensor h = GenerateDefaultTensor(DType::kFloat8E5M2, n, 2);
    std::vector<ReductionRequest> requests;
    for (int i = 0; i < 4; ++i) {
      requests.push_back({h.View(), {}});
      requests.back().options.linear_histogram.bins = 20000;  // global-atomic bins
    }
    ExpectBitwiseEqualToEmulator(requests, h.data(), h.bytes());
  }
}

}  // namespace
}  // namespace tstat::testing
