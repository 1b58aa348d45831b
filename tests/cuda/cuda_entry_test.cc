// The CUDA entry points of tstat/engine.h in a CUDA build, with or without a
// device: BuiltWithCuda is true; without a device (or driver) CudaDeviceCount
// is 0 and CreateCudaBackend says kUnavailable, silently; with one, bad
// ordinals are rejected and the backend describes its device.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "kernels/cuda/cuda_backend.h"
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
