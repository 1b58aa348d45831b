#include "host/session/session_device.h"

#include <string>
#include <utility>
#include <vector>

namespace tstat::host {

SessionDevice::SessionDevice(DeviceCaptureFactory factory, const PipelineConfig& config)
    : factory_(factory ? std::move(factory) : CreateCudaDeviceCapture),
      device_(config.cuda_device),
      inflight_(config.cuda_inflight),
      delta_cap_bytes_(static_cast<std::uint64_t>(config.delta_memory_cap_bytes)) {}

Status SessionDevice::EnsurePool(int device) {
  if (device != device_) {
    return Status::InvalidArgument("the tensor is on CUDA device " + std::to_string(device) +
                                   ", the session captures device " + std::to_string(device_) +
                                   " (pipeline.cuda_device)");
  }
  if (pool_) return Status::OK();
  std::vector<std::unique_ptr<DeviceCapture>> members;
  for (int i = 0; i < inflight_; ++i) {
    TSTAT_ASSIGN_OR_RETURN(std::unique_ptr<DeviceCapture> m, factory_(device));
    members.push_back(std::move(m));
  }
  pool_ = std::make_unique<DevicePool>(std::move(members));
  return Status::OK();
}

DeviceDeltaStore* SessionDevice::DeltaStore(int device, std::uint32_t id, StepBatch* batch) {
  if (delta_) return delta_.get();
  Result<std::unique_ptr<DeltaMemory>> memory = CreateCudaDeltaMemory(device);
  if (!memory.ok()) {
    batch->drops.push_back({id, "delta", memory.status().message(), 0});
    return nullptr;
  }
  delta_ = std::make_unique<DeviceDeltaStore>(std::move(memory).value(), delta_cap_bytes_);
  return delta_.get();
}

}  // namespace tstat::host
