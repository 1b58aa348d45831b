// Tile kernels compiled for AVX2 (flags set in kernels/CMakeLists.txt).
#include <utility>

#include "kernels/cpu/cpu_tile_types.h"

#define TSTAT_TILE_NS isa_avx2
#define TSTAT_TILE_TABLE TileKernelsAvx2
#define TSTAT_TILE_ISA_NAME "AVX2"
#define TSTAT_TILE_VEC_BYTES 32
#include "kernels/cpu/cpu_tile_isa.inc"
