// TrialRunner: feeds a RuleEngine from a run on disk (tstat::Trial), step by
// step, once (`tstat check`) or following a live run (`tstat rules --follow`).
//
// Steps are fed in global-step order. A step is fed once every worker of the
// run has either saved it or moved past it (a later step of that worker is
// loaded, or its writer closed); the engine then sees each worker's part in
// rank order. When the run is closed (every worker's CLOSED marker read and
// every segment loaded) and everything was fed, the runner is complete and
// Finish() ends the rules. Trial::steps/step_records/scalar_series supply the
// records and scalars; the tensor catalog of each worker comes from
// Trial::tensor_info. The Trial does not expose a step's wall time, so
// StepView::wall_time is the time the runner fed the step.
// Thread safety: one thread drives a runner.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "rules/engine/rule_engine.h"
#include "tstat/rule.h"
#include "tstat/trial.h"

namespace tstat::rules {

struct TrialRunnerOptions {
  bool follow = false;           // Run(): keep polling until the run is closed
  double poll_interval_s = 0.2;  // sleep between polls when nothing new came
  // Run() in follow mode stops (without Finish) when this returns true.
  std::function<bool()> interrupted;
  // Called once per distinct warning as it arises (see warnings()).
  std::function<void(const std::string&)> on_warning;
  // How the run is opened (TrialOptions: e.g. segments read in a child first).
  TrialOptions trial;
};

class TrialRunner {
 public:
  // Opens the run (kNotFound if it holds none) and prepares `rules`; the
  // records are read without exponent histograms when no rule reads them
  // (Rule::ReadsExponentHistograms).
  static Result<std::unique_ptr<TrialRunner>> Open(const std::string& run_dir,
                                                   std::vector<std::unique_ptr<Rule>> rules,
                                                   TrialRunnerOptions options = {});
  ~TrialRunner();

  // Refreshes the trial and feeds every step that became complete; with
  // `tick`, then ticks the rules (rules/engine/tick.h). Damaged files are warnings
  // (warnings()), not errors: what is readable is evaluated.
  Status Poll(std::vector<Finding>* findings, bool tick);
  // True once the run is closed and every step was fed.
  bool run_complete() const { return complete_; }
  // Feeds whatever is left (a run that is not closed: as it is) and ends the
  // rules. Later calls do nothing.
  void Finish(std::vector<Finding>* findings);

  // check (options.follow false): one Poll + Finish. follow: Poll until the
  // run is complete (sleeping poll_interval_s when a poll brought nothing),
  // then Finish; or until options.interrupted(). `on_finding` is called for
  // each finding as it comes, then `on_event` (if given) for each episode
  // event they caused; an error of either stops the run and is returned.
  Status Run(const std::function<Status(const Finding&)>& on_finding,
             const std::function<Status(const EpisodeEvent&)>& on_event = {});

  // Warnings so far, each once: damaged files, then (after Finish) the rules'
  // Diagnostics (e.g. a regex that matched nothing, a run without losses).
  const std::vector<std::string>& warnings() const { return warnings_; }
  // After Finish: the rules' notes (Rule::Notes), which are not warnings.
  std::vector<std::string> notes() const { return engine_->Notes(); }
  const RuleEngine& engine() const { return *engine_; }
  std::int64_t steps_fed() const { return steps_fed_; }
  // Whether the run's records are read with their exponent histograms (Open
  // reads them only when a rule reads them).
  bool reads_exponent_histograms() const { return options_.trial.exponent_histograms; }
  bool run_closed() const;

 private:
  class Catalog;
  TrialRunner(std::unique_ptr<Trial> trial, std::vector<std::unique_ptr<Rule>> rules,
              TrialRunnerOptions options);
  // Adds every tensor and scalar the trial knows to the workers' catalogs.
  // Called when a worker appears or a step holds an unknown id (not per poll:
  // listing the names of a large run is not free).
  void UpdateCatalogs();
  void CollectScalars(int worker);
  // Feeds complete steps; `all`: treat every known step as complete.
  void FeedSteps(bool all, std::vector<Finding>* findings);
  void Warn(const std::string& warning);

  std::unique_ptr<Trial> trial_;
  std::unique_ptr<RuleEngine> engine_;
  TrialRunnerOptions options_;
  std::map<int, std::unique_ptr<Catalog>> catalogs_;
  // Per worker: scalars not fed yet, by global step; and per scalar name the
  // last global step taken.
  std::map<int, std::map<std::int64_t, std::vector<ScalarRecord>>> scalars_;
  std::map<int, std::map<std::string, std::int64_t>> scalar_taken_;
  // FeedSteps' (rank, batch) of the step being fed, reused from step to step.
  std::vector<std::pair<int, StepBatch>> parts_;
  std::int64_t last_fed_ = -1;  // global step
  std::int64_t steps_fed_ = 0;
  bool complete_ = false;
  bool finished_ = false;
  std::set<std::string> warned_;
  std::vector<std::string> warnings_;
};

}  // namespace tstat::rules
