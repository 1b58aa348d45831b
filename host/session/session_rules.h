// The session's side of the rules: the in-process rules thread (started
// when config.rules.enabled) with the session's ActionSink, what the rules
// need captured (their collections, inferred label classes), EndStep's wait
// for the rules to judge earlier steps, the requests of out-of-process
// runners in the run directory (RUN/STOP, RUN/capture/), and the rules
// summary written at Close.
// Thread safety: the session lock serializes every method; the action sink
// is called from the rules thread and touches only the StopState and the
// RawRequestQueue (both thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "host/config/collection_set.h"
#include "host/pipeline/pipeline.h"
#include "host/pipeline/rules_thread.h"
#include "host/pipeline/run_dir_requests.h"
#include "host/pipeline/stop_state.h"
#include "host/session/raw_request_queue.h"
#include "host/session/tensor_registry.h"
#include "rules/runtime/actions.h"
#include "rules/runtime/rules_summary.h"
#include "tstat/session.h"

namespace tstat::host {

class SessionRules {
 public:
  // The parts the rules act on or read; they outlive this object.
  SessionRules(const SessionConfig* config, CollectionSet* collections, StopState* stop,
               RawRequestQueue* raw_requests);
  ~SessionRules();
  SessionRules(const SessionRules&) = delete;
  SessionRules& operator=(const SessionRules&) = delete;

  // Starts the rules thread when config.rules.enabled; `observer` (the
  // pipeline's) becomes it, or a tee of it and an injected one.
  Status Start(std::shared_ptr<BatchObserver>* observer);
  // Watches the run directory's requests when the session has one.
  void StartRunDirRequests();
  // EndStep's first act: waits until the rules thread evaluated every batch
  // queued before this step (counted in the pipeline's rules waits), then
  // polls the run directory's requests.
  void BeforeStepCapture(Pipeline* pipeline);
  void CountBatchQueued() { ++batches_queued_; }

  // Puts a new tensor (or scalar) in the rules collections of what the
  // rules need of it (RulesThread::NeedsOf), noting it in the summary.
  void AddNeeds(RegisteredTensor* t);
  // What the rules' needs change in the request of `t` viewed as `v`: no
  // per-unit stats for rank < 2, inferred label classes (label_classes.h;
  // the predictions tensor is looked up in `registry`).
  void ApplyNeeds(const CaptureOptions& co, RegisteredTensor* t, const TensorView& v,
                  const TensorRegistry& registry, StatsOptions* o);

  // The summary's record counts, per set of requests: StartRequests empties
  // the counts of the requests being built, CountRecord counts one due
  // tensor's collections, and CountStep adds the latest requests' counts
  // for every step they serve.
  bool counts_records() const { return first_rules_collection_ < collections_->size(); }
  void StartRequests() { requests_counts_ = Counts(); }
  void CountRecord(const std::vector<int>& due);
  void CountStep();

  // At Close, after the rules finished: the summary, written to
  // RUN/rules-<rank>.json and printed to stderr.
  void Report(const PipelineCounters& counters, const TensorRegistry& registry);

  // Null without in-process rules.
  RulesThread* thread() const { return thread_.get(); }

 private:
  int LabelClasses(RegisteredTensor* t, const TensorView& v, const TensorRegistry& registry);

  const SessionConfig* config_;
  CollectionSet* collections_;
  StopState* stop_;
  RawRequestQueue* raw_requests_;
  // The sink before the thread that calls it.
  std::unique_ptr<rules::ActionSink> action_sink_;
  std::shared_ptr<RulesThread> thread_;
  std::unique_ptr<RunDirRequests> run_requests_;
  std::uint64_t batches_queued_ = 0;  // the rules thread's target in BeforeStepCapture
  rules::RulesSummary summary_;
  int first_rules_collection_ = 0;  // collections at or after this index are the rules'
  struct Counts {
    std::uint64_t records = 0, rules_only = 0, extended = 0;
  };
  Counts requests_counts_;  // of the requests built last
  Counts total_counts_;     // over the steps so far
};

}  // namespace tstat::host
