// Types shared by the CPU tile kernels (compiled once per ISA) and the code
// that drives them: the per-thread tile state, scalar decoders, and the table
// of tile functions chosen at run time for the host CPU.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/aux_ops.h"
#include "kernels/dtype_decode.h"
#include "kernels/stats_ops.h"
#include "tstat/dtype.h"
#include "tstat/engine.h"

namespace tstat::kernels::cpu {

inline constexpr std::int64_t kTileElems = 4096;  // 16 KiB of f32: the second read hits L1
inline constexpr int kSubHists = 8;               // interleaved histogram copies
inline constexpr int kSubBins = 280;  // >= 256 exponent fields (float) and 279 bins (double)

// Scalar decode of element i, exactly, to float (float path) or double.
template <DType D>
inline float DecodeScalarF(const unsigned char* base, std::int64_t i) {
  if constexpr (D == DType::kFloat32) {
    float v;
    std::memcpy(&v, base + i * 4, 4);
    return v;
  } else if constexpr (D == DType::kFloat16 || D == DType::kBFloat16) {
    std::uint16_t h;
    std::memcpy(&h, base + i * 2, 2);
    return D == DType::kFloat16 ? HalfToFloat(h) : BFloat16ToFloat(h);
  } else if constexpr (D == DType::kFloat8E4M3) {
    return Fp8E4M3ToFloat(base[i]);
  } else {
    static_assert(D == DType::kFloat8E5M2, "not a float-path dtype");
    return Fp8E5M2ToFloat(base[i]);
  }
}

template <DType D>
inline double DecodeScalarD(const unsigned char* base, std::int64_t i) {
  if constexpr (D == DType::kFloat64) {
    double v;
    std::memcpy(&v, base + i * 8, 8);
    return v;
  } else if constexpr (D == DType::kInt32) {
    std::int32_t v;
    std::memcpy(&v, base + i * 4, 4);
    return static_cast<double>(v);
  } else if constexpr (D == DType::kInt64) {
    std::int64_t v;
    std::memcpy(&v, base + i * 8, 8);
    return static_cast<double>(v);
  } else {
    static_assert(D == DType::kUInt8, "not a double-path dtype");
    return static_cast<double>(base[i]);
  }
}

// True for dtypes reduced in float (their values are exactly floats).
constexpr bool UsesFloatPath(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 ||
         t == DType::kFloat8E4M3 || t == DType::kFloat8E5M2;
}

// One thread's running state for the tensor piece it is reducing.
struct TileState {
  StatsPartial partial;
  std::uint64_t* hist;  // destination: kExpHistBins counters (zeroed by the owner)
  std::uint64_t pending_first_bin_excess;  // double path: zeros counted in bin 0
  std::uint64_t pending_last_bin_excess;   // double path: non-finite counted in the last bin
  std::uint64_t pending;                   // elements in `sub` since the last flush
  int key_lo, key_hi;                      // keys of `sub` that may be non-zero
  // Bins of `hist` this piece added to (hist_lo > hist_hi: none): the owner
  // finds the exact non-zero span inside them instead of in all 279.
  int hist_lo, hist_hi;
  bool float_path;
  alignas(64) std::uint32_t sub[kSubHists][kSubBins];

  // Once per thread: `sub` starts zeroed and Flush() keeps it so.
  void Init() {
    std::memset(sub, 0, sizeof sub);
    pending_first_bin_excess = pending_last_bin_excess = pending = 0;
    key_lo = kSubBins;
    key_hi = -1;
    hist = nullptr;
    float_path = true;
  }
  // Starts a new piece whose histogram goes to `dest`.
  void Begin(bool is_float_path, std::uint64_t* dest) {
    partial = StatsPartial::Identity();
    float_path = is_float_path;
    hist = dest;
    hist_lo = kExpHistBins;
    hist_hi = -1;
  }
  // Records that bin `b` of `hist` was added to.
  void TouchBin(int b) {
    hist_lo = b < hist_lo ? b : hist_lo;
    hist_hi = b > hist_hi ? b : hist_hi;
  }
  // Adds `c` to bin `b` of `hist`.
  void AddToBin(int b, std::uint64_t c) {
    hist[b] += c;
    TouchBin(b);
  }
  void TouchKeys(int lo, int hi) {
    key_lo = lo < key_lo ? lo : key_lo;
    key_hi = hi > key_hi ? hi : key_hi;
  }
  // 32-bit copies must be folded before they can overflow.
  bool NeedsFlush() const { return pending >= (std::uint64_t{1} << 31); }

  // Adds the interleaved 32-bit counters of the touched keys to `hist` and
  // zeroes them.
  void Flush() {
    if (pending == 0) return;
    if (float_path) {
      // Exponent field f in 1..254 is floor(log2|x|) = f - 127. Fields 0
      // (zeros and subnormals, binned exactly by the tile) and 255 (Inf/NaN)
      // are dropped.
      const int lo = key_lo < 1 ? 1 : key_lo, hi = key_hi > 254 ? 254 : key_hi;
      if (lo <= hi) {
        TouchBin(lo - 127 - kExpHistMinExp);
        TouchBin(hi - 127 - kExpHistMinExp);
      }
      for (int f = lo; f <= hi; ++f) {
        std::uint64_t s = 0;
        for (int k = 0; k < kSubHists; ++k) {
          s += sub[k][f];
          sub[k][f] = 0;
        }
        hist[f - 127 - kExpHistMinExp] += s;
      }
      for (int k = 0; k < kSubHists; ++k) sub[k][0] = sub[k][255] = 0;
    } else {
      if (key_lo <= key_hi) {
        TouchBin(key_lo);
        TouchBin(key_hi);
      }
      for (int b = key_lo; b <= key_hi; ++b) {
        std::uint64_t s = 0;
        for (int k = 0; k < kSubHists; ++k) {
          s += sub[k][b];
          sub[k][b] = 0;
        }
        hist[b] += s;
      }
      hist[0] -= pending_first_bin_excess;
      hist[kExpHistBins - 1] -= pending_last_bin_excess;
      pending_first_bin_excess = pending_last_bin_excess = 0;
    }
    key_lo = kSubBins;
    key_hi = -1;
    pending = 0;
  }
};

using FloatTileFn = void (*)(const unsigned char* base, std::int64_t n, const Thresholds<float>& th,
                             TileState* st);
using DoubleTileFn = void (*)(const unsigned char* base, std::int64_t n,
                              const Thresholds<double>& th, TileState* st);

// The delta of n (x, previous) pairs (cpu_delta_tile.h): bitwise the same in
// every ISA's copy.
using DeltaBlockFn = DeltaPartial (*)(const unsigned char* x, const unsigned char* previous,
                                      std::int64_t n, const DeltaTolerance& tol);

struct TileKernels {
  const char* isa;
  FloatTileFn float_fn[kNumDTypes];    // null for double-path dtypes
  DoubleTileFn double_fn[kNumDTypes];  // null for float-path dtypes
  DeltaBlockFn delta_fn[kNumDTypes];   // null for integer dtypes
};

const TileKernels& TileKernelsAvx512();
const TileKernels& TileKernelsAvx2();
const TileKernels& TileKernelsGeneric();
// The table for `requested` if this CPU supports it, else the widest it
// supports (CPU features are checked once).
const TileKernels& SelectTileKernels(CpuIsa requested = CpuIsa::kAuto);

}  // namespace tstat::kernels::cpu
