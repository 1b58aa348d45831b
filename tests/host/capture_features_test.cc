// Capture features the rules consume, against hand-computed values: delta
// against the previous save, confusion matrices against a predictions
// tensor, counts of given values; raw snapshots asked for by a rule
// (CaptureRawFor); and the writer-thread observer the in-process rule engine
// attaches to.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "tests/host/host_test_util.h"
#include "tstat/session.h"

namespace tstat {
namespace {

using testing::FindBatch;
using testing::FindRaw;
using testing::FindStats;
using testing::MakeSession;
using testing::TestConfig;

TEST(CaptureFeaturesTest, DeltaAgainstThePreviousSave) {
  SessionConfig config = TestConfig();
  config.save_config.base.save_interval = 2;  // saves at steps 0, 2, 4
  CollectionConfig weights;
  weights.name = "weights";
  weights.stats.delta = true;
  weights.stats.delta_atol = 0.0;
  weights.stats.delta_rtol = 0.0;
  config.collections.push_back(weights);
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(config, sink);
  std::vector<float> w = {1.0f, -2.0f, 3.0f, 0.5f};
  std::vector<float> b = {1.0f};
  ASSERT_TRUE(
      session->RegisterTensor({"fc.weight", TensorView::Host(w.data(), DType::kFloat32, 4)}).ok());
  ASSERT_TRUE(
      session->RegisterTensor({"fc.bias", TensorView::Host(b.data(), DType::kFloat32, 1)}).ok());
  std::vector<std::vector<float>> saved;
  for (int i = 0; i < 5; ++i) {
    w[1] += 0.5f;  // every step changes one element
    if (i == 4) w[3] = -0.5f;
    if (i % 2 == 0) saved.push_back(w);
    ASSERT_TRUE(session->EndStep().ok());
  }
  ASSERT_TRUE(session->Close().ok());
  const auto batches = sink->batches();
  ASSERT_EQ(batches.size(), 3u);
  const TensorStatsRecord* first = FindStats(batches[0], 0);
  ASSERT_NE(first, nullptr);
  EXPECT_FALSE(first->delta.has_value());                     // nothing to compare with yet
  EXPECT_FALSE(FindStats(batches[1], 1)->delta.has_value());  // biases: no delta asked
  for (int k = 1; k < 3; ++k) {
    const TensorStatsRecord* r = FindStats(batches[k], 0);
    ASSERT_NE(r, nullptr);
    ASSERT_TRUE(r->delta.has_value()) << "save " << k;
    double l1 = 0, l2 = 0, amax = 0;
    std::uint64_t changed = 0;
    for (int j = 0; j < 4; ++j) {
      const double d = static_cast<double>(saved[k][j]) - saved[k - 1][j];
      l1 += std::fabs(d);
      l2 += d * d;
      amax = std::max(amax, std::fabs(d));
      changed += d != 0.0;
    }
    EXPECT_EQ(r->delta->count, 4u);
    EXPECT_EQ(r->delta->changed_count, changed);
    EXPECT_DOUBLE_EQ(r->delta->l1, l1);
    EXPECT_DOUBLE_EQ(r->delta->l2, std::sqrt(l2));
    EXPECT_DOUBLE_EQ(r->delta->amax, amax);
  }
  EXPECT_EQ(FindStats(batches[1], 0)->delta->changed_count, 1u);  // w[1] only
  EXPECT_EQ(FindStats(batches[2], 0)->delta->changed_count, 2u);  // w[1] and w[3]
}

TEST(CaptureFeaturesTest, ConfusionAgainstAPredictionsTensorAndValueCounts) {
  SessionConfig config = TestConfig();
  CollectionConfig labels;
  labels.name = "labels";
  labels.stats.label_classes = 3;
  labels.stats.confusion_predictions = "predictions";
  CollectionConfig tokens;
  tokens.name = "tokens";
  tokens.tensor_names = {"input_ids"};
  tokens.stats.count_values = {0, 7};
  config.collections = {labels, tokens};
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(config, sink);
  std::vector<std::int64_t> y = {0, 1, 2, 2, 1, 0};
  std::vector<std::int64_t> p = {0, 2, 2, 1, 1, 5};  // 5 is out of range
  std::vector<std::int32_t> ids = {7, 0, 0, 3, 7, 7, 1};
  ASSERT_TRUE(
      session->RegisterTensor({"labels", TensorView::Host(y.data(), DType::kInt64, 6)}).ok());
  ASSERT_TRUE(
      session->RegisterTensor({"predictions", TensorView::Host(p.data(), DType::kInt64, 6)}).ok());
  ASSERT_TRUE(
      session->RegisterTensor({"input_ids", TensorView::Host(ids.data(), DType::kInt32, 7)}).ok());
  ASSERT_TRUE(session->EndStep().ok());
  ASSERT_TRUE(session->Close().ok());
  const auto batches = sink->batches();
  ASSERT_EQ(batches.size(), 1u);
  const TensorStatsRecord* l = FindStats(batches[0], 0);
  ASSERT_NE(l, nullptr);
  ASSERT_TRUE(l->confusion.has_value());
  EXPECT_EQ(l->confusion->classes, 3);
  // Rows: label; columns: prediction.
  EXPECT_EQ(l->confusion->counts,
            (std::vector<std::uint64_t>{1, 0, 0, /**/ 0, 1, 1, /**/ 0, 1, 1}));
  EXPECT_EQ(l->confusion->invalid, 1u);
  const TensorStatsRecord* t = FindStats(batches[0], 2);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->count_values, (std::vector<std::int64_t>{0, 7}));
  EXPECT_EQ(t->value_counts, (std::vector<std::uint64_t>{2, 3}));
  EXPECT_TRUE(batches[0].drops.empty());
}

// Tensors with different stat options (linear histogram, label counts
// without stats or exponent histogram, value counts) over many steps: with
// the tensors unchanged, every step's records equal the first step's, so no
// record carries anything from another tensor or step (the pipeline reuses
// the memory of batches the writer is done with).
TEST(CaptureFeaturesTest, RecycledRecordsCarryNothingFromTheirLastUse) {
  SessionConfig config = TestConfig();
  CollectionConfig weights;
  weights.name = "weights";
  weights.stats.histogram_bins = 4;
  CollectionConfig labels;
  labels.name = "labels";
  labels.stats.label_classes = 3;
  labels.stats.exponent_histogram = false;
  CollectionConfig tokens;
  tokens.name = "tokens";
  tokens.tensor_names = {"input_ids"};
  tokens.stats.count_values = {0, 7};
  config.collections = {weights, labels, tokens};
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(config, sink);
  std::vector<float> w = {1.0f, -2.0f, 3.0f, 0.0f, 1e-30f};
  std::vector<std::int64_t> y = {0, 1, 2, 2, 1, 0, 9};
  std::vector<std::int32_t> ids = {7, 0, 0, 3, 7, 7, 1};
  ASSERT_TRUE(
      session->RegisterTensor({"fc.weight", TensorView::Host(w.data(), DType::kFloat32, 5)}).ok());
  ASSERT_TRUE(
      session->RegisterTensor({"labels", TensorView::Host(y.data(), DType::kInt64, 7)}).ok());
  ASSERT_TRUE(
      session->RegisterTensor({"input_ids", TensorView::Host(ids.data(), DType::kInt32, 7)}).ok());
  constexpr int kSteps = 200;
  for (int i = 0; i < kSteps; ++i) ASSERT_TRUE(session->EndStep().ok());
  ASSERT_TRUE(session->Close().ok());
  const auto batches = sink->batches();
  ASSERT_EQ(batches.size(), static_cast<std::size_t>(kSteps));
  for (std::uint32_t id = 0; id < 3; ++id) {
    const TensorStatsRecord* first = FindStats(batches[0], id);
    ASSERT_NE(first, nullptr);
    for (int k = 1; k < kSteps; ++k) {
      SCOPED_TRACE("tensor " + std::to_string(id) + ", step " + std::to_string(k));
      const TensorStatsRecord* r = FindStats(batches[static_cast<std::size_t>(k)], id);
      ASSERT_NE(r, nullptr);
      EXPECT_EQ(r->has_stats, first->has_stats);
      EXPECT_EQ(r->stats.count, first->stats.count);
      EXPECT_EQ(r->stats.zero_count, first->stats.zero_count);
      EXPECT_EQ(r->stats.l1, first->stats.l1);
      EXPECT_EQ(r->exponent_histogram, first->exponent_histogram);
      EXPECT_EQ(r->linear_histogram.has_value(), first->linear_histogram.has_value());
      if (r->linear_histogram && first->linear_histogram) {
        EXPECT_EQ(r->linear_histogram->counts, first->linear_histogram->counts);
      }
      ASSERT_EQ(r->label_counts.has_value(), first->label_counts.has_value());
      if (r->label_counts) {
        EXPECT_EQ(r->label_counts->counts, first->label_counts->counts);
        EXPECT_EQ(r->label_counts->out_of_range, first->label_counts->out_of_range);
      }
      EXPECT_EQ(r->count_values, first->count_values);
      EXPECT_EQ(r->value_counts, first->value_counts);
      if (::testing::Test::HasFailure()) return;
    }
  }
  // What the first step's records hold, by hand.
  const TensorStatsRecord* wr = FindStats(batches[0], 0);
  EXPECT_TRUE(wr->has_stats);
  EXPECT_EQ(wr->stats.count, 5u);
  ASSERT_TRUE(wr->exponent_histogram.has_value());
  EXPECT_EQ(wr->exponent_histogram->total(), 4u);  // finite non-zero values
  EXPECT_TRUE(wr->count_values.empty());
  EXPECT_FALSE(wr->label_counts.has_value());
  const TensorStatsRecord* lr = FindStats(batches[0], 1);
  EXPECT_TRUE(lr->has_stats);  // the stat set comes with label counts
  EXPECT_EQ(lr->stats.count, 7u);
  EXPECT_EQ(lr->stats.max, 9.0);
  EXPECT_FALSE(lr->exponent_histogram.has_value());  // turned off in the config
  ASSERT_TRUE(lr->label_counts.has_value());
  EXPECT_EQ(lr->label_counts->counts, (std::vector<std::uint64_t>{2, 2, 2}));
  EXPECT_EQ(lr->label_counts->out_of_range, 1u);
  const TensorStatsRecord* tr = FindStats(batches[0], 2);
  EXPECT_EQ(tr->count_values, (std::vector<std::int64_t>{0, 7}));
  EXPECT_EQ(tr->value_counts, (std::vector<std::uint64_t>{2, 3}));
}

TEST(CaptureFeaturesTest, AMissingPredictionsTensorIsRecorded) {
  SessionConfig config = TestConfig();
  CollectionConfig labels;
  labels.name = "labels";
  labels.stats.label_classes = 2;
  labels.stats.confusion_predictions = "preds";
  config.collections = {labels};
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(config, sink);
  std::vector<std::int64_t> y = {0, 1};
  ASSERT_TRUE(
      session->RegisterTensor({"labels", TensorView::Host(y.data(), DType::kInt64, 2)}).ok());
  ASSERT_TRUE(session->EndStep().ok());
  ASSERT_TRUE(session->Close().ok());
  const auto batches = sink->batches();
  ASSERT_EQ(batches.size(), 1u);
  ASSERT_NE(FindStats(batches[0], 0), nullptr);  // label counts still saved
  ASSERT_EQ(batches[0].drops.size(), 1u);
  EXPECT_EQ(batches[0].drops[0].kind, "confusion");
  EXPECT_NE(batches[0].drops[0].reason.find("\"preds\""), std::string::npos);
}

TEST(CaptureFeaturesTest, CaptureRawForSavesTheNextSteps) {
  SessionConfig config = TestConfig();
  config.save_config.base.save_interval = 1000;  // stats at step 0 only
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(config, sink);
  std::vector<float> g = {1.0f, 2.0f};
  ASSERT_TRUE(
      session->RegisterTensor({"gradient/x", TensorView::Host(g.data(), DType::kFloat32, 2)}).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(session->EndStep().ok());
  session->CaptureRawFor("gradient/x", 2);  // e.g. from the rule engine's thread
  session->CaptureRawFor("no such tensor", 5);
  for (int i = 3; i < 7; ++i) {
    g[0] = static_cast<float>(i);
    ASSERT_TRUE(session->EndStep().ok());
  }
  ASSERT_TRUE(session->Close().ok());
  const auto batches = sink->batches();
  ASSERT_EQ(batches.size(), 3u);  // step 0 (stats), steps 3 and 4 (raw)
  EXPECT_EQ(batches[0].key.global_step, 0);
  for (int k : {1, 2}) {
    EXPECT_EQ(batches[k].key.global_step, k + 2);
    EXPECT_TRUE(batches[k].stats.empty());
    const RawSnapshot* r = FindRaw(batches[k], 0);
    ASSERT_NE(r, nullptr);
    float first = 0;
    std::memcpy(&first, r->bytes.data(), sizeof(float));
    EXPECT_EQ(first, static_cast<float>(k + 2));
  }
}

class RecordingObserver final : public host::BatchObserver {
 public:
  void OnDeclare(const std::vector<TensorInfo>& tensors) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const TensorInfo& t : tensors) events_.push_back("declare " + t.name);
  }
  void OnBatch(const StepBatch& batch) override {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back("batch " + std::to_string(batch.key.global_step));
  }
  std::vector<std::string> events() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> events_;
};

TEST(CaptureFeaturesTest, TheObserverSeesDeclarationsThenBatchesInOrder) {
  auto observer = std::make_shared<RecordingObserver>();
  host::SessionDeps deps;
  auto sink = std::make_shared<io::MemorySink>();
  deps.sink = std::make_unique<testing::ForwardingSink>(sink);
  deps.cpu_backend = CreateCpuBackend({1});
  deps.observer = observer;
  auto created = host::CreateSessionWithDeps(TestConfig(), std::move(deps));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  auto session = std::move(created).value();
  std::vector<float> w = {1.0f};
  ASSERT_TRUE(
      session->RegisterTensor({"a.weight", TensorView::Host(w.data(), DType::kFloat32, 1)}).ok());
  ASSERT_TRUE(session->EndStep().ok());
  ASSERT_TRUE(session->SaveScalar("loss", 1.0).ok());
  ASSERT_TRUE(session->EndStep().ok());
  ASSERT_TRUE(session->Close().ok());
  EXPECT_EQ(observer->events(),
            (std::vector<std::string>{"declare a.weight", "batch 0", "declare loss", "batch 1"}));
}

}  // namespace
}  // namespace tstat
