// Hdf5RunWriter: the StepSink that stores one worker's steps as a sequence of
// sealed HDF5 segment files, RUN/worker-<rank:05d>/seg-<index:012d>.h5.
//
// Life of a segment: the first Write() after a Flush starts a new segment as
// an HDF5 file IN MEMORY (with a 512-byte user block for the seal); raw
// snapshots are copied into it at once (deflated only at
// raw_compression_level > 0; the caller's bytes are not held), small ones
// into the segment's packed dataset a chunk at a time (packed_raw_dataset.h),
// large ones going straight to disk (segment_store.h); the exp_hist rows
// are written into it a chunk at a time as they fill (streamed_table.h); the
// stats rows (grouped by tensor at the flush, grouped_stats_table.h) and the
// other tables (histogram counts, scalars, ...) are appended to buffers. Flush() writes what is
// still buffered with one H5Dwrite per table, closes the file, seals its memory in place
// (segment_seal.h; no copy of the image), writes it to seg-<index>.h5.tmp,
// fsyncs, renames it to seg-<index>.h5 and fsyncs the directory. Readers list
// only *.h5, so a segment is visible whole or not at all; a crash (kill -9)
// loses only what was not flushed. A Flush with nothing written since the
// last one writes nothing. A segment holding rotate_bytes() or more of raw
// snapshots (uncompressed), or GroupedStatsTable::kRotateRows stats rows, is
// flushed by Write() itself, with the last counters given, so the memory a
// segment holds stays bounded. After each segment's rename, its frame is
// appended to the worker catalog (segment_catalog.h).
// Close() flushes, then writes RUN/worker-<rank>/CLOSED atomically.
//
// Failures (disk full, unwritable directory, ...): the call returns a Status
// naming the file and the cause (kResourceExhausted for a full disk, else
// kIoError), the segment is discarded (no .tmp is left behind when it can be
// removed) and every record it held -- all batches written since the last
// successful Flush, including the failing one -- is lost: the count is added
// to records_lost() and quoted in the message ("N records lost"). The writer
// stays usable: the next Write() starts a fresh segment under the next index.
// HDF5 itself only ever writes to memory, so disk errors cannot leave it in a
// broken state. Caller errors (undeclared tensor id, malformed raw snapshot,
// global step not increasing, ...) are kInvalidArgument / kFailedPrecondition
// and change nothing (that batch is not written).
//
// Counters stored with a segment are the caller's PipelineCounters, except
// segments_written (this segment included) and bytes_written (sealed segments
// before this one), which the writer knows best and fills in itself.
// Thread safety: one thread uses a writer (StepSink contract); HDF5 calls take
// the process-wide HDF5 lock, so Trials may read in other threads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/write/step_sink.h"

namespace tstat::io {

// Private parts that need hdf5.h, which stays out of this header.
struct OpenSegmentFile;
struct SegmentHeader;
struct SegmentBuffers;
struct StreamedRows;
class PackedRawDataset;

class Hdf5RunWriter final : public StepSink {
 public:
  static constexpr std::uint64_t kDefaultRotateBytes = 128ull << 20;

  // See OpenHdf5RunWriter (step_sink.h).
  static Result<std::unique_ptr<Hdf5RunWriter>> Open(const Hdf5RunWriterOptions& options);
  // Without Close(): the unflushed segment is dropped and no CLOSED marker is
  // written -- the state a crash leaves.
  ~Hdf5RunWriter() override;

  Status RegisterTensors(const std::vector<TensorInfo>& tensors) override;
  Status Write(const StepBatch& batch) override;
  Status Flush(const PipelineCounters& counters) override;
  Status Close(const PipelineCounters& counters) override;
  std::uint64_t bytes_written() const override { return bytes_written_; }

  // Records (stats + scalar + raw) discarded with failed segments so far.
  std::uint64_t records_lost() const override { return records_lost_; }
  std::uint64_t records_unflushed() const override;
  std::uint64_t segments_written() const override {
    return static_cast<std::uint64_t>(segments_written_);
  }
  const std::string& worker_dir() const { return worker_dir_; }
  std::uint64_t rotate_bytes() const { return rotate_bytes_; }
  void set_rotate_bytes(std::uint64_t bytes) { rotate_bytes_ = bytes; }
  // The path the open segment will be written to (its .tmp name), "" when
  // no segment is open.
  std::string TEST_open_segment_path() const;
  // Why the worker catalog stopped taking frames (OK while it takes them).
  const Status& catalog_error() const { return catalog_error_; }

 private:
  explicit Hdf5RunWriter(const Hdf5RunWriterOptions& options, std::string worker_dir);
  Status ValidateBatch(const StepBatch& batch) const;
  std::string TmpPath() const;  // of the segment numbered next_index_
  Status OpenSegment();
  // Discards the open segment and returns `cause` with the loss appended.
  // The segment store's disk error if it has one, else `hdf5_error`.
  Status StoreErrorOr(const Status& hdf5_error) const;
  Status FailSegment(const Status& cause, std::uint64_t extra_records_lost);
  SegmentHeader OpenSegmentHeader() const;
  std::vector<TensorInfo> Registry() const;  // by id
  // Appends the just-renamed segment's frame to the worker catalog
  // (segment_catalog.h); a failure stops the catalog, not the writer.
  void AppendCatalogFrame(std::uint64_t file_bytes, const PipelineCounters& counters);
  // Writes the tables, closes the open segment's file and seals its image
  // (in segment_->memory).
  Status FinishImage(const PipelineCounters& counters);
  PipelineCounters StoredCounters(const PipelineCounters& counters, bool include_open) const;
  // Records of the open segment: buffered and streamed.
  std::uint64_t Buffered() const;

  Hdf5RunWriterOptions options_;
  std::string worker_dir_;
  std::map<std::uint32_t, TensorInfo> registry_;
  // registry_ has id, for ids below kDenseIds: checked for every record of
  // every step, where a map lookup showed in the writer's profile.
  static constexpr std::uint32_t kDenseIds = 1u << 20;
  std::vector<std::uint8_t> declared_;
  std::unique_ptr<SegmentBuffers> buffers_;
  std::unique_ptr<StreamedRows> streamed_;    // the open segment's streamed tables
  std::unique_ptr<PackedRawDataset> packed_;  // the open segment's raw/packed
  std::unique_ptr<OpenSegmentFile> segment_;  // null: no segment open
  double segment_created_ = 0.0;
  std::uint64_t raw_count_ = 0;  // raw datasets in the open segment
  std::uint64_t raw_bytes_ = 0;  // their uncompressed bytes
  std::int64_t next_index_ = 0;
  std::optional<std::int64_t> last_global_step_;
  PipelineCounters last_counters_;
  std::uint64_t rotate_bytes_ = kDefaultRotateBytes;
  std::uint64_t bytes_written_ = 0;
  std::int64_t segments_written_ = 0;
  std::uint64_t records_lost_ = 0;
  bool closed_ = false;
  // The worker catalog: its length, whether frames are still appended, and
  // what its last frame carried (registry_version_ counts registry changes).
  std::uint64_t catalog_bytes_ = 0;
  bool catalog_on_ = true;
  bool catalog_created_ = false;
  bool catalog_has_config_ = false;
  std::uint64_t registry_version_ = 0;
  std::uint64_t catalog_registry_version_ = ~std::uint64_t{0};
  Status catalog_error_;
};

}  // namespace tstat::io
