// Session::Impl: the state behind tstat::Session, as parts that each own
// what they use: the step numbering and timing (StepClock), EndStep's
// capture and its scratch state (StepCapture), CaptureRawFor's queue
// (RawRequestQueue), the rules' side (SessionRules), the CUDA side
// (SessionDevice), and the pipeline to the writer.
//
// session.cc holds creation, the public wrappers (locking, timing) and
// EndStep; adhoc_capture.cc RegisterTensor, SaveScalar and SaveTensor.
// Methods named *Locked run with `mu` held (the public wrappers take it).
// Thread safety: `mu` serializes the capture calls; StepClock::current()
// and last_timing() read without waiting for it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "host/config/collection_set.h"
#include "host/pipeline/pipeline.h"
#include "host/pipeline/snapshot_buffer_pool.h"
#include "host/pipeline/stop_state.h"
#include "host/session/background_reducer.h"
#include "host/session/raw_request_queue.h"
#include "host/session/session_device.h"
#include "host/session/session_rules.h"
#include "host/session/step_capture.h"
#include "host/session/step_clock.h"
#include "host/session/step_records.h"
#include "host/session/tensor_registry.h"
#include "tstat/engine.h"
#include "tstat/session.h"

namespace tstat {

// Hidden: only the Session methods are part of libtstat.so's interface.
struct __attribute__((visibility("hidden"))) Session::Impl {
  using Clock = host::StepClock::Clock;

  // `device_factory` null: the CUDA device capture.
  Impl(const SessionConfig& config, std::unique_ptr<host::CollectionSet> collections,
       host::DeviceCaptureFactory device_factory);

  // Creates the pipeline (the rules first: a bad rules config fails before
  // the run is opened) and the parts that feed it.
  Status Start(std::unique_ptr<io::StepSink> sink, std::shared_ptr<host::BatchObserver> observer);

  const SessionConfig config;
  const std::unique_ptr<host::CollectionSet> collections;
  host::TensorRegistry registry;
  std::vector<host::RegisteredTensor*> captured;  // registered (not ad-hoc) tensors
  std::unique_ptr<Backend> cpu;
  // One thread fewer, for steps of small tensors (SessionCpuThreads); null
  // when cpu_threads is set, a backend was injected, or there is one core.
  std::unique_ptr<Backend> cpu_small_steps;
  // CaptureEarly's background reductions (pipeline.early_capture_thread);
  // null with one core or when off.
  std::unique_ptr<host::BackgroundReducer> background;
  host::StopState stop;
  host::StepClock clock;
  host::RawRequestQueue raw_requests;
  host::SessionDevice device;
  // Before the pipeline, which holds the rules thread as its observer.
  host::SessionRules rules;
  std::unique_ptr<host::Pipeline> pipeline;
  // The memory of host raw snapshot copies, reused (half the raw cap kept).
  std::shared_ptr<host::SnapshotBufferPool> snapshot_buffers;
  std::unique_ptr<host::RawSnapshots> raw;
  std::unique_ptr<host::StepCapture> capture;

  std::mutex mu;
  bool closed = false;
  Status close_status;

  // Ad-hoc records of the open (or next) step, and their reserved raw bytes.
  StepBatch pending;
  std::uint64_t pending_raw_bytes = 0;

  // Ends the open step (opening one first if none is): captures the
  // registered tensors unless !capture_registered (Close), queues the batch.
  Status EndStepLocked(CUstream_st* stream, bool capture_registered);
  // adhoc_capture.cc
  Result<std::uint32_t> RegisterLocked(const TensorSpec& spec);
  Status SaveScalarLocked(const std::string& name, double value);
  Status SaveTensorLocked(const std::string& name, const TensorView& view,
                          const SaveTensorOptions& options);
  // A new ad-hoc entry (SaveScalar, SaveTensor) in `cols`, with the rules'
  // needs added.
  Result<host::RegisteredTensor*> AddAdhoc(const std::string& name, TensorKind kind,
                                           const TensorView& view, std::vector<int> cols);
};

// Adds the time since its construction to the step's capture time on
// destruction.
class CaptureTimer {
 public:
  explicit CaptureTimer(host::StepClock* clock)
      : clock_(clock), start_(host::StepClock::Clock::now()) {}
  ~CaptureTimer() { clock_->AddCaptureTime(host::StepClock::Clock::now() - start_); }
  CaptureTimer(const CaptureTimer&) = delete;
  CaptureTimer& operator=(const CaptureTimer&) = delete;

 private:
  host::StepClock* clock_;
  host::StepClock::Clock::time_point start_;
};

}  // namespace tstat
