// The per-thread bodies of the CUDA kernels (kernels/plan/cuda_thread_work.h) on
// the host: decoders against the independent ones of tests/support, vector
// element extraction and misaligned loads, and that the threads of a block
// together see every element exactly once (stats, channel mappings).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/plan/cuda_thread_work.h"
#include "kernels/plan/element_access.h"
#include "kernels/plan/launch_plan.h"
#include "kernels/stats_ops.h"
#include "kernels/work_plan.h"
#include "tests/support/compare.h"
#include "tests/support/data.h"

namespace tstat::kernels {
namespace {

using ::tstat::testing::DecodeElement;
using ::tstat::testing::SameValue;

TEST(ThreadWorkTest, DecodersMatchTheIndependentDecoders) {
  std::vector<unsigned char> bytes(8 * 70000);
  std::uint64_t x = 12345;
  for (auto& b : bytes) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    b = static_cast<unsigned char>(x >> 56);
  }
  // Every 8- and 16-bit pattern, random wider ones.
  for (std::uint32_t i = 0; i < 65536; ++i) std::memcpy(&bytes[2 * i], &i, 2);
  for (DType t : ::tstat::testing::AllDTypes()) {
    const int size = static_cast<int>(DTypeSize(t));
    const std::int64_t n = static_cast<std::int64_t>(bytes.size()) / size;
    bool known = WithDecoder(static_cast<int>(t), [&](auto dec) {
      using Dec = decltype(dec);
      ASSERT_EQ(Dec::kSize, size);
      for (std::int64_t i = 0; i < n; ++i) {
        const double got =
            static_cast<double>(Dec::Decode(LoadBits<Dec::kSize>(&bytes[i * size], true)));
        ASSERT_TRUE(SameValue(got, DecodeElement(bytes.data(), t, i)))
            << DTypeName(t) << " element " << i << ": " << got;
      }
    });
    EXPECT_TRUE(known);
  }
  EXPECT_FALSE(WithDecoder(99, [](auto) {}));
  EXPECT_FALSE(WithLabelDecoder(static_cast<int>(DType::kFloat32), [](auto) {}));
}

TEST(ThreadWorkTest, VectorElementsAreLittleEndianElements) {
  unsigned char raw[16];
  for (int i = 0; i < 16; ++i) raw[i] = static_cast<unsigned char>(0x11 * i + 3);
  const Vec16 v = LoadVec16(raw);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(VecElement<1>(v, j), LoadBits<1>(raw + j, true));
  for (int j = 0; j < 8; ++j) EXPECT_EQ(VecElement<2>(v, j), LoadBits<2>(raw + 2 * j, true));
  for (int j = 0; j < 4; ++j) EXPECT_EQ(VecElement<4>(v, j), LoadBits<4>(raw + 4 * j, true));
  for (int j = 0; j < 2; ++j) EXPECT_EQ(VecElement<8>(v, j), LoadBits<8>(raw + 8 * j, true));
  std::uint64_t expect = 0;
  std::memcpy(&expect, raw + 3, 8);
  EXPECT_EQ(LoadBits<8>(raw + 3, false), expect);  // misaligned: byte loads
}

// The exponent histogram and the partial of a block equal those of one
// thread walking the chunk in order (counts and exact sums), for every
// alignment phase, including element-misaligned data.
TEST(ThreadWorkTest, BlockOfThreadsEqualsOneThreadForCountsAndHistogram) {
  struct ArrayHist {
    std::uint32_t* bins;
    void Add(int b) { ++bins[b]; }
  };
  const std::int64_t n = 5000;
  std::vector<unsigned char> storage(n * 4 + 64);
  for (int offset = 0; offset < 16; ++offset) {
    unsigned char* base = storage.data() + offset;
    for (std::int64_t i = 0; i < n; ++i) {
      const float f = static_cast<float>((i % 97) - 40) * 0.25f;  // exact sums in double
      std::memcpy(base + 4 * i, &f, 4);
    }
    const ChunkSplit split = SplitChunk(reinterpret_cast<std::uintptr_t>(base), n, 4);
    const Thresholds<float> th =
        MakeThresholds<float>(-0.97, 0.97, 1e-7, MinNormalOf(DType::kFloat32));
    const bool aligned = offset % 4 == 0;
    std::uint32_t block_bins[kExpHistBins] = {}, one_bins[kExpHistBins] = {};
    ArrayHist block_hist{block_bins}, one_hist{one_bins};
    std::vector<StatsPartial> parts(64);
    for (int t = 0; t < 64; ++t) {
      parts[static_cast<std::size_t>(t)] =
          ThreadChunkStats<DecodeF32>(base, split, aligned, t, 64, th, block_hist);
    }
    const StatsPartial block = BlockMergeOrder(parts.data(), 64, MergeOp{});
    const StatsPartial one = ThreadChunkStats<DecodeF32>(base, split, aligned, 0, 1, th, one_hist);
    EXPECT_EQ(block.count, static_cast<std::uint64_t>(n));
    EXPECT_EQ(block.count, one.count);
    EXPECT_EQ(block.zero_count, one.zero_count);
    EXPECT_EQ(block.neg_count, one.neg_count);
    EXPECT_EQ(block.band_lo_count, one.band_lo_count);
    EXPECT_EQ(block.band_hi_count, one.band_hi_count);
    EXPECT_EQ(block.min, one.min);
    EXPECT_EQ(block.max, one.max);
    EXPECT_EQ(block.l1, one.l1);
    for (int b = 0; b < kExpHistBins; ++b) ASSERT_EQ(block_bins[b], one_bins[b]) << "bin " << b;
  }
}

// A decoder that records which int64 element indices were read.
struct RecordingDecode {
  using Compute = double;
  static constexpr int kSize = 8;
  static std::vector<int>* hits;
  static double Decode(std::uint64_t bits) {
    ++(*hits)[static_cast<std::size_t>(bits)];
    return 1.0;
  }
};
std::vector<int>* RecordingDecode::hits = nullptr;

// The threads of every channel item of a plan read each element of the
// tensor exactly once, in both mappings.
void CheckChannelReads(std::vector<std::int64_t> shape, int axis, int T) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  std::vector<std::int64_t> data(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) data[static_cast<std::size_t>(i)] = i;
  std::vector<int> hits(static_cast<std::size_t>(n), 0);
  RecordingDecode::hits = &hits;
  ReductionRequest r;
  r.tensor = TensorView::Host(data.data(), DType::kInt64, shape);
  r.options.per_channel_axis = axis;
  LaunchPlan plan;
  ASSERT_TRUE(BuildLaunchPlan({r}, BackendKind::kCpu, T, &plan).ok());
  const DeviceRequest& d = plan.requests[0];
  const auto* bytes = static_cast<const unsigned char*>(r.tensor.data);
  for (const ChannelItem& item : plan.channel_items) {
    std::vector<StatsPartial> parts(static_cast<std::size_t>(T));
    for (int t = 0; t < T; ++t) {
      if (item.lanes == 0) {
        parts[t] = ThreadChannelWide<RecordingDecode>(bytes, true, d.geo, item.c0, item.row_begin,
                                                      item.rows, t, T, d.th_d);
      } else {
        std::int64_t c = 0;
        int lane = 0;
        if (!NarrowThreadRole(item, t, &c, &lane)) continue;
        parts[t] = ThreadChannelNarrow<RecordingDecode>(bytes, true, d.geo, c, item.row_begin,
                                                        item.rows, lane, item.lanes, d.th_d);
      }
    }
  }
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(hits[static_cast<std::size_t>(i)], 1) << "element " << i << " axis " << axis;
  }
  RecordingDecode::hits = nullptr;
}

TEST(ThreadWorkTest, ChannelBodiesReadEveryElementOnce) {
  for (int T : {64, 256}) {
    CheckChannelReads({300, 24}, 0, T);
    CheckChannelReads({300, 24}, 1, T);
    CheckChannelReads({20, 13, 7}, 1, T);
    CheckChannelReads({6, 5, 100}, 1, T);
    CheckChannelReads({6, 5, 100}, 0, T);
    CheckChannelReads({3, 700, 33}, 1, T);
    CheckChannelReads({40000, 3}, 1, T);
  }
}

}  // namespace
}  // namespace tstat::kernels
