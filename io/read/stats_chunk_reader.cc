// See stats_chunk_reader.h.
#include "io/read/stats_chunk_reader.h"

#include <libdeflate.h>

#include <algorithm>

#include "io/codec/chunk_deflate.h"
#include "io/h5/h5_lock.h"
#include "io/h5/h5_type.h"
#include "io/h5/posix_file.h"

namespace tstat::io {
Result<std::unique_ptr<StatsChunkReader>> StatsChunkReader::Make() {
  std::optional<RowCopyPlan> plan;
  std::size_t row_bytes = 0;
  {
    H5Lock lock;
    TSTAT_ASSIGN_OR_RETURN(H5Type mem_type, StatsRowType());
    TSTAT_ASSIGN_OR_RETURN(H5Type stored, PackedCopy(mem_type.get()));
    row_bytes = H5Tget_size(stored.get());
    plan = RowCopyPlan::Build(stored.get(), mem_type.get());
  }
  if (!plan) return Status::Internal("stats rows cannot be read by copying bytes");
  libdeflate_decompressor* inflater = libdeflate_alloc_decompressor();
  if (inflater == nullptr) return Status::ResourceExhausted("no decompressor");
  return std::unique_ptr<StatsChunkReader>(
      new StatsChunkReader(std::move(*plan), row_bytes, inflater));
}

StatsChunkReader::~StatsChunkReader() { libdeflate_free_decompressor(inflater_); }

Status StatsChunkReader::ReadTensorRows(const std::string& path, std::uint64_t file_bytes,
                                        const StatsLayout& layout, std::uint32_t id,
                                        std::vector<StatsRow>* out) {
  // The last range that starts at or before `id`.
  auto range =
      std::upper_bound(layout.tensors.begin(), layout.tensors.end(), id,
                       [](std::uint32_t v, const StatsTensorRange& t) { return v < t.tensor_id; });
  if (range == layout.tensors.begin()) return Status::OK();
  --range;
  if (id - range->tensor_id >= range->count || range->rows == 0) return Status::OK();
  auto bad = [&](const std::string& what) { return Status::Corruption(path + ": stats " + what); };
  if (layout.row_bytes != row_bytes_) {
    return bad("rows of " + std::to_string(layout.row_bytes) + " bytes in the catalog, not " +
               std::to_string(row_bytes_));
  }
  // The catalog's checks (segment_catalog.cc) hold: chunks tile the rows and
  // lie in the file, the range lies in the rows.
  std::uint64_t size = 0;
  Result<UniqueFd> opened = OpenRegularFile(path, &size);
  if (!opened.ok()) {
    // Not a regular file any more: not the file the catalog describes.
    if (opened.status().code() == StatusCode::kInvalidArgument) {
      return Status::Corruption(opened.status().message());
    }
    return opened.status();
  }
  const UniqueFd fd = std::move(opened).value();
  if (size != file_bytes) {
    return Status::Corruption(path + ": not the file of " + std::to_string(file_bytes) +
                              " bytes the worker catalog describes");
  }
  const std::uint64_t first = range->first_row + std::uint64_t{id - range->tensor_id} * range->rows;
  const std::uint64_t end = first + range->rows;
  const std::size_t chunk_bytes = std::size_t{layout.chunk_rows} * row_bytes_;
  const std::size_t before = out->size();
  for (std::uint64_t k = first / layout.chunk_rows; k * layout.chunk_rows < end; ++k) {
    const StatsChunk& c = layout.chunks[static_cast<std::size_t>(k)];
    const std::string which = "chunk " + std::to_string(k);
    stored_.resize(c.stored_bytes);
    TSTAT_ASSIGN_OR_RETURN(std::size_t read,
                           PreadUpTo(fd.get(), stored_.data(), stored_.size(), c.offset, path));
    if (read != stored_.size()) return bad(which + " past the end of the file");
    if (static_cast<std::uint32_t>(libdeflate_crc32(0, stored_.data(), stored_.size())) !=
        c.crc32) {
      return bad(which + " fails its CRC (damaged since it was written)");
    }
    inflated_.resize(chunk_bytes);
    std::size_t produced = 0;
    if (libdeflate_zlib_decompress(inflater_, stored_.data(), stored_.size(), inflated_.data(),
                                   chunk_bytes, &produced) != LIBDEFLATE_SUCCESS ||
        produced != chunk_bytes) {
      return bad(which + " does not inflate to its " + std::to_string(chunk_bytes) + " bytes");
    }
    rows_.resize(chunk_bytes);
    UnshuffleBytes(inflated_.data(), chunk_bytes, row_bytes_, rows_.data());
    const std::uint64_t chunk_first = k * layout.chunk_rows;
    const std::uint64_t a = std::max(first, chunk_first);
    const std::uint64_t b = std::min(end, chunk_first + layout.chunk_rows);
    // Grown a chunk at a time: the memory follows the rows decoded, not what
    // a (crafted) range claims.
    out->resize(before + static_cast<std::size_t>(b - first));
    plan_.Apply(rows_.data() + (a - chunk_first) * row_bytes_, static_cast<std::size_t>(b - a),
                reinterpret_cast<unsigned char*>(out->data() + before + (a - first)));
  }
  for (std::size_t i = before; i < out->size(); ++i) {
    const StatsRow& r = (*out)[i];
    if (r.tensor_id != id || !IsStoredMode(r.mode)) {
      return bad("row of tensor " + std::to_string(r.tensor_id) + ", mode " +
                 std::to_string(r.mode) + " in the range of tensor " + std::to_string(id));
    }
  }
  return Status::OK();
}

}  // namespace tstat::io
