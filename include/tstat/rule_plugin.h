// Rule plugins: custom C++ rule types in a shared library.
//
// A plugin is a shared library that defines the entry point
//
//   extern "C" tstat::Status tstat_register_rules(tstat::RuleRegistry* registry);
//
// (write it with TSTAT_RULE_PLUGIN_ENTRY below), which registers its rule
// types with registry->Register(type, factory). It is loaded with dlopen
// (RTLD_NOW | RTLD_LOCAL) by the session (SessionConfig::rules.plugins) and by
// `tstat rules` / `tstat check --plugin PATH`; the library stays loaded while
// any rule it created exists. Its rules are configured like built-in ones
// ({"type": "<registered type>", "parameters": {...}}); unknown or mistyped
// parameters should make the factory return kInvalidArgument naming them.
//
//   #include "tstat/rule_plugin.h"
//   class LossSpike final : public tstat::Rule { ... };
//   TSTAT_RULE_PLUGIN_ENTRY(registry) {
//     return registry->Register("loss_spike", [](const tstat::RuleSpec& spec)
//         -> tstat::Result<std::unique_ptr<tstat::Rule>> { ... });
//   }
//
// Build it against these headers with the same compiler and standard library
// as tstat (the interface passes C++ types), as position-independent code;
// it needs no tstat library at link time: everything it calls from here is
// inline (RuleRegistry::Register, Status, Result).
// Thread safety: the entry point is called once per load, by the loading
// thread; the rules then run on the rule engine's thread.
#pragma once

#include "tstat/rule.h"
#include "tstat/status.h"

namespace tstat {

// The symbol every plugin defines.
inline constexpr char kRulePluginEntryName[] = "tstat_register_rules";
using RulePluginEntry = Status (*)(RuleRegistry* registry);

// The version of the rule interface: tstat::Rule's virtual functions and the
// types they pass. TSTAT_RULE_PLUGIN_ENTRY records in the plugin the version
// it was built against (tstat_rule_plugin_abi()), and the loader refuses a
// plugin built against another: its rules would lack functions tstat calls
// (version 2 added Rule::Notes). Bumped whenever the interface changes.
inline constexpr int kRulePluginAbi = 2;
inline constexpr char kRulePluginAbiName[] = "tstat_rule_plugin_abi";
using RulePluginAbi = int (*)();

}  // namespace tstat

// Defines the entry point, and the interface version the plugin is built
// against, with C linkage and default visibility (so they are found even
// when the plugin is built with -fvisibility=hidden).
#define TSTAT_RULE_PLUGIN_ENTRY(registry_param)                                           \
  extern "C" __attribute__((visibility("default"))) int tstat_rule_plugin_abi() {         \
    return ::tstat::kRulePluginAbi;                                                       \
  }                                                                                       \
  extern "C" __attribute__((visibility("default"))) ::tstat::Status tstat_register_rules( \
      ::tstat::RuleRegistry* registry_param)
