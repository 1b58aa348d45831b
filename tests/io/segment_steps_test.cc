// SegmentSteps (io/read/segment_steps.h) answers step_records from a
// segment's rows: each step's records in file order, each with its own
// exponent histogram and extras, whether the tables come in the writer's
// order (walked together) or shuffled (joined by key), and refilling a
// vector of records from a previous step leaves nothing of that step behind.
#include "io/read/segment_steps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

namespace tstat::io::testing {
namespace {

constexpr int kSteps = 5, kTensors = 7;

StatsRow Row(std::int64_t step, std::uint32_t id) {
  StatsRow r{};
  r.global_step = step;
  r.mode = 1;
  r.mode_step = step;
  r.tensor_id = id;
  r.has_stats = 1;
  r.s.count = r.s.finite_count = 10 * static_cast<std::uint64_t>(step) + id;
  r.s.mean = static_cast<double>(step) + 0.01 * id;
  return r;
}

// Every tensor at every step; tensor 3 has no histogram, tensor 5 a delta.
SegmentContents Contents(bool shuffled) {
  SegmentContents c;
  SegmentBuffers& b = c.tables;
  for (int s = 0; s < kSteps; ++s) {
    for (std::uint32_t id = 0; id < kTensors; ++id) {
      b.stats.push_back(Row(100 + s, id));
      if (id == 3) continue;
      ExpHistRow h{};
      h.global_step = 100 + s;
      h.mode = 1;
      h.mode_step = 100 + s;
      h.tensor_id = id;
      h.first_bin = static_cast<std::uint16_t>(id);
      h.num_bins = 2;
      h.offset = b.exp_hist_counts.size();
      b.exp_hist_counts.push_back(static_cast<std::uint64_t>(s));
      b.exp_hist_counts.push_back(id);
      b.exp_hist.push_back(h);
    }
    DeltaRow d{};
    d.global_step = 100 + s;
    d.tensor_id = 5;
    d.count = 1000 + static_cast<std::uint64_t>(s);
    b.delta.push_back(d);
  }
  if (shuffled) {
    std::mt19937 rng(7);
    std::shuffle(b.exp_hist.begin(), b.exp_hist.end(), rng);
    std::shuffle(b.delta.begin(), b.delta.end(), rng);
  }
  return c;
}

void ExpectStep(const std::vector<TensorStatsRecord>& got, int s) {
  ASSERT_EQ(got.size(), static_cast<std::size_t>(kTensors));
  for (std::uint32_t id = 0; id < kTensors; ++id) {
    const TensorStatsRecord& r = got[id];
    EXPECT_EQ(r.tensor_id, id);
    EXPECT_EQ(r.stats.count, 10u * static_cast<std::uint64_t>(100 + s) + id);
    if (id == 3) {
      EXPECT_FALSE(r.exponent_histogram.has_value());
    } else {
      ASSERT_TRUE(r.exponent_histogram.has_value());
      EXPECT_EQ(r.exponent_histogram->first_bin, static_cast<int>(id));
      EXPECT_EQ(r.exponent_histogram->counts,
                (std::vector<std::uint64_t>{static_cast<std::uint64_t>(s), id}));
    }
    EXPECT_EQ(r.delta.has_value(), id == 5);
    if (id == 5 && r.delta) {
      EXPECT_EQ(r.delta->count, 1000u + static_cast<std::uint64_t>(s));
    }
  }
}

TEST(SegmentStepsTest, RecordsOfEachStepInWritersOrderAndShuffled) {
  for (bool shuffled : {false, true}) {
    SCOPED_TRACE(shuffled ? "shuffled" : "writer's order");
    const SegmentSteps steps(Contents(shuffled));
    std::vector<TensorStatsRecord> records;
    // Backwards, so that each fill reuses the records of another step.
    for (int s = kSteps - 1; s >= 0; --s) {
      ASSERT_TRUE(steps.Has(100 + s));
      steps.Fill(100 + s, &records);
      ExpectStep(records, s);
    }
    EXPECT_FALSE(steps.Has(99));
    steps.Fill(99, &records);
    EXPECT_TRUE(records.empty());
  }
}

TEST(SegmentStepsTest, StepsWhoseRowsInterleaveAreGroupedAndSorted) {
  SegmentContents c;
  // Steps 7, 3, 7, 5: step 7's rows are not adjacent, the steps not sorted.
  for (auto [step, id] :
       std::vector<std::pair<int, std::uint32_t>>{{7, 0}, {3, 0}, {3, 1}, {7, 1}, {5, 2}}) {
    c.tables.stats.push_back(Row(step, id));
  }
  const SegmentSteps steps(std::move(c));
  std::vector<TensorStatsRecord> records;
  steps.Fill(7, &records);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].tensor_id, 0u);
  EXPECT_EQ(records[1].tensor_id, 1u);
  steps.Fill(3, &records);
  EXPECT_EQ(records.size(), 2u);
  steps.Fill(5, &records);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].tensor_id, 2u);
}

}  // namespace
}  // namespace tstat::io::testing
