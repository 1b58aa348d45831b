// Rule plugins: dlopen, look up the entry point, register into a staging
// registry, then move the types into the caller's registry.
#include "rules/engine/plugin_loader.h"

#include <dlfcn.h>

#include <exception>

#include "tstat/rule_plugin.h"

namespace tstat::rules {

Result<std::shared_ptr<RulePlugin>> RulePlugin::Load(const std::string& path,
                                                     RuleRegistry* registry) {
  const std::string what = "rule plugin " + path;
  if (path.empty()) return Status::InvalidArgument("rule plugin: empty path");
  if (registry == nullptr) return Status::InvalidArgument(what + ": registry is null");
  (void)::dlerror();  // clear a stale error
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = ::dlerror();
    return Status::NotFound(what + ": cannot load: " + (err ? err : "unknown dlopen error"));
  }
  // From here the handle is owned: every return below closes it (after the
  // staging registry, which may hold the plugin's factories, is gone).
  std::shared_ptr<RulePlugin> plugin(new RulePlugin(path, handle));
  (void)::dlerror();
  void* symbol = ::dlsym(handle, kRulePluginEntryName);
  if (symbol == nullptr) {
    return Status::InvalidArgument(
        what + ": has no entry point " + kRulePluginEntryName +
        " (define it with TSTAT_RULE_PLUGIN_ENTRY from tstat/rule_plugin.h: extern \"C\", "
        "default visibility)");
  }
  void* abi = ::dlsym(handle, kRulePluginAbiName);
  const std::string rebuild = "; rebuild it against this tstat's tstat/rule_plugin.h";
  if (abi == nullptr) {
    return Status::InvalidArgument(what + ": has no " + kRulePluginAbiName +
                                   ": it was built against a tstat whose rule interface had no "
                                   "version, before version " +
                                   std::to_string(kRulePluginAbi) + rebuild);
  }
  const int version = reinterpret_cast<RulePluginAbi>(abi)();
  if (version != kRulePluginAbi) {
    return Status::InvalidArgument(what + ": built against rule interface version " +
                                   std::to_string(version) + ", this tstat's is " +
                                   std::to_string(kRulePluginAbi) + rebuild);
  }
  const auto entry = reinterpret_cast<RulePluginEntry>(symbol);
  RuleRegistry staging;
  Status registered;
  try {
    registered = entry(&staging);
  } catch (const std::exception& e) {
    registered = Status::Internal(std::string(kRulePluginEntryName) + " threw: " + e.what());
  } catch (...) {
    registered = Status::Internal(std::string(kRulePluginEntryName) + " threw");
  }
  if (!registered.ok()) return registered.WithContext(what);
  if (staging.types().empty()) {
    return Status::InvalidArgument(what + ": " + kRulePluginEntryName + " registered no rule type");
  }
  TSTAT_RETURN_IF_ERROR(registry->Absorb(std::move(staging)).WithContext(what));
  return plugin;
}

RulePlugin::~RulePlugin() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

Result<std::vector<std::shared_ptr<RulePlugin>>> LoadRulePlugins(
    const std::vector<std::string>& paths, RuleRegistry* registry, const std::string& what) {
  std::vector<std::shared_ptr<RulePlugin>> out;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    Result<std::shared_ptr<RulePlugin>> p = RulePlugin::Load(paths[i], registry);
    if (!p.ok()) return p.status().WithContext(what + "[" + std::to_string(i) + "]");
    out.push_back(std::move(p).value());
  }
  return out;
}

}  // namespace tstat::rules
