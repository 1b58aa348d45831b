// Picks the widest tile-kernel table the host CPU supports, once.
#include <utility>

#include "kernels/cpu/cpu_tile_types.h"

namespace tstat::kernels::cpu {

namespace {

struct CpuFeatures {
  bool avx512 = false, avx2 = false;
};

const CpuFeatures& Features() {
  static const CpuFeatures f = [] {
    CpuFeatures c;
#if defined(__x86_64__)
    __builtin_cpu_init();
    c.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    c.avx512 = c.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#endif
    return c;
  }();
  return f;
}

}  // namespace

const TileKernels& SelectTileKernels(CpuIsa requested) {
  const CpuFeatures& f = Features();
  switch (requested) {
    case CpuIsa::kBaseline: return TileKernelsGeneric();
    case CpuIsa::kAvx2:
      if (f.avx2) return TileKernelsAvx2();
      break;
    case CpuIsa::kAvx512:
    case CpuIsa::kAuto: break;
  }
  if (f.avx512) return TileKernelsAvx512();
  if (f.avx2) return TileKernelsAvx2();
  return TileKernelsGeneric();
}

}  // namespace tstat::kernels::cpu
