// `tstat inspect RUN [--json] [--worker N]`: a summary of a run (workers,
// steps per mode, tensors per collection, storage, pipeline counters,
// finding episodes, what the in-process rules captured and could not judge),
// its capture overhead, and the latest stats of every tensor.
// Reads the run as it is on disk (finished or still being written) through
// the Trial API. Exit codes: 0 printed, 1 the run cannot be read, 2 usage.
//
// Names are printed safely: control characters escaped (text), verbatim in
// --json; long names are cut with an ellipsis in the table only.
#include <algorithm>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "rules/runtime/actions.h"
#include "tools/cli/cli_trial_options.h"
#include "tools/cli/command.h"
#include "tools/cli/episode_json.h"
#include "tools/cli/run_summary.h"
#include "tools/cli/text_format.h"
#include "tstat/trial.h"

namespace tstat::cli {
namespace {

constexpr std::size_t kNameColumn = 40;  // widest name shown in the table

struct InspectFlags {
  std::string run;
  bool json = false;
  int worker = -1;
};

std::string StepRange(const ModeSteps& m) {
  return std::string(ModeName(m.mode)) + " " + std::to_string(m.count) + " (steps " +
         std::to_string(m.first.mode_step) + ".." + std::to_string(m.last.mode_step) + ")";
}

std::string ModeStep(const StepKey& k) {
  return std::string(ModeName(k.mode)) + " " + std::to_string(k.mode_step);
}

// ---------------------------------------------------------------- text

void PrintTable(const std::vector<std::vector<std::string>>& rows,
                const std::vector<bool>& right_aligned, std::ostream& out) {
  std::vector<std::size_t> widths(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) {
      widths[c] = std::max(widths[c], DisplayWidth(row[c]));
    }
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      const bool last = c + 1 == row.size();
      if (c > 0) line += "  ";
      line += right_aligned[c] ? PadLeft(row[c], widths[c])
                               : (last ? row[c] : PadRight(row[c], widths[c]));
    }
    out << line << "\n";
  }
}

void PrintLatest(const RunSummary& s, std::ostream& out) {
  std::vector<std::vector<std::string>> tensors = {
      {"name", "step", "mode", "count", "min", "max", "mean", "std", "l2", "nan", "inf"}};
  std::vector<std::vector<std::string>> scalars = {{"name", "step", "mode", "value"}};
  for (const LatestRow& r : s.latest) {
    const std::string name = DisplayName(r.name, kNameColumn);
    if (r.scalar) {
      if (!r.saved) {
        scalars.push_back({name, "-", "-", "-"});
      } else {
        scalars.push_back(
            {name, std::to_string(r.step.global_step), ModeStep(r.step), ShortNumber(r.value, 6)});
      }
      continue;
    }
    if (!r.saved) {
      tensors.push_back({name, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"});
      continue;
    }
    const TensorStats& t = r.stats;
    tensors.push_back({name, std::to_string(r.step.global_step), ModeStep(r.step),
                       CompactCount(t.count), ShortNumber(t.min), ShortNumber(t.max),
                       ShortNumber(t.mean), ShortNumber(StatValue(t, StatField::kStd)),
                       ShortNumber(StatValue(t, StatField::kL2)), CompactCount(t.nan_count),
                       CompactCount(t.pos_inf_count + t.neg_inf_count)});
  }
  if (tensors.size() > 1) {
    out << "\nlatest stats (each tensor at its latest saved step):\n";
    PrintTable(tensors, {false, true, false, true, true, true, true, true, true, true, true}, out);
  }
  if (scalars.size() > 1) {
    out << "\nscalars (latest value):\n";
    PrintTable(scalars, {false, true, false, true}, out);
  }
}

constexpr std::size_t kEpisodeLines = 20;

// What each worker's in-process rules ran, captured, cost and could not
// judge (its rules summary, without the episodes listed above).
void PrintRules(const RunSummary& s, std::ostream& out) {
  if (s.rules.empty() && s.rules_problems.empty()) {
    out << "rules:     no in-process rules summary (rules off, or judged by `tstat check`)\n";
  }
  for (const rules::RulesSummary& r : s.rules) {
    const std::vector<std::string> lines = rules::RulesSummaryLines(r, {});
    for (std::size_t i = 0; i < lines.size(); ++i) {
      out << (i == 0 ? "rules:     " : "           ");
      if (i == 0 && s.rules.size() > 1) out << "worker " << r.worker << ": ";
      out << DisplayName(lines[i]) << "\n";
    }
  }
  for (const std::string& p : s.rules_problems) {
    out << "rules:     summary not read: " << DisplayName(p) << "\n";
  }
}

void PrintText(const RunSummary& s, std::ostream& out) {
  out << "run:       " << DisplayName(s.run_dir);
  if (!s.workers.empty()) out << "  (format version " << s.workers.front().format_version << ")";
  out << "\n";
  std::size_t closed = 0;
  for (const WorkerSummary& w : s.workers) closed += w.closed ? 1 : 0;
  out << "workers:   " << s.workers.size() << " (world size "
      << (s.workers.empty() ? 0 : s.workers.front().world_size) << "); " << closed
      << " closed cleanly"
      << (s.loaded_all_steps ? ", run complete"
                             : ", run not complete (being written, or a writer "
                               "died)")
      << "\n";
  for (const WorkerSummary& w : s.workers) {
    out << "  rank " << w.rank << "/" << w.world_size << "  host " << DisplayName(w.host) << "  "
        << (w.closed ? "closed" : "open") << "  " << w.segments << " segment(s), "
        << CompactBytes(w.bytes) << "\n";
  }
  out << "steps:     " << s.global_steps << " saved";
  for (std::size_t i = 0; i < s.modes.size(); ++i) {
    out << (i == 0 ? ": " : ", ") << StepRange(s.modes[i]);
  }
  out << "\n";
  out << "tensors:   " << s.tensors << " (+" << s.scalars << " scalars)";
  std::size_t i = 0;
  for (const auto& c : s.by_collection) {
    out << (i++ == 0 ? "; by collection: " : ", ") << DisplayName(c.first) << " " << c.second;
  }
  out << "\n";
  out << "storage:   " << s.segments << " segment(s), " << CompactBytes(s.bytes) << " on disk\n";
  const PipelineCounters& c = s.counters;
  out << "pipeline:  steps captured " << c.steps_captured << ", records written "
      << c.records_written << ", bytes " << CompactBytes(c.bytes_written) << "\n"
      << "           drops " << c.raw_dropped << " raw (" << CompactBytes(c.raw_dropped_bytes)
      << "), records lost " << c.records_lost << ", write errors " << c.write_errors << "\n"
      << "           waits " << c.stats_waits << " (" << CompactSeconds(c.stats_wait_seconds)
      << "), queue high-water " << c.queue_high_water << " steps ("
      << CompactBytes(c.queue_high_water_bytes) << ")\n";
  out << "findings:  ";
  if (!s.findings) {
    out << "none recorded (no findings.jsonl)";
  } else {
    out << *s.findings;
    std::size_t k = 0;
    for (const auto& f : s.findings_by_type) {
      out << (k++ == 0 ? " (" : ", ") << DisplayName(f.first) << " " << f.second;
    }
    if (k > 0) out << ")";
  }
  if (!s.findings_problem.empty()) out << " [" << DisplayName(s.findings_problem) << "]";
  out << "\n";
  for (std::size_t e = 0; e < s.episodes.size() && e < kEpisodeLines; ++e) {
    out << "  " << DisplayName(rules::FormatEpisode(s.episodes[e])) << "\n";
  }
  if (s.episodes.size() > kEpisodeLines) {
    out << "  (+" << s.episodes.size() - kEpisodeLines << " more; --json lists them all)\n";
  }
  PrintRules(s, out);
  out << CaptureLine(c.capture) << "\n";
  PrintLatest(s, out);
}

// ---------------------------------------------------------------- JSON

std::string StepJson(const StepKey& k) {
  return "\"step\": " + std::to_string(k.global_step) +
         ", \"mode\": " + JsonString(ModeName(k.mode)) +
         ", \"mode_step\": " + std::to_string(k.mode_step);
}

std::string CountersJson(const PipelineCounters& c) {
  std::ostringstream o;
  o << "{\"steps_captured\": " << c.steps_captured << ", \"records_written\": " << c.records_written
    << ", \"bytes_written\": " << c.bytes_written << ", \"raw_dropped\": " << c.raw_dropped
    << ", \"raw_dropped_bytes\": " << c.raw_dropped_bytes
    << ", \"records_lost\": " << c.records_lost << ", \"write_errors\": " << c.write_errors
    << ", \"stats_waits\": " << c.stats_waits
    << ", \"stats_wait_seconds\": " << JsonNumber(c.stats_wait_seconds)
    << ", \"queue_high_water\": " << c.queue_high_water
    << ", \"queue_high_water_bytes\": " << c.queue_high_water_bytes
    << ", \"segments_written\": " << c.segments_written << "}";
  return o.str();
}

std::string CaptureJson(const CaptureTotals& t) {
  const bool known = t.steps > 0 && t.step_seconds > 0.0;
  return "{\"steps\": " + std::to_string(t.steps) +
         ", \"steps_saved\": " + std::to_string(t.steps_saved) +
         ", \"step_seconds\": " + JsonNumber(t.step_seconds) +
         ", \"capture_seconds\": " + JsonNumber(t.capture_seconds) +
         ", \"fraction\": " + (known ? JsonNumber(t.capture_seconds / t.step_seconds) : "null") +
         "}";
}

std::string StatsJson(const TensorStats& t) {
  std::string out = "{";
  for (int f = 0; f <= static_cast<int>(StatField::kAmax); ++f) {
    const auto field = static_cast<StatField>(f);
    out += std::string(f ? ", " : "") + JsonString(StatFieldName(field)) + ": " +
           JsonNumber(StatValue(t, field));
  }
  return out + "}";
}

void PrintJson(const RunSummary& s, std::ostream& out) {
  out << "{\"run\": " << JsonString(s.run_dir)
      << ",\n \"format_version\": " << (s.workers.empty() ? 0 : s.workers.front().format_version)
      << ",\n \"complete\": " << (s.loaded_all_steps ? "true" : "false")
      << ",\n \"load_problem\": " << (s.load_problem.empty() ? "null" : JsonString(s.load_problem))
      << ",\n \"workers\": [";
  for (std::size_t i = 0; i < s.workers.size(); ++i) {
    const WorkerSummary& w = s.workers[i];
    out << (i ? ",\n   " : "\n   ") << "{\"rank\": " << w.rank
        << ", \"world_size\": " << w.world_size << ", \"host\": " << JsonString(w.host)
        << ", \"format_version\": " << w.format_version
        << ", \"closed\": " << (w.closed ? "true" : "false") << ", \"segments\": " << w.segments
        << ", \"bytes\": " << w.bytes << ", \"counters\": " << CountersJson(w.counters)
        << ", \"capture\": " << CaptureJson(w.counters.capture) << "}";
  }
  out << "],\n \"steps\": {\"saved\": " << s.global_steps;
  for (const ModeSteps& m : s.modes) {
    out << ", " << JsonString(ModeName(m.mode)) << ": {\"count\": " << m.count
        << ", \"first_step\": " << m.first.mode_step << ", \"last_step\": " << m.last.mode_step
        << ", \"first_global_step\": " << m.first.global_step
        << ", \"last_global_step\": " << m.last.global_step << "}";
  }
  out << "},\n \"tensors\": " << s.tensors << ", \"scalars\": " << s.scalars
      << ",\n \"by_collection\": {";
  std::size_t i = 0;
  for (const auto& c : s.by_collection) {
    out << (i++ ? ", " : "") << JsonString(c.first) << ": " << c.second;
  }
  out << "},\n \"segments\": " << s.segments << ", \"bytes\": " << s.bytes
      << ",\n \"counters\": " << CountersJson(s.counters)
      << ",\n \"capture\": " << CaptureJson(s.counters.capture)
      << ",\n \"capture_line\": " << JsonString(CaptureLine(s.counters.capture))
      << ",\n \"findings\": " << (s.findings ? std::to_string(*s.findings) : "null")
      << ", \"findings_by_rule\": {";
  i = 0;
  for (const auto& f : s.findings_by_type) {
    out << (i++ ? ", " : "") << JsonString(f.first) << ": " << f.second;
  }
  out << "},\n \"episodes\": [";
  i = 0;
  for (const Episode& e : s.episodes) out << (i++ ? ",\n   " : "\n   ") << EpisodeJson(e);
  out << "],\n \"rules\": [";
  i = 0;
  for (const rules::RulesSummary& r : s.rules) {
    out << (i++ ? ",\n   " : "\n   ") << rules::RulesSummaryToJson(r);
  }
  out << "],\n \"rules_problems\": [";
  i = 0;
  for (const std::string& p : s.rules_problems) out << (i++ ? ", " : "") << JsonString(p);
  out << "],\n \"latest\": [";
  i = 0;
  for (const LatestRow& r : s.latest) {
    if (r.scalar) continue;
    out << (i++ ? ",\n   " : "\n   ") << "{\"name\": " << JsonString(r.name);
    if (r.saved) out << ", " << StepJson(r.step) << ", \"stats\": " << StatsJson(r.stats);
    out << "}";
  }
  out << "],\n \"scalars_latest\": [";
  i = 0;
  for (const LatestRow& r : s.latest) {
    if (!r.scalar) continue;
    out << (i++ ? ",\n   " : "\n   ") << "{\"name\": " << JsonString(r.name);
    if (r.saved) out << ", " << StepJson(r.step) << ", \"value\": " << JsonNumber(r.value);
    out << "}";
  }
  out << "]}\n";
}

int RunInspect(const InspectFlags& f) {
  Result<std::unique_ptr<Trial>> trial = Trial::Open(f.run, CliTrialOptions());
  if (!trial.ok()) return ReportError(trial.status());
  Result<RunSummary> summary = SummarizeRun(*trial.value(), f.run, f.worker);
  if (!summary.ok()) return ReportError(summary.status());
  if (!summary->load_problem.empty()) {
    std::cerr << "tstat: warning: " << DisplayName(summary->load_problem) << "\n";
  }
  if (f.json) {
    PrintJson(summary.value(), std::cout);
  } else {
    PrintText(summary.value(), std::cout);
  }
  return kExitOk;
}

}  // namespace

Command AddInspectCommand(CLI::App& root) {
  auto flags = std::make_shared<InspectFlags>();
  CLI::App* app = root.add_subcommand(
      "inspect",
      "Summarize a run: workers, steps, tensors, storage, counters, capture overhead and the "
      "latest stats of every tensor");
  app->add_option("run", flags->run, "The run directory")->required();
  app->add_flag("--json", flags->json, "Print one JSON object (names verbatim, full precision)");
  app->add_option("--worker", flags->worker, "Only this worker (rank); default: all")
      ->check(CLI::NonNegativeNumber);
  Command c;
  c.app = app;
  c.run = [flags]() { return RunInspect(*flags); };
  return c;
}

}  // namespace tstat::cli
