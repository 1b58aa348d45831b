// Runs README's training-loop example (readme_example.cc, built as its own
// program) and checks the run it wrote with the reader: the steps of both
// modes, the save schedule (every 10th mode step; gradients never in EVAL),
// the lazily appearing gradient, and a loss that actually fell.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "tests/host/host_test_util.h"
#include "tstat/trial.h"

namespace tstat {
namespace {

std::vector<std::int64_t> ModeSteps(const std::vector<SeriesPoint>& points) {
  std::vector<std::int64_t> out;
  for (const SeriesPoint& p : points) out.push_back(p.step.mode_step);
  return out;
}

TEST(ReadmeExampleTest, WritesTheRunItDescribes) {
  testing::TempDir dir;
  const std::string run = dir.path() + "/run";
  const std::string command = std::string(TSTAT_README_EXAMPLE_BIN) + " '" + run + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  auto opened = Trial::Open(run);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Trial& trial = *opened.value();
  EXPECT_TRUE(trial.loaded_all_steps());
  // 200 steps: 4 x (45 TRAIN + 5 EVAL); the loss scalar is saved at each.
  EXPECT_EQ(trial.steps(Mode::kTrain).size(), 180u);
  EXPECT_EQ(trial.steps(Mode::kEval).size(), 20u);

  auto weights = trial.series("fc.weight", StatField::kL2, Mode::kTrain);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  std::vector<std::int64_t> every10;
  for (std::int64_t s = 0; s < 180; s += 10) every10.push_back(s);
  EXPECT_EQ(ModeSteps(weights.value()), every10);
  auto eval_weights = trial.series("fc.weight", StatField::kL2, Mode::kEval);
  ASSERT_TRUE(eval_weights.ok());
  EXPECT_EQ(ModeSteps(eval_weights.value()), (std::vector<std::int64_t>{0, 10}));
  // Step 0, by hand: x = (-2, 1, -1, 2, 0, -2, 1, -1), err = -0.5 * sum(x) = 1,
  // so the gradient is x (l2 = sqrt(16) = 4, mean -0.25) and the weight after
  // the update is -0.02 x (l2 = 0.08).
  EXPECT_NEAR(weights.value().front().value, 0.08, 1e-7);
  EXPECT_GT(weights.value().back().value, 0.1);

  // The gradient exists from the first TRAIN step on, in TRAIN only.
  auto grads = trial.series("gradient/fc.weight", StatField::kCount, Mode::kTrain);
  ASSERT_TRUE(grads.ok()) << grads.status().ToString();
  EXPECT_EQ(ModeSteps(grads.value()), every10);
  EXPECT_EQ(grads.value().front().value, 8.0);
  auto g0 = trial.stats("gradient/fc.weight", 0, Mode::kTrain);
  ASSERT_TRUE(g0.ok()) << g0.status().ToString();
  EXPECT_DOUBLE_EQ(g0->l2, 4.0);
  EXPECT_DOUBLE_EQ(g0->mean, -0.25);
  auto eval_grads = trial.series("gradient/fc.weight", StatField::kCount, Mode::kEval);
  EXPECT_TRUE(!eval_grads.ok() || eval_grads.value().empty());
  auto info = trial.tensor_info("gradient/fc.weight");
  ASSERT_TRUE(info.ok());
  const std::vector<std::string>& cols = info->collections;
  EXPECT_NE(std::find(cols.begin(), cols.end(), "gradients"), cols.end());
  EXPECT_EQ(std::find(cols.begin(), cols.end(), "weights"), cols.end());

  // The loss fell by orders of magnitude over training.
  auto loss = trial.scalar_series("loss", Mode::kTrain);
  ASSERT_TRUE(loss.ok()) << loss.status().ToString();
  ASSERT_EQ(loss->size(), 180u);
  double first = 0.0, last = 0.0;
  for (int i = 0; i < 10; ++i) first += (*loss)[i].value;
  for (int i = 170; i < 180; ++i) last += (*loss)[i].value;
  EXPECT_LT(last, first * 1e-3) << "first 10: " << first << ", last 10: " << last;

  // README's h5py reader (readme_h5py.py) sees the same values without tstat.
  const std::string script = std::string("/usr/bin/python3 ") + TSTAT_README_H5PY + " '" + run + "'";
  FILE* pipe = ::popen(script.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof(buf), pipe)) > 0;) out.append(buf, n);
  ASSERT_EQ(::pclose(pipe), 0) << script << "\n" << out;
  std::istringstream lines(out);
  int loss_lines = 0, weight_lines = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("loss\t", 0) == 0) ++loss_lines;
    if (line.rfind("fc.weight\tTRAIN\t170\t", 0) == 0) {
      ++weight_lines;
      const double l2 = std::stod(line.substr(line.find("l2=") + 3));
      EXPECT_NEAR(l2, weights.value().back().value, 1e-5 * l2) << line;
    }
  }
  EXPECT_EQ(loss_lines, 200) << out;
  EXPECT_EQ(weight_lines, 1) << out;
}

}  // namespace
}  // namespace tstat
