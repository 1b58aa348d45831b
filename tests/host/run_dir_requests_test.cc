// RunDirRequests: the training side of RUN/STOP and RUN/capture/ - the check
// interval, applying capture requests in request order (deleted with one
// worker, remembered and kept with several), a damaged request file renamed
// to .bad with one warning, and the stop file's reason; hostile files (a
// FIFO, a link to /dev/zero, a directory, a symlink loop, a huge file) as
// STOP or as a capture request never block or flood the training thread.
#include "host/pipeline/run_dir_requests.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>
#include <utility>
#include <vector>

#include "rules/runtime/actions.h"
#include "tests/io/io_test_util.h"

namespace tstat::host {
namespace {

using io::testing::TempDir;

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

struct Recorder {
  std::vector<std::pair<std::string, int>> captures;
  std::vector<std::string> warnings;
  RunDirRequests Make(const std::string& run, std::int64_t interval_ms, bool delete_applied) {
    return RunDirRequests(
        run, interval_ms, delete_applied,
        [this](const std::string& t, int k) { captures.emplace_back(t, k); },
        [this](const std::string& w) { warnings.push_back(w); });
  }
};

TEST(RunDirRequestsTest, CaptureRequestsAreAppliedOnceInOrderAndDeleted) {
  TempDir dir;
  Recorder rec;
  RunDirRequests requests = rec.Make(dir.path(), 0, /*delete_applied=*/true);
  StopState stop;
  requests.Poll(&stop);  // no capture directory yet: nothing
  EXPECT_TRUE(rec.captures.empty());
  rules::RunDirActionSink sink(dir.path());
  ASSERT_TRUE(sink.RequestRawCapture({"r", StepKey{}, {"a", "b"}, 3}).ok());
  ASSERT_TRUE(sink.RequestRawCapture({"r", StepKey{}, {"c"}, 2}).ok());
  requests.Poll(&stop);
  EXPECT_EQ(rec.captures, (std::vector<std::pair<std::string, int>>{{"a", 3}, {"b", 3}, {"c", 2}}));
  EXPECT_EQ(requests.captures_applied(), 2u);
  EXPECT_TRUE(rules::ListCaptureRequests(dir.path())->empty());  // deleted
  requests.Poll(&stop);
  EXPECT_EQ(rec.captures.size(), 3u);  // not again
  EXPECT_FALSE(stop.stopped());
}

TEST(RunDirRequestsTest, WithSeveralWorkersFilesAreKeptAndEachAppliedOnce) {
  TempDir dir;
  Recorder w0, w1;
  RunDirRequests r0 = w0.Make(dir.path(), 0, /*delete_applied=*/false);
  RunDirRequests r1 = w1.Make(dir.path(), 0, false);
  rules::RunDirActionSink sink(dir.path());
  ASSERT_TRUE(sink.RequestRawCapture({"r", StepKey{}, {"a"}, 4}).ok());
  StopState stop;
  for (int i = 0; i < 3; ++i) {
    r0.Poll(&stop);
    r1.Poll(&stop);
  }
  EXPECT_EQ(w0.captures, (std::vector<std::pair<std::string, int>>{{"a", 4}}));
  EXPECT_EQ(w1.captures, (std::vector<std::pair<std::string, int>>{{"a", 4}}));
  EXPECT_EQ(rules::ListCaptureRequests(dir.path())->size(), 1u);
}

TEST(RunDirRequestsTest, ADamagedRequestIsRenamedAndReportedOnce) {
  TempDir dir;
  Recorder rec;
  RunDirRequests requests = rec.Make(dir.path(), 0, true);
  ASSERT_EQ(::mkdir(dir.Sub("capture").c_str(), 0755), 0);
  std::ofstream(dir.Sub("capture/0001.json")) << "{broken";
  rules::RunDirActionSink sink(dir.path());
  ASSERT_TRUE(sink.RequestRawCapture({"r", StepKey{}, {"good"}, 1}).ok());
  StopState stop;
  requests.Poll(&stop);
  requests.Poll(&stop);
  ASSERT_EQ(rec.warnings.size(), 1u);
  EXPECT_NE(rec.warnings[0].find("0001.json"), std::string::npos) << rec.warnings[0];
  EXPECT_TRUE(Exists(dir.Sub("capture/0001.json.bad")));
  EXPECT_EQ(rec.captures, (std::vector<std::pair<std::string, int>>{{"good", 1}}));
}

TEST(RunDirRequestsTest, TheIntervalBoundsTheChecksAndTheStopReasonQuotesTheFile) {
  TempDir dir;
  Recorder rec;
  RunDirRequests requests = rec.Make(dir.path(), 3600 * 1000, true);
  StopState stop;
  requests.Poll(&stop);  // the first poll always checks
  std::ofstream(dir.Sub("STOP")) << "{\"rule\":\"x\"}\n";
  for (int i = 0; i < 100; ++i) requests.Poll(&stop);
  EXPECT_EQ(requests.checks(), 1u);
  EXPECT_FALSE(stop.stopped());  // not checked again within the hour
  requests.CheckNow(&stop);
  EXPECT_TRUE(stop.stopped());
  EXPECT_EQ(stop.reason(), "stop file " + dir.Sub("STOP") + ": {\"rule\":\"x\"}");
}

class HostileRunFileTest : public ::testing::TestWithParam<std::string> {};

// A STOP of any kind stops, at once, with a reason that says why it was not
// read; nothing blocks (a FIFO without a writer would block a plain open).
TEST_P(HostileRunFileTest, StopStopsWithoutReadingIt) {
  TempDir dir;
  ASSERT_TRUE(io::testing::MakeHostileFile(dir.Sub("STOP"), GetParam()));
  Recorder rec;
  RunDirRequests requests = rec.Make(dir.path(), 0, true);
  StopState stop;
  const auto t0 = std::chrono::steady_clock::now();
  requests.Poll(&stop);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_TRUE(stop.stopped());
  if (GetParam() == "empty") {
    EXPECT_EQ(stop.reason(), "stop file " + dir.Sub("STOP"));
  } else {
    EXPECT_NE(stop.reason().find("reason not read"), std::string::npos) << stop.reason();
  }
}

// A capture request of any kind is renamed to .bad with one warning naming
// why, and the good request next to it is applied.
TEST_P(HostileRunFileTest, CaptureRequestIsRefusedAndTheOthersApplied) {
  TempDir dir;
  ASSERT_EQ(::mkdir(dir.Sub("capture").c_str(), 0755), 0);
  ASSERT_TRUE(io::testing::MakeHostileFile(dir.Sub("capture/0000.json"), GetParam()));
  rules::RunDirActionSink sink(dir.path());
  ASSERT_TRUE(sink.RequestRawCapture({"r", StepKey{}, {"good"}, 1}).ok());
  Recorder rec;
  RunDirRequests requests = rec.Make(dir.path(), 0, true);
  StopState stop;
  const auto t0 = std::chrono::steady_clock::now();
  requests.Poll(&stop);
  requests.Poll(&stop);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  ASSERT_EQ(rec.warnings.size(), 1u);
  EXPECT_NE(rec.warnings[0].find("0000.json"), std::string::npos) << rec.warnings[0];
  EXPECT_NE(rec.warnings[0].find("renamed to .bad"), std::string::npos) << rec.warnings[0];
  EXPECT_EQ(rec.warnings[0].find(dir.Sub("capture/0000.json")),
            rec.warnings[0].rfind(dir.Sub("capture/0000.json")))
      << "the path is named once: " << rec.warnings[0];
  EXPECT_EQ(rec.captures, (std::vector<std::pair<std::string, int>>{{"good", 1}}));
  EXPECT_FALSE(stop.stopped());
}

INSTANTIATE_TEST_SUITE_P(Kinds, HostileRunFileTest,
                         ::testing::ValuesIn(io::testing::HostileFileKinds()));

}  // namespace
}  // namespace tstat::host
