// kill -9 test: crash_writer (tests/io/crash_writer.cc) writes the
// deterministic run of crash_formula.h with frequent flushes and reports each
// flushed step; it is killed with SIGKILL at random times, then the run is
// opened with Trial: every step up to the last reported one must be there and
// correct, every step that is there must be correct, and nothing is reported
// damaged (the unflushed segment simply does not exist).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include "io/h5/posix_file.h"
#include "tests/io/crash_formula.h"
#include "tests/io/io_test_util.h"
#include "tstat/trial.h"

namespace tstat::io::testing {
namespace {

// The last "flushed N" line, -1 if none.
std::int64_t LastFlushed(const std::string& text) {
  std::int64_t last = -1;
  std::size_t pos = 0;
  while ((pos = text.find("flushed ", pos)) != std::string::npos) {
    pos += 8;
    const std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) break;  // a partial line: not reported yet
    last = std::atoll(text.substr(pos, end - pos).c_str());
  }
  return last;
}

// Every loaded step must be correct; steps 0..must_have must all be there.
void CheckRun(const std::string& run, std::int64_t must_have, bool closed) {
  auto opened = Trial::Open(run);
  TSTAT_ASSERT_OK(opened);
  Trial& trial = **opened;
  TSTAT_EXPECT_OK(trial.Refresh());  // nothing damaged
  EXPECT_EQ(trial.loaded_all_steps(), closed);
  const std::vector<StepKey> steps = trial.steps();
  ASSERT_GE(static_cast<std::int64_t>(steps.size()), must_have + 1);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const auto g = static_cast<std::int64_t>(i);
    ASSERT_EQ(steps[i].global_step, g) << "steps must be a gap-free prefix";
    EXPECT_EQ(steps[i].mode, CrashStepKey(g).mode);
    EXPECT_EQ(steps[i].mode_step, CrashStepKey(g).mode_step);
    auto records = trial.step_records(0, g);
    TSTAT_ASSERT_OK(records);
    std::size_t k = 0;
    for (int t = 0; t < kCrashTensors; ++t) {
      if (!CrashTensorRecorded(t, g)) continue;
      ASSERT_LT(k, records->size());
      ExpectRecordEqual((*records)[k++], CrashRecord(t, g), "step " + std::to_string(g));
    }
    EXPECT_EQ(k, records->size());
    if (g % 5 == 0) {
      auto raw = trial.raw(CrashTensorName(0), g);
      TSTAT_ASSERT_OK(raw);
      std::vector<double> v = raw->ToDoubles();
      ASSERT_EQ(v.size(), 16u);
      for (int e = 0; e < 16; ++e) EXPECT_EQ(v[e], CrashRawValue(g, e));
    }
  }
  if (steps.empty()) return;  // killed before the first flush: nothing to read
  auto loss = trial.scalar_series("loss");
  TSTAT_ASSERT_OK(loss);
  ASSERT_EQ(loss->size(), steps.size());
  for (std::size_t i = 0; i < loss->size(); ++i) EXPECT_EQ((*loss)[i].value, 1.0 / (i + 1.0));
  EXPECT_EQ(trial.workers()[0].closed, closed);
}

TEST(CrashTest, KilledWriterLosesOnlyUnflushedSteps) {
  std::mt19937_64 rng(20240607);
  const auto start = std::chrono::steady_clock::now();
  int iterations = 0, with_data = 0, tmp_left = 0;
  for (; iterations < 30; ++iterations) {
    TempDir dir;
    const std::string flush_every = std::to_string(1 + rng() % 3);
    Child child = Spawn({TSTAT_CRASH_WRITER, dir.path(), "1000000", flush_every, "300"});
    // Most kills come a random 0-200 ms after the first flush (so that they
    // hit every phase of the writer, mid-flush included, however slow its
    // start-up -- e.g. under a sanitizer); every sixth comes a random time
    // after the start instead, possibly before any flush.
    const bool from_start = iterations % 6 == 5;
    const auto kill_after = std::chrono::milliseconds(rng() % 200);
    std::string out;
    auto since = std::chrono::steady_clock::now();
    bool armed = from_start;
    while (!armed || std::chrono::steady_clock::now() - since < kill_after) {
      Drain(child.out, &out, false);
      if (!armed && (out.find("flushed") != std::string::npos ||
                     std::chrono::steady_clock::now() - since > std::chrono::seconds(5))) {
        armed = true;
        since = std::chrono::steady_clock::now();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ::kill(child.pid, SIGKILL);
    int status = 0;
    ::waitpid(child.pid, &status, 0);
    Drain(child.out, &out, true);
    ::close(child.out);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "crash_writer ended by itself: " << out;
    const std::int64_t last = LastFlushed(out);
    if (last < 0 && !PathExists(dir.Sub("worker-00000"))) continue;  // killed before Open
    if (last >= 0) ++with_data;
    auto files = ListDir(dir.Sub("worker-00000"));
    if (files.ok()) {
      for (const std::string& f : files.value())
        tmp_left += f.size() > 4 && f.substr(f.size() - 4) == ".tmp";
    }
    SCOPED_TRACE("iteration " + std::to_string(iterations) + ", last flushed " +
                 std::to_string(last) + ", flush every " + flush_every);
    CheckRun(dir.path(), last, false);
    if (::testing::Test::HasFailure()) break;
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(25)) break;
  }
  EXPECT_GE(with_data, iterations * 2 / 3) << "most kills should land after some flushes";
  std::printf("%d kills, %d with flushed data, %d left a partial .tmp segment\n", iterations,
              with_data, tmp_left);
}

TEST(CrashTest, CompletedRunIsClosed) {
  TempDir dir;
  Child child = Spawn({TSTAT_CRASH_WRITER, dir.path(), "23", "4", "0"});
  std::string out;
  Drain(child.out, &out, true);
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  ::close(child.out);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_NE(out.find("closed"), std::string::npos);
  CheckRun(dir.path(), 22, true);
}

}  // namespace
}  // namespace tstat::io::testing
