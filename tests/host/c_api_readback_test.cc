// The run written by the C program (c_api_test.c: TRAIN and EVAL steps,
// tensors at fixed addresses and through a view callback, scalars, an ad-hoc
// tensor with a raw snapshot) is read back through Trial and checked against
// the values the C program wrote, computed here by hand.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/host/host_test_util.h"
#include "tstat/trial.h"

namespace tstat::testing {
namespace {

// Runs `program arg` and returns its exit status (-1 when it did not exit).
int RunProgram(const std::string& program, const std::string& arg) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl(program.c_str(), program.c_str(), arg.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<std::int64_t> GlobalSteps(const std::vector<SeriesPoint>& points, std::size_t n) {
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < points.size() && i < n; ++i) out.push_back(points[i].step.global_step);
  return out;
}

TEST(CApiReadbackTest, TheCProgramsRunReadsBack) {
  TempDir dir;
  const std::string run = dir.path() + "/run";
  ASSERT_EQ(RunProgram(TSTAT_C_API_TEST_BIN, run), 0) << "the C program's own checks failed";

  auto opened = Trial::Open(run);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Trial& trial = *opened.value();
  EXPECT_TRUE(trial.loaded_all_steps());

  // Global steps 0..2 TRAIN (mode 0..2), 3..6 EVAL (mode 0..3), 7 TRAIN
  // (mode 3), then TRAIN steps until the STOP file was seen. "loss" is saved
  // at every step of the first eight, so every EVAL step has data.
  const std::vector<StepKey> eval = trial.steps(Mode::kEval);
  ASSERT_EQ(eval.size(), 4u);
  for (std::int64_t m = 0; m < 4; ++m) {
    EXPECT_EQ(eval[m].global_step, 3 + m);
    EXPECT_EQ(eval[m].mode_step, m);
  }
  const std::vector<StepKey> train = trial.steps(Mode::kTrain);
  ASSERT_GE(train.size(), 5u);  // 0 1 2 7, and at least one step of the STOP loop
  const std::int64_t want_train[4][2] = {{0, 0}, {1, 1}, {2, 2}, {7, 3}};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(train[i].global_step, want_train[i][0]);
    EXPECT_EQ(train[i].mode_step, want_train[i][1]);
  }

  // fc1.weight = {i, -5, -4, ..., 5} at global step i < 8: mean i / 12,
  // min -5, max max(i, 5). EVAL saves every 2nd mode step: EVAL 0 and 2.
  auto eval_mean = trial.series("fc1.weight", StatField::kMean, Mode::kEval);
  ASSERT_TRUE(eval_mean.ok()) << eval_mean.status().ToString();
  ASSERT_EQ(GlobalSteps(*eval_mean, 9), (std::vector<std::int64_t>{3, 5}));
  // Means are accumulated in double (Welford): equal within rounding.
  EXPECT_NEAR((*eval_mean)[0].value, 3.0 / 12.0, 1e-12);
  EXPECT_NEAR((*eval_mean)[1].value, 5.0 / 12.0, 1e-12);
  for (std::int64_t g : {0, 1, 2, 7}) {
    auto s = trial.stats("fc1.weight", g);
    ASSERT_TRUE(s.ok()) << g << ": " << s.status().ToString();
    EXPECT_EQ(s->count, 12u);
    EXPECT_EQ(s->min, -5.0);
    EXPECT_EQ(s->max, std::max<double>(static_cast<double>(g), 5.0));
    EXPECT_NEAR(s->mean, static_cast<double>(g) / 12.0, 1e-12);
  }
  auto info = trial.tensor_info("fc1.weight");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->shape, (std::vector<std::int64_t>{3, 4}));
  EXPECT_EQ(info->collections.front(), "weights");

  // The gradient (view callback): TRAIN only; absent at step 0 (not yet
  // allocated), then the buffers alternate: a = 0.5 * {0..5} (mean 1.25),
  // b = -0.25 * {0..7} (mean -0.875).
  auto grad = trial.series("gradient/fc1.weight", StatField::kMean, Mode::kGlobal);
  ASSERT_TRUE(grad.ok()) << grad.status().ToString();
  ASSERT_GE(grad->size(), 3u);
  EXPECT_EQ(GlobalSteps(*grad, 3), (std::vector<std::int64_t>{1, 2, 7}));
  EXPECT_NEAR((*grad)[0].value, 1.25, 1e-12);
  EXPECT_NEAR((*grad)[1].value, -0.875, 1e-12);
  EXPECT_NEAR((*grad)[2].value, 1.25, 1e-12);
  for (const SeriesPoint& p : *grad) EXPECT_EQ(p.step.mode, Mode::kTrain);
  auto grad_count = trial.stats("gradient/fc1.weight", 2);
  ASSERT_TRUE(grad_count.ok());
  EXPECT_EQ(grad_count->count, 8u);

  // loss = 1 / (i + 1) at global step i, in both modes.
  auto loss = trial.scalar_series("loss");
  ASSERT_TRUE(loss.ok()) << loss.status().ToString();
  ASSERT_EQ(loss->size(), 8u);
  for (std::size_t i = 0; i < 8; ++i) {
    EXPECT_EQ((*loss)[i].step.global_step, static_cast<std::int64_t>(i));
    EXPECT_EQ((*loss)[i].value, 1.0 / static_cast<double>(i + 1));
  }
  auto eval_loss = trial.scalar_series("loss", Mode::kEval);
  ASSERT_TRUE(eval_loss.ok());
  EXPECT_EQ(eval_loss->size(), 4u);

  // The ad-hoc tensor "probe" at step 2, with its raw snapshot.
  auto probe = trial.stats("probe", 2);
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  EXPECT_EQ(probe->mean, 2.0);
  auto raw = trial.raw("probe", 2);
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  EXPECT_EQ(raw->ToDoubles(), (std::vector<double>{1.0, 2.0, 3.0}));

  // Every step saved something (TRAIN saves every step), so the capture
  // totals stored in the run count exactly the saved steps.
  const std::vector<WorkerSummary> workers = trial.workers();
  ASSERT_EQ(workers.size(), 1u);
  const CaptureTotals& t = workers[0].counters.capture;
  EXPECT_EQ(t.steps, trial.steps().size());
  EXPECT_EQ(t.steps_saved, t.steps);
  EXPECT_GT(t.capture_seconds, 0.0);
  EXPECT_LE(t.capture_seconds, t.step_seconds);
}

}  // namespace
}  // namespace tstat::testing
