// MemorySink and FaultInjectionSink: what pipeline tests rely on.
#include "tests/support/testing_sinks.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tests/io/io_test_util.h"

namespace tstat::io::testing {
namespace {

StepBatch Batch(std::int64_t g, int stats, int scalars, int raws) {
  StepBatch b = MakeBatch(g);
  for (int i = 0; i < stats; ++i) b.stats.push_back(SyntheticStatsRecord(g, 0));
  for (int i = 0; i < scalars; ++i) b.scalars.push_back(ScalarRecord{1, 0.5, 0});
  for (int i = 0; i < raws; ++i) {
    b.raws.push_back(
        RawSnapshot{0, DType::kUInt8, {3}, SharedBytes(std::vector<std::uint8_t>(3, 7))});
  }
  return b;
}

TEST(MemorySinkTest, KeepsBatchesAndFlushes) {
  MemorySink sink;
  TSTAT_ASSERT_OK(sink.RegisterTensors({MakeTensorInfo(0, "w"), MakeScalarInfo(1, "loss")}));
  TSTAT_ASSERT_OK(sink.Write(Batch(0, 2, 1, 1)));
  TSTAT_ASSERT_OK(sink.Write(Batch(1, 2, 0, 0)));
  EXPECT_EQ(sink.batches().size(), 2u);
  EXPECT_TRUE(sink.flushed_batches().empty());
  EXPECT_EQ(sink.bytes_written(), 0u);
  PipelineCounters c;
  c.steps_captured = 2;
  TSTAT_ASSERT_OK(sink.Flush(c));
  EXPECT_EQ(sink.flushed_batches().size(), 2u);
  EXPECT_EQ(sink.flush_count(), 1);
  EXPECT_EQ(sink.last_counters().steps_captured, 2u);
  EXPECT_EQ(sink.bytes_written(), 4 * sizeof(TensorStats) + 16 + 3);
  TSTAT_ASSERT_OK(sink.Write(Batch(2, 1, 0, 0)));
  EXPECT_EQ(sink.flushed_batches().size(), 2u);
  TSTAT_ASSERT_OK(sink.Close(c));
  EXPECT_TRUE(sink.closed());
  EXPECT_EQ(sink.flushed_batches().size(), 3u);
  EXPECT_EQ(sink.flush_count(), 2);
  EXPECT_EQ(sink.tensors().size(), 2u);
  EXPECT_EQ(sink.Write(Batch(3, 1, 0, 0)).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(sink.batches()[1].key.global_step, 1);
}

TEST(FaultInjectionSinkTest, FailNextLosesTheUnflushedBatches) {
  auto memory = std::make_unique<MemorySink>();
  MemorySink* inner = memory.get();
  FaultInjectionSink sink(std::move(memory));
  TSTAT_ASSERT_OK(sink.Write(Batch(0, 2, 1, 0)));
  TSTAT_ASSERT_OK(sink.Flush({}));
  EXPECT_EQ(inner->flushed_batches().size(), 1u);

  TSTAT_ASSERT_OK(sink.Write(Batch(1, 2, 0, 1)));  // 3 records
  sink.FailNext(SinkOp::kFlush);
  const Status failed = sink.Flush({});
  EXPECT_EQ(failed.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(failed.message().find("3 records lost"), std::string::npos) << failed.message();
  EXPECT_EQ(sink.records_lost(), 3u);
  EXPECT_EQ(sink.failures(), 1);
  TSTAT_ASSERT_OK(sink.Flush({}));  // the fault was one-shot; nothing pending
  EXPECT_EQ(inner->flushed_batches().size(), 1u);

  TSTAT_ASSERT_OK(sink.Write(Batch(2, 1, 0, 0)));
  sink.FailNext(SinkOp::kWrite);
  EXPECT_FALSE(sink.Write(Batch(3, 4, 0, 0)).ok());  // loses step 2's 1 and its own 4
  EXPECT_EQ(sink.records_lost(), 8u);
  TSTAT_ASSERT_OK(sink.Write(Batch(4, 1, 0, 0)));
  TSTAT_ASSERT_OK(sink.Close({}));
  std::vector<StepBatch> kept = inner->flushed_batches();
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].key.global_step, 0);
  EXPECT_EQ(kept[1].key.global_step, 4);
  EXPECT_TRUE(inner->closed());
}

TEST(FaultInjectionSinkTest, FailAfterIsADiskThatFillsUp) {
  FaultInjectionSink sink(std::make_unique<MemorySink>());
  sink.SetFailure(Status::IoError("disk on fire"));
  sink.FailAfter(SinkOp::kFlush, 2);
  int ok = 0, failed = 0;
  for (std::int64_t g = 0; g < 6; ++g) {
    TSTAT_ASSERT_OK(sink.Write(Batch(g, 1, 0, 0)));
    const Status s = sink.Flush({});
    if (s.ok()) {
      ++ok;
    } else {
      ++failed;
      EXPECT_EQ(s.code(), StatusCode::kIoError);
      EXPECT_NE(s.message().find("disk on fire"), std::string::npos);
    }
  }
  EXPECT_EQ(ok, 2);
  EXPECT_EQ(failed, 4);
  sink.Heal();
  TSTAT_ASSERT_OK(sink.Write(Batch(6, 1, 0, 0)));
  TSTAT_ASSERT_OK(sink.Flush({}));
  auto* inner = static_cast<MemorySink*>(sink.inner());
  EXPECT_EQ(inner->flushed_batches().size(), 3u);
  EXPECT_EQ(sink.records_lost(), 4u);
}

TEST(FaultInjectionSinkTest, ControlFromAnotherThread) {
  FaultInjectionSink sink(std::make_unique<MemorySink>());
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (std::int64_t g = 0; !stop; ++g) {
      (void)sink.Write(Batch(g, 1, 0, 0));
      (void)sink.Flush({});
    }
  });
  // Inject faults until the writer thread has run into a few of them.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int injected = 0;
  while (sink.failures() < 5 && std::chrono::steady_clock::now() < deadline) {
    sink.FailNext(SinkOp::kFlush);
    ++injected;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  stop = true;
  writer.join();
  EXPECT_GE(sink.failures(), 5);
  EXPECT_LE(sink.failures(), injected);
}

}  // namespace
}  // namespace tstat::io::testing
