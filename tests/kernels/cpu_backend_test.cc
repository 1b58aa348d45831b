// The CPU backend: the conformance suite with 1, 2 and 3 OpenMP threads, plus
// CPU-only checks (kind/description, repeatability per thread count).
#include <gtest/gtest.h>
#include <omp.h>
#include <sched.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/kernels/backend_conformance.h"
#include "tests/support/backend_under_test.h"
#include "tests/support/compare.h"
#include "tests/support/data.h"
#include "tstat/engine.h"

namespace tstat::testing {
namespace {

BackendUnderTest CpuBackend(int threads, CpuIsa isa = CpuIsa::kAuto) {
  BackendUnderTest b;
  static const char* const kIsaSuffix[] = {"", "Avx512", "Avx2", "Baseline"};
  b.name = "Cpu" + std::to_string(threads) + "Threads" + kIsaSuffix[static_cast<int>(isa)];
  b.make = [threads, isa]() {
    CpuBackendOptions o;
    o.threads = threads;
    o.isa = isa;
    return CreateCpuBackend(o);
  };
  b.place = PlaceOnHost;
  return b;
}

// The widest ISA with 1-3 threads, and the narrower tile kernels (which a CPU
// with AVX-512 would otherwise never run) with 2 threads.
INSTANTIATE_TEST_SUITE_P(Cpu, BackendConformanceTest,
                         ::testing::Values(CpuBackend(1), CpuBackend(2), CpuBackend(3),
                                           CpuBackend(2, CpuIsa::kAvx2),
                                           CpuBackend(2, CpuIsa::kBaseline)),
                         BackendName);

// Without a thread count the backend uses OMP_NUM_THREADS, or every processor
// this process may run on -- never the calling thread's omp_set_num_threads
// value, which frameworks (LibTorch) set for their own pools.
TEST(CpuBackendTest, DefaultThreadsIgnoreTheCallersOpenMpSetting) {
  const char* saved_env = std::getenv("OMP_NUM_THREADS");
  const std::string saved = saved_env ? saved_env : "";
  const int saved_icv = omp_get_max_threads();
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  const int usable = CPU_COUNT(&set);

  ::unsetenv("OMP_NUM_THREADS");
  omp_set_num_threads(1);
  EXPECT_EQ(DefaultCpuThreads(), usable);
  EXPECT_NE(CreateCpuBackend()->description().find("(" + std::to_string(usable) + " thread"),
            std::string::npos)
      << CreateCpuBackend()->description();
  ::setenv("OMP_NUM_THREADS", "3,1", 1);
  EXPECT_EQ(DefaultCpuThreads(), 3);
  ::setenv("OMP_NUM_THREADS", "junk", 1);
  EXPECT_EQ(DefaultCpuThreads(), usable);

  omp_set_num_threads(saved_icv);
  if (saved_env) {
    ::setenv("OMP_NUM_THREADS", saved.c_str(), 1);
  } else {
    ::unsetenv("OMP_NUM_THREADS");
  }
}

TEST(CpuBackendTest, ForcedIsaIsNamedInTheDescription) {
  CpuBackendOptions o;
  o.isa = CpuIsa::kBaseline;
  EXPECT_NE(CreateCpuBackend(o)->description().find("x86-64"), std::string::npos);
}

TEST(CpuBackendTest, KindAndDescription) {
  for (int threads : {0, 1, 3}) {
    CpuBackendOptions o;
    o.threads = threads;
    std::unique_ptr<Backend> b = CreateCpuBackend(o);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->kind(), BackendKind::kCpu);
    EXPECT_NE(b->description().find("cpu"), std::string::npos) << b->description();
  }
}

// Same input, same thread count -> bitwise equal results, on fresh backends
// too; a large tensor so every thread has work.
// A results vector passed again (as the session does every step) is reset,
// not rebuilt: nothing of the earlier call survives -- optional parts,
// per-request errors, extra elements -- and the values equal a fresh call's.
TEST(CpuBackendTest, ReusedResultsVectorCarriesNothingOver) {
  const HostTensor a = GenerateDefaultTensor(DType::kFloat32, 5000, 3, {50, 100});
  const HostTensor b = GenerateDefaultTensor(DType::kFloat64, 777, 4, {});
  ReductionRequest rich;
  rich.tensor = a.View();
  rich.options.linear_histogram.bins = 16;
  rich.options.per_channel_axis = 1;
  rich.options.sample_count = 5;
  ReductionRequest bad;  // null data: a per-request error
  bad.tensor = TensorView::Host(nullptr, DType::kFloat32, {4});
  ReductionRequest plain;
  plain.tensor = b.View();
  plain.options.exponent_histogram = false;

  std::unique_ptr<Backend> backend = CreateCpuBackend({2});
  std::vector<ReductionResult> reused;
  ASSERT_TRUE(backend->Reduce({rich, bad, rich}, &reused).ok());
  ASSERT_FALSE(reused[1].status.ok());
  ASSERT_TRUE(reused[0].linear_histogram && reused[0].per_channel && reused[0].sample);

  const std::vector<ReductionRequest> second = {plain, plain};
  ASSERT_TRUE(backend->Reduce(second, &reused).ok());
  std::vector<ReductionResult> fresh;
  ASSERT_TRUE(backend->Reduce(second, &fresh).ok());
  ASSERT_EQ(reused.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(reused[i].status.ok()) << reused[i].status.ToString();
    EXPECT_FALSE(reused[i].exponent_histogram || reused[i].linear_histogram ||
                 reused[i].per_channel || reused[i].sample || reused[i].label_counts ||
                 reused[i].delta || reused[i].confusion)
        << "request " << i;
    EXPECT_TRUE(reused[i].value_counts.empty());
    EXPECT_TRUE(ResultsBitwiseEqual(reused[i], fresh[i])) << "request " << i;
  }
}

// The engine sets each exponent histogram's span (the bins ExponentBins reads)
// to its exact non-zero range: for tensors held whole by one part, for tensors
// split between parts (merged afterwards), for an all-zero and an empty
// tensor, and again for a reused results vector.
TEST(CpuBackendTest, ExponentHistogramSpanIsTheExactNonZeroRange) {
  std::vector<HostTensor> tensors;
  for (int i = 0; i < 40; ++i) {  // small, whole in one part; lengths and alignments vary
    tensors.push_back(GenerateDefaultTensor(DType::kFloat32, 100 + 37 * i,
                                            static_cast<std::uint64_t>(i), {}, i % 5));
  }
  // Values 40 octaves deep (below a vectorized window: binned one by one),
  // float subnormals, a NaN (the exact fallback tile), narrow floats, and a
  // float64 tensor whole in one part.
  std::vector<double> wide, with_nan;
  for (int k = 0; k < 2000; ++k)
    wide.push_back((k % 2 ? -1.0 : 1.0) * std::ldexp(1.5, 10 - k % 40));
  wide[7] = 1e-40;  // float subnormal
  with_nan = wide;
  with_nan[1500] = std::nan("");
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    tensors.push_back(MakeTensor(t, wide));
  tensors.push_back(MakeTensor(DType::kFloat32, with_nan));
  tensors.push_back(GenerateDefaultTensor(DType::kFloat64, 700, 5));
  tensors.push_back(GenerateDefaultTensor(DType::kFloat64, 3000001, 99, {}, 3));  // split
  std::vector<float> zeros(5000, 0.0f), one_huge(300, 0.0f);
  one_huge[123] = 3.0e38f;  // bin 277 only
  std::vector<ReductionRequest> requests;
  for (const HostTensor& h : tensors) requests.push_back({h.View(), StatsOptions{}});
  requests.push_back({TensorView::Host(zeros.data(), DType::kFloat32, {5000}), StatsOptions{}});
  requests.push_back({TensorView::Host(one_huge.data(), DType::kFloat32, {300}), StatsOptions{}});
  requests.push_back({TensorView::Host(zeros.data(), DType::kFloat32, {0}), StatsOptions{}});
  for (int threads : {1, 2, 3}) {
    std::unique_ptr<Backend> backend = CreateCpuBackend({threads});
    std::vector<ReductionResult> results;
    for (int run = 0; run < 2; ++run) {  // the second run reuses `results`
      ASSERT_TRUE(backend->Reduce(requests, &results).ok());
      ASSERT_EQ(results.size(), requests.size());
      for (std::size_t i = 0; i < results.size(); ++i) {
        SCOPED_TRACE(std::to_string(threads) + " threads, run " + std::to_string(run) +
                     ", request " + std::to_string(i));
        ASSERT_TRUE(results[i].status.ok()) << results[i].status.ToString();
        ASSERT_TRUE(results[i].exponent_histogram);
        const ExponentHistogram& h = *results[i].exponent_histogram;
        const bool empty_tensor = i + 1 == results.size();
        const NonZeroBins range = FindNonZeroBins(h.counts.data(), kExpHistBins);
        if (empty_tensor) {  // nothing reduced: the default span, no bins
          EXPECT_EQ(range.count, 0);
          continue;
        }
        EXPECT_EQ(h.span_begin, range.first);
        EXPECT_EQ(h.span_end, range.first + range.count);
        ExponentHistogram full = h;
        full.ClearSpan();
        EXPECT_TRUE(ExponentBins(h) == ExponentBins(full));
        EXPECT_EQ(ExponentBins(h).counts, ExponentBins(full).counts);
      }
      const ExponentHistogram& huge = *results[results.size() - 2].exponent_histogram;
      EXPECT_EQ(huge.span_begin, ExponentHistogram::BinOf(127));
      EXPECT_EQ(huge.span_end, ExponentHistogram::BinOf(127) + 1);
      const ExponentHistogram& zero = *results[results.size() - 3].exponent_histogram;
      EXPECT_EQ(zero.span_end - zero.span_begin, 0);
    }
  }
}

// A results vector reused for different requests gives what a fresh one
// gives: every slot's histogram (all 279 bins and the span) is that of its new
// tensor, whatever the slot held -- other bins, an empty tensor, a split one
// -- and a slot whose new request asks for no histogram (or label counts, or
// is invalid) has none.
TEST(CpuBackendTest, ReusedResultsHoldNothingOfTheirPreviousRequest) {
  std::vector<HostTensor> tensors;
  for (int i = 0; i < 24; ++i) {  // scales vary: the tensors' bins differ
    HostTensor t = GenerateDefaultTensor(DType::kFloat32, 200 + 53 * i,
                                         static_cast<std::uint64_t>(i), {}, i % 5);
    // The data is misaligned on purpose (the last argument): scaled through memcpy.
    auto* bytes = static_cast<unsigned char*>(t.data());
    const float scale = std::ldexp(1.0f, (i * 7) % 40 - 20);
    for (std::int64_t k = 0; k < t.numel(); ++k) {
      float x;
      std::memcpy(&x, bytes + k * 4, 4);
      x *= scale;
      std::memcpy(bytes + k * 4, &x, 4);
    }
    tensors.push_back(std::move(t));
  }
  tensors.push_back(GenerateDefaultTensor(DType::kFloat64, 2000001, 5, {}, 1));  // split
  std::vector<std::int32_t> labels(64, 1);
  std::vector<float> empty(1, 0.0f);
  auto requests_for = [&](int shift) {
    std::vector<ReductionRequest> requests;
    const std::size_t n = tensors.size();
    for (std::size_t i = 0; i < n; ++i) {
      requests.push_back({tensors[(i + static_cast<std::size_t>(shift)) % n].View(), {}});
    }
    requests.push_back({TensorView::Host(empty.data(), DType::kFloat32, {0}), {}});
    if (shift % 2 == 1) {  // slots that held histograms get none
      requests[3].options.exponent_histogram = false;
      requests[4].options.label_classes = 4;
      requests[4].tensor = TensorView::Host(labels.data(), DType::kInt32, {64});
      requests[5].tensor.data = nullptr;        // invalid
      std::swap(requests[6], requests.back());  // the empty tensor moves
    }
    return requests;
  };
  for (int threads : {1, 2, 3}) {
    std::unique_ptr<Backend> backend = CreateCpuBackend({threads});
    std::vector<ReductionResult> reused;
    for (int shift = 0; shift < 4; ++shift) {
      const std::vector<ReductionRequest> requests = requests_for(shift * 5);
      ASSERT_TRUE(backend->Reduce(requests, &reused).ok());
      std::vector<ReductionResult> fresh;
      ASSERT_TRUE(backend->Reduce(requests, &fresh).ok());
      for (std::size_t i = 0; i < requests.size(); ++i) {
        SCOPED_TRACE(std::to_string(threads) + " threads, shift " + std::to_string(shift) +
                     ", slot " + std::to_string(i));
        EXPECT_EQ(reused[i].status.ok(), fresh[i].status.ok());
        ASSERT_EQ(reused[i].exponent_histogram.has_value(),
                  fresh[i].exponent_histogram.has_value());
        if (!fresh[i].exponent_histogram) continue;
        const ExponentHistogram& got = *reused[i].exponent_histogram;
        const ExponentHistogram& want = *fresh[i].exponent_histogram;
        EXPECT_TRUE(got.counts == want.counts);
        EXPECT_EQ(got.span_begin, want.span_begin);
        EXPECT_EQ(got.span_end, want.span_end);
        EXPECT_EQ(reused[i].stats.count, fresh[i].stats.count);
      }
    }
  }
}

TEST(CpuBackendTest, RepeatedRunsWithTheSameThreadCountAreIdentical) {
  const std::int64_t n = QuickMode() ? 300001 : 2000003;
  std::vector<HostTensor> tensors;
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kBFloat16, DType::kInt64}) {
    tensors.push_back(GenerateDefaultTensor(t, n, 17 + static_cast<std::uint64_t>(t), {}, 5));
  }
  tensors.push_back(GenerateDefaultTensor(DType::kFloat16, 300000, 3, {100, 30, 100}));
  std::vector<ReductionRequest> requests;
  for (const HostTensor& h : tensors) {
    ReductionRequest r;
    r.tensor = h.View();
    r.options.linear_histogram.bins = 257;
    r.options.sample_count = 33;
    if (!h.shape().empty()) r.options.per_channel_axis = 1;
    requests.push_back(r);
  }
  for (int threads : {1, 2, 3, 4}) {
    CpuBackendOptions o;
    o.threads = threads;
    std::vector<ReductionResult> first;
    for (int run = 0; run < 3; ++run) {
      std::unique_ptr<Backend> b = CreateCpuBackend(o);
      std::vector<ReductionResult> results;
      ASSERT_TRUE(b->Reduce(requests, &results).ok());
      ASSERT_EQ(results.size(), requests.size());
      std::vector<ReductionResult> again;
      ASSERT_TRUE(b->Reduce(requests, &again).ok());
      for (std::size_t i = 0; i < results.size(); ++i) {
        EXPECT_TRUE(ResultsBitwiseEqual(results[i], again[i]))
            << threads << " threads, same backend, request " << i;
        if (run > 0) {
          EXPECT_TRUE(ResultsBitwiseEqual(results[i], first[i]))
              << threads << " threads, run " << run << ", request " << i;
        }
      }
      if (run == 0) first = std::move(results);
    }
  }
}

// The CPU backend reads host memory only.
TEST(CpuBackendTest, RejectsCudaTensors) {
  HostTensor h = GenerateDefaultTensor(DType::kFloat32, 10, 1);
  ReductionRequest r;
  r.tensor = h.View();
  r.tensor.space = MemorySpace::kCuda;
  std::vector<ReductionResult> results;
  ASSERT_TRUE(CreateCpuBackend()->Reduce({r}, &results).ok());
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(results[0].status.message().find("tensor.space"), std::string::npos);
}

}  // namespace
}  // namespace tstat::testing
