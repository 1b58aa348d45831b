// overfit, overtraining, underfitting: each fires at the exact step its
// definition (docs/rules.md) gives, and not otherwise.
#include <gtest/gtest.h>

#include "tests/rules/loss_driver.h"
#include "tests/rules/run_rules_test_util.h"

namespace tstat::rules::runtest {
namespace {

// ---------------------------------------------------------------------------
// ---- overfit, trend (the default)

// One evaluation cycle: `train` TRAIN steps of loss t, then one EVAL step of
// loss v. Returns the findings of those steps.
struct Cycles {
  explicit Cycles(const RuleSpec& spec) : d(spec) {}
  std::vector<Finding> Run(double t, double v, int train = 5) {
    std::vector<Finding> out;
    for (int i = 0; i < train; ++i) {
      for (auto& f : d.At(global++, t, Mode::kTrain, train_step++)) out.push_back(f);
    }
    for (auto& f : d.At(global++, v, Mode::kEval, eval_step++)) out.push_back(f);
    return out;
  }
  LossDriver d;
  std::int64_t global = 0, train_step = 0, eval_step = 0;
};

TEST(OverfitTest, ByDefaultFiresWhenValidationRisesWhileTrainingFalls) {
  Cycles c(Spec("overfit"));
  // Both fall; the best (mean of the last 3 evaluations) is 0.5 with the
  // training loss at 0.5.
  for (double x : {1.0, 0.8, 0.6, 0.5, 0.5, 0.5}) EXPECT_TRUE(c.Run(x, x).empty());
  // Validation climbs, training falls: the 3-evaluation means reach 0.7
  // (+40% > 25%) against 0.5, training 0.275 (-48% > 40%).
  EXPECT_TRUE(c.Run(0.2, 0.6).empty());
  EXPECT_TRUE(c.Run(0.2, 0.7).empty());  // +20%: not more
  // An evaluation is judged at the next training step.
  EXPECT_TRUE(c.Run(0.2, 0.8).empty());
  std::vector<Finding> f = c.Run(0.2, 0.8);
  // Reported at every training step after the evaluation that overfits.
  ASSERT_EQ(f.size(), 5u);
  EXPECT_EQ(f[0].step.mode, Mode::kTrain);
  EXPECT_EQ(f[0].step.mode_step, 45);
  EXPECT_EQ(f[0].tensor, "loss");
  EXPECT_EQ(f[0].values[0].first, "rise_percent");
  EXPECT_NEAR(f[0].values[0].second, 100.0 * (0.7 / 0.5 - 1.0), 1e-9);
  // Training: the mean of the last 4 training phases (0.5, 0.2, 0.2, 0.2).
  EXPECT_NEAR(Value(f[0], "training_loss"), 0.275, 1e-12);
  EXPECT_NEAR(Value(f[0], "training_loss_at_best"), (0.6 + 0.5 + 0.5 + 0.5) / 4, 1e-12);
  EXPECT_EQ(f[0].severity, Severity::kError);
  EXPECT_NE(f[0].message.find("EVAL step"), std::string::npos) << f[0].message;
  // Validation back near its best: no more findings.
  for (int i = 0; i < 3; ++i) c.Run(0.2, 0.5);
  EXPECT_TRUE(c.Run(0.2, 0.5).empty());
}

TEST(OverfitTest, ByDefaultNoisyValidationOrABadUpdateIsNotOverfitting) {
  Cycles c(Spec("overfit"));
  for (double x : {1.0, 0.6, 0.4, 0.3, 0.3, 0.3}) EXPECT_TRUE(c.Run(x, x).empty());
  // A bad update: validation +100% for one evaluation, and training too.
  EXPECT_TRUE(c.Run(0.6, 0.6).empty());
  EXPECT_TRUE(c.Run(0.3, 0.3).empty());
  // Validation +50% for one evaluation, training falling: the 3-evaluation
  // mean rises 17%.
  EXPECT_TRUE(c.Run(0.2, 0.45).empty());
  EXPECT_TRUE(c.Run(0.2, 0.3).empty());
  EXPECT_TRUE(c.Run(0.2, 0.3).empty());
  // A generalisation gap alone (validation 0.3, training 0.01) is not either.
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(c.Run(0.01, 0.3).empty());
}

TEST(OverfitTest, ByDefaultASteadyClimbIsOverfitting) {
  Cycles c(Spec("overfit"));
  for (double x : {1.0, 0.8, 0.6, 0.5, 0.5, 0.5}) c.Run(x, x);
  // Validation rises a little at every evaluation while training collapses.
  std::vector<Finding> all;
  const double v[] = {0.505, 0.51, 0.515, 0.52, 0.53, 0.54};
  for (double x : v) {
    for (auto& f : c.Run(0.05, x)) all.push_back(f);
  }
  // The fifth rise (0.53 > 0.5 * 1.05, after 5 rises) is reported at the
  // next training steps.
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[0].step.mode_step, 6 * 5 + 5 * 5);
}

// ---- gap (smdebug's: ratio_threshold or start_step)

TEST(OverfitTest, FiresWhenValidationLossIsFarAboveTheTrainingPhaseMean) {
  LossDriver d(Spec("overfit", {{"ratio_threshold", "0.1"}}));
  std::vector<Finding> all;
  auto add = [&](const std::vector<Finding>& f) { all.insert(all.end(), f.begin(), f.end()); };
  // Training phase 1: 1.2, 0.8 (mean 1.0); EVAL at 2: 1.05 (ratio 0.05).
  add(d.At(0, 1.2, Mode::kTrain, 0));
  add(d.At(1, 0.8, Mode::kTrain, 1));
  add(d.At(2, 1.05, Mode::kEval, 0));
  EXPECT_TRUE(all.empty());
  // Training phase 2: 0.5, 0.5; EVAL at 5: 0.56 (ratio 0.12 > 0.1) fires.
  add(d.At(3, 0.5, Mode::kTrain, 2));
  add(d.At(4, 0.5, Mode::kTrain, 3));
  add(d.At(5, 0.56, Mode::kEval, 1));
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].step.global_step, 5);
  EXPECT_NEAR(Value(all[0], "ratio"), 0.12, 1e-12);
  EXPECT_DOUBLE_EQ(Value(all[0], "training_loss"), 0.5);
  // Still overfitting at the next EVAL step: not reported again; after a good
  // evaluation it is reported again.
  add(d.At(6, 0.6, Mode::kEval, 2));
  EXPECT_EQ(all.size(), 1u);
  add(d.At(7, 0.5, Mode::kEval, 3));
  add(d.At(8, 0.7, Mode::kEval, 4));
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].step.global_step, 8);
}

TEST(OverfitTest, PatienceAndStartStep) {
  LossDriver d(Spec("overfit", {{"patience", "2"}, {"start_step", "3"}}));
  std::vector<std::int64_t> fired;
  auto add = [&](const std::vector<Finding>& f) {
    for (const auto& x : f) fired.push_back(x.step.global_step);
  };
  add(d.At(0, 1.0, Mode::kTrain, 0));
  add(d.At(1, 2.0, Mode::kEval, 0));  // before start_step: ignored
  add(d.At(2, 2.0, Mode::kEval, 1));
  add(d.At(3, 2.0, Mode::kEval, 2));  // streak 1
  EXPECT_TRUE(fired.empty());
  add(d.At(4, 2.0, Mode::kEval, 3));  // streak 2 = patience
  EXPECT_EQ(fired, Steps{4});
}

TEST(OverfitTest, PairsDifferentlyNamedLossesAndExplainsMissingEval) {
  Driver d(MakeRuleOrDie(Spec("overfit", {{"ratio_threshold", "0.1"}})));
  const auto train = d.catalog.Add("train_loss", {"losses"}, TensorKind::kScalar);
  const auto val = d.catalog.Add("val_loss", {"losses"}, TensorKind::kScalar);
  d.Step(Key(0, Mode::kTrain, 0), {{train, 1.0, 0.0}});
  const auto f = d.Step(Key(1, Mode::kEval, 0), {{val, 2.0, 0.0}});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].tensor, "val_loss");

  LossDriver only_train(Spec("overfit"));
  only_train.Run({{0, 1.0}, {1, 0.9}}, Mode::kTrain);
  const std::string diag = only_train.d.rule().Diagnostics();
  EXPECT_NE(diag.find("EVAL"), std::string::npos) << diag;
}

// ---------------------------------------------------------------------------
TEST(OvertrainingTest, FiresWhenNeitherLossImprovesForItsPatience) {
  LossDriver d(Spec("overtraining",
                    {{"patience_train", "2"}, {"patience_validation", "2"}, {"delta", "0.1"}}));
  std::vector<std::int64_t> fired;
  auto add = [&](const std::vector<Finding>& f) {
    for (const auto& x : f) fired.push_back(x.step.global_step);
  };
  add(d.At(0, 1.0, Mode::kTrain, 0));   // train best 1.0
  add(d.At(1, 1.0, Mode::kEval, 0));    // val best 1.0
  add(d.At(2, 0.95, Mode::kTrain, 1));  // train 1 without improvement (> 0.9)
  add(d.At(3, 0.99, Mode::kEval, 1));   // val 1
  add(d.At(4, 0.96, Mode::kTrain, 2));  // train 2: but val only 1
  EXPECT_TRUE(fired.empty());
  add(d.At(5, 0.98, Mode::kEval, 2));  // val 2: both stalled
  EXPECT_EQ(fired, Steps{5});
  add(d.At(6, 0.97, Mode::kEval, 3));  // still stalled: once
  EXPECT_EQ(fired, Steps{5});
  add(d.At(7, 0.5, Mode::kTrain, 3));  // training improves: resets
  add(d.At(8, 0.97, Mode::kEval, 4));
  add(d.At(9, 0.49, Mode::kTrain, 4));
  add(d.At(10, 0.48, Mode::kTrain, 5));  // train 2 again, val 5: fires again
  EXPECT_EQ(fired, (Steps{5, 10}));
}

TEST(OvertrainingTest, ImprovingLossesNeverFire) {
  LossDriver d(Spec("overtraining", {{"patience_train", "1"}, {"patience_validation", "1"}}));
  std::vector<Finding> all;
  for (int i = 0; i < 20; ++i) {
    for (auto& f : d.At(2 * i, 5.0 - 0.2 * i, Mode::kTrain, i)) all.push_back(f);
    for (auto& f : d.At(2 * i + 1, 5.5 - 0.2 * i, Mode::kEval, i)) all.push_back(f);
  }
  EXPECT_TRUE(all.empty());
}

// ---------------------------------------------------------------------------
TEST(UnderfittingTest, FiresAtTheFirstCheckWhenTheLossStaysHigh) {
  LossDriver d(Spec("underfitting", {{"num_steps", "10"}, {"window", "2"}}));
  std::vector<std::pair<std::int64_t, double>> points;
  for (std::int64_t s = 0; s <= 20; ++s) points.emplace_back(s, 1.0 - 0.001 * s);
  // initial = 0.9995; at step 10 the last two average 0.9905 > 0.9 * 0.9995.
  EXPECT_EQ(d.Run(points, Mode::kTrain), Steps{10});
  EXPECT_NEAR(Value(d.findings[0], "initial_loss"), 0.9995, 1e-12);
  EXPECT_NEAR(Value(d.findings[0], "loss"), 0.9905, 1e-12);
}

TEST(UnderfittingTest, AFallingLossPassesUnlessAboveTheThreshold) {
  std::vector<std::pair<std::int64_t, double>> points;
  for (std::int64_t s = 0; s <= 20; ++s) points.emplace_back(s, 1.0 / (1.0 + s));
  LossDriver falling(Spec("underfitting", {{"num_steps", "10"}, {"window", "2"}}));
  EXPECT_EQ(falling.Run(points, Mode::kTrain), Steps{});
  // With threshold 0.05 the loss (0.087 at step 10) is still too high until
  // the mean of the last two falls to 0.05 or below (at step 20: 0.0488), which
  // re-arms it without a second finding.
  LossDriver threshold(
      Spec("underfitting", {{"num_steps", "10"}, {"window", "2"}, {"threshold", "0.05"}}));
  EXPECT_EQ(threshold.Run(points, Mode::kTrain), Steps{10});
  // EVAL losses are not training losses.
  LossDriver eval(Spec("underfitting", {{"num_steps", "1"}, {"window", "1"}}));
  EXPECT_EQ(eval.Run({{0, 1.0}, {1, 1.0}, {2, 1.0}}, Mode::kEval), Steps{});
  EXPECT_NE(eval.d.rule().Diagnostics().find("training losses"), std::string::npos);
}

}  // namespace
}  // namespace tstat::rules::runtest
