// Rules: host-side judges of the reduced statistics.
//
// A rule sees complete steps of one worker in step order (StepView) and emits
// findings. The same rule objects run in-process (fed by the capture pipeline,
// no file round trip), out-of-process on a live run (`tstat rules RUN
// --follow`) and on a finished run (`tstat check RUN`). Rules consume
// statistics, never raw tensors.
//
// Thread safety: a Rule instance is driven by one thread (the rule engine's).
// RuleRegistry is an explicit registry object: the built-ins are added by
// RegisterBuiltinRules(); nothing global is mutated behind the caller's back.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tstat/stats_record.h"
#include "tstat/status.h"

namespace tstat {

// Evidence of a problem, at one step of one worker.
struct Finding {
  std::string rule;    // the rule instance's name (as configured)
  std::string type;    // the rule type, e.g. "vanishing_gradient"
  StepKey step;
  int worker = 0;
  std::string tensor;  // empty for run-level findings (e.g. loss_not_decreasing)
  std::vector<std::pair<std::string, double>> values;  // e.g. {"mean_abs", 3e-9}, {"threshold", 1e-7}
  std::string message;  // one line a person can act on
  double wall_time = 0.0;
};

// Lookup of a worker's registered tensors by id.
class TensorCatalog {
 public:
  virtual ~TensorCatalog() = default;
  virtual const TensorInfo* Find(std::uint32_t id) const = 0;
};

// One complete step of one worker, as a rule sees it.
struct StepView {
  int worker = 0;
  StepKey key;
  double wall_time = 0.0;
  const std::vector<TensorStatsRecord>* records = nullptr;  // capture order
  const std::vector<ScalarRecord>* scalars = nullptr;
  const TensorCatalog* catalog = nullptr;
};

// How a rule instance was configured (the JSON form is in proto/ and README).
struct RuleSpec {
  std::string name;  // instance name; defaults to the type
  std::string type;  // built-in type or registered custom type
  std::map<std::string, std::string> parameters;  // smdebug-style string parameters
  std::vector<std::string> collection_names;
  std::string tensor_regex;
  std::vector<Mode> modes;  // empty = all modes
};

class Rule {
 public:
  virtual ~Rule() = default;
  virtual const RuleSpec& spec() const = 0;
  // Called once per complete step of each worker, in step order.
  virtual void Evaluate(const StepView& step, std::vector<Finding>* findings) = 0;
  // Called once when the run has ended and every step was evaluated.
  virtual void Finish(std::vector<Finding>* findings) { (void)findings; }
  // A warning to show once (e.g. "tensor_regex matches no tensor"), or empty.
  virtual std::string Diagnostics() const { return {}; }
};

using RuleFactory = std::function<Result<std::unique_ptr<Rule>>(const RuleSpec&)>;

class RuleRegistry {
 public:
  // kInvalidArgument if `type` is empty or already registered. Inline (like
  // Absorb): rule plugins (tstat/rule_plugin.h) call it without linking tstat.
  Status Register(const std::string& type, RuleFactory factory) {
    if (type.empty()) return Status::InvalidArgument("rule type must not be empty");
    if (!factory) return Status::InvalidArgument("rule type " + type + ": factory is empty");
    if (!factories_.emplace(type, std::move(factory)).second) {
      return Status::InvalidArgument("rule type " + type + " is already registered");
    }
    return Status::OK();
  }
  // Moves every type of `other` into this registry. kInvalidArgument naming
  // the type, and nothing moved, if one is registered here already.
  Status Absorb(RuleRegistry&& other) {
    for (const auto& kv : other.factories_) {
      if (factories_.count(kv.first)) {
        return Status::InvalidArgument("rule type " + kv.first + " is already registered");
      }
    }
    for (auto& kv : other.factories_) factories_.emplace(kv.first, std::move(kv.second));
    other.factories_.clear();
    return Status::OK();
  }
  // kNotFound naming the type and listing the known ones if unknown;
  // kInvalidArgument naming the parameter if a parameter is unknown/mistyped.
  Result<std::unique_ptr<Rule>> Create(const RuleSpec& spec) const;
  std::vector<std::string> types() const;

 private:
  std::map<std::string, RuleFactory> factories_;
};

// Adds every built-in rule type to `registry`.
Status RegisterBuiltinRules(RuleRegistry* registry);

}  // namespace tstat
