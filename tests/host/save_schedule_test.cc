// Save-config semantics (smdebug's SaveConfig: mode step, absolute modulus,
// end exclusive) against hand-computed step lists, and the inheritance order
// collection.<mode> > collection > session.<mode> > session > default.
#include "host/config/save_schedule.h"

#include <gtest/gtest.h>

#include <vector>

#include "host/config/collection_set.h"

namespace tstat::host {
namespace {

std::vector<std::int64_t> Saved(const ResolvedSchedule& s, std::int64_t upto) {
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < upto; ++i) {
    if (s.ShouldSave(i)) out.push_back(i);
  }
  return out;
}

ResolvedSchedule One(const SaveSchedule& s, std::int64_t default_interval = 100) {
  return ResolveSchedule({&s}, default_interval);
}

using Steps = std::vector<std::int64_t>;

TEST(SaveScheduleTest, DefaultIntervalIsOneHundred) {
  EXPECT_EQ(Saved(One({}), 350), (Steps{0, 100, 200, 300}));
}

TEST(SaveScheduleTest, ModulusIsAbsoluteNotRelativeToStart) {
  SaveSchedule s;
  s.start_step = 150;
  s.save_interval = 100;
  EXPECT_EQ(Saved(One(s), 450), (Steps{200, 300, 400}));  // smdebug's own example
}

TEST(SaveScheduleTest, EndStepIsExclusive) {
  SaveSchedule s;
  s.save_interval = 10;
  s.end_step = 30;
  EXPECT_EQ(Saved(One(s), 100), (Steps{0, 10, 20}));
  s.end_step = 31;
  EXPECT_EQ(Saved(One(s), 100), (Steps{0, 10, 20, 30}));
}

TEST(SaveScheduleTest, ExplicitStepsAreSavedOutsideTheRangeToo) {
  SaveSchedule s;
  s.save_interval = 5;
  s.start_step = 10;
  s.end_step = 20;
  s.save_steps = {25, 3, 3};
  EXPECT_EQ(Saved(One(s), 40), (Steps{3, 10, 15, 25}));
}

TEST(SaveScheduleTest, IntervalZeroSavesOnlyListedSteps) {
  SaveSchedule s;
  s.save_interval = 0;
  s.save_steps = {1, 2, 7};
  EXPECT_EQ(Saved(One(s), 20), (Steps{1, 2, 7}));
  EXPECT_EQ(Saved(One({}, /*default_interval=*/0), 20), Steps{});  // raw default: never
}

TEST(SaveScheduleTest, EndStepZeroDisables) {
  SaveSchedule s;
  s.save_interval = 1;
  s.end_step = 0;
  EXPECT_EQ(Saved(One(s), 10), Steps{});
}

TEST(SaveScheduleTest, FieldsInheritFromTheMostSpecificLevelThatSetsThem) {
  SaveSchedule coll_mode, coll, sess_mode, sess;
  coll_mode.end_step = 50;      // from collection.<mode>
  coll.save_interval = 20;      // from collection
  sess_mode.save_interval = 7;  // shadowed by collection
  sess_mode.start_step = 10;    // from session.<mode>
  sess.save_steps = {3};        // from session
  const ResolvedSchedule r = ResolveSchedule({&coll_mode, &coll, &sess_mode, &sess}, 100);
  EXPECT_EQ(r.save_interval, 20);
  EXPECT_EQ(r.start_step, 10);
  EXPECT_EQ(r.end_step, 50);
  EXPECT_EQ(Saved(r, 100), (Steps{3, 20, 40}));
}

// Through CollectionSet: the same resolution with built-ins and modes.
TEST(SaveScheduleTest, CollectionAndModeOverrides) {
  SessionConfig c;
  c.save_config.base.save_interval = 10;
  c.save_config.eval.save_interval = 3;
  CollectionConfig w;
  w.name = "weights";
  w.save_config.train.save_steps = {1};
  w.save_config.train.save_interval = 0;
  c.collections.push_back(w);
  auto set = CollectionSet::Create(c);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  const Collection& weights = (*set)->at((*set)->Find("weights"));
  const Collection& biases = (*set)->at((*set)->Find("biases"));
  EXPECT_EQ(Saved(weights.stats_schedule(Mode::kTrain), 25), (Steps{1}));
  EXPECT_EQ(Saved(weights.stats_schedule(Mode::kEval), 10), (Steps{0, 3, 6, 9}));
  EXPECT_EQ(Saved(weights.stats_schedule(Mode::kGlobal), 25), (Steps{0, 10, 20}));
  EXPECT_EQ(Saved(biases.stats_schedule(Mode::kTrain), 25), (Steps{0, 10, 20}));
  // Raw snapshots: never unless asked.
  EXPECT_EQ(Saved(weights.raw_schedule(Mode::kTrain), 1000), Steps{});
}

TEST(SaveScheduleTest, GradientsAreNeverSavedInEvalOrPredictByDefault) {
  SessionConfig c;
  c.save_config.base.save_interval = 1;
  auto set = CollectionSet::Create(c);
  ASSERT_TRUE(set.ok());
  const Collection& g = (*set)->at((*set)->Find("gradients"));
  EXPECT_EQ(Saved(g.stats_schedule(Mode::kTrain), 3), (Steps{0, 1, 2}));
  EXPECT_EQ(Saved(g.stats_schedule(Mode::kEval), 3), Steps{});
  EXPECT_EQ(Saved(g.stats_schedule(Mode::kPredict), 3), Steps{});
  // Unless the gradients collection asks for them.
  CollectionConfig gc;
  gc.name = "gradients";
  gc.save_config.eval.end_step = 2;
  gc.save_config.eval.save_interval = 1;
  c.collections.push_back(gc);
  auto set2 = CollectionSet::Create(c);
  ASSERT_TRUE(set2.ok());
  EXPECT_EQ(Saved((*set2)->at((*set2)->Find("gradients")).stats_schedule(Mode::kEval), 5),
            (Steps{0, 1}));
}

}  // namespace
}  // namespace tstat::host
