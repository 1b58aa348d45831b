// Storage budget: a stats-only step of 1,000 tensors must cost < 150 bytes
// per tensor on disk, amortised over a segment of 10 steps. The stats come
// from real data (256 normal values per tensor and step, per-tensor scale
// over four decades) so the floating-point fields compress like real ones.
// Prints the figures with histograms too, and with a segment per step.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "io/h5/posix_file.h"
#include "tests/io/io_test_util.h"

namespace tstat::io::testing {
namespace {

constexpr int kTensors = 1000;
constexpr int kSteps = 10;

struct Records {
  std::vector<std::vector<TensorStatsRecord>> by_step;
};

// Stats of `values` by the definitions of tstat/stats.h (two-pass m2).
TensorStatsRecord Reduce(std::uint32_t id, const std::vector<double>& values, bool exp_hist,
                         int linear_bins) {
  TensorStatsRecord r;
  r.tensor_id = id;
  TensorStats& s = r.stats;
  s.count = s.finite_count = values.size();
  s.min = values[0];
  s.max = values[0];
  for (double v : values) {
    s.sum += v;
    s.min = std::min(s.min, v);
    s.max = std::max(s.max, v);
    s.l1 += std::fabs(v);
    s.neg_count += v < 0;
    s.zero_count += v == 0;
    s.band_lo_count += v <= -0.97;
    s.band_hi_count += v >= 0.97;
    s.small_count += std::fabs(v) < 1e-7;
  }
  s.mean = s.sum / static_cast<double>(values.size());
  for (double v : values) s.m2 += (v - s.mean) * (v - s.mean);
  s.l2 = std::sqrt(s.m2 + values.size() * s.mean * s.mean);
  s.amax = std::max(std::fabs(s.min), std::fabs(s.max));
  if (exp_hist) {
    ExponentHistogram h;
    for (double v : values) {
      int e = 0;
      std::frexp(v, &e);
      h.counts[ExponentHistogram::BinOf(e - 1)]++;
    }
    r.exponent_histogram = h;
  }
  if (linear_bins > 0) {
    LinearHistogram h;
    h.lo = s.min;
    h.hi = s.max;
    h.counts.assign(linear_bins, 0);
    for (double v : values) {
      int b = static_cast<int>((v - s.min) / (s.max - s.min) * linear_bins);
      h.counts[std::min(b, linear_bins - 1)]++;
    }
    r.linear_histogram = h;
  }
  return r;
}

Records MakeRecords(bool exp_hist, int linear_bins) {
  std::mt19937_64 rng(42);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> decade(-3.0, 1.0);
  std::vector<double> scale(kTensors);
  for (double& s : scale) s = std::pow(10.0, decade(rng));
  Records out;
  std::vector<double> values(256);
  for (int g = 0; g < kSteps; ++g) {
    std::vector<TensorStatsRecord> step;
    for (int t = 0; t < kTensors; ++t) {
      for (double& v : values) v = normal(rng) * scale[t] + 0.01 * scale[t];
      step.push_back(Reduce(static_cast<std::uint32_t>(t), values, exp_hist, linear_bins));
    }
    out.by_step.push_back(std::move(step));
  }
  return out;
}

// Bytes on disk per tensor and step for `records`, flushing every
// `steps_per_segment` steps.
double BytesPerTensorStep(const Records& records, int steps_per_segment, int level = 4) {
  TempDir dir;
  auto writer = OpenWriterOrDie(dir.path(), 0, 1, "{}", level);
  std::vector<TensorInfo> tensors;
  for (int t = 0; t < kTensors; ++t) {
    tensors.push_back(
        MakeTensorInfo(static_cast<std::uint32_t>(t),
                       "model.layers." + std::to_string(t / 10) + ".mlp.w" + std::to_string(t % 10),
                       {"weights"}, DType::kBFloat16, {4096, 1024}));
  }
  EXPECT_TRUE(writer->RegisterTensors(tensors).ok());
  for (int g = 0; g < kSteps; ++g) {
    StepBatch b = MakeBatch(g, Mode::kTrain, g);
    b.stats = records.by_step[g];
    EXPECT_TRUE(writer->Write(b).ok());
    if ((g + 1) % steps_per_segment == 0) {
      EXPECT_TRUE(writer->Flush({}).ok());
    }
  }
  EXPECT_TRUE(writer->Close({}).ok());
  return static_cast<double>(writer->bytes_written()) / (kTensors * kSteps);
}

TEST(StorageBudgetTest, StatsOnlyStepCostsUnder150BytesPerTensor) {
  const Records stats_only = MakeRecords(false, 0);
  const double bytes = BytesPerTensorStep(stats_only, kSteps);
  std::printf("stats only, 10 steps/segment: %.1f bytes per tensor per step\n", bytes);
  EXPECT_LT(bytes, 150.0);
  std::printf("stats only, 1 step/segment:   %.1f bytes per tensor per step\n",
              BytesPerTensorStep(stats_only, 1));
}

// Level 1 is tstat's own encoder (run lengths, and each row against the
// same row of the previous step): it must keep within the budget, and
// within 1.5x of libdeflate's level 4, where its speed is the point.
TEST(StorageBudgetTest, LevelOneStaysWithinTheBudget) {
  const Records stats_only = MakeRecords(false, 0);
  const double level1 = BytesPerTensorStep(stats_only, kSteps, 1);
  const double level4 = BytesPerTensorStep(stats_only, kSteps, 4);
  std::printf(
      "stats only, 10 steps/segment: %.1f bytes per tensor per step at level 1, %.1f at 4\n",
      level1, level4);
  EXPECT_LT(level1, 150.0);
  EXPECT_LT(level1, 1.5 * level4);
  const Records exp = MakeRecords(true, 0);
  const double exp1 = BytesPerTensorStep(exp, kSteps, 1);
  const double exp4 = BytesPerTensorStep(exp, kSteps, 4);
  std::printf("stats + exponent histogram: %.1f bytes per tensor per step at level 1, %.1f at 4\n",
              exp1, exp4);
  EXPECT_LT(exp1, 1.5 * exp4);
}

TEST(StorageBudgetTest, WithHistogramsIsReported) {
  const Records exp = MakeRecords(true, 0);
  const double with_exp = BytesPerTensorStep(exp, kSteps);
  std::printf("stats + exponent histogram, 10 steps/segment: %.1f bytes per tensor per step\n",
              with_exp);
  const Records both = MakeRecords(true, 64);
  const double with_both = BytesPerTensorStep(both, kSteps);
  std::printf("stats + exponent + 64-bin linear histogram:   %.1f bytes per tensor per step\n",
              with_both);
  EXPECT_GT(with_exp, 0.0);
  EXPECT_GT(with_both, with_exp);
}

}  // namespace
}  // namespace tstat::io::testing
