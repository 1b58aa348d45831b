#include "rules/engine/rule_engine.h"

#include <algorithm>

#include "rules/engine/tick.h"

namespace tstat::rules {

namespace {

std::map<std::string, int> ConfirmSteps(const std::vector<std::unique_ptr<Rule>>& rules) {
  std::map<std::string, int> out;
  for (const auto& rule : rules) out[rule->spec().name] = rule->spec().confirm_steps.value_or(1);
  return out;
}

// The non-empty texts `text` (Rule::Diagnostics or Rule::Notes) of `rules`.
std::vector<std::string> RuleTexts(const std::vector<std::unique_ptr<Rule>>& rules,
                                   std::string (Rule::*text)() const) {
  std::vector<std::string> out;
  for (const auto& rule : rules) {
    std::string t = ((*rule).*text)();
    if (!t.empty()) out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

RuleEngine::RuleEngine(std::vector<std::unique_ptr<Rule>> rules, EngineOptions options)
    : rules_(std::move(rules)), options_(options), tracker_(ConfirmSteps(rules_)) {
  if (options_.world_size < 1) options_.world_size = 1;
  for (const auto& rule : rules_) bases_.push_back(dynamic_cast<RuleBase*>(rule.get()));
}

void RuleEngine::Evaluate(int worker, const StepBatch& batch, const TensorCatalog* catalog,
                          std::vector<Finding>* out) {
  StepView view;
  view.worker = worker;
  view.key = batch.key;
  view.wall_time = batch.wall_time;
  view.records = &batch.stats;
  view.scalars = &batch.scalars;
  view.catalog = catalog;
  const IndexedStep indexed = indexer_.Index(view);
  const std::size_t before = out->size();
  for (std::size_t k = 0; k < rules_.size(); ++k) {
    if (bases_[k] != nullptr) {
      bases_[k]->EvaluateStep(indexed, out);
    } else {
      const std::size_t own = out->size();
      rules_[k]->Evaluate(view, out);
      // A rule of its own kind: its findings carry the configured severity.
      const Severity severity = rules_[k]->spec().severity.value_or(Severity::kError);
      for (std::size_t i = own; i < out->size(); ++i) (*out)[i].severity = severity;
    }
  }
  tracker_.Step(indexed, FindingsSince(*out, before), &events_);
  ++steps_evaluated_;
  records_evaluated_ += batch.stats.size() + batch.scalars.size();
}

void RuleEngine::Feed(int worker, const StepBatch& batch, const TensorCatalog* catalog,
                      std::vector<Finding>* out) {
  if (finished_) return;
  if (options_.world_size == 1 && pending_.empty()) {
    // A single worker's step is complete as soon as it arrives: no copy.
    max_step_seen_ = std::max(max_step_seen_, batch.key.global_step);
    Evaluate(worker, batch, catalog, out);
    return;
  }
  max_step_seen_ = std::max(max_step_seen_, batch.key.global_step);
  pending_[batch.key.global_step].push_back(Pending{worker, batch, catalog});
  EvaluateCompleteSteps(out, /*all=*/false);
}

void RuleEngine::EvaluateCompleteSteps(std::vector<Finding>* out, bool all) {
  while (!pending_.empty()) {
    auto it = pending_.begin();
    const bool complete = all || static_cast<int>(it->second.size()) >= options_.world_size ||
                          it->first < max_step_seen_;
    if (!complete) break;
    std::vector<Pending>& ps = it->second;
    std::stable_sort(ps.begin(), ps.end(),
                     [](const Pending& a, const Pending& b) { return a.worker < b.worker; });
    for (const Pending& p : ps) Evaluate(p.worker, p.batch, p.catalog, out);
    pending_.erase(it);
  }
}

const std::vector<Finding>& RuleEngine::FindingsSince(const std::vector<Finding>& out,
                                                      std::size_t before) {
  step_findings_.assign(out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
  return step_findings_;
}

void RuleEngine::Tick(double now, std::vector<Finding>* out) {
  if (finished_) return;
  const std::size_t before = out->size();
  TickRules(*this, now, out);
  tracker_.Tick(FindingsSince(*out, before), &events_);
}

void RuleEngine::Finish(std::vector<Finding>* out) {
  if (finished_) return;
  EvaluateCompleteSteps(out, /*all=*/true);
  const std::size_t before = out->size();
  for (auto& rule : rules_) rule->Finish(out);
  tracker_.Tick(FindingsSince(*out, before), &events_);
  tracker_.Finish(&events_);
  finished_ = true;
}

std::vector<std::string> RuleEngine::Diagnostics() const {
  return RuleTexts(rules_, &Rule::Diagnostics);
}

std::vector<std::string> RuleEngine::Notes() const { return RuleTexts(rules_, &Rule::Notes); }

}  // namespace tstat::rules
