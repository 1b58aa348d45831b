// The rules config: parsing (protobuf JSON mapping), conversion to RuleSpecs
// and actions, and rule creation errors that name the entry and the field.
#include "rules/engine/rules_config.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include "tests/io/io_test_util.h"
#include "tests/rules/run_rules_test_util.h"

namespace tstat::rules::runtest {
namespace {

RuleRegistry Registry() {
  RuleRegistry r;
  EXPECT_TRUE(RegisterBuiltinRules(&r).ok());
  return r;
}

Status CreateFrom(const std::string& json) {
  Result<RulesConfig> c = ParseRulesConfigJson(json);
  if (!c.ok()) return c.status();
  return CreateRules(Registry(), c.value()).status();
}

void ExpectError(const Status& s, std::vector<std::string> mentions) {
  EXPECT_FALSE(s.ok());
  for (const std::string& m : mentions) {
    EXPECT_NE(s.message().find(m), std::string::npos) << "'" << m << "' not in: " << s.message();
  }
}

constexpr char kExample[] = R"({"rules": [
  {"name": "vg", "type": "vanishing_gradient", "parameters": {"threshold": "1e-7"},
   "collection_names": "gradients", "tensor_regex": "fc", "modes": ["TRAIN"],
   "actions": {"stop_training": true, "capture_raw_steps": 5, "print": true}},
  {"name": "grad_blowup", "collection_names": "gradients",
   "when": "l2 > 1e3 || nan_count > 0", "for_steps": 3}]})";

TEST(RulesConfigTest, ParsesTheDocumentedExample) {
  Result<RulesConfig> c = ParseRulesConfigJson(kExample);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->rules.size(), 2u);
  const ConfiguredRule& vg = c->rules[0];
  EXPECT_EQ(vg.spec.name, "vg");
  EXPECT_EQ(vg.spec.type, "vanishing_gradient");
  EXPECT_EQ(vg.spec.parameters.at("threshold"), "1e-7");
  EXPECT_EQ(vg.spec.collection_names, std::vector<std::string>{"gradients"});
  EXPECT_EQ(vg.spec.tensor_regex, "fc");
  EXPECT_EQ(vg.spec.modes, std::vector<Mode>{Mode::kTrain});
  EXPECT_TRUE(vg.actions.stop_training);
  EXPECT_EQ(vg.actions.capture_raw_steps, 5);
  EXPECT_TRUE(vg.actions.print);
  EXPECT_TRUE(vg.actions.record);
  const ConfiguredRule& e = c->rules[1];
  EXPECT_EQ(e.spec.type, "expression");
  EXPECT_EQ(e.spec.parameters.at("when"), "l2 > 1e3 || nan_count > 0");
  EXPECT_EQ(e.spec.parameters.at("for_steps"), "3");
  EXPECT_FALSE(e.actions.stop_training);
  Result<std::vector<std::unique_ptr<Rule>>> rules = CreateRules(Registry(), c.value());
  ASSERT_TRUE(rules.ok()) << rules.status().ToString();
  EXPECT_EQ(rules->size(), 2u);
  EXPECT_EQ(ActionsByRule(c.value()).at("vg").capture_raw_steps, 5);
}

TEST(RulesConfigTest, ParameterValuesMayBeNumbersBooleansAndLists) {
  Result<RulesConfig> c = ParseRulesConfigJson(R"({"rules": [{"type": "x", "parameters":
      {"a": 1e-7, "b": 10, "c": true, "d": [0, 1, "x"], "e": 0.1, "f": "s"}}]})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const auto& p = c->rules[0].spec.parameters;
  EXPECT_EQ(p.at("a"), "1e-07");
  EXPECT_EQ(p.at("b"), "10");
  EXPECT_EQ(p.at("c"), "true");
  EXPECT_EQ(p.at("d"), "0,1,x");
  EXPECT_EQ(p.at("e"), "0.1");
  EXPECT_EQ(p.at("f"), "s");
  EXPECT_EQ(c->rules[0].spec.name, "x");  // the name defaults to the type
}

TEST(RulesConfigTest, SmdebugStyleSelectionInsideParameters) {
  Result<RulesConfig> c = ParseRulesConfigJson(R"({"rules": [{"type": "loss_not_decreasing",
      "parameters": {"collection_names": "losses,metrics", "tensor_regex": ["a", "b"]}}]})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rules[0].spec.collection_names, (std::vector<std::string>{"losses", "metrics"}));
  EXPECT_EQ(c->rules[0].spec.tensor_regex, "(?:a)|(?:b)");
  EXPECT_TRUE(c->rules[0].spec.parameters.empty());
  ExpectError(ParseRulesConfigJson(R"({"rules": [{"type": "t", "collection_names": "x",
      "parameters": {"collection_names": "y"}}]})")
                  .status(),
              {"rules[0]", "collection_names"});
}

TEST(RulesConfigTest, StructuralErrorsNameTheField) {
  ExpectError(ParseRulesConfigJson(R"({"rulez": []})").status(), {"rulez"});
  ExpectError(ParseRulesConfigJson(R"({"rules": [{"type": "t", "paramters": {}}]})").status(),
              {"rules[0]", "paramters"});
  ExpectError(
      ParseRulesConfigJson(R"({"rules": [{"when": "l2 > 1", "for_steps": "three"}]})").status(),
      {"for_steps"});
  ExpectError(
      ParseRulesConfigJson(R"({"rules": [{"type": "t", "actions": {"stop": true}}]})").status(),
      {"actions", "stop"});
  ExpectError(ParseRulesConfigJson(R"({"rules": [{"type": "t", "modes": ["TRAINING"]}]})").status(),
              {"rules[0]", "modes[0]", "TRAINING"});
  ExpectError(ParseRulesConfigJson(R"({"rules": [{"name": "a"}]})").status(), {"rules[0]", "type"});
  ExpectError(ParseRulesConfigJson(R"({"rules": [{"type": "t"}, {"type": "t"}]})").status(),
              {"rules[1]", "unique"});
  ExpectError(
      ParseRulesConfigJson(R"({"rules": [{"type": "overfit", "when": "l2 > 1"}]})").status(),
      {"rules[0]", "when"});
  ExpectError(
      ParseRulesConfigJson(R"({"rules": [{"type": "t", "parameters": {"x": {"a": 1}}}]})").status(),
      {"rules[0]", "parameters.x"});
  ExpectError(ParseRulesConfigJson(R"({"rules": [{"type": "t", "collection_names": 3}]})").status(),
              {"collection_names"});
  ExpectError(ParseRulesConfigJson(R"({"rules": [{"type": "t",
      "actions": {"capture_raw_steps": -1}}]})")
                  .status(),
              {"capture_raw_steps"});
  ExpectError(ParseRulesConfigJson("{\"rules\": [").status(), {"rules config"});
}

// The strict reader (proto/json_schema_check.h) runs before protobuf's: syntax
// errors with line and column, and what protobuf's parser let through.
TEST(RulesConfigTest, StrictJsonWithLineAndColumn) {
  ExpectError(ParseRulesConfigJson("{\"rules\": [\n  {\"type\": \"overfit\",}\n]}").status(),
              {"rules config", "not valid JSON", "line 2, column"});
  ExpectError(ParseRulesConfigJson("{\"rules\": [").status(),
              {"line 1, column 12", "unexpected end of input"});
  // A list where a rule belongs used to parse as no rules at all.
  ExpectError(ParseRulesConfigJson(R"({"rules": [[]]})").status(),
              {"rules[0]", "expected an object, got an array"});
  ExpectError(ParseRulesConfigJson(R"({"rules": []})").status(), {"no rules", "defaults"});
  ExpectError(ParseRulesConfigJson("{}").status(), {"no rules"});
  ExpectError(ParseRulesConfigJson("[]").status(), {"must be a JSON object"});
  ExpectError(
      ParseRulesConfigJson(R"({"rules": [{"type": "overfit", "type": "dead_relu"}]})").status(),
      {"type", "appears twice"});
  ExpectError(ParseRulesConfigJson(R"({"rules": [{"type": "overfit",
      "actions": {"stop_training": "yes"}}]})")
                  .status(),
              {"rules[0].actions.stop_training", "expected true or false", "\"yes\""});
  ExpectError(
      ParseRulesConfigJson(R"({"rules": [{"type": "overfit", "parameters": {"": 1}}]})").status(),
      {"rules[0] \"overfit\".parameters", "parameter name is empty"});
  // A 10 MB value is not echoed back.
  const std::string huge(10 << 20, 'x');
  const Status long_key = ParseRulesConfigJson("{\"rules\": [{\"" + huge + "\": 1}]}").status();
  ExpectError(long_key, {"unknown field", "characters"});
  EXPECT_LT(long_key.message().size(), 1000u);
  EXPECT_TRUE(ParseRulesConfigJson(R"({"defaults": true})").ok());
}

TEST(RulesConfigTest, RuleCreationErrorsNameTheRuleAndField) {
  Status unknown = CreateFrom(R"({"rules": [{"name": "a", "type": "vanishing_gradiant"}]})");
  EXPECT_EQ(unknown.code(), StatusCode::kNotFound);
  ExpectError(unknown, {"rules[0] \"a\"", "vanishing_gradiant", "known:", "vanishing_gradient"});
  ExpectError(CreateFrom(R"({"rules": [{"name": "b", "type": "loss_not_decreasing",
      "parameters": {"num_step": 3}}]})"),
              {"rules[0] \"b\"", "num_step"});
  ExpectError(CreateFrom(R"({"rules": [{"name": "c", "type": "loss_not_decreasing",
      "parameters": {"num_steps": "three"}}]})"),
              {"\"c\"", "num_steps", "three"});
  ExpectError(CreateFrom(R"({"rules": [{"name": "d", "type": "overfit",
      "tensor_regex": "loss("}]})"),
              {"\"d\"", "tensor_regex", "loss("});
  const Status syntax = CreateFrom(R"({"rules": [{"type": "vanishing_gradient"},
      {"name": "grad_blowup", "when": "l2 >> 3"}]})");
  ExpectError(syntax, {"rules[1] \"grad_blowup\"", "when", "column", "^"});
}

TEST(RulesConfigTest, StalledTrainingStopOnFireTurnsOnTheStopAction) {
  Result<RulesConfig> c = ParseRulesConfigJson(R"({"rules": [{"type": "stalled_training",
      "parameters": {"threshold": 60, "stop_training_on_fire": "True"}}]})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->rules[0].actions.stop_training);
  EXPECT_TRUE(CreateRules(Registry(), c.value()).ok());
}

TEST(RulesConfigTest, DefaultSetAndFiles) {
  const RulesConfig d = DefaultRulesConfig(Registry());
  EXPECT_TRUE(d.is_default);
  std::vector<std::string> types;
  for (const auto& r : d.rules) types.push_back(r.spec.type);
  // Every built-in rule with meaningful defaults: a rule for each fault class.
  EXPECT_EQ(types, (std::vector<std::string>{
                       "nan_origin", "exploding_tensor", "loss_not_decreasing",
                       "vanishing_gradient", "dead_relu", "saturated_activation",
                       "poor_weight_initialization", "weight_update_ratio", "all_zero", "overfit",
                       "class_imbalance", "stalled_training"}));
  Result<std::vector<std::unique_ptr<Rule>>> created = CreateRules(Registry(), d);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  // Each with its type's severity and confirmation.
  std::map<std::string, std::pair<Severity, int>> got;
  for (const auto& r : created.value()) {
    got[r->spec().type] = {*r->spec().severity, *r->spec().confirm_steps};
  }
  EXPECT_EQ(got["nan_origin"], std::make_pair(Severity::kCritical, 1));
  EXPECT_EQ(got["loss_not_decreasing"], std::make_pair(Severity::kCritical, 1));
  EXPECT_EQ(got["vanishing_gradient"], std::make_pair(Severity::kError, 3));
  EXPECT_EQ(got["class_imbalance"], std::make_pair(Severity::kWarning, 1));
  // Only known types: a registry with the run rules alone drops the tensor rules.
  RuleRegistry run_only;
  ASSERT_TRUE(RegisterRunRules(&run_only).ok());
  EXPECT_EQ(DefaultRulesConfig(run_only).rules.size(), 4u);

  io::testing::TempDir dir;
  EXPECT_EQ(LoadRulesConfigFile(dir.Sub("none.json")).status().code(), StatusCode::kIoError);
  std::ofstream(dir.Sub("r.json")) << kExample;
  Result<LoadedRules> loaded = LoadRules(Registry(), dir.Sub("r.json"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->rules.size(), 2u);
  std::ofstream(dir.Sub("bad.json")) << R"({"rules": [{"type": "nope"}]})";
  ExpectError(LoadRules(Registry(), dir.Sub("bad.json")).status(), {"bad.json", "nope"});
}

// A rules config path that is a FIFO, a link to /dev/zero, a directory, a
// symlink loop, a huge or an empty file: an error naming it, at once.
TEST(RulesConfigTest, HostileRulesConfigFilesAreErrorsNotHangs) {
  io::testing::TempDir dir;
  for (const std::string& kind : io::testing::HostileFileKinds()) {
    SCOPED_TRACE(kind);
    const std::string path = dir.Sub(kind + ".json");
    ASSERT_TRUE(io::testing::MakeHostileFile(path, kind));
    const auto t0 = std::chrono::steady_clock::now();
    Result<RulesConfig> c = LoadRulesConfigFile(path);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find(path), std::string::npos) << c.status().message();
    EXPECT_LT(c.status().message().size(), 1000u);
  }
}

TEST(RulesConfigTest, DefaultsPlusChangesSeverityConfirmationAndDisabledRules) {
  // "defaults": the default set, an entry of the same name replacing its
  // default, "enabled": false removing one, new entries added.
  Result<RulesConfig> c = ParseRulesConfigJson(R"({"defaults": true, "rules": [
      {"type": "overfit", "parameters": {"rise_percent": 50}, "severity": "warning"},
      {"type": "class_imbalance", "enabled": false},
      {"name": "grad_blowup", "collection_names": "gradients", "when": "l2 > 1e3",
       "confirm_steps": 4}]})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::vector<std::string> names;
  for (const auto& r : c->rules) names.push_back(r.spec.name);
  EXPECT_EQ(std::count(names.begin(), names.end(), "class_imbalance"), 0);
  EXPECT_EQ(std::count(names.begin(), names.end(), "overfit"), 1);
  EXPECT_EQ(names.back(), "grad_blowup");
  EXPECT_EQ(names.size(), DefaultRulesConfig(Registry()).rules.size() + 1 - 1);
  for (const auto& r : c->rules) {
    if (r.spec.name == "overfit") {
      EXPECT_EQ(r.spec.parameters.at("rise_percent"), "50");
      EXPECT_EQ(*r.spec.severity, Severity::kWarning);
    }
    if (r.spec.name == "grad_blowup") {
      EXPECT_EQ(*r.spec.confirm_steps, 4);
    }
  }
  EXPECT_TRUE(CreateRules(Registry(), c.value()).ok());
  // Without "defaults", "enabled": false just leaves the entry out.
  c = ParseRulesConfigJson(R"({"rules": [{"type": "overfit", "enabled": false}]})");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->rules.empty());
  // Errors name the field.
  ExpectError(
      ParseRulesConfigJson(R"({"rules": [{"type": "overfit", "severity": "fatal"}]})").status(),
      {"rules[0]", "severity", "fatal"});
  ExpectError(
      ParseRulesConfigJson(R"({"rules": [{"type": "overfit", "confirm_steps": 0}]})").status(),
      {"confirm_steps", "[1, 1000000]"});
  ExpectError(ParseRulesConfigJson(
                  R"({"defaults": true, "rules": [{"type": "no_such", "enabled": false}]})")
                  .status(),
              {"no_such", "no default rule"});
  // Disabling by name from a session config (InProcessRulesConfig::disable).
  Result<RulesConfig> without =
      WithoutRules(DefaultRulesConfig(Registry()), {"overfit", "all_zero"}, "rules.disable");
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(without->rules.size(), DefaultRulesConfig(Registry()).rules.size() - 2);
  ExpectError(WithoutRules(DefaultRulesConfig(Registry()), {"overfitt"}, "rules.disable").status(),
              {"rules.disable[0]", "overfitt", "the rules: nan_origin"});
}

}  // namespace
}  // namespace tstat::rules::runtest
