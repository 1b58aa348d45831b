// Turns step batches into the rows of a segment's tables: the exp_hist rows
// and counts (a record's largest) and the per-channel rows (thousands a step
// where layers are wide) into the open file a chunk at a time (StreamedRows:
// streamed_table.h, streamed_counts.h), the stats rows into
// GroupedStatsTable (written grouped by tensor at the flush), every other
// table into SegmentBuffers until the segment's flush; raw
// snapshots are written at Write time and only their index rows kept.
// Thread safety: none; owned by the writer's thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/codec/chunk_deflate.h"
#include "io/format/segment_buffers.h"
#include "io/h5/h5_handle.h"
#include "io/write/grouped_stats_table.h"
#include "io/write/streamed_counts.h"
#include "io/write/streamed_table.h"
#include "tstat/stats_record.h"

namespace tstat::io {

// The writer's streamed stats, exp_hist (and exp_hist's counts) and
// channels tables of the open segment.
struct StreamedRows {
  GroupedStatsTable stats;                // StatsRow, grouped by tensor at the flush
  StreamedTable exp_hist{kExpHistTable};  // ExpHistRow
  StreamedCounts exp_hist_counts{kExpHistCounts};
  StreamedTable channels{kChannelsTable};  // ChannelRow
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

// Adds every record of `batch` except its raw snapshots to `b`. The stats and
// exp_hist rows and the exp_hist counts go to `streamed`, which writes every
// chunk they fill into `file` (HDF5 lock held). On an error, some of the
// batch's rows may have been added.
Status AppendBatch(const StepBatch& batch, hid_t file, StreamedRows* streamed,
                   const std::string& path, SegmentBuffers* b);
// Adds raw_index's row for `raw`, stored in `dataset` ("raw/000003", or
// kRawPackedDataset with its byte range), and its shape.
void AppendRawRow(const StepKey& key, const RawSnapshot& raw, const char* dataset,
                  std::uint64_t byte_offset, std::uint64_t byte_count, SegmentBuffers* b);

}  // namespace tstat::io
