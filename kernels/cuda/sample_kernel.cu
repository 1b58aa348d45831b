// SampleKernel: the element sample of every request of a batch. One thread
// per sampled element: it finds its SampleJob by binary search, computes the
// position with SamplePosition (a pure function of seed, j, n, k) and stores
// the element converted to double. Independent of the other kernels;
// stream-ordered on the caller's stream.
#include "kernels/cuda/cuda_status.cuh"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/plan/cuda_thread_work.h"
#include "kernels/plan/tuning.h"

namespace tstat::kernels {
namespace {

constexpr int kThreads = LaunchPolicy::kSampleThreadsPerBlock;

__global__ void __launch_bounds__(kThreads) SampleKernel(BatchPointers batch) {
  const std::int64_t g = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (g >= batch.sample_total) return;
  const SampleJob job = batch.sample_jobs[FindJob(batch.sample_jobs, batch.num_sample_jobs, g)];
  batch.samples[g] = GatherSample(batch.requests[job.request], g - job.first);
}

}  // namespace

Status LaunchSampleKernel(const BatchPointers& batch, cudaStream_t stream) {
  if (batch.sample_total == 0) return Status::OK();
  const std::int64_t blocks = (batch.sample_total + kThreads - 1) / kThreads;
  SampleKernel<<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(batch);
  TSTAT_CUDA_CHECK_LAUNCH(stream, "SampleKernel");
  return Status::OK();
}

}  // namespace tstat::kernels
