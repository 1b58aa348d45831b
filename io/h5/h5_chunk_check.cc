// See h5_chunk_check.h.
#include "io/h5/h5_chunk_check.h"

#include <libdeflate.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "io/h5/h5_error.h"

namespace tstat::io {
namespace {

// tstat writes chunks of about 1 MiB; anything far larger is not ours.
constexpr std::uint64_t kMaxChunkBytes = std::uint64_t{64} << 20;
constexpr int kMaxRank = 32;

struct DecompressorDeleter {
  void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
};

}  // namespace

Result<ChunkFilters> InspectChunks(hid_t dataset, const std::string& what) {
  ChunkFilters f;
  H5Plist dcpl(H5Dget_create_plist(dataset));
  if (!dcpl.valid()) return H5Failure(StatusCode::kCorruption, what + ": creation properties");
  if (H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return f;
  const int rank = H5Pget_chunk(dcpl.get(), 0, nullptr);
  if (rank < 1 || rank > kMaxRank) {
    return H5Failure(StatusCode::kCorruption, what + ": chunks of rank " + std::to_string(rank));
  }
  f.chunk.resize(static_cast<std::size_t>(rank));
  H5Pget_chunk(dcpl.get(), rank, f.chunk.data());
  H5Type stored(H5Dget_type(dataset));
  f.element_bytes = stored.valid() ? H5Tget_size(stored.get()) : 0;
  std::uint64_t chunk_bytes = f.element_bytes;
  for (hsize_t c : f.chunk) {
    if (c == 0 || chunk_bytes == 0 || c > kMaxChunkBytes / chunk_bytes) {
      TakeH5ErrorStack();
      return Status::Corruption(what + ": chunks of more than " + std::to_string(kMaxChunkBytes) +
                                " bytes");
    }
    chunk_bytes *= c;
  }
  f.chunk_bytes = chunk_bytes;
  // The filters, in pipeline order: [shuffle] [deflate], nothing else.
  const int filters = H5Pget_nfilters(dcpl.get());
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0;
    std::size_t cd_count = 0;
    const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &cd_count,
                                           nullptr, 0, nullptr, nullptr);
    const bool ok = (id == H5Z_FILTER_SHUFFLE && i == 0 && !f.deflate) ||
                    (id == H5Z_FILTER_DEFLATE && i == filters - 1);
    if (!ok) {
      TakeH5ErrorStack();
      return Status::Corruption(what + ": filter " + std::to_string(id) + " at position " +
                                std::to_string(i) + " (segments use shuffle and deflate only)");
    }
    if (id == H5Z_FILTER_SHUFFLE) {
      f.shuffle = true;
      f.shuffle_bit = 1u << i;
    } else {
      f.deflate = true;
      f.deflate_bit = 1u << i;
    }
  }
  return f;
}

Result<bool> DecodeChunk(hid_t dataset, const ChunkFilters& f, const hsize_t* offset,
                         libdeflate_decompressor* inflater, std::vector<unsigned char>* raw,
                         std::vector<unsigned char>* decoded, bool* shuffled,
                         const std::string& which) {
  unsigned mask = 0;
  haddr_t address = HADDR_UNDEF;
  hsize_t size = 0;
  if (H5Dget_chunk_info_by_coord(dataset, offset, &mask, &address, &size) < 0) {
    return H5Failure(StatusCode::kCorruption, which);
  }
  if (address == HADDR_UNDEF) return false;  // never written: HDF5 reads the fill value
  const bool inflated = f.deflate && (mask & f.deflate_bit) == 0;
  *shuffled = f.shuffle && (mask & f.shuffle_bit) == 0;
  if (!inflated) {
    // Stored as it is read (shuffle keeps the size).
    if (size != f.chunk_bytes) {
      return Status::Corruption(which + " stores " + std::to_string(size) + " bytes, not " +
                                std::to_string(f.chunk_bytes));
    }
  } else if (size == 0 || size > f.chunk_bytes + f.chunk_bytes / 8 + 1024) {
    return Status::Corruption(which + ": " + std::to_string(size) +
                              " compressed bytes for a chunk of " + std::to_string(f.chunk_bytes));
  }
  raw->resize(size);
  std::uint32_t read_mask = 0;
  if (H5Dread_chunk(dataset, H5P_DEFAULT, offset, &read_mask, raw->data()) < 0) {
    return H5Failure(StatusCode::kCorruption, which + ": read failed");
  }
  if (!inflated) {
    decoded->swap(*raw);
    return true;
  }
  decoded->resize(f.chunk_bytes);
  std::size_t produced = 0;
  const libdeflate_result r = libdeflate_zlib_decompress(
      inflater, raw->data(), raw->size(), decoded->data(), decoded->size(), &produced);
  if (r != LIBDEFLATE_SUCCESS || produced != f.chunk_bytes) {
    return Status::Corruption(which + (r == LIBDEFLATE_SUCCESS
                                           ? " inflates to " + std::to_string(produced) +
                                                 " bytes, not " + std::to_string(f.chunk_bytes)
                                           : std::string(" is not a valid deflate stream")));
  }
  return true;
}

namespace {

// Calls visit(offset) for every chunk position of the grid over the
// dataset's dimensions (of a 1-D dataset with count > 0: only those holding
// elements [first, first + count)), the last dimension fastest.
template <class Visit>
Status ForEachChunk(hid_t dataset, const ChunkFilters& f, const std::string& what,
                    std::uint64_t first, std::uint64_t count, Visit visit) {
  const std::vector<hsize_t>& chunk = f.chunk;
  const int rank = static_cast<int>(chunk.size());
  // Chunks are looked up by coordinates over the grid that covers the
  // dimensions (each lookup is a search of the chunk index; listing them by
  // number would rescan the index for every one). The callers checked the
  // element count against the file first, which bounds the grid.
  H5Space space(H5Dget_space(dataset));
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (!space.valid() || H5Sget_simple_extent_ndims(space.get()) != rank ||
      H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0) {
    return H5Failure(StatusCode::kCorruption, what + ": chunk and dataset ranks differ");
  }
  std::vector<hsize_t> lo(dims.size(), 0), hi(dims.size());  // chunk indices [lo, hi)
  for (std::size_t d = 0; d < dims.size(); ++d) {
    hi[d] = dims[d] / chunk[d] + (dims[d] % chunk[d] != 0);
    if (hi[d] == 0) return Status::OK();  // no elements
  }
  if (count > 0 && rank == 1) {
    lo[0] = first / chunk[0];
    hi[0] = std::min<hsize_t>(hi[0], (first + count - 1) / chunk[0] + 1);
    if (lo[0] >= hi[0]) return Status::OK();
  }
  std::vector<hsize_t> index = lo, offset(dims.size());
  for (bool more = true; more;) {
    for (std::size_t d = 0; d < dims.size(); ++d) offset[d] = index[d] * chunk[d];
    more = false;
    for (std::size_t d = dims.size(); d-- > 0;) {
      if (++index[d] < hi[d]) {
        more = true;
        break;
      }
      index[d] = lo[d];
    }
    TSTAT_RETURN_IF_ERROR(visit(offset.data()));
  }
  return Status::OK();
}

}  // namespace

Status CheckChunksDecodeToFullSize(hid_t dataset, const std::string& what, std::uint64_t first,
                                   std::uint64_t count) {
  TSTAT_ASSIGN_OR_RETURN(const ChunkFilters f, InspectChunks(dataset, what));
  if (f.chunk.empty()) return Status::OK();  // not chunked
  std::unique_ptr<libdeflate_decompressor, DecompressorDeleter> inflater(
      libdeflate_alloc_decompressor());
  if (!inflater) return Status::ResourceExhausted(what + ": no decompressor");
  std::vector<unsigned char> raw, decoded;
  return ForEachChunk(dataset, f, what, first, count, [&](const hsize_t* offset) {
    bool shuffled = false;
    return DecodeChunk(dataset, f, offset, inflater.get(), &raw, &decoded, &shuffled,
                       what + ": chunk at element " + std::to_string(offset[0]))
        .status();
  });
}

Status WalkChunkIndex(hid_t dataset, const std::string& what) {
  TSTAT_ASSIGN_OR_RETURN(const ChunkFilters f, InspectChunks(dataset, what));
  if (f.chunk.empty()) return Status::OK();  // not chunked
  return ForEachChunk(dataset, f, what, 0, 0, [&](const hsize_t* offset) {
    unsigned mask = 0;
    haddr_t address = HADDR_UNDEF;
    hsize_t size = 0;
    if (H5Dget_chunk_info_by_coord(dataset, offset, &mask, &address, &size) < 0) {
      return H5Failure(StatusCode::kCorruption,
                       what + ": chunk at element " + std::to_string(offset[0]));
    }
    return Status::OK();
  });
}

}  // namespace tstat::io
