// The kernels of the auxiliary reductions, each one block per chunk of the
// requests that ask for it (the same chunking as the stats and label kernels),
// threads visiting their elements as those kernels do (kernels/
// cuda_thread_work.h):
// - DeltaKernel: pairs (x, previous) of a chunk, 16-byte vector loads of both
//   when they share the 16-byte phase; the thread partials combine with
//   cub::BlockReduce (warp reductions, the BlockMergeOrder order) into one
//   DeltaPartial per chunk, folded in chunk order on the host. A separate
//   kernel rather than part of StatsKernel, whose register budget is spent
//   (see tuning.h): delta requests read x once more.
// - ConfusionKernel: (label, prediction) cells counted in dynamic shared
//   memory (uint32) when the request has at most `shared_bins` cells, flushed
//   to the global uint64 counts; otherwise global integer atomics. Invalid
//   pairs are summed per block and added once.
// - ValueCountKernel: the request's sorted count_values table (at most
//   kMaxCountValues entries) and its counts in shared memory; each element is
//   looked up by binary search.
// No float atomics. Stream-ordered on the caller's stream.
#include <cub/block/block_reduce.cuh>

#include "kernels/cuda/cuda_status.cuh"
#include "kernels/cuda/device_sinks.cuh"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/plan/cuda_thread_work.h"
#include "kernels/plan/tuning.h"

namespace tstat::kernels {
namespace {

constexpr int kThreads = LaunchPolicy::kThreadsPerBlock;
using DeltaReduce = cub::BlockReduce<DeltaPartial, kThreads, cub::BLOCK_REDUCE_WARP_REDUCTIONS>;

__global__ void __launch_bounds__(kThreads) DeltaKernel(BatchPointers batch) {
  __shared__ typename DeltaReduce::TempStorage reduce_storage;
  const WorkItem item = batch.delta_items[blockIdx.x];
  const DeviceRequest& r = batch.requests[item.request];
  const int t = static_cast<int>(threadIdx.x);
  DeltaPartial p = DeltaPartial::Identity();
  WithFloatDecoder(r.dtype, [&](auto dec) {
    using Dec = decltype(dec);
    const unsigned char* x = r.data + item.begin * Dec::kSize;
    const unsigned char* prev = r.delta_prev + item.begin * Dec::kSize;
    const ChunkSplit split =
        PairSplit(reinterpret_cast<std::uintptr_t>(x), reinterpret_cast<std::uintptr_t>(prev),
                  item.length, Dec::kSize);
    p = ThreadChunkDelta<Dec>(x, prev, split, r.aligned != 0, r.delta_aligned != 0, t, kThreads,
                              r.delta_tol);
  });
  const DeltaPartial block = DeltaReduce(reduce_storage).Reduce(p, DeltaMergeOp{});
  if (t == 0) batch.delta_partials[r.delta_base + item.slot] = block;
}

__global__ void __launch_bounds__(kThreads) ConfusionKernel(BatchPointers batch, int shared_bins) {
  extern __shared__ unsigned int bins[];
  __shared__ unsigned long long invalid;
  const WorkItem item = batch.confusion_items[blockIdx.x];
  const DeviceRequest& r = batch.requests[item.request];
  const int t = static_cast<int>(threadIdx.x);
  const int cells = static_cast<int>(r.label_classes * r.label_classes);  // <= 2048^2
  unsigned long long* counts = batch.counters + r.conf_counts;
  const bool use_shared = cells <= shared_bins;  // uniform per block
  if (t == 0) invalid = 0;
  if (use_shared) ZeroSharedBins(bins, cells);
  __syncthreads();
  const PredictionSource src = PredictionSourceOf(r);
  std::uint64_t bad = 0;
  WithLabelDecoder(r.dtype, [&](auto dec) {
    using Dec = decltype(dec);
    const unsigned char* chunk = r.data + item.begin * Dec::kSize;
    const ChunkSplit split =
        SplitChunk(reinterpret_cast<std::uintptr_t>(chunk), item.length, Dec::kSize);
    const bool aligned = r.aligned != 0;
    if (use_shared) {
      SharedBins sink{bins};
      bad = ThreadChunkConfusion<Dec>(chunk, split, aligned, item.begin, t, kThreads, src, sink);
    } else {
      GlobalBins sink{counts};
      bad = ThreadChunkConfusion<Dec>(chunk, split, aligned, item.begin, t, kThreads, src, sink);
    }
  });
  if (bad != 0) atomicAdd(&invalid, static_cast<unsigned long long>(bad));
  __syncthreads();
  if (use_shared) FlushSharedBins(bins, cells, counts);
  if (t == 0 && invalid != 0) atomicAdd(counts + cells, invalid);
}

__global__ void __launch_bounds__(kThreads) ValueCountKernel(BatchPointers batch) {
  __shared__ ValueEntry table[kMaxCountValues];
  __shared__ unsigned int bins[kMaxCountValues];
  const WorkItem item = batch.value_items[blockIdx.x];
  const DeviceRequest& r = batch.requests[item.request];
  const int t = static_cast<int>(threadIdx.x);
  const int entries = r.value_n;
  for (int k = t; k < entries; k += kThreads) {
    table[k] = batch.value_table[r.value_first + k];
    bins[k] = 0;
  }
  __syncthreads();
  WithLabelDecoder(r.dtype, [&](auto dec) {
    using Dec = decltype(dec);
    const unsigned char* chunk = r.data + item.begin * Dec::kSize;
    const ChunkSplit split =
        SplitChunk(reinterpret_cast<std::uintptr_t>(chunk), item.length, Dec::kSize);
    SharedBins sink{bins};
    ThreadChunkValueCounts<Dec>(chunk, split, r.aligned != 0, t, kThreads, table, entries, sink);
  });
  __syncthreads();
  FlushSharedBins(bins, entries, batch.counters + r.value_counts);
}

}  // namespace

Status LaunchDeltaKernel(const BatchPointers& batch, std::int64_t blocks, cudaStream_t stream) {
  if (blocks == 0) return Status::OK();
  DeltaKernel<<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(batch);
  TSTAT_CUDA_CHECK_LAUNCH(stream, "DeltaKernel");
  return Status::OK();
}

Status LaunchConfusionKernel(const BatchPointers& batch, std::int64_t blocks, int shared_bins,
                             cudaStream_t stream) {
  if (blocks == 0) return Status::OK();
  const std::size_t shared_bytes = static_cast<std::size_t>(shared_bins) * sizeof(unsigned int);
  ConfusionKernel<<<static_cast<unsigned int>(blocks), kThreads, shared_bytes, stream>>>(
      batch, shared_bins);
  TSTAT_CUDA_CHECK_LAUNCH(stream, "ConfusionKernel");
  return Status::OK();
}

Status LaunchValueCountKernel(const BatchPointers& batch, std::int64_t blocks,
                              cudaStream_t stream) {
  if (blocks == 0) return Status::OK();
  ValueCountKernel<<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(batch);
  TSTAT_CUDA_CHECK_LAUNCH(stream, "ValueCountKernel");
  return Status::OK();
}

}  // namespace tstat::kernels
