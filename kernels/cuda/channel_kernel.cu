// ChannelKernel: per-channel stats, one block per ChannelItem, both thread
// mappings in one launch (the mapping is uniform per block):
// - wide (inner >= 32): the block reduces one channel over an outer range; its
//   threads walk the channel's contiguous runs of `inner` elements, so a warp
//   reads >= 32 consecutive elements; cub::BlockReduce (warp reductions, the
//   BlockMergeOrder order) gives the (channel, outer chunk) partial.
// - narrow (inner < 32): thread t owns channel c0 + t % group and a lane
//   t / group of rows, so consecutive threads read consecutive channels of a
//   row (coalesced even for inner == 1); the lanes of a channel are merged in
//   lane order by one thread from shared memory.
// Partials land at (channel, outer chunk); the merge kernel folds them in
// outer-chunk order. Stream-ordered on the caller's stream.
#include <cub/block/block_reduce.cuh>

#include "kernels/cuda/cuda_status.cuh"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/plan/cuda_thread_work.h"
#include "kernels/plan/tuning.h"

namespace tstat::kernels {
namespace {

constexpr int kThreads = LaunchPolicy::kThreadsPerBlock;
using BlockReduce = cub::BlockReduce<StatsPartial, kThreads, cub::BLOCK_REDUCE_WARP_REDUCTIONS>;

union ChannelShared {
  typename BlockReduce::TempStorage reduce;  // wide mapping
  StatsPartial lanes[kThreads];              // narrow mapping: 34 KiB
};

__global__ void __launch_bounds__(kThreads, LaunchPolicy::kMinBlocksPerSm)
    ChannelKernel(BatchPointers batch) {
  __shared__ ChannelShared shared;
  const ChannelItem item = batch.channel_items[blockIdx.x];
  const DeviceRequest& r = batch.requests[item.request];
  const int t = static_cast<int>(threadIdx.x);
  const ChannelGeometry geo = r.geo;
  const std::int64_t outer_chunks = r.outer_chunks;
  StatsPartial* out = batch.partials + r.ch_partials;
  WithDecoder(r.dtype, [&](auto dec) {
    using Dec = decltype(dec);
    const Thresholds<typename Dec::Compute> th = ThresholdsOf(r, typename Dec::Compute{});
    const bool aligned = r.aligned != 0;
    if (item.lanes == 0) {
      const StatsPartial p = ThreadChannelWide<Dec>(r.data, aligned, geo, item.c0, item.row_begin,
                                                    item.rows, t, kThreads, th);
      const StatsPartial block = BlockReduce(shared.reduce).Reduce(p, MergeOp{});
      if (t == 0) out[item.c0 * outer_chunks + item.chunk] = block;
      return;
    }
    std::int64_t c = 0;
    int lane = 0;
    shared.lanes[t] = NarrowThreadRole(item, t, &c, &lane)
                          ? ThreadChannelNarrow<Dec>(r.data, aligned, geo, c, item.row_begin,
                                                     item.rows, lane, item.lanes, th)
                          : StatsPartial::Identity();
    __syncthreads();
    if (t < item.channels) {
      out[(item.c0 + t) * outer_chunks + item.chunk] = NarrowChannelMerge(shared.lanes, item, t);
    }
  });
}

}  // namespace

Status LaunchChannelKernel(const BatchPointers& batch, std::int64_t blocks, cudaStream_t stream) {
  if (blocks == 0) return Status::OK();
  ChannelKernel<<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(batch);
  TSTAT_CUDA_CHECK_LAUNCH(stream, "ChannelKernel");
  return Status::OK();
}

}  // namespace tstat::kernels
