// Delta against the previously saved values on the CPU: a separate pass over
// x and previous (the stat-set tiles are left untouched). The tensor is cut
// into fixed blocks of kAuxBlockElems pairs; each block is reduced by this
// CPU's copy of the delta block (cpu_delta_tile.h: AddDeltaPair's per-pair
// rule in fixed lanes), blocks run in parallel for large tensors, and the
// block partials merge in block order: the result depends neither on
// `workers` nor on the ISA. With options.delta.next each block is copied
// there right after it is reduced, from the cache (next may be previous:
// the block's previous values have been read by then).
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/aux_ops.h"
#include "kernels/cpu/cpu_aux.h"
#include "kernels/cpu/cpu_passes.h"
#include "kernels/cpu/cpu_tile_types.h"

namespace tstat::kernels::cpu {

void ComputeDelta(const ReductionRequest& r, int workers, const TileKernels& tiles,
                  DeltaStats* out) {
  const auto* x = static_cast<const unsigned char*>(r.tensor.data);
  const auto* p = static_cast<const unsigned char*>(r.options.delta.previous);
  auto* next = static_cast<unsigned char*>(r.options.delta.next);
  const DeltaTolerance tol{r.options.delta.atol, r.options.delta.rtol};
  const DeltaBlockFn block_fn = tiles.delta_fn[static_cast<int>(r.tensor.dtype)];
  const std::size_t elem = DTypeSize(r.tensor.dtype);
  const std::int64_t n = r.tensor.numel;
  const std::int64_t blocks = (n + kAuxBlockElems - 1) / kAuxBlockElems;
  DeltaPartial total = DeltaPartial::Identity();
  if (blocks <= 1) {
    if (n > 0) total = block_fn(x, p, n, tol);
    if (n > 0 && next != nullptr) std::memcpy(next, x, static_cast<std::size_t>(n) * elem);
    *out = ToDeltaStats(total);
    return;
  }
  std::vector<DeltaPartial> partials(static_cast<std::size_t>(blocks));
  const bool parallel = n >= kParallelMinElems && workers > 1;
#pragma omp parallel for schedule(static) num_threads(workers) if (parallel)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t begin = b * kAuxBlockElems;
    const std::size_t offset = static_cast<std::size_t>(begin) * elem;
    const std::int64_t len = std::min(n - begin, kAuxBlockElems);
    partials[static_cast<std::size_t>(b)] = block_fn(x + offset, p + offset, len, tol);
    if (next != nullptr)
      std::memcpy(next + offset, x + offset, static_cast<std::size_t>(len) * elem);
  }
  for (const DeltaPartial& part : partials) total = MergeDelta(total, part);
  *out = ToDeltaStats(total);
}

}  // namespace tstat::kernels::cpu
