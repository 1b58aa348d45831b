// AuxReductionTest, confusion matrix and value counts: against the reference
// for every label/prediction dtype pair and the tail/chunk sizes, argmax of
// logits in every floating dtype (ties, NaN rows), cell counts small enough
// for shared-memory bins and too large for them, misaligned buffers,
// hand-checked argmax rules, value counts alone and beside label counts, and
// rejected options naming their field.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "tests/kernels/aux_suite.h"
#include "tests/support/data.h"
#include "tests/support/reference_delta.h"
#include "tstat/engine.h"

namespace tstat::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Integer class ids in [lo, hi], with u8 values kept in [0, 255].
HostTensor RandomIds(DType dtype, std::int64_t n, std::int64_t lo, std::int64_t hi,
                     std::uint64_t seed, std::size_t byte_offset = 0) {
  std::mt19937_64 rng(seed);
  if (dtype == DType::kUInt8) lo = std::max<std::int64_t>(lo, 0);
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  const auto span = static_cast<std::uint64_t>(hi - lo + 1);
  for (auto& x : v) x = lo + static_cast<std::int64_t>(rng() % span);
  return MakeIntegerTensor(dtype, v, {}, byte_offset);
}

// Logits [n, classes] with values from a few levels (so rows have ties) and
// about 3% of rows holding a NaN.
HostTensor RandomLogits(DType dtype, std::int64_t n, int classes, std::uint64_t seed,
                        std::size_t byte_offset = 0) {
  std::mt19937_64 rng(seed);
  std::vector<double> v(static_cast<std::size_t>(n * classes));
  for (auto& x : v) x = static_cast<double>(rng() % 4) - 1.5;
  for (std::int64_t i = 0; i < n; ++i) {
    if (rng() % 32 == 0) v[static_cast<std::size_t>(i * classes + rng() % classes)] = kNaN;
  }
  return MakeTensor(dtype, v, {n, classes}, byte_offset);
}

TEST_P(AuxReductionTest, ConfusionMatchesReferenceForEveryIntegerDtypePair) {
  const int classes = 10;
  for (DType label_dtype : IntegerDTypes()) {
    for (DType pred_dtype : IntegerDTypes()) {
      SCOPED_TRACE(DTypeLabel(label_dtype) + " labels, " + DTypeLabel(pred_dtype) + " predictions");
      std::vector<HostTensor> labels, preds;
      std::vector<ReductionRequest> batch;
      for (std::int64_t n : AuxSizes()) {
        labels.push_back(RandomIds(label_dtype, n, -2, 11, 3 + static_cast<std::uint64_t>(n)));
        preds.push_back(RandomIds(pred_dtype, n, -1, 12, 4 + static_cast<std::uint64_t>(n)));
      }
      for (std::size_t k = 0; k < labels.size(); ++k) {
        batch.push_back(ConfusionRequest(labels[k], classes, preds[k], false));
      }
      const std::vector<ReductionResult> results = Reduce(batch);
      for (std::size_t k = 0; k < labels.size(); ++k) {
        SCOPED_TRACE("numel " + std::to_string(labels[k].numel()));
        ASSERT_TRUE(results[k].confusion.has_value()) << results[k].status.ToString();
        EXPECT_TRUE(ConfusionEquals(*results[k].confusion,
                                    ExpectedConfusion(labels[k], classes, preds[k], false)));
        ASSERT_TRUE(results[k].label_counts.has_value());  // still produced
      }
    }
  }
}

TEST_P(AuxReductionTest, ConfusionArgmaxMatchesReferenceForEveryFloatDtype) {
  const int classes = 7;
  for (DType dtype : FloatDTypes()) {
    SCOPED_TRACE(DTypeLabel(dtype));
    std::vector<HostTensor> labels, logits;
    std::vector<ReductionRequest> batch;
    for (std::int64_t n : AuxSizes()) {
      labels.push_back(RandomIds(DType::kInt64, n, 0, classes, 20 + static_cast<std::uint64_t>(n)));
      logits.push_back(RandomLogits(dtype, n, classes, 21 + static_cast<std::uint64_t>(n)));
    }
    for (std::size_t k = 0; k < labels.size(); ++k) {
      batch.push_back(ConfusionRequest(labels[k], classes, logits[k], true));
    }
    const std::vector<ReductionResult> results = Reduce(batch);
    for (std::size_t k = 0; k < labels.size(); ++k) {
      SCOPED_TRACE("numel " + std::to_string(labels[k].numel()));
      ASSERT_TRUE(results[k].confusion.has_value()) << results[k].status.ToString();
      const ConfusionMatrix want = ExpectedConfusion(labels[k], classes, logits[k], true);
      if (labels[k].numel() >= 1025) {
        EXPECT_GT(want.invalid, 0u);  // NaN rows present
      }
      EXPECT_TRUE(ConfusionEquals(*results[k].confusion, want));
    }
  }
}

// Rows worked out by hand: ties go to the first maximum, any NaN makes the
// row invalid, -0 does not beat +0, all -Inf is class 0.
TEST_P(AuxReductionTest, ConfusionArgmaxRules) {
  const HostTensor labels = MakeIntegerTensor(DType::kInt32, {0, 0, 0, 0, 0, 1, 2, 3});
  // clang-format off
  const std::vector<double> rows = {1,    3,     3,      //  -> 1
                                    kNaN, 5,     1,      //  -> invalid
                                    2,    2,     2,      //  -> 0
                                    -kInf, -kInf, -kInf,  //  -> 0
                                    -0.0, 0.0,   1,      //  -> 2
                                    kInf, 1,     kInf,   //  label 1 -> 0
                                    0.0,  -0.0,  -1,     //  label 2 -> 0
                                    1,    2,     kNaN};  //  label 3: invalid twice over
  // clang-format on
  for (DType dtype :
       {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kFloat8E5M2}) {
    SCOPED_TRACE(DTypeLabel(dtype));
    const HostTensor logits = MakeTensor(dtype, rows, {8, 3});
    const ReductionResult r = ReduceOne(ConfusionRequest(labels, 3, logits, true));
    ASSERT_TRUE(r.confusion.has_value()) << r.status.ToString();
    EXPECT_EQ(r.confusion->classes, 3);
    EXPECT_EQ(r.confusion->invalid, 2u);
    EXPECT_EQ(r.confusion->counts, (std::vector<std::uint64_t>{2, 1, 1, 1, 0, 0, 1, 0, 0}));
  }
}

// 2 and 90 classes fit shared-memory bins on the device (<= 8192 cells), 91
// and more do not; 2048 is the largest matrix.
TEST_P(AuxReductionTest, ConfusionSmallAndLargeMatrices) {
  const std::int64_t n = 70000;
  std::vector<HostTensor> labels, preds;
  std::vector<ReductionRequest> batch;
  const std::vector<int> class_counts = {2, 90, 91, 300, 2048};
  for (int classes : class_counts) {
    labels.push_back(RandomIds(DType::kInt32, n, -1, classes, 31 + classes));
    preds.push_back(RandomIds(DType::kInt64, n, 0, classes, 32 + classes));
    batch.push_back(ConfusionRequest(labels.back(), classes, preds.back(), false));
  }
  const HostTensor arg_labels = RandomIds(DType::kUInt8, 4000, 0, 99, 40);
  const HostTensor arg_logits = RandomLogits(DType::kFloat32, 4000, 100, 41);
  batch.push_back(ConfusionRequest(arg_labels, 100, arg_logits, true));
  const std::vector<ReductionResult> results = Reduce(batch);
  for (std::size_t k = 0; k < class_counts.size(); ++k) {
    SCOPED_TRACE("classes " + std::to_string(class_counts[k]));
    ASSERT_TRUE(results[k].confusion.has_value()) << results[k].status.ToString();
    EXPECT_TRUE(ConfusionEquals(*results[k].confusion,
                                ExpectedConfusion(labels[k], class_counts[k], preds[k], false)));
  }
  ASSERT_TRUE(results.back().confusion.has_value()) << results.back().status.ToString();
  EXPECT_TRUE(ConfusionEquals(*results.back().confusion,
                              ExpectedConfusion(arg_labels, 100, arg_logits, true)));
}

TEST_P(AuxReductionTest, ConfusionWithMisalignedBuffers) {
  const std::int64_t n = 70001;
  const HostTensor labels = RandomIds(DType::kInt64, n, -1, 6, 50, 3);
  const HostTensor preds = RandomIds(DType::kInt32, n, 0, 6, 51, 1);
  const HostTensor logits = RandomLogits(DType::kFloat16, n, 6, 52, 5);
  const HostTensor labels_u8 = RandomIds(DType::kUInt8, n, 0, 6, 53, 7);
  const std::vector<ReductionResult> results =
      Reduce({ConfusionRequest(labels, 6, preds, false), ConfusionRequest(labels, 6, logits, true),
              ConfusionRequest(labels_u8, 6, logits, true)});
  for (const ReductionResult& r : results) {
    ASSERT_TRUE(r.confusion.has_value()) << r.status.ToString();
  }
  EXPECT_TRUE(ConfusionEquals(*results[0].confusion, ExpectedConfusion(labels, 6, preds, false)));
  EXPECT_TRUE(ConfusionEquals(*results[1].confusion, ExpectedConfusion(labels, 6, logits, true)));
  EXPECT_TRUE(
      ConfusionEquals(*results[2].confusion, ExpectedConfusion(labels_u8, 6, logits, true)));
}

TEST_P(AuxReductionTest, ConfusionRejectsBadOptionsNamingTheField) {
  const HostTensor labels = MakeIntegerTensor(DType::kInt32, {0, 1, 2});
  const HostTensor ints = MakeIntegerTensor(DType::kInt64, {0, 1, 1});
  const HostTensor floats = MakeTensor(DType::kFloat32, {0, 1, 1, 0, 1, 1, 0, 1, 1});
  ReductionRequest no_classes = ConfusionRequest(labels, 3, ints, false);
  no_classes.options.label_classes = 0;
  ReductionRequest bad_dtype = ConfusionRequest(labels, 3, ints, false);
  bad_dtype.options.confusion.predictions_dtype = static_cast<DType>(42);
  const HostTensor many = MakeIntegerTensor(DType::kInt32, {0, 1});
  // clang-format off
  const std::vector<ReductionResult> results = Reduce({
      no_classes,
      ConfusionRequest(labels, 3, ints, true),      // argmax of integers
      ConfusionRequest(labels, 3, floats, false),   // floats without argmax
      bad_dtype,
      ConfusionRequest(many, 2049, ints, false),    // too many classes
      ConfusionRequest(labels, 3, ints, false),     // valid
  });
  // clang-format on
  EXPECT_TRUE(RejectedNaming(results[0], "options.confusion.predictions"));
  EXPECT_TRUE(RejectedNaming(results[1], "options.confusion.predictions_dtype"));
  EXPECT_TRUE(RejectedNaming(results[2], "options.confusion.predictions_dtype"));
  EXPECT_TRUE(RejectedNaming(results[3], "options.confusion.predictions_dtype"));
  EXPECT_TRUE(RejectedNaming(results[4], "options.label_classes"));
  for (std::size_t k = 0; k < 5; ++k) EXPECT_FALSE(results[k].confusion.has_value());
  ASSERT_TRUE(results[5].confusion.has_value()) << results[5].status.ToString();
  EXPECT_EQ(results[5].confusion->counts, (std::vector<std::uint64_t>{1, 0, 0, 0, 1, 0, 0, 1, 0}));
}

// ---------------------------------------------------------------------------
TEST_P(AuxReductionTest, ValueCountsMatchReferenceAloneAndWithLabelCounts) {
  constexpr std::int64_t kMin64 = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t kMax64 = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kMin32 = std::numeric_limits<std::int32_t>::min();
  const std::vector<std::int64_t> values = {0, 1, 3, -1, 255, 256, 1, 7, kMin64, kMax64, kMin32};
  for (DType dtype : IntegerDTypes()) {
    SCOPED_TRACE(DTypeLabel(dtype));
    std::vector<HostTensor> tensors;
    std::vector<ReductionRequest> batch;
    for (std::int64_t n : AuxSizes()) {
      std::mt19937_64 rng(60 + static_cast<std::uint64_t>(n));
      std::vector<std::int64_t> v(static_cast<std::size_t>(n));
      for (auto& x : v) {
        const std::uint64_t pick = rng() % 64;
        x = pick < 60 ? static_cast<std::int64_t>(pick % 12) - 2
                      : values[static_cast<std::size_t>(pick % values.size())];
      }
      if (dtype == DType::kUInt8) {
        for (auto& x : v) x &= 0xff;
      }
      tensors.push_back(MakeIntegerTensor(dtype, v));
    }
    for (const HostTensor& t : tensors) {
      for (int classes : {0, 5}) {
        StatsOptions o;
        o.count_values = values;
        o.label_classes = classes;
        batch.push_back(Request(t, o));
      }
    }
    const std::vector<ReductionResult> results = Reduce(batch);
    for (std::size_t k = 0; k < batch.size(); ++k) {
      const HostTensor& t = tensors[k / 2];
      SCOPED_TRACE("numel " + std::to_string(t.numel()) + ", label_classes " +
                   std::to_string(batch[k].options.label_classes));
      ASSERT_TRUE(results[k].status.ok()) << results[k].status.ToString();
      EXPECT_TRUE(ValueCountsEqual(results[k].value_counts,
                                   ReferenceValueCounts(t.data(), dtype, t.numel(), values)));
      EXPECT_EQ(results[k].label_counts.has_value(), batch[k].options.label_classes > 0);
    }
  }
}

TEST_P(AuxReductionTest, ValueCountsWithTheMostValuesAndMisalignedData) {
  std::vector<std::int64_t> values(kMaxCountValues);
  for (int k = 0; k < kMaxCountValues; ++k) values[static_cast<std::size_t>(k)] = 63 - k;
  std::vector<HostTensor> tensors;
  std::vector<ReductionRequest> batch;
  for (const auto& [dtype, offset] : std::vector<std::pair<DType, std::size_t>>{
           {DType::kUInt8, 3}, {DType::kInt32, 1}, {DType::kInt64, 5}, {DType::kInt64, 8}}) {
    tensors.push_back(RandomIds(dtype, 70001, 0, 70, 70 + offset, offset));
    StatsOptions o;
    o.count_values = values;
    batch.push_back(Request(tensors.back(), o));
  }
  const std::vector<ReductionResult> results = Reduce(batch);
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const HostTensor& t = tensors[k];
    ASSERT_TRUE(results[k].status.ok()) << results[k].status.ToString();
    EXPECT_TRUE(ValueCountsEqual(results[k].value_counts,
                                 ReferenceValueCounts(t.data(), t.dtype(), t.numel(), values)));
  }
}

TEST_P(AuxReductionTest, ValueCountsRejectBadOptionsNamingTheField) {
  const HostTensor ints = MakeIntegerTensor(DType::kInt32, {1, 2, 2});
  const HostTensor floats = MakeTensor(DType::kFloat32, {1, 2, 2});
  StatsOptions too_many;
  too_many.count_values.assign(kMaxCountValues + 1, 2);
  StatsOptions on_floats;
  on_floats.count_values = {2};
  StatsOptions fine;
  fine.count_values = {2, 5, 2};
  const std::vector<ReductionResult> results = Reduce(
      {Request(ints, too_many), Request(floats, on_floats), Request(ints, fine), Request(ints)});
  EXPECT_TRUE(RejectedNaming(results[0], "options.count_values"));
  EXPECT_TRUE(RejectedNaming(results[1], "options.count_values"));
  ASSERT_TRUE(results[2].status.ok()) << results[2].status.ToString();
  EXPECT_EQ(results[2].value_counts, (std::vector<std::uint64_t>{2, 0, 2}));
  EXPECT_TRUE(results[3].value_counts.empty());  // none asked for
}

}  // namespace
}  // namespace tstat::testing
