// `tstat bench stats`: throughput of the full stat set against the machine's
// read bandwidth, measured in one run.
//
// For each case the same buffer is read R times by a plain read loop and
// reduced R times by Backend::Reduce (default StatsOptions: the stat set plus
// the exponent histogram), alternating read, stats, read, stats, ... so that
// noise from other work on the machine hits both alike. Reported: median and
// best over the R repeats of each, in GB/s of input bytes (1 GB = 1e9 bytes),
// and the ratio stats / read. A case of K tensors splits the same bytes into
// K equal tensors reduced in one Reduce call. With `delta`, each tensor also
// gets its delta against a previous copy (every second value differs in its
// lowest bits; atol = rtol = 0), as the weights' deltas of the rules are
// captured: the input bytes and the read loop then cover both copies.
//
// Thread safety: functions are reentrant; a run uses the whole machine.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "benchmarks/bench_data.h"
#include "tstat/engine.h"
#include "tstat/stats.h"
#include "tstat/status.h"

namespace tstat::bench {

// What the user asked for. Unset size/dtype/tensors/input select the default
// table of cases (DefaultCases()); any of them selects one case.
struct StatsBenchOptions {
  std::optional<double> size_mib;       // total input size (generated data)
  std::optional<DType> dtype;           // f32 f16 bf16 f64
  std::optional<std::int64_t> tensors;  // split into this many equal tensors
  std::string input_path;               // raw little-endian values of dtype
  int threads = 0;                      // CPU threads (0: OpenMP default)
  BackendKind backend = BackendKind::kCpu;
  int repeats = 0;     // 0: 5
  bool json = false;   // one JSON object per line per case
  bool delta = false;  // each tensor also gets its delta against a previous copy
};

// One benchmark case.
struct StatsBenchCase {
  std::string name;  // e.g. "f32_256MiB_x1"
  DType dtype = DType::kFloat32;
  std::int64_t elements = 0;  // total over all tensors
  std::int64_t tensors = 1;
  std::string input_path;  // empty: generated data
  bool delta = false;      // the delta against a previous copy, too
};

// The cases of a plain `tstat bench stats`: f32 256 MiB as 1 tensor; f32 40 MB
// as 10,000 tensors of 1,000 elements; f16 and bf16 256 MiB.
std::vector<StatsBenchCase> DefaultCases();

// Timings of one case: `repeats` interleaved (read loop, Reduce) pairs, plus
// the results of the last Reduce (for checking and for the JSON stats).
struct CaseTimings {
  std::vector<double> read_seconds;
  std::vector<double> stats_seconds;
  std::vector<ReductionResult> results;
  std::string backend_description;
  std::uint64_t changed_pairs = 0;  // --delta: pairs the previous copy changed
  int threads = 0;                  // CPU threads; 0 for CUDA
};

struct Summary {
  double median = 0.0;
  double best = 0.0;  // the minimum
};
Summary Summarize(std::vector<double> seconds);

struct StatsBenchResult {
  StatsBenchCase spec;
  BackendKind backend = BackendKind::kCpu;
  std::string backend_description;
  int threads = 0;
  int repeats = 0;
  std::uint64_t bytes = 0;
  Summary stats_seconds;
  Summary read_seconds;
  TensorStats totals;  // the K tensors' stats merged (a correctness witness)
  ExponentHistogram exponent_histogram;
  std::optional<double> relative_to_single;  // gbps / the 1-tensor f32 case's gbps

  double gbps() const { return static_cast<double>(bytes) / stats_seconds.median / 1e9; }
  double best_gbps() const { return static_cast<double>(bytes) / stats_seconds.best / 1e9; }
  double read_gbps() const { return static_cast<double>(bytes) / read_seconds.median / 1e9; }
  double best_read_gbps() const { return static_cast<double>(bytes) / read_seconds.best / 1e9; }
  double ratio() const { return gbps() / read_gbps(); }
};

// Element counts of K near-equal tensors (the first n % K get one more).
std::vector<std::int64_t> SplitElements(std::int64_t n, std::int64_t k);

// `data` with the lowest byte of every even-indexed value flipped: the
// previous copy of --delta. `changed` receives how many values differ.
Result<HostBuffer> PreviousCopy(const HostBuffer& data, std::uint64_t* changed);

// CPU: interleaved timing of XorReduce and a CPU backend's Reduce. With
// `previous` (same size as data), each request also asks for its delta and
// the read loop reads both buffers.
Result<CaseTimings> TimeOnCpu(const HostBuffer& data, const HostBuffer* previous,
                              const std::vector<std::int64_t>& split, int threads, int repeats);

// CUDA: copies `data` to device 0 once, then times a device read kernel and
// the CUDA backend's Reduce on one stream with events. kNotSupported in a
// build without CUDA; kUnavailable without a device.
Result<CaseTimings> TimeOnCuda(const HostBuffer& data, const HostBuffer* previous,
                               const std::vector<std::int64_t>& split, int repeats);

// Prepares the data of `spec`, times it and checks the results (every request
// OK, counts adding up). Errors name the case.
Result<StatsBenchResult> RunCase(const StatsBenchCase& spec, BackendKind backend, int threads,
                                 int repeats);

// Output formats (stats_bench_format.cc).
std::string FormatTableHeader(const StatsBenchResult& first);
std::string FormatTableRow(const StatsBenchResult& r);
std::string FormatJsonLine(const StatsBenchResult& r);

// The whole subcommand: resolves the cases, runs them and writes the table or
// JSON lines to `out` (notes such as "no CUDA device" go to `err` with --json,
// to `out` otherwise). Returns the first error.
Status RunStatsBench(const StatsBenchOptions& options, std::ostream& out, std::ostream& err);

}  // namespace tstat::bench
