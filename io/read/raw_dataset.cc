// See raw_dataset.h.
#include "io/read/raw_dataset.h"

#include <algorithm>
#include <cstdint>

#include "io/format/run_layout.h"
#include "io/format/segment_schema.h"
#include "io/h5/h5_chunk_check.h"
#include "io/h5/h5_dataset.h"
#include "io/h5/h5_error.h"
#include "io/h5/h5_file.h"
#include "io/h5/h5_lock.h"
#include "io/h5/h5_type_check.h"

namespace tstat::io {

namespace {

// Damaged dimensions or byte ranges must not make the reader allocate what
// the file cannot hold: deflate expands at most ~1032x, so `bytes` read from
// `data` can be at most that over its stored bytes (uncompressed layouts
// store exactly their size). kCorruption naming `what` otherwise.
Status CheckStoredCanHold(hid_t data, std::uint64_t bytes, const std::string& what) {
  const std::uint64_t storage = H5Dget_storage_size(data);
  if (bytes <= std::max<std::uint64_t>(storage, 1) * 1100) return Status::OK();
  return Status::Corruption(what + " claims " + std::to_string(bytes) + " bytes but stores " +
                            std::to_string(storage));
}

// Bytes [offset, offset + count) of the 1-D uint8 kRawPackedDataset.
Result<std::vector<std::uint8_t>> ReadPackedBytes(hid_t data, std::uint64_t offset,
                                                  std::uint64_t count, const std::string& path) {
  const std::string what = path + ": " + kRawPackedDataset;
  TSTAT_ASSIGN_OR_RETURN(std::vector<hsize_t> dims, H5DatasetDims(data, path));
  H5Type stored(H5Dget_type(data));
  if (dims.size() != 1 || !stored.valid() || H5Tget_size(stored.get()) != 1) {
    TakeH5ErrorStack();
    return Status::Corruption(what + " is not a 1-D byte dataset");
  }
  TSTAT_RETURN_IF_ERROR(CheckReadableAs(stored.get(), H5T_NATIVE_UINT8, what));
  if (offset > dims[0] || count > dims[0] - offset) {
    return Status::Corruption(what + " holds " + std::to_string(dims[0]) +
                              " bytes; raw_index names bytes [" + std::to_string(offset) + ", " +
                              std::to_string(offset + count) + ")");
  }
  TSTAT_RETURN_IF_ERROR(CheckStoredCanHold(data, count, what));
  // Only the chunks of this snapshot's range (raw/packed may be large).
  TSTAT_RETURN_IF_ERROR(CheckStorageHoldsElements(data, what, offset, count));
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(count));
  if (count == 0) return bytes;
  H5Space file_space(H5Dget_space(data));
  const hsize_t start[1] = {offset}, n[1] = {count};
  H5Space memory_space(H5Screate_simple(1, n, nullptr));
  if (!file_space.valid() || !memory_space.valid() ||
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, n, nullptr) < 0 ||
      H5Dread(data, H5T_NATIVE_UINT8, memory_space.get(), file_space.get(), H5P_DEFAULT,
              bytes.data()) < 0) {
    return H5Failure(StatusCode::kCorruption, what + ": reading bytes failed");
  }
  return bytes;
}

}  // namespace

Result<std::vector<std::uint8_t>> ReadRawDataset(const std::string& path,
                                                 const std::string& dataset, DType dtype,
                                                 const std::vector<std::int64_t>& shape,
                                                 std::uint64_t byte_offset,
                                                 std::uint64_t byte_count) {
  H5Lock lock;
  TSTAT_ASSIGN_OR_RETURN(H5File file, OpenH5FileReadOnly(path));
  if (dataset == kRawPackedDataset) {
    // No chunk cache: a snapshot's bytes are read alone, not the whole 1 MiB
    // chunk around them (+50 us per 4 KB read, unfiltered, with the cache).
    H5Plist access(H5Pcreate(H5P_DATASET_ACCESS));
    if (!access.valid() || H5Pset_chunk_cache(access.get(), H5D_CHUNK_CACHE_NSLOTS_DEFAULT, 0,
                                              H5D_CHUNK_CACHE_W0_DEFAULT) < 0) {
      return H5Failure(StatusCode::kInternal, path + ": dataset access list");
    }
    TSTAT_ASSIGN_OR_RETURN(H5DataSet data,
                           OpenH5Dataset(file.get(), kRawPackedDataset, path, access.get()));
    return ReadPackedBytes(data.get(), byte_offset, byte_count, path);
  }
  TSTAT_ASSIGN_OR_RETURN(H5DataSet data, OpenH5Dataset(file.get(), dataset.c_str(), path));
  TSTAT_ASSIGN_OR_RETURN(std::vector<hsize_t> dims, H5DatasetDims(data.get(), path));
  std::vector<std::int64_t> stored_shape;
  for (hsize_t d : dims) {
    stored_shape.push_back(d > static_cast<hsize_t>(INT64_MAX) ? -1 : static_cast<std::int64_t>(d));
  }
  const std::optional<std::uint64_t> size = ShapeBytes(stored_shape, DTypeSize(dtype));
  if (!size) {
    return Status::Corruption(path + ": raw dataset '" + dataset + "' has impossible dimensions");
  }
  if (!shape.empty() && ShapeBytes(shape, DTypeSize(dtype)) != size) {
    return Status::Corruption(path + ": raw dataset '" + dataset +
                              "' does not match the shape in raw_index");
  }
  H5Type stored(H5Dget_type(data.get()));
  if (!stored.valid() || H5Tget_size(stored.get()) != DTypeSize(dtype)) {
    TakeH5ErrorStack();
    return Status::Corruption(path + ": raw dataset '" + dataset + "' has the wrong element size");
  }
  TSTAT_RETURN_IF_ERROR(
      CheckStoredCanHold(data.get(), *size, path + ": raw dataset '" + dataset + "'"));
  TSTAT_RETURN_IF_ERROR(
      CheckStorageHoldsElements(data.get(), path + ": raw dataset '" + dataset + "'"));
  const std::uint64_t numel = *size / DTypeSize(dtype);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(*size));
  if (numel > 0) {
    TSTAT_RETURN_IF_ERROR(ReadH5Dataset(data.get(), RawStorageType(dtype), bytes.data(), path));
  }
  return bytes;
}

}  // namespace tstat::io
