// Multi-worker runs, modes and mode steps, the live-run behaviour of Trial
// (Refresh, WaitForStep, loaded_all_steps) and an in-process writer and
// reader in two threads: a .tmp segment is never read.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <thread>

#include "io/h5/posix_file.h"
#include "tests/io/io_test_util.h"
#include "tstat/trial.h"

namespace tstat::io::testing {
namespace {

// Steps of every worker: global g has mode TRAIN except every 4th (EVAL).
StepKey KeyOf(std::int64_t g) {
  if (g % 4 == 3) return StepKey{g, Mode::kEval, g / 4};  // 3, 7, 11, ...
  return StepKey{g, Mode::kTrain, g - (g + 1) / 4};       // minus the EVALs before g
}

// Writes `steps` steps for `rank`; tensor "shared" in every worker (distinct
// values per rank), "only_rank_1" only in rank 1.
void WriteWorker(const std::string& run, int rank, int world, std::int64_t steps, bool close) {
  auto writer = OpenWriterOrDie(run, rank, world, "{\"rank\": " + std::to_string(rank) + "}");
  ASSERT_NE(writer, nullptr);
  std::vector<TensorInfo> tensors = {MakeTensorInfo(0, "shared")};
  if (rank == 1) tensors.push_back(MakeTensorInfo(1, "only_rank_1"));
  TSTAT_ASSERT_OK(writer->RegisterTensors(tensors));
  for (std::int64_t g = 0; g < steps; ++g) {
    const StepKey k = KeyOf(g);
    StepBatch b = MakeBatch(g, k.mode, k.mode_step);
    b.stats.push_back(SyntheticStatsRecord(g, 100u * static_cast<std::uint32_t>(rank)));
    b.stats.back().tensor_id = 0;
    if (rank == 1) b.stats.push_back(SyntheticStatsRecord(g, 1));
    TSTAT_ASSERT_OK(writer->Write(b));
    if (g % 3 == 2) TSTAT_ASSERT_OK(writer->Flush({}));
  }
  if (close) {
    TSTAT_ASSERT_OK(writer->Close({}));
  } else {
    TSTAT_ASSERT_OK(writer->Flush({}));
  }
}

TensorStats SharedStats(std::int64_t g, int rank) {
  return SyntheticStatsRecord(g, 100u * static_cast<std::uint32_t>(rank)).stats;
}

TEST(MultiWorkerTest, EveryWorkerReadsBack) {
  TempDir dir;
  for (int rank = 0; rank < 3; ++rank) WriteWorker(dir.path(), rank, 3, 10, true);
  auto trial = Trial::Open(dir.path());
  TSTAT_ASSERT_OK(trial);
  Trial& t = **trial;
  EXPECT_TRUE(t.loaded_all_steps());
  std::vector<WorkerSummary> workers = t.workers();
  ASSERT_EQ(workers.size(), 3u);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(workers[rank].rank, rank);
    EXPECT_EQ(workers[rank].host, "host-" + std::to_string(rank));
    EXPECT_TRUE(workers[rank].closed);
    EXPECT_EQ(workers[rank].segments, 4);  // steps {0-2} {3-5} {6-8} {9}
    EXPECT_EQ(t.config_json(rank), "{\"rank\": " + std::to_string(rank) + "}");
    for (std::int64_t g = 0; g < 10; ++g) {
      auto s = t.stats("shared", g, Mode::kGlobal, rank);
      TSTAT_ASSERT_OK(s);
      ExpectStatsEqual(s.value(), SharedStats(g, rank), "rank " + std::to_string(rank));
      auto records = t.step_records(rank, g);
      TSTAT_ASSERT_OK(records);
      EXPECT_EQ(records->size(), rank == 1 ? 2u : 1u);
    }
  }
  // worker = -1: the lowest rank that has the data.
  ExpectStatsEqual(t.stats("shared", 4).value(), SharedStats(4, 0), "default worker");
  ExpectStatsEqual(t.stats("only_rank_1", 4).value(), SyntheticStatsRecord(4, 1).stats,
                   "only in rank 1");
  EXPECT_EQ(t.stats("only_rank_1", 4, Mode::kGlobal, 0).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(t.stats("shared", 4, Mode::kGlobal, 5).status().code(), StatusCode::kNotFound);
  auto series = t.series("shared", StatField::kMean, Mode::kGlobal, 2);
  TSTAT_ASSERT_OK(series);
  ASSERT_EQ(series->size(), 10u);
  EXPECT_EQ((*series)[7].value, SharedStats(7, 2).mean);
}

TEST(MultiWorkerTest, ModeStepsMapBothWays) {
  TempDir dir;
  WriteWorker(dir.path(), 0, 1, 12, true);
  auto trial = Trial::Open(dir.path());
  TSTAT_ASSERT_OK(trial);
  Trial& t = **trial;
  std::vector<StepKey> eval = t.steps(Mode::kEval);
  ASSERT_EQ(eval.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(eval[i].global_step, static_cast<std::int64_t>(4 * i + 3));
    EXPECT_EQ(eval[i].mode_step, static_cast<std::int64_t>(i));
  }
  std::vector<StepKey> train = t.steps(Mode::kTrain);
  ASSERT_EQ(train.size(), 9u);
  for (std::int64_t g = 0; g < 12; ++g) {
    const StepKey k = KeyOf(g);
    auto by_mode = t.stats("shared", k.mode_step, k.mode);
    TSTAT_ASSERT_OK(by_mode);
    ExpectStatsEqual(by_mode.value(), SharedStats(g, 0), "mode step");
  }
  auto eval_series = t.series("shared", StatField::kMax, Mode::kEval);
  TSTAT_ASSERT_OK(eval_series);
  ASSERT_EQ(eval_series->size(), 3u);
  EXPECT_EQ((*eval_series)[2].step.global_step, 11);
  EXPECT_EQ((*eval_series)[2].value, SharedStats(11, 0).max);
  EXPECT_EQ(t.stats("shared", 3, Mode::kEval).status().code(), StatusCode::kStepUnavailable);
  EXPECT_EQ(t.stats("shared", 0, Mode::kPredict).status().code(), StatusCode::kStepUnavailable);
}

TEST(MultiWorkerTest, LiveRunStatesAndWaitForStep) {
  TempDir dir;
  // World of 2: rank 0 closed after 6 steps, rank 1 not started yet.
  WriteWorker(dir.path(), 0, 2, 6, true);
  auto trial = Trial::Open(dir.path());
  TSTAT_ASSERT_OK(trial);
  Trial& t = **trial;
  EXPECT_FALSE(t.loaded_all_steps());  // rank 1 may still write
  TSTAT_EXPECT_OK(t.WaitForStep(5, Mode::kGlobal, 0.0));
  // Step 7 may still come from rank 1: kUnavailable after the timeout.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(t.WaitForStep(7, Mode::kGlobal, 0.2).code(), StatusCode::kUnavailable);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(190));
  EXPECT_EQ(t.record("shared", 7).status().code(), StatusCode::kUnavailable);

  // Rank 1 writes 9 steps without closing: steps up to 8 appear, step 12 is
  // still pending; rank 0 (closed) did not save step 6, rank 1 did.
  WriteWorker(dir.path(), 1, 2, 9, false);
  TSTAT_EXPECT_OK(t.WaitForStep(8, Mode::kGlobal, 5.0));
  EXPECT_EQ(t.WaitForStep(12, Mode::kGlobal, 0.05).code(), StatusCode::kUnavailable);
  EXPECT_FALSE(t.loaded_all_steps());
  ExpectStatsEqual(t.stats("shared", 6).value(), SharedStats(6, 1), "rank 1 at step 6");
  EXPECT_EQ(t.stats("shared", 6, Mode::kGlobal, 0).status().code(), StatusCode::kStepUnavailable);
  EXPECT_FALSE(t.workers()[1].closed);

  // A single-worker run goes from live to loaded_all_steps on Refresh when
  // its writer closes.
  TempDir other;
  auto writer = OpenWriterOrDie(other.path(), 0, 1);
  TSTAT_ASSERT_OK(writer->RegisterTensors({MakeTensorInfo(0, "x")}));
  StepBatch b = MakeBatch(0);
  b.stats.push_back(SyntheticStatsRecord(0, 0));
  TSTAT_ASSERT_OK(writer->Write(b));
  TSTAT_ASSERT_OK(writer->Flush({}));
  auto live = Trial::Open(other.path());
  TSTAT_ASSERT_OK(live);
  EXPECT_FALSE((*live)->loaded_all_steps());
  EXPECT_EQ((*live)->WaitForStep(1, Mode::kGlobal, 0.0).code(), StatusCode::kUnavailable);
  TSTAT_ASSERT_OK(writer->Close({}));
  TSTAT_EXPECT_OK((*live)->Refresh());
  EXPECT_TRUE((*live)->loaded_all_steps());
  EXPECT_EQ((*live)->WaitForStep(1, Mode::kGlobal, 10.0).code(), StatusCode::kStepUnavailable);
}

// The writer (its own thread) writes two steps, then waits until the reader
// has refreshed while those steps are unflushed (and a stray .tmp segment is
// in the directory), then flushes.
TEST(MultiWorkerTest, InProcessWriterAndReaderNeverSeeTmp) {
  TempDir dir;
  std::mutex mutex;
  std::condition_variable cv;
  int phase = 0;  // writer: odd = wrote (not flushed), even = flushed
  std::string tmp_path;
  constexpr int kSegments = 8;

  std::thread writer_thread([&] {
    auto writer = OpenWriterOrDie(dir.path(), 0, 1);
    ASSERT_NE(writer, nullptr);
    TSTAT_ASSERT_OK(writer->RegisterTensors({MakeTensorInfo(0, "w")}));
    for (int s = 0; s < kSegments; ++s) {
      for (std::int64_t g = 2 * s; g < 2 * s + 2; ++g) {
        StepBatch b = MakeBatch(g);
        b.stats.push_back(SyntheticStatsRecord(g, 0));
        TSTAT_ASSERT_OK(writer->Write(b));
      }
      std::unique_lock<std::mutex> lock(mutex);
      tmp_path = writer->TEST_open_segment_path();
      ++phase;
      cv.notify_all();
      cv.wait(lock, [&] { return phase % 2 == 0; });  // the reader looked
      lock.unlock();
      TSTAT_ASSERT_OK(writer->Flush({}));
    }
    TSTAT_ASSERT_OK(writer->Close({}));
  });

  std::unique_ptr<Trial> trial;
  for (int s = 0; s < kSegments; ++s) {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return phase == 2 * s + 1; });
    // A writer killed in the middle of a Flush leaves a .tmp: simulate one
    // (a copy of a complete segment) -- readers must never load it.
    if (s > 0) {
      auto bytes = ReadWholeFile(dir.Sub("worker-00000/seg-000000000000.h5"));
      TSTAT_ASSERT_OK(bytes);
      std::ofstream(tmp_path, std::ios::binary) << bytes.value();
    }
    if (!trial) {
      auto opened = Trial::Open(dir.path());
      TSTAT_ASSERT_OK(opened);
      trial = std::move(opened).value();
    }
    TSTAT_EXPECT_OK(trial->Refresh());
    // Exactly the flushed steps are visible: none of the .tmp's.
    EXPECT_EQ(trial->steps().size(), static_cast<std::size_t>(2 * s));
    EXPECT_EQ(trial->workers()[0].segments, s);
    EXPECT_EQ(trial->record("w", 2 * s).status().code(),
              s == 0 ? StatusCode::kNotFound : StatusCode::kUnavailable);
    ++phase;
    cv.notify_all();
    lock.unlock();
    TSTAT_EXPECT_OK(trial->WaitForStep(2 * s + 1, Mode::kGlobal, 10.0));
    for (std::int64_t g = 2 * s; g < 2 * s + 2; ++g) {
      ExpectRecordEqual(trial->record("w", g).value(), SyntheticStatsRecord(g, 0), "live");
    }
  }
  writer_thread.join();
  TSTAT_EXPECT_OK(trial->Refresh());
  EXPECT_TRUE(trial->loaded_all_steps());
  EXPECT_EQ(trial->steps().size(), static_cast<std::size_t>(2 * kSegments));
}

// No handshake: a writer thread and a reader thread hit HDF5 at the same
// time (the process-wide HDF5 lock must serialise them; run under TSan too).
TEST(MultiWorkerTest, ConcurrentWriterAndReaderThreads) {
  TempDir dir;
  constexpr std::int64_t kSteps = 120;
  std::atomic<std::int64_t> flushed{-1};
  std::thread writer_thread([&] {
    auto writer = OpenWriterOrDie(dir.path(), 0, 1);
    ASSERT_NE(writer, nullptr);
    TSTAT_ASSERT_OK(writer->RegisterTensors({MakeTensorInfo(0, "w"), MakeTensorInfo(1, "v")}));
    for (std::int64_t g = 0; g < kSteps; ++g) {
      StepBatch b = MakeBatch(g);
      b.stats = {ReferenceRecord(g, 0, true), SyntheticStatsRecord(g, 1)};
      b.raws.push_back(RawSnapshot{
          1, DType::kUInt8, {16}, SharedBytes(std::vector<std::uint8_t>(16, g & 0xff))});
      TSTAT_ASSERT_OK(writer->Write(b));
      if (g % 3 == 2) {
        TSTAT_ASSERT_OK(writer->Flush({}));
        flushed = g;
      }
    }
    TSTAT_ASSERT_OK(writer->Close({}));
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto in_time = [&] { return std::chrono::steady_clock::now() < deadline; };
  std::unique_ptr<Trial> trial;
  while (!trial && in_time()) {
    auto opened = Trial::Open(dir.path());
    if (opened.ok()) trial = std::move(opened).value();
  }
  ASSERT_NE(trial, nullptr);
  std::int64_t checked = 0;
  while (!trial->loaded_all_steps() && in_time()) {
    const std::int64_t must = flushed.load();
    TSTAT_ASSERT_OK(trial->Refresh());
    ASSERT_GE(static_cast<std::int64_t>(trial->steps().size()), must + 1);
    for (; checked < static_cast<std::int64_t>(trial->steps().size()); ++checked) {
      ExpectRecordEqual(trial->record("w", checked).value(), ReferenceRecord(checked, 0, true),
                        "concurrent");
      auto raw = trial->raw("v", checked);
      TSTAT_ASSERT_OK(raw);
      EXPECT_EQ(raw->bytes, std::vector<std::uint8_t>(16, checked & 0xff));
    }
  }
  writer_thread.join();
  EXPECT_EQ(checked, kSteps);
}

}  // namespace
}  // namespace tstat::io::testing
