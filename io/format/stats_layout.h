// Where a segment's stats rows are in its file (format_version 4), as the
// writer stores it in the worker catalog (segment_catalog.h): the chunks of
// the `stats` dataset and each tensor's row range. A reader with it reads
// one tensor's rows by decoding only the chunks that hold them, without
// HDF5 and without checking the whole file (each chunk has its CRC).
// Thread safety: plain data.
#pragma once

#include <cstdint>
#include <vector>

namespace tstat::io {

struct StatsChunk {
  std::uint64_t offset = 0;        // in the file (HDF5's address + the user block)
  std::uint32_t stored_bytes = 0;  // shuffled and deflated
  std::uint32_t crc32 = 0;         // of the stored bytes
};

// Tensors tensor_id .. tensor_id + count - 1, `rows` rows each, one after
// the other from first_row, whose rows have the modes of `modes` (bit
// 1 << mode): a session's tensors, with ids dense and the same steps, are one
// range per segment.
struct StatsTensorRange {
  std::uint32_t tensor_id = 0;
  std::uint32_t count = 1;
  std::uint32_t first_row = 0;
  std::uint32_t rows = 0;
  std::uint8_t modes = 0;
};

struct StatsLayout {
  std::uint32_t row_bytes = 0;   // a stored (packed) row
  std::uint32_t chunk_rows = 0;  // rows per chunk (the last one zero-padded)
  std::uint64_t rows = 0;
  std::vector<StatsChunk> chunks;         // in row order
  std::vector<StatsTensorRange> tensors;  // ascending tensor_id, disjoint
};

}  // namespace tstat::io
