// The tables one batch launch reads: per-request parameters, work items of the
// channel kernel, merge jobs, sample jobs and count_values tables, plus the small pieces of logic
// that interpret them the same way on the device and in the CPU emulation.
//
// All structs are plain data: the CUDA backend copies vectors of them byte for
// byte into device memory (one async copy from pinned staging), the emulator
// reads them from the host vectors of the LaunchPlan. Offsets are 64-bit
// element indices into the batch's partial / final / counter / sample arrays.
// Plain C++ (no CUDA headers); the functions are pure.
#pragma once

#include <cstdint>

#include "kernels/aux_ops.h"
#include "kernels/hd.h"
#include "kernels/stats_ops.h"
#include "kernels/work_plan.h"

namespace tstat::kernels {

inline constexpr std::int64_t kNoSlot = -1;

// Everything a block needs to know about its tensor.
struct DeviceRequest {
  const unsigned char* data;  // first byte of the tensor
  std::int64_t numel;
  std::int32_t dtype;       // static_cast<int>(DType)
  std::int32_t aligned;     // 1 when data is a multiple of the element size
  Thresholds<float> th_f;   // compute type float (f32, f16, bf16, fp8)
  Thresholds<double> th_d;  // compute type double (f64, integers)
  // Stats pass: chunk partials [partial_base, +NumChunks(numel)), merged into
  // finals[final_index]. final_index is kNoSlot for label requests.
  std::int64_t partial_base;
  std::int64_t final_index;
  std::int64_t exp_hist;  // counters[exp_hist, +kExpHistBins), or kNoSlot
  // Linear histogram (lin_bins > 0): counters[lin_counts, +bins), then below,
  // then above.
  std::int32_t lin_bins;
  std::int32_t lin_fixed;
  double lin_lo, lin_hi;  // used when lin_fixed
  std::int64_t lin_counts;
  // Labels (label_classes > 0): counters[label_counts, +classes), then
  // out_of_range.
  std::int64_t label_classes;
  std::int64_t label_counts;
  // Per channel (ch_finals != kNoSlot): partial of (channel c, outer chunk k)
  // at partials[ch_partials + c * outer_chunks + k], merged into
  // finals[ch_finals + c].
  ChannelGeometry geo;
  std::int64_t outer_chunks;
  std::int64_t ch_partials;
  std::int64_t ch_finals;
  // Sample (sample_requested): values[sample_first, +sample_k).
  std::uint64_t sample_seed;
  std::int64_t sample_k;  // min(sample_count, numel)
  std::int64_t sample_first;
  // Delta (delta_prev != null): chunk partials delta_partials[delta_base,
  // +NumChunks(numel)), folded in chunk order by UnpackResults.
  const unsigned char* delta_prev;
  std::int32_t delta_aligned;  // 1 when delta_prev is a multiple of the element size
  DeltaTolerance delta_tol;
  std::int64_t delta_base;
  // Confusion matrix (conf_pred != null): counters[conf_counts,
  // +label_classes^2), then invalid. Predictions are conf_dtype class ids, or
  // logits rows of label_classes values when conf_argmax.
  const unsigned char* conf_pred;
  std::int32_t conf_dtype;
  std::int32_t conf_aligned;
  std::int32_t conf_argmax;
  std::int64_t conf_counts;
  // Value counts (value_n > 0): sorted entries value_table[value_first,
  // +value_n); counters[value_counts + i] counts options.count_values[i].
  std::int64_t value_first;
  std::int32_t value_n;
  std::int64_t value_counts;
  // Host-side bookkeeping for UnpackResults (not read by the kernels).
  std::int32_t channel_axis;      // options.per_channel_axis (-1: off)
  std::int32_t sample_requested;  // options.sample_count > 0
};

// One block of the per-channel kernel.
// Wide mapping (lanes == 0): one channel c0; the block's threads walk the
//   rows*inner elements of rows [row_begin, +rows) of that channel.
// Narrow mapping (lanes > 0): channels [c0, c0 + channels); thread t owns
//   channel c0 + t % group and lane t / group (< lanes); lane r reads rows
//   row_begin + r, + r + lanes, ...; the lanes of a channel merge in lane order.
struct ChannelItem {
  std::uint32_t request;
  std::int32_t lanes;
  std::int32_t group;
  std::int32_t channels;
  std::int64_t c0;
  std::int64_t row_begin;
  std::int64_t rows;
  std::int64_t chunk;  // outer-chunk index k of this item
};

// Merge segments s in [0, segments): finals[dst + s] = chunks partials
// partials[src + s*chunks, +chunks) folded in order. Global segment index of
// segment 0 is `first` (jobs are sorted by first and never empty).
struct MergeJob {
  std::int64_t first;
  std::int64_t segments;
  std::int64_t chunks;
  std::int64_t src;
  std::int64_t dst;
};

// Samples j in [0, count) of one request; value j goes to values[first + j].
struct SampleJob {
  std::int64_t first;
  std::int64_t count;
  std::uint32_t request;
};

// Index of the job holding global index g: the last job with first <= g.
template <class Job>
TSTAT_HD std::int64_t FindJob(const Job* jobs, std::int64_t num_jobs, std::int64_t g) {
  std::int64_t lo = 0, hi = num_jobs - 1;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo + 1) / 2;
    if (jobs[mid].first <= g) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// The chunk partials of merge segment s.
TSTAT_HD const StatsPartial* SegmentPartials(const StatsPartial* partials, const MergeJob& job,
                                             std::int64_t s) {
  return partials + job.src + s * job.chunks;
}
// finals[job.dst + s] of merge segment s, as the merge kernel's warp computes it.
inline StatsPartial MergeSegment(const StatsPartial* partials, const MergeJob& job,
                                 std::int64_t s) {
  return MergeChunksWarpOrder(SegmentPartials(partials, job, s), job.chunks,
                              StatsPartial::Identity(), MergeOp{});
}

TSTAT_HD const Thresholds<float>& ThresholdsOf(const DeviceRequest& r, float /*tag*/) {
  return r.th_f;
}
TSTAT_HD const Thresholds<double>& ThresholdsOf(const DeviceRequest& r, double /*tag*/) {
  return r.th_d;
}

// The linear-histogram range of a request, given its merged stats partial:
// the fixed range, else the finite [min, max] (AutoLinearRange), else
// [-0.5, 0.5] when no finite value exists.
struct LinearRange {
  double lo, hi, scale;
  int bins;
};
TSTAT_HD LinearRange LinearRangeOf(const DeviceRequest& r, const StatsPartial& merged) {
  LinearRange range;
  range.bins = r.lin_bins;
  if (r.lin_fixed) {
    range.lo = r.lin_lo;
    range.hi = r.lin_hi;
  } else if (merged.n == 0) {
    range.lo = -0.5;
    range.hi = 0.5;
  } else {
    AutoLinearRange(merged.min, merged.max, &range.lo, &range.hi);
  }
  range.scale = LinearScale(range.lo, range.hi, range.bins);
  return range;
}

}  // namespace tstat::kernels
