// nan_origin: where non-finite values started. At a step of a worker where
// selected tensors hold a NaN (or a +-Inf, unless `only_nan`) after a step
// where none did, it names the origin: the first such tensor in data-flow
// order - the forward tensors (activations, inputs, outputs, the loss's
// terms) in capture order, then the gradients in capture order, then
// weights and biases (an update spreads a gradient's NaN into them) - and
// lists the others. It
// fires at every step while non-finite values last, naming the same origin,
// so the episode covers them. With once=true (default) only the first
// episode of a worker is reported; with once=false every one (e.g. each
// overflow under dynamic loss scaling). Default selection: every tensor.
// Needs: the stat set of every selected tensor at every step (gradients:
// training steps).
#include <algorithm>
#include <unordered_map>

#include "rules/tensor/tensor_rule.h"
#include "rules/tensor/tensor_rules.h"

namespace tstat::rules {
namespace {

bool InCollection(const TensorInfo& t, const char* c) {
  return std::find(t.collections.begin(), t.collections.end(), c) != t.collections.end();
}

class NanOriginRule final : public TensorRuleT<NanOriginRule> {
 public:
  NanOriginRule(const RuleSpec& spec, bool only_nan, bool once)
      : TensorRuleT(WithDefaultRegex(spec, ".*"), {}), only_nan_(only_nan), once_(once) {}

  CaptureNeeds Needs(const TensorInfo& t) const override {
    return Takes(t) ? StatsIn(t, JudgedModes(CaptureNeeds::AllModes())) : CaptureNeeds{};
  }

  void Check(const StepView& step, const TensorInfo& info, const TensorStatsRecord& r,
             std::vector<Finding>* findings) override {
    (void)step;
    (void)findings;
    if (!r.has_stats) return;
    const std::uint64_t bad = r.stats.nan_count + (only_nan_ ? 0 : r.stats.inf_count());
    if (bad > 0) bad_.push_back({&info, &r});
  }

  void EndStep(const StepView& step, std::vector<Finding>* findings) override {
    Worker& w = workers_[step.worker];
    if (bad_.empty()) {
      w.origin.clear();
      return;
    }
    // Forward tensors, then gradients, then parameters; capture order in each.
    std::stable_sort(bad_.begin(), bad_.end(),
                     [](const Bad& a, const Bad& b) { return Rank(*a.first) < Rank(*b.first); });
    if (w.origin.empty()) {
      if (once_ && w.reported) {
        bad_.clear();
        return;
      }
      w.origin = bad_.front().first->name;
      w.origin_step = step.key;
      w.reported = true;
    }
    std::uint64_t nan = 0, inf = 0, count = 0;
    for (const Bad& b : bad_) {
      if (b.first->name != w.origin) continue;
      nan = b.second->stats.nan_count;
      inf = b.second->stats.inf_count();
      count = b.second->stats.count;
    }
    std::string others;
    std::size_t listed = 0;
    for (const Bad& b : bad_) {
      if (b.first->name == w.origin || listed == 5) continue;
      others += (listed++ ? ", " : "") + b.first->name;
    }
    if (bad_.size() > listed + 1)
      others += " (+" + std::to_string(bad_.size() - listed - 1) + " more)";
    const std::string kind = only_nan_ ? "NaN" : "NaN/Inf";
    Finding f =
        MakeFinding(step, w.origin,
                    kind + " first appeared in " + w.origin + " at " + StepText(w.origin_step) +
                        " (" + std::to_string(nan) + " NaN, " + std::to_string(inf) + " Inf of " +
                        std::to_string(count) + " now), the first of " +
                        std::to_string(bad_.size()) + " affected tensor(s) in data-flow order" +
                        (others.empty() ? std::string() : "; also in " + others) +
                        ". Inspect the operation producing " + w.origin +
                        " (log/div/sqrt of its input, an fp16 overflow) and its inputs",
                    {{"tensors_affected", static_cast<double>(bad_.size())},
                     {"nan_count", static_cast<double>(nan)},
                     {"inf_count", static_cast<double>(inf)}});
    findings->push_back(std::move(f));
    bad_.clear();
  }

 private:
  using Bad = std::pair<const TensorInfo*, const TensorStatsRecord*>;
  // 0 forward tensors, 1 gradients, 2 parameters.
  static int Rank(const TensorInfo& t) {
    if (InCollection(t, "gradients")) return 1;
    if (InCollection(t, "weights") || InCollection(t, "biases")) return 2;
    return 0;
  }
  struct Worker {
    std::string origin;  // of the episode going on; empty between episodes
    StepKey origin_step;
    bool reported = false;
  };
  bool only_nan_, once_;
  std::vector<Bad> bad_;  // this step
  std::unordered_map<int, Worker> workers_;
};

}  // namespace

Result<std::unique_ptr<Rule>> CreateNanOriginRule(const RuleSpec& spec) {
  ParamReader p(RuleLabel(spec), spec.parameters);
  const bool only_nan = p.Bool("only_nan", false);
  const bool once = p.Bool("once", true);
  TSTAT_RETURN_IF_ERROR(p.Finish());
  return MakeRule<NanOriginRule>(spec, only_nan, once);
}

}  // namespace tstat::rules
