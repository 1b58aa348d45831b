// weight_update_ratio: the size of a weight's update relative to the weight:
// the L2 norm of w - w_prev (delta.l2; w_prev is the previously saved value)
// over the L2 norm of the weight.
//  - too large: over the norm of w_prev (the previous record's stats.l2),
//    above `large_threshold` (default 10): the update destroyed the weight.
//    Critical, when it holds at two judged steps in a row (a run that
//    diverges keeps doing it). Not judged when w_prev was zero
//    (zero-initialized layers, LoRA's B) or unknown.
//  - too small: over the norm of w plus `epsilon` (default 1e-9), below
//    `small_threshold` (default 1e-8): the weight does not learn (the
//    default set confirms it over 3 steps). An update of exactly 0 at a step
//    where other parameters (judged weights, or biases, whose deltas are
//    captured for this) changed: the weight is not trained. At a step where
//    none changed the optimizer did not step, which gradient accumulation
//    does for several steps in a row: a finding only once
//    `steps_without_update` (default 64) such steps came in a row. Small
//    ratios that a weight reached gradually (from below small_threshold *
//    `anneal_factor`, default 100: a schedule annealing the learning rate
//    towards 0) are not judged until the ratio recovers.
// At every saved step where that holds. With `num_steps` > 0 a step is judged
// only when the tensor's previous save (as seen by this rule) is at most
// num_steps global steps earlier, so the delta spans few updates. A weight
// whose gradient is registered ("gradient/<name>") but was not captured at
// the step is frozen (no gradient: requires_grad is off) and is not judged.
// Nor is a small update at a step where a gradient held NaN/Inf, or after one
// (the update between two saves is read after the optimizer step or before
// it): the optimizer skipped that update (dynamic loss scaling), and
// nan_origin judges such steps (SkippedUpdates).
// Needs: delta capture of the selected weights at every training step.
// Default selection: collection "weights"; TRAIN and GLOBAL steps unless
// modes are given (weights do not change in EVAL/PREDICT).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "rules/tensor/tensor_rule.h"
#include "rules/tensor/tensor_rules.h"

namespace tstat::rules {
namespace {

struct UpdateRatioParams {
  std::int64_t num_steps = 0;  // 0 = any distance (smdebug: None)
  double large_threshold = 10.0;
  double small_threshold = 1e-8;
  double epsilon = 1e-9;
  std::int64_t steps_without_update = 64;  // 0, 1: at once
  double anneal_factor = 100.0;            // 0: every small ratio is judged
};

class WeightUpdateRatioRule final : public TensorRuleT<WeightUpdateRatioRule> {
 public:
  WeightUpdateRatioRule(const RuleSpec& spec, UpdateRatioParams p)
      : TensorRuleT(spec, {"weights"},
                    "delta statistics (capture with delta against the previous save)"),
        p_(p) {}

 public:
  // Check() reads the stats and the delta.
  static void Prefetch(const TensorStatsRecord* r) {
    TensorRuleT::Prefetch(r);
    PrefetchRecordBytes(r, offsetof(TensorStatsRecord, delta), sizeof(r->delta));
  }

  bool ModeAllowed(Mode m) const override { return TrainModeAllowed(m); }

  CaptureNeeds Needs(const TensorInfo& t) const override {
    if (t.kind != TensorKind::kTensor) return {};
    // Biases are not judged, but their updates tell whether the optimizer
    // stepped when no judged weight changed.
    if (!Takes(t) && !IsBias(t)) return {};
    CaptureNeeds n;
    n.stats = true;
    n.delta = true;
    n.modes = JudgedModes(CaptureNeeds::TrainModes());
    return n;
  }

  void EvaluateStep(const IndexedStep& step, std::vector<Finding>* findings) override {
    // Which weights are frozen depends only on the tensors the step lists:
    // worked out once per layout, not by name for every record.
    if (step.indexer != layout_indexer_ || step.layout != layout_ || step.layout == 0) {
      FindFrozen(step);
      layout_indexer_ = step.indexer;
      layout_ = step.layout;
    }
    unchanged_.clear();
    changed_any_ = false;
    if (ModeAllowed(step.view->key.mode)) {
      changed_any_ = BiasesChanged(*step.view);
      const bool now = GradientsNonFinite(*step.view);
      bool& before = gradients_nonfinite_[step.view->worker];
      update_skipped_ = now || before;
      before = now;
    }
    TensorRule::EvaluateStep(step, findings);
  }

  void Check(const StepView& step, const TensorInfo& info, const TensorStatsRecord& r,
             std::vector<Finding>* findings) override {
    if (Frozen(info)) return;
    NoteNeeded(step, info, r.delta.has_value());
    const std::int64_t now = step.key.global_step;
    bool first = false;
    Last& last = last_.Get(PerTensor<Last>::WorkerGroup(step.worker), info.id, &first);
    if (first) last.step = now;
    const std::int64_t previous = last.step;
    const double previous_l2 = first ? -1.0 : last.l2;
    last.step = now;
    last.l2 = r.has_stats ? r.stats.l2 : -1.0;
    if (!r.has_stats || !r.delta.has_value() || r.delta->count == 0) return;
    const bool unchanged = r.delta->l2 == 0;
    changed_any_ = changed_any_ || !unchanged;
    if (p_.num_steps > 0 && (first || now - previous > p_.num_steps)) return;
    const double large_ratio = previous_l2 > 0 ? r.delta->l2 / previous_l2 : 0.0;
    const double small_ratio = r.delta->l2 / (r.stats.l2 + p_.epsilon);
    const bool large = std::isfinite(large_ratio) && large_ratio > p_.large_threshold;
    const bool small = std::isfinite(small_ratio) && small_ratio < p_.small_threshold;
    const bool annealed = Annealed(&last, small, small_ratio);
    if (!large && (update_skipped_ || !small || annealed)) return;
    const double ratio = large ? large_ratio : small_ratio;
    const double threshold = large ? p_.large_threshold : p_.small_threshold;
    const std::string msg =
        large ? "updates of " + info.name + " are too large: |dw|/|w_prev| = " + Num(ratio) +
                    " > large_threshold " + Num(threshold) +
                    "; lower the learning rate or clip gradients"
              : "updates of " + info.name + " are too small: |dw|/|w| = " + Num(ratio) +
                    " < small_threshold " + Num(threshold) +
                    "; the learning rate may be too low, gradients vanishing, or the weight not "
                    "trained";
    Finding f = MakeFinding(step, info.name, msg,
                            {{large ? "large_ratio" : "small_ratio", ratio},
                             {"delta_l2", r.delta->l2},
                             {"l2", r.stats.l2},
                             {large ? "large_threshold" : "small_threshold", threshold}});
    f.lower_is_worse = !large;
    if (large) {
      f.severity = std::max(f.severity, Severity::kCritical);
      f.confirm_steps = 2;
    }
    if (!large && unchanged) {  // EndStep decides: no optimizer step, or not trained
      unchanged_.push_back(std::move(f));
      return;
    }
    findings->push_back(std::move(f));
  }

  void EndStep(const StepView& step, std::vector<Finding>* findings) override {
    std::int64_t& run = steps_without_update_[step.worker];
    if (changed_any_) {
      run = 0;
      for (Finding& f : unchanged_) {
        f.message +=
            "; it did not change at all while other parameters did: it is not trained "
            "(its gradient is 0 - see dead_relu and all_zero - or it is not in the "
            "optimizer's parameters, or its group's learning rate is 0)";
        findings->push_back(std::move(f));
      }
    } else if (!unchanged_.empty()) {
      ++run;
      if (run >= p_.steps_without_update) {
        for (Finding& f : unchanged_) {
          f.message += "; no weight has changed for " + std::to_string(run) +
                       " steps: the optimizer does not step (a learning rate of 0, or "
                       "optimizer.step() not called; gradient accumulation over more steps: "
                       "raise steps_without_update)";
          findings->push_back(std::move(f));
        }
      }
    }
    unchanged_.clear();
  }

 private:
  // Frozen weights: a registered gradient ("gradient/<name>") without a
  // record at this step.
  bool Frozen(const TensorInfo& info) const {
    return info.id < frozen_.size() && frozen_[info.id] != 0;
  }
  // Whether a gradient of the step holds NaN/Inf.
  bool GradientsNonFinite(const StepView& step) const {
    for (std::uint32_t i : gradient_records_) {
      if (step.records == nullptr || i >= step.records->size()) break;
      if (HoldsNonFinite((*step.records)[i])) return true;
    }
    return false;
  }
  static bool IsBias(const TensorInfo& t) { return InCollection(t, "biases"); }
  // Whether a bias of the step changed since its previous save.
  bool BiasesChanged(const StepView& step) const {
    for (std::uint32_t i : bias_records_) {
      if (step.records == nullptr || i >= step.records->size()) break;
      const std::optional<DeltaStats>& d = (*step.records)[i].delta;
      if (d.has_value() && d->count > 0 && !(d->l2 == 0)) return true;
    }
    return false;
  }
  void FindFrozen(const IndexedStep& step) {
    frozen_.clear();
    gradient_records_.clear();
    bias_records_.clear();
    if (step.view->catalog == nullptr) return;
    const std::string prefix = "gradient/";
    std::unordered_set<std::string> captured;  // the step's gradients
    for (std::size_t i = 0; i < step.size; ++i) {
      const TensorInfo* t = step.infos[i];
      if (t != nullptr && t->name.rfind(prefix, 0) == 0) {
        captured.insert(t->name);
        gradient_records_.push_back(static_cast<std::uint32_t>(i));
      } else if (t != nullptr && IsBias(*t) && !Takes(*t)) {
        bias_records_.push_back(static_cast<std::uint32_t>(i));
      }
    }
    std::unordered_set<std::string> registered;  // every registered gradient
    std::vector<const TensorInfo*> weights;
    // Ids are dense per worker: the catalog lists them from 0.
    for (std::uint32_t id = 0; id < (1u << 22); ++id) {
      const TensorInfo* t = step.view->catalog->Find(id);
      if (t == nullptr) break;
      if (t->name.rfind(prefix, 0) == 0) {
        registered.insert(t->name);
      } else {
        weights.push_back(t);
      }
    }
    for (const TensorInfo* w : weights) {
      const std::string gradient = prefix + w->name;
      if (registered.count(gradient) == 0 || captured.count(gradient) != 0) continue;
      if (frozen_.size() <= w->id) frozen_.resize(w->id + 1, 0);
      frozen_[w->id] = 1;
    }
  }
  const void* layout_indexer_ = nullptr;
  std::uint64_t layout_ = 0;
  std::vector<std::uint8_t> frozen_;                   // by tensor id, for the current layout
  std::vector<std::uint32_t> gradient_records_;        // record indices, current layout
  std::vector<std::uint32_t> bias_records_;            // unselected biases, ditto
  std::unordered_map<int, bool> gradients_nonfinite_;  // by worker: its last judged step
  bool update_skipped_ = false;                        // of the step being judged
  // This step: the small-update findings of weights that did not change at
  // all, and whether any judged weight changed.
  std::vector<Finding> unchanged_;
  bool changed_any_ = false;
  std::unordered_map<int, std::int64_t> steps_without_update_;  // by worker, in a row

  // Where a weight's small ratios come from, decided when they begin: after
  // a ratio already below small_threshold * anneal_factor the updates faded
  // gradually - a learning-rate schedule annealing towards 0 at the end of
  // training (OneCycle, cosine), or updates rounding away at a tiny
  // learning rate - and are not judged; from a healthy ratio (a learning
  // rate that dropped at once) or at the first judged step, they are.
  enum class Small : std::uint8_t { kNo, kJudged, kAnnealed };
  struct Last {  // the tensor's previous judged save
    std::int64_t step = 0;
    double l2 = -1.0;
    double ratio = -1.0;  // its small ratio; -1: none yet
    Small small = Small::kNo;
  };
  bool Annealed(Last* last, bool small, double ratio) const {
    const double before = last->ratio;
    if (std::isfinite(ratio)) last->ratio = ratio;
    if (!small) {
      last->small = Small::kNo;
    } else if (last->small == Small::kNo) {
      const bool faded = before >= 0 && before < p_.small_threshold * p_.anneal_factor;
      last->small = faded ? Small::kAnnealed : Small::kJudged;
    }
    return last->small == Small::kAnnealed;
  }
  UpdateRatioParams p_;
  PerTensor<Last> last_;
};

}  // namespace

Result<std::unique_ptr<Rule>> CreateWeightUpdateRatioRule(const RuleSpec& spec) {
  const std::string label = RuleLabel(spec);
  ParamReader p(label, spec.parameters);
  UpdateRatioParams u;
  u.num_steps = p.Int("num_steps", 0);
  p.CheckRange("num_steps", static_cast<double>(u.num_steps), 0, 1e12);
  u.large_threshold = p.Double("large_threshold", 10.0);
  u.small_threshold = p.Double("small_threshold", 1e-8);
  u.epsilon = p.Double("epsilon", 1e-9);
  u.steps_without_update = p.Int("steps_without_update", u.steps_without_update);
  u.anneal_factor = p.Double("anneal_factor", u.anneal_factor);
  p.CheckRange("anneal_factor", u.anneal_factor, 0, kNoLimit);
  p.CheckRange("steps_without_update", static_cast<double>(u.steps_without_update), 0, 1e12);
  p.CheckRange("small_threshold", u.small_threshold, 0, kNoLimit);
  p.CheckRange("large_threshold", u.large_threshold, u.small_threshold, kNoLimit);
  p.CheckRange("epsilon", u.epsilon, 0, kNoLimit);
  TSTAT_RETURN_IF_ERROR(p.Finish());
  return MakeRule<WeightUpdateRatioRule>(spec, u);
}

}  // namespace tstat::rules
