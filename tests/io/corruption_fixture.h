// The run the corruption tests damage (corruption_test.cc: damaged files;
// crafted_segment_test.cc: crafted contents behind valid seals): three
// segments of two tensors with raw snapshots, segment 1 the one damaged, and
// what a damaged run must still answer.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "io/h5/posix_file.h"
#include "tests/io/io_test_util.h"
#include "tstat/trial.h"

namespace tstat::io::testing {

inline constexpr char kBadSegment[] = "seg-000000000001.h5";

inline RawSnapshot StepRaw(std::int64_t g) {
  std::vector<std::uint8_t> bytes(64 * 4);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 7 + g);
  RawSnapshot r;
  r.tensor_id = 0;
  r.dtype = DType::kFloat32;
  r.shape = {8, 8};
  r.bytes = SharedBytes(std::move(bytes));
  return r;
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

class CorruptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto writer = OpenWriterOrDie(dir_.path());
    ASSERT_NE(writer, nullptr);
    TSTAT_ASSERT_OK(writer->RegisterTensors(
        {MakeTensorInfo(0, "a", {}, DType::kFloat32, {8, 8}), MakeTensorInfo(1, "b")}));
    for (std::int64_t g = 0; g < 12; ++g) {  // segments: 0-3, 4-7, 8-11
      StepBatch batch = MakeBatch(g);
      batch.stats = {ReferenceRecord(g, 0, true), ReferenceRecord(g, 1, false)};
      batch.raws = {StepRaw(g)};
      TSTAT_ASSERT_OK(writer->Write(batch));
      if (g % 4 == 3) TSTAT_ASSERT_OK(writer->Flush({}));
    }
    TSTAT_ASSERT_OK(writer->Close({}));
    bad_path_ = dir_.Sub(std::string("worker-00000/") + kBadSegment);
    auto original = ReadWholeFile(bad_path_);
    TSTAT_ASSERT_OK(original);
    original_ = original.value();
  }

  // The run with segment 1 damaged: it is reported, everything else reads.
  void ExpectRestReadable(const std::string& what) {
    SCOPED_TRACE(what);
    auto trial = Trial::Open(dir_.path());
    TSTAT_ASSERT_OK(trial);
    const Status refreshed = (*trial)->Refresh();
    EXPECT_EQ(refreshed.code(), StatusCode::kCorruption) << refreshed.ToString();
    EXPECT_NE(refreshed.message().find(kBadSegment), std::string::npos) << refreshed.message();
    std::vector<StepKey> steps = (*trial)->steps();
    ASSERT_EQ(steps.size(), 8u);
    for (std::int64_t g : {0, 1, 2, 3, 8, 9, 10, 11}) {
      auto rec = (*trial)->record("a", g);
      TSTAT_ASSERT_OK(rec);
      ExpectRecordEqual(rec.value(), ReferenceRecord(g, 0, true), "a");
      auto raw = (*trial)->raw("a", g);
      TSTAT_ASSERT_OK(raw);
      EXPECT_EQ(raw->bytes, StepRaw(g).bytes.ToVector());
    }
    EXPECT_EQ((*trial)->record("a", 5).status().code(), StatusCode::kStepUnavailable);
    EXPECT_TRUE((*trial)->loaded_all_steps());
    EXPECT_EQ((*trial)->WaitForStep(5, Mode::kGlobal, 1.0).code(), StatusCode::kCorruption);
  }

  // The run with segment 1's records damaged, its metadata intact: the run
  // opens with all 12 steps (a Trial reads records when a query needs them),
  // a query that reads segment 1's records is kCorruption naming it and
  // `needle`, and everything else reads. A series reads the stats table
  // alone: it fails when that is what is damaged (kDamaged), and otherwise
  // answers every step; opened from the catalog it reads only the chunks
  // that hold its rows (kEither: what it answers is right, or it fails
  // naming the stats chunk).
  enum class Stats { kIntact, kDamaged, kEither };
  void ExpectRecordsRefused(const std::string& what, const std::string& needle, Stats stats) {
    SCOPED_TRACE(what);
    auto trial = Trial::Open(dir_.path());
    TSTAT_ASSERT_OK(trial);
    TSTAT_EXPECT_OK((*trial)->Refresh());
    EXPECT_EQ((*trial)->steps().size(), 12u);
    for (std::int64_t g : {0, 1, 2, 3, 8, 9, 10, 11}) {
      auto rec = (*trial)->record("a", g);
      TSTAT_ASSERT_OK(rec);
      ExpectRecordEqual(rec.value(), ReferenceRecord(g, 0, true), "a");
    }
    for (std::int64_t g : {4, 5, 6, 7}) {
      const Status s = (*trial)->record("a", g).status();
      EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
      EXPECT_NE(s.message().find(kBadSegment), std::string::npos) << s.message();
      EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
      EXPECT_EQ((*trial)->step_records(0, g).status().code(), StatusCode::kCorruption);
    }
    auto series = (*trial)->series("a", StatField::kMean);
    if (stats == Stats::kEither && !series.ok()) {
      EXPECT_EQ(series.status().code(), StatusCode::kCorruption);
      EXPECT_NE(series.status().message().find("stats chunk"), std::string::npos)
          << series.status().message();
    } else if (stats == Stats::kDamaged) {
      EXPECT_EQ(series.status().code(), StatusCode::kCorruption);
    } else {
      TSTAT_ASSERT_OK(series);
      ASSERT_EQ(series->size(), 12u);
      for (std::int64_t g = 0; g < 12; ++g) {
        EXPECT_EQ((*series)[g].step.global_step, g);
        EXPECT_EQ((*series)[g].value, ReferenceRecord(g, 0, true).stats.mean);
      }
    }
    EXPECT_TRUE((*trial)->loaded_all_steps());
  }

  TempDir dir_;
  std::string bad_path_;
  std::string original_;
};

}  // namespace tstat::io::testing
