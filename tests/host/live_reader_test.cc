// A second process reads a run live while it is written: a child process
// (live_writer.cc) writes TRAIN steps through a Session and holds at two
// gates (half way, and before Close); this process follows the run with
// Trial::WaitForStep/Refresh and sees the step count grow from 10 to 20
// while the writer is still open, then loaded_all_steps() once it closed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "tests/host/host_test_util.h"
#include "tstat/trial.h"

namespace tstat::testing {
namespace {

constexpr int kSteps = 20;

void Touch(const std::string& path) { std::ofstream(path) << "go\n"; }

// The writer process; on destruction opens both gates and reaps it (killing
// it if it does not finish), so a failed assertion never leaves it behind.
class WriterProcess {
 public:
  WriterProcess(const std::string& run, const std::string& gate) : gate_(gate) {
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string steps = std::to_string(kSteps);
      ::execl(TSTAT_LIVE_WRITER_BIN, TSTAT_LIVE_WRITER_BIN, run.c_str(), gate.c_str(),
              steps.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~WriterProcess() {
    if (pid_ <= 0) return;
    Touch(gate_ + "/half");
    Touch(gate_ + "/close");
    for (int i = 0; i < 3000 && Reap(0) < 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  bool started() const { return pid_ > 0; }
  // The exit status once the process ended (-1 while it runs; -2 when it
  // did not exit normally). flags 0 waits, WNOHANG does not.
  int Reap(int flags) {
    int status = 0;
    if (pid_ <= 0) return exit_;
    if (::waitpid(pid_, &status, flags) != pid_) return -1;
    pid_ = 0;
    exit_ = WIFEXITED(status) ? WEXITSTATUS(status) : -2;
    return exit_;
  }

 private:
  std::string gate_;
  pid_t pid_ = -1;
  int exit_ = -1;
};

void ExpectMeans(const Trial& trial, std::size_t n) {
  auto mean = trial.series("w", StatField::kMean, Mode::kTrain);
  ASSERT_TRUE(mean.ok()) << mean.status().ToString();
  ASSERT_EQ(mean->size(), n);
  for (std::size_t g = 0; g < n; ++g) {
    EXPECT_EQ((*mean)[g].step.global_step, static_cast<std::int64_t>(g));
    EXPECT_EQ((*mean)[g].value, static_cast<double>(g + 1));  // mean of {g, g+1, g+2}
  }
}

TEST(LiveReaderTest, SecondProcessSeesStepsGrowBeforeTheWriterCloses) {
  TempDir dir;
  const std::string run = dir.path() + "/run";
  const std::string gate = dir.path() + "/gate";
  ASSERT_EQ(::mkdir(gate.c_str(), 0755), 0);
  WriterProcess writer(run, gate);
  ASSERT_TRUE(writer.started());

  // The run appears once the child created its worker directory.
  std::unique_ptr<Trial> trial;
  for (int i = 0; i < 6000 && !trial; ++i) {
    auto opened = Trial::Open(run);
    if (opened.ok()) {
      trial = std::move(opened).value();
    } else {
      ASSERT_EQ(opened.status().code(), StatusCode::kNotFound) << opened.status().ToString();
      ASSERT_EQ(writer.Reap(WNOHANG), -1) << "the writer ended early";
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ASSERT_NE(trial, nullptr) << "the writer never created the run";

  // First half: the writer holds at the gate after 10 steps.
  Status waited = trial->WaitForStep(kSteps / 2 - 1, Mode::kTrain, 120.0);
  ASSERT_TRUE(waited.ok()) << waited.ToString();
  EXPECT_EQ(trial->steps(Mode::kTrain).size(), static_cast<std::size_t>(kSteps / 2));
  EXPECT_FALSE(trial->loaded_all_steps());
  EXPECT_FALSE(trial->workers().at(0).closed);
  EXPECT_EQ(trial->WaitForStep(kSteps / 2, Mode::kTrain, 0.2).code(), StatusCode::kUnavailable);
  ExpectMeans(*trial, kSteps / 2);

  // Second half: the count grows; the writer is still open (second gate).
  Touch(gate + "/half");
  waited = trial->WaitForStep(kSteps - 1, Mode::kTrain, 120.0);
  ASSERT_TRUE(waited.ok()) << waited.ToString();
  EXPECT_EQ(trial->steps(Mode::kTrain).size(), static_cast<std::size_t>(kSteps));
  EXPECT_FALSE(trial->loaded_all_steps());
  ExpectMeans(*trial, kSteps);

  // Close: loaded_all_steps() turns true; the step after the last never comes.
  Touch(gate + "/close");
  for (int i = 0; i < 12000 && !trial->loaded_all_steps(); ++i) {
    Status s = trial->Refresh();
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(trial->loaded_all_steps());
  EXPECT_EQ(writer.Reap(0), 0);
  EXPECT_EQ(trial->WaitForStep(kSteps, Mode::kTrain, 1.0).code(), StatusCode::kStepUnavailable);
  ExpectMeans(*trial, kSteps);
  auto loss = trial->scalar_series("loss");
  ASSERT_TRUE(loss.ok());
  ASSERT_EQ(loss->size(), static_cast<std::size_t>(kSteps));
  EXPECT_EQ(loss->back().value, 1.0 / kSteps);
  const WorkerSummary w = trial->workers().at(0);
  EXPECT_TRUE(w.closed);
  EXPECT_EQ(w.counters.capture.steps, static_cast<std::uint64_t>(kSteps));
  EXPECT_EQ(w.counters.capture.steps_saved, static_cast<std::uint64_t>(kSteps));
}

}  // namespace
}  // namespace tstat::testing
