// DeviceCapture: the seam between the session and a GPU. One instance holds
// one step's device work at a time: Enqueue (training thread) queues the
// reductions of the step's CUDA tensors and the device-to-device copies of
// their raw snapshots into a staging buffer, all on the caller's stream, and
// returns; Collect (collector thread) waits for that work and returns the
// results and the raw bytes. The session keeps a pool of cuda_inflight
// instances so the GPU can work on one step while the next one is enqueued.
//
// The CUDA implementation (cuda_device_capture.cc) wraps
// kernels::CudaBackend's Enqueue/Collect; builds without CUDA get one that
// says kNotSupported. Tests substitute a host-memory fake.
// Thread safety: one thread at a time; Enqueue and Collect alternate, and the
// pool hands an instance from the training thread to the collector thread and
// back under a mutex.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "tstat/engine.h"
#include "tstat/status.h"

namespace tstat::host {

class DeviceCapture {
 public:
  virtual ~DeviceCapture() = default;
  // Queues the reductions of `requests` and copies of the tensors in `raws`
  // on `stream`. The views must stay valid and unmodified on `stream` until
  // the queued work has run (stream order guarantees it for later kernels).
  // kFailedPrecondition when `stream` is capturing a CUDA graph.
  virtual Status Enqueue(const std::vector<ReductionRequest>& requests,
                         const std::vector<TensorView>& raws, CUstream_st* stream) = 0;
  // Whether the device can read each raw view's memory (one status per view;
  // a view that is not readable would fault the device in Enqueue's copy).
  // Requests need no such call: the backend checks their memory itself.
  virtual void CheckRaws(const std::vector<TensorView>& raws, std::vector<Status>* status) {
    status->assign(raws.size(), Status::OK());
  }
  // Waits for the queued work; one result per request, one byte vector per
  // raw view.
  virtual Status Collect(std::vector<ReductionResult>* results,
                         std::vector<std::vector<std::uint8_t>>* raws) = 0;
};

using DeviceCaptureFactory = std::function<Result<std::unique_ptr<DeviceCapture>>(int device)>;

// The CUDA implementation; kNotSupported without CUDA, kUnavailable without
// a device.
Result<std::unique_ptr<DeviceCapture>> CreateCudaDeviceCapture(int device);

// A fixed set of DeviceCaptures lent out one at a time.
class DevicePool {
 public:
  explicit DevicePool(std::vector<std::unique_ptr<DeviceCapture>> members);
  // Waits until a member is free; `waited` tells whether it had to.
  DeviceCapture* Acquire(bool* waited);
  void Release(DeviceCapture* member);

 private:
  std::vector<std::unique_ptr<DeviceCapture>> members_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<DeviceCapture*> free_;
};

}  // namespace tstat::host
