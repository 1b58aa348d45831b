// Exact conversions of narrow floating types to float, shared by host and
// device. Every supported input type converts to float (or double, for f64 and
// the integer types) without rounding, so the statistics of the converted value
// are the statistics of the stored value.
#pragma once

#include <cstdint>

#include "kernels/hd.h"

namespace tstat::kernels {

// IEEE binary16. Subnormals are scaled exactly by 2^112 in float.
TSTAT_HD float HalfToFloat(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t rest = static_cast<std::uint32_t>(h & 0x7fffu);
  if ((rest & 0x7c00u) == 0x7c00u) {  // Inf or NaN: keep the payload
    return FloatFromBits(sign | 0x7f800000u | ((rest & 0x3ffu) << 13));
  }
  const float magnitude = FloatFromBits(rest << 13) * 5.192296858534828e+33f;  // 2^112
  return FloatFromBits(sign | FloatBits(magnitude));
}

TSTAT_HD float BFloat16ToFloat(std::uint16_t b) {
  return FloatFromBits(static_cast<std::uint32_t>(b) << 16);
}

// OCP FP8 E4M3 ("fn"): bias 7, no infinities, S.1111.111 is NaN, max 448.
TSTAT_HD float Fp8E4M3ToFloat(std::uint8_t v) {
  const std::uint32_t sign = static_cast<std::uint32_t>(v & 0x80u) << 24;
  const std::uint32_t exp = (v >> 3) & 0xfu;
  const std::uint32_t mant = v & 0x7u;
  if (exp == 0xfu && mant == 0x7u) return FloatFromBits(sign | 0x7fc00000u);
  if (exp == 0) {  // subnormal: mant * 2^-9
    const float m = static_cast<float>(mant) * 0.001953125f;
    return FloatFromBits(sign | FloatBits(m));
  }
  return FloatFromBits(sign | ((exp + 120u) << 23) | (mant << 20));
}

// OCP FP8 E5M2: the upper byte of an IEEE binary16.
TSTAT_HD float Fp8E5M2ToFloat(std::uint8_t v) {
  return HalfToFloat(static_cast<std::uint16_t>(static_cast<std::uint16_t>(v) << 8));
}

}  // namespace tstat::kernels
