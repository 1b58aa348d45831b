// DeviceMemoryCheck (device_memory_check.h). cuMemGetAddressRange comes from
// the driver through the runtime's entry-point query, so tstat does not link
// libcuda (a machine without a driver must still load libtstat.so).
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "kernels/cuda/device_memory_check.h"

namespace tstat::kernels {
namespace {

std::string Hex(std::uintptr_t p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(p));
  return buf;
}

}  // namespace

DeviceMemoryCheck::DeviceMemoryCheck() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault,
                                       &found) == cudaSuccess &&
      found == cudaDriverEntryPointSuccess) {
    address_range_ = reinterpret_cast<AddressRangeFn>(fn);
  } else {
    (void)cudaGetLastError();
  }
}

std::vector<DeviceMemoryCheck::Range>::iterator DeviceMemoryCheck::FirstAfter(std::uintptr_t p) {
  return std::upper_bound(live_.begin(), live_.end(), p,
                          [](std::uintptr_t q, const Range& r) { return q < r.begin; });
}

Status DeviceMemoryCheck::Check(const void* data, std::size_t bytes, int device, const char* what) {
  if (data == nullptr || bytes == 0) return Status::OK();  // nothing is read
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t end = begin + bytes;
  auto it = FirstAfter(begin);
  if (it != live_.begin() && begin < std::prev(it)->end) {
    const Range& r = *std::prev(it);
    if (end <= r.end && r.device == device) return Status::OK();
  }

  ++queries_;
  cudaPointerAttributes attr{};
  const cudaError_t e = cudaPointerGetAttributes(&attr, data);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::InvalidArgument(std::string(what) + " " + Hex(begin) +
                                   " is not memory the CUDA driver knows (" +
                                   cudaGetErrorString(e) + ")");
  }
  switch (attr.type) {
    case cudaMemoryTypeUnregistered:
      return Status::InvalidArgument(
          std::string(what) + " " + Hex(begin) +
          " is not CUDA memory: pageable host memory (register it with MemorySpace::kHost) or "
          "device memory that was already freed");
    case cudaMemoryTypeHost:
    case cudaMemoryTypeManaged:
      return Status::OK();  // readable by every GPU of the process
    case cudaMemoryTypeDevice:
      break;
  }
  if (attr.device != device) {
    return Status::InvalidArgument(std::string(what) + " " + Hex(begin) +
                                   " is memory of CUDA device " + std::to_string(attr.device) +
                                   ", but tensor.device is " + std::to_string(device));
  }
  if (address_range_ == nullptr) return Status::OK();
  // Walk the allocations that cover [begin, end): one, except in memory
  // mapped piece by piece into one address range (cuMemMap, as PyTorch's
  // expandable segments do), where a tensor may span several pieces.
  std::uintptr_t at = begin;
  while (at < end) {
    unsigned long long base = 0;
    std::size_t size = 0;
    ++queries_;
    const int got = address_range_(&base, &size, static_cast<unsigned long long>(at));
    if (got != CUDA_SUCCESS && got != CUDA_ERROR_INVALID_VALUE && got != CUDA_ERROR_NOT_FOUND) {
      return Status::OK();  // the driver cannot tell here (no context?): the attributes passed
    }
    if (got != CUDA_SUCCESS || size == 0) {
      if (at == begin) {
        return Status::InvalidArgument(std::string(what) + " " + Hex(begin) +
                                       " is in no live allocation of CUDA device " +
                                       std::to_string(device) + " (freed?)");
      }
      return Status::InvalidArgument(
          std::string(what) + " " + Hex(begin) + " + " + std::to_string(bytes) +
          " bytes runs past the end of its allocation at " + Hex(at) +
          ": the numel or dtype is wrong, or part of the tensor was freed");
    }
    const Range r{static_cast<std::uintptr_t>(base), static_cast<std::uintptr_t>(base) + size,
                  device};
    live_.insert(FirstAfter(r.begin), r);
    at = r.end;
  }
  return Status::OK();
}

}  // namespace tstat::kernels
