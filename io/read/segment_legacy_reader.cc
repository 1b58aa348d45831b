// See segment_legacy_reader.h.
#include "io/read/segment_legacy_reader.h"

#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "io/h5/h5_dataset.h"
#include "io/h5/h5_error.h"
#include "io/h5/h5_file.h"
#include "io/h5/h5_type.h"

namespace tstat::io {
namespace {

#define TSTAT_IO_MEMBER(Row, field, type) Add(#field, offsetof(Row, field), type)

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

// Files written before small snapshots were packed have neither byte column.
struct RawIndexRowV1 {
  std::int64_t global_step;
  std::uint8_t mode;
  std::int64_t mode_step;
  std::uint32_t tensor_id;
  const char* dataset;
  char dtype[kDTypeChars];
  hvl_t shape;  // int64
  std::uint64_t byte_offset;
  std::uint64_t byte_count;
};

template <class Row>
void AddStepKeys(CompoundBuilder& b) {
  b.TSTAT_IO_MEMBER(Row, global_step, H5T_NATIVE_INT64)
      .TSTAT_IO_MEMBER(Row, mode, H5T_NATIVE_UINT8)
      .TSTAT_IO_MEMBER(Row, mode_step, H5T_NATIVE_INT64)
      .TSTAT_IO_MEMBER(Row, tensor_id, H5T_NATIVE_UINT32);
}

Result<H5Type> TensorRowV2Type() {
  TSTAT_ASSIGN_OR_RETURN(H5Type str, VlenStringType());
  TSTAT_ASSIGN_OR_RETURN(H5Type dtype, DTypeStringType());
  CompoundBuilder b(sizeof(TensorRowV2));
  b.TSTAT_IO_MEMBER(TensorRowV2, id, H5T_NATIVE_UINT32)
      .TSTAT_IO_MEMBER(TensorRowV2, name, str.get())
      .TSTAT_IO_MEMBER(TensorRowV2, kind, H5T_NATIVE_UINT8)
      .TSTAT_IO_MEMBER(TensorRowV2, dtype, dtype.get())
      .TSTAT_IO_MEMBER(TensorRowV2, space, H5T_NATIVE_UINT8)
      .TSTAT_IO_MEMBER(TensorRowV2, rank, H5T_NATIVE_UINT32)
      .TSTAT_IO_MEMBER(TensorRowV2, shape_offset, H5T_NATIVE_UINT64);
  return b.Build();
}

Result<H5Type> DropRowV2Type() {
  TSTAT_ASSIGN_OR_RETURN(H5Type str, VlenStringType());
  CompoundBuilder b(sizeof(DropRowV2));
  AddStepKeys<DropRowV2>(b);
  b.TSTAT_IO_MEMBER(DropRowV2, kind, str.get())
      .TSTAT_IO_MEMBER(DropRowV2, reason, str.get())
      .TSTAT_IO_MEMBER(DropRowV2, bytes, H5T_NATIVE_UINT64);
  return b.Build();
}

// With `packed_columns` false: without byte_offset/byte_count.
Result<H5Type> RawIndexRowV1Type(bool packed_columns) {
  TSTAT_ASSIGN_OR_RETURN(H5Type str, VlenStringType());
  TSTAT_ASSIGN_OR_RETURN(H5Type dtype, DTypeStringType());
  TSTAT_ASSIGN_OR_RETURN(H5Type shape, VlenInt64Type());
  CompoundBuilder b(sizeof(RawIndexRowV1));
  AddStepKeys<RawIndexRowV1>(b);
  b.TSTAT_IO_MEMBER(RawIndexRowV1, dataset, str.get())
      .TSTAT_IO_MEMBER(RawIndexRowV1, dtype, dtype.get())
      .TSTAT_IO_MEMBER(RawIndexRowV1, shape, shape.get());
  if (packed_columns) {
    b.TSTAT_IO_MEMBER(RawIndexRowV1, byte_offset, H5T_NATIVE_UINT64)
        .TSTAT_IO_MEMBER(RawIndexRowV1, byte_count, H5T_NATIVE_UINT64);
  }
  return b.Build();
}

#undef TSTAT_IO_MEMBER

Result<bool> RawIndexHasPackedColumns(hid_t file, const std::string& path) {
  TSTAT_ASSIGN_OR_RETURN(bool exists, H5LinkExists(file, kRawIndexTable, path));
  if (!exists) return true;
  TSTAT_ASSIGN_OR_RETURN(H5DataSet table, OpenH5Dataset(file, kRawIndexTable, path));
  H5Type stored(H5Dget_type(table.get()));
  if (!stored.valid() || H5Tget_class(stored.get()) != H5T_COMPOUND) {
    TakeH5ErrorStack();
    return Status::Corruption(path + ": raw_index is not a table");
  }
  const bool has = H5Tget_member_index(stored.get(), "byte_offset") >= 0 &&
                   H5Tget_member_index(stored.get(), "byte_count") >= 0;
  TakeH5ErrorStack();  // a missing member leaves an error on HDF5's stack
  return has;
}

}  // namespace

bool LegacySegmentsAllowed() {
  const char* value = std::getenv(kReadLegacySegmentsEnv);
  return value != nullptr && std::strcmp(value, "1") == 0;
}

Status LegacySegmentRefused(const std::string& path) {
  return Status::NotSupported(
      path +
      ": no header table: written before format_version 3 (or not a tstat segment); "
      "versions 1 and 2 store variable-length strings, which libhdf5 reads without "
      "checking them (a crafted file crashes the reader); set " +
      std::string(kReadLegacySegmentsEnv) + "=1 to read it if you trust where it came from");
}

Status ReadLegacyTensorRows(hid_t file, const std::string& path, std::vector<TensorRow>* rows) {
  TSTAT_ASSIGN_OR_RETURN(H5Type type, TensorRowV2Type());
  std::vector<TensorRowV2> legacy;
  TSTAT_RETURN_IF_ERROR(ReadTable(file, kTensorsTable, type.get(), &legacy, path));
  rows->assign(legacy.size(), TensorRow{});
  for (std::size_t i = 0; i < legacy.size(); ++i) {
    const TensorRowV2& r = legacy[i];
    TensorRow& row = (*rows)[i];
    row.id = r.id;
    SetFixedChars(r.name ? r.name : "", row.name);
    row.kind = r.kind;
    std::memcpy(row.dtype, r.dtype, kDTypeChars);
    row.space = r.space;
    row.rank = r.rank;
    row.shape_offset = r.shape_offset;
  }
  ReclaimVlen(type.get(), legacy.size(), legacy.data());
  return Status::OK();
}

Status ReadLegacyDropRows(hid_t file, const std::string& path, std::vector<DropRow>* rows) {
  TSTAT_ASSIGN_OR_RETURN(H5Type type, DropRowV2Type());
  std::vector<DropRowV2> legacy;
  TSTAT_RETURN_IF_ERROR(ReadTable(file, kDropsTable, type.get(), &legacy, path));
  rows->assign(legacy.size(), DropRow{});
  for (std::size_t i = 0; i < legacy.size(); ++i) {
    const DropRowV2& d = legacy[i];
    DropRow& row = (*rows)[i];
    row.global_step = d.global_step;
    row.mode = d.mode;
    row.mode_step = d.mode_step;
    row.tensor_id = d.tensor_id;
    SetFixedChars(d.kind ? d.kind : "", row.kind);
    SetFixedChars(d.reason ? d.reason : "", row.reason);
    row.bytes = d.bytes;
  }
  ReclaimVlen(type.get(), legacy.size(), legacy.data());
  return Status::OK();
}

Status ReadRawIndexV1(hid_t file, const std::string& path, SegmentBuffers* b) {
  TSTAT_ASSIGN_OR_RETURN(bool packed_columns, RawIndexHasPackedColumns(file, path));
  TSTAT_ASSIGN_OR_RETURN(H5Type raw_type, RawIndexRowV1Type(packed_columns));
  std::vector<RawIndexRowV1> rows;
  TSTAT_RETURN_IF_ERROR(ReadTable(file, kRawIndexTable, raw_type.get(), &rows, path));
  Status bad;
  for (const RawIndexRowV1& r : rows) {
    RawIndexRow row{};
    row.global_step = r.global_step;
    row.mode = r.mode;
    row.mode_step = r.mode_step;
    row.tensor_id = r.tensor_id;
    const char* dataset = r.dataset ? r.dataset : "";
    if (std::strlen(dataset) > kRawDatasetChars && bad.ok()) {
      bad = Status::Corruption(path + ": raw_index row with a dataset name over " +
                               std::to_string(kRawDatasetChars) + " characters");
    }
    std::memcpy(row.dataset, dataset, strnlen(dataset, kRawDatasetChars));
    std::memcpy(row.dtype, r.dtype, kDTypeChars);
    const auto* shape = static_cast<const std::int64_t*>(r.shape.p);
    row.rank = static_cast<std::uint32_t>(shape ? r.shape.len : 0);
    row.shape_offset = b->raw_shapes.size();
    if (shape) b->raw_shapes.insert(b->raw_shapes.end(), shape, shape + r.shape.len);
    row.byte_offset = packed_columns ? r.byte_offset : 0;
    row.byte_count = packed_columns ? r.byte_count : 0;
    b->raw_index.push_back(row);
  }
  ReclaimVlen(raw_type.get(), rows.size(), rows.data());
  return bad;
}

}  // namespace tstat::io
