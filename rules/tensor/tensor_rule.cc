// TensorRule and the helpers shared by the built-in tensor rules.
#include "rules/tensor/tensor_rule.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tstat::rules {

std::string RuleLabel(const RuleSpec& spec) {
  if (spec.name.empty() || spec.name == spec.type) return spec.type;
  return spec.name + " (" + spec.type + ")";
}

RuleSpec WithDefaultRegex(RuleSpec spec, const std::string& regex) {
  if (spec.collection_names.empty() && spec.tensor_regex.empty()) spec.tensor_regex = regex;
  return spec;
}

bool ParseStatKind(const std::string& name, StatKind* out) {
  static constexpr std::pair<const char*, StatKind> kNames[] = {{"l1", StatKind::kL1},
                                                                {"l2", StatKind::kL2},
                                                                {"amax", StatKind::kAmax},
                                                                {"mean", StatKind::kMean},
                                                                {"mean_abs", StatKind::kMeanAbs},
                                                                {"variance", StatKind::kVariance},
                                                                {"std", StatKind::kStd},
                                                                {"min", StatKind::kMin},
                                                                {"max", StatKind::kMax}};
  for (const auto& [n, k] : kNames) {
    if (name == n) {
      *out = k;
      return true;
    }
  }
  return false;
}

Status ReadStatKind(ParamReader* params, const std::string& label, const std::string& key,
                    const std::string& def, StatKind* out) {
  const std::string name = params->String(key, def);
  if (ParseStatKind(name, out)) return Status::OK();
  return Status::InvalidArgument("rule " + label + ": parameter " + key + " must be one of " +
                                 kStatKindNames + ", got \"" + name + "\"");
}

bool HistogramPercentile(const LinearHistogram& h, double q, double* out) {
  std::uint64_t n = h.below + h.above;
  for (std::uint64_t c : h.counts) n += c;
  if (n == 0 || h.counts.empty()) return false;
  const double target = q * static_cast<double>(n);
  double cum = static_cast<double>(h.below);
  if (target <= cum) {
    *out = h.lo;
    return true;
  }
  const double width = (h.hi - h.lo) / static_cast<double>(h.counts.size());
  for (std::size_t i = 0; i < h.counts.size(); ++i) {
    const double c = static_cast<double>(h.counts[i]);
    if (c > 0 && cum + c >= target) {
      *out = h.lo + (static_cast<double>(i) + (target - cum) / c) * width;
      return true;
    }
    cum += c;
  }
  *out = h.hi;
  return true;
}

std::string IndexList(const std::vector<std::size_t>& indices, std::size_t max_items) {
  std::string out;
  for (std::size_t i = 0; i < indices.size() && i < max_items; ++i) {
    out += (i ? ", " : "") + std::to_string(indices[i]);
  }
  if (indices.size() > max_items) {
    out += " (+" + std::to_string(indices.size() - max_items) + " more)";
  }
  return out;
}

void ChannelActivity::Reset(std::size_t channels) {
  active_.assign(channels, 0);
  total_.assign(channels, 0);
}

std::vector<std::size_t> ChannelActivity::Inactive(double threshold_percent) const {
  std::vector<std::size_t> out;
  for (std::size_t c = 0; c < total_.size(); ++c) {
    if (total_[c] == 0) continue;
    const double pct = 100.0 * static_cast<double>(active_[c]) / static_cast<double>(total_[c]);
    if (pct < threshold_percent) out.push_back(c);
  }
  return out;
}

std::size_t ChannelActivity::ObservedUnits() const {
  return static_cast<std::size_t>(
      std::count_if(total_.begin(), total_.end(), [](std::uint64_t t) { return t > 0; }));
}

TensorRule::TensorRule(RuleSpec spec, std::vector<std::string> default_collections,
                       std::string needs)
    : RuleBase(std::move(spec), std::move(default_collections)), needs_(std::move(needs)) {}

void TensorRule::EvaluateStep(const IndexedStep& step, std::vector<Finding>* findings) {
  const StepView& view = *step.view;
  if (!ModeAllowed(view.key.mode) || view.records == nullptr) return;
  const std::vector<std::uint32_t>& selected = SelectedRecords(step);
  NoteSelection(step.size > 0, !selected.empty());
  CheckRecords(step, selected, findings);
  EndStep(view, findings);
}

bool TensorRule::TrainModeAllowed(Mode m) const {
  if (!spec().modes.empty()) return ModeSelected(m);
  return m == Mode::kTrain || m == Mode::kGlobal;
}

void TensorRule::NoteProblem(const std::string& problem) {
  constexpr std::size_t kMaxProblems = 4;
  if (problems_.size() >= kMaxProblems) return;
  if (std::find(problems_.begin(), problems_.end(), problem) == problems_.end()) {
    problems_.push_back(problem);
  }
}

bool TensorRule::PerUnitStats(const TensorInfo& info, const TensorStatsRecord& record) {
  if (!record.per_channel || record.per_channel->channels.empty()) return false;
  if (record.per_channel->axis == 0) {
    NoteProblem("per-channel statistics of " + info.name +
                " are along axis 0, the batch's, not its units'; not judged");
    return false;
  }
  return true;
}

std::string TensorRule::Diagnostics() const {
  std::string out = RuleBase::Diagnostics();
  auto append = [&out](const std::string& s) { out += (out.empty() ? "" : "; ") + s; };
  std::vector<std::string> missing;
  for (const Need& n : need_names_) {
    const std::uint8_t* flags = need_.Find(n.key >> 32, static_cast<std::uint32_t>(n.key));
    if (flags != nullptr && (*flags & 2u) == 0) missing.push_back(n.name);
  }
  if (!missing.empty()) {
    std::sort(missing.begin(), missing.end());
    missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
    std::string names;
    for (std::size_t i = 0; i < missing.size() && i < 5; ++i) {
      names += (i ? ", " : "") + missing[i];
    }
    if (missing.size() > 5) names += " (+" + std::to_string(missing.size() - 5) + " more)";
    append("rule " + spec().name + " needs " + needs_ + ", which selected tensor(s) " + names +
           " never carried, so it cannot judge them");
  }
  for (const std::string& p : problems_) append("rule " + spec().name + ": " + p);
  return out;
}

}  // namespace tstat::rules
