// loss_not_decreasing (smdebug LossNotDecreasing), per loss series (worker,
// loss, mode; see loss_source.h), over the series' saved values in mode-step
// order. Two ways to judge (`baseline`):
//
// "start" (the default): has the network learned anything since it
//   started? The median of the last `window` (default 20) finite values is
//   compared with the median of the first `window`, at every value once the
//   series spans `horizon` (default 200) mode steps from its first value and
//   holds 2*window values; it fires when it is not lower by more than
//   `diff_percent` (default 2) percent of the first median's magnitude and
//   the series has no downward trend: the Mann-Kendall score of its last
//   values (up to kTrendValues) is not below -trend_z (default 2; 0: no
//   trend test). A slow learner moves its loss by less than the threshold
//   but steadily (z of -3.7 to -90 over 200 steps in
//   benchmarks/detection_python.py); a network that learns nothing stays
//   within its noise, z near 0.
//   Windows tolerate minibatch noise, medians a few spikes (a loss spike
//   that training survives is not a finding), and a run that has converged
//   stays far below its start, so a plateau is not a finding either. The
//   horizon is what healthy training needs to show a trend: a
//   learning-rate warmup, a small learning rate or a hard task keep the loss
//   within a few percent of its start for tens of steps (within 10% for
//   60-300 steps in benchmarks/detection_python.py). Only training series
//   (TRAIN, GLOBAL) unless `mode` or the rule's modes say otherwise: EVAL
//   losses are overfit's.
//   A series that began already learned is not judged this way, because
//   its start is not the network's: a model resumed from a checkpoint or
//   fine-tuned sits on its plateau from the first step, which the windows
//   cannot tell from a network that learns nothing. Decided once, at the
//   first judgement:
//   - resumed: its first value came at a mode step at least the span of the
//     two windows (2 * window * the spacing of its first two values) - a
//     run that numbers its steps on from a checkpoint (BeginStep(StepKey));
//   - learned: the worker's training labels were captured with label counts
//     (labels_regex, default ".*labels", or collection "labels") over its
//     first 2 * window training steps, and the first window's median is
//     below chance_fraction (default 0.75; 0: off) x the labels' entropy in
//     nats: the cross-entropy of predicting the class frequencies, where a
//     network that learns nothing stays (inputs that carry nothing, a
//     learning rate of 0) and near where a fresh one starts.
//   Such a series is named in Diagnostics() (the rules summary); NaN/Inf
//   losses are still findings.
//   A series that began at its run's first steps with no training labels
//   to compare its start with (or chance_fraction 0) may have begun
//   learned too: a model fine-tuned, or a run resumed from a checkpoint
//   whose steps are numbered from 0 again, which is what a preempted job
//   restarted by a scheduler does. Its findings are judged as above but
//   get at most `unknown_start_severity` (default error): reported, never
//   stopping training, which would kill such a job at every restart. A
//   series whose labels show it began at or above the chance level keeps
//   the rule's severity (critical by default) once it spans `stop_horizon`
//   (default 1,000) mode steps; before that its findings get at most error:
//   a healthy network can sit at the chance level for hundreds of steps
//   before it learns (a small transformer under Adam at 3e-4 in
//   benchmarks/detection_python.py: 2.28 nats at its start, 2.24 at step
//   600, 2.01 at 980), and stopping it there kills a run that was fine.
// "previous" (smdebug's; the default when num_steps or
//   increase_threshold_percent is given): the first saved step f starts the
//   series and is the first check; a saved step s is a check step when
//   s >= last_check + num_steps (default 10) and is compared with the base,
//   the newest saved step <= s - num_steps. It fires unless
//   loss(s) < loss(base) - |loss(base)| * diff_percent / 100 (default 0: any
//   decrease passes, an equal loss fires). Then last_check = s.
//   increase_threshold_percent (default off): at every saved step between
//   checks, fires once per check window when the loss rose more than that
//   percentage above the loss of the last check step. Every recorded mode
//   is its own series unless `mode` is given.
// Either way a NaN or Inf loss fires at its step, with severity critical: the
// run cannot recover.
#include <algorithm>
#include <cmath>
#include <deque>
#include <map>

#include "rules/run/labels_finder.h"
#include "rules/run/loss_source.h"
#include "rules/run/mann_kendall.h"
#include "rules/run/run_rules.h"

namespace tstat::rules::run {
namespace {

class LossNotDecreasing final : public LossRuleBase {
 public:
  LossNotDecreasing(const RuleSpec& spec, ParamReader* p, Status* error) : LossRuleBase(spec, p) {
    const bool smdebug = p->Has("num_steps") || p->Has("increase_threshold_percent");
    from_start_ =
        p->OneOf("baseline", smdebug ? "previous" : "start", {"start", "previous"}) == "start";
    window_ = p->Int("window", 20);
    p->CheckRange("window", static_cast<double>(window_), 1, 1e6);
    horizon_ = p->Int("horizon", 200);
    p->CheckRange("horizon", static_cast<double>(horizon_), 1, 1e15);
    stop_horizon_ = p->Int("stop_horizon", 1000);
    p->CheckRange("stop_horizon", static_cast<double>(stop_horizon_), 1, 1e15);
    trend_z_ = p->Double("trend_z", 2.0);
    p->CheckRange("trend_z", trend_z_, 0.0, 1e6);
    num_steps_ = p->Int("num_steps", 10);
    p->CheckRange("num_steps", static_cast<double>(num_steps_), 1, 1e15);
    diff_percent_ = p->Double("diff_percent", from_start_ ? 2.0 : 0.0);
    p->CheckRange("diff_percent", diff_percent_, 0.0, 100.0);
    chance_fraction_ = p->Double("chance_fraction", 0.75);
    p->CheckRange("chance_fraction", chance_fraction_, 0.0, 1.0);
    labels_regex_text_ = p->String("labels_regex", ".*labels");
    (void)ParseSeverity(
        p->OneOf("unknown_start_severity", "error", {"info", "warning", "error", "critical"}),
        &unknown_start_severity_);
    increase_percent_ = p->Double("increase_threshold_percent", -1.0);
    if (p->Has("increase_threshold_percent")) {
      p->CheckRange("increase_threshold_percent", increase_percent_, 0.0, 1e300);
    }
    mode_ = ReadModeParam(spec, p, error);
  }

  Status Init() {
    TSTAT_RETURN_IF_ERROR(RuleBase::Init());
    return labels_finder_.Init(spec().type, "labels_regex", labels_regex_text_, "labels");
  }

  // The losses' stats, and label counts of the training labels when the
  // chance level decides whether a series began learned.
  CaptureNeeds Needs(const TensorInfo& t) const override {
    if (!JudgesChance() || t.kind != TensorKind::kTensor || !IsIntegerDType(t.dtype) ||
        !labels_finder_.Matches(t)) {
      return LossRuleBase::Needs(t);
    }
    CaptureNeeds n;
    n.stats = true;
    n.label_counts = true;
    n.modes = CaptureNeeds::TrainModes();
    return n;
  }

  void EvaluateStep(const IndexedStep& indexed, std::vector<Finding>* findings) override {
    const StepView& step = *indexed.view;
    if (JudgesChance() && IsTrainingMode(step.key.mode)) CountLabels(indexed);
    if (mode_ && step.key.mode != *mode_) return;
    if (!mode_ && from_start_ && spec().modes.empty() && !IsTrainingMode(step.key.mode)) return;
    CollectLosses(indexed, &losses_);
    for (const LossValue& loss : losses_) {
      Series& s = series_[SeriesKey{step.worker, loss.id, step.key.mode}];
      if (s.seen && step.key.mode_step <= s.last_step) continue;  // a repeated step
      s.seen = true;
      s.last_step = step.key.mode_step;
      if (!std::isfinite(loss.value)) {
        NonFinite(step, *loss.name, loss.value, findings);
        continue;
      }
      if (from_start_) {
        FromStart(step, *loss.name, &s, loss.value, findings);
      } else {
        Previous(step, *loss.name, &s, step.key.mode_step, loss.value, findings);
      }
    }
  }

 private:
  // The trend is judged over this many most recent values (the series from
  // its start at the default horizon; O(kTrendValues) per value).
  static constexpr std::size_t kTrendValues = 512;

  // How a "start" series began (decided at its first judgement).
  // kUnknown: began at the run's start, with no labels to tell a fresh
  // network from a learned one.
  enum class Start { kUndecided, kFresh, kUnknown, kResumed, kLearned };

  struct Series {
    bool seen = false;
    std::int64_t last_step = 0;
    // baseline "start": the finite values so far, the first window, the last one.
    std::int64_t values = 0;
    std::int64_t first_step = 0, second_step = 0;  // mode steps of the first two values
    Start start = Start::kUndecided;
    std::vector<double> first;
    std::deque<double> last;
    MannKendallTrend trend{kTrendValues};
    // baseline "previous": (step, loss) since the last check.
    std::deque<std::pair<std::int64_t, double>> history;
    std::int64_t last_check = 0;
    double last_check_loss = 0.0;
    bool increase_reported = false;
  };

  void NonFinite(const StepView& step, const std::string& name, double loss,
                 std::vector<Finding>* findings) {
    Finding f = MakeFinding(step, name,
                            "loss '" + name + "' is " + Num(loss) + " at " + StepText(step.key) +
                                ": training cannot recover; look for log/div/sqrt of 0 or a "
                                "learning rate that diverged",
                            {{"nonfinite_loss", loss}});
    f.severity = Severity::kCritical;
    findings->push_back(std::move(f));
  }

  void FromStart(const StepView& step, const std::string& name, Series* s, double loss,
                 std::vector<Finding>* findings) {
    const auto w = static_cast<std::size_t>(window_);
    if (s->first.size() < w) s->first.push_back(loss);
    s->last.push_back(loss);
    if (trend_z_ > 0.0) s->trend.Add(loss);
    if (s->last.size() > w) s->last.pop_front();
    if (s->values == 0) s->first_step = step.key.mode_step;
    if (s->values == 1) s->second_step = step.key.mode_step;
    // Warm-up: 2 * window values spanning the horizon.
    if (++s->values < 2 * window_ || step.key.mode_step - s->first_step < horizon_ - 1) return;
    const double start = Median(s->first.begin(), s->first.end());
    if (s->start == Start::kUndecided) Decide(step, name, start, s);
    if (s->start != Start::kFresh && s->start != Start::kUnknown) return;
    const double now = Median(s->last.begin(), s->last.end());
    const double decrease = Percent(start - now, start);
    if (now < start - std::fabs(start) * diff_percent_ / 100.0) return;
    const double z = s->trend.Z();
    if (trend_z_ > 0.0 && z < -trend_z_) return;  // falling steadily: learning, slowly
    const std::string change =
        decrease >= 0 ? Num(decrease) + "% below" : Num(-decrease) + "% above";
    const bool before_stop = step.key.mode_step - s->first_step < stop_horizon_ - 1;
    Finding f = MakeFinding(
        step, name,
        "loss '" + name + "' has not decreased since the start: " +
            std::to_string(step.key.mode_step - s->first_step + 1) +
            " steps in, the median of its last " + std::to_string(window_) + " values is " +
            Num(now) + ", " + change + " the median of its first " + std::to_string(window_) +
            " (" + Num(start) + "; needed: more than " + Num(diff_percent_) + "% below)" +
            (trend_z_ > 0.0 ? ", and its last " + std::to_string(s->trend.size()) +
                                  " values have no downward trend (Mann-Kendall z = " + Num(z) + ")"
                            : std::string()) +
            "; the network is not learning: check the learning rate, that the "
            "optimizer steps the model's parameters and that the labels match the inputs" +
            (s->start == Start::kUnknown
                 ? " (or it began trained: a fine-tuned model, or a resumed run numbered from "
                   "step 0, sits on its plateau; this finding does not stop training because "
                   "no training labels show where the loss began - capture them (Python: "
                   "register_loss with a CrossEntropyLoss, or save_labels) "
                   "or number a resumed run's steps on (start_step) to let the rule tell)"
             : before_stop
                 ? " (or it is on a plateau at the chance level, where some networks stay for "
                   "hundreds of steps before they learn: this finding does not stop training "
                   "before the loss has been flat for stop_horizon " +
                       std::to_string(stop_horizon_) + " steps)"
                 : std::string()),
        {{"decrease_percent", decrease},
         {"loss_median", now},
         {"start_median", start},
         {"diff_percent", diff_percent_},
         {"window", static_cast<double>(window_)},
         {"trend_z", z}});
    f.lower_is_worse = true;
    if (s->start == Start::kUnknown && f.severity > unknown_start_severity_) {
      f.severity = unknown_start_severity_;
    }
    if (before_stop && f.severity > Severity::kError) f.severity = Severity::kError;
    findings->push_back(std::move(f));
  }

  bool JudgesChance() const { return from_start_ && chance_fraction_ > 0.0; }

  // Adds the label counts of a training step to its worker's, over the
  // worker's first 2 * window training steps that have them.
  void CountLabels(const IndexedStep& indexed) {
    const StepView& step = *indexed.view;
    if (step.records == nullptr) return;
    Labels& acc = labels_[step.worker];
    if (acc.steps >= 2 * window_) return;
    bool counted = false;
    for (std::uint32_t k : labels_finder_.Records(indexed, [](std::uint32_t) { return false; })) {
      const TensorStatsRecord& r = (*step.records)[k];
      if (!r.label_counts) continue;
      const auto& c = r.label_counts->counts;
      if (acc.counts.size() < c.size()) acc.counts.resize(c.size(), 0);
      for (std::size_t i = 0; i < c.size(); ++i) acc.counts[i] += c[i];
      counted = true;
    }
    if (counted) ++acc.steps;
  }

  // The entropy (nats) of a worker's training labels; NaN without labels of
  // two classes or more.
  double LabelEntropy(int worker) const {
    const auto it = labels_.find(worker);
    if (it == labels_.end()) return NAN;
    double total = 0.0;
    int classes = 0;
    for (std::uint64_t c : it->second.counts) {
      total += static_cast<double>(c);
      classes += c > 0;
    }
    if (classes < 2) return NAN;
    double h = 0.0;
    for (std::uint64_t c : it->second.counts) {
      if (c == 0) continue;
      const double q = static_cast<double>(c) / total;
      h -= q * std::log(q);
    }
    return h;
  }

  void Decide(const StepView& step, const std::string& name, double start, Series* s) {
    s->start = Start::kUnknown;
    const std::int64_t spacing = std::max<std::int64_t>(1, s->second_step - s->first_step);
    std::string why;
    if (s->first_step >= 2 * window_ * spacing) {
      s->start = Start::kResumed;
      why = "began at " + StepText(step.key.mode, s->first_step) +
            " (a run resumed from a checkpoint)";
    } else if (JudgesChance()) {
      const double chance = LabelEntropy(step.worker);
      if (std::isfinite(chance)) s->start = Start::kFresh;
      if (std::isfinite(chance) && start < chance_fraction_ * chance) {
        s->start = Start::kLearned;
        why = "began learned: the median of its first " + std::to_string(window_) + " values, " +
              Num(start) + ", is below " + Num(chance_fraction_) +
              " x the chance level of its labels (their entropy, " + Num(chance) +
              " nats) - a model resumed or fine-tuned";
      }
    }
    if (s->start == Start::kFresh || s->start == Start::kUnknown) return;
    ++not_judged_;
    if (not_judged_note_.empty()) {
      not_judged_note_ = "loss '" + name + "' (worker " + std::to_string(step.worker) + ", " +
                         ModeName(step.key.mode) + ") " + why;
    }
  }

  std::string MissingData() const override {
    if (not_judged_ == 0) return {};
    std::string more;
    if (not_judged_ > 1) more = " (and " + std::to_string(not_judged_ - 1) + " more series)";
    return not_judged_note_ + more +
           ": not judged against its start, where a flat loss is the plateau it began on; "
           "non-finite values are still findings";
  }

  void Previous(const StepView& step, const std::string& name, Series* s, std::int64_t at,
                double loss, std::vector<Finding>* findings) {
    if (s->history.empty()) {
      s->history.emplace_back(at, loss);
      s->last_check = at;
      s->last_check_loss = loss;
      return;
    }
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
              Num(increase_percent_) + "%) since " + StepText(step.key.mode, s->last_check) + ": " +
              Num(s->last_check_loss) + " -> " + Num(loss),
          {{"increase_percent", pct},
           {"loss", loss},
           {"base_loss", s->last_check_loss},
           {"base_step", static_cast<double>(s->last_check)},
           {"increase_threshold_percent", increase_percent_}}));
    }
  }

  void Check(const StepView& step, const std::string& name, Series* s, std::int64_t at, double loss,
             std::vector<Finding>* findings) {
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
      Finding f =
          MakeFinding(step, name,
                      "loss '" + name + "' did not decrease by more than " + Num(diff_percent_) +
                          "% over " + std::to_string(at - base_step) + " steps: " + Num(base_loss) +
                          " at " + StepText(step.key.mode, base_step) + " -> " + Num(loss) +
                          " at " + StepText(step.key.mode, at),
                      {{"decrease_percent", decrease},
                       {"loss", loss},
                       {"base_loss", base_loss},
                       {"base_step", static_cast<double>(base_step)},
                       {"diff_percent", diff_percent_},
                       {"num_steps", static_cast<double>(num_steps_)}});
      f.lower_is_worse = true;
      findings->push_back(std::move(f));
    }
    s->last_check = at;
    s->last_check_loss = loss;
    s->increase_reported = false;
    // Later bases are >= this step: drop everything older.
    while (!s->history.empty() && s->history.front().first < at) s->history.pop_front();
  }

  template <class It>
  double Median(It begin, It end) {
    scratch_.assign(begin, end);
    std::nth_element(scratch_.begin(), scratch_.begin() + scratch_.size() / 2, scratch_.end());
    return scratch_[scratch_.size() / 2];
  }

  static double Percent(double delta, double base) {
    return base != 0.0 ? delta / std::fabs(base) * 100.0 : (delta == 0.0 ? 0.0 : INFINITY);
  }

  bool from_start_ = true;
  std::int64_t window_ = 20;
  std::int64_t horizon_ = 200;        // mode steps before the first judgement
  std::int64_t stop_horizon_ = 1000;  // mode steps before a finding may be critical
  double trend_z_ = 2.0;              // 0: no trend test
  std::int64_t num_steps_ = 10;
  double diff_percent_ = 2.0;
  double increase_percent_ = -1.0;                      // < 0: off
  double chance_fraction_ = 0.75;                       // 0: the chance level is not judged
  Severity unknown_start_severity_ = Severity::kError;  // cap for Start::kUnknown
  std::string labels_regex_text_;
  LabelsFinder labels_finder_;
  struct Labels {
    std::vector<std::uint64_t> counts;
    std::int64_t steps = 0;  // training steps whose label counts were added
  };
  std::map<int, Labels> labels_;  // by worker
  std::int64_t not_judged_ = 0;   // series that began resumed or learned
  std::string not_judged_note_;   // the first of them
  std::optional<Mode> mode_;
  std::vector<LossValue> losses_;
  std::unordered_map<SeriesKey, Series, SeriesKeyHash> series_;
  std::vector<double> scratch_;
};

}  // namespace

Result<std::unique_ptr<Rule>> MakeLossNotDecreasing(const RuleSpec& spec) {
  return BuildRule<LossNotDecreasing>(spec);
}

}  // namespace tstat::rules::run
