// Element access for the CUDA kernels and their CPU emulation: decoders from
// the raw little-endian bits of an element to its compute-type value (float
// for the narrow floats and f32, double for f64 and integers), the uniform
// per-block dtype switch (WithDecoder; WithFloatDecoder / WithLabelDecoder
// for one family), one 128-bit load of 16 raw bytes and the extraction of its
// elements, and scalar loads that assemble an element from bytes when the
// tensor is not element-aligned. Pure functions; no CUDA headers (device
// intrinsics only under __CUDA_ARCH__).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/dtype_decode.h"
#include "kernels/hd.h"
#include "tstat/dtype.h"

#if defined(__CUDA_ARCH__)
#define TSTAT_UNROLL _Pragma("unroll")
#define TSTAT_NO_UNROLL _Pragma("unroll 1")
#else
#define TSTAT_UNROLL
#define TSTAT_NO_UNROLL
#endif

// Host-device templates below call whatever their functors/sinks provide
// (device-only sinks in the kernels, host-only in the emulator); this tells
// nvcc not to check the execution space of those calls at the template.
#ifndef TSTAT_EXEC_CHECK_DISABLE  // kernels/aux_ops.h defines it too
#if defined(__CUDACC__)
#define TSTAT_EXEC_CHECK_DISABLE _Pragma("nv_exec_check_disable")
#else
#define TSTAT_EXEC_CHECK_DISABLE
#endif
#endif

namespace tstat::kernels {

// ---------------------------------------------------------------------------
// Decoders: the raw little-endian bits of one element -> compute-type value.
// Compute is float for 32-bit-or-narrower floats (exact), double for f64 and
// integers (as the stat set specifies).
struct DecodeF32 {
  using Compute = float;
  static constexpr int kSize = 4;
  TSTAT_HD static float Decode(std::uint64_t b) {
    return FloatFromBits(static_cast<std::uint32_t>(b));
  }
};
struct DecodeF16 {
  using Compute = float;
  static constexpr int kSize = 2;
  TSTAT_HD static float Decode(std::uint64_t b) {
    return HalfToFloat(static_cast<std::uint16_t>(b));
  }
};
struct DecodeBF16 {
  using Compute = float;
  static constexpr int kSize = 2;
  TSTAT_HD static float Decode(std::uint64_t b) {
    return BFloat16ToFloat(static_cast<std::uint16_t>(b));
  }
};
struct DecodeE4M3 {
  using Compute = float;
  static constexpr int kSize = 1;
  TSTAT_HD static float Decode(std::uint64_t b) {
    return Fp8E4M3ToFloat(static_cast<std::uint8_t>(b));
  }
};
struct DecodeE5M2 {
  using Compute = float;
  static constexpr int kSize = 1;
  TSTAT_HD static float Decode(std::uint64_t b) {
    return Fp8E5M2ToFloat(static_cast<std::uint8_t>(b));
  }
};
struct DecodeF64 {
  using Compute = double;
  static constexpr int kSize = 8;
  TSTAT_HD static double Decode(std::uint64_t b) {
    double x;
    memcpy(&x, &b, sizeof x);
    return x;
  }
};
struct DecodeI32 {
  using Compute = double;
  static constexpr int kSize = 4;
  TSTAT_HD static std::int64_t Label(std::uint64_t b) {
    return static_cast<std::int32_t>(static_cast<std::uint32_t>(b));
  }
  TSTAT_HD static double Decode(std::uint64_t b) { return static_cast<double>(Label(b)); }
};
struct DecodeI64 {
  using Compute = double;
  static constexpr int kSize = 8;
  TSTAT_HD static std::int64_t Label(std::uint64_t b) { return static_cast<std::int64_t>(b); }
  TSTAT_HD static double Decode(std::uint64_t b) { return static_cast<double>(Label(b)); }
};
struct DecodeU8 {
  using Compute = double;
  static constexpr int kSize = 1;
  TSTAT_HD static std::int64_t Label(std::uint64_t b) {
    return static_cast<std::int64_t>(b & 0xffu);
  }
  TSTAT_HD static double Decode(std::uint64_t b) { return static_cast<double>(Label(b)); }
};

// Calls f(Decoder{}) for the dtype (a uniform switch: one dtype per block).
// Returns false for an unknown dtype (CheckRequest rejects those first).
TSTAT_EXEC_CHECK_DISABLE
template <class F>
TSTAT_HD bool WithDecoder(int dtype, F&& f) {
  switch (static_cast<DType>(dtype)) {
    case DType::kFloat32:
      f(DecodeF32{});
      return true;
    case DType::kFloat16:
      f(DecodeF16{});
      return true;
    case DType::kBFloat16:
      f(DecodeBF16{});
      return true;
    case DType::kFloat64:
      f(DecodeF64{});
      return true;
    case DType::kFloat8E4M3:
      f(DecodeE4M3{});
      return true;
    case DType::kFloat8E5M2:
      f(DecodeE5M2{});
      return true;
    case DType::kInt32:
      f(DecodeI32{});
      return true;
    case DType::kInt64:
      f(DecodeI64{});
      return true;
    case DType::kUInt8:
      f(DecodeU8{});
      return true;
  }
  return false;
}
// The floating dtypes only (delta, logits).
TSTAT_EXEC_CHECK_DISABLE
template <class F>
TSTAT_HD bool WithFloatDecoder(int dtype, F&& f) {
  switch (static_cast<DType>(dtype)) {
    case DType::kFloat32:
      f(DecodeF32{});
      return true;
    case DType::kFloat16:
      f(DecodeF16{});
      return true;
    case DType::kBFloat16:
      f(DecodeBF16{});
      return true;
    case DType::kFloat64:
      f(DecodeF64{});
      return true;
    case DType::kFloat8E4M3:
      f(DecodeE4M3{});
      return true;
    case DType::kFloat8E5M2:
      f(DecodeE5M2{});
      return true;
    default:
      return false;
  }
}
// The integer dtypes only (label counts).
TSTAT_EXEC_CHECK_DISABLE
template <class F>
TSTAT_HD bool WithLabelDecoder(int dtype, F&& f) {
  switch (static_cast<DType>(dtype)) {
    case DType::kInt32:
      f(DecodeI32{});
      return true;
    case DType::kInt64:
      f(DecodeI64{});
      return true;
    case DType::kUInt8:
      f(DecodeU8{});
      return true;
    default:
      return false;
  }
}

// ---------------------------------------------------------------------------
// Loads. A Vec16 is 16 raw bytes read with one 128-bit load (p 16-aligned).
struct Vec16 {
  std::uint32_t w[4];
};
TSTAT_HD Vec16 LoadVec16(const unsigned char* p) {
#if defined(__CUDA_ARCH__)
  const uint4 u = __ldg(reinterpret_cast<const uint4*>(p));
  Vec16 v;
  v.w[0] = u.x;
  v.w[1] = u.y;
  v.w[2] = u.z;
  v.w[3] = u.w;
  return v;
#else
  Vec16 v;
  memcpy(v.w, p, sizeof v.w);
  return v;
#endif
}

// Element j of a vector of kSize-byte elements (little-endian, as the device).
template <int kSize>
TSTAT_HD std::uint64_t VecElement(const Vec16& v, int j) {
  if constexpr (kSize == 8) {
    return static_cast<std::uint64_t>(v.w[2 * j]) |
           (static_cast<std::uint64_t>(v.w[2 * j + 1]) << 32);
  } else if constexpr (kSize == 4) {
    return v.w[j];
  } else if constexpr (kSize == 2) {
    return (v.w[j >> 1] >> ((j & 1) * 16)) & 0xffffu;
  } else {
    return (v.w[j >> 2] >> ((j & 3) * 8)) & 0xffu;
  }
}

// One element at p. `aligned`: p is a multiple of kSize (one typed load);
// otherwise the element is assembled from byte loads (misaligned tensors).
template <int kSize>
TSTAT_HD std::uint64_t LoadBits(const unsigned char* p, bool aligned) {
#if defined(__CUDA_ARCH__)
  if (aligned) {
    if constexpr (kSize == 1) return __ldg(p);
    if constexpr (kSize == 2) return __ldg(reinterpret_cast<const unsigned short*>(p));
    if constexpr (kSize == 4) return __ldg(reinterpret_cast<const unsigned int*>(p));
    if constexpr (kSize == 8) return __ldg(reinterpret_cast<const unsigned long long*>(p));
  }
  std::uint64_t v = 0;
  TSTAT_UNROLL
  for (int b = 0; b < kSize; ++b) v |= static_cast<std::uint64_t>(__ldg(p + b)) << (8 * b);
  return v;
#else
  (void)aligned;
  std::uint64_t v = 0;
  memcpy(&v, p, kSize);  // x86-64 and the device are both little-endian
  return v;
#endif
}

}  // namespace tstat::kernels
