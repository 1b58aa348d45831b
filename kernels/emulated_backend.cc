// CPU emulation of the CUDA backend (see emulated_backend.h). Each Emulate*
// function below is the host twin of one kernel in kernels/cuda/: it walks the
// same LaunchPlan table, runs the same per-thread bodies for t = 0..T-1, and
// combines the threads the way the kernel's block does. Shared-memory bins
// become block-local arrays flushed into the batch counters (atomically, since
// blocks run on OpenMP threads), global atomics become atomic adds.
#include "kernels/emulated_backend.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/aux_ops.h"
#include "kernels/plan/cuda_thread_work.h"
#include "kernels/plan/launch_plan.h"
#include "kernels/plan/launch_tables.h"
#include "kernels/plan/plan_results.h"
#include "kernels/plan/tuning.h"
#include "kernels/stats_ops.h"
#include "kernels/work_plan.h"

namespace tstat::kernels {
namespace {

void AtomicAdd(std::uint64_t* p, std::uint64_t v) {
#pragma omp atomic
  *p += v;
}

// Block-local bins (shared memory on the device).
struct ArrayBins {
  std::uint32_t* bins;
  void Add(int b) { ++bins[b]; }
};
// Bins counted straight into the batch counters (global atomics on the device).
struct CounterBins {
  std::uint64_t* counts;
  void Add(int b) { AtomicAdd(counts + b, 1); }
};

// Adds the non-zero block bins to the batch counters, as the kernels do.
void FlushBins(const std::uint32_t* bins, std::int64_t n, std::uint64_t* counts) {
  for (std::int64_t b = 0; b < n; ++b) {
    if (bins[b] != 0) AtomicAdd(counts + b, bins[b]);
  }
}

// What the device memory of one batch holds.
struct BatchArrays {
  std::vector<StatsPartial> partials, finals;
  std::vector<double> samples;
  std::vector<std::uint64_t> counters;
  std::vector<DeltaPartial> delta_partials;
};

// Per-OpenMP-thread scratch: the block's per-thread partials and bins.
struct BlockScratch {
  std::vector<StatsPartial> per_thread;
  std::vector<DeltaPartial> per_thread_delta;
  std::vector<std::uint32_t> bins;
};

// Below these sizes a launch is emulated on the calling thread: waking the
// OpenMP team costs more than the work (and a busy machine can delay a
// sleeping worker by a scheduler tick, per parallel region).
constexpr std::int64_t kParallelMinBlocks = 16;
constexpr std::int64_t kParallelMinThreads = 1 << 14;  // merge / sample kernels

// Runs fn(block, scratch) for every block of a launch, blocks in parallel.
template <class Fn>
void ForEachBlock(std::int64_t blocks, int threads, Fn&& fn) {
  if (blocks == 0) return;
#pragma omp parallel if (blocks >= kParallelMinBlocks)
  {
    BlockScratch scratch;
    scratch.per_thread.resize(static_cast<std::size_t>(threads));
    scratch.per_thread_delta.resize(static_cast<std::size_t>(threads));
#pragma omp for schedule(dynamic, 4)
    for (std::int64_t b = 0; b < blocks; ++b) fn(b, &scratch);
  }
}

// StatsKernel: one chunk -> one partial (+ exponent bins).
void EmulateStatsBlock(const LaunchPlan& plan, const WorkItem& item, BlockScratch* s,
                       BatchArrays* a) {
  const DeviceRequest& r = plan.requests[item.request];
  const int T = plan.threads_per_block;
  StatsPartial* per_thread = s->per_thread.data();
  WithDecoder(r.dtype, [&](auto dec) {
    using Dec = decltype(dec);
    const unsigned char* chunk = r.data + item.begin * Dec::kSize;
    const ChunkSplit split =
        SplitChunk(reinterpret_cast<std::uintptr_t>(chunk), item.length, Dec::kSize);
    const auto& th = ThresholdsOf(r, typename Dec::Compute{});
    const bool aligned = r.aligned != 0;
    if (r.exp_hist != kNoSlot) {
      std::uint32_t hist[kExpHistBins] = {};
      ArrayBins sink{hist};
      for (int t = 0; t < T; ++t) {
        per_thread[t] = ThreadChunkStats<Dec>(chunk, split, aligned, t, T, th, sink);
      }
      FlushBins(hist, kExpHistBins, a->counters.data() + r.exp_hist);
    } else {
      NoHistogram none;
      for (int t = 0; t < T; ++t) {
        per_thread[t] = ThreadChunkStats<Dec>(chunk, split, aligned, t, T, th, none);
      }
    }
  });
  a->partials[static_cast<std::size_t>(r.partial_base + item.slot)] =
      BlockMergeOrder(per_thread, T, MergeOp{});
}

// ChannelKernel: one (channel, outer range) or one channel group.
void EmulateChannelBlock(const LaunchPlan& plan, const ChannelItem& item, BlockScratch* s,
                         BatchArrays* a) {
  const DeviceRequest& r = plan.requests[item.request];
  const int T = plan.threads_per_block;
  StatsPartial* per_thread = s->per_thread.data();
  WithDecoder(r.dtype, [&](auto dec) {
    using Dec = decltype(dec);
    const auto& th = ThresholdsOf(r, typename Dec::Compute{});
    const bool aligned = r.aligned != 0;
    if (item.lanes == 0) {
      for (int t = 0; t < T; ++t) {
        per_thread[t] = ThreadChannelWide<Dec>(r.data, aligned, r.geo, item.c0, item.row_begin,
                                               item.rows, t, T, th);
      }
      a->partials[static_cast<std::size_t>(r.ch_partials + item.c0 * r.outer_chunks + item.chunk)] =
          BlockMergeOrder(per_thread, T, MergeOp{});
      return;
    }
    for (int t = 0; t < T; ++t) {
      std::int64_t c = 0;
      int lane = 0;
      per_thread[t] = NarrowThreadRole(item, t, &c, &lane)
                          ? ThreadChannelNarrow<Dec>(r.data, aligned, r.geo, c, item.row_begin,
                                                     item.rows, lane, item.lanes, th)
                          : StatsPartial::Identity();
    }
    for (int j = 0; j < item.channels; ++j) {
      a->partials[static_cast<std::size_t>(r.ch_partials + (item.c0 + j) * r.outer_chunks +
                                           item.chunk)] = NarrowChannelMerge(per_thread, item, j);
    }
  });
}

// LinearHistKernel: pass 2 over one chunk, range from the merged partial.
void EmulateLinearBlock(const LaunchPlan& plan, const WorkItem& item, BlockScratch* s,
                        BatchArrays* a) {
  const DeviceRequest& r = plan.requests[item.request];
  const int T = plan.threads_per_block;
  const LinearRange range = LinearRangeOf(r, a->finals[static_cast<std::size_t>(r.final_index)]);
  std::uint64_t* counts = a->counters.data() + r.lin_counts;
  std::uint64_t below = 0, above = 0;
  WithDecoder(r.dtype, [&](auto dec) {
    using Dec = decltype(dec);
    const unsigned char* chunk = r.data + item.begin * Dec::kSize;
    const ChunkSplit split =
        SplitChunk(reinterpret_cast<std::uintptr_t>(chunk), item.length, Dec::kSize);
    const bool aligned = r.aligned != 0;
    if (r.lin_bins <= plan.linear_shared_bins) {
      s->bins.assign(static_cast<std::size_t>(r.lin_bins), 0);
      ArrayBins sink{s->bins.data()};
      for (int t = 0; t < T; ++t) {
        const OutsideCounts o =
            ThreadChunkLinearHist<Dec>(chunk, split, aligned, t, T, range, sink);
        below += o.below;
        above += o.above;
      }
      FlushBins(s->bins.data(), r.lin_bins, counts);
    } else {
      CounterBins sink{counts};
      for (int t = 0; t < T; ++t) {
        const OutsideCounts o =
            ThreadChunkLinearHist<Dec>(chunk, split, aligned, t, T, range, sink);
        below += o.below;
        above += o.above;
      }
    }
  });
  if (below != 0) AtomicAdd(counts + r.lin_bins, below);
  if (above != 0) AtomicAdd(counts + r.lin_bins + 1, above);
}

// LabelKernel: bincount of one chunk.
void EmulateLabelBlock(const LaunchPlan& plan, const WorkItem& item, BlockScratch* s,
                       BatchArrays* a) {
  const DeviceRequest& r = plan.requests[item.request];
  const int T = plan.threads_per_block;
  std::uint64_t* counts = a->counters.data() + r.label_counts;
  std::uint64_t out_of_range = 0;
  WithLabelDecoder(r.dtype, [&](auto dec) {
    using Dec = decltype(dec);
    const unsigned char* chunk = r.data + item.begin * Dec::kSize;
    const ChunkSplit split =
        SplitChunk(reinterpret_cast<std::uintptr_t>(chunk), item.length, Dec::kSize);
    const bool aligned = r.aligned != 0;
    if (r.label_classes <= plan.label_shared_bins) {
      s->bins.assign(static_cast<std::size_t>(r.label_classes), 0);
      ArrayBins sink{s->bins.data()};
      for (int t = 0; t < T; ++t) {
        out_of_range += ThreadChunkLabels<Dec>(chunk, split, aligned, t, T, r.label_classes, sink);
      }
      FlushBins(s->bins.data(), r.label_classes, counts);
    } else {
      CounterBins sink{counts};
      for (int t = 0; t < T; ++t) {
        out_of_range += ThreadChunkLabels<Dec>(chunk, split, aligned, t, T, r.label_classes, sink);
      }
    }
  });
  if (out_of_range != 0) AtomicAdd(counts + r.label_classes, out_of_range);
}

// DeltaKernel: one chunk of (x, previous) pairs -> one delta partial.
void EmulateDeltaBlock(const LaunchPlan& plan, const WorkItem& item, BlockScratch* s,
                       BatchArrays* a) {
  const DeviceRequest& r = plan.requests[item.request];
  const int T = plan.threads_per_block;
  DeltaPartial* per_thread = s->per_thread_delta.data();
  WithFloatDecoder(r.dtype, [&](auto dec) {
    using Dec = decltype(dec);
    const unsigned char* x = r.data + item.begin * Dec::kSize;
    const unsigned char* prev = r.delta_prev + item.begin * Dec::kSize;
    const ChunkSplit split =
        PairSplit(reinterpret_cast<std::uintptr_t>(x), reinterpret_cast<std::uintptr_t>(prev),
                  item.length, Dec::kSize);
    for (int t = 0; t < T; ++t) {
      per_thread[t] = ThreadChunkDelta<Dec>(x, prev, split, r.aligned != 0, r.delta_aligned != 0, t,
                                            T, r.delta_tol);
    }
  });
  a->delta_partials[static_cast<std::size_t>(r.delta_base + item.slot)] =
      BlockMergeOrder(per_thread, T, DeltaMergeOp{});
}

// ConfusionKernel: (label, prediction) cells of one chunk.
void EmulateConfusionBlock(const LaunchPlan& plan, const WorkItem& item, BlockScratch* s,
                           BatchArrays* a) {
  const DeviceRequest& r = plan.requests[item.request];
  const int T = plan.threads_per_block;
  const std::int64_t cells = r.label_classes * r.label_classes;
  std::uint64_t* counts = a->counters.data() + r.conf_counts;
  const PredictionSource src = PredictionSourceOf(r);
  std::uint64_t invalid = 0;
  WithLabelDecoder(r.dtype, [&](auto dec) {
    using Dec = decltype(dec);
    const unsigned char* chunk = r.data + item.begin * Dec::kSize;
    const ChunkSplit split =
        SplitChunk(reinterpret_cast<std::uintptr_t>(chunk), item.length, Dec::kSize);
    const bool aligned = r.aligned != 0;
    if (cells <= plan.confusion_shared_bins) {
      s->bins.assign(static_cast<std::size_t>(cells), 0);
      ArrayBins sink{s->bins.data()};
      for (int t = 0; t < T; ++t) {
        invalid += ThreadChunkConfusion<Dec>(chunk, split, aligned, item.begin, t, T, src, sink);
      }
      FlushBins(s->bins.data(), cells, counts);
    } else {
      CounterBins sink{counts};
      for (int t = 0; t < T; ++t) {
        invalid += ThreadChunkConfusion<Dec>(chunk, split, aligned, item.begin, t, T, src, sink);
      }
    }
  });
  if (invalid != 0) AtomicAdd(counts + cells, invalid);
}

// ValueCountKernel: count_values matches of one chunk.
void EmulateValueBlock(const LaunchPlan& plan, const WorkItem& item, BlockScratch* s,
                       BatchArrays* a) {
  const DeviceRequest& r = plan.requests[item.request];
  const int T = plan.threads_per_block;
  const ValueEntry* table = plan.value_table.data() + r.value_first;
  s->bins.assign(static_cast<std::size_t>(r.value_n), 0);
  WithLabelDecoder(r.dtype, [&](auto dec) {
    using Dec = decltype(dec);
    const unsigned char* chunk = r.data + item.begin * Dec::kSize;
    const ChunkSplit split =
        SplitChunk(reinterpret_cast<std::uintptr_t>(chunk), item.length, Dec::kSize);
    ArrayBins sink{s->bins.data()};
    for (int t = 0; t < T; ++t) {
      ThreadChunkValueCounts<Dec>(chunk, split, r.aligned != 0, t, T, table, r.value_n, sink);
    }
  });
  FlushBins(s->bins.data(), r.value_n, a->counters.data() + r.value_counts);
}

// Runs fn(item, scratch) for every block of a launch over `items`.
template <class Fn>
void ForEachItem(const std::vector<WorkItem>& items, int threads, Fn&& fn) {
  ForEachBlock(static_cast<std::int64_t>(items.size()), threads,
               [&](std::int64_t b, BlockScratch* s) { fn(items[static_cast<std::size_t>(b)], s); });
}

// Executes every launch of the plan in stream order.
void Execute(const LaunchPlan& plan, BatchArrays* a) {
  const int T = plan.threads_per_block;
  ForEachBlock(static_cast<std::int64_t>(plan.stats_items.size()), T,
               [&](std::int64_t b, BlockScratch* s) {
                 EmulateStatsBlock(plan, plan.stats_items[static_cast<std::size_t>(b)], s, a);
               });
  ForEachBlock(static_cast<std::int64_t>(plan.channel_items.size()), T,
               [&](std::int64_t b, BlockScratch* s) {
                 EmulateChannelBlock(plan, plan.channel_items[static_cast<std::size_t>(b)], s, a);
               });
  // MergeKernel: one thread per segment.
  const auto num_jobs = static_cast<std::int64_t>(plan.merge_jobs.size());
#pragma omp parallel for schedule(static) if (plan.merge_segments >= kParallelMinThreads)
  for (std::int64_t g = 0; g < plan.merge_segments; ++g) {
    const MergeJob& job =
        plan.merge_jobs[static_cast<std::size_t>(FindJob(plan.merge_jobs.data(), num_jobs, g))];
    a->finals[static_cast<std::size_t>(job.dst + (g - job.first))] =
        MergeSegment(a->partials.data(), job, g - job.first);
  }
  ForEachBlock(static_cast<std::int64_t>(plan.linear_items.size()), T,
               [&](std::int64_t b, BlockScratch* s) {
                 EmulateLinearBlock(plan, plan.linear_items[static_cast<std::size_t>(b)], s, a);
               });
  ForEachBlock(static_cast<std::int64_t>(plan.label_items.size()), T,
               [&](std::int64_t b, BlockScratch* s) {
                 EmulateLabelBlock(plan, plan.label_items[static_cast<std::size_t>(b)], s, a);
               });
  // SampleKernel: one thread per sample.
  const auto num_sample_jobs = static_cast<std::int64_t>(plan.sample_jobs.size());
#pragma omp parallel for schedule(static) if (plan.sample_total >= kParallelMinThreads)
  for (std::int64_t g = 0; g < plan.sample_total; ++g) {
    const SampleJob& job = plan.sample_jobs[static_cast<std::size_t>(
        FindJob(plan.sample_jobs.data(), num_sample_jobs, g))];
    a->samples[static_cast<std::size_t>(g)] =
        GatherSample(plan.requests[job.request], g - job.first);
  }
  ForEachItem(plan.delta_items, T,
              [&](const WorkItem& item, BlockScratch* s) { EmulateDeltaBlock(plan, item, s, a); });
  ForEachItem(plan.confusion_items, T, [&](const WorkItem& item, BlockScratch* s) {
    EmulateConfusionBlock(plan, item, s, a);
  });
  ForEachItem(plan.value_items, T,
              [&](const WorkItem& item, BlockScratch* s) { EmulateValueBlock(plan, item, s, a); });
}

// options.delta.next, which the CUDA backend does not take: the tensors of
// the valid requests that have one, copied once every pass has read them.
void CopyDeltaNext(const std::vector<ReductionRequest>& requests,
                   const std::vector<ReductionResult>& results) {
  for (std::size_t i = 0; i < requests.size() && i < results.size(); ++i) {
    const ReductionRequest& r = requests[i];
    if (r.options.delta.next == nullptr || r.tensor.numel <= 0 || !results[i].status.ok()) {
      continue;
    }
    std::memcpy(r.options.delta.next, r.tensor.data,
                static_cast<std::size_t>(r.tensor.numel) * DTypeSize(r.tensor.dtype));
  }
}

class EmulatedCudaBackend final : public Backend {
 public:
  explicit EmulatedCudaBackend(int threads) : threads_(threads) {}

  BackendKind kind() const override { return BackendKind::kCpu; }
  std::string description() const override {
    return "cuda-emulated (" + std::to_string(threads_) + " threads/block)";
  }

  Status Reduce(const std::vector<ReductionRequest>& requests,
                std::vector<ReductionResult>* results, CUstream_st* /*stream*/) override {
    if (results == nullptr) return Status::InvalidArgument("results is null");
    LaunchPlan plan;
    const Status st = BuildLaunchPlan(requests, BackendKind::kCpu, threads_, &plan);
    if (!st.ok()) {
      results->assign(requests.size(), ResultWithStatus(st));
      return st;
    }
    BatchArrays a;
    a.partials.resize(static_cast<std::size_t>(plan.num_partials));
    a.finals.resize(static_cast<std::size_t>(plan.num_finals));
    a.samples.resize(static_cast<std::size_t>(plan.sample_total));
    a.counters.assign(static_cast<std::size_t>(plan.num_counters), 0);
    a.delta_partials.resize(static_cast<std::size_t>(plan.num_delta_partials));
    Execute(plan, &a);
    const PlanOutputs outputs{a.finals.data(), a.samples.data(), a.counters.data(),
                              a.delta_partials.data()};
    UnpackResults(plan, outputs, results);
    CopyDeltaNext(requests, *results);
    return Status::OK();
  }

 private:
  int threads_;
};

}  // namespace

std::unique_ptr<Backend> CreateEmulatedCudaBackend(int threads_per_block) {
  int t = (threads_per_block + 31) / 32 * 32;
  t = std::clamp(t, 32, 1024);
  return std::make_unique<EmulatedCudaBackend>(t);
}

}  // namespace tstat::kernels
