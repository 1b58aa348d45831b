// RulesThread: the in-process rule engine of a session (SessionConfig::rules).
//
// The pipeline hands it every declaration and batch as the batch leaves the
// training thread (BatchObserver, pipeline.h: host batches in EndStep, CUDA
// batches once collected) - no file round trip. A thread of its own feeds
// them to a rules::RuleEngine over this worker's steps (world_size 1 for the
// engine: each worker judges its own steps), ticks the rules that watch the
// clock (rules/engine/tick.h) about once a second, and applies the actions of each
// episode event (rules/engine/episodes.h) through an ActionRunner: record
// (RUN/findings.jsonl, the format of the out-of-process runners), print (one
// line per episode on `print`), stop and raw capture (the ActionSink: the
// session). NeedsOf() tells the session what the rules need captured.
//
// The stop guarantee: EndStep of step s+1 calls WaitForBatches(n) with n the
// batches queued before it, so a finding at step s has been acted on before
// EndStep(s+1) returns. Errors (an unwritable findings log, a rule that
// throws) never reach the training thread: they are kept for status(), and a
// rule that threw stops the evaluation (later batches are counted, not
// evaluated, so EndStep never waits for a broken engine). A wait longer than
// wait_timeout_s gives up waiting for the rest of the run, also reported.
// Thread safety: the BatchObserver calls come from the pipeline (one at a
// time, in order); WaitForBatches from the training thread; findings(),
// status() from any thread. Finish() once, after the pipeline is closed.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "host/pipeline/pipeline.h"
#include "rules/engine/plugin_loader.h"
#include "rules/engine/rule_engine.h"
#include "rules/runtime/actions.h"
#include "rules/runtime/findings_log.h"
#include "tstat/config.h"
#include "tstat/rule.h"

namespace tstat::host {

class RulesThread final : public BatchObserver {
 public:
  struct Options {
    InProcessRulesConfig config;
    std::string findings_path;          // empty: findings are not recorded in a file
    int worker = 0;                     // the session's rank
    rules::ActionSink* sink = nullptr;  // stop / raw capture; must outlive the thread
    std::ostream* print = nullptr;      // the print action's output (null: none)
    double wait_timeout_s = 60.0;
  };

  // One rule's need of one tensor.
  struct RuleNeed {
    std::string rule;
    CaptureNeeds needs;
  };
  // A configured rule, for the summary.
  struct RuleInfo {
    std::string name, type;
    Severity severity = Severity::kError;
    bool stops = false;  // an episode of its severity stops training
  };

  // Loads plugins, the rules config (config_json, config_file, or the
  // default rule set) and creates the rules, opens the findings log, starts
  // the thread. Errors name the config field ("rules.plugins[0]: ...",
  // "rules.config: rules[1] \"x\": unknown rule type ...",
  // "rules.config_file: r.json: cannot read ...").
  static Result<std::shared_ptr<RulesThread>> Start(Options options);
  ~RulesThread() override;  // Finish()
  RulesThread(const RulesThread&) = delete;
  RulesThread& operator=(const RulesThread&) = delete;

  // BatchObserver.
  void OnDeclare(const std::vector<TensorInfo>& tensors) override;
  void OnBatch(const StepBatch& batch) override;  // copies; the pipeline calls the shared form
  void OnSharedBatch(const std::shared_ptr<const StepBatch>& batch) override;

  // Waits until `batches` batches were evaluated and acted on (or the thread
  // finished, broke, or gave up waiting). Returns true, with the seconds in
  // *waited_s, when it had to wait.
  bool WaitForBatches(std::uint64_t batches, double* waited_s);

  // Evaluates everything handed in, ends the rules (RuleEngine::Finish) and
  // acts on their last findings, closes the log, joins. Returns status().
  // Later calls return it again.
  Status Finish();

  // Every finding so far, in order.
  std::vector<Finding> findings() const;
  // Every episode so far, in opening order, each in its latest state.
  std::vector<Episode> episodes() const;
  // What each rule needs captured of `tensor` (any thread: rules read only
  // what they fixed at construction).
  std::vector<RuleNeed> NeedsOf(const TensorInfo& tensor) const;
  // The rules that run, and (after Finish) their one-time warnings.
  const std::vector<RuleInfo>& rule_infos() const { return rule_infos_; }
  std::vector<std::string> diagnostics() const;
  std::vector<std::string> notes() const;  // after Finish: Rule::Notes
  std::uint64_t steps_evaluated() const;
  // OK, or the first error of the rules thread.
  Status status() const;
  std::size_t rule_count() const { return rule_count_; }

 private:
  class Catalog;
  struct Event {
    std::vector<TensorInfo> declare;
    std::shared_ptr<const StepBatch> batch;
  };
  explicit RulesThread(Options options);
  void Loop();
  void Process(Event* event);
  // Keeps `found` and acts on the engine's episode events.
  void Deliver(std::vector<Finding>* found);
  void KeepError(const Status& s);

  Options options_;
  // Declared first: destroyed after every rule and factory of a plugin.
  std::vector<std::shared_ptr<rules::RulePlugin>> plugins_;
  std::unique_ptr<RuleRegistry> registry_;
  std::unique_ptr<rules::RuleEngine> engine_;
  std::unique_ptr<rules::FindingsLogWriter> log_;
  std::unique_ptr<rules::ActionRunner> runner_;
  std::unique_ptr<Catalog> catalog_;  // rules thread only
  std::size_t rule_count_ = 0;
  std::vector<RuleInfo> rule_infos_;
  std::vector<const Rule*> rule_list_;  // the engine's rules, for NeedsOf
  bool broken_ = false;                 // rules thread only: a rule threw

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // events, or finishing
  std::condition_variable done_cv_;  // a batch was evaluated, or the thread ended
  std::deque<Event> events_;
  bool finishing_ = false;
  bool ended_ = false;           // the thread left its loop
  bool gave_up_ = false;         // a wait timed out: no more waiting
  std::uint64_t handed_ = 0;     // batches handed in
  std::uint64_t evaluated_ = 0;  // batches evaluated and acted on
  std::vector<Finding> findings_;
  std::vector<Episode> episodes_;  // by id - 1
  std::vector<std::string> diagnostics_;
  std::vector<std::string> notes_;
  std::uint64_t steps_evaluated_ = 0;
  Status status_;
  bool finished_ = false;  // Finish() ran (training-side flag, under mu_)
  std::thread thread_;
};

}  // namespace tstat::host
