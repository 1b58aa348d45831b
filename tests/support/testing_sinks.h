// Test doubles of StepSink for pipeline tests (not used in production).
//
// MemorySink keeps everything it is given, in memory, and lets a test inspect
// it. FaultInjectionSink wraps another sink and fails calls on command or
// after N successful calls (e.g. a disk that fills up), with the same loss
// semantics as the HDF5 writer (hdf5_run_writer.h): a failed Write/Flush/Close
// discards every batch written since the last successful Flush, including the
// failing one, and counts their records in records_lost().
//
// Thread safety: StepSink methods are called by one thread (the pipeline's
// writer thread), but every method of both classes -- and the inspection and
// control methods in particular -- is safe to call from any thread at any
// time (an internal mutex), so a test thread can observe or inject faults
// while the pipeline runs.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "io/write/step_sink.h"

namespace tstat::io {

class MemorySink final : public StepSink {
 public:
  Status RegisterTensors(const std::vector<TensorInfo>& tensors) override;
  Status Write(const StepBatch& batch) override;
  Status Flush(const PipelineCounters& counters) override;
  Status Close(const PipelineCounters& counters) override;
  // Estimate: per flushed batch, sizeof(TensorStats) per stats record, 16
  // bytes per scalar and the raw snapshot bytes.
  std::uint64_t bytes_written() const override;
  std::uint64_t records_lost() const override { return 0; }  // never fails
  std::uint64_t records_unflushed() const override;

  std::vector<TensorInfo> tensors() const;         // every declaration, in order
  std::vector<StepBatch> batches() const;          // every batch written
  std::vector<StepBatch> flushed_batches() const;  // those made durable by a Flush
  std::int64_t flush_count() const;                // Flush calls (Close's included)
  bool closed() const;
  PipelineCounters last_counters() const;  // as given to the last Flush/Close

 private:
  mutable std::mutex mutex_;
  std::vector<TensorInfo> tensors_;
  std::vector<StepBatch> batches_;
  std::size_t flushed_ = 0;  // batches_[0, flushed_) are durable
  std::int64_t flush_count_ = 0;
  std::uint64_t bytes_ = 0;
  bool closed_ = false;
  PipelineCounters counters_;
};

enum class SinkOp : std::uint8_t { kRegister, kWrite, kFlush, kClose };

class FaultInjectionSink final : public StepSink {
 public:
  // Batches are held here and handed to `inner` (Write + Flush) when a Flush
  // succeeds, so a failure can discard them as a real segment failure would.
  explicit FaultInjectionSink(std::unique_ptr<StepSink> inner);

  // The next `times` calls of `op` fail.
  void FailNext(SinkOp op, int times = 1);
  // After `successes` more successful calls of `op`, every call of `op`
  // fails until Heal() (a disk that fills up and stays full).
  void FailAfter(SinkOp op, int successes);
  void Heal();  // cancels every pending and permanent fault
  // The Status injected failures return (default: kResourceExhausted,
  // "injected fault: no space left on device").
  void SetFailure(Status status);

  Status RegisterTensors(const std::vector<TensorInfo>& tensors) override;
  Status Write(const StepBatch& batch) override;
  Status Flush(const PipelineCounters& counters) override;
  Status Close(const PipelineCounters& counters) override;
  std::uint64_t bytes_written() const override;
  // Records discarded by failures (injected, or the inner sink's).
  std::uint64_t records_lost() const override;
  std::uint64_t records_unflushed() const override;
  std::int64_t failures() const;  // injected failures returned so far
  StepSink* inner() const { return inner_.get(); }

 private:
  struct Fault {
    int fail_next = 0;
    int fail_after = -1;  // successes left before failing for good; -1 = off
    bool failing = false;
  };
  bool ShouldFail(SinkOp op);  // with mutex_ held; consumes one call
  Status Lose(std::uint64_t extra_records);
  // Writes pending_ to the inner sink (before its Flush/Close).
  Status HandPendingToInner();

  mutable std::mutex mutex_;
  std::unique_ptr<StepSink> inner_;
  Fault faults_[4];
  Status failure_;
  std::vector<StepBatch> pending_;
  std::uint64_t records_lost_ = 0;
  std::int64_t failures_ = 0;
};

}  // namespace tstat::io
