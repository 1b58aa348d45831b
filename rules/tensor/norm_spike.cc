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
#include <memory>

#include "rules/tensor/tensor_rule.h"
#include "rules/tensor/tensor_rules.h"

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
    History& hist =
        history_.Get(PerTensor<History>::WorkerModeGroup(step.worker, step.key.mode), info.id);
    if (hist.values == nullptr) hist.values = NewHistory();
    if (static_cast<std::int64_t>(hist.size) >= p_.min_steps) {
      // Oldest to newest, as the sums were always taken.
      // The ring is values[head, size) then values[0, head) when full.
      const double* v0 = hist.values + hist.head;
      const double* v1 = hist.values;
      const std::size_t n0 = hist.size == window_ ? window_ - hist.head : hist.size;
      const std::size_t n1 = hist.size - n0;
      double mean = 0;
      for (std::size_t k = 0; k < n0; ++k) mean += v0[k];
      for (std::size_t k = 0; k < n1; ++k) mean += v1[k];
      mean /= static_cast<double>(hist.size);
      double m2 = 0;
      for (std::size_t k = 0; k < n0; ++k) m2 += (v0[k] - mean) * (v0[k] - mean);
      for (std::size_t k = 0; k < n1; ++k) m2 += (v1[k] - mean) * (v1[k] - mean);
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
    hist.Push(v, window_);
  }

 private:
  // The last `window` values of a (worker, tensor, mode), in a ring.
  struct History {
    double* values = nullptr;  // window values in arena_
    std::size_t head = 0;      // the oldest value
    std::size_t size = 0;
    // Until full, head stays 0 and values fill [0, size).
    void Push(double v, std::size_t window) {
      if (size < window) {
        values[size++] = v;
      } else {
        values[head] = v;
        head = head + 1 == window ? 0 : head + 1;
      }
    }
  };
  // Room for one history. Histories are carved from large blocks in the
  // order tensors are first seen (capture order), so a step's walk reads
  // them sequentially instead of chasing one small allocation per tensor.
  double* NewHistory() {
    constexpr std::size_t kBlockValues = 1 << 14;
    const std::size_t per_block = std::max<std::size_t>(1, kBlockValues / window_);
    if (arena_.empty() || arena_used_ == per_block) {
      arena_.push_back(std::make_unique<double[]>(per_block * window_));
      arena_used_ = 0;
    }
    return arena_.back().get() + window_ * arena_used_++;
  }

  SpikeParams p_;
  std::size_t window_ = static_cast<std::size_t>(p_.window);
  PerTensor<History> history_;
  std::vector<std::unique_ptr<double[]>> arena_;
  std::size_t arena_used_ = 0;  // histories in arena_.back()
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
