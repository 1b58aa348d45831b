// DevicePool: lends DeviceCaptures to the training thread; the collector
// thread returns them.
#include "host/device/device_capture.h"

namespace tstat::host {

DevicePool::DevicePool(std::vector<std::unique_ptr<DeviceCapture>> members)
    : members_(std::move(members)) {
  for (const auto& m : members_) free_.push_back(m.get());
}

DeviceCapture* DevicePool::Acquire(bool* waited) {
  std::unique_lock<std::mutex> lock(mu_);
  *waited = free_.empty();
  cv_.wait(lock, [&] { return !free_.empty(); });
  DeviceCapture* m = free_.back();
  free_.pop_back();
  return m;
}

void DevicePool::Release(DeviceCapture* member) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(member);
  cv_.notify_one();
}

}  // namespace tstat::host
