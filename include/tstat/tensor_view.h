// TensorView: a non-owning description of a contiguous tensor.
//
// The caller keeps the memory alive (and, for CUDA memory, unmodified on the
// stream it passes) until the reduction that reads it has completed.
#pragma once

#include <cstdint>
#include <vector>

#include "tstat/dtype.h"

namespace tstat {

enum class MemorySpace : std::uint8_t { kHost = 0, kCuda = 1 };

struct TensorView {
  const void* data = nullptr;
  DType dtype = DType::kFloat32;
  std::int64_t numel = 0;            // number of elements; 64-bit everywhere
  std::vector<std::int64_t> shape;   // optional; empty means 1-D of numel
  MemorySpace space = MemorySpace::kHost;
  int device = 0;                    // CUDA ordinal when space == kCuda

  static TensorView Host(const void* p, DType t, std::int64_t n) {
    TensorView v;
    v.data = p; v.dtype = t; v.numel = n;
    return v;
  }
  static TensorView Host(const void* p, DType t, std::vector<std::int64_t> dims) {
    TensorView v;
    v.data = p; v.dtype = t; v.shape = std::move(dims);
    v.numel = 1;
    for (std::int64_t d : v.shape) v.numel *= d;
    return v;
  }
};

}  // namespace tstat
