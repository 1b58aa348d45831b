// See segment_cache.h.
#include "io/read/segment_cache.h"

#include "io/read/segment_reader.h"

namespace tstat::io {

Result<std::shared_ptr<const WorkerIndex>> SegmentCache::Get(int rank, std::uint32_t ordinal,
                                                             const SegmentFile& file) {
  const Key key{rank, ordinal};
  auto found = entries_.find(key);
  if (found != entries_.end()) {
    uses_.splice(uses_.begin(), uses_, found->second.use);
    return found->second.index;
  }
  Result<SegmentContents> contents = ReadSegment(file.path);
  if (!contents.ok()) {
    const Status& s = contents.status();
    // It was read whole when the run was opened: whatever fails now is the
    // file's records (or the file is gone).
    if (s.code() == StatusCode::kIoError) return s;
    return Status::Corruption(s.message());
  }
  ++reads_;
  auto index = std::make_shared<WorkerIndex>(rank);
  index->AddSegment(contents.value(), file.path, file.bytes);
  Entry entry;
  entry.bytes = index->ApproxBytes();
  entry.index = std::move(index);
  uses_.push_front(key);
  entry.use = uses_.begin();
  bytes_ += entry.bytes;
  std::shared_ptr<const WorkerIndex> out = entry.index;
  entries_.emplace(key, std::move(entry));
  while (bytes_ > cap_bytes_ && uses_.size() > 1) {
    auto last = entries_.find(uses_.back());
    bytes_ -= last->second.bytes;
    entries_.erase(last);
    uses_.pop_back();
  }
  return out;
}

}  // namespace tstat::io
