// See segment_file_writer.h.
#include "io/write/segment_file_writer.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>

#include "io/format/segment_schema.h"
#include "io/h5/h5_attribute.h"
#include "io/h5/h5_dataset.h"
#include "io/h5/h5_error.h"
#include "io/h5/h5_file.h"
#include "io/h5/h5_type.h"
#include "io/write/streamed_counts.h"

namespace tstat::io {
namespace {

template <class T>
Status WriteArray(hid_t file, const char* name, hid_t type, const std::vector<T>& values, int level,
                  const std::string& path, ChunkDeflater* deflater = nullptr) {
  if (values.empty()) return Status::OK();
  return WriteNewDataset(file, name, type, type, {values.size()}, values.data(), level, path,
                         deflater);
}

// Count arrays are stored as the narrowest of uint16, uint32 and uint64 that
// holds the segment's largest count (readers get the width they ask for:
// HDF5 converts). Deflate's time grows with the bytes it is given, and the
// counts of tensors below 65,536 elements never need more than 16 bits:
// uint64 counts of 1,000-element tensors were a quarter of the writer's CPU.
// The narrowed copy goes to `scratch`, reused segment after segment (a
// fresh array per flush faulted its pages in every time).
template <class Narrow>
Status WriteNarrowed(hid_t file, const char* name, hid_t type,
                     const std::vector<std::uint64_t>& counts, int level, const std::string& path,
                     ChunkDeflater* deflater, std::vector<Narrow>* scratch) {
  scratch->assign(counts.begin(), counts.end());
  return WriteArray(file, name, type, *scratch, level, path, deflater);
}

Status WriteCountArray(hid_t file, const char* name, const std::vector<std::uint64_t>& counts,
                       int level, const std::string& path, StreamedRows* streamed) {
  std::uint64_t any_bits = 0;
  for (const std::uint64_t c : counts) any_bits |= c;
  ChunkDeflater* z = &streamed->deflater;
  const int width = CountWidthBytes(any_bits);  // the one rule, shared with StreamedCounts
  if (width == 2) {
    return WriteNarrowed(file, name, H5T_NATIVE_UINT16, counts, level, path, z,
                         &streamed->narrow16);
  }
  if (width == 4) {
    return WriteNarrowed(file, name, H5T_NATIVE_UINT32, counts, level, path, z,
                         &streamed->narrow32);
  }
  return WriteArray(file, name, H5T_NATIVE_UINT64, counts, level, path, z);
}

// A table whose string members are stored as wide as `widths` says (the
// longest value written) rather than as wide as the row struct's arrays.
template <class Row>
Status WriteTableOfStrings(hid_t file, const char* name, Result<H5Type> (*type_fn)(),
                           const std::vector<StringWidth>& widths, const std::vector<Row>& rows,
                           int level, const std::string& path) {
  if (rows.empty()) return Status::OK();
  TSTAT_ASSIGN_OR_RETURN(H5Type mem_type, type_fn());
  TSTAT_ASSIGN_OR_RETURN(H5Type file_type, PackedCopyWithStringWidths(mem_type.get(), widths));
  return WriteNewDataset(file, name, file_type.get(), mem_type.get(), {rows.size()}, rows.data(),
                         level, path);
}

Status WriteRegistry(hid_t file, const std::vector<TensorInfo>& registry, int level,
                     const std::string& path) {
  std::vector<TensorRow> rows;
  std::size_t name_width = 1;
  std::vector<std::int64_t> shapes;
  std::vector<std::string> collections;  // distinct, in order of first use
  std::map<std::string, std::uint32_t> collection_index;
  std::vector<TensorCollectionRow> memberships;
  rows.reserve(registry.size());
  for (const TensorInfo& t : registry) {
    TensorRow row{};
    row.id = t.id;
    SetFixedChars(t.name, row.name);
    name_width = std::max(name_width, std::min(t.name.size(), kTensorNameChars));
    row.kind = static_cast<std::uint8_t>(t.kind);
    SetDTypeChars(t.dtype, row.dtype);
    row.space = static_cast<std::uint8_t>(t.space);
    row.rank = static_cast<std::uint32_t>(t.shape.size());
    row.shape_offset = shapes.size();
    shapes.insert(shapes.end(), t.shape.begin(), t.shape.end());
    rows.push_back(row);
    for (const std::string& c : t.collections) {
      auto [it, inserted] =
          collection_index.emplace(c, static_cast<std::uint32_t>(collections.size()));
      if (inserted) collections.push_back(c);
      memberships.push_back(TensorCollectionRow{t.id, it->second});
    }
  }
  TSTAT_RETURN_IF_ERROR(WriteTableOfStrings(file, kTensorsTable, TensorRowType,
                                            {{"name", name_width}}, rows, level, path));
  TSTAT_RETURN_IF_ERROR(WriteArray(file, kTensorShapes, H5T_NATIVE_INT64, shapes, level, path));
  TSTAT_RETURN_IF_ERROR(WriteStringArray(file, kCollections, collections, level, path));
  TSTAT_ASSIGN_OR_RETURN(H5Type membership_type, TensorCollectionRowType());
  return WriteTable(file, kTensorCollectionsTable, membership_type.get(), memberships, level, path);
}

Status WriteAttributes(hid_t file, const SegmentHeader& h, const std::string& path) {
  TSTAT_RETURN_IF_ERROR(WriteStringAttribute(file, "format", kFormatName, path));
  TSTAT_RETURN_IF_ERROR(WriteInt64Attribute(file, "format_version", kFormatVersion, path));
  TSTAT_RETURN_IF_ERROR(WriteInt64Attribute(file, "rank", h.rank, path));
  TSTAT_RETURN_IF_ERROR(WriteInt64Attribute(file, "world_size", h.world_size, path));
  TSTAT_RETURN_IF_ERROR(WriteStringAttribute(file, "host", h.host, path));
  TSTAT_RETURN_IF_ERROR(WriteInt64Attribute(file, "segment_index", h.segment_index, path));
  TSTAT_RETURN_IF_ERROR(WriteStringAttribute(file, "tstat_version", h.tstat_version, path));
  TSTAT_RETURN_IF_ERROR(WriteDoubleAttribute(file, "created_unix_time", h.created_unix_time, path));
  std::vector<HeaderRow> row(1);
  HeaderRow& r = row[0];
  SetFixedChars(kFormatName, r.format);
  r.format_version = kFormatVersion;
  r.rank = h.rank;
  r.world_size = h.world_size;
  SetFixedChars(h.host, r.host);
  r.segment_index = h.segment_index;
  SetFixedChars(h.tstat_version, r.tstat_version);
  r.created_unix_time = h.created_unix_time;
  const auto width = [](const char* s, std::size_t n) {
    return std::max<std::size_t>(strnlen(s, n), 1);
  };
  return WriteTableOfStrings(file, kHeaderTable, HeaderRowType,
                             {{"format", width(r.format, kHeaderFormatChars)},
                              {"host", width(r.host, kHeaderHostChars)},
                              {"tstat_version", width(r.tstat_version, kHeaderVersionChars)}},
                             row, 0, path);
}

}  // namespace

Status WriteSegmentTables(hid_t file, const SegmentHeader& header,
                          const std::vector<TensorInfo>& registry, const SegmentBuffers& b,
                          StreamedRows* streamed, const PipelineCounters& counters, int level,
                          const std::string& path) {
  ChunkDeflater* z = &streamed->deflater;
  TSTAT_RETURN_IF_ERROR(WriteAttributes(file, header, path));
  TSTAT_RETURN_IF_ERROR(WriteStringDataset(file, kConfigDataset, header.config_json, path));
  TSTAT_RETURN_IF_ERROR(WriteRegistry(file, registry, level, path));

#define TSTAT_IO_TABLE(name, type_fn, rows)                                       \
  do {                                                                            \
    TSTAT_ASSIGN_OR_RETURN(H5Type t, type_fn());                                  \
    TSTAT_RETURN_IF_ERROR(WriteTable(file, name, t.get(), rows, level, path, z)); \
  } while (0)
  TSTAT_IO_TABLE(kStepsTable, StepRowType, b.steps);
  TSTAT_RETURN_IF_ERROR(streamed->Finish(file, path));
  TSTAT_IO_TABLE(kLinearHistTable, LinearHistRowType, b.linear_hist);
  TSTAT_IO_TABLE(kLabelsTable, LabelRowType, b.labels);
  TSTAT_IO_TABLE(kSamplesTable, SampleRowType, b.samples);
  TSTAT_IO_TABLE(kDeltaTable, DeltaRowType, b.delta);
  TSTAT_IO_TABLE(kConfusionTable, ConfusionRowType, b.confusion);
  TSTAT_IO_TABLE(kValueCountsTable, ValueCountsRowType, b.value_counts);
  TSTAT_IO_TABLE(kScalarsTable, ScalarRowType, b.scalars);
#undef TSTAT_IO_TABLE
  TSTAT_RETURN_IF_ERROR(
      WriteCountArray(file, kLinearHistCounts, b.linear_hist_counts, level, path, streamed));
  TSTAT_RETURN_IF_ERROR(WriteCountArray(file, kLabelCounts, b.label_counts, level, path, streamed));
  TSTAT_RETURN_IF_ERROR(
      WriteArray(file, kSamplePositions, H5T_NATIVE_INT64, b.sample_positions, level, path, z));
  TSTAT_RETURN_IF_ERROR(
      WriteArray(file, kSampleValues, H5T_NATIVE_DOUBLE, b.sample_values, level, path, z));
  TSTAT_RETURN_IF_ERROR(
      WriteCountArray(file, kConfusionCounts, b.confusion_counts, level, path, streamed));
  TSTAT_RETURN_IF_ERROR(
      WriteArray(file, kCountedValues, H5T_NATIVE_INT64, b.counted_values, level, path, z));
  TSTAT_RETURN_IF_ERROR(
      WriteCountArray(file, kCountedCounts, b.counted_counts, level, path, streamed));

  std::vector<DropRow> drops(b.drops.size());
  std::size_t kind_width = 1, reason_width = 1;
  for (std::size_t i = 0; i < b.drops.size(); ++i) {
    const DropEntry& d = b.drops[i];
    DropRow& row = drops[i];
    row.global_step = d.key.global_step;
    row.mode = static_cast<std::uint8_t>(d.key.mode);
    row.mode_step = d.key.mode_step;
    row.tensor_id = d.drop.tensor_id;
    SetFixedChars(d.drop.kind, row.kind);
    SetFixedChars(d.drop.reason, row.reason);
    row.bytes = d.drop.bytes;
    kind_width = std::max(kind_width, strnlen(row.kind, kDropKindChars));
    reason_width = std::max(reason_width, strnlen(row.reason, kDropReasonChars));
  }
  TSTAT_RETURN_IF_ERROR(WriteTableOfStrings(file, kDropsTable, DropRowType,
                                            {{"kind", kind_width}, {"reason", reason_width}}, drops,
                                            level, path));

  TSTAT_ASSIGN_OR_RETURN(H5Type raw_type, RawIndexRowType());
  TSTAT_RETURN_IF_ERROR(
      WriteTable(file, kRawIndexTable, raw_type.get(), b.raw_index, level, path, z));
  TSTAT_RETURN_IF_ERROR(
      WriteArray(file, kRawShapes, H5T_NATIVE_INT64, b.raw_shapes, level, path, z));

  const PipelineCounters& c = counters;
  std::vector<CountersRow> counter_row{CountersRow{
      c.steps_captured, c.records_written, c.bytes_written, c.raw_dropped, c.raw_dropped_bytes,
      c.records_lost, c.write_errors, c.stats_waits, c.stats_wait_seconds, c.queue_high_water,
      c.queue_high_water_bytes, c.segments_written, c.capture.steps, c.capture.steps_saved,
      c.capture.step_seconds, c.capture.capture_seconds}};
  TSTAT_ASSIGN_OR_RETURN(H5Type counters_type, CountersRowType());
  return WriteTable(file, kCountersTable, counters_type.get(), counter_row, level, path);
}

Status ValidateRawSnapshot(const RawSnapshot& raw) {
  const std::string what = "raw snapshot of tensor id " + std::to_string(raw.tensor_id);
  if (!IsValidDType(raw.dtype)) return Status::InvalidArgument(what + ": invalid dtype");
  const std::size_t bytes = raw.bytes.size();
  const std::size_t element = DTypeSize(raw.dtype);
  if (bytes % element != 0) {
    return Status::InvalidArgument(what + ": " + std::to_string(bytes) +
                                   " bytes is not a whole number of " + DTypeName(raw.dtype) +
                                   " elements");
  }
  if (!raw.shape.empty()) {
    const std::optional<std::uint64_t> shape_bytes = ShapeBytes(raw.shape, element);
    if (!shape_bytes) {
      return Status::InvalidArgument(what + ": the shape has a negative dimension or more than " +
                                     "2^64 bytes of elements");
    }
    if (*shape_bytes != bytes) {
      return Status::InvalidArgument(
          what + ": shape holds " + std::to_string(*shape_bytes / element) +
          " elements but the bytes hold " + std::to_string(bytes / element));
    }
  }
  return Status::OK();
}

Status EnsureRawGroup(hid_t file, const std::string& path) {
  TSTAT_ASSIGN_OR_RETURN(bool has_group, H5LinkExists(file, kRawGroup, path));
  if (!has_group) {
    TSTAT_ASSIGN_OR_RETURN(H5Group group, CreateH5Group(file, kRawGroup, path));
  }
  return Status::OK();
}

Status WritePackedRawSnapshots(hid_t file, const std::vector<std::uint8_t>& bytes, int level,
                               const std::string& path) {
  if (bytes.empty()) return Status::OK();
  TSTAT_RETURN_IF_ERROR(EnsureRawGroup(file, path));
  return WriteNewDataset(file, kRawPackedDataset, H5T_STD_U8LE, H5T_NATIVE_UINT8,
                         {static_cast<hsize_t>(bytes.size())}, bytes.data(), level, path);
}

Result<std::string> WriteRawSnapshot(hid_t file, std::uint64_t index, const RawSnapshot& raw,
                                     int level, const std::string& path) {
  TSTAT_RETURN_IF_ERROR(EnsureRawGroup(file, path));
  char name[48];
  std::snprintf(name, sizeof(name), "%s/%06llu", kRawGroup, static_cast<unsigned long long>(index));
  const std::size_t numel = raw.bytes.size() / DTypeSize(raw.dtype);
  std::vector<hsize_t> dims;
  bool natural = !raw.shape.empty();
  for (std::int64_t d : raw.shape) natural = natural && d > 0;
  if (natural) {
    for (std::int64_t d : raw.shape) dims.push_back(static_cast<hsize_t>(d));
  } else {
    dims.push_back(numel);
  }
  const hid_t type = RawStorageType(raw.dtype);
  const void* data = numel ? raw.bytes.data() : nullptr;
  TSTAT_RETURN_IF_ERROR(WriteNewDataset(file, name, type, type, dims, data, level, path));
  H5DataSet dataset(H5Dopen2(file, name, H5P_DEFAULT));
  if (!dataset.valid()) return H5Failure(StatusCode::kIoError, path + ": reopening " + name);
  TSTAT_RETURN_IF_ERROR(WriteStringAttribute(dataset.get(), "dtype", DTypeName(raw.dtype), path));
  return std::string(name);
}

}  // namespace tstat::io
