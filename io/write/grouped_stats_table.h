// GroupedStatsTable: a segment's stats rows, held until the segment's flush
// and written grouped by tensor (format_version 4), with the datasets that
// say where each tensor's rows are (stats_tensors) and their order within a
// step (stats_capture_index).
//
// Why grouped: a series of one tensor then reads, per segment, the one or
// two chunks that hold its rows instead of the whole table (rows interleaved
// by step put some of every tensor's rows in every chunk). Chunks are small
// (kChunkBytes) for the same reason; at level 1 each row is matched against
// the row before it, the same tensor one step earlier, where the table's
// repetition is. The rows of a segment are held (packed) until the flush;
// the writer ends a segment itself once it holds kRotateRows of them.
//
// Callers hold the HDF5 lock (h5_lock.h) for Finish. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/codec/chunk_deflate.h"
#include "io/format/segment_schema.h"
#include "io/format/stats_layout.h"
#include "io/h5/h5_handle.h"
#include "io/h5/table_chunk_writer.h"
#include "tstat/status.h"

namespace tstat::io {

class GroupedStatsTable {
 public:
  static constexpr std::size_t kChunkBytes = 64 << 10;
  // ~85 MB of packed rows: the writer flushes a segment that holds this many.
  static constexpr std::uint64_t kRotateRows = std::uint64_t{1} << 19;

  // Starts a segment's table at compression `level` (0..9); buffers are kept.
  Status Reset(int level);
  std::uint64_t rows() const { return ids_.size(); }
  // Adds a row, the `capture_index`-th record of its step.
  void Append(const StatsRow& row, std::uint32_t capture_index);
  // Writes stats, stats_capture_index and stats_tensors into `file` (nothing
  // when no row was added) and sets layout().
  Status Finish(hid_t file, ChunkDeflater* deflater, const std::string& path);
  // Drops the rows without writing (a failed segment).
  void Close();
  // Where the last Finish put the rows: chunk offsets in the segment file
  // (user block included) and tensor ranges; nullopt when it wrote none, or
  // at level 0 (a contiguous or compact dataset, read through HDF5).
  const std::optional<StatsLayout>& layout() const { return layout_; }

 private:
  // Indices of the rows in tensor order (stable: steps ascending).
  void GroupOrder();
  Status WriteChunks(hid_t file, ChunkDeflater* deflater, const std::string& path);

  int level_ = 0;
  std::optional<RowPacker> packer_;
  std::size_t row_bytes_ = 0;
  std::vector<std::uint8_t> packed_;  // rows as added, packed
  std::vector<std::uint32_t> ids_, capture_;
  std::vector<std::uint8_t> modes_;            // per row, bit 1 << mode
  std::vector<std::uint32_t> order_, counts_;  // reused by GroupOrder
  std::vector<std::uint32_t> grouped_capture_;
  std::vector<StatsTensorRow> tensor_rows_;
  std::vector<std::uint8_t> tensor_modes_;  // per tensor_rows_ entry
  std::optional<StatsLayout> layout_;
};

}  // namespace tstat::io
