// Runs one demo scenario: trains its model with LibTorch while a tstat
// Session with the default configuration (rules on) captures it into
// `run_dir` and the default rules judge its steps, and reports what the
// rules found and how early training stopped.
// Thread safety: one scenario at a time per thread (libtorch's global RNG is
// seeded per run).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/demo/digits_dataset.h"
#include "tools/demo/scenario.h"
#include "tstat/rule.h"
#include "tstat/status.h"

namespace tstat::demo {

// The first episode of one rule in a run, and how many it had.
struct RuleHit {
  std::string rule;  // instance name (the type, unless configured)
  std::string type;
  Severity severity = Severity::kError;
  StepKey step;  // where the first episode was reported
  std::string tensor;
  std::string message;
  int episodes = 0;
};

struct ScenarioResult {
  std::string scenario;
  std::string fault;
  std::vector<std::string> expected_rules;
  std::vector<RuleHit> found;  // by first step, then rule name
  std::int64_t steps_run = 0;      // TRAIN steps that ran
  std::int64_t steps_planned = 0;  // TRAIN steps planned
  std::string stop_reason;         // "" when the run was not stopped
  double first_loss = 0.0;         // training loss of the first and last step
  double last_loss = 0.0;
  double seconds = 0.0;            // wall time of the run
  std::string run_dir;

  // The global step of the first finding, or -1.
  std::int64_t first_finding_step() const;
  // Every expected rule found, and (healthy) nothing found when none expected.
  bool passed() const;
};

// Trains `scenario` on `data` per `plan`, capturing into `run_dir` (created;
// must not hold a run) with the default rules (critical findings end the
// run). Errors: the session or the rules cannot be set up, capture or
// storage failures.
Result<ScenarioResult> RunScenario(const Scenario& scenario, const Dataset& data,
                                   const RunPlan& plan, const std::string& run_dir);

}  // namespace tstat::demo
