// Element coverage of the CUDA work decomposition (kernels/work_plan.h):
// SplitChunk + VisitChunk visit every element of a chunk exactly once across
// the T threads of a block, vector loads are 16-byte aligned, the scalar head
// is shorter than one vector; ChunkElems/NumChunks cut tensors up to 2^40
// elements into at most kMaxChunksPerTensor chunks of a multiple of 16
// elements that cover the tensor exactly. Addresses are synthetic (no memory
// is touched).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/work_plan.h"

namespace tstat::kernels {
namespace {

constexpr std::uintptr_t kAlignedBase = 0x10000;  // 16-aligned fake address

// Visits a chunk of n elements of `size` bytes at kAlignedBase + offset with
// T threads and checks every invariant; returns false after the first
// reported failure.
bool CheckCoverage(std::int64_t n, int offset, int size, int T) {
  const std::uintptr_t addr = kAlignedBase + static_cast<std::uintptr_t>(offset);
  const ChunkSplit s = SplitChunk(addr, n, size);
  const bool element_aligned = offset % size == 0;
  std::vector<std::uint8_t> visits(static_cast<std::size_t>(n), 0);
  bool ok = true;
  auto fail = [&](const char* what, std::int64_t i) {
    ADD_FAILURE() << what << " at element " << i << " (n=" << n << " offset=" << offset
                  << " size=" << size << " T=" << T << ")";
    ok = false;
  };
  EXPECT_EQ(s.length, n);
  if (element_aligned) {
    EXPECT_EQ(s.per_vec, kVectorBytes / size);
    EXPECT_GE(s.head, 0);
    EXPECT_LT(s.head, s.per_vec) << "head must end at the first 16-byte boundary";
    if (s.head < n) {
      EXPECT_EQ((addr + static_cast<std::uintptr_t>(s.head * size)) % kVectorBytes, 0u)
          << "the head must end on a 16-byte boundary";
    }
  } else {
    EXPECT_EQ(s.vectors, 0) << "element-misaligned data must not use vector loads";
  }
  EXPECT_EQ(s.tail_begin, s.head + s.vectors * s.per_vec);
  EXPECT_LE(s.tail_begin, n);
  EXPECT_LT(n - s.tail_begin, s.per_vec) << "the scalar tail is shorter than one vector";

  for (int t = 0; t < T && ok; ++t) {
    std::int64_t last = -1;  // each thread walks its elements in ascending order
    VisitChunk(
        s, t, T,
        [&](std::int64_t i) {
          if (i < 0 || i >= n) return fail("scalar index out of range", i);
          if (i <= last) fail("thread order not ascending", i);
          last = i;
          ++visits[static_cast<std::size_t>(i)];
        },
        [&](std::int64_t first) {
          if (first < 0 || first + s.per_vec > n) return fail("vector out of range", first);
          if ((addr + static_cast<std::uintptr_t>(first * size)) % kVectorBytes != 0) {
            fail("vector load not 16-byte aligned", first);
          }
          if (first <= last) fail("thread order not ascending", first);
          last = first + s.per_vec - 1;
          for (std::int64_t j = 0; j < s.per_vec; ++j)
            ++visits[static_cast<std::size_t>(first + j)];
        });
  }
  for (std::int64_t i = 0; i < n && ok; ++i) {
    if (visits[static_cast<std::size_t>(i)] != 1) fail("element not visited exactly once", i);
  }
  return ok;
}

TEST(VisitCoverageTest, EveryElementExactlyOnceSmallSizes) {
  for (int T : {32, 64, 256}) {
    for (int size : {1, 2, 4, 8}) {
      for (int offset = 0; offset < 16; ++offset) {
        for (std::int64_t n = 0; n <= 200; ++n) {
          ASSERT_TRUE(CheckCoverage(n, offset, size, T));
        }
      }
    }
  }
}

TEST(VisitCoverageTest, EveryElementExactlyOnceLargeSizes) {
  for (int T : {32, 64, 256}) {
    for (int size : {1, 2, 4, 8}) {
      for (int offset = 0; offset < 16; ++offset) {
        for (std::int64_t n :
             {std::int64_t{1000}, std::int64_t{4099}, std::int64_t{16384}, std::int64_t{65537}}) {
          ASSERT_TRUE(CheckCoverage(n, offset, size, T));
        }
      }
    }
  }
}

TEST(VisitCoverageTest, ChunksStartAtTheTensorsAlignmentPhase) {
  // A chunk of ChunkElems(n) elements is a multiple of 16 elements, so chunk k
  // of a tensor starts at the same address modulo 16 bytes as the tensor.
  for (int size : {1, 2, 4, 8}) {
    for (std::int64_t n : {std::int64_t{100000}, std::int64_t{1} << 33}) {
      const std::int64_t c = ChunkElems(n);
      EXPECT_EQ((c * size) % kVectorBytes, 0);
    }
  }
}

void CheckChunking(std::int64_t n) {
  const std::int64_t c = ChunkElems(n);
  const std::int64_t k = NumChunks(n);
  EXPECT_EQ(c % 16, 0) << "n=" << n;
  EXPECT_GE(c, kMinChunkElems) << "n=" << n;
  EXPECT_GE(k, 1) << "n=" << n;
  EXPECT_LE(k, kMaxChunksPerTensor) << "n=" << n;
  // Chunks [i*c, min((i+1)*c, n)) for i < k cover [0, n) exactly: the last
  // chunk is non-empty and ends at n.
  EXPECT_LT((k - 1) * c, n) << "n=" << n;
  EXPECT_GE(k * c, n) << "n=" << n;
}

TEST(VisitCoverageTest, ChunkElemsAndNumChunksUpTo2To40) {
  EXPECT_EQ(NumChunks(0), 0);
  for (std::int64_t n :
       {std::int64_t{1}, std::int64_t{15}, std::int64_t{16}, std::int64_t{17}, kMinChunkElems - 1,
        kMinChunkElems, kMinChunkElems + 1, kMinChunkElems * kMaxChunksPerTensor - 1,
        kMinChunkElems * kMaxChunksPerTensor, kMinChunkElems * kMaxChunksPerTensor + 1,
        std::int64_t{1} << 31, (std::int64_t{1} << 32) + 3, (std::int64_t{1} << 40) - 1,
        std::int64_t{1} << 40}) {
    CheckChunking(n);
  }
  // A deterministic spread of sizes up to 2^40 (an LCG, no allocation).
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 20000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const int bits = 1 + static_cast<int>((x >> 59) % 40);  // 1..40
    const auto n = static_cast<std::int64_t>((x >> 3) % (std::uint64_t{1} << bits)) + 1;
    CheckChunking(n);
  }
}

}  // namespace
}  // namespace tstat::kernels
