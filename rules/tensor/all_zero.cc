// all_zero: a tensor whose share of zero elements (stats.zero_count, +0 and
// -0, over stats.count, every element) is at least `threshold` percent
// (default 100: every element is zero), at every step where that holds.
// Default selection: collections "weights", "gradients" and "activations"
// (not "biases": zero-initialized biases are normal). The default set
// confirms it over 3 steps (zero-initialized layers are zero at step 0).
// Needs: the stat set of the selected tensors at every step.
#include "rules/tensor/tensor_rule.h"
#include "rules/tensor/tensor_rules.h"

namespace tstat::rules {
namespace {

class AllZeroRule final : public TensorRuleT<AllZeroRule> {
 public:
  AllZeroRule(const RuleSpec& spec, double threshold)
      : TensorRuleT(spec, {"weights", "gradients", "activations"}), threshold_(threshold) {}

  CaptureNeeds Needs(const TensorInfo& t) const override {
    return Takes(t) ? StatsIn(t, JudgedModes(CaptureNeeds::AllModes())) : CaptureNeeds{};
  }

  void Check(const StepView& step, const TensorInfo& info, const TensorStatsRecord& r,
             std::vector<Finding>* findings) override {
    if (!r.has_stats || r.stats.count == 0) return;
    const double pct =
        100.0 * static_cast<double>(r.stats.zero_count) / static_cast<double>(r.stats.count);
    if (!(pct >= threshold_)) return;
    findings->push_back(MakeFinding(
        step, info.name,
        info.name + " is " + Num(pct) + "% zeros (threshold " + Num(threshold_) +
            "%): check its initialization, dead ReLUs upstream, or a masked/detached input",
        {{"zero_percent", pct},
         {"zero_count", static_cast<double>(r.stats.zero_count)},
         {"threshold", threshold_}}));
  }

 private:
  double threshold_;
};

}  // namespace

Result<std::unique_ptr<Rule>> CreateAllZeroRule(const RuleSpec& spec) {
  ParamReader p(RuleLabel(spec), spec.parameters);
  const double threshold = p.Double("threshold", 100.0);
  p.CheckRange("threshold", threshold, 0, 100);
  TSTAT_RETURN_IF_ERROR(p.Finish());
  return MakeRule<AllZeroRule>(spec, threshold);
}

}  // namespace tstat::rules
