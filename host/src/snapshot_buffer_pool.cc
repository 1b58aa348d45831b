// See snapshot_buffer_pool.h.
#include "host/src/snapshot_buffer_pool.h"

#include <cstdint>
#include <utility>

#include "io/posix_file.h"

namespace tstat::host {
namespace {

// A new buffer's first touch costs a page fault and a page clear per 4 KiB
// (for a 64 MiB snapshot, ~2.5x the copy itself on this project's test
// machine): large ones are advised for huge pages first.
constexpr std::size_t kHugePageMinBytes = std::size_t{4} << 20;

std::unique_ptr<SnapshotBufferPool::Buffer> NewBuffer(const std::uint8_t* src, std::size_t bytes) {
  auto buffer = std::make_unique<SnapshotBufferPool::Buffer>();
  if (bytes < kHugePageMinBytes) {
    buffer->assign(src, src + bytes);
    return buffer;
  }
  buffer->reserve(bytes);  // allocated, not yet touched
  io::AdviseHugePages(buffer->data(), bytes);
  buffer->assign(src, src + bytes);
  return buffer;
}

}  // namespace

struct SnapshotBufferPool::Return {
  std::weak_ptr<SnapshotBufferPool> pool;
  void operator()(const Buffer* buffer) const {
    std::unique_ptr<Buffer> owned(const_cast<Buffer*>(buffer));
    if (std::shared_ptr<SnapshotBufferPool> p = pool.lock()) p->Keep(std::move(owned));
  }
};

std::shared_ptr<SnapshotBufferPool> SnapshotBufferPool::Create(std::uint64_t max_free_bytes) {
  return std::shared_ptr<SnapshotBufferPool>(new SnapshotBufferPool(max_free_bytes));
}

std::unique_ptr<SnapshotBufferPool::Buffer> SnapshotBufferPool::Take(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = free_.lower_bound(bytes);
  if (it == free_.end() || it->first > 2 * bytes + (64u << 10)) return nullptr;
  std::unique_ptr<Buffer> buffer = std::move(it->second);
  free_bytes_ -= it->first;
  free_.erase(it);
  ++reuses_;
  return buffer;
}

void SnapshotBufferPool::Keep(std::unique_ptr<Buffer> buffer) {
  const std::size_t capacity = buffer->capacity();
  std::unique_lock<std::mutex> lock(mu_);
  if (cleared_ || capacity == 0 || free_bytes_ + capacity > max_free_bytes_) {
    lock.unlock();
    buffer.reset();  // freed outside the lock
    return;
  }
  free_bytes_ += capacity;
  free_.emplace(capacity, std::move(buffer));
}

std::shared_ptr<const SnapshotBufferPool::Buffer> SnapshotBufferPool::Copy(const void* data,
                                                                           std::size_t bytes) {
  const auto* src = static_cast<const std::uint8_t*>(data);
  std::unique_ptr<Buffer> buffer = Take(bytes);
  if (buffer) {
    buffer->assign(src, src + bytes);  // within capacity: no reallocation, no zero-fill
  } else {
    buffer = NewBuffer(src, bytes);
  }
  return std::shared_ptr<const Buffer>(buffer.release(), Return{weak_from_this()});
}

void SnapshotBufferPool::Clear() {
  std::multimap<std::size_t, std::unique_ptr<Buffer>> freed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cleared_ = true;
    freed.swap(free_);
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

}  // namespace tstat::host
