// `tstat bench device`: output and the subcommand (the measurement is
// MeasureDevice, in device_bench_cuda.cu or its stub).
#include "benchmarks/device_bench.h"

#include <cstdio>
#include <string>

#include "benchmarks/bench_json.h"

namespace tstat::bench {

std::string FormatDeviceJson(const DeviceReport& r) {
  JsonObject o;
  o.Int("device", r.device).Str("name", r.name);
  o.Str("compute_capability",
        std::to_string(r.compute_major) + "." + std::to_string(r.compute_minor));
  o.Int("sm_count", r.sm_count).Add("memory_bytes", r.memory_bytes).Add("l2_bytes", r.l2_bytes);
  o.Int("clock_khz", r.clock_khz).Int("memory_clock_khz", r.memory_clock_khz);
  o.Int("bus_width_bits", r.bus_width_bits);
  o.Int("driver_version", r.driver_version).Int("runtime_version", r.runtime_version);
  o.Num("theoretical_gbps", r.theoretical_gbps);
  o.Add("bytes", r.bytes).Int("repeats", r.repeats);
  o.Num("read_gbps", r.read_gbps).Num("best_read_gbps", r.best_read_gbps);
  o.Num("copy_gbps", r.copy_gbps).Num("best_copy_gbps", r.best_copy_gbps);
  return o.Close();
}

std::string FormatDeviceText(const DeviceReport& r) {
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "device %d: %s (compute %d.%d), %d SMs, %.1f GiB, L2 %.1f MiB\n"
                "clocks: SM %.0f MHz, memory %.0f MHz, bus %d bits; driver %d, runtime %d\n"
                "bandwidth over %.0f MiB, %d repeats (median / best, GB/s):\n"
                "  read kernel     %8.1f / %8.1f\n"
                "  copy (r+w)      %8.1f / %8.1f\n"
                "  theoretical     %8.1f\n",
                r.device, r.name.c_str(), r.compute_major, r.compute_minor, r.sm_count,
                static_cast<double>(r.memory_bytes) / (1 << 30),
                static_cast<double>(r.l2_bytes) / (1 << 20), r.clock_khz / 1e3,
                r.memory_clock_khz / 1e3, r.bus_width_bits, r.driver_version, r.runtime_version,
                static_cast<double>(r.bytes) / (1 << 20), r.repeats, r.read_gbps, r.best_read_gbps,
                r.copy_gbps, r.best_copy_gbps, r.theoretical_gbps);
  return buf;
}

Status RunDeviceBench(const DeviceBenchOptions& options, std::ostream& out) {
  TSTAT_ASSIGN_OR_RETURN(DeviceReport r, MeasureDevice(options));
  out << (options.json ? FormatDeviceJson(r) + "\n" : FormatDeviceText(r));
  return Status::OK();
}

}  // namespace tstat::bench
