// Tests of the test-data encoders, decoders and generators against
// hand-computed bit patterns and format facts.
#include "tests/support/data.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

#include <gtest/gtest.h>

namespace tstat::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(EncodeF16Test, HandComputedPatterns) {
  EXPECT_EQ(EncodeF16(1.0), 0x3C00);
  EXPECT_EQ(EncodeF16(-2.0), 0xC000);
  EXPECT_EQ(EncodeF16(65504.0), 0x7BFF);              // max finite
  EXPECT_EQ(EncodeF16(65519.99), 0x7BFF);             // below the rounding midpoint
  EXPECT_EQ(EncodeF16(65520.0), 0x7C00);              // midpoint, ties to even -> Inf
  EXPECT_EQ(EncodeF16(std::ldexp(1.0, -24)), 0x0001); // smallest subnormal
  EXPECT_EQ(EncodeF16(std::ldexp(1.0, -25)), 0x0000); // half of it: tie to even 0
  EXPECT_EQ(EncodeF16(std::ldexp(1.0 + std::ldexp(1.0, -30), -25)), 0x0001);
  EXPECT_EQ(EncodeF16(3 * std::ldexp(1.0, -25)), 0x0002);  // 1.5 ulp: tie to even 2
  EXPECT_EQ(EncodeF16(std::ldexp(1.0, -14)), 0x0400);      // min normal
  EXPECT_EQ(EncodeF16(1023 * std::ldexp(1.0, -24)), 0x03FF);  // largest subnormal
  EXPECT_EQ(EncodeF16(1.0 + std::ldexp(1.0, -11)), 0x3C00);     // tie to even (down)
  EXPECT_EQ(EncodeF16(1.0 + 3 * std::ldexp(1.0, -11)), 0x3C02); // tie to even (up)
  EXPECT_EQ(EncodeF16(-0.0), 0x8000);
  EXPECT_EQ(EncodeF16(0.0), 0x0000);
  EXPECT_EQ(EncodeF16(0.1), 0x2E66);
  EXPECT_EQ(EncodeF16(1.0 / 3.0), 0x3555);
  EXPECT_EQ(EncodeF16(-0.97), 0xBBC3);
  EXPECT_EQ(EncodeF16(kInf), 0x7C00);
  EXPECT_EQ(EncodeF16(-kInf), 0xFC00);
  EXPECT_EQ(EncodeF16(kNaN), 0x7E00);
  EXPECT_EQ(EncodeF16(-kNaN), 0xFE00);
  EXPECT_EQ(EncodeF16(1e-30), 0x0000);
  EXPECT_EQ(EncodeF16(-1e30), 0xFC00);
}

TEST(EncodeBF16Test, HandComputedPatterns) {
  EXPECT_EQ(EncodeBF16(1.0), 0x3F80);
  EXPECT_EQ(EncodeBF16(-1.0), 0xBF80);
  EXPECT_EQ(EncodeBF16(3.3895313892515355e38), 0x7F7F);  // max finite
  EXPECT_EQ(EncodeBF16(3.4e38), 0x7F80);                  // past the midpoint -> Inf
  EXPECT_EQ(EncodeBF16(1e39), 0x7F80);
  EXPECT_EQ(EncodeBF16(std::ldexp(1.0, -133)), 0x0001);   // smallest subnormal
  EXPECT_EQ(EncodeBF16(std::ldexp(1.0, -126)), 0x0080);   // min normal
  EXPECT_EQ(EncodeBF16(1.0 + std::ldexp(1.0, -8)), 0x3F80);      // tie to even (down)
  EXPECT_EQ(EncodeBF16(1.0 + 3 * std::ldexp(1.0, -8)), 0x3F82);  // tie to even (up)
  // Just above the midpoint: must round up. Going through float first would
  // round to the midpoint and then down (double rounding).
  EXPECT_EQ(EncodeBF16(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)), 0x3F81);
  EXPECT_EQ(EncodeBF16(0.1), 0x3DCD);
  EXPECT_EQ(EncodeBF16(-0.0), 0x8000);
  EXPECT_EQ(EncodeBF16(kInf), 0x7F80);
  EXPECT_EQ(EncodeBF16(-kInf), 0xFF80);
  EXPECT_EQ(EncodeBF16(kNaN), 0x7FC0);
}

TEST(EncodeF8E4M3Test, HandComputedPatterns) {
  EXPECT_EQ(EncodeF8E4M3(448.0), 0x7E);   // max finite S.1111.110
  EXPECT_EQ(EncodeF8E4M3(-448.0), 0xFE);
  EXPECT_EQ(EncodeF8E4M3(1.0), 0x38);     // exponent 7 (bias 7)
  EXPECT_EQ(EncodeF8E4M3(256.0), 0x78);   // S.1111.000 is finite in e4m3
  EXPECT_EQ(EncodeF8E4M3(240.0), 0x77);
  EXPECT_EQ(EncodeF8E4M3(std::ldexp(1.0, -9)), 0x01);   // smallest subnormal
  EXPECT_EQ(EncodeF8E4M3(7 * std::ldexp(1.0, -9)), 0x07);  // largest subnormal
  EXPECT_EQ(EncodeF8E4M3(std::ldexp(1.0, -6)), 0x08);   // min normal
  EXPECT_EQ(EncodeF8E4M3(std::ldexp(1.0, -10)), 0x00);  // tie to even 0
  EXPECT_EQ(EncodeF8E4M3(3 * std::ldexp(1.0, -10)), 0x02);
  EXPECT_EQ(EncodeF8E4M3(0.3), 0x2A);     // 0.3125
  EXPECT_EQ(EncodeF8E4M3(-0.0), 0x80);
  EXPECT_EQ(EncodeF8E4M3(464.0), 0x7E);   // midpoint 448/480: ties to even 448
  // Overflow: NaN by default (non-saturating), max when saturating.
  EXPECT_EQ(EncodeF8E4M3(465.0), 0x7F);
  EXPECT_EQ(EncodeF8E4M3(465.0, Fp8Overflow::kSaturate), 0x7E);
  EXPECT_EQ(EncodeF8E4M3(-1e9, Fp8Overflow::kSaturate), 0xFE);
  EXPECT_EQ(EncodeF8E4M3(kInf), 0x7F);
  EXPECT_EQ(EncodeF8E4M3(-kInf), 0xFF);
  EXPECT_EQ(EncodeF8E4M3(kInf, Fp8Overflow::kSaturate), 0x7E);
  EXPECT_EQ(EncodeF8E4M3(kNaN), 0x7F);
  EXPECT_EQ(EncodeF8E4M3(kNaN, Fp8Overflow::kSaturate), 0x7F);
}

TEST(EncodeF8E5M2Test, HandComputedPatterns) {
  EXPECT_EQ(EncodeF8E5M2(57344.0), 0x7B);  // max finite
  EXPECT_EQ(EncodeF8E5M2(61439.0), 0x7B);
  EXPECT_EQ(EncodeF8E5M2(61440.0), 0x7C);  // midpoint, ties to even -> Inf
  EXPECT_EQ(EncodeF8E5M2(1e6, Fp8Overflow::kSaturate), 0x7B);
  EXPECT_EQ(EncodeF8E5M2(1.0), 0x3C);
  EXPECT_EQ(EncodeF8E5M2(1.25), 0x3D);
  EXPECT_EQ(EncodeF8E5M2(1.125), 0x3C);    // tie to even (down)
  EXPECT_EQ(EncodeF8E5M2(1.375), 0x3E);    // tie to even (up)
  EXPECT_EQ(EncodeF8E5M2(std::ldexp(1.0, -16)), 0x01);
  EXPECT_EQ(EncodeF8E5M2(std::ldexp(1.0, -14)), 0x04);
  EXPECT_EQ(EncodeF8E5M2(-0.0), 0x80);
  EXPECT_EQ(EncodeF8E5M2(kInf), 0x7C);
  EXPECT_EQ(EncodeF8E5M2(-kInf), 0xFC);
  EXPECT_EQ(EncodeF8E5M2(kNaN), 0x7E);
}

TEST(DecodeTest, HandComputedValues) {
  EXPECT_EQ(DecodeF16(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(DecodeF16(0x03FF), 1023 * std::ldexp(1.0, -24));
  EXPECT_EQ(DecodeF16(0x7BFF), 65504.0);
  EXPECT_EQ(DecodeF16(0x3555), 0.333251953125);
  EXPECT_EQ(DecodeF16(0x7C00), kInf);
  EXPECT_EQ(DecodeF16(0xFC00), -kInf);
  EXPECT_TRUE(std::isnan(DecodeF16(0x7C01)));
  EXPECT_TRUE(std::isnan(DecodeF16(0xFE00)));
  EXPECT_TRUE(std::signbit(DecodeF16(0x8000)));
  EXPECT_EQ(DecodeF16(0x8000), 0.0);

  EXPECT_EQ(DecodeBF16(0x7F7F), 3.3895313892515355e38);
  EXPECT_EQ(DecodeBF16(0x0001), std::ldexp(1.0, -133));
  EXPECT_EQ(DecodeBF16(0x3F80), 1.0);
  EXPECT_EQ(DecodeBF16(0xFF80), -kInf);
  EXPECT_TRUE(std::isnan(DecodeBF16(0x7FC0)));

  EXPECT_EQ(DecodeF8E4M3(0x7E), 448.0);
  EXPECT_EQ(DecodeF8E4M3(0xFE), -448.0);
  EXPECT_EQ(DecodeF8E4M3(0x78), 256.0);
  EXPECT_EQ(DecodeF8E4M3(0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(DecodeF8E4M3(0x38), 1.0);
  EXPECT_TRUE(std::isnan(DecodeF8E4M3(0x7F)));
  EXPECT_TRUE(std::isnan(DecodeF8E4M3(0xFF)));
  EXPECT_TRUE(std::signbit(DecodeF8E4M3(0x80)));

  EXPECT_EQ(DecodeF8E5M2(0x7B), 57344.0);
  EXPECT_EQ(DecodeF8E5M2(0x7C), kInf);
  EXPECT_EQ(DecodeF8E5M2(0xFC), -kInf);
  EXPECT_EQ(DecodeF8E5M2(0x01), std::ldexp(1.0, -16));
  EXPECT_TRUE(std::isnan(DecodeF8E5M2(0x7D)));
  EXPECT_TRUE(std::isnan(DecodeF8E5M2(0xFF)));
}

// Every non-NaN pattern survives decode -> encode; NaN patterns decode to NaN.
TEST(DecodeTest, EveryPatternRoundTrips) {
  int nan16 = 0, nanbf = 0, nan_e4 = 0, nan_e5 = 0;
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    const double f = DecodeF16(h);
    if (std::isnan(f)) ++nan16; else ASSERT_EQ(EncodeF16(f), h) << std::hex << b;
    const double g = DecodeBF16(h);
    if (std::isnan(g)) ++nanbf; else ASSERT_EQ(EncodeBF16(g), h) << std::hex << b;
  }
  for (std::uint32_t b = 0; b < 0x100; ++b) {
    const auto q = static_cast<std::uint8_t>(b);
    const double e4 = DecodeF8E4M3(q);
    if (std::isnan(e4)) ++nan_e4; else ASSERT_EQ(EncodeF8E4M3(e4), q) << std::hex << b;
    const double e5 = DecodeF8E5M2(q);
    if (std::isnan(e5)) ++nan_e5; else ASSERT_EQ(EncodeF8E5M2(e5), q) << std::hex << b;
  }
  EXPECT_EQ(nan16, 2 * 1023);  // exponent all ones, fraction non-zero, both signs
  EXPECT_EQ(nanbf, 2 * 127);
  EXPECT_EQ(nan_e4, 2);        // S.1111.111 only
  EXPECT_EQ(nan_e5, 2 * 3);
}

// Round to nearest: no neighbouring pattern is closer to x than the result,
// and on a tie the result's last bit is 0.
TEST(EncodeF16Test, RoundsToNearestEven) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> expo(-27, 16);
  for (int i = 0; i < 100000; ++i) {
    const double x = std::ldexp(mant(rng), expo(rng));
    const std::uint16_t h = EncodeF16(x);
    const double v = DecodeF16(h);
    if (std::isinf(v)) {
      EXPECT_GE(x, 65520.0);
      continue;
    }
    const double err = std::fabs(v - x);
    for (int d : {-1, 1}) {
      const int nb = static_cast<int>(h) + d;
      if (nb < 0 || nb >= 0x7C00) continue;
      const double other = std::fabs(DecodeF16(static_cast<std::uint16_t>(nb)) - x);
      ASSERT_LE(err, other) << x;
      if (err == other) {
        ASSERT_EQ(h & 1, 0) << x;
      }
    }
  }
}

TEST(DTypeFactsTest, FormatConstants) {
  EXPECT_EQ(MaxFinite(DType::kFloat16), 65504.0);
  EXPECT_EQ(MinNormal(DType::kFloat16), std::ldexp(1.0, -14));
  EXPECT_EQ(MinSubnormal(DType::kFloat16), std::ldexp(1.0, -24));
  EXPECT_EQ(MaxFinite(DType::kBFloat16), DecodeBF16(0x7F7F));
  EXPECT_EQ(MinSubnormal(DType::kBFloat16), std::ldexp(1.0, -133));
  EXPECT_EQ(MaxFinite(DType::kFloat8E4M3), 448.0);
  EXPECT_EQ(MinNormal(DType::kFloat8E4M3), 0.015625);
  EXPECT_EQ(MinSubnormal(DType::kFloat8E4M3), std::ldexp(1.0, -9));
  EXPECT_EQ(MaxFinite(DType::kFloat8E5M2), 57344.0);
  EXPECT_EQ(MinSubnormal(DType::kFloat8E5M2), std::ldexp(1.0, -16));
  EXPECT_EQ(MaxFinite(DType::kFloat32), static_cast<double>(std::numeric_limits<float>::max()));
  EXPECT_EQ(MinNormal(DType::kFloat32), static_cast<double>(std::numeric_limits<float>::min()));
  EXPECT_EQ(MinSubnormal(DType::kFloat32),
            static_cast<double>(std::numeric_limits<float>::denorm_min()));
  EXPECT_EQ(MinNormal(DType::kFloat64), std::numeric_limits<double>::min());
  EXPECT_EQ(MinSubnormal(DType::kFloat64), std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(MinNormal(DType::kInt32), 0.0);
  EXPECT_EQ(AllDTypes().size(), 9u);
  EXPECT_EQ(FloatDTypes().size(), 6u);
  EXPECT_EQ(IntegerDTypes().size(), 3u);
}

TEST(DecodeElementTest, AnyAlignmentAndIntegers) {
  HostTensor t = MakeIntegerTensor(DType::kInt64, {-5, (std::int64_t{1} << 53) + 1, 7}, {}, 3);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data()) % 64, 3u);
  EXPECT_EQ(t.Value(0), -5.0);
  EXPECT_EQ(t.Value(1), 9007199254740992.0);  // converted to double: rounds
  EXPECT_EQ(DecodeIntegerElement(t.data(), DType::kInt64, 1), (std::int64_t{1} << 53) + 1);
  HostTensor u = MakeTensor(DType::kUInt8, {0, 255, 300, -4, 7.5});
  EXPECT_EQ(u.Value(0), 0.0);
  EXPECT_EQ(u.Value(1), 255.0);
  EXPECT_EQ(u.Value(2), 255.0);  // clamped
  EXPECT_EQ(u.Value(3), 0.0);
  EXPECT_EQ(u.Value(4), 8.0);    // half away from zero
  HostTensor f = MakeTensor(DType::kFloat32, {1.5, -2.25}, {}, 1);
  EXPECT_EQ(f.Value(0), 1.5);
  EXPECT_EQ(f.Value(1), -2.25);
  HostTensor b = MakeBitsTensor(DType::kFloat16, {0x3C00, 0xFC00}, {}, 5);
  EXPECT_EQ(b.Value(0), 1.0);
  EXPECT_EQ(b.Value(1), -kInf);
  HostTensor moved = WithOffset(b, 0);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(moved.data()) % 64, 0u);
  EXPECT_EQ(moved.Value(1), -kInf);
}

TEST(GeneratorTest, SeededAndFollowsTheMix) {
  ValueMix mix;
  mix.nan = 0.02;
  mix.pos_inf = 0.01;
  mix.neg_inf = 0.01;
  mix.pos_zero = 0.03;
  mix.neg_zero = 0.03;
  mix.subnormal = 0.05;
  const std::int64_t n = 200000;
  for (DType t : FloatDTypes()) {
    SCOPED_TRACE(DTypeLabel(t));
    const auto a = GenerateValues(t, n, Distribution::Normal(1.0, 3.0), mix, 11);
    const auto b = GenerateValues(t, n, Distribution::Normal(1.0, 3.0), mix, 11);
    const auto c = GenerateValues(t, n, Distribution::Normal(1.0, 3.0), mix, 12);
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(double)));
    EXPECT_NE(0, std::memcmp(a.data(), c.data(), a.size() * sizeof(double)));
    HostTensor tensor = MakeTensor(t, a);
    std::int64_t nan = 0, pinf = 0, ninf = 0, pz = 0, nz = 0, sub = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const double v = tensor.Value(i);
      if (std::isnan(v)) ++nan;
      else if (v == kInf) ++pinf;
      else if (v == -kInf) ++ninf;
      else if (v == 0) (std::signbit(v) ? nz : pz) += 1;
      else if (std::fabs(v) < MinNormal(t)) ++sub;
    }
    // Binomial counts: 6 sigma windows. e4m3 has no Inf: Inf encodes as NaN.
    const auto near = [&](std::int64_t got, double rate) {
      const double mu = rate * n, sd = std::sqrt(n * rate * (1 - rate));
      return std::fabs(static_cast<double>(got) - mu) <= 6 * sd + 1;
    };
    if (t == DType::kFloat8E4M3) {
      EXPECT_TRUE(near(nan, 0.04)) << nan;
      EXPECT_EQ(pinf + ninf, 0);
    } else {
      EXPECT_TRUE(near(nan, 0.02)) << nan;
      EXPECT_TRUE(near(pinf, 0.01)) << pinf;
      EXPECT_TRUE(near(ninf, 0.01)) << ninf;
    }
    EXPECT_GE(pz, 0.03 * n * 0.9);  // plus values that round to zero
    EXPECT_TRUE(near(nz, 0.03)) << nz;
    // Subnormal draws are exact subnormals; narrow types add a few rounded ones.
    EXPECT_GE(sub, 0.05 * n * 0.9);
    EXPECT_LE(sub, 0.05 * n * 1.1 + 0.002 * n);
  }
}

TEST(GeneratorTest, NormalMomentsAndUniformRange) {
  const std::int64_t n = 400000;
  const auto v = GenerateValues(DType::kFloat64, n, Distribution::Normal(5.0, 2.0), {}, 3);
  long double s = 0, s2 = 0;
  for (double x : v) s += x;
  const long double mean = s / n;
  for (double x : v) s2 += (x - mean) * (x - mean);
  EXPECT_NEAR(static_cast<double>(mean), 5.0, 0.02);
  EXPECT_NEAR(std::sqrt(static_cast<double>(s2 / n)), 2.0, 0.02);
  const auto u = GenerateValues(DType::kFloat32, n, Distribution::Uniform(-3.0, 1.0), {}, 3);
  for (double x : u) {
    ASSERT_GE(x, -3.0);
    ASSERT_LT(x, 1.0);
  }
  // Draws beyond the dtype's range are clamped to it (no accidental Inf/NaN).
  const auto big = GenerateValues(DType::kFloat8E4M3, 1000, Distribution::Normal(0, 1e4), {}, 3);
  HostTensor t = MakeTensor(DType::kFloat8E4M3, big);
  for (std::int64_t i = 0; i < t.numel(); ++i) ASSERT_LE(std::fabs(t.Value(i)), 448.0);
}

TEST(GeneratorTest, DefaultTensorsCoverTheirDTypes) {
  for (DType t : AllDTypes()) {
    SCOPED_TRACE(DTypeLabel(t));
    HostTensor a = GenerateDefaultTensor(t, 5000, 9, {50, 100}, 7);
    EXPECT_EQ(a.numel(), 5000);
    EXPECT_EQ(a.shape(), (std::vector<std::int64_t>{50, 100}));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data()) % 64, 7u);
    HostTensor b = GenerateDefaultTensor(t, 5000, 9);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.bytes()));
    int distinct_signs = 0;
    bool neg = false, pos = false;
    for (std::int64_t i = 0; i < a.numel(); ++i) {
      neg |= a.Value(i) < 0;
      pos |= a.Value(i) > 0;
    }
    distinct_signs = static_cast<int>(neg) + static_cast<int>(pos);
    EXPECT_EQ(distinct_signs, t == DType::kUInt8 ? 1 : 2);
  }
}

TEST(QuickModeTest, OnUnderAddressSanitizerOrByEnvironment) {
#if defined(__SANITIZE_ADDRESS__)
  EXPECT_TRUE(QuickMode());
#else
  const char* env = std::getenv("TSTAT_TEST_QUICK");
  EXPECT_EQ(QuickMode(), env != nullptr && env[0] != '\0' && env[0] != '0');
#endif
}

}  // namespace
}  // namespace tstat::testing
