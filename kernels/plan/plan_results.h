// UnpackResults: turns the output arrays of an executed LaunchPlan (merged
// partials, counters, sample values, chunk delta partials) into the public
// ReductionResults. Delta partials are folded here, in chunk order.
//
// Shared by the CUDA backend (arrays in its pinned output buffer, after the
// stream event completed) and the CPU emulation (host vectors), so both report
// identically. Host-only, header-only; reentrant.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/aux_ops.h"
#include "kernels/plan/launch_plan.h"
#include "kernels/plan/launch_tables.h"
#include "kernels/stats_ops.h"
#include "kernels/work_plan.h"
#include "tstat/engine.h"

namespace tstat::kernels {

// A default result carrying `status`. Built with swap rather than
// Status::operator=, whose discarded Status& nvcc's front end reports as an
// ignored [[nodiscard]] value.
inline ReductionResult ResultWithStatus(Status status) {
  ReductionResult r;
  std::swap(r.status, status);
  return r;
}

// The output arrays of one executed plan (sizes as the plan says).
struct PlanOutputs {
  const StatsPartial* finals;
  const double* samples;
  const std::uint64_t* counters;
  const DeltaPartial* delta_partials;
};

inline void UnpackResults(const LaunchPlan& plan, const PlanOutputs& outputs,
                          std::vector<ReductionResult>* results) {
  const StatsPartial* finals = outputs.finals;
  const std::uint64_t* counters = outputs.counters;
  // The results of the previous batch are overwritten in place (every field
  // set or reset), which keeps their buffers: no allocation per tensor in the
  // steady state of a session.
  results->resize(plan.status.size());
  for (std::size_t i = 0; i < plan.status.size(); ++i) {
    ReductionResult& out = (*results)[i];
    out.status = plan.status[i];
    out.stats = TensorStats();
    out.linear_histogram.reset();
    out.per_channel.reset();
    out.label_counts.reset();
    out.sample.reset();
    out.delta.reset();
    out.confusion.reset();
    out.value_counts.clear();
    const std::int32_t di = plan.device_request[i];
    if (di < 0) {
      out.exponent_histogram.reset();
      continue;
    }
    const DeviceRequest& d = plan.requests[static_cast<std::size_t>(di)];

    if (d.final_index != kNoSlot) out.stats = ToTensorStats(finals[d.final_index]);
    if (d.exp_hist != kNoSlot) {
      if (!out.exponent_histogram) out.exponent_histogram.emplace();
      ExponentHistogram& h = *out.exponent_histogram;
      std::copy(counters + d.exp_hist, counters + d.exp_hist + kExpHistBins, h.counts.begin());
      h.SetSpan();  // while the bins are in this core's cache
    } else {
      out.exponent_histogram.reset();
    }
    if (d.lin_bins > 0) {
      const LinearRange range = LinearRangeOf(d, finals[d.final_index]);
      LinearHistogram h;
      h.lo = range.lo;
      h.hi = range.hi;
      h.counts.assign(counters + d.lin_counts, counters + d.lin_counts + d.lin_bins);
      h.below = counters[d.lin_counts + d.lin_bins];
      h.above = counters[d.lin_counts + d.lin_bins + 1];
      out.linear_histogram = std::move(h);
    }
    if (d.ch_finals != kNoSlot) {
      PerChannelStats pc;
      pc.axis = d.channel_axis;
      pc.channels.reserve(static_cast<std::size_t>(d.geo.channels));
      for (std::int64_t c = 0; c < d.geo.channels; ++c) {
        pc.channels.push_back(ToTensorStats(finals[d.ch_finals + c]));
      }
      out.per_channel = std::move(pc);
    }
    if (d.label_classes > 0) {
      LabelCounts lc;
      lc.counts.assign(counters + d.label_counts, counters + d.label_counts + d.label_classes);
      lc.out_of_range = counters[d.label_counts + d.label_classes];
      out.label_counts = std::move(lc);
    }
    if (d.sample_requested) {
      ElementSample s;
      s.positions.resize(static_cast<std::size_t>(d.sample_k));
      s.values.resize(static_cast<std::size_t>(d.sample_k));
      for (std::int64_t j = 0; j < d.sample_k; ++j) {
        s.positions[j] = SamplePosition(d.sample_seed, j, d.numel, d.sample_k);
        s.values[j] = outputs.samples[d.sample_first + j];
      }
      out.sample = std::move(s);
    }
    if (d.delta_prev != nullptr) {
      out.delta =
          ToDeltaStats(MergeChunks(outputs.delta_partials + d.delta_base, NumChunks(d.numel),
                                   DeltaPartial::Identity(), DeltaMergeOp{}));
    }
    if (d.conf_pred != nullptr) {
      const std::int64_t cells = d.label_classes * d.label_classes;
      ConfusionMatrix m;
      m.classes = static_cast<int>(d.label_classes);
      m.counts.assign(counters + d.conf_counts, counters + d.conf_counts + cells);
      m.invalid = counters[d.conf_counts + cells];
      out.confusion = std::move(m);
    }
    if (d.value_n > 0) {
      out.value_counts.assign(counters + d.value_counts, counters + d.value_counts + d.value_n);
    }
  }
}

}  // namespace tstat::kernels
