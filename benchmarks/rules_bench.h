// `tstat bench rules`: throughput of the rule engine with every built-in rule,
// and the latency of following a live run.
//
// engine cases: a synthetic run of T tensors x S steps (default 10,000 x
// 1,000: weights, gradients, biases and ReLU outputs with exponent histograms,
// deltas and per-channel stats as a default capture gives them, plus a loss
// scalar and a labels tensor with label counts and a confusion matrix) is fed
// step by step through one RuleEngine holding
//   all_rules:  every registered rule type (with its default parameters; the
//               few that need one get a neutral value) and one expression rule;
//   stats_only: the same minus the rules that read more than the scalar stat
//               rows (low_precision_range: exponent histogram; dead_relu,
//               saturated_activation, check_input_images: per-channel stats;
//               class_imbalance, confusion: label counts / confusion matrix;
//               nlp_sequence_ratio: value counts).
// The steps are prepared before timing (a few distinct value sets, reused),
// so only Feed() is timed. Reported: records = stats + scalar records fed to
// the engine, each counted once however many rules look at it (per record,
// not per rule); wall seconds; records per second per core = records / the
// engine thread's CPU seconds (the engine is one thread).
//
// follow case: a writer thread writes the same kind of steps (T tensors) to
// an HDF5 run, flushing every step, while a TrialRunner follows the run with
// the same rules and logs findings to RUN/findings.jsonl. Every 5th step
// carries a NaN that an expression rule reports; follow_latency_s is the
// median time from that step's Flush() returning to its finding being
// logged.
// Thread safety: a run uses the whole machine.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "tstat/status.h"

namespace tstat::bench {

struct RulesBenchOptions {
  std::int64_t tensors = 10000;
  std::int64_t steps = 1000;
  std::int64_t follow_steps = 20;  // 0: no follow case
  double follow_poll_s = 0.05;     // the runner's poll interval
  bool json = false;
};

struct RulesBenchResult {
  std::string name;  // "stats_only", "all_rules", "follow"
  std::int64_t tensors = 0;
  std::int64_t steps = 0;
  std::uint64_t records = 0;
  double seconds = 0.0;
  double cpu_seconds = 0.0;
  double records_per_s_per_core = 0.0;
  std::optional<double> follow_latency_s;
  std::uint64_t findings = 0;
  int rules = 0;
};

std::string FormatRulesJsonLine(const RulesBenchResult& r);

// Runs the cases and writes a table (or JSON lines) to `out`; notes (rule
// types that could not be created) go to `err`.
Status RunRulesBench(const RulesBenchOptions& options, std::ostream& out, std::ostream& err);

}  // namespace tstat::bench
