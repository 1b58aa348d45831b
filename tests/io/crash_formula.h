// The deterministic run written by crash_writer (tests/io/crash_writer.cc),
// shared by the crash test; h5py_reads_layout.py re-implements the same
// formulas in Python. All values are exact in binary (multiples of 1/8), so
// comparisons are exact.
//
// Step g: mode EVAL when g % 5 == 4 (mode step g / 5), else TRAIN (mode step
// g - (g + 1) / 5). Tensors "layer<t>/weight", t = 0..7 (ids 0..7); tensor 7
// is registered at step 3 and recorded from then on. Scalar "loss" (id 8) =
// 1 / (g + 1). Raw snapshot of tensor 0 when g % 5 == 0: f32 [4, 4], element
// i = g * 100 + i.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "tstat/stats_record.h"

namespace tstat::io::testing {

inline constexpr int kCrashTensors = 8;
inline constexpr std::uint32_t kCrashLossId = 8;
inline constexpr std::int64_t kCrashLateTensorStep = 3;

inline std::string CrashTensorName(int t) { return "layer" + std::to_string(t) + "/weight"; }

inline StepKey CrashStepKey(std::int64_t g) {
  if (g % 5 == 4) return StepKey{g, Mode::kEval, g / 5};
  return StepKey{g, Mode::kTrain, g - (g + 1) / 5};
}

inline bool CrashTensorRecorded(int t, std::int64_t g) {
  return t < kCrashTensors - 1 || g >= kCrashLateTensorStep;
}

inline TensorStatsRecord CrashRecord(int t, std::int64_t g) {
  TensorStatsRecord r;
  r.tensor_id = static_cast<std::uint32_t>(t);
  TensorStats& s = r.stats;
  s.count = 1000 + static_cast<std::uint64_t>(t);
  s.nan_count = static_cast<std::uint64_t>((g + t) % 3);
  s.finite_count = s.count - s.nan_count;
  s.zero_count = static_cast<std::uint64_t>(t);
  s.neg_count = static_cast<std::uint64_t>((g * 7 + t) % 100);
  s.min = -static_cast<double>(g + 1) - t * 0.5;
  s.max = static_cast<double>(g + 1) * 2.0 + t;
  s.mean = static_cast<double>(g) * 0.25 + t * 0.125;
  s.m2 = (t + 1) * 10.0 + static_cast<double>(g);
  s.l1 = static_cast<double>((g + 1) * (t + 1)) * 1.5;
  s.amax = std::fmax(std::fabs(s.min), std::fabs(s.max));
  const double n = static_cast<double>(s.finite_count);
  s.sum = s.mean * n;
  s.l2 = std::sqrt(s.m2 + n * s.mean * s.mean);
  ExponentHistogram h;
  h.counts[140 + t] = static_cast<std::uint64_t>(g + 1);
  h.counts[150] += static_cast<std::uint64_t>(t + 2);
  r.exponent_histogram = h;
  return r;
}

inline float CrashRawValue(std::int64_t g, int i) { return static_cast<float>(g * 100 + i); }

}  // namespace tstat::io::testing
