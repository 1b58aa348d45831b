// In-process rules end to end: a session with config.rules runs the rules on
// its own steps (rules thread fed by the pipeline) and acts on the findings -
// stop_training through ShouldStop() at exactly the promised step,
// findings() equal to RUN/findings.jsonl, capture_raw_steps producing raw
// snapshots at the next K steps (read back with tstat::Trial), RUN/capture/
// requests of an out-of-process runner, plugins, and bad input (config
// errors naming the field, bad plugins, a rule that throws).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "rules/runtime/actions.h"
#include "rules/runtime/findings_log.h"
#include "tests/io/io_test_util.h"
#include "tstat/session.h"
#include "tstat/trial.h"

namespace tstat {
namespace {

using io::testing::TempDir;

constexpr char kNanStop[] = R"({"rules": [
  {"name": "nan_stop", "type": "exploding_tensor", "collection_names": "gradients",
   "actions": {"stop_training": true, "print": false}}]})";

SessionConfig RulesConfig(const std::string& run, const std::string& rules_json) {
  SessionConfig c;
  c.out_dir = run;
  c.save_config.base.save_interval = 1;
  c.pipeline.cpu_threads = 1;
  c.pipeline.flush_interval_seconds = 0.05;
  c.rules.enabled = true;
  c.rules.config_json = rules_json;
  return c;
}

std::string Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) == std::string::npos ? "\"" + needle + "\" not in: " + haystack : "";
}

// A training loop over one gradient that holds a NaN at the steps `nan_at`
// says. Ends each step, then checks ShouldStop() as a training loop would;
// returns the ShouldStop() seen after each step that ran.
struct Loop {
  std::vector<float> grad = std::vector<float>(8, 0.5f);
  std::vector<bool> stop_after;
  template <class NanAt>
  void Run(Session& s, int max_steps, NanAt nan_at, bool break_on_stop = true) {
    for (int k = 0; k < max_steps; ++k) {
      for (std::size_t i = 0; i < grad.size(); ++i) grad[i] = static_cast<float>(k);
      if (nan_at(k)) grad[2] = std::numeric_limits<float>::quiet_NaN();
      ASSERT_TRUE(s.EndStep().ok());
      stop_after.push_back(s.ShouldStop());
      if (break_on_stop && s.ShouldStop()) return;
    }
  }
};

std::unique_ptr<Session> Create(const SessionConfig& c) {
  auto s = Session::Create(c);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

Status Register(Session& s, Loop& loop, const std::string& name = "fc1.weight_grad") {
  return s
      .RegisterTensor({name, TensorView::Host(loop.grad.data(), DType::kFloat32, 8), {"gradients"}})
      .status();
}

void ExpectStopsExactly(const std::vector<bool>& stop_after, int s) {
  ASSERT_GE(static_cast<int>(stop_after.size()), s + 1) << "the loop ended before step " << s;
  for (int k = 0; k < s; ++k) EXPECT_FALSE(stop_after[k]) << "stop after step " << k;
  // True after EndStep(s + 1) at the latest: before step s + 2 begins.
  EXPECT_TRUE(stop_after.back()) << "never stopped";
  EXPECT_LE(static_cast<int>(stop_after.size()) - 1, s + 1) << "stopped after step s + 1";
}

// (a) In-process stop: NaN from step 6 on; the loop stops after step 6 or 7.
TEST(InProcessRulesTest, StopsBeforeStepSPlus2AndFindingsMatchTheLog) {
  TempDir dir;
  auto session = Create(RulesConfig(dir.Sub("run"), kNanStop));
  ASSERT_NE(session, nullptr);
  Loop loop;
  ASSERT_TRUE(Register(*session, loop).ok());
  constexpr int kNan = 6;
  loop.Run(*session, 30, [](int k) { return k >= kNan; });
  ExpectStopsExactly(loop.stop_after, kNan);
  EXPECT_NE(session->stop_reason().find("rule nan_stop at step 6"), std::string::npos)
      << session->stop_reason();
  ASSERT_TRUE(session->Close().ok()) << session->status().ToString();

  const std::vector<Finding> found = session->findings();
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(found[0].step.global_step, kNan);
  EXPECT_EQ(found[0].rule, "nan_stop");
  EXPECT_EQ(found[0].type, "exploding_tensor");
  EXPECT_EQ(found[0].tensor, "fc1.weight_grad");
  for (const Finding& f : found) EXPECT_GE(f.step.global_step, kNan);
  // One finding per step the NaN lasted; one episode for all of them, the
  // same in the session and in the log.
  const std::vector<Episode> episodes = session->episodes();
  ASSERT_EQ(episodes.size(), 1u);
  EXPECT_EQ(episodes[0].first.global_step, kNan);
  EXPECT_EQ(episodes[0].last.global_step, found.back().step.global_step);
  EXPECT_EQ(episodes[0].steps, found.size());
  EXPECT_EQ(episodes[0].severity, Severity::kCritical);
  EXPECT_FALSE(episodes[0].open);  // closed when the run ended
  auto log = rules::ReadFindingsLog(dir.Sub("run/findings.jsonl"));
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  ASSERT_EQ(log->episodes.size(), episodes.size());
  for (std::size_t i = 0; i < episodes.size(); ++i) {
    const Episode& a = episodes[i];
    const Episode& b = log->episodes[i];
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.rule, b.rule);
    EXPECT_EQ(a.type, b.type);
    EXPECT_EQ(a.first.global_step, b.first.global_step);
    EXPECT_EQ(a.last.global_step, b.last.global_step);
    EXPECT_EQ(a.steps, b.steps);
    EXPECT_EQ(a.severity, b.severity);
    EXPECT_EQ(a.open, b.open);
    EXPECT_EQ(a.worker, b.worker);
    EXPECT_EQ(a.tensor, b.tensor);
    EXPECT_EQ(a.opening.message, b.opening.message);
    EXPECT_EQ(a.opening.values.size(), b.opening.values.size());
  }
}

std::string PluginRules(const std::string& extra) {
  return std::string(R"({"rules": [)") + extra +
         R"(, {"name": "nan_stop", "type": "exploding_tensor", "collection_names": "gradients",
            "actions": {"stop_training": true, "print": false}}]})";
}

// (a') The guarantee does not depend on the rules thread keeping up: a
// plugin rule sleeping 30 ms per step while training steps take ~0 ms. EndStep
// waits (counted), and the stop still comes exactly in time.
TEST(InProcessRulesTest, ASlowRulesThreadStillStopsInTimeAndTheWaitsAreCounted) {
  TempDir dir;
  SessionConfig c =
      RulesConfig(dir.Sub("run"), PluginRules(R"({"type": "sleeps", "parameters": {"ms": 30}})"));
  c.rules.plugins = {TSTAT_TEST_RULE_PLUGIN};
  auto session = Create(c);
  ASSERT_NE(session, nullptr);
  Loop loop;
  ASSERT_TRUE(Register(*session, loop).ok());
  constexpr int kNan = 4;
  loop.Run(*session, 30, [](int k) { return k >= kNan; });
  ExpectStopsExactly(loop.stop_after, kNan);
  const PipelineCounters counters = session->counters();
  EXPECT_GE(counters.rules_waits, 3u);  // steps 1..kNan+1 each waited for the previous one
  EXPECT_GT(counters.rules_wait_seconds, 0.05);
  ASSERT_TRUE(session->Close().ok());
}

// (c) capture_raw_steps: a NaN at step 4 only; raw snapshots of the tensor at
// steps 5, 6, 7 (the next 3). Then an out-of-process request (RUN/capture/)
// after step 8 gives snapshots at 9 and 10, and its file is deleted.
TEST(InProcessRulesTest, CaptureRawStepsSnapshotsTheNextKSteps) {
  TempDir dir;
  const std::string run = dir.Sub("run");
  SessionConfig c = RulesConfig(run, R"({"rules": [
    {"name": "nan_capture", "type": "exploding_tensor", "collection_names": "gradients",
     "actions": {"capture_raw_steps": 3, "print": false, "stop_training": false}}]})");
  c.pipeline.stop_check_interval_ms = 0;  // poll RUN/capture/ at every EndStep
  auto session = Create(c);
  ASSERT_NE(session, nullptr);
  Loop loop;
  ASSERT_TRUE(Register(*session, loop).ok());
  loop.Run(
      *session, 9, [](int k) { return k == 4; }, /*break_on_stop=*/false);
  rules::RunDirActionSink sink(run);
  ASSERT_TRUE(
      sink.RequestRawCapture({"outside", StepKey{8, Mode::kGlobal, 8}, {"fc1.weight_grad"}, 2})
          .ok());
  loop.Run(
      *session, 3, [](int) { return false; }, false);  // steps 9, 10, 11 (values 0, 1, 2)
  ASSERT_TRUE(session->Close().ok()) << session->status().ToString();
  EXPECT_FALSE(session->ShouldStop());
  auto left = rules::ListCaptureRequests(run);
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->empty()) << "applied capture requests are deleted (world_size 1)";

  auto trial = Trial::Open(run);
  ASSERT_TRUE(trial.ok()) << trial.status().ToString();
  std::vector<std::int64_t> steps;
  for (const StepKey& k : trial.value()->raw_steps("fc1.weight_grad"))
    steps.push_back(k.global_step);
  EXPECT_EQ(steps, (std::vector<std::int64_t>{5, 6, 7, 9, 10}));
  for (std::int64_t s : steps) {
    auto raw = trial.value()->raw("fc1.weight_grad", s);
    ASSERT_TRUE(raw.ok()) << raw.status().ToString();
    const std::vector<double> v = raw->ToDoubles();
    ASSERT_EQ(v.size(), 8u);
    const double expected = s <= 8 ? static_cast<double>(s) : static_cast<double>(s - 9);
    EXPECT_EQ(v[0], expected) << "step " << s;
  }
}

// (4) A plugin's rule in process: fires at exactly the configured step.
TEST(InProcessRulesTest, PluginRuleFiresAtItsStep) {
  TempDir dir;
  SessionConfig c = RulesConfig(dir.Sub("run"), R"({"rules": [
    {"name": "custom", "type": "fires_at_step", "parameters": {"step": 7},
     "actions": {"print": false}}]})");
  c.rules.plugins = {TSTAT_TEST_RULE_PLUGIN};
  auto session = Create(c);
  ASSERT_NE(session, nullptr);
  Loop loop;
  ASSERT_TRUE(Register(*session, loop).ok());
  loop.Run(
      *session, 12, [](int) { return false; }, false);
  ASSERT_TRUE(session->Close().ok());
  const std::vector<Finding> found = session->findings();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].step.global_step, 7);
  EXPECT_EQ(found[0].type, "fires_at_step");
  EXPECT_EQ(found[0].tensor, "fc1.weight_grad");
  ASSERT_EQ(found[0].values.size(), 1u);
  EXPECT_EQ(found[0].values[0].second, 7.0);  // max of the gradient at step 7
}

// Without a config or config file: the default rule set (exploding_tensor
// among them) runs; the JSON form with only "rules": {} enables it, and a
// critical finding stops training unless stop_on says otherwise.
TEST(InProcessRulesTest, AnEmptyRulesSectionRunsTheDefaultSet) {
  TempDir dir;
  auto parsed = ParseConfigJson(R"({"out_dir": ")" + dir.Sub("run") +
                                R"(", "save_config": {"save_interval": 1}, "rules": {}})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_TRUE(parsed->rules.enabled);
  auto session = Create(parsed.value());
  ASSERT_NE(session, nullptr);
  Loop loop;
  ASSERT_TRUE(Register(*session, loop).ok());
  loop.Run(
      *session, 4, [](int k) { return k == 2; }, false);
  ASSERT_TRUE(session->Close().ok());
  bool exploded = false;
  for (const Finding& f : session->findings()) {
    exploded = exploded || (f.type == "exploding_tensor" && f.step.global_step == 2);
  }
  EXPECT_TRUE(exploded);
  EXPECT_TRUE(session->ShouldStop());  // a NaN is critical: the run is wasted
  EXPECT_NE(session->stop_reason().find("at step 2"), std::string::npos) << session->stop_reason();

  // "stop_on": "never": the same findings, no stop.
  TempDir dir2;
  parsed =
      ParseConfigJson(R"({"out_dir": ")" + dir2.Sub("run") +
                      R"(", "save_config": {"save_interval": 1}, "rules": {"stop_on": "never"}})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  session = Create(parsed.value());
  ASSERT_NE(session, nullptr);
  Loop loop2;
  ASSERT_TRUE(Register(*session, loop2).ok());
  loop2.Run(
      *session, 4, [](int k) { return k == 2; }, false);
  ASSERT_TRUE(session->Close().ok());
  EXPECT_FALSE(session->ShouldStop());
  EXPECT_FALSE(session->episodes().empty());
}

TEST(InProcessRulesTest, TheEnvironmentVariableEnablesRulesFromAFile) {
  TempDir dir;
  const std::string file = dir.Sub("r.json");
  std::ofstream(file) << kNanStop;
  SessionConfig c = RulesConfig(dir.Sub("run"), "");
  c.rules = InProcessRulesConfig{};  // nothing in the config
  ASSERT_EQ(::setenv("TSTAT_RULES_CONFIG", file.c_str(), 1), 0);
  auto session = Create(c);
  ::unsetenv("TSTAT_RULES_CONFIG");
  ASSERT_NE(session, nullptr);
  EXPECT_TRUE(session->config().rules.enabled);
  EXPECT_EQ(session->config().rules.config_file, file);
  Loop loop;
  ASSERT_TRUE(Register(*session, loop).ok());
  loop.Run(*session, 10, [](int k) { return k >= 3; });
  ExpectStopsExactly(loop.stop_after, 3);
  ASSERT_TRUE(session->Close().ok());
}

TEST(InProcessRulesTest, RulesSectionRoundTripsThroughJson) {
  SessionConfig c = RulesConfig("/tmp/x", kNanStop);
  c.rules.plugins = {"/opt/a.so", "/opt/b.so"};
  const std::string json = ConfigToJson(c);
  auto back = ParseConfigJson(json);
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << json;
  EXPECT_TRUE(back->rules.enabled);
  EXPECT_EQ(back->rules.plugins, c.rules.plugins);
  EXPECT_EQ(back->rules.config_file, "");
  EXPECT_EQ(Contains(back->rules.config_json, "nan_stop"), "");
  EXPECT_EQ(Contains(back->rules.config_json, "stop_training"), "");
  EXPECT_EQ(ConfigToJson(back.value()), json);  // stable after one round
  // Disabled, nothing else: no section at all.
  EXPECT_EQ(ConfigToJson(SessionConfig{}).find("\"rules\""), std::string::npos);
  auto off = ParseConfigJson(R"({"rules": {"enabled": false, "config_file": "r.json"}})");
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE(off->rules.enabled);
}

// (d) Bad input: errors name the field.
TEST(InProcessRulesBadInputTest, ConfigErrorsNameTheField) {
  TempDir dir;
  struct Case {
    std::string rules_json;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {R"({"rules": [{"type": "no_such_rule"}]})",
       {"rules.config", "rules[0]", "unknown rule type \"no_such_rule\""}},
      {R"({"rules": [{"type": "exploding_tensor", "parameters": {"only_nan": "maybe"}}]})",
       {"rules.config", "rules[0]", "only_nan"}},
      {R"({"rules": [{"type": "exploding_tensor", "parameters": {"growth_factr": 2}}]})",
       {"rules.config", "growth_factr"}},
      {R"({"rules": [{"type": "exploding_tensor", "modes": ["TRAINING"]}]})",
       {"rules.config", "modes[0]", "TRAINING"}},
      {R"({"rules": [{"name": "e", "when": "l2 >> 3"}]})", {"rules.config", "rules[0]"}},
  };
  for (const Case& k : cases) {
    auto s = Session::Create(RulesConfig(dir.Sub("run"), k.rules_json));
    ASSERT_FALSE(s.ok()) << k.rules_json;
    for (const std::string& e : k.expected) {
      EXPECT_EQ(Contains(s.status().message(), e), "") << k.rules_json;
    }
  }
  // A missing config file; both a file and a config.
  SessionConfig c = RulesConfig(dir.Sub("run"), "");
  c.rules.config_file = dir.Sub("missing.json");
  auto missing = Session::Create(c);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(Contains(missing.status().message(), "rules.config_file"), "");
  EXPECT_EQ(Contains(missing.status().message(), "missing.json"), "");
  c.rules.config_json = kNanStop;
  EXPECT_EQ(Contains(ValidateConfig(c).message(), "either config or config_file"), "");
  // The JSON form: unknown fields inside the section and inside the rules.
  auto typo = ParseConfigJson(R"({"rules": {"confg": {}}})");
  ASSERT_FALSE(typo.ok());
  EXPECT_EQ(
      Contains(typo.status().message(), "rules.confg: unknown field (did you mean \"config\"?)"),
      "");
  auto inner = ParseConfigJson(R"({"rules": {"config": {"rules": [{"actoins": {}}]}}})");
  ASSERT_FALSE(inner.ok());
  EXPECT_EQ(Contains(inner.status().message(), "rules.config.rules[0].actoins: unknown field"), "");
  auto mistyped = ParseConfigJson(
      R"({"rules": {"config": {"rules": [{"type": "all_zero", "actions": {"stop_training": "yes"}}]}}})");
  ASSERT_FALSE(mistyped.ok());
  EXPECT_EQ(Contains(mistyped.status().message(), "rules.config.rules[0].actions.stop_training"),
            "");
  auto plugins = ParseConfigJson(R"({"rules": {"plugins": "lib.so"}})");
  ASSERT_FALSE(plugins.ok());
  EXPECT_EQ(Contains(plugins.status().message(), "rules.plugins: expected an array"), "");
}

TEST(InProcessRulesBadInputTest, BadPluginsAreClearErrors) {
  TempDir dir;
  SessionConfig c = RulesConfig(dir.Sub("run"), "");
  c.rules.plugins = {dir.Sub("no_such_plugin.so")};
  auto missing = Session::Create(c);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Contains(missing.status().message(), "rules.plugins[0]"), "");
  EXPECT_EQ(Contains(missing.status().message(), "no_such_plugin.so"), "");
  c.rules.plugins = {TSTAT_TEST_RULE_PLUGIN, TSTAT_TEST_RULE_PLUGIN_NOENTRY};
  auto no_entry = Session::Create(c);
  ASSERT_FALSE(no_entry.ok());
  EXPECT_EQ(no_entry.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Contains(no_entry.status().message(), "rules.plugins[1]"), "");
  EXPECT_EQ(Contains(no_entry.status().message(), "tstat_register_rules"), "");
  // A plugin built before the rule interface had a version: refused, never
  // asked for rules whose vtables lack Rule::Notes.
  c.rules.plugins = {TSTAT_TEST_RULE_PLUGIN_UNVERSIONED};
  auto unversioned = Session::Create(c);
  ASSERT_FALSE(unversioned.ok());
  EXPECT_EQ(unversioned.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Contains(unversioned.status().message(), "tstat_rule_plugin_abi"), "");
  EXPECT_EQ(Contains(unversioned.status().message(), "rebuild it"), "");
  // The same plugin twice: its types are taken.
  c.rules.plugins = {TSTAT_TEST_RULE_PLUGIN, TSTAT_TEST_RULE_PLUGIN};
  auto twice = Session::Create(c);
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(Contains(twice.status().message(), "already registered"), "");
  // A plugin type with an unknown parameter: the plugin's own message.
  c = RulesConfig(dir.Sub("run"),
                  R"({"rules": [{"type": "fires_at_step", "parameters": {"stp": 3}}]})");
  c.rules.plugins = {TSTAT_TEST_RULE_PLUGIN};
  auto param = Session::Create(c);
  ASSERT_FALSE(param.ok());
  EXPECT_EQ(Contains(param.status().message(), "rules.config: rules[0]"), "");
  EXPECT_EQ(Contains(param.status().message(), "unknown parameter \"stp\""), "");
  // No findings log was left behind by the failed creations.
  struct stat st;
  EXPECT_NE(::stat(dir.Sub("run/findings.jsonl").c_str(), &st), 0);
}

// A rule that throws never reaches the training loop: training goes on,
// status() reports it, the other rules stop being evaluated.
TEST(InProcessRulesBadInputTest, ARuleThatThrowsDoesNotStopTraining) {
  TempDir dir;
  SessionConfig c = RulesConfig(
      dir.Sub("run"), PluginRules(R"({"type": "throws_at_step", "parameters": {"step": 3}})"));
  c.rules.plugins = {TSTAT_TEST_RULE_PLUGIN};
  auto session = Create(c);
  ASSERT_NE(session, nullptr);
  Loop loop;
  ASSERT_TRUE(Register(*session, loop).ok());
  loop.Run(*session, 10, [](int k) { return k >= 6; });
  EXPECT_EQ(loop.stop_after.size(), 10u);  // the NaN rule is not evaluated any more
  const Status s = session->Close();
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(Contains(s.message(), "plugin rule broke"), "");
  EXPECT_EQ(Contains(s.message(), "step 3"), "");
  EXPECT_EQ(session->status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace tstat
