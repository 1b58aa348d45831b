// See testing_sinks.h.
#include "tests/support/testing_sinks.h"

#include "io/write/step_sink.h"

namespace tstat::io {

// ---------------------------------------------------------------------------
// MemorySink

Status MemorySink::RegisterTensors(const std::vector<TensorInfo>& tensors) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return Status::FailedPrecondition("MemorySink is closed");
  tensors_.insert(tensors_.end(), tensors.begin(), tensors.end());
  return Status::OK();
}

Status MemorySink::Write(const StepBatch& batch) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return Status::FailedPrecondition("MemorySink is closed");
  batches_.push_back(batch);
  return Status::OK();
}

Status MemorySink::Flush(const PipelineCounters& counters) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return Status::FailedPrecondition("MemorySink is closed");
  for (; flushed_ < batches_.size(); ++flushed_) {
    const StepBatch& b = batches_[flushed_];
    bytes_ += b.stats.size() * sizeof(TensorStats) + b.scalars.size() * 16;
    for (const RawSnapshot& r : b.raws) bytes_ += r.bytes.size();
  }
  ++flush_count_;
  counters_ = counters;
  return Status::OK();
}

Status MemorySink::Close(const PipelineCounters& counters) {
  TSTAT_RETURN_IF_ERROR(Flush(counters));
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  return Status::OK();
}

std::uint64_t MemorySink::records_unflushed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::uint64_t n = 0;
  for (std::size_t i = flushed_; i < batches_.size(); ++i) n += RecordsIn(batches_[i]);
  return n;
}

std::uint64_t MemorySink::bytes_written() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

std::vector<TensorInfo> MemorySink::tensors() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return tensors_;
}

std::vector<StepBatch> MemorySink::batches() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return batches_;
}

std::vector<StepBatch> MemorySink::flushed_batches() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::vector<StepBatch>(batches_.begin(),
                                batches_.begin() + static_cast<std::ptrdiff_t>(flushed_));
}

std::int64_t MemorySink::flush_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return flush_count_;
}

bool MemorySink::closed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return closed_;
}

PipelineCounters MemorySink::last_counters() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counters_;
}

// ---------------------------------------------------------------------------
// FaultInjectionSink

FaultInjectionSink::FaultInjectionSink(std::unique_ptr<StepSink> inner)
    : inner_(std::move(inner)),
      failure_(Status::ResourceExhausted("injected fault: no space left on device")) {}

void FaultInjectionSink::FailNext(SinkOp op, int times) {
  std::lock_guard<std::mutex> lock(mutex_);
  faults_[static_cast<int>(op)].fail_next += times;
}

void FaultInjectionSink::FailAfter(SinkOp op, int successes) {
  std::lock_guard<std::mutex> lock(mutex_);
  Fault& f = faults_[static_cast<int>(op)];
  f.fail_after = successes;
  f.failing = successes <= 0;
}

void FaultInjectionSink::Heal() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Fault& f : faults_) f = Fault();
}

void FaultInjectionSink::SetFailure(Status status) {
  std::lock_guard<std::mutex> lock(mutex_);
  failure_ = std::move(status);
}

bool FaultInjectionSink::ShouldFail(SinkOp op) {
  Fault& f = faults_[static_cast<int>(op)];
  bool fail = false;
  if (f.fail_next > 0) {
    --f.fail_next;
    fail = true;
  } else if (f.failing) {
    fail = true;
  } else if (f.fail_after > 0) {
    if (--f.fail_after == 0) f.failing = true;
  }
  if (fail) ++failures_;
  return fail;
}

Status FaultInjectionSink::Lose(std::uint64_t extra_records) {
  std::uint64_t lost = extra_records;
  for (const StepBatch& b : pending_) lost += RecordsIn(b);
  pending_.clear();
  records_lost_ += lost;
  return Status(failure_.code(),
                failure_.message() + " (" + std::to_string(lost) + " records lost)");
}

Status FaultInjectionSink::RegisterTensors(const std::vector<TensorInfo>& tensors) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ShouldFail(SinkOp::kRegister)) return failure_;
  return inner_->RegisterTensors(tensors);
}

Status FaultInjectionSink::Write(const StepBatch& batch) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ShouldFail(SinkOp::kWrite)) return Lose(RecordsIn(batch));
  pending_.push_back(batch);
  return Status::OK();
}

Status FaultInjectionSink::HandPendingToInner() {
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    Status written = inner_->Write(pending_[i]);
    if (!written.ok()) {
      // The inner sink counts what it held, the failing batch too unless it
      // rejected it; the batches after it never reached it.
      for (std::size_t j = IsRejectedCall(written) ? i : i + 1; j < pending_.size(); ++j) {
        records_lost_ += RecordsIn(pending_[j]);
      }
      pending_.clear();
      return written;
    }
  }
  pending_.clear();
  return Status::OK();
}

Status FaultInjectionSink::Flush(const PipelineCounters& counters) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ShouldFail(SinkOp::kFlush)) return Lose(0);
  TSTAT_RETURN_IF_ERROR(HandPendingToInner());
  return inner_->Flush(counters);
}

Status FaultInjectionSink::Close(const PipelineCounters& counters) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ShouldFail(SinkOp::kClose)) return Lose(0);
  TSTAT_RETURN_IF_ERROR(HandPendingToInner());
  return inner_->Close(counters);
}

std::uint64_t FaultInjectionSink::bytes_written() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return inner_->bytes_written();
}

std::uint64_t FaultInjectionSink::records_lost() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return records_lost_ + inner_->records_lost();
}

std::uint64_t FaultInjectionSink::records_unflushed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::uint64_t n = inner_->records_unflushed();
  for (const StepBatch& b : pending_) n += RecordsIn(b);
  return n;
}

std::int64_t FaultInjectionSink::failures() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failures_;
}

}  // namespace tstat::io
