// norm_spike: a statistic of a tensor (`stat`, default l2) jumping more than
// `k` standard deviations (default 3) above its recent history. The history
// is the last `window` (default 20) finite values of that statistic for the
// same worker, tensor and mode, excluding the current one; a step is judged
// once the history holds at least `min_steps` (default 5) values, and fires
// when value > mean + k * std (population std of the history; with a
// constant history any increase is a spike). Every finite value, spikes
// included, then joins the history, so a lasting level shift fires only
// until the window has absorbed it. Default selection: collection
// "gradients".
#include <algorithm>
#include <cmath>

#include "rules/tensor/tensor_rule.h"
#include "rules/tensor/tensor_rules.h"
#include "rules/tensor/value_windows.h"

namespace tstat::rules {
namespace {

struct SpikeParams {
  StatKind stat = StatKind::kL2;
  std::string stat_name = "l2";
  std::int64_t window = 20;
  double k = 3.0;
  std::int64_t min_steps = 5;
};

class NormSpikeRule final : public TensorRuleT<NormSpikeRule> {
 public:
  NormSpikeRule(const RuleSpec& spec, SpikeParams p) : TensorRuleT(spec, {"gradients"}), p_(p) {}

 public:
  void Check(const StepView& step, const TensorInfo& info, const TensorStatsRecord& r,
             std::vector<Finding>* findings) override {
    if (!r.has_stats) return;
    const double v = StatValue(r.stats, p_.stat);
    if (!std::isfinite(v)) return;
    ValueWindows::Ring& hist =
        history_.Get(PerTensor<int>::WorkerModeGroup(step.worker, step.key.mode), info.id);
    const std::size_t window = history_.window();
    if (static_cast<std::int64_t>(hist.size) >= p_.min_steps) {
      // Oldest to newest, as the sums were always taken.
      double mean = 0;
      hist.ForEach(window, [&mean](double x) { mean += x; });
      mean /= static_cast<double>(hist.size);
      double m2 = 0;
      hist.ForEach(window, [&m2, mean](double x) { m2 += (x - mean) * (x - mean); });
      const double sd = std::sqrt(m2 / static_cast<double>(hist.size));
      if (v > mean + p_.k * sd) {
        const double z = sd > 0 ? (v - mean) / sd : INFINITY;
        findings->push_back(MakeFinding(
            step, info.name,
            p_.stat_name + " of " + info.name + " spiked to " + Num(v) + ", " +
                (sd > 0 ? Num(z) + " standard deviations above its mean " + Num(mean) + " (std " +
                              Num(sd) + ")"
                        : "above its constant value " + Num(mean)) +
                " over the last " + std::to_string(hist.size) + " saved steps (k " + Num(p_.k) +
                "): a bad batch, a learning-rate jump or the start of divergence; consider "
                "gradient clipping and inspect this step's inputs",
            {{p_.stat_name, v}, {"window_mean", mean}, {"window_std", sd}, {"z", z}, {"k", p_.k}}));
      }
    }
    hist.Push(v, window);
  }

 private:
  SpikeParams p_;
  ValueWindows history_{static_cast<std::size_t>(p_.window)};
};

}  // namespace

Result<std::unique_ptr<Rule>> CreateNormSpikeRule(const RuleSpec& spec) {
  const std::string label = RuleLabel(spec);
  ParamReader p(label, spec.parameters);
  SpikeParams q;
  q.stat_name = p.String("stat", "l2");
  q.window = p.Int("window", q.window);
  p.CheckRange("window", static_cast<double>(q.window), 2, 100000);
  q.k = p.Double("k", q.k);
  p.CheckRange("k", q.k, 0, kNoLimit);
  q.min_steps = p.Int("min_steps", q.min_steps);
  p.CheckRange("min_steps", static_cast<double>(q.min_steps), 2, static_cast<double>(q.window));
  TSTAT_RETURN_IF_ERROR(p.Finish());
  TSTAT_RETURN_IF_ERROR(ReadStatKind(&p, label, "stat", "l2", &q.stat));
  return MakeRule<NormSpikeRule>(spec, q);
}

}  // namespace tstat::rules
