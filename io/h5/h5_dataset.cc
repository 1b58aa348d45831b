// See h5_dataset.h.
#include "io/h5/h5_dataset.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>

#include "io/h5/h5_chunk_check.h"
#include "io/h5/h5_chunk_read.h"
#include "io/h5/h5_error.h"
#include "io/h5/h5_file.h"
#include "io/h5/h5_row_copy.h"
#include "io/h5/h5_type_check.h"
#include "io/h5/table_chunk_writer.h"

namespace tstat::io {
namespace {

// Chunk dimensions of about kChunkBytes: the slowest dimension is cut first.
std::vector<hsize_t> ChunkDims(const std::vector<hsize_t>& dims, std::size_t element_bytes) {
  std::vector<hsize_t> chunk = dims;
  std::size_t inner = element_bytes;  // bytes of one index step along dimension d
  for (std::size_t d = dims.size(); d-- > 0;) {
    const std::size_t budget = std::max<std::size_t>(kChunkBytes / inner, 1);
    if (chunk[d] > budget) {
      chunk[d] = budget;
      for (std::size_t o = 0; o < d; ++o) chunk[o] = 1;
      break;
    }
    inner *= std::max<hsize_t>(dims[d], 1);
  }
  for (hsize_t& c : chunk) c = std::max<hsize_t>(c, 1);
  return chunk;
}

// `chunk` is set to the chunk dimensions when the layout is chunked.
Result<H5Plist> MakeCreationList(const std::vector<hsize_t>& dims, hid_t file_type, int level,
                                 const std::string& what, std::vector<hsize_t>* chunk) {
  const std::size_t element_bytes = H5Tget_size(file_type);
  H5Plist dcpl(H5Pcreate(H5P_DATASET_CREATE));
  if (!dcpl.valid()) return H5Failure(StatusCode::kInternal, what);
  std::size_t total = element_bytes;
  for (hsize_t d : dims) total *= d;
  herr_t rc = 0;
  if (total <= kCompactBytes) {
    rc = H5Pset_layout(dcpl.get(), H5D_COMPACT);
  } else if (level > 0) {
    *chunk = ChunkDims(dims, element_bytes);
    rc = SetChunkedLayout(dcpl.get(), *chunk, level);
  } else {
    rc = H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS);
  }
  // Space is allocated when the data is written (once), never filled first
  // (HDF5 requires a fill value for variable-length types).
  if (rc >= 0 && !HasVariableLengthParts(file_type))
    rc = H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER);
  if (rc < 0) return H5Failure(StatusCode::kInternal, what + ": creation list");
  return dcpl;
}

}  // namespace

herr_t SetChunkedLayout(hid_t dcpl, const std::vector<hsize_t>& chunk, int level) {
  herr_t rc = H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data());
  if (rc >= 0 && level > 0) rc = H5Pset_shuffle(dcpl);
  if (rc >= 0 && level > 0) rc = H5Pset_deflate(dcpl, static_cast<unsigned>(std::min(level, 9)));
  return rc;
}

Result<H5DataSet> CreateExtendibleChunked(hid_t loc, const char* name, hid_t file_type,
                                          hsize_t chunk, int level, const std::string& what) {
  const hsize_t dims[1] = {chunk};
  const hsize_t max_dims[1] = {H5S_UNLIMITED};
  H5Space space(H5Screate_simple(1, dims, max_dims));
  H5Plist dcpl(H5Pcreate(H5P_DATASET_CREATE));
  if (!space.valid() || !dcpl.valid()) return H5Failure(StatusCode::kInternal, what);
  herr_t rc = SetChunkedLayout(dcpl.get(), {chunk}, level);
  if (rc >= 0) rc = H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER);
  if (rc < 0) return H5Failure(StatusCode::kInternal, what + ": creation list");
  H5DataSet dataset(
      H5Dcreate2(loc, name, file_type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
  if (!dataset.valid()) return H5Failure(StatusCode::kIoError, what + ": create failed");
  return dataset;
}

Status WriteNewDataset(hid_t loc, const char* name, hid_t file_type, hid_t mem_type,
                       const std::vector<hsize_t>& dims, const void* data, int compression_level,
                       const std::string& path, ChunkDeflater* deflater) {
  const std::string what = path + ": dataset '" + name + "'";
  H5Space space(dims.empty()
                    ? H5Screate(H5S_SCALAR)
                    : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  if (!space.valid()) return H5Failure(StatusCode::kInternal, what + ": dataspace");
  std::vector<hsize_t> chunk;
  TSTAT_ASSIGN_OR_RETURN(H5Plist dcpl,
                         MakeCreationList(dims, file_type, compression_level, what, &chunk));
  H5DataSet dataset(
      H5Dcreate2(loc, name, file_type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
  if (!dataset.valid()) return H5Failure(StatusCode::kIoError, what + ": create failed");
  hsize_t elements = 1;
  for (hsize_t d : dims) elements *= d;
  if (deflater && elements > 0 && dims.size() == 1 && chunk.size() == 1) {
    if (std::optional<RowPacker> packer = RowPacker::Make(mem_type, file_type)) {
      return WriteDeflatedChunks(dataset.get(), *packer, data, elements, chunk[0],
                                 std::min(compression_level, 9), deflater, what);
    }
  }
  if (elements > 0 && H5Dwrite(dataset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) {
    return H5Failure(StatusCode::kIoError, what + ": write failed");
  }
  return Status::OK();
}

Result<H5DataSet> OpenH5Dataset(hid_t loc, const char* name, const std::string& path,
                                hid_t access) {
  H5DataSet dataset(H5Dopen2(loc, name, access));
  if (!dataset.valid()) {
    return H5Failure(StatusCode::kCorruption, path + ": cannot open dataset '" + name + "'");
  }
  return dataset;
}

Result<std::vector<hsize_t>> H5DatasetDims(hid_t dataset, const std::string& path) {
  H5Space space(H5Dget_space(dataset));
  int rank = space.valid() ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 0) return H5Failure(StatusCode::kCorruption, path + ": cannot read a dataspace");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (rank > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0) {
    return H5Failure(StatusCode::kCorruption, path + ": cannot read dataset dimensions");
  }
  return dims;
}

Status CheckStorageHoldsElements(hid_t dataset, const std::string& what, std::uint64_t first,
                                 std::uint64_t count) {
  H5Plist dcpl(H5Dget_create_plist(dataset));
  const H5D_layout_t layout = dcpl.valid() ? H5Pget_layout(dcpl.get()) : H5D_LAYOUT_ERROR;
  if (layout == H5D_CHUNKED) return CheckChunksDecodeToFullSize(dataset, what, first, count);
  // Virtual datasets read other files: a segment never has one.
  if (layout == H5D_VIRTUAL) return Status::Corruption(what + " is a virtual dataset");
  if (layout != H5D_COMPACT && layout != H5D_CONTIGUOUS) {
    return H5Failure(StatusCode::kCorruption, what + ": unknown storage layout");
  }
  H5Space space(H5Dget_space(dataset));
  H5Type stored(H5Dget_type(dataset));
  const hssize_t points = space.valid() ? H5Sget_simple_extent_npoints(space.get()) : -1;
  const std::size_t element = stored.valid() ? H5Tget_size(stored.get()) : 0;
  if (points < 0 || element == 0) {
    return H5Failure(StatusCode::kCorruption, what + ": cannot tell its size");
  }
  const auto n = static_cast<std::uint64_t>(points);
  if (n != 0 && element > UINT64_MAX / n) {
    return Status::Corruption(what + ": " + std::to_string(n) + " elements of " +
                              std::to_string(element) + " bytes overflow");
  }
  const std::uint64_t needed = n * element;
  const std::uint64_t storage = H5Dget_storage_size(dataset);
  TakeH5ErrorStack();
  if (storage < needed) {
    return Status::Corruption(what + " needs " + std::to_string(needed) + " bytes but its " +
                              (layout == H5D_COMPACT ? "compact" : "contiguous") +
                              " storage holds " + std::to_string(storage));
  }
  return Status::OK();
}

namespace {

// Elements [begin, begin + count) of the 1-D chunked `dataset`, decoded by
// tstat (h5_chunk_read.h), its type checked first.
Status ReadChunked(hid_t dataset, hid_t mem_type, std::uint64_t begin, std::uint64_t count,
                   void* out, const std::string& path) {
  H5Type stored(H5Dget_type(dataset));
  if (!stored.valid()) return H5Failure(StatusCode::kCorruption, path + ": a dataset's type");
  TSTAT_RETURN_IF_ERROR(CheckReadableAs(stored.get(), mem_type, path + ": dataset"));
  return ReadChunkedDatasetRange(dataset, mem_type, begin, count, out, path + ": dataset");
}

}  // namespace

Status ReadH5Dataset(hid_t dataset, hid_t mem_type, void* out, const std::string& path) {
  if (IsChunked1D(dataset)) {
    H5Space space(H5Dget_space(dataset));
    hsize_t count = 0;
    if (!space.valid() || H5Sget_simple_extent_dims(space.get(), &count, nullptr) != 1) {
      return H5Failure(StatusCode::kCorruption, path + ": a dataset's extent");
    }
    return ReadChunked(dataset, mem_type, 0, count, out, path);
  }
  H5Type stored(H5Dget_type(dataset));
  if (!stored.valid()) return H5Failure(StatusCode::kCorruption, path + ": a dataset's type");
  TSTAT_RETURN_IF_ERROR(CheckReadableAs(stored.get(), mem_type, path + ": dataset"));
  TSTAT_RETURN_IF_ERROR(CheckStorageHoldsElements(dataset, path + ": dataset"));
  H5Space space(H5Dget_space(dataset));
  const hssize_t points = space.valid() ? H5Sget_simple_extent_npoints(space.get()) : -1;
  if (points < 0) return H5Failure(StatusCode::kCorruption, path + ": a dataset's extent");
  if (points == 0) return Status::OK();
  const auto n = static_cast<std::size_t>(points);
  // Stored bytes read as they are, then copied member by member: libhdf5
  // converting itself allocates and zeroes a 1 MiB conversion buffer per
  // read, most of the cost of opening a run of small tables.
  if (const std::optional<RowCopyPlan> copy = RowCopyPlan::Build(stored.get(), mem_type)) {
    std::vector<unsigned char> raw(n * H5Tget_size(stored.get()));
    if (H5Dread(dataset, stored.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.data()) < 0) {
      return H5Failure(StatusCode::kCorruption, path + ": reading a dataset failed");
    }
    copy->Apply(raw.data(), n, static_cast<unsigned char*>(out));
    return Status::OK();
  }
  // A conversion buffer as large as this read needs, not the 1 MiB default.
  H5Plist xfer(H5Pcreate(H5P_DATASET_XFER));
  const std::size_t largest = std::max(H5Tget_size(stored.get()), H5Tget_size(mem_type));
  if (!xfer.valid() ||
      H5Pset_buffer(xfer.get(), std::max<std::size_t>(n * largest, 64), nullptr, nullptr) < 0) {
    return H5Failure(StatusCode::kInternal, path + ": a transfer property list");
  }
  if (H5Dread(dataset, mem_type, H5S_ALL, H5S_ALL, xfer.get(), out) < 0) {
    return H5Failure(StatusCode::kCorruption, path + ": reading a dataset failed");
  }
  return Status::OK();
}

void ReclaimVlen(hid_t mem_type, std::size_t n, void* buffer) {
  if (n == 0) return;
  const hsize_t dims[1] = {n};
  H5Space space(H5Screate_simple(1, dims, nullptr));
  if (space.valid()) H5Dvlen_reclaim(mem_type, space.get(), H5P_DEFAULT, buffer);
  TakeH5ErrorStack();
}

namespace {

// A crafted dataspace may claim any number of rows; allocating for them
// would end the process (bad_alloc). Stored rows cannot exceed what the file
// holds, expanded at most ~1032:1 by DEFLATE (the only filter segments use).
Status CheckRowsFitTheFile(hid_t dataset, const char* name, hsize_t rows, const std::string& path) {
  constexpr hsize_t kMaxExpansion = 1100;
  H5Type stored(H5Dget_type(dataset));
  const hsize_t stored_size = stored.valid() ? H5Tget_size(stored.get()) : 0;
  hsize_t file_bytes = 0;
  const hid_t file = H5Iget_file_id(dataset);
  if (file >= 0) {
    if (H5Fget_filesize(file, &file_bytes) < 0) file_bytes = 0;
    H5Fclose(file);
  }
  TakeH5ErrorStack();
  if (stored_size == 0 || file_bytes == 0) {
    return Status::Corruption(path + ": table '" + name + "': cannot tell its size");
  }
  if (rows > file_bytes * kMaxExpansion / stored_size) {
    return Status::Corruption(path + ": table '" + name + "' claims " + std::to_string(rows) +
                              " rows of " + std::to_string(stored_size) +
                              " bytes, more than a file of " + std::to_string(file_bytes) +
                              " bytes can hold");
  }
  return Status::OK();
}

// Whether `dataset` stores strings, and of which width (0: variable length).
Result<std::size_t> StoredStringWidth(hid_t dataset, const std::string& what) {
  H5Type stored(H5Dget_type(dataset));
  if (!stored.valid()) return H5Failure(StatusCode::kCorruption, what + ": no type");
  if (H5Tget_class(stored.get()) != H5T_STRING) {
    TakeH5ErrorStack();
    return Status::Corruption(what + " does not hold strings");
  }
  if (H5Tis_variable_str(stored.get()) > 0) return std::size_t{0};
  const std::size_t width = H5Tget_size(stored.get());
  TakeH5ErrorStack();
  if (width == 0) return Status::Corruption(what + ": strings of 0 bytes");
  return width;
}

// The memory type for reading `dataset`'s fixed-length strings of `width`.
Result<H5Type> MemoryStringType(hid_t dataset, std::size_t width) {
  H5Type stored(H5Dget_type(dataset));
  if (!stored.valid()) return H5Failure(StatusCode::kCorruption, "a dataset's type");
  return FixedStringTypeLike(stored.get(), width);
}

Status RefuseVariableLength(const std::string& what) {
  return Status::Corruption(what +
                            " holds variable-length strings (format_version 3 stores "
                            "none; libhdf5 reads them from the global heap unchecked)");
}

}  // namespace

Status WriteStringDataset(hid_t loc, const char* name, const std::string& value,
                          const std::string& path) {
  if (value.size() > kMaxStringDatasetBytes) {
    return Status::InvalidArgument(path + ": string '" + name + "' of " +
                                   std::to_string(value.size()) + " bytes (at most " +
                                   std::to_string(kMaxStringDatasetBytes) + ")");
  }
  std::string padded = value;
  padded.resize(std::max<std::size_t>(value.size(), 1), '\0');
  TSTAT_ASSIGN_OR_RETURN(H5Type type, FixedUtf8StringType(padded.size()));
  return WriteNewDataset(loc, name, type.get(), type.get(), {}, padded.data(), 0, path);
}

Result<std::string> ReadStringDataset(hid_t loc, const char* name, const std::string& path,
                                      bool allow_variable_length) {
  const std::string what = path + ": dataset '" + name + "'";
  TSTAT_ASSIGN_OR_RETURN(H5DataSet dataset, OpenH5Dataset(loc, name, path));
  TSTAT_ASSIGN_OR_RETURN(std::vector<hsize_t> dims, H5DatasetDims(dataset.get(), path));
  if (!dims.empty()) return Status::Corruption(what + " is not a scalar string");
  TSTAT_ASSIGN_OR_RETURN(std::size_t width, StoredStringWidth(dataset.get(), what));
  if (width == 0) {
    if (!allow_variable_length) return RefuseVariableLength(what);
    TSTAT_ASSIGN_OR_RETURN(H5Type type, VlenStringType());
    char* pointer = nullptr;
    TSTAT_RETURN_IF_ERROR(ReadH5Dataset(dataset.get(), type.get(), &pointer, path)
                              .WithContext(std::string("string '") + name + "'"));
    std::string value = pointer ? pointer : "";
    ReclaimVlen(type.get(), 1, &pointer);
    return value;
  }
  if (width > kMaxStringDatasetBytes) {
    return Status::Corruption(what + " is a string of " + std::to_string(width) +
                              " bytes (at most " + std::to_string(kMaxStringDatasetBytes) +
                              " are read)");
  }
  TSTAT_RETURN_IF_ERROR(CheckRowsFitTheFile(dataset.get(), name, 1, path));
  TSTAT_RETURN_IF_ERROR(CheckStorageHoldsElements(dataset.get(), what));
  TSTAT_ASSIGN_OR_RETURN(H5Type type, MemoryStringType(dataset.get(), width));
  std::string value(width, '\0');
  // Same class and width: HDF5 copies the bytes, no conversion.
  if (H5Dread(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, value.data()) < 0) {
    return H5Failure(StatusCode::kCorruption, what + ": read failed");
  }
  value.resize(strnlen(value.data(), width));
  return value;
}

Status WriteStringArray(hid_t loc, const char* name, const std::vector<std::string>& values,
                        int compression_level, const std::string& path) {
  if (values.empty()) return Status::OK();
  std::size_t width = 1;
  for (const std::string& v : values) width = std::max(width, v.size());
  std::vector<char> bytes(values.size() * width, '\0');
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::memcpy(bytes.data() + i * width, values[i].data(), values[i].size());
  }
  TSTAT_ASSIGN_OR_RETURN(H5Type type, FixedUtf8StringType(width));
  return WriteNewDataset(loc, name, type.get(), type.get(), {values.size()}, bytes.data(),
                         compression_level, path);
}

Result<std::vector<std::string>> ReadStringArray(hid_t loc, const char* name, std::size_t max_width,
                                                 const std::string& path,
                                                 bool allow_variable_length) {
  const std::string what = path + ": dataset '" + name + "'";
  std::vector<std::string> out;
  TSTAT_ASSIGN_OR_RETURN(bool exists, H5LinkExists(loc, name, path));
  if (!exists) return out;
  TSTAT_ASSIGN_OR_RETURN(H5DataSet dataset, OpenH5Dataset(loc, name, path));
  TSTAT_ASSIGN_OR_RETURN(std::size_t width, StoredStringWidth(dataset.get(), what));
  if (width == 0) {
    if (!allow_variable_length) return RefuseVariableLength(what);
    TSTAT_ASSIGN_OR_RETURN(H5Type type, VlenStringType());
    std::vector<char*> pointers;
    TSTAT_RETURN_IF_ERROR(ReadTable(loc, name, type.get(), &pointers, path));
    for (const char* p : pointers) out.emplace_back(p ? p : "");
    ReclaimVlen(type.get(), pointers.size(), pointers.data());
    return out;
  }
  if (width > max_width) {
    return Status::Corruption(what + " holds strings of " + std::to_string(width) +
                              " bytes (at most " + std::to_string(max_width) + ")");
  }
  TSTAT_ASSIGN_OR_RETURN(H5Type type, MemoryStringType(dataset.get(), width));
  std::vector<unsigned char> bytes;
  std::size_t count = 0;
  TSTAT_RETURN_IF_ERROR(ReadTableInto(
      loc, name, type.get(), width,
      [&](std::size_t n) -> void* {
        count = n;
        bytes.resize(n * width);
        return bytes.data();
      },
      path));
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const char* s = reinterpret_cast<const char*>(bytes.data()) + i * width;
    out.emplace_back(s, strnlen(s, width));
  }
  return out;
}

namespace {

// The 1-D table `name` of `row_size`-byte rows of `mem_type`, opened, with
// its number of rows (checked to fit the file); none when it is absent.
struct OpenedTable {
  H5DataSet dataset;
  std::uint64_t rows = 0;
};
Result<std::optional<OpenedTable>> OpenTable(hid_t loc, const char* name, hid_t mem_type,
                                             std::size_t row_size, const std::string& path) {
  TSTAT_ASSIGN_OR_RETURN(bool exists, H5LinkExists(loc, name, path));
  if (!exists) return std::optional<OpenedTable>();
  TSTAT_ASSIGN_OR_RETURN(H5DataSet dataset, OpenH5Dataset(loc, name, path));
  TSTAT_ASSIGN_OR_RETURN(std::vector<hsize_t> dims, H5DatasetDims(dataset.get(), path));
  if (dims.size() != 1) {
    return Status::Corruption(path + ": table '" + name + "' is not one-dimensional");
  }
  if (H5Tget_size(mem_type) != row_size) {
    return Status::Internal(path + ": row type of '" + name + "' does not match its struct");
  }
  if (dims[0] > 0) TSTAT_RETURN_IF_ERROR(CheckRowsFitTheFile(dataset.get(), name, dims[0], path));
  return std::optional<OpenedTable>(OpenedTable{std::move(dataset), dims[0]});
}

}  // namespace

Status ReadTableRange(hid_t loc, const char* name, hid_t mem_type, std::size_t row_size,
                      std::uint64_t begin, std::uint64_t count,
                      const std::function<void*(std::size_t count)>& rows_for,
                      const std::string& path) {
  const std::string what = path + ": table '" + name + "'";
  TSTAT_ASSIGN_OR_RETURN(std::optional<OpenedTable> table,
                         OpenTable(loc, name, mem_type, row_size, path));
  if (!table) return Status::Corruption(what + " is missing");
  if (begin > table->rows || count > table->rows - begin) {
    return Status::Corruption(what + " holds " + std::to_string(table->rows) + " rows, not rows " +
                              std::to_string(begin) + " to " + std::to_string(begin + count));
  }
  if (count == 0) return Status::OK();
  void* rows = rows_for(static_cast<std::size_t>(count));
  const hid_t dataset = table->dataset.get();
  if (IsChunked1D(dataset)) return ReadChunked(dataset, mem_type, begin, count, rows, what);
  // A compact or contiguous table (small, or written at level 0): read
  // whole, the range copied.
  std::vector<unsigned char> all(static_cast<std::size_t>(table->rows) * row_size);
  TSTAT_RETURN_IF_ERROR(ReadH5Dataset(dataset, mem_type, all.data(), what));
  std::memcpy(rows, all.data() + static_cast<std::size_t>(begin) * row_size,
              static_cast<std::size_t>(count) * row_size);
  return Status::OK();
}

Status ReadTableInto(hid_t loc, const char* name, hid_t mem_type, std::size_t row_size,
                     const std::function<void*(std::size_t count)>& rows_for,
                     const std::string& path) {
  TSTAT_ASSIGN_OR_RETURN(std::optional<OpenedTable> table,
                         OpenTable(loc, name, mem_type, row_size, path));
  if (!table || table->rows == 0) return Status::OK();
  // Zeroed by rows_for (a resized vector is): members the file lacks read
  // as zero.
  void* rows = rows_for(static_cast<std::size_t>(table->rows));
  Status read = ReadH5Dataset(table->dataset.get(), mem_type, rows, path);
  if (!read.ok()) return read.WithContext(std::string("table '") + name + "'");
  return Status::OK();
}

}  // namespace tstat::io
