// Session: the capture API. Training code registers tensors, marks steps, and
// tstat computes their statistics and stores them in the run; end_step()
// never waits for disk.
//
//   tstat::SessionConfig config;                  // or LoadConfigFile(path)
//   config.out_dir = "/runs/exp1";
//   auto session = tstat::Session::Create(config).value();
//   session->RegisterTensor({"fc1.weight", TensorView::Host(w, DType::kFloat32, {64, 32})});
//   for (...) {
//     session->BeginStep();                        // optional: times the step
//     ... forward, backward, optimizer ...
//     session->SaveScalar("loss", loss);
//     session->EndStep();                          // captures what is due
//     if (session->ShouldStop()) break;
//   }
//   session->Close();                              // drains; the destructor does too
//
// Steps and modes are smdebug's: the global step counts every step, each mode
// (TRAIN, EVAL, PREDICT, GLOBAL) counts its own steps, both from 0, and
// schedules test the mode step. Registered tensors are captured when a step
// ends, at the steps their collections' schedules select (config.h).
// SaveScalar/SaveTensor save at once, whatever the schedules: inside a step
// they belong to it; between EndStep and the next BeginStep, to the next step.
//
// Pipeline. EndStep, on the calling thread: resolves views, then reduces every
// due host tensor in ONE Backend::Reduce call on the CPU backend and copies due
// raw snapshots; due CUDA tensors are reduced by one launch batch enqueued on
// the caller's stream (EndStep(stream)) and collected by a collector thread;
// their raw snapshots are first copied device-to-device into a staging buffer.
// The step's records go into a bounded queue to a writer thread, which writes
// them to the run and flushes every flush_interval_seconds (and every
// flush_interval_steps), so a killed process loses at most that. When the queue
// is full the step waits (counted in stats_waits; or, with
// drop_stats_when_full, the stats are dropped and a DropRecord says so); raw
// snapshots over raw_memory_cap_bytes are dropped and recorded as DropRecords,
// never silently. Write errors (disk full, unwritable run) never stop training:
// they are counted (write_errors, records_lost) and reported by status().
// Costs on the training thread: the reduction of due host tensors, a memcpy
// per due host raw snapshot and per host tensor with stats.delta (its previous
// values are kept), and a few microseconds of bookkeeping; steps where nothing
// is due cost one schedule check per collection.
//
// CUDA graphs. EndStep is a host call: it cannot be captured into a graph, and
// EndStep on a stream that is capturing returns kFailedPrecondition (the
// capture is left intact). Supported: call EndStep(stream) after
// cudaGraphLaunch on the same stream; graph memory has fixed addresses, so
// registered pointers (or view callbacks) stay valid, and the reduction is
// ordered after the graph. Not supported: a save decision made on the device
// (a device-side flag that a captured graph could test) - the schedule is
// evaluated on the host at EndStep.
//
// In-process rules (config.rules, TSTAT_RULES_CONFIG): a rules thread owned
// by the session gets each step's batch straight from the pipeline (no file
// round trip) and runs the rule engine over this worker's steps (with
// world_size > 1 every worker judges its own steps). Its actions: record
// (RUN/findings.jsonl), print (stderr), stop_training (RequestStop),
// capture_raw_steps (CaptureRawFor). Guarantee: a finding at step s is
// visible to ShouldStop() before step s+2 begins - EndStep of step s+1 first
// waits, if needed, until the rules thread has acted on the batches of the
// earlier steps (counted in rules_waits / rules_wait_seconds). Rules thread
// errors never reach training: status() reports them. Close() ends the
// rules (their last findings) after draining the pipeline.
//
// Thread safety: every method may be called from any thread; calls that
// capture (RegisterTensor, SetMode, BeginStep, EndStep, SaveScalar, SaveTensor,
// Close) are serialized by the session. ShouldStop, RequestStop, counters and
// status do not wait for them (a rule engine may call RequestStop and
// CaptureRawFor from its own thread). View callbacks run inside EndStep and
// must not call the session.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tstat/config.h"
#include "tstat/export.h"
#include "tstat/rule.h"
#include "tstat/stats_record.h"
#include "tstat/status.h"
#include "tstat/tensor_view.h"

struct CUstream_st;  // cudaStream_t without including cuda_runtime.h

namespace tstat {

// Returns a tensor's current view at capture time (frameworks allocate
// gradients lazily and reallocate them). Set view->data to nullptr when the
// tensor does not exist at this step: it is skipped. data, numel and shape may
// change between steps; dtype, space and device must stay the registered ones
// (otherwise that tensor's capture fails and a DropRecord says why). A non-OK
// return is recorded the same way.
using ViewFunction = std::function<Status(TensorView* view)>;

struct TensorSpec {
  TensorSpec() = default;
  TensorSpec(std::string tensor_name, TensorView tensor_view,
             std::vector<std::string> collection_names = {})
      : name(std::move(tensor_name)),
        view(std::move(tensor_view)),
        collections(std::move(collection_names)) {}

  std::string name;      // unique; any valid UTF-8 without NUL, at most 1024 bytes
  TensorView view;       // dtype, shape/numel, space, device; and data unless view_fn
  ViewFunction view_fn;  // optional: the view is asked for at each capture
  std::vector<std::string> collections;  // explicit memberships, besides regex matches
  // The axis of its units (features, channels) where the rules ask for
  // per-unit stats (dead_relu, saturated_activation); -1: by its rank, the
  // last axis of a rank-3 tensor ([batch, sequence, features]) and axis 1
  // otherwise ([batch, units], [batch, channels, height, width]). Set 1 for
  // a rank-3 channels-first tensor (Conv1d's [batch, channels, length]); 0,
  // the batch's, is refused. An axis configured for a collection
  // (per_channel_axis) takes precedence.
  int unit_axis = -1;
};

struct SaveTensorOptions {
  std::vector<std::string> collections;  // explicit memberships, besides regex matches
  bool raw = false;                      // also store the tensor's bytes
  CUstream_st* stream = nullptr;         // CUDA tensors: reduced (synchronously) on it
};

// What the code gives besides (and over) a config file.
struct RunOverrides {
  std::optional<std::string> out_dir;
  std::optional<int> rank;
  std::optional<int> world_size;
  std::optional<bool> dry_run;
};

// Session::CaptureEarly's answer.
enum class EarlyCapture : std::uint8_t {
  kNotDue = 0,     // not due at this step: EndStep will not capture it either
  kCaptured = 1,   // reduced now; EndStep skips it at this step
  kAtEndStep = 2,  // EndStep captures it (keep its data until then)
  kQueued = 3      // being reduced in the background (keep its data until
                   // FinishEarly takes it back)
};

// Where Session::CaptureEarly reduces a tensor.
enum class EarlyCaptureMode : std::uint8_t {
  kNow = 0,           // on the calling thread, before CaptureEarly returns
  kInBackground = 1,  // on the session's capture thread, where it has one
  // On the capture thread, or else by EndStep (kAtEndStep): for a tensor
  // that stays as it is until the step ends (a parameter, from the step's
  // beginning), whose reduction need not take the calling thread's time.
  kInBackgroundOrAtEndStep = 2,
};

struct StepTiming {
  StepKey step;
  double step_seconds = 0.0;     // BeginStep (or the previous EndStep) to EndStep
  double capture_seconds = 0.0;  // time inside tstat calls during the step
};

class TSTAT_EXPORT Session {
 public:
  // Validates `config` (kInvalidArgument naming the field), creates the run
  // output (kIoError / kFailedPrecondition when it cannot) and starts the
  // writer thread.
  static Result<std::unique_ptr<Session>> Create(const SessionConfig& config);
  // Loads `config_path` ("" = $TSTAT_CONFIG; when that is unset too, the
  // default config), applies `overrides`, then Create().
  static Result<std::unique_ptr<Session>> CreateFromFile(const std::string& config_path,
                                                         const RunOverrides& overrides = {});
  static Result<std::unique_ptr<Session>> CreateFromJson(const std::string& json,
                                                         const RunOverrides& overrides = {});

  // Closes the session if Close() was not called (its status is then lost).
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Registers a tensor captured at every step its collections select; returns
  // its id. Errors (kInvalidArgument unless noted): a bad name, a duplicate
  // name, null data without view_fn, an invalid dtype or negative shape, an
  // unknown collection, a CUDA tensor without a usable device (kUnavailable,
  // kNotSupported), after Close (kFailedPrecondition).
  Result<std::uint32_t> RegisterTensor(const TensorSpec& spec);

  // Sets the mode of the next step (smdebug set_mode). Inside an open step it
  // takes effect at the next one.
  Status SetMode(Mode mode);
  Mode mode() const;

  // Opens the next step of the current mode. Optional: EndStep opens the step
  // itself when none is open; BeginStep only makes the step time exact.
  // kFailedPrecondition when a step is open.
  Status BeginStep();
  // Opens the step `key`: your own step numbers, from the first step on or
  // when resuming from a checkpoint. Global and mode step must be after the
  // last ones (kFailedPrecondition "steps going backwards"); a negative
  // global step means the next one (number the mode step only: TRAIN 0,
  // EVAL 0, TRAIN 1 become global steps 0, 1, 2); GLOBAL steps need
  // mode_step == global_step (a negative global step takes the mode step).
  Status BeginStep(const StepKey& key);

  // Ends the open step (opening one first if none is open): captures what is
  // due and queues it for the writer; CUDA tensors are reduced on `stream`.
  // Returns before anything is written. Errors: kFailedPrecondition inside a
  // CUDA graph capture or after Close; per-tensor problems are DropRecords.
  Status EndStep(CUstream_st* stream = nullptr);

  // For frameworks that free a tensor before the step ends (a layer's
  // output): captures the registered tensor `id` now, from its view, when
  // it is due at the open step, so its memory need not be kept until
  // EndStep. kCaptured: reduced now on the CPU backend, with what EndStep
  // would have computed (its collections' options, what the rules need,
  // its delta); EndStep skips it at this step. kNotDue: EndStep will not
  // capture it at this step. kAtEndStep: EndStep must - no step is open, or
  // it is a CUDA tensor (reduced in EndStep's one batch on the stream), a
  // raw snapshot of it is due or requested, or a confusion matrix reads it
  // or is computed from it. Errors: an unknown or ad-hoc id
  // (kInvalidArgument), after Close (kFailedPrecondition); a view that
  // cannot be read is left to EndStep, which records the drop.
  //
  // kInBackground: where kCaptured would be the answer, the tensor is
  // instead queued for the session's capture thread (kQueued), which reduces
  // it while the caller goes on; the caller keeps its data alive and
  // unchanged until FinishEarly (or EndStep, or Close) has taken it back.
  // Reduced now instead (kCaptured): without a capture thread (one processor, or
  // pipeline.early_capture_thread false), or when 256 tensors or 256 MiB are
  // already queued. kInBackgroundOrAtEndStep: in those cases kAtEndStep.
  Result<EarlyCapture> CaptureEarly(std::uint32_t id,
                                    EarlyCaptureMode mode = EarlyCaptureMode::kNow);
  // Takes back the background captures reduced so far (with `wait`: all of
  // them, waiting for the capture thread), oldest first: each one's record
  // joins the open step, unless `unchanged` (called on this thread with the
  // tensor's id) returns false - its data changed while it was read, so the
  // record is left out and EndStep captures the tensor instead if its view
  // gives data then (a view callback gives none for values that are gone;
  // the caller knows which tensor and says so). Returns
  // how many were taken back: the first that many queued, whose data the
  // caller may now release. EndStep and Close take back every one first
  // (none left out).
  std::size_t FinishEarly(bool wait, const std::function<bool(std::uint32_t id)>& unchanged = {});

  // Saves a scalar (loss, accuracy, learning rate) at the current step;
  // saving it again in the same step replaces the value. The name must not be
  // a tensor's.
  Status SaveScalar(const std::string& name, double value);
  // Reduces a tensor now (the data need only live during the call) and saves
  // its stats (and raw bytes if asked) at the current step. The name must not
  // be a registered tensor's; saving one name twice in a step is an error.
  Status SaveTensor(const std::string& name, const TensorView& view,
                    const SaveTensorOptions& options = {});

  // True once RequestStop was called (by the code, or by an in-process
  // rule's stop_training action) or the file <out_dir>/STOP exists. The file
  // is checked at EndStep when the last check is stop_check_interval_ms old
  // (default 1 ms: within one step for steps longer than that), and by the
  // writer thread every max(interval, 100 ms). One atomic load.
  bool ShouldStop() const;
  // Why ShouldStop is true ("" when it is not).
  std::string stop_reason() const;
  void RequestStop(const std::string& reason);

  // Saves raw snapshots of the registered tensor `name` at the next `steps`
  // steps that end (within the raw memory cap), e.g. when a rule fires. Does
  // not wait for capture calls; a name that is not registered is ignored.
  // Files RUN/capture/*.json (`tstat rules --follow`) are applied the same
  // way, polled with RUN/STOP.
  void CaptureRawFor(const std::string& name, int steps);

  // In-process rules (config.rules): every finding so far, in order, one per
  // step where a rule's condition held. Empty without in-process rules.
  std::vector<Finding> findings() const;
  // In-process rules: every episode so far (the findings of one rule about
  // one tensor at consecutive judged steps; tstat/rule.h), in opening order,
  // each in its latest state (also in RUN/findings.jsonl when the rule
  // records). Final after Close.
  std::vector<Episode> episodes() const;

  // The pipeline's counters so far (final after Close).
  PipelineCounters counters() const;
  // OK, or the first asynchronous error (a failed write or flush).
  Status status() const;
  // The step being captured (or the last one ended) and the last step's timing.
  StepKey current_step() const;
  StepTiming last_step_timing() const;
  // Totals over every step ended so far, saved or not (stored in the run with
  // the counters: counters().capture).
  CaptureTotals capture_totals() const;
  // The registered tensor (or scalar) called `name`, with its collections.
  Result<TensorInfo> tensor_info(const std::string& name) const;
  const SessionConfig& config() const;

  // Ends an open step, drains the pipeline, flushes and closes the run.
  // Returns status(). Later calls return the same status.
  Status Close();

  struct Impl;

 private:
  explicit Session(std::unique_ptr<Impl> impl);
  friend struct SessionFactory;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tstat
