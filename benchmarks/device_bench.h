// `tstat bench device`: what a GPU is and how fast it reads, the reference of
// every other GPU figure (docs/gpu.md).
//
// The device's properties (name, SMs, memory, compute capability, clocks, bus
// width, driver and runtime versions) and two measured bandwidths on one
// buffer of `mib` MiB, alternating R times on one stream, timed with events:
//   read_gbps: XorReadKernel (benchmarks/cuda_bench_common.cuh) reads the
//     buffer once, bytes / time;
//   copy_gbps: cudaMemcpyAsync device-to-device of half the buffer onto the
//     other half, bytes read + bytes written / time.
// Medians and bests over the R pairs; theoretical_gbps = 2 x memory clock x
// bus width (double data rate), when the driver reports both.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "tstat/status.h"

namespace tstat::bench {

struct DeviceBenchOptions {
  int device = 0;
  double mib = 1024.0;
  int repeats = 10;
  bool json = false;
};

struct DeviceReport {
  int device = 0;
  std::string name;
  int compute_major = 0, compute_minor = 0;
  int sm_count = 0;
  std::uint64_t memory_bytes = 0;
  std::uint64_t l2_bytes = 0;
  int clock_khz = 0;         // peak SM clock; 0 when not reported
  int memory_clock_khz = 0;  // peak memory clock; 0 when not reported
  int bus_width_bits = 0;
  int driver_version = 0;   // e.g. 13000
  int runtime_version = 0;  // the CUDA runtime linked into tstat
  double theoretical_gbps = 0.0;
  std::uint64_t bytes = 0;  // the measured buffer
  int repeats = 0;
  double read_gbps = 0.0, best_read_gbps = 0.0;
  double copy_gbps = 0.0, best_copy_gbps = 0.0;
};

// kNotSupported in a build without CUDA; kUnavailable without a device.
Result<DeviceReport> MeasureDevice(const DeviceBenchOptions& options);

std::string FormatDeviceJson(const DeviceReport& r);
std::string FormatDeviceText(const DeviceReport& r);

// The whole subcommand: one JSON object or a few lines of text to `out`.
Status RunDeviceBench(const DeviceBenchOptions& options, std::ostream& out);

}  // namespace tstat::bench
