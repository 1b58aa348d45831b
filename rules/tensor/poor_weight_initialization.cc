// poor_weight_initialization: signs of a bad initialization, judged once per
// worker at the first TRAIN (or GLOBAL) step it sees whose mode step is below
// `steps` (default 10): initialization is what the first step sees; later
// steps measure the optimizer, not the initializer (a learning rate that
// diverges at step 1 would otherwise read as a poor initialization), and a
// run resumed at a later step is not judged at all. Checks:
//  (a) variance spread across layers: over the tensors whose name matches
//      `activation_inputs_regex` (default "(relu|tanh|sigmoid|gelu|elu|silu)
//      [^/]*_input(_\d+)?$", case ignored: every nonlinearity's input), in
//      the order they were registered (a hook registers them as the forward
//      pass reaches them), and with `functional_relus` (default true) the
//      outputs "<P>_output" of the layers whose "<P>.relu_output" is in the
//      same step (tstat.pytorch.Hook's name for the output of a ReLU that
//      the model calls as a function after layer P: its input is P's
//      output), the population variance of one over that of the
//      next, either way up, exceeds `threshold` (default 15) for some pair
//      (`compare` "consecutive", the default), or the largest variance over
//      the smallest exceeds `threshold` (default 10; `compare` "all", as
//      smdebug judges). A variance of 0 beside a larger one counts as an
//      infinite ratio. Needs at least two such tensors with finite values.
//      Why consecutive layers, and 15: PyTorch's default Linear/Conv init
//      has a third of He's variance, so each GELU/SiLU layer shrinks its
//      input's variance by up to 12x (3 / E[GELU(x)^2] / var x <= 4; ReLU
//      6x, tanh 3x; biases only lessen it) until the biases' variance floors
//      it. Over a deep or wide net that compounds to 100-3,000x between the
//      first and the last layer, which "all" reports on every such net. A
//      poor initializer is off at some layer: weights 4x He's std give 16x
//      there, N(0, 1) on 64 inputs 32x, N(0, 0.01) on 64 inputs ~300x.
//  (b) narrow gradients, only when `distribution_range` > 0 (default 0,
//      off: the spread of a healthy gradient scales with 1/sqrt(width) and
//      with the loss scale, so no absolute bound separates a poor start
//      from a large model; vanishing_gradient covers gradients that are
//      truly gone): for each selected tensor (default collection
//      "gradients") without NaN/Inf, p95 - p5 of its values is below
//      `distribution_range`. p95 and p5 come from the linear histogram when
//      one was captured (interpolated inside buckets), otherwise they are
//      estimated as 2 * 1.6449 * std (exact for a normal distribution).
//  (c) stalled loss, when `patience` > 0 (default 0, off: single minibatch
//      losses are noise in the first steps): a scalar of collection
//      "losses" has not gone below its best value for `patience`
//      consecutive saves within the first `steps` steps.
// Needs: the stat set of the activation inputs (and of the selected
// gradients when (b) is on) in the first `steps` training steps.
#include <re2/re2.h>

#include <algorithm>
#include <cmath>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "rules/tensor/tensor_rule.h"
#include "rules/tensor/tensor_rules.h"

namespace tstat::rules {
namespace {

// p95 - p5 of a normal distribution, in standard deviations.
constexpr double kNormalP5P95Width = 2 * 1.6448536269514722;

// Default thresholds of `compare` consecutive and all (why: the header).
constexpr double kConsecutiveThreshold = 15.0;
constexpr double kAllThreshold = 10.0;

struct PoorInitParams {
  std::string activation_regex = "(?i)(relu|tanh|sigmoid|gelu|elu|silu)[^/]*_input(_\\d+)?$";
  bool consecutive = true;        // compare: consecutive layers, or all of them
  double threshold = 0;           // kConsecutiveThreshold or kAllThreshold by default
  double distribution_range = 0;  // 0: check (b) is off
  std::int64_t patience = 0;      // 0: the loss check is off
  std::int64_t steps = 10;
  bool functional_relus = true;  // "<P>_output" beside "<P>.relu_output" is a ReLU's input
};

constexpr std::string_view kOutputSuffix = "_output";
constexpr std::string_view kReluOutputSuffix = ".relu_output";

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

class PoorWeightInitializationRule final : public TensorRuleT<PoorWeightInitializationRule> {
 public:
  PoorWeightInitializationRule(const RuleSpec& spec, PoorInitParams p, std::unique_ptr<RE2> act)
      : TensorRuleT(spec, {"gradients"}), p_(std::move(p)), act_(std::move(act)) {}

  CaptureNeeds Needs(const TensorInfo& t) const override {
    const bool gradient = p_.distribution_range > 0 && Takes(t);
    // A layer output may turn out to feed a functional ReLU (registered
    // after it): its stats in the first steps are asked for in case.
    const bool layer_output = p_.functional_relus && EndsWith(t.name, kOutputSuffix) &&
                              !EndsWith(t.name, kReluOutputSuffix);
    if (!gradient && !layer_output && !RE2::PartialMatch(t.name, *act_)) return {};
    CaptureNeeds n = StatsIn(t, JudgedModes(CaptureNeeds::TrainModes()));
    n.until_step = p_.steps;
    return n;
  }

  void EvaluateStep(const IndexedStep& indexed, std::vector<Finding>* findings) override {
    const StepView& step = *indexed.view;
    if (!ModeAllowed(step.key.mode) || step.key.mode_step >= p_.steps) return;
    if (p_.distribution_range > 0) TensorRule::EvaluateStep(indexed, findings);  // (b)
    CheckActivationVariance(step, findings);
    if (p_.patience > 0) CheckLoss(step, findings);
  }

  std::string Diagnostics() const override {
    std::string out = TensorRule::Diagnostics();
    if (saw_records_ && !act_matched_) {
      out += std::string(out.empty() ? "" : "; ") + "rule " + spec().name +
             ": activation_inputs_regex \"" + p_.activation_regex +
             "\" matched no tensor, so the layer-variance check never ran";
    }
    return out;
  }

 public:
  bool ModeAllowed(Mode m) const override { return TrainModeAllowed(m); }

  void Check(const StepView& step, const TensorInfo& info, const TensorStatsRecord& r,
             std::vector<Finding>* findings) override {
    if (!r.has_stats || r.stats.finite_count < 2) return;
    if (r.stats.nan_count + r.stats.pos_inf_count + r.stats.neg_inf_count > 0) return;
    bool created = false;
    std::uint8_t& judged =
        judged_.Get(PerTensor<std::uint8_t>::WorkerGroup(step.worker), info.id, &created);
    if (judged != 0) return;  // once per tensor: its first step
    judged = 1;
    double p5 = 0, p95 = 0, spread = 0;
    const bool exact = r.linear_histogram.has_value() &&
                       HistogramPercentile(*r.linear_histogram, 0.05, &p5) &&
                       HistogramPercentile(*r.linear_histogram, 0.95, &p95);
    spread = exact ? p95 - p5 : kNormalP5P95Width * r.stats.stddev();
    if (!(spread < p_.distribution_range)) return;
    findings->push_back(
        MakeFinding(step, info.name,
                    "poor initialization: the values of " + info.name +
                        " are too narrow, p95 - p5 = " + Num(spread) +
                        (exact ? ""
                               : " (estimated as 3.29 std; capture a linear histogram "
                                 "for exact percentiles)") +
                        " < distribution_range " + Num(p_.distribution_range) + " at " +
                        StepText(step.key) + "; use a fan-in scaled initializer (He/Xavier)",
                    {{"p95_minus_p5", spread}, {"distribution_range", p_.distribution_range}}));
    findings->back().lower_is_worse = true;
  }

 private:
  bool IsActivationInput(const StepView& step, const TensorInfo& info) {
    bool created = false;
    std::uint8_t& is_input =
        act_cache_.Get(PerTensor<std::uint8_t>::WorkerGroup(step.worker), info.id, &created);
    if (created) is_input = RE2::PartialMatch(info.name, *act_) ? 1 : 0;
    return is_input != 0;
  }

  // "<P>_output" whose "<P>.relu_output" is in this step (relu_producers_).
  bool FeedsFunctionalRelu(const std::string& name) const {
    if (relu_producers_.empty() || !EndsWith(name, kOutputSuffix)) return false;
    return relu_producers_.count(
               std::string_view(name).substr(0, name.size() - kOutputSuffix.size())) != 0;
  }

  struct LayerVariance {
    const TensorInfo* info;
    double var;
  };

  // max / min of two variances (infinite when only the smaller is 0; 1 when
  // both are).
  static double Ratio(double a, double b) {
    const double hi = a > b ? a : b, lo = a > b ? b : a;
    if (hi == 0) return 1.0;
    return lo > 0 ? hi / lo : INFINITY;
  }

  void CheckActivationVariance(const StepView& step, std::vector<Finding>* findings) {
    if (step.records == nullptr || variance_judged_.count(step.worker) != 0) return;
    layers_.clear();
    relu_producers_.clear();
    if (p_.functional_relus) {
      for (const TensorStatsRecord& r : *step.records) {
        const TensorInfo* info = Info(step, r.tensor_id);
        if (info == nullptr || !EndsWith(info->name, kReluOutputSuffix)) continue;
        relu_producers_.insert(
            std::string_view(info->name).substr(0, info->name.size() - kReluOutputSuffix.size()));
      }
    }
    for (const TensorStatsRecord& r : *step.records) {
      const TensorInfo* info = Info(step, r.tensor_id);
      if (info == nullptr) continue;
      saw_records_ = true;
      if (!IsActivationInput(step, *info) && !FeedsFunctionalRelu(info->name)) continue;
      act_matched_ = true;
      const double var = r.has_stats ? r.stats.variance() : NAN;
      if (std::isfinite(var)) layers_.push_back({info, var});
    }
    if (layers_.size() < 2) return;
    variance_judged_.insert(step.worker);  // once per worker: its first step
    // The pair judged: the worst consecutive one (registration order), or
    // the largest and the smallest variance.
    std::size_t a = 0, b = 0;
    if (p_.consecutive) {
      b = 1;
      std::sort(layers_.begin(), layers_.end(), [](const LayerVariance& x, const LayerVariance& y) {
        return x.info->id < y.info->id;
      });
      for (std::size_t i = 1; i + 1 < layers_.size(); ++i) {
        if (Ratio(layers_[i].var, layers_[i + 1].var) > Ratio(layers_[a].var, layers_[b].var)) {
          a = i;
          b = i + 1;
        }
      }
    } else {
      for (std::size_t i = 1; i < layers_.size(); ++i) {
        if (layers_[i].var < layers_[a].var) a = i;
        if (layers_[i].var > layers_[b].var) b = i;
      }
    }
    const double ratio = Ratio(layers_[a].var, layers_[b].var);
    if (!(ratio > p_.threshold)) return;
    const LayerVariance& hi = layers_[a].var > layers_[b].var ? layers_[a] : layers_[b];
    const LayerVariance& lo = layers_[a].var > layers_[b].var ? layers_[b] : layers_[a];
    findings->push_back(MakeFinding(
        step, hi.info->name,
        "poor initialization: activation-input variance differs " +
            (std::isinf(ratio) ? std::string("without bound") : Num(ratio) + "x") +
            (p_.consecutive ? " from one layer to the next (" : " across layers (") +
            layers_[a].info->name + ": " + Num(layers_[a].var) + ", " + layers_[b].info->name +
            ": " + Num(layers_[b].var) + (lo.var == 0 ? ", a constant input" : "") +
            ") > threshold " + Num(p_.threshold) + "x" +
            "; use a fan-in scaled initializer (He/Xavier) or add normalization",
        {{"variance_ratio", ratio},
         {"max_variance", hi.var},
         {"min_variance", lo.var},
         {"threshold", p_.threshold}}));
  }

  void CheckLoss(const StepView& step, std::vector<Finding>* findings) {
    if (step.scalars == nullptr) return;
    for (const ScalarRecord& s : *step.scalars) {
      const TensorInfo* info = Info(step, s.tensor_id);
      if (info == nullptr || !std::isfinite(s.value)) continue;
      bool is_loss = false;
      for (const std::string& c : info->collections) is_loss = is_loss || c == "losses";
      if (!is_loss) continue;
      auto [it, first] = loss_.try_emplace(TensorKey(step.worker, info->id));
      Loss& l = it->second;
      if (first || s.value < l.best) {
        l.best = s.value;
        l.stale = 0;
        continue;
      }
      if (++l.stale < p_.patience) continue;
      findings->push_back(MakeFinding(step, info->name,
                                      "poor initialization: loss " + info->name +
                                          " has not decreased for " + std::to_string(l.stale) +
                                          " saves in the first " + std::to_string(p_.steps) +
                                          " steps (best " + Num(l.best) + ", now " + Num(s.value) +
                                          "); check the initialization and the learning rate",
                                      {{"loss", s.value},
                                       {"best_loss", l.best},
                                       {"saves_without_decrease", static_cast<double>(l.stale)},
                                       {"patience", static_cast<double>(p_.patience)}}));
    }
  }

  struct Loss {
    double best = 0;
    std::int64_t stale = 0;
  };
  PoorInitParams p_;
  std::unique_ptr<RE2> act_;
  std::vector<LayerVariance> layers_;  // scratch of CheckActivationVariance
  // Scratch too: the P of this step's "<P>.relu_output" tensors (views of
  // the catalog's names, used within the call).
  std::unordered_set<std::string_view> relu_producers_;
  PerTensor<std::uint8_t> act_cache_;        // 1: matches activation_inputs_regex
  PerTensor<std::uint8_t> judged_;           // 1: (b) judged this gradient
  std::unordered_set<int> variance_judged_;  // workers (a) judged
  std::unordered_map<std::uint64_t, Loss> loss_;
  bool saw_records_ = false;
  bool act_matched_ = false;
};

}  // namespace

Result<std::unique_ptr<Rule>> CreatePoorWeightInitializationRule(const RuleSpec& spec) {
  const std::string label = RuleLabel(spec);
  ParamReader p(label, spec.parameters);
  PoorInitParams q;
  q.activation_regex = p.String("activation_inputs_regex", q.activation_regex);
  q.consecutive = p.OneOf("compare", "consecutive", {"consecutive", "all"}) == "consecutive";
  q.threshold = p.Double("threshold", q.consecutive ? kConsecutiveThreshold : kAllThreshold);
  p.CheckRange("threshold", q.threshold, 1, kNoLimit);
  q.distribution_range = p.Double("distribution_range", q.distribution_range);
  p.CheckRange("distribution_range", q.distribution_range, 0, kNoLimit);
  q.patience = p.Int("patience", q.patience);
  p.CheckRange("patience", static_cast<double>(q.patience), 0, 1e12);
  q.steps = p.Int("steps", q.steps);
  p.CheckRange("steps", static_cast<double>(q.steps), 1, 1e12);
  q.functional_relus = p.Bool("functional_relus", q.functional_relus);
  TSTAT_RETURN_IF_ERROR(p.Finish());
  RE2::Options opt;
  opt.set_log_errors(false);
  auto act = std::make_unique<RE2>(q.activation_regex, opt);
  if (!act->ok()) {
    return Status::InvalidArgument("rule " + label + ": parameter activation_inputs_regex \"" +
                                   q.activation_regex + "\" is invalid: " + act->error());
  }
  return MakeRule<PoorWeightInitializationRule>(spec, std::move(q), std::move(act));
}

}  // namespace tstat::rules
