// PackedRawDataset: a segment's kRawPackedDataset ("raw/packed", 1-D uint8),
// written while it fills rather than at the segment's flush.
//
// Small snapshots (< kRawPackBelowBytes) are appended in write order to a
// staging buffer of one chunk (kChunkBytes). When it first fills, the dataset
// is created chunked and extendible (chunks of kChunkBytes; shuffle + deflate
// at raw level 1..9, no filters at 0) and each full chunk is written at once
// with H5Dwrite_chunk: at level 0 one direct write into the segment file. At
// Finish the last, partial chunk is written zero-padded and the extent is set
// to the exact byte count, so readers (Trial, h5py) see only appended bytes.
// A segment whose packed bytes never fill a chunk gets the fixed-size dataset
// of WritePackedRawSnapshots instead (compact up to kCompactBytes, else
// contiguous or chunked by level), as one H5Dwrite.
//
// Why: holding a whole segment's small snapshots until the flush took a
// buffer as large as the segment (up to rotate_bytes), faulted in and zeroed
// afresh for every segment, and a second pass over the bytes; with many
// small snapshots per step, zeroing it was a large share of the writer.
//
// Callers hold the HDF5 lock (h5_lock.h) for every call, the destructor
// included when a dataset is open (Close first). Errors name `path`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/codec/chunk_deflate.h"
#include "io/h5/h5_handle.h"
#include "tstat/status.h"

namespace tstat::io {

class PackedRawDataset {
 public:
  PackedRawDataset() = default;
  PackedRawDataset(const PackedRawDataset&) = delete;
  PackedRawDataset& operator=(const PackedRawDataset&) = delete;

  // Starts a new segment's dataset at raw compression `level` (0..9); the
  // staging buffer and the deflater are kept. Any open dataset must have
  // been closed (Finish or Close).
  void Reset(int level);
  // Bytes appended since Reset: the offset the next Append starts at.
  std::uint64_t size() const { return written_ + stage_.size(); }
  // Appends `n` bytes; writes every chunk they complete into `file`.
  Status Append(hid_t file, const std::uint8_t* data, std::size_t n, const std::string& path);
  // Writes what is still staged and closes the dataset (nothing when no
  // byte was appended).
  Status Finish(hid_t file, const std::string& path);
  // Drops the open dataset, if any, without writing (a failed segment).
  void Close() { dataset_ = H5DataSet(); }

 private:
  Status CreateChunked(hid_t file, const std::string& path);
  // Writes stage_ (padded to a whole chunk) as the chunk at written_.
  Status WriteStagedChunk(const std::string& path);

  int level_ = 0;
  std::vector<std::uint8_t> stage_;  // capacity kChunkBytes once used
  std::uint64_t written_ = 0;        // bytes in chunks already written
  H5DataSet dataset_;                // open from the first full chunk to Finish
  ChunkDeflater deflater_;           // level > 0 only
};

}  // namespace tstat::io
