// `tstat check` and `tstat rules` end to end: the real binary on small runs
// written with the io writer - exit codes, printed findings, findings.jsonl,
// the STOP file and capture requests, config errors, and following a run
// while a thread writes it.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "rules/runtime/actions.h"
#include "rules/runtime/findings_log.h"
#include "tests/io/io_test_util.h"
#include "tests/rules/run_rules_test_util.h"

namespace tstat::rules::runtest {
namespace {

using io::testing::TempDir;

struct CliResult {
  int code = -1;
  std::string output;  // stdout and stderr
};

CliResult Tstat(const std::string& args) {
  CliResult r;
  const std::string cmd = std::string(TSTAT_CLI_PATH) + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

// A GLOBAL-mode run: loss(s) and a gradient (l2 2000 at `blowup` steps).
std::vector<StepBatch> Steps(int n, double (*loss)(int), std::vector<int> blowup,
                             std::vector<TensorInfo>* tensors) {
  Catalog c;
  const auto l = c.Add("loss", {"losses", "scalars"}, TensorKind::kScalar);
  const auto g = c.Add("gradient/fc1.weight", {"gradients"});
  *tensors = c.All();
  std::vector<StepBatch> out;
  for (int s = 0; s < n; ++s) {
    // l2 = 2 * |value| (the run stores mean and m2; l2 is derived on read).
    const bool big = std::find(blowup.begin(), blowup.end(), s) != blowup.end();
    const TensorStats gs = ConstantStats(big ? 1000.0 : 0.1);
    out.push_back(Batch(Key(s), {{l, loss(s), 0.0}}, {StatsRecord(g, gs)}));
  }
  return out;
}

double Falling(int s) { return 2.0 / (1.0 + s); }
double Flat(int) { return 1.0; }

class RulesCliTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, double (*loss)(int), std::vector<int> blowup = {},
                    int n = 20) {
    std::vector<TensorInfo> tensors;
    const auto steps = Steps(n, loss, std::move(blowup), &tensors);
    const std::string run = dir_.Sub(name);
    EXPECT_TRUE(WriteRun(run, tensors, steps).ok());
    return run;
  }
  std::string Config(const std::string& json) {
    const std::string path = dir_.Sub("rules" + std::to_string(configs_++) + ".json");
    std::ofstream(path) << json;
    return path;
  }
  TempDir dir_;
  int configs_ = 0;
};

constexpr char kGradConfig[] = R"({"rules": [
  {"type": "loss_not_decreasing", "parameters": {"num_steps": 5}, "severity": "error"},
  {"name": "grad_blowup", "collection_names": "gradients", "when": "l2 > 1e3", "for_steps": 2,
   "actions": {"stop_training": true, "capture_raw_steps": 3}}]})";

TEST_F(RulesCliTest, CheckIsAUnitTestForARun) {
  const std::string clean = Write("clean", Falling);
  const std::string bad = Write("bad", Flat, {7, 8});
  const std::string cfg = Config(kGradConfig);
  CliResult ok = Tstat("check " + Quote(clean) + " --config " + Quote(cfg));
  EXPECT_EQ(ok.code, 0) << ok.output;
  EXPECT_NE(ok.output.find("0 episode(s)"), std::string::npos) << ok.output;
  CliResult found = Tstat("check " + Quote(bad) + " --config " + Quote(cfg));
  EXPECT_EQ(found.code, 1) << found.output;
  EXPECT_NE(found.output.find("step 5 worker 0: loss_not_decreasing [error] loss:"),
            std::string::npos)
      << found.output;
  EXPECT_NE(
      found.output.find("step 8 worker 0: grad_blowup (expression) [error] gradient/fc1.weight"),
      std::string::npos)
      << found.output;
  // smdebug's loss checks at 5, 10, 15 (each its own episode: the steps
  // between are not judged), the blowup at 8.
  EXPECT_NE(found.output.find("4 episode(s)"), std::string::npos) << found.output;
  // --fail-on: only episodes of that severity or above fail.
  EXPECT_EQ(Tstat("check " + Quote(bad) + " --config " + Quote(cfg) + " --fail-on critical").code,
            0);
  EXPECT_EQ(Tstat("check " + Quote(bad) + " --config " + Quote(cfg) + " --fail-on fatal").code, 2);
  // check writes and does nothing: no log, no STOP.
  EXPECT_FALSE(std::filesystem::exists(bad + "/" + kFindingsFileName));
  EXPECT_FALSE(std::filesystem::exists(bad + "/" + kStopFileName));
  // The default rule set (no --config) sees a flat loss once it spans the
  // horizon of 200 steps; with no labels to show that it began untrained it
  // is an error, not critical (it may be a fine-tuned model's plateau).
  const std::string long_flat = Write("long_flat", Flat, {}, 205);
  CliResult def = Tstat("check " + Quote(long_flat));
  EXPECT_EQ(def.code, 1) << def.output;
  EXPECT_NE(def.output.find("steps 199-204 (6 steps) worker 0: loss_not_decreasing [error] loss"),
            std::string::npos)
      << def.output;
  EXPECT_EQ(Tstat("check " + Quote(long_flat) + " --fail-on critical").code, 0);
}

TEST_F(RulesCliTest, UsageAndConfigErrorsExit2NamingTheProblem) {
  const std::string run = Write("run", Falling);
  struct Case {
    std::string config;  // "" = none
    std::string args;
    std::vector<std::string> mentions;
  };
  const std::vector<Case> cases = {
      {R"({"rules": [{"name": "x", "type": "vanishing_gradiant"}]})",
       "",
       {"rules[0] \"x\"", "unknown rule type"}},
      {R"({"rules": [{"type": "overfit", "parameters": {"patiense": 2}}]})", "", {"patiense"}},
      {R"({"rules": [{"type": "overfit", "parameters": {"patience": "two"}}]})",
       "",
       {"patience", "two"}},
      {R"({"rules": [{"type": "overfit", "colection_names": "x"}]})", "", {"colection_names"}},
      {R"({"rules": [{"name": "e", "when": "l2 >> 3"}]})", "", {"\"e\"", "when", "^"}},
      {R"({"rules": [{"type": "overfit", "tensor_regex": "(("}]})", "", {"tensor_regex"}},
      {"", "--config /nonexistent/rules.json", {"rules.json"}},
      {"", "--frobnicate", {"frobnicate"}},
  };
  for (const Case& c : cases) {
    const std::string args = c.config.empty() ? c.args : "--config " + Quote(Config(c.config));
    for (const char* command : {"check", "rules"}) {
      CliResult r = Tstat(std::string(command) + " " + Quote(run) + " " + args);
      EXPECT_EQ(r.code, 2) << command << " " << args << ": " << r.output;
      for (const std::string& m : c.mentions) {
        EXPECT_NE(r.output.find(m), std::string::npos) << "'" << m << "' not in: " << r.output;
      }
    }
  }
  CliResult missing = Tstat("check " + Quote(dir_.Sub("nope")));
  EXPECT_EQ(missing.code, 2) << missing.output;
  EXPECT_NE(missing.output.find("nope"), std::string::npos) << missing.output;
  EXPECT_EQ(Tstat("check").code, 2);
}

TEST_F(RulesCliTest, StrictTurnsWarningsIntoFailures) {
  // A run without any loss: the default loss rule says so.
  Catalog c;
  const auto w = c.Add("fc1.weight", {"weights"});
  std::vector<StepBatch> steps;
  for (int s = 0; s < 3; ++s)
    steps.push_back(Batch(Key(s), {}, {StatsRecord(w, ConstantStats(1))}));
  ASSERT_TRUE(WriteRun(dir_.Sub("noloss"), c.All(), steps).ok());
  CliResult r = Tstat("check " + Quote(dir_.Sub("noloss")));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: rule loss_not_decreasing: no loss found"), std::string::npos)
      << r.output;
  EXPECT_EQ(Tstat("check --strict " + Quote(dir_.Sub("noloss"))).code, 1);
}

TEST_F(RulesCliTest, RulesLogsFindingsAndActs) {
  const std::string run = Write("run", Flat, {7, 8, 9, 12, 13});
  CliResult r = Tstat("rules " + Quote(run) + " --config " + Quote(Config(kGradConfig)));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("stop requested"), std::string::npos) << r.output;
  auto log = ReadFindingsLog(run + "/" + kFindingsFileName);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  std::vector<std::pair<std::string, std::int64_t>> got;
  for (const Finding& f : log->findings) got.emplace_back(f.rule, f.step.global_step);
  EXPECT_EQ(got, (std::vector<std::pair<std::string, std::int64_t>>{{"loss_not_decreasing", 5},
                                                                    {"grad_blowup", 8},
                                                                    {"loss_not_decreasing", 10},
                                                                    {"grad_blowup", 13},
                                                                    {"loss_not_decreasing", 15}}));
  std::ifstream stop(run + "/" + kStopFileName);
  std::string line;
  ASSERT_TRUE(std::getline(stop, line));
  Result<StopRequest> req = ParseStopRequest(line);
  ASSERT_TRUE(req.ok()) << line;
  EXPECT_EQ(req->rule, "grad_blowup");
  EXPECT_EQ(req->step.global_step, 8);
  auto captures = ListCaptureRequests(run);
  ASSERT_TRUE(captures.ok());
  ASSERT_EQ(captures->size(), 2u);  // at 8 (covers 8..11) and at 13
  EXPECT_EQ((*captures)[0].second.tensors, std::vector<std::string>{"gradient/fc1.weight"});
  EXPECT_EQ((*captures)[0].second.steps, 3);
}

TEST_F(RulesCliTest, FollowsALiveRunUntilItIsClosed) {
  std::vector<TensorInfo> tensors;
  const auto steps = Steps(15, Flat, {}, &tensors);
  const std::string run = dir_.Sub("live");
  LiveWriter writer(run, tensors, steps, {80});
  writer.Start();
  ASSERT_TRUE(writer.opened) << writer.Join().ToString();
  const std::string cfg =
      Config(R"({"rules": [{"type": "loss_not_decreasing", "parameters": {"num_steps": 4}}]})");
  CliResult r =
      Tstat("rules " + Quote(run) + " --follow --poll-interval 0.02 --config " + Quote(cfg));
  const bool closed_before_exit = writer.closed.load();
  ASSERT_TRUE(writer.Join().ok());
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(closed_before_exit);  // it followed until the writer closed
  EXPECT_NE(r.output.find("step 4 worker 0: loss_not_decreasing [critical] loss:"),
            std::string::npos)
      << r.output;
  auto log = ReadFindingsLog(run + "/" + kFindingsFileName);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  std::vector<std::int64_t> at;
  for (const Finding& f : log->findings) at.push_back(f.step.global_step);
  EXPECT_EQ(at, (std::vector<std::int64_t>{4, 8, 12}));
  EXPECT_NE(r.output.find("over 15 step(s)"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace tstat::rules::runtest
