// Pipeline: the bounded queue from the training thread to the writer thread,
// the optional collector stage for device work, the raw-memory cap, flush
// policy, STOP-file watch, and the counters.
//
// Threads. The training thread calls AcquireSlot/Push (and ReserveRaw). A
// writer thread declares tensors, writes batches to the StepSink and flushes
// it every flush_interval_seconds and every flush_interval_steps batches,
// checking <run>/STOP every max(stop_check_interval_ms, 100) ms (EndStep
// checks it more often: run_dir_requests.h). Items that carry device
// work (`finish`) make the pipeline start a collector thread; from then on
// every item passes through it in order, so batches reach the sink in step
// order. `finish` runs on the collector thread (it waits for the GPU) before
// the item is handed to the writer.
//
// Backpressure. At most queue_capacity items are in flight (queued, being
// collected or written). AcquireSlot waits for a free slot and counts the
// wait, or with drop_stats_when_full returns false at once. Items that carry
// only declarations or drop records bypass the cap (they are tiny). Raw
// snapshot bytes are reserved against raw_memory_cap_bytes by ReserveRaw and
// released once written.
//
// Errors. A failed Write loses that batch's records; a failed Flush loses the
// records written since the last good flush; both are counted (write_errors,
// records_lost) and the first error is kept for status(). Nothing stops.
// Thread safety: every method is thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "host/pipeline/stop_state.h"
#include "io/write/step_sink.h"
#include "tstat/config.h"
#include "tstat/stats_record.h"

namespace tstat::host {

// Sees every item as it is handed to the writer, in order: every
// declaration before the batches that use it, every batch once (whether or
// not its write succeeds later), and never waits for the disk. Host-only
// items are handed over in Push (the training thread); items with device
// work by the collector thread once that work is done. The in-process rule
// engine attaches here. Must be quick: the training (or collector) thread
// waits for it.
class BatchObserver {
 public:
  virtual ~BatchObserver() = default;
  virtual void OnDeclare(const std::vector<TensorInfo>& tensors) = 0;
  virtual void OnBatch(const StepBatch& batch) = 0;
  // The batch as the writer will write it (immutable; shared so that an
  // observer can keep it without a copy, e.g. to evaluate it on its own
  // thread). Holding it keeps its raw snapshot bytes alive past the raw
  // memory cap's accounting: release it promptly.
  virtual void OnSharedBatch(const std::shared_ptr<const StepBatch>& batch) { OnBatch(*batch); }
};

struct PipelineItem {
  std::vector<TensorInfo> declare;  // declared to the sink before the batch
  bool has_batch = false;
  StepBatch batch;
  std::uint64_t raw_bytes = 0;     // reserved with ReserveRaw; released when written
  bool holds_slot = false;         // took a slot with AcquireSlot
  std::uint64_t approx_bytes = 0;  // set by Push
  // ApproxRecordBytes summed over batch.stats when the caller already knows
  // it (EndStep does); Push computes it otherwise.
  std::optional<std::uint64_t> stats_bytes;
  // Device work to wait for (collector thread) before writing.
  std::function<void(StepBatch*)> finish;
  // With an observer: `batch`, moved here when the item is handed over.
  std::shared_ptr<const StepBatch> shared_batch;
  std::uint64_t seq = 0;  // set by Push for a batch: 1, 2, ... in queue order
};

class Pipeline {
 public:
  struct Options {
    PipelineConfig config;
    std::string stop_file;                    // empty: no STOP file watch
    std::shared_ptr<BatchObserver> observer;  // optional
  };
  Pipeline(const Options& options, std::unique_ptr<io::StepSink> sink, StopState* stop);
  ~Pipeline();  // Close() if needed
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Takes a slot for one batch. Waits while QueueSteps() items are in
  // flight (counted in stats_waits / stats_wait_seconds) unless
  // drop_stats_when_full, where it returns false when full.
  bool AcquireSlot();
  // Queues `item` (call AcquireSlot first when it carries stats; set
  // holds_slot). After Close: dropped, kFailedPrecondition. A batch first
  // waits while an earlier one is not durable 2 x flush_interval_seconds
  // after it was queued (the writer starved of CPU), counted in stats_waits,
  // unless drop_stats_when_full. With QueueSteps() this is the loss bound of
  // a crash (docs/reliability.md): at most 2 x flush_interval_seconds of
  // steps, and at most 2 x flush_interval_steps - 1 steps when that is set.
  Status Push(PipelineItem item);
  // Steps the queue holds: queue_capacity, and at most flush_interval_steps
  // when that is set (queued steps count toward the loss bound too).
  std::int64_t QueueSteps() const;

  // Reserves raw snapshot bytes; false (and nothing reserved) over the cap.
  bool ReserveRaw(std::uint64_t bytes);
  void ReleaseRaw(std::uint64_t bytes);
  // Counts a raw snapshot that did not fit.
  void CountRawDrop(std::uint64_t bytes);
  void CountStepCaptured();
  // Adds one ended step (saved or not) to counters().capture.
  void CountStepTime(double step_seconds, double capture_seconds, bool saved);
  // Counts a wait of the training thread for something else (a GPU buffer).
  void CountWait(double seconds);
  // Counts a wait of EndStep for the in-process rules thread.
  void CountRulesWait(double seconds);
  void CountRecordsLost(std::uint64_t n);

  PipelineCounters counters() const;
  Status status() const;

  // The stats records of a batch the writer has finished with, still
  // holding that step's stats and exponent histograms (empty when there is
  // none): the training thread overwrites them for its next batch
  // (AddResult, session/step_records.h) instead of writing fresh memory in
  // every step (a step of 1,000 records is ~0.5 MB), reusing their buffers. Every
  // member past the exponent histogram is empty (HasOnlyStats), so a record
  // of stats needs none of them written. Any thread.
  std::vector<TensorStatsRecord> TakeSpareRecords();

  // Drains every queued item, flushes, closes the sink and joins the
  // threads. Returns status(); later calls return it again.
  Status Close();

 private:
  using Clock = std::chrono::steady_clock;
  void WriterLoop();
  void CollectorLoop();
  void WriteItem(PipelineItem* item);
  void FlushSink();
  // Batches up to written_seq_ are durable or counted lost: wakes a Push
  // that waits for them (writer thread, mu_ not held).
  void MarkResolved();
  // In Push (mu_ held through `lock`): see Push.
  void WaitWhileFlushOverdue(std::unique_lock<std::mutex>* lock);
  // counters_ from the sink's own counts, after any call into it (writer
  // thread): records_lost gains what the sink lost since, records_written is
  // what it holds durably. The sink, not the pipeline, knows what a failure
  // discarded (it may have rotated segments on its own since the last flush).
  void SyncSinkCounts();
  // What a flush or close that succeeds makes records_written.
  PipelineCounters CountersIfFlushed() const;
  // Hands `item` to the observer (if any): moves its batch into shared_batch.
  void Observe(PipelineItem* item);
  void SetError(const Status& s);
  void FinishItem(const PipelineItem& item);  // slot and raw release
  // Counts a step queued for the writer and wakes it when due (or
  // `now_anyway`). Holds mu_.
  void AnnounceLocked(bool now_anyway);
  // Moves `records` (on the writer thread), records and all, to the spares
  // for TakeSpareRecords. As many are kept as the queue holds steps, up to
  // kMaxSpareBytes: while the writer flushes, the queue grows by tens of
  // steps, and each step past the spares then got fresh memory (faulted in
  // and zeroed, many times the cost of a reused step's records) at every
  // flush.
  void RecycleRecords(std::vector<TensorStatsRecord>* records);

  const Options options_;
  std::unique_ptr<io::StepSink> sink_;  // used by the writer thread only
  StopState* stop_;

  mutable std::mutex mu_;
  std::condition_variable writer_cv_;     // items for the writer, or closing
  std::condition_variable collector_cv_;  // items for the collector, or closing
  std::condition_variable slot_cv_;       // a slot became free
  std::condition_variable resolved_cv_;   // batches became durable (or lost), or closing
  // Batches queued and not yet durable: their seq and when they were queued.
  struct Undurable {
    std::uint64_t seq;
    std::chrono::steady_clock::time_point queued;
  };
  std::deque<Undurable> undurable_;
  std::uint64_t queued_seq_ = 0;
  std::deque<PipelineItem> writer_queue_;
  std::deque<PipelineItem> collector_queue_;
  bool use_collector_ = false;
  bool closing_ = false;
  bool closed_ = false;
  bool collector_done_ = false;
  std::int64_t slots_in_use_ = 0;
  std::uint64_t bytes_in_flight_ = 0;
  std::uint64_t raw_in_flight_ = 0;
  PipelineCounters counters_;
  Status status_;
  std::thread writer_;
  std::thread collector_;

  static constexpr std::uint64_t kMaxSpareBytes = 64ull << 20;
  std::mutex spare_mu_;  // guards the spares only (never held with mu_)
  struct SpareRecords {
    std::vector<TensorStatsRecord> records;
    std::uint64_t bytes = 0;  // their memory, roughly: records and histogram buffers
  };
  std::vector<SpareRecords> spare_records_;
  std::uint64_t spare_bytes_ = 0;

  static constexpr std::int64_t kWakeEverySteps = 8;
  static constexpr std::chrono::milliseconds kMaxWakeDelay{5};
  std::int64_t unannounced_ = 0;         // steps queued since the writer was last woken (mu_)
  Clock::time_point first_unannounced_;  // (mu_)

  // Writer-thread state.
  std::vector<TensorInfo> pending_declare_;
  // Records the sink took (written, lost or not yet durable); with its
  // records_lost() and records_unflushed() they give records_written.
  std::uint64_t records_to_sink_ = 0;
  std::uint64_t sink_lost_counted_ = 0;  // sink_->records_lost() already in counters_
  std::int64_t unflushed_batches_ = 0;   // batches written since the last flush
  std::uint64_t written_seq_ = 0;        // seq of the last batch given to the sink
  Clock::time_point last_flush_;
  Clock::time_point next_stop_check_;
};

// Whether `r` holds nothing past its exponent histogram: no linear
// histogram, per-channel stats, label counts, sample, delta, confusion
// matrix or value counts.
bool HasOnlyStats(const TensorStatsRecord& r);
// A rough size of one record in memory. With `only_stats` (the caller knows
// HasOnlyStats(r)) the members past the exponent histogram are not read.
std::uint64_t ApproxRecordBytes(const TensorStatsRecord& r, bool only_stats = false);
// A rough size of a batch in memory, for the queue high-water mark;
// `stats_bytes` is its records' ApproxRecordBytes when known.
std::uint64_t ApproxBytes(const StepBatch& batch,
                          std::optional<std::uint64_t> stats_bytes = std::nullopt);

}  // namespace tstat::host
