// Trial: reads a run (all workers), finished or still being written.
//
// A run is a directory written by one or more workers (see README, "Storage
// layout"). Trial loads what is durable when it is opened or refreshed;
// Refresh()/WaitForStep() follow a live run. Steps are addressed as in
// smdebug: with mode == Mode::kGlobal `step` is the global step, otherwise it
// is the mode step of that mode.
//
// Errors are typed by StatusCode:
//   kNotFound          no such tensor (or scalar, or worker)
//   kStepUnavailable   the step was not saved (the run is past it, or closed)
//   kUnavailable       the step is not available yet (the run may still write it)
//   kCorruption        a file is damaged (message names the file)
//   kIoError           the run directory cannot be read
// Thread safety: a Trial is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tstat/export.h"
#include "tstat/stats_record.h"
#include "tstat/status.h"

namespace tstat {

// One statistic of TensorStats, for series and the CLI.
enum class StatField : std::uint8_t {
  kCount,
  kFiniteCount,
  kNanCount,
  kPosInfCount,
  kNegInfCount,
  kZeroCount,
  kNegCount,
  kSubnormalCount,
  kBandLoCount,
  kBandHiCount,
  kSmallCount,
  kMin,
  kMax,
  kSum,
  kMean,
  kVariance,
  kStd,
  kL1,
  kL2,
  kAmax,
};
// Names as in the CLI and the HDF5 tables: count, finite_count, nan_count,
// pos_inf_count, neg_inf_count, zero_count, neg_count, subnormal_count,
// band_lo_count, band_hi_count, small_count, min, max, sum, mean, variance, std,
// l1, l2, amax.
TSTAT_EXPORT const char* StatFieldName(StatField f);
TSTAT_EXPORT bool ParseStatField(const std::string& name, StatField* out);
TSTAT_EXPORT double StatValue(const TensorStats& s, StatField f);

struct TensorQuery {
  std::string regex;          // RE2, partial match; empty = all
  std::string collection;     // empty = any
  Mode mode = Mode::kGlobal;  // kGlobal = any mode
};

struct SeriesPoint {
  StepKey step;
  double value = 0.0;
};

// When a saved step was captured.
struct StepTime {
  StepKey step;
  double wall_time = 0.0;        // EndStep's time, seconds since the Unix epoch
  double step_seconds = 0.0;     // BeginStep (or the previous EndStep) to EndStep
  double capture_seconds = 0.0;  // time inside tstat calls during the step
};

struct TSTAT_EXPORT RawTensor {
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;
  // Values converted to double (exact for every supported dtype but int64
  // beyond 2^53).
  std::vector<double> ToDoubles() const;
};

struct WorkerSummary {
  int rank = 0;
  int world_size = 0;      // as the worker recorded it (0: nothing loaded yet)
  int format_version = 0;  // storage format of its files (0: nothing loaded yet)
  std::string host;
  bool closed = false;  // the writer closed cleanly
  std::int64_t segments = 0;
  std::uint64_t bytes = 0;
  // As last flushed (final once closed). counters.capture holds the capture
  // totals over every step the worker ended, saved or not: its capture
  // overhead is counters.capture.capture_seconds / counters.capture.step_seconds.
  PipelineCounters counters;
};

struct TrialOptions {
  // Parse each segment's HDF5 metadata once in a child process before this
  // process's HDF5 first reads it (at open, or at the first read of its
  // records for a segment opened from the worker catalog): a
  // file crafted to crash or hang libhdf5's own parser (which no check
  // through its API can catch first, and which crashes h5py alike) is then
  // skipped with an error naming it, instead of ending this process. One
  // child, forked at the first segment, serves every one (a new one after a
  // crash); it parses what libhdf5 parses to read the segment, not the record
  // data, which tstat decodes itself. Costs a second parse of each segment's
  // metadata. For tools reading runs they did not write (the tstat CLI sets
  // it); not for a process that must not fork (the HDF5 lock is held across
  // the fork, other threads are not copied).
  bool isolate_segment_reads = false;
  // A child still parsing a segment after this long is killed and the
  // segment skipped.
  double isolated_read_timeout_s = 60.0;
  // Open reads the segments' metadata only; records are read a segment at a
  // time when a query needs them and kept up to about this many bytes of
  // memory (the segment a query is reading is kept whatever its size).
  std::uint64_t cache_bytes = std::uint64_t{64} << 20;
  // false: records are read without their exponent histograms (every
  // record's exponent_histogram empty), whose tables are then not read: a
  // walk over a run's steps that does not look at them (tstat check with
  // rules that do not) takes about two thirds of the time.
  bool exponent_histograms = true;
};

class TSTAT_EXPORT Trial {
 public:
  virtual ~Trial() = default;

  // Opens `run_dir`; kNotFound if it holds no tstat run.
  static Result<std::unique_ptr<Trial>> Open(const std::string& run_dir);
  static Result<std::unique_ptr<Trial>> Open(const std::string& run_dir,
                                             const TrialOptions& options);

  // Loads data flushed since the last load. Cheap when nothing changed.
  virtual Status Refresh() = 0;
  // Refreshes until `step` of `mode` is available (OK), the run closed without
  // it (kStepUnavailable), or `timeout_s` passed (kUnavailable).
  virtual Status WaitForStep(std::int64_t step, Mode mode, double timeout_s) = 0;
  // True once every worker closed cleanly and everything it wrote is loaded.
  virtual bool loaded_all_steps() const = 0;

  virtual std::vector<WorkerSummary> workers() const = 0;
  virtual std::vector<std::string> tensor_names(const TensorQuery& query = {}) const = 0;
  virtual std::vector<std::string> scalar_names() const = 0;
  virtual std::vector<std::string> collections() const = 0;
  virtual Result<TensorInfo> tensor_info(const std::string& name, int worker = -1) const = 0;
  // Steps with data of any worker, ascending by global step.
  virtual std::vector<StepKey> steps(Mode mode = Mode::kGlobal) const = 0;
  virtual std::string config_json(int worker = 0) const = 0;
  // Every loaded step of `worker` with its times, ascending by global step;
  // empty for a worker the run does not have.
  virtual std::vector<StepTime> step_times(int worker) const = 0;

  // worker = -1: the lowest-ranked worker that has the data.
  virtual Result<TensorStatsRecord> record(const std::string& name, std::int64_t step,
                                           Mode mode = Mode::kGlobal, int worker = -1) const = 0;
  virtual Result<TensorStats> stats(const std::string& name, std::int64_t step,
                                    Mode mode = Mode::kGlobal, int worker = -1) const = 0;
  // One statistic over every saved step of `mode` (fast: no per-step lookup).
  virtual Result<std::vector<SeriesPoint>> series(const std::string& name, StatField field,
                                                  Mode mode = Mode::kGlobal,
                                                  int worker = -1) const = 0;
  virtual Result<std::vector<SeriesPoint>> scalar_series(const std::string& name,
                                                         Mode mode = Mode::kGlobal,
                                                         int worker = -1) const = 0;
  virtual Result<RawTensor> raw(const std::string& name, std::int64_t step,
                                Mode mode = Mode::kGlobal, int worker = -1) const = 0;
  // Steps at which raw snapshots of `name` exist.
  virtual std::vector<StepKey> raw_steps(const std::string& name, int worker = -1) const = 0;
  // Every stats record of one worker at one global step, in capture order
  // (what a rule engine consumes).
  virtual Result<std::vector<TensorStatsRecord>> step_records(int worker,
                                                              std::int64_t global_step) const = 0;
  // The same into `out`, whose elements (and their buffers) are reused: what
  // a walk over every step calls, without an allocation per record. On an
  // error `out` is left as it was.
  virtual Status step_records_into(int worker, std::int64_t global_step,
                                   std::vector<TensorStatsRecord>* out) const {
    Result<std::vector<TensorStatsRecord>> records = step_records(worker, global_step);
    if (!records.ok()) return records.status();
    *out = std::move(records).value();
    return Status::OK();
  }
  virtual std::vector<DropRecord> drops(int worker = -1) const = 0;
};

}  // namespace tstat
