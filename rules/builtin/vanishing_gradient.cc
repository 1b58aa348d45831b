// vanishing_gradient: a gradient whose mean absolute value over its finite
// elements (stats.l1 / stats.finite_count) is below `threshold` (default
// 1e-7), at every step where that holds. Default selection: collection
// "gradients". Tensors with no finite element are left to exploding_tensor.
#include "rules/builtin/tensor_rule.h"
#include "rules/builtin/tensor_rules.h"

namespace tstat::rules {
namespace {

class VanishingGradientRule final : public TensorRuleT<VanishingGradientRule> {
 public:
  VanishingGradientRule(const RuleSpec& spec, double threshold)
      : TensorRuleT(spec, {"gradients"}), threshold_(threshold) {}

 public:
  void Check(const StepView& step, const TensorInfo& info, const TensorStatsRecord& r,
             std::vector<Finding>* findings) override {
    if (!r.has_stats || r.stats.finite_count == 0) return;
    const double mean_abs = StatValue(r.stats, StatKind::kMeanAbs);
    if (!(mean_abs < threshold_)) return;
    findings->push_back(MakeFinding(
        step, info.name,
        "gradient " + info.name + " has vanished: mean |g| = " + Num(mean_abs) + " < threshold " +
            Num(threshold_) +
            "; look for saturating activations (sigmoid/tanh), too-small initialization, missing "
            "normalization, or a loss scale that underflows",
        {{"mean_abs", mean_abs}, {"threshold", threshold_}}));
  }

 private:
  double threshold_;
};

}  // namespace

Result<std::unique_ptr<Rule>> CreateVanishingGradientRule(const RuleSpec& spec) {
  ParamReader p(RuleLabel(spec), spec.parameters);
  const double threshold = p.Double("threshold", 1e-7);
  p.CheckRange("threshold", threshold, 0, kNoLimit);
  TSTAT_RETURN_IF_ERROR(p.Finish());
  return MakeRule<VanishingGradientRule>(spec, threshold);
}

}  // namespace tstat::rules
