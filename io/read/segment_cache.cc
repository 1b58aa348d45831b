// See segment_cache.h.
#include "io/read/segment_cache.h"

#include "io/read/segment_reader.h"

namespace tstat::io {

const SegmentCache::Entry* SegmentCache::Touch(const Key& key) {
  auto found = entries_.find(key);
  if (found == entries_.end()) return nullptr;
  uses_.splice(uses_.begin(), uses_, found->second.use);
  return &found->second;
}

Result<SegmentContents> SegmentCache::Read(const SegmentFile& file,
                                           const std::function<bool(std::uint32_t)>* known,
                                           SegmentBuffers* reuse) {
  Result<SegmentContents> contents =
      known != nullptr ? ReadSegmentStats(file.path, *known) : ReadSegment(file.path, reuse);
  if (!contents.ok()) {
    const Status& s = contents.status();
    // It was read whole when the run was opened: whatever fails now is the
    // file's records (or the file is gone).
    if (s.code() == StatusCode::kIoError) return s;
    return Status::Corruption(s.message());
  }
  return contents;
}

void SegmentCache::Insert(const Key& key, Entry entry) {
  ++reads_;
  uses_.push_front(key);
  entry.use = uses_.begin();
  bytes_ += entry.bytes;
  entries_.emplace(key, std::move(entry));
  while (bytes_ > cap_bytes_ && uses_.size() > 1) {
    auto last = entries_.find(uses_.back());
    bytes_ -= last->second.bytes;
    std::shared_ptr<SegmentSteps>& steps = last->second.steps;
    if (steps != nullptr && steps.use_count() == 1) spare_ = steps->ReleaseTables();
    entries_.erase(last);
    uses_.pop_back();
  }
}

Result<std::shared_ptr<const WorkerIndex>> SegmentCache::Get(int rank, std::uint32_t ordinal,
                                                             const SegmentFile& file) {
  const Key key{rank, ordinal, Kind::kIndex};
  if (const Entry* e = Touch(key)) return e->index;
  TSTAT_ASSIGN_OR_RETURN(SegmentContents contents, Read(file));
  auto index = std::make_shared<WorkerIndex>(rank);
  index->AddSegment(contents, file.path, file.bytes);
  Entry entry;
  entry.bytes = index->ApproxBytes();
  entry.index = index;
  Insert(key, std::move(entry));
  return std::shared_ptr<const WorkerIndex>(std::move(index));
}

Result<std::shared_ptr<const SegmentSteps>> SegmentCache::GetSteps(int rank, std::uint32_t ordinal,
                                                                   const SegmentFile& file) {
  const Key key{rank, ordinal, Kind::kSteps};
  if (const Entry* e = Touch(key)) return std::shared_ptr<const SegmentSteps>(e->steps);
  TSTAT_ASSIGN_OR_RETURN(SegmentContents contents, Read(file, nullptr, &spare_));
  auto steps = std::make_shared<SegmentSteps>(std::move(contents));
  Entry entry;
  entry.bytes = steps->ApproxBytes();
  entry.steps = steps;
  Insert(key, std::move(entry));
  return std::shared_ptr<const SegmentSteps>(std::move(steps));
}

Result<std::shared_ptr<const SegmentStatsRows>> SegmentCache::GetStatsRows(
    int rank, std::uint32_t ordinal, const SegmentFile& file,
    const std::function<bool(std::uint32_t)>& known) {
  const Key key{rank, ordinal, Kind::kStatsRows};
  if (const Entry* e = Touch(key)) return e->stats_rows;
  TSTAT_ASSIGN_OR_RETURN(SegmentContents contents, Read(file, &known));
  auto rows = std::make_shared<const SegmentStatsRows>(std::move(contents));
  Entry entry;
  entry.bytes = rows->ApproxBytes();
  entry.stats_rows = rows;
  Insert(key, std::move(entry));
  return rows;
}

std::shared_ptr<const WorkerIndex> SegmentCache::Peek(int rank, std::uint32_t ordinal) {
  const Entry* e = Touch(Key{rank, ordinal, Kind::kIndex});
  return e == nullptr ? nullptr : e->index;
}

}  // namespace tstat::io
