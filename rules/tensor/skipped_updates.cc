#include "rules/tensor/skipped_updates.h"

#include <unordered_set>

#include "rules/engine/rule_base.h"

namespace tstat::rules {
namespace {

constexpr char kGradientPrefix[] = "gradient/";
constexpr std::size_t kGradientPrefixLength = sizeof(kGradientPrefix) - 1;
constexpr std::size_t kStepsListed = 8;

// How the weights named in `weights` fared at a step: how many were captured
// with stats and whether any of them held NaN/Inf. Walks the step's records
// (only at the rare steps that need it).
struct WeightsSeen {
  std::size_t captured = 0;
  bool nonfinite = false;
};
WeightsSeen SeeWeights(const StepView& step, const std::vector<std::string>& weights) {
  WeightsSeen seen;
  if (step.records == nullptr || step.catalog == nullptr) return seen;
  const std::unordered_set<std::string> wanted(weights.begin(), weights.end());
  for (const TensorStatsRecord& r : *step.records) {
    const TensorInfo* t = step.catalog->Find(r.tensor_id);
    if (t == nullptr || !r.has_stats || wanted.count(t->name) == 0) continue;
    ++seen.captured;
    seen.nonfinite = seen.nonfinite || HoldsNonFinite(r);
  }
  return seen;
}

// Whether a forward tensor (not a gradient, weight or bias) of the step holds
// NaN/Inf: then the values did not start in the backward pass.
bool ForwardNonFinite(const StepView& step) {
  if (step.records == nullptr || step.catalog == nullptr) return false;
  for (const TensorStatsRecord& r : *step.records) {
    if (!HoldsNonFinite(r)) continue;
    const TensorInfo* t = step.catalog->Find(r.tensor_id);
    if (t == nullptr || DataFlowRank(*t) == 0) return true;
  }
  return false;
}

}  // namespace

int DataFlowRank(const TensorInfo& t) {
  if (InCollection(t, "gradients")) return 1;
  if (InCollection(t, "weights") || InCollection(t, "biases")) return 2;
  return 0;
}

bool SkippedUpdates::TrainingStep(const StepView& step) {
  return step.key.mode == Mode::kTrain || step.key.mode == Mode::kGlobal;
}

SkippedUpdates::Outcome SkippedUpdates::Resolve(const StepView& step) {
  auto it = workers_.find(step.worker);
  if (it == workers_.end() || !it->second.holding || !TrainingStep(step)) return Outcome::kNone;
  Worker& w = it->second;
  w.holding = false;
  const WeightsSeen seen = SeeWeights(step, w.weights);
  if (seen.captured == 0 || seen.nonfinite) {
    w.in_row = 0;
    return Outcome::kApplied;
  }
  ++w.in_row;
  ++total_;
  if (first_skipped_.size() < kStepsListed) first_skipped_.push_back(w.held_step);
  return Outcome::kSkipped;
}

bool SkippedUpdates::Hold(const StepView& step, const std::vector<const TensorInfo*>& nonfinite) {
  if (!TrainingStep(step)) return false;
  Worker& w = workers_[step.worker];
  if (nonfinite.empty()) {
    w.in_row = 0;
    return false;
  }
  if (max_in_row_ <= 0 || w.in_row >= max_in_row_) return false;
  std::vector<std::string> weights;
  for (const TensorInfo* t : nonfinite) {
    if (DataFlowRank(*t) != 1 || t->name.rfind(kGradientPrefix, 0) != 0) return false;
    weights.push_back(t->name.substr(kGradientPrefixLength));
  }
  if (ForwardNonFinite(step)) return false;
  const WeightsSeen seen = SeeWeights(step, weights);
  if (seen.captured == 0 || seen.nonfinite) return false;
  w.holding = true;
  w.held_step = step.key;
  w.weights = std::move(weights);
  return true;
}

std::int64_t SkippedUpdates::InRow(int worker) const {
  auto it = workers_.find(worker);
  return it == workers_.end() ? 0 : it->second.in_row;
}

std::string SkippedUpdates::InRowNote(int worker) const {
  const std::int64_t in_row = InRow(worker);
  if (max_in_row_ <= 0 || in_row < max_in_row_) return {};
  return "; the optimizer skipped the last " + std::to_string(in_row) +
         " updates in a row for NaN/Inf gradients (loss-scale overflows): the gradients "
         "overflow at any scale";
}

void SkippedUpdates::ReportApplied(const StepView& step, Finding* held) {
  held->step = step.key;
  held->wall_time = step.wall_time;
  held->message += "; reported at " + StepText(step.key) +
                   ", when the update was seen to have applied those gradients";
}

std::string SkippedUpdates::Note(const std::string& rule) const {
  if (total_ == 0) return {};
  std::string steps;
  for (std::size_t i = 0; i < first_skipped_.size(); ++i) {
    steps += (i ? ", " : "") + StepText(first_skipped_[i]);
  }
  if (total_ > static_cast<std::int64_t>(first_skipped_.size())) steps += ", ...";
  return "rule " + rule + ": " + std::to_string(total_) +
         " update(s) skipped by the optimizer with NaN/Inf gradients and finite weights (dynamic "
         "loss scaling; not findings): " +
         steps;
}

}  // namespace tstat::rules
