// LossRuleBase: loss selection and the no-loss diagnostic (see loss_source.h).
#include "rules/run/loss_source.h"

#include <algorithm>

namespace tstat::rules::run {

LossRuleBase::LossRuleBase(const RuleSpec& spec, ParamReader* params)
    : RuleBase(spec, /*default_collections=*/{}) {
  use_losses_collection_ = params->Bool("use_losses_collection", true);
}

std::optional<Mode> ReadModeParam(const RuleSpec& spec, ParamReader* params, Status* error) {
  const std::string m = params->String("mode", "");
  if (m.empty()) return std::nullopt;
  Mode mode;
  if (!ParseMode(m, &mode)) {
    if (error->ok()) {
      *error = Status::InvalidArgument("rule " + spec.type +
                                       ": parameter mode must be TRAIN, "
                                       "EVAL, PREDICT or GLOBAL, got \"" +
                                       m + "\"");
    }
    return std::nullopt;
  }
  return mode;
}

bool LossRuleBase::IsLoss(const StepView& step, std::uint32_t id, std::vector<std::int8_t>& cache) {
  if (id < cache.size() && cache[id] >= 0) return cache[id] != 0;
  if (id >= cache.size()) cache.resize(std::max<std::size_t>(id + 1, cache.size() * 2), -1);
  bool loss = Selected(step, id);  // the spec's collection_names / tensor_regex
  const TensorInfo* t = Info(step, id);
  if (!loss && t != nullptr && use_losses_collection_) {
    loss =
        std::find(t->collections.begin(), t->collections.end(), "losses") != t->collections.end() ||
        (t->kind == TensorKind::kScalar &&
         (t->name.find("loss") != std::string::npos || t->name.find("Loss") != std::string::npos));
  }
  cache[id] = loss ? 1 : 0;
  return loss;
}

void LossRuleBase::CollectLosses(const IndexedStep& indexed, std::vector<LossValue>* out) {
  const StepView& step = *indexed.view;
  out->clear();
  if (!ModeSelected(step.key.mode)) return;
  saw_step_ = true;
  // Ids are dense per worker: a flat cache (-1 unknown, 0 no, 1 yes).
  std::vector<std::int8_t>& cache = is_loss_[step.worker];
  if (step.scalars != nullptr) {
    for (const ScalarRecord& s : *step.scalars) {
      if (!IsLoss(step, s.tensor_id, cache)) continue;
      const TensorInfo* t = Info(step, s.tensor_id);
      out->push_back({s.tensor_id, t ? &t->name : nullptr, s.value});
    }
  }
  if (step.records != nullptr) {
    // IsLoss depends on the tensor only: the loss records of a layout are
    // found once, not by walking every record of every step.
    const std::vector<std::uint32_t>& losses = loss_records_.Records(
        indexed, [&](std::size_t i) { return IsLoss(step, indexed.ids[i], cache); });
    for (std::uint32_t i : losses) {
      const TensorStatsRecord& r = (*step.records)[i];
      if (!r.has_stats) continue;
      const TensorInfo* t = indexed.infos[i];
      out->push_back({r.tensor_id, t ? &t->name : nullptr, r.stats.mean});
    }
  }
  static const std::string kUnnamed = "?";
  for (LossValue& v : *out) {
    if (v.name == nullptr) v.name = &kUnnamed;
  }
  saw_loss_ = saw_loss_ || !out->empty();
}

CaptureNeeds LossRuleBase::Needs(const TensorInfo& t) const {
  if (t.kind != TensorKind::kTensor) return {};
  const bool loss =
      Takes(t) || (use_losses_collection_ && std::find(t.collections.begin(), t.collections.end(),
                                                       "losses") != t.collections.end());
  return loss ? StatsIn(t, CaptureNeeds::AllModes()) : CaptureNeeds{};
}

std::string LossRuleBase::Diagnostics() const {
  if (!saw_step_) return {};
  const RuleSpec& s = spec();
  if (!saw_loss_) {
    std::string where;
    if (use_losses_collection_) {
      where = "no scalar named like \"loss\", nothing in collection \"losses\"";
    }
    for (const std::string& c : s.collection_names) {
      where += (where.empty() ? "nothing in collection " : ", nothing in collection ") + c;
    }
    if (!s.tensor_regex.empty()) {
      where += (where.empty() ? "" : ", ") + std::string("nothing matching tensor_regex \"") +
               s.tensor_regex + "\"";
    }
    if (where.empty()) where = "use_losses_collection is false and no selection was given";
    return "rule " + s.name + ": no loss found in the run (" + where + "), so " + s.type +
           " checked nothing; save the loss (e.g. SaveScalar(\"loss\", value)) or set "
           "collection_names / tensor_regex";
  }
  const std::string missing = MissingData();
  return missing.empty() ? std::string() : "rule " + s.name + ": " + missing;
}

}  // namespace tstat::rules::run
