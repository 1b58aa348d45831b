// nan_origin: where non-finite values started. At the first step of a worker
// where any selected tensor has a NaN (or a +-Inf, unless `only_nan`), names
// the first such tensor in capture order (StepView.records order: forward
// tensors in layer order, then the backward ones) as the origin and lists the
// others affected at that step. With once=true (default) it fires once per
// worker; with once=false it fires at the start of every episode (a step with
// non-finite values after one without, e.g. each overflow under dynamic loss
// scaling). Default selection: every tensor.
#include <unordered_map>

#include "rules/builtin/tensor_rule.h"
#include "rules/builtin/tensor_rules.h"

namespace tstat::rules {
namespace {

class NanOriginRule final : public TensorRuleT<NanOriginRule> {
 public:
  NanOriginRule(const RuleSpec& spec, bool only_nan, bool once)
      : TensorRuleT(WithDefaultRegex(spec, ".*"), {}), only_nan_(only_nan), once_(once) {}

 public:
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
    const bool bad_now = !bad_.empty();
    const bool report = bad_now && !(once_ ? w.fired : w.bad_before);
    w.bad_before = bad_now;
    if (report) {
      w.fired = true;
      const TensorInfo& origin = *bad_.front().first;
      const TensorStats& s = bad_.front().second->stats;
      std::string others;
      for (std::size_t i = 1; i < bad_.size() && i <= 5; ++i) {
        others += (i > 1 ? ", " : "") + bad_[i].first->name;
      }
      if (bad_.size() > 6) others += " (+" + std::to_string(bad_.size() - 6) + " more)";
      const std::string kind = only_nan_ ? "NaN" : "NaN/Inf";
      findings->push_back(MakeFinding(
          step, origin.name,
          kind + " first appeared in " + origin.name + " (" + std::to_string(s.nan_count) +
              " NaN, " + std::to_string(s.inf_count()) + " Inf of " + std::to_string(s.count) +
              "), the first of " + std::to_string(bad_.size()) +
              " affected tensor(s) in capture "
              "order" +
              (others.empty() ? std::string() : "; also in " + others) +
              ". Inspect the operation producing " + origin.name +
              " (log/div/sqrt of its input, an fp16 overflow) and its inputs",
          {{"nan_count", static_cast<double>(s.nan_count)},
           {"inf_count", static_cast<double>(s.inf_count())},
           {"tensors_affected", static_cast<double>(bad_.size())}}));
    }
    bad_.clear();
  }

 private:
  struct Worker {
    bool fired = false;
    bool bad_before = false;
  };
  bool only_nan_, once_;
  std::vector<std::pair<const TensorInfo*, const TensorStatsRecord*>> bad_;  // this step
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
