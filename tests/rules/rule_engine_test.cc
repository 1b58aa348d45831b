#include "rules/engine/rule_engine.h"

#include <gtest/gtest.h>

#include <map>

namespace tstat::rules {
namespace {

class MapCatalog : public TensorCatalog {
 public:
  const TensorInfo* Find(std::uint32_t id) const override {
    auto it = infos.find(id);
    return it == infos.end() ? nullptr : &it->second;
  }
  std::map<std::uint32_t, TensorInfo> infos;
};

// Records the (worker, step) order in which it is evaluated.
class RecordingRule : public Rule {
 public:
  explicit RecordingRule(std::vector<std::pair<int, std::int64_t>>* log) : log_(log) {
    spec_.name = spec_.type = "recording";
  }
  const RuleSpec& spec() const override { return spec_; }
  void Evaluate(const StepView& v, std::vector<Finding>* out) override {
    log_->push_back({v.worker, v.key.global_step});
    if (v.records->size() == 2) {
      Finding f;
      f.rule = "recording";
      f.step = v.key;
      out->push_back(f);
    }
  }
  void Finish(std::vector<Finding>*) override { log_->push_back({-1, -1}); }

 private:
  RuleSpec spec_;
  std::vector<std::pair<int, std::int64_t>>* log_;
};

StepBatch Batch(std::int64_t step, int records = 1) {
  StepBatch b;
  b.key.global_step = step;
  b.key.mode = Mode::kTrain;
  b.key.mode_step = step;
  b.stats.resize(records);
  return b;
}

TEST(RuleEngineTest, SingleWorkerEvaluatesEachStepAtOnce) {
  std::vector<std::pair<int, std::int64_t>> log;
  std::vector<std::unique_ptr<Rule>> rules;
  rules.push_back(std::make_unique<RecordingRule>(&log));
  RuleEngine engine(std::move(rules));
  MapCatalog cat;
  std::vector<Finding> out;
  engine.Feed(0, Batch(0), &cat, &out);
  EXPECT_EQ(log.size(), 1u);
  engine.Feed(0, Batch(1, 2), &cat, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].step.global_step, 1);
  engine.Finish(&out);
  EXPECT_EQ(log.back(), std::make_pair(-1, std::int64_t{-1}));
  EXPECT_EQ(engine.steps_evaluated(), 2u);
  EXPECT_EQ(engine.records_evaluated(), 3u);
}

TEST(RuleEngineTest, MultiWorkerWaitsForCompleteStepsInOrder) {
  std::vector<std::pair<int, std::int64_t>> log;
  std::vector<std::unique_ptr<Rule>> rules;
  rules.push_back(std::make_unique<RecordingRule>(&log));
  RuleEngine engine(std::move(rules), EngineOptions{2});
  MapCatalog cat;
  std::vector<Finding> out;
  engine.Feed(1, Batch(0), &cat, &out);
  EXPECT_TRUE(log.empty());  // worker 0 has not reported step 0
  engine.Feed(0, Batch(0), &cat, &out);
  ASSERT_EQ(log.size(), 2u);  // complete: evaluated in worker order
  EXPECT_EQ(log[0], std::make_pair(0, std::int64_t{0}));
  EXPECT_EQ(log[1], std::make_pair(1, std::int64_t{0}));
  engine.Feed(0, Batch(1), &cat, &out);
  EXPECT_EQ(log.size(), 2u);
  engine.Feed(0, Batch(2), &cat, &out);  // a later step exists: step 1 is complete
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[2], std::make_pair(0, std::int64_t{1}));
  engine.Finish(&out);  // the run ended: step 2 evaluated without worker 1
  ASSERT_EQ(log.size(), 5u);
  EXPECT_EQ(log[3], std::make_pair(0, std::int64_t{2}));
  EXPECT_EQ(log[4], std::make_pair(-1, std::int64_t{-1}));
}

}  // namespace
}  // namespace tstat::rules
