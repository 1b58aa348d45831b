// `tstat bench capture` output: one JSON object per case, or a table.
#include <cstdio>
#include <string>

#include "benchmarks/capture_bench.h"

namespace tstat::bench {
namespace {

// A JSON number, or null when the part was not measured.
std::string Number(double v, bool measured) {
  if (!measured) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

std::string FormatCaptureJsonLine(const CaptureBenchResult& r) {
  const bool raw = r.raw_bytes > 0;
  char buf[1280];
  std::snprintf(buf, sizeof buf,
                "{\"case\": \"%s\", \"tensors\": %lld, \"elements\": %lld, \"dtype\": \"f32\", "
                "\"threads\": %d, \"compression_level\": %d, \"raw_compression_level\": %d, "
                "\"repeats\": %d, \"block_steps\": %lld, "
                "\"engine_s\": %s, \"end_step_s\": %s, \"ratio\": %s, \"all_cores_threads\": %d, "
                "\"engine_all_cores_s\": %s, \"ratio_all_cores\": %s, \"sustained_step_s\": %s, "
                "\"sustained_ratio\": %s, \"stats_waits\": %llu, "
                "\"records_per_s\": %s, \"writer_step_s\": %s, \"raw_bytes\": %llu, "
                "\"raw_write_gbps\": %s, \"plain_write_gbps\": %s, \"raw_vs_plain\": %s}",
                r.spec.name.c_str(), static_cast<long long>(r.spec.tensors),
                static_cast<long long>(r.spec.elements), r.threads, r.compression_level,
                r.raw_compression_level, r.repeats, static_cast<long long>(r.block_steps),
                Number(r.engine_s, true).c_str(), Number(r.end_step_s, true).c_str(),
                Number(r.ratio, true).c_str(), r.all_cores_threads,
                Number(r.engine_all_cores_s, true).c_str(), Number(r.ratio_all_cores, true).c_str(),
                Number(r.sustained_step_s, true).c_str(), Number(r.sustained_ratio, true).c_str(),
                static_cast<unsigned long long>(r.stats_waits),
                Number(r.records_per_s, true).c_str(), Number(r.writer_step_s, true).c_str(),
                static_cast<unsigned long long>(r.raw_bytes), Number(r.raw_write_gbps, raw).c_str(),
                Number(r.plain_write_gbps, raw).c_str(), Number(r.raw_fraction(), raw).c_str());
  return buf;
}

std::string FormatCaptureTableHeader() {
  return "case                    thr  lvl  raw  engine ms  end_step ms  ratio  all-cores  "
         "sustained  writer rec/s  writer ms/step  raw GB/s  plain GB/s  raw/plain\n";
}

std::string FormatCaptureTableRow(const CaptureBenchResult& r) {
  char buf[512];
  int n = std::snprintf(
      buf, sizeof buf, "%-22s %4d %4d %4d %10.3f %12.3f %6.3f %10.3f %10.3f %14.0f %15.3f",
      r.spec.name.c_str(), r.threads, r.compression_level, r.raw_compression_level,
      r.engine_s * 1e3, r.end_step_s * 1e3, r.ratio, r.ratio_all_cores, r.sustained_ratio,
      r.records_per_s, r.writer_step_s * 1e3);
  if (r.raw_bytes > 0) {
    std::snprintf(buf + n, sizeof buf - static_cast<std::size_t>(n), " %9.3f %11.3f %10.2f\n",
                  r.raw_write_gbps, r.plain_write_gbps, r.raw_fraction());
  } else {
    std::snprintf(buf + n, sizeof buf - static_cast<std::size_t>(n), "  (raw not measured)\n");
  }
  return buf;
}

}  // namespace tstat::bench
