// See segment_cache.h.
#include "io/read/segment_cache.h"

#include "io/h5/segment_seal.h"
#include "io/read/segment_reader.h"

namespace tstat::io {

const SegmentCache::Entry* SegmentCache::Touch(const Key& key) {
  auto found = entries_.find(key);
  if (found == entries_.end()) return nullptr;
  uses_.splice(uses_.begin(), uses_, found->second.use);
  return &found->second;
}

Result<SegmentContents> SegmentCache::Read(const SegmentFile& file,
                                           const std::function<bool(std::uint32_t)>& known,
                                           Tables tables, SegmentBuffers* reuse,
                                           std::optional<std::int64_t> one_step) {
  // The seal first (once: neither the hook's parse nor the read checks it
  // again); a damaged one is the file's records, as below.
  if (Status sealed = VerifySegmentSeal(file.path); !sealed.ok()) {
    if (sealed.code() == StatusCode::kIoError) return sealed;
    return Status::Corruption(sealed.message());
  }
  if (before_read_) {
    TSTAT_RETURN_IF_ERROR(before_read_(file.path, tables != Tables::kRecordsButStats));
  }
  RecordTablesRead read;
  read.seal_verified = true;
  read.exponent_histograms = exponent_histograms_;
  read.stats = tables == Tables::kRecords;
  read.exp_hist_step = one_step;
  Result<SegmentContents> contents = tables == Tables::kStatsOnly
                                         ? ReadSegmentStats(file.path, known, true)
                                         : ReadSegmentRecords(file.path, known, reuse, read);
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
    if (steps != nullptr && steps.use_count() == 1) spare_ = steps->ReleaseTables(&spare_rows_);
    entries_.erase(last);
    uses_.pop_back();
  }
}

template <class T, class Make>
Result<std::shared_ptr<const T>> SegmentCache::GetOrMake(const Key& key,
                                                         std::shared_ptr<T> Entry::*slot,
                                                         Make&& make) {
  if (const Entry* e = Touch(key)) return std::shared_ptr<const T>(e->*slot);
  auto failed = failed_.find(key);
  if (failed != failed_.end()) return failed->second;
  Result<std::shared_ptr<T>> result = make();
  if (!result.ok()) {
    // Damage does not heal: the next query is answered without reading the
    // file again (an I/O error may pass, and is retried).
    if (result.status().code() == StatusCode::kCorruption) failed_.emplace(key, result.status());
    return result.status();
  }
  std::shared_ptr<T> made = std::move(result).value();
  Entry entry;
  entry.bytes = made->ApproxBytes();
  entry.*slot = made;
  Insert(key, std::move(entry));
  return std::shared_ptr<const T>(std::move(made));
}

Result<std::shared_ptr<const WorkerIndex>> SegmentCache::Get(
    int rank, std::uint32_t ordinal, const SegmentFile& file,
    const std::function<bool(std::uint32_t)>& known) {
  return GetOrMake(Key{rank, ordinal, Kind::kIndex}, &Entry::index,
                   [&]() -> Result<std::shared_ptr<WorkerIndex>> {
                     TSTAT_ASSIGN_OR_RETURN(SegmentContents contents,
                                            Read(file, known, Tables::kRecords));
                     auto index = std::make_shared<WorkerIndex>(rank);
                     index->AddSegment(contents, file.path, file.bytes);
                     return index;
                   });
}

Result<std::shared_ptr<const SegmentSteps>> SegmentCache::GetSteps(
    int rank, std::uint32_t ordinal, const SegmentFile& file,
    const std::function<bool(std::uint32_t)>& known) {
  return GetOrMake(Key{rank, ordinal, Kind::kSteps}, &Entry::steps,
                   [&]() -> Result<std::shared_ptr<SegmentSteps>> {
                     if (file.stats_layout) {
                       TSTAT_ASSIGN_OR_RETURN(std::shared_ptr<SegmentSteps> steps,
                                              StepsFromChunks(file, known));
                       if (steps) return steps;
                     }
                     TSTAT_ASSIGN_OR_RETURN(SegmentContents contents,
                                            Read(file, known, Tables::kRecords, &spare_));
                     return std::make_shared<SegmentSteps>(std::move(contents));
                   });
}

Result<std::shared_ptr<const SegmentSteps>> SegmentCache::GetStep(
    int rank, std::uint32_t ordinal, const SegmentFile& file,
    const std::function<bool(std::uint32_t)>& known, std::int64_t global_step) {
  const std::pair<int, std::uint32_t> segment{rank, ordinal};
  auto last = last_step_.find(rank);
  const bool walking =
      last != last_step_.end() && (last->second == ordinal || last->second + 1 == ordinal);
  last_step_[rank] = ordinal;
  const bool cached = entries_.count(Key{rank, ordinal, Kind::kSteps}) != 0;
  if (cached || walking || !file.stats_layout || failed_.count(Key{rank, ordinal, Kind::kSteps}) ||
      !one_step_reads_.insert(segment).second) {
    return GetSteps(rank, ordinal, file, known);
  }
  Result<std::shared_ptr<SegmentSteps>> one = StepFromChunks(file, known, global_step);
  if (!one.ok()) {
    if (one.status().code() == StatusCode::kCorruption) {
      failed_.emplace(Key{rank, ordinal, Kind::kSteps}, one.status());
    }
    return one.status();
  }
  if (*one == nullptr) return GetSteps(rank, ordinal, file, known);
  return std::shared_ptr<const SegmentSteps>(std::move(one).value());
}

Result<std::shared_ptr<SegmentSteps>> SegmentCache::StepFromChunks(
    const SegmentFile& file, const std::function<bool(std::uint32_t)>& known,
    std::int64_t global_step) {
  TSTAT_ASSIGN_OR_RETURN(SegmentContents contents,
                         Read(file, known, Tables::kRecordsButStats, nullptr, global_step));
  if (!chunk_reader_) {
    TSTAT_ASSIGN_OR_RETURN(chunk_reader_, StatsChunkReader::Make());
  }
  SegmentBuffers& t = contents.tables;
  std::vector<PlacedStatsRow> rows;
  Result<bool> placed = chunk_reader_->ReadStep(file.path, file.bytes, *file.stats_layout, t.steps,
                                                t.stats_capture_index, known, global_step, &rows);
  if (!placed.ok() && placed.status().code() == StatusCode::kIoError) return placed.status();
  if (!placed.ok() || !*placed) return std::shared_ptr<SegmentSteps>();  // the general way
  // The step's histogram rows alone were read (with the bins they point
  // to), in the order written: capture order, as the rows are, joined in
  // one pass (SegmentSteps::JoinExpHist).
  t.stats_capture_index.clear();
  const auto count = static_cast<std::uint32_t>(rows.size());
  return std::make_shared<SegmentSteps>(
      std::move(contents), std::move(rows),
      std::vector<SegmentSteps::StepRecords>{{global_step, count}});
}

Result<std::shared_ptr<const SegmentStatsRows>> SegmentCache::GetStatsRows(
    int rank, std::uint32_t ordinal, const SegmentFile& file,
    const std::function<bool(std::uint32_t)>& known) {
  return GetOrMake(Key{rank, ordinal, Kind::kStatsRows}, &Entry::stats_rows,
                   [&]() -> Result<std::shared_ptr<SegmentStatsRows>> {
                     TSTAT_ASSIGN_OR_RETURN(SegmentContents contents,
                                            Read(file, known, Tables::kStatsOnly));
                     return std::make_shared<SegmentStatsRows>(std::move(contents));
                   });
}

Result<std::shared_ptr<SegmentSteps>> SegmentCache::StepsFromChunks(
    const SegmentFile& file, const std::function<bool(std::uint32_t)>& known) {
  // The spare rows keep their size: resizing them to this segment's zeroes
  // only what grows.
  std::vector<PlacedStatsRow> rows = std::move(spare_rows_);
  TSTAT_ASSIGN_OR_RETURN(SegmentContents contents,
                         Read(file, known, Tables::kRecordsButStats, &spare_));
  if (!chunk_reader_) {
    TSTAT_ASSIGN_OR_RETURN(chunk_reader_, StatsChunkReader::Make());
  }
  SegmentBuffers& t = contents.tables;
  std::vector<std::uint32_t> per_step;
  Result<bool> placed =
      chunk_reader_->ReadCaptureOrder(file.path, file.bytes, *file.stats_layout, t.steps,
                                      t.stats_capture_index, known, &rows, &per_step);
  if (!placed.ok() && placed.status().code() == StatusCode::kIoError) return placed.status();
  // Rows not as a writer stores them, or a layout that does not match the
  // file (its chunks fail their CRCs: a crafted catalog; the file passed its
  // seal): the general way answers from the file alone.
  if (!placed.ok() || !*placed) {
    spare_ = std::move(t);
    spare_rows_ = std::move(rows);
    return std::shared_ptr<SegmentSteps>();
  }
  t.stats_capture_index.clear();  // the rows are in capture order now
  std::vector<SegmentSteps::StepRecords> steps(t.steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    steps[i] = SegmentSteps::StepRecords{t.steps[i].global_step, per_step[i]};
  }
  return std::make_shared<SegmentSteps>(std::move(contents), std::move(rows), steps);
}

std::shared_ptr<const WorkerIndex> SegmentCache::Peek(int rank, std::uint32_t ordinal) {
  const Entry* e = Touch(Key{rank, ordinal, Kind::kIndex});
  return e == nullptr ? nullptr : e->index;
}

}  // namespace tstat::io
