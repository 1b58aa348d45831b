// CudaBackend: the Backend that reduces CUDA tensors on their GPU.
//
// A batch is planned on the host (LaunchPlan: a work table of every chunk of
// every tensor), its tables are copied to a device workspace with one async
// copy from pinned staging, and at most nine kernels run on the caller's stream
// (stats, channels, merge, linear histogram, labels, sample, and delta,
// confusion, value counts when asked for; see kernels/plan/launch_plan.h). The outputs come back
// with one cudaMemcpyAsync into pinned memory, and an event recorded on the stream marks
// completion: Collect() waits on that event only, never on the device.
//
// Enqueue/Collect split the two halves so a pipeline can overlap host work
// with the reduction: Enqueue() returns once the work is queued; the tensors
// must stay alive and unmodified (on `stream`) until Collect() returns. One
// batch may be pending per backend (a second Enqueue before Collect is
// kFailedPrecondition). Reduce() = Enqueue() + Collect().
//
// Tensors whose address is not a multiple of their element size are handled
// (element loads assembled from byte loads, no vector loads); they are slower,
// never wrong. Device workspace and pinned buffers are allocated at creation
// and grown geometrically when a batch needs more, never per call.
// Thread safety: one thread at a time per instance (like every Backend).
// This header needs no CUDA headers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tstat/engine.h"

namespace tstat::kernels {

class CudaBackend final : public Backend {
 public:
  // kInvalidArgument for a bad ordinal, kCudaError when the device cannot be
  // initialized.
  static Result<std::unique_ptr<CudaBackend>> Create(int device);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  BackendKind kind() const override { return BackendKind::kCuda; }
  std::string description() const override;
  Status Reduce(const std::vector<ReductionRequest>& requests,
                std::vector<ReductionResult>* results, CUstream_st* stream = nullptr) override;

  // Validates and plans `requests` and queues the whole batch on `stream`
  // (nullptr: the legacy default stream). `requests` itself may be destroyed
  // after the call; per-request validation results are reported by Collect.
  Status Enqueue(const std::vector<ReductionRequest>& requests, CUstream_st* stream);
  // Waits for the pending batch and fills `results` (one per request).
  Status Collect(std::vector<ReductionResult>* results);
  bool pending() const;

  int device() const;
  // Kernel launches the last Enqueue made (at most 9 whatever the batch size;
  // at most 6 without delta, confusion or value counts).
  int last_kernel_launches() const;

 private:
  struct State;
  explicit CudaBackend(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace tstat::kernels
