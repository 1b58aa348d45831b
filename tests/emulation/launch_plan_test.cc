// The batch layout of the CUDA backend (kernels/plan/launch_plan.h): bounded
// launches for huge batches, exact chunk and channel coverage, the choice of
// channel mapping, merge-job lookup, and the plan-level request checks. Plans
// only: no tensor memory is read, so synthetic addresses are fine.
#include "kernels/plan/launch_plan.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "kernels/plan/launch_tables.h"
#include "kernels/plan/tuning.h"
#include "kernels/work_plan.h"
#include "tstat/engine.h"

namespace tstat::kernels {
namespace {

const void* FakeAddress(std::uintptr_t a) { return reinterpret_cast<const void*>(a); }

ReductionRequest HostRequest(DType t, std::int64_t n, std::uintptr_t addr = 0x100000,
                             std::vector<std::int64_t> shape = {}) {
  ReductionRequest r;
  r.tensor = TensorView::Host(FakeAddress(addr), t, n);
  if (!shape.empty()) r.tensor = TensorView::Host(FakeAddress(addr), t, std::move(shape));
  return r;
}

TEST(LaunchPlanTest, TenThousandTensorsAreOneStatsLaunchPlusOneMerge) {
  std::vector<ReductionRequest> batch;
  for (int i = 0; i < 10000; ++i) {
    batch.push_back(HostRequest(i % 3 == 0 ? DType::kFloat16 : DType::kFloat32, 1000,
                                0x100000 + static_cast<std::uintptr_t>(i) * 4096));
  }
  LaunchPlan plan;
  ASSERT_TRUE(BuildLaunchPlan(batch, BackendKind::kCpu, 256, &plan).ok());
  EXPECT_EQ(plan.stats_items.size(), 10000u);  // one block per tensor (one chunk each)
  EXPECT_EQ(plan.merge_segments, 10000);
  EXPECT_EQ(plan.KernelLaunches(), 2);
  // Every feature on: still at most six launches, whatever the batch size.
  for (std::size_t i = 0; i < batch.size(); ++i) {
    batch[i].options.linear_histogram.bins = 10;
    batch[i].options.sample_count = 3;
    if (i % 2 == 0) {
      batch[i].tensor.shape = {10, 100};
      batch[i].options.per_channel_axis = 1;
    }
  }
  batch.push_back(HostRequest(DType::kInt32, 5000));
  batch.back().options.label_classes = 10;
  ASSERT_TRUE(BuildLaunchPlan(batch, BackendKind::kCpu, 256, &plan).ok());
  EXPECT_EQ(plan.KernelLaunches(), 6);
}

// The caller's memory verdict (the CUDA backend's DeviceMemoryCheck) fails
// its request alone, after the request's own validation: the others are
// planned as if it were absent.
TEST(LaunchPlanTest, MemoryVerdictsFailTheirRequestOnly) {
  const std::vector<ReductionRequest> batch = {HostRequest(DType::kFloat32, 1000, 0x100000),
                                               HostRequest(DType::kFloat32, 1000, 0x200000),
                                               HostRequest(DType::kFloat32, -1, 0x300000)};
  const std::vector<Status> memory = {Status::OK(), Status::InvalidArgument("tensor.data freed"),
                                      Status::InvalidArgument("tensor.data freed")};
  LaunchPlan plan;
  ASSERT_TRUE(BuildLaunchPlan(batch, BackendKind::kCpu, 256, &plan, -1, &memory).ok());
  ASSERT_EQ(plan.status.size(), 3u);
  EXPECT_TRUE(plan.status[0].ok());
  EXPECT_EQ(plan.status[1].message(), "tensor.data freed");
  EXPECT_NE(plan.status[2].message(), "tensor.data freed");  // its own error comes first
  EXPECT_EQ(plan.device_request, (std::vector<std::int32_t>{0, -1, -1}));
  EXPECT_EQ(plan.requests.size(), 1u);
  EXPECT_EQ(plan.stats_items.size(), 1u);
}

TEST(LaunchPlanTest, ChunkItemsCoverEachTensorExactlyInSlotOrder) {
  const std::vector<std::int64_t> sizes = {0, 1, 16383, 16384, 16385, 1 << 20, 123456789};
  std::vector<ReductionRequest> batch;
  for (std::int64_t n : sizes) batch.push_back(HostRequest(DType::kFloat32, n));
  LaunchPlan plan;
  ASSERT_TRUE(BuildLaunchPlan(batch, BackendKind::kCpu, 256, &plan).ok());
  std::map<std::uint32_t, std::int64_t> next;  // request -> next expected begin
  std::map<std::uint32_t, std::uint32_t> slot;
  for (const WorkItem& w : plan.stats_items) {
    EXPECT_EQ(w.begin, next[w.request]);
    EXPECT_EQ(w.slot, slot[w.request]++);
    EXPECT_GT(w.length, 0);
    next[w.request] = w.begin + w.length;
  }
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const auto r = static_cast<std::uint32_t>(plan.device_request[i]);
    EXPECT_EQ(next[r], sizes[i]) << "n=" << sizes[i];
    EXPECT_EQ(slot[r], static_cast<std::uint32_t>(NumChunks(sizes[i])));
    EXPECT_LE(slot[r], static_cast<std::uint32_t>(kMaxChunksPerTensor));
  }
}

// Every (channel, row) of a per-channel request is in exactly one item, and
// every (channel, outer chunk) partial slot is written exactly once.
void CheckChannelCoverage(std::vector<std::int64_t> shape, int axis, int threads) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  ReductionRequest r = HostRequest(DType::kFloat32, n, 0x100000, shape);
  r.options.per_channel_axis = axis;
  LaunchPlan plan;
  ASSERT_TRUE(BuildLaunchPlan({r}, BackendKind::kCpu, threads, &plan).ok());
  ASSERT_TRUE(plan.status[0].ok()) << plan.status[0].ToString();
  const DeviceRequest& d = plan.requests[0];
  const std::int64_t outer = d.geo.outer, channels = d.geo.channels, inner = d.geo.inner;
  std::vector<int> rows_seen(static_cast<std::size_t>(outer * channels), 0);
  std::vector<int> slots(static_cast<std::size_t>(channels * d.outer_chunks), 0);
  const bool wide = inner >= LaunchPolicy::kWideChannelInner;
  for (const ChannelItem& item : plan.channel_items) {
    EXPECT_EQ(item.lanes == 0, wide);
    if (!wide) {
      EXPECT_EQ(item.group, std::min<std::int64_t>(channels, threads));
      EXPECT_EQ(item.lanes, threads / item.group);
    }
    for (int j = 0; j < item.channels; ++j) {
      const std::int64_t c = item.c0 + j;
      ++slots[static_cast<std::size_t>(c * d.outer_chunks + item.chunk)];
      for (std::int64_t o = item.row_begin; o < item.row_begin + item.rows; ++o) {
        ++rows_seen[static_cast<std::size_t>(o * channels + c)];
      }
    }
  }
  for (int v : rows_seen) ASSERT_EQ(v, 1);
  for (int v : slots) ASSERT_EQ(v, 1);
  EXPECT_LE(d.outer_chunks, kMaxChunksPerTensor);
  // One merge segment per channel, folding its outer chunks.
  ASSERT_EQ(plan.merge_jobs.size(), 2u);
  EXPECT_EQ(plan.merge_jobs[1].segments, channels);
  EXPECT_EQ(plan.merge_jobs[1].chunks, d.outer_chunks);
}

TEST(LaunchPlanTest, ChannelItemsCoverEveryChannelRowOnce) {
  for (int threads : {64, 256}) {
    CheckChannelCoverage({3000, 24}, 1, threads);      // narrow, inner 1
    CheckChannelCoverage({3000, 24}, 0, threads);      // narrow, inner 24, 3000 channels
    CheckChannelCoverage({50, 40, 7}, 1, threads);     // narrow, inner 7
    CheckChannelCoverage({12, 9, 64}, 1, threads);     // wide, inner 64
    CheckChannelCoverage({2, 1000, 40}, 1, threads);   // wide, many channels
    CheckChannelCoverage({100000}, 0, threads);        // 1-D: per element
    CheckChannelCoverage({5000, 3}, 1, threads);       // few channels: many lanes
    CheckChannelCoverage({100000, 2, 1}, 0, threads);  // long outer on axis 0
  }
}

TEST(LaunchPlanTest, ZeroSizedChannelDimensionsHaveNoItems) {
  ReductionRequest r = HostRequest(DType::kFloat32, 0, 0, {0, 3});
  r.tensor.data = nullptr;
  r.options.per_channel_axis = 1;
  LaunchPlan plan;
  ASSERT_TRUE(BuildLaunchPlan({r}, BackendKind::kCpu, 256, &plan).ok());
  ASSERT_TRUE(plan.status[0].ok()) << plan.status[0].ToString();
  EXPECT_TRUE(plan.channel_items.empty());
  EXPECT_EQ(plan.requests[0].outer_chunks, 0);
  EXPECT_EQ(plan.merge_segments, 1 + 3);  // the tensor + 3 empty channels
}

TEST(LaunchPlanTest, FindJobLocatesEverySegment) {
  std::vector<ReductionRequest> batch;
  for (int i = 0; i < 50; ++i) {
    batch.push_back(HostRequest(DType::kFloat32, 40 * (i + 1), 0x100000, {i + 1, 40}));
    batch.back().options.per_channel_axis = 1;
  }
  LaunchPlan plan;
  ASSERT_TRUE(BuildLaunchPlan(batch, BackendKind::kCpu, 256, &plan).ok());
  const auto jobs = static_cast<std::int64_t>(plan.merge_jobs.size());
  std::int64_t g = 0;
  for (std::int64_t j = 0; j < jobs; ++j) {
    ASSERT_EQ(plan.merge_jobs[static_cast<std::size_t>(j)].first, g);
    for (std::int64_t s = 0; s < plan.merge_jobs[static_cast<std::size_t>(j)].segments; ++s, ++g) {
      ASSERT_EQ(FindJob(plan.merge_jobs.data(), jobs, g), j);
    }
  }
  EXPECT_EQ(g, plan.merge_segments);
}

TEST(LaunchPlanTest, PlanLevelChecks) {
  std::vector<ReductionRequest> batch;
  batch.push_back(HostRequest(DType::kFloat32, (std::int64_t{1} << 42) + 1));  // too large
  batch.push_back(HostRequest(DType::kFloat32, 100, 0x100001));  // misaligned: accepted
  batch.push_back(HostRequest(DType::kFloat32, 100));
  batch.back().tensor.data = nullptr;  // CheckRequest's own error
  LaunchPlan plan;
  ASSERT_TRUE(BuildLaunchPlan(batch, BackendKind::kCpu, 256, &plan).ok());
  EXPECT_EQ(plan.status[0].code(), StatusCode::kNotSupported);
  EXPECT_NE(plan.status[0].message().find("tensor.numel"), std::string::npos);
  EXPECT_TRUE(plan.status[1].ok());
  EXPECT_EQ(plan.requests[static_cast<std::size_t>(plan.device_request[1])].aligned, 0);
  EXPECT_EQ(plan.status[2].code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(plan.device_request[0], -1);
  EXPECT_EQ(plan.device_request[2], -1);
  EXPECT_EQ(plan.requests.size(), 1u);

  ReductionRequest on_gpu1 = HostRequest(DType::kFloat32, 100);
  on_gpu1.tensor.space = MemorySpace::kCuda;
  on_gpu1.tensor.device = 1;
  ASSERT_TRUE(BuildLaunchPlan({on_gpu1}, BackendKind::kCuda, 256, &plan, 0).ok());
  EXPECT_EQ(plan.status[0].code(), StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status[0].message().find("tensor.device"), std::string::npos);
}

TEST(LaunchPlanTest, SharedBinSizesFollowTheLargestFittingRequest) {
  std::vector<ReductionRequest> batch;
  for (int bins : {10, 5000, LaunchPolicy::kSharedHistBins + 1}) {
    batch.push_back(HostRequest(DType::kFloat32, 100));
    batch.back().options.linear_histogram.bins = bins;
  }
  for (int classes : {3, 70000}) {
    batch.push_back(HostRequest(DType::kUInt8, 100));
    batch.back().options.label_classes = classes;
  }
  LaunchPlan plan;
  ASSERT_TRUE(BuildLaunchPlan(batch, BackendKind::kCpu, 256, &plan).ok());
  EXPECT_EQ(plan.linear_shared_bins, 5000);
  EXPECT_EQ(plan.label_shared_bins, 3);
}

}  // namespace
}  // namespace tstat::kernels
