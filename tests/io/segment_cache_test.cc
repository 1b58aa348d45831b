// A Trial reads a run's records a segment at a time when a query needs them
// (io/read/segment_cache.h). Whatever the cache's cap, every query answers
// what was written: with a cap below one segment (every query reads again)
// as with one that holds the run; the cache keeps what it reads up to its
// cap and reads a segment again only once it was dropped.
#include "io/read/segment_cache.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/format/run_layout.h"
#include "tests/io/io_test_util.h"
#include "tstat/trial.h"

namespace tstat::io::testing {
namespace {

constexpr std::int64_t kSteps = 18, kStepsPerSegment = 3;
constexpr std::uint32_t kTensors = 4;

// Tensor 3 only at even steps; tensor 0 with every extra.
std::string WriteRun(const TempDir& dir) {
  return WriteTensorRun(dir, kTensors, kSteps, kStepsPerSegment, {0, 1, 2, 3},
                        [](std::int64_t g, std::uint32_t t) { return t != 3 || g % 2 == 0; });
}

TEST(SegmentCacheTest, EveryQueryAnswersTheSameWhateverTheCap) {
  TempDir dir;
  const std::string run = WriteRun(dir);
  for (std::uint64_t cap : {std::uint64_t{1}, std::uint64_t{1} << 40}) {
    SCOPED_TRACE(cap);
    TrialOptions options;
    options.cache_bytes = cap;
    auto trial = Trial::Open(run, options);
    TSTAT_ASSERT_OK(trial);
    Trial& t = **trial;
    ASSERT_EQ(t.steps().size(), static_cast<std::size_t>(kSteps));
    for (std::uint32_t id = 0; id < kTensors; ++id) {
      const std::string name = "t" + std::to_string(id);
      auto series = t.series(name, StatField::kMean);
      TSTAT_ASSERT_OK(series);
      std::vector<std::int64_t> steps;
      for (const SeriesPoint& p : *series) {
        steps.push_back(p.step.global_step);
        EXPECT_EQ(p.value, ReferenceRecord(p.step.global_step, id, id == 0).stats.mean);
      }
      std::vector<std::int64_t> want;
      for (std::int64_t g = 0; g < kSteps; ++g) {
        if (id != 3 || g % 2 == 0) want.push_back(g);
      }
      EXPECT_EQ(steps, want) << name;
    }
    // Records and steps out of order (each in another segment than the last).
    for (std::int64_t g : {17, 0, 9, 4, 12, 1}) {
      auto rec = t.record("t0", g);
      TSTAT_ASSERT_OK(rec);
      ExpectRecordEqual(rec.value(), ReferenceRecord(g, 0, true), "t0");
      auto all = t.step_records(0, g);
      TSTAT_ASSERT_OK(all);
      EXPECT_EQ(all->size(), g % 2 == 0 ? 4u : 3u) << g;
    }
    EXPECT_EQ(t.record("t3", 3).status().code(), StatusCode::kStepUnavailable);
    // The modes each tensor has records in: read from the records.
    EXPECT_EQ(t.tensor_names({"", "", Mode::kEval}).size(), 4u);
    EXPECT_EQ(t.tensor_names({"t3", "", Mode::kEval}), (std::vector<std::string>{"t3"}));
  }
}

// A step asked for alone (a fresh Trial's first query of its segment) is
// read alone (SegmentCache::GetStep: its rows only are decoded), then the
// segment whole for a second step of it: the same records either way, in
// capture order, with their histograms and extras.
TEST(SegmentCacheTest, AStepAskedForAloneAnswersAsAWalkDoes) {
  TempDir dir;
  const std::string run = WriteRun(dir);
  for (std::int64_t g = 0; g < kSteps; ++g) {
    SCOPED_TRACE("step " + std::to_string(g));
    auto trial = Trial::Open(run);
    TSTAT_ASSERT_OK(trial);
    // The step alone, then another step of its segment (the segment whole).
    const std::int64_t other = g % kStepsPerSegment == 0 ? g + 1 : g - 1;
    for (std::int64_t step : {g, other, g}) {
      auto records = (*trial)->step_records(0, step);
      TSTAT_ASSERT_OK(records);
      std::vector<std::uint32_t> want;
      for (std::uint32_t id = 0; id < kTensors; ++id) {
        if (id != 3 || step % 2 == 0) want.push_back(id);
      }
      ASSERT_EQ(records->size(), want.size()) << "step " << step;
      for (std::size_t k = 0; k < want.size(); ++k) {
        ExpectRecordEqual((*records)[k], ReferenceRecord(step, want[k], want[k] == 0),
                          "t" + std::to_string(want[k]));
      }
    }
  }
}

// TrialOptions::exponent_histograms false: every record comes without its
// exponent histogram, and with everything else it was written with.
TEST(SegmentCacheTest, RecordsWithoutExponentHistogramsAreOtherwiseWhole) {
  TempDir dir;
  const std::string run = WriteRun(dir);
  TrialOptions options;
  options.exponent_histograms = false;
  auto trial = Trial::Open(run, options);
  TSTAT_ASSERT_OK(trial);
  std::size_t records = 0;
  for (std::int64_t g = 0; g < kSteps; ++g) {
    auto all = (*trial)->step_records(0, g);
    TSTAT_ASSERT_OK(all);
    for (const TensorStatsRecord& got : *all) {
      TensorStatsRecord want = ReferenceRecord(g, got.tensor_id, got.tensor_id == 0);
      ASSERT_TRUE(want.exponent_histogram.has_value());  // written with one
      want.exponent_histogram.reset();
      ExpectRecordEqual(got, want, "step " + std::to_string(g));
      ++records;
    }
    auto one = (*trial)->record("t0", g);
    TSTAT_ASSERT_OK(one);
    EXPECT_FALSE(one->exponent_histogram.has_value());
    EXPECT_TRUE(one->per_channel.has_value());  // the extras are read
  }
  EXPECT_EQ(records, static_cast<std::size_t>(kSteps * 3 + kSteps / 2));
  // The default reads them.
  auto whole = Trial::Open(run);
  TSTAT_ASSERT_OK(whole);
  auto r = (*whole)->record("t1", 4);
  TSTAT_ASSERT_OK(r);
  EXPECT_TRUE(r->exponent_histogram.has_value());
}

TEST(SegmentCacheTest, KeepsWhatFitsAndReadsAgainWhatWasDropped) {
  TempDir dir;
  const std::string run = WriteRun(dir);
  const std::string worker = run + "/" + WorkerDirName(0) + "/";
  const SegmentFile a{worker + SegmentFileName(0), 0, nullptr},
      b{worker + SegmentFileName(1), 0, nullptr};

  // The run's registry: ids 0..3.
  const auto known = [](std::uint32_t id) { return id < 4; };
  SegmentCache roomy(std::uint64_t{1} << 30);
  for (int i = 0; i < 3; ++i) {
    TSTAT_ASSERT_OK(roomy.Get(0, 0, a, known));
    TSTAT_ASSERT_OK(roomy.Get(0, 1, b, known));
  }
  EXPECT_EQ(roomy.reads(), 2u);
  const std::uint64_t both = roomy.bytes();

  SegmentCache tight(1);  // keeps only the segment just read
  for (int i = 0; i < 3; ++i) {
    auto first = tight.Get(0, 0, a, known);
    TSTAT_ASSERT_OK(first);
    auto again = tight.Get(0, 0, a, known);  // still there
    TSTAT_ASSERT_OK(again);
    EXPECT_EQ(first->get(), again->get());
    TSTAT_ASSERT_OK(tight.Get(0, 1, b, known));
    EXPECT_LT(tight.bytes(), both);
  }
  EXPECT_EQ(tight.reads(), 6u);

  const Status missing =
      tight.Get(0, 9, SegmentFile{worker + SegmentFileName(9), 0, nullptr}, known).status();
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find(SegmentFileName(9)), std::string::npos) << missing.message();
}

// The cache does not read a segment's registry again: its rows are checked
// against the registry the caller holds, and a row of a tensor that
// registry lacks makes the read fail, naming the file.
TEST(SegmentCacheTest, RowsAreCheckedAgainstTheCallersRegistry) {
  TempDir dir;
  const std::string run = WriteRun(dir);
  const SegmentFile a{run + "/" + WorkerDirName(0) + "/" + SegmentFileName(0), 0, nullptr};
  SegmentCache cache(std::uint64_t{1} << 30);
  TSTAT_ASSERT_OK(cache.Get(0, 0, a, [](std::uint32_t id) { return id < 4; }));
  TSTAT_ASSERT_OK(cache.GetSteps(0, 0, a, [](std::uint32_t id) { return id < 4; }));
  SegmentCache strict(std::uint64_t{1} << 30);
  const auto without_t2 = [](std::uint32_t id) { return id < 4 && id != 2; };
  for (const Status& s :
       {strict.Get(0, 0, a, without_t2).status(), strict.GetSteps(0, 0, a, without_t2).status()}) {
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
    EXPECT_NE(s.message().find(SegmentFileName(0)), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace tstat::io::testing
