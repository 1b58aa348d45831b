// Tests of the tensor rules over per-channel stats, value counts and
// histograms: dead_relu, saturated_activation, check_input_images,
// nlp_sequence_ratio and low_precision_range.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/rules/tensor_rules_test_util.h"

namespace tstat::rules::test {
namespace {

// A per-channel record with `positive` of `total` elements positive (the rest
// zero) in each channel.
TensorStatsRecord ReluRecord(std::uint32_t id, const std::vector<std::uint64_t>& positive,
                             std::uint64_t total) {
  TensorStatsRecord r;
  r.tensor_id = id;
  r.per_channel.emplace();
  r.per_channel->axis = 1;
  for (std::uint64_t p : positive) {
    TensorStats s;
    s.count = s.finite_count = total;
    s.zero_count = total - p;
    s.min = 0;
    s.max = p ? 1.0 : 0.0;
    r.per_channel->channels.push_back(s);
  }
  return r;
}

StatsOptions PerChannel(int axis = 1) {
  StatsOptions o;
  o.per_channel_axis = axis;
  return o;
}

// ---------------------------------------------------------------- dead_relu
class DeadReluTest : public ::testing::Test {
 protected:
  DeadReluTest() { cat_.Add(0, "layer1_relu_output", {"activations"}, {2, 4}); }
  MapCatalog cat_;
};

TEST_F(DeadReluTest, ZeroInitializedNetFiresAtStepZero) {
  auto rule = MustCreate("dead_relu");
  auto f = Feed(rule.get(), cat_, Batch(0, {RecordOf(0, Fill(8, 0.0), PerChannel(), {2, 4})}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].step.global_step, 0);
  EXPECT_DOUBLE_EQ(Value(f[0], "dead_units"), 4);
  EXPECT_DOUBLE_EQ(Value(f[0], "dead_percent"), 100);
  EXPECT_DOUBLE_EQ(Value(f[0], "threshold_layer"), 50);
}

TEST_F(DeadReluTest, LayerThresholdIsStrict) {
  auto rule = MustCreate("dead_relu");
  // Channel c of [2, 4] holds elements c and 4 + c. Channels 0, 1 dead: 50%, not > 50%.
  EXPECT_TRUE(Feed(rule.get(), cat_,
                   Batch(0, {RecordOf(0, {0, 0, 1, 1, 0, 0, 2, 0}, PerChannel(), {2, 4})}))
                  .empty());
  auto rule2 = MustCreate("dead_relu");
  auto f = Feed(rule2.get(), cat_,
                Batch(0, {RecordOf(0, {0, 0, 0, 1, 0, 0, -1, 0}, PerChannel(), {2, 4})}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(Contains(f[0].message, "channels 0, 1, 2")) << f[0].message;
}

TEST_F(DeadReluTest, ActivityIsOverTheLastWindowOfSteps) {
  // Steps 0-4: half of each channel's 100 outputs positive; then all zero.
  for (const auto& [window, first] : {std::pair<const char*, int>{"1", 5}, {"3", 7}}) {
    auto rule = MustCreate("dead_relu", {{{"window", window}}, {}, "", {}});
    std::vector<std::int64_t> steps;
    for (int s = 0; s <= 9; ++s) {
      const std::uint64_t p = s < 5 ? 50 : 0;
      for (const Finding& f : Feed(rule.get(), cat_, Batch(s, {ReluRecord(0, {p, p}, 100)}))) {
        steps.push_back(f.step.global_step);
      }
    }
    // A unit that dies late is dead once the window holds only its dead steps.
    std::vector<std::int64_t> want;
    for (int s = first; s <= 9; ++s) want.push_back(s);
    EXPECT_EQ(steps, want) << "window " << window;
  }
}

TEST_F(DeadReluTest, JudgesTrainingStepsUnitsOnAxisOneAndNeedsThem) {
  auto rule = MustCreate("dead_relu");
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(0, {ReluRecord(0, {0, 0}, 100)}, Mode::kEval)).empty());
  TensorStatsRecord other_axis = ReluRecord(0, {0, 0}, 100);
  other_axis.per_channel->axis = 0;
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(1, {other_axis})).empty());
  EXPECT_TRUE(Contains(rule->Diagnostics(), "axis 0")) << rule->Diagnostics();
  // The last axis of [batch, tokens, features], as the session chooses it
  // for a rank-3 tensor: its units all the same.
  TensorStatsRecord features = ReluRecord(0, {0, 0}, 100);
  features.per_channel->axis = 2;
  EXPECT_EQ(Feed(rule.get(), cat_, Batch(2, {features})).size(), 1u);
  // What it needs: per-unit stats of the ReLU outputs at training steps.
  TensorInfo relu;
  relu.name = "block1.relu_a_output";
  relu.shape = {32, 64};
  CaptureNeeds n = rule->Needs(relu);
  EXPECT_TRUE(n.per_unit);
  EXPECT_EQ(n.modes, CaptureNeeds::TrainModes());
  relu.shape = {0};  // registered before its first pass: the rank is not known yet
  EXPECT_TRUE(rule->Needs(relu).per_unit);
  relu.shape = {64};  // no units
  EXPECT_FALSE(rule->Needs(relu).any());
  relu.name = "relu1_input";
  relu.shape = {32, 64};
  EXPECT_FALSE(rule->Needs(relu).any());
}

TEST_F(DeadReluTest, HealthyReluDoesNotFire) {
  auto rule = MustCreate("dead_relu", {{{"threshold_inactivity", "10"}}, {}, "", {}});
  for (int s = 0; s < 5; ++s) {
    EXPECT_TRUE(Feed(rule.get(), cat_, Batch(s, {ReluRecord(0, {20, 50, 90, 11}, 100)})).empty());
  }
}

TEST_F(DeadReluTest, NeedsPerChannelStats) {
  auto rule = MustCreate("dead_relu");
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(0, {RecordOf(0, Fill(8, 0.0))})).empty());
  EXPECT_TRUE(Contains(rule->Diagnostics(), "per-unit")) << rule->Diagnostics();
  auto r = Create("dead_relu", {{{"threshold_layer", "101"}}, {}, "", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "threshold_layer")) << r.status().message();
}

// ----------------------------------------------------- saturated_activation
class SaturatedActivationTest : public ::testing::Test {
 protected:
  SaturatedActivationTest() {
    cat_.Add(0, "lstm_tanh_input", {}, {2, 4});
    cat_.Add(1, "gate_sigmoid_input", {}, {2, 4});
    cat_.Add(2, "fc_input", {}, {2, 4});
  }
  // Channel c of [2, 4] gets {a[c], b[c]}.
  static std::vector<double> Channels(const double (&a)[4], const double (&b)[4]) {
    return {a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]};
  }
  MapCatalog cat_;
};

TEST_F(SaturatedActivationTest, OneSidedChannelsFromMinMax) {
  auto rule = MustCreate("saturated_activation");
  const auto healthy = Channels({0, 1, -2, 3}, {0.5, 9, -9, 0});
  const auto saturated = Channels({10, -10, 9.4999, 0}, {12, -30, 50, 1});  // 3 of 4
  EXPECT_TRUE(
      Feed(rule.get(), cat_, Batch(0, {RecordOf(0, healthy, PerChannel(), {2, 4})})).empty());
  auto rule2 = MustCreate("saturated_activation");
  auto f = Feed(rule2.get(), cat_, Batch(0, {RecordOf(0, saturated, PerChannel(), {2, 4})}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_DOUBLE_EQ(Value(f[0], "saturated_units"), 3);
  EXPECT_DOUBLE_EQ(Value(f[0], "threshold_max"), 9.4999);
  EXPECT_TRUE(Contains(f[0].message, "tanh input")) << f[0].message;
}

TEST_F(SaturatedActivationTest, SigmoidUsesItsOwnBounds) {
  auto rule = MustCreate("saturated_activation");
  const auto x = Channels({10, 10, 10, 10}, {12, 12, 12, 12});  // saturates tanh, not sigmoid
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(0, {RecordOf(1, x, PerChannel(), {2, 4})})).empty());
  EXPECT_EQ(Feed(rule.get(), cat_, Batch(0, {RecordOf(0, x, PerChannel(), {2, 4})})).size(), 1u);
  // Channel 0 is two-sided (min/max cannot tell); 1-3 are above 16.99999.
  const auto y = Channels({17, 17, 17, 17}, {-24, 18, 20, 30});
  auto f = Feed(rule.get(), cat_, Batch(1, {RecordOf(1, y, PerChannel(), {2, 4})}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_DOUBLE_EQ(Value(f[0], "saturated_percent"), 75);
  EXPECT_DOUBLE_EQ(Value(f[0], "threshold_max"), 16.99999);
}

TEST_F(SaturatedActivationTest, BandCountsSeeTwoSidedSaturation) {
  StatsOptions opt = PerChannel();
  opt.band_lo = -9.4999;
  opt.band_hi = 9.4999;
  const auto x = Channels({-20, 10, -10, 0}, {20, 12, -11, 1});  // channel 0 two-sided
  auto minmax = MustCreate("saturated_activation");
  EXPECT_TRUE(Feed(minmax.get(), cat_, Batch(0, {RecordOf(0, x, opt, {2, 4})})).empty());
  auto bands = MustCreate("saturated_activation", {{{"band_counts", "true"}}, {}, "", {}});
  auto f = Feed(bands.get(), cat_, Batch(0, {RecordOf(0, x, opt, {2, 4})}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_DOUBLE_EQ(Value(f[0], "saturated_percent"), 75);
}

TEST_F(SaturatedActivationTest, ActivityIsOverTheLastWindowOfSteps) {
  const auto ok = Channels({0, 0, 0, 0}, {1, 1, 1, 1});
  const auto sat = Channels({10, 10, 10, 10}, {12, 12, 12, 12});
  for (const auto& [window, first] : {std::pair<const char*, int>{"1", 3}, {"2", 4}}) {
    auto rule = MustCreate("saturated_activation", {{{"window", window}}, {}, "", {}});
    std::vector<std::int64_t> steps;
    for (int s = 0; s <= 5; ++s) {
      const auto& x = s < 3 ? ok : sat;
      for (const Finding& f :
           Feed(rule.get(), cat_, Batch(s, {RecordOf(0, x, PerChannel(), {2, 4})}))) {
        steps.push_back(f.step.global_step);
      }
    }
    std::vector<std::int64_t> want;
    for (int s = first; s <= 5; ++s) want.push_back(s);
    EXPECT_EQ(steps, want) << "window " << window;
  }
}

TEST_F(SaturatedActivationTest, BandCountsAreUsedWhenTheRulesAskedForThem) {
  // A unit is saturated when fewer than 5% of its inputs are in the live range.
  StatsOptions opt = PerChannel();
  opt.band_lo = -9.4999;
  opt.band_hi = 9.4999;
  std::vector<double> x(2 * 4 * 20, 0.0);  // [20, 4]: channel c holds elements c, 4 + c, ...
  for (int n = 0; n < 20; ++n) {
    for (int c = 0; c < 4; ++c) x[static_cast<std::size_t>(n * 4 + c)] = (n % 2 ? 20.0 : -20.0);
  }
  x[0] = 0.0;  // channel 0: 1 of 20 inputs live (5%): not saturated
  MapCatalog cat;
  cat.Add(0, "fc1.tanh_input",
          {"inputs", "rules.units.band_-9.4999000000000002_9.4999000000000002.train"}, {20, 4});
  cat.Add(1, "fc2.tanh_input", {"inputs"}, {20, 4});
  auto rule = MustCreate("saturated_activation");
  TensorInfo t = *cat.Find(0);
  const CaptureNeeds n = rule->Needs(t);
  EXPECT_TRUE(n.per_unit && n.band);
  EXPECT_EQ(n.band_lo, -9.4999);
  EXPECT_EQ(n.band_hi, 9.4999);
  auto f =
      Feed(rule.get(), cat,
           Batch(0, {RecordOf(0, std::vector<double>(x.begin(), x.begin() + 80), opt, {20, 4}),
                     RecordOf(1, std::vector<double>(x.begin(), x.begin() + 80), opt, {20, 4})}));
  // fc1 (in the rules' band collection): exact counts, 3 of 4 units saturated.
  // fc2: min/max only, and every channel is two-sided: nothing.
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].tensor, "fc1.tanh_input");
  EXPECT_DOUBLE_EQ(Value(f[0], "saturated_units"), 3);
}

// An activation's output (the hook's name for a tanh or sigmoid after a
// sum) is judged against the activation of the bounds: in float32 a tanh
// saturates to exactly +-1 (tanh(9.4999) rounds to 1), a sigmoid to the
// float below 1 or more, or to sigmoid(-23) or less. Selected by default as
// "<module>_input.<act>_output", and its band counts are asked for in output space.
TEST_F(SaturatedActivationTest, OutputsAreJudgedAgainstTheActivationOfTheBounds) {
  MapCatalog cat;
  cat.Add(0, "fc2_input.tanh_output", {}, {2, 4});
  cat.Add(1, "fc3_input.sigmoid_output", {}, {2, 4});
  cat.Add(2, "act.Tanh_output", {}, {2, 4});  // a module's output: not selected by default
  auto rule = MustCreate("saturated_activation");
  const CaptureNeeds n = rule->Needs(*cat.Find(0));
  EXPECT_TRUE(n.per_unit && n.band);
  EXPECT_EQ(static_cast<float>(n.band_lo), -1.0f);
  EXPECT_EQ(static_cast<float>(n.band_hi), 1.0f);
  EXPECT_EQ(n.band_hi, std::tanh(9.4999));
  const CaptureNeeds ns = rule->Needs(*cat.Find(1));
  EXPECT_EQ(ns.band_lo, 1.0 / (1.0 + std::exp(23.0)));
  EXPECT_EQ(static_cast<float>(ns.band_hi), std::nextafter(1.0f, 0.0f));  // y (1 - y) < 1e-7
  EXPECT_FALSE(rule->Needs(*cat.Find(2)).per_unit);

  // tanh outputs: 3 of 4 units at +-1; 0.9999 is a live unit (as is 9 as an input).
  const auto sat = Channels({1, -1, 1, 0.2}, {1, -1, 1, 0.9999});
  auto f = Feed(rule.get(), cat, Batch(0, {RecordOf(0, sat, PerChannel(), {2, 4})}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_DOUBLE_EQ(Value(f[0], "saturated_units"), 3);
  EXPECT_DOUBLE_EQ(Value(f[0], "threshold_max"), std::tanh(9.4999));
  EXPECT_TRUE(Contains(f[0].message, "tanh output fc2_input.tanh_output")) << f[0].message;
  EXPECT_TRUE(Contains(f[0].message, "the activation of (-9.4999, 9.4999)")) << f[0].message;
  // Healthy outputs of an input-space rule's saturated inputs (|x| = 10, 12)
  // are not judged as inputs: tanh(10) < 10.
  auto healthy = MustCreate("saturated_activation");
  const auto live = Channels({0.5, -0.9, 0.99, 0}, {0.7, -0.2, 0.999, 0.1});
  EXPECT_TRUE(
      Feed(healthy.get(), cat, Batch(0, {RecordOf(0, live, PerChannel(), {2, 4})})).empty());
  // sigmoid outputs: 1 and 1e-11 saturated, 0.5 and 1e-9 live.
  auto sig = MustCreate("saturated_activation");
  const auto ys = Channels({1, 1e-11, 1, 0.5}, {1, 1e-11, 1, 1e-9});
  f = Feed(sig.get(), cat, Batch(0, {RecordOf(1, ys, PerChannel(), {2, 4})}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_DOUBLE_EQ(Value(f[0], "saturated_units"), 3);
  EXPECT_TRUE(Contains(f[0].message, "sigmoid output")) << f[0].message;
}

// A name that says both is judged by the activation it names last: the
// hook's "<layer>.sigmoid_input" and "<module>_input.sigmoid_output" of
// layers and modules whose own names say tanh.
TEST_F(SaturatedActivationTest, TheActivationNamedLastDecides) {
  MapCatalog cat;
  cat.Add(0, "tanh_proj.sigmoid_input", {}, {2, 4});
  cat.Add(1, "tanh_proj_input.sigmoid_output", {}, {2, 4});
  cat.Add(2, "sigmoid_gate.tanh_input", {}, {2, 4});
  auto rule = MustCreate("saturated_activation");
  EXPECT_EQ(rule->Needs(*cat.Find(0)).band_hi, 16.99999);
  EXPECT_EQ(rule->Needs(*cat.Find(1)).band_lo, 1.0 / (1.0 + std::exp(23.0)));
  EXPECT_EQ(rule->Needs(*cat.Find(2)).band_hi, 9.4999);
  // Sigmoid inputs of 12: live for a sigmoid (a tanh's would be saturated).
  const auto x = Channels({12, 12, 12, 12}, {12, 12, 12, 12});
  EXPECT_TRUE(Feed(rule.get(), cat, Batch(0, {RecordOf(0, x, PerChannel(), {2, 4})})).empty());
  EXPECT_EQ(Feed(rule.get(), cat, Batch(0, {RecordOf(2, x, PerChannel(), {2, 4})})).size(), 1u);
}

TEST_F(SaturatedActivationTest, ParametersAndDiagnostics) {
  auto rule =
      MustCreate("saturated_activation", {{{"threshold_tanh", "-1,1"}}, {}, ".*_input", {}});
  const auto x = Channels({2, 2, 2, 2}, {3, 3, 3, 3});
  EXPECT_EQ(Feed(rule.get(), cat_, Batch(0, {RecordOf(0, x, PerChannel(), {2, 4})})).size(), 1u);
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(0, {RecordOf(2, x, PerChannel(), {2, 4})})).empty());
  EXPECT_TRUE(Contains(rule->Diagnostics(), "neither")) << rule->Diagnostics();
  auto r = Create("saturated_activation",
                  {{{"threshold_tanh", "-1,1"}, {"threshold_tanh_min", "-2"}}, {}, "", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "threshold_tanh")) << r.status().message();
  r = Create("saturated_activation", {{{"threshold_sigmoid_min", "20"}}, {}, "", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "threshold_sigmoid_min")) << r.status().message();
  auto no_pc = MustCreate("saturated_activation");
  EXPECT_TRUE(Feed(no_pc.get(), cat_, Batch(0, {RecordOf(0, x)})).empty());
  EXPECT_TRUE(Contains(no_pc->Diagnostics(), "per-unit")) << no_pc->Diagnostics();
}

// ------------------------------------------------------- check_input_images
class CheckInputImagesTest : public ::testing::Test {
 protected:
  CheckInputImagesTest() { cat_.Add(0, "images_input_0", {"inputs"}, {10, 3, 1, 1}); }
  // 10 samples of 3 channels: channel c is mean[c] +- 1.
  static std::vector<double> Images(const double (&mean)[3]) {
    std::vector<double> v;
    for (int n = 0; n < 10; ++n) {
      for (int c = 0; c < 3; ++c) v.push_back(mean[c] + (n % 2 ? 1.0 : -1.0));
    }
    return v;
  }
  MapCatalog cat_;
};

TEST_F(CheckInputImagesTest, FiresOnceThresholdSamplesWereSeen) {
  auto rule = MustCreate("check_input_images",
                         {{{"regex", "images"}, {"threshold_samples", "50"}}, {}, "", {}});
  std::vector<std::int64_t> steps;
  for (int s = 0; s < 6; ++s) {
    auto f = Feed(rule.get(), cat_,
                  Batch(s, {RecordOf(0, Images({0.0, 120.0, 0.1}), PerChannel(), {10, 3, 1, 1})}));
    for (const Finding& x : f) {
      steps.push_back(x.step.global_step);
      EXPECT_DOUBLE_EQ(Value(x, "channel_index"), 1);
      EXPECT_DOUBLE_EQ(Value(x, "mean"), 120);
      EXPECT_DOUBLE_EQ(Value(x, "channels_off"), 1);
    }
  }
  EXPECT_EQ(steps, (std::vector<std::int64_t>{4, 5}));  // 50 samples after 5 steps
}

TEST_F(CheckInputImagesTest, NormalizedInputsDoNotFire) {
  auto rule = MustCreate("check_input_images", {{{"threshold_samples", "10"}}, {"inputs"}, "", {}});
  for (int s = 0; s < 4; ++s) {
    EXPECT_TRUE(
        Feed(rule.get(), cat_,
             Batch(s, {RecordOf(0, Images({0.0, 0.15, -0.19}), PerChannel(), {10, 3, 1, 1})}))
            .empty());
  }
}

TEST_F(CheckInputImagesTest, DiagnosticsAndParameters) {
  auto default_regex = MustCreate("check_input_images");
  EXPECT_TRUE(Feed(default_regex.get(), cat_, Batch(0, {RecordOf(0, Images({5, 5, 5}))})).empty());
  EXPECT_TRUE(Contains(default_regex->Diagnostics(), "hybridsequential0_input_0"))
      << default_regex->Diagnostics();
  auto wrong_axis = MustCreate("check_input_images", {{{"regex", "images"}}, {}, "", {}});
  EXPECT_TRUE(Feed(wrong_axis.get(), cat_,
                   Batch(0, {RecordOf(0, Images({5, 5, 5}), PerChannel(0), {10, 3, 1, 1})}))
                  .empty());
  EXPECT_TRUE(Contains(wrong_axis->Diagnostics(), "axis 0")) << wrong_axis->Diagnostics();
  auto r = Create("check_input_images", {{{"regex", "a"}}, {}, "b", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "regex")) << r.status().message();
  r = Create("check_input_images", {{{"channel", "-1"}}, {}, "", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "channel")) << r.status().message();
}

// ------------------------------------------------------- nlp_sequence_ratio
TensorStatsRecord TokenRecord(std::uint32_t id, std::uint64_t count,
                              std::vector<std::int64_t> values, std::vector<std::uint64_t> counts) {
  TensorStatsRecord r;
  r.tensor_id = id;
  r.stats.count = r.stats.finite_count = count;
  r.count_values = std::move(values);
  r.value_counts = std::move(counts);
  return r;
}

TEST(NlpSequenceRatioTest, FiresPerTokenAboveItsThreshold) {
  MapCatalog cat;
  cat.Add(0, "embedding0_input_0", {"inputs"}, {4, 25});
  auto rule =
      MustCreate("nlp_sequence_ratio",
                 {{{"token_values", "0, 1"}, {"token_thresholds_percent", "50,4"}}, {}, "", {}});
  EXPECT_TRUE(Feed(rule.get(), cat, Batch(0, {TokenRecord(0, 100, {0, 1}, {50, 4})})).empty());
  auto f = Feed(rule.get(), cat, Batch(1, {TokenRecord(0, 100, {1, 0}, {5, 60})}));
  ASSERT_EQ(f.size(), 2u);
  EXPECT_DOUBLE_EQ(Value(f[0], "token_value"), 0);
  EXPECT_DOUBLE_EQ(Value(f[0], "percent"), 60);
  EXPECT_DOUBLE_EQ(Value(f[0], "threshold_percent"), 50);
  EXPECT_DOUBLE_EQ(Value(f[1], "token_value"), 1);
  EXPECT_DOUBLE_EQ(Value(f[1], "threshold_percent"), 4);
  EXPECT_TRUE(rule->Diagnostics().empty()) << rule->Diagnostics();
  // Without a stat set the registered shape gives the token count.
  TensorStatsRecord no_stats = TokenRecord(0, 0, {0}, {51});
  no_stats.has_stats = false;
  EXPECT_EQ(Feed(rule.get(), cat, Batch(2, {no_stats})).size(), 1u);
}

TEST(NlpSequenceRatioTest, MissingCountsAndBadParameters) {
  MapCatalog cat;
  cat.Add(0, "embedding0_input_0", {"inputs"});
  auto rule = MustCreate("nlp_sequence_ratio");
  EXPECT_TRUE(Feed(rule.get(), cat, Batch(0, {TokenRecord(0, 100, {3}, {99})})).empty());
  EXPECT_TRUE(Contains(rule->Diagnostics(), "count_values")) << rule->Diagnostics();
  for (const auto& params : std::vector<std::map<std::string, std::string>>{
           {{"token_values", "0,1"}, {"token_thresholds_percent", "1,2,3"}},
           {{"token_values", "pad"}},
           {{"token_thresholds_percent", "150"}}}) {
    auto r = Create("nlp_sequence_ratio", {params, {}, "", {}});
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(Contains(r.status().message(), params.rbegin()->first)) << r.status().message();
  }
}

// ------------------------------------------------------ low_precision_range
TensorStatsRecord HistRecord(std::uint32_t id, const std::map<int, std::uint64_t>& by_exponent) {
  TensorStatsRecord r;
  r.tensor_id = id;
  ExponentHistogram h;
  for (const auto& [e, n] : by_exponent) h.counts[ExponentHistogram::BinOf(e)] = n;
  r.exponent_histogram = h;
  return r;
}

class LowPrecisionRangeTest : public ::testing::Test {
 protected:
  LowPrecisionRangeTest() { cat_.Add(0, "gradient/w", {"gradients"}); }
  MapCatalog cat_;
  // 1000 values: 10% at 2^-30, 10% at 2^-20, 70% at 2^0, 10% at 2^16.
  const std::map<int, std::uint64_t> mixed_ = {{-30, 100}, {-20, 100}, {0, 700}, {16, 100}};
};

TEST_F(LowPrecisionRangeTest, Fp16UnderflowAndOverflowAtTheStep) {
  auto rule = MustCreate("low_precision_range");
  EXPECT_TRUE(
      Feed(rule.get(), cat_, Batch(0, {RecordOf(0, {0.5, -1, 3, 1e-3, 0, 60000, -1e-7})})).empty());
  auto f = Feed(rule.get(), cat_, Batch(1, {HistRecord(0, mixed_)}));
  ASSERT_EQ(f.size(), 1u);  // bf16 holds all of it
  EXPECT_EQ(f[0].step.global_step, 1);
  EXPECT_DOUBLE_EQ(Value(f[0], "fp16_underflow_percent"), 10);
  EXPECT_DOUBLE_EQ(Value(f[0], "fp16_subnormal_percent"), 20);
  EXPECT_DOUBLE_EQ(Value(f[0], "fp16_overflow_percent"), 10);
  EXPECT_DOUBLE_EQ(Value(f[0], "underflow_percent"), 1);
  EXPECT_TRUE(Contains(f[0].message, "in fp16")) << f[0].message;
  EXPECT_TRUE(Contains(f[0].message, "flush to zero")) << f[0].message;
  EXPECT_TRUE(Contains(f[0].message, "overflow")) << f[0].message;
}

TEST_F(LowPrecisionRangeTest, PowerOfTwoScaleShiftsExactly) {
  auto rule = MustCreate("low_precision_range",
                         {{{"scale", "256"}, {"subnormal_percent", "5"}}, {}, "", {}});
  auto f = Feed(rule.get(), cat_, Batch(0, {HistRecord(0, mixed_)}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_DOUBLE_EQ(Value(f[0], "fp16_underflow_percent"), 0);   // 2^-22 is subnormal, kept
  EXPECT_DOUBLE_EQ(Value(f[0], "fp16_subnormal_percent"), 10);  // 2^-22 < 2^-14
  EXPECT_DOUBLE_EQ(Value(f[0], "fp16_overflow_percent"), 10);   // 2^24
  EXPECT_DOUBLE_EQ(Value(f[0], "scale"), 256);
}

TEST_F(LowPrecisionRangeTest, NonPowerOfTwoScaleCountsWholeBinsOnly) {
  auto rule =
      MustCreate("low_precision_range",
                 {{{"scale", "3"}, {"formats", "fp16"}, {"underflow_percent", "0"}}, {}, "", {}});
  // x3: 2^-25 -> [1.5, 3) 2^-24 (kept); 2^-26 -> [0.75, 1.5) 2^-24 (straddles: kept);
  // 2^-27 -> [0.375, 0.75) 2^-24 (all below the smallest subnormal).
  EXPECT_TRUE(
      Feed(rule.get(), cat_, Batch(0, {HistRecord(0, {{-25, 5}, {-26, 5}, {0, 10}})})).empty());
  auto f = Feed(rule.get(), cat_, Batch(1, {HistRecord(0, {{-27, 5}, {-26, 5}, {0, 10}})}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_DOUBLE_EQ(Value(f[0], "fp16_underflow_percent"), 25);
}

TEST_F(LowPrecisionRangeTest, Fp8Formats) {
  auto rule = MustCreate("low_precision_range", {{{"formats", "fp8_e4m3,fp8_e5m2"}}, {}, "", {}});
  // e4m3: normal from 2^-6, subnormal down to 2^-9, max 448 in the 2^8 octave.
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(0, {HistRecord(0, {{-6, 10}, {8, 10}})})).empty());
  auto f = Feed(rule.get(), cat_, Batch(1, {HistRecord(0, {{-10, 10}, {9, 10}, {0, 80}})}));
  ASSERT_EQ(f.size(), 1u);  // e5m2 (2^-16 .. 57344) holds both
  EXPECT_DOUBLE_EQ(Value(f[0], "fp8_e4m3_underflow_percent"), 10);
  EXPECT_DOUBLE_EQ(Value(f[0], "fp8_e4m3_overflow_percent"), 10);
  f = Feed(rule.get(), cat_, Batch(2, {HistRecord(0, {{-17, 10}, {16, 10}, {0, 80}})}));
  ASSERT_EQ(f.size(), 2u);
  EXPECT_DOUBLE_EQ(Value(f[1], "fp8_e5m2_underflow_percent"), 10);
  EXPECT_DOUBLE_EQ(Value(f[1], "fp8_e5m2_overflow_percent"), 10);
}

TEST_F(LowPrecisionRangeTest, DiagnosticsAndParameters) {
  auto rule = MustCreate("low_precision_range");
  TensorStatsRecord r = RecordOf(0, {1, 2});
  r.exponent_histogram.reset();
  EXPECT_TRUE(Feed(rule.get(), cat_, Batch(0, {r})).empty());
  EXPECT_TRUE(Contains(rule->Diagnostics(), "exponent histogram")) << rule->Diagnostics();
  auto bad = Create("low_precision_range", {{{"formats", "fp16,fp4"}}, {}, "", {}});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Contains(bad.status().message(), "fp4")) << bad.status().message();
  EXPECT_TRUE(Contains(bad.status().message(), "formats")) << bad.status().message();
  bad = Create("low_precision_range", {{{"scale", "0"}}, {}, "", {}});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Contains(bad.status().message(), "scale")) << bad.status().message();
}

}  // namespace
}  // namespace tstat::rules::test
