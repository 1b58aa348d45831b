// LinearHistKernel: pass 2 for requests with a linear histogram. One block per
// chunk (the same WorkItems as pass 1, for those requests only); the range
// comes from the tensor's merged partial in device memory (fixed range, finite
// [min, max], or [-0.5, 0.5] when nothing is finite), so there is no host
// round trip between the passes. Requests with at most `shared_bins` bins
// count in dynamic shared memory (uint32, then the non-zero bins are added to
// the global uint64 counts); larger ones use global integer atomics directly.
// Below/above counts are summed per block in shared memory, then added once.
// Stream-ordered after the merge kernel.
#include "kernels/cuda/cuda_status.cuh"
#include "kernels/cuda/device_sinks.cuh"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/plan/cuda_thread_work.h"
#include "kernels/plan/tuning.h"

namespace tstat::kernels {
namespace {

constexpr int kThreads = LaunchPolicy::kThreadsPerBlock;

__global__ void __launch_bounds__(kThreads) LinearHistKernel(BatchPointers batch, int shared_bins) {
  extern __shared__ unsigned int bins[];
  __shared__ unsigned long long outside[2];  // below, above
  const WorkItem item = batch.linear_items[blockIdx.x];
  const DeviceRequest& r = batch.requests[item.request];
  const int t = static_cast<int>(threadIdx.x);
  const LinearRange range = LinearRangeOf(r, batch.finals[r.final_index]);
  unsigned long long* counts = batch.counters + r.lin_counts;
  const bool use_shared = range.bins <= shared_bins;  // uniform per block
  if (t < 2) outside[t] = 0;
  if (use_shared) ZeroSharedBins(bins, range.bins);
  __syncthreads();
  OutsideCounts o{0, 0};
  WithDecoder(r.dtype, [&](auto dec) {
    using Dec = decltype(dec);
    const unsigned char* chunk = r.data + item.begin * Dec::kSize;
    const ChunkSplit split =
        SplitChunk(reinterpret_cast<std::uintptr_t>(chunk), item.length, Dec::kSize);
    const bool aligned = r.aligned != 0;
    if (use_shared) {
      SharedBins sink{bins};
      o = ThreadChunkLinearHist<Dec>(chunk, split, aligned, t, kThreads, range, sink);
    } else {
      GlobalBins sink{counts};
      o = ThreadChunkLinearHist<Dec>(chunk, split, aligned, t, kThreads, range, sink);
    }
  });
  if (o.below != 0) atomicAdd(&outside[0], static_cast<unsigned long long>(o.below));
  if (o.above != 0) atomicAdd(&outside[1], static_cast<unsigned long long>(o.above));
  __syncthreads();
  if (use_shared) FlushSharedBins(bins, range.bins, counts);
  if (t < 2 && outside[t] != 0) atomicAdd(counts + range.bins + t, outside[t]);
}

}  // namespace

Status LaunchLinearHistKernel(const BatchPointers& batch, std::int64_t blocks, int shared_bins,
                              cudaStream_t stream) {
  if (blocks == 0) return Status::OK();
  const std::size_t shared_bytes = static_cast<std::size_t>(shared_bins) * sizeof(unsigned int);
  LinearHistKernel<<<static_cast<unsigned int>(blocks), kThreads, shared_bytes, stream>>>(
      batch, shared_bins);
  TSTAT_CUDA_CHECK_LAUNCH(stream, "LinearHistKernel");
  return Status::OK();
}

}  // namespace tstat::kernels
