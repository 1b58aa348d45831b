// The engine's shared decoders (kernels/dtype_decode.h) against the
// independent ones of tests/support, for every bit pattern.
#include "kernels/dtype_decode.h"

#include <cmath>
#include <cstdint>

#include <gtest/gtest.h>

#include "tests/support/data.h"

namespace tstat::testing {
namespace {

// Same value, NaN matching NaN of the same sign, and -0 distinct from +0.
::testing::AssertionResult SameBits(double got, double want, unsigned pattern) {
  const bool same = std::isnan(want) ? std::isnan(got) && std::signbit(got) == std::signbit(want)
                                     : got == want && std::signbit(got) == std::signbit(want);
  if (same) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "pattern 0x" << std::hex << pattern << ": got " << got
                                       << ", want " << want;
}

TEST(DTypeDecodeTest, HalfMatchesForEveryPattern) {
  for (unsigned b = 0; b < 0x10000; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    ASSERT_TRUE(SameBits(kernels::HalfToFloat(h), DecodeF16(h), b));
  }
}

TEST(DTypeDecodeTest, BFloat16MatchesForEveryPattern) {
  for (unsigned b = 0; b < 0x10000; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    ASSERT_TRUE(SameBits(kernels::BFloat16ToFloat(h), DecodeBF16(h), b));
  }
}

TEST(DTypeDecodeTest, Fp8MatchesForEveryPattern) {
  for (unsigned b = 0; b < 0x100; ++b) {
    const auto q = static_cast<std::uint8_t>(b);
    EXPECT_TRUE(SameBits(kernels::Fp8E4M3ToFloat(q), DecodeF8E4M3(q), b));
    EXPECT_TRUE(SameBits(kernels::Fp8E5M2ToFloat(q), DecodeF8E5M2(q), b));
  }
}

}  // namespace
}  // namespace tstat::testing
