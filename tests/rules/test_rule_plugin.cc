// A rule plugin for the tests (tstat/rule_plugin.h), built as a MODULE that
// links no tstat library. Its rule types:
//   fires_at_step  {"step": N}: one finding at global step N, on the first
//                  selected tensor of that step (tensor_regex, default: any)
//                  or as a run-level finding when the step has no tensor.
//   sleeps         {"ms": M}: sleeps M ms per evaluated step, never fires
//                  (a slow rules thread).
//   throws_at_step {"step": N}: throws std::runtime_error at step N.
// Unknown parameters are kInvalidArgument naming them, as for built-ins.
#include <chrono>
#include <regex>
#include <stdexcept>
#include <thread>

#include "tstat/rule_plugin.h"

namespace {

using tstat::Finding;
using tstat::Result;
using tstat::Rule;
using tstat::RuleSpec;
using tstat::Status;
using tstat::StepView;

Status IntParam(const RuleSpec& spec, const std::string& name, long long* out) {
  for (const auto& [key, value] : spec.parameters) {
    if (key != name) {
      return Status::InvalidArgument("rule " + spec.name + ": unknown parameter \"" + key + "\"");
    }
    try {
      std::size_t used = 0;
      *out = std::stoll(value, &used);
      if (used != value.size()) throw std::invalid_argument(value);
    } catch (const std::exception&) {
      return Status::InvalidArgument("rule " + spec.name + ": parameter " + name +
                                     " must be an integer, got \"" + value + "\"");
    }
  }
  return Status::OK();
}

class FiresAtStep final : public Rule {
 public:
  FiresAtStep(RuleSpec spec, long long step) : spec_(std::move(spec)), step_(step) {
    if (!spec_.tensor_regex.empty()) regex_ = std::regex(spec_.tensor_regex);
  }
  const RuleSpec& spec() const override { return spec_; }
  void Evaluate(const StepView& step, std::vector<Finding>* findings) override {
    if (step.key.global_step != step_) return;
    Finding f;
    f.rule = spec_.name;
    f.type = spec_.type;
    f.step = step.key;
    f.worker = step.worker;
    f.wall_time = step.wall_time;
    for (const tstat::TensorStatsRecord& r : *step.records) {
      const tstat::TensorInfo* info = step.catalog ? step.catalog->Find(r.tensor_id) : nullptr;
      if (info == nullptr) continue;
      if (!spec_.tensor_regex.empty() && !std::regex_search(info->name, regex_)) continue;
      f.tensor = info->name;
      f.values.emplace_back("max", r.stats.max);
      break;
    }
    f.message = "plugin rule fired at step " + std::to_string(step_);
    findings->push_back(std::move(f));
  }

 private:
  RuleSpec spec_;
  long long step_;
  std::regex regex_;
};

class Sleeps final : public Rule {
 public:
  Sleeps(RuleSpec spec, long long ms) : spec_(std::move(spec)), ms_(ms) {}
  const RuleSpec& spec() const override { return spec_; }
  void Evaluate(const StepView&, std::vector<Finding>*) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
  }

 private:
  RuleSpec spec_;
  long long ms_;
};

class ThrowsAtStep final : public Rule {
 public:
  ThrowsAtStep(RuleSpec spec, long long step) : spec_(std::move(spec)), step_(step) {}
  const RuleSpec& spec() const override { return spec_; }
  void Evaluate(const StepView& step, std::vector<Finding>*) override {
    if (step.key.global_step == step_) throw std::runtime_error("plugin rule broke");
  }

 private:
  RuleSpec spec_;
  long long step_;
};

template <class R>
tstat::RuleFactory Factory(const char* param, long long default_value) {
  return [param, default_value](const RuleSpec& spec) -> Result<std::unique_ptr<Rule>> {
    long long v = default_value;
    Status s = IntParam(spec, param, &v);
    if (!s.ok()) return s;
    return std::unique_ptr<Rule>(new R(spec, v));
  };
}

}  // namespace

TSTAT_RULE_PLUGIN_ENTRY(registry) {
  TSTAT_RETURN_IF_ERROR(registry->Register("fires_at_step", Factory<FiresAtStep>("step", 0)));
  TSTAT_RETURN_IF_ERROR(registry->Register("sleeps", Factory<Sleeps>("ms", 10)));
  return registry->Register("throws_at_step", Factory<ThrowsAtStep>("step", 0));
}
