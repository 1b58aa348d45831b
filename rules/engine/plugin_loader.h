// RulePlugin: a loaded rule plugin (tstat/rule_plugin.h) - an RAII dlopen
// handle. Keep it alive while any rule (or registry factory) from it exists:
// rule objects and factories run the plugin's code, and their destructors
// do too. Declare the handles before the registry and the rules, so they are
// destroyed after them.
// Thread safety: loading is done by one thread; a loaded plugin is immutable.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tstat/rule.h"

namespace tstat::rules {

class RulePlugin {
 public:
  // Loads `path` and registers its rule types into `registry`. Errors name
  // the path: kNotFound when the library cannot be loaded (missing file,
  // missing dependency: dlerror's text); kInvalidArgument when it has no
  // `tstat_register_rules` entry point, or registers a type that `registry`
  // already has; the entry point's own error otherwise (an exception thrown
  // by it becomes kInternal). On error nothing is added to `registry`.
  static Result<std::shared_ptr<RulePlugin>> Load(const std::string& path, RuleRegistry* registry);
  ~RulePlugin();  // dlclose
  RulePlugin(const RulePlugin&) = delete;
  RulePlugin& operator=(const RulePlugin&) = delete;

  const std::string& path() const { return path_; }

 private:
  RulePlugin(std::string path, void* handle) : path_(std::move(path)), handle_(handle) {}
  std::string path_;
  void* handle_;
};

// Loads every path in order; the first error is returned with the field
// name `what` + "[i]" as context (e.g. "rules.plugins[1]").
Result<std::vector<std::shared_ptr<RulePlugin>>> LoadRulePlugins(
    const std::vector<std::string>& paths, RuleRegistry* registry, const std::string& what);

}  // namespace tstat::rules
