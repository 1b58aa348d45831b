// StreamedCounts: a segment's count array (exp_hist_counts) written to the
// open segment file a chunk at a time while the segment fills, already
// narrowed to the file's width, rather than held as uint64 until the flush.
//
// A count array is stored as the narrowest of uint16, uint32 and uint64 that
// holds the segment's largest count (docs/storage-format.md), and a chunked dataset has one
// type, so the width is fixed when the first chunk is written: counts are
// kept as uint64 until as many are held as one chunk of the width they need
// (kChunkBytes / width), then that width is fixed, the dataset is created
// chunked and extendible (chunks of kChunkBytes / width counts, the chunk a
// whole write of the array gets) and every later count is narrowed into a
// one-chunk staging buffer, shuffled and deflated when it fills. A count
// wider than the fixed width cannot be appended: Fits() says so first, and
// the writer ends the segment there (hdf5_run_writer.cc), so the next
// segment fixes a wider width. An array that never fills a chunk, and every
// array at level 0, is written at Finish as before (narrowed, fixed size).
//
// Why: the writer held a segment's counts (~1 s of steps: ~20 per record,
// 300+ MB at 1,000 tensors of 1,000 values) in a growing uint64 vector and
// narrowed it at the flush; that copy, its page faults and the narrowing
// were about half of the writer's CPU with level-1 tables.
//
// Callers hold the HDF5 lock (h5_lock.h) for Append, Finish and Close, and
// Close before the file closes when a dataset may be open. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/codec/chunk_deflate.h"
#include "io/h5/h5_handle.h"
#include "tstat/status.h"

namespace tstat::io {

// Bytes of the narrowest unsigned integer (2, 4 or 8) that holds every value
// whose bits are within `any_bits` (the OR of the values).
int CountWidthBytes(std::uint64_t any_bits);

class StreamedCounts {
 public:
  // `name`: the dataset's name (a static string, e.g. kExpHistCounts).
  explicit StreamedCounts(const char* name) : name_(name) {}
  StreamedCounts(const StreamedCounts&) = delete;
  StreamedCounts& operator=(const StreamedCounts&) = delete;

  // Starts a segment's array at table compression `level` (0..9). Buffers
  // are kept; an open dataset must have been finished or closed.
  void Reset(int level);
  // Counts appended since Reset.
  std::uint64_t size() const { return written_ + staged_ + wide_.size(); }
  // The width fixed at the first chunk, in bytes (0: not fixed yet).
  int width_bytes() const { return width_; }
  // Whether counts whose OR is `any_bits` can be appended to this segment.
  bool Fits(std::uint64_t any_bits) const {
    return width_ == 0 || CountWidthBytes(any_bits) <= width_;
  }
  // Appends `n` counts; writes every chunk they complete into `file` through
  // `deflater`. A count wider than the fixed width is an error (check Fits).
  Status Append(hid_t file, const std::uint64_t* counts, std::size_t n, ChunkDeflater* deflater,
                const std::string& path);
  // Writes what is still held and closes the dataset (nothing when empty).
  Status Finish(hid_t file, ChunkDeflater* deflater, const std::string& path);
  // Drops the open dataset and the held counts without writing.
  void Close();

 private:
  // Fixes the width from wide_, creates the dataset and writes the full
  // chunks wide_ holds; the rest is narrowed into stage_.
  Status FixWidth(hid_t file, ChunkDeflater* deflater, const std::string& path);
  // Narrows wide_[from, from + n) into stage_ at element `at`.
  void Narrow(std::size_t from, std::size_t n, std::size_t at);
  Status WriteStaged(ChunkDeflater* deflater, const std::string& path);
  std::uint64_t ChunkElements(int width) const;
  std::string What(const std::string& path) const;

  const char* name_;
  int level_ = 0;
  std::vector<std::uint64_t> wide_;  // counts before the width is fixed
  std::uint64_t wide_bits_ = 0;      // OR of wide_
  int width_ = 0;                    // 2, 4 or 8 once fixed (0: not yet)
  std::vector<std::uint8_t> stage_;  // narrowed counts; one chunk once fixed
  std::uint64_t staged_ = 0;         // counts in stage_
  std::uint64_t written_ = 0;        // counts in chunks already written
  H5DataSet dataset_;                // open from the first full chunk to Finish
};

}  // namespace tstat::io
