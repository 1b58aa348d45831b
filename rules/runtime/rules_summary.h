// RulesSummary: what an in-process session's rules ran, what the session
// captured for them and what that cost, what they found and what they could
// not judge (the JSON form of tstat.rulesconfig.RulesSummary, one file per
// worker: RUN/rules-<rank:05d>.json). The session writes it and prints it at
// Close; `tstat inspect` reads it.
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tstat/rule.h"

namespace tstat::rules {

struct RulesSummary {
  int worker = 0;
  std::string stop_on;
  struct RuleEntry {
    std::string name, type;
    Severity severity = Severity::kError;
    bool stops = false;
  };
  std::vector<RuleEntry> rules;
  struct Capture {
    std::string rule, what, collection;
    std::uint64_t tensors = 0;
    std::vector<std::string> examples;  // at most kExamples
  };
  static constexpr std::size_t kExamples = 4;
  std::vector<Capture> captures;
  struct LabelClasses {
    std::string tensor;
    int classes = 0;
    std::string source;
  };
  std::vector<LabelClasses> label_classes;
  std::uint64_t steps = 0, steps_judged = 0, records = 0, rules_records = 0, rules_extended = 0;
  std::uint64_t delta_copy_bytes = 0, episodes = 0, open_episodes = 0;
  std::vector<std::string> diagnostics;
  std::vector<std::string> notes;  // Rule::Notes

  // Adds `tensor` to the capture of (rule, collection), made when new.
  void NoteCapture(const std::string& rule, const std::string& what, const std::string& collection,
                   const std::string& tensor);
};

// What a need captures, for people: "per-unit stats", "per-unit stats with
// band counts outside (-9.4999, 9.4999)", "label counts", "deltas", "the
// stat set"; then " (TRAIN and GLOBAL steps, the first 10)".
std::string DescribeNeeds(const CaptureNeeds& needs);

std::string RulesSummaryFileName(int rank);  // "rules-00003.json"
std::string RulesSummaryToJson(const RulesSummary& summary);
// kCorruption when `text` is not one.
Result<RulesSummary> RulesSummaryFromJson(const std::string& text);
// The summaries of the workers of run directory `run_dir` (its
// rules-<rank>.json files, by rank); none when the run has none. A file
// that cannot be read or parsed is skipped and named in *problems.
inline constexpr std::uint64_t kMaxRulesSummaryBytes = 16ull << 20;
std::vector<RulesSummary> ReadRulesSummaries(const std::string& run_dir,
                                             std::vector<std::string>* problems);

// The summary as lines for a person (no trailing newlines), the episodes'
// lines (FormatEpisode) first when given.
std::vector<std::string> RulesSummaryLines(const RulesSummary& summary,
                                           const std::vector<Episode>& episodes);

}  // namespace tstat::rules
