// Tile kernels compiled for AVX-512 (flags set in kernels/CMakeLists.txt).
#include <utility>

#include "kernels/cpu/cpu_tile_types.h"

#define TSTAT_TILE_NS isa_avx512
#define TSTAT_TILE_TABLE TileKernelsAvx512
#define TSTAT_TILE_ISA_NAME "AVX-512"
#define TSTAT_TILE_VEC_BYTES 64
#define TSTAT_TILE_EXTRA "kernels/cpu/cpu_tile_avx512_fast.h"
#define TSTAT_TILE_OVERRIDES(t)                                                        \
  do {                                                                                 \
    t.float_fn[static_cast<int>(DType::kFloat32)] = &ReduceTileFastAvx512<DType::kFloat32>;   \
    t.float_fn[static_cast<int>(DType::kFloat16)] = &ReduceTileFastAvx512<DType::kFloat16>;   \
    t.float_fn[static_cast<int>(DType::kBFloat16)] = &ReduceTileFastAvx512<DType::kBFloat16>; \
  } while (0)
#include "kernels/cpu/cpu_tile_isa.inc"
