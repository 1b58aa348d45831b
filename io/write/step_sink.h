// StepSink: where the capture pipeline's writer thread puts captured steps.
//
// The HDF5 run writer (io/hdf5_run_writer.h) is the real one; tests use the
// in-memory sink and the fault-injecting sink (tests/support/testing_sinks.h). A sink is
// used by ONE thread (the pipeline's writer thread); it is not thread-safe.
//
// Durability contract: Write() may buffer. Flush() makes every batch written
// so far durable (fsync) and visible to readers in other processes, atomically
// (a reader never sees half a step). Close() flushes and marks the worker's
// output as complete, so readers know no more data will come.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tstat/stats_record.h"
#include "tstat/status.h"

namespace tstat::io {

struct RunInfo {
  std::string run_dir;  // the run: one directory, shared by all workers
  int rank = 0;
  int world_size = 1;
  std::string host;         // hostname of this worker
  std::string config_json;  // the session's effective config, stored verbatim
};

// Records of one batch, the unit of every count of written and lost data
// (PipelineCounters): its stats, scalar and raw records.
inline std::uint64_t RecordsIn(const StepBatch& batch) {
  return batch.stats.size() + batch.scalars.size() + batch.raws.size();
}

// Whether a sink call's failure is a rejection of the call (a caller error:
// kInvalidArgument, kFailedPrecondition), which changes nothing in the sink,
// rather than a storage failure, which the sink counts in records_lost().
inline bool IsRejectedCall(const Status& s) {
  return s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kFailedPrecondition;
}

class StepSink {
 public:
  virtual ~StepSink() = default;
  // Declares tensors (and scalar names) registered since the last call. Every
  // tensor id used by a later Write() has been declared first.
  virtual Status RegisterTensors(const std::vector<TensorInfo>& tensors) = 0;
  virtual Status Write(const StepBatch& batch) = 0;
  // `counters` are stored with the flushed data.
  virtual Status Flush(const PipelineCounters& counters) = 0;
  virtual Status Close(const PipelineCounters& counters) = 0;
  // Bytes in durable (flushed) files so far.
  virtual std::uint64_t bytes_written() const = 0;
  // Files sealed so far (0 for sinks without files).
  virtual std::uint64_t segments_written() const { return 0; }
  // Records (stats + scalar + raw, RecordsIn) this sink discarded so far with
  // failed writes, flushes or closes: the one count of storage losses. A call
  // the sink rejects (kInvalidArgument, kFailedPrecondition) changes nothing
  // and loses nothing here; the caller counts that batch.
  virtual std::uint64_t records_lost() const = 0;
  // Records written but not yet durable: what the next failed Flush loses.
  // A sink may make records durable on its own (a segment rotated by size),
  // so the caller never assumes "since my last Flush".
  virtual std::uint64_t records_unflushed() const = 0;
};

struct Hdf5RunWriterOptions {
  RunInfo info;
  int compression_level = 4;      // deflate level of the tables (0 = none)
  int raw_compression_level = 0;  // deflate level of raw snapshots (0 = none)
};

// Creates RUN/worker-<rank>/ (fails with kFailedPrecondition if that worker's
// directory already holds data, so a run is never silently overwritten).
Result<std::unique_ptr<StepSink>> OpenHdf5RunWriter(const Hdf5RunWriterOptions& options);

}  // namespace tstat::io
