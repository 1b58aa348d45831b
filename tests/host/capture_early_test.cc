// Session::CaptureEarly: a registered host tensor reduced when the caller
// says its data is there (a layer's output, before the framework frees it),
// against the reference and against what EndStep computes; each case where
// EndStep must capture instead; the errors; and captures in the background
// (the session's capture thread): the data kept until taken back, in order,
// a changed tensor left out, the queue's limits, Close.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "host/pipeline/background_thread.h"
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
EarlyCapture Early(Session* session, std::uint32_t id,
                   EarlyCaptureMode mode = EarlyCaptureMode::kNow) {
  Result<EarlyCapture> r = session->CaptureEarly(id, mode);
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

// The test config with a collection "moving" (tensors named moving/...)
// whose stats have exact deltas.
SessionConfig ConfigWithDeltas() {
  SessionConfig config = TestConfig();
  CollectionConfig moving;
  moving.name = "moving";
  moving.include_regex = {"^moving/"};
  moving.stats.delta = true;
  moving.stats.delta_atol = 0.0;
  moving.stats.delta_rtol = 0.0;
  config.collections.push_back(moving);
  return config;
}

// Tensors `a` and `b` held the same values at `batch`'s step: their records
// must agree, deltas included.
void ExpectSameRecords(const StepBatch& batch, std::uint32_t a, std::uint32_t b) {
  const TensorStatsRecord* ra = FindStats(batch, a);
  const TensorStatsRecord* rb = FindStats(batch, b);
  ASSERT_NE(ra, nullptr) << batch.key.global_step;
  ASSERT_NE(rb, nullptr) << batch.key.global_step;
  EXPECT_TRUE(testing::ResultMatches(testing::ToResult(*ra), testing::ToResult(*rb),
                                     testing::ToleranceFor(DType::kFloat64)));
  ASSERT_EQ(ra->delta.has_value(), rb->delta.has_value()) << batch.key.global_step;
  if (ra->delta) {
    EXPECT_GT(ra->delta->changed_count, 0u);
    EXPECT_EQ(ra->delta->changed_count, rb->delta->changed_count);
    EXPECT_DOUBLE_EQ(ra->delta->l2, rb->delta->l2) << batch.key.global_step;
  }
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
  SessionConfig config = ConfigWithDeltas();
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
  for (const StepBatch& batch : batches) ExpectSameRecords(batch, early_id, late_id);
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

constexpr auto kInBackground = EarlyCaptureMode::kInBackground;

// The capture thread exists where the process may run on two processors.
bool HasCaptureThread() { return host::UsableProcessors() > 1; }

TEST(CaptureEarlyTest, BackgroundCapturesKeepTheDataUntilTakenBackInOrder) {
  if (!HasCaptureThread()) GTEST_SKIP() << "one core: no capture thread";
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(TestConfig(), sink);
  constexpr int kTensors = 3, kN = 20000;  // several tiles each
  std::vector<const std::vector<float>*> current(kTensors, nullptr);
  std::vector<std::uint32_t> ids;
  for (int i = 0; i < kTensors; ++i) {
    ids.push_back(session
                      ->RegisterTensor(SlotSpec("layer" + std::to_string(i) + "_output",
                                                &current[static_cast<std::size_t>(i)], kN))
                      .value());
  }
  // seen[step][i]: what tensor i held when it was captured.
  std::vector<std::vector<std::vector<float>>> seen;
  for (int step = 0; step < 4; ++step) {
    ASSERT_TRUE(session->BeginStep().ok());
    std::vector<std::vector<float>> values;
    for (int i = 0; i < kTensors; ++i) {
      values.push_back(Values(kN, 0.25f * static_cast<float>(1 + i + 3 * step)));
    }
    for (int i = 0; i < kTensors; ++i) {
      current[static_cast<std::size_t>(i)] = &values[static_cast<std::size_t>(i)];
      EXPECT_EQ(Early(session.get(), ids[static_cast<std::size_t>(i)], kInBackground),
                EarlyCapture::kQueued);
      // Asked again in the step: already captured.
      EXPECT_EQ(Early(session.get(), ids[static_cast<std::size_t>(i)], kInBackground),
                EarlyCapture::kCaptured);
    }
    seen.push_back(values);
    if (step == 0) {
      // Taken back oldest first; each asked about once.
      std::vector<std::uint32_t> asked;
      EXPECT_EQ(session->FinishEarly(/*wait=*/true,
                                     [&](std::uint32_t id) {
                                       asked.push_back(id);
                                       return true;
                                     }),
                static_cast<std::size_t>(kTensors));
      EXPECT_EQ(asked, ids);
      EXPECT_EQ(session->FinishEarly(/*wait=*/true), 0u);  // nothing left
    } else if (step == 1) {
      // Tensor 1 changed while it was read: its record is left out, and
      // EndStep does not capture it (its view gives no data then).
      EXPECT_EQ(session->FinishEarly(/*wait=*/true, [&](std::uint32_t id) { return id != ids[1]; }),
                static_cast<std::size_t>(kTensors));
    } else if (step == 2) {
      // Not taken back: EndStep waits for them, so the data stays until then.
    } else {
      // Taken back as they are read, without waiting, until none is left.
      std::size_t taken = 0;
      while (taken < static_cast<std::size_t>(kTensors)) {
        taken += session->FinishEarly(/*wait=*/false);
      }
    }
    if (step != 2) {
      // Taken back: the data may go, as a freed activation.
      for (auto& v : values) v.assign(kN, 1e30f);
      std::fill(current.begin(), current.end(), nullptr);
    }
    ASSERT_TRUE(session->EndStep().ok());
  }
  ASSERT_TRUE(session->Close().ok());
  const auto batches = sink->batches();
  for (int step = 0; step < 4; ++step) {
    const StepBatch* b = FindBatch(batches, step);
    ASSERT_NE(b, nullptr) << step;
    for (int i = 0; i < kTensors; ++i) {
      const std::uint32_t id = ids[static_cast<std::size_t>(i)];
      int records = 0;
      for (const TensorStatsRecord& r : b->stats) records += r.tensor_id == id;
      if (step == 1 && i == 1) {
        EXPECT_EQ(records, 0);  // left out, and not captured by EndStep either
        continue;
      }
      EXPECT_EQ(records, 1) << step << " " << i;
      EXPECT_TRUE(MatchesReference(
          FindStats(*b, id), seen[static_cast<std::size_t>(step)][static_cast<std::size_t>(i)]))
          << step << " " << i;
    }
  }
}

TEST(CaptureEarlyTest, BackgroundAndEndStepCapturesAgreeIncludingDeltas) {
  if (!HasCaptureThread()) GTEST_SKIP() << "one core: no capture thread";
  // As EarlyAndEndStepCapturesAgreeIncludingDeltas, in the background; at
  // step 2 the background read is said to have raced with a change, so
  // EndStep captures that tensor instead (its view still gives the data).
  // The delta pass wrote what it read over the previous values: that
  // step's delta is dropped, with a record saying so, and the next step's
  // is against the values EndStep read.
  auto sink = std::make_shared<io::MemorySink>();
  SessionConfig config = ConfigWithDeltas();
  auto session = MakeSession(config, sink);
  const std::vector<float>* a = nullptr;
  const std::vector<float>* b = nullptr;
  const std::uint32_t early_id = session->RegisterTensor(SlotSpec("moving/a", &a, 9000)).value();
  const std::uint32_t late_id = session->RegisterTensor(SlotSpec("moving/b", &b, 9000)).value();
  for (int step = 0; step < 4; ++step) {
    std::vector<float> values = Values(9000, 1.0f + 0.25f * static_cast<float>(step * step));
    a = b = &values;
    ASSERT_TRUE(session->BeginStep().ok());
    ASSERT_EQ(Early(session.get(), early_id, kInBackground), EarlyCapture::kQueued);
    EXPECT_EQ(session->FinishEarly(/*wait=*/true, [&](std::uint32_t) { return step != 2; }), 1u);
    ASSERT_TRUE(session->EndStep().ok());
  }
  ASSERT_TRUE(session->Close().ok());
  const auto batches = sink->batches();
  ASSERT_EQ(batches.size(), 4u);
  for (const StepBatch& batch : batches) {
    int records = 0;
    for (const TensorStatsRecord& r : batch.stats) records += r.tensor_id == early_id;
    EXPECT_EQ(records, 1) << batch.key.global_step;
    int delta_drops = 0;
    for (const DropRecord& d : batch.drops) {
      delta_drops += d.tensor_id == early_id && d.kind == "delta" &&
                     d.reason.find("changed in place while it was read") != std::string::npos;
    }
    EXPECT_EQ(delta_drops, batch.key.global_step == 2 ? 1 : 0) << batch.key.global_step;
    if (batch.key.global_step != 2) ExpectSameRecords(batch, early_id, late_id);
  }
  EXPECT_FALSE(FindStats(batches[0], early_id)->delta.has_value());  // nothing before it
  const TensorStatsRecord* raced = FindStats(batches[2], early_id);
  ASSERT_NE(raced, nullptr);
  EXPECT_FALSE(raced->delta.has_value());
  EXPECT_TRUE(testing::ResultMatches(testing::ToResult(*raced),
                                     testing::ToResult(*FindStats(batches[2], late_id)),
                                     testing::ToleranceFor(DType::kFloat64)));
  EXPECT_TRUE(FindStats(batches[3], early_id)->delta.has_value());  // against step 2's values

  // early_capture_thread off: no capture thread, everything at once.
  auto sink2 = std::make_shared<io::MemorySink>();
  config.pipeline.early_capture_thread = false;
  auto session2 = MakeSession(config, sink2);
  std::vector<float> values = Values(4096, 1.5f);
  const std::vector<float>* current = &values;
  const std::uint32_t id = session2->RegisterTensor(SlotSpec("plain", &current, 4096)).value();
  ASSERT_TRUE(session2->BeginStep().ok());
  EXPECT_EQ(Early(session2.get(), id, kInBackground), EarlyCapture::kCaptured);
  EXPECT_EQ(session2->FinishEarly(/*wait=*/true), 0u);
  ASSERT_TRUE(session2->EndStep().ok());
  // ... or, asked so, left to EndStep.
  ASSERT_TRUE(session2->BeginStep().ok());
  EXPECT_EQ(Early(session2.get(), id, EarlyCaptureMode::kInBackgroundOrAtEndStep),
            EarlyCapture::kAtEndStep);
  ASSERT_TRUE(session2->EndStep().ok());
  ASSERT_TRUE(session2->Close().ok());
  const auto batches2 = sink2->batches();
  ASSERT_EQ(batches2.size(), 2u);
  for (const StepBatch& batch : batches2) {
    EXPECT_TRUE(MatchesReference(FindStats(batch, id), values)) << batch.key.global_step;
  }
}

TEST(CaptureEarlyTest, BackgroundCapturesWithAndWithoutEvictionMatchTheReference) {
  if (!HasCaptureThread()) GTEST_SKIP() << "one core: no capture thread";
  // pipeline.early_capture_evict: the capture thread drops what it read
  // from the caches. Neither the records nor the tensor's bytes change; a
  // tensor that begins and ends inside cache lines included.
  for (const bool evict : {true, false}) {
    auto sink = std::make_shared<io::MemorySink>();
    SessionConfig config = TestConfig();
    config.pipeline.early_capture_evict = evict;
    auto session = MakeSession(config, sink);
    constexpr int kN = 9001;
    std::vector<float> storage = Values(kN + 1, 0.75f);
    const std::vector<float> values(storage.begin() + 1, storage.end());
    const float* const data = storage.data() + 1;  // 4 bytes into a line
    TensorSpec spec;
    spec.name = "unaligned";
    spec.view = TensorView::Host(data, DType::kFloat32, kN);
    const std::uint32_t id = session->RegisterTensor(spec).value();
    const std::vector<float> before = storage;
    for (int step = 0; step < 2; ++step) {
      ASSERT_TRUE(session->BeginStep().ok());
      ASSERT_EQ(Early(session.get(), id, kInBackground), EarlyCapture::kQueued) << evict;
      EXPECT_EQ(session->FinishEarly(/*wait=*/true), 1u);
      ASSERT_TRUE(session->EndStep().ok());
    }
    ASSERT_TRUE(session->Close().ok());
    EXPECT_EQ(storage, before) << evict;
    const auto batches = sink->batches();
    ASSERT_EQ(batches.size(), 2u);
    for (const StepBatch& batch : batches) {
      EXPECT_TRUE(MatchesReference(FindStats(batch, id), values))
          << "evict " << evict << ", step " << batch.key.global_step;
    }
  }
}

TEST(CaptureEarlyTest, TheBackgroundQueueIsBoundedAndCloseTakesItBack) {
  if (!HasCaptureThread()) GTEST_SKIP() << "one core: no capture thread";
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(TestConfig(), sink);
  constexpr int kTensors = 300, kN = 512;  // more tensors than the queue holds
  std::vector<std::vector<float>> values;
  std::vector<const std::vector<float>*> current;
  for (int i = 0; i < kTensors; ++i)
    values.push_back(Values(kN, 0.01f * static_cast<float>(i + 1)));
  for (int i = 0; i < kTensors; ++i) current.push_back(&values[static_cast<std::size_t>(i)]);
  std::vector<std::uint32_t> ids;
  for (int i = 0; i < kTensors; ++i) {
    ids.push_back(session
                      ->RegisterTensor(SlotSpec("t" + std::to_string(i),
                                                &current[static_cast<std::size_t>(i)], kN))
                      .value());
  }
  ASSERT_TRUE(session->BeginStep().ok());
  int queued = 0, now = 0;
  for (std::uint32_t id : ids) {
    const EarlyCapture e = Early(session.get(), id, kInBackground);
    queued += e == EarlyCapture::kQueued;
    now += e == EarlyCapture::kCaptured;
  }
  // Nothing was taken back: the queue filled up, the rest was reduced at once.
  EXPECT_EQ(queued, 256);
  EXPECT_EQ(now, kTensors - 256);
  // Full: left to EndStep when asked so (here the step's end is Close, which
  // captures no registered tensor).
  std::vector<float> more = Values(kN, 3.0f);
  const std::vector<float>* more_current = &more;
  const std::uint32_t more_id =
      session->RegisterTensor(SlotSpec("more", &more_current, kN)).value();
  EXPECT_EQ(Early(session.get(), more_id, EarlyCaptureMode::kInBackgroundOrAtEndStep),
            EarlyCapture::kAtEndStep);
  // Close ends the open step with every queued record.
  ASSERT_TRUE(session->Close().ok());
  const auto batches = sink->batches();
  ASSERT_EQ(batches.size(), 1u);
  const StepBatch& b = batches[0];
  for (int i = 0; i < kTensors; ++i) {
    EXPECT_TRUE(MatchesReference(FindStats(b, ids[static_cast<std::size_t>(i)]),
                                 values[static_cast<std::size_t>(i)]))
        << i;
  }
}

}  // namespace
}  // namespace tstat
