// Tile kernels compiled for x86-64 (flags set in kernels/CMakeLists.txt).
#include <utility>

#include "kernels/cpu/cpu_tile_types.h"

#define TSTAT_TILE_NS isa_generic
#define TSTAT_TILE_TABLE TileKernelsGeneric
#define TSTAT_TILE_ISA_NAME "x86-64"
#define TSTAT_TILE_VEC_BYTES 16
#include "kernels/cpu/cpu_tile_isa.inc"
