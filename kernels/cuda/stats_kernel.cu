// StatsKernel: pass 1 of a batch. One block per WorkItem (a chunk of one
// tensor; tensors of every dtype mixed in one launch, the dtype switch is
// uniform per block so warps never diverge on it). Each thread accumulates its
// elements (head scalars, 16-byte vectors, tail scalars; VisitChunk) into an
// ElementAccumulator and counts exponent bins in its warp's shared-memory
// histogram; the block combines the thread partials with cub::BlockReduce
// (BLOCK_REDUCE_WARP_REDUCTIONS: the fixed order BlockMergeOrder emulates),
// thread 0 writes the chunk partial, and the non-zero shared bins are added to
// the tensor's global uint64 histogram with integer atomics.
// Stream-ordered on the caller's stream; no host synchronization.
#include <cub/block/block_reduce.cuh>

#include "kernels/cuda/cuda_status.cuh"
#include "kernels/cuda/device_sinks.cuh"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/plan/cuda_thread_work.h"
#include "kernels/plan/tuning.h"

namespace tstat::kernels {
namespace {

constexpr int kThreads = LaunchPolicy::kThreadsPerBlock;
constexpr int kWarps = kThreads / 32;
using BlockReduce = cub::BlockReduce<StatsPartial, kThreads, cub::BLOCK_REDUCE_WARP_REDUCTIONS>;

// One exponent histogram per warp (8 x 279 x 4 B = 8.9 KiB): same-bin atomics
// of neighbouring values then only contend within a warp, not the whole block.
__global__ void __launch_bounds__(kThreads, LaunchPolicy::kMinBlocksPerSm)
    StatsKernel(BatchPointers batch) {
  __shared__ unsigned int hist[kWarps * kExpHistBins];
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  const WorkItem item = batch.stats_items[blockIdx.x];
  const DeviceRequest& r = batch.requests[item.request];
  const int t = static_cast<int>(threadIdx.x);
  const std::int64_t exp_hist = r.exp_hist;
  const bool want_hist = exp_hist != kNoSlot;  // uniform per block
  if (want_hist) {
    ZeroSharedBins(hist, kWarps * kExpHistBins);
    __syncthreads();
  }
  StatsPartial p = StatsPartial::Identity();
  WithDecoder(r.dtype, [&](auto dec) {
    using Dec = decltype(dec);
    const unsigned char* chunk = r.data + item.begin * Dec::kSize;
    const ChunkSplit split =
        SplitChunk(reinterpret_cast<std::uintptr_t>(chunk), item.length, Dec::kSize);
    const Thresholds<typename Dec::Compute> th = ThresholdsOf(r, typename Dec::Compute{});
    const bool aligned = r.aligned != 0;
    if (want_hist) {
      SharedBins sink{hist + (t / 32) * kExpHistBins};
      p = ThreadChunkStats<Dec>(chunk, split, aligned, t, kThreads, th, sink);
    } else {
      NoHistogram none;
      p = ThreadChunkStats<Dec>(chunk, split, aligned, t, kThreads, th, none);
    }
  });
  const StatsPartial block = BlockReduce(reduce_storage).Reduce(p, MergeOp{});
  if (t == 0) batch.partials[r.partial_base + item.slot] = block;
  if (want_hist) {
    __syncthreads();
    for (int bin = t; bin < kExpHistBins; bin += kThreads) {
      unsigned int sum = 0;  // < 2^32: a chunk holds at most 2^31 elements
      for (int w = 0; w < kWarps; ++w) sum += hist[w * kExpHistBins + bin];
      if (sum != 0)
        atomicAdd(batch.counters + exp_hist + bin, static_cast<unsigned long long>(sum));
    }
  }
}

}  // namespace

Status LaunchStatsKernel(const BatchPointers& batch, std::int64_t blocks, cudaStream_t stream) {
  if (blocks == 0) return Status::OK();
  StatsKernel<<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(batch);
  TSTAT_CUDA_CHECK_LAUNCH(stream, "StatsKernel");
  return Status::OK();
}

}  // namespace tstat::kernels
