// exploding_tensor: a tensor with a NaN, or a +-Inf unless `only_nan`, at
// every step where it has one (stats.nan_count / pos_inf_count /
// neg_inf_count). Optionally also growth: with `growth_factor` > 0, fires when
// `growth_stat` (default l2) of a tensor is more than growth_factor times its
// value `growth_window` saved steps earlier (same worker, tensor and mode;
// steps where the statistic is not finite or zero are not part of the
// window). Default selection: every tensor (smdebug has none).
#include <cmath>
#include <deque>
#include <unordered_map>

#include "rules/builtin/tensor_rule.h"
#include "rules/builtin/tensor_rules.h"

namespace tstat::rules {
namespace {

struct ExplodingParams {
  bool only_nan = false;
  double growth_factor = 0.0;  // 0 = off
  std::int64_t growth_window = 10;
  StatKind growth_stat = StatKind::kL2;
  std::string growth_stat_name = "l2";
};

class ExplodingTensorRule final : public TensorRuleT<ExplodingTensorRule> {
 public:
  ExplodingTensorRule(const RuleSpec& spec, ExplodingParams p)
      : TensorRuleT(WithDefaultRegex(spec, ".*"), {}), p_(std::move(p)) {}

 public:
  void Check(const StepView& step, const TensorInfo& info, const TensorStatsRecord& r,
             std::vector<Finding>* findings) override {
    if (!r.has_stats) return;
    const TensorStats& s = r.stats;
    const std::uint64_t bad = s.nan_count + (p_.only_nan ? 0 : s.inf_count());
    if (bad > 0) {
      std::string what = std::to_string(s.nan_count) + " NaN";
      if (!p_.only_nan) what += " and " + std::to_string(s.inf_count()) + " Inf";
      findings->push_back(MakeFinding(
          step, info.name,
          info.name + " has exploded: " + what + " of " + std::to_string(s.count) +
              " values; see nan_origin for the tensor where it started, then lower the learning "
              "rate, clip gradients or guard log/div/sqrt in the loss",
          {{"nan_count", static_cast<double>(s.nan_count)},
           {"inf_count", static_cast<double>(s.inf_count())},
           {"count", static_cast<double>(s.count)}}));
    }
    if (p_.growth_factor > 0) CheckGrowth(step, info, s, findings);
  }

 private:
  void CheckGrowth(const StepView& step, const TensorInfo& info, const TensorStats& s,
                   std::vector<Finding>* findings) {
    const double v = StatValue(s, p_.growth_stat);
    if (!std::isfinite(v) || v == 0) return;
    std::deque<double>& hist =
        history_.Get(PerTensor<std::deque<double>>::WorkerModeGroup(step.worker, step.key.mode),
                     info.id);
    if (static_cast<std::int64_t>(hist.size()) == p_.growth_window) {
      const double base = hist.front();
      const double ratio = v / base;
      if (base > 0 && ratio > p_.growth_factor) {
        findings->push_back(MakeFinding(
            step, info.name,
            p_.growth_stat_name + " of " + info.name + " grew " + Num(ratio) + "x over the last " +
                std::to_string(p_.growth_window) + " saved steps (" + Num(base) + " -> " + Num(v) +
                ", growth_factor " + Num(p_.growth_factor) +
                "): training is diverging; lower the learning rate or clip gradients",
            {{p_.growth_stat_name, v},
             {"previous", base},
             {"ratio", ratio},
             {"growth_factor", p_.growth_factor}}));
      }
      hist.pop_front();
    }
    hist.push_back(v);
  }

  ExplodingParams p_;
  PerTensor<std::deque<double>> history_;
};

}  // namespace

Result<std::unique_ptr<Rule>> CreateExplodingTensorRule(const RuleSpec& spec) {
  const std::string label = RuleLabel(spec);
  ParamReader p(label, spec.parameters);
  ExplodingParams e;
  e.only_nan = p.Bool("only_nan", false);
  e.growth_factor = p.Double("growth_factor", 0.0);
  if (e.growth_factor != 0) p.CheckRange("growth_factor", e.growth_factor, 1, kNoLimit);
  e.growth_window = p.Int("growth_window", 10);
  p.CheckRange("growth_window", static_cast<double>(e.growth_window), 1, 1e6);
  e.growth_stat_name = p.String("growth_stat", "l2");
  TSTAT_RETURN_IF_ERROR(p.Finish());
  TSTAT_RETURN_IF_ERROR(ReadStatKind(&p, label, "growth_stat", "l2", &e.growth_stat));
  return MakeRule<ExplodingTensorRule>(spec, std::move(e));
}

}  // namespace tstat::rules
