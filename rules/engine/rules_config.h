// The rules config: which rules run, with which parameters, on which tensors
// and modes, and what happens when they fire.
//
// The file is the JSON form of tstat.rulesconfig.RulesConfig
// (proto/tstat_rules.proto), e.g.
//   {"rules": [{"name": "vg", "type": "vanishing_gradient",
//               "parameters": {"threshold": "1e-7"}, "collection_names": "gradients",
//               "modes": ["TRAIN"], "actions": {"stop_training": true}},
//              {"name": "grad_blowup", "collection_names": "gradients",
//               "when": "l2 > 1e3 || nan_count > 0", "for_steps": 3}]}
// Parameter values may be JSON strings (as smdebug passes them), numbers,
// booleans or lists of those (joined with ","). smdebug-style
// "collection_names" / "tensor_regex" inside "parameters" are moved to the
// rule's selection. An entry with "when" and no "type" is an expression rule.
// Every error names the entry and the field ("rules[1] \"grad_blowup\": ...").
// See docs/rules.md for every rule's parameters.
// Thread safety: pure functions.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tstat/rule.h"

namespace tstat::rules {

struct RuleActions {
  bool record = true;  // append to RUN/findings.jsonl
  bool print = true;   // one line on the runner's output
  // Ask the training process to stop when an episode opens; unset: when its
  // severity is at least the runner's stop level (ActionRunner::Options).
  std::optional<bool> stop_training;
  int capture_raw_steps = 0;  // raw snapshots of the finding's tensor for this many steps
};

struct ConfiguredRule {
  RuleSpec spec;
  RuleActions actions;
  bool enabled = true;  // the config's "enabled"
};

struct RulesConfig {
  std::vector<ConfiguredRule> rules;
  bool is_default = false;  // made by DefaultRulesConfig()
};

// Parses and checks the structure of a rules config (fields, types, modes,
// names, severities). Parameters are checked by CreateRules().
// kInvalidArgument naming the field on any error. With "defaults": true the
// result holds the default set (of `registry`, or of every built-in type
// when null) with the file's entries replacing or adding rules.
Result<RulesConfig> ParseRulesConfigJson(std::string_view json,
                                         const RuleRegistry* registry = nullptr);
// Reads and parses a file; kIoError when it cannot be read.
Result<RulesConfig> LoadRulesConfigFile(const std::string& path,
                                        const RuleRegistry* registry = nullptr);

// The rules config of a runner: the JSON text `json` when it is not empty,
// else the file `path` when that is not empty, else the default set of
// `registry`. Errors as ParseRulesConfigJson / LoadRulesConfigFile.
Result<RulesConfig> ChooseRulesConfig(const RuleRegistry& registry, const std::string& json,
                                      const std::string& path);

// The rules that run without a config file (the default rule set,
// rules/engine/builtin_defaults.h), each with its default parameters, severity and
// actions - those of them `registry` knows.
RulesConfig DefaultRulesConfig(const RuleRegistry& registry);

// `config` without the rules named in `names`; kInvalidArgument naming a
// name no rule of the config has (listing those it has).
Result<RulesConfig> WithoutRules(RulesConfig config, const std::vector<std::string>& names,
                                 const std::string& field);

// Creates the rules of `config`, in order. Unknown types, unknown or
// mistyped parameters, invalid regexes and expression syntax errors are
// errors naming the entry ("rules[1] \"grad_blowup\": ...").
Result<std::vector<std::unique_ptr<Rule>>> CreateRules(const RuleRegistry& registry,
                                                       const RulesConfig& config);

// The actions of each rule, by rule (instance) name.
std::map<std::string, RuleActions> ActionsByRule(const RulesConfig& config);

// A config and its rules, ready to run.
struct LoadedRules {
  RulesConfig config;
  std::vector<std::unique_ptr<Rule>> rules;
};
// LoadRulesConfigFile(config_path) (DefaultRulesConfig when the path is
// empty), then CreateRules().
Result<LoadedRules> LoadRules(const RuleRegistry& registry, const std::string& config_path);

}  // namespace tstat::rules
