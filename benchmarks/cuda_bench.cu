// CUDA timing for `tstat bench stats --backend cuda`: the data is copied to
// device 0 once; then a device read kernel (the bandwidth reference) and the
// CUDA backend's Reduce alternate on one stream, timed with CUDA events.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "benchmarks/cuda_bench_common.cuh"
#include "benchmarks/stats_bench.h"

namespace tstat::bench {

Result<CaseTimings> TimeOnCuda(const HostBuffer& data, const HostBuffer* previous,
                               const std::vector<std::int64_t>& split, int repeats) {
  if (CudaDeviceCount() == 0) return Status::Unavailable("no CUDA device");
  TSTAT_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, CreateCudaBackend(0));
  TSTAT_BENCH_CUDA(cudaSetDevice(0));

  DeviceMemory d_data, d_sink;
  TSTAT_BENCH_CUDA(cudaMalloc(&d_data.ptr, data.bytes() == 0 ? 16 : data.bytes()));
  TSTAT_BENCH_CUDA(cudaMalloc(&d_sink.ptr, sizeof(unsigned int)));
  TSTAT_BENCH_CUDA(cudaMemcpy(d_data.ptr, data.data(), data.bytes(), cudaMemcpyHostToDevice));
  TSTAT_BENCH_CUDA(cudaMemset(d_sink.ptr, 0, sizeof(unsigned int)));
  DeviceMemory d_previous;
  if (previous != nullptr) {
    TSTAT_BENCH_CUDA(cudaMalloc(&d_previous.ptr, data.bytes() == 0 ? 16 : data.bytes()));
    TSTAT_BENCH_CUDA(
        cudaMemcpy(d_previous.ptr, previous->data(), data.bytes(), cudaMemcpyHostToDevice));
  }

  std::vector<ReductionRequest> requests(split.size());
  const auto* base = static_cast<const unsigned char*>(d_data.ptr);
  const std::size_t elem = DTypeSize(data.dtype());
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < split.size(); ++i) {
    TensorView& v = requests[i].tensor;
    v.data = base + offset * elem;
    v.dtype = data.dtype();
    v.numel = split[i];
    v.space = MemorySpace::kCuda;
    v.device = 0;
    if (previous != nullptr) {
      requests[i].options.delta.previous =
          static_cast<const unsigned char*>(d_previous.ptr) + offset * elem;
      requests[i].options.delta.atol = 0.0;
      requests[i].options.delta.rtol = 0.0;
    }
    offset += split[i];
  }

  int blocks = 0;
  TSTAT_RETURN_IF_ERROR(XorReadBlocks(0, &blocks));
  const std::size_t vectors = data.bytes() / sizeof(uint4);
  const auto* d_vectors = static_cast<const uint4*>(d_data.ptr);
  auto* d_out = static_cast<unsigned int*>(d_sink.ptr);

  Stream stream;
  Event e0, e1, e2;
  TSTAT_BENCH_CUDA(cudaStreamCreateWithFlags(&stream.s, cudaStreamNonBlocking));
  TSTAT_BENCH_CUDA(cudaEventCreate(&e0.e));
  TSTAT_BENCH_CUDA(cudaEventCreate(&e1.e));
  TSTAT_BENCH_CUDA(cudaEventCreate(&e2.e));

  CaseTimings t;
  t.backend_description = backend->description();
  t.threads = 0;
  const auto* d_previous_vectors = static_cast<const uint4*>(d_previous.ptr);
  // The read kernel reads what Reduce reads: the data, and with --delta the previous copy.
  const auto read_all = [&]() -> Status {
    XorReadKernel<<<blocks, kReadThreads, 0, stream.s>>>(d_vectors, vectors, d_out);
    TSTAT_BENCH_CUDA(cudaPeekAtLastError());
    if (previous != nullptr) {
      XorReadKernel<<<blocks, kReadThreads, 0, stream.s>>>(d_previous_vectors, vectors, d_out);
      TSTAT_BENCH_CUDA(cudaPeekAtLastError());
    }
    return Status::OK();
  };
  // Warm-up: module load, first-touch of the backend's workspace.
  TSTAT_RETURN_IF_ERROR(read_all());
  TSTAT_RETURN_IF_ERROR(backend->Reduce(requests, &t.results, stream.s));
  for (int r = 0; r < repeats; ++r) {
    TSTAT_BENCH_CUDA(cudaEventRecord(e0.e, stream.s));
    TSTAT_RETURN_IF_ERROR(read_all());
    TSTAT_BENCH_CUDA(cudaEventRecord(e1.e, stream.s));
    // Reduce enqueues on the stream and waits for its results, so e2 lands
    // after the whole reduction including the copy of results to the host.
    TSTAT_RETURN_IF_ERROR(backend->Reduce(requests, &t.results, stream.s));
    TSTAT_BENCH_CUDA(cudaEventRecord(e2.e, stream.s));
    TSTAT_BENCH_CUDA(cudaEventSynchronize(e2.e));
    float read_ms = 0.0f, stats_ms = 0.0f;
    TSTAT_BENCH_CUDA(cudaEventElapsedTime(&read_ms, e0.e, e1.e));
    TSTAT_BENCH_CUDA(cudaEventElapsedTime(&stats_ms, e1.e, e2.e));
    t.read_seconds.push_back(read_ms * 1e-3);
    t.stats_seconds.push_back(stats_ms * 1e-3);
  }
  return t;
}

}  // namespace tstat::bench
