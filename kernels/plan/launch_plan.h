// LaunchPlan: how one batch of requests becomes the tables and grids of the
// CUDA backend's launches. Built on the host by BuildLaunchPlan(); the CUDA
// backend copies the tables to the device, the CPU emulation executes them
// directly, so both run the identical work decomposition.
//
// Launches of one batch, in stream order (each only when it has work):
//   1. stats kernel      one block per WorkItem of stats_items (every chunk of
//                        every tensor, label tensors too, all dtypes mixed)
//   2. channel kernel    one block per ChannelItem (both mappings mixed)
//   3. merge kernel      one thread per merge segment (tensor or channel):
//                        chunk partials folded in chunk order -> finals
//   4. linear kernel     pass 2 over linear_items; range from finals (device)
//   5. label kernel      one block per WorkItem of label_items
//   6. sample kernel     one thread per sampled element
//   7. delta kernel      one block per WorkItem of delta_items (the chunks of
//                        requests with options.delta): chunk delta partials,
//                        folded in chunk order by UnpackResults
//   8. confusion kernel  one block per WorkItem of confusion_items (the chunks
//                        of label requests with options.confusion)
//   9. value kernel      one block per WorkItem of value_items (the chunks of
//                        integer requests with options.count_values)
// So a batch costs at most 9 kernel launches whatever its size (6 without the
// auxiliary reductions).
//
// Header-only (inline) so that the emulator builds without nvcc. Not
// thread-safe per plan object; BuildLaunchPlan is reentrant.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/aux_ops.h"
#include "kernels/plan/launch_tables.h"
#include "kernels/plan/tuning.h"
#include "kernels/request_check.h"
#include "kernels/stats_ops.h"
#include "kernels/work_plan.h"
#include "tstat/engine.h"

namespace tstat::kernels {

struct LaunchPlan {
  int threads_per_block = LaunchPolicy::kThreadsPerBlock;
  // Per batch request: its validation status and its index in `requests`
  // (-1 when it failed validation and runs nowhere).
  std::vector<Status> status;
  std::vector<std::int32_t> device_request;

  std::vector<DeviceRequest> requests;
  std::vector<WorkItem> stats_items;  // request = index into `requests`
  std::vector<WorkItem> linear_items;
  std::vector<WorkItem> label_items;
  std::vector<ChannelItem> channel_items;
  std::vector<MergeJob> merge_jobs;
  std::vector<SampleJob> sample_jobs;
  std::vector<WorkItem> delta_items;
  std::vector<WorkItem> confusion_items;
  std::vector<WorkItem> value_items;
  // The sorted count_values tables of every request (DeviceRequest::value_first).
  std::vector<ValueEntry> value_table;
  std::int64_t merge_segments = 0;  // threads of the merge kernel
  std::int64_t sample_total = 0;    // threads of the sample kernel

  // Sizes of the batch arrays (elements).
  std::int64_t num_partials = 0;  // StatsPartial, scratch
  std::int64_t num_finals = 0;    // StatsPartial, output
  std::int64_t num_counters = 0;  // uint64, output, zeroed before the launches
  // DeltaPartial, output (chunk partials of delta requests).
  std::int64_t num_delta_partials = 0;

  // Dynamic shared-memory bins (uint32) of the linear / label / confusion
  // kernels: the largest bin count <= kSharedHistBins among their requests (0:
  // none). Confusion bins are cells (label_classes^2).
  int linear_shared_bins = 0;
  int label_shared_bins = 0;
  int confusion_shared_bins = 0;

  // Empties the plan for the next batch; the vectors keep their capacity, so a
  // session's steady state plans without allocating.
  void Reset() {
    status.clear();
    device_request.clear();
    requests.clear();
    stats_items.clear();
    linear_items.clear();
    label_items.clear();
    channel_items.clear();
    merge_jobs.clear();
    sample_jobs.clear();
    delta_items.clear();
    confusion_items.clear();
    value_items.clear();
    value_table.clear();
    merge_segments = sample_total = 0;
    num_partials = num_finals = num_counters = num_delta_partials = 0;
    linear_shared_bins = label_shared_bins = confusion_shared_bins = 0;
  }

  int KernelLaunches() const {
    return static_cast<int>(!stats_items.empty()) + static_cast<int>(!channel_items.empty()) +
           static_cast<int>(merge_segments > 0) + static_cast<int>(!linear_items.empty()) +
           static_cast<int>(!label_items.empty()) + static_cast<int>(sample_total > 0) +
           static_cast<int>(!delta_items.empty()) + static_cast<int>(!confusion_items.empty()) +
           static_cast<int>(!value_items.empty());
  }
};

namespace plan_internal {

inline std::int64_t CeilDiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Appends the chunk work items of a tensor of n elements.
inline void AddChunkItems(std::uint32_t request, std::int64_t n, std::vector<WorkItem>* items) {
  const std::int64_t chunk = ChunkElems(n);
  const std::int64_t chunks = NumChunks(n);
  for (std::int64_t k = 0; k < chunks; ++k) {
    const std::int64_t begin = k * chunk;
    items->push_back(
        WorkItem{request, static_cast<std::uint32_t>(k), begin, std::min(chunk, n - begin)});
  }
}

// Per-channel items of one request (see ChannelItem for the two mappings).
inline void PlanChannels(std::uint32_t request, const ReductionRequest& r, int threads,
                         DeviceRequest* d, LaunchPlan* plan) {
  std::int64_t outer = 0, channels = 0, inner = 0;
  ChannelDims(r.tensor, r.options.per_channel_axis, &outer, &channels, &inner);
  d->geo = ChannelGeometry{outer, channels, inner};
  d->ch_finals = plan->num_finals;
  plan->num_finals += channels;
  d->ch_partials = plan->num_partials;
  d->outer_chunks = 0;
  if (channels == 0) return;
  if (outer > 0 && inner > 0) {
    const bool wide = inner >= LaunchPolicy::kWideChannelInner;
    const std::int64_t group = wide ? 1 : std::min<std::int64_t>(channels, threads);
    // Rows per item: enough that a block has >= kMinChunkElems elements, and
    // at most kMaxChunksPerTensor outer chunks per channel.
    std::int64_t rows = CeilDiv(kMinChunkElems, group * inner);
    rows = std::max(rows, CeilDiv(outer, kMaxChunksPerTensor));
    rows = std::min(rows, outer);
    const std::int64_t chunks = CeilDiv(outer, rows);
    d->outer_chunks = chunks;
    for (std::int64_t c0 = 0; c0 < channels; c0 += group) {
      for (std::int64_t k = 0; k < chunks; ++k) {
        ChannelItem item;
        item.request = request;
        item.lanes = wide ? 0 : static_cast<std::int32_t>(threads / group);
        item.group = static_cast<std::int32_t>(group);
        item.channels = static_cast<std::int32_t>(std::min(group, channels - c0));
        item.c0 = c0;
        item.row_begin = k * rows;
        item.rows = std::min(rows, outer - k * rows);
        item.chunk = k;
        plan->channel_items.push_back(item);
      }
    }
  }
  plan->num_partials += channels * d->outer_chunks;
  plan->merge_jobs.push_back(
      MergeJob{plan->merge_segments, channels, d->outer_chunks, d->ch_partials, d->ch_finals});
  plan->merge_segments += channels;
}

// The auxiliary reductions of one request: delta (stats requests), confusion
// matrix (label requests), value counts (integer requests).
inline void PlanAux(std::uint32_t request, const ReductionRequest& r, DeviceRequest* d,
                    LaunchPlan* plan) {
  const StatsOptions& o = r.options;
  const std::int64_t n = r.tensor.numel;
  d->delta_base = d->conf_counts = d->value_counts = kNoSlot;
  if (o.delta.previous != nullptr) {
    const auto size = static_cast<std::uintptr_t>(DTypeSize(r.tensor.dtype));
    d->delta_prev = static_cast<const unsigned char*>(o.delta.previous);
    d->delta_aligned = reinterpret_cast<std::uintptr_t>(o.delta.previous) % size == 0 ? 1 : 0;
    d->delta_tol = DeltaTolerance{o.delta.atol, o.delta.rtol};
    d->delta_base = plan->num_delta_partials;
    plan->num_delta_partials += NumChunks(n);
    AddChunkItems(request, n, &plan->delta_items);
  }
  if (o.confusion.predictions != nullptr) {
    const ConfusionOptions& c = o.confusion;
    const auto size = static_cast<std::uintptr_t>(DTypeSize(c.predictions_dtype));
    const std::int64_t cells = static_cast<std::int64_t>(o.label_classes) * o.label_classes;
    d->conf_pred = static_cast<const unsigned char*>(c.predictions);
    d->conf_dtype = static_cast<std::int32_t>(c.predictions_dtype);
    d->conf_aligned = reinterpret_cast<std::uintptr_t>(c.predictions) % size == 0 ? 1 : 0;
    d->conf_argmax = c.argmax ? 1 : 0;
    d->conf_counts = plan->num_counters;
    plan->num_counters += cells + 1;
    AddChunkItems(request, n, &plan->confusion_items);
    if (cells <= LaunchPolicy::kSharedHistBins) {
      plan->confusion_shared_bins = std::max(plan->confusion_shared_bins, static_cast<int>(cells));
    }
  }
  if (!o.count_values.empty()) {
    const std::vector<ValueEntry> table = BuildValueTable(o.count_values);
    d->value_first = static_cast<std::int64_t>(plan->value_table.size());
    d->value_n = static_cast<std::int32_t>(table.size());
    plan->value_table.insert(plan->value_table.end(), table.begin(), table.end());
    d->value_counts = plan->num_counters;
    plan->num_counters += d->value_n;
    AddChunkItems(request, n, &plan->value_items);
  }
}

// CheckRequest plus what the CUDA work plan itself needs.
inline Status Validate(const ReductionRequest& r, BackendKind kind, int cuda_device) {
  TSTAT_RETURN_IF_ERROR(CheckRequest(r, kind));
  if (r.tensor.numel > LaunchPolicy::kMaxStatsNumel) {
    return Status::NotSupported("tensor.numel " + std::to_string(r.tensor.numel) +
                                " exceeds 2^42, the largest tensor the CUDA work plan handles");
  }
  if (cuda_device >= 0 && r.tensor.device != cuda_device) {
    return Status::InvalidArgument("tensor.device is " + std::to_string(r.tensor.device) +
                                   " but this CUDA backend runs on device " +
                                   std::to_string(cuda_device));
  }
  return Status::OK();
}

inline Status GridCheck(const char* what, std::int64_t blocks) {
  if (blocks > LaunchPolicy::kMaxGridBlocks) {
    return Status::ResourceExhausted(std::string("batch needs ") + std::to_string(blocks) + " " +
                                     what +
                                     " blocks, more than one launch allows (2^31-1); "
                                     "split the batch");
  }
  return Status::OK();
}

}  // namespace plan_internal

// Validates every request (CheckRequest for `kind`; with cuda_device >= 0 also
// that tensor.device is that device; with `memory_status`, the caller's own
// per-request verdict on the tensor's memory, taken when the rest passes) and
// lays out the batch. Per-request problems land in plan->status; a non-OK
// return is a batch-level failure (the batch is too large for one launch).
inline Status BuildLaunchPlan(const std::vector<ReductionRequest>& batch, BackendKind kind,
                              int threads_per_block, LaunchPlan* plan, int cuda_device = -1,
                              const std::vector<Status>* memory_status = nullptr) {
  using plan_internal::AddChunkItems;
  plan->Reset();
  plan->threads_per_block = threads_per_block;
  plan->device_request.assign(batch.size(), -1);
  if (batch.size() >= 0x7fffffffu) {
    return Status::ResourceExhausted("batch has more than 2^31-1 requests");
  }
  plan->status.reserve(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const ReductionRequest& r = batch[i];
    plan->status.push_back(plan_internal::Validate(r, kind, cuda_device));
    if (plan->status.back().ok() && memory_status != nullptr && i < memory_status->size()) {
      plan->status.back() = (*memory_status)[i];
    }
    if (!plan->status.back().ok()) continue;

    const StatsOptions& o = r.options;
    const std::int64_t n = r.tensor.numel;
    const auto index = static_cast<std::uint32_t>(plan->requests.size());
    plan->device_request[i] = static_cast<std::int32_t>(index);
    DeviceRequest d{};
    d.data = static_cast<const unsigned char*>(r.tensor.data);
    d.numel = n;
    d.dtype = static_cast<std::int32_t>(r.tensor.dtype);
    const auto size = static_cast<std::uintptr_t>(DTypeSize(r.tensor.dtype));
    d.aligned = reinterpret_cast<std::uintptr_t>(r.tensor.data) % size == 0 ? 1 : 0;
    const double min_normal = MinNormalOf(r.tensor.dtype);
    d.th_f = MakeThresholds<float>(o.band_lo, o.band_hi, o.small_eps, min_normal);
    d.th_d = MakeThresholds<double>(o.band_lo, o.band_hi, o.small_eps, min_normal);
    d.partial_base = d.final_index = d.exp_hist = kNoSlot;
    d.lin_counts = d.label_counts = d.ch_partials = d.ch_finals = kNoSlot;
    d.channel_axis = o.per_channel_axis;
    d.sample_requested = o.sample_count > 0 ? 1 : 0;

    if (o.label_classes > 0) {
      d.label_classes = o.label_classes;
      d.label_counts = plan->num_counters;
      plan->num_counters += o.label_classes + 1;
      AddChunkItems(index, n, &plan->label_items);
      if (o.label_classes <= LaunchPolicy::kSharedHistBins) {
        plan->label_shared_bins = std::max(plan->label_shared_bins, o.label_classes);
      }
    }
    {  // the stat set (label requests too)
      const std::size_t first_item = plan->stats_items.size();
      d.partial_base = plan->num_partials;
      plan->num_partials += NumChunks(n);
      d.final_index = plan->num_finals++;
      AddChunkItems(index, n, &plan->stats_items);
      plan->merge_jobs.push_back(
          MergeJob{plan->merge_segments, 1, NumChunks(n), d.partial_base, d.final_index});
      plan->merge_segments += 1;
      if (o.exponent_histogram) {
        d.exp_hist = plan->num_counters;
        plan->num_counters += kExpHistBins;
      }
      const LinearHistogramOptions& h = o.linear_histogram;
      if (h.bins > 0) {  // never with label counts (CheckRequest)
        d.lin_bins = h.bins;
        d.lin_fixed = h.fixed_range ? 1 : 0;
        d.lin_lo = h.lo;
        d.lin_hi = h.hi;
        d.lin_counts = plan->num_counters;
        plan->num_counters += h.bins + 2;
        plan->linear_items.insert(plan->linear_items.end(), plan->stats_items.begin() + first_item,
                                  plan->stats_items.end());
        if (h.bins <= LaunchPolicy::kSharedHistBins) {
          plan->linear_shared_bins = std::max(plan->linear_shared_bins, h.bins);
        }
      }
      if (o.per_channel_axis >= 0) {
        plan_internal::PlanChannels(index, r, threads_per_block, &d, plan);
      }
    }
    plan_internal::PlanAux(index, r, &d, plan);
    if (o.sample_count > 0) {
      d.sample_seed = o.sample_seed;
      d.sample_k = std::min<std::int64_t>(o.sample_count, n);
      d.sample_first = plan->sample_total;
      if (d.sample_k > 0) {
        plan->sample_jobs.push_back(SampleJob{plan->sample_total, d.sample_k, index});
        plan->sample_total += d.sample_k;
      }
    }
    plan->requests.push_back(d);
  }
  using plan_internal::GridCheck;
  TSTAT_RETURN_IF_ERROR(GridCheck("stats", static_cast<std::int64_t>(plan->stats_items.size())));
  TSTAT_RETURN_IF_ERROR(
      GridCheck("channel", static_cast<std::int64_t>(plan->channel_items.size())));
  TSTAT_RETURN_IF_ERROR(GridCheck("label", static_cast<std::int64_t>(plan->label_items.size())));
  TSTAT_RETURN_IF_ERROR(GridCheck("delta", static_cast<std::int64_t>(plan->delta_items.size())));
  TSTAT_RETURN_IF_ERROR(
      GridCheck("confusion", static_cast<std::int64_t>(plan->confusion_items.size())));
  TSTAT_RETURN_IF_ERROR(GridCheck("value", static_cast<std::int64_t>(plan->value_items.size())));
  TSTAT_RETURN_IF_ERROR(GridCheck(
      "merge", plan_internal::CeilDiv(plan->merge_segments,
                                      LaunchPolicy::kMergeThreadsPerBlock / kMergeLanes)));
  TSTAT_RETURN_IF_ERROR(GridCheck(
      "sample", plan_internal::CeilDiv(plan->sample_total, LaunchPolicy::kSampleThreadsPerBlock)));
  return Status::OK();
}

}  // namespace tstat::kernels
