// TSTAT_HD marks functions shared by the CUDA kernels and the CPU code that
// runs or emulates them. Nothing here may depend on CUDA headers.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TSTAT_HD __host__ __device__ __forceinline__
#define TSTAT_DEVICE_CODE 1
#else
#define TSTAT_HD inline
#endif

namespace tstat::kernels {

TSTAT_HD std::uint32_t FloatBits(float x) {
  std::uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}
TSTAT_HD float FloatFromBits(std::uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}
TSTAT_HD std::uint64_t DoubleBits(double x) {
  std::uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

// Index of the highest set bit (v != 0).
TSTAT_HD int HighestBit32(std::uint32_t v) {
#if defined(__CUDA_ARCH__)
  return 31 - __clz(v);
#else
  return 31 - __builtin_clz(v);
#endif
}
TSTAT_HD int HighestBit64(std::uint64_t v) {
#if defined(__CUDA_ARCH__)
  return 63 - __clzll(static_cast<long long>(v));
#else
  return 63 - __builtin_clzll(v);
#endif
}

}  // namespace tstat::kernels
