// The asynchronous pipeline: the raw-memory cap (drops recorded, never
// silent), waits counted when the writer falls behind, the drop-stats policy,
// Close drains, the destructor flushes, flushes by time and by steps, write
// failures that training survives, and the CUDA path (collector thread) with
// a host-memory stand-in for the GPU. Also run under ThreadSanitizer.
#include "host/pipeline/pipeline.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "host/pipeline/null_sink.h"
#include "host/pipeline/stop_state.h"
#include "io/format/run_layout.h"
#include "io/h5/posix_file.h"
#include "io/write/hdf5_run_writer.h"
#include "tests/host/host_test_util.h"
#include "tests/support/compare.h"
#include "tests/support/reference.h"
#include "tstat/session.h"
#include "tstat/trial.h"

namespace tstat {
namespace {

using testing::FindRaw;
using testing::FindStats;
using testing::MakeSession;
using testing::TestConfig;

std::vector<float> Values(int n, float scale) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = scale * static_cast<float>(i % 17) - 3.0f;
  return v;
}

TEST(PipelineTest, RawSnapshotsOverTheMemoryCapAreDroppedAndRecorded) {
  SessionConfig config = TestConfig();
  config.raw_save_config.base.save_interval = 1;
  config.pipeline.raw_memory_cap_bytes = 3000;  // room for one 2 KB snapshot at a time
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(config, sink, {/*write_delay_ms=*/30, {}});
  std::vector<float> a = Values(512, 1.0f), b = Values(512, 2.0f);  // 2048 bytes each
  ASSERT_TRUE(
      session->RegisterTensor({"a.weight", TensorView::Host(a.data(), DType::kFloat32, 512)}).ok());
  ASSERT_TRUE(
      session->RegisterTensor({"b.weight", TensorView::Host(b.data(), DType::kFloat32, 512)}).ok());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(session->EndStep().ok());
  ASSERT_TRUE(session->Close().ok());
  const PipelineCounters c = session->counters();
  std::uint64_t raws = 0, drops = 0;
  for (const StepBatch& batch : sink->batches()) {
    // Stats are never dropped; each tensor's raw is either stored or recorded as dropped.
    for (std::uint32_t id : {0u, 1u}) {
      EXPECT_NE(FindStats(batch, id), nullptr);
      const RawSnapshot* r = FindRaw(batch, id);
      int dropped = 0;
      for (const DropRecord& d : batch.drops) {
        if (d.tensor_id != id) continue;
        ++dropped;
        EXPECT_EQ(d.kind, "raw");
        EXPECT_EQ(d.bytes, 2048u);
        EXPECT_NE(d.reason.find("raw snapshot memory cap"), std::string::npos) << d.reason;
      }
      EXPECT_EQ((r != nullptr) + dropped, 1) << "step " << batch.key.global_step;
      if (r != nullptr) {
        ASSERT_EQ(r->bytes.size(), 2048u);
        EXPECT_EQ(std::memcmp(r->bytes.data(), id == 0 ? a.data() : b.data(), 2048), 0);
        EXPECT_EQ(r->shape, (std::vector<std::int64_t>{512}));
      }
      raws += r != nullptr;
      drops += dropped;
    }
  }
  EXPECT_GE(drops, 4u);  // at least the second tensor of every step
  EXPECT_EQ(c.raw_dropped, drops);
  EXPECT_EQ(c.raw_dropped_bytes, drops * 2048);
  EXPECT_EQ(raws + drops, 8u);
}

TEST(PipelineTest, WaitsAreCountedWhenTheWriterFallsBehindAndNothingIsLost) {
  SessionConfig config = TestConfig();
  config.pipeline.queue_capacity = 1;
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(config, sink, {/*write_delay_ms=*/20, {}});
  std::vector<float> w = Values(64, 1.0f);
  ASSERT_TRUE(
      session->RegisterTensor({"w.weight", TensorView::Host(w.data(), DType::kFloat32, 64)}).ok());
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(session->EndStep().ok());
  ASSERT_TRUE(session->Close().ok());
  const PipelineCounters c = session->counters();
  EXPECT_GE(c.stats_waits, 3u);
  EXPECT_GT(c.stats_wait_seconds, 0.0);
  EXPECT_EQ(c.queue_high_water, 1u);
  EXPECT_EQ(sink->batches().size(), 6u);
  EXPECT_EQ(c.records_written, 6u);
  EXPECT_EQ(c.records_lost, 0u);
}

TEST(PipelineTest, DropStatsPolicyRecordsWhatWasDropped) {
  SessionConfig config = TestConfig();
  config.pipeline.queue_capacity = 1;
  config.pipeline.drop_stats_when_full = true;
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(config, sink, {/*write_delay_ms=*/40, {}});
  std::vector<float> w = Values(64, 1.0f);
  ASSERT_TRUE(
      session->RegisterTensor({"w.weight", TensorView::Host(w.data(), DType::kFloat32, 64)}).ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(session->EndStep().ok());
  ASSERT_TRUE(session->Close().ok());
  const PipelineCounters c = session->counters();
  EXPECT_EQ(c.stats_waits, 0u);
  int kept = 0, dropped = 0;
  for (const StepBatch& b : sink->batches()) {
    if (FindStats(b, 0) != nullptr) ++kept;
    for (const DropRecord& d : b.drops) {
      EXPECT_EQ(d.kind, "stats");
      EXPECT_NE(d.reason.find("writer queue full"), std::string::npos);
      ++dropped;
    }
  }
  EXPECT_EQ(sink->batches().size(), 5u);  // every step is in the file, kept or as drops
  EXPECT_EQ(kept + dropped, 5);
  EXPECT_GE(dropped, 1);
  EXPECT_EQ(c.records_lost, static_cast<std::uint64_t>(dropped));
}

TEST(PipelineTest, CloseDrainsEverything) {
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(TestConfig(), sink, {/*write_delay_ms=*/5, {}});
  std::vector<float> w = Values(32, 1.0f);
  ASSERT_TRUE(
      session->RegisterTensor({"w.weight", TensorView::Host(w.data(), DType::kFloat32, 32)}).ok());
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(session->SaveScalar("loss", i).ok());
    ASSERT_TRUE(session->EndStep().ok());
  }
  ASSERT_TRUE(session->Close().ok());
  EXPECT_TRUE(sink->closed());
  EXPECT_EQ(sink->flushed_batches().size(), 20u);
  EXPECT_EQ(session->counters().records_written, 40u);
  EXPECT_EQ(sink->last_counters().records_written, 40u);
  EXPECT_EQ(sink->last_counters().steps_captured, 20u);
}

TEST(PipelineTest, DestructorWithoutCloseStillFlushes) {
  auto sink = std::make_shared<io::MemorySink>();
  {
    auto session = MakeSession(TestConfig(), sink, {/*write_delay_ms=*/5, {}});
    std::vector<float> w = Values(32, 1.0f);
    ASSERT_TRUE(
        session->RegisterTensor({"w.weight", TensorView::Host(w.data(), DType::kFloat32, 32)})
            .ok());
    for (int i = 0; i < 7; ++i) ASSERT_TRUE(session->EndStep().ok());
    ASSERT_TRUE(session->SaveScalar("final", 1.0).ok());  // pending, no step ended
  }
  EXPECT_TRUE(sink->closed());
  const auto flushed = sink->flushed_batches();
  ASSERT_EQ(flushed.size(), 8u);
  EXPECT_EQ(flushed.back().scalars.size(), 1u);
}

TEST(PipelineTest, FlushesByTimeWithoutClose) {
  SessionConfig config = TestConfig();
  config.pipeline.flush_interval_seconds = 0.02;
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(config, sink);
  ASSERT_TRUE(session->SaveScalar("x", 1).ok());
  ASSERT_TRUE(session->EndStep().ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (sink->flushed_batches().empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(sink->flushed_batches().size(), 1u);
  EXPECT_FALSE(sink->closed());
  ASSERT_TRUE(session->Close().ok());
}

TEST(PipelineTest, FlushesEveryNSteps) {
  SessionConfig config = TestConfig();
  config.pipeline.flush_interval_seconds = 3600;
  config.pipeline.flush_interval_steps = 2;
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(config, sink);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(session->SaveScalar("x", i).ok());
    ASSERT_TRUE(session->EndStep().ok());
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (sink->flushed_batches().size() < 4 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(sink->flushed_batches().size(), 4u);  // the fifth waits for the next pair
  EXPECT_EQ(sink->flush_count(), 2);
  ASSERT_TRUE(session->Close().ok());
  EXPECT_EQ(sink->flushed_batches().size(), 5u);
}

// Steps are announced to the writer in groups (Pipeline::AnnounceLocked):
// the eighth unannounced step wakes it, so does a step queued 5 ms or more
// after the oldest unannounced one (slow training steps), and a lone step
// reaches it at the latest at the flush deadline. When the writer runs is
// up to the scheduler (under a sanitizer it may take a few steps at a time),
// so only what holds for any interleaving is asserted.
TEST(PipelineTest, QueuedStepsReachTheWriterInGroupsAndNeverLaterThanTheFlush) {
  // Batches the sink was given (records_written counts flushed ones only).
  const auto written_within = [](const io::MemorySink& sink, std::size_t batches, double seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (sink.batches().size() < batches && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return sink.batches().size() >= batches;
  };
  std::vector<float> w = Values(16, 1.0f);
  const TensorSpec spec{"w.weight", TensorView::Host(w.data(), DType::kFloat32, 16)};
  {
    SessionConfig config = TestConfig();
    config.pipeline.flush_interval_seconds = 3600;  // no deadline wakeups
    auto sink = std::make_shared<io::MemorySink>();
    auto session = MakeSession(config, sink);
    ASSERT_TRUE(session->RegisterTensor(spec).ok());
    for (int i = 0; i < 16; ++i) ASSERT_TRUE(session->EndStep().ok());
    // Whenever the writer took its last steps, fewer than a group (8) can
    // be waiting after it: at most 7 of the 16 (the RegisterTensor
    // declaration counts as a queued item too).
    EXPECT_TRUE(written_within(*sink, 16 - 7, 30.0)) << sink->batches().size();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a slow step
    ASSERT_TRUE(session->EndStep().ok());
    // The step after the slow one announced every step before it.
    EXPECT_TRUE(written_within(*sink, 16, 30.0)) << sink->batches().size();
    ASSERT_TRUE(session->Close().ok());
    EXPECT_EQ(sink->batches().size(), 17u);
  }
  {
    SessionConfig config = TestConfig();
    config.pipeline.flush_interval_seconds = 0.3;
    auto sink = std::make_shared<io::MemorySink>();
    auto session = MakeSession(config, sink);
    ASSERT_TRUE(session->RegisterTensor(spec).ok());
    ASSERT_TRUE(session->EndStep().ok());  // alone, never announced
    EXPECT_TRUE(written_within(*sink, 1, 30.0));
    ASSERT_TRUE(session->Close().ok());
  }
}

TEST(PipelineTest, AFullDiskNeverStopsTrainingAndLossesAreCounted) {
  auto memory = std::make_shared<io::MemorySink>();
  auto faulty =
      std::make_shared<io::FaultInjectionSink>(std::make_unique<testing::ForwardingSink>(memory));
  SessionConfig config = TestConfig();
  config.pipeline.flush_interval_seconds = 3600;
  config.pipeline.flush_interval_steps = 1;
  auto session = MakeSession(config, faulty);
  std::vector<float> w = Values(16, 1.0f);
  ASSERT_TRUE(
      session->RegisterTensor({"w.weight", TensorView::Host(w.data(), DType::kFloat32, 16)}).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(session->EndStep().ok());
  // Let the writer catch up, then the disk fills up.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (session->counters().records_written < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  faulty->FailAfter(io::SinkOp::kWrite, 0);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(session->EndStep().ok());  // training goes on
  const Status closed = session->Close();
  EXPECT_FALSE(closed.ok());
  EXPECT_EQ(session->status().code(), StatusCode::kResourceExhausted)
      << session->status().ToString();
  const PipelineCounters c = session->counters();
  EXPECT_EQ(c.records_written, 3u);
  EXPECT_EQ(c.records_lost, 4u);
  EXPECT_GE(c.write_errors, 4u);
  EXPECT_EQ(faulty->records_lost(), 4u);
  EXPECT_EQ(memory->batches().size(), 3u);
}

TEST(PipelineTest, AFailedFlushLosesTheUnflushedSegmentAndRecovers) {
  auto memory = std::make_shared<io::MemorySink>();
  auto faulty =
      std::make_shared<io::FaultInjectionSink>(std::make_unique<testing::ForwardingSink>(memory));
  SessionConfig config = TestConfig();
  config.pipeline.flush_interval_seconds = 3600;
  config.pipeline.flush_interval_steps = 2;
  auto session = MakeSession(config, faulty);
  faulty->FailNext(io::SinkOp::kFlush, 1);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(session->SaveScalar("loss", i).ok());
    ASSERT_TRUE(session->EndStep().ok());
  }
  ASSERT_FALSE(session->Close().ok());  // reports the first error
  const PipelineCounters c = session->counters();
  EXPECT_EQ(c.records_lost, 2u);     // steps 0 and 1, with the failed flush
  EXPECT_EQ(c.records_written, 2u);  // steps 2 and 3
  EXPECT_EQ(c.write_errors, 1u);
  EXPECT_EQ(c.records_lost, faulty->records_lost());
}

// The writer seals a segment on its own when its raw snapshots reach
// rotate_bytes, so "written since the pipeline's last flush" is not what a
// later failure loses. The counters follow the writer's own count: the
// failing step's records only, never the steps already sealed.
TEST(PipelineTest, AFailureAfterTheWriterRotatedCountsOnlyWhatItDiscarded) {
  testing::TempDir dir;
  io::Hdf5RunWriterOptions options;
  options.info.run_dir = dir.path();
  auto opened = io::Hdf5RunWriter::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::shared_ptr<io::Hdf5RunWriter> writer = std::move(opened).value();
  writer->set_rotate_bytes(4096);  // two 2 KB snapshots: a segment per 2 steps
  // Segment 2 cannot be created: its .tmp name is taken by a directory.
  const std::string worker_dir = io::JoinPath(dir.path(), io::WorkerDirName(0));
  ASSERT_EQ(::mkdir((io::JoinPath(worker_dir, io::SegmentFileName(2)) + ".tmp").c_str(), 0755), 0);

  SessionConfig config = TestConfig();
  config.raw_save_config.base.save_interval = 1;
  config.pipeline.flush_interval_seconds = 3600;  // only the writer's rotations flush
  auto session = MakeSession(config, writer);
  std::vector<float> w = Values(512, 1.0f);  // 2048 bytes
  ASSERT_TRUE(
      session->RegisterTensor({"w.weight", TensorView::Host(w.data(), DType::kFloat32, 512)}).ok());
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(session->EndStep().ok());  // training goes on
  const Status closed = session->Close();
  EXPECT_FALSE(closed.ok());
  // Steps 0-1 and 2-3 were sealed by rotations; step 4 (stats + raw) found
  // segment 2 blocked and was discarded; step 5 went to segment 3.
  EXPECT_NE(session->status().message().find("2 records lost"), std::string::npos)
      << session->status().ToString();
  const PipelineCounters c = session->counters();
  EXPECT_EQ(c.records_lost, 2u);
  EXPECT_EQ(c.records_lost, writer->records_lost());
  EXPECT_EQ(c.records_written, 10u);
  EXPECT_EQ(c.write_errors, 1u);
  auto trial = Trial::Open(dir.path());
  ASSERT_TRUE(trial.ok()) << trial.status().ToString();
  std::vector<std::int64_t> steps;
  for (const StepKey& k : (*trial)->steps()) steps.push_back(k.global_step);
  EXPECT_EQ(steps, (std::vector<std::int64_t>{0, 1, 2, 3, 5}));
  EXPECT_EQ((*trial)->raw_steps("w.weight").size(), 5u);
}

// The CUDA path, with host memory standing in for the device.
TEST(PipelineTest, DeviceTensorsAreReducedInOneBatchAndCollectedOffThread) {
  SessionConfig config = TestConfig();
  config.raw_save_config.base.save_steps = {2};
  config.raw_save_config.base.save_interval = 0;
  config.pipeline.cuda_inflight = 1;
  auto fake = std::make_shared<testing::FakeDeviceStats>();
  auto sink = std::make_shared<io::MemorySink>();
  auto session = MakeSession(config, sink, {0, testing::FakeDeviceFactory(fake, /*delay=*/10)});
  std::vector<float> d1 = Values(100, 0.5f), d2 = Values(50, -2.0f), h = Values(30, 3.0f);
  auto dev = [](const std::vector<float>& v, const char* name) {
    TensorSpec s;
    s.name = name;
    s.view = TensorView::Host(v.data(), DType::kFloat32, static_cast<std::int64_t>(v.size()));
    s.view.space = MemorySpace::kCuda;
    return s;
  };
  ASSERT_TRUE(session->RegisterTensor(dev(d1, "d1.weight")).ok());
  ASSERT_TRUE(session->RegisterTensor(dev(d2, "gradient/d2")).ok());
  ASSERT_TRUE(
      session->RegisterTensor({"h.weight", TensorView::Host(h.data(), DType::kFloat32, 30)}).ok());
  std::vector<std::vector<float>> seen;
  for (int i = 0; i < 5; ++i) {
    d1[0] = static_cast<float>(i);  // "the next kernel" changes it after EndStep
    seen.push_back(d1);
    ASSERT_TRUE(session->EndStep().ok());
  }
  ASSERT_TRUE(session->Close().ok());
  EXPECT_EQ(fake->enqueues.load(), 5);             // one device batch per step
  EXPECT_EQ(fake->max_batch.load(), 2);            // both device tensors in it
  EXPECT_GE(session->counters().stats_waits, 1u);  // one staging slot, slow "GPU"
  const auto batches = sink->batches();
  ASSERT_EQ(batches.size(), 5u);
  const testing::Tolerance tol = testing::ToleranceFor(DType::kFloat32);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(batches[i].key.global_step, i);  // in order despite the collector
    for (auto [id, data] :
         {std::pair<std::uint32_t, const std::vector<float>*>{0, &seen[i]}, {1, &d2}, {2, &h}}) {
      const TensorStatsRecord* r = FindStats(batches[i], id);
      ASSERT_NE(r, nullptr) << "step " << i << " tensor " << id;
      const TensorView v =
          TensorView::Host(data->data(), DType::kFloat32, static_cast<std::int64_t>(data->size()));
      EXPECT_TRUE(
          testing::ResultMatches(testing::ToResult(*r), testing::ReferenceReduce(v, {}), tol));
    }
    EXPECT_EQ(batches[i].raws.size(), i == 2 ? 3u : 0u);
  }
  const RawSnapshot* raw = FindRaw(batches[2], 0);
  ASSERT_NE(raw, nullptr);
  ASSERT_EQ(raw->bytes.size(), 400u);
  EXPECT_EQ(std::memcmp(raw->bytes.data(), seen[2].data(), 400), 0);
}

// The writer keeps the records of as many written steps as the queue holds,
// up to 64 MiB of them, for EndStep to write the next steps over
// (TakeSpareRecords), each emptied of everything past its histogram. (With
// 16 kept, the steps the queue grew by during a flush got fresh memory.)
TEST(PipelineTest, SpareRecordsCoverTheQueueUpToTheirMemoryBound) {
  struct Case {
    int steps, records;
    std::int64_t queue_capacity;
    std::size_t spares;
  };
  // Steps of 30,000 records are ~17 MB each: 3 fit in 64 MiB.
  for (const Case& c : {Case{40, 10, 64, 40}, Case{40, 10, 8, 8}, Case{5, 30000, 64, 3}}) {
    host::Pipeline::Options po;
    po.config.queue_capacity = c.queue_capacity;
    host::StopState stop;
    host::Pipeline pipeline(po, std::make_unique<host::NullSink>(), &stop);
    for (int s = 0; s < c.steps; ++s) {
      host::PipelineItem item;
      item.has_batch = true;
      item.batch.key = StepKey{s, Mode::kTrain, s};
      item.batch.stats.resize(static_cast<std::size_t>(c.records));
      item.batch.stats[0].linear_histogram.emplace();
      item.batch.stats[0].sample.emplace();
      item.batch.stats[0].count_values = {1, 2};
      item.batch.stats[1].exponent_histogram.emplace();
      item.holds_slot = pipeline.AcquireSlot();
      ASSERT_TRUE(pipeline.Push(std::move(item)).ok());
    }
    ASSERT_TRUE(pipeline.Close().ok());
    std::size_t spares = 0;
    for (auto r = pipeline.TakeSpareRecords(); !r.empty(); r = pipeline.TakeSpareRecords()) {
      ++spares;
      ASSERT_EQ(r.size(), static_cast<std::size_t>(c.records));
      EXPECT_TRUE(host::HasOnlyStats(r[0]));
      EXPECT_FALSE(r[0].linear_histogram || r[0].sample);
      EXPECT_TRUE(r[1].exponent_histogram);  // kept, with its buffer, for reuse
    }
    EXPECT_EQ(spares, c.spares) << c.steps << " steps of " << c.records << " records, queue of "
                                << c.queue_capacity;
  }
}

}  // namespace
}  // namespace tstat
