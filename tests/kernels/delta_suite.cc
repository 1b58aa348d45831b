// AuxReductionTest, delta part: options.delta against the long-double
// reference for every floating dtype and the tail/chunk sizes, misaligned and
// differently aligned (x, previous) pairs, hand-checked NaN/Inf pair rules and
// tolerance boundaries, a tensor against itself, delta beside other requests
// of a batch, rejected options naming their field, and options.delta.next
// (the CPU backends copy the tensor there in the delta pass).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
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

// Previous values for x: equal values, small and large relative changes,
// small absolute changes, sign flips and specials, in random order.
HostTensor MakePrevious(const HostTensor& x, std::uint64_t seed, std::size_t byte_offset = 0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 0.5);
  std::vector<double> v(static_cast<std::size_t>(x.numel()));
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const double xi = x.Value(i);
    double p = xi;
    const std::uint64_t kind = rng() % 12;
    if (kind == 4) {
      p = xi * (1 + 4e-6);  // within rtol = 1e-5 (before rounding to the dtype)
    } else if (kind == 5) {
      p = xi * (1 + 4e-5);  // beyond rtol
    } else if (kind == 6) {
      p = xi + normal(rng);
    } else if (kind == 7) {
      p = xi + 5e-9;  // within atol for small |x|
    } else if (kind == 8) {
      p = -xi;
    } else if (kind == 9) {
      p = (rng() % 2) ? kNaN : xi;
    } else if (kind == 10) {
      p = (rng() % 2) ? kInf : -kInf;
    } else if (kind == 11) {
      p = normal(rng) * 4;
    }  // 0..3: unchanged
    v[static_cast<std::size_t>(i)] = p;
  }
  return MakeTensor(x.dtype(), v, {}, byte_offset);
}

TEST_P(AuxReductionTest, DeltaMatchesReferenceForEveryFloatDtypeAndSize) {
  for (DType dtype : FloatDTypes()) {
    SCOPED_TRACE(DTypeLabel(dtype));
    std::vector<HostTensor> xs, ps;
    std::vector<ReductionRequest> batch;
    for (std::int64_t n : AuxSizes()) {
      xs.push_back(GenerateDefaultTensor(dtype, n, 100 + static_cast<std::uint64_t>(n)));
      ps.push_back(MakePrevious(xs.back(), 7 + static_cast<std::uint64_t>(n)));
    }
    for (std::size_t k = 0; k < xs.size(); ++k) {
      batch.push_back(DeltaRequest(xs[k], ps[k], 1e-8, 1e-5));
    }
    const std::vector<ReductionResult> results = Reduce(batch);
    for (std::size_t k = 0; k < xs.size(); ++k) {
      SCOPED_TRACE("numel " + std::to_string(xs[k].numel()));
      ASSERT_TRUE(results[k].status.ok()) << results[k].status.ToString();
      ASSERT_TRUE(results[k].delta.has_value());
      EXPECT_TRUE(
          DeltaMatches(*results[k].delta, ExpectedDelta(xs[k], ps[k], 1e-8, 1e-5), kDeltaRtol));
      EXPECT_EQ(results[k].stats.count, static_cast<std::uint64_t>(xs[k].numel()));
    }
  }
}

TEST_P(AuxReductionTest, DeltaWithMisalignedAndDifferentlyAlignedPairs) {
  const std::int64_t n = 70001;
  // (x offset, previous offset) in bytes: same 16-byte phase or not, element
  // aligned or not.
  const std::vector<std::pair<std::size_t, std::size_t>> offsets = {{0, 0}, {1, 1},  {8, 8}, {2, 6},
                                                                    {0, 3}, {5, 13}, {4, 20}};
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                      DType::kFloat8E4M3, DType::kFloat8E5M2}) {
    SCOPED_TRACE(DTypeLabel(dtype));
    const HostTensor x0 = GenerateDefaultTensor(dtype, n, 55);
    const HostTensor p0 = MakePrevious(x0, 56);
    const DeltaStats want = ExpectedDelta(x0, p0, 1e-8, 1e-5);
    std::vector<HostTensor> keep;
    std::vector<ReductionRequest> batch;
    for (const auto& [xo, po] : offsets) {
      keep.push_back(WithOffset(x0, xo));
      keep.push_back(WithOffset(p0, po));
      batch.push_back(DeltaRequest(keep[keep.size() - 2], keep.back(), 1e-8, 1e-5));
    }
    const std::vector<ReductionResult> results = Reduce(batch);
    for (std::size_t k = 0; k < offsets.size(); ++k) {
      SCOPED_TRACE("offsets " + std::to_string(offsets[k].first) + "/" +
                   std::to_string(offsets[k].second));
      ASSERT_TRUE(results[k].delta.has_value()) << results[k].status.ToString();
      EXPECT_TRUE(DeltaMatches(*results[k].delta, want, kDeltaRtol));
    }
  }
}

// Expected values worked out by hand: (2,3) and (0.5,0.25) differ by 1 and
// 0.25; NaN/NaN, Inf/-Inf and 1/NaN are changed non-finite pairs, Inf/Inf is
// an unchanged one, 0/-0 is an unchanged finite pair.
TEST_P(AuxReductionTest, DeltaNonFinitePairRules) {
  const std::vector<double> x = {2, 0.5, kNaN, kInf, kInf, 1, 0, -kInf};
  const std::vector<double> p = {3, 0.25, kNaN, kInf, -kInf, kNaN, -0.0, -kInf};
  for (DType dtype :
       {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kFloat8E5M2}) {
    SCOPED_TRACE(DTypeLabel(dtype));
    const HostTensor xt = MakeTensor(dtype, x), pt = MakeTensor(dtype, p);
    const ReductionResult r = ReduceOne(DeltaRequest(xt, pt, 1e-8, 1e-5));
    ASSERT_TRUE(r.delta.has_value()) << r.status.ToString();
    EXPECT_EQ(r.delta->count, 8u);
    EXPECT_EQ(r.delta->nonfinite_pairs, 5u);
    EXPECT_EQ(r.delta->changed_count, 5u);
    EXPECT_EQ(r.delta->l1, 1.25);
    EXPECT_DOUBLE_EQ(r.delta->l2, std::sqrt(1.0625));
    EXPECT_EQ(r.delta->amax, 1.0);
  }
}

TEST_P(AuxReductionTest, DeltaToleranceBoundariesAreStrict) {
  const double eps = std::ldexp(1.0, -20);
  // |d| = eps, 2 eps, eps, 0 against limit 0 + eps * |p| = eps (p = 1).
  const HostTensor x = MakeTensor(DType::kFloat64, {1 + eps, 1 + 2 * eps, 1 - eps, 1});
  const HostTensor p = MakeTensor(DType::kFloat64, {1, 1, 1, 1});
  const ReductionResult strict = ReduceOne(DeltaRequest(x, p, 0.0, eps));
  ASSERT_TRUE(strict.delta.has_value()) << strict.status.ToString();
  EXPECT_EQ(strict.delta->changed_count, 1u);
  EXPECT_EQ(strict.delta->l1, 4 * eps);
  EXPECT_EQ(strict.delta->amax, 2 * eps);
  // atol alone: 2 eps <= atol = 2 eps is unchanged too.
  EXPECT_EQ(ReduceOne(DeltaRequest(x, p, 2 * eps, 0.0)).delta->changed_count, 0u);
  // Zero tolerances: any difference counts.
  EXPECT_EQ(ReduceOne(DeltaRequest(x, p, 0.0, 0.0)).delta->changed_count, 3u);
  // f16: 1 + 2^-10 is the next value after 1.
  const HostTensor h = MakeTensor(DType::kFloat16, {1 + std::ldexp(1.0, -10), 1});
  const HostTensor hp = MakeTensor(DType::kFloat16, {1, 1});
  EXPECT_EQ(ReduceOne(DeltaRequest(h, hp, 0.0, std::ldexp(1.0, -11))).delta->changed_count, 1u);
  EXPECT_EQ(ReduceOne(DeltaRequest(h, hp, 0.0, std::ldexp(1.0, -10))).delta->changed_count, 0u);
}

// A tensor against itself: only NaN elements are changed (NaN != NaN), every
// non-finite element is a non-finite pair, and all norms are 0.
TEST_P(AuxReductionTest, DeltaOfATensorAgainstItself) {
  for (DType dtype : FloatDTypes()) {
    SCOPED_TRACE(DTypeLabel(dtype));
    const HostTensor x = GenerateDefaultTensor(dtype, 70000, 9, {}, 3);
    ReductionRequest r = Request(x);
    r.options.delta.previous = r.tensor.data;
    const ReductionResult out = ReduceOne(r);
    ASSERT_TRUE(out.delta.has_value()) << out.status.ToString();
    EXPECT_GT(out.stats.nan_count, 0u);
    EXPECT_EQ(out.delta->changed_count, out.stats.nan_count);
    EXPECT_EQ(out.delta->nonfinite_pairs, out.stats.nan_count + out.stats.inf_count());
    EXPECT_EQ(out.delta->l1, 0.0);
    EXPECT_EQ(out.delta->l2, 0.0);
    EXPECT_EQ(out.delta->amax, 0.0);
  }
}

TEST_P(AuxReductionTest, DeltaOnlyWhereAskedInAMixedBatch) {
  const HostTensor x = GenerateDefaultTensor(DType::kFloat32, 40000, 12, {}, 4);
  const HostTensor p = MakePrevious(x, 13, 4);
  const HostTensor y = GenerateDefaultTensor(DType::kFloat16, 3000, 14);
  const HostTensor labels = MakeIntegerTensor(DType::kInt32, {0, 1, 1, 2});
  ReductionRequest with_delta = DeltaRequest(x, p, 1e-6, 1e-3);
  with_delta.options.linear_histogram.bins = 50;
  with_delta.options.sample_count = 5;
  StatsOptions label_options;
  label_options.label_classes = 3;
  const std::vector<ReductionResult> results =
      Reduce({Request(y), with_delta, Request(labels, label_options)});
  for (const ReductionResult& r : results) ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_FALSE(results[0].delta.has_value());
  EXPECT_FALSE(results[2].delta.has_value());
  EXPECT_FALSE(results[0].confusion.has_value());
  EXPECT_TRUE(results[0].value_counts.empty());
  ASSERT_TRUE(results[1].delta.has_value());
  EXPECT_TRUE(DeltaMatches(*results[1].delta, ExpectedDelta(x, p, 1e-6, 1e-3), kDeltaRtol));
  EXPECT_TRUE(results[1].linear_histogram.has_value());
  EXPECT_EQ(results[1].stats.count, 40000u);
  ASSERT_TRUE(results[2].label_counts.has_value());
  EXPECT_EQ(results[2].label_counts->counts, (std::vector<std::uint64_t>{1, 2, 1}));
}

TEST_P(AuxReductionTest, DeltaRejectsBadOptionsNamingTheField) {
  const HostTensor x = GenerateDefaultTensor(DType::kFloat32, 100, 1);
  const HostTensor p = MakePrevious(x, 2);
  const HostTensor ints = MakeIntegerTensor(DType::kInt32, {1, 2, 3});
  ReductionRequest on_ints = Request(ints);
  on_ints.options.delta.previous = Place(ints).data;
  std::vector<ReductionRequest> batch = {on_ints};
  const std::vector<std::pair<double, double>> bad_tolerances = {
      {-1e-9, 1e-5}, {kNaN, 1e-5}, {kInf, 1e-5}, {1e-8, -1e-5}, {1e-8, kNaN}, {1e-8, kInf}};
  for (const auto& [atol, rtol] : bad_tolerances) batch.push_back(DeltaRequest(x, p, atol, rtol));
  batch.push_back(DeltaRequest(x, p, 0.0, 0.0));  // valid: still reduced
  const std::vector<ReductionResult> results = Reduce(batch);
  EXPECT_TRUE(RejectedNaming(results[0], "options.delta.previous"));
  for (std::size_t k = 1; k <= 3; ++k) {
    EXPECT_TRUE(RejectedNaming(results[k], "options.delta.atol"));
  }
  for (std::size_t k = 4; k <= 6; ++k) {
    EXPECT_TRUE(RejectedNaming(results[k], "options.delta.rtol"));
  }
  for (std::size_t k = 0; k <= 6; ++k) EXPECT_FALSE(results[k].delta.has_value());
  ASSERT_TRUE(results[7].delta.has_value()) << results[7].status.ToString();
  EXPECT_TRUE(DeltaMatches(*results[7].delta, ExpectedDelta(x, p, 0.0, 0.0), kDeltaRtol));
  // Null previous: delta is off.
  EXPECT_FALSE(ReduceOne(Request(x)).delta.has_value());
}

// Previous values all finite, every third one changed: the pairs of weights
// between two steps, which the CPU pass reduces without its finiteness masks.
HostTensor FinitePrevious(const HostTensor& x, std::uint64_t seed) {
  const HostTensor other = GenerateTensor(x.dtype(), x.numel(), Distribution{}, ValueMix{}, seed);
  std::vector<double> v(static_cast<std::size_t>(x.numel()));
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    v[static_cast<std::size_t>(i)] = i % 3 == 0 ? other.Value(i) : x.Value(i);
  }
  return MakeTensor(x.dtype(), v);
}

TEST_P(AuxReductionTest, DeltaOfFinitePairsMatchesReference) {
  const std::int64_t n = 3 * 32768 + 5;  // several of the CPU pass's blocks, and a tail
  for (DType dtype : FloatDTypes()) {
    SCOPED_TRACE(DTypeLabel(dtype));
    const HostTensor x = GenerateTensor(dtype, n, Distribution{}, ValueMix{}, 21);
    const HostTensor p = FinitePrevious(x, 22);
    const ReductionResult r = ReduceOne(DeltaRequest(x, p, 1e-8, 1e-5));
    ASSERT_TRUE(r.delta.has_value()) << r.status.ToString();
    EXPECT_EQ(r.delta->nonfinite_pairs, 0u);
    EXPECT_GT(r.delta->changed_count, 0u);
    EXPECT_TRUE(DeltaMatches(*r.delta, ExpectedDelta(x, p, 1e-8, 1e-5), kDeltaRtol));
  }
}

// options.delta.next: a backend of host tensors copies the tensor there in
// its delta pass, over previous itself or into another buffer, and reduces
// the same delta as without it; the CUDA backend does not take it.
TEST_P(AuxReductionTest, DeltaNextGetsTheTensorsValues) {
  for (DType dtype : FloatDTypes()) {
    for (std::int64_t n : {std::int64_t{1001}, std::int64_t{3 * 32768 + 5}}) {  // 1 block, several
      SCOPED_TRACE(DTypeLabel(dtype) + " numel " + std::to_string(n));
      const HostTensor x = GenerateDefaultTensor(dtype, n, 41);
      const HostTensor p = MakePrevious(x, 42);
      const ReductionResult plain = ReduceOne(DeltaRequest(x, p, 1e-8, 1e-5));
      ASSERT_TRUE(plain.delta.has_value()) << plain.status.ToString();
      for (bool over_previous : {true, false}) {
        HostTensor previous = WithOffset(p, 0);  // a copy of p, maybe written over
        HostTensor apart(dtype, n);
        void* next = over_previous ? previous.data() : apart.data();
        ReductionRequest r = DeltaRequest(x, previous, 1e-8, 1e-5);
        if (backend_->kind() != BackendKind::kCpu) {
          r.options.delta.next = next;
          const ReductionResult got = ReduceOne(r);
          EXPECT_EQ(got.status.code(), StatusCode::kNotSupported) << got.status.ToString();
          EXPECT_NE(got.status.message().find("options.delta.next"), std::string::npos);
          continue;
        }
        r.options.delta.previous = previous.data();  // read where it is written
        r.options.delta.next = next;
        const ReductionResult got = ReduceOne(r);
        ASSERT_TRUE(got.delta.has_value()) << got.status.ToString();
        EXPECT_EQ(got.delta->changed_count, plain.delta->changed_count);
        EXPECT_EQ(got.delta->nonfinite_pairs, plain.delta->nonfinite_pairs);
        EXPECT_TRUE(SameBits(got.delta->l1, plain.delta->l1) &&
                    SameBits(got.delta->l2, plain.delta->l2) &&
                    SameBits(got.delta->amax, plain.delta->amax));
        EXPECT_EQ(std::memcmp(next, x.data(), x.bytes()), 0);
      }
    }
  }
}

TEST_P(AuxReductionTest, DeltaNextRejectedWithoutPreviousOrOverlapping) {
  if (backend_->kind() != BackendKind::kCpu) GTEST_SKIP() << "the CUDA backend takes no next";
  HostTensor x = GenerateDefaultTensor(DType::kFloat32, 1000, 51);
  HostTensor p = MakePrevious(x, 52);
  HostTensor spare(DType::kFloat32, 1000);
  ReductionRequest no_previous = Request(x);
  no_previous.options.delta.next = spare.data();
  ReductionRequest over_x = DeltaRequest(x, p, 1e-8, 1e-5);
  over_x.tensor = x.View();
  over_x.options.delta.previous = p.data();
  over_x.options.delta.next = static_cast<unsigned char*>(x.data()) + 8;
  ReductionRequest over_previous = over_x;
  over_previous.options.delta.next = static_cast<unsigned char*>(p.data()) + 4;
  const std::vector<ReductionResult> results = Reduce({no_previous, over_x, over_previous});
  for (const ReductionResult& r : results) {
    EXPECT_TRUE(RejectedNaming(r, "options.delta.next"));
    EXPECT_FALSE(r.delta.has_value());
  }
  EXPECT_EQ(std::memcmp(p.data(), MakePrevious(x, 52).data(), p.bytes()), 0);  // not written
}

}  // namespace
}  // namespace tstat::testing
