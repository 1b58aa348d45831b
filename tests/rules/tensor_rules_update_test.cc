// Tests of the tensor rules about training updates and initialization:
// unchanged_tensor, weight_update_ratio (both from DeltaStats) and
// poor_weight_initialization.
#include <gtest/gtest.h>

#include "tests/rules/tensor_rules_test_util.h"

namespace tstat::rules::test {
namespace {

// Steps of a weight: record s carries the delta against record s-1.
class WeightSeries {
 public:
  explicit WeightSeries(std::uint32_t id) : id_(id) {}
  TensorStatsRecord Next(const std::vector<double>& w, bool with_delta = true) {
    TensorStatsRecord r = RecordOf(id_, w, {}, {}, with_delta && !prev_.empty() ? &prev_ : nullptr);
    prev_ = w;
    return r;
  }

 private:
  std::uint32_t id_;
  std::vector<double> prev_;
};

// --------------------------------------------------------- unchanged_tensor
class UnchangedTensorTest : public ::testing::Test {
 protected:
  UnchangedTensorTest() { cat_.Add(0, "fc.weight", {"weights"}); }
  MapCatalog cat_;
};

TEST_F(UnchangedTensorTest, IdenticalAtThreeSavedStepsFiresAtTheThird) {
  auto rule = MustCreate("unchanged_tensor");
  WeightSeries w(0);
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(0, {w.Next({1, 2, 3})})).empty());
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(10, {w.Next({1, 2, 3})})).empty());
  auto f = Feed(rule.get(), cat_, Batch(20, {w.Next({1, 2, 3 + 1e-9})}));  // within tolerance
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].step.global_step, 20);
  EXPECT_DOUBLE_EQ(Value(f[0], "unchanged_steps"), 3);
  EXPECT_DOUBLE_EQ(Value(f[0], "num_steps"), 3);
  EXPECT_TRUE(Contains(f[0].message, "since step 0")) << f[0].message;
  EXPECT_EQ(Feed(rule.get(), cat_, Batch(30, {w.Next({1, 2, 3})})).size(), 1u);
  // A change starts over.
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(40, {w.Next({1, 2, 4})})).empty());
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(50, {w.Next({1, 2, 4})})).empty());
  EXPECT_EQ(Feed(rule.get(), cat_, Batch(60, {w.Next({1, 2, 4})})).size(), 1u);
  EXPECT_TRUE(rule->Diagnostics().empty()) << rule->Diagnostics();
}

TEST_F(UnchangedTensorTest, TrainingWeightsAndEvalStepsDoNotFire) {
  auto rule = MustCreate("unchanged_tensor", {{{"num_steps", "2"}}, {}, "", {}});
  WeightSeries w(0);
  for (int s = 0; s < 5; ++s) {
    EXPECT_TRUE(Feed(rule.get(), cat_, Batch(s, {w.Next({1.0 + s * 1e-3, 2})})).empty());
  }
  // EVAL steps (weights constant) are not judged unless modes say so.
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(5, {w.Next({1, 2})}, Mode::kEval)).empty());
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(6, {w.Next({1, 2})}, Mode::kEval)).empty());
}

TEST_F(UnchangedTensorTest, NanNeedsEqualNan) {
  for (const bool equal_nan : {false, true}) {
    auto rule =
        MustCreate("unchanged_tensor", {{{"equal_nan", equal_nan ? "true" : "false"}}, {}, "", {}});
    WeightSeries w(0);
    std::size_t n = 0;
    for (int s = 0; s < 3; ++s) n += Feed(rule.get(), cat_, Batch(s, {w.Next({1, NAN})})).size();
    EXPECT_EQ(n, equal_nan ? 1u : 0u);
  }
}

TEST_F(UnchangedTensorTest, WithoutDeltaItSaysSoInsteadOfGuessing) {
  auto rule = MustCreate("unchanged_tensor");
  WeightSeries w(0);
  for (int s = 0; s < 5; ++s) {
    EXPECT_TRUE(Feed(rule.get(), cat_, Batch(s, {w.Next({1, 2}, /*with_delta=*/false)})).empty());
  }
  EXPECT_TRUE(Contains(rule->Diagnostics(), "delta")) << rule->Diagnostics();
  EXPECT_TRUE(Contains(rule->Diagnostics(), "fc.weight")) << rule->Diagnostics();
}

TEST_F(UnchangedTensorTest, Parameters) {
  EXPECT_TRUE(
      Create("unchanged_tensor", {{{"rtol", "1e-05"}, {"atol", "1e-08"}}, {}, "", {}}).ok());
  auto r = Create("unchanged_tensor", {{{"rtol", "1e-3"}}, {}, "", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "rtol")) << r.status().message();
  r = Create("unchanged_tensor", {{{"num_steps", "1"}}, {}, "", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "num_steps")) << r.status().message();
}

// ------------------------------------------------------ weight_update_ratio
class WeightUpdateRatioTest : public ::testing::Test {
 protected:
  WeightUpdateRatioTest() { cat_.Add(0, "fc.weight", {"weights"}); }
  MapCatalog cat_;
};

TEST_F(WeightUpdateRatioTest, HealthyUpdatesDoNotFire) {
  auto rule = MustCreate("weight_update_ratio");
  WeightSeries w(0);
  for (int s = 0; s < 5; ++s) {
    EXPECT_TRUE(Feed(rule.get(), cat_, Batch(s, {w.Next({3.0 + s * 1e-3, 4.0})})).empty());
  }
  EXPECT_TRUE(rule->Diagnostics().empty()) << rule->Diagnostics();
}

TEST_F(WeightUpdateRatioTest, TinyUpdatesFireAtTheStep) {
  auto rule = MustCreate("weight_update_ratio");
  WeightSeries w(0);
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(0, {w.Next({3, 4})})).empty());
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(1, {w.Next({3.01, 4})})).empty());
  auto f = Feed(rule.get(), cat_, Batch(2, {w.Next({3.01 + 1e-10, 4})}));  // lr ~ 1e-10
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].step.global_step, 2);
  EXPECT_LT(Value(f[0], "small_ratio"), 1e-8);
  EXPECT_DOUBLE_EQ(Value(f[0], "small_threshold"), 1e-8);
  EXPECT_TRUE(Contains(f[0].message, "too small")) << f[0].message;
  EXPECT_TRUE(f[0].lower_is_worse);
  EXPECT_EQ(f[0].severity, Severity::kError);
}

TEST_F(WeightUpdateRatioTest, LargeUpdatesFire) {
  auto rule = MustCreate("weight_update_ratio", {{{"large_threshold", "0.4"}}, {}, "", {}});
  WeightSeries w(0);
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(0, {w.Next({3, 4})})).empty());
  // Over the weight before the update: |dw| = 5, |w_prev| = 5.
  auto f = Feed(rule.get(), cat_, Batch(1, {w.Next({6, 8})}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NEAR(Value(f[0], "large_ratio"), 1.0, 1e-9);
  EXPECT_DOUBLE_EQ(Value(f[0], "large_threshold"), 0.4);
  EXPECT_TRUE(std::isnan(Value(f[0], "small_threshold")));
  EXPECT_EQ(f[0].severity, Severity::kCritical);  // a destroyed weight wastes the run
  EXPECT_EQ(f[0].confirm_steps, 2);
  EXPECT_FALSE(f[0].lower_is_worse);
  f = Feed(rule.get(), cat_, Batch(2, {w.Next({60, 80})}));  // |dw| = 90, |w_prev| = 10
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NEAR(Value(f[0], "large_ratio"), 9.0, 1e-9);
  EXPECT_TRUE(Contains(f[0].message, "too large")) << f[0].message;
}

TEST_F(WeightUpdateRatioTest, AZeroInitializedWeightIsNotTooLargeAndAFrozenOneNotTooSmall) {
  MapCatalog cat;
  cat.Add(0, "lora_B.weight", {"weights"}, {2});
  cat.Add(1, "frozen.weight", {"weights"}, {2});
  cat.Add(2, "gradient/frozen.weight", {"gradients"}, {2});
  // Judged at once (not after 64 steps) though no weight changes at step 2.
  auto rule = MustCreate("weight_update_ratio", {{{"steps_without_update", "1"}}, {}, "", {}});
  WeightSeries b(0), frozen(1);
  EXPECT_TRUE(Feed(rule.get(), cat, Batch(0, {b.Next({0, 0}), frozen.Next({1, 1})})).empty());
  // B starts at zero: any first update is "infinitely" large, and normal.
  // The frozen weight has a registered gradient that is not captured.
  EXPECT_TRUE(Feed(rule.get(), cat, Batch(1, {b.Next({0.1, 0.1}), frozen.Next({1, 1})})).empty());
  // The same unchanged weight with its gradient captured is judged: ratio 0.
  auto f = Feed(rule.get(), cat,
                Batch(2, {b.Next({0.1, 0.1}), frozen.Next({1, 1}), RecordOf(2, {0.0, 0.0})}));
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].tensor, "lora_B.weight");
  EXPECT_EQ(f[1].tensor, "frozen.weight");
}

TEST_F(WeightUpdateRatioTest, NumStepsSkipsDeltasSpanningLongGaps) {
  auto rule = MustCreate("weight_update_ratio",
                         {{{"num_steps", "2"}, {"steps_without_update", "0"}}, {}, "", {}});
  WeightSeries w(0);
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(0, {w.Next({3, 4})})).empty());
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(5, {w.Next({3, 4})})).empty());   // gap 5 > 2
  EXPECT_EQ(Feed(rule.get(), cat_, Batch(7, {w.Next({3, 4})})).size(), 1u);  // gap 2, ratio 0
}

TEST_F(WeightUpdateRatioTest, AWeightLeftOutOfTheOptimizerIsFoundAtOnce) {
  MapCatalog cat;
  cat.Add(0, "trained.weight", {"weights"}, {2});
  cat.Add(1, "forgotten.weight", {"weights"}, {2});
  auto rule = MustCreate("weight_update_ratio");
  WeightSeries t(0), forgotten(1);
  EXPECT_TRUE(Feed(rule.get(), cat, Batch(0, {t.Next({3, 4}), forgotten.Next({1, 1})})).empty());
  auto f = Feed(rule.get(), cat, Batch(1, {t.Next({3.01, 4}), forgotten.Next({1, 1})}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].tensor, "forgotten.weight");
  EXPECT_DOUBLE_EQ(Value(f[0], "small_ratio"), 0.0);
  EXPECT_TRUE(Contains(f[0].message, "while other parameters did: it is not trained"))
      << f[0].message;
  // Every weight unchanged while a bias changes (dead units: no gradient
  // reaches the weights): the optimizer steps, so also at once.
  MapCatalog dead;
  dead.Add(0, "hidden.weight", {"weights"}, {2});
  dead.Add(1, "out.bias", {"biases"}, {2});
  auto r2 = MustCreate("weight_update_ratio");
  TensorInfo out_bias;
  out_bias.id = 1;
  out_bias.name = "out.bias";
  out_bias.collections = {"biases"};
  EXPECT_TRUE(r2->Needs(out_bias).delta);  // read, not judged
  WeightSeries h(0), bias(1);
  EXPECT_TRUE(Feed(r2.get(), dead, Batch(0, {h.Next({1, 2}), bias.Next({0.1, 0.2})})).empty());
  f = Feed(r2.get(), dead, Batch(1, {h.Next({1, 2}), bias.Next({0.1, 0.3})}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].tensor, "hidden.weight");
  // Nor bias nor weight changes: no optimizer step, not judged yet.
  EXPECT_TRUE(Feed(r2.get(), dead, Batch(2, {h.Next({1, 2}), bias.Next({0.1, 0.3})})).empty());
}

TEST_F(WeightUpdateRatioTest, GradientAccumulationIsNotAFindingAndNoStepAtAllIs) {
  MapCatalog cat;
  cat.Add(0, "a.weight", {"weights"}, {2});
  cat.Add(1, "b.weight", {"weights"}, {2});
  auto rule = MustCreate("weight_update_ratio");
  WeightSeries a(0), b(1);
  // The optimizer steps every 8th micro-batch: 7 steps in a row change nothing.
  double x = 3;
  for (int s = 0; s < 400; ++s) {
    if (s % 8 == 0) x += 0.01;
    EXPECT_TRUE(Feed(rule.get(), cat, Batch(s, {a.Next({x, 4}), b.Next({x, 1})})).empty()) << s;
  }
  // Then it never steps again (a learning rate of 0): found once 64 steps in
  // a row changed no weight, for each weight.
  std::int64_t first = -1;
  for (int s = 400; s < 480 && first < 0; ++s) {
    auto f = Feed(rule.get(), cat, Batch(s, {a.Next({x, 4}), b.Next({x, 1})}));
    if (f.empty()) continue;
    first = s;
    ASSERT_EQ(f.size(), 2u);
    EXPECT_TRUE(Contains(f[0].message, "no weight has changed for 64 steps")) << f[0].message;
  }
  // The last change was at step 392: steps 393-456 are the 64 without one.
  EXPECT_EQ(first, 456);
  EXPECT_FALSE(Create("weight_update_ratio", {{{"steps_without_update", "-1"}}, {}, "", {}}).ok());
}

TEST_F(WeightUpdateRatioTest, UpdatesFadingWithTheScheduleAreNotJudgedAndADropIs) {
  auto rule = MustCreate("weight_update_ratio");
  WeightSeries w(0);
  double x = 3;  // |w| ~ 5: the ratio is about step / 5
  auto step_by = [&](int s, double d) {
    x += d;
    return Feed(rule.get(), cat_, Batch(s, {w.Next({x, 4})}));
  };
  EXPECT_TRUE(step_by(0, 0).empty());
  // A learning rate annealed towards 0 (OneCycle's end): the update shrinks
  // by 0.7 a step, from 5e-3 to below 1e-14, through small_threshold.
  double d = 5e-3;
  for (int s = 1; s < 80; ++s, d *= 0.7) EXPECT_TRUE(step_by(s, d).empty()) << s << " " << d;
  // Recovered (a new cycle), then a learning rate that drops at once by 1e8.
  for (int s = 80; s < 85; ++s) EXPECT_TRUE(step_by(s, 5e-3).empty()) << s;
  auto f = step_by(85, 5e-11);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_LT(Value(f[0], "small_ratio"), 1e-8);
  EXPECT_EQ(step_by(86, 4e-11).size(), 1u);  // and it stays judged while small
  // Off: the faded updates are judged too.
  auto all = MustCreate("weight_update_ratio", {{{"anneal_factor", "0"}}, {}, "", {}});
  WeightSeries w2(0);
  x = 3;
  d = 5e-3;
  int found = 0;
  EXPECT_TRUE(Feed(all.get(), cat_, Batch(0, {w2.Next({x, 4})})).empty());
  for (int s = 1; s < 80; ++s, d *= 0.7) {
    x += d;
    found += static_cast<int>(Feed(all.get(), cat_, Batch(s, {w2.Next({x, 4})})).size());
  }
  EXPECT_GT(found, 20);
}

TEST_F(WeightUpdateRatioTest, NeedsDeltaAndValidParameters) {
  auto rule = MustCreate("weight_update_ratio");
  WeightSeries w(0);
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(0, {w.Next({3, 4}, false)})).empty());
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(1, {w.Next({3, 4}, false)})).empty());
  EXPECT_TRUE(Contains(rule->Diagnostics(), "needs delta")) << rule->Diagnostics();
  auto r = Create("weight_update_ratio", {{{"large_threshold", "1e-9"}}, {}, "", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "large_threshold")) << r.status().message();
  r = Create("weight_update_ratio", {{{"epsilon", "x"}}, {}, "", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "epsilon")) << r.status().message();
}

// ----------------------------------------------- poor_weight_initialization
class PoorWeightInitializationTest : public ::testing::Test {
 protected:
  PoorWeightInitializationTest() {
    cat_.Add(0, "layer1_relu_input", {});
    cat_.Add(1, "layer2_relu_input", {});
    cat_.Add(2, "gradient/layer1.weight", {"gradients"});
    cat_.Add(3, "loss", {"losses"}, {}, TensorKind::kScalar);
  }
  // Activation inputs with stds a and b; a healthy gradient.
  StepBatch Step(std::int64_t s, double a, double b, double g = 0.1) {
    return Batch(s, {RecordOf(0, {-a, a}), RecordOf(1, {-b, b}), RecordOf(2, {-g, 0, g})});
  }
  MapCatalog cat_;
};

TEST_F(PoorWeightInitializationTest, LayerVarianceRatioIsJudgedAtTheFirstStepOnly) {
  auto rule = MustCreate("poor_weight_initialization");
  auto f = Feed(rule.get(), cat_, Step(0, 1, 4));  // 16 > 15
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].step.global_step, 0);
  EXPECT_EQ(f[0].tensor, "layer2_relu_input");
  EXPECT_DOUBLE_EQ(Value(f[0], "variance_ratio"), 16);
  EXPECT_DOUBLE_EQ(Value(f[0], "max_variance"), 16);
  EXPECT_DOUBLE_EQ(Value(f[0], "min_variance"), 1);
  EXPECT_DOUBLE_EQ(Value(f[0], "threshold"), 15);
  EXPECT_TRUE(Contains(f[0].message, "from one layer to the next")) << f[0].message;
  // Later steps measure the optimizer (a diverging step 1), not the start.
  EXPECT_TRUE(Feed(rule.get(), cat_, Step(1, 1, 100)).empty());
  EXPECT_TRUE(rule->Diagnostics().empty()) << rule->Diagnostics();

  // 12.25x from one layer to the next: within what default initializers do.
  auto healthy_start = MustCreate("poor_weight_initialization");
  EXPECT_TRUE(Feed(healthy_start.get(), cat_, Step(0, 1, 3.5)).empty());
  EXPECT_TRUE(Feed(healthy_start.get(), cat_, Step(1, 1, 6)).empty());

  // Steps numbered from 1: the first one seen is the start.
  auto from_one = MustCreate("poor_weight_initialization");
  EXPECT_EQ(Feed(from_one.get(), cat_, Step(1, 1, 4)).size(), 1u);

  // A run resumed past `steps` is not judged.
  auto resumed = MustCreate("poor_weight_initialization", {{{"steps", "3"}}, {}, "", {}});
  EXPECT_TRUE(Feed(resumed.get(), cat_, Step(3, 1, 100)).empty());
}

// Four nonlinearity inputs; records in the order given, variances var[i] for
// tensor id order[i].
StepBatch Layers(const std::vector<std::uint32_t>& order, const std::vector<double>& var) {
  std::vector<TensorStatsRecord> records;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const double a = std::sqrt(var[i]);
    records.push_back(RecordOf(order[i], {-a, a}));
  }
  return Batch(0, std::move(records));
}

MapCatalog FourLayers() {
  MapCatalog cat;
  for (std::uint32_t i = 0; i < 4; ++i) cat.Add(i, "net." + std::to_string(i) + ".GELU_input", {});
  return cat;
}

TEST(PoorWeightInitializationLayersTest, ADefaultInitShrinkingEveryLayerIsNotPoor) {
  // PyTorch's default init shrinks each GELU layer's input variance by up to
  // 12x: 1728x from the first to the fourth layer.
  const MapCatalog cat = FourLayers();
  const StepBatch shrink = Layers({0, 1, 2, 3}, {1.0, 1.0 / 12, 1.0 / 144, 1.0 / 1728});
  auto rule = MustCreate("poor_weight_initialization");
  EXPECT_TRUE(Feed(rule.get(), cat, shrink).empty());
  // smdebug's comparison of every layer with every other reports it.
  auto all = MustCreate("poor_weight_initialization", {{{"compare", "all"}}, {}, "", {}});
  auto f = Feed(all.get(), cat, shrink);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NEAR(Value(f[0], "variance_ratio"), 1728, 1e-6);
  EXPECT_DOUBLE_EQ(Value(f[0], "threshold"), 10);
  EXPECT_EQ(f[0].tensor, "net.0.GELU_input");
  EXPECT_TRUE(Contains(f[0].message, "across layers")) << f[0].message;
}

TEST(PoorWeightInitializationLayersTest, ThePairOfLayersIsTheWorstConsecutiveOne) {
  const MapCatalog cat = FourLayers();
  // One layer initialized 10x too wide in std: 100x between layers 1 and 2.
  auto rule = MustCreate("poor_weight_initialization");
  auto f = Feed(rule.get(), cat, Layers({0, 1, 2, 3}, {1.0, 0.5, 50.0, 40.0}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].tensor, "net.2.GELU_input");
  EXPECT_DOUBLE_EQ(Value(f[0], "variance_ratio"), 100);
  EXPECT_TRUE(Contains(f[0].message, "net.1.GELU_input: 0.5")) << f[0].message;
  // Registration order, not the order of the step's records: the
  // neighbours of {1, 0.1, 0.01, 0.001} are 10x apart, whatever the records.
  auto shuffled = MustCreate("poor_weight_initialization");
  EXPECT_TRUE(Feed(shuffled.get(), cat, Layers({0, 3, 1, 2}, {1.0, 0.001, 0.1, 0.01})).empty());
  // A layer whose input is constant (every unit off) is unbounded.
  auto dead = MustCreate("poor_weight_initialization");
  f = Feed(dead.get(), cat, Layers({0, 1, 2, 3}, {1.0, 1.0, 0.0, 0.0}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(std::isinf(Value(f[0], "variance_ratio")));
  EXPECT_TRUE(Contains(f[0].message, "a constant input")) << f[0].message;
}

// A model that calls F.relu between its layers: the hook captures each
// layer's output "fcN_output" and the ReLU's output "fcN.relu_output"; the
// layer outputs that feed a ReLU are its inputs.
MapCatalog FunctionalReluLayers() {
  MapCatalog cat;
  cat.Add(0, "fc1_output", {});
  cat.Add(1, "fc1.relu_output", {});
  cat.Add(2, "fc2_output", {});
  cat.Add(3, "fc2.relu_output", {});
  cat.Add(4, "fc3_output", {});  // the logits: no ReLU after them
  return cat;
}

StepBatch FunctionalStep(double fc1, double fc2, double fc3, bool relu_outputs = true) {
  std::vector<TensorStatsRecord> records;
  const double v[] = {fc1, 0, fc2, 0, fc3};
  for (std::uint32_t id = 0; id < 5; ++id) {
    if (id % 2 == 1 && !relu_outputs) continue;
    const double a = id % 2 == 1 ? std::sqrt(v[id - 1]) : std::sqrt(v[id]);
    records.push_back(
        RecordOf(id, id % 2 == 1 ? std::vector<double>{0, a} : std::vector<double>{-a, a}));
  }
  return Batch(0, std::move(records));
}

TEST(PoorWeightInitializationLayersTest, LayerOutputsFeedingFunctionalReluAreItsInputs) {
  const MapCatalog cat = FunctionalReluLayers();
  // fc2's input variance 32x fc1's (N(0, 1) weights on 64 inputs); the
  // logits' variance, 1000x, is no ReLU's input and is not compared.
  auto rule = MustCreate("poor_weight_initialization");
  auto f = Feed(rule.get(), cat, FunctionalStep(1, 32, 32000));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].tensor, "fc2_output");
  EXPECT_DOUBLE_EQ(Value(f[0], "variance_ratio"), 32);
  EXPECT_TRUE(Contains(f[0].message, "fc1_output: 1")) << f[0].message;
  EXPECT_TRUE(rule->Diagnostics().empty()) << rule->Diagnostics();
  // A healthy start: 6x between the ReLUs' inputs, whatever the logits.
  auto healthy = MustCreate("poor_weight_initialization");
  EXPECT_TRUE(Feed(healthy.get(), cat, FunctionalStep(1, 1.0 / 6, 1000)).empty());
  // Without the ReLUs' outputs the layer outputs are no nonlinearity's
  // inputs: nothing is judged, and the diagnostics say so.
  auto no_relus = MustCreate("poor_weight_initialization");
  EXPECT_TRUE(Feed(no_relus.get(), cat, FunctionalStep(1, 32, 1, false)).empty());
  EXPECT_TRUE(Contains(no_relus->Diagnostics(), "matched no tensor")) << no_relus->Diagnostics();
  // functional_relus false: only activation_inputs_regex selects.
  auto off =
      MustCreate("poor_weight_initialization", {{{"functional_relus", "false"}}, {}, "", {}});
  EXPECT_TRUE(Feed(off.get(), cat, FunctionalStep(1, 32, 1)).empty());
}

// What the rule asks the session to capture: a layer output may feed a
// functional ReLU registered after it.
TEST(PoorWeightInitializationLayersTest, NeedsTheLayerOutputsInTheFirstSteps) {
  auto rule = MustCreate("poor_weight_initialization");
  TensorInfo out;
  out.name = "fc1_output";
  TensorInfo relu_out;
  relu_out.name = "fc1.relu_output";
  TensorInfo weight;
  weight.name = "fc1.weight";
  const CaptureNeeds n = rule->Needs(out);
  EXPECT_TRUE(n.stats);
  EXPECT_TRUE(n.any());
  EXPECT_EQ(n.until_step, 10);
  EXPECT_FALSE(rule->Needs(relu_out).any());
  EXPECT_FALSE(rule->Needs(weight).any());
  auto off =
      MustCreate("poor_weight_initialization", {{{"functional_relus", "false"}}, {}, "", {}});
  EXPECT_FALSE(off->Needs(out).any());
}

TEST_F(PoorWeightInitializationTest, NarrowGradientsOnlyWhenDistributionRangeIsSet) {
  // std of {-g, 0, g} = g*sqrt(2/3); 3.29 * 1e-4 * 0.816 = 2.7e-4 < 0.001.
  auto off = MustCreate("poor_weight_initialization");
  EXPECT_TRUE(Feed(off.get(), cat_, Step(0, 1, 1, 1e-4)).empty());
  EXPECT_TRUE(off->Diagnostics().empty()) << off->Diagnostics();

  auto rule =
      MustCreate("poor_weight_initialization", {{{"distribution_range", "0.001"}}, {}, "", {}});
  // Non-finite gradients are nan_origin's finding, not a narrow start.
  StepBatch nan_step =
      Batch(0, {RecordOf(0, {-1, 1}), RecordOf(1, {-1, 1}), RecordOf(2, {NAN, 0, 0})});
  EXPECT_TRUE(Feed(rule.get(), cat_, nan_step).empty());
  auto f = Feed(rule.get(), cat_, Step(1, 1, 1, 1e-4));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].tensor, "gradient/layer1.weight");
  EXPECT_TRUE(f[0].lower_is_worse);
  EXPECT_NEAR(Value(f[0], "p95_minus_p5"), 2 * 1.6448536269514722 * 1e-4 * std::sqrt(2.0 / 3),
              1e-12);
  EXPECT_TRUE(Contains(f[0].message, "estimated")) << f[0].message;
  EXPECT_TRUE(Feed(rule.get(), cat_, Step(2, 1, 1, 1e-4)).empty());  // once per tensor
}

TEST_F(PoorWeightInitializationTest, NarrowGradientsFromTheLinearHistogram) {
  auto rule =
      MustCreate("poor_weight_initialization", {{{"distribution_range", "0.5"}}, {}, "", {}});
  StatsOptions opt;
  opt.linear_histogram.bins = 10;  // over [min, max] = [0, 1]
  // 100 values: 0.0 x 50, 1.0 x 50: p5 = 0.05 * 100 = 5th value, in bucket 0 -> 0.01;
  // p95 = rank 95 in bucket 9 (values 51..100) -> 0.9 + 0.1 * 45 / 50 = 0.99.
  std::vector<double> v(100, 0.0);
  std::fill(v.begin() + 50, v.end(), 1.0);
  StepBatch b = Batch(0, {RecordOf(2, v, opt)});
  EXPECT_TRUE(Feed(rule.get(), cat_, b).empty());  // spread 0.98
  auto rule2 =
      MustCreate("poor_weight_initialization", {{{"distribution_range", "0.99"}}, {}, "", {}});
  auto f = Feed(rule2.get(), cat_, b);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NEAR(Value(f[0], "p95_minus_p5"), 0.98, 1e-12);
  EXPECT_FALSE(Contains(f[0].message, "estimated")) << f[0].message;
}

TEST_F(PoorWeightInitializationTest, LossNotDecreasingForPatienceSaves) {
  auto rule = MustCreate("poor_weight_initialization", {{{"patience", "3"}}, {}, "", {}});
  const double loss[] = {2.0, 1.5, 1.6, 1.5, 1.7, 1.4};
  std::vector<std::int64_t> steps;
  for (int s = 0; s < 6; ++s) {
    StepBatch b = Step(s, 1, 1);
    b.scalars.push_back({3, loss[s], 0.0});
    for (const Finding& f : Feed(rule.get(), cat_, b)) steps.push_back(f.step.global_step);
  }
  // Best 1.5 at step 1; steps 2, 3, 4 do not go below it: the third (step 4) fires.
  EXPECT_EQ(steps, (std::vector<std::int64_t>{4}));
}

TEST_F(PoorWeightInitializationTest, ParameterErrorsAndDiagnostics) {
  auto r = Create("poor_weight_initialization", {{{"activation_inputs_regex", "(["}}, {}, "", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "activation_inputs_regex")) << r.status().message();
  r = Create("poor_weight_initialization", {{{"steps", "0"}}, {}, "", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "steps")) << r.status().message();
  r = Create("poor_weight_initialization", {{{"compare", "pairs"}}, {}, "", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "compare must be consecutive or all"))
      << r.status().message();
  auto rule = MustCreate("poor_weight_initialization",
                         {{{"activation_inputs_regex", "tanh_input"}}, {}, "", {}});
  EXPECT_TRUE(Feed(rule.get(), cat_, Step(0, 1, 1)).empty());
  EXPECT_TRUE(Contains(rule->Diagnostics(), "activation_inputs_regex")) << rule->Diagnostics();
}

}  // namespace
}  // namespace tstat::rules::test
