// stalled_training (smdebug StalledTrainingRule; also registered under that
// name, "stalled_training_rule"): no new step for `threshold` seconds.
//
// Run level (any worker's step is progress; a data-parallel stall stops every
// worker). Clock: StepView::wall_time of the steps (the step's end, or when a
// runner saw it) and the `now` of TickRules (rules/engine/tick.h).
//  - On a step: if the previous step (of any worker, in a selected mode)
//    ended more than `threshold` s earlier and that gap was not reported by a
//    tick, it fires at this step ("no new step for X s before step S").
//  - On a tick: if the last step ended more than `threshold` s before `now`,
//    it fires once for that gap, at the last step. With no step at all it
//    fires once `threshold` s after the first tick, at step -1.
// Finish() (the run ended) reports nothing more. stop_training_on_fire=true
// turns on the stop_training action of this rule (rules_config.h);
// training_job_name_prefix is accepted and ignored (there are no jobs).
#include <chrono>

#include "rules/engine/rule_base.h"
#include "rules/engine/tick.h"
#include "rules/run/run_rules.h"

namespace tstat::rules {

double WallClockNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

namespace run {
namespace {

class StalledTraining final : public RuleBase, public TickingRule {
 public:
  StalledTraining(const RuleSpec& spec, ParamReader* p, Status*) : RuleBase(spec, {}) {
    threshold_ = p->Double("threshold", 1800.0);
    p->CheckRange("threshold", threshold_, 0.0, 1e300);
    p->Bool("stop_training_on_fire", false);
    p->String("training_job_name_prefix", "");
  }

  Status Init() { return RuleBase::Init(); }

  void Evaluate(const StepView& step, std::vector<Finding>* findings) override {
    if (!ModeSelected(step.key.mode) || step.wall_time <= 0.0) return;
    if (seen_ && step.wall_time - last_time_ > threshold_ && !gap_reported_) {
      const double gap = step.wall_time - last_time_;
      Finding f = MakeFinding(step, "",
                              "training stalled: no new step for " + Num(gap) + " s (threshold " +
                                  Num(threshold_) + " s) between " + StepText(last_key_) + " and " +
                                  StepText(step.key),
                              {{"seconds", gap}, {"threshold", threshold_}});
      findings->push_back(std::move(f));
    }
    if (!seen_ || step.wall_time >= last_time_) {
      last_time_ = step.wall_time;
      last_key_ = step.key;
      last_worker_ = step.worker;
      gap_reported_ = false;
    }
    seen_ = true;
  }

  void Tick(double now, std::vector<Finding>* findings) override {
    if (first_tick_ <= 0.0) first_tick_ = now;
    if (!seen_) {
      if (!start_reported_ && now - first_tick_ > threshold_) {
        start_reported_ = true;
        Finding f;
        f.rule = spec().name;
        f.type = spec().type;
        f.step.global_step = -1;
        f.step.mode_step = -1;
        f.wall_time = now;
        f.values = {{"seconds", now - first_tick_}, {"threshold", threshold_}};
        f.message = "training stalled: no step at all in the " + Num(now - first_tick_) +
                    " s since the rules started (threshold " + Num(threshold_) + " s)";
        findings->push_back(std::move(f));
      }
      return;
    }
    if (gap_reported_ || now - last_time_ <= threshold_) return;
    gap_reported_ = true;
    Finding f;
    f.rule = spec().name;
    f.type = spec().type;
    f.step = last_key_;
    f.worker = last_worker_;
    f.wall_time = now;
    f.values = {{"seconds", now - last_time_}, {"threshold", threshold_}};
    f.message = "training stalled: no new step for " + Num(now - last_time_) + " s after " +
                StepText(last_key_) + " (threshold " + Num(threshold_) + " s)";
    findings->push_back(std::move(f));
  }

 private:
  double threshold_ = 1800.0;
  bool seen_ = false;
  double last_time_ = 0.0;
  StepKey last_key_;
  int last_worker_ = 0;
  bool gap_reported_ = false;
  double first_tick_ = 0.0;
  bool start_reported_ = false;
};

}  // namespace

Result<std::unique_ptr<Rule>> MakeStalledTraining(const RuleSpec& spec) {
  return BuildRule<StalledTraining>(spec);
}

}  // namespace run
}  // namespace tstat::rules
