// See hdf5_run_writer.h.
#include "io/write/hdf5_run_writer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "io/format/closed_marker.h"
#include "io/format/run_layout.h"
#include "io/format/segment_catalog.h"
#include "io/format/segment_schema.h"
#include "io/h5/h5_file.h"
#include "io/h5/h5_lock.h"
#include "io/h5/posix_file.h"
#include "io/h5/segment_driver.h"
#include "io/h5/segment_seal.h"
#include "io/write/packed_raw_dataset.h"
#include "io/write/segment_file_writer.h"
#include "io/write/segment_rows.h"

#ifndef TSTAT_VERSION_STRING
#define TSTAT_VERSION_STRING "0.1"
#endif

namespace tstat::io {

struct OpenSegmentFile {
  SegmentStore store;  // declared first: outlives `file`
  H5File file;
  std::string tmp_path;  // where it is written (for messages: Write needs it per raw snapshot)
  std::size_t size = 0;  // of the file, once finished
};

namespace {

bool SameTensor(const TensorInfo& a, const TensorInfo& b) {
  return a.id == b.id && a.name == b.name && a.kind == b.kind && a.dtype == b.dtype &&
         a.shape == b.shape && a.space == b.space && a.collections == b.collections;
}

double NowUnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string LocalHostName() {
  char name[256] = {0};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

}  // namespace

Result<std::unique_ptr<StepSink>> OpenHdf5RunWriter(const Hdf5RunWriterOptions& options) {
  TSTAT_ASSIGN_OR_RETURN(std::unique_ptr<Hdf5RunWriter> writer, Hdf5RunWriter::Open(options));
  return std::unique_ptr<StepSink>(std::move(writer));
}

Result<std::unique_ptr<Hdf5RunWriter>> Hdf5RunWriter::Open(const Hdf5RunWriterOptions& options) {
  const RunInfo& info = options.info;
  if (info.run_dir.empty()) return Status::InvalidArgument("run_dir is empty");
  if (info.world_size < 1 || info.world_size > kMaxWorldSize || info.rank < 0 ||
      info.rank >= info.world_size) {
    return Status::InvalidArgument("rank " + std::to_string(info.rank) +
                                   " is not in [0, world_size=" + std::to_string(info.world_size) +
                                   ")");
  }
  for (const auto& [name, level] :
       {std::pair<const char*, int>{"compression_level", options.compression_level},
        {"raw_compression_level", options.raw_compression_level}}) {
    if (level < 0 || level > 9) {
      return Status::InvalidArgument(std::string(name) + " must be 0..9, not " +
                                     std::to_string(level));
    }
  }
  const std::string worker_dir = JoinPath(info.run_dir, WorkerDirName(info.rank));
  if (IsDirectory(worker_dir)) {
    TSTAT_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(worker_dir));
    for (const std::string& name : names) {
      if (name.rfind("seg-", 0) == 0 || name.rfind(kClosedFileName, 0) == 0) {
        return Status::FailedPrecondition(worker_dir + " already holds run data ('" + name +
                                          "'); refusing to overwrite it");
      }
    }
  }
  TSTAT_RETURN_IF_ERROR(MakeDirs(worker_dir));
  Hdf5RunWriterOptions resolved = options;
  if (resolved.info.host.empty()) resolved.info.host = LocalHostName();
  return std::unique_ptr<Hdf5RunWriter>(new Hdf5RunWriter(resolved, worker_dir));
}

Hdf5RunWriter::Hdf5RunWriter(const Hdf5RunWriterOptions& options, std::string worker_dir)
    : options_(options),
      worker_dir_(std::move(worker_dir)),
      buffers_(std::make_unique<SegmentBuffers>()),
      streamed_(std::make_unique<StreamedRows>()),
      packed_(std::make_unique<PackedRawDataset>()) {}

Hdf5RunWriter::~Hdf5RunWriter() {
  if (!segment_) return;
  {
    H5Lock lock;
    packed_->Close();
    streamed_->Close();
    CloseH5File(&segment_->file, TmpPath()).ok();  // unsealed: nothing to lose but the data
  }
  segment_.reset();
  RemoveFile(TmpPath()).ok();  // an unsealed .tmp is never read; best effort
}

std::string Hdf5RunWriter::TEST_open_segment_path() const { return segment_ ? TmpPath() : ""; }

Status Hdf5RunWriter::RegisterTensors(const std::vector<TensorInfo>& tensors) {
  if (closed_) return Status::FailedPrecondition(worker_dir_ + ": writer is closed");
  for (const TensorInfo& t : tensors) {
    bool nul = t.name.find('\0') != std::string::npos;
    for (const std::string& c : t.collections) nul = nul || c.find('\0') != std::string::npos;
    if (nul) {
      return Status::InvalidArgument("tensor id " + std::to_string(t.id) +
                                     ": names and collections cannot contain NUL bytes");
    }
    if (!IsValidDType(t.dtype)) {
      return Status::InvalidArgument("tensor '" + t.name + "': invalid dtype");
    }
    // Stored as fixed-length strings (segment_schema.h): longer would be cut.
    if (t.name.size() > kTensorNameChars) {
      return Status::InvalidArgument("tensor id " + std::to_string(t.id) + ": a name of " +
                                     std::to_string(t.name.size()) + " bytes (at most " +
                                     std::to_string(kTensorNameChars) + ")");
    }
    for (const std::string& c : t.collections) {
      if (c.size() > kCollectionNameChars) {
        return Status::InvalidArgument("tensor id " + std::to_string(t.id) +
                                       ": a collection name of " + std::to_string(c.size()) +
                                       " bytes (at most " + std::to_string(kCollectionNameChars) +
                                       ")");
      }
    }
    auto it = registry_.find(t.id);
    if (it != registry_.end() && it->second.name != t.name) {
      return Status::InvalidArgument("tensor id " + std::to_string(t.id) +
                                     " is already declared as '" + it->second.name +
                                     "', cannot redeclare it as '" + t.name + "'");
    }
  }
  for (const TensorInfo& t : tensors) {
    auto [it, added] = registry_.try_emplace(t.id, t);
    if (!added && !SameTensor(it->second, t)) {
      it->second = t;
      added = true;
    }
    if (added) ++registry_version_;  // the catalog's next frame carries the registry
    if (t.id < kDenseIds) {
      if (declared_.size() <= t.id) declared_.resize(t.id + 1, 0);
      declared_[t.id] = 1;
    }
  }
  return Status::OK();
}

Status Hdf5RunWriter::ValidateBatch(const StepBatch& batch) const {
  const std::string step = "step " + std::to_string(batch.key.global_step);
  if (!IsStoredMode(static_cast<std::uint8_t>(batch.key.mode))) {
    return Status::InvalidArgument(step + ": invalid mode");
  }
  if (last_global_step_ && batch.key.global_step <= *last_global_step_) {
    return Status::FailedPrecondition(step + " is not after the last written step " +
                                      std::to_string(*last_global_step_));
  }
  auto declared = [&](std::uint32_t id, const char* what) -> Status {
    if (id < declared_.size() ? declared_[id] != 0 : registry_.count(id) != 0) return Status::OK();
    return Status::InvalidArgument(step + ": " + what + " id " + std::to_string(id) +
                                   " was never declared (RegisterTensors)");
  };
  // Messages are built only on failure: this runs for every record of every
  // step on the writer thread.
  for (const TensorStatsRecord& r : batch.stats) {
    TSTAT_RETURN_IF_ERROR(declared(r.tensor_id, "tensor"));
    const auto tensor = [&] { return step + ": tensor id " + std::to_string(r.tensor_id); };
    if (r.sample && r.sample->positions.size() != r.sample->values.size()) {
      return Status::InvalidArgument(tensor() + ": sample positions and values differ in number");
    }
    if (r.exponent_histogram && !r.exponent_histogram->valid()) {
      return Status::InvalidArgument(tensor() + ": exponent histogram bins " +
                                     std::to_string(r.exponent_histogram->first_bin) + " + " +
                                     std::to_string(r.exponent_histogram->counts.size()) +
                                     " lie outside [0, " + std::to_string(kExpHistBins) + ")");
    }
    if (r.count_values.size() != r.value_counts.size()) {
      return Status::InvalidArgument(tensor() + ": count_values and value_counts differ in number");
    }
    if (r.confusion &&
        (r.confusion->classes < 0 || r.confusion->classes > (1 << 16) ||
         r.confusion->counts.size() != static_cast<std::size_t>(r.confusion->classes) *
                                           static_cast<std::size_t>(r.confusion->classes))) {
      return Status::InvalidArgument(tensor() + ": confusion matrix is not classes x classes");
    }
  }
  for (const ScalarRecord& s : batch.scalars)
    TSTAT_RETURN_IF_ERROR(declared(s.tensor_id, "scalar"));
  for (const RawSnapshot& r : batch.raws) {
    TSTAT_RETURN_IF_ERROR(declared(r.tensor_id, "tensor"));
    TSTAT_RETURN_IF_ERROR(ValidateRawSnapshot(r));
  }
  return Status::OK();
}

std::uint64_t Hdf5RunWriter::Buffered() const { return buffers_->records() + streamed_->records(); }

std::uint64_t Hdf5RunWriter::records_unflushed() const { return segment_ ? Buffered() : 0; }

std::string Hdf5RunWriter::TmpPath() const {
  return JoinPath(worker_dir_, SegmentFileName(next_index_)) + ".tmp";
}

Status Hdf5RunWriter::OpenSegment() {
  H5Lock lock;
  auto segment = std::make_unique<OpenSegmentFile>();
  segment->tmp_path = TmpPath();
  TSTAT_RETURN_IF_ERROR(segment->store.Create(segment->tmp_path));
  TSTAT_ASSIGN_OR_RETURN(segment->file, CreateSegmentH5File(&segment->store, kSegmentUserBlock));
  TSTAT_RETURN_IF_ERROR(streamed_->Start(options_.compression_level));
  segment_ = std::move(segment);
  packed_->Reset(options_.raw_compression_level);
  segment_created_ = NowUnixSeconds();
  raw_count_ = 0;
  raw_bytes_ = 0;
  return Status::OK();
}

Status Hdf5RunWriter::StoreErrorOr(const Status& hdf5_error) const {
  // A disk error under HDF5 reaches it as a failed write; the store knows why.
  if (segment_ && !segment_->store.error().ok()) return segment_->store.error();
  return hdf5_error;
}

Status Hdf5RunWriter::FailSegment(const Status& cause, std::uint64_t extra_records_lost) {
  const std::uint64_t lost = Buffered() + extra_records_lost;
  {
    H5Lock lock;
    packed_->Close();
    streamed_->Close();  // their datasets close before the file
    if (segment_) {
      CloseH5File(&segment_->file, TmpPath()).ok();  // in memory; the cause is known
      segment_.reset();
    }
  }
  RemoveFile(TmpPath()).ok();  // best effort (the directory may be read-only)
  buffers_->Clear();
  raw_count_ = 0;
  ++next_index_;  // a leftover .tmp of this index is never overwritten
  records_lost_ += lost;
  return Status(cause.code(), cause.message() + " (segment discarded, " + std::to_string(lost) +
                                  " records lost)");
}

Status Hdf5RunWriter::Write(const StepBatch& batch) {
  if (closed_) return Status::FailedPrecondition(worker_dir_ + ": writer is closed");
  TSTAT_RETURN_IF_ERROR(ValidateBatch(batch));
  last_global_step_ = batch.key.global_step;
  Status rotated;
  if (segment_ && !streamed_->FitsCounts(batch)) {
    // The open segment fixed its exp_hist_counts width at their first chunk
    // and this step has a wider count: the segment ends before the step (one
    // width per file, docs/storage-format.md). A failed flush is counted by FailSegment;
    // the step still goes to the next segment.
    rotated = Flush(last_counters_);
  }
  if (!segment_) {
    Status opened = OpenSegment();
    if (!opened.ok()) return FailSegment(opened, RecordsIn(batch));
  }
  // Rows of this batch already added when a step fails are counted by
  // Buffered(); the rest of the batch is lost on top of them.
  const std::uint64_t before = Buffered();
  auto fail = [&](const Status& cause) {
    return FailSegment(StoreErrorOr(cause), RecordsIn(batch) - (Buffered() - before));
  };
  if (!batch.raws.empty()) {
    H5Lock lock;
    for (const RawSnapshot& raw : batch.raws) {
      const std::size_t size = raw.bytes.size();
      raw_bytes_ += size;
      if (size < kRawPackBelowBytes) {  // a byte range of the segment's packed dataset
        const std::uint64_t offset = packed_->size();
        if (size) {
          Status packed =
              packed_->Append(segment_->file.get(), raw.bytes.data(), size, segment_->tmp_path);
          if (!packed.ok()) return fail(packed);
        }
        AppendRawRow(batch.key, raw, kRawPackedDataset, offset, size, buffers_.get());
        continue;
      }
      Result<std::string> name =
          WriteRawSnapshot(segment_->file.get(), raw_count_, raw, options_.raw_compression_level,
                           segment_->tmp_path);
      if (!name.ok()) return fail(name.status());
      ++raw_count_;
      AppendRawRow(batch.key, raw, name->c_str(), 0, 0, buffers_.get());
    }
  }
  {
    H5Lock lock;  // full chunks of the streamed tables are written as they fill
    Status appended = AppendBatch(batch, segment_->file.get(), streamed_.get(), segment_->tmp_path,
                                  buffers_.get());
    if (!appended.ok()) return fail(appended);
  }
  if (raw_bytes_ >= rotate_bytes_ || streamed_->stats.rows() >= GroupedStatsTable::kRotateRows) {
    Status flushed = Flush(last_counters_);
    if (rotated.ok()) rotated = flushed;
  }
  return rotated;
}

PipelineCounters Hdf5RunWriter::StoredCounters(const PipelineCounters& counters,
                                               bool include_open) const {
  PipelineCounters stored = counters;
  stored.segments_written = static_cast<std::uint64_t>(segments_written_ + (include_open ? 1 : 0));
  stored.bytes_written = bytes_written_;
  return stored;
}

SegmentHeader Hdf5RunWriter::OpenSegmentHeader() const {
  SegmentHeader header;
  header.rank = options_.info.rank;
  header.world_size = options_.info.world_size;
  header.host = options_.info.host;
  header.segment_index = next_index_;
  header.config_json = options_.info.config_json;
  header.tstat_version = TSTAT_VERSION_STRING;
  header.created_unix_time = segment_created_;
  return header;
}

std::vector<TensorInfo> Hdf5RunWriter::Registry() const {
  std::vector<TensorInfo> registry;
  registry.reserve(registry_.size());
  for (const auto& entry : registry_) registry.push_back(entry.second);
  return registry;
}

Status Hdf5RunWriter::FinishImage(const PipelineCounters& counters) {
  const SegmentHeader header = OpenSegmentHeader();
  const std::vector<TensorInfo> registry = Registry();
  H5Lock lock;
  TSTAT_RETURN_IF_ERROR(packed_->Finish(segment_->file.get(), TmpPath()));
  TSTAT_RETURN_IF_ERROR(WriteSegmentTables(segment_->file.get(), header, registry, *buffers_,
                                           streamed_.get(), StoredCounters(counters, true),
                                           options_.compression_level, TmpPath()));
  TSTAT_RETURN_IF_ERROR(CloseH5File(&segment_->file, TmpPath()));
  // Closed, the end of HDF5's allocations is the file's length.
  segment_->size = static_cast<std::size_t>(segment_->store.end_of_allocation());
  if (segment_->size < kSegmentUserBlock) {
    return Status::Internal(TmpPath() + ": the closed file is shorter than its user block");
  }
  return segment_->store.Finish(segment_->size, kSegmentUserBlock);
}

Status Hdf5RunWriter::Flush(const PipelineCounters& counters) {
  if (closed_) return Status::FailedPrecondition(worker_dir_ + ": writer is closed");
  last_counters_ = counters;
  if (!segment_) return Status::OK();  // nothing written since the last flush
  Status finished = FinishImage(counters);
  if (!finished.ok()) return FailSegment(StoreErrorOr(finished), 0);
  const std::string tmp = TmpPath();
  const std::string final_path = JoinPath(worker_dir_, SegmentFileName(next_index_));
  const std::size_t size = segment_->size;
  segment_.reset();
  Status written = RenameFile(tmp, final_path);
  if (!written.ok()) return FailSegment(written, 0);
  bytes_written_ += size;
  ++segments_written_;
  AppendCatalogFrame(size, StoredCounters(counters, false));
  ++next_index_;
  buffers_->Clear();
  streamed_->stats.Close();  // its rows are in the segment now
  raw_count_ = 0;
  // The segment is complete and visible; only its durability is in question
  // if the directory cannot be synced, so nothing is counted as lost.
  return FsyncPath(worker_dir_);
}

void Hdf5RunWriter::AppendCatalogFrame(std::uint64_t file_bytes, const PipelineCounters& counters) {
  if (!catalog_on_) return;
  CatalogEntry e;
  e.file_bytes = file_bytes;
  e.header = OpenSegmentHeader();
  e.has_config = !catalog_has_config_;
  if (!e.has_config) e.header.config_json.clear();
  e.has_registry = catalog_registry_version_ != registry_version_;
  if (e.has_registry) e.tensors = Registry();
  e.tables.steps = buffers_->steps;
  e.tables.scalars = buffers_->scalars;
  e.tables.drops = buffers_->drops;
  e.tables.raw_index = buffers_->raw_index;
  e.tables.raw_shapes = buffers_->raw_shapes;
  e.counters = counters;
  e.stats_layout = streamed_->stats.layout();
  std::string frame;
  Status s = EncodeCatalogFrame(e, &frame);
  bool cut_back = true;
  const std::string path = JoinPath(worker_dir_, kCatalogFileName);
  if (s.ok()) {
    s = AppendToFile(path, catalog_bytes_ == 0 && !catalog_created_, catalog_bytes_, frame.data(),
                     frame.size(), &cut_back);
  }
  if (!s.ok()) {
    // The segment is written; readers read it without the catalog. Frames
    // after a hole would describe segments the catalog cannot be read up to,
    // so a catalog that cannot take this one takes no more.
    catalog_error_ = s;
    catalog_on_ = false;
    return;
  }
  catalog_created_ = true;
  catalog_bytes_ += frame.size();
  catalog_has_config_ = true;
  catalog_registry_version_ = registry_version_;
}

Status Hdf5RunWriter::Close(const PipelineCounters& counters) {
  if (closed_) return Status::FailedPrecondition(worker_dir_ + ": writer is already closed");
  Status flushed = Flush(counters);
  ClosedMarker marker;
  marker.rank = options_.info.rank;
  marker.world_size = options_.info.world_size;
  marker.host = options_.info.host;
  marker.segments = segments_written_;
  marker.counters = StoredCounters(counters, false);
  last_counters_ = counters;
  Status marked =
      WriteFileAtomically(JoinPath(worker_dir_, kClosedFileName), ClosedMarkerToJson(marker));
  if (marked.ok()) closed_ = true;
  return flushed.ok() ? marked : flushed;
}

}  // namespace tstat::io
