// The auxiliary references (reference_delta.h) against hand-computed results:
// delta rules for NaN/Inf pairs and the strict tolerance boundary, confusion
// cells with out-of-range labels and predictions, argmax ties and NaN rows,
// value counts with duplicates and values a u8 tensor cannot hold.
#include "tests/support/reference_delta.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tests/support/data.h"

namespace tstat::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(ReferenceDeltaTest, NonFinitePairsAndNorms) {
  const HostTensor x = MakeTensor(DType::kFloat32, {2, 0.5, kNaN, kInf, kInf, 1, 0});
  const HostTensor p = MakeTensor(DType::kFloat32, {3, 0.25, kNaN, kInf, -kInf, kNaN, -0.0});
  const DeltaStats d = ReferenceDelta(x.data(), p.data(), DType::kFloat32, 7, 1e-8, 1e-5);
  EXPECT_EQ(d.count, 7u);
  EXPECT_EQ(d.nonfinite_pairs, 4u);
  // (2,3), (0.5,0.25), NaN/NaN, Inf/-Inf, 1/NaN; not Inf/Inf nor 0/-0.
  EXPECT_EQ(d.changed_count, 5u);
  EXPECT_EQ(d.l1, 1.25);
  EXPECT_EQ(d.l2, std::sqrt(1.0625));
  EXPECT_EQ(d.amax, 1.0);
}

TEST(ReferenceDeltaTest, ToleranceBoundaryIsStrict) {
  const double eps = std::ldexp(1.0, -20);
  const HostTensor x = MakeTensor(DType::kFloat64, {1 + eps, 1 + 2 * eps, 1 - eps});
  const HostTensor p = MakeTensor(DType::kFloat64, {1, 1, 1});
  const DeltaStats d = ReferenceDelta(x.data(), p.data(), DType::kFloat64, 3, 0.0, eps);
  EXPECT_EQ(d.changed_count, 1u);  // only 1 + 2 eps exceeds eps * |1|
  EXPECT_EQ(d.nonfinite_pairs, 0u);
  EXPECT_EQ(d.amax, 2 * eps);
  EXPECT_EQ(d.l1, 4 * eps);
}

TEST(ReferenceConfusionTest, IntegerPredictionsWithOutOfRangeLabels) {
  const HostTensor labels = MakeIntegerTensor(DType::kInt32, {0, 1, 2, 1, -1, 3, 2});
  const HostTensor preds = MakeIntegerTensor(DType::kInt64, {0, 2, 2, 1, 0, 0, 3});
  const ConfusionMatrix m =
      ReferenceConfusion(labels.data(), DType::kInt32, 7, 3, preds.data(), DType::kInt64, false);
  EXPECT_EQ(m.classes, 3);
  EXPECT_EQ(m.invalid, 3u);  // label -1, label 3, prediction 3
  EXPECT_EQ(m.counts, (std::vector<std::uint64_t>{1, 0, 0, 0, 1, 1, 0, 0, 1}));
}

TEST(ReferenceConfusionTest, ArgmaxFirstMaximumAndNaNRows) {
  const HostTensor labels = MakeIntegerTensor(DType::kUInt8, {0, 0, 0, 0, 0, 1});
  // clang-format off
  const HostTensor logits = MakeTensor(DType::kFloat32, {1,    3,    3,      // tie: 1
                                                         kNaN, 5,    1,      // invalid
                                                         2,    2,    2,      // 0
                                                         -kInf, -kInf, -kInf,  // 0
                                                         -0.0, 0.0,  1,      // 2
                                                         kInf, 1,    kInf});   // 0
  // clang-format on
  const ConfusionMatrix m =
      ReferenceConfusion(labels.data(), DType::kUInt8, 6, 3, logits.data(), DType::kFloat32, true);
  EXPECT_EQ(m.invalid, 1u);
  EXPECT_EQ(m.counts, (std::vector<std::uint64_t>{2, 1, 1, 1, 0, 0, 0, 0, 0}));
}

TEST(ReferenceValueCountsTest, DuplicatesAndUnrepresentableValues) {
  const HostTensor t = MakeIntegerTensor(DType::kUInt8, {0, 1, 1, 255, 7});
  EXPECT_EQ(ReferenceValueCounts(t.data(), DType::kUInt8, 5, {1, 256, -1, 255, 1}),
            (std::vector<std::uint64_t>{2, 0, 0, 1, 2}));
}

TEST(ReferenceDeltaTest, ComparisonsReportDifferences) {
  DeltaStats a;
  a.count = 3;
  a.l1 = 1.0;
  DeltaStats b = a;
  EXPECT_TRUE(DeltaMatches(a, b, 1e-9));
  b.l1 = 1.0 + 1e-6;
  EXPECT_FALSE(DeltaMatches(a, b, 1e-9));
  b = a;
  b.changed_count = 1;
  EXPECT_FALSE(DeltaMatches(a, b, 1e-9));
}

}  // namespace
}  // namespace tstat::testing
