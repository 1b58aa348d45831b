// StreamedTable: a 1-D table of fixed-size rows (stats, exp_hist) written to
// the open segment file a chunk at a time while the segment fills, rather
// than held in memory until the segment's flush.
//
// Rows are packed to the file type (RowPacker) into a staging buffer of one
// chunk (kChunkBytes / row size rows, the chunk WriteNewDataset gives a large
// table). When it first fills, the dataset is created chunked and extendible
// with shuffle + deflate at the table level, and each full chunk is shuffled,
// deflated and written at once with H5Dwrite_chunk, while its rows are still
// in cache. Finish writes the last, partial chunk zero-padded and sets the
// extent to the exact row count. A table that never fills a chunk, and every
// table at level 0 (contiguous, not extendible), is written at Finish as the
// fixed-size dataset WriteNewDataset makes, as before.
//
// Why: the writer held every row of a segment (~1 s of steps: 400,000 stats
// rows, 60+ MB at 1,000 tensors of 1,000 values) in vectors that grew by
// reallocation, faulted fresh pages in as segments grew, and were read back
// from memory at the flush to be packed, shuffled and deflated. Page faults
// and those copies were about a third of the writer's CPU.
//
// Callers hold the HDF5 lock (h5_lock.h) for Append, Finish and Close, and
// Close before the file closes when a dataset may be open. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/codec/chunk_deflate.h"
#include "io/h5/h5_handle.h"
#include "io/h5/table_chunk_writer.h"
#include "tstat/status.h"

namespace tstat::io {

// Writes one chunk of the 1-D extendible chunked `dataset` (chunks of
// `chunk` elements of `element_bytes` bytes): the `staged` elements at the
// start of `stage` (room for a whole chunk; the rest is zeroed here, as HDF5
// stores an edge chunk whole) become the chunk at element `written`, shuffled
// and deflated at `level` (1..9) by `deflater`. The extent is set to
// written + staged first (a chunk is written only where the dataset reaches).
// `what` names the dataset in errors. `period`: elements per step, the
// level-1 encoder's hint (ChunkDeflater::ShuffleDeflate; 0: none). Shared by
// StreamedTable and StreamedCounts. `stored_crc`: set to the CRC-32 of the
// bytes stored (GroupedStatsTable's layout).
Status WriteStreamedChunk(hid_t dataset, std::uint8_t* stage, std::uint64_t staged,
                          std::uint64_t chunk, std::size_t element_bytes, std::uint64_t written,
                          int level, ChunkDeflater* deflater, const std::string& what,
                          std::size_t period = 0, std::uint32_t* stored_crc = nullptr);

class StreamedTable {
 public:
  // `name`: the dataset's name (a static string, e.g. kStatsTable).
  explicit StreamedTable(const char* name) : name_(name) {}
  StreamedTable(const StreamedTable&) = delete;
  StreamedTable& operator=(const StreamedTable&) = delete;

  // The memory type of the rows (e.g. StatsRowType).
  using RowTypeFn = Result<H5Type> (*)();

  // Starts a segment's table of rows laid out as `row_type()` in memory, at
  // table compression `level` (0..9). The staging buffer is kept; an open
  // dataset must have been finished or closed.
  Status Reset(RowTypeFn row_type, int level);
  // Rows appended since Reset.
  std::uint64_t rows() const { return written_ + staged_; }
  // Rows per step of the latest step, told by the caller before its rows:
  // at level 1 each row's bytes are also matched against the row one step
  // earlier, where a table's repetition is (same tensor, previous step).
  void set_step_rows(std::uint64_t rows) { step_rows_ = rows; }
  // Appends one row (memory layout of the Reset type); when it completes a
  // chunk (level 1..9), writes that chunk into `file` through `deflater`.
  Status Append(hid_t file, const void* row, ChunkDeflater* deflater, const std::string& path);
  // Writes what is still staged and closes the dataset (nothing when no row
  // was appended).
  Status Finish(hid_t file, ChunkDeflater* deflater, const std::string& path);
  // Drops the open dataset and the staged rows without writing (a failed
  // segment).
  void Close();

  // Rows per chunk (0 before the first Reset).
  std::uint64_t chunk_rows() const { return chunk_rows_; }

 private:
  Result<H5Type> FileType() const;
  Status CreateChunked(hid_t file, const std::string& path);
  // Writes the staged rows (padded to a whole chunk) as the chunk at written_.
  Status WriteStagedChunk(ChunkDeflater* deflater, const std::string& path);
  std::string What(const std::string& path) const;

  const char* name_;
  int level_ = 0;
  // No HDF5 type is held between calls (its release would need the lock in
  // the destructor): the file type is made again where it is needed.
  RowTypeFn row_type_ = nullptr;
  std::optional<RowPacker> packer_;  // memory row -> file row
  std::size_t row_bytes_ = 0;        // file row size
  std::uint64_t chunk_rows_ = 0;
  std::vector<std::uint8_t> stage_;  // packed rows; one chunk's capacity at level 1..9
  std::uint64_t staged_ = 0;         // rows in stage_
  std::uint64_t written_ = 0;        // rows in chunks already written
  std::uint64_t step_rows_ = 0;      // set_step_rows
  H5DataSet dataset_;                // open from the first full chunk to Finish
};

}  // namespace tstat::io
