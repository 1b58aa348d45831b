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

Status CheckChunksDecodeToFullSize(hid_t dataset, const std::string& what, std::uint64_t first,
                                   std::uint64_t count) {
  H5Plist dcpl(H5Dget_create_plist(dataset));
  if (!dcpl.valid()) return H5Failure(StatusCode::kCorruption, what + ": creation properties");
  if (H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return Status::OK();
  const int rank = H5Pget_chunk(dcpl.get(), 0, nullptr);
  if (rank < 1 || rank > kMaxRank) {
    return H5Failure(StatusCode::kCorruption, what + ": chunks of rank " + std::to_string(rank));
  }
  std::vector<hsize_t> chunk(static_cast<std::size_t>(rank));
  H5Pget_chunk(dcpl.get(), rank, chunk.data());
  H5Type stored(H5Dget_type(dataset));
  std::uint64_t chunk_bytes = stored.valid() ? H5Tget_size(stored.get()) : 0;
  for (hsize_t c : chunk) {
    if (c == 0 || chunk_bytes == 0 || c > kMaxChunkBytes / chunk_bytes) {
      TakeH5ErrorStack();
      return Status::Corruption(what + ": chunks of more than " + std::to_string(kMaxChunkBytes) +
                                " bytes");
    }
    chunk_bytes *= c;
  }
  // The filters, in pipeline order: [shuffle] [deflate], nothing else.
  bool deflate = false;
  const int filters = H5Pget_nfilters(dcpl.get());
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0;
    std::size_t cd_count = 0;
    const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &cd_count,
                                           nullptr, 0, nullptr, nullptr);
    const bool ok = (id == H5Z_FILTER_SHUFFLE && i == 0 && !deflate) ||
                    (id == H5Z_FILTER_DEFLATE && i == filters - 1);
    if (!ok) {
      TakeH5ErrorStack();
      return Status::Corruption(what + ": filter " + std::to_string(id) + " at position " +
                                std::to_string(i) + " (segments use shuffle and deflate only)");
    }
    if (id == H5Z_FILTER_DEFLATE) deflate = true;
  }
  const unsigned deflate_bit = deflate ? 1u << (filters - 1) : 0;

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
  std::unique_ptr<libdeflate_decompressor, DecompressorDeleter> inflater(
      libdeflate_alloc_decompressor());
  if (!inflater) return Status::ResourceExhausted(what + ": no decompressor");
  std::vector<unsigned char> raw, decoded;
  std::vector<hsize_t> index = lo, offset(dims.size());
  for (bool more = true; more;) {
    for (std::size_t d = 0; d < dims.size(); ++d) offset[d] = index[d] * chunk[d];
    // The next grid position (the last dimension fastest).
    more = false;
    for (std::size_t d = dims.size(); d-- > 0;) {
      if (++index[d] < hi[d]) {
        more = true;
        break;
      }
      index[d] = lo[d];
    }
    unsigned mask = 0;
    haddr_t address = HADDR_UNDEF;
    hsize_t size = 0;
    if (H5Dget_chunk_info_by_coord(dataset, offset.data(), &mask, &address, &size) < 0) {
      return H5Failure(StatusCode::kCorruption,
                       what + ": chunk at element " + std::to_string(offset[0]));
    }
    if (address == HADDR_UNDEF) continue;  // never written: HDF5 reads the fill value
    const std::string which = what + ": chunk at element " + std::to_string(offset[0]);
    const bool inflated = deflate && (mask & deflate_bit) == 0;
    if (!inflated) {
      // Stored as it is read (shuffle keeps the size).
      if (size != chunk_bytes) {
        return Status::Corruption(which + " stores " + std::to_string(size) + " bytes, not " +
                                  std::to_string(chunk_bytes));
      }
      continue;
    }
    if (size == 0 || size > chunk_bytes + chunk_bytes / 8 + 1024) {
      return Status::Corruption(which + ": " + std::to_string(size) +
                                " compressed bytes for a chunk of " + std::to_string(chunk_bytes));
    }
    raw.resize(size);
    std::uint32_t read_mask = 0;
    if (H5Dread_chunk(dataset, H5P_DEFAULT, offset.data(), &read_mask, raw.data()) < 0) {
      return H5Failure(StatusCode::kCorruption, which + ": read failed");
    }
    decoded.resize(chunk_bytes);
    std::size_t produced = 0;
    const libdeflate_result r = libdeflate_zlib_decompress(
        inflater.get(), raw.data(), raw.size(), decoded.data(), decoded.size(), &produced);
    if (r != LIBDEFLATE_SUCCESS || produced != chunk_bytes) {
      return Status::Corruption(which + (r == LIBDEFLATE_SUCCESS
                                             ? " inflates to " + std::to_string(produced) +
                                                   " bytes, not " + std::to_string(chunk_bytes)
                                             : std::string(" is not a valid deflate stream")));
    }
  }
  return Status::OK();
}

}  // namespace tstat::io
