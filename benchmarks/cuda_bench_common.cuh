// What the CUDA benchmarks share: error checks that return a Status, owners of
// device memory, streams and events, and the read kernel that is the
// bandwidth reference of every GPU figure.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "tstat/engine.h"
#include "tstat/status.h"

namespace tstat::bench {

#define TSTAT_BENCH_CUDA(expr)                                                              \
  do {                                                                                      \
    const cudaError_t bench_err_ = (expr);                                                  \
    if (bench_err_ != cudaSuccess) {                                                        \
      return Status::CudaError(std::string(#expr) + ": " + cudaGetErrorString(bench_err_)); \
    }                                                                                       \
  } while (0)

inline constexpr int kReadThreads = 256;

// Internal linkage: every benchmark .cu file gets its own copy of the kernel
// (no separable compilation, so a kernel cannot be shared across files).
namespace {

// Grid-stride XOR over 16-byte vectors. Each warp folds its lanes with
// shuffles and lane 0 XORs the result into *out, so no load can be elided.
__global__ void XorReadKernel(const uint4* __restrict__ in, std::size_t vectors,
                              unsigned int* out) {
  uint4 acc = make_uint4(0, 0, 0, 0);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < vectors;
       i += stride) {
    const uint4 v = in[i];
    acc.x ^= v.x;
    acc.y ^= v.y;
    acc.z ^= v.z;
    acc.w ^= v.w;
  }
  unsigned int x = acc.x ^ acc.y ^ acc.z ^ acc.w;
  for (int offset = 16; offset > 0; offset >>= 1) x ^= __shfl_xor_sync(0xffffffffu, x, offset);
  if ((threadIdx.x & 31) == 0) atomicXor(out, x);
}

// Read kernel geometry: exactly as many blocks as fit on the GPU at once
// (occupancy), so every SM streams for the whole run and no straggler wave.
Status XorReadBlocks(int device, int* blocks) {
  int sms = 0, per_sm = 0;
  TSTAT_BENCH_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  TSTAT_BENCH_CUDA(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, XorReadKernel, kReadThreads, 0));
  *blocks = sms * (per_sm > 0 ? per_sm : 1);
  return Status::OK();
}

}  // namespace

// kUnavailable without a device, kInvalidArgument naming `flag` for an
// ordinal out of range.
inline Status CheckCudaOrdinal(int device, const char* flag) {
  const int count = CudaDeviceCount();
  if (count == 0) return Status::Unavailable("no CUDA device");
  if (device < 0 || device >= count) {
    return Status::InvalidArgument(std::string(flag) + " " + std::to_string(device) +
                                   " is out of range (" + std::to_string(count) + " devices)");
  }
  return Status::OK();
}

// Owners of device resources (the benchmarks return early on any error).
struct DeviceMemory {
  void* ptr = nullptr;
  DeviceMemory() = default;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() {
    if (ptr) cudaFree(ptr);
  }
};
struct Stream {
  cudaStream_t s = nullptr;
  Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    if (s) cudaStreamDestroy(s);
  }
};
struct Event {
  cudaEvent_t e = nullptr;
  Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() {
    if (e) cudaEventDestroy(e);
  }
};

}  // namespace tstat::bench
