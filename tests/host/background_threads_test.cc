// tstat's background threads as the operating system sees them: the pipeline
// writer ("tstat-writer") and, with two processors, the capture thread
// ("tstat-capture") run 10 nice levels below the thread that created the
// session (so they never preempt training, torch's workers or the capture's
// OpenMP workers); the in-process rules thread is named "tstat-rules" and
// keeps the creator's priority (EndStep waits for it). Read from
// /proc/self/task/*/{comm,stat}, independently of how tstat sets them.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "host/pipeline/background_thread.h"
#include "tests/host/host_test_util.h"
#include "tstat/session.h"

namespace tstat {
namespace {

// thread name -> nice value, for every thread of this process.
std::multimap<std::string, int> ThreadNiceByName() {
  std::multimap<std::string, int> out;
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return out;
  while (dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const std::string base = std::string("/proc/self/task/") + e->d_name;
    std::string name;
    std::getline(std::ifstream(base + "/comm"), name);
    std::string stat;
    std::getline(std::ifstream(base + "/stat"), stat);
    // Fields after the parenthesised name: state is field 3, nice field 19.
    const std::size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    std::string field;
    int nice = 0;
    for (int i = 3; i <= 19 && rest >> field; ++i) {
      if (i == 19) nice = std::stoi(field);
    }
    out.emplace(name, nice);
  }
  ::closedir(dir);
  return out;
}

TEST(BackgroundThreadsTest, WriterAndCaptureThreadAreNamedAndNicedRulesThreadKeepsPriority) {
  errno = 0;
  const int own = ::getpriority(PRIO_PROCESS, 0);
  ASSERT_EQ(errno, 0);
  testing::TempDir dir;
  SessionConfig config;
  config.out_dir = dir.path() + "/run";
  config.rules.enabled = true;  // the default rule set, in process
  auto session = Session::Create(config);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  float v[4] = {1, 2, 3, 4};
  ASSERT_TRUE((*session)->RegisterTensor({"w", TensorView::Host(v, DType::kFloat32, 4)}).ok());
  ASSERT_TRUE((*session)->EndStep().ok());
  // The capture thread exists where there is a processor for it (the
  // session's own count).
  const bool capture_thread = host::UsableProcessors() > 1;
  // The threads set themselves up when they start: poll briefly.
  std::multimap<std::string, int> threads;
  for (int i = 0; i < 200; ++i) {
    threads = ThreadNiceByName();
    if (threads.count("tstat-writer") && threads.count("tstat-rules") &&
        (!capture_thread || threads.count("tstat-capture"))) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(threads.count("tstat-writer"), 1u);
  EXPECT_EQ(threads.find("tstat-writer")->second, std::min(19, own + 10));
  ASSERT_EQ(threads.count("tstat-rules"), 1u);
  EXPECT_EQ(threads.find("tstat-rules")->second, own);
  if (capture_thread) {
    ASSERT_EQ(threads.count("tstat-capture"), 1u);
    EXPECT_EQ(threads.find("tstat-capture")->second, std::min(19, own + 10));
  }
  ASSERT_TRUE((*session)->Close().ok());
}

}  // namespace
}  // namespace tstat
