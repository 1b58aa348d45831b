// A CPU Backend that runs the CUDA backend's algorithm exactly: the same
// LaunchPlan (work items, chunking, channel mappings), every block's T threads
// run the same per-thread bodies (kernels/plan/cuda_thread_work.h), block partials
// combine in cub::BlockReduce's BLOCK_REDUCE_WARP_REDUCTIONS order
// (BlockMergeOrder), chunk partials merge in chunk order (MergeChunks) and
// histograms are integer sums. With threads_per_block = 256 its results are
// the ones a GPU produces, bit for bit, for data at the same address modulo 16
// bytes (the vector/scalar split depends on it); it lets the CUDA logic be
// tested on machines without a GPU.
//
// Kind kCpu: it reads host tensors. Blocks run in parallel on OpenMP threads
// (integer histogram adds are atomic, everything else goes to distinct slots),
// so results do not depend on the OpenMP thread count. An instance is used by
// one thread at a time; the stream argument of Reduce is ignored.
#pragma once

#include <memory>

#include "tstat/engine.h"

namespace tstat::kernels {

// threads_per_block: a multiple of 32 in [32, 1024] (the device uses 256);
// other values are rounded up to a multiple of 32 and clamped.
std::unique_ptr<Backend> CreateEmulatedCudaBackend(int threads_per_block = 256);

}  // namespace tstat::kernels
