// StepCapture: EndStep's capture of the registered tensors, and the hand-off
// of the step's batch to the pipeline.
//
// A step runs in phases: mark the collections due at the step's mode step
// (and the raw snapshots CaptureRawFor asked for); build one request per due
// tensor, resolving its view, or keep the previous step's requests when
// nothing they depend on can have changed (see Plan); reduce all due host
// tensors with ONE Backend::Reduce call; enqueue all due CUDA tensors as ONE
// batch on the caller's stream (collected by the pipeline's collector
// thread); copy raw snapshots (host: now; device: device-to-device staging);
// queue the batch. Nothing here touches the disk.
//
// The requests, results and due masks are kept from step to step: once
// warm, a step allocates nothing of its own.
// Thread safety: one thread at a time (EndStep, under the session lock).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "host/config/collection_set.h"
#include "host/pipeline/pipeline.h"
#include "host/session/background_reducer.h"
#include "host/session/raw_request_queue.h"
#include "host/session/request_options.h"
#include "host/session/session_device.h"
#include "host/session/session_rules.h"
#include "host/session/step_clock.h"
#include "host/session/step_records.h"
#include "host/session/tensor_registry.h"
#include "tstat/engine.h"

struct CUstream_st;

namespace tstat::host {

// SessionCpuThreads' rule (tstat/config.h): a step whose `tensors` host
// tensors hold `elements` values in all averages under kSmallTensorElements.
bool IsSmallTensorStep(std::int64_t tensors, std::int64_t elements);

class StepCapture {
 public:
  // The session's parts a step reads and feeds; they outlive this object.
  struct Parts {
    const CollectionSet* collections = nullptr;
    TensorRegistry* registry = nullptr;
    const std::vector<RegisteredTensor*>* captured = nullptr;  // registered (not ad-hoc) tensors
    Backend* cpu = nullptr;
    // One thread fewer, for steps of small tensors (SessionCpuThreads);
    // null to use `cpu` for every step.
    Backend* cpu_small_steps = nullptr;
    Pipeline* pipeline = nullptr;
    RawSnapshots* raw = nullptr;
    RawRequestQueue* raw_requests = nullptr;
    SessionRules* rules = nullptr;
    SessionDevice* device = nullptr;
    const StepClock* clock = nullptr;  // the open step: its key and timing so far
    // Reduces CaptureEarly's tensors in the background; null: none (one
    // core, or early_capture_thread off), they are reduced at once.
    BackgroundReducer* background = nullptr;
  };
  explicit StepCapture(Parts parts);

  struct Outcome {
    bool queued = false;  // the step's batch was handed to the pipeline
    bool pushed = false;  // ... and accepted by it
  };
  // Captures the open step: `batch` holds its ad-hoc records, `raw_reserved`
  // their reserved raw bytes. Without `capture_registered` (Close), only
  // the ad-hoc records are queued. `t0`: when EndStep began (its time is
  // capture time). A tensor's problem becomes a drop record; the first one
  // is *problem, after the rest of the step was queued.
  Outcome Run(StepBatch batch, std::uint64_t raw_reserved, bool capture_registered,
              CUstream_st* stream, StepClock::Clock::time_point t0, Status* problem);
  // Session::CaptureEarly of `t` at the open step: its record goes into
  // `batch` (the step's pending records), at once or, in the background
  // modes and with a background reducer that has room, once FinishEarly
  // takes it back (kQueued).
  EarlyCapture CaptureEarly(RegisteredTensor* t, StepBatch* batch, EarlyCaptureMode mode);
  // Session::FinishEarly: the background captures reduced so far (all of
  // them with `wait`), oldest first, into `batch`, unless `unchanged` says
  // the tensor changed while it was read; how many were taken back.
  std::size_t FinishEarly(bool wait, const std::function<bool(std::uint32_t)>& unchanged,
                          StepBatch* batch);

 private:
  using StepFinish = std::function<void(StepBatch*)>;
  // Device tensors whose raw snapshots are due at this step (reserved).
  struct DeviceRaws {
    std::vector<TensorView> views;
    std::vector<std::uint32_t> ids;
    std::uint64_t bytes = 0;
  };

  // Sets due_stats_ and due_raw_ from the collections' schedules at this
  // step; whether anything is due (requested raws included), *any_raw_due.
  bool MarkDueCollections(bool capture_registered, bool* any_raw_due);
  // The requests, built tensor by tensor (none without `any_due`):
  // host_requests_, host_ids_ and host_only_stats_, device_requests_ and
  // device_ids_. Due host raw snapshots are copied (*raw_reserved counts
  // them), due device ones listed. A tensor whose view fails becomes a drop
  // record. Sets plan_ (`reusable`: the step allows the requests to serve
  // the next one).
  void BuildRequests(bool any_due, bool reusable, StepBatch* batch, std::uint64_t* raw_reserved,
                     DeviceRaws* device_raws, Status* problem);
  // The CPU backend for a reduction of `tensors` holding `elements` values.
  Backend* HostBackend(std::int64_t tensors, std::int64_t elements) const;
  // The one CPU reduction of the step: host_requests_ into batch records
  // from index *filled on (records reused in place), their approximate
  // bytes added to *stats_bytes; a failed reduction drops every tensor.
  void ReduceOnHost(StepBatch* batch, std::size_t* filled, std::uint64_t* stats_bytes,
                    Status* problem);
  // Enqueues device_requests_ and the due device raw snapshots on `stream`;
  // the returned StepFinish collects them (empty when nothing was
  // enqueued). A failed enqueue drops them all (releasing their raw bytes).
  StepFinish EnqueueOnDevice(CUstream_st* stream, DeviceRaws* device_raws, StepBatch* batch,
                             std::uint64_t* raw_reserved, Status* problem);
  // Removes the raw views `dev` cannot read (freed or host memory, another
  // GPU's) from `raws`: each becomes a drop naming the cause, its bytes are
  // released and counted as dropped.
  void DropUnreadableRaws(DeviceCapture* dev, DeviceRaws* raws, StepBatch* batch);
  // Hands the step to the pipeline (a queue slot, or drops when the queue
  // is full and drop_stats_when_full says so), with its timings.
  Outcome QueueStep(StepBatch batch, StepFinish finish, std::uint64_t stats_bytes,
                    std::uint64_t raw_reserved, StepClock::Clock::time_point t0, Status* problem);

  Parts parts_;
  RequestOptions options_;

  std::vector<char> due_stats_, due_raw_;
  std::vector<int> due_cols_;
  // Requests are assigned in place (their vectors keep their capacity): a
  // fresh request per tensor and step costs a malloc/free of its shape.
  std::vector<ReductionRequest> host_requests_, device_requests_;
  std::vector<std::uint32_t> host_ids_, device_ids_;
  // Per device request: the tensor's inferred label classes (or null), grown
  // by its result on the collector thread.
  std::vector<std::shared_ptr<std::atomic<int>>> device_label_classes_;
  std::vector<std::uint8_t> host_only_stats_;  // RequestsOnlyStats of host_requests_[i]
  // What the host requests were built for. Tensors are only ever added,
  // each with a fixed view or a callback, fixed collections and options; so
  // when every due tensor had a fixed host view and asked for stats only,
  // the requests hold again at any step with the same collections due and
  // nothing raw. Rebuilding them costs a registry entry, collections,
  // options and view per tensor.
  struct Plan {
    bool valid = false;
    std::size_t registered = 0;   // captured->size()
    std::vector<char> due_stats;  // the collections due
  };
  Plan plan_;
  // Tensors captured early in the open step: the plan neither serves nor
  // is kept (it lacks them).
  bool early_this_step_ = false;
  TensorView resolved_view_;  // the view of the tensor being captured
  std::vector<ReductionResult> host_results_;
};

}  // namespace tstat::host
