// The CPU backend through the auxiliary-reduction suite (delta, confusion
// matrix, value counts) with 1, 2 and 3 OpenMP workers and each ISA's copy of
// the kernels, plus a CPU-only check: the delta pass partitions by fixed
// blocks and accumulates in fixed lanes, so its norms are bitwise the same for
// every worker count and ISA (and counts always are).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tests/kernels/aux_suite.h"
#include "tests/support/backend_under_test.h"
#include "tests/support/data.h"
#include "tstat/engine.h"

namespace tstat::testing {
namespace {

const char* IsaLabel(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kBaseline:
      return "Baseline";
    case CpuIsa::kAvx2:
      return "Avx2";
    case CpuIsa::kAvx512:
      return "Avx512";
    case CpuIsa::kAuto:
      break;
  }
  return "";
}

// A CPU without the ISA gets the widest it has: the case then repeats another.
BackendUnderTest CpuBackend(int threads, CpuIsa isa = CpuIsa::kAuto) {
  BackendUnderTest b;
  b.name = "Cpu" + std::to_string(threads) + "Threads" + IsaLabel(isa);
  b.make = [threads, isa]() {
    CpuBackendOptions o;
    o.threads = threads;
    o.isa = isa;
    return CreateCpuBackend(o);
  };
  b.place = PlaceOnHost;
  return b;
}

INSTANTIATE_TEST_SUITE_P(Cpu, AuxReductionTest,
                         ::testing::Values(CpuBackend(1), CpuBackend(2), CpuBackend(3),
                                           CpuBackend(2, CpuIsa::kAvx2),
                                           CpuBackend(2, CpuIsa::kBaseline)),
                         BackendName);

TEST(CpuAuxTest, ResultsDoNotDependOnTheWorkerCount) {
  const std::int64_t n = 300001;
  const HostTensor x = GenerateDefaultTensor(DType::kFloat32, n, 1);
  const HostTensor p = GenerateDefaultTensor(DType::kFloat32, n, 2);
  const HostTensor labels = GenerateTensor(DType::kInt32, n, Distribution::Uniform(-1, 40), {}, 3);
  const HostTensor preds = GenerateTensor(DType::kInt32, n, Distribution::Uniform(0, 40), {}, 4);
  ReductionRequest dr;
  dr.tensor = x.View();
  dr.options.delta.previous = p.data();
  ReductionRequest cr;
  cr.tensor = labels.View();
  cr.options.label_classes = 40;
  cr.options.confusion.predictions = preds.data();
  cr.options.confusion.predictions_dtype = DType::kInt32;
  cr.options.count_values = {0, 5, 39, -1};
  std::vector<std::vector<ReductionResult>> runs;
  for (int threads : {1, 2, 3}) {
    CpuBackendOptions o;
    o.threads = threads;
    std::vector<ReductionResult> results;
    ASSERT_TRUE(CreateCpuBackend(o)->Reduce({dr, cr}, &results).ok());
    ASSERT_TRUE(results[0].delta.has_value());
    ASSERT_TRUE(results[1].confusion.has_value());
    runs.push_back(std::move(results));
  }
  for (std::size_t k = 1; k < runs.size(); ++k) {
    const DeltaStats& a = *runs[0][0].delta;
    const DeltaStats& b = *runs[k][0].delta;
    EXPECT_EQ(a.changed_count, b.changed_count);
    EXPECT_EQ(a.nonfinite_pairs, b.nonfinite_pairs);
    EXPECT_TRUE(SameBits(a.l1, b.l1) && SameBits(a.l2, b.l2) && SameBits(a.amax, b.amax));
    EXPECT_EQ(runs[0][1].confusion->counts, runs[k][1].confusion->counts);
    EXPECT_EQ(runs[0][1].confusion->invalid, runs[k][1].confusion->invalid);
    EXPECT_EQ(runs[0][1].value_counts, runs[k][1].value_counts);
  }
}

// previous = x with every third value replaced by another tensor's (which
// holds NaN and Inf among ordinary values), so the pairs are a mix of
// unchanged, changed and non-finite ones.
HostTensor PartlyChanged(const HostTensor& x, std::uint64_t seed) {
  const HostTensor other = GenerateDefaultTensor(x.dtype(), x.numel(), seed);
  HostTensor p(x.dtype(), x.numel());
  const std::size_t elem = DTypeSize(x.dtype());
  std::memcpy(p.data(), x.data(), x.bytes());
  for (std::int64_t i = 0; i < x.numel(); i += 3) {
    std::memcpy(
        static_cast<unsigned char*>(p.data()) + static_cast<std::size_t>(i) * elem,
        static_cast<const unsigned char*>(other.data()) + static_cast<std::size_t>(i) * elem, elem);
  }
  return p;
}

TEST(CpuAuxTest, DeltaIsBitwiseTheSameForEveryIsaAndWorkerCount) {
  // One block, several blocks with a tail, and sizes around the 8-pair lanes.
  for (DType dtype :
       {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kFloat8E4M3}) {
    for (std::int64_t n :
         {std::int64_t{7}, std::int64_t{8}, std::int64_t{4099}, std::int64_t{200003}}) {
      SCOPED_TRACE(std::string(DTypeName(dtype)) + " numel " + std::to_string(n));
      const HostTensor x = GenerateDefaultTensor(dtype, n, 11 + static_cast<std::uint64_t>(n));
      const HostTensor p = PartlyChanged(x, 12 + static_cast<std::uint64_t>(n));
      ReductionRequest r;
      r.tensor = x.View();
      r.options.delta.previous = p.data();
      r.options.delta.atol = 1e-8;
      r.options.delta.rtol = 1e-5;
      std::vector<DeltaStats> deltas;
      for (CpuIsa isa : {CpuIsa::kAuto, CpuIsa::kAvx2, CpuIsa::kBaseline}) {
        for (int threads : {1, 2, 3}) {
          CpuBackendOptions o;
          o.threads = threads;
          o.isa = isa;
          std::vector<ReductionResult> results;
          ASSERT_TRUE(CreateCpuBackend(o)->Reduce({r}, &results).ok());
          ASSERT_TRUE(results[0].delta.has_value());
          deltas.push_back(*results[0].delta);
        }
      }
      const DeltaStats& a = deltas[0];
      EXPECT_EQ(a.count, static_cast<std::uint64_t>(n));
      EXPECT_GT(a.changed_count, 0u);
      EXPECT_LT(a.changed_count, a.count);  // two thirds of the pairs are equal
      for (std::size_t k = 1; k < deltas.size(); ++k) {
        SCOPED_TRACE("run " + std::to_string(k));
        const DeltaStats& b = deltas[k];
        EXPECT_EQ(a.changed_count, b.changed_count);
        EXPECT_EQ(a.nonfinite_pairs, b.nonfinite_pairs);
        EXPECT_TRUE(SameBits(a.l1, b.l1) && SameBits(a.l2, b.l2) && SameBits(a.amax, b.amax));
      }
    }
  }
}

// Element i of `t` set to element j of `from` (same dtype), bytes as they are.
void SetElement(HostTensor* t, std::int64_t i, const HostTensor& from, std::int64_t j) {
  const std::size_t elem = DTypeSize(t->dtype());
  std::memcpy(static_cast<unsigned char*>(t->data()) + static_cast<std::size_t>(i) * elem,
              static_cast<const unsigned char*>(from.data()) + static_cast<std::size_t>(j) * elem,
              elem);
}

// The pass reduces a block of finite pairs without the finiteness masks, and
// a block with a non-finite pair again with them. A NaN/NaN pair (masked: +0
// to the norms, changed, non-finite) and an equal finite pair (unmasked: +0,
// unchanged) in the middle block must give the same norms bit for bit, on
// every ISA and worker count.
TEST(CpuAuxTest, DeltaFiniteAndMaskedLoopsAgreeBitwise) {
  const std::int64_t n = 3 * 32768 + 5;
  const std::int64_t at = 32768 + 100;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    SCOPED_TRACE(DTypeName(dtype));
    HostTensor x = GenerateTensor(dtype, n, Distribution{}, ValueMix{}, 61);
    HostTensor p = GenerateTensor(dtype, n, Distribution{}, ValueMix{}, 62);
    for (std::int64_t i = 0; i < n; ++i) {
      if (i % 3 != 0) SetElement(&p, i, x, i);  // two thirds unchanged
    }
    SetElement(&p, at, x, at);
    HostTensor nan_x = WithOffset(x, 0), nan_p = WithOffset(p, 0);
    const HostTensor nan = MakeTensor(dtype, {std::numeric_limits<double>::quiet_NaN()});
    SetElement(&nan_x, at, nan, 0);
    SetElement(&nan_p, at, nan, 0);
    for (CpuIsa isa : {CpuIsa::kAuto, CpuIsa::kAvx2, CpuIsa::kBaseline}) {
      for (int threads : {1, 2}) {
        CpuBackendOptions o;
        o.threads = threads;
        o.isa = isa;
        const auto delta = [&](const HostTensor& a, const HostTensor& b) {
          ReductionRequest r;
          r.tensor = a.View();
          r.options.delta.previous = b.data();
          std::vector<ReductionResult> results;
          EXPECT_TRUE(CreateCpuBackend(o)->Reduce({r}, &results).ok());
          EXPECT_TRUE(results.size() == 1 && results[0].delta.has_value());
          return results.empty() || !results[0].delta ? DeltaStats{} : *results[0].delta;
        };
        const DeltaStats finite = delta(x, p);
        const DeltaStats masked = delta(nan_x, nan_p);
        EXPECT_EQ(finite.nonfinite_pairs, 0u);
        EXPECT_EQ(masked.nonfinite_pairs, 1u);
        EXPECT_EQ(masked.changed_count, finite.changed_count + 1);
        EXPECT_GT(finite.changed_count, static_cast<std::uint64_t>(n / 4));
        EXPECT_TRUE(SameBits(finite.l1, masked.l1) && SameBits(finite.l2, masked.l2) &&
                    SameBits(finite.amax, masked.amax))
            << finite.l1 << " " << masked.l1;
      }
    }
  }
}

}  // namespace
}  // namespace tstat::testing
