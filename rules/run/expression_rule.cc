// "expression" rules: a condition written in the config.
//
// Parameters: `when` (required; the language of rules/engine/expression.h, e.g.
// "l2 > 1e3 || nan_count > 0") and `for_steps` (default 1). Selected tensors:
// collection_names / tensor_regex, or every tensor when neither is given.
// Scalars are judged too, as one-element tensors (count 1; min = max = mean
// = sum = the value; l1 = l2 = amax = |value|; the non-finite counts set when
// it is NaN/Inf).
// Per worker and tensor, over the tensor's saved steps (a step where the
// tensor was not saved neither extends nor breaks the streak): the condition
// holds when the expression is non-zero (NaN counts as false). The rule fires
// at the step where it has held for `for_steps` consecutive saved steps, and
// fires again for that tensor only after the condition was false once
// (edge-triggered).
#include <cmath>
#include <unordered_map>

#include "rules/engine/expression.h"
#include "rules/engine/rule_base.h"
#include "rules/run/run_rules.h"

namespace tstat::rules::run {
namespace {

TensorStats ScalarStats(double v) {
  TensorStats s;
  s.count = 1;
  if (std::isnan(v)) {
    s.nan_count = 1;
    return s;
  }
  if (std::isinf(v)) {
    (v > 0 ? s.pos_inf_count : s.neg_inf_count) = 1;
    s.neg_count = v < 0 ? 1 : 0;
    return s;
  }
  s.finite_count = 1;
  s.zero_count = v == 0.0 ? 1 : 0;
  s.neg_count = v < 0.0 ? 1 : 0;
  s.min = s.max = s.sum = s.mean = v;
  s.l1 = s.l2 = s.amax = std::fabs(v);
  return s;
}

class ExpressionRule final : public RuleBase {
 public:
  ExpressionRule(const RuleSpec& spec, ParamReader* p, Status* error)
      : RuleBase(SelectAllWhenUnset(spec), {}) {
    when_ = p->String("when", "");
    if (when_.empty() && error->ok()) {
      *error = Status::InvalidArgument("rule " + spec.type +
                                       ": parameter when is required (the condition, e.g. "
                                       "\"l2 > 1e3 || nan_count > 0\")");
    }
    for_steps_ = p->Int("for_steps", 1);
    p->CheckRange("for_steps", static_cast<double>(for_steps_), 1, 1e15);
  }

  Status Init() {
    TSTAT_RETURN_IF_ERROR(RuleBase::Init());
    Result<std::shared_ptr<const Expression>> e = Expression::Parse(when_);
    if (!e.ok()) return e.status().WithContext("rule " + spec().type + ": parameter when");
    expr_ = std::move(e).value();
    return Status::OK();
  }

  void Evaluate(const StepView& step, std::vector<Finding>* findings) override {
    EvaluateViaIndex(step, findings);
  }

  void EvaluateStep(const IndexedStep& indexed, std::vector<Finding>* findings) override {
    const StepView& step = *indexed.view;
    if (!ModeSelected(step.key.mode)) return;
    ExpressionInput in;
    in.step = step.key;
    if (step.records != nullptr && !saw_tensors()) {
      // Until the selection was first asked about (a record with stats),
      // each record is looked at, as the "matched nothing" warning counts.
      for (const TensorStatsRecord& r : *step.records) {
        if (!r.has_stats || !Selected(step, r.tensor_id)) continue;
        in.stats = &r.stats;
        Judge(step, r.tensor_id, in, findings);
      }
    } else if (step.records != nullptr) {
      for (std::uint32_t i : SelectedRecords(indexed)) {
        const TensorStatsRecord& r = (*step.records)[i];
        if (!r.has_stats) continue;
        NoteSelection(true, true);
        in.stats = &r.stats;
        Judge(step, r.tensor_id, in, findings);
      }
    }
    if (step.scalars != nullptr) {
      for (const ScalarRecord& s : *step.scalars) {
        if (!Selected(step, s.tensor_id)) continue;
        const TensorStats stats = ScalarStats(s.value);
        in.stats = &stats;
        Judge(step, s.tensor_id, in, findings);
      }
    }
  }

 private:
  struct Streak {
    std::int64_t length = 0;
    bool fired = false;
  };

  void Judge(const StepView& step, std::uint32_t id, const ExpressionInput& in,
             std::vector<Finding>* findings) {
    const double v = expr_->Evaluate(in);
    Streak& s = streaks_.Get(PerTensor<Streak>::WorkerGroup(step.worker), id);
    if (!(v != 0.0) || std::isnan(v)) {
      s.length = 0;
      s.fired = false;
      return;
    }
    ++s.length;
    if (s.fired || s.length < for_steps_) return;
    s.fired = true;
    const TensorInfo* t = Info(step, id);
    const std::string name = t ? t->name : "?";
    const TensorStats& st = *in.stats;
    findings->push_back(MakeFinding(
        step, name,
        "'" + name + "': " + when_ + " held for " + std::to_string(s.length) +
            " consecutive saved step(s) (min " + Num(st.min) + ", max " + Num(st.max) + ", mean " +
            Num(st.mean) + ", l2 " + Num(st.l2) + ", nan_count " + std::to_string(st.nan_count) +
            ", inf_count " + std::to_string(st.inf_count()) + ")",
        {{"consecutive_steps", static_cast<double>(s.length)},
         {"min", st.min},
         {"max", st.max},
         {"mean", st.mean},
         {"l2", st.l2},
         {"nan_count", static_cast<double>(st.nan_count)},
         {"inf_count", static_cast<double>(st.inf_count())}}));
  }

  std::string when_;
  std::int64_t for_steps_ = 1;
  std::shared_ptr<const Expression> expr_;
  PerTensor<Streak> streaks_;
};

}  // namespace

Result<std::unique_ptr<Rule>> MakeExpressionRule(const RuleSpec& spec) {
  return BuildRule<ExpressionRule>(spec);
}

}  // namespace tstat::rules::run
