// See legacy_segment.h.
#include "tests/io/legacy_segment.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "io/format/segment_schema.h"
#include "io/h5/h5_attribute.h"
#include "io/h5/h5_dataset.h"
#include "io/h5/h5_file.h"
#include "io/h5/h5_lock.h"
#include "io/h5/h5_type.h"
#include "io/read/segment_legacy_reader.h"
#include "tests/io/io_test_util.h"

namespace tstat::io::testing {
namespace {

struct TensorRowV2 {
  std::uint32_t id;
  const char* name;
  std::uint8_t kind;
  char dtype[kDTypeChars];
  std::uint8_t space;
  std::uint32_t rank;
  std::uint64_t shape_offset;
};

struct DropRowV2 {
  std::int64_t global_step;
  std::uint8_t mode;
  std::int64_t mode_step;
  std::uint32_t tensor_id;
  const char* kind;
  const char* reason;
  std::uint64_t bytes;
};

struct RawIndexRowV1 {
  std::int64_t global_step;
  std::uint8_t mode;
  std::int64_t mode_step;
  std::uint32_t tensor_id;
  const char* dataset;
  char dtype[kDTypeChars];
  hvl_t shape;
  std::uint64_t byte_offset;
  std::uint64_t byte_count;
};

// Member-by-member compound: name, offset, type.
struct Member {
  const char* name;
  std::size_t offset;
  hid_t type;
};
Result<H5Type> Compound(std::size_t size, const std::vector<Member>& members) {
  H5Type t(H5Tcreate(H5T_COMPOUND, size));
  for (const Member& m : members) {
    if (!t.valid() || H5Tinsert(t.get(), m.name, m.offset, m.type) < 0) {
      return Status::Internal(std::string("legacy compound member ") + m.name);
    }
  }
  return t;
}

Status Delete(hid_t file, const char* name) {
  if (H5Ldelete(file, name, H5P_DEFAULT) < 0) {
    return Status::Internal(std::string("deleting ") + name);
  }
  return Status::OK();
}

Status VlenAttribute(hid_t file, hid_t str, const char* name, const std::string& path) {
  TSTAT_ASSIGN_OR_RETURN(std::string value, ReadStringAttribute(file, name, path));
  if (H5Adelete(file, name) < 0) return Status::Internal(std::string("deleting ") + name);
  H5Space space(H5Screate(H5S_SCALAR));
  H5Attr attr(H5Acreate2(file, name, str, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  const char* p = value.c_str();
  if (!attr.valid() || H5Awrite(attr.get(), str, &p) < 0) {
    return Status::Internal(std::string("writing ") + name);
  }
  return Status::OK();
}

Status RewriteStrings(hid_t file, hid_t str, const std::string& path) {
  for (const char* name : {"format", "host", "tstat_version"}) {
    TSTAT_RETURN_IF_ERROR(VlenAttribute(file, str, name, path));
  }
  TSTAT_ASSIGN_OR_RETURN(std::string config, ReadStringDataset(file, kConfigDataset, path));
  TSTAT_RETURN_IF_ERROR(Delete(file, kConfigDataset));
  const char* config_p = config.c_str();
  TSTAT_RETURN_IF_ERROR(WriteNewDataset(file, kConfigDataset, str, str, {}, &config_p, 0, path));

  TSTAT_ASSIGN_OR_RETURN(std::vector<std::string> collections,
                         ReadStringArray(file, kCollections, kCollectionNameChars, path));
  if (!collections.empty()) {
    TSTAT_RETURN_IF_ERROR(Delete(file, kCollections));
    std::vector<const char*> p;
    for (const std::string& c : collections) p.push_back(c.c_str());
    TSTAT_RETURN_IF_ERROR(
        WriteNewDataset(file, kCollections, str, str, {p.size()}, p.data(), 0, path));
  }

  TSTAT_ASSIGN_OR_RETURN(H5Type tensor_type, TensorRowType());
  std::vector<TensorRow> tensors;
  TSTAT_RETURN_IF_ERROR(ReadTable(file, kTensorsTable, tensor_type.get(), &tensors, path));
  if (!tensors.empty()) {
    TSTAT_ASSIGN_OR_RETURN(H5Type dtype, DTypeStringType());
    TSTAT_ASSIGN_OR_RETURN(
        H5Type v2,
        Compound(sizeof(TensorRowV2),
                 {{"id", offsetof(TensorRowV2, id), H5T_NATIVE_UINT32},
                  {"name", offsetof(TensorRowV2, name), str},
                  {"kind", offsetof(TensorRowV2, kind), H5T_NATIVE_UINT8},
                  {"dtype", offsetof(TensorRowV2, dtype), dtype.get()},
                  {"space", offsetof(TensorRowV2, space), H5T_NATIVE_UINT8},
                  {"rank", offsetof(TensorRowV2, rank), H5T_NATIVE_UINT32},
                  {"shape_offset", offsetof(TensorRowV2, shape_offset), H5T_NATIVE_UINT64}}));
    std::vector<std::string> names;
    for (const TensorRow& t : tensors) names.push_back(FixedChars(t.name));
    std::vector<TensorRowV2> rows(tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const TensorRow& t = tensors[i];
      rows[i] = TensorRowV2{t.id, names[i].c_str(), t.kind, {}, t.space, t.rank, t.shape_offset};
      std::memcpy(rows[i].dtype, t.dtype, kDTypeChars);
    }
    TSTAT_RETURN_IF_ERROR(Delete(file, kTensorsTable));
    TSTAT_RETURN_IF_ERROR(WriteTable(file, kTensorsTable, v2.get(), rows, 0, path));
  }

  TSTAT_ASSIGN_OR_RETURN(H5Type drop_type, DropRowType());
  std::vector<DropRow> drops;
  TSTAT_RETURN_IF_ERROR(ReadTable(file, kDropsTable, drop_type.get(), &drops, path));
  if (!drops.empty()) {
    TSTAT_ASSIGN_OR_RETURN(
        H5Type v2, Compound(sizeof(DropRowV2),
                            {{"global_step", offsetof(DropRowV2, global_step), H5T_NATIVE_INT64},
                             {"mode", offsetof(DropRowV2, mode), H5T_NATIVE_UINT8},
                             {"mode_step", offsetof(DropRowV2, mode_step), H5T_NATIVE_INT64},
                             {"tensor_id", offsetof(DropRowV2, tensor_id), H5T_NATIVE_UINT32},
                             {"kind", offsetof(DropRowV2, kind), str},
                             {"reason", offsetof(DropRowV2, reason), str},
                             {"bytes", offsetof(DropRowV2, bytes), H5T_NATIVE_UINT64}}));
    std::vector<std::string> kinds, reasons;
    for (const DropRow& d : drops) {
      kinds.push_back(FixedChars(d.kind));
      reasons.push_back(FixedChars(d.reason));
    }
    std::vector<DropRowV2> rows(drops.size());
    for (std::size_t i = 0; i < drops.size(); ++i) {
      const DropRow& d = drops[i];
      rows[i] = DropRowV2{d.global_step,      d.mode, d.mode_step, d.tensor_id, kinds[i].c_str(),
                          reasons[i].c_str(), d.bytes};
    }
    TSTAT_RETURN_IF_ERROR(Delete(file, kDropsTable));
    TSTAT_RETURN_IF_ERROR(WriteTable(file, kDropsTable, v2.get(), rows, 0, path));
  }
  return Status::OK();
}

Status RewriteRawIndexAsV1(hid_t file, hid_t str, bool byte_columns, const std::string& path) {
  TSTAT_ASSIGN_OR_RETURN(H5Type now, RawIndexRowType());
  std::vector<RawIndexRow> rows;
  std::vector<std::int64_t> shapes;
  TSTAT_RETURN_IF_ERROR(ReadTable(file, kRawIndexTable, now.get(), &rows, path));
  TSTAT_RETURN_IF_ERROR(ReadTable(file, kRawShapes, H5T_NATIVE_INT64, &shapes, path));
  if (rows.empty()) return Status::OK();
  TSTAT_ASSIGN_OR_RETURN(H5Type dtype, DTypeStringType());
  TSTAT_ASSIGN_OR_RETURN(H5Type shape, VlenInt64Type());
  std::vector<Member> members = {
      {"global_step", offsetof(RawIndexRowV1, global_step), H5T_NATIVE_INT64},
      {"mode", offsetof(RawIndexRowV1, mode), H5T_NATIVE_UINT8},
      {"mode_step", offsetof(RawIndexRowV1, mode_step), H5T_NATIVE_INT64},
      {"tensor_id", offsetof(RawIndexRowV1, tensor_id), H5T_NATIVE_UINT32},
      {"dataset", offsetof(RawIndexRowV1, dataset), str},
      {"dtype", offsetof(RawIndexRowV1, dtype), dtype.get()},
      {"shape", offsetof(RawIndexRowV1, shape), shape.get()}};
  if (byte_columns) {
    members.push_back({"byte_offset", offsetof(RawIndexRowV1, byte_offset), H5T_NATIVE_UINT64});
    members.push_back({"byte_count", offsetof(RawIndexRowV1, byte_count), H5T_NATIVE_UINT64});
  }
  TSTAT_ASSIGN_OR_RETURN(H5Type v1_type, Compound(sizeof(RawIndexRowV1), members));
  std::vector<std::string> names;
  for (const RawIndexRow& r : rows) names.push_back(RawDatasetName(r));
  std::vector<RawIndexRowV1> v1(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const RawIndexRow& r = rows[i];
    v1[i] = RawIndexRowV1{r.global_step,
                          r.mode,
                          r.mode_step,
                          r.tensor_id,
                          names[i].c_str(),
                          {},
                          hvl_t{r.rank, shapes.data() + r.shape_offset},
                          r.byte_offset,
                          r.byte_count};
    std::memcpy(v1[i].dtype, r.dtype, kDTypeChars);
  }
  TSTAT_RETURN_IF_ERROR(Delete(file, kRawIndexTable));
  TSTAT_RETURN_IF_ERROR(Delete(file, kRawShapes));
  return WriteNewDataset(file, kRawIndexTable, v1_type.get(), v1_type.get(), {v1.size()}, v1.data(),
                         0, path);
}

// The stats rows as versions 1 to 3 stored them: in capture order (steps
// ascending, a step's records as captured), without version 4's
// stats_capture_index and stats_tensors.
Status RewriteStatsInCaptureOrder(hid_t file, const std::string& path) {
  TSTAT_ASSIGN_OR_RETURN(H5Type row_type, StatsRowType());
  std::vector<StatsRow> rows;
  std::vector<std::uint32_t> position;
  TSTAT_RETURN_IF_ERROR(ReadTable(file, kStatsTable, row_type.get(), &rows, path));
  TSTAT_RETURN_IF_ERROR(ReadTable(file, kStatsCaptureIndex, H5T_NATIVE_UINT32, &position, path));
  if (rows.empty()) return Status::OK();
  if (position.size() != rows.size()) return Status::Internal("no stats_capture_index");
  std::vector<std::size_t> order(rows.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::make_pair(rows[a].global_step, position[a]) <
           std::make_pair(rows[b].global_step, position[b]);
  });
  std::vector<StatsRow> captured;
  for (std::size_t i : order) captured.push_back(rows[i]);
  for (const char* name : {kStatsTable, kStatsCaptureIndex, kStatsTensorsTable}) {
    TSTAT_RETURN_IF_ERROR(Delete(file, name));
  }
  return WriteTable(file, kStatsTable, row_type.get(), captured, 4, path);
}

// Sets the format_version member of the header table (stored type kept).
Status SetHeaderFormatVersion(hid_t file, std::int64_t version, const std::string& path) {
  H5DataSet header(H5Dopen2(file, kHeaderTable, H5P_DEFAULT));
  if (!header.valid()) return Status::Internal(path + ": no header table");
  H5Type type(H5Dget_type(header.get()));
  const int member = H5Tget_member_index(type.get(), "format_version");
  if (member < 0) return Status::Internal(path + ": header without format_version");
  std::vector<unsigned char> row(H5Tget_size(type.get()));
  if (H5Dread(header.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, row.data()) < 0) {
    return Status::Internal(path + ": reading the header");
  }
  std::memcpy(row.data() + H5Tget_member_offset(type.get(), static_cast<unsigned>(member)),
              &version, sizeof version);
  if (H5Dwrite(header.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, row.data()) < 0) {
    return Status::Internal(path + ": writing the header");
  }
  return Status::OK();
}

}  // namespace

Status RewriteAsVersion3Segment(const std::string& path) {
  {
    H5Lock lock;
    H5File file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    if (!file.valid()) return Status::IoError("cannot open " + path);
    TSTAT_RETURN_IF_ERROR(RewriteStatsInCaptureOrder(file.get(), path));
    TSTAT_RETURN_IF_ERROR(SetHeaderFormatVersion(file.get(), 3, path));
    if (H5Adelete(file.get(), "format_version") < 0) return Status::Internal("format_version");
    TSTAT_RETURN_IF_ERROR(WriteInt64Attribute(file.get(), "format_version", 3, path));
    TSTAT_RETURN_IF_ERROR(CloseH5File(&file, path));
  }
  return ResealSegmentFile(path);
}

Status RewriteAsLegacySegment(const std::string& path, int format_version, bool byte_columns) {
  if (format_version != 1 && format_version != 2) {
    return Status::InvalidArgument("legacy versions are 1 and 2");
  }
  {
    H5Lock lock;
    H5File file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    if (!file.valid()) return Status::IoError("cannot open " + path);
    TSTAT_ASSIGN_OR_RETURN(H5Type str, VlenStringType());
    TSTAT_RETURN_IF_ERROR(RewriteStatsInCaptureOrder(file.get(), path));
    TSTAT_RETURN_IF_ERROR(RewriteStrings(file.get(), str.get(), path));
    if (format_version == 1) {
      TSTAT_RETURN_IF_ERROR(RewriteRawIndexAsV1(file.get(), str.get(), byte_columns, path));
    }
    TSTAT_RETURN_IF_ERROR(Delete(file.get(), kHeaderTable));  // versions 1 and 2 had none
    if (H5Adelete(file.get(), "format_version") < 0) return Status::Internal("format_version");
    TSTAT_RETURN_IF_ERROR(WriteInt64Attribute(file.get(), "format_version", format_version, path));
    TSTAT_RETURN_IF_ERROR(CloseH5File(&file, path));
  }
  return ResealSegmentFile(path);
}

ScopedLegacySegments::ScopedLegacySegments() {
  if (const char* v = std::getenv(kReadLegacySegmentsEnv)) {
    had_ = true;
    previous_ = v;
  }
  setenv(kReadLegacySegmentsEnv, "1", 1);
}

ScopedLegacySegments::~ScopedLegacySegments() {
  if (had_) {
    setenv(kReadLegacySegmentsEnv, previous_.c_str(), 1);
  } else {
    unsetenv(kReadLegacySegmentsEnv);
  }
}

}  // namespace tstat::io::testing
