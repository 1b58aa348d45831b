// Bad input on the device never faults the GPU: memory the device cannot read
// (pageable host memory registered as CUDA memory, a freed allocation, a
// range past the end of its allocation, another GPU's memory) gives that
// request an error naming the cause while the rest of the batch is reduced,
// and an out-of-memory device gives a Status; afterwards the device and the
// backend keep working. Through a Session, the tensor's stats or raw snapshot
// becomes a drop record naming the cause. Every test reports SKIPPED without a
// device (the other-device test without two).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "tests/host/host_test_util.h"
#include "tests/support/data.h"
#include "tstat/engine.h"
#include "tstat/session.h"
#include "tstat/trial.h"

namespace tstat::testing {
namespace {

cudaError_t DeviceMalloc(float** p, std::size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}

TensorView CudaView(const void* p, std::int64_t n, int device = 0) {
  TensorView v = TensorView::Host(p, DType::kFloat32, n);
  v.space = MemorySpace::kCuda;
  v.device = device;
  return v;
}

// Device memory holding `values`, freed on destruction.
struct DeviceFloats {
  float* data = nullptr;
  explicit DeviceFloats(const std::vector<float>& values) {
    EXPECT_EQ(DeviceMalloc(&data, values.size() * sizeof(float)), cudaSuccess);
    EXPECT_EQ(
        cudaMemcpy(data, values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice),
        cudaSuccess);
  }
  ~DeviceFloats() { (void)cudaFree(data); }
};

class GpuBadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    Result<std::unique_ptr<kernels::CudaBackend>> b = kernels::CudaBackend::Create(0);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    backend_ = std::move(b).value();
    good_ = std::make_unique<DeviceFloats>(std::vector<float>{1.0f, -2.0f, 3.5f, 0.0f});
  }

  // Reduces `bad` between two good requests: the bad one fails with a message
  // containing `cause`, the good ones are exact, the device has no error.
  // The good tensor was allocated in SetUp: an allocation made after a test
  // freed memory could reuse the freed address and make it valid again.
  void ExpectRejectedAlone(const ReductionRequest& bad, const std::string& cause) {
    const ReductionRequest ok{CudaView(good_->data, 4), {}};
    std::vector<ReductionResult> results;
    ASSERT_TRUE(backend_->Reduce({ok, bad, ok}, &results).ok());
    ASSERT_EQ(results.size(), 3u);
    EXPECT_EQ(results[1].status.code(), StatusCode::kInvalidArgument)
        << results[1].status.ToString();
    EXPECT_NE(results[1].status.message().find(cause), std::string::npos)
        << results[1].status.ToString();
    for (int i : {0, 2}) {
      ASSERT_TRUE(results[i].status.ok()) << results[i].status.ToString();
      EXPECT_EQ(results[i].stats.count, 4u);
      EXPECT_EQ(results[i].stats.min, -2.0);
      EXPECT_EQ(results[i].stats.max, 3.5);
    }
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }

  std::unique_ptr<kernels::CudaBackend> backend_;
  std::unique_ptr<DeviceFloats> good_;
};

// An address that was device memory and is no longer. Large, so that the
// small allocations made later (by tstat or the test) come from other pools
// and do not make it valid again.
// An address in the middle of a freed 256 MiB allocation. Not its start: the
// driver hands the lowest free addresses to the next small allocations (a
// session's delta slots, say), and after earlier tests freed everything the
// start of the block was reused within a step, making the "freed" tensor live.
float* FreedDeviceAddress() {
  float* p = nullptr;
  EXPECT_EQ(DeviceMalloc(&p, std::size_t{256} << 20), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  return p + (std::size_t{128} << 20) / sizeof(float);
}

TEST_F(GpuBadInputTest, PageableHostMemoryRegisteredAsDeviceMemory) {
  std::vector<float> host(1000, 1.0f);
  ExpectRejectedAlone({CudaView(host.data(), 1000), {}}, "pageable host memory");
}

TEST_F(GpuBadInputTest, TensorFreedBeforeItsReduction) {
  ExpectRejectedAlone({CudaView(FreedDeviceAddress(), 4096), {}}, "freed");
}

TEST_F(GpuBadInputTest, RangePastTheEndOfItsAllocation) {
  DeviceFloats d(std::vector<float>(1000, 2.0f));
  // cudaMalloc rounds up (2 MiB granules); 4M floats are well past that.
  ExpectRejectedAlone({CudaView(d.data, std::int64_t{4} << 20), {}}, "runs past the end");
}

TEST_F(GpuBadInputTest, FreedPreviousValuesOfADelta) {
  DeviceFloats d(std::vector<float>(256, 2.0f));
  ReductionRequest r{CudaView(d.data, 256), {}};
  r.options.delta.previous = FreedDeviceAddress();
  ExpectRejectedAlone(r, "options.delta.previous");
}

TEST_F(GpuBadInputTest, PinnedHostMemoryIsReadable) {
  float* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 64 * sizeof(float)), cudaSuccess);
  for (int i = 0; i < 64; ++i) pinned[i] = static_cast<float>(i) - 10.0f;
  std::vector<ReductionResult> results;
  ASSERT_TRUE(backend_->Reduce({{CudaView(pinned, 64), {}}}, &results).ok());
  ASSERT_TRUE(results[0].status.ok()) << results[0].status.ToString();
  EXPECT_EQ(results[0].stats.min, -10.0);
  EXPECT_EQ(results[0].stats.max, 53.0);
  (void)cudaFreeHost(pinned);
}

TEST_F(GpuBadInputTest, MemoryOfAnotherDevice) {
  if (CudaDeviceCount() < 2) GTEST_SKIP() << "needs two CUDA devices";
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  float* p = nullptr;
  ASSERT_EQ(DeviceMalloc(&p, 1024 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ExpectRejectedAlone({CudaView(p, 1024, 0), {}}, "memory of CUDA device 1");
  (void)cudaFree(p);
}

// The device's memory is taken (by this process) until the backend cannot
// grow its workspace: the batch fails with a Status, and once memory is free
// again the same batch is reduced.
TEST_F(GpuBadInputTest, OutOfDeviceMemoryIsAStatus) {
  DeviceFloats small(std::vector<float>(16, 1.0f));
  // 100,000 requests of 4,096 linear bins need a ~3 GiB workspace.
  std::vector<ReductionRequest> batch(100000, {CudaView(small.data, 16), {}});
  for (ReductionRequest& r : batch) r.options.linear_histogram.bins = 4096;
  std::vector<void*> hog;
  for (std::size_t chunk : {std::size_t{1} << 30, std::size_t{64} << 20, std::size_t{1} << 20}) {
    void* p = nullptr;
    while (cudaMalloc(&p, chunk) == cudaSuccess) hog.push_back(p);
    (void)cudaGetLastError();
  }
  ASSERT_FALSE(hog.empty());
  std::vector<ReductionResult> results;
  const Status full = backend_->Reduce(batch, &results);
  for (void* p : hog) (void)cudaFree(p);
  EXPECT_FALSE(full.ok());
  EXPECT_NE(full.message().find("memory"), std::string::npos) << full.ToString();
  ASSERT_EQ(results.size(), batch.size());
  EXPECT_EQ(results[0].status.code(), full.code());
  // The device is healthy and the backend usable.
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const Status s = backend_->Reduce(batch, &results);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(results.size(), batch.size());
  EXPECT_TRUE(results.back().status.ok()) << results.back().status.ToString();
  EXPECT_EQ(results.back().stats.count, 16u);
}

// Through a session: a registered CUDA tensor that points to host memory and
// one that was freed become drop records naming the cause (stats and raw);
// the good tensor is captured at every step.
TEST_F(GpuBadInputTest, SessionDropsUnreadableTensorsAndKeepsTheRest) {
  TempDir dir;
  SessionConfig config;
  config.out_dir = dir.path() + "/run";
  config.save_config = SaveConfig::Every(1);  // the default interval (100) saves only step 0
  config.raw_save_config = SaveConfig::Every(1);
  Result<std::unique_ptr<Session>> session = Session::Create(config);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  DeviceFloats good(std::vector<float>(100, 0.5f));
  std::vector<float> host(100, 1.0f);
  float* freed = FreedDeviceAddress();
  Session& s = **session;
  ASSERT_TRUE(s.RegisterTensor({"good.weight", CudaView(good.data, 100), {"weights"}}).ok());
  ASSERT_TRUE(s.RegisterTensor({"host.weight", CudaView(host.data(), 100), {"weights"}}).ok());
  ASSERT_TRUE(s.RegisterTensor({"freed.weight", CudaView(freed, 100), {"weights"}}).ok());
  for (int step = 0; step < 3; ++step) EXPECT_TRUE(s.EndStep().ok());
  ASSERT_TRUE(s.Close().ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  Result<std::unique_ptr<Trial>> trial = Trial::Open(config.out_dir);
  ASSERT_TRUE(trial.ok()) << trial.status().ToString();
  EXPECT_EQ((*trial)->steps().size(), 3u);
  EXPECT_TRUE((*trial)->stats("good.weight", 2).ok());
  EXPECT_FALSE((*trial)->stats("host.weight", 2).ok());
  // Both bad tensors, stats and raw, at every step; the driver cannot tell
  // freed device memory from host memory, so both get the same cause.
  int stats_drops = 0, raw_drops = 0;
  std::string all_drops;  // printed when a count is off
  for (const DropRecord& d : (*trial)->drops()) {
    all_drops += "tensor " + std::to_string(d.tensor_id) + " " + d.kind + ": " + d.reason + "\n";
    if (d.reason.find("is not CUDA memory") == std::string::npos) continue;
    if (d.kind == "stats") ++stats_drops;
    if (d.kind == "raw") ++raw_drops;
  }
  EXPECT_EQ(stats_drops, 6) << all_drops;
  EXPECT_EQ(raw_drops, 6) << all_drops;
  EXPECT_TRUE((*trial)->raw("good.weight", 2).ok());
}

}  // namespace
}  // namespace tstat::testing
