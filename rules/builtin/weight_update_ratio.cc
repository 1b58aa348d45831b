// weight_update_ratio: the size of a weight's update relative to the weight,
// ratio = delta.l2 / (stats.l2 + epsilon) (the L2 norm of w - w_prev, where
// w_prev is the previously saved value, over the L2 norm of w), above
// `large_threshold` (default 10) or below `small_threshold` (default 1e-8),
// at every saved step where that holds. With `num_steps` > 0 a step is judged
// only when the tensor's previous save (as seen by this rule) is at most
// num_steps global steps earlier, so the delta spans few updates. Needs delta
// capture. Default selection: collection "weights"; TRAIN and GLOBAL steps
// unless modes are given (weights do not change in EVAL/PREDICT).
#include <cmath>
#include <cstddef>
#include <unordered_map>

#include "rules/builtin/tensor_rule.h"
#include "rules/builtin/tensor_rules.h"

namespace tstat::rules {
namespace {

struct UpdateRatioParams {
  std::int64_t num_steps = 0;  // 0 = any distance (smdebug: None)
  double large_threshold = 10.0;
  double small_threshold = 1e-8;
  double epsilon = 1e-9;
};

class WeightUpdateRatioRule final : public TensorRuleT<WeightUpdateRatioRule> {
 public:
  WeightUpdateRatioRule(const RuleSpec& spec, UpdateRatioParams p)
      : TensorRuleT(spec, {"weights"},
                   "delta statistics (capture with delta against the previous save)"),
        p_(p) {}

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
    const std::int64_t now = step.key.global_step;
    bool first = false;
    std::int64_t& last = last_step_.Get(PerTensor<std::int64_t>::WorkerGroup(step.worker), info.id,
                                        &first);
    if (first) last = now;
    const std::int64_t previous = last;
    last = now;
    if (!r.has_stats || !r.delta.has_value() || r.delta->count == 0) return;
    if (p_.num_steps > 0 && (first || now - previous > p_.num_steps)) return;
    const double ratio = r.delta->l2 / (r.stats.l2 + p_.epsilon);
    if (!std::isfinite(ratio)) return;
    const bool large = ratio > p_.large_threshold;
    if (!large && !(ratio < p_.small_threshold)) return;
    const double threshold = large ? p_.large_threshold : p_.small_threshold;
    const std::string msg =
        large ? "updates of " + info.name + " are too large: |dw|/|w| = " + Num(ratio) +
                    " > large_threshold " + Num(threshold) +
                    "; lower the learning rate or clip gradients"
              : "updates of " + info.name + " are too small: |dw|/|w| = " + Num(ratio) +
                    " < small_threshold " + Num(threshold) +
                    "; the learning rate may be too low, gradients vanishing, or the weight not "
                    "trained";
    findings->push_back(MakeFinding(step, info.name, msg,
                                    {{"ratio", ratio},
                                     {"delta_l2", r.delta->l2},
                                     {"l2", r.stats.l2},
                                     {large ? "large_threshold" : "small_threshold", threshold}}));
  }

 private:
  UpdateRatioParams p_;
  PerTensor<std::int64_t> last_step_;
};

}  // namespace

Result<std::unique_ptr<Rule>> CreateWeightUpdateRatioRule(const RuleSpec& spec) {
  const std::string label = RuleLabel(spec);
  ParamReader p(label, spec.parameters);
  UpdateRatioParams u;
  u.num_steps = p.Int("num_steps", 0);
  p.CheckRange("num_steps", static_cast<double>(u.num_steps), 0, 1e12);
  u.large_threshold = p.Double("large_threshold", 10.0);
  u.small_threshold = p.Double("small_threshold", 1e-8);
  u.epsilon = p.Double("epsilon", 1e-9);
  p.CheckRange("small_threshold", u.small_threshold, 0, kNoLimit);
  p.CheckRange("large_threshold", u.large_threshold, u.small_threshold, kNoLimit);
  p.CheckRange("epsilon", u.epsilon, 0, kNoLimit);
  TSTAT_RETURN_IF_ERROR(p.Finish());
  return MakeRule<WeightUpdateRatioRule>(spec, u);
}

}  // namespace tstat::rules
