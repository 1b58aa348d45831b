// SnapshotBufferPool: the memory of raw snapshot copies, reused.
//
// A host raw snapshot is a copy of the tensor made in EndStep (the training
// loop may overwrite the tensor as soon as EndStep returns). Fresh memory for
// every copy costs a page fault and a page clear per 4 KiB: for snapshots of
// 100 KiB and more that was most of the copy's time. Buffers released by the
// writer come back here and serve later copies of the same size class.
//
// Bounds: a buffer serves a request of `bytes` when its capacity is in
// [bytes, 2 * bytes + 64 KiB]; at most `max_free_bytes` of capacity is kept
// unused (session: half of pipeline.raw_memory_cap_bytes), the rest is freed.
// Clear() frees what is kept and stops keeping (Session::Close).
//
// Thread safety: all members may be called from any thread; buffers may be
// released (last reference dropped) on any thread, also after the pool is
// gone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace tstat::host {

class SnapshotBufferPool : public std::enable_shared_from_this<SnapshotBufferPool> {
 public:
  using Buffer = std::vector<std::uint8_t>;

  static std::shared_ptr<SnapshotBufferPool> Create(std::uint64_t max_free_bytes);

  // A buffer holding a copy of [data, data + bytes).
  std::shared_ptr<const Buffer> Copy(const void* data, std::size_t bytes);

  void Clear();
  std::uint64_t free_bytes() const;
  std::uint64_t reuses() const;  // copies served by a kept buffer

 private:
  explicit SnapshotBufferPool(std::uint64_t max_free_bytes) : max_free_bytes_(max_free_bytes) {}
  struct Return;  // the deleter of the buffers handed out
  std::unique_ptr<Buffer> Take(std::size_t bytes);
  void Keep(std::unique_ptr<Buffer> buffer);

  const std::uint64_t max_free_bytes_;
  mutable std::mutex mu_;
  std::multimap<std::size_t, std::unique_ptr<Buffer>> free_;  // by capacity
  std::uint64_t free_bytes_ = 0;
  std::uint64_t reuses_ = 0;
  bool cleared_ = false;
};

}  // namespace tstat::host
