// The pipeline's queues and threads.
#include "host/pipeline/pipeline.h"

#include <algorithm>

#include "host/pipeline/background_thread.h"
#include "host/pipeline/run_dir_requests.h"

namespace tstat::host {
namespace {

// Empties every member past the exponent histogram (HasOnlyStats).
void KeepOnlyStats(TensorStatsRecord* r) {
  r->linear_histogram.reset();
  r->per_channel.reset();
  r->label_counts.reset();
  r->sample.reset();
  r->delta.reset();
  r->confusion.reset();
  r->count_values.clear();
  r->value_counts.clear();
}

}  // namespace

bool HasOnlyStats(const TensorStatsRecord& r) {
  return !r.linear_histogram && !r.per_channel && !r.label_counts && !r.sample && !r.delta &&
         !r.confusion && r.count_values.empty() && r.value_counts.empty();
}

std::uint64_t ApproxRecordBytes(const TensorStatsRecord& r, bool only_stats) {
  std::uint64_t n = sizeof(r);
  if (r.exponent_histogram) n += r.exponent_histogram->counts.size() * 8;
  if (only_stats) return n;
  if (r.linear_histogram) n += r.linear_histogram->counts.size() * 8;
  if (r.per_channel) n += r.per_channel->channels.size() * sizeof(TensorStats);
  if (r.label_counts) n += r.label_counts->counts.size() * 8;
  if (r.sample) n += r.sample->values.size() * 16;
  return n;
}

std::uint64_t ApproxBytes(const StepBatch& b, std::optional<std::uint64_t> stats_bytes) {
  std::uint64_t n = sizeof(StepBatch);
  if (stats_bytes) {
    n += *stats_bytes;
  } else {
    for (const TensorStatsRecord& r : b.stats) n += ApproxRecordBytes(r);
  }
  n += b.scalars.size() * sizeof(ScalarRecord);
  for (const RawSnapshot& r : b.raws) n += sizeof(r) + r.bytes.size();
  for (const DropRecord& d : b.drops) n += sizeof(d) + d.reason.size();
  return n;
}

Pipeline::Pipeline(const Options& options, std::unique_ptr<io::StepSink> sink, StopState* stop)
    : options_(options), sink_(std::move(sink)), stop_(stop) {
  last_flush_ = Clock::now();
  next_stop_check_ = last_flush_;
  writer_ = std::thread([this] { WriterLoop(); });
}

Pipeline::~Pipeline() { (void)Close(); }

bool Pipeline::AcquireSlot() {
  std::unique_lock<std::mutex> lock(mu_);
  const std::int64_t cap = QueueSteps();
  if (slots_in_use_ >= cap && !closing_) {
    if (unannounced_ > 0) {  // the writer may be asleep on steps not announced yet
      unannounced_ = 0;
      writer_cv_.notify_one();
    }
    if (options_.config.drop_stats_when_full) return false;
    const auto t0 = Clock::now();
    ++counters_.stats_waits;
    slot_cv_.wait(lock, [&] { return slots_in_use_ < cap || closing_; });
    counters_.stats_wait_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  ++slots_in_use_;
  counters_.queue_high_water = std::max<std::uint64_t>(counters_.queue_high_water,
                                                       static_cast<std::uint64_t>(slots_in_use_));
  return true;
}

std::int64_t Pipeline::QueueSteps() const {
  const std::int64_t every = options_.config.flush_interval_steps;
  return every > 0 ? std::min(options_.config.queue_capacity, every)
                   : options_.config.queue_capacity;
}

void Pipeline::WaitWhileFlushOverdue(std::unique_lock<std::mutex>* lock) {
  if (options_.config.drop_stats_when_full) return;  // never waits, by choice
  const auto window = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(2 * std::min(options_.config.flush_interval_seconds, 1e6)));
  const auto overdue = [&] {
    return !closing_ && !undurable_.empty() && Clock::now() - undurable_.front().queued > window;
  };
  if (!overdue()) return;
  // The writer is behind its flush deadline (starved of CPU, or a slow
  // disk): training waits, and gives it the core, rather than let the steps
  // a crash would lose grow without bound.
  unannounced_ = 0;
  writer_cv_.notify_one();
  const auto t0 = Clock::now();
  ++counters_.stats_waits;
  resolved_cv_.wait(*lock, [&] { return !overdue(); });
  counters_.stats_wait_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
}

void Pipeline::MarkResolved() {
  std::lock_guard<std::mutex> lock(mu_);
  while (!undurable_.empty() && undurable_.front().seq <= written_seq_) undurable_.pop_front();
  resolved_cv_.notify_all();
}

Status Pipeline::Push(PipelineItem item) {
  item.approx_bytes =
      item.has_batch ? ApproxBytes(item.batch, item.stats_bytes) + item.raw_bytes : 0;
  std::unique_lock<std::mutex> lock(mu_);
  if (closing_) {
    if (item.holds_slot) --slots_in_use_;
    raw_in_flight_ -= item.raw_bytes;
    return Status::FailedPrecondition("the session is closed");
  }
  if (item.has_batch) {
    WaitWhileFlushOverdue(&lock);
    item.seq = ++queued_seq_;
    undurable_.push_back({item.seq, Clock::now()});
  }
  bytes_in_flight_ += item.approx_bytes;
  counters_.queue_high_water_bytes = std::max(counters_.queue_high_water_bytes, bytes_in_flight_);
  if (item.finish && !use_collector_) {
    use_collector_ = true;
    collector_ = std::thread([this] { CollectorLoop(); });
  }
  if (use_collector_) {
    collector_queue_.push_back(std::move(item));
    collector_cv_.notify_one();
    return Status::OK();
  }
  // Handed over here, in Push order (the caller serializes Push). The lock
  // is held so that the writer cannot see the item before the observer does.
  Observe(&item);
  const bool urgent = item.raw_bytes > 0;  // snapshots hold the raw memory cap
  writer_queue_.push_back(std::move(item));
  AnnounceLocked(urgent);
  return Status::OK();
}

// Waking the writer costs a futex call and a cross-core wakeup, noticeable
// in an EndStep of many tensors when the writer, on a core of its own,
// finished every step before the next one came and was woken for each. Steps are announced
// in groups instead: the group is announced by its kWakeEverySteps-th step
// (fewer with flush_interval_steps or a small queue), or by a step queued
// kMaxWakeDelay or more after the group's first (slow training steps); a
// training thread that has to wait for a slot wakes the writer first
// (AcquireSlot). Steps queued while training pauses wait for the writer's
// flush deadline, which is when they would become visible anyway.
void Pipeline::AnnounceLocked(bool now_anyway) {
  const Clock::time_point now = Clock::now();
  if (unannounced_ == 0) first_unannounced_ = now;
  ++unannounced_;
  const std::int64_t every = options_.config.flush_interval_steps;
  const std::int64_t group =
      std::min<std::int64_t>({kWakeEverySteps, std::max<std::int64_t>(1, QueueSteps() / 2),
                              every > 0 ? every : kWakeEverySteps});
  if (now_anyway || unannounced_ >= group || now - first_unannounced_ >= kMaxWakeDelay) {
    unannounced_ = 0;
    writer_cv_.notify_one();
  }
}

void Pipeline::Observe(PipelineItem* item) {
  BatchObserver* observer = options_.observer.get();
  if (observer == nullptr) return;
  if (!item->declare.empty()) observer->OnDeclare(item->declare);
  if (!item->has_batch) return;
  item->shared_batch = std::make_shared<const StepBatch>(std::move(item->batch));
  item->batch = StepBatch();
  observer->OnSharedBatch(item->shared_batch);
}

void Pipeline::CountRulesWait(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ++counters_.rules_waits;
  counters_.rules_wait_seconds += seconds;
}

bool Pipeline::ReserveRaw(std::uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto cap = static_cast<std::uint64_t>(options_.config.raw_memory_cap_bytes);
  if (raw_in_flight_ + bytes > cap) return false;
  raw_in_flight_ += bytes;
  return true;
}

void Pipeline::ReleaseRaw(std::uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  raw_in_flight_ -= std::min(raw_in_flight_, bytes);
}

void Pipeline::CountRawDrop(std::uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  ++counters_.raw_dropped;
  counters_.raw_dropped_bytes += bytes;
}

void Pipeline::CountStepCaptured() {
  std::lock_guard<std::mutex> lock(mu_);
  ++counters_.steps_captured;
}

void Pipeline::CountStepTime(double step_seconds, double capture_seconds, bool saved) {
  std::lock_guard<std::mutex> lock(mu_);
  ++counters_.capture.steps;
  counters_.capture.steps_saved += saved ? 1 : 0;
  counters_.capture.step_seconds += step_seconds;
  counters_.capture.capture_seconds += capture_seconds;
}

void Pipeline::CountWait(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ++counters_.stats_waits;
  counters_.stats_wait_seconds += seconds;
}

void Pipeline::CountRecordsLost(std::uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_.records_lost += n;
}

PipelineCounters Pipeline::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

Status Pipeline::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

void Pipeline::SetError(const Status& s) {
  std::lock_guard<std::mutex> lock(mu_);
  ++counters_.write_errors;
  if (status_.ok()) status_ = s;
}

void Pipeline::RecycleRecords(std::vector<TensorStatsRecord>* records) {
  if (records->empty()) return;  // e.g. moved to an observer's shared batch
  std::vector<TensorStatsRecord> keep;
  keep.swap(*records);
  // Emptied here, where the write just read them, so that the training
  // thread writes only the stats and histogram lines of a reused record:
  // every line it writes is one this core read and must give up, and
  // resetting the rest there cost ~5 of them per record.
  std::uint64_t bytes = keep.capacity() * sizeof(TensorStatsRecord);
  for (TensorStatsRecord& r : keep) {
    if (!HasOnlyStats(r)) KeepOnlyStats(&r);
    if (r.exponent_histogram) bytes += r.exponent_histogram->counts.capacity() * 8;
  }
  const auto max_count =
      static_cast<std::size_t>(std::max<std::int64_t>(1, options_.config.queue_capacity));
  std::lock_guard<std::mutex> lock(spare_mu_);
  if (spare_records_.size() < max_count && spare_bytes_ + bytes <= kMaxSpareBytes) {
    spare_bytes_ += bytes;
    spare_records_.push_back({std::move(keep), bytes});
  }
}

std::vector<TensorStatsRecord> Pipeline::TakeSpareRecords() {
  std::lock_guard<std::mutex> lock(spare_mu_);
  if (spare_records_.empty()) return {};
  SpareRecords& last = spare_records_.back();
  spare_bytes_ -= last.bytes;
  std::vector<TensorStatsRecord> records = std::move(last.records);
  spare_records_.pop_back();
  return records;
}

void Pipeline::FinishItem(const PipelineItem& item) {
  std::lock_guard<std::mutex> lock(mu_);
  if (item.holds_slot) {
    --slots_in_use_;
    slot_cv_.notify_all();
  }
  raw_in_flight_ -= std::min(raw_in_flight_, item.raw_bytes);
  bytes_in_flight_ -= std::min(bytes_in_flight_, item.approx_bytes);
}

Status Pipeline::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return status_;
    closed_ = true;
    closing_ = true;
    collector_cv_.notify_all();
    writer_cv_.notify_all();
    slot_cv_.notify_all();
    resolved_cv_.notify_all();
  }
  if (collector_.joinable()) collector_.join();
  if (writer_.joinable()) writer_.join();
  return status();
}

void Pipeline::CollectorLoop() {
  NameCurrentThread("tstat-collect");
  LowerCurrentThreadPriority();
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    collector_cv_.wait(lock, [&] { return !collector_queue_.empty() || closing_; });
    if (collector_queue_.empty()) break;  // closing and drained
    PipelineItem item = std::move(collector_queue_.front());
    collector_queue_.pop_front();
    lock.unlock();
    if (item.finish) {
      item.finish(&item.batch);  // waits for the device
      item.finish = nullptr;
    }
    Observe(&item);  // in queue order, on this thread
    lock.lock();
    writer_queue_.push_back(std::move(item));
    writer_cv_.notify_one();
  }
  collector_done_ = true;
  writer_cv_.notify_all();
}

void Pipeline::WriterLoop() {
  NameCurrentThread("tstat-writer");
  LowerCurrentThreadPriority();
  const auto flush_every = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::min(options_.config.flush_interval_seconds, 1e6)));
  // EndStep checks the STOP file at stop_check_interval_ms; this check only
  // serves a training thread that is not stepping, so it need not be fast.
  const auto stop_every = std::chrono::milliseconds(
      std::max<std::int64_t>(100, options_.config.stop_check_interval_ms));
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    Clock::time_point deadline = last_flush_ + flush_every;
    if (!options_.stop_file.empty()) deadline = std::min(deadline, next_stop_check_);
    const auto drained = [&] {
      return closing_ && writer_queue_.empty() && (!use_collector_ || collector_done_);
    };
    writer_cv_.wait_until(lock, deadline, [&] { return !writer_queue_.empty() || drained(); });
    std::deque<PipelineItem> items;
    items.swap(writer_queue_);
    unannounced_ = 0;
    const bool exit = items.empty() && drained();
    lock.unlock();
    for (PipelineItem& item : items) {
      WriteItem(&item);
      FinishItem(item);
      RecycleRecords(&item.batch.stats);
    }
    const auto now = Clock::now();
    if (now - last_flush_ >= flush_every) {
      if (unflushed_batches_ > 0) {
        FlushSink();
      } else {
        last_flush_ = now;
        MarkResolved();  // written batches the sink already sealed (or lost)
      }
    }
    if (!options_.stop_file.empty() && now >= next_stop_check_) {
      CheckStopFile(options_.stop_file, stop_);
      next_stop_check_ = now + stop_every;
    }
    if (exit) break;
    lock.lock();
  }
  // Close flushes: everything written so far becomes durable, or is lost.
  const Status closed = sink_->Close(CountersIfFlushed());
  SyncSinkCounts();
  if (!closed.ok()) SetError(closed.WithContext("closing the run"));
  unflushed_batches_ = 0;
  MarkResolved();
}

PipelineCounters Pipeline::CountersIfFlushed() const {
  PipelineCounters snapshot = counters();
  snapshot.records_written = records_to_sink_ - sink_->records_lost();
  return snapshot;
}

void Pipeline::SyncSinkCounts() {
  const std::uint64_t lost = sink_->records_lost();
  const std::uint64_t unflushed = sink_->records_unflushed();
  std::lock_guard<std::mutex> lock(mu_);
  counters_.records_lost += lost - sink_lost_counted_;
  sink_lost_counted_ = lost;
  counters_.records_written = records_to_sink_ - lost - unflushed;
  counters_.bytes_written = sink_->bytes_written();
  counters_.segments_written = sink_->segments_written();  // what CLOSED says too
}

void Pipeline::WriteItem(PipelineItem* item) {
  // Declarations that failed (a full disk) are retried before the next write.
  pending_declare_.insert(pending_declare_.end(), item->declare.begin(), item->declare.end());
  if (!pending_declare_.empty()) {
    const Status s = sink_->RegisterTensors(pending_declare_);
    if (s.ok()) {
      pending_declare_.clear();
    } else {
      SetError(s.WithContext("declaring tensors"));
    }
  }
  if (!item->has_batch) return;
  const StepBatch& batch = item->shared_batch ? *item->shared_batch : item->batch;
  written_seq_ = item->seq;
  const std::uint64_t records = io::RecordsIn(batch);
  const std::uint64_t lost_before = sink_->records_lost();
  const Status s = sink_->Write(batch);
  // A batch the sink rejected (a caller error) changed nothing there and is
  // lost here; any other failure the sink counted itself.
  const bool rejected = !s.ok() && io::IsRejectedCall(s) && sink_->records_lost() == lost_before;
  if (rejected) {
    CountRecordsLost(records);
  } else {
    records_to_sink_ += records;
  }
  SyncSinkCounts();
  if (!s.ok()) {
    SetError(s.WithContext("writing step " + std::to_string(batch.key.global_step)));
    // The failed segment is gone; what the sink still holds (this batch, in
    // a fresh segment after a failed rotation) counts toward the next flush.
    if (!rejected) unflushed_batches_ = sink_->records_unflushed() > 0 ? 1 : 0;
    return;
  }
  ++unflushed_batches_;
  const std::int64_t every = options_.config.flush_interval_steps;
  if (every > 0 && unflushed_batches_ >= every) FlushSink();
}

void Pipeline::FlushSink() {
  const Status s = sink_->Flush(CountersIfFlushed());
  SyncSinkCounts();
  if (!s.ok()) SetError(s.WithContext("flushing"));
  unflushed_batches_ = 0;
  last_flush_ = Clock::now();
  MarkResolved();
}

}  // namespace tstat::host
