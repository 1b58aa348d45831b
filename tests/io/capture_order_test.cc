// StatsChunkReader::ReadCaptureOrder (io/read/stats_chunk_reader.h): a
// format 4 segment's stats rows decoded straight into capture order are the
// rows the general way puts in that order (ReadSegment, then
// StepMajorOrder), for segments where every tensor is saved at every step
// and where some are not (steps with fewer records); rows no writer stores
// (positions repeated or out of range, a step the steps table lacks, steps
// out of order, an index of another length) are left to the general way
// (false), and a row of a tensor the registry lacks fails naming the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "io/format/run_layout.h"
#include "io/format/segment_catalog.h"
#include "io/h5/posix_file.h"
#include "io/read/segment_reader.h"
#include "io/read/stats_chunk_reader.h"
#include "io/read/step_major_order.h"
#include "tests/io/io_test_util.h"

namespace tstat::io::testing {
namespace {

constexpr std::int64_t kSteps = 12, kStepsPerSegment = 4;
constexpr std::uint32_t kTensors = 5;

// Tensor 3 only at even steps, tensor 4 only at steps 0 and 1 (the last
// segments have fewer places filled); capture order differs from id order.
std::string WriteRun(const TempDir& dir) {
  return WriteTensorRun(dir, kTensors, kSteps, kStepsPerSegment, {2, 0, 1, 3, 4},
                        [](std::int64_t g, std::uint32_t t) {
                          return !(t == 3 && g % 2 != 0) && !(t == 4 && g > 1);
                        });
}

// A placed row holds `b`'s tensor, flag and stats (its keys are its place).
bool SameRow(const PlacedStatsRow& a, const StatsRow& b) {
  return a.tensor_id == b.tensor_id && a.has_stats == b.has_stats &&
         std::memcmp(&a.s, &b.s, sizeof a.s) == 0;
}

// Whether `stats` (a segment read the general way) has a row of
// (global_step, a's tensor) that `a` holds.
bool HasRow(const std::vector<StatsRow>& stats, std::int64_t global_step, const PlacedStatsRow& a) {
  return std::any_of(stats.begin(), stats.end(), [&](const StatsRow& b) {
    return b.global_step == global_step && SameRow(a, b);
  });
}

class CaptureOrderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    run_ = WriteRun(dir_);
    const std::string worker = run_ + "/" + WorkerDirName(0);
    auto bytes = ReadWholeFile(worker + "/" + kCatalogFileName);
    TSTAT_ASSERT_OK(bytes);
    CatalogFrames f =
        DecodeCatalogFrames(reinterpret_cast<const std::uint8_t*>(bytes->data()), bytes->size());
    ASSERT_TRUE(f.problem.empty()) << f.problem;
    frames_ = std::move(f.entries);
    ASSERT_EQ(frames_.size(), static_cast<std::size_t>(kSteps / kStepsPerSegment));
    auto reader = StatsChunkReader::Make();
    TSTAT_ASSERT_OK(reader);
    reader_ = std::move(reader).value();
  }

  std::string Path(std::size_t seg) const {
    return run_ + "/" + WorkerDirName(0) + "/" + SegmentFileName(static_cast<std::int64_t>(seg));
  }
  // The segment's tables but its stats, as the segment cache reads them.
  SegmentBuffers Tables(std::size_t seg) const {
    RecordTablesRead read;
    read.stats = false;
    auto c = ReadSegmentRecords(Path(seg), known_, nullptr, read);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c->tables) : SegmentBuffers{};
  }
  Result<bool> Read(std::size_t seg, const std::vector<StepRow>& steps,
                    const std::vector<std::uint32_t>& index, std::vector<PlacedStatsRow>* rows,
                    std::vector<std::uint32_t>* per_step,
                    const std::function<bool(std::uint32_t)>& known = {},
                    const StatsLayout* layout = nullptr) {
    return reader_->ReadCaptureOrder(Path(seg), frames_[seg].file_bytes,
                                     layout ? *layout : *frames_[seg].stats_layout, steps, index,
                                     known ? known : known_, rows, per_step);
  }

  TempDir dir_;
  std::string run_;
  std::vector<CatalogEntry> frames_;
  std::unique_ptr<StatsChunkReader> reader_;
  std::function<bool(std::uint32_t)> known_ = [](std::uint32_t id) { return id < kTensors; };
};

TEST_F(CaptureOrderTest, RowsAreTheGeneralWaysInCaptureOrder) {
  for (std::size_t seg = 0; seg < frames_.size(); ++seg) {
    SCOPED_TRACE("segment " + std::to_string(seg));
    ASSERT_TRUE(frames_[seg].stats_layout.has_value());
    auto whole = ReadSegment(Path(seg));
    TSTAT_ASSERT_OK(whole);
    std::vector<std::uint32_t> order;
    StepMajorOrder(whole->tables, &order);
    const SegmentBuffers t = Tables(seg);
    ASSERT_FALSE(t.stats_capture_index.empty());
    std::vector<PlacedStatsRow> rows(3);  // a buffer kept from before: resized, every row written
    std::vector<std::uint32_t> per_step;
    auto placed = Read(seg, t.steps, t.stats_capture_index, &rows, &per_step);
    TSTAT_ASSERT_OK(placed);
    ASSERT_TRUE(*placed);
    ASSERT_EQ(rows.size(), order.size());
    for (std::size_t k = 0; k < order.size(); ++k) {
      EXPECT_TRUE(SameRow(rows[k], whole->tables.stats[order[k]])) << "record " << k;
    }
    // Per step: its records (5 at steps 0 and 1, then 4 or 3).
    ASSERT_EQ(per_step.size(), t.steps.size());
    for (std::size_t s = 0; s < t.steps.size(); ++s) {
      const std::int64_t g = t.steps[s].global_step;
      EXPECT_EQ(per_step[s], 3u + (g % 2 == 0) + (g <= 1)) << "step " << g;
    }
  }
}

// ReadStep: one step's rows, the general way's rows of that step in capture
// order, for every step of every segment (some with fewer records).
TEST_F(CaptureOrderTest, OneStepIsTheGeneralWaysRowsOfThatStep) {
  std::size_t steps_read = 0;
  for (std::size_t seg = 0; seg < frames_.size(); ++seg) {
    SCOPED_TRACE("segment " + std::to_string(seg));
    auto whole = ReadSegment(Path(seg));
    TSTAT_ASSERT_OK(whole);
    std::vector<std::uint32_t> order;
    StepMajorOrder(whole->tables, &order);
    const SegmentBuffers t = Tables(seg);
    for (const StepRow& step : t.steps) {
      std::vector<StatsRow> want;
      for (std::uint32_t i : order) {
        if (whole->tables.stats[i].global_step == step.global_step) {
          want.push_back(whole->tables.stats[i]);
        }
      }
      std::vector<PlacedStatsRow> rows(7);  // a buffer kept from before
      auto placed =
          reader_->ReadStep(Path(seg), frames_[seg].file_bytes, *frames_[seg].stats_layout, t.steps,
                            t.stats_capture_index, known_, step.global_step, &rows);
      TSTAT_ASSERT_OK(placed);
      ASSERT_TRUE(*placed) << "step " << step.global_step;
      ASSERT_EQ(rows.size(), want.size()) << "step " << step.global_step;
      for (std::size_t k = 0; k < want.size(); ++k) {
        EXPECT_TRUE(SameRow(rows[k], want[k])) << "step " << step.global_step << " record " << k;
      }
      ++steps_read;
    }
    // A step the segment lacks: the general way answers.
    std::vector<PlacedStatsRow> rows;
    auto absent = reader_->ReadStep(Path(seg), frames_[seg].file_bytes, *frames_[seg].stats_layout,
                                    t.steps, t.stats_capture_index, known_, kSteps + 5, &rows);
    TSTAT_ASSERT_OK(absent);
    EXPECT_FALSE(*absent);
  }
  EXPECT_EQ(steps_read, static_cast<std::size_t>(kSteps));
}

TEST_F(CaptureOrderTest, RowsNoWriterStoresAreLeftToTheGeneralWay) {
  const std::size_t seg = 1;
  const SegmentBuffers t = Tables(seg);
  std::vector<PlacedStatsRow> rows;
  std::vector<std::uint32_t> per_step;
  auto expect_not_placed = [&](const std::vector<StepRow>& steps,
                               const std::vector<std::uint32_t>& index, const char* what) {
    auto placed = Read(seg, steps, index, &rows, &per_step);
    TSTAT_EXPECT_OK(placed);
    EXPECT_FALSE(placed.ok() && *placed) << what;
    // ReadStep declines as well, for a step the rows do not break too.
    for (std::int64_t g : {steps.front().global_step, steps.back().global_step}) {
      auto one = reader_->ReadStep(Path(seg), frames_[seg].file_bytes, *frames_[seg].stats_layout,
                                   steps, index, known_, g, &rows);
      TSTAT_EXPECT_OK(one);
      EXPECT_FALSE(one.ok() && *one) << what << ", ReadStep of step " << g;
    }
  };
  std::vector<std::uint32_t> index = t.stats_capture_index;
  for (std::size_t r = 0; r < index.size(); ++r) index[r] = 0;  // every row first in its step
  expect_not_placed(t.steps, index, "positions repeated");
  index = t.stats_capture_index;
  index.back() = kTensors;  // past the tensors of the segment
  expect_not_placed(t.steps, index, "a position out of range");
  index = t.stats_capture_index;
  index.pop_back();
  expect_not_placed(t.steps, index, "an index of another length");
  std::vector<StepRow> steps = t.steps;
  steps.erase(steps.begin() + 1);
  expect_not_placed(steps, t.stats_capture_index, "a step the steps table lacks");
  steps = t.steps;
  std::swap(steps[0], steps[1]);
  expect_not_placed(steps, t.stats_capture_index, "steps out of order");
  // A gap in a step's positions (a record missing before its last): the
  // steps of segment 1 hold 3 or 4 of its 4 tensors' records.
  index = t.stats_capture_index;
  for (std::uint32_t& p : index) p += 1;
  expect_not_placed(t.steps, index, "positions with gaps");

  // Layouts that claim more rows than their chunks can hold, refused before
  // anything is sized by them: chunks that overlap, a chunk too small to
  // inflate to its rows.
  const StatsLayout& layout = *frames_[seg].stats_layout;
  ASSERT_GE(layout.chunks.size(), 1u);
  auto expect_layout_refused = [&](const StatsLayout& l,
                                   const std::vector<std::uint32_t>& positions, const char* what) {
    auto placed = Read(seg, t.steps, positions, &rows, &per_step, {}, &l);
    TSTAT_EXPECT_OK(placed);
    EXPECT_FALSE(placed.ok() && *placed) << what;
  };
  StatsLayout crafted = layout;
  crafted.chunks.push_back(crafted.chunks.back());  // the same bytes twice
  crafted.rows += crafted.chunk_rows;
  std::vector<std::uint32_t> longer = t.stats_capture_index;
  longer.resize(static_cast<std::size_t>(crafted.rows), 0);
  expect_layout_refused(crafted, longer, "overlapping chunks");
  crafted = layout;
  crafted.chunks[0].stored_bytes = 1;
  expect_layout_refused(crafted, t.stats_capture_index, "a chunk of 1 stored byte");

  const Status unknown =
      Read(seg, t.steps, t.stats_capture_index, &rows, &per_step, [](std::uint32_t id) {
        return id != 1;
      }).status();
  EXPECT_EQ(unknown.code(), StatusCode::kCorruption) << unknown.ToString();
  EXPECT_NE(unknown.message().find(SegmentFileName(1)), std::string::npos) << unknown.message();
  EXPECT_NE(unknown.message().find("not in the registry"), std::string::npos);
}

// Layouts and positions changed at random, as a crafted catalog or file
// could: the reader never reads outside its buffers (ASan in CI), and
// whatever it places is the file's rows in capture order, else it declines
// (false) or names the damage.
TEST_F(CaptureOrderTest, RandomlyCraftedLayoutsPlaceTheFilesRowsOrNothing) {
  const std::size_t seg = 0;
  auto whole = ReadSegment(Path(seg));
  TSTAT_ASSERT_OK(whole);
  std::vector<std::uint32_t> order;
  StepMajorOrder(whole->tables, &order);
  const SegmentBuffers t = Tables(seg);
  const StatsLayout& layout = *frames_[seg].stats_layout;
  std::mt19937_64 rng(28);
  int placed_count = 0, declined = 0, damaged = 0;
  for (int trial = 0; trial < 400; ++trial) {
    StatsLayout l = layout;
    std::vector<std::uint32_t> index = t.stats_capture_index;
    std::vector<StepRow> steps = t.steps;
    const auto pick = [&](std::uint64_t n) { return n == 0 ? 0 : rng() % n; };
    switch (trial % 8) {
      case 0:
        l.chunks[pick(l.chunks.size())].offset += pick(64) - 32;
        break;
      case 1:
        l.chunks[pick(l.chunks.size())].stored_bytes = static_cast<std::uint32_t>(pick(4096) + 1);
        break;
      case 2:
        l.tensors[pick(l.tensors.size())].count = static_cast<std::uint32_t>(pick(8));
        break;
      case 3:  // the positions still come from the file
        l.rows = pick(2 * l.rows + 2);
        break;
      case 4:
        index[pick(index.size())] = static_cast<std::uint32_t>(pick(8));
        break;
      case 5:
        steps[pick(steps.size())].global_step += static_cast<std::int64_t>(pick(5)) - 2;
        break;
      case 6:
        l.chunk_rows = static_cast<std::uint32_t>(pick(2 * l.chunk_rows) + 1);
        break;
      default:
        l.chunks[pick(l.chunks.size())].crc32 ^= 1u << pick(32);
        break;
    }
    std::vector<PlacedStatsRow> rows(pick(50));
    std::vector<std::uint32_t> per_step;
    // One step of the crafted segment: its rows, or declined, or damage named.
    const std::int64_t g = static_cast<std::int64_t>(pick(kStepsPerSegment + 2));
    std::vector<PlacedStatsRow> one(pick(50));
    Result<bool> one_placed =
        reader_->ReadStep(Path(seg), frames_[seg].file_bytes, l, steps, index, known_, g, &one);
    if (!one_placed.ok()) {
      EXPECT_EQ(one_placed.status().code(), StatusCode::kCorruption) << "trial " << trial;
    } else if (*one_placed) {
      EXPECT_LE(one.size(), static_cast<std::size_t>(kTensors)) << "trial " << trial;
      for (const PlacedStatsRow& r : one) {
        EXPECT_TRUE(HasRow(whole->tables.stats, g, r)) << "trial " << trial;
      }
    }
    Result<bool> placed = Read(seg, steps, index, &rows, &per_step, {}, &l);
    if (!placed.ok()) {
      EXPECT_EQ(placed.status().code(), StatusCode::kCorruption) << placed.status().ToString();
      ++damaged;
      continue;
    }
    if (!*placed) {
      ++declined;
      continue;
    }
    ++placed_count;
    // Placed: the file's rows (the positions may be another valid order of
    // the same rows when the index was changed, so compare as sets per step).
    ASSERT_EQ(rows.size(), order.size()) << "trial " << trial;
    std::size_t k = 0;
    for (std::size_t s = 0; s < per_step.size(); ++s) {
      for (std::uint32_t c = 0; c < per_step[s]; ++c, ++k) {
        EXPECT_TRUE(HasRow(whole->tables.stats, steps[s].global_step, rows[k]))
            << "trial " << trial;
      }
    }
  }
  // Each outcome happens (the mutations reach every branch).
  EXPECT_GT(placed_count, 0);
  EXPECT_GT(declined, 0);
  EXPECT_GT(damaged, 0);
}

}  // namespace
}  // namespace tstat::io::testing
