// Out-of-process rules end to end, with real processes: process A
// (rules_stepper: a session stepping every 20 ms, its gradient NaN from step
// 25 on) and process B (`tstat rules RUN --follow --config stop.json`). B
// writes RUN/STOP on the NaN finding; A stops within one step of the file
// appearing; B exits once A's writer has closed the run. And `tstat check
// --plugin`: a plugin's rule on a finished run.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <string>
#include <thread>

#include "rules/runtime/findings_log.h"
#include "tests/io/io_test_util.h"

namespace tstat {
namespace {

using io::testing::TempDir;

struct ProcessResult {
  int code = -1;
  std::string output;
};

// Runs `cmd` (stdout and stderr captured) to completion.
ProcessResult RunProcess(const std::string& cmd) {
  ProcessResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

bool HasWorkerDir(const std::string& run) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(run, ec)) {
    if (e.path().filename().string().rfind("worker-", 0) == 0) return true;
  }
  return false;
}

int Field(const std::string& text, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(name + "=(-?[0-9]+)"))) return -1000;
  return std::stoi(m[1]);
}

TEST(LiveRulesTest, AStopsWithinOneStepOfTheStopFileAndBExitsWhenAsWriterCloses) {
  TempDir dir;
  const std::string run = dir.Sub("run");
  const std::string config = dir.Sub("stop.json");
  std::ofstream(config) << R"({"rules": [
    {"name": "nan_stop", "type": "exploding_tensor", "collection_names": "gradients",
     "actions": {"stop_training": true}}]})";
  constexpr int kNanStep = 25;
  auto a = std::async(std::launch::async, [&] {
    return RunProcess(std::string(TSTAT_RULES_STEPPER) + " train " + Quote(run) + " 20 " +
                      std::to_string(kNanStep) + " 500");
  });
  const auto t0 = std::chrono::steady_clock::now();
  while (!HasWorkerDir(run) && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(HasWorkerDir(run)) << "process A did not start its run";
  auto b = std::async(std::launch::async, [&] {
    return RunProcess(std::string(TSTAT_CLI_PATH) + " rules " + Quote(run) + " --follow --config " +
                      Quote(config) + " --poll-interval 0.02");
  });
  const ProcessResult ra = a.get();
  ASSERT_EQ(ra.code, 0) << ra.output;
  // B must notice the closed run by itself.
  ASSERT_EQ(b.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "tstat rules --follow did not exit after the writer closed";
  const ProcessResult rb = b.get();
  EXPECT_EQ(rb.code, 0) << rb.output;

  const int seen = Field(ra.output, "stop_file_before_step");
  const int stopped = Field(ra.output, "stopped_after_step");
  ASSERT_GE(stopped, kNanStep) << ra.output;  // stopped, and not before the NaN
  if (seen >= 0) {
    EXPECT_GT(seen, kNanStep) << "RUN/STOP before the NaN: " << ra.output;
    // Present before EndStep(seen) began: that EndStep's check sees it (steps
    // of 20 ms > the 1 ms check interval). It may have been seen one EndStep
    // earlier, when it appeared during that EndStep.
    EXPECT_GE(stopped, seen - 1) << ra.output;
    EXPECT_LE(stopped, seen) << ra.output;
  }
  // seen < 0: RUN/STOP was not there before any EndStep A began, so it
  // appeared during the EndStep A stopped after: A stopped in that very step.
  EXPECT_NE(ra.output.find("nan_stop"), std::string::npos) << ra.output;  // the stop reason
  EXPECT_NE(rb.output.find("nan_stop"), std::string::npos) << rb.output;
  EXPECT_NE(rb.output.find("stop requested"), std::string::npos) << rb.output;
  auto log = rules::ReadFindingsLog(run + "/findings.jsonl");
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  ASSERT_FALSE(log->findings.empty());
  EXPECT_EQ(log->findings[0].step.global_step, kNanStep);
}

TEST(LiveRulesTest, CheckAndRulesLoadPlugins) {
  TempDir dir;
  const std::string run = dir.Sub("run");
  // A short finished run, no NaN.
  const ProcessResult a =
      RunProcess(std::string(TSTAT_RULES_STEPPER) + " train " + Quote(run) + " 0 1000 12");
  ASSERT_EQ(a.code, 0) << a.output;
  const std::string config = dir.Sub("plugin.json");
  std::ofstream(config) << R"({"rules": [{"name": "custom", "type": "fires_at_step",
                                          "parameters": {"step": 9}}]})";
  const ProcessResult without = RunProcess(std::string(TSTAT_CLI_PATH) + " check " + Quote(run) +
                                           " --config " + Quote(config));
  EXPECT_EQ(without.code, 2) << without.output;
  EXPECT_NE(without.output.find("unknown rule type \"fires_at_step\""), std::string::npos)
      << without.output;
  const ProcessResult with =
      RunProcess(std::string(TSTAT_CLI_PATH) + " check " + Quote(run) + " --plugin " +
                 Quote(TSTAT_TEST_RULE_PLUGIN) + " --config " + Quote(config));
  EXPECT_EQ(with.code, 1) << with.output;  // findings
  EXPECT_NE(with.output.find("step 9 worker 0: custom (fires_at_step) [error] fc1.weight_grad"),
            std::string::npos)
      << with.output;
  EXPECT_NE(with.output.find("1 finding(s)"), std::string::npos) << with.output;
  const ProcessResult bad = RunProcess(std::string(TSTAT_CLI_PATH) + " check " + Quote(run) +
                                       " --plugin " + Quote(TSTAT_TEST_RULE_PLUGIN_NOENTRY));
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--plugin[0]"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("tstat_register_rules"), std::string::npos) << bad.output;
  // `tstat rules` too: the finding is recorded.
  const ProcessResult rules =
      RunProcess(std::string(TSTAT_CLI_PATH) + " rules " + Quote(run) + " --plugin " +
                 Quote(TSTAT_TEST_RULE_PLUGIN) + " --config " + Quote(config));
  EXPECT_EQ(rules.code, 0) << rules.output;
  auto log = rules::ReadFindingsLog(run + "/findings.jsonl");
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  ASSERT_EQ(log->findings.size(), 1u);
  EXPECT_EQ(log->findings[0].type, "fires_at_step");
  EXPECT_EQ(log->findings[0].step.global_step, 9);
}

}  // namespace
}  // namespace tstat
