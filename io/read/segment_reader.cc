// See segment_reader.h.
#include "io/read/segment_reader.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <unordered_map>

#include "io/format/run_layout.h"
#include "io/format/segment_schema.h"
#include "io/h5/h5_attribute.h"
#include "io/h5/h5_chunk_check.h"
#include "io/h5/h5_dataset.h"
#include "io/h5/h5_error.h"
#include "io/h5/h5_file.h"
#include "io/h5/h5_lock.h"
#include "io/h5/h5_type_check.h"
#include "io/h5/segment_seal.h"
#include "io/read/segment_legacy_reader.h"
#include "io/read/tensor_id_set.h"

namespace tstat::io {
namespace {

StepKey KeyOf(std::int64_t global_step, std::uint8_t mode, std::int64_t mode_step) {
  return StepKey{global_step, static_cast<Mode>(mode), mode_step};
}

bool IsLegacy(std::int64_t format_version) { return format_version <= kNewestLegacyFormatVersion; }

// A version 3 segment's header comes from its `header` table; its
// attributes are never opened (segment_schema.h says why). Older segments
// have only attributes, read when legacy segments are allowed.
Status ReadLegacyHeader(hid_t file, const std::string& path, SegmentHeader* h, std::int64_t* rank,
                        std::int64_t* world) {
  TSTAT_ASSIGN_OR_RETURN(std::int64_t version, ReadInt64Attribute(file, "format_version", path));
  if (version < kOldestReadableFormatVersion || version > kNewestLegacyFormatVersion) {
    return Status::Corruption(path + ": no header table, and format_version " +
                              std::to_string(version) + " in its attributes");
  }
  TSTAT_ASSIGN_OR_RETURN(std::string format, ReadStringAttribute(file, "format", path, true));
  if (format != kFormatName) return Status::Corruption(path + ": not a tstat segment");
  h->format_version = version;
  TSTAT_ASSIGN_OR_RETURN(*rank, ReadInt64Attribute(file, "rank", path));
  TSTAT_ASSIGN_OR_RETURN(*world, ReadInt64Attribute(file, "world_size", path));
  TSTAT_ASSIGN_OR_RETURN(h->host, ReadStringAttribute(file, "host", path, true));
  TSTAT_ASSIGN_OR_RETURN(h->segment_index, ReadInt64Attribute(file, "segment_index", path));
  TSTAT_ASSIGN_OR_RETURN(h->tstat_version, ReadStringAttribute(file, "tstat_version", path, true));
  TSTAT_ASSIGN_OR_RETURN(h->created_unix_time,
                         ReadDoubleAttribute(file, "created_unix_time", path));
  TSTAT_ASSIGN_OR_RETURN(h->config_json, ReadStringDataset(file, kConfigDataset, path, true));
  return Status::OK();
}

Status ReadHeader(hid_t file, const std::string& path, SegmentHeader* h) {
  std::int64_t rank = 0, world = 0;
  TSTAT_ASSIGN_OR_RETURN(bool has_header, H5LinkExists(file, kHeaderTable, path));
  if (!has_header) {
    if (!LegacySegmentsAllowed()) return LegacySegmentRefused(path);
    TSTAT_RETURN_IF_ERROR(ReadLegacyHeader(file, path, h, &rank, &world));
  } else {
    TSTAT_ASSIGN_OR_RETURN(H5Type type, HeaderRowType());
    std::vector<HeaderRow> rows;
    TSTAT_RETURN_IF_ERROR(ReadTable(file, kHeaderTable, type.get(), &rows, path));
    if (rows.size() != 1) {
      return Status::Corruption(path + ": header table of " + std::to_string(rows.size()) +
                                " rows");
    }
    const HeaderRow& r = rows[0];
    if (FixedChars(r.format) != kFormatName) {
      return Status::Corruption(path + ": not a tstat segment");
    }
    // Versions before 3 have no header table.
    if (r.format_version <= kNewestLegacyFormatVersion || r.format_version > kFormatVersion) {
      return Status::NotSupported(path + ": format_version " + std::to_string(r.format_version) +
                                  " (this reader knows versions " +
                                  std::to_string(kOldestReadableFormatVersion) + " to " +
                                  std::to_string(kFormatVersion) + ")");
    }
    h->format_version = r.format_version;
    rank = r.rank;
    world = r.world_size;
    h->host = FixedChars(r.host);
    h->segment_index = r.segment_index;
    h->tstat_version = FixedChars(r.tstat_version);
    h->created_unix_time = r.created_unix_time;
    TSTAT_ASSIGN_OR_RETURN(h->config_json, ReadStringDataset(file, kConfigDataset, path));
  }
  if (world < 1 || rank < 0 || rank >= world || world > kMaxWorldSize) {
    return Status::Corruption(path + ": invalid rank/world_size attributes");
  }
  h->rank = static_cast<int>(rank);
  h->world_size = static_cast<int>(world);
  return Status::OK();
}

// The stored form of the registry's datasets (tensors, tensor_shapes,
// collections, tensor_collections): each one's name, encoded type and rows
// as stored, read without conversion. Two segments whose keys are equal hold
// the same registry. nullopt when a dataset holds variable-length data.
Result<std::optional<std::vector<unsigned char>>> StoredRegistryKey(hid_t file,
                                                                    const std::string& path) {
  std::vector<unsigned char> key;
  for (const char* name : {kTensorsTable, kTensorShapes, kCollections, kTensorCollectionsTable}) {
    key.insert(key.end(), name, name + std::strlen(name) + 1);
    TSTAT_ASSIGN_OR_RETURN(bool exists, H5LinkExists(file, name, path));
    if (!exists) continue;
    H5Type stored;
    {
      TSTAT_ASSIGN_OR_RETURN(H5DataSet d, OpenH5Dataset(file, name, path));
      stored = H5Type(H5Dget_type(d.get()));
    }
    if (!stored.valid()) return H5Failure(StatusCode::kCorruption, path + ": type of " + name);
    if (HasVariableLengthParts(stored.get())) return std::optional<std::vector<unsigned char>>();
    std::size_t encoded = 0;
    if (H5Tencode(stored.get(), nullptr, &encoded) < 0 || encoded == 0) {
      return H5Failure(StatusCode::kCorruption, path + ": type of " + name);
    }
    const std::size_t at = key.size();
    key.resize(at + encoded);
    if (H5Tencode(stored.get(), key.data() + at, &encoded) < 0) {
      return H5Failure(StatusCode::kCorruption, path + ": type of " + name);
    }
    const std::size_t row = H5Tget_size(stored.get());
    const std::size_t rows_at = key.size();
    TSTAT_RETURN_IF_ERROR(ReadTableInto(
        file, name, stored.get(), row,
        [&](std::size_t count) -> void* {
          key.resize(rows_at + count * row);
          return key.data() + rows_at;
        },
        path));
  }
  return std::optional<std::vector<unsigned char>>(std::move(key));
}

Status ReadRegistry(hid_t file, const std::string& path, bool legacy,
                    std::vector<TensorInfo>* tensors) {
  std::vector<TensorRow> rows;
  if (legacy) {
    TSTAT_RETURN_IF_ERROR(ReadLegacyTensorRows(file, path, &rows));
  } else {
    TSTAT_ASSIGN_OR_RETURN(H5Type type, TensorRowType());
    TSTAT_RETURN_IF_ERROR(ReadTable(file, kTensorsTable, type.get(), &rows, path));
  }
  std::vector<std::int64_t> shapes;
  Status bad = ReadTable(file, kTensorShapes, H5T_NATIVE_INT64, &shapes, path);
  for (const TensorRow& r : rows) {
    TensorInfo t;
    t.id = r.id;
    t.name = FixedChars(r.name);
    t.kind = r.kind == 1 ? TensorKind::kScalar : TensorKind::kTensor;
    t.space = r.space == 1 ? MemorySpace::kCuda : MemorySpace::kHost;
    if (bad.ok() && !ParseDTypeChars(r.dtype, &t.dtype)) {
      bad = Status::Corruption(path + ": tensor '" + t.name + "' has an unknown dtype");
    }
    if (bad.ok() && (r.shape_offset > shapes.size() || r.rank > shapes.size() - r.shape_offset)) {
      bad = Status::Corruption(path + ": tensor '" + t.name + "' shape outside tensor_shapes");
    }
    if (bad.ok()) {
      const auto first = shapes.begin() + static_cast<std::ptrdiff_t>(r.shape_offset);
      t.shape.assign(first, first + r.rank);
    }
    tensors->push_back(std::move(t));
  }
  TSTAT_RETURN_IF_ERROR(bad);

  TSTAT_ASSIGN_OR_RETURN(std::vector<std::string> collections,
                         ReadStringArray(file, kCollections, kCollectionNameChars, path, legacy));

  TSTAT_ASSIGN_OR_RETURN(H5Type member_type, TensorCollectionRowType());
  std::vector<TensorCollectionRow> members;
  TSTAT_RETURN_IF_ERROR(
      ReadTable(file, kTensorCollectionsTable, member_type.get(), &members, path));
  std::unordered_map<std::uint32_t, std::size_t> by_id;
  for (std::size_t i = 0; i < tensors->size(); ++i) by_id[(*tensors)[i].id] = i;
  for (const TensorCollectionRow& m : members) {
    auto it = by_id.find(m.tensor_id);
    if (it == by_id.end() || m.collection >= collections.size()) {
      return Status::Corruption(path + ": tensor_collections row outside the registry");
    }
    (*tensors)[it->second].collections.push_back(collections[m.collection]);
  }
  return Status::OK();
}

template <class T>
Status ReadArray(hid_t file, const char* name, hid_t type, std::vector<T>* out,
                 const std::string& path) {
  return ReadTable(file, name, type, out, path);
}

Status ReadRawIndex(hid_t file, const std::string& path, SegmentBuffers* b) {
  TSTAT_ASSIGN_OR_RETURN(H5Type raw_type, RawIndexRowType());
  TSTAT_RETURN_IF_ERROR(ReadTable(file, kRawIndexTable, raw_type.get(), &b->raw_index, path));
  return ReadTable(file, kRawShapes, H5T_NATIVE_INT64, &b->raw_shapes, path);
}

// The tables of per-record data: stats, histograms, per-channel stats,
// labels, samples, deltas, confusion matrices, value counts. X(name, mem type
// expression, rows) for each; count arrays by ARRAY(name, native type, rows).
#define TSTAT_IO_RECORD_TABLES(X, ARRAY, b)                           \
  X(kStatsTable, StatsRowType(), b.stats)                             \
  X(kExpHistTable, ExpHistRowType(), b.exp_hist)                      \
  X(kLinearHistTable, LinearHistRowType(), b.linear_hist)             \
  X(kChannelsTable, ChannelRowType(), b.channels)                     \
  X(kLabelsTable, LabelRowType(), b.labels)                           \
  X(kSamplesTable, SampleRowType(), b.samples)                        \
  X(kDeltaTable, DeltaRowType(), b.delta)                             \
  X(kConfusionTable, ConfusionRowType(), b.confusion)                 \
  X(kValueCountsTable, ValueCountsRowType(), b.value_counts)          \
  ARRAY(kStatsCaptureIndex, H5T_NATIVE_UINT32, b.stats_capture_index) \
  ARRAY(kExpHistCounts, H5T_NATIVE_UINT64, b.exp_hist_counts)         \
  ARRAY(kLinearHistCounts, H5T_NATIVE_UINT64, b.linear_hist_counts)   \
  ARRAY(kLabelCounts, H5T_NATIVE_UINT64, b.label_counts)              \
  ARRAY(kSamplePositions, H5T_NATIVE_INT64, b.sample_positions)       \
  ARRAY(kSampleValues, H5T_NATIVE_DOUBLE, b.sample_values)            \
  ARRAY(kConfusionCounts, H5T_NATIVE_UINT64, b.confusion_counts)      \
  ARRAY(kCountedValues, H5T_NATIVE_INT64, b.counted_values)           \
  ARRAY(kCountedCounts, H5T_NATIVE_UINT64, b.counted_counts)

// Of exp_hist's rows those of `global_step`, and the range of
// exp_hist_counts they point into, their offsets made relative to it.
Status ReadStepExpHistCounts(hid_t file, const std::string& path, std::int64_t global_step,
                             SegmentBuffers* b) {
  std::vector<ExpHistRow>& rows = b->exp_hist;
  rows.erase(std::remove_if(rows.begin(), rows.end(),
                            [&](const ExpHistRow& r) { return r.global_step != global_step; }),
             rows.end());
  b->exp_hist_counts.clear();
  if (rows.empty()) return Status::OK();
  std::uint64_t lo = UINT64_MAX, hi = 0;
  for (const ExpHistRow& r : rows) {
    lo = std::min(lo, r.offset);
    // Offsets past any file's counts are caught by the range read.
    hi = std::max(hi, r.offset + std::min<std::uint64_t>(r.num_bins, UINT64_MAX - r.offset));
  }
  std::vector<std::uint64_t>& counts = b->exp_hist_counts;
  const Status read = ReadTableRange(
      file, kExpHistCounts, H5T_NATIVE_UINT64, sizeof(std::uint64_t), lo, hi - lo,
      [&counts](std::size_t n) -> void* {
        counts.resize(n);
        return counts.data();
      },
      path);
  if (!read.ok()) return read.WithContext("exp_hist's bins of step " + std::to_string(global_step));
  for (ExpHistRow& r : rows) r.offset -= lo;
  return Status::OK();
}

// The record tables `read` asks for.
Status ReadRecordTables(hid_t file, const std::string& path, SegmentBuffers* out,
                        RecordTablesRead read = {}) {
  SegmentBuffers& b = *out;
  const auto wanted = [read](const char* name) {
    if (!read.stats && std::strcmp(name, kStatsTable) == 0) return false;
    if (read.exp_hist_step && std::strcmp(name, kExpHistCounts) == 0) return false;  // below
    return read.exponent_histograms ||
           (std::strcmp(name, kExpHistTable) != 0 && std::strcmp(name, kExpHistCounts) != 0);
  };
#define TSTAT_IO_READ(name, type_expr, rows)                            \
  do {                                                                  \
    if (!wanted(name)) break;                                           \
    TSTAT_ASSIGN_OR_RETURN(H5Type t, type_expr);                        \
    TSTAT_RETURN_IF_ERROR(ReadTable(file, name, t.get(), &rows, path)); \
  } while (0);
#define TSTAT_IO_READ_ARRAY(name, type, rows) \
  if (wanted(name)) TSTAT_RETURN_IF_ERROR(ReadArray(file, name, type, &rows, path));
  TSTAT_IO_RECORD_TABLES(TSTAT_IO_READ, TSTAT_IO_READ_ARRAY, b)
#undef TSTAT_IO_READ
#undef TSTAT_IO_READ_ARRAY
  if (read.exponent_histograms && read.exp_hist_step) {
    return ReadStepExpHistCounts(file, path, *read.exp_hist_step, &b);
  }
  return Status::OK();
}

// A dataset's metadata as libhdf5 parses it to read it (its type checked
// against `mem_type`, unless null; its storage; its chunk index), without
// reading its data.
Status WalkDataset(hid_t file, const char* name, hid_t mem_type, const std::string& path) {
  TSTAT_ASSIGN_OR_RETURN(bool exists, H5LinkExists(file, name, path));
  if (!exists) return Status::OK();
  const std::string what = path + ": dataset '" + name + "'";
  TSTAT_ASSIGN_OR_RETURN(H5DataSet dataset, OpenH5Dataset(file, name, path));
  TSTAT_RETURN_IF_ERROR(H5DatasetDims(dataset.get(), path).status());
  H5Type stored(H5Dget_type(dataset.get()));
  if (!stored.valid()) return H5Failure(StatusCode::kCorruption, what + ": its type");
  if (mem_type >= 0) TSTAT_RETURN_IF_ERROR(CheckReadableAs(stored.get(), mem_type, what));
  H5Plist dcpl(H5Dget_create_plist(dataset.get()));
  if (dcpl.valid() && H5Pget_layout(dcpl.get()) == H5D_CHUNKED) {
    return WalkChunkIndex(dataset.get(), what);
  }
  return CheckStorageHoldsElements(dataset.get(), what);
}

// Without `stats_table`, the stats table's metadata is not walked (a reader
// that decodes its chunks itself, from the catalog's layout, never hands it
// to HDF5).
Status WalkRecordTables(hid_t file, const std::string& path, bool stats_table = true) {
#define TSTAT_IO_WALK(name, type_expr, rows)                        \
  do {                                                              \
    if (!stats_table && std::strcmp(name, kStatsTable) == 0) break; \
    TSTAT_ASSIGN_OR_RETURN(H5Type t, type_expr);                    \
    TSTAT_RETURN_IF_ERROR(WalkDataset(file, name, t.get(), path));  \
  } while (0);
#define TSTAT_IO_WALK_ARRAY(name, type, rows) \
  TSTAT_RETURN_IF_ERROR(WalkDataset(file, name, type, path));
  TSTAT_IO_RECORD_TABLES(TSTAT_IO_WALK, TSTAT_IO_WALK_ARRAY, SegmentBuffers())
#undef TSTAT_IO_WALK
#undef TSTAT_IO_WALK_ARRAY
  return Status::OK();
}

// The small tables: steps, scalars, drops and the raw index.
Status ReadStepTables(hid_t file, const std::string& path, std::int64_t format_version,
                      SegmentBuffers* b) {
  {
    TSTAT_ASSIGN_OR_RETURN(H5Type t, StepRowType());
    TSTAT_RETURN_IF_ERROR(ReadTable(file, kStepsTable, t.get(), &b->steps, path));
  }
  {
    TSTAT_ASSIGN_OR_RETURN(H5Type t, ScalarRowType());
    TSTAT_RETURN_IF_ERROR(ReadTable(file, kScalarsTable, t.get(), &b->scalars, path));
  }
  std::vector<DropRow> drops;
  if (IsLegacy(format_version)) {
    TSTAT_RETURN_IF_ERROR(ReadLegacyDropRows(file, path, &drops));
  } else {
    TSTAT_ASSIGN_OR_RETURN(H5Type drop_type, DropRowType());
    TSTAT_RETURN_IF_ERROR(ReadTable(file, kDropsTable, drop_type.get(), &drops, path));
  }
  for (const DropRow& d : drops) {
    b->drops.push_back(
        DropEntry{KeyOf(d.global_step, d.mode, d.mode_step),
                  DropRecord{d.tensor_id, FixedChars(d.kind), FixedChars(d.reason), d.bytes}});
  }

  return format_version == 1 ? ReadRawIndexV1(file, path, b) : ReadRawIndex(file, path, b);
}

// Every row of `table` has a valid mode and a tensor id `known` accepts.
// Rows of one tensor come together (format 4 groups stats rows by tensor,
// capture order repeats tensors in the same order): `known` is asked once
// per change of id, not per row.
template <class Row, class Known>
Status CheckRowKeys(const std::vector<Row>& rows, const char* table, const Known& known,
                    const std::string& path) {
  bool have_last = false;
  std::uint32_t last = 0;
  for (const Row& r : rows) {
    if (!IsStoredMode(r.mode)) return Status::Corruption(path + ": " + table + ": invalid mode");
    if (have_last && r.tensor_id == last) continue;
    if (!known(r.tensor_id)) {
      return Status::Corruption(path + ": " + table + ": tensor id not in the registry");
    }
    have_last = true;
    last = r.tensor_id;
  }
  return Status::OK();
}

}  // namespace

namespace {

// ValidateSegmentTables with `known` a callable inlined into the per-row
// loops (a std::function call per row showed in `tstat check`'s profile).
template <class Known>
Status ValidateTables(const SegmentBuffers& b, const Known& known, const std::string& path) {
  auto bad = [&](const std::string& what) { return Status::Corruption(path + ": " + what); };
  auto fits = [](std::uint64_t offset, std::uint64_t n, std::size_t size) {
    return offset <= size && n <= size - offset;
  };
  for (const StepRow& r : b.steps)
    if (!IsStoredMode(r.mode)) return bad("steps: invalid mode");
  for (const DropEntry& d : b.drops)
    if (!IsStoredMode(static_cast<std::uint8_t>(d.key.mode))) return bad("drops: invalid mode");
#define TSTAT_IO_CHECK_KEYS(rows, table) \
  TSTAT_RETURN_IF_ERROR(CheckRowKeys(rows, table, known, path));
  TSTAT_IO_CHECK_KEYS(b.stats, "stats")
  TSTAT_IO_CHECK_KEYS(b.exp_hist, "exp_hist")
  TSTAT_IO_CHECK_KEYS(b.linear_hist, "linear_hist")
  TSTAT_IO_CHECK_KEYS(b.channels, "channels")
  TSTAT_IO_CHECK_KEYS(b.labels, "labels")
  TSTAT_IO_CHECK_KEYS(b.samples, "samples")
  TSTAT_IO_CHECK_KEYS(b.delta, "delta")
  TSTAT_IO_CHECK_KEYS(b.confusion, "confusion")
  TSTAT_IO_CHECK_KEYS(b.value_counts, "value_counts")
#undef TSTAT_IO_CHECK_KEYS
  if (!b.stats_capture_index.empty() && b.stats_capture_index.size() != b.stats.size()) {
    return bad("stats_capture_index and stats differ in length");
  }
  // One row per channel of a record: a channel index past the table's rows
  // is crafted (the index sizes the reader's per-record channel vector).
  for (const ChannelRow& r : b.channels) {
    if (r.channel >= b.channels.size()) {
      return bad("channels: channel " + std::to_string(r.channel) + " in a table of " +
                 std::to_string(b.channels.size()) + " rows");
    }
  }
  for (const ScalarRow& r : b.scalars) {
    if (!IsStoredMode(r.mode) || !known(r.scalar_id)) return bad("scalars: invalid row");
  }
  for (const RawIndexRow& r : b.raw_index) {
    if (!IsStoredMode(r.mode) || !known(r.tensor_id)) return bad("raw_index: invalid row");
    if (!fits(r.shape_offset, r.rank, b.raw_shapes.size())) {
      return bad("raw_index: row with a shape outside raw_shapes");
    }
    DType dtype;
    if (!ParseDTypeChars(r.dtype, &dtype)) return bad("raw_index: row with an unknown dtype");
    if (RawDatasetName(r) == kRawPackedDataset) {
      if (r.byte_count % DTypeSize(dtype) != 0 || r.byte_offset > UINT64_MAX - r.byte_count) {
        return bad("raw_index: packed byte range does not hold whole elements");
      }
      const std::vector<std::int64_t> shape = RawShape(r, b.raw_shapes);
      if (!shape.empty()) {
        const std::optional<std::uint64_t> shape_bytes = ShapeBytes(shape, DTypeSize(dtype));
        if (!shape_bytes) return bad("raw_index: negative or overflowing shape");
        if (*shape_bytes != r.byte_count) {
          return bad("raw_index: packed byte count does not match the shape");
        }
      }
    } else if (r.byte_offset != 0 || r.byte_count != 0) {
      return bad("raw_index: byte range on a dataset that is not packed");
    }
  }
  for (const ExpHistRow& r : b.exp_hist) {
    if (r.first_bin + r.num_bins > kExpHistBins ||
        !fits(r.offset, r.num_bins, b.exp_hist_counts.size()))
      return bad("exp_hist: bins outside exp_hist_counts");
  }
  for (const LinearHistRow& r : b.linear_hist) {
    if (!fits(r.offset, r.num_bins, b.linear_hist_counts.size()))
      return bad("linear_hist: bins outside linear_hist_counts");
  }
  for (const LabelRow& r : b.labels) {
    if (!fits(r.offset, r.num_classes, b.label_counts.size()))
      return bad("labels: counts outside label_counts");
  }
  if (b.sample_positions.size() != b.sample_values.size()) {
    return bad("sample_positions and sample_values differ in length");
  }
  for (const ConfusionRow& r : b.confusion) {
    const std::uint64_t cells = static_cast<std::uint64_t>(r.classes) * r.classes;
    if (r.classes > (1u << 16) || !fits(r.offset, cells, b.confusion_counts.size()))
      return bad("confusion: counts outside confusion_counts");
  }
  if (b.counted_values.size() != b.counted_counts.size()) {
    return bad("value_counts_values and value_counts_counts differ in length");
  }
  for (const ValueCountsRow& r : b.value_counts) {
    if (!fits(r.offset, r.num_values, b.counted_values.size()))
      return bad("value_counts: values outside value_counts_values");
  }
  for (const SampleRow& r : b.samples) {
    if (!fits(r.offset, r.num_values, b.sample_values.size()))
      return bad("samples: values outside sample_values");
  }
  return Status::OK();
}

}  // namespace

Status ValidateSegmentTables(const SegmentBuffers& b,
                             const std::function<bool(std::uint32_t)>& known,
                             const std::string& path) {
  return ValidateTables(b, known, path);
}

namespace {

// Cross-checks rows against each other and the registry.
Status Validate(const SegmentContents& s, const std::string& path) {
  TensorIdSet ids;
  for (const TensorInfo& t : s.tensors) ids.Insert(t.id);
  return ValidateTables(
      s.tables, [&ids](std::uint32_t id) { return ids.Contains(id); }, path);
}

// What of a segment is read besides its header, registry, steps, scalars,
// drops, raw index and counters.
// kWalkRecords: kWalk without what only a read of the metadata parses (the
// registry, the counters), for a segment whose records alone will be read;
// kWalkRecordsButStats: without the stats table's too.
enum class RecordTables { kRead, kWalk, kWalkRecords, kWalkRecordsButStats, kSkip };

// The header and the stats table; its rows' tensor ids checked with
// `known` (the registry the caller read when it opened the run) instead of
// reading the segment's registry again.
Result<SegmentContents> ReadOpenSegmentStats(hid_t file, const std::string& path,
                                             const std::function<bool(std::uint32_t)>& known) {
  SegmentContents s;
  TSTAT_RETURN_IF_ERROR(ReadHeader(file, path, &s.header));
  TSTAT_ASSIGN_OR_RETURN(H5Type t, StatsRowType());
  TSTAT_RETURN_IF_ERROR(ReadTable(file, kStatsTable, t.get(), &s.tables.stats, path));
  TSTAT_RETURN_IF_ERROR(CheckRowKeys(s.tables.stats, "stats", known, path));
  return s;
}

// ReadSegmentRecords of the open segment.
Result<SegmentContents> ReadOpenSegmentRecords(hid_t file, const std::string& path,
                                               const std::function<bool(std::uint32_t)>& known,
                                               SegmentBuffers* reuse, RecordTablesRead read) {
  SegmentContents s;
  if (reuse != nullptr) {
    s.tables = std::move(*reuse);
    s.tables.Clear();
  }
  TSTAT_RETURN_IF_ERROR(ReadHeader(file, path, &s.header));
  TSTAT_RETURN_IF_ERROR(ReadStepTables(file, path, s.header.format_version, &s.tables));
  TSTAT_RETURN_IF_ERROR(ReadRecordTables(file, path, &s.tables, read));
  if (read.stats) {
    TSTAT_RETURN_IF_ERROR(ValidateTables(s.tables, known, path));
    return s;
  }
  // The stats rows the caller reads are checked against their positions
  // there (the table is empty here).
  std::vector<std::uint32_t> positions = std::move(s.tables.stats_capture_index);
  s.tables.stats_capture_index.clear();
  TSTAT_RETURN_IF_ERROR(ValidateTables(s.tables, known, path));
  s.tables.stats_capture_index = std::move(positions);
  return s;
}

// The registry of the open segment into `tensors`: from `memo` when the
// segment stores exactly the registry the memo decoded last, else decoded
// (and remembered).
Status ReadRegistryWithMemo(hid_t file, const std::string& path, bool legacy, RegistryMemo* memo,
                            std::vector<TensorInfo>* tensors) {
  if (memo == nullptr || legacy) return ReadRegistry(file, path, legacy, tensors);
  TSTAT_ASSIGN_OR_RETURN(std::optional<std::vector<unsigned char>> key,
                         StoredRegistryKey(file, path));
  if (key && memo->valid && *key == memo->key) {
    *tensors = memo->tensors;
    ++memo->hits;
    return Status::OK();
  }
  memo->valid = false;
  TSTAT_RETURN_IF_ERROR(ReadRegistry(file, path, legacy, tensors));
  if (key) {
    memo->key = std::move(*key);
    memo->tensors = *tensors;
    memo->valid = true;
  }
  return Status::OK();
}

Result<SegmentContents> ReadOpenSegment(hid_t file, const std::string& path, RecordTables records,
                                        RegistryMemo* memo = nullptr,
                                        SegmentBuffers* reuse = nullptr) {
  SegmentContents s;
  if (reuse != nullptr) {
    s.tables = std::move(*reuse);
    s.tables.Clear();
  }
  TSTAT_RETURN_IF_ERROR(ReadHeader(file, path, &s.header));
  const bool records_only =
      records == RecordTables::kWalkRecords || records == RecordTables::kWalkRecordsButStats;
  const bool walk = records == RecordTables::kWalk || records_only;
  if (!records_only) {
    TSTAT_RETURN_IF_ERROR(
        ReadRegistryWithMemo(file, path, IsLegacy(s.header.format_version), memo, &s.tensors));
  }
  TSTAT_RETURN_IF_ERROR(ReadStepTables(file, path, s.header.format_version, &s.tables));
  if (records == RecordTables::kRead) {
    TSTAT_RETURN_IF_ERROR(ReadRecordTables(file, path, &s.tables));
  } else if (walk) {
    TSTAT_RETURN_IF_ERROR(
        WalkRecordTables(file, path, records != RecordTables::kWalkRecordsButStats));
    for (const RawIndexRow& r : s.tables.raw_index) {
      const std::string name = RawDatasetName(r);
      TSTAT_RETURN_IF_ERROR(WalkDataset(file, name.c_str(), -1, path));
    }
  }
  if (records_only) return s;  // parsed: what it holds is not used
  TSTAT_ASSIGN_OR_RETURN(H5Type counters_type, CountersRowType());
  std::vector<CountersRow> counters;
  TSTAT_RETURN_IF_ERROR(ReadTable(file, kCountersTable, counters_type.get(), &counters, path));
  if (!counters.empty()) {
    const CountersRow& c = counters.back();
    PipelineCounters& p = s.counters.emplace();
    p.steps_captured = c.steps_captured;
    p.records_written = c.records_written;
    p.bytes_written = c.bytes_written;
    p.raw_dropped = c.raw_dropped;
    p.raw_dropped_bytes = c.raw_dropped_bytes;
    p.records_lost = c.records_lost;
    p.write_errors = c.write_errors;
    p.stats_waits = c.stats_waits;
    p.stats_wait_seconds = c.stats_wait_seconds;
    p.queue_high_water = c.queue_high_water;
    p.queue_high_water_bytes = c.queue_high_water_bytes;
    p.segments_written = c.segments_written;
    p.capture = CaptureTotals{c.capture_steps, c.capture_steps_saved, c.capture_step_seconds,
                              c.capture_seconds};
  }
  TSTAT_RETURN_IF_ERROR(Validate(s, path));
  return s;
}

}  // namespace

namespace {

// `read(file)` of the segment at `path`, its seal verified before HDF5
// opens it (HDF5 lock held).
template <class Read>
Result<SegmentContents> ReadSealedSegment(const std::string& path, Read&& read,
                                          bool seal_verified = false) {
  if (!seal_verified) TSTAT_RETURN_IF_ERROR(VerifySegmentSeal(path));
  TSTAT_ASSIGN_OR_RETURN(H5File file, OpenH5FileReadOnly(path));
  Result<SegmentContents> contents = read(file.get());
  Status closed = CloseH5File(&file, path);
  if (!contents.ok()) return contents.status();
  if (!closed.ok()) return Status::Corruption(closed.message());
  return contents;
}

Result<SegmentContents> ReadSegmentLocked(const std::string& path, RecordTables records,
                                          RegistryMemo* memo = nullptr,
                                          SegmentBuffers* reuse = nullptr,
                                          bool seal_verified = false) {
  return ReadSealedSegment(
      path, [&](hid_t file) { return ReadOpenSegment(file, path, records, memo, reuse); },
      seal_verified);
}

}  // namespace

Result<SegmentContents> ReadSegment(const std::string& path, SegmentBuffers* reuse) {
  H5Lock lock;
  return ReadSegmentLocked(path, RecordTables::kRead, nullptr, reuse);
}

Result<SegmentContents> ReadSegmentLocked(const std::string& path) {
  return ReadSegmentLocked(path, RecordTables::kRead);
}

Result<SegmentContents> ReadSegmentMetadata(const std::string& path, RegistryMemo* memo) {
  H5Lock lock;
  return ReadSegmentLocked(path, RecordTables::kSkip, memo);
}

Result<SegmentContents> ReadSegmentStats(const std::string& path,
                                         const std::function<bool(std::uint32_t)>& known,
                                         bool seal_verified) {
  H5Lock lock;
  return ReadSealedSegment(
      path, [&](hid_t file) { return ReadOpenSegmentStats(file, path, known); }, seal_verified);
}

Result<SegmentContents> ReadSegmentRecords(const std::string& path,
                                           const std::function<bool(std::uint32_t)>& known,
                                           SegmentBuffers* reuse, RecordTablesRead tables) {
  H5Lock lock;
  return ReadSealedSegment(
      path, [&](hid_t file) { return ReadOpenSegmentRecords(file, path, known, reuse, tables); },
      tables.seal_verified);
}

Status WalkSegmentLocked(const std::string& path, RegistryMemo* memo, bool seal_verified,
                         bool records_only, bool stats_table) {
  const RecordTables walk = !records_only ? RecordTables::kWalk
                            : stats_table ? RecordTables::kWalkRecords
                                          : RecordTables::kWalkRecordsButStats;
  return ReadSegmentLocked(path, walk, memo, nullptr, seal_verified).status();
}

}  // namespace tstat::io
