// RunTrial loading and waiting (see trial_impl.h); the queries are in
// trial_queries.cc.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <unordered_map>

#include "io/format/closed_marker.h"
#include "io/format/run_layout.h"
#include "io/format/segment_catalog.h"
#include "io/format/segment_schema.h"
#include "io/h5/posix_file.h"
#include "io/read/isolated_read.h"
#include "io/read/segment_reader.h"
#include "io/read/trial_impl.h"

namespace tstat {

Result<std::unique_ptr<Trial>> Trial::Open(const std::string& run_dir) {
  return Open(run_dir, TrialOptions{});
}

Result<std::unique_ptr<Trial>> Trial::Open(const std::string& run_dir,
                                           const TrialOptions& options) {
  if (!io::IsDirectory(run_dir)) {
    return Status::NotFound(run_dir + ": no such run directory");
  }
  auto trial = std::make_unique<io::RunTrial>(run_dir, options);
  Status loaded = trial->Refresh();
  // Damaged segments are reported again by every Refresh(); the rest of the
  // run is readable, so the Trial still opens.
  if (!loaded.ok() && loaded.code() != StatusCode::kCorruption) return loaded;
  if (trial->workers().empty()) {
    return Status::NotFound(run_dir + ": holds no tstat run (no worker-* directory)");
  }
  return std::unique_ptr<Trial>(std::move(trial));
}

}  // namespace tstat

namespace tstat::io {

RunTrial::RunTrial(std::string run_dir, TrialOptions options)
    : run_dir_(std::move(run_dir)),
      options_(options),
      cache_(options.cache_bytes, options.exponent_histograms) {
  if (options_.isolate_segment_reads) {
    // The cache verifies the seal before it calls the hook.
    cache_.set_before_read([this](const std::string& path, bool stats_table) {
      return CheckIsolated(path, true, stats_table);
    });
  }
}

Status RunTrial::CheckIsolated(const std::string& path, bool seal_verified,
                               bool stats_table) const {
  auto refused = refused_.find(path);
  if (refused != refused_.end()) return refused->second;
  auto unchecked = unchecked_.find(path);
  if (unchecked == unchecked_.end()) return Status::OK();  // parsed by the child at open
  const bool all_but_stats_table = unchecked->second;
  if (!stats_table && all_but_stats_table) return Status::OK();
  if (!isolated_) {
    isolated_ = std::make_unique<IsolatedSegmentReads>(options_.isolated_read_timeout_s);
  }
  // Its records (or raw snapshots) are read, its metadata came from the
  // catalog.
  Status child = isolated_->Check(path, seal_verified, /*records_only=*/true, stats_table);
  if (!child.ok()) {
    refused_.emplace(path, child);
    unchecked_.erase(unchecked);
  } else if (stats_table) {
    unchecked_.erase(unchecked);
  } else {
    unchecked->second = true;  // all but the stats table
  }
  return child;
}

void RunTrial::ReadCatalog(const std::string& dir, WorkerState* state) {
  if (state->catalog_stopped) return;
  const std::string path = JoinPath(dir, kCatalogFileName);
  // Read a piece at a time (a 100,000-step catalog is ~12 MB: one buffer of
  // that size cost more in fresh pages than decoding it); a piece is made as
  // large as a frame that does not fit it, up to the largest frame.
  std::uint64_t piece_bytes = std::uint64_t{1} << 20;
  for (;;) {
    Result<std::string> piece = ReadRegularFileRange(path, state->catalog_used, piece_bytes);
    if (!piece.ok()) {
      // No catalog (older runs, or not written yet): the segments are read.
      // Anything else there (a FIFO, a loop, no permission) is not used.
      if (piece.status().code() != StatusCode::kNotFound) state->catalog_stopped = true;
      return;
    }
    CatalogFrames frames =
        DecodeCatalogFrames(reinterpret_cast<const std::uint8_t*>(piece->data()), piece->size());
    for (CatalogEntry& e : frames.entries) {
      // A writer's first frame carries the registry and the config: a
      // catalog that starts without them is not one.
      if (!state->catalog_started && (!e.has_registry || !e.has_config)) {
        state->catalog_stopped = true;
        return;
      }
      state->catalog_started = true;
      if (e.has_registry) {
        state->catalog_ids.clear();
        for (const TensorInfo& t : e.tensors) state->catalog_ids.insert(t.id);
        state->catalog_registry = std::make_shared<const std::vector<TensorInfo>>(e.tensors);
        ++state->catalog_registry_version;
      }
      if (e.has_config) state->catalog_config = e.header.config_json;
      // The ids the frame's rows are checked with (a frame that carries no
      // registry has the previous frame's).
      Status valid = ValidateSegmentTables(
          e.tables, [state](std::uint32_t id) { return state->catalog_ids.count(id) != 0; }, path);
      if (!valid.ok()) {
        state->catalog_stopped = true;  // the segments themselves are read
        return;
      }
      const std::int64_t seg = e.header.segment_index;
      // A segment read from its file already (its frame came after the
      // listing) needs none.
      if (!state->attempted.count(seg)) {
        state->catalog[seg] = WorkerState::PendingFrame{std::move(e), state->catalog_registry,
                                                        state->catalog_registry_version};
      }
    }
    state->catalog_used += frames.used;
    if (!frames.problem.empty() && !frames.incomplete) {
      state->catalog_stopped = true;
      return;
    }
    if (piece->size() < piece_bytes) return;  // the end of the catalog
    if (frames.used == 0) {                   // a frame larger than the piece
      std::uint32_t length = 0;
      std::memcpy(&length, piece->data() + 4, sizeof length);  // checked by the decoder
      const std::uint64_t frame = std::uint64_t{length} + kCatalogFrameHeaderBytes;
      if (frame <= piece_bytes) return;
      piece_bytes = frame;
    }
  }
}

void RunTrial::ReserveForCatalog(const std::vector<std::int64_t>& fresh, WorkerState* state) {
  std::size_t steps = 0;
  std::map<std::uint8_t, std::size_t> per_mode;
  std::unordered_map<std::uint32_t, std::size_t> per_scalar;
  for (std::int64_t seg : fresh) {
    auto it = state->catalog.find(seg);
    if (it == state->catalog.end()) continue;
    const SegmentBuffers& t = it->second.entry.tables;
    steps += t.steps.size();
    for (const StepRow& r : t.steps) ++per_mode[r.mode];
    for (const ScalarRow& r : t.scalars) ++per_scalar[r.scalar_id];
  }
  state->index.Reserve(steps, per_mode, per_scalar);
}

std::optional<SegmentContents> RunTrial::FromCatalog(WorkerState* state, std::int64_t seg,
                                                     const std::string& path,
                                                     std::uint64_t* file_bytes) {
  auto it = state->catalog.find(seg);
  if (it == state->catalog.end()) return std::nullopt;
  WorkerState::PendingFrame pending = std::move(it->second);
  state->catalog.erase(it);
  CatalogEntry& e = pending.entry;
  Result<std::uint64_t> size = FileSize(path);
  const SegmentHeader& h = e.header;
  if (!size.ok() || *size != e.file_bytes || h.rank != state->index.rank || h.world_size < 1 ||
      h.world_size > kMaxWorldSize || h.rank >= h.world_size ||
      h.format_version != kFormatVersion) {
    return std::nullopt;  // not the file the frame describes
  }
  SegmentContents contents;
  contents.header = std::move(e.header);
  // The config a frame carries over, only where the index has none yet (it
  // keeps the first it gets): not a copy per segment.
  if (!e.has_config && !state->index.have_config) {
    contents.header.config_json = state->catalog_config;
  }
  // The frame's registry, unless the index holds it already (then none: the
  // index keeps its own).
  if (pending.registry_version != state->applied_registry_version) {
    contents.tensors = *pending.registry;
    state->applied_registry_version = pending.registry_version;
  }
  contents.tables = std::move(e.tables);
  contents.counters = e.counters;
  if (e.stats_layout) {
    contents.stats_layout = std::make_shared<const StatsLayout>(std::move(*e.stats_layout));
  }
  if (options_.isolate_segment_reads) unchecked_.emplace(path, false);
  *file_bytes = *size;
  return contents;
}

Status RunTrial::Refresh() {
  Result<std::vector<std::string>> names = ListDir(run_dir_);
  if (!names.ok()) return Status::IoError(names.status().message());
  for (const std::string& name : names.value()) {
    int rank = 0;
    if (ParseWorkerDirName(name, &rank) && !workers_.count(rank) &&
        IsDirectory(JoinPath(run_dir_, name))) {
      workers_.emplace(rank, WorkerState(rank));
    }
  }
  Status io_error;
  for (auto& entry : workers_) {
    Status s = RefreshWorker(&entry.second);
    if (!s.ok() && io_error.ok()) io_error = s;
  }
  if (!io_error.ok()) return io_error;
  if (!problems_.empty()) {
    std::string message = std::to_string(problems_.size()) +
                          " file(s) skipped (damaged, or of a version this reader does not read): ";
    for (std::size_t i = 0; i < problems_.size(); ++i) {
      message += (i ? "; " : "") + problems_[i];
    }
    return Status::Corruption(message);
  }
  return Status::OK();
}

Status RunTrial::RefreshWorker(WorkerState* state) {
  WorkerIndex& index = state->index;
  if (index.closed) return Status::OK();  // nothing can change any more
  const std::string dir = JoinPath(run_dir_, WorkerDirName(index.rank));
  const std::string marker_path = JoinPath(dir, kClosedFileName);
  // The marker is read BEFORE the listing: Close() renames it into place only
  // after the last segment, so every segment is in the listing that follows.
  // lstat: anything named CLOSED (a symlink loop too) is a marker, read only
  // if it is a small regular file; one that cannot be read is reported like
  // a damaged one, and the segments stay readable.
  struct stat marker_stat;
  if (!state->marker_seen && ::lstat(marker_path.c_str(), &marker_stat) == 0) {
    Result<std::string> text = ReadRegularFile(marker_path, kMaxClosedMarkerBytes);
    // kNotFound: removed since the lstat, or a link to nothing: looked at
    // again at the next refresh; the segments are listed all the same.
    if (text.ok() || text.status().code() != StatusCode::kNotFound) {
      Result<ClosedMarker> marker =
          text.ok() ? ParseClosedMarker(text.value(), marker_path)
                    : Result<ClosedMarker>(Status::Corruption(text.status().message()));
      state->marker_seen = true;
      if (marker.ok()) {
        state->marker_segments = marker->segments;
        index.counters = marker->counters;
        index.world_size = marker->world_size;
        if (index.format_version == 0) index.format_version = marker->format_version;
        if (index.host.empty()) index.host = marker->host;
      } else {
        problems_.push_back(marker.status().message());
      }
    }
  }
  Result<std::vector<std::string>> names = ListDir(dir);
  if (!names.ok()) return Status::IoError(names.status().message());
  std::vector<std::int64_t> fresh;
  for (const std::string& name : names.value()) {
    std::int64_t seg = 0;
    if (ParseSegmentFileName(name, &seg) && !state->attempted.count(seg)) fresh.push_back(seg);
  }
  std::sort(fresh.begin(), fresh.end());
  if (!fresh.empty()) ReadCatalog(dir, state);
  ReserveForCatalog(fresh, state);
  for (std::int64_t seg : fresh) {
    const std::string path = JoinPath(dir, SegmentFileName(seg));
    std::uint64_t cataloged_bytes = 0;
    std::optional<SegmentContents> cataloged = FromCatalog(state, seg, path, &cataloged_bytes);
    if (!cataloged && options_.isolate_segment_reads) {
      if (!isolated_) {
        isolated_ = std::make_unique<IsolatedSegmentReads>(options_.isolated_read_timeout_s);
      }
      const Status child = isolated_->Check(path);
      if (!child.ok()) {
        problems_.push_back(child.message());
        state->attempted.insert(seg);
        continue;
      }
    }
    if (!cataloged) state->applied_registry_version = 0;  // the file's registry, below
    Result<SegmentContents> contents = cataloged ? Result<SegmentContents>(std::move(*cataloged))
                                                 : ReadSegmentMetadata(path, &state->registry_memo);
    if (!contents.ok()) {
      const StatusCode code = contents.status().code();
      if (code != StatusCode::kCorruption && code != StatusCode::kNotSupported) {
        return Status::IoError(contents.status().message());  // retried by the next Refresh
      }
      problems_.push_back(contents.status().message());
      state->attempted.insert(seg);
      continue;
    }
    const SegmentHeader& header = contents->header;
    if (header.segment_index != seg || header.rank != index.rank) {
      // A copy under another number (or from another worker) would give
      // every row twice.
      problems_.push_back(path + ": holds segment " + std::to_string(header.segment_index) +
                          " of rank " + std::to_string(header.rank) +
                          " (a copied or renamed file?): skipped, its rows would be duplicates");
      state->attempted.insert(seg);
      continue;
    }
    // A cataloged segment's size was checked against its frame just now.
    Result<std::uint64_t> size =
        cataloged_bytes ? Result<std::uint64_t>(cataloged_bytes) : FileSize(path);
    const bool closed_counters = state->marker_seen && state->marker_segments >= 0;
    const PipelineCounters final_counters = index.counters;
    index.AddSegment(contents.value(), path, size.ok() ? size.value() : 0);
    if (closed_counters) index.counters = final_counters;  // CLOSED's are the final ones
    state->attempted.insert(seg);
  }
  if (state->marker_seen) {
    index.closed = true;
    if (state->marker_segments > static_cast<std::int64_t>(state->attempted.size())) {
      problems_.push_back(dir + ": CLOSED records " + std::to_string(state->marker_segments) +
                          " segments but only " + std::to_string(state->attempted.size()) +
                          " exist");
    }
  }
  return Status::OK();
}

bool RunTrial::loaded_all_steps() const {
  int world = 0;
  for (const auto& entry : workers_) world = std::max(world, entry.second.index.world_size);
  if (world == 0) return false;
  for (int rank = 0; rank < world; ++rank) {
    auto it = workers_.find(rank);
    if (it == workers_.end() || !it->second.index.closed) return false;
  }
  return true;
}

bool RunTrial::HasStep(std::int64_t step, Mode mode) const {
  for (const auto& entry : workers_) {
    if (entry.second.index.GlobalStep(step, mode)) return true;
  }
  return false;
}

bool RunTrial::PassedStep(std::int64_t step, Mode mode) const {
  if (loaded_all_steps()) return true;
  int world = 0;
  for (const auto& entry : workers_) world = std::max(world, entry.second.index.world_size);
  if (world == 0) return false;
  for (int rank = 0; rank < world; ++rank) {
    auto it = workers_.find(rank);
    if (it == workers_.end()) return false;
    const WorkerIndex& w = it->second.index;
    if (!w.closed && !w.PassedStep(step, mode)) return false;
  }
  return true;
}

Status RunTrial::WaitForStep(std::int64_t step, Mode mode, double timeout_s) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(std::max(timeout_s, 0.0)));
  for (;;) {
    Status refreshed = Refresh();
    if (refreshed.code() == StatusCode::kIoError) return refreshed;
    if (HasStep(step, mode)) return Status::OK();
    const std::string what =
        std::string("step ") + std::to_string(step) + " of mode " + ModeName(mode);
    if (PassedStep(step, mode)) {
      // The missing step may have been in a damaged segment: say so.
      if (!refreshed.ok()) return refreshed.WithContext(what + " not found");
      return Status::StepUnavailable(what + " was not saved (" + run_dir_ + ")");
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      return Status::Unavailable(what + " not available after " + std::to_string(timeout_s) +
                                 " s (" + run_dir_ + ")");
    }
    std::this_thread::sleep_for(
        std::min<Clock::duration>(deadline - now, std::chrono::milliseconds(20)));
  }
}

std::vector<WorkerSummary> RunTrial::workers() const {
  std::vector<WorkerSummary> out;
  for (const auto& entry : workers_) {
    const WorkerIndex& w = entry.second.index;
    WorkerSummary s;
    s.rank = w.rank;
    s.world_size = w.world_size;
    s.format_version = static_cast<int>(w.format_version);
    s.host = w.host;
    s.closed = w.closed;
    s.segments = w.segments;
    s.bytes = w.bytes;
    s.counters = w.counters;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace tstat::io
