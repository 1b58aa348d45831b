// underfitting (tstat's own; smdebug has no such rule): the training loss
// does not come down.
//
// Per worker and training loss (TRAIN or GLOBAL mode; loss_source.h), over
// mode steps:
//   initial = the mean of the first `window` saved values (the first of them
//             at step f);
//   current = the mean of the last `window` saved values.
// At every saved step s >= f + num_steps, the loss underfits when
//   current > initial - (1 - fraction) * |initial|   (it has not fallen to
//             `fraction` of its initial value; 0.9 = it must drop 10%), or
//   current > threshold                              (when threshold is set).
// The rule fires at the first such step, and again only after the loss
// stopped underfitting at some check step.
#include <cmath>
#include <deque>

#include "rules/run/loss_source.h"
#include "rules/run/run_rules.h"

namespace tstat::rules::run {
namespace {

class Underfitting final : public LossRuleBase {
 public:
  Underfitting(const RuleSpec& spec, ParamReader* p, Status*) : LossRuleBase(spec, p) {
    num_steps_ = p->Int("num_steps", 100);
    p->CheckRange("num_steps", static_cast<double>(num_steps_), 0, 1e15);
    window_ = p->Int("window", 5);
    p->CheckRange("window", static_cast<double>(window_), 1, 1e6);
    fraction_ = p->Double("fraction", 0.9);
    p->CheckRange("fraction", fraction_, 0.0, 1.0);
    has_threshold_ = p->Has("threshold");
    threshold_ = p->Double("threshold", 0.0);
  }

  Status Init() { return RuleBase::Init(); }

  void EvaluateStep(const IndexedStep& indexed, std::vector<Finding>* findings) override {
    const StepView& step = *indexed.view;
    CollectLosses(indexed, &losses_);
    if (!IsTrainingMode(step.key.mode)) return;
    const std::int64_t at = step.key.mode_step;
    for (const LossValue& loss : losses_) {
      saw_training_ = true;
      Series& s = series_[SeriesKey{step.worker, loss.id, step.key.mode}];
      if (s.n > 0 && at <= s.last_step) continue;  // repeated step
      if (s.n == 0) s.first_step = at;
      s.last_step = at;
      ++s.n;
      if (s.n <= window_) {
        s.initial_sum += loss.value;
      }
      s.recent.push_back(loss.value);
      if (static_cast<std::int64_t>(s.recent.size()) > window_) s.recent.pop_front();
      if (s.n < window_ || at < s.first_step + num_steps_) continue;
      Check(step, *loss.name, &s, findings);
    }
  }

 private:
  struct Series {
    std::int64_t n = 0, first_step = 0, last_step = 0;
    double initial_sum = 0.0;
    std::deque<double> recent;
    bool fired = false;
  };

  void Check(const StepView& step, const std::string& name, Series* s,
             std::vector<Finding>* findings) {
    const double initial = s->initial_sum / static_cast<double>(window_);
    double current = 0.0;
    for (double v : s->recent) current += v;
    current /= static_cast<double>(s->recent.size());
    const double bar = initial - (1.0 - fraction_) * std::fabs(initial);
    const bool above_fraction = !(current <= bar);
    const bool above_threshold = has_threshold_ && !(current <= threshold_);
    if (!above_fraction && !above_threshold) {
      s->fired = false;
      return;
    }
    if (s->fired) return;
    s->fired = true;
    std::string why;
    if (above_fraction) {
      why = "has not fallen below " + Num(fraction_) + " x its initial value " + Num(initial);
    }
    if (above_threshold) {
      why += (why.empty() ? "" : " and ") + std::string("is above threshold ") + Num(threshold_);
    }
    std::vector<std::pair<std::string, double>> values = {
        {"loss", current},
        {"initial_loss", initial},
        {"fraction", fraction_},
        {"steps", static_cast<double>(step.key.mode_step - s->first_step)}};
    if (has_threshold_) values.emplace_back("threshold", threshold_);
    findings->push_back(
        MakeFinding(step, name,
                    "underfitting: training loss '" + name + "' (mean of the last " +
                        std::to_string(window_) + " saved values " + Num(current) + ") " + why +
                        " after " + std::to_string(step.key.mode_step - s->first_step) + " steps",
                    std::move(values)));
  }

  std::string MissingData() const override {
    if (!saw_training_) {
      return "underfitting needs training losses (TRAIN or GLOBAL mode), none was saved";
    }
    return {};
  }

  std::int64_t num_steps_ = 100;
  std::int64_t window_ = 5;
  double fraction_ = 0.9;
  bool has_threshold_ = false;
  double threshold_ = 0.0;
  bool saw_training_ = false;
  std::vector<LossValue> losses_;
  std::unordered_map<SeriesKey, Series, SeriesKeyHash> series_;
};

}  // namespace

Result<std::unique_ptr<Rule>> MakeUnderfitting(const RuleSpec& spec) {
  return BuildRule<Underfitting>(spec);
}

}  // namespace tstat::rules::run
