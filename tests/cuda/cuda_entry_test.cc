// The CUDA entry points of tstat/engine.h in a CUDA build, with or without a
// device: BuiltWithCuda is true; without a device (or driver) CudaDeviceCount
// is 0 and CreateCudaBackend says kUnavailable, silently; with one, bad
// ordinals are rejected and the backend describes its device.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device_memory_check.h"
#include "tstat/engine.h"

namespace tstat {
namespace {

TEST(CudaEntryTest, BuiltWithCuda) { EXPECT_TRUE(BuiltWithCuda()); }

TEST(CudaEntryTest, DeviceDiscoveryNeverFailsOrPrints) {
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int count = CudaDeviceCount();
  Result<std::unique_ptr<Backend>> backend = CreateCudaBackend(0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_GE(count, 0);
  EXPECT_EQ(out, "");
  EXPECT_EQ(err, "");
  if (count == 0) {
    ASSERT_FALSE(backend.ok());
    EXPECT_EQ(backend.status().code(), StatusCode::kUnavailable) << backend.status().ToString();
    Result<std::unique_ptr<kernels::CudaBackend>> direct = kernels::CudaBackend::Create(0);
    ASSERT_FALSE(direct.ok());
    EXPECT_EQ(direct.status().code(), StatusCode::kInvalidArgument);
  } else {
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
    EXPECT_EQ(backend.value()->kind(), BackendKind::kCuda);
    EXPECT_EQ(backend.value()->description().rfind("cuda (", 0), 0u)
        << backend.value()->description();
  }
}

// Without a device every ordinal is kUnavailable; with one, out-of-range
// ordinals are kInvalidArgument naming the device.
// Pageable host memory is never CUDA memory: refused with or without a
// device (without one the driver knows no pointer at all); null and empty
// ranges read nothing and pass.
TEST(CudaEntryTest, MemoryCheckRefusesHostMemoryWithOrWithoutADevice) {
  std::vector<float> host(16, 1.0f);
  kernels::DeviceMemoryCheck check;
  const Status s = check.Check(host.data(), host.size() * sizeof(float), 0);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ(s.message().rfind("tensor.data 0x", 0), 0u) << s.ToString();
  const Status named = check.Check(host.data(), 4, 0, "options.delta.previous");
  EXPECT_EQ(named.message().rfind("options.delta.previous 0x", 0), 0u) << named.ToString();
  EXPECT_TRUE(check.Check(nullptr, 64, 0).ok());
  EXPECT_TRUE(check.Check(host.data(), 0, 0).ok());
  EXPECT_EQ(check.queries(), 2u);
}

TEST(CudaEntryTest, BadOrdinalsAreRejected) {
  const int count = CudaDeviceCount();
  for (int device : {-1, count}) {
    Result<std::unique_ptr<Backend>> backend = CreateCudaBackend(device);
    ASSERT_FALSE(backend.ok());
    EXPECT_EQ(backend.status().code(),
              count == 0 ? StatusCode::kUnavailable : StatusCode::kInvalidArgument);
    EXPECT_NE(backend.status().message().find("device"), std::string::npos);
  }
}

}  // namespace
}  // namespace tstat
