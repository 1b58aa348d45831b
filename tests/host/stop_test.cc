// should_stop: RequestStop from any thread (as the rule engine will), and the
// run's STOP file, noticed by the writer thread within its check interval.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "tests/host/host_test_util.h"
#include "tstat/session.h"

namespace tstat {
namespace {

using testing::MakeSession;
using testing::TestConfig;

TEST(StopTest, RequestStopFromAnotherThread) {
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(TestConfig(), sink);
  EXPECT_FALSE(session->ShouldStop());
  EXPECT_EQ(session->stop_reason(), "");
  std::thread rules([&] { session->RequestStop("VanishingGradient: gradient/fc1 l2 < 1e-7"); });
  int steps = 0;
  while (!session->ShouldStop() && steps < 100000) {
    ASSERT_TRUE(session->EndStep().ok());
    ++steps;
  }
  rules.join();
  EXPECT_TRUE(session->ShouldStop());
  EXPECT_EQ(session->stop_reason(), "VanishingGradient: gradient/fc1 l2 < 1e-7");
  session->RequestStop("a later reason");  // the first one stays
  EXPECT_EQ(session->stop_reason(), "VanishingGradient: gradient/fc1 l2 < 1e-7");
  ASSERT_TRUE(session->Close().ok());
}

TEST(StopTest, StopFileInTheRunDirectory) {
  testing::TempDir dir;
  SessionConfig config = TestConfig();
  config.out_dir = dir.path();
  config.pipeline.stop_check_interval_ms = 20;
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(config, sink);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(session->EndStep().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(session->ShouldStop());
  std::ofstream(dir.path() + "/STOP") << "operator: loss diverged\nsecond line\n";
  const auto t0 = std::chrono::steady_clock::now();
  while (!session->ShouldStop() &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
    ASSERT_TRUE(session->EndStep().ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(session->ShouldStop());
  EXPECT_LT(seconds, 1.0);  // within the 20 ms check interval (plus scheduling)
  EXPECT_NE(session->stop_reason().find("STOP"), std::string::npos) << session->stop_reason();
  EXPECT_NE(session->stop_reason().find("operator: loss diverged"), std::string::npos);
  EXPECT_EQ(session->stop_reason().find("second line"), std::string::npos);
  ASSERT_TRUE(session->Close().ok());
}

}  // namespace
}  // namespace tstat
