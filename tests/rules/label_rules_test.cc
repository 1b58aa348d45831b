// class_imbalance and confusion on label counts and confusion matrices.
#include <gtest/gtest.h>

#include "tests/rules/run_rules_test_util.h"

namespace tstat::rules::runtest {
namespace {

TensorStatsRecord Labels(std::uint32_t id, std::vector<std::uint64_t> counts) {
  TensorStatsRecord r;
  r.tensor_id = id;
  r.has_stats = false;
  r.label_counts = LabelCounts{std::move(counts), 0};
  return r;
}

// A labels record with a confusion matrix (row = label, column = prediction).
TensorStatsRecord Matrix(std::uint32_t id, int classes, std::vector<std::uint64_t> counts) {
  TensorStatsRecord r;
  r.tensor_id = id;
  r.has_stats = false;
  ConfusionMatrix m;
  m.classes = classes;
  m.counts = std::move(counts);
  std::vector<std::uint64_t> label_counts(classes, 0);
  for (int i = 0; i < classes; ++i) {
    for (int j = 0; j < classes; ++j) label_counts[i] += m.counts[i * classes + j];
  }
  r.confusion = std::move(m);
  r.label_counts = LabelCounts{std::move(label_counts), 0};
  return r;
}

std::vector<std::int64_t> FiredSteps(const std::vector<Finding>& f) {
  std::vector<std::int64_t> out;
  for (const Finding& x : f) out.push_back(x.step.global_step);
  return out;
}

TEST(ClassImbalanceTest, FiresWhileEnoughSamplesShowTheImbalance) {
  Driver d(MakeRuleOrDie(Spec("class_imbalance")));
  const auto labels = d.catalog.Add("labels", {"labels"});
  std::vector<Finding> all;
  for (int s = 0; s < 3; ++s) {
    for (auto& f : d.Step(Key(s), {}, {Labels(labels, {10, 10})})) all.push_back(f);
  }
  EXPECT_TRUE(all.empty());  // 60 samples < 500
  // smdebug's test: 990 zeros and 10 ones at step 3 -> 1020 vs 40 (25.5 > 10).
  for (auto& f : d.Step(Key(3), {}, {Labels(labels, {990, 10})})) all.push_back(f);
  ASSERT_EQ(FiredSteps(all), (std::vector<std::int64_t>{3}));
  EXPECT_DOUBLE_EQ(Value(all[0], "ratio"), 25.5);
  EXPECT_DOUBLE_EQ(Value(all[0], "max_class"), 0);
  EXPECT_DOUBLE_EQ(Value(all[0], "min_class"), 1);
  EXPECT_EQ(all[0].tensor, "labels");
  EXPECT_EQ(all[0].severity, Severity::kWarning);
  // Still imbalanced: reported at every step (one episode for the runners).
  EXPECT_EQ(d.Step(Key(4), {}, {Labels(labels, {990, 10})}).size(), 1u);
  // Balanced again: not any more.
  EXPECT_TRUE(d.Step(Key(5), {}, {Labels(labels, {0, 1990})}).empty());
}

TEST(ClassImbalanceTest, CountsTrainingLabelsAndReportsLabelsOutOfRange) {
  Driver d(MakeRuleOrDie(Spec("class_imbalance")));
  const auto labels = d.catalog.Add("labels", {"labels"});
  // Skewed TRAIN labels, balanced EVAL labels: the EVAL ones do not count.
  std::vector<Finding> all;
  for (int s = 0; s < 4; ++s) {
    for (auto& f : d.Step(Key(2 * s, Mode::kTrain, s), {}, {Labels(labels, {190, 10})})) all.push_back(f);
    for (auto& f : d.Step(Key(2 * s + 1, Mode::kEval, s), {}, {Labels(labels, {1000, 1000})})) {
      all.push_back(f);
    }
  }
  // 760 : 40 after the fourth TRAIN step, 19 > 10 (with the EVAL labels: 1.3).
  ASSERT_EQ(FiredSteps(all), (std::vector<std::int64_t>{4, 6}));
  EXPECT_EQ(all[0].step.mode, Mode::kTrain);
  // Labels outside the classes counted (an ignore index of -100) are said.
  TensorStatsRecord r = Labels(labels, {190, 10});
  r.label_counts->out_of_range = 7;
  d.Step(Key(9, Mode::kTrain, 4), {}, {r});
  EXPECT_NE(d.rule().Diagnostics().find("7 label(s) were outside"), std::string::npos)
      << d.rule().Diagnostics();
  // What it needs: label counts of integer labels tensors at training steps.
  TensorInfo t;
  t.name = "labels";
  t.dtype = DType::kInt64;
  t.collections = {"labels"};
  const CaptureNeeds n = d.rule().Needs(t);
  EXPECT_TRUE(n.label_counts);
  EXPECT_EQ(n.modes, CaptureNeeds::TrainModes());
  t.dtype = DType::kFloat32;  // float "labels" (soft targets) are not class ids
  EXPECT_FALSE(d.rule().Needs(t).any());
}

TEST(ClassImbalanceTest, BalancedOrTooFewSamplesNeverFire) {
  Driver d(MakeRuleOrDie(Spec("class_imbalance", {{"samples", "1000"}})));
  const auto labels = d.catalog.Add("train/labels", {});
  std::vector<Finding> all;
  // 990 : 1 but only 991 samples: below `samples`.
  for (auto& f : d.Step(Key(0), {}, {Labels(labels, {990, 1, 0})})) all.push_back(f);
  EXPECT_TRUE(all.empty());
  Driver b(MakeRuleOrDie(Spec("class_imbalance")));
  const auto l2 = b.catalog.Add("labels", {"labels"});
  for (int s = 0; s < 50; ++s) {
    // Class 2 never occurs: unseen classes are not part of the ratio.
    for (auto& f : b.Step(Key(s), {}, {Labels(l2, {30, 40, 0})})) all.push_back(f);
  }
  EXPECT_TRUE(all.empty());
}

TEST(ClassImbalanceTest, AccumulatesAcrossWorkers) {
  Driver d(MakeRuleOrDie(Spec("class_imbalance")));
  const auto labels = d.catalog.Add("labels", {"labels"});
  // Worker 0 alone would be 400:10 (40); with worker 1, 800:110 (7.3).
  auto f0 = d.Step(Key(0), {}, {Labels(labels, {400, 10})}, /*worker=*/0);
  auto f1 = d.Step(Key(0), {}, {Labels(labels, {400, 100})}, /*worker=*/1);
  EXPECT_TRUE(f0.empty());  // 410 < 500
  EXPECT_TRUE(f1.empty());
}

TEST(ClassImbalanceTest, MispredictedClassFromTheConfusionMatrix) {
  Driver d(MakeRuleOrDie(Spec("class_imbalance", {{"samples", "300"}})));
  const auto labels = d.catalog.Add("labels", {"labels"});
  // Class 2 is predicted as class 0 80% of the time (> 0.7).
  const auto f = d.Step(Key(7), {}, {Matrix(labels, 3, {100, 0, 0, 0, 100, 0, 80, 0, 20})});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_DOUBLE_EQ(Value(f[0], "class"), 2);
  EXPECT_DOUBLE_EQ(Value(f[0], "mispredicted_fraction"), 0.8);
  Driver ok(MakeRuleOrDie(Spec("class_imbalance", {{"samples", "300"}})));
  const auto l2 = ok.catalog.Add("labels", {"labels"});
  EXPECT_TRUE(ok.Step(Key(0), {}, {Matrix(l2, 3, {100, 0, 0, 0, 100, 0, 31, 0, 69})}).empty());
}

TEST(ClassImbalanceTest, NoLabelsIsExplainedAndBadRegexIsAnError) {
  Driver d(MakeRuleOrDie(Spec("class_imbalance")));
  const auto w = d.catalog.Add("fc1.weight", {"weights"});
  d.Step(Key(0), {}, {StatsRecord(w, ConstantStats(1.0))});
  const std::string diag = d.rule().Diagnostics();
  EXPECT_NE(diag.find("no labels tensor"), std::string::npos) << diag;
  const Status bad = MakeRule(Spec("class_imbalance", {{"labels_regex", "(labels"}})).status();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("labels_regex"), std::string::npos) << bad.message();
}

// Bad input: labels only in a mode the rule does not judge (EVAL) is said,
// not mistaken for "no labels"; modes given in the spec judge them.
TEST(ClassImbalanceTest, LabelsOnlyInAModeNotJudgedAreExplained) {
  Driver d(MakeRuleOrDie(Spec("class_imbalance")));
  const auto labels = d.catalog.Add("labels", {"labels"});
  const auto w = d.catalog.Add("fc1.weight", {"weights"});
  std::vector<Finding> all;
  for (int s = 0; s < 3; ++s) {
    for (auto& f : d.Step(Key(2 * s, Mode::kTrain, s), {}, {StatsRecord(w, ConstantStats(1.0))})) {
      all.push_back(f);
    }
    for (auto& f : d.Step(Key(2 * s + 1, Mode::kEval, s), {}, {Labels(labels, {950, 50})})) {
      all.push_back(f);
    }
  }
  EXPECT_TRUE(all.empty());
  const std::string diag = d.rule().Diagnostics();
  EXPECT_NE(diag.find("labels were saved in EVAL steps only"), std::string::npos) << diag;

  RuleSpec eval = Spec("class_imbalance");
  eval.modes = {Mode::kEval};
  Driver e(MakeRuleOrDie(eval));
  const auto l2 = e.catalog.Add("labels", {"labels"});
  EXPECT_EQ(e.Step(Key(1, Mode::kEval, 0), {}, {Labels(l2, {950, 50})}).size(), 1u);
  EXPECT_EQ(e.rule().Diagnostics(), "");
}

// ---------------------------------------------------------------------------
// 10 classes, one sample each; `wrong` maps label -> prediction for mistakes.
TensorStatsRecord TenSamples(std::uint32_t id, std::map<int, int> wrong) {
  std::vector<std::uint64_t> m(100, 0);
  for (int label = 0; label < 10; ++label) {
    const int pred = wrong.count(label) ? wrong[label] : label;
    ++m[label * 10 + pred];
  }
  return Matrix(id, 10, std::move(m));
}

TEST(ConfusionTest, SmdebugIdentityPassesOneMistakeFires) {
  Driver d(MakeRuleOrDie(Spec("confusion")));
  const auto labels = d.catalog.Add("labels", {"labels"});
  EXPECT_TRUE(d.Step(Key(0), {}, {TenSamples(labels, {})}).empty());
  Driver e(MakeRuleOrDie(Spec("confusion")));
  const auto l2 = e.catalog.Add("labels", {"labels"});
  const auto f = e.Step(Key(0), {}, {TenSamples(l2, {{3, 5}})});
  ASSERT_EQ(f.size(), 1u);
  // Column 5 holds labels 5 and 3: diagonal 0.5 < 0.9, off-diagonal 0.5 > 0.1.
  EXPECT_DOUBLE_EQ(Value(f[0], "min_diag_value"), 0.5);
  EXPECT_DOUBLE_EQ(Value(f[0], "max_off_diag_value"), 0.5);
  EXPECT_DOUBLE_EQ(Value(f[0], "column"), 5);
}

TEST(ConfusionTest, NormalisesByColumn) {
  Driver d(MakeRuleOrDie(Spec("confusion")));
  const auto labels = d.catalog.Add("labels", {"labels"});
  // Columns: 95/100 and 30/30 (fine); rows would give 30/35 < 0.9.
  EXPECT_TRUE(d.Step(Key(0), {}, {Matrix(labels, 2, {95, 0, 5, 30})}).empty());
  // Boundaries: 0.9 on the diagonal and 0.1 off it do not fire; 0.89 does.
  Driver b(MakeRuleOrDie(Spec("confusion")));
  const auto l2 = b.catalog.Add("labels", {"labels"});
  EXPECT_TRUE(b.Step(Key(0), {}, {Matrix(l2, 2, {90, 0, 10, 100})}).empty());
  Driver c(MakeRuleOrDie(Spec("confusion")));
  const auto l3 = c.catalog.Add("labels", {"labels"});
  const auto f = c.Step(Key(0), {}, {Matrix(l3, 2, {89, 0, 11, 100})});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_DOUBLE_EQ(Value(f[0], "min_diag_value"), 0.89);
}

TEST(ConfusionTest, AccumulatesOrUsesAWindow) {
  const std::vector<std::uint64_t> bad = {5, 5, 5, 5};
  const std::vector<std::uint64_t> good = {1000, 0, 0, 1000};
  // Cumulative: once bad, the good steps dilute it (step 1 re-arms), and a
  // later bad step is then too small to fire again.
  Driver all(MakeRuleOrDie(Spec("confusion")));
  const auto l1 = all.catalog.Add("labels", {"labels"});
  std::vector<Finding> fa;
  for (auto& f : all.Step(Key(0), {}, {Matrix(l1, 2, bad)})) fa.push_back(f);
  for (auto& f : all.Step(Key(1), {}, {Matrix(l1, 2, good)})) fa.push_back(f);
  for (auto& f : all.Step(Key(2), {}, {Matrix(l1, 2, bad)})) fa.push_back(f);
  EXPECT_EQ(FiredSteps(fa), (std::vector<std::int64_t>{0}));
  // window 1: only the latest step counts.
  Driver win(MakeRuleOrDie(Spec("confusion", {{"window", "1"}})));
  const auto l2 = win.catalog.Add("labels", {"labels"});
  std::vector<Finding> fw;
  for (auto& f : win.Step(Key(0), {}, {Matrix(l2, 2, bad)})) fw.push_back(f);
  for (auto& f : win.Step(Key(1), {}, {Matrix(l2, 2, good)})) fw.push_back(f);
  for (auto& f : win.Step(Key(2), {}, {Matrix(l2, 2, bad)})) fw.push_back(f);
  EXPECT_EQ(FiredSteps(fw), (std::vector<std::int64_t>{0, 2}));
}

TEST(ConfusionTest, CategoryNoLimitsTheClasses) {
  // Class 2 is always wrong; category_no 2 looks at classes 0 and 1 only.
  Driver d(MakeRuleOrDie(Spec("confusion", {{"category_no", "2"}})));
  const auto labels = d.catalog.Add("labels", {"labels"});
  EXPECT_TRUE(d.Step(Key(0), {}, {Matrix(labels, 3, {10, 0, 0, 0, 10, 0, 0, 0, 0})}).empty());
  EXPECT_TRUE(d.Step(Key(1), {}, {Matrix(labels, 3, {0, 0, 0, 0, 0, 0, 0, 5, 0})}).empty());
  Driver e(MakeRuleOrDie(Spec("confusion")));
  const auto l2 = e.catalog.Add("labels", {"labels"});
  EXPECT_EQ(e.Step(Key(1), {}, {Matrix(l2, 3, {10, 0, 0, 0, 10, 0, 0, 5, 0})}).size(), 1u);
}

TEST(ConfusionTest, NoMatrixIsExplained) {
  Driver d(MakeRuleOrDie(Spec("confusion")));
  const auto labels = d.catalog.Add("labels", {"labels"});
  d.Step(Key(0), {}, {Labels(labels, {1, 2})});
  EXPECT_NE(d.rule().Diagnostics().find("no tensor with a confusion matrix"), std::string::npos);
}

}  // namespace
}  // namespace tstat::rules::runtest
