// `tstat bench overhead`: flag parsing only; the measurement is
// tstat::bench::RunOverheadBench (benchmarks/overhead_bench.h). Compiled only
// when LibTorch is found.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "benchmarks/overhead_bench.h"
#include "tools/cli/bench_overhead.h"
#include "tools/cli/command.h"

namespace tstat::cli {

CLI::App* AddBenchOverheadCommand(CLI::App* bench, std::function<int()>* run) {
  auto o = std::make_shared<bench::OverheadBenchOptions>();
  CLI::App* app = bench->add_subcommand(
      "overhead",
      "Slowdown of LibTorch CNN training (ResNet-style blocks, synthetic images, CPU) under "
      "capture against no capture, per configuration and save_interval (the paper's Fig. 4)");
  app->add_option("--steps", o->steps,
                  "Training steps per measured block (rounded up to a multiple of save_interval)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1000000}))
      ->default_str("100");
  app->add_option("--repeats", o->repeats, "Interleaved repeats per case (the median is reported)")
      ->check(CLI::Range(1, 1000))
      ->default_str("3");
  app->add_option("--configs", o->configs,
                  "Capture configurations: " + JoinNames(bench::OverheadConfigNames()) +
                      " (none, the baseline, is always measured)")
      ->delimiter(',')
      ->default_str("stats_all,raw_weights,raw_all");
  app->add_option("--intervals", o->intervals, "save_interval values")
      ->delimiter(',')
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1000000}))
      ->default_str("1,10,100,200,500");
  app->add_option("--batch", o->batch, "Images per step")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{4096}))
      ->default_str("16");
  app->add_option("--threads", o->threads, "torch intra-op threads (0: torch's default)")
      ->check(CLI::Range(0, 1024))
      ->default_str("0");
  app->add_option("--capture-threads", o->capture_threads,
                  "tstat's CPU capture threads, pipeline.cpu_threads (0: SessionCpuThreads)")
      ->check(CLI::Range(0, 1024))
      ->default_str("0");
  app->add_option("--compression-level", o->compression_level,
                  "HDF5 deflate level of the runs' tables")
      ->check(CLI::Range(0, 9))
      ->default_str("4");
  app->add_option("--raw-compression-level", o->raw_compression_level,
                  "HDF5 deflate level of the runs' raw snapshots")
      ->check(CLI::Range(0, 9))
      ->default_str("0");
  app->add_flag("--json", o->json, "One JSON object per line per case");
  app->add_option("--plot", o->plot_path, "Write the slowdown curves as an SVG image to FILE");
  *run = [o]() { return ReportError(bench::RunOverheadBench(*o, std::cout, std::cerr)); };
  return app;
}

}  // namespace tstat::cli
