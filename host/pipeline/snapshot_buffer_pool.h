// SnapshotBufferPool: the memory of raw snapshot copies, reused.
//
// A host raw snapshot is a copy of the tensor made in EndStep (the training
// loop may overwrite the tensor as soon as EndStep returns). Fresh memory for
// every copy costs a page fault and a page clear per 4 KiB: for snapshots of
// 100 KiB and more that was most of the copy's time. Buffers released by the
// writer come back here and serve later copies of the same size class.
//
// Small copies (up to kSlabMaxCopyBytes, 1 MiB) are slices of a slab of
// kSlabBytes (16 MiB), filled in order, 64-byte aligned, across steps:
// 1,000 snapshots of 4 KB each cost a slab of huge pages per 4 steps instead
// of 1,000 allocations and 1,000 page faults per step (most of the capture
// of such a step went to those), and 100 snapshots of 400 KB no longer fault
// in 4 KiB pages (which held the copy to half the writer's raw speed).
// A slab comes back to the pool when it is no longer the one being filled
// and its last slice is released.
//
// Bounds: a buffer serves a request of `bytes` when its capacity is in
// [bytes, 2 * bytes + 64 KiB]; at most `max_free_bytes` of capacity is kept
// unused (session: half of pipeline.raw_memory_cap_bytes), the rest is freed.
// Slabs add at most one slab plus the slab ends left unfilled (each less than
// kSlabMaxCopyBytes) to the bytes of the snapshots alive. Clear() frees what
// is kept, retires the slab being filled, and stops keeping (Session::Close).
//
// Thread safety: all members may be called from any thread; copies may be
// released (last reference dropped) on any thread, also after the pool is
// gone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "tstat/stats_record.h"

namespace tstat::host {

class SnapshotBufferPool : public std::enable_shared_from_this<SnapshotBufferPool> {
 public:
  static constexpr std::size_t kSlabBytes = std::size_t{16} << 20;
  static constexpr std::size_t kSlabMaxCopyBytes = std::size_t{1} << 20;
  static constexpr std::size_t kSliceAlignment = 64;

  static std::shared_ptr<SnapshotBufferPool> Create(std::uint64_t max_free_bytes);
  ~SnapshotBufferPool();

  // A copy of [data, data + bytes). Throws std::bad_alloc when no memory is
  // left (as the vector it replaced did).
  SharedBytes Copy(const void* data, std::size_t bytes);

  void Clear();
  std::uint64_t free_bytes() const;
  std::uint64_t reuses() const;  // buffers and slabs served from kept memory
  std::uint64_t slabs_created() const;

 private:
  struct Block;   // malloc'd memory and its capacity
  struct Return;  // the deleter of the blocks handed out
  explicit SnapshotBufferPool(std::uint64_t max_free_bytes);
  std::unique_ptr<Block> Take(std::size_t bytes);
  // A kept block that serves `bytes`, else a new one (`*created` says which).
  std::unique_ptr<Block> TakeOrCreate(std::size_t bytes, bool* created = nullptr);
  std::shared_ptr<const Block> HandOut(std::unique_ptr<Block> block);
  void Keep(std::unique_ptr<Block> block);
  SharedBytes CopyIntoSlab(const std::uint8_t* src, std::size_t bytes);

  const std::uint64_t max_free_bytes_;
  mutable std::mutex mu_;
  std::multimap<std::size_t, std::unique_ptr<Block>> free_;  // by capacity
  std::shared_ptr<const Block> slab_;                        // being filled
  std::size_t slab_used_ = 0;
  std::uint64_t free_bytes_ = 0;
  std::uint64_t reuses_ = 0;
  std::uint64_t slabs_created_ = 0;
  bool cleared_ = false;
};

}  // namespace tstat::host
