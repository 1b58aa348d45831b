// Helpers of the capture tests: sessions over in-memory sinks, a sink that
// forwards slowly (a writer that falls behind), a host-memory stand-in for
// the GPU (the CUDA path without a GPU), temp directories, record lookup.
// Thread safety: ForwardingSink and FakeDeviceCapture are safe where the
// pipeline needs them to be (see each).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "host/device/device_capture.h"
#include "host/session/session_internal.h"
#include "io/write/step_sink.h"
#include "tests/support/testing_sinks.h"
#include "tstat/session.h"

namespace tstat::testing {

// Forwards every call to a sink the test keeps (so it can be inspected after
// the session, and its pipeline, are gone), sleeping `write_delay_ms` in
// each Write to make the writer fall behind.
class ForwardingSink final : public io::StepSink {
 public:
  explicit ForwardingSink(std::shared_ptr<io::StepSink> inner, int write_delay_ms = 0)
      : inner_(std::move(inner)), delay_ms_(write_delay_ms) {}
  void set_write_delay_ms(int ms) { delay_ms_.store(ms); }
  Status RegisterTensors(const std::vector<TensorInfo>& t) override {
    return inner_->RegisterTensors(t);
  }
  Status Write(const StepBatch& batch) override;
  Status Flush(const PipelineCounters& c) override { return inner_->Flush(c); }
  Status Close(const PipelineCounters& c) override { return inner_->Close(c); }
  std::uint64_t bytes_written() const override { return inner_->bytes_written(); }
  std::uint64_t records_lost() const override { return inner_->records_lost(); }
  std::uint64_t records_unflushed() const override { return inner_->records_unflushed(); }

 private:
  std::shared_ptr<io::StepSink> inner_;
  std::atomic<int> delay_ms_;
};

// A config for tests: every tensor saved at every step, CPU backend with one
// thread (ThreadSanitizer-friendly: no OpenMP team), quick flushes.
SessionConfig TestConfig();

struct SessionOptionsForTest {
  int write_delay_ms = 0;
  host::DeviceCaptureFactory device_factory;
};

// A session writing into `sink` (kept by the caller too).
std::unique_ptr<Session> MakeSession(const SessionConfig& config,
                                     std::shared_ptr<io::StepSink> sink,
                                     const SessionOptionsForTest& options = {});

// Pointers into `batch` (nullptr when absent).
const TensorStatsRecord* FindStats(const StepBatch& batch, std::uint32_t id);
const ScalarRecord* FindScalar(const StepBatch& batch, std::uint32_t id);
const RawSnapshot* FindRaw(const StepBatch& batch, std::uint32_t id);
// The batch of global step `g`, or nullptr.
const StepBatch* FindBatch(const std::vector<StepBatch>& batches, std::int64_t g);
// Global steps of the batches holding stats of tensor `id`.
std::vector<std::int64_t> StepsWithStats(const std::vector<StepBatch>& batches, std::uint32_t id);

// A record as the ReductionResult it came from (to compare with the reference).
ReductionResult ToResult(const TensorStatsRecord& record);

// A fresh directory under $TMPDIR, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A DeviceCapture whose "device memory" is host memory: Enqueue snapshots the
// tensors (as stream order would: later writes do not affect this step),
// Collect reduces the snapshots with the CPU backend (one thread). With
// `collect_delay_ms` the "GPU" is slow. Counts Enqueue calls.
struct FakeDeviceStats {
  std::atomic<int> enqueues{0};
  std::atomic<int> collects{0};
  std::atomic<int> max_batch{0};
};
host::DeviceCaptureFactory FakeDeviceFactory(std::shared_ptr<FakeDeviceStats> stats,
                                             int collect_delay_ms = 0);

}  // namespace tstat::testing
