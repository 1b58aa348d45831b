// unchanged_tensor: a tensor whose values were identical (within the delta
// tolerance) over its last `num_steps` saved steps (default 3), judged from
// DeltaStats: a saved step is unchanged from the previous one when
// delta.changed_count == 0 (and, unless equal_nan, the tensor has no NaN,
// since NaN never equals NaN). Fires at the step completing the run and at
// every later step the run continues. A record without delta (the first save,
// or capture without delta) starts a new run. The comparison tolerance is the
// capture's DeltaOptions atol/rtol, whose defaults are smdebug's; the rule's
// atol/rtol parameters are accepted only at those defaults. Default
// selection: collection "weights"; TRAIN and GLOBAL steps unless modes given.
#include <cstddef>
#include <tuple>
#include <unordered_map>

#include "rules/tensor/tensor_rule.h"
#include "rules/tensor/tensor_rules.h"

namespace tstat::rules {
namespace {

class UnchangedTensorRule final : public TensorRuleT<UnchangedTensorRule> {
 public:
  UnchangedTensorRule(const RuleSpec& spec, std::int64_t num_steps, bool equal_nan)
      : TensorRuleT(spec, {"weights"},
                    "delta statistics (capture with delta against the previous "
                    "save)"),
        num_steps_(num_steps),
        equal_nan_(equal_nan) {}

 public:
  // Check() reads the stats and the delta.
  static void Prefetch(const TensorStatsRecord* r) {
    TensorRuleT::Prefetch(r);
    PrefetchRecordBytes(r, offsetof(TensorStatsRecord, delta), sizeof(r->delta));
  }

  bool ModeAllowed(Mode m) const override { return TrainModeAllowed(m); }

  void Check(const StepView& step, const TensorInfo& info, const TensorStatsRecord& r,
             std::vector<Finding>* findings) override {
    NoteNeeded(step, info, r.delta.has_value());
    bool first = false;
    Run& run = runs_.Get(PerTensor<Run>::WorkerGroup(step.worker), info.id, &first);
    const bool nan_ok = equal_nan_ || !r.has_stats || r.stats.nan_count == 0;
    const bool unchanged = !first && r.delta.has_value() && r.delta->changed_count == 0 && nan_ok;
    if (unchanged) {
      ++run.length;
    } else {
      run.length = 1;
      run.start = step.key.global_step;
    }
    if (run.length < num_steps_) return;
    findings->push_back(MakeFinding(
        step, info.name,
        info.name + " has not changed over its last " + std::to_string(run.length) +
            " saved steps (since step " + std::to_string(run.start) +
            "): is it frozen or missing from the optimizer, is the learning rate 0, or are its "
            "gradients zero?",
        {{"unchanged_steps", static_cast<double>(run.length)},
         {"num_steps", static_cast<double>(num_steps_)},
         {"delta_amax", r.delta->amax}}));
  }

 private:
  struct Run {
    std::int64_t length = 0;
    std::int64_t start = 0;
  };
  std::int64_t num_steps_;
  bool equal_nan_;
  PerTensor<Run> runs_;
};

}  // namespace

Result<std::unique_ptr<Rule>> CreateUnchangedTensorRule(const RuleSpec& spec) {
  const std::string label = RuleLabel(spec);
  ParamReader p(label, spec.parameters);
  const std::int64_t num_steps = p.Int("num_steps", 3);
  p.CheckRange("num_steps", static_cast<double>(num_steps), 2, 1e9);
  const double rtol = p.Double("rtol", 1e-5);
  const double atol = p.Double("atol", 1e-8);
  const bool equal_nan = p.Bool("equal_nan", false);
  TSTAT_RETURN_IF_ERROR(p.Finish());
  const DeltaOptions capture_defaults;
  for (const auto& [key, value, def] : {std::make_tuple("rtol", rtol, capture_defaults.rtol),
                                        std::make_tuple("atol", atol, capture_defaults.atol)}) {
    if (value != def) {
      return Status::InvalidArgument(
          "rule " + label + ": parameter " + std::string(key) + " = " + Num(value) +
          " cannot be applied by the rule: the tolerance is the capture's delta " + key +
          " (default " + Num(def) + "); set it in the capture configuration instead");
    }
  }
  return MakeRule<UnchangedTensorRule>(spec, num_steps, equal_nan);
}

}  // namespace tstat::rules
