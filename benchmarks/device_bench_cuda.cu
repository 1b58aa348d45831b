// MeasureDevice (device_bench.h): properties from the runtime, then the read
// kernel and a device-to-device copy alternate on one stream.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "benchmarks/bench_timing.h"
#include "benchmarks/cuda_bench_common.cuh"
#include "benchmarks/device_bench.h"
#include "tstat/engine.h"

namespace tstat::bench {
namespace {

Status ReadProperties(int device, DeviceReport* r) {
  cudaDeviceProp p{};
  TSTAT_BENCH_CUDA(cudaGetDeviceProperties(&p, device));
  r->name = p.name;
  r->compute_major = p.major;
  r->compute_minor = p.minor;
  r->sm_count = p.multiProcessorCount;
  r->memory_bytes = p.totalGlobalMem;
  r->l2_bytes = static_cast<std::uint64_t>(p.l2CacheSize);
  r->bus_width_bits = p.memoryBusWidth;
  // Clocks are attributes (no longer cudaDeviceProp fields in CUDA 13); a
  // driver may not report them.
  if (cudaDeviceGetAttribute(&r->clock_khz, cudaDevAttrClockRate, device) != cudaSuccess) {
    r->clock_khz = 0;
  }
  if (cudaDeviceGetAttribute(&r->memory_clock_khz, cudaDevAttrMemoryClockRate, device) !=
      cudaSuccess) {
    r->memory_clock_khz = 0;
  }
  (void)cudaGetLastError();
  TSTAT_BENCH_CUDA(cudaDriverGetVersion(&r->driver_version));
  TSTAT_BENCH_CUDA(cudaRuntimeGetVersion(&r->runtime_version));
  r->theoretical_gbps = 2.0 * r->memory_clock_khz * 1e3 * (r->bus_width_bits / 8.0) / 1e9;
  return Status::OK();
}

}  // namespace

Result<DeviceReport> MeasureDevice(const DeviceBenchOptions& o) {
  TSTAT_RETURN_IF_ERROR(CheckCudaOrdinal(o.device, "--cuda-device"));
  if (!(o.mib > 0) || o.repeats < 1) {
    return Status::InvalidArgument("--mib must be positive and --repeats at least 1");
  }
  DeviceReport r;
  r.device = o.device;
  r.repeats = o.repeats;
  TSTAT_BENCH_CUDA(cudaSetDevice(o.device));
  TSTAT_RETURN_IF_ERROR(ReadProperties(o.device, &r));

  // A multiple of two 16-byte vectors, so the copy's halves are whole vectors.
  const std::size_t bytes =
      std::max<std::size_t>(32, static_cast<std::size_t>(o.mib * 1024.0 * 1024.0) / 32 * 32);
  r.bytes = bytes;
  DeviceMemory buffer, sink;
  TSTAT_BENCH_CUDA(cudaMalloc(&buffer.ptr, bytes));
  TSTAT_BENCH_CUDA(cudaMalloc(&sink.ptr, sizeof(unsigned int)));
  TSTAT_BENCH_CUDA(cudaMemset(buffer.ptr, 0x5a, bytes));
  TSTAT_BENCH_CUDA(cudaMemset(sink.ptr, 0, sizeof(unsigned int)));
  int blocks = 0;
  TSTAT_RETURN_IF_ERROR(XorReadBlocks(o.device, &blocks));

  Stream stream;
  Event e0, e1, e2;
  TSTAT_BENCH_CUDA(cudaStreamCreateWithFlags(&stream.s, cudaStreamNonBlocking));
  TSTAT_BENCH_CUDA(cudaEventCreate(&e0.e));
  TSTAT_BENCH_CUDA(cudaEventCreate(&e1.e));
  TSTAT_BENCH_CUDA(cudaEventCreate(&e2.e));
  const auto* vectors = static_cast<const uint4*>(buffer.ptr);
  auto* out = static_cast<unsigned int*>(sink.ptr);
  char* half = static_cast<char*>(buffer.ptr) + bytes / 2;
  std::vector<double> read_s, copy_s;
  for (int i = -1; i < o.repeats; ++i) {  // i = -1: warm-up, not timed
    TSTAT_BENCH_CUDA(cudaEventRecord(e0.e, stream.s));
    XorReadKernel<<<blocks, kReadThreads, 0, stream.s>>>(vectors, bytes / sizeof(uint4), out);
    TSTAT_BENCH_CUDA(cudaPeekAtLastError());
    TSTAT_BENCH_CUDA(cudaEventRecord(e1.e, stream.s));
    TSTAT_BENCH_CUDA(
        cudaMemcpyAsync(half, buffer.ptr, bytes / 2, cudaMemcpyDeviceToDevice, stream.s));
    TSTAT_BENCH_CUDA(cudaEventRecord(e2.e, stream.s));
    TSTAT_BENCH_CUDA(cudaEventSynchronize(e2.e));
    float read_ms = 0.0f, copy_ms = 0.0f;
    TSTAT_BENCH_CUDA(cudaEventElapsedTime(&read_ms, e0.e, e1.e));
    TSTAT_BENCH_CUDA(cudaEventElapsedTime(&copy_ms, e1.e, e2.e));
    if (i < 0) continue;
    read_s.push_back(read_ms * 1e-3);
    copy_s.push_back(copy_ms * 1e-3);
  }
  const double b = static_cast<double>(bytes);
  r.read_gbps = b / Median(read_s) / 1e9;
  r.best_read_gbps = b / *std::min_element(read_s.begin(), read_s.end()) / 1e9;
  r.copy_gbps = b / Median(copy_s) / 1e9;  // bytes/2 read + bytes/2 written
  r.best_copy_gbps = b / *std::min_element(copy_s.begin(), copy_s.end()) / 1e9;
  return r;
}

}  // namespace tstat::bench
