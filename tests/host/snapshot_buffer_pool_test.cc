// SnapshotBufferPool (host/pipeline/snapshot_buffer_pool.h): copies are exact,
// released buffers serve later copies of their size class (the same memory),
// small copies are aligned slices of one slab that comes back once retired
// and released, what is kept stays within its bound, Clear() keeps nothing,
// and copies may outlive the pool and be released on other threads.
#include "host/pipeline/snapshot_buffer_pool.h"

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
  const std::vector<std::uint8_t> a = Bytes(1500000, 1), b = Bytes(1500000, 7);
  SharedBytes first = pool->Copy(a.data(), a.size());
  EXPECT_EQ(first.ToVector(), a);
  const std::uint8_t* memory = first.data();
  first = SharedBytes();  // the writer is done with it
  EXPECT_EQ(pool->free_bytes(), 1500000u);
  SharedBytes second = pool->Copy(b.data(), b.size());
  EXPECT_EQ(second.data(), memory);
  EXPECT_EQ(second.ToVector(), b);  // the old contents are gone
  EXPECT_EQ(pool->reuses(), 1u);
  EXPECT_EQ(pool->free_bytes(), 0u);
  // Somewhat smaller requests take it too (capacity up to 2x + 64 KiB).
  second = SharedBytes();
  SharedBytes smaller = pool->Copy(b.data(), 1100000);
  EXPECT_EQ(smaller.data(), memory);
  EXPECT_EQ(smaller.size(), 1100000u);
  EXPECT_TRUE(std::equal(smaller.begin(), smaller.end(), b.begin()));
  EXPECT_EQ(pool->slabs_created(), 0u);  // all above the slab limit
}

// Buffers of 4 MiB and more are first reserved and advised for huge pages,
// then filled: the copy must still be exact, odd sizes included, and such a
// buffer is reused like any other.
TEST(SnapshotBufferPoolTest, LargeCopiesAdvisedForHugePagesAreExact) {
  auto pool = SnapshotBufferPool::Create(64 << 20);
  for (const std::size_t n : {std::size_t{4} << 20, (std::size_t{9} << 20) + 12345}) {
    const std::vector<std::uint8_t> data = Bytes(n, static_cast<std::uint8_t>(n % 251));
    SharedBytes copy = pool->Copy(data.data(), data.size());
    ASSERT_EQ(copy.size(), n);
    EXPECT_EQ(copy.ToVector(), data);
    const std::uint8_t* memory = copy.data();
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(memory) % (2 << 20), 0u);  // huge-page aligned
    copy = SharedBytes();
    const std::vector<std::uint8_t> other = Bytes(n, 99);
    SharedBytes again = pool->Copy(other.data(), other.size());
    EXPECT_EQ(again.data(), memory);
    EXPECT_EQ(again.ToVector(), other);
  }
  EXPECT_EQ(pool->reuses(), 2u);
}

TEST(SnapshotBufferPoolTest, MuchSmallerOrLargerRequestsGetNewMemory) {
  auto pool = SnapshotBufferPool::Create(8 << 20);
  const std::vector<std::uint8_t> big = Bytes(3 << 20, 3);
  pool->Copy(big.data(), big.size());                     // released at once
  SharedBytes smaller = pool->Copy(big.data(), 1200000);  // 2 * 1200000 + 64 KiB < 3 MiB
  EXPECT_EQ(smaller.ToVector(), std::vector<std::uint8_t>(big.begin(), big.begin() + 1200000));
  const std::vector<std::uint8_t> bigger = Bytes((3 << 20) + 1, 4);
  SharedBytes larger = pool->Copy(bigger.data(), bigger.size());  // does not fit the kept 3 MiB
  EXPECT_EQ(larger.ToVector(), bigger);
  EXPECT_EQ(pool->reuses(), 0u);
  EXPECT_EQ(pool->free_bytes(), std::uint64_t{3} << 20);
}

TEST(SnapshotBufferPoolTest, KeptMemoryStaysWithinTheBoundAndClearFreesIt) {
  auto pool = SnapshotBufferPool::Create(4 << 20);
  const std::vector<std::uint8_t> data = Bytes(1536 << 10, 5);
  std::vector<SharedBytes> held;
  for (int i = 0; i < 4; ++i) held.push_back(pool->Copy(data.data(), data.size()));
  held.clear();
  EXPECT_EQ(pool->free_bytes(), 2u * (1536 << 10));  // a third would pass 4 MiB
  pool->Clear();
  EXPECT_EQ(pool->free_bytes(), 0u);
  pool->Copy(data.data(), data.size());  // after Clear: nothing is kept
  pool->Copy(data.data(), 5000);
  EXPECT_EQ(pool->free_bytes(), 0u);
}

// Small copies are consecutive 64-byte-aligned slices of one slab; a copy
// that does not fit retires the slab, which comes back once its last slice
// is released and is the next slab after that.
TEST(SnapshotBufferPoolTest, SmallCopiesAreSlicesOfOneSlabThatIsReused) {
  using Pool = SnapshotBufferPool;
  auto pool = Pool::Create(64 << 20);
  const std::vector<std::uint8_t> a = Bytes(1000, 1), b = Bytes(4096, 2);
  SharedBytes first = pool->Copy(a.data(), a.size());
  SharedBytes second = pool->Copy(b.data(), b.size());
  EXPECT_EQ(first.ToVector(), a);
  EXPECT_EQ(second.ToVector(), b);
  EXPECT_EQ(second.data(), first.data() + 1024);  // 1000 rounded up to 64
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(first.data()) % (2 << 20), 0u);
  EXPECT_EQ(pool->slabs_created(), 1u);

  // Fill the slab with slices of the largest slab size: as many as fit in
  // an empty slab (16) after the two above, less one.
  const std::vector<std::uint8_t> big = Bytes(Pool::kSlabMaxCopyBytes, 3);
  std::vector<SharedBytes> held;
  for (std::size_t i = 0; i + 1 < Pool::kSlabBytes / Pool::kSlabMaxCopyBytes; ++i) {
    held.push_back(pool->Copy(big.data(), big.size()));
  }
  static_assert(Pool::kSlabBytes / Pool::kSlabMaxCopyBytes == 16, "the layout checked below");
  EXPECT_EQ(held.back().data() + big.size(), first.data() + 5120 + 14 * big.size() + big.size());
  EXPECT_EQ(pool->slabs_created(), 1u);
  SharedBytes next = pool->Copy(big.data(), big.size());  // does not fit: a second slab
  EXPECT_EQ(pool->slabs_created(), 2u);
  EXPECT_EQ(next.ToVector(), big);
  for (const SharedBytes& h : held) ASSERT_EQ(h.ToVector(), big);  // untouched by the new slab

  const std::uint8_t* first_slab = first.data();
  held.clear();
  second = SharedBytes();
  EXPECT_EQ(pool->free_bytes(), 0u);  // one slice still holds it
  first = SharedBytes();
  EXPECT_EQ(pool->free_bytes(), Pool::kSlabBytes);

  // Filling the second slab retires it and starts a third: the first comes back.
  for (std::size_t i = 1; i < Pool::kSlabBytes / Pool::kSlabMaxCopyBytes; ++i) {
    held.push_back(pool->Copy(big.data(), big.size()));
  }
  SharedBytes third = pool->Copy(a.data(), a.size());
  EXPECT_EQ(third.data(), first_slab);
  EXPECT_EQ(third.ToVector(), a);
  EXPECT_EQ(pool->slabs_created(), 2u);
  EXPECT_EQ(pool->reuses(), 1u);
  for (const SharedBytes& h : held) ASSERT_EQ(h.ToVector(), big);
}

// A slab whose slices were all released is retired by the copy that does
// not fit while only the pool holds it: it comes straight back (no lock is
// held when it does) and becomes the next slab.
TEST(SnapshotBufferPoolTest, ARetiredSlabWithNoSliceLeftIsTheNextSlab) {
  using Pool = SnapshotBufferPool;
  auto pool = Pool::Create(64 << 20);
  const std::vector<std::uint8_t> big = Bytes(Pool::kSlabMaxCopyBytes, 6);
  const std::uint8_t* slab = nullptr;
  for (std::size_t i = 0; i < Pool::kSlabBytes / Pool::kSlabMaxCopyBytes; ++i) {
    SharedBytes copy = pool->Copy(big.data(), big.size());  // released at once
    if (i == 0) slab = copy.data();
  }
  EXPECT_EQ(pool->free_bytes(), 0u);  // full, but still the slab being filled
  SharedBytes next = pool->Copy(big.data(), big.size());
  EXPECT_EQ(next.data(), slab);
  EXPECT_EQ(next.ToVector(), big);
  EXPECT_EQ(pool->slabs_created(), 1u);
  EXPECT_EQ(pool->reuses(), 1u);
}

// Clear retires the slab being filled: it is freed with its last slice.
TEST(SnapshotBufferPoolTest, ClearRetiresTheSlab) {
  auto pool = SnapshotBufferPool::Create(64 << 20);
  const std::vector<std::uint8_t> a = Bytes(3000, 1);
  SharedBytes before = pool->Copy(a.data(), a.size());
  pool->Clear();
  SharedBytes after = pool->Copy(a.data(), a.size());
  SharedBytes again = pool->Copy(a.data(), a.size());
  EXPECT_EQ(pool->slabs_created(), 3u);  // after Clear every small copy has its own
  EXPECT_EQ(before.ToVector(), a);
  EXPECT_EQ(after.ToVector(), a);
  EXPECT_EQ(again.ToVector(), a);
  before = after = again = SharedBytes();
  EXPECT_EQ(pool->free_bytes(), 0u);
}

TEST(SnapshotBufferPoolTest, BuffersMayOutliveThePool) {
  auto pool = SnapshotBufferPool::Create(1 << 20);
  std::vector<std::uint8_t> data = Bytes(1200000, 9);
  data.resize(5000);
  SharedBytes slice = pool->Copy(data.data(), data.size());
  SharedBytes whole = pool->Copy(data.data(), 1200000);
  pool.reset();
  EXPECT_EQ(slice.ToVector(), data);
  EXPECT_TRUE(std::equal(whole.begin(), whole.begin() + 5000, data.begin()));
  slice = SharedBytes();  // freed, not returned (ASan checks the memory)
  whole = SharedBytes();
}

TEST(SnapshotBufferPoolTest, CopiesAndReleasesFromTwoThreads) {
  auto pool = SnapshotBufferPool::Create(8 << 20);
  auto work = [&](std::uint8_t seed) {
    for (int i = 0; i < 300; ++i) {
      // Slices of slabs (up to 1 MiB) and whole buffers.
      const std::vector<std::uint8_t> data =
          Bytes(i % 3 ? 1000 + 90000 * (i % 7) : 1100000 + 1000 * (i % 7), seed);
      SharedBytes copy = pool->Copy(data.data(), data.size());
      ASSERT_EQ(copy.ToVector(), data);
      // Released on the other thread half of the time.
      if (i % 2) std::thread([c = std::move(copy)]() mutable { c = SharedBytes(); }).join();
    }
  };
  std::thread t1(work, 1), t2(work, 2);
  t1.join();
  t2.join();
  EXPECT_GT(pool->reuses(), 0u);
  EXPECT_LE(pool->free_bytes(), std::uint64_t{8} << 20);
}

}  // namespace
}  // namespace tstat::host
