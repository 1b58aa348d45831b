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
// Thread safety: none (buffers are reused); one per user (a Trial's series,
// a segment cache's step walks).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/codec/chunk_deflate.h"
#include "io/format/segment_schema.h"
#include "io/format/stats_layout.h"
#include "io/h5/posix_file.h"
#include "io/read/placed_stats_row.h"
#include "tstat/status.h"

struct libdeflate_decompressor;

namespace tstat::io {

class StatsChunkReader {
 public:
  // Builds the copy from the stored row to StatsRow (takes the HDF5 lock:
  // type calls only).
  static Result<std::unique_ptr<StatsChunkReader>> Make();
  ~StatsChunkReader();
  StatsChunkReader(const StatsChunkReader&) = delete;
  StatsChunkReader& operator=(const StatsChunkReader&) = delete;

  // Appends the rows of tensor `id` (none: the segment has none) of the
  // segment at `path`, `file_bytes` long, laid out as `layout`, to `out`.
  Status ReadTensorRows(const std::string& path, std::uint64_t file_bytes,
                        const StatsLayout& layout, std::uint32_t id, std::vector<StatsRow>* out);

  // Every stats row of the segment into `rows` (as PlacedStatsRow: the
  // keys are checked, the place says them) in capture order (steps
  // ascending as in `steps`, a step's records by their `capture_index`), as
  // format 3 stored them, and the number of records of each of `steps` into
  // `per_step`, each row checked (mode valid, tensor id `known`),
  // decoded straight into its place: a walk over a run's steps then needs
  // no reordering pass. false (and `rows` unspecified) when the segment is
  // not what a writer stores (a row of a step `steps` lacks, positions
  // repeated or out of range, capture_index of another length, far more
  // places than rows): the caller reads it the general way, which sorts
  // such rows out. Errors as ReadTensorRows'; kCorruption for a row that
  // fails its checks.
  Result<bool> ReadCaptureOrder(const std::string& path, std::uint64_t file_bytes,
                                const StatsLayout& layout, const std::vector<StepRow>& steps,
                                const std::vector<std::uint32_t>& capture_index,
                                const std::function<bool(std::uint32_t)>& known,
                                std::vector<PlacedStatsRow>* rows,
                                std::vector<std::uint32_t>* per_step);

  // The stats rows of `global_step` alone into `rows`, in capture order: a
  // single step's query, which ReadCaptureOrder would answer by placing
  // every step's rows. Every chunk is still read, inflated and its rows'
  // keys checked (a step has a row in each); only the step's rows are
  // decoded whole. false, errors and checks as ReadCaptureOrder's (false
  // also when `steps` lacks `global_step`).
  Result<bool> ReadStep(const std::string& path, std::uint64_t file_bytes,
                        const StatsLayout& layout, const std::vector<StepRow>& steps,
                        const std::vector<std::uint32_t>& capture_index,
                        const std::function<bool(std::uint32_t)>& known, std::int64_t global_step,
                        std::vector<PlacedStatsRow>* rows);

 private:
  // A stored row's members: all of them into StatsRow (a RowCopyPlan's
  // runs), its keys (the members before the stats) into StatsRow, and those
  // a PlacedStatsRow keeps into it.
  struct Runs {
    std::vector<ByteRun> all, keys, placed;
  };
  StatsChunkReader(Runs runs, std::size_t row_bytes, libdeflate_decompressor* inflater)
      : runs_(std::move(runs)), row_bytes_(row_bytes), inflater_(inflater) {}
  // kCorruption unless the layout's rows are this reader's size.
  Status CheckRowBytes(const std::string& path, const StatsLayout& layout) const;
  // Opens `path`, checked to be the regular file of `file_bytes` bytes the
  // catalog describes.
  Result<UniqueFd> OpenSegment(const std::string& path, std::uint64_t file_bytes);
  // OpenSegment into fd_ (ReadCaptureOrder's and ReadStep's file; closed
  // when they end).
  Status OpenSegmentFd(const std::string& path, std::uint64_t file_bytes);
  // The number of tensors of a segment laid out as a writer stores it (the
  // checks ReadCaptureOrder and ReadStep share); 0: not (the general way).
  std::uint64_t WriterTensors(const StatsLayout& layout, const std::vector<StepRow>& steps,
                              const std::vector<std::uint32_t>& capture_index) const;
  // Each chunk of fd_ inflated, its rows' keys decoded and checked (mode,
  // tensor id `known`, a step of `steps`, a position below `tensors`), then
  // row(row in the chunk, step index, position) for each row (false: the
  // segment is not as a writer stores it) and chunk_done(first row, end)
  // once the chunk's rows are seen. false, or kCorruption naming `path`.
  template <class Row, class ChunkDone>
  Result<bool> ForEachRowKey(const std::string& path, const StatsLayout& layout,
                             const std::vector<StepRow>& steps,
                             const std::vector<std::uint32_t>& capture_index,
                             const std::function<bool(std::uint32_t)>& known, std::uint64_t tensors,
                             Row row, ChunkDone chunk_done);
  // Chunk `k` of `layout` read, checked and inflated into inflated_ (its
  // planes), then (DecodeChunk) the members of `runs` (runs_.all: whole
  // rows; runs_.keys: their keys) unshuffled into chunk_rows_.
  Status InflateChunk(int fd, const std::string& path, const StatsLayout& layout, std::size_t k);
  Status DecodeChunk(int fd, const std::string& path, const StatsLayout& layout, std::size_t k,
                     const std::vector<ByteRun>& runs);

  Runs runs_;
  std::size_t row_bytes_;
  libdeflate_decompressor* inflater_;
  std::vector<std::uint8_t> stored_, inflated_;
  std::vector<StatsRow> chunk_rows_;       // the rows of the chunk decoded last
  std::vector<std::uint8_t> placed_;       // ReadCaptureOrder's and ReadStep's: per place, whether
                                           // a row is there
  std::vector<std::size_t> chunk_places_;  // and the places of the chunk's rows
  UniqueFd fd_;                            // the segment ReadCaptureOrder or ReadStep reads
};

}  // namespace tstat::io
