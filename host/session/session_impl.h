// Session::Impl: the state behind tstat::Session and the capture steps.
//
// session.cc holds creation and the public wrappers (locking, timing),
// step_capture.cc the step bookkeeping and EndStep, adhoc_capture.cc
// RegisterTensor, SaveScalar and SaveTensor. Methods named *Locked run with
// `mu` held (the public wrappers take it). Thread safety: `mu` serializes the
// capture calls; `info_mu` guards the small snapshot that current_step /
// last_step_timing read without waiting for a capture call.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "host/config/collection_set.h"
#include "host/device/device_capture.h"
#include "host/device/device_delta.h"
#include "host/pipeline/pipeline.h"
#include "host/pipeline/rules_thread.h"
#include "host/pipeline/run_dir_requests.h"
#include "host/pipeline/snapshot_buffer_pool.h"
#include "host/pipeline/stop_state.h"
#include "host/session/tensor_registry.h"
#include "rules/runtime/rules_summary.h"
#include "tstat/engine.h"
#include "tstat/session.h"

namespace tstat {

namespace host {
// SessionCpuThreads' rule (tstat/config.h): a step whose `tensors` host
// tensors hold `elements` values in all averages under kSmallTensorElements.
bool IsSmallTensorStep(std::int64_t tensors, std::int64_t elements);
}  // namespace host

// Hidden: only the Session methods are part of libtstat.so's interface.
struct __attribute__((visibility("hidden"))) Session::Impl {
  using Clock = std::chrono::steady_clock;

  SessionConfig config;
  std::unique_ptr<host::CollectionSet> collections;
  host::TensorRegistry registry;
  std::vector<host::RegisteredTensor*> captured;  // registered (not ad-hoc) tensors
  std::unique_ptr<Backend> cpu;
  // One thread fewer, for steps of small tensors (SessionCpuThreads); null
  // when cpu_threads is set, a backend was injected, or there is one core.
  std::unique_ptr<Backend> cpu_small_steps;
  host::DeviceCaptureFactory device_factory;
  std::unique_ptr<host::DevicePool> device_pool;  // created with the first CUDA tensor
  // Previous values of CUDA tensors with stats.delta (created with the first
  // such save; device_delta.h). Declared after device_pool: freed first.
  std::unique_ptr<host::DeviceDeltaStore> device_delta;
  host::StopState stop;
  // In-process rules (session_rules.cc): the session's ActionSink, then the
  // rules thread (it uses the sink), both before the pipeline (which holds
  // the thread as its observer).
  std::unique_ptr<rules::ActionSink> action_sink;
  std::shared_ptr<host::RulesThread> rules;
  std::unique_ptr<host::Pipeline> pipeline;
  // The memory of host raw snapshot copies, reused (half the raw cap kept).
  std::shared_ptr<host::SnapshotBufferPool> snapshot_buffers;
  // Out-of-process requests (RUN/STOP, RUN/capture/), polled by EndStep.
  std::unique_ptr<host::RunDirRequests> run_requests;
  std::uint64_t batches_pushed = 0;  // batches queued so far (the rules thread's target)
  // What the session captured for the in-process rules (session_rules.cc),
  // under `mu`: the captures and label classes of the rules summary, and
  // per step the records captured only for the rules or extended by them
  // (counted when the requests are built, for every step they serve).
  rules::RulesSummary rules_summary;
  int first_rules_collection = 0;  // collections at or after this index are the rules'
  struct RulesCounts {
    std::uint64_t records = 0, rules_only = 0, extended = 0;
  };
  RulesCounts plan_counts;   // of the requests built last
  RulesCounts total_counts;  // over the steps so far
  std::uint64_t delta_copy_bytes = 0;

  std::mutex mu;
  bool closed = false;
  Status close_status;

  // Steps. `key` is the open step (or the last one ended).
  Mode next_mode = Mode::kGlobal;
  bool step_open = false;
  StepKey key;
  std::int64_t last_global = -1;
  std::int64_t last_mode_step[4] = {-1, -1, -1, -1};
  std::uint64_t epoch = 0;       // +1 per EndStep: which step ad-hoc saves belong to
  Clock::time_point step_start;  // BeginStep, else the previous EndStep
  double capture_seconds = 0.0;  // inside tstat calls during the step

  // Ad-hoc records of the open (or next) step.
  StepBatch pending;
  std::uint64_t pending_raw_bytes = 0;

  // Snapshot for readers that must not wait for `mu`.
  mutable std::mutex info_mu;
  StepKey info_key;
  StepTiming last_timing;

  // CaptureRawFor requests (any thread), applied at the next EndStep.
  std::mutex raw_requests_mu;
  std::vector<std::pair<std::string, int>> raw_requests;
  int raw_requested_tensors = 0;  // tensors with raw_steps_left > 0

  // Scratch reused across steps (no allocation per step once warm).
  std::vector<char> due_stats, due_raw;
  std::vector<int> due_cols;
  // Requests are assigned in place (their vectors keep their capacity): a
  // fresh request per tensor and step cost a malloc/free of its shape.
  std::vector<ReductionRequest> host_requests, device_requests;
  std::vector<std::uint32_t> host_ids, device_ids;
  // Per device request: the tensor's inferred label classes (or null), grown
  // by its result on the collector thread.
  std::vector<std::shared_ptr<std::atomic<int>>> device_label_classes;
  std::vector<std::uint8_t> host_only_stats;  // RequestsOnlyStats of host_requests[i]
  // What the host requests above were built for. Tensors are only ever
  // added, each with a fixed view or a callback, fixed collections and
  // options; so when every due tensor had a fixed host view and asked for
  // stats only, the requests hold again at any step with the same
  // collections due and nothing raw (EndStepLocked). Rebuilding them, one
  // tensor's registry entry, collections, options and view at a time, showed
  // in the profile of an EndStep of many tensors.
  struct HostPlan {
    bool valid = false;
    std::size_t registered = 0;   // captured.size()
    std::vector<char> due_stats;  // the collections due
  };
  HostPlan host_plan;
  TensorView resolved_view;  // the view of the tensor being captured
  std::vector<ReductionResult> host_results;
  std::vector<std::pair<host::RegisteredTensor*, TensorView>> delta_updates;
  // MergedOptions' results by due collections (a deque: references stay
  // valid as it grows), at most kMaxMergedOptions of them.
  static constexpr std::size_t kMaxMergedOptions = 64;
  std::deque<std::pair<std::vector<int>, host::CaptureOptions>> merged_options;
  host::CaptureOptions merged_overflow;  // past the cap: recomputed per call

  // session_rules.cc
  // Starts the rules thread when config.rules.enabled; `observer` (the
  // pipeline's) becomes it, or a tee of it and an injected one.
  Status StartRules(std::shared_ptr<host::BatchObserver>* observer);
  // Sets up run_requests when the session has a run directory.
  void StartRunDirRequests();
  // EndStep's first act: waits until the rules thread evaluated every batch
  // queued before this step (counted in rules_waits), then polls the run
  // directory's requests.
  void BeforeStepCapture();
  // Puts a new tensor (or scalar) in the rules collections of what the
  // rules need of it (RulesThread::NeedsOf), noting it in rules_summary.
  void AddRulesNeeds(host::RegisteredTensor* t);
  // Counts one due tensor's collections for the rules summary.
  void CountRulesRecord(const std::vector<int>& due);
  // At Close, after the rules finished: the summary, written to
  // RUN/rules-<rank>.json and printed to stderr.
  void ReportRules();
  // step_capture.cc
  Status OpenStepLocked(const StepKey* explicit_key);
  // EndStep, in the order its phases run: MarkDueCollections, the requests
  // (BuildRequests, or the previous step's), ReduceOnHost, EnqueueOnDevice,
  // QueueStep, CloseStep.
  Status EndStepLocked(CUstream_st* stream, bool capture_registered);
  // Completes a batch whose device work was enqueued (on the writer's side).
  using StepFinish = std::function<void(StepBatch*)>;
  // Device tensors whose raw snapshots are due at this step (reserved).
  struct DeviceRaws {
    std::vector<TensorView> views;
    std::vector<std::uint32_t> ids;
    std::uint64_t bytes = 0;
  };
  // EndStep's requests, built tensor by tensor (with any_due; none without):
  // host_requests, host_ids and host_only_stats, device_requests and
  // device_ids. Due host raw snapshots are copied (raw_reserved counts
  // them), due device ones listed. A tensor whose view fails becomes a drop
  // record, the first one *problem. Sets host_plan (`reusable`: the step
  // allows the requests to serve the next one).
  void BuildRequests(bool any_due, bool reusable, StepBatch* batch, std::uint64_t* raw_reserved,
                     DeviceRaws* device_raws, Status* problem);
  // Sets due_stats and due_raw from the collections' schedules at this step;
  // whether anything is due (raw requests included), and *any_raw_due.
  bool MarkDueCollections(bool capture_registered, bool* any_raw_due);
  // The one CPU reduction of the step: host_requests into batch records
  // from index *filled on (records reused in place), their approximate
  // bytes added to *stats_bytes; a failed reduction drops every tensor and
  // sets the first *problem.
  void ReduceOnHost(StepBatch* batch, std::size_t* filled, std::uint64_t* stats_bytes,
                    Status* problem);
  // Enqueues device_requests and the due device raw snapshots on `stream`;
  // the returned StepFinish collects them (empty when nothing was enqueued).
  // A failed enqueue drops them all (releasing their raw bytes).
  StepFinish EnqueueOnDevice(CUstream_st* stream, DeviceRaws* device_raws, StepBatch* batch,
                             std::uint64_t* raw_reserved, Status* problem);
  // Hands the step to the pipeline (a queue slot, or drops when the queue
  // is full and drop_stats_when_full says so), with its timings; whether a
  // batch was queued.
  bool QueueStep(StepBatch batch, StepFinish finish, std::uint64_t stats_bytes,
                 std::uint64_t raw_reserved, Clock::time_point t0, Status* problem);
  // The step's timing, counters, and the state of the next step.
  void CloseStep(Clock::time_point t0, bool queued);
  // Removes the raw views `dev` cannot read (freed or host memory, another
  // GPU's) from `raws`: each becomes a drop naming the cause, its bytes are
  // released and counted as dropped.
  void DropUnreadableRaws(host::DeviceCapture* dev, DeviceRaws* raws, StepBatch* batch);
  // capture_options.cc
  void ApplyRawRequests();
  // Whether tensor `t` gets a raw snapshot at this step because of CaptureRawFor.
  bool TakeRequestedRaw(host::RegisteredTensor* t);
  // The StatsOptions of `t` (view `v`) at this step: merged collection options,
  // the sample seed, delta against its previous save, the confusion
  // predictions. Problems (a missing predictions tensor) become drop records.
  void PrepareOptions(host::RegisteredTensor* t, const TensorView& v, const std::vector<int>& due,
                      StepBatch* batch, StatsOptions* options);
  // host::MergeOptions(*collections, due), computed once per set of due
  // collections (collections do not change once the session exists): the
  // merge, with its vector and string copies, showed in the profile of an
  // EndStep of many tensors. The reference is valid until the next call.
  const host::CaptureOptions& MergedOptions(const std::vector<int>& due);
  // After the host reduction: keeps the saved values of delta tensors.
  void UpdateDeltaCopies();
  // The label classes to count for `t` now (view `v`): inferred from a
  // predictions tensor's last dimension, grown to the largest label of a
  // host tensor; 0 when the tensor holds too many classes to be labels.
  int LabelClasses(host::RegisteredTensor* t, const TensorView& v);
  // What the rules' needs change in the request of `t` viewed as `v`: no
  // per-unit stats for rank < 2, inferred label classes.
  void ApplyRulesNeeds(const host::CaptureOptions& co, host::RegisteredTensor* t,
                       const TensorView& v, StatsOptions* o);
  // adhoc_capture.cc
  Result<std::uint32_t> RegisterLocked(const TensorSpec& spec);
  Status SaveScalarLocked(const std::string& name, double value);
  Status SaveTensorLocked(const std::string& name, const TensorView& view,
                          const SaveTensorOptions& options);
  Status EnsureDevicePool(int device);
  // Copies a host tensor's bytes into a RawSnapshot, or records a drop when
  // the raw memory cap is reached. Adds the reserved bytes to *reserved.
  void SnapshotHost(std::uint32_t id, const TensorView& view, StepBatch* batch,
                    std::uint64_t* reserved);
  // One record from one result (a drop record when the result failed),
  // appended to batch->stats; or, with `filled`, written over
  // batch->stats[*filled] when that is a record of an earlier step
  // (Pipeline::TakeSpareRecords), then ++*filled. Every member is assigned,
  // and the old record's buffers are reused (its exponent histogram's
  // counts). The caller erases the stale records past *filled.
  // With `only_stats` (the request asked for stats and the exponent
  // histogram only: RequestsOnlyStats), the members past the histogram are
  // neither read nor written: the result has none, nor has a fresh record
  // or a spare one (Pipeline::TakeSpareRecords). Returns the record, or
  // nullptr for a drop record.
  static TensorStatsRecord* AddResult(std::uint32_t id, const StatsOptions& options,
                                      ReductionResult&& r, StepBatch* batch,
                                      std::size_t* filled = nullptr, bool only_stats = false);
};

// Adds the time since `start` to the session's capture time on destruction.
class CaptureTimer {
 public:
  explicit CaptureTimer(Session::Impl* impl) : impl_(impl), start_(Session::Impl::Clock::now()) {}
  ~CaptureTimer() {
    impl_->capture_seconds +=
        std::chrono::duration<double>(Session::Impl::Clock::now() - start_).count();
  }
  CaptureTimer(const CaptureTimer&) = delete;
  CaptureTimer& operator=(const CaptureTimer&) = delete;

 private:
  Session::Impl* impl_;
  Session::Impl::Clock::time_point start_;
};

// "raw snapshot memory cap (256 MiB) reached"
std::string RawCapReason(std::int64_t cap_bytes);

}  // namespace tstat
