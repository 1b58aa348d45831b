// StatField names and values (tstat/trial.h).
#include <cstddef>

#include "tstat/trial.h"

namespace tstat {
namespace {

constexpr const char* kNames[] = {"count",
                                  "finite_count",
                                  "nan_count",
                                  "pos_inf_count",
                                  "neg_inf_count",
                                  "zero_count",
                                  "neg_count",
                                  "subnormal_count",
                                  "band_lo_count",
                                  "band_hi_count",
                                  "small_count",
                                  "min",
                                  "max",
                                  "sum",
                                  "mean",
                                  "variance",
                                  "std",
                                  "l1",
                                  "l2",
                                  "amax"};
constexpr std::size_t kNumFields = sizeof(kNames) / sizeof(kNames[0]);
static_assert(kNumFields == static_cast<std::size_t>(StatField::kAmax) + 1,
              "one name per StatField");

}  // namespace

const char* StatFieldName(StatField f) {
  const auto i = static_cast<std::size_t>(f);
  return i < kNumFields ? kNames[i] : "unknown";
}

bool ParseStatField(const std::string& name, StatField* out) {
  for (std::size_t i = 0; i < kNumFields; ++i) {
    if (name == kNames[i]) {
      *out = static_cast<StatField>(i);
      return true;
    }
  }
  return false;
}

double StatValue(const TensorStats& s, StatField f) {
  switch (f) {
    case StatField::kCount:
      return static_cast<double>(s.count);
    case StatField::kFiniteCount:
      return static_cast<double>(s.finite_count);
    case StatField::kNanCount:
      return static_cast<double>(s.nan_count);
    case StatField::kPosInfCount:
      return static_cast<double>(s.pos_inf_count);
    case StatField::kNegInfCount:
      return static_cast<double>(s.neg_inf_count);
    case StatField::kZeroCount:
      return static_cast<double>(s.zero_count);
    case StatField::kNegCount:
      return static_cast<double>(s.neg_count);
    case StatField::kSubnormalCount:
      return static_cast<double>(s.subnormal_count);
    case StatField::kBandLoCount:
      return static_cast<double>(s.band_lo_count);
    case StatField::kBandHiCount:
      return static_cast<double>(s.band_hi_count);
    case StatField::kSmallCount:
      return static_cast<double>(s.small_count);
    case StatField::kMin:
      return s.min;
    case StatField::kMax:
      return s.max;
    case StatField::kSum:
      return s.sum;
    case StatField::kMean:
      return s.mean;
    case StatField::kVariance:
      return s.variance();
    case StatField::kStd:
      return s.stddev();
    case StatField::kL1:
      return s.l1;
    case StatField::kL2:
      return s.l2;
    case StatField::kAmax:
      return s.amax;
  }
  return 0.0;
}

}  // namespace tstat
