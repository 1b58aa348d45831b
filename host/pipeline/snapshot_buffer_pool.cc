// See snapshot_buffer_pool.h.
#include "host/pipeline/snapshot_buffer_pool.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "io/h5/posix_file.h"

namespace tstat::host {
namespace {

// A new block's first touch costs a page fault and a page clear per 4 KiB
// (for a 64 MiB snapshot, ~2.5x the copy itself on this project's test
// machine): blocks of 4 MiB and more (slabs included) are aligned to huge
// pages and advised for them. They are mapped on their own and unmapped when
// freed: from malloc (aligned_alloc) they came from the heap once glibc had
// raised its mmap threshold, and the advice outlived them there, applying to
// whatever the process allocated at those addresses next.
constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;
constexpr std::size_t kHugePageMinBytes = std::size_t{4} << 20;

std::size_t RoundUp(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// `bytes` (a multiple of kHugePageBytes) of fresh memory aligned to
// kHugePageBytes, advised for huge pages; nullptr when the mapping fails.
std::uint8_t* MapHugePageAligned(std::size_t bytes) {
  const std::size_t span = bytes + kHugePageBytes;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto begin = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = RoundUp(begin, kHugePageBytes);
  const std::uintptr_t end = aligned + bytes;
  if (aligned > begin) ::munmap(raw, aligned - begin);
  if (begin + span > end) ::munmap(reinterpret_cast<void*>(end), begin + span - end);
  auto* data = reinterpret_cast<std::uint8_t*>(aligned);
  io::AdviseHugePages(data, bytes);  // before the first touch
  return data;
}

}  // namespace

struct SnapshotBufferPool::Block {
  Block(std::uint8_t* d, std::size_t c, bool m) : data(d), capacity(c), mapped(m) {}
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  ~Block() {
    if (mapped) {
      ::munmap(data, capacity);
    } else {
      std::free(data);
    }
  }

  static std::unique_ptr<Block> Allocate(std::size_t bytes) {
    if (bytes < kHugePageMinBytes) {
      void* p = std::malloc(bytes == 0 ? 1 : bytes);
      if (p == nullptr) throw std::bad_alloc();
      return std::make_unique<Block>(static_cast<std::uint8_t*>(p), bytes, false);
    }
    const std::size_t capacity = RoundUp(bytes, kHugePageBytes);
    std::uint8_t* p = MapHugePageAligned(capacity);
    if (p == nullptr) throw std::bad_alloc();
    return std::make_unique<Block>(p, capacity, true);
  }

  std::uint8_t* const data;
  const std::size_t capacity;
  const bool mapped;  // by MapHugePageAligned, else malloc
};

struct SnapshotBufferPool::Return {
  std::weak_ptr<SnapshotBufferPool> pool;
  void operator()(const Block* block) const {
    std::unique_ptr<Block> owned(const_cast<Block*>(block));
    if (std::shared_ptr<SnapshotBufferPool> p = pool.lock()) p->Keep(std::move(owned));
  }
};

std::shared_ptr<SnapshotBufferPool> SnapshotBufferPool::Create(std::uint64_t max_free_bytes) {
  return std::shared_ptr<SnapshotBufferPool>(new SnapshotBufferPool(max_free_bytes));
}

SnapshotBufferPool::SnapshotBufferPool(std::uint64_t max_free_bytes)
    : max_free_bytes_(max_free_bytes) {}

SnapshotBufferPool::~SnapshotBufferPool() = default;

std::unique_ptr<SnapshotBufferPool::Block> SnapshotBufferPool::Take(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = free_.lower_bound(bytes);
  if (it == free_.end() || it->first > 2 * bytes + (64u << 10)) return nullptr;
  std::unique_ptr<Block> block = std::move(it->second);
  free_bytes_ -= it->first;
  free_.erase(it);
  ++reuses_;
  return block;
}

std::unique_ptr<SnapshotBufferPool::Block> SnapshotBufferPool::TakeOrCreate(std::size_t bytes,
                                                                            bool* created) {
  std::unique_ptr<Block> block = Take(bytes);
  if (created != nullptr) *created = !block;
  return block ? std::move(block) : Block::Allocate(bytes);
}

std::shared_ptr<const SnapshotBufferPool::Block> SnapshotBufferPool::HandOut(
    std::unique_ptr<Block> block) {
  return std::shared_ptr<const Block>(block.release(), Return{weak_from_this()});
}

void SnapshotBufferPool::Keep(std::unique_ptr<Block> block) {
  const std::size_t capacity = block->capacity;
  std::unique_lock<std::mutex> lock(mu_);
  if (cleared_ || capacity == 0 || free_bytes_ + capacity > max_free_bytes_) {
    lock.unlock();
    block.reset();  // freed outside the lock
    return;
  }
  free_bytes_ += capacity;
  free_.emplace(capacity, std::move(block));
}

SharedBytes SnapshotBufferPool::CopyIntoSlab(const std::uint8_t* src, std::size_t bytes) {
  std::shared_ptr<const Block> slab;
  // A retired slab goes back to the pool with its last slice, which may be
  // the pool's own reference: dropped only once mu_ is released (Keep).
  std::shared_ptr<const Block> retired;
  std::size_t offset = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    offset = RoundUp(slab_used_, kSliceAlignment);
    if (slab_ && offset + bytes <= slab_->capacity) {
      slab = slab_;
      slab_used_ = offset + bytes;
    } else {
      retired = std::move(slab_);
    }
  }
  retired.reset();
  if (!slab) {
    bool created = false;
    slab = HandOut(TakeOrCreate(kSlabBytes, &created));
    offset = 0;
    std::lock_guard<std::mutex> lock(mu_);
    if (created) ++slabs_created_;
    if (!cleared_) {               // after Clear a slab serves only this copy
      retired = std::move(slab_);  // one another thread installed meanwhile
      slab_ = slab;
      slab_used_ = bytes;
    }
  }
  retired.reset();
  // The slice is this copy's alone: written outside the lock.
  std::uint8_t* dst = slab->data + offset;
  std::memcpy(dst, src, bytes);
  return SharedBytes(std::move(slab), dst, bytes);
}

SharedBytes SnapshotBufferPool::Copy(const void* data, std::size_t bytes) {
  const auto* src = static_cast<const std::uint8_t*>(data);
  if (bytes == 0) return SharedBytes(std::vector<std::uint8_t>());
  if (bytes <= kSlabMaxCopyBytes) return CopyIntoSlab(src, bytes);
  std::shared_ptr<const Block> block = HandOut(TakeOrCreate(bytes));
  std::memcpy(block->data, src, bytes);
  std::uint8_t* dst = block->data;
  return SharedBytes(std::move(block), dst, bytes);
}

void SnapshotBufferPool::Clear() {
  std::multimap<std::size_t, std::unique_ptr<Block>> freed;
  std::shared_ptr<const Block> retired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cleared_ = true;
    freed.swap(free_);
    retired = std::move(slab_);
    slab_used_ = 0;
    free_bytes_ = 0;
  }
}

std::uint64_t SnapshotBufferPool::free_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return free_bytes_;
}

std::uint64_t SnapshotBufferPool::reuses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reuses_;
}

std::uint64_t SnapshotBufferPool::slabs_created() const {
  std::lock_guard<std::mutex> lock(mu_);
  return slabs_created_;
}

}  // namespace tstat::host
