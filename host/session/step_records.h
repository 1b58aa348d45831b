// The records of a step batch, shared by EndStep's capture (step_capture.h)
// and the ad-hoc saves: a reduction's result as a stats record, raw
// snapshots reserved against the pipeline's raw memory cap, and the drop
// records of a step the writer queue had no room for.
// Thread safety: none of its own; the session lock serializes its callers
// (AddResult also runs on the collector thread, on that step's batch only).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/pipeline/pipeline.h"
#include "host/pipeline/snapshot_buffer_pool.h"
#include "tstat/engine.h"
#include "tstat/stats_record.h"

namespace tstat::host {

// The shape a record stores: the view's, or [numel] for a view without one.
std::vector<std::int64_t> ShapeOf(const TensorView& v);
std::uint64_t ViewBytes(const TensorView& v);

// "raw snapshot memory cap (256 MiB) reached"
std::string RawCapReason(std::int64_t cap_bytes);

// Whether a request with options `o` yields stats and an exponent histogram
// only (AddResult's short path).
bool RequestsOnlyStats(const StatsOptions& o);

// One record from one result (a drop record when the result failed),
// appended to batch->stats; or, with `filled`, written over
// batch->stats[*filled] when that is a record of an earlier step
// (Pipeline::TakeSpareRecords), then ++*filled. Every member is assigned,
// and the old record's buffers are reused (its exponent histogram's counts).
// The caller erases the stale records past *filled. With `only_stats`
// (RequestsOnlyStats), the members past the histogram are neither read nor
// written: the result has none, nor has a fresh record or a spare one.
// Returns the record, or nullptr for a drop record.
TensorStatsRecord* AddResult(std::uint32_t id, const StatsOptions& options, ReductionResult&& r,
                             StepBatch* batch, std::size_t* filled = nullptr,
                             bool only_stats = false);

// Turns every record of `b` into a drop record with `reason` (the writer
// queue was full and drop_stats_when_full is set). Returns how many.
std::uint64_t DropAll(StepBatch* b, const std::string& reason);

// Raw snapshot bytes under the pipeline's raw memory cap: a snapshot that
// does not fit becomes a drop record naming the cap, and is counted.
class RawSnapshots {
 public:
  RawSnapshots(Pipeline* pipeline, SnapshotBufferPool* buffers, std::int64_t cap_bytes)
      : pipeline_(pipeline), buffers_(buffers), cap_bytes_(cap_bytes) {}

  // Reserves `bytes` for a snapshot of tensor `id`; false (a drop record in
  // `batch`) over the cap.
  bool Reserve(std::uint32_t id, std::uint64_t bytes, StepBatch* batch);
  // Copies a host tensor's bytes into batch->raws (or drops it), adding the
  // reserved bytes to *reserved.
  void CopyHost(std::uint32_t id, const TensorView& v, StepBatch* batch, std::uint64_t* reserved);

 private:
  Pipeline* pipeline_;
  SnapshotBufferPool* buffers_;
  std::int64_t cap_bytes_;
};

}  // namespace tstat::host
