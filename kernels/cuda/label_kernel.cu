// LabelKernel: label counts (bincount) of integer tensors. One block per
// chunk; thread t visits its elements like the stats kernel (16-byte vector
// loads where possible) and counts labels in [0, classes): in dynamic shared
// memory (uint32) when the request has at most `shared_bins` classes, flushed
// to the global uint64 counts (non-zero bins only); otherwise straight into
// the global counts with integer atomics. Out-of-range labels are summed per
// block and added once. Stream-ordered on the caller's stream.
#include "kernels/cuda/cuda_status.cuh"
#include "kernels/cuda/device_sinks.cuh"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/plan/cuda_thread_work.h"
#include "kernels/plan/tuning.h"

namespace tstat::kernels {
namespace {

constexpr int kThreads = LaunchPolicy::kThreadsPerBlock;

__global__ void __launch_bounds__(kThreads) LabelKernel(BatchPointers batch, int shared_bins) {
  extern __shared__ unsigned int bins[];
  __shared__ unsigned long long out_of_range;
  const WorkItem item = batch.label_items[blockIdx.x];
  const DeviceRequest& r = batch.requests[item.request];
  const int t = static_cast<int>(threadIdx.x);
  const std::int64_t classes = r.label_classes;
  unsigned long long* counts = batch.counters + r.label_counts;
  const bool use_shared = classes <= shared_bins;  // uniform per block
  if (t == 0) out_of_range = 0;
  if (use_shared) ZeroSharedBins(bins, static_cast<int>(classes));
  __syncthreads();
  std::uint64_t outside = 0;
  WithLabelDecoder(r.dtype, [&](auto dec) {
    using Dec = decltype(dec);
    const unsigned char* chunk = r.data + item.begin * Dec::kSize;
    const ChunkSplit split =
        SplitChunk(reinterpret_cast<std::uintptr_t>(chunk), item.length, Dec::kSize);
    const bool aligned = r.aligned != 0;
    if (use_shared) {
      SharedBins sink{bins};
      outside = ThreadChunkLabels<Dec>(chunk, split, aligned, t, kThreads, classes, sink);
    } else {
      GlobalBins sink{counts};
      outside = ThreadChunkLabels<Dec>(chunk, split, aligned, t, kThreads, classes, sink);
    }
  });
  if (outside != 0) atomicAdd(&out_of_range, static_cast<unsigned long long>(outside));
  __syncthreads();
  if (use_shared) FlushSharedBins(bins, static_cast<int>(classes), counts);
  if (t == 0 && out_of_range != 0) atomicAdd(counts + classes, out_of_range);
}

}  // namespace

Status LaunchLabelKernel(const BatchPointers& batch, std::int64_t blocks, int shared_bins,
                         cudaStream_t stream) {
  if (blocks == 0) return Status::OK();
  const std::size_t shared_bytes = static_cast<std::size_t>(shared_bins) * sizeof(unsigned int);
  LabelKernel<<<static_cast<unsigned int>(blocks), kThreads, shared_bytes, stream>>>(batch,
                                                                                     shared_bins);
  TSTAT_CUDA_CHECK_LAUNCH(stream, "LabelKernel");
  return Status::OK();
}

}  // namespace tstat::kernels
