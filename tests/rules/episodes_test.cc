// EpisodeTracker (rules/engine/episodes.h): findings of consecutive judged steps
// become one episode that opens after its rule's confirm_steps, extends,
// escalates, and closes when its tensor is judged without a finding.
#include "rules/engine/episodes.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/rules/tensor_rules_test_util.h"

namespace tstat::rules::test {
namespace {

using Kind = EpisodeEvent::Kind;

// Drives a tracker with steps of worker 0 whose records are the tensors
// named in `captured` (ids from the catalog below).
class EpisodeTrackerTest : public ::testing::Test {
 protected:
  EpisodeTrackerTest() {
    cat_.Add(0, "gradient/a", {"gradients"});
    cat_.Add(1, "gradient/b", {"gradients"});
    cat_.Add(2, "loss", {"losses"}, {}, TensorKind::kScalar);
  }

  std::vector<EpisodeEvent> Step(EpisodeTracker* t, std::int64_t step,
                                 const std::vector<std::uint32_t>& captured,
                                 const std::vector<Finding>& findings, Mode mode = Mode::kTrain,
                                 int worker = 0) {
    std::vector<TensorStatsRecord> records;
    for (std::uint32_t id : captured) records.push_back(RecordOf(id, {1.0, 2.0}));
    std::vector<ScalarRecord> scalars;
    StepView v;
    v.worker = worker;
    v.key = StepKey{step, mode, step};
    v.records = &records;
    v.scalars = &scalars;
    v.catalog = &cat_;
    const IndexedStep indexed = indexer_.Index(v);
    std::vector<EpisodeEvent> events;
    t->Step(indexed, findings, &events);
    return events;
  }

  static Finding F(const std::string& rule, const std::string& tensor, std::int64_t step,
                   double value, Severity severity = Severity::kError, Mode mode = Mode::kTrain,
                   int worker = 0) {
    Finding f;
    f.rule = rule;
    f.type = rule;
    f.tensor = tensor;
    f.worker = worker;
    f.step = StepKey{step, mode, step};
    f.values = {{"measure", value}, {"threshold", 1.0}};
    f.message = rule + " at " + std::to_string(step);
    f.severity = severity;
    return f;
  }

  MapCatalog cat_;
  StepIndexer indexer_;
};

TEST_F(EpisodeTrackerTest, OneEpisodeFromFirstToLastStepWithItsWorstValue) {
  EpisodeTracker t;
  auto ev = Step(&t, 0, {0, 1}, {F("r", "gradient/a", 0, 5)});
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::kOpen);
  EXPECT_EQ(ev[0].episode.id, 1u);
  EXPECT_TRUE(Step(&t, 1, {0, 1}, {F("r", "gradient/a", 1, 9)}).empty());
  EXPECT_TRUE(Step(&t, 2, {0, 1}, {F("r", "gradient/a", 2, 7)}).empty());
  // Step 3 did not capture gradient/a: neither extends nor ends it.
  EXPECT_TRUE(Step(&t, 3, {1}, {}).empty());
  ev = Step(&t, 4, {0, 1}, {});
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::kClose);
  const Episode& e = ev[0].episode;
  EXPECT_EQ(e.first.global_step, 0);
  EXPECT_EQ(e.last.global_step, 2);
  EXPECT_EQ(e.steps, 3u);
  EXPECT_FALSE(e.open);
  EXPECT_EQ(e.worst.step.global_step, 1);
  EXPECT_DOUBLE_EQ(e.worst.values.front().second, 9);
  EXPECT_EQ(e.opening.message, "r at 0");
  ASSERT_EQ(t.episodes().size(), 1u);
  // The condition again: a second episode.
  ev = Step(&t, 5, {0}, {F("r", "gradient/a", 5, 2)});
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].episode.id, 2u);
}

TEST_F(EpisodeTrackerTest, LowerIsWorseKeepsTheSmallestValue) {
  EpisodeTracker t;
  Finding a = F("vanish", "gradient/a", 0, 1e-8);
  Finding b = F("vanish", "gradient/a", 1, 1e-9);
  Finding c = F("vanish", "gradient/a", 2, 1e-7);
  for (Finding* f : {&a, &b, &c}) f->lower_is_worse = true;
  Step(&t, 0, {0}, {a});
  Step(&t, 1, {0}, {b});
  Step(&t, 2, {0}, {c});
  EXPECT_DOUBLE_EQ(t.episodes()[0].worst.values.front().second, 1e-9);
}

TEST_F(EpisodeTrackerTest, ConfirmStepsInARowBeforeItOpensAtTheFirstOfThem) {
  EpisodeTracker t({{"dead", 3}});
  EXPECT_TRUE(Step(&t, 0, {0}, {F("dead", "gradient/a", 0, 1)}).empty());
  EXPECT_TRUE(Step(&t, 1, {0}, {F("dead", "gradient/a", 1, 1)}).empty());
  EXPECT_TRUE(Step(&t, 2, {0}, {}).empty());  // broken: forgotten, no event
  EXPECT_TRUE(Step(&t, 3, {0}, {F("dead", "gradient/a", 3, 1)}).empty());
  EXPECT_TRUE(Step(&t, 4, {0}, {F("dead", "gradient/a", 4, 1)}).empty());
  auto ev = Step(&t, 5, {0}, {F("dead", "gradient/a", 5, 1)});
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::kOpen);
  EXPECT_EQ(ev[0].episode.first.global_step, 3);
  EXPECT_EQ(ev[0].episode.reported.global_step, 5);
  EXPECT_EQ(ev[0].episode.steps, 3u);
  // A finding's own confirm_steps wins over the rule's.
  Finding quick = F("dead", "gradient/b", 6, 1);
  quick.confirm_steps = 1;
  ev = Step(&t, 6, {0, 1}, {F("dead", "gradient/a", 6, 1), quick});
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].episode.tensor, "gradient/b");
}

TEST_F(EpisodeTrackerTest, AHigherSeverityEscalatesTheOpenEpisode) {
  EpisodeTracker t;
  Step(&t, 0, {0}, {F("ratio", "gradient/a", 0, 20, Severity::kWarning)});
  auto ev = Step(&t, 1, {0}, {F("ratio", "gradient/a", 1, 200, Severity::kCritical)});
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::kEscalate);
  EXPECT_EQ(ev[0].episode.severity, Severity::kCritical);
  EXPECT_TRUE(Step(&t, 2, {0}, {F("ratio", "gradient/a", 2, 30, Severity::kWarning)}).empty());
  EXPECT_EQ(t.episodes()[0].severity, Severity::kCritical);
}

TEST_F(EpisodeTrackerTest, EpisodesAreKeptApartByTensorModeWorkerAndMeasure) {
  EpisodeTracker t;
  Finding other_measure = F("r", "gradient/a", 0, 1);
  other_measure.values.front().first = "growth";
  auto ev =
      Step(&t, 0, {0, 1}, {F("r", "gradient/a", 0, 1), F("r", "gradient/b", 0, 1), other_measure});
  EXPECT_EQ(ev.size(), 3u);
  // An EVAL step judging gradient/a does not end its TRAIN episodes, and
  // worker 1's steps do not end worker 0's.
  EXPECT_TRUE(Step(&t, 1, {0, 1}, {}, Mode::kEval).empty());
  EXPECT_TRUE(Step(&t, 2, {0, 1}, {}, Mode::kTrain, 1).empty());
  ev = Step(&t, 3, {0, 1}, {});
  EXPECT_EQ(ev.size(), 3u);
  for (const EpisodeEvent& e : ev) EXPECT_EQ(e.kind, Kind::kClose);
  // Closed in opening order.
  EXPECT_EQ(ev[0].episode.id, 1u);
  EXPECT_EQ(ev[2].episode.id, 3u);
}

TEST_F(EpisodeTrackerTest, RunLevelEpisodesEndAtTheNextStepWithoutTheirFinding) {
  EpisodeTracker t;
  Step(&t, 0, {}, {F("loss_flat", "", 0, 1)});
  EXPECT_TRUE(Step(&t, 1, {}, {F("loss_flat", "", 1, 1)}).empty());
  auto ev = Step(&t, 2, {}, {});
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::kClose);
  EXPECT_EQ(ev[0].episode.steps, 2u);
}

TEST_F(EpisodeTrackerTest, TicksOpenAndFinishClosesEveryOpenEpisodeInOrder) {
  EpisodeTracker t({{"stalled", 3}});
  std::vector<EpisodeEvent> ev;
  t.Tick({F("stalled", "", 0, 120)}, &ev);  // a tick opens at once
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::kOpen);
  // A step of its worker and mode: training moves again, the stall ended.
  ev = Step(&t, 1, {0}, {F("r", "gradient/a", 1, 1), F("r", "gradient/b", 1, 1)});
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[2].kind, Kind::kClose);
  EXPECT_EQ(ev[2].episode.rule, "stalled");
  ev.clear();
  t.Finish(&ev);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].episode.tensor, "gradient/a");
  EXPECT_EQ(ev[1].episode.tensor, "gradient/b");
  for (const EpisodeEvent& e : ev) EXPECT_EQ(e.kind, Kind::kClose);
  ev.clear();
  t.Finish(&ev);
  EXPECT_TRUE(ev.empty());
}

TEST_F(EpisodeTrackerTest, TheSameStepsGiveTheSameEpisodes) {
  auto run = [this]() {
    EpisodeTracker t({{"b", 2}});
    std::vector<std::string> out;
    for (int s = 0; s < 12; ++s) {
      std::vector<Finding> f;
      if (s % 5 != 4) f.push_back(F("a", "gradient/a", s, s));
      if (s % 3 != 0) f.push_back(F("b", "gradient/b", s, -s));
      for (const EpisodeEvent& e : Step(&t, s, {0, 1}, f)) {
        out.push_back(std::to_string(static_cast<int>(e.kind)) + ":" +
                      std::to_string(e.episode.id) + ":" + e.episode.rule + ":" +
                      std::to_string(e.episode.first.global_step) + "-" +
                      std::to_string(e.episode.last.global_step));
      }
    }
    return out;
  };
  const std::vector<std::string> first = run();
  EXPECT_EQ(first, run());
  EXPECT_GE(first.size(), 8u);
}

}  // namespace
}  // namespace tstat::rules::test
