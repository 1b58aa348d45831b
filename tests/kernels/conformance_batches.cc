// Backend conformance suite (TEST_Ps only; see backend_conformance.h): batches (mixed valid/invalid, many small tensors, determinism),
// rejected requests and empty tensors.
//
// Expected values come from the long-double reference (tests/support) and,
// for the edge cases, from values computed by hand and written down here.
#include "tests/kernels/conformance_values.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace tstat::testing {
namespace {

// ---------------------------------------------------------------------------
// Batches.
TEST_P(BackendConformanceTest, MixedBatchWithOneInvalidRequest) {
  std::vector<HostTensor> tensors;
  std::vector<StatsOptions> options;
  auto add = [&](HostTensor t, StatsOptions o) {
    tensors.push_back(std::move(t));
    options.push_back(o);
  };
  StatsOptions plain;
  StatsOptions lin;
  lin.linear_histogram.bins = 32;
  StatsOptions labels;
  labels.label_classes = 17;
  StatsOptions channels;
  channels.per_channel_axis = 1;
  StatsOptions bad_axis;
  bad_axis.per_channel_axis = 3;
  StatsOptions sample;
  sample.sample_count = 40;
  sample.sample_seed = 5;
  add(GenerateDefaultTensor(DType::kFloat32, 5000, 1), plain);
  add(GenerateDefaultTensor(DType::kFloat16, 17000, 2), lin);
  add(GenerateDefaultTensor(DType::kUInt8, 3000, 3), labels);
  add(GenerateDefaultTensor(DType::kBFloat16, 100, 4, {4, 25}), channels);
  add(GenerateDefaultTensor(DType::kFloat64, 100, 5, {4, 25}), bad_axis);  // invalid
  add(GenerateDefaultTensor(DType::kFloat8E5M2, 999, 6), sample);
  add(GenerateDefaultTensor(DType::kInt64, 40000, 7), lin);
  add(HostTensor(DType::kFloat32, 0), plain);
  std::vector<ReductionRequest> requests;
  for (std::size_t i = 0; i < tensors.size(); ++i) requests.push_back(Request(tensors[i], options[i]));
  const std::vector<ReductionResult> results = Reduce(requests);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (i == 4) {
      EXPECT_TRUE(RejectedNaming(results[i], "options.per_channel_axis"));
      continue;
    }
    EXPECT_TRUE(ResultMatches(results[i], Expected(tensors[i], options[i]), ToleranceFor(tensors[i].dtype())))
        << "request " << i << " " << DTypeLabel(tensors[i].dtype());
  }
}

TEST_P(BackendConformanceTest, ManySmallTensorsInOneBatchEqualEachAlone) {
  const int kTensors = 10000;
  const std::int64_t kElems = 1000;
  const std::vector<DType> dtypes = AllDTypes();
  std::vector<HostTensor> tensors;
  std::vector<ReductionRequest> requests;
  tensors.reserve(kTensors);
  for (int i = 0; i < kTensors; ++i) {
    const DType t = dtypes[static_cast<std::size_t>(i) % dtypes.size()];
    tensors.push_back(GenerateDefaultTensor(t, kElems, 1000 + static_cast<std::uint64_t>(i), {},
                                            static_cast<std::size_t>(i) % 8));
  }
  for (int i = 0; i < kTensors; ++i) {
    StatsOptions o;
    if (i % 7 == 0) o.linear_histogram.bins = 10;
    if (i % 11 == 0) o.sample_count = 5;
    if (i % 13 == 0) o.exponent_histogram = false;
    if (i % 17 == 0 && IsIntegerDType(tensors[static_cast<std::size_t>(i)].dtype())) {
      o = StatsOptions{};
      o.label_classes = 50;
    }
    requests.push_back(Request(tensors[static_cast<std::size_t>(i)], o));
  }
  const std::vector<ReductionResult> batch = Reduce(requests);
  int failures = 0;
  for (int i = 0; i < kTensors && failures < 5; ++i) {
    const std::size_t k = static_cast<std::size_t>(i);
    const ReductionResult alone = Reduce({requests[k]})[0];
    const auto same = ResultMatches(batch[k], alone, ToleranceFor(tensors[k].dtype()));
    EXPECT_TRUE(same) << "tensor " << i;
    if (!same) ++failures;
    if (i % 97 == 0) {
      const auto ref = ResultMatches(batch[k], ReferenceReduce(tensors[k].View(), requests[k].options),
                                     ToleranceFor(tensors[k].dtype()));
      EXPECT_TRUE(ref) << "tensor " << i << " vs reference";
      if (!ref) ++failures;
    }
  }
}

TEST_P(BackendConformanceTest, SameBatchTwiceIsBitwiseEqual) {
  std::vector<HostTensor> tensors;
  std::vector<StatsOptions> options;
  const std::int64_t big = QuickMode() ? 200000 : 1000003;
  for (DType t : AllDTypes()) {
    tensors.push_back(GenerateDefaultTensor(t, big, SeedFor(t, big), {}, 3));
    StatsOptions o;
    o.linear_histogram.bins = 100;
    o.sample_count = 50;
    options.push_back(o);
    tensors.push_back(GenerateDefaultTensor(t, 6000, SeedFor(t, 6000), {20, 30, 10}));
    StatsOptions c;
    c.per_channel_axis = 1;
    options.push_back(c);
  }
  tensors.push_back(GenerateDefaultTensor(DType::kInt32, 5000, 9));
  StatsOptions labels;
  labels.label_classes = 100;
  options.push_back(labels);
  std::vector<ReductionRequest> requests;
  for (std::size_t i = 0; i < tensors.size(); ++i) requests.push_back(Request(tensors[i], options[i]));
  ReductionRequest invalid = requests[0];
  invalid.options.per_channel_axis = -5;
  requests.push_back(invalid);
  const std::vector<ReductionResult> a = Reduce(requests);
  const std::vector<ReductionResult> b = Reduce(requests);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    EXPECT_TRUE(ResultsBitwiseEqual(a[i], b[i])) << "request " << i;
  }
}

// ---------------------------------------------------------------------------
// Bad input.
TEST_P(BackendConformanceTest, InvalidRequestsAreRejectedNamingTheField) {
  const HostTensor f32 = MakeTensor(DType::kFloat32, Iota(6), {2, 3});
  const HostTensor i32 = MakeIntegerTensor(DType::kInt32, {0, 1, 2, 3, 4, 5}, {2, 3});
  const HostTensor valid_tensor = GenerateDefaultTensor(DType::kFloat32, 777, 3);
  struct Case {
    std::string name;
    bool integer;
    std::function<void(ReductionRequest&)> mutate;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"null data", false, [](ReductionRequest& r) { r.tensor.data = nullptr; }, "tensor.data"},
      {"dtype 99", false, [](ReductionRequest& r) { r.tensor.dtype = static_cast<DType>(99); }, "tensor.dtype"},
      {"negative numel", false, [](ReductionRequest& r) { r.tensor.numel = -1; r.tensor.shape.clear(); }, "tensor.numel"},
      {"shape product", false, [](ReductionRequest& r) { r.tensor.numel = 5; }, "tensor.shape"},
      {"negative dim", false, [](ReductionRequest& r) { r.tensor.shape = {-2, -3}; }, "tensor.shape"},
      {"axis out of range", false, [](ReductionRequest& r) { r.options.per_channel_axis = 2; }, "options.per_channel_axis"},
      {"axis < -1", false, [](ReductionRequest& r) { r.options.per_channel_axis = -2; }, "options.per_channel_axis"},
      {"axis on 1-D", false, [](ReductionRequest& r) { r.tensor.shape.clear(); r.options.per_channel_axis = 1; }, "options.per_channel_axis"},
      {"bins negative", false, [](ReductionRequest& r) { r.options.linear_histogram.bins = -1; }, "options.linear_histogram.bins"},
      {"bins too many", false, [](ReductionRequest& r) { r.options.linear_histogram.bins = kMaxLinearBins + 1; }, "options.linear_histogram.bins"},
      {"fixed range without bins", false, [](ReductionRequest& r) {
         r.options.linear_histogram.fixed_range = true;
         r.options.linear_histogram.lo = 0;
         r.options.linear_histogram.hi = 1;
       }, "options.linear_histogram.bins"},
      {"lo == hi", false, [](ReductionRequest& r) {
         r.options.linear_histogram = {4, true, 1.0, 1.0};
       }, "options.linear_histogram.lo"},
      {"lo > hi", false, [](ReductionRequest& r) {
         r.options.linear_histogram = {4, true, 2.0, -1.0};
       }, "options.linear_histogram.lo"},
      {"lo NaN", false, [](ReductionRequest& r) {
         r.options.linear_histogram = {4, true, kNaN, 1.0};
       }, "options.linear_histogram.lo"},
      {"hi infinite", false, [](ReductionRequest& r) {
         r.options.linear_histogram = {4, true, 0.0, kInf};
       }, "hi"},
      {"band_lo NaN", false, [](ReductionRequest& r) { r.options.band_lo = kNaN; }, "options.band_lo"},
      {"band_hi NaN", false, [](ReductionRequest& r) { r.options.band_hi = kNaN; }, "band_hi"},
      {"small_eps negative", false, [](ReductionRequest& r) { r.options.small_eps = -1e-3; }, "options.small_eps"},
      {"small_eps NaN", false, [](ReductionRequest& r) { r.options.small_eps = kNaN; }, "options.small_eps"},
      {"labels on float", false, [](ReductionRequest& r) { r.options.label_classes = 3; }, "options.label_classes"},
      {"labels negative", true, [](ReductionRequest& r) { r.options.label_classes = -3; }, "options.label_classes"},
      {"labels with per-channel", true, [](ReductionRequest& r) {
         r.options.label_classes = 3;
         r.options.per_channel_axis = 0;
       }, "options.label_classes"},
      {"labels with linear histogram", true, [](ReductionRequest& r) {
         r.options.label_classes = 3;
         r.options.linear_histogram.bins = 4;
       }, "options.label_classes"},
      {"sample_count negative", false, [](ReductionRequest& r) { r.options.sample_count = -1; }, "options.sample_count"},
      {"wrong memory space", false, [this](ReductionRequest& r) { r.tensor.space = ForeignSpace(); }, "tensor.space"},
  };
  for (const Case& c : cases) {
    ReductionRequest bad = Request(c.integer ? i32 : f32);
    c.mutate(bad);
    const ReductionRequest good = Request(valid_tensor);
    // Alone, then between two valid requests: the valid ones still get results.
    const ReductionResult alone = Reduce({bad})[0];
    EXPECT_TRUE(RejectedNaming(alone, c.field)) << c.name;
    const std::vector<ReductionResult> mixed = Reduce({good, bad, good});
    EXPECT_TRUE(RejectedNaming(mixed[1], c.field)) << c.name << " (in a batch)";
    const ReductionResult want = Expected(valid_tensor);
    EXPECT_TRUE(ResultMatches(mixed[0], want, ToleranceFor(DType::kFloat32))) << c.name;
    EXPECT_TRUE(ResultMatches(mixed[2], want, ToleranceFor(DType::kFloat32))) << c.name;
  }
}

TEST_P(BackendConformanceTest, EmptyTensorsAreValid) {
  StatsOptions o;
  o.linear_histogram.bins = 3;
  o.sample_count = 4;
  for (DType t : AllDTypes()) {
    HostTensor h(t, 0);
    ReductionRequest r = Request(h, o);
    std::vector<ReductionRequest> requests = {r};
    r.tensor.data = nullptr;  // null data is fine when numel is 0
    requests.push_back(r);
    r.options = StatsOptions{};
    r.options.per_channel_axis = 0;
    requests.push_back(r);
    for (const ReductionResult& res : Reduce(requests)) {
      ASSERT_TRUE(res.status.ok()) << DTypeLabel(t) << ": " << res.status.ToString();
      EXPECT_EQ(res.stats.count, 0u);
      EXPECT_EQ(res.stats.finite_count, 0u);
      EXPECT_TRUE(std::isnan(res.stats.min) && std::isnan(res.stats.max) && std::isnan(res.stats.mean));
      EXPECT_EQ(res.stats.sum, 0.0);
      EXPECT_EQ(res.stats.l2, 0.0);
      ASSERT_TRUE(res.exponent_histogram.has_value());
      EXPECT_EQ(res.exponent_histogram->total(), 0u);
    }
    const std::vector<ReductionResult> again = Reduce(requests);
    EXPECT_TRUE(ResultMatches(again[0], Expected(h, o), ToleranceFor(t))) << DTypeLabel(t);
    ASSERT_TRUE(again[2].per_channel.has_value());
    EXPECT_TRUE(again[2].per_channel->channels.empty());
    if (IsIntegerDType(t)) {
      StatsOptions lo;
      lo.label_classes = 3;
      HostTensor e(t, 0);
      const ReductionResult lr = ReduceOne(e, lo);
      ASSERT_TRUE(lr.label_counts.has_value());
      EXPECT_EQ(lr.label_counts->counts, (std::vector<std::uint64_t>{0, 0, 0}));
      EXPECT_EQ(lr.label_counts->out_of_range, 0u);
    }
  }
}

}  // namespace
}  // namespace tstat::testing
