// SegmentCache: the records of segments, read when a query needs them and
// kept while they fit under a byte cap, the least recently used dropped
// first. A Trial opens a run from its segments' metadata only
// (ReadSegmentMetadata); a query for records (a record, a series, a step)
// reads the segments that hold them here, so memory is bounded by the cap
// and the answer, not by the run.
// Thread safety: none; owned by one Trial.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include "io/read/segment_steps.h"
#include "io/read/worker_index.h"
#include "tstat/status.h"

namespace tstat::io {

class SegmentCache {
 public:
  explicit SegmentCache(std::uint64_t cap_bytes) : cap_bytes_(cap_bytes) {}

  // The record index of segment `ordinal` of worker `rank` (`file`), read
  // with ReadSegment and indexed the first time. The one just returned stays
  // however large it is; the others go once the total passes the cap.
  // kCorruption naming the file when its records cannot be read (the
  // metadata read when the run was opened could be).
  Result<std::shared_ptr<const WorkerIndex>> Get(int rank, std::uint32_t ordinal,
                                                 const SegmentFile& file);
  // The same segment's records by step (segment_steps.h), for step queries;
  // cached beside, and counted with, the indexes.
  Result<std::shared_ptr<const SegmentSteps>> GetSteps(int rank, std::uint32_t ordinal,
                                                       const SegmentFile& file);

  std::uint64_t bytes() const { return bytes_; }
  std::uint64_t reads() const { return reads_; }  // segments read so far

 private:
  // (rank, segment ordinal, by step): an index and a SegmentSteps of one
  // segment are two entries.
  using Key = std::tuple<int, std::uint32_t, bool>;
  struct Entry {
    std::shared_ptr<const WorkerIndex> index;
    std::shared_ptr<const SegmentSteps> steps;
    std::uint64_t bytes = 0;
    std::list<Key>::iterator use;  // in uses_
  };
  // The entry of `key`, moved to the front of uses_; null when absent.
  const Entry* Touch(const Key& key);
  // Reads `file`, with the errors Get documents.
  static Result<SegmentContents> Read(const SegmentFile& file);
  // Adds `entry` under `key` as the most recently used, then evicts.
  void Insert(const Key& key, Entry entry);

  std::uint64_t cap_bytes_;
  std::uint64_t bytes_ = 0;
  std::uint64_t reads_ = 0;
  std::map<Key, Entry> entries_;
  std::list<Key> uses_;  // most recently used first
};

}  // namespace tstat::io
