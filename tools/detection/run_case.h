// One case of the detection matrix: trains it with LibTorch while a tstat
// Session with the DEFAULT configuration (rules enabled, nothing else)
// captures it as a user following README's naming conventions would, lets
// auto-stop act, and compares what the rules found with what the oracles
// measured.
// Thread safety: one case at a time per process (libtorch's global RNG).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/demo/digits_dataset.h"
#include "tools/detection/cases.h"
#include "tools/detection/oracle.h"
#include "tstat/status.h"

namespace tstat::detection {

// One episode the rules found, located in TRAIN steps.
struct Detection {
  std::string rule;
  std::string severity;
  std::string tensor;
  std::string mode;
  std::int64_t train_step = -1;  // TRAIN steps done when it opened
  std::int64_t steps = 0;        // steps it held
  std::string message;
};

struct CaseResult {
  Case spec;
  Manifestation manifest;                 // of the case's fault (none for healthy)
  std::vector<std::string> oracle_flags;  // healthy: every criterion that manifested
  std::vector<Detection> detections;      // every episode, by opening step
  std::int64_t intended_step = -1;        // TRAIN step the intended rule opened at
  std::int64_t steps_run = 0;             // TRAIN steps that ran
  bool stopped = false;
  std::string stop_reason;
  double first_loss = 0.0, last_loss = 0.0;  // TRAIN minibatch losses
  std::int64_t updates_skipped = 0;          // overflows under loss scaling
  double seconds = 0.0;
  bool passed = false;
  std::string verdict;  // why it passed or failed, one line
};

// The largest delay (TRAIN steps) between a fault's manifestation and the
// intended rule that still counts as found in time.
inline constexpr std::int64_t kMaxDelaySteps = 5;

// Runs `c` on `data`, capturing into `run_dir` (must not exist).
Result<CaseResult> RunCase(const Case& c, const demo::Dataset& data, const std::string& run_dir);

}  // namespace tstat::detection
