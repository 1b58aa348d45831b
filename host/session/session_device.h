// The session's CUDA side: the pool of device captures, created with the
// first CUDA tensor (pipeline.cuda_inflight members), and the store of CUDA
// tensors' previous values for deltas (device_delta.h), created with the
// first delta save. Sessions without CUDA tensors create neither.
// Thread safety: the session lock serializes every method.
#pragma once

#include <cstdint>
#include <memory>

#include "host/device/device_capture.h"
#include "host/device/device_delta.h"
#include "tstat/config.h"
#include "tstat/stats_record.h"

namespace tstat::host {

class SessionDevice {
 public:
  // `factory` null: CreateCudaDeviceCapture.
  SessionDevice(DeviceCaptureFactory factory, const PipelineConfig& config);

  // Creates the pool on first use; refuses a device other than
  // pipeline.cuda_device.
  Status EnsurePool(int device);
  DevicePool* pool() const { return pool_.get(); }

  // The delta store, created on first use on `device`; null, with a drop
  // record for tensor `id` in `batch`, when its memory cannot be had.
  DeviceDeltaStore* DeltaStore(int device, std::uint32_t id, StepBatch* batch);
  DeviceDeltaStore* delta() const { return delta_.get(); }

 private:
  DeviceCaptureFactory factory_;
  int device_;
  int inflight_;
  std::uint64_t delta_cap_bytes_;
  std::unique_ptr<DevicePool> pool_;
  // Declared after pool_: freed first.
  std::unique_ptr<DeviceDeltaStore> delta_;
};

}  // namespace tstat::host
