// The capture API end to end through the in-memory sink: steps and modes,
// scalars, ad-hoc tensors, save-config semantics, view callbacks, stats
// against the independent reference, timing.
#include "tstat/session.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <thread>
#include <vector>

#include "tests/host/host_test_util.h"
#include "tests/support/compare.h"
#include "tests/support/reference.h"

namespace tstat {
namespace {

using testing::FindBatch;
using testing::FindScalar;
using testing::FindStats;
using testing::MakeSession;
using testing::TestConfig;

// The weights collection with a linear histogram of 8 bins and per-channel
// stats along axis 0: records that hold more than the stat set.
CollectionConfig WeightsWithHistogramAndChannels() {
  CollectionConfig weights;
  weights.name = "weights";
  weights.stats.histogram_bins = 8;
  weights.stats.per_channel_axis = 0;
  return weights;
}

// The reference for a host f32 buffer with the options a default collection
// resolves to.
::testing::AssertionResult MatchesReference(const TensorStatsRecord* got,
                                            const std::vector<float>& data,
                                            const StatsOptions& options = {}) {
  if (got == nullptr) return ::testing::AssertionFailure() << "no record";
  const TensorView v =
      TensorView::Host(data.data(), DType::kFloat32, static_cast<std::int64_t>(data.size()));
  return testing::ResultMatches(testing::ToResult(*got), testing::ReferenceReduce(v, options),
                                testing::ToleranceFor(DType::kFloat32));
}

std::vector<float> Ramp(int n, float start, float step) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

TEST(SessionTest, StepsModesScalarsAndAdhocTensors) {
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(TestConfig(), sink);
  ASSERT_NE(session, nullptr);
  std::vector<float> w = Ramp(12, -1.0f, 0.25f);
  std::vector<float> b = {0.5f, -0.5f, 2.0f};
  auto wid =
      session->RegisterTensor({"fc1.weight", TensorView::Host(w.data(), DType::kFloat32, {4, 3})});
  auto bid =
      session->RegisterTensor({"fc1.bias", TensorView::Host(b.data(), DType::kFloat32, {3})});
  ASSERT_TRUE(wid.ok() && bid.ok());
  EXPECT_EQ(wid.value(), 0u);
  EXPECT_EQ(bid.value(), 1u);

  const Mode modes[] = {Mode::kTrain, Mode::kTrain, Mode::kTrain,
                        Mode::kEval,  Mode::kEval,  Mode::kTrain};
  const std::int64_t mode_steps[] = {0, 1, 2, 0, 1, 3};
  std::vector<std::vector<float>> weights_seen;
  std::vector<float> probe = {1, 2, 3, 4};
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(session->SetMode(modes[i]).ok());
    ASSERT_TRUE(session->BeginStep().ok());
    w[0] = static_cast<float>(i);  // the tensor changes in place between steps
    weights_seen.push_back(w);
    ASSERT_TRUE(session->SaveScalar("loss", 10.0 - i).ok());
    if (i == 1) {
      ASSERT_TRUE(
          session->SaveTensor("probe", TensorView::Host(probe.data(), DType::kFloat32, 4)).ok());
    }
    ASSERT_TRUE(session->EndStep().ok());
    EXPECT_EQ(session->current_step().global_step, i);
    EXPECT_EQ(session->current_step().mode_step, mode_steps[i]);
  }
  ASSERT_TRUE(session->Close().ok());

  const std::vector<StepBatch> batches = sink->batches();
  ASSERT_EQ(batches.size(), 6u);
  const std::vector<TensorInfo> infos = sink->tensors();
  ASSERT_EQ(infos.size(), 4u);
  EXPECT_EQ(infos[2].name, "loss");
  EXPECT_EQ(infos[2].kind, TensorKind::kScalar);
  EXPECT_EQ(infos[2].collections, (std::vector<std::string>{"losses", "scalars", "all"}));
  EXPECT_EQ(infos[3].name, "probe");
  EXPECT_EQ(infos[0].shape, (std::vector<std::int64_t>{4, 3}));
  EXPECT_EQ(infos[0].collections, (std::vector<std::string>{"weights", "all"}));
  for (int i = 0; i < 6; ++i) {
    const StepBatch& batch = batches[i];
    EXPECT_EQ(batch.key.global_step, i);
    EXPECT_EQ(batch.key.mode, modes[i]);
    EXPECT_EQ(batch.key.mode_step, mode_steps[i]);
    EXPECT_TRUE(MatchesReference(FindStats(batch, 0), weights_seen[i])) << "step " << i;
    EXPECT_TRUE(MatchesReference(FindStats(batch, 1), b)) << "step " << i;
    const ScalarRecord* loss = FindScalar(batch, 2);
    ASSERT_NE(loss, nullptr);
    EXPECT_EQ(loss->value, 10.0 - i);
    EXPECT_GT(loss->wall_time, 1.6e9);
    EXPECT_EQ(FindStats(batch, 3) != nullptr, i == 1);
    EXPECT_TRUE(batch.drops.empty());
  }
  EXPECT_TRUE(MatchesReference(FindStats(batches[1], 3), probe));
  EXPECT_TRUE(sink->closed());
  const PipelineCounters c = session->counters();
  EXPECT_EQ(c.steps_captured, 6u);
  EXPECT_EQ(c.records_written, 6u * 3 + 1);
  EXPECT_EQ(c.records_lost, 0u);
  EXPECT_EQ(sink->last_counters().records_written, c.records_written);
}

TEST(SessionTest, SaveConfigSemanticsOnModeSteps) {
  SessionConfig config = TestConfig();
  CollectionConfig wc;
  wc.name = "weights";
  wc.save_config.train.save_interval = 2;
  wc.save_config.eval.save_interval = 0;
  wc.save_config.eval.save_steps = {1};
  config.collections.push_back(wc);
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(config, sink);
  std::vector<float> w(8, 1.0f), b(2, 0.0f), g(8, 0.5f);
  ASSERT_TRUE(
      session->RegisterTensor({"w.weight", TensorView::Host(w.data(), DType::kFloat32, 8)}).ok());
  ASSERT_TRUE(
      session->RegisterTensor({"w.bias", TensorView::Host(b.data(), DType::kFloat32, 2)}).ok());
  ASSERT_TRUE(
      session->RegisterTensor({"gradient/w.weight", TensorView::Host(g.data(), DType::kFloat32, 8)})
          .ok());
  // TRAIN 0..4 (global 0..4), EVAL 0..2 (global 5..7), TRAIN 5..6 (global 8..9).
  for (auto [mode, n] :
       std::vector<std::pair<Mode, int>>{{Mode::kTrain, 5}, {Mode::kEval, 3}, {Mode::kTrain, 2}}) {
    ASSERT_TRUE(session->SetMode(mode).ok());
    for (int i = 0; i < n; ++i) ASSERT_TRUE(session->EndStep().ok());
  }
  ASSERT_TRUE(session->Close().ok());
  const auto batches = sink->batches();
  EXPECT_EQ(testing::StepsWithStats(batches, 0), (std::vector<std::int64_t>{0, 2, 4, 6, 9}));
  EXPECT_EQ(testing::StepsWithStats(batches, 1),
            (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // Gradients: never in EVAL (as smdebug).
  EXPECT_EQ(testing::StepsWithStats(batches, 2), (std::vector<std::int64_t>{0, 1, 2, 3, 4, 8, 9}));
}

TEST(SessionTest, ResumeAtExplicitStepsAndStepsGoingBackwards) {
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(TestConfig(), sink);
  std::vector<float> w(4, 1.0f);
  ASSERT_TRUE(session->RegisterTensor({"a", TensorView::Host(w.data(), DType::kFloat32, 4)}).ok());
  StepKey k{100, Mode::kTrain, 40};
  ASSERT_TRUE(session->BeginStep(k).ok());
  EXPECT_EQ(session->BeginStep().code(), StatusCode::kFailedPrecondition);  // already open
  ASSERT_TRUE(session->EndStep().ok());
  ASSERT_TRUE(session->EndStep().ok());  // implicit: global 101, TRAIN 41
  EXPECT_EQ(session->current_step().global_step, 101);
  EXPECT_EQ(session->current_step().mode_step, 41);
  Status back = session->BeginStep(StepKey{100, Mode::kTrain, 50});
  EXPECT_EQ(back.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(back.message().find("steps going backwards"), std::string::npos) << back.message();
  back = session->BeginStep(StepKey{200, Mode::kTrain, 41});
  EXPECT_EQ(back.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(session->BeginStep(StepKey{200, Mode::kGlobal, 3}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(session->SetMode(static_cast<Mode>(9)).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(session->BeginStep(StepKey{200, Mode::kEval, 0}).ok());
  ASSERT_TRUE(session->EndStep().ok());
  ASSERT_TRUE(session->Close().ok());
  const auto batches = sink->batches();
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[2].key.global_step, 200);
  EXPECT_EQ(batches[2].key.mode, Mode::kEval);
}

TEST(SessionTest, ViewCallbacksFollowReallocationAndLazyTensors) {
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(TestConfig(), sink);
  std::vector<float> buf_a = Ramp(6, 0.0f, 1.0f), buf_b = Ramp(10, -5.0f, 0.5f);
  int calls = 0;
  auto fn = [&](TensorView* v) -> Status {
    ++calls;
    if (calls == 1) return Status::OK();  // not allocated yet: v->data stays null
    const bool a = calls % 2 == 0;
    v->data = a ? buf_a.data() : buf_b.data();
    v->shape = {a ? std::int64_t{6} : std::int64_t{10}};  // reallocated with a new size
    return Status::OK();
  };
  TensorSpec spec;
  spec.name = "gradient/layer.weight";
  spec.view = TensorView::Host(nullptr, DType::kFloat32, 6);
  spec.view_fn = fn;
  ASSERT_TRUE(session->RegisterTensor(spec).ok());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(session->EndStep().ok());
  ASSERT_TRUE(session->Close().ok());
  EXPECT_EQ(calls, 4);
  const auto batches = sink->batches();
  ASSERT_EQ(batches.size(), 3u);  // step 0 had nothing to save
  EXPECT_EQ(batches[0].key.global_step, 1);
  EXPECT_TRUE(MatchesReference(FindStats(batches[0], 0), buf_a));
  EXPECT_TRUE(MatchesReference(FindStats(batches[1], 0), buf_b));
  EXPECT_TRUE(MatchesReference(FindStats(batches[2], 0), buf_a));
}

TEST(SessionTest, ViewCallbackProblemsAreRecordedAndReported) {
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(TestConfig(), sink);
  std::vector<float> good(3, 1.0f);
  std::vector<std::uint16_t> half(3, 0);
  TensorSpec bad;
  bad.name = "bad.weight";
  bad.view = TensorView::Host(nullptr, DType::kFloat32, 3);
  bad.view_fn = [&](TensorView* v) {
    v->data = half.data();
    v->dtype = DType::kFloat16;  // dtype mismatch
    return Status::OK();
  };
  TensorSpec throws;
  throws.name = "throws.weight";
  throws.view = TensorView::Host(nullptr, DType::kFloat32, 3);
  throws.view_fn = [](TensorView*) -> Status { throw std::runtime_error("boom"); };
  ASSERT_TRUE(session->RegisterTensor(bad).ok());
  ASSERT_TRUE(session->RegisterTensor(throws).ok());
  ASSERT_TRUE(
      session->RegisterTensor({"good.weight", TensorView::Host(good.data(), DType::kFloat32, 3)})
          .ok());
  const Status s = session->EndStep();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("dtype mismatch"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("bad.weight"), std::string::npos) << s.message();
  ASSERT_TRUE(session->Close().ok());
  const auto batches = sink->batches();
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_TRUE(MatchesReference(FindStats(batches[0], 2), good));  // the rest is captured
  ASSERT_EQ(batches[0].drops.size(), 2u);
  EXPECT_EQ(batches[0].drops[0].tensor_id, 0u);
  EXPECT_EQ(batches[0].drops[0].kind, "stats");
  EXPECT_NE(batches[0].drops[0].reason.find("registered as f32"), std::string::npos);
  EXPECT_NE(batches[0].drops[1].reason.find("boom"), std::string::npos);
}

TEST(SessionTest, StatsOptionsFromCollections) {
  SessionConfig config = TestConfig();
  CollectionConfig labels;
  labels.name = "labels";
  labels.stats.label_classes = 4;
  CollectionConfig weights;
  weights.name = "weights";
  weights.stats.histogram_bins = 5;
  weights.stats.per_channel_axis = 0;
  config.collections = {labels, weights};
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(config, sink);
  std::vector<std::int32_t> y = {0, 1, 1, 3, 3, 3, 7};
  std::vector<float> w = Ramp(6, -3.0f, 1.0f);
  ASSERT_TRUE(
      session->RegisterTensor({"labels", TensorView::Host(y.data(), DType::kInt32, 7)}).ok());
  ASSERT_TRUE(
      session->RegisterTensor({"conv.weight", TensorView::Host(w.data(), DType::kFloat32, {2, 3})})
          .ok());
  ASSERT_TRUE(session->EndStep().ok());
  ASSERT_TRUE(session->Close().ok());
  const auto batches = sink->batches();
  ASSERT_EQ(batches.size(), 1u);
  const TensorStatsRecord* l = FindStats(batches[0], 0);
  ASSERT_NE(l, nullptr);
  // The stat set comes with label counts (tstat dump shows the labels).
  EXPECT_TRUE(l->has_stats);
  EXPECT_EQ(l->stats.count, 7u);
  EXPECT_EQ(l->stats.max, 7.0);
  ASSERT_TRUE(l->label_counts.has_value());
  EXPECT_EQ(l->label_counts->counts, (std::vector<std::uint64_t>{1, 2, 0, 3}));
  EXPECT_EQ(l->label_counts->out_of_range, 1u);
  StatsOptions wo;
  wo.linear_histogram.bins = 5;
  wo.per_channel_axis = 0;
  const TensorStatsRecord* wr = FindStats(batches[0], 1);
  ASSERT_NE(wr, nullptr);
  ASSERT_TRUE(wr->linear_histogram.has_value());
  ASSERT_TRUE(wr->per_channel.has_value());
  EXPECT_EQ(wr->per_channel->channels.size(), 2u);
  const TensorView v = TensorView::Host(w.data(), DType::kFloat32, {2, 3});
  EXPECT_TRUE(testing::ResultMatches(testing::ToResult(*wr), testing::ReferenceReduce(v, wo),
                                     testing::ToleranceFor(DType::kFloat32)));
}

// A tensor's options are the merge of its collections due at the step
// (host::RequestOptions keeps each merge by the set of due
// collections): a tensor in two collections with different schedules gets
// the linear histogram only at the steps its histogram collection is due,
// and a tensor of the same collections set (hence the same merges) too.
TEST(SessionTest, OptionsFollowTheCollectionsDueAtEachStep) {
  SessionConfig config = TestConfig();
  CollectionConfig weights;
  weights.name = "weights";
  weights.stats.exponent_histogram = false;
  CollectionConfig histograms;
  histograms.name = "histograms";
  histograms.include_regex = {"^conv"};
  histograms.save_config.base.save_interval = 3;
  histograms.stats.histogram_bins = 4;
  histograms.stats.exponent_histogram = false;
  config.collections = {weights, histograms};
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(config, sink);
  std::vector<float> a = Ramp(8, -1.0f, 0.25f), b = Ramp(8, 2.0f, -0.5f), c = Ramp(8, 0.0f, 1.0f);
  ASSERT_TRUE(
      session->RegisterTensor({"conv1.weight", TensorView::Host(a.data(), DType::kFloat32, 8)})
          .ok());
  ASSERT_TRUE(
      session->RegisterTensor({"fc.weight", TensorView::Host(c.data(), DType::kFloat32, 8)}).ok());
  ASSERT_TRUE(
      session->RegisterTensor({"conv2.weight", TensorView::Host(b.data(), DType::kFloat32, 8)})
          .ok());
  constexpr int kSteps = 7;
  for (int s = 0; s < kSteps; ++s) ASSERT_TRUE(session->EndStep().ok());
  ASSERT_TRUE(session->Close().ok());
  const auto batches = sink->batches();
  ASSERT_EQ(batches.size(), static_cast<std::size_t>(kSteps));
  for (int s = 0; s < kSteps; ++s) {
    const bool histogram_due = s % 3 == 0;
    for (std::uint32_t id = 0; id < 3; ++id) {
      const TensorStatsRecord* r = FindStats(batches[s], id);
      ASSERT_NE(r, nullptr) << "step " << s << " tensor " << id;
      EXPECT_FALSE(r->exponent_histogram.has_value());  // neither collection asks for it
      const bool in_histograms = id != 1;
      EXPECT_EQ(r->linear_histogram.has_value(), in_histograms && histogram_due)
          << "step " << s << " tensor " << id;
      if (r->linear_histogram) {
        EXPECT_EQ(r->linear_histogram->counts.size(), 4u);
        std::uint64_t total = 0;
        for (std::uint64_t n : r->linear_histogram->counts) total += n;
        EXPECT_EQ(total, 8u);
      }
    }
  }
}

// EndStep writes a step's records over those of a step the writer has
// finished with (Pipeline::TakeSpareRecords). Which tensors are due, and
// what their records hold, changes from step to step here, so a record
// slot holds a label count at one step and a histogram at the next: every
// record must match the reference for its own tensor at its own step, with
// nothing left over from the slot's earlier use, and every step must hold
// exactly its due tensors. (A record of stats only, the gradient's here, is
// written without touching its other members: the writer empties them when
// it recycles the records.)
TEST(SessionTest, RecordsOfEarlierStepsLeaveNothingBehind) {
  SessionConfig config = TestConfig();
  const CollectionConfig weights = WeightsWithHistogramAndChannels();
  CollectionConfig gradients;
  gradients.name = "gradients";
  gradients.save_config.base.save_interval = 2;
  gradients.stats.exponent_histogram = false;
  CollectionConfig labels;
  labels.name = "labels";
  labels.save_config.base.save_interval = 3;
  labels.stats.label_classes = 4;
  config.collections = {weights, gradients, labels};
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(config, sink);
  std::vector<float> w(8), g(8);
  std::vector<std::int32_t> y(6);
  // Registered so that the tensor due at every step comes last: the slots
  // of the others take turns.
  ASSERT_TRUE(
      session->RegisterTensor({"labels", TensorView::Host(y.data(), DType::kInt32, 6)}).ok());
  ASSERT_TRUE(
      session
          ->RegisterTensor({"gradient/conv.weight", TensorView::Host(g.data(), DType::kFloat32, 8)})
          .ok());
  ASSERT_TRUE(
      session->RegisterTensor({"conv.weight", TensorView::Host(w.data(), DType::kFloat32, {2, 4})})
          .ok());
  constexpr int kSteps = 36;
  std::vector<std::vector<float>> ws, gs;
  std::vector<std::vector<std::int32_t>> ys;
  std::uint64_t records = 0;
  for (int s = 0; s < kSteps; ++s) {
    for (int i = 0; i < 8; ++i) {
      w[i] = static_cast<float>((i - 3) * (s + 1));
      g[i] = (s % 4 == 1 && i == 2) ? NAN : static_cast<float>(i) * -0.5f / (s + 1);
    }
    for (int i = 0; i < 6; ++i) y[i] = (i + s) % 5;  // 4 is out of range
    ws.push_back(w);
    gs.push_back(g);
    ys.push_back(y);
    ASSERT_TRUE(session->EndStep().ok());
    // Let the writer finish the step, so the next one reuses its records.
    records += 1 + (s % 2 == 0) + (s % 3 == 0);
    for (int wait = 0; wait < 2000 && session->counters().records_written < records; ++wait) {
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(session->Close().ok());
  const auto batches = sink->batches();
  ASSERT_EQ(batches.size(), static_cast<std::size_t>(kSteps));
  StatsOptions wo;
  wo.linear_histogram.bins = 8;
  wo.per_channel_axis = 0;
  StatsOptions go;
  go.exponent_histogram = false;
  StatsOptions yo;
  yo.label_classes = 4;
  const auto tol = testing::ToleranceFor(DType::kFloat32);
  for (int s = 0; s < kSteps; ++s) {
    const StepBatch& b = batches[static_cast<std::size_t>(s)];
    ASSERT_EQ(b.key.global_step, s);
    EXPECT_EQ(b.stats.size(), 1u + (s % 2 == 0) + (s % 3 == 0)) << "step " << s;
    const TensorStatsRecord* wr = FindStats(b, 2);
    ASSERT_NE(wr, nullptr) << "step " << s;
    EXPECT_TRUE(testing::ResultMatches(
        testing::ToResult(*wr),
        testing::ReferenceReduce(TensorView::Host(ws[s].data(), DType::kFloat32, {2, 4}), wo), tol))
        << "weight, step " << s;
    const TensorStatsRecord* gr = FindStats(b, 1);
    ASSERT_EQ(gr != nullptr, s % 2 == 0) << "step " << s;
    if (gr != nullptr) {
      EXPECT_TRUE(testing::ResultMatches(
          testing::ToResult(*gr),
          testing::ReferenceReduce(TensorView::Host(gs[s].data(), DType::kFloat32, 8), go), tol))
          << "gradient, step " << s;
    }
    const TensorStatsRecord* yr = FindStats(b, 0);
    ASSERT_EQ(yr != nullptr, s % 3 == 0) << "step " << s;
    if (yr != nullptr) {
      EXPECT_TRUE(yr->has_stats);
      EXPECT_EQ(yr->stats.count, 6u);
      EXPECT_TRUE(testing::ResultMatches(
          testing::ToResult(*yr),
          testing::ReferenceReduce(TensorView::Host(ys[s].data(), DType::kInt32, 6), yo), tol))
          << "labels, step " << s;
    }
  }
}

// The queue's high-water mark in bytes counts what a step's records hold.
// EndStep sums it as it writes them (a record of stats only without looking
// past its histogram); here the sum is taken by hand from the written batch.
TEST(SessionTest, QueueHighWaterBytesCountWhatTheRecordsHold) {
  SessionConfig config = TestConfig();
  const CollectionConfig weights = WeightsWithHistogramAndChannels();
  config.collections = {weights};
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(config, sink);
  std::vector<float> w(8), g(8);
  for (int i = 0; i < 8; ++i) {
    w[i] = static_cast<float>(i - 3) * 1.5f;
    g[i] = std::ldexp(1.0f, -4 * i);  // 8 exponent bins
  }
  ASSERT_TRUE(
      session->RegisterTensor({"conv.weight", TensorView::Host(w.data(), DType::kFloat32, {2, 4})})
          .ok());
  ASSERT_TRUE(
      session
          ->RegisterTensor({"gradient/conv.weight", TensorView::Host(g.data(), DType::kFloat32, 8)})
          .ok());
  ASSERT_TRUE(session->EndStep().ok());
  ASSERT_TRUE(session->Close().ok());
  const auto batches = sink->batches();
  ASSERT_EQ(batches.size(), 1u);
  const StepBatch& b = batches[0];
  ASSERT_EQ(b.stats.size(), 2u);
  ASSERT_TRUE(b.drops.empty());
  std::uint64_t expected = sizeof(StepBatch);
  for (const TensorStatsRecord& r : b.stats) {
    expected += sizeof(TensorStatsRecord);
    ASSERT_TRUE(r.exponent_histogram);
    expected += 8 * r.exponent_histogram->counts.size();
    if (r.linear_histogram) expected += 8 * r.linear_histogram->counts.size();
    if (r.per_channel) expected += sizeof(TensorStats) * r.per_channel->channels.size();
  }
  const TensorStatsRecord* gr = FindStats(b, 1);
  ASSERT_NE(gr, nullptr);
  EXPECT_EQ(gr->exponent_histogram->counts.size(), 29u);  // 2^0 .. 2^-28
  const TensorStatsRecord* wr = FindStats(b, 0);
  ASSERT_NE(wr, nullptr);
  ASSERT_TRUE(wr->linear_histogram && wr->per_channel);
  EXPECT_EQ(wr->linear_histogram->counts.size(), 8u);
  EXPECT_EQ(wr->per_channel->channels.size(), 2u);
  EXPECT_EQ(session->counters().queue_high_water_bytes, expected);
}

// EndStep reuses the previous step's requests when the same collections are
// due, the same tensors registered, and every due tensor has a fixed host
// view and asks for stats only. Here the values change in place at every
// step, a collection is due every other step, a tensor is registered late,
// a raw snapshot is requested once, and one tensor has a view callback:
// every step must hold exactly its due tensors, each matching the reference
// for its values at that step, and the callback must run at each of its
// steps. (Each change comes at a step due like the one before it, where the
// previous requests would otherwise serve.)
TEST(SessionTest, RequestsReusedAcrossStepsFollowTheTensorsAndTheSchedule) {
  SessionConfig config = TestConfig();
  CollectionConfig gradients;
  gradients.name = "gradients";
  gradients.save_config.base.save_interval = 4;
  config.collections = {gradients};
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(config, sink);
  std::vector<float> w(16), b(4), g(16), late(8), cb(8);
  ASSERT_TRUE(
      session->RegisterTensor({"fc.weight", TensorView::Host(w.data(), DType::kFloat32, {4, 4})})
          .ok());
  ASSERT_TRUE(
      session->RegisterTensor({"fc.bias", TensorView::Host(b.data(), DType::kFloat32, 4)}).ok());
  ASSERT_TRUE(
      session
          ->RegisterTensor({"gradient/fc.weight", TensorView::Host(g.data(), DType::kFloat32, 16)})
          .ok());
  constexpr int kSteps = 12;
  constexpr int kLateStep = 6, kRawStep = 7, kCallbackFrom = 10;
  int callbacks = 0;
  std::vector<std::map<std::uint32_t, std::vector<float>>> expected(kSteps);
  for (int s = 0; s < kSteps; ++s) {
    if (s == kLateStep) {
      ASSERT_TRUE(
          session
              ->RegisterTensor({"late.weight", TensorView::Host(late.data(), DType::kFloat32, 8)})
              .ok());
    }
    if (s == kCallbackFrom) {
      TensorSpec spec("cb.weight", TensorView::Host(nullptr, DType::kFloat32, 8));
      spec.view_fn = [&](TensorView* v) {
        ++callbacks;
        v->data = cb.data();
        return Status::OK();
      };
      ASSERT_TRUE(session->RegisterTensor(spec).ok());
    }
    if (s == kRawStep) session->CaptureRawFor("fc.bias", 1);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) * 0.25f - s;
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(s * s) + i;
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = std::ldexp(1.0f, -static_cast<int>(i) - s);
    for (std::size_t i = 0; i < late.size(); ++i) late[i] = static_cast<float>(s) - i;
    for (std::size_t i = 0; i < cb.size(); ++i) cb[i] = static_cast<float>(i * s) * 0.5f;
    expected[s][0] = w;
    expected[s][1] = b;
    if (s % 4 == 0) expected[s][2] = g;
    if (s >= kLateStep) expected[s][3] = late;
    if (s >= kCallbackFrom) expected[s][4] = cb;
    ASSERT_TRUE(session->EndStep().ok());
  }
  ASSERT_TRUE(session->Close().ok());
  EXPECT_EQ(callbacks, kSteps - kCallbackFrom);
  const auto batches = sink->batches();
  ASSERT_EQ(batches.size(), static_cast<std::size_t>(kSteps));
  const auto tol = testing::ToleranceFor(DType::kFloat32);
  for (int s = 0; s < kSteps; ++s) {
    const StepBatch& batch = batches[static_cast<std::size_t>(s)];
    EXPECT_EQ(batch.stats.size(), expected[s].size()) << "step " << s;
    for (const auto& [id, values] : expected[s]) {
      const TensorStatsRecord* r = FindStats(batch, id);
      ASSERT_NE(r, nullptr) << "tensor " << id << ", step " << s;
      EXPECT_TRUE(testing::ResultMatches(
          testing::ToResult(*r),
          testing::ReferenceReduce(TensorView::Host(values.data(), DType::kFloat32,
                                                    static_cast<std::int64_t>(values.size())),
                                   StatsOptions{}),
          tol))
          << "tensor " << id << ", step " << s;
    }
    const RawSnapshot* raw = testing::FindRaw(batch, 1);
    ASSERT_EQ(raw != nullptr, s == kRawStep) << "step " << s;
    if (raw != nullptr) {
      ASSERT_EQ(raw->bytes.size(), b.size() * sizeof(float));
      EXPECT_EQ(std::memcmp(raw->bytes.data(), expected[s][1].data(), raw->bytes.size()), 0);
    }
  }
}

TEST(SessionTest, TimingIsRecordedPerStepAndInTotal) {
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(TestConfig(), sink);
  std::vector<float> w(1 << 16, 0.5f);
  ASSERT_TRUE(
      session
          ->RegisterTensor({"big.weight", TensorView::Host(w.data(), DType::kFloat32,
                                                           static_cast<std::int64_t>(w.size()))})
          .ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(session->BeginStep().ok());
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(5)) {
    }  // "training"
    ASSERT_TRUE(session->EndStep().ok());
    const StepTiming t = session->last_step_timing();
    EXPECT_GE(t.step_seconds, 0.005);
    EXPECT_GT(t.capture_seconds, 0.0);
    EXPECT_LT(t.capture_seconds, t.step_seconds);
  }
  const CaptureTotals totals = session->capture_totals();
  EXPECT_EQ(totals.steps, 3u);
  EXPECT_EQ(totals.steps_saved, 3u);
  EXPECT_GE(totals.step_seconds, 0.015);
  ASSERT_TRUE(session->Close().ok());
  for (const StepBatch& b : sink->batches()) {
    EXPECT_GT(b.capture_seconds, 0.0);
    EXPECT_GE(b.step_seconds, 0.005);
    EXPECT_LE(b.capture_seconds, b.step_seconds);
  }
}

}  // namespace
}  // namespace tstat
