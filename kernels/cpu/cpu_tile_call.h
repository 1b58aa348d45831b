// A request's tile kernel (float or double path, by dtype) with its
// thresholds: how the stat-set batch (cpu_stats.cc) and the per-channel pass
// (cpu_channels.cc) hand elements to the ISA's tile functions. Included by
// those drivers only, never by a per-ISA translation unit.
#pragma once

#include <cstdint>

#include "kernels/cpu/cpu_tile_types.h"
#include "kernels/stats_ops.h"
#include "tstat/engine.h"

namespace tstat::kernels::cpu {

struct TileCall {
  bool float_path;
  FloatTileFn float_fn;    // null on the double path
  DoubleTileFn double_fn;  // null on the float path
  Thresholds<float> thf;
  Thresholds<double> thd;

  // Reduces `n` elements at `p` into `st`, folding its 32-bit counters
  // before they can overflow.
  void operator()(const unsigned char* p, std::int64_t n, TileState* st) const {
    if (float_path) {
      float_fn(p, n, thf, st);
    } else {
      double_fn(p, n, thd, st);
    }
    if (st->NeedsFlush()) st->Flush();
  }
};

inline TileCall MakeTileCall(const ReductionRequest& r, const TileKernels& kern) {
  const DType dtype = r.tensor.dtype;
  const StatsOptions& o = r.options;
  const double min_normal = MinNormalOf(dtype);
  TileCall call;
  call.float_path = UsesFloatPath(dtype);
  call.float_fn = kern.float_fn[static_cast<int>(dtype)];
  call.double_fn = kern.double_fn[static_cast<int>(dtype)];
  call.thf = MakeThresholds<float>(o.band_lo, o.band_hi, o.small_eps, min_normal);
  call.thd = MakeThresholds<double>(o.band_lo, o.band_hi, o.small_eps, min_normal);
  return call;
}

}  // namespace tstat::kernels::cpu
