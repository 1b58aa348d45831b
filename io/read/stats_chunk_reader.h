// StatsChunkReader: one tensor's stats rows of a format 4 segment, read
// through the segment's StatsLayout (from the worker catalog): only the
// chunks that hold the rows are read (pread), each checked against its
// CRC-32, inflated, unshuffled and copied into StatsRow. No HDF5 and no
// whole-file check: what series() reads per segment is a few KB.
//
// Errors: kCorruption naming the file for a chunk that fails its CRC or does
// not inflate to its size, a row of another tensor or an invalid mode, a
// file whose size is not the catalog's, a layout of another row size;
// kIoError when the file cannot be opened or read.
// Thread safety: none (buffers are reused); one per Trial.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/format/segment_schema.h"
#include "io/format/stats_layout.h"
#include "io/h5/h5_row_copy.h"
#include "tstat/status.h"

struct libdeflate_decompressor;

namespace tstat::io {

class StatsChunkReader {
 public:
  // Builds the row copy from the stored row to StatsRow (takes the HDF5
  // lock: type calls only).
  static Result<std::unique_ptr<StatsChunkReader>> Make();
  ~StatsChunkReader();
  StatsChunkReader(const StatsChunkReader&) = delete;
  StatsChunkReader& operator=(const StatsChunkReader&) = delete;

  // Appends the rows of tensor `id` (none: the segment has none) of the
  // segment at `path`, `file_bytes` long, laid out as `layout`, to `out`.
  Status ReadTensorRows(const std::string& path, std::uint64_t file_bytes,
                        const StatsLayout& layout, std::uint32_t id, std::vector<StatsRow>* out);

 private:
  StatsChunkReader(RowCopyPlan plan, std::size_t row_bytes, libdeflate_decompressor* inflater)
      : plan_(std::move(plan)), row_bytes_(row_bytes), inflater_(inflater) {}

  RowCopyPlan plan_;
  std::size_t row_bytes_;
  libdeflate_decompressor* inflater_;
  std::vector<std::uint8_t> stored_, inflated_, rows_;
};

}  // namespace tstat::io
