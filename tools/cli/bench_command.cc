// `tstat bench stats`, `rules`, `read`, `capture`, `device` and `caches`:
// flag parsing only; the measurements are tstat::bench::RunStatsBench
// (benchmarks/stats_bench.h), tstat::bench::RunRulesBench
// (benchmarks/rules_bench.h), tstat::bench::RunCaptureBench
// (benchmarks/capture_bench.h) and tstat::bench::RunCacheSharingBench
// (benchmarks/cache_sharing_bench.h).
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>

#include "benchmarks/cache_sharing_bench.h"
#include "benchmarks/capture_bench.h"
#include "benchmarks/capture_cuda_bench.h"
#include "benchmarks/device_bench.h"
#include "benchmarks/read_bench.h"
#include "benchmarks/rules_bench.h"
#include "benchmarks/stats_bench.h"
#include "tools/cli/bench_detection.h"
#include "tools/cli/bench_overhead.h"
#include "tools/cli/command.h"

namespace tstat::cli {
namespace {

struct StatsFlags {
  double size_mib = 256.0;
  std::string dtype = "f32";
  std::int64_t tensors = 1;
  int threads = 0;
  std::string backend = "cpu";
  int repeats = 5;
  std::string input;
  bool json = false;
  bool delta = false;
  // Set by CLI11; a flag given on the command line selects the single case.
  CLI::Option* size_opt = nullptr;
  CLI::Option* dtype_opt = nullptr;
  CLI::Option* tensors_opt = nullptr;
  CLI::Option* repeats_opt = nullptr;
};

// CLI::PositiveNumber's message prints DBL_MAX in full; this one is short.
const CLI::Validator kPositive(
    [](std::string& value) -> std::string {
      double v = 0.0;
      if (CLI::detail::lexical_cast(value, v) && v > 0.0) return "";
      return "must be a positive number, not '" + value + "'";
    },
    "POSITIVE");

int RunStats(const StatsFlags& f) {
  bench::StatsBenchOptions o;
  if (f.size_opt->count() > 0) o.size_mib = f.size_mib;
  if (f.dtype_opt->count() > 0) {
    DType t;
    if (!ParseDType(f.dtype, &t)) return ReportError(Status::InvalidArgument("bad --dtype"));
    o.dtype = t;
  }
  if (f.tensors_opt->count() > 0) o.tensors = f.tensors;
  if (f.repeats_opt->count() > 0) o.repeats = f.repeats;
  o.input_path = f.input;
  o.threads = f.threads;
  o.backend = f.backend == "cuda" ? BackendKind::kCuda : BackendKind::kCpu;
  o.json = f.json;
  o.delta = f.delta;
  return ReportError(bench::RunStatsBench(o, std::cout, std::cerr));
}

struct CaptureFlags {
  std::int64_t tensors = 1000;
  std::int64_t elements = 1000;
  int compression_level = 0;
  int raw_compression_level = 0;
  bench::CaptureBenchOptions options;
  std::string device = "cpu";
  bench::CudaCaptureBenchOptions cuda;
  CLI::Option* tensors_opt = nullptr;
  CLI::Option* elements_opt = nullptr;
  CLI::Option* level_opt = nullptr;
  CLI::Option* raw_level_opt = nullptr;
};

CLI::App* AddCaptureCommand(CLI::App* bench, CaptureFlags* f) {
  CLI::App* capture = bench->add_subcommand(
      "capture",
      "Capture pipeline cost: EndStep against the stat engine alone (ratio), writer "
      "records/s, raw snapshot writes against plain write()+fsync. Without "
      "--tensors/--elements: a table of standard cases");
  f->tensors_opt = capture->add_option("--tensors", f->tensors, "Registered tensors (K)")
                       ->check(CLI::Range(std::int64_t{1}, std::int64_t{10000000}))
                       ->default_str("1000");
  f->elements_opt = capture->add_option("--elements", f->elements, "f32 elements per tensor (N)")
                        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 32))
                        ->default_str("1000");
  capture
      ->add_option("--threads", f->options.threads,
                   "The session's CPU threads, pipeline.cpu_threads (0: one fewer than the cores)")
      ->check(CLI::Range(0, 4096))
      ->default_str("0");
  capture->add_option("--repeats", f->options.repeats, "Timed repeats per measurement (medians)")
      ->check(CLI::Range(1, 1000))
      ->default_str("5");
  f->level_opt = capture
                     ->add_option("--compression-level", f->compression_level,
                                  "Deflate level of the runs' tables (default: the pipeline's)")
                     ->check(CLI::Range(0, 9));
  f->raw_level_opt =
      capture
          ->add_option("--raw-compression-level", f->raw_compression_level,
                       "Deflate level of the runs' raw snapshots (default: the pipeline's, 0)")
          ->check(CLI::Range(0, 9));
  capture
      ->add_option("--raw-mib", f->options.raw_mib,
                   "Raw snapshot bytes per repeat, in MiB (0: skip the raw measurement)")
      ->check(CLI::Range(0.0, 65536.0))
      ->default_str("128");
  capture->add_option("--dir", f->options.dir, "Where runs and the plain file are written")
      ->check(CLI::ExistingDirectory)
      ->default_str("$TMPDIR or /tmp");
  capture->add_flag("--json", f->options.json, "One JSON object per line per case");
  capture
      ->add_option("--device", f->device,
                   "Where the tensors live: cpu (the table above) or cuda (EndStep's host time "
                   "for CUDA tensors, and whether it waits for the device)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->default_str("cpu");
  capture->add_option("--cuda-device", f->cuda.device, "CUDA ordinal (--device cuda)")
      ->check(CLI::Range(0, 1023))
      ->default_str("0");
  capture->add_option("--steps", f->cuda.steps, "Timed steps per measurement (--device cuda)")
      ->check(CLI::Range(1, 100000))
      ->default_str("200");
  capture
      ->add_option("--busy-ms", f->cuda.busy_ms,
                   "The kernel enqueued before each EndStep of the busy measurement, in ms "
                   "(--device cuda)")
      ->check(CLI::Range(0.1, 10000.0))
      ->default_str("20");
  capture->add_flag("--separate-allocations", f->cuda.separate_allocations,
                    "Each CUDA tensor its own cudaMalloc instead of a slice of one buffer "
                    "(--device cuda)");
  capture->add_flag("--in-process-rules", f->cuda.in_process_rules,
                    "Also run the default rules in the session, with what they need captured "
                    "(the weights' deltas; --device cuda)");
  return capture;
}

int RunCapture(const CaptureFlags& f) {
  if (f.device == "cuda") {
    bench::CudaCaptureBenchOptions o = f.cuda;
    if (f.tensors_opt->count() > 0) o.tensors = f.tensors;
    if (f.elements_opt->count() > 0) o.elements = f.elements;
    o.dir = f.options.dir;
    o.json = f.options.json;
    return ReportError(bench::RunCudaCaptureBench(o, std::cout));
  }
  bench::CaptureBenchOptions o = f.options;
  if (f.tensors_opt->count() > 0) o.tensors = f.tensors;
  if (f.elements_opt->count() > 0) o.elements = f.elements;
  if (f.level_opt->count() > 0) o.compression_level = f.compression_level;
  if (f.raw_level_opt->count() > 0) o.raw_compression_level = f.raw_compression_level;
  return ReportError(bench::RunCaptureBench(o, std::cout, std::cerr));
}

}  // namespace

Command AddBenchCommand(CLI::App& root) {
  CLI::App* bench = root.add_subcommand("bench", "Measure tstat's throughput on this machine");
  bench->require_subcommand(1);

  auto flags = std::make_shared<StatsFlags>();
  CLI::App* stats = bench->add_subcommand(
      "stats",
      "Stat-set throughput (GB/s) against the machine's read bandwidth. Without "
      "--size-mib/--dtype/--tensors/--input: a table of standard cases");
  flags->size_opt = stats->add_option("--size-mib", flags->size_mib, "Total input size in MiB")
                        ->check(kPositive)
                        ->default_str("256");
  flags->dtype_opt = stats->add_option("--dtype", flags->dtype, "Element type")
                         ->check(CLI::IsMember({"f32", "f16", "bf16", "f64"}))
                         ->default_str("f32");
  flags->tensors_opt =
      stats
          ->add_option("--tensors", flags->tensors,
                       "Split the bytes into this many equal tensors, reduced in one call")
          ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 32))
          ->default_str("1");
  stats->add_option("--threads", flags->threads, "CPU threads (0: OpenMP's default)")
      ->check(CLI::Range(0, 4096))
      ->default_str("0");
  stats->add_option("--backend", flags->backend, "Backend to measure")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->default_str("cpu");
  flags->repeats_opt =
      stats->add_option("--repeats", flags->repeats, "Timed repeats per case (median and best)")
          ->check(CLI::Range(1, 1000))
          ->default_str("5");
  stats
      ->add_option("--input", flags->input,
                   "Read raw little-endian values of --dtype from this file instead of "
                   "generating data")
      ->check(CLI::ExistingFile)
      ->excludes(flags->size_opt);
  stats->add_flag("--json", flags->json, "One JSON object per line per case");
  stats->add_flag("--delta", flags->delta,
                  "Each tensor also gets its delta against a previous copy (the weights' deltas "
                  "of weight_update_ratio); the bytes and the read loop cover both copies");

  auto rules_flags = std::make_shared<bench::RulesBenchOptions>();
  CLI::App* rules = bench->add_subcommand(
      "rules",
      "Rule engine throughput (records/s/core) with every built-in rule over a synthetic "
      "run, and the latency of following a live run (flush to logged finding)");
  rules->add_option("--tensors", rules_flags->tensors, "Tensors per step")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{10000000}))
      ->default_str("10000");
  rules->add_option("--steps", rules_flags->steps, "Steps fed to the engine")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{100000000}))
      ->default_str("1000");
  rules
      ->add_option("--follow-steps", rules_flags->follow_steps,
                   "Steps written to a live run for the follow case (0: skip it)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{100000}))
      ->default_str("20");
  rules->add_flag("--json", rules_flags->json, "One JSON object per line per case");

  auto read_flags = std::make_shared<bench::ReadBenchOptions>();
  CLI::App* read = bench->add_subcommand(
      "read",
      "What reading a run back costs: open, inspect, one series, one step of every tensor and "
      "check, each in a process of its own (wall, CPU, peak memory), on a synthetic run");
  read->add_option("--tensors", read_flags->tensors, "Tensors per step of the synthetic run")
      ->check(CLI::Range(std::int64_t{2}, std::int64_t{1000000}))
      ->default_str("1000");
  read->add_option("--steps", read_flags->steps, "Steps of the synthetic run")
      ->check(CLI::Range(std::int64_t{2}, std::int64_t{100000000}))
      ->default_str("10000");
  read->add_option("--steps-per-segment", read_flags->steps_per_segment,
                   "Steps between the writer's flushes (one segment file each)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{100000000}))
      ->default_str("100");
  read->add_option("--compression-level", read_flags->compression_level,
                   "The writer's deflate level of its tables (1: tstat's own encoder, a "
                   "session's default; 2-9: libdeflate; 0: none)")
      ->check(CLI::Range(0, 9))
      ->default_str("1");
  read->add_option("--dir", read_flags->dir, "Where the run is written (default: $TMPDIR or /tmp)")
      ->check(CLI::ExistingDirectory);
  read->add_option("--run", read_flags->run_dir, "Measure this run instead of writing one")
      ->check(CLI::ExistingDirectory);
  read->add_flag("--keep", read_flags->keep, "Keep the written run (its path is printed)");
  read->add_option("--case", read_flags->cases, "Run this case only (repeatable; default: all)")
      ->check(CLI::IsMember({"open", "inspect", "series", "step", "check"}));
  read->add_flag("--json", read_flags->json, "One JSON object per line per case");

  auto capture_flags = std::make_shared<CaptureFlags>();
  CLI::App* capture = AddCaptureCommand(bench, capture_flags.get());

  auto device_flags = std::make_shared<bench::DeviceBenchOptions>();
  CLI::App* device = bench->add_subcommand(
      "device",
      "The GPU: name, SMs, memory, clocks, driver, and its measured read and copy bandwidth "
      "(the reference of every GPU figure)");
  device->add_option("--cuda-device", device_flags->device, "CUDA ordinal")
      ->check(CLI::Range(0, 1023))
      ->default_str("0");
  device->add_option("--mib", device_flags->mib, "Buffer read and copied, in MiB")
      ->check(kPositive)
      ->default_str("1024");
  device->add_option("--repeats", device_flags->repeats, "Timed repeats (median and best)")
      ->check(CLI::Range(1, 1000))
      ->default_str("10");
  device->add_flag("--json", device_flags->json, "One JSON object");

  auto caches_flags = std::make_shared<bench::CacheSharingOptions>();
  CLI::App* caches = bench->add_subcommand(
      "caches",
      "What another core's reads of a thread's fresh data cost that thread, with and without "
      "flushing what was read (pipeline.early_capture_evict)");
  caches->add_option("--rounds", caches_flags->rounds, "Writer rounds per mode")
      ->check(CLI::Range(1, 1000000))
      ->default_str("200");
  caches->add_option("--chunks", caches_flags->chunks, "Buffers the writer writes in turn")
      ->check(CLI::Range(2, 100000))
      ->default_str("34");
  caches->add_option("--chunk-kib", caches_flags->chunk_kib, "Each buffer's size, KiB")
      ->check(CLI::Range(4.0, 1048576.0))
      ->default_str("400");
  caches->add_flag("--json", caches_flags->json, "One JSON object per line per mode");

  std::function<int()> run_overhead;
  CLI::App* overhead = AddBenchOverheadCommand(bench, &run_overhead);
  std::function<int()> run_detection;
  CLI::App* detection = AddBenchDetectionCommand(bench, &run_detection);

  Command c;
  c.app = bench;
  c.run = [stats, flags, rules, rules_flags, read, read_flags, capture, capture_flags, device,
           device_flags, caches, caches_flags, overhead, run_overhead, detection, run_detection]() {
    if (stats->parsed()) return RunStats(*flags);
    if (rules->parsed())
      return ReportError(bench::RunRulesBench(*rules_flags, std::cout, std::cerr));
    if (read->parsed()) return ReportError(bench::RunReadBench(*read_flags, std::cout, std::cerr));
    if (capture->parsed()) return RunCapture(*capture_flags);
    if (device->parsed()) return ReportError(bench::RunDeviceBench(*device_flags, std::cout));
    if (caches->parsed()) return ReportError(bench::RunCacheSharingBench(*caches_flags, std::cout));
    if (overhead->parsed()) return run_overhead();
    if (detection->parsed()) return run_detection();
    return kExitUsage;  // unreachable: require_subcommand(1)
  };
  return c;
}

}  // namespace tstat::cli
