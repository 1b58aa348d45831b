// RAII owners of CUDA resources: device buffers, pinned host buffers, events,
// and a scoped current-device switch. Buffers grow geometrically (Reserve) and
// are never shrunk, so a backend allocates once per high-water mark, not per
// batch. Destructors release without reporting (they cannot return a Status).
// Not thread-safe; a Reserve() that grows must not race with work that still
// uses the old allocation (the backend only grows when no batch is pending).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>

#include "kernels/cuda/cuda_status.cuh"

namespace tstat::kernels {

// Device memory (kPinned = false) or page-locked host memory (kPinned = true).
template <bool kPinned>
class CudaBuffer {
 public:
  CudaBuffer() = default;
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;
  ~CudaBuffer() { Release(); }

  // Ensures capacity() >= bytes: max(bytes, 2 * capacity()) when it grows.
  // Contents are not preserved.
  Status Reserve(std::size_t bytes) {
    if (bytes <= capacity_) return Status::OK();
    const std::size_t grown = std::max(bytes, 2 * capacity_);
    Release();
    void* p = nullptr;
    if constexpr (kPinned) {
      TSTAT_CUDA_RETURN_IF_ERROR(cudaMallocHost(&p, grown));
    } else {
      TSTAT_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, grown));
    }
    data_ = static_cast<unsigned char*>(p);
    capacity_ = grown;
    return Status::OK();
  }
  unsigned char* data() const { return data_; }
  std::size_t capacity() const { return capacity_; }

 private:
  void Release() {
    if (data_ == nullptr) return;
    if constexpr (kPinned) {
      (void)cudaFreeHost(data_);
    } else {
      (void)cudaFree(data_);
    }
    data_ = nullptr;
    capacity_ = 0;
  }
  unsigned char* data_ = nullptr;
  std::size_t capacity_ = 0;
};
using DeviceBuffer = CudaBuffer<false>;
using PinnedBuffer = CudaBuffer<true>;

// A timing-free event (cheapest to record and wait on).
class CudaEvent {
 public:
  CudaEvent() = default;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  ~CudaEvent() {
    if (event_ != nullptr) (void)cudaEventDestroy(event_);
  }
  Status Create() {
    TSTAT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    return Status::OK();
  }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Makes `device` current for the scope and restores the previous device.
class ScopedDevice {
 public:
  ScopedDevice() = default;
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;
  ~ScopedDevice() {
    if (restore_ >= 0) (void)cudaSetDevice(restore_);
  }
  Status Enter(int device) {
    int current = -1;
    TSTAT_CUDA_RETURN_IF_ERROR(cudaGetDevice(&current));
    if (current != device) {
      TSTAT_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
      restore_ = current;
    }
    return Status::OK();
  }

 private:
  int restore_ = -1;
};

}  // namespace tstat::kernels
