// DeviceDeltaStore bookkeeping (device_delta.h).
#include "host/device/device_delta.h"

#include "tstat/dtype.h"

namespace tstat::host {
namespace {

std::string CapReason(std::uint64_t cap, std::size_t bytes) {
  return "device delta memory cap (" + std::to_string(cap >> 20) + " MiB, " +
         "pipeline.delta_memory_cap_bytes) reached: no delta for this tensor (" +
         std::to_string(bytes) + " bytes)";
}

}  // namespace

DeviceDeltaStore::~DeviceDeltaStore() {
  for (auto& kv : slots_) {
    if (kv.second.data != nullptr) memory_->Free(kv.second.data);
  }
}

const void* DeviceDeltaStore::Prepare(std::uint32_t id, const TensorView& v, StepBatch* batch) {
  const std::size_t bytes = static_cast<std::size_t>(v.numel) * DTypeSize(v.dtype);
  auto it = slots_.find(id);
  if (it != slots_.end() && it->second.bytes != bytes) {  // resized: start over
    if (it->second.data != nullptr) memory_->Free(it->second.data);
    bytes_in_use_ -= it->second.bytes;
    slots_.erase(it);
    it = slots_.end();
  }
  if (it == slots_.end()) {
    if (bytes_in_use_ + bytes > cap_bytes_) {
      ++drops_;
      batch->drops.push_back({id, "delta", CapReason(cap_bytes_, bytes), bytes});
      return nullptr;
    }
    Slot slot;
    slot.bytes = bytes;
    if (bytes > 0) {
      Result<void*> data = memory_->Allocate(bytes);
      if (!data.ok()) {
        ++drops_;
        batch->drops.push_back(
            {id, "delta", "device delta memory: " + data.status().message(), bytes});
        return nullptr;
      }
      slot.data = data.value();
    }
    bytes_in_use_ += bytes;
    it = slots_.emplace(id, slot).first;
  }
  prepared_.emplace_back(id, v);
  return it->second.valid ? it->second.data : nullptr;
}

Status DeviceDeltaStore::Commit(CUstream_st* stream) {
  Status first;
  for (const auto& [id, v] : prepared_) {
    Slot& slot = slots_[id];
    if (slot.bytes == 0) {
      slot.valid = true;
      continue;
    }
    const Status s = memory_->CopyAsync(slot.data, v.data, slot.bytes, stream);
    slot.valid = s.ok();
    if (!s.ok() && first.ok()) first = s.WithContext("delta copy of tensor " + std::to_string(id));
  }
  prepared_.clear();
  return first;
}

}  // namespace tstat::host
