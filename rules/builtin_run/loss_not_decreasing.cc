// loss_not_decreasing (smdebug LossNotDecreasing).
//
// Per loss series (worker, loss, mode; see loss_source.h), indexed by the
// mode step s of each saved value:
//  - The first saved step f starts the series; the last check is f.
//  - A saved step s is a check step when s >= last_check + num_steps. It is
//    compared with the base: the newest saved step <= s - num_steps. The rule
//    fires unless loss(s) < loss(base) - |loss(base)| * diff_percent / 100
//    (the loss fell by MORE than diff_percent %; with the default 0 any
//    decrease passes and an equal loss fires). A NaN/Inf loss fires. Then
//    last_check = s, whether it fired or not.
//    (smdebug's example: saved every 3, num_steps 10: 21 vs 9, then 33 vs 21.)
//  - increase_threshold_percent (default: off): at every saved step between
//    checks, fires once per check window when the loss rose more than that
//    percentage above the loss of the last check step.
// `mode` unset: each recorded mode is its own series; set: only that mode.
#include <cmath>
#include <deque>

#include "rules/builtin_run/loss_source.h"
#include "rules/builtin_run/run_rules.h"

namespace tstat::rules::run {
namespace {

class LossNotDecreasing final : public LossRuleBase {
 public:
  LossNotDecreasing(const RuleSpec& spec, ParamReader* p, Status* error)
      : LossRuleBase(spec, p) {
    num_steps_ = p->Int("num_steps", 10);
    p->CheckRange("num_steps", static_cast<double>(num_steps_), 1, 1e15);
    diff_percent_ = p->Double("diff_percent", 0.0);
    p->CheckRange("diff_percent", diff_percent_, 0.0, 100.0);
    increase_percent_ = p->Double("increase_threshold_percent", -1.0);
    if (p->Has("increase_threshold_percent")) {
      p->CheckRange("increase_threshold_percent", increase_percent_, 0.0, 1e300);
    }
    mode_ = ReadModeParam(spec, p, error);
  }

  Status Init() { return RuleBase::Init(); }

  void EvaluateStep(const IndexedStep& indexed, std::vector<Finding>* findings) override {
    const StepView& step = *indexed.view;
    if (mode_ && step.key.mode != *mode_) return;
    CollectLosses(indexed, &losses_);
    for (const LossValue& loss : losses_) {
      Series& s = series_[SeriesKey{step.worker, loss.id, step.key.mode}];
      Add(step, *loss.name, &s, step.key.mode_step, loss.value, findings);
    }
  }

 private:
  struct Series {
    std::deque<std::pair<std::int64_t, double>> history;  // (step, loss), since the last check
    std::int64_t last_check = 0;
    double last_check_loss = 0.0;
    bool increase_reported = false;
  };

  void Add(const StepView& step, const std::string& name, Series* s, std::int64_t at, double loss,
           std::vector<Finding>* findings) {
    if (s->history.empty()) {
      s->history.emplace_back(at, loss);
      s->last_check = at;
      s->last_check_loss = loss;
      return;
    }
    if (at <= s->history.back().first) return;  // a repeated step: already seen
    s->history.emplace_back(at, loss);
    if (at >= s->last_check + num_steps_) {
      Check(step, name, s, at, loss, findings);
      return;
    }
    if (increase_percent_ >= 0.0 && !s->increase_reported && std::isfinite(s->last_check_loss) &&
        loss > s->last_check_loss + std::fabs(s->last_check_loss) * increase_percent_ / 100.0) {
      s->increase_reported = true;
      const double pct = Percent(loss - s->last_check_loss, s->last_check_loss);
      findings->push_back(MakeFinding(
          step, name,
          "loss '" + name + "' rose " + Num(pct) + "% (more than increase_threshold_percent " +
              Num(increase_percent_) + "%) since step " + std::to_string(s->last_check) + ": " +
              Num(s->last_check_loss) + " -> " + Num(loss),
          {{"loss", loss},
           {"base_loss", s->last_check_loss},
           {"base_step", static_cast<double>(s->last_check)},
           {"increase_percent", pct},
           {"increase_threshold_percent", increase_percent_}}));
    }
  }

  void Check(const StepView& step, const std::string& name, Series* s, std::int64_t at,
             double loss, std::vector<Finding>* findings) {
    const std::int64_t limit = at - num_steps_;
    std::size_t base = 0;
    for (std::size_t i = 0; i < s->history.size(); ++i) {
      if (s->history[i].first <= limit) base = i;
    }
    const std::int64_t base_step = s->history[base].first;
    const double base_loss = s->history[base].second;
    const double bar = base_loss - std::fabs(base_loss) * diff_percent_ / 100.0;
    if (!(loss < bar)) {
      const double decrease = Percent(base_loss - loss, base_loss);
      std::string what = std::isfinite(loss) ? "did not decrease by more than " +
                                                   Num(diff_percent_) + "% over " +
                                                   std::to_string(at - base_step) + " steps"
                                             : "is not finite";
      findings->push_back(MakeFinding(
          step, name,
          "loss '" + name + "' " + what + ": " + Num(base_loss) + " at step " +
              std::to_string(base_step) + " -> " + Num(loss) + " at step " + std::to_string(at),
          {{"loss", loss},
           {"base_loss", base_loss},
           {"base_step", static_cast<double>(base_step)},
           {"decrease_percent", decrease},
           {"diff_percent", diff_percent_},
           {"num_steps", static_cast<double>(num_steps_)}}));
    }
    s->last_check = at;
    s->last_check_loss = loss;
    s->increase_reported = false;
    // Later bases are >= this step: drop everything older.
    while (!s->history.empty() && s->history.front().first < at) s->history.pop_front();
  }

  static double Percent(double delta, double base) {
    return base != 0.0 ? delta / std::fabs(base) * 100.0 : (delta == 0.0 ? 0.0 : INFINITY);
  }

  std::int64_t num_steps_ = 10;
  double diff_percent_ = 0.0;
  double increase_percent_ = -1.0;  // < 0: off
  std::optional<Mode> mode_;
  std::vector<LossValue> losses_;
  std::unordered_map<SeriesKey, Series, SeriesKeyHash> series_;
};

}  // namespace

Result<std::unique_ptr<Rule>> MakeLossNotDecreasing(const RuleSpec& spec) {
  return BuildRule<LossNotDecreasing>(spec);
}

}  // namespace tstat::rules::run
