// Picks the widest tile-kernel table the host CPU supports, once.
#include <utility>

#include "kernels/cpu/cpu_tile_types.h"

namespace tstat::kernels::cpu {

const TileKernels& SelectTileKernels() {
  static const TileKernels* chosen = [] {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("fma")) {
      return &TileKernelsAvx512();
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &TileKernelsAvx2();
#endif
    return &TileKernelsGeneric();
  }();
  return *chosen;
}

}  // namespace tstat::kernels::cpu
