// DeviceDeltaStore: delta capture for CUDA tensors (stats.delta). The values
// a tensor had at its previous save stay on the device, in a slot of a
// memory-bounded pool; at the next save the CUDA backend reduces x - previous
// in the same fused pass as the stat set (options.delta.previous is the
// slot), and afterwards the tensor's current values are copied into the slot
// (cudaMemcpyAsync device-to-device on the caller's stream, queued after the
// reduction, so stream order makes the reduction read the old values).
//
// Bounds: a slot is allocated on a tensor's first delta save and reused
// (reallocated when its size changes, which restarts the delta). A tensor
// whose slot would take the pool over `cap_bytes` gets no delta: a
// DropRecord {kind "delta"} at each such save says so, and drops() counts
// them - never silent. The first save of a tensor (and the first after a
// size change) has no previous values: no delta, no drop record.
// Ordering caveat: the copy is queued on the stream of the EndStep that
// saved; successive EndSteps must use the same stream (or streams ordered by
// the caller), as for any work on the tensor.
//
// The device memory is behind DeltaMemory (cudaMalloc / cudaFree /
// cudaMemcpyAsync in cuda/cuda_delta_memory.cc), so the bookkeeping here is
// tested on the CPU with a fake. Thread safety: one thread (EndStep, under
// the session lock).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tstat/stats_record.h"
#include "tstat/status.h"
#include "tstat/tensor_view.h"

struct CUstream_st;

namespace tstat::host {

class DeltaMemory {
 public:
  virtual ~DeltaMemory() = default;
  virtual Result<void*> Allocate(std::size_t bytes) = 0;
  virtual void Free(void* p) = 0;
  // Copies `bytes` from `src` to `dst` (both device memory) on `stream`,
  // after the work already queued there. Asynchronous.
  virtual Status CopyAsync(void* dst, const void* src, std::size_t bytes, CUstream_st* stream) = 0;
};

// cudaMalloc'ed slots on `device`; kNotSupported in builds without CUDA.
Result<std::unique_ptr<DeltaMemory>> CreateCudaDeltaMemory(int device);

class DeviceDeltaStore {
 public:
  DeviceDeltaStore(std::unique_ptr<DeltaMemory> memory, std::uint64_t cap_bytes)
      : memory_(std::move(memory)), cap_bytes_(cap_bytes) {}
  ~DeviceDeltaStore();  // frees every slot (cudaFree synchronizes the device)
  DeviceDeltaStore(const DeviceDeltaStore&) = delete;
  DeviceDeltaStore& operator=(const DeviceDeltaStore&) = delete;

  // Tensor `id`, saved at this step with view `v` (device memory): returns
  // the previous values to reduce against (null: none yet, or no slot), and
  // notes `v` for Commit. Over the cap, or when allocation fails: null and a
  // DropRecord in `batch`.
  const void* Prepare(std::uint32_t id, const TensorView& v, StepBatch* batch);
  // After the step's reductions were queued on `stream`: queues the copies
  // of the prepared tensors into their slots. On error the slots involved
  // are marked empty (their next save has no delta) and the first error is
  // returned.
  Status Commit(CUstream_st* stream);
  // The reductions were not queued: forgets the prepared copies (slots keep
  // their previous values).
  void Abandon() { prepared_.clear(); }

  std::uint64_t bytes_in_use() const { return bytes_in_use_; }
  std::uint64_t drops() const { return drops_; }
  std::size_t slots() const { return slots_.size(); }

 private:
  struct Slot {
    void* data = nullptr;
    std::size_t bytes = 0;
    bool valid = false;  // holds the values of the previous save
  };
  std::unique_ptr<DeltaMemory> memory_;
  std::uint64_t cap_bytes_;
  std::uint64_t bytes_in_use_ = 0;
  std::uint64_t drops_ = 0;
  std::unordered_map<std::uint32_t, Slot> slots_;
  std::vector<std::pair<std::uint32_t, TensorView>> prepared_;
};

}  // namespace tstat::host
