// loss_not_decreasing (both judgements) and the Mann-Kendall trend it uses:
// each fires at the exact step its definition (docs/rules.md) gives, and not
// otherwise. overfit, overtraining and underfitting: fit_rules_test.cc.
#include <gtest/gtest.h>

#include "rules/run/mann_kendall.h"
#include "tests/rules/loss_driver.h"
#include "tests/rules/run_rules_test_util.h"

namespace tstat::rules::runtest {
namespace {

// ---- the default judgement: windows against the start (baseline "start")

// Minibatch-like noise: a deterministic +-`amplitude` zig-zag.
double Noise(std::int64_t s, double amplitude) {
  return (s % 2 ? 1 : -1) * amplitude * ((s % 3) + 1) / 3;
}

TEST(LossNotDecreasingTest, ByDefaultANetworkThatLearnsNothingFiresAtTheHorizon) {
  LossDriver d(Spec("loss_not_decreasing"));
  std::vector<std::pair<std::int64_t, double>> points;
  for (std::int64_t s = 0; s < 205; ++s) points.emplace_back(s, 2.3 + Noise(s, 0.2));
  // Warm-up: 200 steps (the horizon); then the median of the last 20 values
  // is compared with the median of the first 20 at every value.
  ASSERT_EQ(d.Run(points, Mode::kTrain), (Steps{199, 200, 201, 202, 203, 204}));
  const Finding& f = d.findings[0];
  // No labels show whether it began fresh or trained (a fine-tuned model, a
  // restarted job numbered from 0): reported, at most error, never a stop.
  EXPECT_EQ(f.severity, Severity::kError);
  EXPECT_NE(f.message.find("does not stop training"), std::string::npos) << f.message;
  EXPECT_TRUE(f.lower_is_worse);
  EXPECT_EQ(f.values[0].first, "decrease_percent");
  EXPECT_NEAR(Value(f, "decrease_percent"), 0.0, 1e-9);
  EXPECT_DOUBLE_EQ(Value(f, "window"), 20);
  EXPECT_NE(f.message.find("not learning"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("200 steps in"), std::string::npos) << f.message;
}

// Uniform noise in [-amplitude, amplitude) from a fixed LCG (no periodic
// pattern a trend test could read as a trend or hide one in).
struct LcgNoise {
  double operator()(double amplitude) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return amplitude * (static_cast<double>(state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
  std::uint64_t state = 12345;
};

TEST(MannKendallTrendTest, TheSlidingScoreIsThePairwiseOneOfItsWindow) {
  using run::MannKendallTrend;
  // S over the last `capacity` values, recomputed pair by pair, for series
  // with ties, spikes and a trend, at every length.
  for (const std::size_t capacity : {2u, 3u, 7u, 64u}) {
    MannKendallTrend mk(capacity);
    LcgNoise noise;
    std::vector<double> xs;
    for (int i = 0; i < 150; ++i) {
      const double x = i % 11 == 0 ? 5.0 : std::round(noise(3.0)) - 0.01 * i;  // ties
      xs.push_back(x);
      mk.Add(x);
      const std::size_t n = std::min(xs.size(), capacity);
      std::int64_t s = 0;
      for (std::size_t a = xs.size() - n; a < xs.size(); ++a) {
        for (std::size_t b = a + 1; b < xs.size(); ++b) s += (xs[b] > xs[a]) - (xs[b] < xs[a]);
      }
      ASSERT_EQ(mk.s(), s) << capacity << " " << i;
      ASSERT_EQ(mk.size(), n);
    }
  }
  // Z: (S - 1) / sqrt(n(n-1)(2n+5)/18) for a rising series of 10: S = 45.
  MannKendallTrend rising(100);
  for (int i = 0; i < 10; ++i) rising.Add(i);
  EXPECT_NEAR(rising.Z(), 44.0 / std::sqrt(10.0 * 9 * 25 / 18), 1e-12);
  MannKendallTrend constant(100);
  for (int i = 0; i < 10; ++i) constant.Add(1.0);
  EXPECT_EQ(constant.Z(), 0.0);
}

TEST(LossNotDecreasingTest, ByDefaultASlowButSteadyLearnerIsNotAFinding) {
  // Healthy training whose loss stays within a few percent of its start for
  // hundreds of steps (a long warmup, a small learning rate, a hard task):
  // 0.5% lower by step 200, under minibatch noise of +-1.5% and two spikes of
  // 50x, is less than diff_percent but a steady downward trend: learning.
  LossDriver slow(Spec("loss_not_decreasing"));
  LcgNoise noise;
  std::vector<std::pair<std::int64_t, double>> points;
  for (std::int64_t s = 0; s < 400; ++s) {
    double v = 2.3 * (1.0 - 0.005 * s / 200.0) + noise(0.035);
    if (s == 120 || s == 121) v *= 50;
    points.emplace_back(s, v);
  }
  EXPECT_EQ(slow.Run(points, Mode::kTrain), Steps{});
  // The same noise without the decline: no trend, a finding at the horizon
  // (its trend score is part of the finding).
  LossDriver flat(Spec("loss_not_decreasing"));
  LcgNoise same;
  points.clear();
  for (std::int64_t s = 0; s < 205; ++s) points.emplace_back(s, 2.3 + same(0.035));
  const Steps fired = flat.Run(points, Mode::kTrain);
  ASSERT_FALSE(fired.empty());
  EXPECT_EQ(fired.front(), 199);
  const Finding& f = flat.findings[0];
  EXPECT_GT(Value(f, "trend_z"), -2.0);
  EXPECT_NE(f.message.find("no downward trend (Mann-Kendall z = "), std::string::npos) << f.message;
  // trend_z 0: the windows alone judge, and the slow learner is a finding.
  LossDriver windows_only(Spec("loss_not_decreasing", {{"trend_z", "0"}}));
  LcgNoise again;
  points.clear();
  for (std::int64_t s = 0; s < 205; ++s) {
    points.emplace_back(s, 2.3 * (1.0 - 0.005 * s / 200.0) + again(0.035));
  }
  EXPECT_FALSE(windows_only.Run(points, Mode::kTrain).empty());
}

TEST(LossNotDecreasingTest, ByDefaultLearningPlateausAndSpikesAreNotFindings) {
  LossDriver d(Spec("loss_not_decreasing"));
  std::vector<std::pair<std::int64_t, double>> points;
  // Falls from 2.3 to a plateau at 0.3 by step 30, noisy, with loss spikes
  // of 50x at two steps: a plateau far below the start is convergence.
  for (std::int64_t s = 0; s < 300; ++s) {
    double v = (s < 30 ? 2.3 - 2.0 * s / 30.0 : 0.3) + Noise(s, 0.05);
    if (s == 60 || s == 61) v *= 50;
    points.emplace_back(s, v);
  }
  EXPECT_EQ(d.Run(points, Mode::kTrain), Steps{});
  // EVAL losses are overfit's: not judged by default.
  LossDriver eval(Spec("loss_not_decreasing"));
  std::vector<std::pair<std::int64_t, double>> flat;
  for (std::int64_t s = 0; s < 220; ++s) flat.emplace_back(s, 1.0);
  EXPECT_EQ(eval.Run(flat, Mode::kEval), Steps{});
  EXPECT_EQ(eval.Run(flat, Mode::kTrain).size(), 21u);  // TRAIN: 199..219
}

TEST(LossNotDecreasingTest, ByDefaultALossThatIsNanFromTheStartFiresAtOnce) {
  LossDriver d(Spec("loss_not_decreasing"));
  EXPECT_EQ(d.Run({{0, NAN}, {1, INFINITY}, {2, NAN}}, Mode::kTrain), (Steps{0, 1, 2}));
  EXPECT_EQ(d.findings[0].severity, Severity::kCritical);
  EXPECT_EQ(d.findings[0].values[0].first, "nonfinite_loss");
  EXPECT_NE(d.findings[0].message.find("TRAIN step 0"), std::string::npos) << d.findings[0].message;
}

TEST(LossNotDecreasingTest, ParametersOfTheStartJudgement) {
  // A shorter horizon and window judge sooner; diff_percent is the progress
  // asked for.
  LossDriver d(Spec("loss_not_decreasing",
                    {{"window", "5"}, {"diff_percent", "50"}, {"horizon", "1"}, {"trend_z", "0"}}));
  std::vector<std::pair<std::int64_t, double>> points;
  for (std::int64_t s = 0; s < 12; ++s) points.emplace_back(s, 1.0 - 0.04 * s);  // -44% by 11
  EXPECT_EQ(d.Run(points, Mode::kTrain), (Steps{9, 10, 11}));
  // The horizon counts mode steps from the series' first value.
  LossDriver later(Spec("loss_not_decreasing", {{"window", "5"}, {"horizon", "50"}}));
  std::vector<std::pair<std::int64_t, double>> flat;
  for (std::int64_t s = 10; s < 70; s += 2) flat.emplace_back(s, 1.0);
  EXPECT_EQ(later.Run(flat, Mode::kTrain).front(), 60);  // 10 + 50, the first even step >= 59
  // With the trend test that steady decline is learning.
  LossDriver trend(
      Spec("loss_not_decreasing", {{"window", "5"}, {"diff_percent", "50"}, {"horizon", "1"}}));
  EXPECT_EQ(trend.Run(points, Mode::kTrain), Steps{});
  const Status trend_z = MakeRule(Spec("loss_not_decreasing", {{"trend_z", "-1"}})).status();
  EXPECT_EQ(trend_z.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(trend_z.message().find("trend_z"), std::string::npos) << trend_z.message();
  const Status horizon = MakeRule(Spec("loss_not_decreasing", {{"horizon", "0"}})).status();
  EXPECT_EQ(horizon.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(horizon.message().find("horizon"), std::string::npos) << horizon.message();
  const Status fraction =
      MakeRule(Spec("loss_not_decreasing", {{"chance_fraction", "1.5"}})).status();
  EXPECT_EQ(fraction.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(fraction.message().find("chance_fraction"), std::string::npos) << fraction.message();
  const Status bad = MakeRule(Spec("loss_not_decreasing", {{"baseline", "best"}})).status();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("baseline"), std::string::npos) << bad.message();
}

// ---- a series that began learned (resumed or fine-tuned) is not judged against its start

// A labels record: `per_class` samples of each of `classes` classes.
TensorStatsRecord UniformLabels(std::uint32_t id, int classes, std::uint64_t per_class) {
  TensorStatsRecord r;
  r.tensor_id = id;
  r.has_stats = false;
  r.label_counts = LabelCounts{std::vector<std::uint64_t>(classes, per_class), 0};
  return r;
}

// A driver with the loss and the step's labels ("labels", collection labels).
struct LabelledLossDriver {
  explicit LabelledLossDriver(const RuleSpec& spec, int label_classes)
      : loss(spec), classes(label_classes) {
    labels = loss.d.catalog.Add("labels", {"labels"});
    loss.d.catalog.infos[labels].dtype = DType::kInt64;
  }
  // TRAIN steps from 0 with a flat noisy loss at `level`; the steps that fired.
  Steps Flat(double level, std::int64_t steps = 205, bool train_labels = true) {
    Steps fired;
    for (std::int64_t s = 0; s < steps; ++s) {
      std::vector<TensorStatsRecord> records;
      if (train_labels) records.push_back(UniformLabels(labels, classes, 3));
      for (const Finding& f :
           loss.d.Step(Key(s, Mode::kTrain, s), {{loss.loss, level + Noise(s, 0.05 * level), 0.0}},
                       records)) {
        fired.push_back(f.step.global_step);
        found.push_back(f);
      }
    }
    return fired;
  }
  LossDriver loss;
  std::uint32_t labels = 0;
  int classes = 0;
  std::vector<Finding> found;  // what Flat() fired
};

TEST(LossNotDecreasingTest, ALossThatBeganBelowItsLabelsChanceLevelIsNotJudged) {
  // 10 balanced classes: chance = ln 10 = 2.30 nats. A model resumed at 0.2
  // sits on its plateau: not a finding, and the summary says why.
  LabelledLossDriver resumed(Spec("loss_not_decreasing"), 10);
  EXPECT_EQ(resumed.Flat(0.2, 300), Steps{});
  const std::string why = resumed.loss.d.rule().Diagnostics();
  EXPECT_NE(why.find("loss 'loss' (worker 0, TRAIN) began learned"), std::string::npos) << why;
  EXPECT_NE(why.find("2.30259 nats"), std::string::npos) << why;
  // Shuffled labels: at chance (and a little above, as a fresh network starts).
  LabelledLossDriver shuffled(Spec("loss_not_decreasing"), 10);
  EXPECT_EQ(shuffled.Flat(2.35).size(), 6u);
  EXPECT_EQ(shuffled.loss.d.rule().Diagnostics(), "");
  // 0.8 x chance is above 0.75 x chance: judged, and flat, so a finding.
  LabelledLossDriver barely(Spec("loss_not_decreasing"), 10);
  EXPECT_EQ(barely.Flat(0.8 * std::log(10.0)).size(), 6u);
  // Two classes: chance ln 2 = 0.69; a flat 0.5 is above 0.75 x 0.69.
  LabelledLossDriver binary(Spec("loss_not_decreasing"), 2);
  EXPECT_EQ(binary.Flat(0.6).size(), 6u);
  LabelledLossDriver binary_learned(Spec("loss_not_decreasing"), 2);
  EXPECT_EQ(binary_learned.Flat(0.3), Steps{});
  // chance_fraction 0 turns the chance level off; so does baseline previous.
  LabelledLossDriver off(Spec("loss_not_decreasing", {{"chance_fraction", "0"}}), 10);
  EXPECT_EQ(off.Flat(0.2).size(), 6u);
  // Labels in EVAL steps only, or of one class, give no chance level.
  LabelledLossDriver eval_labels(Spec("loss_not_decreasing"), 10);
  for (std::int64_t s = 0; s < 45; ++s) {
    eval_labels.loss.d.Step(Key(1000 + s, Mode::kEval, s), {},
                            {UniformLabels(eval_labels.labels, 10, 3)});
  }
  EXPECT_EQ(eval_labels.Flat(0.2, 205, false).size(), 6u);
  LabelledLossDriver one_class(Spec("loss_not_decreasing"), 1);
  EXPECT_EQ(one_class.Flat(0.2).size(), 6u);
  // NaN is still a finding on a series that began learned.
  LabelledLossDriver nan(Spec("loss_not_decreasing"), 10);
  nan.Flat(0.2, 210);
  EXPECT_EQ(nan.loss.d.Step(Key(210, Mode::kTrain, 210), {{nan.loss.loss, NAN, 0.0}}).size(), 1u);
}

TEST(LossNotDecreasingTest, ItStopsTrainingOnlyWhenTheLabelsShowItBeganAtChance) {
  // Labels at chance: a fresh network that learns nothing keeps the rule's
  // severity (critical by default: the run stops) once its loss has been
  // flat for stop_horizon (1,000) steps; before that it is an error, since
  // some networks sit at chance for hundreds of steps before they learn.
  LabelledLossDriver fresh(Spec("loss_not_decreasing"), 10);
  ASSERT_EQ(fresh.Flat(2.35, 1005).size(), 806u);  // steps 199 to 1004
  for (const Finding& f : fresh.found) {
    const bool stops = f.step.global_step >= 999;
    EXPECT_EQ(f.severity, stops ? Severity::kCritical : Severity::kError) << f.step.global_step;
    EXPECT_EQ(f.message.find("does not stop training") == std::string::npos, stops) << f.message;
  }
  EXPECT_NE(fresh.found[0].message.find("plateau at the chance level"), std::string::npos)
      << fresh.found[0].message;
  EXPECT_NE(fresh.found[0].message.find("stop_horizon 1000"), std::string::npos);
  LabelledLossDriver sooner(Spec("loss_not_decreasing", {{"stop_horizon", "200"}}), 10);
  ASSERT_EQ(sooner.Flat(2.35).size(), 6u);
  EXPECT_EQ(sooner.found[0].severity, Severity::kCritical);
  EXPECT_EQ(sooner.found[0].message.find("does not stop training"), std::string::npos);
  // Without labels the same series gets unknown_start_severity.
  LabelledLossDriver unlabelled(Spec("loss_not_decreasing"), 10);
  ASSERT_EQ(unlabelled.Flat(2.35, 205, false).size(), 6u);
  EXPECT_EQ(unlabelled.found[0].severity, Severity::kError);
  LabelledLossDriver stops(
      Spec("loss_not_decreasing", {{"unknown_start_severity", "critical"}, {"stop_horizon", "1"}}),
      10);
  ASSERT_EQ(stops.Flat(2.35, 205, false).size(), 6u);
  EXPECT_EQ(stops.found[0].severity, Severity::kCritical);
  // The cap never raises a severity the user lowered.
  RuleSpec warning = Spec("loss_not_decreasing", {{"unknown_start_severity", "critical"}});
  warning.severity = Severity::kWarning;
  LabelledLossDriver low(warning, 10);
  ASSERT_EQ(low.Flat(2.35, 205, false).size(), 6u);
  EXPECT_EQ(low.found[0].severity, Severity::kWarning);
  // A NaN loss is critical whatever the start.
  EXPECT_EQ(unlabelled.loss.d.Step(Key(205, Mode::kTrain, 205), {{unlabelled.loss.loss, NAN, 0.0}})
                .at(0)
                .severity,
            Severity::kCritical);
  const Status bad =
      MakeRule(Spec("loss_not_decreasing", {{"unknown_start_severity", "stop"}})).status();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("unknown_start_severity"), std::string::npos) << bad.message();
  const Status never = MakeRule(Spec("loss_not_decreasing", {{"stop_horizon", "0"}})).status();
  EXPECT_EQ(never.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(never.message().find("stop_horizon"), std::string::npos) << never.message();
}

TEST(LossNotDecreasingTest, TheLabelsEntropyIsTheirFrequenciesChanceLevel) {
  // 90% / 10%: entropy 0.325 nats. A flat loss at 0.3 is what predicting the
  // frequencies gives (learned nothing): judged. At 0.2 it is below 0.75 x 0.325.
  const double h = -(0.9 * std::log(0.9) + 0.1 * std::log(0.1));
  for (const double level : {0.3, 0.2}) {
    LossDriver d(Spec("loss_not_decreasing"));
    const auto labels = d.d.catalog.Add("train_labels", {});  // by labels_regex ".*labels"
    d.d.catalog.infos[labels].dtype = DType::kInt32;
    Steps fired;
    for (std::int64_t s = 0; s < 205; ++s) {
      TensorStatsRecord r = UniformLabels(labels, 2, 0);
      r.label_counts->counts = {9, 1};
      for (const Finding& f :
           d.d.Step(Key(s, Mode::kTrain, s), {{d.loss, level + Noise(s, 0.01), 0.0}}, {r})) {
        fired.push_back(f.step.global_step);
      }
    }
    EXPECT_EQ(fired.size(), level < 0.75 * h ? 0u : 6u) << level;
  }
}

TEST(LossNotDecreasingTest, ARunResumedAtALaterStepIsNotJudgedAgainstItsStart) {
  LossDriver resumed(Spec("loss_not_decreasing"));
  std::vector<std::pair<std::int64_t, double>> points;
  for (std::int64_t s = 5000; s < 5300; ++s) points.emplace_back(s, 0.3 + Noise(s, 0.05));
  EXPECT_EQ(resumed.Run(points, Mode::kTrain), Steps{});
  const std::string why = resumed.d.rule().Diagnostics();
  EXPECT_NE(why.find("began at TRAIN step 5000 (a run resumed from a checkpoint)"),
            std::string::npos)
      << why;
  // A loss saved every 10th step from step 9 begins within the windows' span
  // (2 x 20 x 10 steps): a fresh run, judged from its 40th value (past the
  // horizon of 200 steps).
  LossDriver sparse(Spec("loss_not_decreasing"));
  std::vector<std::pair<std::int64_t, double>> every10;
  for (std::int64_t s = 9; s < 500; s += 10) every10.emplace_back(s, 1.0);
  EXPECT_EQ(sparse.Run(every10, Mode::kTrain).size(), 11u);  // the 40th value on
  EXPECT_EQ(sparse.d.rule().Diagnostics(), "");
}

TEST(LossNotDecreasingTest, TheTrainingLabelsGetLabelCounts) {
  auto rule = MakeRuleOrDie(Spec("loss_not_decreasing"));
  TensorInfo labels;
  labels.name = "labels";
  labels.dtype = DType::kInt64;
  const CaptureNeeds n = rule->Needs(labels);
  EXPECT_TRUE(n.label_counts);
  EXPECT_EQ(n.modes, CaptureNeeds::TrainModes());
  TensorInfo in_collection = labels;
  in_collection.name = "y";
  in_collection.collections = {"labels"};
  EXPECT_TRUE(rule->Needs(in_collection).label_counts);
  TensorInfo floats = labels;
  floats.dtype = DType::kFloat32;
  EXPECT_FALSE(rule->Needs(floats).label_counts);
  TensorInfo other = labels;
  other.name = "fc1.weight";
  EXPECT_FALSE(rule->Needs(other).label_counts);
  auto off = MakeRuleOrDie(Spec("loss_not_decreasing", {{"chance_fraction", "0"}}));
  EXPECT_FALSE(off->Needs(labels).label_counts);
  auto smdebug = MakeRuleOrDie(Spec("loss_not_decreasing", {{"num_steps", "10"}}));
  EXPECT_FALSE(smdebug->Needs(labels).label_counts);
}

// ---- smdebug's judgement (baseline "previous", chosen by num_steps)

TEST(LossNotDecreasingTest, SmdebugRemovedTestFiresAtStep12) {
  // losses 0.3, 0.33, 0.31, 0.30, 0.28 at 0, 4, 8, 12, 16; num_steps 10:
  // the first check is at 12 (>= 0 + 10) against step 0: 0.30 is not < 0.3.
  LossDriver d(Spec("loss_not_decreasing", {{"num_steps", "10"}}));
  EXPECT_EQ(d.Run({{0, 0.3}, {4, 0.33}, {8, 0.31}, {12, 0.30}, {16, 0.28}}), Steps{12});
  const Finding& f = d.findings[0];
  EXPECT_EQ(f.tensor, "loss");
  EXPECT_EQ(f.rule, "loss_not_decreasing");
  EXPECT_DOUBLE_EQ(Value(f, "base_step"), 0);
  EXPECT_DOUBLE_EQ(Value(f, "base_loss"), 0.3);
  EXPECT_DOUBLE_EQ(Value(f, "loss"), 0.30);
}

TEST(LossNotDecreasingTest, DiffPercentNeedsALargerDrop) {
  // smdebug: diff_percent 20, 0.2 then 0.42 fires at the check step.
  LossDriver up(Spec("loss_not_decreasing", {{"diff_percent", "20"}, {"num_steps", "4"}}));
  EXPECT_EQ(up.Run({{20, 0.2}, {24, 0.42}}), Steps{24});
  // A 15% drop is not enough for 20%; a 25% drop is.
  LossDriver small(Spec("loss_not_decreasing", {{"diff_percent", "20"}, {"num_steps", "4"}}));
  EXPECT_EQ(small.Run({{0, 0.2}, {4, 0.17}}), Steps{4});
  LossDriver big(Spec("loss_not_decreasing", {{"diff_percent", "20"}, {"num_steps", "4"}}));
  EXPECT_EQ(big.Run({{0, 0.2}, {4, 0.15}}), Steps{});
}

TEST(LossNotDecreasingTest, ChecksEveryNumStepsAgainstTheNewestStepThatFarBack) {
  // smdebug's example: saved every 3, num_steps 10: 21 is compared with 9,
  // the next check is 33 (31 and 32 are not saved) against 21.
  LossDriver d(Spec("loss_not_decreasing", {{"num_steps", "10"}}));
  std::vector<std::pair<std::int64_t, double>> points;
  for (std::int64_t s = 9; s <= 40; s += 3) points.emplace_back(s, 1.0);
  EXPECT_EQ(d.Run(points), (Steps{21, 33}));
  EXPECT_DOUBLE_EQ(Value(d.findings[0], "base_step"), 9);
  EXPECT_DOUBLE_EQ(Value(d.findings[1], "base_step"), 21);
}

TEST(LossNotDecreasingTest, DecreasingLossNeverFires) {
  LossDriver d(Spec("loss_not_decreasing", {{"num_steps", "2"}}));
  std::vector<std::pair<std::int64_t, double>> points;
  for (std::int64_t s = 0; s < 50; ++s) points.emplace_back(s, 10.0 - 0.1 * s);
  EXPECT_EQ(d.Run(points), Steps{});
  EXPECT_EQ(d.d.rule().Diagnostics(), "");
}

TEST(LossNotDecreasingTest, NonFiniteLossFires) {
  LossDriver d(Spec("loss_not_decreasing", {{"num_steps", "1"}}));
  EXPECT_EQ(d.Run({{0, 2.0}, {1, 1.0}, {2, NAN}}), Steps{2});
  EXPECT_NE(d.findings[0].message.find("is nan"), std::string::npos) << d.findings[0].message;
  EXPECT_EQ(d.findings[0].severity, Severity::kCritical);
}

TEST(LossNotDecreasingTest, ModesAreSeparateSeriesOnModeSteps) {
  LossDriver d(Spec("loss_not_decreasing", {{"num_steps", "2"}}));
  // Global steps interleave TRAIN (decreasing) and EVAL (flat) losses.
  std::vector<Finding> all;
  for (std::int64_t i = 0; i < 6; ++i) {
    for (auto& f : d.At(2 * i, 1.0 - 0.1 * i, Mode::kTrain, i)) all.push_back(f);
    for (auto& f : d.At(2 * i + 1, 0.5, Mode::kEval, i)) all.push_back(f);
  }
  // EVAL mode steps 0..5, checks at 2 (vs 0) and 4 (vs 2): global 5 and 9.
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].step.mode, Mode::kEval);
  EXPECT_EQ(all[0].step.mode_step, 2);
  EXPECT_EQ(all[0].step.global_step, 5);
  EXPECT_EQ(all[1].step.mode_step, 4);
}

TEST(LossNotDecreasingTest, ModeParameterSelectsOneMode) {
  LossDriver d(Spec("loss_not_decreasing", {{"num_steps", "1"}, {"mode", "TRAIN"}}));
  std::vector<Finding> all;
  for (std::int64_t i = 0; i < 4; ++i) {
    for (auto& f : d.At(2 * i, 1.0, Mode::kEval, i)) all.push_back(f);
  }
  EXPECT_TRUE(all.empty());
  EXPECT_FALSE(MakeRule(Spec("loss_not_decreasing", {{"mode", "TRAINING"}})).ok());
  const Status bad = MakeRule(Spec("loss_not_decreasing", {{"mode", "TRAINING"}})).status();
  EXPECT_NE(bad.message().find("mode"), std::string::npos) << bad.message();
}

TEST(LossNotDecreasingTest, LossTensorsUseTheirMean) {
  Driver d(MakeRuleOrDie(Spec("loss_not_decreasing", {{"num_steps", "1"}})));
  const auto loss = d.catalog.Add("CrossEntropyLoss_output_0", {"losses"});
  const auto other = d.catalog.Add("fc1.weight", {"weights"});
  EXPECT_TRUE(
      d.Step(Key(0), {},
             {StatsRecord(loss, ConstantStats(2.0)), StatsRecord(other, ConstantStats(1.0))})
          .empty());
  const auto f = d.Step(
      Key(1), {}, {StatsRecord(loss, ConstantStats(2.5)), StatsRecord(other, ConstantStats(0.5))});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].tensor, "CrossEntropyLoss_output_0");
  EXPECT_DOUBLE_EQ(Value(f[0], "loss"), 2.5);
}

TEST(LossNotDecreasingTest, ARunWithoutLossesSaysSoInsteadOfPassing) {
  Driver d(MakeRuleOrDie(Spec("loss_not_decreasing")));
  const auto w = d.catalog.Add("fc1.weight", {"weights"});
  const auto acc = d.catalog.Add("accuracy", {"scalars"}, TensorKind::kScalar);
  EXPECT_EQ(d.rule().Diagnostics(), "");  // nothing evaluated yet
  for (int s = 0; s < 30; ++s) {
    EXPECT_TRUE(d.Step(Key(s), {{acc, 0.5, 0.0}}, {StatsRecord(w, ConstantStats(1.0))}).empty());
  }
  const std::string diag = d.rule().Diagnostics();
  EXPECT_NE(diag.find("no loss found"), std::string::npos) << diag;
  EXPECT_NE(diag.find("loss_not_decreasing"), std::string::npos) << diag;
}

TEST(LossNotDecreasingTest, SelectionWithoutTheLossesCollection) {
  Driver d(MakeRuleOrDie(
      Spec("loss_not_decreasing", {{"num_steps", "1"}, {"use_losses_collection", "false"}})));
  // use_losses_collection=false and no selection: the scalar "loss" is ignored.
  const auto loss = d.catalog.Add("loss", {"losses"}, TensorKind::kScalar);
  d.Step(Key(0), {{loss, 1.0, 0.0}});
  EXPECT_TRUE(d.Step(Key(1), {{loss, 2.0, 0.0}}).empty());
  RuleSpec spec = Spec("loss_not_decreasing", {{"num_steps", "1"}});
  spec.tensor_regex = "^perplexity$";
  Driver p(MakeRuleOrDie(spec));
  const auto ppl = p.catalog.Add("perplexity", {}, TensorKind::kScalar);
  p.Step(Key(0), {{ppl, 10.0, 0.0}});
  EXPECT_EQ(p.Step(Key(1), {{ppl, 11.0, 0.0}}).size(), 1u);
}

TEST(LossNotDecreasingTest, IncreaseThresholdFiresBetweenChecks) {
  LossDriver d(
      Spec("loss_not_decreasing", {{"num_steps", "10"}, {"increase_threshold_percent", "10"}}));
  // 1.0 at 0; 1.05 (+5%) is allowed; 1.2 (+20%) fires once; the check at 10 again.
  EXPECT_EQ(d.Run({{0, 1.0}, {1, 1.05}, {2, 1.2}, {3, 1.3}, {10, 0.5}}), Steps{2});
  EXPECT_NEAR(Value(d.findings[0], "increase_percent"), 20.0, 1e-9);
}

TEST(LossNotDecreasingTest, BadParametersAreNamed) {
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"num_steps", "ten"}, {"diff_percent", "-1"}, {"threshhold", "1"}}) {
    const Status s = MakeRule(Spec("loss_not_decreasing", {{key, value}})).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << key;
    EXPECT_NE(s.message().find(key), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace tstat::rules::runtest
