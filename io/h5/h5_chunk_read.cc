// See h5_chunk_read.h.
#include "io/h5/h5_chunk_read.h"

#include <libdeflate.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "io/codec/chunk_deflate.h"
#include "io/h5/h5_chunk_check.h"
#include "io/h5/h5_error.h"
#include "io/h5/h5_row_copy.h"
#include "io/h5/h5_type.h"

namespace tstat::io {
namespace {

struct DecompressorDeleter {
  void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
};

}  // namespace

bool IsChunked1D(hid_t dataset) {
  H5Plist dcpl(H5Dget_create_plist(dataset));
  H5Space space(H5Dget_space(dataset));
  const bool yes = dcpl.valid() && space.valid() && H5Pget_layout(dcpl.get()) == H5D_CHUNKED &&
                   H5Sget_simple_extent_ndims(space.get()) == 1;
  TakeH5ErrorStack();
  return yes;
}

Status ReadChunkedDataset(hid_t dataset, hid_t mem_type, std::uint64_t count, void* out,
                          const std::string& what) {
  return ReadChunkedDatasetRange(dataset, mem_type, 0, count, out, what);
}

Status ReadChunkedDatasetRange(hid_t dataset, hid_t mem_type, std::uint64_t begin,
                               std::uint64_t count, void* out, const std::string& what) {
  TSTAT_ASSIGN_OR_RETURN(const ChunkFilters f, InspectChunks(dataset, what));
  if (f.chunk.size() != 1) return Status::Internal(what + ": not a 1-D chunked dataset");
  if (count == 0) return Status::OK();
  H5Type stored(H5Dget_type(dataset));
  if (!stored.valid()) return H5Failure(StatusCode::kCorruption, what + ": its type");
  const std::size_t file_size = f.element_bytes;
  const std::size_t mem_size = H5Tget_size(mem_type);
  const hsize_t per_chunk = f.chunk[0];
  std::unique_ptr<libdeflate_decompressor, DecompressorDeleter> inflater(
      libdeflate_alloc_decompressor());
  if (!inflater) return Status::ResourceExhausted(what + ": no decompressor");
  std::vector<unsigned char> raw, decoded, rows;
  // Rows whose values need no conversion are copied member by member;
  // otherwise H5Tconvert converts in place: room for the larger of the types.
  const std::optional<RowCopyPlan> copy = RowCopyPlan::Build(stored.get(), mem_type);
  std::vector<unsigned char> convert;
  if (!copy) convert.resize(static_cast<std::size_t>(per_chunk) * std::max(file_size, mem_size));
  auto* dst = static_cast<unsigned char*>(out);
  const std::uint64_t end = begin + count;
  for (std::uint64_t first = begin / per_chunk * per_chunk; first < end; first += per_chunk) {
    const hsize_t offset[1] = {first};
    const std::string which = what + ": chunk at element " + std::to_string(first);
    bool shuffled = false;
    TSTAT_ASSIGN_OR_RETURN(const bool written, DecodeChunk(dataset, f, offset, inflater.get(), &raw,
                                                           &decoded, &shuffled, which));
    if (!written) continue;  // read as zeros
    // This chunk's part of the range: elements [a, a + n).
    const std::uint64_t a = std::max(first, begin);
    const std::uint64_t n = std::min<std::uint64_t>(first + per_chunk, end) - a;
    const unsigned char* packed = decoded.data();
    if (shuffled) {
      rows.resize(decoded.size());
      UnshuffleBytes(decoded.data(), decoded.size(), file_size, rows.data());
      packed = rows.data();
    }
    packed += static_cast<std::size_t>(a - first) * file_size;
    // The caller's zeroed rows are the background: members the stored type
    // lacks stay zero.
    unsigned char* slice = dst + static_cast<std::size_t>(a - begin) * mem_size;
    if (copy) {
      copy->Apply(packed, static_cast<std::size_t>(n), slice);
      continue;
    }
    std::memcpy(convert.data(), packed, static_cast<std::size_t>(n) * file_size);
    if (H5Tconvert(stored.get(), mem_type, static_cast<std::size_t>(n), convert.data(), slice,
                   H5P_DEFAULT) < 0) {
      return H5Failure(StatusCode::kCorruption, which + ": converting its rows");
    }
    std::memcpy(slice, convert.data(), static_cast<std::size_t>(n) * mem_size);
  }
  return Status::OK();
}

}  // namespace tstat::io
