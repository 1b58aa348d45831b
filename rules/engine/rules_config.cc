// RulesConfig parsing (protobuf JSON mapping of tstat_rules.proto) and rule
// creation through a RuleRegistry.
#include "rules/engine/rules_config.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "io/h5/posix_file.h"
#include "proto/json_schema_check.h"
#include "proto/quoted_text.h"
#include "rules/engine/builtin_defaults.h"
#include "rules/engine/param_reader.h"
#include "tstat_rules.pb.h"

namespace tstat::rules {
namespace {

namespace pb = ::tstat::rulesconfig;
using google::protobuf::Value;

// The shortest text that reads back as `v` ("10", "1e-07", "0.25").
std::string NumberText(double v) {
  char buf[40];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// A parameter value as the string smdebug would pass.
Status ScalarText(const Value& v, const std::string& field, std::string* out) {
  switch (v.kind_case()) {
    case Value::kStringValue:
      *out = v.string_value();
      return Status::OK();
    case Value::kNumberValue:
      *out = NumberText(v.number_value());
      return Status::OK();
    case Value::kBoolValue:
      *out = v.bool_value() ? "true" : "false";
      return Status::OK();
    default:
      return Status::InvalidArgument(field + ": must be a string, a number or a boolean");
  }
}

Status ParamText(const Value& v, const std::string& field, std::string* out) {
  if (v.kind_case() != Value::kListValue) return ScalarText(v, field, out);
  out->clear();
  for (int i = 0; i < v.list_value().values_size(); ++i) {
    std::string item;
    TSTAT_RETURN_IF_ERROR(
        ScalarText(v.list_value().values(i), field + "[" + std::to_string(i) + "]", &item));
    *out += (i ? "," : "") + item;
  }
  return Status::OK();
}

// collection_names: a list of names or one comma-separated string.
Status CollectionNames(const Value& v, const std::string& field, std::vector<std::string>* out) {
  if (v.kind_case() == Value::kStringValue) {
    *out = SplitList(v.string_value());
    return Status::OK();
  }
  if (v.kind_case() == Value::kListValue) {
    for (int i = 0; i < v.list_value().values_size(); ++i) {
      const Value& item = v.list_value().values(i);
      if (item.kind_case() != Value::kStringValue) {
        return Status::InvalidArgument(field + "[" + std::to_string(i) + "]: must be a string");
      }
      for (std::string& s : SplitList(item.string_value())) out->push_back(std::move(s));
    }
    return Status::OK();
  }
  return Status::InvalidArgument(field + ": must be a string or a list of strings");
}

// tensor_regex: one pattern, or a list of patterns (any may match).
Status TensorRegex(const Value& v, const std::string& field, std::string* out) {
  if (v.kind_case() == Value::kStringValue) {
    *out = v.string_value();
    return Status::OK();
  }
  if (v.kind_case() == Value::kListValue) {
    out->clear();
    for (int i = 0; i < v.list_value().values_size(); ++i) {
      const Value& item = v.list_value().values(i);
      if (item.kind_case() != Value::kStringValue) {
        return Status::InvalidArgument(field + "[" + std::to_string(i) + "]: must be a string");
      }
      *out += (i ? "|" : "") + std::string("(?:") + item.string_value() + ")";
    }
    return Status::OK();
  }
  return Status::InvalidArgument(field + ": must be a string or a list of strings");
}

Result<ConfiguredRule> Convert(const pb::RuleConfig& in, int index) {
  const std::string at = "rules[" + std::to_string(index) + "]";
  ConfiguredRule out;
  RuleSpec& spec = out.spec;
  spec.type = in.type();
  if (!in.when().empty()) {
    if (spec.type.empty()) spec.type = "expression";
    if (spec.type != "expression") {
      return Status::InvalidArgument(
          at + ".when: only expression rules have a condition (type is \"" + spec.type + "\")");
    }
  }
  if (spec.type.empty()) {
    return Status::InvalidArgument(at +
                                   ".type: missing (a built-in rule type, or \"when\" for "
                                   "an expression rule)");
  }
  spec.name = in.name().empty() ? spec.type : in.name();
  const std::string named = at + " \"" + spec.name + "\"";
  if (!in.severity().empty()) {
    Severity severity;
    if (!ParseSeverity(in.severity(), &severity)) {
      return Status::InvalidArgument(named + ".severity: \"" + in.severity() +
                                     "\" is not a severity (info, warning, error, critical)");
    }
    spec.severity = severity;
  }
  if (in.has_confirm_steps()) {
    if (in.confirm_steps() < 1 || in.confirm_steps() > 1000000) {
      return Status::InvalidArgument(named + ".confirm_steps: must be in [1, 1000000], got " +
                                     std::to_string(in.confirm_steps()));
    }
    spec.confirm_steps = in.confirm_steps();
  }
  out.enabled = !in.has_enabled() || in.enabled();
  if (in.has_collection_names()) {
    TSTAT_RETURN_IF_ERROR(CollectionNames(in.collection_names(), named + ".collection_names",
                                          &spec.collection_names));
  }
  if (in.has_tensor_regex()) {
    TSTAT_RETURN_IF_ERROR(
        TensorRegex(in.tensor_regex(), named + ".tensor_regex", &spec.tensor_regex));
  }
  for (const auto& [key, value] : in.parameters()) {
    if (key.empty()) {
      return Status::InvalidArgument(named + ".parameters: a parameter name is empty");
    }
    const std::string field = named + ".parameters." + json::Abbreviated(key);
    if (key == "collection_names" || key == "tensor_regex") {
      // smdebug passes the selection as rule parameters.
      if (in.has_collection_names() || in.has_tensor_regex()) {
        return Status::InvalidArgument(field + ": give " + key +
                                       " either here or as a field of "
                                       "the rule, not both");
      }
      Status s = key == "collection_names" ? CollectionNames(value, field, &spec.collection_names)
                                           : TensorRegex(value, field, &spec.tensor_regex);
      TSTAT_RETURN_IF_ERROR(s);
      continue;
    }
    std::string text;
    TSTAT_RETURN_IF_ERROR(ParamText(value, field, &text));
    spec.parameters[key] = text;
  }
  if (!in.when().empty()) {
    if (spec.parameters.count("when")) {
      return Status::InvalidArgument(named + ".when: given both as a field and as a parameter");
    }
    spec.parameters["when"] = in.when();
  }
  if (in.has_for_steps()) {
    if (spec.type != "expression") {
      return Status::InvalidArgument(named + ".for_steps: only for expression rules");
    }
    spec.parameters["for_steps"] = std::to_string(in.for_steps());
  }
  for (int i = 0; i < in.modes_size(); ++i) {
    Mode m;
    if (!ParseMode(in.modes(i), &m)) {
      return Status::InvalidArgument(named + ".modes[" + std::to_string(i) + "]: \"" + in.modes(i) +
                                     "\" is not a mode (TRAIN, EVAL, PREDICT, GLOBAL)");
    }
    spec.modes.push_back(m);
  }
  const pb::Actions& a = in.actions();
  if (a.has_record()) out.actions.record = a.record();
  if (a.has_print()) out.actions.print = a.print();
  if (a.has_stop_training()) out.actions.stop_training = a.stop_training();
  if (a.has_capture_raw_steps()) {
    if (a.capture_raw_steps() < 0) {
      return Status::InvalidArgument(named + ".actions.capture_raw_steps: must be >= 0, got " +
                                     std::to_string(a.capture_raw_steps()));
    }
    out.actions.capture_raw_steps = a.capture_raw_steps();
  }
  // smdebug's StalledTrainingRule stops the job itself when asked to.
  auto stop = spec.parameters.find("stop_training_on_fire");
  if (stop != spec.parameters.end() &&
      (stop->second == "true" || stop->second == "True" || stop->second == "1")) {
    out.actions.stop_training = true;
  }
  return out;
}

}  // namespace

Result<RulesConfig> ParseRulesConfigJson(std::string_view json, const RuleRegistry* registry) {
  // The strict check first: protobuf's parser reports neither line nor
  // column, keeps the last of repeated keys and takes "yes" for true.
  if (Status checked = json::CheckJsonAgainstSchema(json, pb::RulesConfig::descriptor());
      !checked.ok()) {
    return checked.WithContext("rules config");
  }
  pb::RulesConfig proto;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &proto, options);
  if (!status.ok()) {
    return Status::InvalidArgument("rules config: " + std::string(status.message()));
  }
  if (proto.rules_size() == 0 && !proto.defaults()) {
    // Most likely a mistake ("rules" misplaced or empty): a config that runs
    // nothing would pass every check silently.
    return Status::InvalidArgument(
        "rules config: no rules: list them in \"rules\", or set \"defaults\": true for the "
        "default set");
  }
  RulesConfig config;
  if (proto.defaults()) {
    RuleRegistry builtins;
    if (registry == nullptr) {
      TSTAT_RETURN_IF_ERROR(RegisterBuiltinRules(&builtins));
      registry = &builtins;
    }
    config = DefaultRulesConfig(*registry);
    config.is_default = false;
  }
  const std::size_t defaults = config.rules.size();
  std::set<std::string> names;
  for (int i = 0; i < proto.rules_size(); ++i) {
    Result<ConfiguredRule> rule = Convert(proto.rules(i), i);
    if (!rule.ok()) return rule.status().WithContext("rules config");
    if (!names.insert(rule->spec.name).second) {
      return Status::InvalidArgument("rules config: rules[" + std::to_string(i) + "].name: \"" +
                                     rule->spec.name +
                                     "\" is used by an earlier rule (names "
                                     "must be unique; the name defaults to the type)");
    }
    // An entry named like a default rule replaces it (or, disabled, removes it).
    auto same =
        std::find_if(config.rules.begin(), config.rules.begin() + defaults,
                     [&rule](const ConfiguredRule& r) { return r.spec.name == rule->spec.name; });
    if (same != config.rules.begin() + defaults) {
      same->enabled = false;
    } else if (!rule->enabled && proto.defaults()) {
      return Status::InvalidArgument("rules config: rules[" + std::to_string(i) + "] \"" +
                                     rule->spec.name + "\".enabled: no default rule has this name");
    }
    config.rules.push_back(std::move(rule).value());
  }
  config.rules.erase(std::remove_if(config.rules.begin(), config.rules.end(),
                                    [](const ConfiguredRule& r) { return !r.enabled; }),
                     config.rules.end());
  return config;
}

Result<RulesConfig> LoadRulesConfigFile(const std::string& path, const RuleRegistry* registry) {
  // Bounded and non-blocking: a FIFO, a device or a directory is refused
  // with the reason, never read. A rules config is a few KiB.
  constexpr std::uint64_t kMaxRulesConfigBytes = 16ull << 20;
  Result<std::string> text = io::ReadRegularFile(path, kMaxRulesConfigBytes);
  if (!text.ok()) return Status::IoError("rules config " + text.status().message());
  Result<RulesConfig> config = ParseRulesConfigJson(*text, registry);
  if (!config.ok()) return config.status().WithContext(path);
  return config;
}

RulesConfig DefaultRulesConfig(const RuleRegistry& registry) {
  RulesConfig config;
  config.is_default = true;
  const std::vector<std::string> known = registry.types();
  for (const BuiltinDefaults& d : AllBuiltinDefaults()) {
    if (!d.in_default_set) continue;
    if (std::find(known.begin(), known.end(), d.type) == known.end()) continue;
    ConfiguredRule r;
    r.spec.name = r.spec.type = d.type;
    config.rules.push_back(std::move(r));
  }
  return config;
}

Result<RulesConfig> WithoutRules(RulesConfig config, const std::vector<std::string>& names,
                                 const std::string& field) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    auto it = std::find_if(config.rules.begin(), config.rules.end(),
                           [&](const ConfiguredRule& r) { return r.spec.name == names[i]; });
    if (it == config.rules.end()) {
      std::string known;
      for (const ConfiguredRule& r : config.rules)
        known += (known.empty() ? "" : ", ") + r.spec.name;
      return Status::InvalidArgument(field + "[" + std::to_string(i) + "]: no rule \"" + names[i] +
                                     "\" runs (the rules: " + known + ")");
    }
    config.rules.erase(it);
  }
  return config;
}

Result<std::vector<std::unique_ptr<Rule>>> CreateRules(const RuleRegistry& registry,
                                                       const RulesConfig& config) {
  std::vector<std::unique_ptr<Rule>> rules;
  for (std::size_t i = 0; i < config.rules.size(); ++i) {
    const RuleSpec& spec = config.rules[i].spec;
    Result<std::unique_ptr<Rule>> rule = registry.Create(spec);
    if (!rule.ok()) {
      return rule.status().WithContext("rules[" + std::to_string(i) + "] \"" + spec.name + "\"");
    }
    rules.push_back(std::move(rule).value());
  }
  return rules;
}

std::map<std::string, RuleActions> ActionsByRule(const RulesConfig& config) {
  std::map<std::string, RuleActions> out;
  for (const ConfiguredRule& r : config.rules) out[r.spec.name] = r.actions;
  return out;
}

Result<RulesConfig> ChooseRulesConfig(const RuleRegistry& registry, const std::string& json,
                                      const std::string& path) {
  if (!json.empty()) return ParseRulesConfigJson(json, &registry);
  if (!path.empty()) return LoadRulesConfigFile(path, &registry);
  return DefaultRulesConfig(registry);
}

Result<LoadedRules> LoadRules(const RuleRegistry& registry, const std::string& config_path) {
  LoadedRules out;
  TSTAT_ASSIGN_OR_RETURN(out.config, ChooseRulesConfig(registry, "", config_path));
  Result<std::vector<std::unique_ptr<Rule>>> rules = CreateRules(registry, out.config);
  if (!rules.ok()) {
    return config_path.empty() ? rules.status() : rules.status().WithContext(config_path);
  }
  out.rules = std::move(rules).value();
  return out;
}

}  // namespace tstat::rules
