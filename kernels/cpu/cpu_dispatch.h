// Compile-time dispatch on a runtime DType, and exact scalar loads as double,
// for the CPU passes that are not the vectorized stat-set tile.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/cpu/cpu_tile_types.h"
#include "tstat/dtype.h"

namespace tstat::kernels::cpu {

template <DType D>
using DTypeTag = std::integral_constant<DType, D>;

// Calls f(DTypeTag<D>{}) for the runtime dtype `t` (which must be valid).
template <class F>
decltype(auto) DispatchDType(DType t, F&& f) {
  switch (t) {
    case DType::kFloat32: return f(DTypeTag<DType::kFloat32>{});
    case DType::kFloat16: return f(DTypeTag<DType::kFloat16>{});
    case DType::kBFloat16: return f(DTypeTag<DType::kBFloat16>{});
    case DType::kFloat64: return f(DTypeTag<DType::kFloat64>{});
    case DType::kFloat8E4M3: return f(DTypeTag<DType::kFloat8E4M3>{});
    case DType::kFloat8E5M2: return f(DTypeTag<DType::kFloat8E5M2>{});
    case DType::kInt32: return f(DTypeTag<DType::kInt32>{});
    case DType::kInt64: return f(DTypeTag<DType::kInt64>{});
    case DType::kUInt8: break;
  }
  return f(DTypeTag<DType::kUInt8>{});
}

// The compute type of a dtype: float for the float path, double otherwise.
template <DType D>
using ComputeType = std::conditional_t<UsesFloatPath(D), float, double>;

template <DType D>
inline ComputeType<D> LoadCompute(const unsigned char* base, std::int64_t i) {
  if constexpr (UsesFloatPath(D)) {
    return DecodeScalarF<D>(base, i);
  } else {
    return DecodeScalarD<D>(base, i);
  }
}

// Splits [0, n) into `parts` contiguous ranges; returns the start of `part`.
inline std::int64_t RangeStart(std::int64_t n, int parts, int part) {
  return static_cast<std::int64_t>((static_cast<unsigned __int128>(n) * part) / parts);
}

}  // namespace tstat::kernels::cpu
