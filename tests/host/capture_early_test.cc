// Session::CaptureEarly: a registered host tensor reduced when the caller
// says its data is there (a layer's output, before the framework frees it),
// against the reference and against what EndStep computes; each case where
// EndStep must capture instead; and the errors.
#include <gtest/gtest.h>

#include <vector>

#include "tests/host/host_test_util.h"
#include "tests/support/compare.h"
#include "tests/support/reference.h"
#include "tstat/session.h"

namespace tstat {
namespace {

using testing::FindBatch;
using testing::FindRaw;
using testing::FindStats;
using testing::MakeSession;
using testing::TestConfig;

std::vector<float> Values(int n, float scale) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 7919) % 101 - 50);
  return v;
}

::testing::AssertionResult MatchesReference(const TensorStatsRecord* got,
                                            const std::vector<float>& data) {
  if (got == nullptr) return ::testing::AssertionFailure() << "no record";
  const TensorView v =
      TensorView::Host(data.data(), DType::kFloat32, static_cast<std::int64_t>(data.size()));
  return testing::ResultMatches(testing::ToResult(*got), testing::ReferenceReduce(v, {}),
                                testing::ToleranceFor(DType::kFloat32));
}

// CaptureEarly's answer (a failure fails the test).
EarlyCapture Early(Session* session, std::uint32_t id) {
  Result<EarlyCapture> r = session->CaptureEarly(id);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : static_cast<EarlyCapture>(255);
}

// A tensor whose view callback reads `*current` (null: not there).
TensorSpec SlotSpec(const std::string& name, const std::vector<float>** current, int n) {
  TensorSpec spec;
  spec.name = name;
  spec.view = TensorView::Host(nullptr, DType::kFloat32, n);
  spec.view_fn = [current](TensorView* v) -> Status {
    v->data = *current == nullptr ? nullptr : (*current)->data();
    return Status::OK();
  };
  return spec;
}

TEST(CaptureEarlyTest, DueTensorsAreReducedAtOnceAndSkippedByEndStep) {
  auto sink = std::make_shared<io::MemorySink>();
  SessionConfig config = TestConfig();
  config.save_config.base.save_interval = 2;
  auto session = MakeSession(config, sink);
  const std::vector<float>* current = nullptr;
  const std::uint32_t id = session->RegisterTensor(SlotSpec("block_output", &current, 64)).value();
  std::vector<std::vector<float>> seen;
  for (int step = 0; step < 4; ++step) {
    ASSERT_TRUE(session->BeginStep().ok());
    std::vector<float> values = Values(64, 0.5f + static_cast<float>(step));
    current = &values;
    EXPECT_EQ(Early(session.get(), id),
              step % 2 == 0 ? EarlyCapture::kCaptured : EarlyCapture::kNotDue)
        << step;
    // Asked again in the step: already captured (not reduced twice).
    if (step % 2 == 0) {
      EXPECT_EQ(Early(session.get(), id), EarlyCapture::kCaptured);
    }
    seen.push_back(values);
    // The data is gone before the step ends, as a freed activation.
    values.assign(64, 1e30f);
    current = nullptr;
    ASSERT_TRUE(session->EndStep().ok());
  }
  ASSERT_TRUE(session->Close().ok());
  const auto batches = sink->batches();
  for (int step : {0, 2}) {
    const StepBatch* b = FindBatch(batches, step);
    ASSERT_NE(b, nullptr) << step;
    int records = 0;
    for (const TensorStatsRecord& r : b->stats) records += r.tensor_id == id;
    EXPECT_EQ(records, 1) << step;  // EndStep did not capture it again
    EXPECT_TRUE(MatchesReference(FindStats(*b, id), seen[static_cast<std::size_t>(step)]));
  }
  EXPECT_EQ(FindBatch(batches, 1), nullptr);
  EXPECT_EQ(FindBatch(batches, 3), nullptr);
}

TEST(CaptureEarlyTest, EarlyAndEndStepCapturesAgreeIncludingDeltas) {
  // Two tensors with the same values and a delta collection: one captured
  // early, one by EndStep. Their records must be the same.
  auto sink = std::make_shared<io::MemorySink>();
  SessionConfig config = TestConfig();
  CollectionConfig moving;
  moving.name = "moving";
  moving.include_regex = {"^moving/"};
  moving.stats.delta = true;
  moving.stats.delta_atol = 0.0;
  moving.stats.delta_rtol = 0.0;
  config.collections.push_back(moving);
  auto session = MakeSession(config, sink);
  const std::vector<float>* a = nullptr;
  const std::vector<float>* b = nullptr;
  const std::uint32_t early_id = session->RegisterTensor(SlotSpec("moving/a", &a, 32)).value();
  const std::uint32_t late_id = session->RegisterTensor(SlotSpec("moving/b", &b, 32)).value();
  for (int step = 0; step < 3; ++step) {
    std::vector<float> values = Values(32, 1.0f + 0.25f * static_cast<float>(step * step));
    a = b = &values;
    ASSERT_TRUE(session->BeginStep().ok());
    ASSERT_EQ(Early(session.get(), early_id), EarlyCapture::kCaptured);
    ASSERT_TRUE(session->EndStep().ok());
  }
  ASSERT_TRUE(session->Close().ok());
  const auto batches = sink->batches();
  ASSERT_EQ(batches.size(), 3u);
  for (const StepBatch& batch : batches) {
    const TensorStatsRecord* e = FindStats(batch, early_id);
    const TensorStatsRecord* l = FindStats(batch, late_id);
    ASSERT_NE(e, nullptr);
    ASSERT_NE(l, nullptr);
    EXPECT_TRUE(testing::ResultMatches(testing::ToResult(*e), testing::ToResult(*l),
                                       testing::ToleranceFor(DType::kFloat64)));
    ASSERT_EQ(e->delta.has_value(), l->delta.has_value()) << batch.key.global_step;
    if (e->delta) {
      EXPECT_GT(e->delta->changed_count, 0u);
      EXPECT_EQ(e->delta->changed_count, l->delta->changed_count);
      EXPECT_DOUBLE_EQ(e->delta->l2, l->delta->l2);
    }
  }
  EXPECT_FALSE(FindStats(batches[0], early_id)->delta.has_value());  // nothing before it
}

TEST(CaptureEarlyTest, WhatMustWaitForEndStep) {
  auto sink = std::make_shared<io::MemorySink>();
  SessionConfig config = TestConfig();
  config.raw_save_config.base.save_interval = 3;  // raw snapshots at steps 0 and 3
  auto session = MakeSession(config, sink);
  std::vector<float> values = Values(16, 2.0f);
  const std::vector<float>* current = &values;
  const std::uint32_t id = session->RegisterTensor(SlotSpec("layer_output", &current, 16)).value();
  // No open step: EndStep opens one and captures it.
  EXPECT_EQ(Early(session.get(), id), EarlyCapture::kAtEndStep);
  ASSERT_TRUE(session->EndStep().ok());  // step 0: raw due as well
  ASSERT_TRUE(session->BeginStep().ok());
  EXPECT_EQ(Early(session.get(), id), EarlyCapture::kCaptured);  // step 1: stats only
  ASSERT_TRUE(session->EndStep().ok());
  // A raw request (a rule's capture_raw_steps) waits for EndStep.
  session->CaptureRawFor("layer_output", 1);
  ASSERT_TRUE(session->BeginStep().ok());
  EXPECT_EQ(Early(session.get(), id), EarlyCapture::kAtEndStep);
  ASSERT_TRUE(session->EndStep().ok());
  ASSERT_TRUE(session->BeginStep().ok());  // step 3: raw due by the schedule
  EXPECT_EQ(Early(session.get(), id), EarlyCapture::kAtEndStep);
  ASSERT_TRUE(session->EndStep().ok());
  // Not there at this step: nothing to capture now or later.
  current = nullptr;
  ASSERT_TRUE(session->BeginStep().ok());
  EXPECT_EQ(Early(session.get(), id), EarlyCapture::kNotDue);
  ASSERT_TRUE(session->EndStep().ok());
  // Errors: an ad-hoc tensor's id, an id nobody registered.
  ASSERT_TRUE(
      session->SaveTensor("adhoc", TensorView::Host(values.data(), DType::kFloat32, 16)).ok());
  EXPECT_EQ(session->CaptureEarly(id + 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(session->CaptureEarly(12345).status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(session->Close().ok());
  EXPECT_EQ(session->CaptureEarly(id).status().code(), StatusCode::kFailedPrecondition);
  const auto batches = sink->batches();
  for (std::int64_t step : {0, 1, 2, 3}) {
    const StepBatch* b = FindBatch(batches, step);
    ASSERT_NE(b, nullptr) << step;
    EXPECT_TRUE(MatchesReference(FindStats(*b, id), values)) << step;
    EXPECT_EQ(FindRaw(*b, id) != nullptr, step != 1) << step;
  }
  EXPECT_EQ(FindBatch(batches, 4), nullptr);  // step 4: nothing there
}

}  // namespace
}  // namespace tstat
