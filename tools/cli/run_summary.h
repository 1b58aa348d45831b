// RunSummary: what `tstat inspect` reports about a run, gathered through the
// public Trial API (tstat/trial.h) and RUN/findings.jsonl, independent of how
// it is printed (inspect_command.cc prints it as text or JSON).
// Thread safety: plain data; SummarizeRun uses the Trial from one thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rules/runtime/rules_summary.h"
#include "tstat/rule.h"
#include "tstat/stats_record.h"
#include "tstat/trial.h"

namespace tstat::cli {

// The saved steps of one mode.
struct ModeSteps {
  Mode mode = Mode::kGlobal;
  std::uint64_t count = 0;
  StepKey first, last;
};

// One row of the latest stats table: a tensor at its latest saved step (or a
// scalar with its latest value).
struct LatestRow {
  std::string name;
  bool scalar = false;
  bool saved = false;  // false: registered, but no stats saved yet
  StepKey step;
  TensorStats stats;   // tensors
  double value = 0.0;  // scalars
};

struct RunSummary {
  std::string run_dir;
  std::vector<WorkerSummary> workers;  // the selected worker, or all
  bool loaded_all_steps = false;       // every worker closed cleanly, all loaded
  std::string load_problem;            // e.g. damaged segments skipped ("" if none)

  std::vector<ModeSteps> modes;    // modes with steps, TRAIN EVAL PREDICT GLOBAL order
  std::uint64_t global_steps = 0;  // distinct global steps saved
  std::uint64_t tensors = 0, scalars = 0;
  std::map<std::string, std::uint64_t> by_collection;  // tensors and scalars per collection

  // Over the workers in `workers`: sums, except the high-water marks (max).
  std::int64_t segments = 0;
  std::uint64_t bytes = 0;
  PipelineCounters counters;

  // RUN/findings.jsonl: absent (nullopt), or its episodes (in opening
  // order, each in its last recorded state) and their count per rule.
  std::optional<std::uint64_t> findings;
  std::map<std::string, std::uint64_t> findings_by_type;
  std::vector<Episode> episodes;
  std::string findings_problem;  // the log exists but could not be read fully

  // RUN/rules-<rank>.json: what the in-process rules of each worker ran,
  // captured, cost and could not judge (none: no in-process rules).
  std::vector<rules::RulesSummary> rules;
  std::vector<std::string> rules_problems;  // summaries that could not be read

  std::vector<LatestRow> latest;  // tensors (by name), then scalars (by name)
};

// Gathers the summary of `trial` (opened on `run_dir`); `worker` < 0: all
// workers (stats tables from the lowest-ranked worker that has the data).
// kNotFound when `worker` is not in the run.
Result<RunSummary> SummarizeRun(Trial& trial, const std::string& run_dir, int worker);

// "capture: 1.7% of step time (1000 steps, mean step 2.10 ms, mean capture
// 35.2 us)", or why it cannot be said.
std::string CaptureLine(const CaptureTotals& totals);

}  // namespace tstat::cli
