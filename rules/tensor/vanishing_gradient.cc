// vanishing_gradient: a gradient whose mean absolute value over its
// elements (stats.l1 / stats.count) is below `threshold` (default 1e-7), at
// every step where that holds. Default selection: collection "gradients".
// A gradient with any NaN or Inf is not judged: that is exploding_tensor's
// and nan_origin's finding, and its finite part says nothing about vanishing.
// Needs: the stat set of the gradients at every training step.
#include "rules/tensor/tensor_rule.h"
#include "rules/tensor/tensor_rules.h"

namespace tstat::rules {
namespace {

class VanishingGradientRule final : public TensorRuleT<VanishingGradientRule> {
 public:
  VanishingGradientRule(const RuleSpec& spec, double threshold)
      : TensorRuleT(spec, {"gradients"}), threshold_(threshold) {}

  CaptureNeeds Needs(const TensorInfo& t) const override {
    return Takes(t) ? StatsIn(t, JudgedModes(CaptureNeeds::TrainModes())) : CaptureNeeds{};
  }

  void Check(const StepView& step, const TensorInfo& info, const TensorStatsRecord& r,
             std::vector<Finding>* findings) override {
    const TensorStats& s = r.stats;
    if (!r.has_stats || s.count == 0 || s.nan_count + s.inf_count() > 0) return;
    const double mean_abs = s.l1 / static_cast<double>(s.count);
    if (!(mean_abs < threshold_)) return;
    Finding f = MakeFinding(
        step, info.name,
        "gradient " + info.name + " has vanished: mean |g| = " + Num(mean_abs) + " < threshold " +
            Num(threshold_) +
            "; look for saturating activations (sigmoid/tanh), too-small initialization, missing "
            "normalization, or a loss scale that underflows",
        {{"mean_abs", mean_abs}, {"threshold", threshold_}});
    f.lower_is_worse = true;
    findings->push_back(std::move(f));
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
