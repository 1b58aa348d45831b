// See run_summary.h.
#include "tools/cli/run_summary.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <unordered_map>

#include "rules/runtime/findings_log.h"
#include "tools/cli/text_format.h"

namespace tstat::cli {
namespace {

constexpr Mode kModes[] = {Mode::kTrain, Mode::kEval, Mode::kPredict, Mode::kGlobal};

void AddCounters(const PipelineCounters& c, PipelineCounters* sum) {
  sum->steps_captured += c.steps_captured;
  sum->records_written += c.records_written;
  sum->bytes_written += c.bytes_written;
  sum->raw_dropped += c.raw_dropped;
  sum->raw_dropped_bytes += c.raw_dropped_bytes;
  sum->records_lost += c.records_lost;
  sum->write_errors += c.write_errors;
  sum->stats_waits += c.stats_waits;
  sum->stats_wait_seconds += c.stats_wait_seconds;
  sum->queue_high_water = std::max(sum->queue_high_water, c.queue_high_water);
  sum->queue_high_water_bytes = std::max(sum->queue_high_water_bytes, c.queue_high_water_bytes);
  sum->segments_written += c.segments_written;
  sum->capture.steps += c.capture.steps;
  sum->capture.steps_saved += c.capture.steps_saved;
  sum->capture.step_seconds += c.capture.step_seconds;
  sum->capture.capture_seconds += c.capture.capture_seconds;
}

void SummarizeSteps(const Trial& trial, RunSummary* out) {
  const std::vector<StepKey> all = trial.steps(Mode::kGlobal);  // every mode
  out->global_steps = all.size();
  for (Mode mode : kModes) {
    ModeSteps m;
    m.mode = mode;
    for (const StepKey& k : all) {
      if (k.mode != mode) continue;
      if (m.count == 0) m.first = k;
      m.last = k;
      ++m.count;
    }
    if (m.count > 0) out->modes.push_back(m);
  }
}

void SummarizeTensors(const Trial& trial, int worker, RunSummary* out) {
  // Names of the selected worker (all workers: every name), with their
  // collections counted.
  const auto registered = [&](const std::vector<std::string>& names) {
    std::vector<std::string> kept;
    for (const std::string& name : names) {
      Result<TensorInfo> info = trial.tensor_info(name, worker);
      if (!info.ok()) continue;  // not registered by the selected worker
      for (const std::string& c : info->collections) ++out->by_collection[c];
      kept.push_back(name);
    }
    return kept;
  };
  const std::vector<std::string> tensors = registered(trial.tensor_names());
  const std::vector<std::string> scalars = registered(trial.scalar_names());
  out->tensors = tensors.size();
  out->scalars = scalars.size();
  // The latest saved stats of every tensor: each worker's steps walked from
  // the last, a step's records at a time (the run's records are read a
  // segment at a time), until every tensor was seen; the lowest-ranked
  // worker that saved a tensor answers for it.
  std::map<std::string, std::size_t> pending;  // name -> its row in out->latest
  for (const std::string& name : tensors) {
    pending[name] = out->latest.size();
    LatestRow row;
    row.name = name;
    out->latest.push_back(std::move(row));
  }
  std::vector<int> ranks;
  if (worker >= 0) {
    ranks.push_back(worker);
  } else {
    for (const WorkerSummary& w : trial.workers()) ranks.push_back(w.rank);
  }
  const std::vector<StepKey> all = trial.steps(Mode::kGlobal);
  for (int rank : ranks) {
    std::unordered_map<std::uint32_t, std::string> unseen;  // id -> name, of this worker
    for (const auto& [name, row] : pending) {
      Result<TensorInfo> info = trial.tensor_info(name, rank);
      if (info.ok()) unseen.emplace(info->id, name);
    }
    for (auto step = all.rbegin(); step != all.rend() && !unseen.empty(); ++step) {
      Result<std::vector<TensorStatsRecord>> records = trial.step_records(rank, step->global_step);
      if (!records.ok()) {
        // Not a step of this worker, or records that cannot be read (a
        // segment damaged since it was written): said, and older steps tried.
        const Status& s = records.status();
        if (s.code() != StatusCode::kUnavailable && s.code() != StatusCode::kStepUnavailable &&
            out->load_problem.find(s.message()) == std::string::npos) {
          out->load_problem += (out->load_problem.empty() ? "" : "; ") + s.ToString();
        }
        continue;
      }
      for (const TensorStatsRecord& r : records.value()) {
        auto found = unseen.find(r.tensor_id);
        if (found == unseen.end() || !r.has_stats) continue;
        LatestRow& row = out->latest[pending.at(found->second)];
        row.saved = true;
        row.step = *step;
        row.stats = r.stats;
        pending.erase(found->second);
        unseen.erase(found);
      }
    }
  }
  for (const std::string& name : scalars) {
    LatestRow row;
    row.name = name;
    row.scalar = true;
    Result<std::vector<SeriesPoint>> values = trial.scalar_series(name, Mode::kGlobal, worker);
    if (values.ok() && !values->empty()) {
      row.saved = true;
      row.step = values->back().step;
      row.value = values->back().value;
    }
    out->latest.push_back(std::move(row));
  }
}

// The findings log's episodes and the rules summaries (of `worker`, or all
// when < 0).
void SummarizeFindings(const std::string& run_dir, int worker, RunSummary* out) {
  out->rules = rules::ReadRulesSummaries(run_dir, &out->rules_problems);
  if (worker >= 0) {
    std::vector<rules::RulesSummary> mine;
    for (rules::RulesSummary& r : out->rules) {
      if (r.worker == worker) mine.push_back(std::move(r));
    }
    out->rules = std::move(mine);
  }
  const std::string path = run_dir + "/" + rules::kFindingsFileName;
  Result<rules::FindingsLogContents> log = rules::ReadFindingsLog(path);
  if (!log.ok()) {
    if (log.status().code() != StatusCode::kNotFound) {
      out->findings_problem = log.status().ToString();
    }
    return;
  }
  for (Episode& e : log->episodes) {
    if (worker >= 0 && e.worker != worker) continue;
    ++out->findings_by_type[e.rule];
    out->episodes.push_back(std::move(e));
  }
  out->findings = out->episodes.size();
  if (log->truncated_tail) out->findings_problem = "the last line is incomplete (being written)";
}

}  // namespace

Result<RunSummary> SummarizeRun(Trial& trial, const std::string& run_dir, int worker) {
  RunSummary out;
  out.run_dir = run_dir;
  // Open() already loaded the run; a second Refresh() reports damaged
  // segments again (they are skipped, the rest is readable).
  const Status refreshed = trial.Refresh();
  if (!refreshed.ok()) out.load_problem = refreshed.ToString();
  out.loaded_all_steps = trial.loaded_all_steps();
  for (const WorkerSummary& w : trial.workers()) {
    if (worker >= 0 && w.rank != worker) continue;
    out.segments += w.segments;
    out.bytes += w.bytes;
    AddCounters(w.counters, &out.counters);
    out.workers.push_back(w);
  }
  if (worker >= 0 && out.workers.empty()) {
    return Status::NotFound(run_dir + " has no worker " + std::to_string(worker));
  }
  SummarizeSteps(trial, &out);
  SummarizeTensors(trial, worker, &out);
  SummarizeFindings(run_dir, worker, &out);
  return out;
}

std::string CaptureLine(const CaptureTotals& t) {
  if (t.steps == 0) return "capture: not recorded (the run stores no step timing)";
  if (!(t.step_seconds > 0.0)) {
    return "capture: no step time recorded (" + std::to_string(t.steps) + " steps)";
  }
  const double percent = 100.0 * t.capture_seconds / t.step_seconds;
  char pct[32];
  std::snprintf(pct, sizeof(pct), percent >= 0.1 ? "%.1f" : "%.2g", percent);
  const double n = static_cast<double>(t.steps);
  return std::string("capture: ") + pct + "% of step time (" + std::to_string(t.steps) +
         " steps, mean step " + CompactSeconds(t.step_seconds / n) + ", mean capture " +
         CompactSeconds(t.capture_seconds / n) + ")";
}

}  // namespace tstat::cli
