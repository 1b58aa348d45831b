// overtraining (smdebug Overtraining): early-stopping logic - neither the
// training nor the validation loss improves any more.
//
// Per worker and loss (loss_source.h), one series for training values (TRAIN
// mode, or GLOBAL) and one for validation values (EVAL mode). Each series
// keeps its best (lowest) loss; a saved value v improves it when
// v < best - delta (delta is absolute, in loss units), which resets the
// series' count of saved steps without improvement; otherwise the count
// grows by one. The rule fires at the step where, for an EVAL loss and its
// training loss (same name, or the worker's only training loss), the
// training count >= patience_train AND the validation count >=
// patience_validation; it fires again only after one of them improved.
#include <cmath>

#include "rules/run/loss_source.h"
#include "rules/run/run_rules.h"

namespace tstat::rules::run {
namespace {

class Overtraining final : public LossRuleBase {
 public:
  Overtraining(const RuleSpec& spec, ParamReader* p, Status*) : LossRuleBase(spec, p) {
    patience_train_ = p->Int("patience_train", 5);
    p->CheckRange("patience_train", static_cast<double>(patience_train_), 1, 1e15);
    patience_validation_ = p->Int("patience_validation", 10);
    p->CheckRange("patience_validation", static_cast<double>(patience_validation_), 1, 1e15);
    delta_ = p->Double("delta", 0.01);
    p->CheckRange("delta", delta_, 0.0, 1e300);
  }

  Status Init() { return RuleBase::Init(); }

  void EvaluateStep(const IndexedStep& indexed, std::vector<Finding>* findings) override {
    const StepView& step = *indexed.view;
    CollectLosses(indexed, &losses_);
    const bool training = IsTrainingMode(step.key.mode);
    if (!training && step.key.mode != Mode::kEval) return;
    for (const LossValue& loss : losses_) {
      Worker& w = workers_[step.worker];
      if (training) {
        Update(&w.train[loss.id], step.key.mode_step, loss.value);
      } else {
        saw_eval_ = true;
        Update(&w.val[loss.id], step.key.mode_step, loss.value);
      }
    }
    if (losses_.empty()) return;
    Worker& w = workers_[step.worker];
    for (auto& [id, val] : w.val) {
      const Series* train = nullptr;
      auto it = w.train.find(id);
      if (it != w.train.end()) {
        train = &it->second;
      } else if (w.train.size() == 1) {
        train = &w.train.begin()->second;
      }
      if (train == nullptr) continue;
      const bool stalled = train->since >= patience_train_ && val.since >= patience_validation_;
      if (!stalled) {
        val.fired = false;
        continue;
      }
      if (val.fired) continue;
      val.fired = true;
      const TensorInfo* t = Info(step, id);
      const std::string name = t ? t->name : "?";
      findings->push_back(MakeFinding(
          step, name,
          "overtraining: the training loss has not improved by more than " + Num(delta_) + " for " +
              std::to_string(train->since) + " saved steps (best " + Num(train->best) +
              " at step " + std::to_string(train->best_step) + ") and validation loss '" + name +
              "' for " + std::to_string(val.since) + " (best " + Num(val.best) + " at step " +
              std::to_string(val.best_step) + "); consider stopping",
          {{"training_best", train->best},
           {"training_steps_without_improvement", static_cast<double>(train->since)},
           {"validation_best", val.best},
           {"validation_steps_without_improvement", static_cast<double>(val.since)},
           {"delta", delta_}}));
    }
  }

 private:
  struct Series {
    bool started = false;
    double best = 0.0;
    std::int64_t best_step = 0;
    std::int64_t since = 0;
    bool fired = false;  // validation series: fired for the current stall
  };
  struct Worker {
    std::unordered_map<std::uint32_t, Series> train, val;
  };

  void Update(Series* s, std::int64_t at, double v) {
    if (!s->started) {
      *s = Series{true, v, at, 0, false};
      return;
    }
    if (v < s->best - delta_ || (std::isnan(s->best) && !std::isnan(v))) {
      s->best = v;
      s->best_step = at;
      s->since = 0;
    } else {
      ++s->since;
    }
  }

  std::string MissingData() const override {
    if (!saw_eval_) {
      return "overtraining needs validation losses (EVAL mode) besides training losses, but "
             "none was saved, so it checked nothing";
    }
    return {};
  }

  std::int64_t patience_train_ = 5;
  std::int64_t patience_validation_ = 10;
  double delta_ = 0.01;
  bool saw_eval_ = false;
  std::vector<LossValue> losses_;
  std::unordered_map<int, Worker> workers_;
};

}  // namespace

Result<std::unique_ptr<Rule>> MakeOvertraining(const RuleSpec& spec) {
  return BuildRule<Overtraining>(spec);
}

}  // namespace tstat::rules::run
