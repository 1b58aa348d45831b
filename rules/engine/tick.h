// TickingRule: a rule that also judges the passage of time, not only the
// steps it is shown (stalled_training: "no new step for N seconds").
//
// The Rule interface (tstat/rule.h) has no clock hook, so rules that need one
// implement this interface as well; whoever drives a RuleEngine calls
// TickRules() periodically - the trial runner after every poll of a live run,
// an in-process rules thread on its wake-ups - never concurrently with
// RuleEngine::Feed/Finish. `now` is wall time in seconds since the Unix epoch
// (the clock of StepBatch::wall_time).
// Thread safety: like Rule, driven by the engine's thread.
#pragma once

#include <vector>

#include "rules/engine/rule_engine.h"
#include "tstat/rule.h"

namespace tstat::rules {

class TickingRule {
 public:
  virtual ~TickingRule() = default;
  virtual void Tick(double now, std::vector<Finding>* findings) = 0;
};

// Ticks every rule of `engine` that is a TickingRule.
inline void TickRules(const RuleEngine& engine, double now, std::vector<Finding>* findings) {
  for (const auto& rule : engine.rules()) {
    if (auto* ticking = dynamic_cast<TickingRule*>(rule.get())) ticking->Tick(now, findings);
  }
}

// Seconds since the Unix epoch, now.
double WallClockNow();

}  // namespace tstat::rules
