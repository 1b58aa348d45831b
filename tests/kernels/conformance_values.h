// Values and helpers shared by the files of the backend conformance suite
// (conformance_*.cc): the sizes every dtype is checked at, neighbours of a
// value in a dtype, and the tolerance of hand-computed expectations.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tests/kernels/backend_conformance.h"

namespace tstat::testing {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The sizes every dtype is checked at: around warp (32), vector and chunk
// (16384) boundaries, a prime past 1e5, and one pseudo-random size up to 3e6
// (3e5 in quick mode), drawn from a fixed seed so a failure reproduces. 4097
// and 65537 sit just past the CPU backend's tile (4096) and parallel-pass
// (65536) thresholds.
inline std::vector<std::int64_t> ConformanceSizes() {
  std::vector<std::int64_t> sizes = {0,     1,     31,    32,    33,    1023,  1024, 1025,
                                     4097,  16383, 16384, 16385, 65537, 100003};
  std::mt19937_64 rng(0x7e57a11u);
  const std::uint64_t cap = QuickMode() ? 300000 : 3000000;
  sizes.push_back(static_cast<std::int64_t>(1 + rng() % cap));
  return sizes;
}

inline std::uint64_t SeedFor(DType t, std::int64_t n) {
  return (static_cast<std::uint64_t>(t) + 1) * 0x9e3779b97f4a7c15ull ^ static_cast<std::uint64_t>(n);
}

// The representable neighbour of x in dtype t (x representable), dir = +1/-1.
inline double StepInDType(DType t, double x, int dir) {
  switch (t) {
    case DType::kFloat64: return std::nextafter(x, dir * kInf);
    case DType::kFloat32:
      return static_cast<double>(std::nextafter(static_cast<float>(x), static_cast<float>(dir * kInf)));
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat8E4M3:
    case DType::kFloat8E5M2: {
      // Sign-magnitude patterns: away from zero is +1 on the magnitude.
      const bool away = (x > 0) == (dir > 0);
      if (t == DType::kFloat16) {
        const std::uint16_t b = EncodeF16(x);
        return DecodeF16(static_cast<std::uint16_t>(away ? b + 1 : b - 1));
      }
      if (t == DType::kBFloat16) {
        const std::uint16_t b = EncodeBF16(x);
        return DecodeBF16(static_cast<std::uint16_t>(away ? b + 1 : b - 1));
      }
      if (t == DType::kFloat8E4M3) {
        const std::uint8_t b = EncodeF8E4M3(x);
        return DecodeF8E4M3(static_cast<std::uint8_t>(away ? b + 1 : b - 1));
      }
      const std::uint8_t b = EncodeF8E5M2(x);
      return DecodeF8E5M2(static_cast<std::uint8_t>(away ? b + 1 : b - 1));
    }
    default:
      return x + dir;  // integers
  }
}

// The values of dtype t closest to x on both sides (and x itself when it is
// representable). x must be non-zero and inside the finite range.
inline std::vector<double> NeighboursInDType(DType t, double x) {
  const double r = RoundToDType(x, t);
  if (r == x) return {StepInDType(t, x, -1), x, StepInDType(t, x, +1)};
  if (r < x) return {r, StepInDType(t, r, +1)};
  return {StepInDType(t, r, -1), r};
}

inline std::vector<double> Iota(std::int64_t n, double start = 0.0) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = start + static_cast<double>(i);
  return v;
}

// Hand-computed floating stats: a backend may round differently from the
// obvious formula (merge order, shifted sums), so allow 1e-12 of `scale`
// (the magnitudes involved, e.g. sum |x|).
#define EXPECT_CLOSE(got, want, scale) EXPECT_NEAR((got), (want), 1e-12 * (scale))

inline std::string Where(DType t, std::int64_t n, const std::string& extra = "") {
  return DTypeLabel(t) + " n=" + std::to_string(n) + (extra.empty() ? "" : " " + extra);
}

}  // namespace tstat::testing
