// vanishing_gradient: a gradient whose mean absolute value over its
// non-zero elements (stats.l1 / (count - zero_count)) is below `threshold`
// (default 1e-7), at every step where that holds. Default selection:
// collection "gradients". Zeros are left out because a sparse gradient is not
// a small one: an embedding's rows that the batch did not use have a gradient
// of exactly 0 (a 200,000-row table's mean over every element is far below
// 1e-7 while the rows used learn); a gradient that is 0 everywhere is
// all_zero's finding.
// A gradient with any NaN or Inf is not judged: that is exploding_tensor's
// and nan_origin's finding, and its finite part says nothing about vanishing.
// A bias (a name ending in "bias", optionally ":0") whose layer's weight
// gradient (the same name with "weight" or "kernel") in the same step has not
// vanished is not a finding either: its layer learns, and a bias with no
// gradient is one a normalization cancels (a convolution's bias before
// BatchNorm: the normalization subtracts it, so its gradient is rounding
// noise). It is named once in Diagnostics(). Biases cost string work only
// when they vanish; their siblings are looked up at the end of the step.
// Needs: the stat set of the gradients at every training step.
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>

#include "rules/tensor/tensor_rule.h"
#include "rules/tensor/tensor_rules.h"

namespace tstat::rules {
namespace {

class VanishingGradientRule final : public TensorRuleT<VanishingGradientRule> {
 public:
  VanishingGradientRule(const RuleSpec& spec, double threshold)
      : TensorRuleT(spec, {"gradients"}), threshold_(threshold) {}

  CaptureNeeds Needs(const TensorInfo& t) const override {
    return Takes(t) ? StatsIn(t, JudgedModes(CaptureNeeds::TrainModes())) : CaptureNeeds{};
  }

  void Check(const StepView& step, const TensorInfo& info, const TensorStatsRecord& r,
             std::vector<Finding>* findings) override {
    const TensorStats& s = r.stats;
    if (s.nan_count + s.inf_count() > 0) return;
    const double mean_abs = NonZeroMeanAbs(r);
    if (!(mean_abs < threshold_)) return;
    Finding f = Vanished(step, info, mean_abs);
    std::string weight, kernel;
    if (SiblingNames(info.name, &weight, &kernel)) {
      pending_.push_back({std::move(f), std::move(weight), std::move(kernel)});
      return;
    }
    findings->push_back(std::move(f));
  }

  // Pending biases: a finding unless the layer's weight learns this step.
  void EndStep(const StepView& step, std::vector<Finding>* findings) override {
    if (pending_.empty()) return;
    siblings_.clear();
    for (const Pending& b : pending_) {
      siblings_.emplace(b.weight, -1.0);
      siblings_.emplace(b.kernel, -1.0);
    }
    for (const TensorStatsRecord& r : *step.records) {
      const TensorInfo* t = step.catalog->Find(r.tensor_id);
      if (t == nullptr) continue;
      auto it = siblings_.find(t->name);
      if (it == siblings_.end()) continue;
      const double mean_abs = NonZeroMeanAbs(r);
      if (!std::isnan(mean_abs)) it->second = mean_abs;
    }
    for (Pending& b : pending_) {
      const double w = std::max(siblings_[b.weight], siblings_[b.kernel]);
      if (w >= threshold_) {  // the layer learns: a bias a normalization cancels
        if (cancelled_.size() < kMaxNamed) cancelled_.insert(b.finding.tensor);
        continue;
      }
      findings->push_back(std::move(b.finding));
    }
    pending_.clear();
  }

 private:
  // Mean |g| over the non-zero elements; NaN without stats or without a
  // non-zero element.
  static double NonZeroMeanAbs(const TensorStatsRecord& r) {
    if (!r.has_stats || r.stats.zero_count >= r.stats.count) return NAN;
    return r.stats.l1 / static_cast<double>(r.stats.count - r.stats.zero_count);
  }

  struct Pending {
    Finding finding;
    std::string weight, kernel;  // the names of the layer's weight gradient
  };

  // For a name ending in "bias" (or "bias:0"), the same name with "weight"
  // and with "kernel" in its place; false for other names.
  static bool SiblingNames(const std::string& name, std::string* weight, std::string* kernel) {
    std::string_view n(name), suffix;
    if (n.size() >= 2 && n.substr(n.size() - 2) == ":0") suffix = n.substr(n.size() - 2);
    n.remove_suffix(suffix.size());
    if (n.size() < 4 || n.substr(n.size() - 4) != "bias") return false;
    const std::string_view stem = n.substr(0, n.size() - 4);
    *weight = std::string(stem) + "weight" + std::string(suffix);
    *kernel = std::string(stem) + "kernel" + std::string(suffix);
    return true;
  }

  std::string Notes() const override {
    if (cancelled_.empty()) return {};
    const std::size_t n = cancelled_.size();
    return "rule " + spec().name + ": " + *cancelled_.begin() +
           (n > 1 ? " and " + std::to_string(n - 1) + " more bias(es) have" : " has") +
           " no gradient while their layer's weight has one: biases cancelled by a "
           "normalization after them (e.g. a convolution's bias before BatchNorm), "
           "not vanishing gradients, so they are not judged";
  }

  Finding Vanished(const StepView& step, const TensorInfo& info, double mean_abs) {
    Finding f = MakeFinding(
        step, info.name,
        "gradient " + info.name + " has vanished: mean |g| over its non-zero elements = " +
            Num(mean_abs) + " < threshold " + Num(threshold_) +
            "; look for saturating activations (sigmoid/tanh), too-small initialization, missing "
            "normalization, or a loss scale that underflows",
        {{"mean_abs", mean_abs}, {"threshold", threshold_}});
    f.lower_is_worse = true;
    return f;
  }

  double threshold_;
  static constexpr std::size_t kMaxNamed = 1000;
  std::vector<Pending> pending_;                      // this step's vanished biases
  std::set<std::string> cancelled_;                   // biases found cancelled (first kMaxNamed)
  std::unordered_map<std::string, double> siblings_;  // weight name -> mean |g| (-1: absent)
};

}  // namespace

Result<std::unique_ptr<Rule>> CreateVanishingGradientRule(const RuleSpec& spec) {
  ParamReader p(RuleLabel(spec), spec.parameters);
  const double threshold = p.Double("threshold", 1e-7);
  p.CheckRange("threshold", threshold, 0, kNoLimit);
  TSTAT_RETURN_IF_ERROR(p.Finish());
  return MakeRule<VanishingGradientRule>(spec, threshold);
}

}  // namespace tstat::rules
