// Expression rules, stalled_training (steps and ticks) and
// similar_across_runs (against a run on disk).
#include <gtest/gtest.h>

#include "tests/io/io_test_util.h"
#include "tests/rules/run_rules_test_util.h"

namespace tstat::rules::runtest {
namespace {

using io::testing::TempDir;
using Steps = std::vector<std::int64_t>;

Steps FiredSteps(const std::vector<Finding>& f) {
  Steps out;
  for (const Finding& x : f) out.push_back(x.step.global_step);
  return out;
}

TensorStats WithL2(double l2) {
  TensorStats s = ConstantStats(1.0);
  s.l2 = l2;
  return s;
}

RuleSpec Expr(const std::string& when, const std::string& for_steps = "",
              std::vector<std::string> collections = {}) {
  RuleSpec s = Spec("expression", {{"when", when}});
  s.name = "grad_blowup";
  if (!for_steps.empty()) s.parameters["for_steps"] = for_steps;
  s.collection_names = std::move(collections);
  return s;
}

TEST(ExpressionRuleTest, FiresAfterForStepsAndAgainOnlyAfterAFalseStep) {
  Driver d(MakeRuleOrDie(Expr("l2 > 1e3 || nan_count > 0", "3", {"gradients"})));
  const auto g = d.catalog.Add("gradient/fc1.weight", {"gradients"});
  const double l2[] = {2000, 2000, 2000, 2000, 2000, 10, 2000, 2000, 2000};
  std::vector<Finding> all;
  for (int s = 0; s < 9; ++s) {
    for (auto& f : d.Step(Key(s), {}, {StatsRecord(g, WithL2(l2[s]))})) all.push_back(f);
  }
  EXPECT_EQ(FiredSteps(all), (Steps{2, 8}));
  EXPECT_EQ(all[0].rule, "grad_blowup");
  EXPECT_EQ(all[0].type, "expression");
  EXPECT_EQ(all[0].tensor, "gradient/fc1.weight");
  EXPECT_DOUBLE_EQ(Value(all[0], "consecutive_steps"), 3);
  EXPECT_DOUBLE_EQ(Value(all[0], "l2"), 2000);
}

TEST(ExpressionRuleTest, StreaksArePerTensorAndWorkerOverTheTensorsSavedSteps) {
  Driver d(MakeRuleOrDie(Expr("nan_count > 0", "2")));
  const auto a = d.catalog.Add("a");
  const auto b = d.catalog.Add("b");
  TensorStats nan = ConstantStats(1.0);
  nan.nan_count = 1;
  std::vector<Finding> all;
  auto add = [&](std::vector<Finding> f) { all.insert(all.end(), f.begin(), f.end()); };
  add(d.Step(Key(0), {}, {StatsRecord(a, nan), StatsRecord(b, nan)}));
  add(d.Step(Key(1), {}, {StatsRecord(b, ConstantStats(1.0))}));  // a not saved: streak kept
  add(d.Step(Key(0), {}, {StatsRecord(a, nan)}, /*worker=*/1));    // worker 1's own streak
  add(d.Step(Key(2), {}, {StatsRecord(a, nan), StatsRecord(b, nan)}));
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].tensor, "a");
  EXPECT_EQ(all[0].step.global_step, 2);
  EXPECT_EQ(all[0].worker, 0);
}

TEST(ExpressionRuleTest, ScalarsAreOneElementTensorsAndNanIsFalse) {
  Driver d(MakeRuleOrDie(Expr("mean > 10")));
  const auto loss = d.catalog.Add("loss", {"losses"}, TensorKind::kScalar);
  EXPECT_TRUE(d.Step(Key(0), {{loss, 5.0, 0.0}}).empty());
  EXPECT_TRUE(d.Step(Key(1), {{loss, NAN, 0.0}}).empty());  // NaN > 10 is false
  const auto f = d.Step(Key(2), {{loss, 11.0, 0.0}});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].tensor, "loss");
  // log10 of a negative mean is NaN: false, never a finding.
  Driver n(MakeRuleOrDie(Expr("log10(mean) < 100")));
  const auto t = n.catalog.Add("t");
  EXPECT_TRUE(n.Step(Key(0), {}, {StatsRecord(t, ConstantStats(-1.0))}).empty());
}

TEST(ExpressionRuleTest, SelectionAndUnmatchedRegexWarning) {
  RuleSpec s = Expr("max > 0");
  s.tensor_regex = "^fc2\\.";
  Driver d(MakeRuleOrDie(s));
  const auto fc1 = d.catalog.Add("fc1.weight");
  EXPECT_TRUE(d.Step(Key(0), {}, {StatsRecord(fc1, ConstantStats(1.0))}).empty());
  const std::string diag = d.rule().Diagnostics();
  EXPECT_NE(diag.find("matched no tensor"), std::string::npos) << diag;
  EXPECT_NE(diag.find("fc2"), std::string::npos) << diag;
}

TEST(ExpressionRuleTest, SyntaxErrorsAndMissingConditionAreNamed) {
  const Status bad = MakeRule(Expr("l2 > > 3")).status();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("when"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("column"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("^"), std::string::npos) << bad.message();
  const Status missing = MakeRule(Spec("expression")).status();
  EXPECT_NE(missing.message().find("when"), std::string::npos) << missing.message();
  const Status steps = MakeRule(Expr("l2 > 1", "0")).status();
  EXPECT_NE(steps.message().find("for_steps"), std::string::npos) << steps.message();
}

// ---------------------------------------------------------------------------
TEST(StalledTrainingTest, AGapBetweenStepsFiresAtTheLateStep) {
  Driver d(MakeRuleOrDie(Spec("stalled_training", {{"threshold", "60"}})));
  std::vector<Finding> all;
  for (auto [step, t] : std::vector<std::pair<int, double>>{{0, 1000}, {1, 1030}, {2, 1100},
                                                           {3, 1150}}) {
    for (auto& f : d.Step(Key(step), {}, {}, 0, t)) all.push_back(f);
  }
  EXPECT_EQ(FiredSteps(all), (Steps{2}));
  EXPECT_DOUBLE_EQ(Value(all[0], "seconds"), 70);
  EXPECT_TRUE(all[0].tensor.empty());
  // The default threshold is 1800 s.
  Driver def(MakeRuleOrDie(Spec("stalled_training")));
  EXPECT_TRUE(def.Step(Key(0), {}, {}, 0, 0.5e4).empty());
  EXPECT_TRUE(def.Step(Key(1), {}, {}, 0, 0.5e4 + 1800).empty());
  EXPECT_EQ(def.Step(Key(2), {}, {}, 0, 0.5e4 + 3601).size(), 1u);
}

TEST(StalledTrainingTest, TicksReportALiveStallOnce) {
  Driver d(MakeRuleOrDie(Spec("stalled_training", {{"threshold", "600"}})));
  d.Step(Key(7, Mode::kTrain, 3), {}, {}, 0, 1000);
  EXPECT_TRUE(d.Tick(1500).empty());
  auto f = d.Tick(1700);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].step.global_step, 7);
  EXPECT_EQ(f[0].step.mode, Mode::kTrain);
  EXPECT_DOUBLE_EQ(Value(f[0], "seconds"), 700);
  EXPECT_TRUE(d.Tick(1800).empty());
  // The step that ends the stall does not report it a second time.
  EXPECT_TRUE(d.Step(Key(8), {}, {}, 0, 2000).empty());
  EXPECT_EQ(d.Tick(2601).size(), 1u);
  EXPECT_TRUE(d.Finish().empty());
}

TEST(StalledTrainingTest, NoStepAtAll) {
  Driver d(MakeRuleOrDie(Spec("stalled_training", {{"threshold", "10"}})));
  EXPECT_TRUE(d.Tick(100).empty());
  EXPECT_TRUE(d.Tick(110).empty());
  auto f = d.Tick(111);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].step.global_step, -1);
  EXPECT_TRUE(d.Tick(500).empty());
  EXPECT_TRUE(MakeRule(Spec("stalled_training_rule")).ok());
}

// ---------------------------------------------------------------------------
class SimilarAcrossRunsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Catalog c;
    w_ = c.Add("w", {"weights"});
    b_ = c.Add("b", {"biases"});
    std::vector<StepBatch> steps;
    for (int s = 0; s < 5; ++s) {
      steps.push_back(Batch(Key(s), {}, {StatsRecord(w_, ConstantStats(1.0 + s)),
                                         StatsRecord(b_, ConstantStats(0.5))}));
    }
    TSTAT_RR_ASSERT_OK(WriteRun(other_.path(), c.All(), steps));
  }
  std::unique_ptr<Driver> Make(std::map<std::string, std::string> params) {
    params.emplace("other_trials", other_.path());
    auto d = std::make_unique<Driver>(MakeRuleOrDie(Spec("similar_across_runs", params)));
    d->catalog.Add("w", {"weights"});
    d->catalog.Add("b", {"biases"});
    return d;
  }
  TempDir other_;
  std::uint32_t w_ = 0, b_ = 0;
};

TEST_F(SimilarAcrossRunsTest, FirstDivergenceOfEachTensorFires) {
  auto d = Make({});
  std::vector<Finding> all;
  for (int s = 0; s < 5; ++s) {
    TensorStats w = ConstantStats(1.0 + s);
    if (s == 1) w.mean *= 1.0 + 1e-7;  // within rtol 1e-5
    if (s >= 3) w.mean *= 1.0 + 1e-3;  // diverges at 3 (and stays so)
    for (auto& f : d->Step(Key(s), {}, {StatsRecord(w_, w), StatsRecord(b_, ConstantStats(0.5))})) {
      all.push_back(f);
    }
  }
  ASSERT_EQ(FiredSteps(all), (Steps{3}));
  EXPECT_EQ(all[0].tensor, "w");
  EXPECT_DOUBLE_EQ(Value(all[0], "other_mean"), 4.0);
  EXPECT_EQ(d->rule().Diagnostics(), "");
}

TEST_F(SimilarAcrossRunsTest, CountsMustMatchExactly) {
  auto d = Make({{"rtol", "0.5"}});
  TensorStats b = ConstantStats(0.5);
  b.nan_count = 1;
  const auto f = d->Step(Key(2), {}, {StatsRecord(b_, b)});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_DOUBLE_EQ(Value(f[0], "nan_count"), 1);
  EXPECT_DOUBLE_EQ(Value(f[0], "other_nan_count"), 0);
}

TEST_F(SimilarAcrossRunsTest, StepsTheOtherRunLacksAreSkippedAndExplained) {
  auto d = Make({});
  EXPECT_TRUE(d->Step(Key(50), {}, {StatsRecord(w_, ConstantStats(9.0))}).empty());
  EXPECT_NE(d->rule().Diagnostics().find("compared nothing"), std::string::npos);
}

TEST_F(SimilarAcrossRunsTest, OtherTrialsIsRequiredAndMustBeARun) {
  const Status missing = MakeRule(Spec("similar_across_runs")).status();
  EXPECT_NE(missing.message().find("other_trials"), std::string::npos) << missing.message();
  const Status bad =
      MakeRule(Spec("similar_across_runs", {{"other_trials", "/nonexistent/run"}})).status();
  EXPECT_EQ(bad.code(), StatusCode::kNotFound);
  EXPECT_NE(bad.message().find("other_trials"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("/nonexistent/run"), std::string::npos) << bad.message();
}

}  // namespace
}  // namespace tstat::rules::runtest
