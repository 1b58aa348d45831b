// SegmentCache: the records of segments, read when a query needs them and
// kept while they fit under a byte cap, the least recently used dropped
// first. A Trial opens a run from its segments' metadata only
// (ReadSegmentMetadata); a query for records (a record, a series, a step)
// reads the segments that hold them here, so memory is bounded by the cap
// and the answer, not by the run.
// Thread safety: none; owned by one Trial.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "io/read/segment_stats_rows.h"
#include "io/read/segment_steps.h"
#include "io/read/stats_chunk_reader.h"
#include "io/read/worker_index.h"
#include "tstat/status.h"

namespace tstat::io {

class SegmentCache {
 public:
  // Without `exponent_histograms`, records are read without them
  // (ReadSegmentRecords).
  explicit SegmentCache(std::uint64_t cap_bytes, bool exponent_histograms = true)
      : cap_bytes_(cap_bytes), exponent_histograms_(exponent_histograms) {}

  // The record index of segment `ordinal` of worker `rank` (`file`), read
  // with ReadSegment and indexed the first time. The one just returned stays
  // however large it is; the others go once the total passes the cap.
  // kCorruption naming the file when its records cannot be read (the
  // metadata read when the run was opened could be).
  // `known`: the tensor ids of the worker's registry, which its rows are
  // checked with (the segment's own registry is not read again).
  Result<std::shared_ptr<const WorkerIndex>> Get(int rank, std::uint32_t ordinal,
                                                 const SegmentFile& file,
                                                 const std::function<bool(std::uint32_t)>& known);
  // The same segment's records by step (segment_steps.h), for step queries,
  // and its stats rows by tensor (segment_stats_rows.h), for series; cached
  // beside, and counted with, the indexes.
  Result<std::shared_ptr<const SegmentSteps>> GetSteps(
      int rank, std::uint32_t ordinal, const SegmentFile& file,
      const std::function<bool(std::uint32_t)>& known);
  // For a query of one step, `global_step`: the segment's steps as
  // GetSteps gives them, when they are cached, when this segment was asked
  // for a step before, or when the step of this rank asked for before was
  // in this segment or the one before it (a walk over steps, which reads
  // every step of each segment); else only that step's records (StatsChunkReader::ReadStep),
  // not cached: a step's query need not place the rows of a hundred
  // others. Errors as GetSteps'.
  Result<std::shared_ptr<const SegmentSteps>> GetStep(
      int rank, std::uint32_t ordinal, const SegmentFile& file,
      const std::function<bool(std::uint32_t)>& known, std::int64_t global_step);
  Result<std::shared_ptr<const SegmentStatsRows>> GetStatsRows(
      int rank, std::uint32_t ordinal, const SegmentFile& file,
      const std::function<bool(std::uint32_t)>& known);
  // The index of the segment if it is cached (not read otherwise), else null.
  std::shared_ptr<const WorkerIndex> Peek(int rank, std::uint32_t ordinal);

  // Called with a segment's path before any read of it, after its seal was
  // verified (an error is the read's): the Trial's isolated first parse of
  // a segment opened from the worker catalog, which HDF5 has not seen yet.
  // The seal is verified once per read: the hook and the read need not.
  // `stats_table`: whether the read hands the stats table to HDF5 (not
  // when the stats chunks are decoded from the catalog's layout).
  void set_before_read(std::function<Status(const std::string&, bool stats_table)> hook) {
    before_read_ = std::move(hook);
  }

  std::uint64_t bytes() const { return bytes_; }
  std::uint64_t reads() const { return reads_; }  // segments read so far

 private:
  // (rank, segment ordinal, kind): the index, SegmentSteps and
  // SegmentStatsRows of one segment are three entries.
  enum class Kind : std::uint8_t { kIndex, kSteps, kStatsRows };
  using Key = std::tuple<int, std::uint32_t, Kind>;
  struct Entry {  // one of the three, handed out const
    std::shared_ptr<WorkerIndex> index;
    std::shared_ptr<SegmentSteps> steps;
    std::shared_ptr<SegmentStatsRows> stats_rows;
    std::uint64_t bytes = 0;
    std::list<Key>::iterator use;  // in uses_
  };
  // The entry of `key`, moved to the front of uses_; null when absent.
  const Entry* Touch(const Key& key);
  // What Read reads of a segment.
  enum class Tables { kRecords, kRecordsButStats, kStatsOnly };
  // Reads the records of `file` (ReadSegmentRecords: all, or all but the
  // stats), or its stats alone (ReadSegmentStats), with the errors Get
  // documents.
  // `one_step`: the exponent histograms of that step alone
  // (RecordTablesRead::exp_hist_step).
  Result<SegmentContents> Read(const SegmentFile& file,
                               const std::function<bool(std::uint32_t)>& known, Tables tables,
                               SegmentBuffers* reuse = nullptr,
                               std::optional<std::int64_t> one_step = std::nullopt);
  // A cataloged segment's records by step, its stats rows decoded straight
  // into capture order (StatsChunkReader::ReadCaptureOrder); null when they
  // are not as a writer stores them (then read the general way).
  Result<std::shared_ptr<SegmentSteps>> StepsFromChunks(
      const SegmentFile& file, const std::function<bool(std::uint32_t)>& known);
  // The records of `global_step` alone (StatsChunkReader::ReadStep); null
  // when the segment is not as a writer stores it.
  Result<std::shared_ptr<SegmentSteps>> StepFromChunks(
      const SegmentFile& file, const std::function<bool(std::uint32_t)>& known,
      std::int64_t global_step);
  // Adds `entry` under `key` as the most recently used, then evicts.
  void Insert(const Key& key, Entry entry);
  // The `slot` of `key`'s entry, or `make()`'s (contents read from the file,
  // made into a T) cached under `key` first.
  template <class T, class Make>
  Result<std::shared_ptr<const T>> GetOrMake(const Key& key, std::shared_ptr<T> Entry::*slot,
                                             Make&& make);

  // The tables of the last SegmentSteps evicted while nobody else held it:
  // the next GetSteps reads into their memory (a walk over every step of a
  // run then faults in no fresh pages). At most one segment's worth.
  SegmentBuffers spare_;
  std::vector<PlacedStatsRow> spare_rows_;                  // and its records
  std::unique_ptr<StatsChunkReader> chunk_reader_;          // made at the first StepsFromChunks
  std::map<Key, Status> failed_;                            // reads that found the file damaged
  std::set<std::pair<int, std::uint32_t>> one_step_reads_;  // segments GetStep read a step of
  std::map<int, std::uint32_t> last_step_;  // per rank, the segment of GetStep's last call
  std::function<Status(const std::string&, bool)> before_read_;
  std::uint64_t cap_bytes_;
  bool exponent_histograms_;
  std::uint64_t bytes_ = 0;
  std::uint64_t reads_ = 0;
  std::map<Key, Entry> entries_;
  std::list<Key> uses_;  // most recently used first
};

}  // namespace tstat::io
