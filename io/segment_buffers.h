// SegmentBuffers: the rows of a segment's tables. The writer keeps the rows
// of the segment being written here until the segment's Flush writes each
// table with one H5Dwrite, except the stats and exp_hist rows and the
// exp_hist counts (a record's largest), which StreamedRows writes into the
// open file a chunk at a time (streamed_table.h, streamed_counts.h); the
// reader fills every table, those included.
//
// Append() turns a StepBatch into rows of the steps/stats/exp_hist/... tables
// (raw snapshots are written to the open file at Write time and only their
// index rows are kept here). Thread safety: none; owned by one thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/chunk_deflate.h"
#include "io/h5_handle.h"
#include "io/segment_schema.h"
#include "io/streamed_counts.h"
#include "io/streamed_table.h"
#include "tstat/stats_record.h"

namespace tstat::io {

struct DropEntry {
  StepKey key;
  DropRecord drop;
};
// The writer's streamed stats and exp_hist tables (and exp_hist's counts)
// of the open segment.
struct StreamedRows {
  StreamedTable stats{kStatsTable};       // StatsRow
  StreamedTable exp_hist{kExpHistTable};  // ExpHistRow
  StreamedCounts exp_hist_counts{kExpHistCounts};
  // Deflates their chunks, and the other tables' at the segment's flush.
  ChunkDeflater deflater;
  // The flush's narrowed count arrays (segment_file_writer.cc), reused.
  std::vector<std::uint16_t> narrow16;
  std::vector<std::uint32_t> narrow32;

  // Starts a segment whose tables are compressed at `level` (0..9).
  Status Start(int level);
  // Stats rows appended since Start (records, in PipelineCounters' unit).
  std::uint64_t records() const { return stats.rows(); }
  // Whether every exponent histogram of `batch` fits the width the open
  // segment fixed for its counts (else the segment must end before it).
  bool FitsCounts(const StepBatch& batch) const;
  // Writes what is staged and closes the datasets (HDF5 lock held).
  Status Finish(hid_t file, const std::string& path);
  // Drops them without writing (a failed segment; HDF5 lock held).
  void Close();
};

struct SegmentBuffers {
  std::vector<StepRow> steps;
  std::vector<StatsRow> stats;
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

  // Adds every record of `batch` except its raw snapshots. The stats and
  // exp_hist rows and the exp_hist counts go to `streamed`, which writes every chunk they fill into
  // `file` (HDF5 lock held). On an error, some of the batch's rows may have
  // been added.
  Status Append(const StepBatch& batch, hid_t file, StreamedRows* streamed,
                const std::string& path);
  // Adds raw_index's row for `raw`, stored in `dataset` ("raw/000003", or
  // kRawPackedDataset with its byte range), and its shape.
  void AppendRaw(const StepKey& key, const RawSnapshot& raw, const char* dataset,
                 std::uint64_t byte_offset, std::uint64_t byte_count);
  // The delta, confusion and value-count parts of one record.
  void AppendDerived(const StepKey& key, const TensorStatsRecord& record);
  // Stats, scalar and raw records held (the unit of PipelineCounters).
  std::uint64_t records() const { return stats.size() + scalars.size() + raw_index.size(); }
  bool empty() const { return steps.empty(); }
  // Empties every buffer, keeping its memory for the next segment.
  void Clear();
};

}  // namespace tstat::io
