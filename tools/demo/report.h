// How the demo shows its results: a table for people, one JSON object per
// line per scenario for programs (--json).
// Thread safety: pure functions.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "tools/demo/trainer.h"

namespace tstat::demo {

// The results table, then one line per scenario saying what was found first.
void PrintTable(const std::vector<ScenarioResult>& results, std::ostream& out);

// {"scenario": ..., "fault": ..., "expected_rules": [...], "found_rules": [...],
//  "first_finding_step": n|null, "first_finding_rule": ..., "findings": [{rule,
//  type, step, mode, mode_step, tensor, message, count}], "steps_run": n,
//  "steps_planned": n, "compute_saved_percent": x, "stopped": bool,
//  "passed": bool, "seconds": x, "run_dir": ...}
std::string ResultJson(const ScenarioResult& result);

// Percentage of planned steps that auto-stop saved.
double ComputeSavedPercent(const ScenarioResult& result);

}  // namespace tstat::demo
