// overfit (smdebug Overfit): the validation loss is well above the training
// loss.
//
// Per worker and loss (loss_source.h). Training values are those recorded in
// TRAIN mode (or GLOBAL, a run that never set a mode); a training phase is a
// run of consecutive saved training steps, ended by an EVAL step. The
// training loss T is the mean of the loss over the most recent training
// phase. At each EVAL step with global step >= start_step and a T:
//   ratio = (V - T) / |T|, V = the validation loss at that step.
// ratio > ratio_threshold extends a streak of consecutive EVAL steps, anything
// else ends it; the rule fires at the step where the streak reaches
// `patience`, and again only after a streak ended. The EVAL loss is paired
// with the training loss of the same name, or with the worker's only
// training loss when the names differ ("loss" vs "val_loss").
#include <cmath>

#include "rules/builtin_run/loss_source.h"
#include "rules/builtin_run/run_rules.h"

namespace tstat::rules::run {
namespace {

class Overfit final : public LossRuleBase {
 public:
  Overfit(const RuleSpec& spec, ParamReader* p, Status*) : LossRuleBase(spec, p) {
    start_step_ = p->Int("start_step", 0);
    patience_ = p->Int("patience", 1);
    p->CheckRange("patience", static_cast<double>(patience_), 1, 1e15);
    ratio_threshold_ = p->Double("ratio_threshold", 0.1);
  }

  Status Init() { return RuleBase::Init(); }

  void EvaluateStep(const IndexedStep& indexed, std::vector<Finding>* findings) override {
    const StepView& step = *indexed.view;
    CollectLosses(indexed, &losses_);
    const bool training = IsTrainingMode(step.key.mode);
    for (const LossValue& loss : losses_) {
      Worker& w = workers_[step.worker];
      if (training) {
        Train& t = w.train[loss.id];
        if (!t.open) {  // a new phase starts
          t.open = true;
          t.sum = 0.0;
          t.n = 0;
        }
        t.sum += loss.value;
        ++t.n;
        t.mean = t.sum / static_cast<double>(t.n);
        t.has_mean = true;
        continue;
      }
      if (step.key.mode != Mode::kEval) continue;
      saw_eval_ = true;
      // The EVAL step closes every open training phase of the worker.
      for (auto& kv : w.train) kv.second.open = false;
      const Train* ref = nullptr;
      auto it = w.train.find(loss.id);
      if (it != w.train.end() && it->second.has_mean) {
        ref = &it->second;
      } else if (w.train.size() == 1 && w.train.begin()->second.has_mean) {
        ref = &w.train.begin()->second;
      }
      if (ref == nullptr) continue;
      paired_ = true;
      if (step.key.global_step < start_step_) continue;
      Check(step, *loss.name, loss.value, ref->mean, &w.streak[loss.id], findings);
    }
  }

 private:
  struct Train {
    double sum = 0.0, mean = 0.0;
    std::int64_t n = 0;
    bool open = false, has_mean = false;
  };
  struct Streak {
    std::int64_t length = 0;
    bool fired = false;
  };
  struct Worker {
    std::unordered_map<std::uint32_t, Train> train;
    std::unordered_map<std::uint32_t, Streak> streak;
  };

  void Check(const StepView& step, const std::string& name, double v, double t, Streak* s,
             std::vector<Finding>* findings) {
    const double ratio = t != 0.0 ? (v - t) / std::fabs(t) : (v > t ? INFINITY : 0.0);
    if (!(ratio > ratio_threshold_)) {
      s->length = 0;
      s->fired = false;
      return;
    }
    ++s->length;
    if (s->fired || s->length < patience_) return;
    s->fired = true;
    findings->push_back(MakeFinding(
        step, name,
        "overfitting: validation loss '" + name + "' " + Num(v) + " is " + Num(ratio * 100.0) +
            "% above the mean training loss " + Num(t) + " (ratio_threshold " +
            Num(ratio_threshold_) + ") for " + std::to_string(s->length) +
            " consecutive evaluation step(s)",
        {{"validation_loss", v},
         {"training_loss", t},
         {"ratio", ratio},
         {"ratio_threshold", ratio_threshold_},
         {"patience", static_cast<double>(patience_)}}));
  }

  std::string MissingData() const override {
    if (!saw_eval_) {
      return "overfit compares EVAL losses with TRAIN losses, but no loss was saved in EVAL "
             "mode (call SetMode(EVAL) around validation), so it checked nothing";
    }
    if (!paired_) {
      return "overfit found EVAL losses but no TRAIN (or GLOBAL) loss before them, so it "
             "checked nothing";
    }
    return {};
  }

  std::int64_t start_step_ = 0;
  std::int64_t patience_ = 1;
  double ratio_threshold_ = 0.1;
  bool saw_eval_ = false;
  bool paired_ = false;
  std::vector<LossValue> losses_;
  std::unordered_map<int, Worker> workers_;
};

}  // namespace

Result<std::unique_ptr<Rule>> MakeOverfit(const RuleSpec& spec) { return BuildRule<Overfit>(spec); }

}  // namespace tstat::rules::run
