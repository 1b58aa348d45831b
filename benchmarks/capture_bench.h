// `tstat bench capture`: what the capture pipeline adds to the stat engine,
// measured in one run on the same tensors (K host tensors of N f32 values,
// "layer<i>.weight", collection `weights`).
//
// ratio: Session::EndStep on the CPU backend (stats of every tensor saved at
// every step, default StatsOptions: the stat set plus the exponent
// histogram; the session writes an HDF5 run as usual) against
// Backend::Reduce alone on the same K views with the same StatsOptions and
// thread count (the session's, SessionCpuThreads: one fewer than the
// machine's cores for tensors under 8,192 values, unless --threads is
// given). Blocks of B EndSteps and B
// Reduce calls (about 1 s each, so
// an EndStep block spans a writer flush) alternate; each block starts with
// the process quiet (the writer thread idle), so neither side is charged
// with the other's leftover work. end_step_s and engine_s are
// medians over the blocks of the mean time per call; ratio = end_step_s /
// engine_s. The writer's own work runs on its thread during the EndStep
// blocks (on a 2-core machine it competes with the reduction, and that is
// counted) but its tail after the block is not: that cost is writer_step_s.
//
// ratio_all_cores: end_step_s against Reduce with DefaultCpuThreads() threads
// (every core; engine_all_cores_s, measured in blocks alternating with the
// others), i.e. against the fastest the engine alone gets on this machine
// when the session leaves a core to its writer. Equal to ratio when the
// session already uses that many threads.
//
// sustained_ratio: the same session then ends 3B steps back to back and
// closes, all timed: sustained_step_s = that time / 3B, against engine_s.
// Nothing the steps cause is left outside the time (a writer that defers its
// work to the flush is charged for it), so this is the cost a long training
// run sees.
//
// records_per_s: the pipeline's writer thread alone (host::Pipeline with the
// HDF5 run writer, the session's defaults): P copies of one captured step
// (the K records the engine produced) are queued as fast as the queue
// accepts them; records written (counters after Close) / the time from the
// first Push to Close returning (the last flush and fsync included).
// writer_step_s = K / records_per_s. (The copies are identical, so the
// segments compress unrealistically well: their size is not reported.)
//
// raw_write_gbps: a session that saves only raw snapshots of the K tensors
// at every step, for S steps of about raw_mib MiB in total: bytes / the
// time from the first EndStep to Close returning (every segment sealed,
// fsynced and renamed). plain_write_gbps: write() of the same bytes (the
// same buffer, S times) to one new file in the same directory, then fsync.
// The two alternate, medians over the repeats. The raw memory cap is set
// above the volume so no snapshot is dropped (checked).
//
// Thread safety: a run uses the whole machine; files go under `dir`.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "tstat/status.h"

namespace tstat::bench {

struct CaptureBenchOptions {
  // Both unset: the default cases (DefaultCaptureCases). Either set: one
  // case (the other defaults to 1,000).
  std::optional<std::int64_t> tensors;
  std::optional<std::int64_t> elements;  // per tensor
  int threads = 0;                       // CPU threads (0: SessionCpuThreads)
  int repeats = 0;                       // 0: 5
  // Deflate levels of the runs written (tables; raw snapshots);
  // unset: PipelineConfig's defaults.
  std::optional<int> compression_level;
  std::optional<int> raw_compression_level;
  double raw_mib = 128.0;  // raw snapshot volume per repeat (0: skip the raw part)
  std::string dir;         // "" : $TMPDIR, else /tmp
  bool json = false;       // one JSON object per line per case
};

struct CaptureBenchCase {
  std::string name;  // "capture_1000x1000"
  std::int64_t tensors = 0;
  std::int64_t elements = 0;  // per tensor
};

// 1,000 x 1,000 (the target case), 100 x 100,000 and 4 x 4,194,304 f32.
std::vector<CaptureBenchCase> DefaultCaptureCases();

struct CaptureBenchResult {
  CaptureBenchCase spec;
  int threads = 0;
  int repeats = 0;
  int compression_level = 0;
  int raw_compression_level = 0;
  std::int64_t block_steps = 0;  // B
  double engine_s = 0.0;         // per Reduce call
  int all_cores_threads = 0;     // DefaultCpuThreads()
  double engine_all_cores_s = 0.0;  // per Reduce call with all_cores_threads
  double ratio_all_cores = 0.0;     // end_step_s / engine_all_cores_s
  double end_step_s = 0.0;       // per EndStep call
  double ratio = 0.0;
  double sustained_step_s = 0.0;  // per EndStep, through Close
  double sustained_ratio = 0.0;
  std::uint64_t stats_waits = 0;  // EndStep waited for queue space (ratio session)
  double records_per_s = 0.0;
  double writer_step_s = 0.0;
  std::uint64_t writer_records = 0;
  std::uint64_t raw_bytes = 0;  // per repeat; 0: not measured
  double raw_write_gbps = 0.0;
  double plain_write_gbps = 0.0;
  double raw_fraction() const { return plain_write_gbps > 0 ? raw_write_gbps / plain_write_gbps : 0; }
};

std::string FormatCaptureJsonLine(const CaptureBenchResult& r);
std::string FormatCaptureTableHeader();
std::string FormatCaptureTableRow(const CaptureBenchResult& r);

// Runs one case. Errors name the case (a failed write, a dropped record).
Result<CaptureBenchResult> RunCaptureCase(const CaptureBenchCase& c,
                                          const CaptureBenchOptions& options);

// The whole subcommand: table (or JSON lines) to `out`, notes to `err`.
Status RunCaptureBench(const CaptureBenchOptions& options, std::ostream& out, std::ostream& err);

}  // namespace tstat::bench
