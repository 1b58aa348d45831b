// Helpers of the CPU auxiliary passes (delta, confusion matrix, value counts):
// exact integer loads at any alignment, dispatch over the floating or the
// integer dtypes only (so each pass instantiates just the types it accepts),
// and the fixed block size that makes their partition independent of the
// worker count.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cpu/cpu_dispatch.h"
#include "tstat/dtype.h"

namespace tstat::kernels::cpu {

// Elements per block of an auxiliary pass. Blocks, not workers, are the unit
// of partial results, so floating-point merges do not depend on `workers`.
inline constexpr std::int64_t kAuxBlockElems = 1 << 15;

// Element i of an integer tensor, exactly.
template <DType D>
inline std::int64_t LoadInteger(const unsigned char* base, std::int64_t i) {
  if constexpr (D == DType::kInt32) {
    std::int32_t v;
    std::memcpy(&v, base + i * 4, 4);
    return v;
  } else if constexpr (D == DType::kInt64) {
    std::int64_t v;
    std::memcpy(&v, base + i * 8, 8);
    return v;
  } else {
    static_assert(D == DType::kUInt8, "not an integer dtype");
    return base[i];
  }
}

// f(DTypeTag<D>{}) for an integer dtype `t` (anything else is taken as u8:
// callers pass only dtypes CheckRequest accepted).
template <class F>
decltype(auto) DispatchIntegerDType(DType t, F&& f) {
  switch (t) {
    case DType::kInt32:
      return f(DTypeTag<DType::kInt32>{});
    case DType::kInt64:
      return f(DTypeTag<DType::kInt64>{});
    default:
      break;
  }
  return f(DTypeTag<DType::kUInt8>{});
}

// f(DTypeTag<D>{}) for a floating dtype `t` (anything else is taken as f32).
template <class F>
decltype(auto) DispatchFloatDType(DType t, F&& f) {
  switch (t) {
    case DType::kFloat16:
      return f(DTypeTag<DType::kFloat16>{});
    case DType::kBFloat16:
      return f(DTypeTag<DType::kBFloat16>{});
    case DType::kFloat64:
      return f(DTypeTag<DType::kFloat64>{});
    case DType::kFloat8E4M3:
      return f(DTypeTag<DType::kFloat8E4M3>{});
    case DType::kFloat8E5M2:
      return f(DTypeTag<DType::kFloat8E5M2>{});
    default:
      break;
  }
  return f(DTypeTag<DType::kFloat32>{});
}

}  // namespace tstat::kernels::cpu
