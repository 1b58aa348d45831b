// What `tstat check` and `tstat rules` share: the --config / --plugin options
// and turning them into ready rules (built-ins, then plugins, then the config).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "rules/engine/plugin_loader.h"
#include "rules/engine/rules_config.h"
#include "tstat/rule.h"
#include "tstat/status.h"

namespace tstat::cli {

struct RulesSourceFlags {
  std::string config;                // "" = the default rule set
  std::vector<std::string> plugins;  // shared libraries of custom rule types
};

// Adds --config and --plugin to `app`.
void AddRulesSourceOptions(CLI::App* app, RulesSourceFlags* flags);

// The loaded rules and what must outlive them. Member order matters: the
// plugins are destroyed last, after the registry and the rules they made.
// Keep this object alive longer than any runner that took `loaded.rules`.
struct RulesSource {
  std::vector<std::shared_ptr<rules::RulePlugin>> plugins;
  RuleRegistry registry;
  rules::LoadedRules loaded;
};

// Registers the built-in rules, loads the plugins ("--plugin[i]" in errors)
// and the config (or the default set).
Result<std::unique_ptr<RulesSource>> LoadRulesSource(const RulesSourceFlags& flags);

}  // namespace tstat::cli
