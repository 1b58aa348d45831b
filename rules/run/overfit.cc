// overfit (smdebug Overfit): the model gets worse on the validation data
// while it still gets better on the training data.
//
// Per worker and loss (loss_source.h). Training values are those recorded in
// TRAIN mode (or GLOBAL, a run that never set a mode); an evaluation is a run
// of consecutive EVAL steps, ended by the next training step (or the end of
// the run). The EVAL loss is paired with the training loss of the same name,
// or with the worker's only training loss when the names differ ("loss" vs
// "val_loss"). Two ways to judge:
//
// trend (the default): after each evaluation, V = the mean of the EVAL
//   losses of the last `window` (default 3) evaluations and T = the mean of
//   the training losses of the last `train_window` (default 4) training
//   phases (the steps between two evaluations). The best is the lowest V so
//   far, with its T (T_best). The model overfits when
//   V > V_best * (1 + rise_percent / 100) (default 25) and
//   T < T_best * (1 - train_drop_percent / 100) (default 40): validation got
//   clearly worse while training clearly improved. It also overfits when
//   the validation loss rose at each of the last `creep_evaluations`
//   (default 5) evaluations and ended more than `creep_percent` (default 5)
//   above V_best, with the same training condition: a slow, steady climb
//   that a memorizing model shows. Windows, not single
//   evaluations: a noisy validation loss dips and bumps by tens of percent
//   in healthy training, and so do a few minibatch losses. Once `patience`
//   (default 1) evaluations in a row overfit, the rule fires at every
//   training step until an evaluation does not; its finding is about the
//   training loss (the tensor present at those steps). A validation loss
//   that is merely above the training loss (every run's generalisation gap)
//   is not a finding.
// gap (smdebug's; when ratio_threshold or start_step is given): at each EVAL
//   step with global step >= start_step, ratio = (V - T) / |T| with V that
//   step's loss and T the mean of the most recent training phase;
//   ratio > ratio_threshold (0.1) extends a streak of EVAL steps, anything
//   else ends it; it fires at the step where the streak reaches `patience`,
//   and again only after a streak ended.
#include <algorithm>
#include <cmath>
#include <deque>

#include "rules/run/loss_source.h"
#include "rules/run/run_rules.h"

namespace tstat::rules::run {
namespace {

class Overfit final : public LossRuleBase {
 public:
  Overfit(const RuleSpec& spec, ParamReader* p, Status*) : LossRuleBase(spec, p) {
    gap_ = p->Has("ratio_threshold") || p->Has("start_step");
    start_step_ = p->Int("start_step", 0);
    patience_ = p->Int("patience", 1);
    p->CheckRange("patience", static_cast<double>(patience_), 1, 1e15);
    ratio_threshold_ = p->Double("ratio_threshold", 0.1);
    rise_percent_ = p->Double("rise_percent", 25.0);
    p->CheckRange("rise_percent", rise_percent_, 0.0, 1e6);
    train_drop_percent_ = p->Double("train_drop_percent", 40.0);
    p->CheckRange("train_drop_percent", train_drop_percent_, 0.0, 100.0);
    window_ = p->Int("window", 3);
    p->CheckRange("window", static_cast<double>(window_), 1, 1e6);
    train_window_ = p->Int("train_window", 4);
    p->CheckRange("train_window", static_cast<double>(train_window_), 1, 1e6);
    creep_evaluations_ = p->Int("creep_evaluations", 5);
    p->CheckRange("creep_evaluations", static_cast<double>(creep_evaluations_), 1, 1e6);
    creep_percent_ = p->Double("creep_percent", 5.0);
    p->CheckRange("creep_percent", creep_percent_, 0.0, 1e6);
  }

  Status Init() { return RuleBase::Init(); }

  void EvaluateStep(const IndexedStep& indexed, std::vector<Finding>* findings) override {
    const StepView& step = *indexed.view;
    CollectLosses(indexed, &losses_);
    const bool training = IsTrainingMode(step.key.mode);
    if (!training && step.key.mode != Mode::kEval) return;
    Worker& w = workers_[step.worker];
    if (training && !gap_) EndEvaluation(&w);
    for (const LossValue& loss : losses_) {
      if (training) {
        Train& t = w.train[loss.id];
        t.name = *loss.name;
        if (!t.open) {  // a new phase starts
          t.open = true;
          t.sum = 0.0;
          t.n = 0;
        }
        if (!std::isfinite(loss.value)) continue;
        t.sum += loss.value;
        ++t.n;
        t.mean = t.sum / static_cast<double>(t.n);
        t.has_mean = true;
        t.phase_sum += loss.value;
        ++t.phase_n;
        continue;
      }
      saw_eval_ = true;
      // The EVAL step closes every open training phase of the worker.
      for (auto& kv : w.train) kv.second.open = false;
      Train* ref = Pair(&w, loss.id);
      if (ref == nullptr) continue;
      paired_ = true;
      if (gap_) {
        if (step.key.global_step >= start_step_) {
          CheckGap(step, *loss.name, loss.value, ref->mean, &w.streak[loss.id], findings);
        }
        continue;
      }
      Eval& e = w.eval[loss.id];
      e.name = *loss.name;
      e.step = step.key;
      e.sum += std::isfinite(loss.value) ? loss.value : 0.0;
      e.n += std::isfinite(loss.value) ? 1 : 0;
      e.train = ref;
    }
    if (training && !gap_) Report(step, w, findings);
  }

  void Finish(std::vector<Finding>* findings) override {
    (void)findings;  // an evaluation at the very end has no training step to be reported at
  }

 private:
  struct Train {
    std::string name;
    double sum = 0.0, mean = 0.0;
    std::int64_t n = 0;
    bool open = false, has_mean = false;
    // The training losses since the last completed evaluation (trend).
    double phase_sum = 0.0;
    std::int64_t phase_n = 0;
  };
  struct Eval {  // the evaluation going on, per EVAL loss
    std::string name;
    StepKey step;  // its last step
    double sum = 0.0;
    std::int64_t n = 0;
    Train* train = nullptr;
  };
  struct Trend {  // per EVAL loss, over evaluations
    // The last max(window, train_window) evaluations: (mean EVAL loss, sum
    // and count of the training losses before it).
    struct Point {
      double v = 0.0, t_sum = 0.0;
      std::int64_t t_n = 0;
    };
    std::deque<Point> points;
    // The single evaluations' losses, newest last (creep_evaluations + 1).
    std::deque<double> recent;
    bool has_best = false;
    double best = 0.0, train_at_best = 0.0;
    StepKey best_step;
    std::int64_t streak = 0;
    // The last evaluation, when it overfits (streak >= patience).
    bool overfits = false;
    double v = 0.0, t = 0.0;
    StepKey step;
    std::string name, train_name;
  };
  struct Streak {
    std::int64_t length = 0;
    bool fired = false;
  };
  struct Worker {
    std::unordered_map<std::uint32_t, Train> train;
    std::unordered_map<std::uint32_t, Eval> eval;
    std::unordered_map<std::uint32_t, Trend> trend;
    std::unordered_map<std::uint32_t, Streak> streak;
  };

  // Whether every evaluation of `recent` (creep_evaluations + 1 of them) was
  // above the one before.
  bool Creeps(const std::deque<double>& recent) const {
    if (static_cast<std::int64_t>(recent.size()) <= creep_evaluations_) return false;
    for (std::size_t i = 1; i < recent.size(); ++i) {
      if (!(recent[i] > recent[i - 1])) return false;
    }
    return true;
  }

  static Train* Pair(Worker* w, std::uint32_t id) {
    auto it = w->train.find(id);
    if (it != w->train.end() && it->second.has_mean) return &it->second;
    if (w->train.size() == 1 && w->train.begin()->second.has_mean) return &w->train.begin()->second;
    return nullptr;
  }

  // A training step after EVAL steps: the evaluation is complete.
  void EndEvaluation(Worker* w) {
    for (auto& [id, e] : w->eval) {
      if (e.n == 0 || e.train == nullptr || e.train->phase_n == 0) continue;
      Trend& tr = w->trend[id];
      tr.name = e.name;
      tr.train_name = e.train->name;
      const double latest = e.sum / static_cast<double>(e.n);
      tr.points.push_back({latest, e.train->phase_sum, e.train->phase_n});
      if (static_cast<std::int64_t>(tr.points.size()) > std::max(window_, train_window_)) {
        tr.points.pop_front();
      }
      tr.recent.push_back(latest);
      if (static_cast<std::int64_t>(tr.recent.size()) > creep_evaluations_ + 1)
        tr.recent.pop_front();
      e.train->phase_sum = 0.0;
      e.train->phase_n = 0;
      double v = 0.0, t_sum = 0.0;
      std::int64_t v_n = 0, t_n = 0, age = static_cast<std::int64_t>(tr.points.size());
      for (const Trend::Point& p : tr.points) {
        if (age <= window_) {
          v += p.v;
          ++v_n;
        }
        if (age-- <= train_window_) {
          t_sum += p.t_sum;
          t_n += p.t_n;
        }
      }
      v /= static_cast<double>(v_n);
      const double t = t_sum / static_cast<double>(t_n);
      if (!tr.has_best || v < tr.best) {
        tr.has_best = true;
        tr.best = v;
        tr.train_at_best = t;
        tr.best_step = e.step;
        tr.streak = 0;
      } else if (t < tr.train_at_best * (1.0 - train_drop_percent_ / 100.0) &&
                 (v > tr.best * (1.0 + rise_percent_ / 100.0) ||
                  (Creeps(tr.recent) && latest > tr.best * (1.0 + creep_percent_ / 100.0)))) {
        ++tr.streak;
      } else {
        tr.streak = 0;
      }
      tr.overfits = tr.streak >= patience_;
      tr.v = v;
      tr.t = t;
      tr.step = e.step;
    }
    w->eval.clear();
  }

  void Report(const StepView& step, const Worker& w, std::vector<Finding>* findings) {
    for (const auto& [id, tr] : w.trend) {
      if (!tr.overfits) continue;
      const double rise = (tr.v / tr.best - 1.0) * 100.0;
      findings->push_back(MakeFinding(
          step, tr.train_name,
          "overfitting: validation loss '" + tr.name + "' averages " + Num(tr.v) +
              " over the evaluations up to " + StepText(tr.step) + ", " + Num(rise) +
              "% above its best (" + Num(tr.best) + ", up to " + StepText(tr.best_step) +
              ") while the training loss fell from " + Num(tr.train_at_best) + " to " + Num(tr.t) +
              "; the best model was around that evaluation: stop there, add data or "
              "regularization",
          {{"rise_percent", rise},
           {"validation_loss", tr.v},
           {"best_validation_loss", tr.best},
           {"training_loss", tr.t},
           {"training_loss_at_best", tr.train_at_best},
           {"rise_threshold_percent", rise_percent_},
           {"train_drop_threshold_percent", train_drop_percent_}}));
    }
  }

  void CheckGap(const StepView& step, const std::string& name, double v, double t, Streak* s,
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
    findings->push_back(
        MakeFinding(step, name,
                    "overfitting: validation loss '" + name + "' " + Num(v) + " is " +
                        Num(ratio * 100.0) + "% above the mean training loss " + Num(t) +
                        " (ratio_threshold " + Num(ratio_threshold_) + ") for " +
                        std::to_string(s->length) + " consecutive evaluation step(s)",
                    {{"ratio", ratio},
                     {"validation_loss", v},
                     {"training_loss", t},
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

  bool gap_ = false;
  std::int64_t start_step_ = 0;
  std::int64_t patience_ = 1;
  double ratio_threshold_ = 0.1;
  double rise_percent_ = 25.0;
  double train_drop_percent_ = 40.0;
  std::int64_t window_ = 3;
  std::int64_t train_window_ = 4;
  std::int64_t creep_evaluations_ = 5;
  double creep_percent_ = 5.0;
  bool saw_eval_ = false;
  bool paired_ = false;
  std::vector<LossValue> losses_;
  std::unordered_map<int, Worker> workers_;
};

}  // namespace

Result<std::unique_ptr<Rule>> MakeOverfit(const RuleSpec& spec) { return BuildRule<Overfit>(spec); }

}  // namespace tstat::rules::run
