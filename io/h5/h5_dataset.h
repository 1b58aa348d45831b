// Checked wrappers of the HDF5 dataset module (H5D, with its dataspaces H5S
// and creation lists H5P).
//
// Every dataset tstat writes is written once, whole, when it is created (a
// segment file is immutable after its Flush), so layouts are fixed-size:
//  - small data (<= kCompactBytes): compact, stored inside the object header
//    (no chunk index, no separate block);
//  - otherwise chunked (~kChunkBytes per chunk) with shuffle + deflate at the
//    given level, or contiguous when the level is 0.
// Tables are 1-D datasets of compound rows; WriteTable/ReadTable move a
// std::vector of row structs in and out (an absent table reads as empty).
// Callers hold the HDF5 lock (h5_lock.h). Errors name the file and dataset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "io/h5/h5_handle.h"
#include "io/h5/h5_type.h"
#include "tstat/status.h"

namespace tstat::io {

class ChunkDeflater;

inline constexpr std::size_t kCompactBytes = 8 * 1024;
inline constexpr std::size_t kChunkBytes = 1 << 20;

// Declares chunks of `chunk` in `dcpl`, with shuffle + deflate at `level`
// when it is 1..9 (none at 0): the chunked layout of every compressed
// dataset tstat writes. Negative on an HDF5 error.
herr_t SetChunkedLayout(hid_t dcpl, const std::vector<hsize_t>& chunk, int level);

// Creates the 1-D dataset `name` under `loc` (file type `file_type`) for
// writing a chunk at a time: chunks of `chunk` elements with shuffle + deflate
// at `level` (none at 0), extendible without limit, first extent one chunk,
// never filled. `what` names it in errors.
Result<H5DataSet> CreateExtendibleChunked(hid_t loc, const char* name, hid_t file_type,
                                          hsize_t chunk, int level, const std::string& what);

// Creates `name` under `loc` (file type `file_type`, dimensions `dims`) and
// writes `data`, laid out in memory as `mem_type`. With a `deflater`, a
// chunked 1-D dataset of fixed-size rows is written as chunks shuffled and
// compressed by it (table_chunk_writer.h) rather than through HDF5's filter
// pipeline: same filters declared, same decoded bytes, less CPU.
Status WriteNewDataset(hid_t loc, const char* name, hid_t file_type, hid_t mem_type,
                       const std::vector<hsize_t>& dims, const void* data, int compression_level,
                       const std::string& path, ChunkDeflater* deflater = nullptr);
// A scalar (0-d) fixed-length UTF-8 string dataset as long as `value` (one
// NUL for ""), up to kMaxStringDatasetBytes. Reading accepts a variable-length
// one (segments before format_version 3) only with `allow_variable_length`.
inline constexpr std::size_t kMaxStringDatasetBytes = std::size_t{64} << 20;
Status WriteStringDataset(hid_t loc, const char* name, const std::string& value,
                          const std::string& path);
Result<std::string> ReadStringDataset(hid_t loc, const char* name, const std::string& path,
                                      bool allow_variable_length = false);
// A 1-D dataset of fixed-length UTF-8 strings as wide as the longest of
// `values` (nothing is written for none). Reading refuses strings wider than
// `max_width` and variable-length ones unless `allow_variable_length`; an
// absent dataset reads as none.
Status WriteStringArray(hid_t loc, const char* name, const std::vector<std::string>& values,
                        int compression_level, const std::string& path);
Result<std::vector<std::string>> ReadStringArray(hid_t loc, const char* name, std::size_t max_width,
                                                 const std::string& path,
                                                 bool allow_variable_length = false);

// `access`: a dataset access list (e.g. a chunk cache setting), or the default.
Result<H5DataSet> OpenH5Dataset(hid_t loc, const char* name, const std::string& path,
                                hid_t access = H5P_DEFAULT);
// Dimensions of an open dataset.
Result<std::vector<hsize_t>> H5DatasetDims(hid_t dataset, const std::string& path);
// Whether the storage of a compact or contiguous `dataset` holds all its
// elements: a crafted layout message may declare less than the dataspace
// needs, and libhdf5 1.10.8 then copies past the end of its compact buffer.
// Chunked ones: CheckChunksDecodeToFullSize (h5_chunk_check.h).
// With `count` > 0, only what elements [first, first + count) of a 1-D
// dataset need.
Status CheckStorageHoldsElements(hid_t dataset, const std::string& what, std::uint64_t first = 0,
                                 std::uint64_t count = 0);
// Reads the whole dataset into `out`, converting to `mem_type` (checking the
// types and CheckStorageHoldsElements first). A 1-D chunked dataset is
// decoded by tstat (h5_chunk_read.h): `out` must be zero-filled.
Status ReadH5Dataset(hid_t dataset, hid_t mem_type, void* out, const std::string& path);
// Frees the variable-length parts HDF5 allocated while reading `n` elements
// of `mem_type` into `buffer`.
void ReclaimVlen(hid_t mem_type, std::size_t n, void* buffer);

template <class Row>
Status WriteTable(hid_t loc, const char* name, hid_t mem_type, const std::vector<Row>& rows,
                  int compression_level, const std::string& path,
                  ChunkDeflater* deflater = nullptr) {
  if (rows.empty()) return Status::OK();
  TSTAT_ASSIGN_OR_RETURN(H5Type file_type, PackedCopy(mem_type));
  return WriteNewDataset(loc, name, file_type.get(), mem_type, {rows.size()}, rows.data(),
                         compression_level, path, deflater);
}

// Reads a 1-D dataset `name` (absent: nothing is read) into the buffer
// `rows_for(count)` returns for its `count` rows of `row_size` bytes, zeroed
// (as a resized vector is: members the file lacks read as zero). Rows holding
// variable-length members must be released with ReclaimVlen afterwards.
Status ReadTableInto(hid_t loc, const char* name, hid_t mem_type, std::size_t row_size,
                     const std::function<void*(std::size_t count)>& rows_for,
                     const std::string& path);

// Rows [begin, begin + count) of the 1-D dataset `name` into the buffer
// `rows_for(count)` returns (zeroed), asked for once the range is known to
// lie in the dataset: the chunks that hold them alone when it is chunked.
// kCorruption naming `path` when the dataset is absent or holds fewer rows,
// or as ReadTableInto.
Status ReadTableRange(hid_t loc, const char* name, hid_t mem_type, std::size_t row_size,
                      std::uint64_t begin, std::uint64_t count,
                      const std::function<void*(std::size_t count)>& rows_for,
                      const std::string& path);

template <class Row>
Status ReadTable(hid_t loc, const char* name, hid_t mem_type, std::vector<Row>* rows,
                 const std::string& path) {
  static_assert(std::is_trivially_copyable_v<Row>, "rows are read as bytes");
  rows->clear();
  return ReadTableInto(
      loc, name, mem_type, sizeof(Row),
      [rows](std::size_t count) -> void* {
        rows->resize(count);
        return rows->data();
      },
      path);
}

}  // namespace tstat::io
