// `tstat bench overhead`: the slowdown of LibTorch training under capture
// against the same training without capture, per capture configuration and
// save_interval (the measurement of Fig. 4 of the SageMaker Debugger paper).
//
// Configurations: stats_all (the stat set of every registered tensor: weights,
// biases, gradients, block inputs and outputs, labels and logits, loss),
// raw_weights (raw snapshots of weights and biases only, no stats), raw_all
// (raw snapshots of every tensor, no stats); `none` is the baseline.
// Measurement: for each save_interval and repeat, blocks of training steps
// alternate  none, C1, none, C2, none, C3, none  and each captured block is
// compared with the mean of the uncaptured blocks around it (this machine's
// speed drifts). A block has `steps` steps rounded up to a multiple of
// save_interval, so every block holds the same number of saves; such long
// blocks get fewer repeats (ceil(steps * repeats / block), at least 1). The
// reported slowdown is the median over repeats; step_s is the captured
// block's median time per step. A captured block's time includes
// Session::Close (the writer's backlog counts against capture, not against
// the next uncaptured block).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "tstat/status.h"

namespace tstat::bench {

struct OverheadBenchOptions {
  std::int64_t steps = 100;  // per block (rounded up to a multiple of save_interval)
  int repeats = 3;
  std::int64_t batch = 16;
  int threads = 0;  // torch's intra-op threads (at::set_num_threads); 0: torch's default
  int capture_threads = 0;  // tstat's pipeline.cpu_threads; 0: SessionCpuThreads()
  std::vector<std::string> configs = {"stats_all", "raw_weights", "raw_all"};
  std::vector<std::int64_t> intervals = {1, 10, 100, 200, 500};
  int compression_level = 1;      // the runs' HDF5 deflate level (the default config's)
  int raw_compression_level = 0;  // of their raw snapshots (the default config's)
  bool json = false;
  std::string plot_path;  // SVG; empty: none
};

struct OverheadCase {
  std::string config;  // none | stats_all | raw_weights | raw_all
  std::int64_t save_interval = 0;
  std::int64_t steps = 0;         // per block
  double step_s = 0.0;            // median seconds per step
  double slowdown = 1.0;          // median over repeats of captured / uncaptured
  double slowdown_min = 1.0, slowdown_max = 1.0;
  std::uint64_t records_dropped = 0;  // raw snapshots over the memory cap (counted, not lost silently)
  double capture_share = 0.0;     // the session's own capture_seconds / step_seconds
};

// The valid --configs names, for messages.
const std::vector<std::string>& OverheadConfigNames();

// Runs the benchmark; prints the BLAS/threads line and a table (or one JSON
// object per case with `json`), writes the SVG when plot_path is set.
// kInvalidArgument for unknown configs or bad numbers.
Status RunOverheadBench(const OverheadBenchOptions& options, std::ostream& out, std::ostream& err);

// The BLAS library torch runs with (from /proc/self/maps), torch's parallel
// info and tstat's capture thread count (`capture_threads`, 0: the default),
// one line.
std::string DescribeRuntime(int capture_threads);

// Fig. 4 style: slowdown (log y) against save_interval (log x), one curve
// per configuration. kIoError when the file cannot be written.
Status WriteOverheadSvg(const std::vector<OverheadCase>& cases, const std::string& path,
                        const std::string& subtitle);

}  // namespace tstat::bench
