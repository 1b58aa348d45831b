// TrialRunner over runs written with the io writer: a finished run (check),
// several workers, a live run followed while a thread writes it, stall
// ticks while following, and the warnings of rules that had nothing to judge.
#include "rules/runtime/trial_runner.h"

#include <gtest/gtest.h>

#include "tests/io/io_test_util.h"
#include "tests/rules/run_rules_test_util.h"

namespace tstat::rules::runtest {
namespace {

using io::testing::TempDir;

std::vector<std::unique_ptr<Rule>> Rules(std::vector<RuleSpec> specs) {
  std::vector<std::unique_ptr<Rule>> out;
  for (const RuleSpec& s : specs) out.push_back(MakeRuleOrDie(s));
  return out;
}

RuleSpec ExprSpec(const std::string& name, const std::string& when, const std::string& for_steps) {
  RuleSpec s = Spec("expression", {{"when", when}, {"for_steps", for_steps}});
  s.name = name;
  return s;
}

// (rule, worker, step) of each finding.
using Seen = std::vector<std::tuple<std::string, int, std::int64_t>>;

Seen RunAll(TrialRunner* runner, std::vector<Finding>* findings = nullptr) {
  Seen seen;
  Status s = runner->Run([&](const Finding& f) {
    seen.emplace_back(f.rule, f.worker, f.step.global_step);
    if (findings) findings->push_back(f);
    return Status::OK();
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  return seen;
}

// A run of `steps` GLOBAL steps: a constant loss and a gradient whose l2 is
// 2000 at steps 7, 8 and 9.
std::vector<StepBatch> LossAndGradientSteps(int steps, std::vector<TensorInfo>* tensors) {
  Catalog c;
  const auto loss = c.Add("loss", {"losses", "scalars"}, TensorKind::kScalar);
  const auto grad = c.Add("gradient/fc1.weight", {"gradients"});
  *tensors = c.All();
  std::vector<StepBatch> out;
  for (int s = 0; s < steps; ++s) {
    // Consistent stats (the run stores mean and m2; l2 is derived on read).
    const TensorStats g = ConstantStats(s >= 7 && s <= 9 ? 1000.0 : 0.1);
    out.push_back(Batch(Key(s), {{loss, 1.0, 0.0}}, {StatsRecord(grad, g)}));
  }
  return out;
}

TEST(TrialRunnerTest, ChecksAFinishedRunAtTheExpectedSteps) {
  TempDir dir;
  std::vector<TensorInfo> tensors;
  const auto steps = LossAndGradientSteps(20, &tensors);
  TSTAT_RR_ASSERT_OK(WriteRun(dir.Sub("run"), tensors, steps));
  auto runner = TrialRunner::Open(
      dir.Sub("run"), Rules({Spec("loss_not_decreasing", {{"num_steps", "5"}}),
                             ExprSpec("grad_blowup", "l2 > 1e3 || nan_count > 0", "3")}));
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  std::vector<Finding> findings;
  const Seen seen = RunAll(runner->get(), &findings);
  EXPECT_EQ(seen, (Seen{{"loss_not_decreasing", 0, 5},
                        {"grad_blowup", 0, 9},
                        {"loss_not_decreasing", 0, 10},
                        {"loss_not_decreasing", 0, 15}}));
  EXPECT_EQ(findings[1].tensor, "gradient/fc1.weight");
  EXPECT_TRUE(runner.value()->run_complete());
  EXPECT_TRUE(runner.value()->run_closed());
  EXPECT_EQ(runner.value()->steps_fed(), 20);
  EXPECT_EQ(runner.value()->engine().records_evaluated(), 40u);  // 20 stats + 20 scalars
  EXPECT_TRUE(runner.value()->warnings().empty());
}

// The run's records are read with their exponent histograms only when a
// rule reads them: low_precision_range then finds the fp16 overflow written
// at steps 3..5; rules that judge stats alone leave them unread.
TEST(TrialRunnerTest, ExponentHistogramsAreReadWhenARuleReadsThem) {
  TempDir dir;
  Catalog c;
  const auto grad = c.Add("gradient/fc1.weight", {"gradients"});
  const std::vector<TensorInfo> tensors = c.All();
  std::vector<StepBatch> steps;
  for (int s = 0; s < 6; ++s) {
    TensorStatsRecord r = StatsRecord(grad, ConstantStats(s >= 3 ? 70000.0 : 0.5));
    ExponentHistogram h;
    h.counts[ExponentHistogram::BinOf(s >= 3 ? 16 : -1)] = 4;  // 2^16 overflows fp16
    r.exponent_histogram = h;
    steps.push_back(Batch(Key(s), {}, {r}));
  }
  TSTAT_RR_ASSERT_OK(WriteRun(dir.Sub("run"), tensors, steps));
  const RuleSpec fp16 = Spec("low_precision_range", {{"formats", "fp16"}});
  auto reading = TrialRunner::Open(dir.Sub("run"), Rules({Spec("all_zero"), fp16}));
  ASSERT_TRUE(reading.ok()) << reading.status().ToString();
  EXPECT_TRUE(reading.value()->reads_exponent_histograms());
  EXPECT_EQ(RunAll(reading->get()), (Seen{{"low_precision_range", 0, 3},
                                          {"low_precision_range", 0, 4},
                                          {"low_precision_range", 0, 5}}));
  auto stats_only =
      TrialRunner::Open(dir.Sub("run"), Rules({Spec("all_zero"), Spec("exploding_tensor")}));
  ASSERT_TRUE(stats_only.ok()) << stats_only.status().ToString();
  EXPECT_FALSE(stats_only.value()->reads_exponent_histograms());
  RunAll(stats_only->get());
  EXPECT_EQ(stats_only.value()->steps_fed(), 6);
}

TEST(TrialRunnerTest, FeedsEveryWorkerWithItsOwnCatalog) {
  TempDir dir;
  // Worker 0 saves every step; worker 1 every other step and registered
  // another tensor first, so "w" has a different id there.
  Catalog c0;
  const auto w0 = c0.Add("w");
  Catalog c1;
  c1.Add("extra");
  const auto w1 = c1.Add("w");
  std::vector<StepBatch> s0, s1;
  for (int s = 0; s < 10; ++s) {
    s0.push_back(Batch(Key(s), {}, {StatsRecord(w0, ConstantStats(s == 3 ? 10.0 : 1.0))}));
    if (s % 2 == 0) {
      s1.push_back(Batch(Key(s), {}, {StatsRecord(w1, ConstantStats(s == 6 ? 10.0 : 1.0))}));
    }
  }
  TSTAT_RR_ASSERT_OK(WriteRun(dir.path(), c0.All(), s0, 0, 2));
  TSTAT_RR_ASSERT_OK(WriteRun(dir.path(), c1.All(), s1, 1, 2));
  RuleSpec spec = ExprSpec("big", "max > 5", "1");
  spec.tensor_regex = "^w$";
  auto runner = TrialRunner::Open(dir.path(), Rules({spec}));
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  EXPECT_EQ(RunAll(runner->get()), (Seen{{"big", 0, 3}, {"big", 1, 6}}));
  EXPECT_EQ(runner.value()->engine().steps_evaluated(), 15u);
}

TEST(TrialRunnerTest, LabelRulesReadCountsAndConfusionMatricesFromTheRun) {
  TempDir dir;
  Catalog c;
  const auto labels = c.Add("labels", {"labels"});
  c.infos[labels].dtype = DType::kInt64;
  auto record = [&](std::vector<std::uint64_t> m) {  // 2 classes, row = label
    TensorStatsRecord r;
    r.tensor_id = labels;
    r.has_stats = false;
    r.label_counts = LabelCounts{{m[0] + m[1], m[2] + m[3]}, 0};
    r.confusion = ConfusionMatrix{2, m, 0};
    return r;
  };
  std::vector<StepBatch> steps = {
      Batch(Key(0), {}, {record({5, 5, 5, 5})}), Batch(Key(1), {}, {record({10, 0, 0, 10})}),
      Batch(Key(2), {}, {record({10, 0, 0, 10})}), Batch(Key(3), {}, {record({990, 0, 0, 10})})};
  TSTAT_RR_ASSERT_OK(WriteRun(dir.path(), c.All(), steps));
  auto runner = TrialRunner::Open(dir.path(), Rules({Spec("confusion"), Spec("class_imbalance")}));
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  // confusion: column 0 is 5/10 right at step 0 (and stays below 0.9 or
  // column 1 does); class_imbalance: 1020 vs 40 at step 3.
  EXPECT_EQ(RunAll(runner->get()), (Seen{{"confusion", 0, 0}, {"class_imbalance", 0, 3}}));
  EXPECT_TRUE(runner.value()->warnings().empty());
}

TEST(TrialRunnerTest, FollowsALiveRunWhileItIsWritten) {
  TempDir dir;
  std::vector<TensorInfo> tensors;
  auto steps = LossAndGradientSteps(12, &tensors);
  LiveWriter writer(dir.path(), tensors, steps, {100});
  writer.Start();
  ASSERT_TRUE(writer.opened) << writer.Join().ToString();
  TrialRunnerOptions options;
  options.follow = true;
  options.poll_interval_s = 0.01;
  auto runner = TrialRunner::Open(
      dir.path(), Rules({Spec("loss_not_decreasing", {{"num_steps", "3"}})}), options);
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  std::vector<std::int64_t> steps_seen;
  std::vector<bool> while_running;
  Status s = runner.value()->Run([&](const Finding& f) {
    steps_seen.push_back(f.step.global_step);
    while_running.push_back(!writer.closed.load());
    // A finding comes soon after its step was flushed, not at the end.
    EXPECT_LE(writer.flushed.load() - f.step.global_step, 4) << f.step.global_step;
    return Status::OK();
  });
  TSTAT_RR_ASSERT_OK(writer.Join());
  TSTAT_RR_ASSERT_OK(s);
  EXPECT_EQ(steps_seen, (std::vector<std::int64_t>{3, 6, 9}));
  ASSERT_FALSE(while_running.empty());
  EXPECT_TRUE(while_running.front());
  EXPECT_TRUE(runner.value()->run_complete());
  EXPECT_EQ(runner.value()->steps_fed(), 12);
}

TEST(TrialRunnerTest, TicksReportAStallWhileFollowing) {
  TempDir dir;
  Catalog c;
  const auto w = c.Add("w");
  // Step 0, a 1.2 s stall, step 1.
  LiveWriter writer(dir.path(), c.All(),
                    {Batch(Key(0), {}, {StatsRecord(w, ConstantStats(1))}),
                     Batch(Key(1), {}, {StatsRecord(w, ConstantStats(1))})},
                    {1200, 0});
  writer.Start();
  ASSERT_TRUE(writer.opened) << writer.Join().ToString();
  TrialRunnerOptions options;
  options.follow = true;
  options.poll_interval_s = 0.02;
  auto runner = TrialRunner::Open(
      dir.path(), Rules({Spec("stalled_training", {{"threshold", "0.5"}})}), options);
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  std::vector<Finding> findings;
  const Seen seen = RunAll(runner->get(), &findings);
  TSTAT_RR_ASSERT_OK(writer.Join());
  // Reported once by a tick at the last step before the stall (step 0), not
  // again when step 1 arrived.
  EXPECT_EQ(seen, (Seen{{"stalled_training", 0, 0}}));
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_GT(Value(findings[0], "seconds"), 0.5);
}

TEST(TrialRunnerTest, RulesWithNothingToJudgeWarnOnce) {
  TempDir dir;
  Catalog c;
  const auto w = c.Add("fc1.weight", {"weights"});
  std::vector<StepBatch> steps;
  for (int s = 0; s < 5; ++s)
    steps.push_back(Batch(Key(s), {}, {StatsRecord(w, ConstantStats(1))}));
  TSTAT_RR_ASSERT_OK(WriteRun(dir.path(), c.All(), steps, 0, 1, /*close=*/false));
  RuleSpec unmatched = ExprSpec("nothing", "max > 0", "1");
  unmatched.tensor_regex = "^conv";
  std::vector<std::string> warned;
  TrialRunnerOptions options;
  options.on_warning = [&](const std::string& text) { warned.push_back(text); };
  auto runner =
      TrialRunner::Open(dir.path(), Rules({Spec("loss_not_decreasing"), unmatched}), options);
  ASSERT_TRUE(runner.ok());
  EXPECT_TRUE(RunAll(runner->get()).empty());
  ASSERT_EQ(warned.size(), 2u);
  EXPECT_NE(warned[0].find("no loss found"), std::string::npos) << warned[0];
  EXPECT_NE(warned[1].find("^conv"), std::string::npos) << warned[1];
  // The run was never closed: check evaluates what is on disk.
  EXPECT_FALSE(runner.value()->run_closed());
  EXPECT_EQ(runner.value()->steps_fed(), 5);
  EXPECT_EQ(TrialRunner::Open(dir.Sub("missing"), {}).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tstat::rules::runtest
