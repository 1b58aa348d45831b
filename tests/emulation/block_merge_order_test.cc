// BlockMergeOrder (kernels/work_plan.h) must combine per-thread partials in the
// order cub::BlockReduce<..., BLOCK_REDUCE_WARP_REDUCTIONS> does on the device,
// because Merge() is not associative in floating point. A non-commutative,
// non-associative "op" that records the merge tree as a string makes the order
// visible: it is checked against a hand-written tree for T = 64, and against a
// step-by-step simulation of cub's WarpReduceShfl + ApplyWarpAggregates (all
// lanes shuffle-down in lock step) for every block size a kernel could use.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/stats_ops.h"
#include "kernels/work_plan.h"

namespace tstat::kernels {
namespace {

struct TreeOp {
  std::string operator()(const std::string& a, const std::string& b) const {
    return "(" + a + "+" + b + ")";
  }
};

std::vector<std::string> Leaves(int T) {
  std::vector<std::string> v;
  for (int i = 0; i < T; ++i) v.push_back(std::to_string(i));
  return v;
}

// cub's algorithm, written from cub/warp/specializations/warp_reduce_shfl.cuh
// and cub/block/specializations/block_reduce_warp_reductions.cuh: in step
// offset = 1, 2, 4, 8, 16 every lane reads the value of lane + offset (as it
// was before the step) and, when that lane exists, sets its own value to
// op(own, other); lane 0 of each warp then holds the warp aggregate, and
// thread 0 folds the aggregates in warp order.
std::string SimulateCub(int T) {
  std::vector<std::string> v = Leaves(T);
  std::vector<std::string> aggregates;
  for (int w = 0; w < T / 32; ++w) {
    std::vector<std::string> lane(v.begin() + w * 32, v.begin() + (w + 1) * 32);
    for (int offset = 1; offset < 32; offset *= 2) {
      const std::vector<std::string> before = lane;  // shuffle reads pre-step values
      for (int i = 0; i < 32; ++i) {
        if (i + offset <= 31) lane[i] = TreeOp{}(before[i], before[i + offset]);
      }
    }
    aggregates.push_back(lane[0]);
  }
  std::string acc = aggregates[0];
  for (std::size_t w = 1; w < aggregates.size(); ++w) acc = TreeOp{}(acc, aggregates[w]);
  return acc;
}

TEST(BlockMergeOrderTest, HandWrittenTreeFor64Threads) {
  // Each warp: a balanced binary tree over its 32 lanes (shuffle offsets 1, 2,
  // 4, 8, 16, lower lane first); then warp 0's aggregate + warp 1's.
  const std::string warp0 =
      "(((((0+1)+(2+3))+((4+5)+(6+7)))+(((8+9)+(10+11))+((12+13)+(14+15))))+"
      "((((16+17)+(18+19))+((20+21)+(22+23)))+(((24+25)+(26+27))+((28+29)+(30+31)))))";
  const std::string warp1 =
      "(((((32+33)+(34+35))+((36+37)+(38+39)))+(((40+41)+(42+43))+((44+45)+(46+47))))+"
      "((((48+49)+(50+51))+((52+53)+(54+55)))+(((56+57)+(58+59))+((60+61)+(62+63)))))";
  std::vector<std::string> v = Leaves(64);
  EXPECT_EQ(BlockMergeOrder(v.data(), 64, TreeOp{}), "(" + warp0 + "+" + warp1 + ")");
}

TEST(BlockMergeOrderTest, WarpAggregatesFoldLeftToRightFor256Threads) {
  std::vector<std::string> v = Leaves(256);
  const std::string got = BlockMergeOrder(v.data(), 256, TreeOp{});
  // (((((((W0+W1)+W2)+W3)+W4)+W5)+W6)+W7): seven opening parens before W0,
  // whose depth-5 tree starts "(((((0+1)"; W7 ends "(254+255)" plus four
  // closing parens of its tree, plus the last one of the fold.
  const std::string prefix = std::string(12, '(') + "0+1)";
  const std::string suffix = "(254+255" + std::string(6, ')');
  ASSERT_GT(got.size(), prefix.size() + suffix.size());
  EXPECT_EQ(got.substr(0, prefix.size()), prefix) << got;
  EXPECT_EQ(got.substr(got.size() - suffix.size()), suffix) << got;
}

TEST(BlockMergeOrderTest, MatchesCubSimulationForEveryBlockSize) {
  for (int T = 32; T <= 1024; T += 32) {
    std::vector<std::string> v = Leaves(T);
    EXPECT_EQ(BlockMergeOrder(v.data(), T, TreeOp{}), SimulateCub(T)) << "T=" << T;
  }
}

TEST(BlockMergeOrderTest, MergeChunksFoldsInChunkOrderFromTheIdentity) {
  const std::vector<std::string> chunks = {"a", "b", "c", "d"};
  EXPECT_EQ(MergeChunks(chunks.data(), 4, std::string("I"), TreeOp{}), "((((I+a)+b)+c)+d)");
  EXPECT_EQ(MergeChunks(chunks.data(), 0, std::string("I"), TreeOp{}), "I");
}

// The merge kernel's order: 70 chunks over 32 lanes are runs of 3 (lane 23
// gets chunk 69 alone, lanes 24-31 nothing), each folded from the identity in
// chunk order, then combined as cub's WarpReduceShfl combines 32 lanes.
TEST(BlockMergeOrderTest, MergeChunksWarpOrderFoldsRunsThenCombinesAsAWarp) {
  std::vector<std::string> chunks;
  for (int i = 0; i < 70; ++i) chunks.push_back("c" + std::to_string(i));
  std::vector<std::string> lanes;
  for (int l = 0; l < 32; ++l) {
    std::string acc = "I";
    for (int i = 3 * l; i < 3 * l + 3 && i < 70; ++i) acc = TreeOp{}(acc, chunks[i]);
    lanes.push_back(acc);
  }
  EXPECT_EQ(lanes[23], "(I+c69)");
  EXPECT_EQ(lanes[24], "I");
  // SimulateCub(32) over leaves "0".."31": substitute each lane's fold.
  std::string want = SimulateCub(32);
  for (int l = 31; l >= 0; --l) {
    const std::string leaf = std::to_string(l);
    std::string out;
    for (std::size_t i = 0; i < want.size();) {
      const bool starts = (i == 0 || want[i - 1] == '(' || want[i - 1] == '+') &&
                          want.compare(i, leaf.size(), leaf) == 0 &&
                          (i + leaf.size() == want.size() || want[i + leaf.size()] == '+' ||
                           want[i + leaf.size()] == ')');
      if (starts) {
        out += "L" + leaf + "L";
        i += leaf.size();
      } else {
        out += want[i++];
      }
    }
    want = out;
  }
  for (int l = 0; l < 32; ++l) {
    const std::string mark = "L" + std::to_string(l) + "L";
    want.replace(want.find(mark), mark.size(), lanes[static_cast<std::size_t>(l)]);
  }
  EXPECT_EQ(MergeChunksWarpOrder(chunks.data(), 70, std::string("I"), TreeOp{}), want);
  // A single chunk: lane 0 holds it, the other lanes the identity.
  const std::string one = MergeChunksWarpOrder(chunks.data(), 1, std::string("I"), TreeOp{});
  EXPECT_EQ(one.substr(0, 13), "((((((I+c0)+I") << one;
}

TEST(BlockMergeOrderTest, StatsPartialBlockMergeIsExactForCounts) {
  // Sanity on the real type: 256 single-element partials merge to the totals.
  std::vector<StatsPartial> parts(256);
  for (int t = 0; t < 256; ++t) {
    ElementAccumulator<double> acc;
    acc.Init();
    NoHistogram none;
    Thresholds<double> th{-1.0, 1.0, 1e-7, 2.2250738585072014e-308};
    acc.Add(static_cast<double>(t) - 100.0, th, none);
    parts[static_cast<std::size_t>(t)] = acc.Finish();
  }
  const StatsPartial p = BlockMergeOrder(parts.data(), 256, MergeOp{});
  EXPECT_EQ(p.count, 256u);
  EXPECT_EQ(p.n, 256u);
  EXPECT_EQ(p.min, -100.0);
  EXPECT_EQ(p.max, 155.0);
  EXPECT_EQ(p.mean, 27.5);
  EXPECT_EQ(p.zero_count, 1u);
  EXPECT_EQ(p.neg_count, 100u);
}

}  // namespace
}  // namespace tstat::kernels
