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
// episode that is reported). Non-finite gradients of an update the optimizer
// skipped (dynamic loss scaling; SkippedUpdates) are not findings: a step
// whose only non-finite tensors are gradients waits for the worker's next
// training step, and is reported then if the update applied them, or once
// `max_skipped_in_row` (default 50) updates in a row were skipped.
// Default selection: every tensor.
// Needs: the stat set of every selected tensor at every step (gradients:
// training steps).
#include <algorithm>
#include <unordered_map>

#include "rules/tensor/skipped_updates.h"
#include "rules/tensor/tensor_rule.h"
#include "rules/tensor/tensor_rules.h"

namespace tstat::rules {
namespace {

double ValueOf(const Finding& f, const std::string& name) {
  for (const auto& [n, v] : f.values) {
    if (n == name) return v;
  }
  return 0.0;
}

class NanOriginRule final : public TensorRuleT<NanOriginRule> {
 public:
  NanOriginRule(const RuleSpec& spec, bool only_nan, bool once, std::int64_t max_skipped_in_row)
      : TensorRuleT(WithDefaultRegex(spec, ".*"), {}),
        only_nan_(only_nan),
        once_(once),
        skips_(max_skipped_in_row) {}

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

  std::string Notes() const override { return skips_.Note(spec().name); }

  void EndStep(const StepView& step, std::vector<Finding>* findings) override {
    Worker& w = workers_[step.worker];
    std::vector<const TensorInfo*> infos;
    infos.reserve(bad_.size());
    for (const Bad& b : bad_) infos.push_back(b.first);
    // A step held back as a possibly skipped update: dropped when it was,
    // the start of this episode when the update applied its gradients.
    Finding held;
    const SkippedUpdates::Outcome outcome = skips_.Resolve(step);
    if (outcome != SkippedUpdates::Outcome::kNone) {
      if (outcome == SkippedUpdates::Outcome::kApplied) held = std::move(w.held);
      w.held = Finding{};
    }
    if (!held.tensor.empty()) {
      if (bad_.empty()) {  // no selected tensor shows it now: as it was
        SkippedUpdates::ReportApplied(step, &held);
        findings->push_back(std::move(held));
        return;
      }
      w.origin = held.tensor;
      w.origin_step = held.step;
      w.reported = true;
    }
    if (bad_.empty()) {
      skips_.Hold(step, infos);  // ends a run of skipped updates
      w.origin.clear();
      return;
    }
    // Forward tensors, then gradients, then parameters; capture order in each.
    std::stable_sort(bad_.begin(), bad_.end(), [](const Bad& a, const Bad& b) {
      return DataFlowRank(*a.first) < DataFlowRank(*b.first);
    });
    const bool starts = w.origin.empty();
    if (starts && once_ && w.reported) {
      skips_.Hold(step, {});
      bad_.clear();
      return;
    }
    const bool hold = starts && skips_.Hold(step, infos);
    const std::string origin = starts ? bad_.front().first->name : w.origin;
    const StepKey origin_step = starts ? step.key : w.origin_step;
    double nan = -1, inf = -1, count = -1;
    for (const Bad& b : bad_) {
      if (b.first->name != origin) continue;
      nan = static_cast<double>(b.second->stats.nan_count);
      inf = static_cast<double>(b.second->stats.inf_count());
      count = static_cast<double>(b.second->stats.count);
    }
    std::string counts;
    if (count >= 0) {
      counts = " (" + Num(nan) + " NaN, " + Num(inf) + " Inf of " + Num(count) + " now)";
    } else if (!held.tensor.empty()) {  // the origin is finite now: its counts then
      nan = ValueOf(held, "nan_count");
      inf = ValueOf(held, "inf_count");
      counts = " (" + Num(nan) + " NaN, " + Num(inf) + " Inf then)";
    } else {
      nan = inf = 0;
      counts = " (finite now)";
    }
    std::string others;
    std::size_t listed = 0;
    for (const Bad& b : bad_) {
      if (b.first->name == origin || listed == 5) continue;
      others += (listed++ ? ", " : "") + b.first->name;
    }
    const std::size_t affected = bad_.size();
    if (affected > listed + (count >= 0 ? 1 : 0))
      others += " (+" + std::to_string(affected - listed - (count >= 0 ? 1 : 0)) + " more)";
    bad_.clear();
    const std::string kind = only_nan_ ? "NaN" : "NaN/Inf";
    const std::string note =
        !held.tensor.empty()
            ? "; the optimizer applied those gradients (the weights hold NaN/Inf since)"
            : skips_.InRowNote(step.worker);
    Finding f = MakeFinding(step, origin,
                            kind + " first appeared in " + origin + " at " + StepText(origin_step) +
                                counts + ", the first of " + std::to_string(affected) +
                                " affected tensor(s) in data-flow order" +
                                (others.empty() ? std::string() : "; also in " + others) + note +
                                ". Inspect the operation producing " + origin +
                                " (log/div/sqrt of its input, an fp16 overflow) and its inputs",
                            {{"tensors_affected", static_cast<double>(affected)},
                             {"nan_count", nan},
                             {"inf_count", inf}});
    if (hold) {  // perhaps an update the optimizer skipped: the next training step says
      w.held = std::move(f);
      return;
    }
    w.origin = origin;
    w.origin_step = origin_step;
    w.reported = true;
    findings->push_back(std::move(f));
  }

 private:
  using Bad = std::pair<const TensorInfo*, const TensorStatsRecord*>;
  struct Worker {
    std::string origin;  // of the episode going on; empty between episodes
    StepKey origin_step;
    bool reported = false;
    Finding held;  // of a step SkippedUpdates holds (tensor empty: none)
  };
  bool only_nan_, once_;
  SkippedUpdates skips_;
  std::vector<Bad> bad_;  // this step
  std::unordered_map<int, Worker> workers_;
};

}  // namespace

Result<std::unique_ptr<Rule>> CreateNanOriginRule(const RuleSpec& spec) {
  ParamReader p(RuleLabel(spec), spec.parameters);
  const bool only_nan = p.Bool("only_nan", false);
  const bool once = p.Bool("once", true);
  const std::int64_t max_skipped = p.Int("max_skipped_in_row", 50);
  p.CheckRange("max_skipped_in_row", static_cast<double>(max_skipped), 0, 1e9);
  TSTAT_RETURN_IF_ERROR(p.Finish());
  return MakeRule<NanOriginRule>(spec, only_nan, once, max_skipped);
}

}  // namespace tstat::rules
