// RuleEngine: runs a set of rules over steps as they arrive from any number of
// workers, evaluating each step once it is complete — every worker reported
// it, a later step exists, or the run ended — in global step order.
//
// Each step is indexed once (StepIndexer) and handed to every RuleBase rule
// in that form; other Rule implementations get the StepView. The findings of
// each evaluated step then go to an EpisodeTracker (rules/engine/episodes.h): the
// engine reports both the findings and the episode events they cause.
// The same engine is fed by the in-process rules thread (from the capture
// pipeline) and by the out-of-process runners (from a Trial).
// Thread safety: one thread drives an engine.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rules/engine/episodes.h"
#include "rules/engine/rule_base.h"
#include "tstat/rule.h"

namespace tstat::rules {

struct EngineOptions {
  int world_size = 1;  // workers expected at each step
};

class RuleEngine {
 public:
  RuleEngine(std::vector<std::unique_ptr<Rule>> rules, EngineOptions options = {});

  // One worker's step; steps of one worker arrive in increasing global step.
  // `catalog` must outlive the engine (or the next Finish()). Findings of all
  // steps that became complete are appended to `out`.
  void Feed(int worker, const StepBatch& batch, const TensorCatalog* catalog,
            std::vector<Finding>* out);
  // Ticks the rules that watch the clock (rules/engine/tick.h) at wall time `now`.
  void Tick(double now, std::vector<Finding>* out);
  // No more data will come: evaluates every pending step, then Finish()es
  // rules and closes every open episode.
  void Finish(std::vector<Finding>* out);

  // The episode events since the last call, in order.
  std::vector<EpisodeEvent> TakeEvents() { return std::move(events_); }
  // Every episode so far, in opening order.
  const std::vector<Episode>& episodes() const { return tracker_.episodes(); }

  // One-time warnings of the rules (e.g. a regex that matched nothing).
  std::vector<std::string> Diagnostics() const;
  // The rules' notes (Rule::Notes): what they recognised and did not report.
  std::vector<std::string> Notes() const;
  const std::vector<std::unique_ptr<Rule>>& rules() const { return rules_; }
  std::uint64_t steps_evaluated() const { return steps_evaluated_; }
  std::uint64_t records_evaluated() const { return records_evaluated_; }

 private:
  struct Pending {
    int worker;
    StepBatch batch;
    const TensorCatalog* catalog;
  };
  void Evaluate(int worker, const StepBatch& batch, const TensorCatalog* catalog,
                std::vector<Finding>* out);
  void EvaluateCompleteSteps(std::vector<Finding>* out, bool all);

  std::vector<std::unique_ptr<Rule>> rules_;
  // rules_[k] as a RuleBase (fed the step indexed once for all of them), or
  // null for other Rule implementations (fed the plain StepView).
  std::vector<RuleBase*> bases_;
  StepIndexer indexer_;
  EngineOptions options_;
  std::map<std::int64_t, std::vector<Pending>> pending_;  // by global step
  EpisodeTracker tracker_;
  // out[before..] in step_findings_ (scratch: the tracker takes a vector).
  const std::vector<Finding>& FindingsSince(const std::vector<Finding>& out, std::size_t before);
  std::vector<Finding> step_findings_;
  std::vector<EpisodeEvent> events_;
  std::int64_t max_step_seen_ = -1;
  std::uint64_t steps_evaluated_ = 0;
  std::uint64_t records_evaluated_ = 0;
  bool finished_ = false;
};

}  // namespace tstat::rules
