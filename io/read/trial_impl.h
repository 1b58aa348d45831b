// RunTrial: the Trial (tstat/trial.h) over a run directory of sealed HDF5
// segments (see hdf5_run_writer.h and docs/storage-format.md).
//
// Loading: Refresh() lists RUN/worker-*/, reads each worker's CLOSED marker
// (before listing its segments, so that a worker is "closed" only once every
// segment it wrote has been seen), lists its seg-*.h5 files, decodes the
// frames appended to its catalog since the last refresh (segment_catalog.h),
// then takes the metadata of each segment it has not attempted yet
// (registry, steps, scalars, raw index, drops, counters), in index order,
// from its catalog frame -- without reading the file -- or, where there is
// none, from the file (ReadSegmentMetadata), into that worker's WorkerIndex. .tmp files are never
// read. The records (stats, histograms,
// ...) are read when a query needs them, a segment at a time, and kept in a
// SegmentCache of TrialOptions::cache_bytes: record() and step_records()
// read the segment of their step, series() every segment of the worker,
// tensor_names() with a mode every segment once (the modes each tensor has
// are then remembered).
//
// Damaged data: a segment opened from the catalog is checked (seal, HDF5)
// when its records are first read, and a damaged one fails those queries
// (remembered: not read again). A segment read at open that fails its seal
// check or whose metadata cannot be parsed is skipped (never retried) and the rest of the run stays
// readable; every Refresh() then returns kCorruption naming each skipped file (and a worker
// whose CLOSED marker records more segments than exist). A Trial opened on
// such a run still opens. loaded_all_steps() counts a skipped segment as
// attempted, so it does not wait forever for data that cannot be read.
// kIoError (a directory or file that cannot be read right now) leaves the
// affected segments to be retried by the next Refresh(). A segment whose
// records turn out damaged when a query reads them makes that query return
// kCorruption naming the file.
//
// Step queries follow trial.h: kStepUnavailable when the data can no longer
// come -- for a given worker: it saved that step without the data, saved a
// later step of that mode, or closed; for worker = -1: every rank of the
// world has passed the step that way -- else kUnavailable (it may still
// come). WaitForStep polls Refresh() every 20 ms; when the run has passed the
// step without it and segments were skipped as damaged, it returns that
// kCorruption instead of kStepUnavailable (the step may have been in them).
// Thread safety: one thread at a time (Trial contract); HDF5 reads take the
// process-wide HDF5 lock, so a writer may run in another thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "io/format/segment_catalog.h"
#include "io/read/isolated_read.h"
#include "io/read/segment_cache.h"
#include "io/read/stats_chunk_reader.h"
#include "io/read/worker_index.h"
#include "tstat/trial.h"

namespace tstat::io {

class RunTrial final : public Trial {
 public:
  RunTrial(std::string run_dir, TrialOptions options);

  Status Refresh() override;
  Status WaitForStep(std::int64_t step, Mode mode, double timeout_s) override;
  bool loaded_all_steps() const override;

  std::vector<WorkerSummary> workers() const override;
  std::vector<std::string> tensor_names(const TensorQuery& query) const override;
  std::vector<std::string> scalar_names() const override;
  std::vector<std::string> collections() const override;
  Result<TensorInfo> tensor_info(const std::string& name, int worker) const override;
  std::vector<StepKey> steps(Mode mode) const override;
  std::vector<StepTime> step_times(int worker) const override;
  std::string config_json(int worker) const override;

  Result<TensorStatsRecord> record(const std::string& name, std::int64_t step, Mode mode,
                                   int worker) const override;
  Result<TensorStats> stats(const std::string& name, std::int64_t step, Mode mode,
                            int worker) const override;
  Result<std::vector<SeriesPoint>> series(const std::string& name, StatField field, Mode mode,
                                          int worker) const override;
  Result<std::vector<SeriesPoint>> scalar_series(const std::string& name, Mode mode,
                                                 int worker) const override;
  Result<RawTensor> raw(const std::string& name, std::int64_t step, Mode mode,
                        int worker) const override;
  std::vector<StepKey> raw_steps(const std::string& name, int worker) const override;
  Result<std::vector<TensorStatsRecord>> step_records(int worker,
                                                      std::int64_t global_step) const override;
  Status step_records_into(int worker, std::int64_t global_step,
                           std::vector<TensorStatsRecord>* out) const override;
  std::vector<DropRecord> drops(int worker) const override;

 private:
  struct WorkerState {
    explicit WorkerState(int rank) : index(rank) {}
    WorkerIndex index;
    std::set<std::int64_t> attempted;  // segment indices loaded or skipped
    bool marker_seen = false;
    std::int64_t marker_segments = -1;
    RegistryMemo registry_memo;  // the registry of the last segment read
    // The worker catalog (segment_catalog.h): bytes decoded so far, whether
    // a damaged frame ended it, the frames of segments not loaded yet, and
    // the registry ids and config of the last frame decoded.
    std::uint64_t catalog_used = 0;
    bool catalog_started = false;  // its first frame was decoded
    bool catalog_stopped = false;
    // A frame not used yet, with the registry it holds or carries over
    // (numbered: registry_version counts the frames that carried one).
    struct PendingFrame {
      CatalogEntry entry;
      std::shared_ptr<const std::vector<TensorInfo>> registry;
      std::uint64_t registry_version = 0;
    };
    std::map<std::int64_t, PendingFrame> catalog;
    std::shared_ptr<const std::vector<TensorInfo>> catalog_registry;
    std::uint64_t catalog_registry_version = 0;
    std::unordered_set<std::uint32_t> catalog_ids;
    std::string catalog_config;
    // The registry version the index holds (0: one read from a file, or
    // none): a frame that carries the registry over gives it to the index
    // when the index holds another (the frame that changed it was not
    // used, its segment being missing or read from the file).
    std::uint64_t applied_registry_version = 0;
  };

  Status RefreshWorker(WorkerState* state);
  // Decodes the frames appended to the worker's catalog since the last call.
  void ReadCatalog(const std::string& dir, WorkerState* state);
  // Segment `seg` at `path` from its catalog frame: nullopt when there is
  // none, or when it does not match the file (then the file is read); its
  // size, checked, into *file_bytes.
  std::optional<SegmentContents> FromCatalog(WorkerState* state, std::int64_t seg,
                                             const std::string& path, std::uint64_t* file_bytes);
  // Makes room in the worker's index for the steps and scalars of the
  // catalog frames of `fresh` segments (one allocation, not one per doubling).
  void ReserveForCatalog(const std::vector<std::int64_t>& fresh, WorkerState* state);
  // Before HDF5 reads a segment opened from the catalog, with
  // options_.isolate_segment_reads: its first parse, in the child (what a
  // read of its records or raw snapshots parses, the stats table's
  // metadata only with `stats_table`; its seal too unless `seal_verified`,
  // the caller's check just before).
  Status CheckIsolated(const std::string& path, bool seal_verified, bool stats_table) const;
  // Workers to search: all, in rank order (worker < 0), or that one.
  Result<std::vector<const WorkerIndex*>> Candidates(int worker) const;
  // Whether `step` of `mode` is loaded for any worker.
  bool HasStep(std::int64_t step, Mode mode) const;
  // Whether no worker can still add `step` of `mode`.
  bool PassedStep(std::int64_t step, Mode mode) const;
  // The error for data missing at `step` of `mode`: kStepUnavailable when
  // no worker (worker < 0), or that worker, can still write it, else
  // kUnavailable.
  Status MissingRecord(int worker, const std::string& what, std::int64_t step, Mode mode) const;
  // The records of segment `ordinal` of worker `w` (the cache's), indexed
  // by tensor (step_records_into asks the cache for a step's).
  Result<std::shared_ptr<const WorkerIndex>> Records(const WorkerIndex& w,
                                                     std::uint32_t ordinal) const;
  // Its stats rows alone, by tensor (series).
  Result<std::shared_ptr<const SegmentStatsRows>> StatsRows(const WorkerIndex& w,
                                                            std::uint32_t ordinal) const;
  // The modes each tensor of worker `w` has records in (bit 1 << mode),
  // reading the segments not seen yet.
  Result<const std::map<std::uint32_t, std::uint8_t>*> TensorModes(const WorkerIndex& w) const;

  std::string run_dir_;
  TrialOptions options_;
  std::map<int, WorkerState> workers_;
  std::vector<std::string> problems_;  // persistent corruption reports
  // With options_.isolate_segment_reads: the child that reads each new
  // segment first (started with the first one).
  mutable std::unique_ptr<IsolatedSegmentReads> isolated_;
  // Segments opened from the catalog that the child has not parsed yet (or
  // not their stats table, which a read that decodes its chunks itself does
  // not hand to HDF5), and those it refused (never given to HDF5 here).
  // (By path: whether all but its stats table was parsed. A map of plain
  // types: one of an io type would be a template the library exports.)
  mutable std::map<std::string, bool> unchecked_;
  mutable std::map<std::string, Status> refused_;
  // Queries are const; reading records fills these.
  mutable SegmentCache cache_;
  struct ModesSeen {
    std::size_t segments = 0;  // segment_files read into `modes`
    std::map<std::uint32_t, std::uint8_t> modes;
  };
  mutable std::map<int, ModesSeen> modes_;  // by rank
  // series() of segments with a stats layout (made at the first), and its rows.
  mutable std::unique_ptr<StatsChunkReader> chunk_reader_;
  mutable std::vector<StatsRow> series_rows_;
};

}  // namespace tstat::io
