// MergeKernel: the final merge of a batch. One warp per merge segment (a
// tensor's stats, or one channel of a per-channel request): lane l folds its
// run of the segment's chunk partials in chunk order (MergeLaneChunks), then
// cub::WarpReduce combines the lanes in the order WarpMergeOrder emulates; a
// warp finds its MergeJob by binary search over the job table. The fixed order
// makes the result independent of block scheduling. Stream-ordered after the
// stats and channel kernels.
#include <cub/warp/warp_reduce.cuh>

#include "kernels/cuda/cuda_status.cuh"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/plan/launch_tables.h"
#include "kernels/plan/tuning.h"

namespace tstat::kernels {
namespace {

constexpr int kThreads = LaunchPolicy::kMergeThreadsPerBlock;
constexpr int kWarps = kThreads / kMergeLanes;
static_assert(kMergeLanes == 32, "one merge segment per warp");
using WarpReduce = cub::WarpReduce<StatsPartial>;

__global__ void __launch_bounds__(kThreads) MergeKernel(BatchPointers batch) {
  __shared__ typename WarpReduce::TempStorage storage[kWarps];
  const int warp = static_cast<int>(threadIdx.x) / kMergeLanes;
  const int lane = static_cast<int>(threadIdx.x) % kMergeLanes;
  const std::int64_t g = static_cast<std::int64_t>(blockIdx.x) * kWarps + warp;
  if (g >= batch.merge_segments) return;  // uniform per warp
  const MergeJob job = batch.merge_jobs[FindJob(batch.merge_jobs, batch.num_merge_jobs, g)];
  const std::int64_t s = g - job.first;
  const StatsPartial mine = MergeLaneChunks(SegmentPartials(batch.partials, job, s), job.chunks,
                                            lane, StatsPartial::Identity(), MergeOp{});
  const StatsPartial merged = WarpReduce(storage[warp]).Reduce(mine, MergeOp{});
  if (lane == 0) batch.finals[job.dst + s] = merged;
}

}  // namespace

Status LaunchMergeKernel(const BatchPointers& batch, cudaStream_t stream) {
  if (batch.merge_segments == 0) return Status::OK();
  const std::int64_t blocks = (batch.merge_segments + kWarps - 1) / kWarps;
  MergeKernel<<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(batch);
  TSTAT_CUDA_CHECK_LAUNCH(stream, "MergeKernel");
  return Status::OK();
}

}  // namespace tstat::kernels
