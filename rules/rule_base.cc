#include "rules/rule_base.h"

#include <re2/re2.h>

#include <algorithm>
#include <cstdio>

namespace tstat::rules {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

RuleBase::RuleBase(RuleSpec spec, std::vector<std::string> default_collections)
    : spec_(std::move(spec)) {
  if (spec_.name.empty()) spec_.name = spec_.type;
  collections_ = spec_.collection_names;
  if (collections_.empty() && spec_.tensor_regex.empty()) collections_ = std::move(default_collections);
}

RuleBase::~RuleBase() = default;

Status RuleBase::Init() {
  if (!spec_.tensor_regex.empty()) {
    RE2::Options opt;
    opt.set_log_errors(false);
    regex_ = std::make_unique<RE2>(spec_.tensor_regex, opt);
    if (!regex_->ok()) {
      return Status::InvalidArgument("rule " + spec_.name + ": tensor_regex \"" + spec_.tensor_regex +
                                     "\" is invalid: " + regex_->error());
    }
  }
  return Status::OK();
}

bool RuleBase::ModeSelected(Mode m) const {
  return spec_.modes.empty() ||
         std::find(spec_.modes.begin(), spec_.modes.end(), m) != spec_.modes.end();
}

bool RuleBase::Matches(const TensorInfo& t) const {
  for (const std::string& c : collections_) {
    if (std::find(t.collections.begin(), t.collections.end(), c) != t.collections.end()) return true;
  }
  return regex_ != nullptr && RE2::PartialMatch(t.name, *regex_);
}

bool RuleBase::Selected(const StepView& step, std::uint32_t tensor_id) {
  const std::uint64_t key = (static_cast<std::uint64_t>(step.worker) << 32) | tensor_id;
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  const TensorInfo* t = Info(step, tensor_id);
  const bool sel = t != nullptr && Matches(*t);
  saw_tensors_ = true;
  matched_any_ = matched_any_ || sel;
  cache_.emplace(key, sel);
  return sel;
}

std::string RuleBase::Diagnostics() const {
  if (!saw_tensors_ || matched_any_) return {};
  std::string what;
  if (!spec_.tensor_regex.empty()) what = "tensor_regex \"" + spec_.tensor_regex + "\"";
  for (const std::string& c : collections_) {
    what += (what.empty() ? "collection " : ", collection ") + c;
  }
  return "rule " + spec_.name + ": " + what + " matched no tensor, so it never fires";
}

Finding RuleBase::MakeFinding(const StepView& step, const std::string& tensor, std::string message,
                              std::vector<std::pair<std::string, double>> values) const {
  Finding f;
  f.rule = spec_.name;
  f.type = spec_.type;
  f.step = step.key;
  f.worker = step.worker;
  f.tensor = tensor;
  f.values = std::move(values);
  f.message = std::move(message);
  f.wall_time = step.wall_time;
  return f;
}

}  // namespace tstat::rules
