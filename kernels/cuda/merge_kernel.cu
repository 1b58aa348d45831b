// MergeKernel: the final merge of a batch. One thread per merge segment (a
// tensor's stats, or one channel of a per-channel request) folds that
// segment's chunk partials in chunk order (MergeChunks) into its final
// partial; a thread finds its MergeJob by binary search over the job table.
// The fixed order makes the result independent of block scheduling. A tensor
// has at most kMaxChunksPerTensor chunks, so no thread loops long.
// Stream-ordered after the stats and channel kernels.
#include "kernels/cuda/cuda_status.cuh"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/plan/launch_tables.h"
#include "kernels/plan/tuning.h"

namespace tstat::kernels {
namespace {

constexpr int kThreads = LaunchPolicy::kMergeThreadsPerBlock;

__global__ void __launch_bounds__(kThreads) MergeKernel(BatchPointers batch) {
  const std::int64_t g = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (g >= batch.merge_segments) return;
  const MergeJob job = batch.merge_jobs[FindJob(batch.merge_jobs, batch.num_merge_jobs, g)];
  const std::int64_t s = g - job.first;
  batch.finals[job.dst + s] = MergeSegment(batch.partials, job, s);
}

}  // namespace

Status LaunchMergeKernel(const BatchPointers& batch, cudaStream_t stream) {
  if (batch.merge_segments == 0) return Status::OK();
  const std::int64_t blocks = (batch.merge_segments + kThreads - 1) / kThreads;
  MergeKernel<<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(batch);
  TSTAT_CUDA_CHECK_LAUNCH(stream, "MergeKernel");
  return Status::OK();
}

}  // namespace tstat::kernels
