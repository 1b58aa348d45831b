// exploding_tensor: a tensor with a NaN, or a +-Inf unless `only_nan`, at
// every step where it has one (stats.nan_count / pos_inf_count /
// neg_inf_count). And growth: a tensor of a collection in
// `growth_collections` (default "gradients"; "" = every selected tensor)
// whose `growth_stat` (default l2) is more than `growth_factor` (default 10;
// 0 turns the check off) times the median of its previous `growth_window`
// (default 10) finite, non-zero values of the same worker and mode (from
// the second value on), at two judged steps in a row: a diverging run keeps
// growing, a transient spike (which training survives) does not. Default
// selection: every tensor (smdebug has none). Both findings are critical: a
// diverging run is wasted. Non-finite gradients of an update the optimizer
// skipped (dynamic loss scaling; SkippedUpdates) are not findings: they wait
// for the worker's next training step, and are reported then if the update
// applied them, or once `max_skipped_in_row` (default 50) updates in a row
// were skipped.
// Needs: the stat set of every selected tensor at every step (gradients:
// training steps).
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "rules/tensor/skipped_updates.h"
#include "rules/tensor/tensor_rule.h"
#include "rules/tensor/tensor_rules.h"
#include "rules/tensor/value_windows.h"

namespace tstat::rules {
namespace {

struct ExplodingParams {
  bool only_nan = false;
  double growth_factor = 10.0;  // 0 = off
  std::int64_t growth_window = 10;
  StatKind growth_stat = StatKind::kL2;
  std::string growth_stat_name = "l2";
  std::vector<std::string> growth_collections = {"gradients"};  // empty: every tensor
  std::int64_t max_skipped_in_row = 50;                         // 0: SkippedUpdates off
};

class ExplodingTensorRule final : public TensorRuleT<ExplodingTensorRule> {
 public:
  ExplodingTensorRule(const RuleSpec& spec, ExplodingParams p)
      : TensorRuleT(WithDefaultRegex(spec, ".*"), {}),
        p_(std::move(p)),
        skips_(p_.max_skipped_in_row) {}

  CaptureNeeds Needs(const TensorInfo& t) const override {
    return Takes(t) ? StatsIn(t, JudgedModes(CaptureNeeds::AllModes())) : CaptureNeeds{};
  }

  void Check(const StepView& step, const TensorInfo& info, const TensorStatsRecord& r,
             std::vector<Finding>* findings) override {
    if (!r.has_stats) return;
    const TensorStats& s = r.stats;
    const std::uint64_t bad = s.nan_count + (p_.only_nan ? 0 : s.inf_count());
    if (bad > 0) {
      std::string what = std::to_string(s.nan_count) + " NaN";
      if (!p_.only_nan) what += " and " + std::to_string(s.inf_count()) + " Inf";
      nonfinite_.push_back(&info);
      nonfinite_findings_.push_back(MakeFinding(
          step, info.name,
          info.name + " has exploded: " + what + " of " + std::to_string(s.count) +
              " values; see nan_origin for the tensor where it started, then lower the learning "
              "rate, clip gradients or guard log/div/sqrt in the loss",
          {{"nonfinite_count", static_cast<double>(bad)},
           {"nan_count", static_cast<double>(s.nan_count)},
           {"inf_count", static_cast<double>(s.inf_count())},
           {"count", static_cast<double>(s.count)}}));
      return;
    }
    if (p_.growth_factor > 0 && Grows(step, info)) CheckGrowth(step, info, s, findings);
  }

  void EndStep(const StepView& step, std::vector<Finding>* findings) override {
    std::vector<Finding>& held = held_[step.worker];
    const SkippedUpdates::Outcome outcome = skips_.Resolve(step);
    if (outcome == SkippedUpdates::Outcome::kApplied) {
      for (Finding& f : held) {
        const bool again = std::any_of(nonfinite_.begin(), nonfinite_.end(),
                                       [&f](const TensorInfo* t) { return t->name == f.tensor; });
        if (again) continue;  // this step's finding about it says it
        SkippedUpdates::ReportApplied(step, &f);
        findings->push_back(std::move(f));
      }
    }
    if (outcome != SkippedUpdates::Outcome::kNone) held.clear();
    if (skips_.Hold(step, nonfinite_)) {  // perhaps an update the optimizer skipped
      held = std::move(nonfinite_findings_);
    } else {
      const std::string in_row_note = skips_.InRowNote(step.worker);
      for (Finding& f : nonfinite_findings_) {
        f.message += in_row_note;
        findings->push_back(std::move(f));
      }
    }
    nonfinite_.clear();
    nonfinite_findings_.clear();
  }

  std::string Notes() const override { return skips_.Note(spec().name); }

 private:
  // Whether `info` is in a growth collection (decided once per tensor).
  bool Grows(const StepView& step, const TensorInfo& info) {
    bool created = false;
    std::uint8_t& g =
        grows_.Get(PerTensor<std::uint8_t>::WorkerGroup(step.worker), info.id, &created);
    if (created) {
      g = p_.growth_collections.empty() ? 1 : 0;
      for (const std::string& c : p_.growth_collections) {
        if (std::find(info.collections.begin(), info.collections.end(), c) !=
            info.collections.end())
          g = 1;
      }
    }
    return g != 0;
  }

  void CheckGrowth(const StepView& step, const TensorInfo& info, const TensorStats& s,
                   std::vector<Finding>* findings) {
    const double v = StatValue(s, p_.growth_stat);
    if (!std::isfinite(v) || v == 0) return;
    ValueWindows::Ring& hist =
        history_.Get(PerTensor<int>::WorkerModeGroup(step.worker, step.key.mode), info.id);
    const std::size_t window = history_.window();
    if (hist.size > 0 && MayExceedMedian(hist, window, v)) {
      scratch_.clear();
      hist.ForEach(window, [this](double x) { scratch_.push_back(x); });
      std::nth_element(scratch_.begin(), scratch_.begin() + scratch_.size() / 2, scratch_.end());
      const double median = scratch_[scratch_.size() / 2];
      const double ratio = v / median;
      if (median > 0 && ratio > p_.growth_factor) {
        findings->push_back(MakeFinding(
            step, info.name,
            p_.growth_stat_name + " of " + info.name + " is " + Num(ratio) +
                "x the median of its last " + std::to_string(hist.size) + " saved steps (" +
                Num(median) + " -> " + Num(v) + ", growth_factor " + Num(p_.growth_factor) +
                "): training is diverging; lower the learning rate or clip gradients",
            {{"growth", ratio},
             {p_.growth_stat_name, v},
             {"median", median},
             {"growth_factor", p_.growth_factor}}));
        findings->back().confirm_steps = 2;
      }
    }
    hist.Push(v, window);
  }

  // False when v / median cannot exceed growth_factor: with every value of
  // the window positive, median >= min, so v <= growth_factor * min rules it
  // out without sorting the window (the usual case, every step).
  bool MayExceedMedian(const ValueWindows::Ring& hist, std::size_t window, double v) const {
    double lowest = INFINITY;
    hist.ForEach(window, [&lowest](double x) { lowest = std::min(lowest, x); });
    return !(lowest > 0 && v <= p_.growth_factor * lowest);
  }

  ExplodingParams p_;
  ValueWindows history_{static_cast<std::size_t>(p_.growth_window)};
  PerTensor<std::uint8_t> grows_;  // 1: in a growth collection
  std::vector<double> scratch_;
  SkippedUpdates skips_;
  // This step's non-finite tensors and the findings about them.
  std::vector<const TensorInfo*> nonfinite_;
  std::vector<Finding> nonfinite_findings_;
  std::unordered_map<int, std::vector<Finding>> held_;  // by worker: of a held step
};

}  // namespace

Result<std::unique_ptr<Rule>> CreateExplodingTensorRule(const RuleSpec& spec) {
  const std::string label = RuleLabel(spec);
  ParamReader p(label, spec.parameters);
  ExplodingParams e;
  e.only_nan = p.Bool("only_nan", false);
  e.growth_factor = p.Double("growth_factor", e.growth_factor);
  if (e.growth_factor != 0) p.CheckRange("growth_factor", e.growth_factor, 1, kNoLimit);
  e.growth_window = p.Int("growth_window", e.growth_window);
  p.CheckRange("growth_window", static_cast<double>(e.growth_window), 1, 1e6);
  e.growth_stat_name = p.String("growth_stat", "l2");
  e.growth_collections = p.List("growth_collections", e.growth_collections);
  e.max_skipped_in_row = p.Int("max_skipped_in_row", e.max_skipped_in_row);
  p.CheckRange("max_skipped_in_row", static_cast<double>(e.max_skipped_in_row), 0, 1e9);
  TSTAT_RETURN_IF_ERROR(p.Finish());
  TSTAT_RETURN_IF_ERROR(ReadStatKind(&p, label, "growth_stat", "l2", &e.growth_stat));
  return MakeRule<ExplodingTensorRule>(spec, std::move(e));
}

}  // namespace tstat::rules
