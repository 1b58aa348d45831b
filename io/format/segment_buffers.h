// SegmentBuffers: the rows of a segment's tables, as both sides hold them.
// The writer keeps the rows of the segment being written here until the
// segment's flush writes each table with one H5Dwrite (io/write/segment_rows.h
// turns step batches into rows; the stats, exp_hist and channels rows go to
// the open file a chunk at a time instead); the reader fills every table.
// Thread safety: none; owned by one thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/format/segment_schema.h"
#include "tstat/stats_record.h"

namespace tstat::io {

struct DropEntry {
  StepKey key;
  DropRecord drop;
};
struct SegmentBuffers {
  std::vector<StepRow> steps;
  std::vector<StatsRow> stats;
  // Format 4: each stats row's position in its step's capture order (the
  // rows are stored grouped by tensor); empty: stored in capture order.
  std::vector<std::uint32_t> stats_capture_index;
  std::vector<ExpHistRow> exp_hist;
  std::vector<std::uint64_t> exp_hist_counts;
  std::vector<LinearHistRow> linear_hist;
  std::vector<std::uint64_t> linear_hist_counts;
  std::vector<ChannelRow> channels;
  std::vector<LabelRow> labels;
  std::vector<std::uint64_t> label_counts;
  std::vector<SampleRow> samples;
  std::vector<std::int64_t> sample_positions;
  std::vector<double> sample_values;
  std::vector<DeltaRow> delta;
  std::vector<ConfusionRow> confusion;
  std::vector<std::uint64_t> confusion_counts;
  std::vector<ValueCountsRow> value_counts;
  std::vector<std::int64_t> counted_values;
  std::vector<std::uint64_t> counted_counts;
  std::vector<ScalarRow> scalars;
  std::vector<DropEntry> drops;
  std::vector<RawIndexRow> raw_index;  // shapes in raw_shapes
  std::vector<std::int64_t> raw_shapes;

  // Stats, scalar and raw records held (the unit of PipelineCounters).
  std::uint64_t records() const { return stats.size() + scalars.size() + raw_index.size(); }
  bool empty() const { return steps.empty(); }
  // Empties every buffer, keeping its memory for the next segment.
  void Clear();
};

}  // namespace tstat::io
