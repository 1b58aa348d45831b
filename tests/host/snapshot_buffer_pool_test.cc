// SnapshotBufferPool (host/src/snapshot_buffer_pool.h): copies are exact,
// released buffers serve later copies of their size class (the same memory),
// what is kept stays within its bound, Clear() keeps nothing, and buffers may
// outlive the pool and be released on other threads.
#include "host/src/snapshot_buffer_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <thread>
#include <vector>

namespace tstat::host {
namespace {

std::vector<std::uint8_t> Bytes(std::size_t n, std::uint8_t start) {
  std::vector<std::uint8_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(SnapshotBufferPoolTest, CopiesAreExactAndReleasedMemoryIsReused) {
  auto pool = SnapshotBufferPool::Create(8 << 20);
  const std::vector<std::uint8_t> a = Bytes(300000, 1), b = Bytes(300000, 7);
  auto first = pool->Copy(a.data(), a.size());
  EXPECT_EQ(*first, a);
  const std::uint8_t* memory = first->data();
  first.reset();  // the writer is done with it
  EXPECT_EQ(pool->free_bytes(), 300000u);
  auto second = pool->Copy(b.data(), b.size());
  EXPECT_EQ(second->data(), memory);
  EXPECT_EQ(*second, b);  // the old contents are gone
  EXPECT_EQ(pool->reuses(), 1u);
  EXPECT_EQ(pool->free_bytes(), 0u);
  // Somewhat smaller requests take it too (capacity up to 2x + 64 KiB).
  second.reset();
  auto smaller = pool->Copy(b.data(), 200000);
  EXPECT_EQ(smaller->data(), memory);
  EXPECT_EQ(smaller->size(), 200000u);
  EXPECT_TRUE(std::equal(smaller->begin(), smaller->end(), b.begin()));
}

// Buffers of 4 MiB and more are first reserved and advised for huge pages,
// then filled: the copy must still be exact, odd sizes included, and such a
// buffer is reused like any other.
TEST(SnapshotBufferPoolTest, LargeCopiesAdvisedForHugePagesAreExact) {
  auto pool = SnapshotBufferPool::Create(64 << 20);
  for (const std::size_t n : {std::size_t{4} << 20, (std::size_t{9} << 20) + 12345}) {
    const std::vector<std::uint8_t> data = Bytes(n, static_cast<std::uint8_t>(n % 251));
    auto copy = pool->Copy(data.data(), data.size());
    ASSERT_EQ(copy->size(), n);
    EXPECT_EQ(*copy, data);
    const std::uint8_t* memory = copy->data();
    copy.reset();
    const std::vector<std::uint8_t> other = Bytes(n, 99);
    auto again = pool->Copy(other.data(), other.size());
    EXPECT_EQ(again->data(), memory);
    EXPECT_EQ(*again, other);
  }
  EXPECT_EQ(pool->reuses(), 2u);
}

TEST(SnapshotBufferPoolTest, MuchSmallerOrLargerRequestsGetNewMemory) {
  auto pool = SnapshotBufferPool::Create(8 << 20);
  const std::vector<std::uint8_t> big = Bytes(1 << 20, 3);
  pool->Copy(big.data(), big.size()).reset();
  auto small = pool->Copy(big.data(), 100000);  // 2 * 100000 + 64 KiB < 1 MiB
  EXPECT_EQ(*small, std::vector<std::uint8_t>(big.begin(), big.begin() + 100000));
  const std::vector<std::uint8_t> bigger = Bytes((1 << 20) + 1, 4);
  auto larger = pool->Copy(bigger.data(), bigger.size());  // does not fit the kept 1 MiB
  EXPECT_EQ(*larger, bigger);
  EXPECT_EQ(pool->reuses(), 0u);
  EXPECT_EQ(pool->free_bytes(), std::uint64_t{1} << 20);
}

TEST(SnapshotBufferPoolTest, KeptMemoryStaysWithinTheBoundAndClearFreesIt) {
  auto pool = SnapshotBufferPool::Create(1 << 20);
  const std::vector<std::uint8_t> data = Bytes(400 << 10, 5);
  std::vector<std::shared_ptr<const SnapshotBufferPool::Buffer>> held;
  for (int i = 0; i < 4; ++i) held.push_back(pool->Copy(data.data(), data.size()));
  held.clear();
  EXPECT_EQ(pool->free_bytes(), 2u * (400 << 10));  // a third would pass 1 MiB
  pool->Clear();
  EXPECT_EQ(pool->free_bytes(), 0u);
  pool->Copy(data.data(), data.size()).reset();  // after Clear: nothing is kept
  EXPECT_EQ(pool->free_bytes(), 0u);
}

TEST(SnapshotBufferPoolTest, BuffersMayOutliveThePool) {
  auto pool = SnapshotBufferPool::Create(1 << 20);
  const std::vector<std::uint8_t> data = Bytes(5000, 9);
  auto buffer = pool->Copy(data.data(), data.size());
  pool.reset();
  EXPECT_EQ(*buffer, data);
  buffer.reset();  // freed, not returned (ASan checks the memory)
}

TEST(SnapshotBufferPoolTest, CopiesAndReleasesFromTwoThreads) {
  auto pool = SnapshotBufferPool::Create(4 << 20);
  auto work = [&](std::uint8_t seed) {
    for (int i = 0; i < 300; ++i) {
      const std::vector<std::uint8_t> data = Bytes(70000 + 1000 * (i % 7), seed);
      auto copy = pool->Copy(data.data(), data.size());
      ASSERT_EQ(*copy, data);
      // Released on the other thread half of the time.
      if (i % 2) std::thread([c = std::move(copy)]() mutable { c.reset(); }).join();
    }
  };
  std::thread t1(work, 1), t2(work, 2);
  t1.join();
  t2.join();
  EXPECT_GT(pool->reuses(), 0u);
  EXPECT_LE(pool->free_bytes(), std::uint64_t{4} << 20);
}

}  // namespace
}  // namespace tstat::host
