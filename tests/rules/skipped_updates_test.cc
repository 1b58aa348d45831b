// Updates the optimizer skipped for NaN/Inf gradients (dynamic loss scaling):
// nan_origin and exploding_tensor do not report them, and report the ones the
// optimizer applied, whichever order the caller reads weights and gradients
// in; weight_update_ratio does not judge the zero update of a skipped step.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/rules/tensor_rules_test_util.h"

namespace tstat::rules::test {
namespace {

class SkippedUpdatesTest : public ::testing::Test {
 protected:
  SkippedUpdatesTest() {
    cat_.Add(0, "fc_output", {"activations"});
    cat_.Add(1, "loss", {"losses"});
    cat_.Add(2, "fc.weight", {"weights"});
    cat_.Add(3, "gradient/fc.weight", {"gradients"});
  }
  // One training step: the forward tensors, the weight and its gradient, each
  // finite unless named in `inf_in` (0 forward, 2 weight, 3 gradient) or
  // `nan_in`.
  static StepBatch Step(std::int64_t s, std::vector<int> inf_in, std::vector<int> nan_in = {},
                        Mode mode = Mode::kTrain) {
    std::vector<TensorStatsRecord> recs;
    for (std::uint32_t id = 0; id < 4; ++id) {
      auto has = [id](const std::vector<int>& v) {
        return std::find(v.begin(), v.end(), static_cast<int>(id)) != v.end();
      };
      if (mode == Mode::kEval && id == 3) continue;  // no gradient in EVAL
      const double bad = has(nan_in) ? NAN : has(inf_in) ? INFINITY : 0.5;
      recs.push_back(RecordOf(id, {0.25, -0.75, bad}));
    }
    return Batch(s, std::move(recs), mode);
  }
  static std::vector<std::string> Tensors(const std::vector<Finding>& f) {
    std::vector<std::string> out;
    for (const Finding& x : f) out.push_back(x.tensor);
    return out;
  }
  MapCatalog cat_;
};

TEST_F(SkippedUpdatesTest, AnOverflowTheOptimizerSkippedIsNotAFinding) {
  for (const char* type : {"nan_origin", "exploding_tensor"}) {
    auto rule = MustCreate(type);
    EXPECT_TRUE(Feed(rule.get(), cat_, Step(0, {})).empty()) << type;
    // Step 1's gradient overflowed; the weight stays finite at step 1 and 2.
    EXPECT_TRUE(Feed(rule.get(), cat_, Step(1, {3})).empty()) << type;
    EXPECT_TRUE(Feed(rule.get(), cat_, Step(2, {})).empty()) << type;
    // Overflows in a row (the scale halves each time) below the limit.
    for (int s = 3; s < 8; ++s) EXPECT_TRUE(Feed(rule.get(), cat_, Step(s, {3})).empty()) << s;
    EXPECT_TRUE(Feed(rule.get(), cat_, Step(8, {})).empty()) << type;
    EXPECT_EQ(rule->Diagnostics(), "") << type;
    const std::string notes = rule->Notes();
    EXPECT_TRUE(Contains(notes, std::string("rule ") + type + ": 6 update(s) skipped")) << notes;
    EXPECT_TRUE(Contains(notes, "TRAIN step 1, TRAIN step 3, TRAIN step 4")) << notes;
  }
}

TEST_F(SkippedUpdatesTest, AnUpdateThatAppliedTheGradientsIsReportedAtTheNextStep) {
  // The weights are read before the optimizer step (the PyTorch hook): the
  // NaN the update put into them shows at the next step.
  auto origin = MustCreate("nan_origin");
  auto exploding = MustCreate("exploding_tensor");
  for (Rule* r : {origin.get(), exploding.get()}) {
    EXPECT_TRUE(Feed(r, cat_, Step(0, {})).empty());
    EXPECT_TRUE(Feed(r, cat_, Step(1, {3})).empty());
  }
  const StepBatch after = Step(2, {}, {0, 1, 2, 3});
  auto f = Feed(origin.get(), cat_, after);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].step.global_step, 2);
  EXPECT_EQ(f[0].tensor, "gradient/fc.weight");  // not the forward tensors of step 2
  EXPECT_EQ(f[0].severity, Severity::kCritical);
  EXPECT_TRUE(Contains(f[0].message, "first appeared in gradient/fc.weight at TRAIN step 1"))
      << f[0].message;
  EXPECT_TRUE(Contains(f[0].message, "the optimizer applied those gradients")) << f[0].message;
  EXPECT_DOUBLE_EQ(Value(f[0], "tensors_affected"), 4);
  f = Feed(exploding.get(), cat_, after);
  EXPECT_EQ(Tensors(f),
            (std::vector<std::string>{"fc_output", "loss", "fc.weight", "gradient/fc.weight"}));
  EXPECT_EQ(origin->Notes(), "");

  // The weight holds the update's NaN and the gradient is finite again: the
  // held finding is reported as it was.
  auto held = MustCreate("exploding_tensor");
  EXPECT_TRUE(Feed(held.get(), cat_, Step(1, {3})).empty());
  f = Feed(held.get(), cat_, Step(2, {}, {2}));
  EXPECT_EQ(Tensors(f), (std::vector<std::string>{"gradient/fc.weight", "fc.weight"}));
  EXPECT_EQ(f[0].step.global_step, 2);
  EXPECT_TRUE(Contains(f[0].message, "0 NaN and 1 Inf of 3 values")) << f[0].message;
  EXPECT_TRUE(Contains(f[0].message, "reported at TRAIN step 2")) << f[0].message;
}

TEST_F(SkippedUpdatesTest, WeightsReadAfterTheOptimizerShowAnAppliedUpdateAtOnce) {
  // A LibTorch loop that ends its step after optimizer.step(): the weight
  // holds the NaN at the step of the gradient's overflow.
  auto rule = MustCreate("nan_origin");
  auto f = Feed(rule.get(), cat_, Step(1, {3}, {2}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].step.global_step, 1);
  EXPECT_EQ(f[0].tensor, "gradient/fc.weight");
}

TEST_F(SkippedUpdatesTest, NonFiniteForwardTensorsOrUnknownWeightsAreReportedAtOnce) {
  // A NaN loss did not start in the backward pass.
  auto rule = MustCreate("nan_origin");
  auto f = Feed(rule.get(), cat_, Step(1, {3}, {1}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].tensor, "loss");
  // Gradients whose weights are not captured: nothing shows a skip.
  MapCatalog grads_only;
  grads_only.Add(3, "gradient/fc.weight", {"gradients"});
  auto alone = MustCreate("exploding_tensor");
  f = Feed(alone.get(), grads_only, Batch(1, {RecordOf(3, {1.0, INFINITY})}));
  EXPECT_EQ(Tensors(f), (std::vector<std::string>{"gradient/fc.weight"}));
  // Turned off: every non-finite gradient at once, as in tstat before.
  auto off = MustCreate("nan_origin", {{{"max_skipped_in_row", "0"}}, {}, "", {}});
  f = Feed(off.get(), cat_, Step(1, {3}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].tensor, "gradient/fc.weight");
  EXPECT_FALSE(Create("nan_origin", {{{"max_skipped_in_row", "-1"}}, {}, "", {}}).ok());
}

TEST_F(SkippedUpdatesTest, TooManySkippedInARowAreReported) {
  for (const char* type : {"nan_origin", "exploding_tensor"}) {
    auto rule = MustCreate(type, {{{"max_skipped_in_row", "3"}}, {}, "", {}});
    std::vector<std::int64_t> at;
    for (int s = 1; s <= 6; ++s) {
      for (const Finding& f : Feed(rule.get(), cat_, Step(s, {3}))) {
        at.push_back(f.step.global_step);
        EXPECT_TRUE(Contains(f.message, "skipped the last 3 updates in a row")) << f.message;
        EXPECT_EQ(f.severity, Severity::kCritical);
      }
    }
    // Steps 1-3 were skipped (known at 2-4); from step 4 on they are findings.
    EXPECT_EQ(at, (std::vector<std::int64_t>{4, 5, 6})) << type;
  }
}

TEST_F(SkippedUpdatesTest, AnEvalStepBetweenDoesNotDecide) {
  auto rule = MustCreate("nan_origin");
  EXPECT_TRUE(Feed(rule.get(), cat_, Step(1, {3})).empty());
  EXPECT_TRUE(Feed(rule.get(), cat_, Step(2, {}, {}, Mode::kEval)).empty());
  auto f = Feed(rule.get(), cat_, Step(3, {}, {2}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].tensor, "gradient/fc.weight");
  EXPECT_TRUE(Contains(f[0].message, "at TRAIN step 1")) << f[0].message;
}

TEST_F(SkippedUpdatesTest, WorkersAreIndependentAndOnceCountsOnlyReportedEpisodes) {
  auto rule = MustCreate("nan_origin");
  EXPECT_TRUE(Feed(rule.get(), cat_, Step(1, {3}), /*worker=*/0).empty());
  // Worker 1's NaN loss is its own episode.
  EXPECT_EQ(Feed(rule.get(), cat_, Step(1, {}, {1}), /*worker=*/1).size(), 1u);
  EXPECT_TRUE(Feed(rule.get(), cat_, Step(2, {}), /*worker=*/0).empty());  // skipped
  // A skipped update is not worker 0's reported episode: its first real one is.
  auto f = Feed(rule.get(), cat_, Step(3, {}, {1}), /*worker=*/0);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].tensor, "loss");
}

// weight_update_ratio reads the update between two saves of a weight: after
// the optimizer step (the weight's delta at the step of the overflow) or
// before it (at the next step). A skipped update is 0 either way, for every
// weight, whichever layer's gradient overflowed.
class SkippedUpdateRatioTest : public ::testing::Test {
 protected:
  SkippedUpdateRatioTest() {
    cat_.Add(0, "fc.weight", {"weights"});
    cat_.Add(1, "gradient/fc.weight", {"gradients"});
    cat_.Add(2, "gradient/head.weight", {"gradients"});  // head.weight not selected
  }
  StepBatch Step(std::int64_t s, const std::vector<double>& w, const std::vector<double>& prev,
                 double head_gradient) {
    return Batch(s, {RecordOf(0, w, {}, {}, &prev), RecordOf(1, {0.1, 0.2}),
                     RecordOf(2, {0.1, head_gradient})});
  }
  MapCatalog cat_;
};

TEST_F(SkippedUpdateRatioTest, TheZeroUpdateOfASkippedStepIsNotJudged) {
  const std::vector<double> w = {0.5, -0.25};
  // Zero updates judged at once (not after 64 steps without any change).
  auto rule = MustCreate("weight_update_ratio", {{{"steps_without_update", "1"}}, {}, "", {}});
  EXPECT_TRUE(Feed(rule.get(), cat_, Step(0, w, {0.4, -0.2}, 0.1)).empty());
  // Read before the optimizer: the overflow at step 1, its zero update at 2.
  EXPECT_TRUE(Feed(rule.get(), cat_, Step(1, w, {0.4, -0.2}, INFINITY)).empty());
  EXPECT_TRUE(Feed(rule.get(), cat_, Step(2, w, w, 0.1)).empty());
  // Read after it: the zero update at the step of the overflow.
  EXPECT_TRUE(Feed(rule.get(), cat_, Step(3, w, w, NAN)).empty());
  // A zero update with finite gradients before and now is the finding (a
  // learning rate of 0).
  EXPECT_TRUE(Feed(rule.get(), cat_, Step(4, {0.6, -0.3}, w, 0.1)).empty());
  auto f = Feed(rule.get(), cat_, Step(5, {0.6, -0.3}, {0.6, -0.3}, 0.1));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].tensor, "fc.weight");
  EXPECT_DOUBLE_EQ(Value(f[0], "small_ratio"), 0.0);
}

}  // namespace
}  // namespace tstat::rules::test
