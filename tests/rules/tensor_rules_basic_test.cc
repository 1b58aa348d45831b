// Tests of the stateless-per-step tensor rules (vanishing_gradient,
// exploding_tensor, all_zero, tensor_variance), of norm_spike and nan_origin,
// and of what every tensor rule shares: registration, parameter errors and the
// "matched nothing" warning.
#include <gtest/gtest.h>

#include "tests/rules/tensor_rules_test_util.h"

namespace tstat::rules::test {
namespace {

// ---------------------------------------------------------------- registry
TEST(TensorRulesTest, RegistersEveryTensorRuleOnce) {
  RuleRegistry registry;
  ASSERT_TRUE(RegisterTensorRules(&registry).ok());
  EXPECT_EQ(registry.types(),
            (std::vector<std::string>{
                "all_zero", "check_input_images", "dead_relu", "exploding_tensor",
                "low_precision_range", "nan_origin", "nlp_sequence_ratio", "norm_spike",
                "poor_weight_initialization", "saturated_activation", "tensor_variance",
                "unchanged_tensor", "vanishing_gradient", "weight_update_ratio"}));
  EXPECT_EQ(RegisterTensorRules(&registry).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RegisterTensorRules(nullptr).code(), StatusCode::kInvalidArgument);
}

TEST(TensorRulesTest, EveryRuleNamesAnUnknownParameter) {
  RuleRegistry registry;
  ASSERT_TRUE(RegisterTensorRules(&registry).ok());
  for (const std::string& type : registry.types()) {
    auto r = Create(type, {{{"threshhold", "1"}}, {}, "", {}});
    ASSERT_FALSE(r.ok()) << type;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << type;
    EXPECT_TRUE(Contains(r.status().message(), "threshhold")) << r.status().message();
  }
}

TEST(TensorRulesTest, EveryRuleWarnsWhenItsSelectionMatchesNothing) {
  RuleRegistry registry;
  ASSERT_TRUE(RegisterTensorRules(&registry).ok());
  MapCatalog cat;
  cat.Add(0, "some_tensor", {"other"});
  const StepBatch b = Batch(0, {RecordOf(0, {1.0, 2.0})});
  for (const std::string& type : registry.types()) {
    SpecArgs a;
    a.regex = "^no_such_tensor$";
    if (type == "tensor_variance") a.params["max_threshold"] = "1";
    auto rule = MustCreate(type, a);
    ASSERT_NE(rule, nullptr) << type;
    EXPECT_TRUE(rule->Diagnostics().empty()) << type;  // nothing seen yet
    EXPECT_TRUE(Feed(rule.get(), cat, b).empty()) << type;
    EXPECT_TRUE(Contains(rule->Diagnostics(), "matched no tensor"))
        << type << ": " << rule->Diagnostics();
  }
}

TEST(TensorRulesTest, BadRegexIsInvalidArgument) {
  auto r = Create("vanishing_gradient", {{}, {}, "([", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "tensor_regex")) << r.status().message();
}

// ------------------------------------------------------- vanishing_gradient
class VanishingGradientTest : public ::testing::Test {
 protected:
  VanishingGradientTest() {
    cat_.Add(0, "gradient/fc1.weight", {"gradients"});
    cat_.Add(1, "fc1.weight", {"weights"});
  }
  MapCatalog cat_;
};

TEST_F(VanishingGradientTest, FiresAtTheStepTheMeanAbsDropsBelowThreshold) {
  auto rule = MustCreate("vanishing_gradient");
  std::vector<Finding> all;
  for (int s = 0; s < 6; ++s) {
    const double g = s < 3 ? 1e-3 : 1e-9;  // vanishes from step 3
    auto f =
        Feed(rule.get(), cat_, Batch(s, {RecordOf(0, {g, -g, g}), RecordOf(1, Fill(3, 1e-12))}));
    all.insert(all.end(), f.begin(), f.end());
  }
  ASSERT_EQ(Steps(all), (std::vector<std::int64_t>{3, 4, 5}));
  EXPECT_EQ(all[0].tensor, "gradient/fc1.weight");  // the weight (not a gradient) never fires
  EXPECT_EQ(all[0].type, "vanishing_gradient");
  EXPECT_NEAR(Value(all[0], "mean_abs"), 1e-9, 1e-21);
  EXPECT_DOUBLE_EQ(Value(all[0], "threshold"), 1e-7);
  EXPECT_TRUE(Contains(all[0].message, "vanished")) << all[0].message;
  EXPECT_TRUE(rule->Diagnostics().empty()) << rule->Diagnostics();
}

TEST_F(VanishingGradientTest, HealthyGradientsAndNonFiniteOnesDoNotFire) {
  auto rule = MustCreate("vanishing_gradient", {{{"threshold", "1e-4"}}, {}, "", {}});
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(0, {RecordOf(0, {1e-3, -2e-3})})).empty());
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(1, {RecordOf(0, {NAN, INFINITY})})).empty());
  // Small finite values beside a NaN: the NaN is the finding (exploding_tensor's).
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(2, {RecordOf(0, {1e-5, NAN})})).empty());
  auto f = Feed(rule.get(), cat_, Batch(3, {RecordOf(0, {1e-5, 0.0, -2e-5})}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(f[0].lower_is_worse);
  EXPECT_EQ(f[0].severity, Severity::kError);
  EXPECT_NEAR(f[0].values[0].second, 1.5e-5, 1e-17);  // the mean over the non-zero elements
}

TEST_F(VanishingGradientTest, ASparseGradientIsNotASmallOne) {
  // An embedding's gradient: the rows the batch used learn, the others are
  // exactly 0. Over every element the mean is 1e-9; over the non-zero ones 1e-3.
  auto rule = MustCreate("vanishing_gradient");
  std::vector<double> rows(1000000, 0.0);
  rows[7] = 1e-3;
  rows[99] = -1e-3;
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(0, {RecordOf(0, rows)})).empty());
  // A gradient that is 0 everywhere is all_zero's finding, not this one's.
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(1, {RecordOf(0, Fill(5, 0.0))})).empty());
  // Small non-zero values among the zeros still vanish.
  rows[7] = 1e-9;
  rows[99] = -1e-9;
  EXPECT_EQ(Feed(rule.get(), cat_, Batch(2, {RecordOf(0, rows)})).size(), 1u);
}

TEST(VanishingGradientBiasTest, ABiasCancelledByANormalizationIsNotAVanishingGradient) {
  // conv.bias before a BatchNorm: rounding noise while conv.weight learns.
  MapCatalog cat;
  cat.Add(0, "gradient/conv.weight", {"gradients"});
  cat.Add(1, "gradient/conv.bias", {"gradients"});
  cat.Add(2, "gradient/fc.bias", {"gradients"});  // no weight gradient in the run
  cat.Add(3, "dense/kernel:0", {"gradients"});    // Keras names
  cat.Add(4, "dense/bias:0", {"gradients"});
  auto rule = MustCreate("vanishing_gradient");
  const double noise = 1e-9, learns = 1e-3;
  auto f = Feed(rule.get(), cat,
                Batch(0, {RecordOf(1, {noise, -noise}), RecordOf(0, {learns, -learns}),
                          RecordOf(2, {noise}), RecordOf(3, {learns}), RecordOf(4, {noise})}));
  // Only the bias without a weight is judged (the weight came after the bias
  // in capture order: siblings are looked up once the step is read).
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].tensor, "gradient/fc.bias");
  EXPECT_EQ(rule->Diagnostics(), "");  // a note, not a rule that could not judge
  const std::string why = rule->Notes();
  EXPECT_TRUE(Contains(why,
                       "dense/bias:0 and 1 more bias(es) have no gradient while their "
                       "layer's weight has one"))
      << why;
  EXPECT_TRUE(Contains(why, "BatchNorm")) << why;
  // When the layer's weight gradient vanishes too, both are findings (deep
  // sigmoid nets: the whole layer stops learning).
  f = Feed(rule.get(), cat, Batch(1, {RecordOf(1, {noise}), RecordOf(0, {noise})}));
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].tensor, "gradient/conv.weight");  // reported at once
  EXPECT_EQ(f[1].tensor, "gradient/conv.bias");    // at the end of the step
  // A step without the weight's record judges the bias alone.
  f = Feed(rule.get(), cat, Batch(2, {RecordOf(1, {noise})}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].tensor, "gradient/conv.bias");
}

TEST_F(VanishingGradientTest, RespectsModes) {
  auto rule = MustCreate("vanishing_gradient", {{}, {}, "", {Mode::kEval}});
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(0, {RecordOf(0, {1e-9})}, Mode::kTrain)).empty());
  EXPECT_EQ(Feed(rule.get(), cat_, Batch(1, {RecordOf(0, {1e-9})}, Mode::kEval)).size(), 1u);
}

TEST_F(VanishingGradientTest, ParameterErrorsNameTheParameter) {
  for (const auto& [value, what] :
       {std::pair<std::string, std::string>{"tiny", "number"}, {"-1", "must be in"}}) {
    auto r = Create("vanishing_gradient", {{{"threshold", value}}, {}, "", {}});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(r.status().message(), "threshold")) << r.status().message();
    EXPECT_TRUE(Contains(r.status().message(), what)) << r.status().message();
  }
}

// --------------------------------------------------------- exploding_tensor
TEST(ExplodingTensorTest, FiresOnNanAndInfFromTheirStepOn) {
  MapCatalog cat;
  cat.Add(0, "layer1_output_0", {"activations"});
  auto rule = MustCreate("exploding_tensor");  // every tensor by default
  EXPECT_TRUE(Feed(rule.get(), cat, Batch(0, {RecordOf(0, {1, 2, 3})})).empty());
  EXPECT_TRUE(Feed(rule.get(), cat, Batch(1, {RecordOf(0, {1e30, -1e30})})).empty());
  auto f = Feed(rule.get(), cat, Batch(2, {RecordOf(0, {1, NAN, INFINITY, -INFINITY})}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].step.global_step, 2);
  EXPECT_DOUBLE_EQ(Value(f[0], "nan_count"), 1);
  EXPECT_DOUBLE_EQ(Value(f[0], "inf_count"), 2);
  EXPECT_TRUE(Contains(f[0].message, "1 NaN and 2 Inf")) << f[0].message;
}

TEST(ExplodingTensorTest, OnlyNanIgnoresInf) {
  MapCatalog cat;
  cat.Add(0, "x", {});
  auto rule = MustCreate("exploding_tensor", {{{"only_nan", "true"}}, {}, "", {}});
  EXPECT_TRUE(Feed(rule.get(), cat, Batch(0, {RecordOf(0, {INFINITY})})).empty());
  EXPECT_EQ(Feed(rule.get(), cat, Batch(1, {RecordOf(0, {NAN})})).size(), 1u);
}

TEST(ExplodingTensorTest, GrowthOverTheMedianOfTheWindowFiresAtExactSteps) {
  MapCatalog cat;
  cat.Add(0, "gradient/w", {"gradients"});
  cat.Add(1, "fc.weight", {"weights"});  // not a growth collection by default
  auto rule = MustCreate("exploding_tensor",
                         {{{"growth_factor", "5"}, {"growth_window", "3"}}, {}, "", {}});
  std::vector<std::int64_t> steps;
  std::vector<double> growth;
  // Medians of the 3 values before: step 5: {1.5, 2, 2} -> 12 / 2 = 6 > 5;
  // step 6: {2, 2, 12} -> 13 / 2 = 6.5; step 7: {2, 12, 13} -> 14 / 12.
  const double l2[] = {1, 1, 1.5, 2, 2, 12, 13, 14};
  for (int s = 0; s < 8; ++s) {
    for (const Finding& f :
         Feed(rule.get(), cat, Batch(s, {RecordOf(0, {l2[s]}), RecordOf(1, {l2[s]})}))) {
      steps.push_back(f.step.global_step);
      growth.push_back(Value(f, "growth"));
      EXPECT_EQ(f.tensor, "gradient/w");
      EXPECT_DOUBLE_EQ(Value(f, "growth_factor"), 5.0);
      EXPECT_EQ(f.severity, Severity::kCritical);
      EXPECT_EQ(f.confirm_steps, 2);  // a one-step spike does not open an episode
    }
  }
  EXPECT_EQ(steps, (std::vector<std::int64_t>{5, 6}));
  EXPECT_EQ(growth, (std::vector<double>{6.0, 6.5}));
}

TEST(ExplodingTensorTest, GrowthCollectionsSelectWhatIsChecked) {
  MapCatalog cat;
  cat.Add(0, "fc.weight", {"weights"});
  auto all = MustCreate("exploding_tensor", {{{"growth_collections", ""}}, {}, "", {}});
  auto none = MustCreate("exploding_tensor", {{{"growth_factor", "0"}}, {}, "", {}});
  std::size_t fired_all = 0, fired_none = 0;
  for (int s = 0; s < 4; ++s) {
    const double v = s < 2 ? 1.0 : 100.0;
    fired_all += Feed(all.get(), cat, Batch(s, {RecordOf(0, {v})})).size();
    fired_none += Feed(none.get(), cat, Batch(s, {RecordOf(0, {v})})).size();
  }
  EXPECT_EQ(fired_all, 2u);
  EXPECT_EQ(fired_none, 0u);
}

TEST(ExplodingTensorTest, ParameterErrors) {
  auto r = Create("exploding_tensor", {{{"growth_stat", "l3"}}, {}, "", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "growth_stat")) << r.status().message();
  r = Create("exploding_tensor", {{{"growth_factor", "0.5"}}, {}, "", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "growth_factor")) << r.status().message();
  r = Create("exploding_tensor", {{{"only_nan", "maybe"}}, {}, "", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "only_nan")) << r.status().message();
}

// ----------------------------------------------------------------- all_zero
TEST(AllZeroTest, FiresWhenEveryElementIsZero) {
  MapCatalog cat;
  cat.Add(0, "relu1_output_0", {"activations"});
  cat.Add(1, "fc1.bias", {"biases"});  // zero biases are normal: not selected by default
  auto rule = MustCreate("all_zero");
  EXPECT_TRUE(
      Feed(rule.get(), cat, Batch(0, {RecordOf(0, {0, 0, 1}), RecordOf(1, Fill(4, 0))})).empty());
  auto f = Feed(rule.get(), cat, Batch(1, {RecordOf(0, {0, -0.0, 0}), RecordOf(1, Fill(4, 0))}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].tensor, "relu1_output_0");
  EXPECT_DOUBLE_EQ(Value(f[0], "zero_percent"), 100);
}

TEST(AllZeroTest, ThresholdIsAPercentage) {
  MapCatalog cat;
  cat.Add(0, "t", {});
  auto rule = MustCreate("all_zero", {{{"threshold", "50"}}, {}, "^t$", {}});
  EXPECT_TRUE(Feed(rule.get(), cat, Batch(0, {RecordOf(0, {0, 1, 1})})).empty());
  EXPECT_EQ(Feed(rule.get(), cat, Batch(1, {RecordOf(0, {0, 0, 1, 1})})).size(), 1u);
  auto r = Create("all_zero", {{{"threshold", "150"}}, {}, "", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "threshold")) << r.status().message();
}

// ---------------------------------------------------------- tensor_variance
TEST(TensorVarianceTest, FiresAboveMaxAndBelowMin) {
  MapCatalog cat;
  cat.Add(0, "fc.weight", {"weights"});
  auto rule = MustCreate("tensor_variance",
                         {{{"max_threshold", "1"}, {"min_threshold", "1e-4"}}, {}, "", {}});
  EXPECT_TRUE(Feed(rule.get(), cat, Batch(0, {RecordOf(0, {-0.5, 0.5})})).empty());  // var 0.25
  auto f = Feed(rule.get(), cat, Batch(1, {RecordOf(0, {-2, 2})}));                  // var 4
  ASSERT_EQ(f.size(), 1u);
  EXPECT_DOUBLE_EQ(Value(f[0], "variance"), 4);
  EXPECT_DOUBLE_EQ(Value(f[0], "max_threshold"), 1);
  f = Feed(rule.get(), cat, Batch(2, {RecordOf(0, {0.001, 0.001})}));  // var 0
  ASSERT_EQ(f.size(), 1u);
  EXPECT_DOUBLE_EQ(Value(f[0], "min_threshold"), 1e-4);
}

TEST(TensorVarianceTest, NeedsAThreshold) {
  auto r = Create("tensor_variance");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "max_threshold")) << r.status().message();
  r = Create("tensor_variance", {{{"max_threshold", "1"}, {"min_threshold", "2"}}, {}, "", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "min_threshold")) << r.status().message();
}

// --------------------------------------------------------------- norm_spike
TEST(NormSpikeTest, FiresOnlyAtTheSpike) {
  MapCatalog cat;
  cat.Add(0, "gradient/w", {"gradients"});
  auto rule = MustCreate("norm_spike", {{{"window", "8"}, {"min_steps", "4"}}, {}, "", {}});
  // l2 of {v}: 1.0, 1.1, 0.9 repeating, a spike of 5 at step 9, back to normal.
  std::vector<std::int64_t> steps;
  for (int s = 0; s < 14; ++s) {
    const double v = s == 9 ? 5.0 : 1.0 + 0.1 * ((s % 3) - 1);
    for (const Finding& f : Feed(rule.get(), cat, Batch(s, {RecordOf(0, {v})}))) {
      steps.push_back(f.step.global_step);
      EXPECT_DOUBLE_EQ(Value(f, "l2"), 5.0);
      EXPECT_GT(Value(f, "z"), 3.0);
    }
  }
  EXPECT_EQ(steps, (std::vector<std::int64_t>{9}));
}

TEST(NormSpikeTest, WaitsForMinStepsAndKeepsModesApart) {
  MapCatalog cat;
  cat.Add(0, "gradient/w", {"gradients"});
  auto rule = MustCreate("norm_spike", {{{"min_steps", "3"}}, {}, "", {}});
  EXPECT_TRUE(Feed(rule.get(), cat, Batch(0, {RecordOf(0, {1})})).empty());
  EXPECT_TRUE(Feed(rule.get(), cat, Batch(1, {RecordOf(0, {1})})).empty());
  EXPECT_TRUE(Feed(rule.get(), cat, Batch(2, {RecordOf(0, {100})})).empty());  // 2 < min_steps
  // EVAL has its own (empty) history.
  EXPECT_TRUE(Feed(rule.get(), cat, Batch(3, {RecordOf(0, {1000})}, Mode::kEval)).empty());
  EXPECT_EQ(Feed(rule.get(), cat, Batch(4, {RecordOf(0, {1000})})).size(), 1u);
}

TEST(NormSpikeTest, ParameterErrors) {
  auto r = Create("norm_spike", {{{"stat", "l7"}}, {}, "", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "stat")) << r.status().message();
  r = Create("norm_spike", {{{"window", "4"}, {"min_steps", "5"}}, {}, "", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "min_steps")) << r.status().message();
}

// --------------------------------------------------------------- nan_origin
class NanOriginTest : public ::testing::Test {
 protected:
  NanOriginTest() {
    cat_.Add(0, "fc1_output_0", {"activations"});
    cat_.Add(1, "fc2_output_0", {"activations"});
    cat_.Add(2, "gradient/fc2.weight", {"gradients"});
    cat_.Add(3, "gradient/fc1.weight", {"gradients"});
  }
  // Records in capture order: forward, then backward. `bad` marks which get a NaN.
  StepBatch Step(std::int64_t s, std::vector<int> bad) {
    std::vector<TensorStatsRecord> recs;
    for (std::uint32_t id = 0; id < 4; ++id) {
      const bool b = std::find(bad.begin(), bad.end(), static_cast<int>(id)) != bad.end();
      recs.push_back(RecordOf(id, {1.0, b ? (id == 3 ? INFINITY : NAN) : 2.0}));
    }
    return Batch(s, std::move(recs));
  }
  MapCatalog cat_;
};

TEST_F(NanOriginTest, NamesTheFirstTensorInCaptureOrderOnce) {
  auto rule = MustCreate("nan_origin");
  EXPECT_TRUE(Feed(rule.get(), cat_, Step(0, {})).empty());
  auto f = Feed(rule.get(), cat_, Step(1, {3, 1, 2}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].step.global_step, 1);
  EXPECT_EQ(f[0].tensor, "fc2_output_0");
  EXPECT_DOUBLE_EQ(Value(f[0], "tensors_affected"), 3);
  EXPECT_TRUE(Contains(f[0].message, "also in gradient/fc2.weight, gradient/fc1.weight"))
      << f[0].message;
  EXPECT_EQ(f[0].severity, Severity::kCritical);
  // While the NaNs last, the same origin (one episode).
  f = Feed(rule.get(), cat_, Step(2, {0, 1, 2, 3}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].tensor, "fc2_output_0");
  EXPECT_DOUBLE_EQ(Value(f[0], "tensors_affected"), 4);
  EXPECT_TRUE(Feed(rule.get(), cat_, Step(3, {})).empty());
  EXPECT_TRUE(Feed(rule.get(), cat_, Step(4, {0})).empty());  // once: a later episode is not
  // Workers are independent.
  EXPECT_EQ(Feed(rule.get(), cat_, Step(4, {2}), /*worker=*/1).size(), 1u);
}

TEST_F(NanOriginTest, OnceFalseFiresAtEachEpisodeStart) {
  auto rule = MustCreate("nan_origin", {{{"once", "false"}, {"only_nan", "true"}}, {}, "", {}});
  std::vector<std::int64_t> steps;
  const std::vector<std::vector<int>> bad = {{}, {3}, {1}, {1}, {}, {2}, {}};
  for (std::size_t s = 0; s < bad.size(); ++s) {
    for (const Finding& f : Feed(rule.get(), cat_, Step(s, bad[s]))) {
      steps.push_back(f.step.global_step);
    }
  }
  // Step 1 has only an Inf (ignored with only_nan); NaN episodes are 2-3 and 5.
  EXPECT_EQ(steps, (std::vector<std::int64_t>{2, 3, 5}));
}

TEST_F(NanOriginTest, ForwardTensorsComeBeforeGradientsAndParameters) {
  MapCatalog cat;  // registered as RegisterParameters does: parameters first
  cat.Add(0, "fc1.weight", {"weights"});
  cat.Add(1, "gradient/fc1.weight", {"gradients"});
  cat.Add(2, "logits_output", {"activations"});
  auto rule = MustCreate("nan_origin");
  std::vector<TensorStatsRecord> recs;
  for (std::uint32_t id = 0; id < 3; ++id) recs.push_back(RecordOf(id, {NAN}));
  auto f = Feed(rule.get(), cat, Batch(0, recs));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].tensor, "logits_output");
  EXPECT_TRUE(Contains(f[0].message, "also in gradient/fc1.weight, fc1.weight")) << f[0].message;
}

TEST_F(NanOriginTest, DrivenThroughTheEngineWithTwoWorkers) {
  std::vector<std::unique_ptr<Rule>> rules;
  rules.push_back(MustCreate("nan_origin", {{}, {"gradients"}, "", {}}));
  RuleEngine engine(std::move(rules), EngineOptions{2});
  std::vector<Finding> out;
  engine.Feed(0, Step(0, {}), &cat_, &out);
  engine.Feed(1, Step(0, {}), &cat_, &out);
  engine.Feed(1, Step(1, {0, 3}), &cat_, &out);
  engine.Feed(0, Step(1, {}), &cat_, &out);
  engine.Finish(&out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].worker, 1);
  EXPECT_EQ(out[0].tensor, "gradient/fc1.weight");  // fc1_output_0 is not selected
  EXPECT_TRUE(engine.Diagnostics().empty());
}

}  // namespace
}  // namespace tstat::rules::test
