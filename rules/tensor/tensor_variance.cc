// tensor_variance: a tensor whose population variance over its finite
// elements (stats.variance() = m2 / finite_count) is above `max_threshold` or
// below `min_threshold`, at every step where that holds. At least one
// threshold is required. Tensors with no finite element are skipped.
// Default selection: collections "weights" and "gradients".
#include <cmath>

#include "rules/tensor/tensor_rule.h"
#include "rules/tensor/tensor_rules.h"

namespace tstat::rules {
namespace {

class TensorVarianceRule final : public TensorRuleT<TensorVarianceRule> {
 public:
  TensorVarianceRule(const RuleSpec& spec, double max_threshold, double min_threshold)
      : TensorRuleT(spec, {"weights", "gradients"}), max_(max_threshold), min_(min_threshold) {}

 public:
  void Check(const StepView& step, const TensorInfo& info, const TensorStatsRecord& r,
             std::vector<Finding>* findings) override {
    if (!r.has_stats || r.stats.finite_count == 0) return;
    const double var = r.stats.variance();
    if (var > max_) {
      findings->push_back(MakeFinding(
          step, info.name,
          "variance of " + info.name + " is " + Num(var) + " > max_threshold " + Num(max_) +
              ": values are spreading out (exploding); lower the learning rate or add "
              "normalization/regularization",
          {{"variance", var}, {"max_threshold", max_}}));
    } else if (var < min_) {
      findings->push_back(MakeFinding(
          step, info.name,
          "variance of " + info.name + " is " + Num(var) + " < min_threshold " + Num(min_) +
              ": values have collapsed (vanishing); check initialization and the learning rate",
          {{"variance", var}, {"min_threshold", min_}}));
    }
  }

 private:
  double max_, min_;
};

}  // namespace

Result<std::unique_ptr<Rule>> CreateTensorVarianceRule(const RuleSpec& spec) {
  const std::string label = RuleLabel(spec);
  ParamReader p(label, spec.parameters);
  const bool has_max = p.Has("max_threshold"), has_min = p.Has("min_threshold");
  const double max_t = p.Double("max_threshold", kNoLimit);
  const double min_t = p.Double("min_threshold", -kNoLimit);
  TSTAT_RETURN_IF_ERROR(p.Finish());
  if (!has_max && !has_min) {
    return Status::InvalidArgument("rule " + label +
                                   ": set parameter max_threshold and/or min_threshold");
  }
  if (has_max && has_min && !(min_t <= max_t)) {
    return Status::InvalidArgument("rule " + label + ": parameter min_threshold (" + Num(min_t) +
                                   ") must not exceed max_threshold (" + Num(max_t) + ")");
  }
  return MakeRule<TensorVarianceRule>(spec, max_t, min_t);
}

}  // namespace tstat::rules
