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
#include <utility>

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

  std::uint64_t bytes() const { return bytes_; }
  std::uint64_t reads() const { return reads_; }  // segments read so far

 private:
  using Key = std::pair<int, std::uint32_t>;
  struct Entry {
    std::shared_ptr<const WorkerIndex> index;
    std::uint64_t bytes = 0;
    std::list<Key>::iterator use;  // in uses_
  };

  std::uint64_t cap_bytes_;
  std::uint64_t bytes_ = 0;
  std::uint64_t reads_ = 0;
  std::map<Key, Entry> entries_;
  std::list<Key> uses_;  // most recently used first
};

}  // namespace tstat::io
